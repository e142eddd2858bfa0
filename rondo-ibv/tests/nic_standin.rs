//! The NIC half (`rondo_<dev>`, feature `verbs`) on a host without an RDMA device:
//! a stand-in device library (`tests/c/standin.c`), preloaded after the drop-in,
//! is what the drop-in takes for the real libibverbs. It lists one device,
//! `standin0`, answers a NIC's queries and has no data path. Checked: the device
//! list (`rondo0`, `rondo_standin0`, `standin0`), `rondo_standin0`'s attributes
//! (the real device's identity, port, MTU, link layer and GID table; Rondo's
//! capabilities; the set-up listener as LID), `standin0` passed through untouched,
//! and a program on `rondo_standin0` failing with the reason when the data path
//! cannot open (no crash). Nothing here moves a byte over a NIC:
//! `tests/nic_device.rs` does, where there is one.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// The stand-in library, built once into a scratch directory (`None`, said why,
/// when the C toolchain or verbs.h is missing).
fn standin() -> Option<PathBuf> {
    if !std::path::Path::new("/usr/include/infiniband/verbs.h").exists() || !have("ibv_devinfo") {
        assert!(
            std::env::var("RONDO_IBV_REQUIRE_PROGRAMS").as_deref() != Ok("1"),
            "no verbs.h or ibv_devinfo (apt-get install libibverbs-dev ibverbs-utils)"
        );
        eprintln!("skipped: no verbs.h or ibv_devinfo");
        return None;
    }
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    Some(
        LIB.get_or_init(|| {
            let map = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/standin.map");
            build_c(
                "standin",
                "libstandin.so",
                &["-shared", "-fPIC", &format!("-Wl,--version-script={map}")],
            )
        })
        .clone(),
    )
}

/// Runs `prog` with the drop-in and the stand-in preloaded; its exit code and
/// output.
fn run_over(lib: &Path, prog: &str, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut c = preloaded(prog, args, env);
    c.env(
        "LD_PRELOAD",
        format!("{} {}", library().display(), lib.display()),
    );
    let out = c.output().expect(prog);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn rondo_devices_come_first_and_the_real_one_passes_through() {
    let Some(lib) = standin() else { return };
    let (code, text) = run_over(&lib, "ibv_devices", &[], &[]);
    assert_eq!(code, Some(0), "{text}");
    let names: Vec<&str> = text
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["rondo0", "rondo_standin0", "standin0"], "{text}");
    assert!(
        text.contains("rondo_standin0  \t0202c90300abcdef"),
        "{text}"
    );
    assert!(
        text.contains("standin0        \t0002c90300abcdef"),
        "{text}"
    );
    // The real device as the real library answers for it.
    let (code, text) = run_over(&lib, "ibv_devinfo", &["-v", "-d", "standin0"], &[]);
    assert_eq!(code, Some(0), "{text}");
    for want in ["hca_id:\tstandin0", "max_qp_wr:\t\t\t16384", "ATOMIC_HCA"] {
        assert!(text.contains(want), "missing {want:?}:\n{text}");
    }
}

#[test]
fn a_rondo_device_has_the_real_ports_and_gids_and_rondos_capabilities() {
    let Some(lib) = standin() else { return };
    let (code, text) = run_over(&lib, "ibv_devinfo", &["-v", "-d", "rondo_standin0"], &[]);
    assert_eq!(code, Some(0), "{text}");
    for want in [
        "hca_id:\trondo_standin0",
        // The real device's identity, its GUID marked locally administered.
        "fw_ver:\t\t\t\t28.39.1002",
        "node_guid:\t\t\t0202:c903:00ab:cdef",
        "vendor_id:\t\t\t0x02c9",
        "vendor_part_id:\t\t\t4129",
        // Rondo's capabilities.
        "max_qp_wr:\t\t\t32768",
        "atomic_cap:\t\t\tATOMIC_NONE (0)",
        "max_srq:\t\t\t0",
        // The real port.
        "PORT_ACTIVE (4)",
        "active_mtu:\t\t1024 (3)",
        "link_layer:\t\tEthernet",
        "GID[  1]:\t\tfe80::1, RoCE v2",
        "GID[  3]:\t\t::ffff:127.0.0.1, RoCE v2",
    ] {
        assert!(text.contains(want), "missing {want:?}:\n{text}");
    }
    // The LID is the set-up listener's port, not the real port's 0.
    let lid: u32 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("port_lid:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a port_lid line");
    assert!(lid > 0, "{text}");
    // RONDO_IBV_VENDOR still overrides the vendor.
    let (_, text) = run_over(
        &lib,
        "ibv_devinfo",
        &["-d", "rondo_standin0"],
        &[("RONDO_IBV_VENDOR", "rondo")],
    );
    assert!(text.contains("vendor_id:\t\t\t0x0000"), "{text}");
}

#[test]
fn a_program_on_a_rondo_device_without_a_data_path_fails_with_the_reason() {
    let Some(lib) = standin() else { return };
    if !have("ibv_rc_pingpong") {
        return;
    }
    let port = free_port().to_string();
    let args = ["-d", "rondo_standin0", "-g", "3", "-p", port.as_str()];
    let (code, text) = run_over(&lib, "ibv_rc_pingpong", &args, &[]);
    assert_eq!(code, Some(1), "{text}");
    for want in [
        "rondo-ibv: cannot open rondo_standin0: opening Rondo over standin0 port 1 GID 3",
        "Couldn't allocate PD",
    ] {
        assert!(text.contains(want), "missing {want:?}:\n{text}");
    }
    // A port or GID the device does not have is named.
    let (code, text) = run_over(&lib, "ibv_rc_pingpong", &args, &[("RONDO_IBV_PORT", "2")]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("port 2 of standin0 is not an active port"),
        "{text}"
    );
    let (code, text) = run_over(
        &lib,
        "ibv_rc_pingpong",
        &args,
        &[("RONDO_IBV_GID_INDEX", "9")],
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("port 1 of standin0 has no GID 9"), "{text}");
}
