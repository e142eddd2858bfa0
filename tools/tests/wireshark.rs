//! The Wireshark dissector (`tools/wireshark/rondo.lua`) against a capture made
//! here: datagrams emitted by the engine's wire code (`rondo_proto::wire`) are sent
//! over loopback UDP while `tshark` captures them, and `tshark` with the dissector
//! must read every field back. Without `tshark` the test says so and passes (CI
//! installs it: `.ci/run`); where capturing is not permitted it writes the capture
//! file itself from the same datagrams.

use rondo_proto::wire::{
    Body, CommonRepr, DataRepr, FeedbackRepr, Flags, NakReason, ProbeRepr, Repr,
};
use rondo_proto::Psn;
use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn common(psn: u32, path: u16) -> CommonRepr {
    CommonRepr {
        flow: 0x1234,
        psn: Psn(psn),
        path,
        flags: Flags::empty(),
        timestamp_ns: 1_000_000 + u64::from(psn),
    }
}

fn feedback(acked: u32) -> FeedbackRepr {
    FeedbackRepr {
        acked_psn: Psn(acked),
        cum_ack: Psn(acked + 1),
        highest_psn: Psn(acked + 2),
        acked_path: 3,
        of_probe: false,
        duplicate: false,
        echo_timestamp_ns: 77,
        rx_timestamp_ns: 88,
    }
}

/// The datagrams, and what tshark must print for each:
/// type, path, flow, psn, msg_id, offset, cum_ack, nak_reason, token.
fn datagrams() -> Vec<(Vec<u8>, String)> {
    let token = Some(0x0102_0304_0506_0708);
    let data = Repr {
        common: common(7, 1),
        body: Body::Data(DataRepr {
            msg_id: 42,
            msg_len: 300,
            offset: 100,
            payload_len: 100,
        }),
    };
    let probe = Repr {
        common: common(9, 2),
        body: Body::Probe(ProbeRepr { pad_len: 64 }),
    };
    let ack = Repr {
        common: common(0, 3),
        body: Body::Ack(feedback(7)),
    };
    let nak = Repr {
        common: common(0, 0),
        body: Body::Nak(feedback(8), NakReason::BufferFull),
    };
    vec![
        (
            data.to_datagram(&[0xab; 100], token).unwrap(),
            "1,1,0x00001234,7,42,100,,,0x0102030405060708".into(),
        ),
        (
            probe.to_datagram(&[], None).unwrap(),
            "2,2,0x00001234,9,,,,,".into(),
        ),
        (
            ack.to_datagram(&[], token).unwrap(),
            "3,3,0x00001234,0,,,8,0,0x0102030405060708".into(),
        ),
        (
            nak.to_datagram(&[], None).unwrap(),
            "4,0,0x00001234,0,,,9,1,".into(),
        ),
    ]
}

fn tshark() -> Option<PathBuf> {
    let ok = Command::new("tshark")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match ok {
        Ok(s) if s.success() => Some(PathBuf::from("tshark")),
        _ => None,
    }
}

/// Captures the datagrams sent from port `src` to `dst` on loopback; `None` when
/// tshark may not capture here.
fn capture(file: &Path, grams: &[(Vec<u8>, String)]) -> Option<()> {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    let mut child = Command::new("tshark")
        .args(["-i", "lo", "-f", &format!("udp and dst port {port}"), "-w"])
        .arg(file)
        .args(["-c", &grams.len().to_string(), "-a", "duration:20"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    // Wait for "Capturing on ..." before sending.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let start = Instant::now();
    let mut line = String::new();
    loop {
        line.clear();
        if err.read_line(&mut line).ok()? == 0 || start.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        if line.contains("Capturing on") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    for (d, _) in grams {
        tx.send_to(d, ("127.0.0.1", port)).unwrap();
    }
    let status = child.wait().ok()?;
    status.success().then_some(())
}

/// Writes a libpcap file (raw IPv4) holding the datagrams, from port 4792 to 4793.
fn write_pcap(file: &Path, grams: &[(Vec<u8>, String)]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65_535u32.to_le_bytes());
    out.extend_from_slice(&228u32.to_le_bytes()); // LINKTYPE_IPV4
    for (k, (d, _)) in grams.iter().enumerate() {
        let len = 20 + 8 + d.len();
        let mut ip = vec![
            0x45,
            0,
            (len >> 8) as u8,
            len as u8,
            0,
            0,
            0x40,
            0,
            64,
            17,
            0,
            0,
            127,
            0,
            0,
            1,
            127,
            0,
            0,
            1,
        ];
        let sum = ip
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum::<u32>();
        let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        let udp_len = (8 + d.len()) as u16;
        ip.extend_from_slice(&4792u16.to_be_bytes());
        ip.extend_from_slice(&4793u16.to_be_bytes());
        ip.extend_from_slice(&udp_len.to_be_bytes());
        ip.extend_from_slice(&[0, 0]);
        ip.extend_from_slice(d);
        out.extend_from_slice(&(k as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        out.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        out.extend_from_slice(&ip);
    }
    std::fs::File::create(file)
        .unwrap()
        .write_all(&out)
        .unwrap();
}

#[test]
fn tshark_reads_every_field_of_a_capture() {
    if tshark().is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but tshark is missing: .ci/run installs it"
        );
        eprintln!("skipped: tshark is not installed (Debian package tshark; .ci/run installs it)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("rondo-wireshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rondo.pcap");
    let grams = datagrams();
    if capture(&file, &grams).is_none() {
        eprintln!("capturing on lo is not permitted here: the test writes the capture file itself");
        write_pcap(&file, &grams);
    }
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("wireshark/rondo.lua");
    let out = Command::new("tshark")
        .arg("-X")
        .arg(format!("lua_script:{}", lua.display()))
        .arg("-r")
        .arg(&file)
        .args(["-Y", "rondo", "-T", "fields", "-E", "separator=,"])
        .args([
            "-e",
            "rondo.type",
            "-e",
            "rondo.path",
            "-e",
            "rondo.flow",
            "-e",
            "rondo.psn",
        ])
        .args([
            "-e",
            "rondo.msg_id",
            "-e",
            "rondo.offset",
            "-e",
            "rondo.cum_ack",
        ])
        .args(["-e", "rondo.nak_reason", "-e", "rondo.token"])
        .output()
        .expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark failed: {stderr}");
    assert!(!stderr.contains("Lua: Error"), "{stderr}");
    let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    let want: Vec<String> = grams.iter().map(|g| g.1.clone()).collect();
    assert_eq!(got, want, "tshark stderr: {stderr}");
    let _ = std::fs::remove_dir_all(dir);
}
