//! The NIC half on a real RDMA device: `rondo_<dev>` in the device list beside
//! `<dev>`; our C program (`tests/c/transfer.c`: every operation, every byte
//! checked, solicited events, CQ overrun and async events) over `rondo_<dev>`
//! in one process, looped through the NIC; and the A/B of issue 14, unmodified
//! `ib_write_bw` over `-d <dev>` (the NIC's RC, passed through) and over
//! `-d rondo_<dev>` (Rondo over its UD QPs) under the same preload, both ends on
//! this host. The device is the first with an active port and a RoCE v2 or IB
//! GID (or `RONDO_VERBS_DEVICE`), found as `rondo-verbs`' device test finds it.
//!
//! A custom harness (`harness = false`): on a host without a device it prints one
//! line saying the test was skipped and why, and reports it as ignored, never as
//! passed.

mod common;
use common::*;
use rondo_ud::verbs::inventory::inventory;
use std::time::Duration;

/// A device to test on: its name, port, GID index and the IPv4 address of that
/// GID (if any).
struct Nic {
    name: String,
    port: u8,
    gid_index: u32,
    ip: Option<std::net::IpAddr>,
}

fn device() -> Result<Nic, String> {
    let devices = inventory().map_err(|e| format!("no RDMA device ({e})"))?;
    if devices.is_empty() {
        return Err("no RDMA device (ibverbs' device list is empty); run `rondo doctor` on a host with a NIC".into());
    }
    let wanted = std::env::var("RONDO_VERBS_DEVICE").ok();
    for dev in devices
        .iter()
        .filter(|d| wanted.as_ref().is_none_or(|w| w == &d.name))
    {
        for port in dev.ports.iter().filter(|p| p.active) {
            // The drop-in's own rule (RoCE v2 with IPv4, RoCE v2, IB).
            let gids = port.gids.iter().map(|g| (g.index, g.kind.raw(), g.gid));
            let best = rondo_verbs::pick_gid_index(gids, None)
                .and_then(|i| port.gids.iter().find(|g| g.index == u32::from(i)));
            if let Some(g) = best {
                return Ok(Nic {
                    name: dev.name.clone(),
                    port: port.port,
                    gid_index: g.index,
                    ip: g.ip().is_ipv4().then(|| g.ip()),
                });
            }
        }
    }
    Err(format!(
        "{} RDMA device(s) but no active port with a RoCE v2 or IB GID",
        devices.len()
    ))
}

/// The environment both ends run with: the port and GID the UD QP uses, and the
/// set-up listener on the GID's address (IB: loopback, the peer's fallback).
fn env(nic: &Nic) -> Vec<(&'static str, String)> {
    let ip = nic.ip.map_or("127.0.0.1".to_string(), |ip| ip.to_string());
    vec![
        ("RONDO_IBV_PORT", nic.port.to_string()),
        ("RONDO_IBV_GID_INDEX", nic.gid_index.to_string()),
        ("RONDO_IBV_IP", ip.clone()),
        ("RONDO_IBV_PEER", ip),
    ]
}

fn lists_both(nic: &Nic) {
    let out = preloaded("ibv_devices", &[], &[])
        .output()
        .expect("ibv_devices");
    let text = String::from_utf8_lossy(&out.stdout);
    let rondo = format!("rondo_{}", nic.name);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        names.contains(&rondo.as_str()) && names.contains(&nic.name.as_str()),
        "{text}"
    );
}

fn transfer_over_rondo(nic: &Nic) {
    let exe = build_c("transfer", "transfer", &["-libverbs"]);
    let env = env(nic);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let rondo = format!("rondo_{}", nic.name);
    let gid = nic.gid_index.to_string();
    let end = run(
        exe.to_str().unwrap(),
        &[&rondo, &gid],
        &env,
        Duration::from_secs(180),
    );
    let text = end.text;
    assert!(end.code == Some(0) && !end.timed_out, "{text}");
    for line in [
        "1048576 B: SEND, WRITE_WITH_IMM, READ ok",
        "solicited-only notification ok",
        "CQ overrun: async events CQ_ERR, QP_FATAL",
        "wrong rkey: remote access error",
    ] {
        assert!(text.contains(line), "missing {line:?}:\n{text}");
    }
}

/// `ib_write_bw -s 65536` over the NIC's RC and over `rondo_<dev>`, both under
/// the preload; the average Gb/s of each.
fn ab_write_bw(nic: &Nic) -> Option<(f64, f64)> {
    if !have("ib_write_bw") {
        return None;
    }
    let env = env(nic);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let gid = nic.gid_index.to_string();
    let port = nic.port.to_string();
    let mut bw = Vec::new();
    for dev in [nic.name.clone(), format!("rondo_{}", nic.name)] {
        let args = [
            "-d",
            dev.as_str(),
            "-i",
            port.as_str(),
            "-x",
            gid.as_str(),
            "-s",
            "65536",
            "-n",
            "5000",
            "--report_gbits",
        ];
        let r = pair("ib_write_bw", &args, "-p", &env, Duration::from_secs(120));
        both_ok(&format!("ib_write_bw -d {dev}"), &r, Some(1));
        bw.push(rows(&r.1.text)[0][3]);
    }
    Some((bw[0], bw[1]))
}

fn main() {
    let nic = match device() {
        Ok(n) => n,
        Err(why) => {
            println!("nic_device: skipped 3 tests: {why}");
            println!("test result: ok. 0 passed; 0 failed; 3 ignored; 0 measured; 0 filtered out");
            return;
        }
    };
    println!(
        "nic_device: device {} port {} gid index {} ({})",
        nic.name,
        nic.port,
        nic.gid_index,
        nic.ip
            .map_or("no IPv4 address: set-up over loopback".into(), |ip| ip
                .to_string())
    );
    lists_both(&nic);
    println!("test lists_rondo_dev_beside_dev ... ok");
    transfer_over_rondo(&nic);
    println!("test transfer_over_rondo_dev ... ok");
    match ab_write_bw(&nic) {
        Some((rc, rondo)) => {
            println!(
                "ib_write_bw -s 65536: {} (RC) {rc:.2} Gb/s, rondo_{} {rondo:.2} Gb/s",
                nic.name, nic.name
            );
            println!("test ab_write_bw ... ok");
            println!("test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
        }
        None => {
            println!("test ab_write_bw ... ignored (perftest is not installed)");
            println!("test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out");
        }
    }
}
