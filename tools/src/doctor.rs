//! `rondo doctor`: what this host has for Rondo's verbs datapath (RDMA devices,
//! ports, GIDs, MTUs, huge pages, the memlock limit) and, in plain words, what is
//! missing and how to fix it. It always exits 0 once it has said its piece.

use serde::Serialize;

/// Arguments of `rondo doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    json: bool,
}

/// Memlock limit below which registering Rondo's buffers can fail (64 MiB).
const MEMLOCK_NEEDED: u64 = 64 << 20;

/// The command to rebuild with the verbs datapath.
pub(crate) const REBUILD: &str = "sudo apt-get install -y cmake libnl-3-dev libnl-route-3-dev libclang-dev libibverbs-dev pkg-config && cargo build --release -p rondo-tools --features verbs";

/// One GID of a port.
#[derive(Debug, Serialize)]
struct Gid {
    index: u32,
    kind: &'static str,
    gid: String,
    ip: String,
    /// How well it suits a Rondo UD QP (`rondo_verbs::gid_rank`, lower first);
    /// `None`: never (empty, RoCE v1, unknown).
    #[serde(skip)]
    rank: Option<u8>,
}

/// One port of a device.
#[derive(Debug, Serialize)]
struct Port {
    port: u8,
    state: &'static str,
    link_layer: &'static str,
    active_mtu: u32,
    max_mtu: u32,
    lid: u16,
    gids: Vec<Gid>,
}

/// One RDMA device.
#[derive(Debug, Serialize)]
struct Device {
    name: String,
    ports: Vec<Port>,
    error: Option<String>,
}

/// Huge pages of the host (`/proc/meminfo`).
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
struct HugePages {
    total: u64,
    free: u64,
    size_kb: u64,
}

/// Something missing, and how to fix it.
#[derive(Debug, Serialize)]
struct Finding {
    problem: String,
    fix: String,
}

/// The whole report.
#[derive(Debug, Serialize)]
struct Report {
    verbs_feature: bool,
    devices: Vec<Device>,
    device_error: Option<String>,
    huge_pages: HugePages,
    /// Soft memlock limit in bytes; `None` when unlimited or unknown.
    memlock_bytes: Option<u64>,
    memlock_unlimited: bool,
    findings: Vec<Finding>,
    /// The device, port and GID index to run on: the first active port's first
    /// RoCE v2 GID with an IPv4 address (else any RoCE v2 GID, else an IB GID).
    suggested: Option<Suggestion>,
    ready: bool,
}

/// Where to run Rondo on this host.
#[derive(Debug, Serialize, PartialEq, Eq)]
struct Suggestion {
    device: String,
    port: u8,
    gid_index: u32,
    ip: String,
}

/// Runs `rondo doctor`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let (devices, device_error) = devices();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let memlock = parse_memlock(&limits);
    let mut report = Report {
        verbs_feature: cfg!(feature = "verbs"),
        devices,
        device_error,
        huge_pages: parse_huge_pages(&meminfo),
        memlock_bytes: memlock.flatten(),
        memlock_unlimited: memlock == Some(None),
        findings: Vec::new(),
        suggested: None,
        ready: false,
    };
    report.findings = diagnose(&report);
    report.suggested = suggest(&report.devices);
    report.ready = report.findings.is_empty();
    let out = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        text(&report)
    };
    // A reader that stops early (`rondo doctor | head`) is not an error.
    match std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

#[cfg(feature = "verbs")]
fn devices() -> (Vec<Device>, Option<String>) {
    use rondo_ud::verbs::inventory::{inventory, LinkLayer};
    match inventory() {
        Ok(list) => (
            list.into_iter()
                .map(|d| Device {
                    name: d.name,
                    error: d.error,
                    ports: d
                        .ports
                        .into_iter()
                        .map(|p| Port {
                            port: p.port,
                            state: p.state,
                            link_layer: match p.link_layer {
                                LinkLayer::InfiniBand => "InfiniBand",
                                LinkLayer::Ethernet => "Ethernet",
                                LinkLayer::Unspecified => "unspecified",
                            },
                            active_mtu: p.active_mtu,
                            max_mtu: p.max_mtu,
                            lid: p.lid,
                            gids: p
                                .gids
                                .iter()
                                .map(|g| Gid {
                                    index: g.index,
                                    kind: g.kind.name(),
                                    gid: std::net::Ipv6Addr::from(g.gid).to_string(),
                                    ip: g.ip().to_string(),
                                    rank: rondo_verbs::gid_rank(g.kind.raw(), &g.gid),
                                })
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    }
}

#[cfg(not(feature = "verbs"))]
fn devices() -> (Vec<Device>, Option<String>) {
    (Vec::new(), None)
}

/// `HugePages_Total`, `HugePages_Free` and `Hugepagesize` of `/proc/meminfo`.
fn parse_huge_pages(meminfo: &str) -> HugePages {
    let field = |name: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    HugePages {
        total: field("HugePages_Total:"),
        free: field("HugePages_Free:"),
        size_kb: field("Hugepagesize:"),
    }
}

/// The soft "Max locked memory" of `/proc/self/limits`: `Some(Some(bytes))`,
/// `Some(None)` for unlimited, `None` when the line is missing.
fn parse_memlock(limits: &str) -> Option<Option<u64>> {
    let rest = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max locked memory"))?;
    let soft = rest.split_whitespace().next()?;
    if soft == "unlimited" {
        return Some(None);
    }
    soft.parse().ok().map(Some)
}

/// What is missing for Rondo to run, each with its fix.
fn diagnose(r: &Report) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |problem: String, fix: &str| {
        out.push(Finding {
            problem,
            fix: fix.to_string(),
        })
    };
    if !r.verbs_feature {
        add(
            "this rondo was built without the `verbs` feature, so it cannot use RDMA devices"
                .into(),
            &format!("rebuild it: {REBUILD}"),
        );
    } else if r.devices.is_empty() {
        let why = r
            .device_error
            .as_ref()
            .map_or(String::from("ibverbs' device list is empty"), |e| e.clone());
        add(
            format!("no RDMA device: {why}"),
            "on a ConnectX host load the drivers (`sudo modprobe mlx5_ib ib_uverbs`, from the distribution kernel or MLNX_OFED / DOCA-OFED) and check with `ibv_devices` and `rdma link show`; for a functional test without a NIC, Soft-RoCE (`sudo rdma link add rxe0 type rxe netdev eth0`) works where the kernel has the rdma_rxe module",
        );
    } else {
        let ports: Vec<&Port> = r.devices.iter().flat_map(|d| &d.ports).collect();
        if !ports.iter().any(|p| p.state == "ACTIVE") {
            add(
                "no RDMA port is ACTIVE".into(),
                "check the cable and the link of the port's netdev (`ip link`, `ibstat`); on InfiniBand a subnet manager must run (`opensm`)",
            );
        }
        let ethernet = ports.iter().any(|p| p.link_layer == "Ethernet");
        let v2 = ports
            .iter()
            .any(|p| p.gids.iter().any(|g| g.kind == "RoCE v2"));
        if ethernet && !v2 {
            add(
                "no RoCE v2 GID: flow labels steer only RoCEv2 (UDP) packets, and RoCE v1 does not route".into(),
                "give the port's netdev an IP address (`sudo ip addr add 192.0.2.1/24 dev IFACE`); the NIC adds a RoCE v2 GID for it; pass its index with --gid-index",
            );
        }
    }
    match (r.memlock_unlimited, r.memlock_bytes) {
        (true, _) => {}
        (false, Some(b)) if b >= MEMLOCK_NEEDED => {}
        (false, b) => add(
            format!(
                "locked-memory limit (`ulimit -l`) is {}: registering Rondo's buffers needs more",
                b.map_or("unknown".into(), |b| format!("{} KiB", b / 1024))
            ),
            "raise it: `ulimit -l unlimited` in the shell (as root), `* - memlock unlimited` in /etc/security/limits.conf for logins, LimitMEMLOCK=infinity for systemd units, `--ulimit memlock=-1` for docker",
        ),
    }
    if r.huge_pages.total == 0 {
        add(
            "no huge pages reserved: buffers fall back to normal pages (more IOTLB misses on the NIC)".into(),
            "reserve some: `echo 1024 | sudo tee /proc/sys/vm/nr_hugepages` (2 GiB of 2 MiB pages; vm.nr_hugepages in /etc/sysctl.conf to keep it)",
        );
    }
    out
}

/// The device, port and GID to use (see [`Report::suggested`]).
fn suggest(devices: &[Device]) -> Option<Suggestion> {
    let candidates = || {
        devices.iter().flat_map(|d| {
            d.ports
                .iter()
                .filter(|p| p.state == "ACTIVE")
                .flat_map(move |p| p.gids.iter().map(move |g| (d, p, g)))
        })
    };
    // The rule every caller uses (`rondo_verbs::pick_gid_index`), across ports.
    candidates()
        .filter_map(|(d, p, g)| Some((g.rank?, d, p, g)))
        .min_by_key(|&(rank, ..)| rank)
        .map(|(_, d, p, g)| Suggestion {
            device: d.name.clone(),
            port: p.port,
            gid_index: g.index,
            ip: g.ip.clone(),
        })
}

/// The text report.
fn text(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "rondo doctor: verbs datapath {}",
        if r.verbs_feature {
            "built in"
        } else {
            "NOT built in"
        }
    );
    if r.verbs_feature {
        if r.devices.is_empty() {
            let _ = writeln!(s, "devices: none");
        }
        for d in &r.devices {
            let _ = writeln!(s, "device {}", d.name);
            if let Some(e) = &d.error {
                let _ = writeln!(s, "  cannot query it: {e}");
            }
            for p in &d.ports {
                let _ = writeln!(
                    s,
                    "  port {}: {} {}, active MTU {} (max {}), LID {}",
                    p.port, p.state, p.link_layer, p.active_mtu, p.max_mtu, p.lid
                );
                for g in &p.gids {
                    let _ = writeln!(
                        s,
                        "    GID {:>3} {:<8} {} ({})",
                        g.index, g.kind, g.gid, g.ip
                    );
                }
            }
        }
    }
    let _ = writeln!(
        s,
        "huge pages: {} reserved, {} free, {} kB each",
        r.huge_pages.total, r.huge_pages.free, r.huge_pages.size_kb
    );
    let memlock = match (r.memlock_unlimited, r.memlock_bytes) {
        (true, _) => "unlimited".to_string(),
        (false, Some(b)) => format!("{} KiB", b / 1024),
        (false, None) => "unknown".to_string(),
    };
    let _ = writeln!(s, "ulimit -l: {memlock}");
    if let Some(g) = &r.suggested {
        let _ = writeln!(
            s,
            "use: device {} port {} GID index {} ({})",
            g.device, g.port, g.gid_index, g.ip
        );
    }
    if r.findings.is_empty() {
        let _ = writeln!(s, "ready: nothing missing for Rondo over verbs");
    } else {
        let _ = writeln!(s, "missing for Rondo over verbs:");
        for f in &r.findings {
            let _ = writeln!(s, "- {}\n  fix: {}", f.problem, f.fix);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            verbs_feature: true,
            devices: vec![Device {
                name: "mlx5_0".into(),
                error: None,
                ports: vec![Port {
                    port: 1,
                    state: "ACTIVE",
                    link_layer: "Ethernet",
                    active_mtu: 4096,
                    max_mtu: 4096,
                    lid: 0,
                    gids: vec![Gid {
                        index: 3,
                        kind: "RoCE v2",
                        gid: "::ffff:10.0.0.1".into(),
                        ip: "10.0.0.1".into(),
                        rank: Some(0),
                    }],
                }],
            }],
            device_error: None,
            huge_pages: HugePages {
                total: 1024,
                free: 1024,
                size_kb: 2048,
            },
            memlock_bytes: None,
            memlock_unlimited: true,
            findings: Vec::new(),
            suggested: None,
            ready: false,
        }
    }

    #[test]
    fn suggests_the_ipv4_roce_v2_gid_of_an_active_port() {
        let mut r = report();
        // Ranked as the inventory ranks them: by `rondo_verbs::gid_rank`.
        let gid = |index: u32, kind: u32, ip: &str| {
            let bytes = match ip.parse::<std::net::IpAddr>().unwrap() {
                std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
                std::net::IpAddr::V6(v6) => v6.octets(),
            };
            Gid {
                index,
                kind: "",
                gid: String::new(),
                ip: ip.into(),
                rank: rondo_verbs::gid_rank(kind, &bytes),
            }
        };
        r.devices[0].ports[0].gids = vec![
            gid(0, 1, "fe80::1"), // RoCE v1
            gid(1, 2, "fe80::1"),
            gid(2, 1, "10.0.0.1"),
            gid(3, 2, "10.0.0.1"),
            gid(4, 2, "::"), // an empty entry: never
        ];
        let s = suggest(&r.devices).unwrap();
        assert_eq!((s.device.as_str(), s.port, s.gid_index), ("mlx5_0", 1, 3));
        r.devices[0].ports[0].gids.truncate(2);
        assert_eq!(suggest(&r.devices).unwrap().gid_index, 1);
        r.devices[0].ports[0].gids[1].rank = None;
        assert_eq!(suggest(&r.devices), None, "RoCE v1 only");
        r.devices[0].ports[0].gids = vec![gid(4, 2, "::")];
        assert_eq!(suggest(&r.devices), None, "an empty RoCE v2 entry");
        r.devices[0].ports[0].gids = vec![gid(1, 2, "fe80::1")];
        r.devices[0].ports[0].state = "DOWN";
        assert_eq!(suggest(&r.devices), None, "only active ports");
    }

    #[test]
    fn parses_meminfo_and_limits() {
        let meminfo = "MemTotal: 1 kB\nHugePages_Total:      16\nHugePages_Free:       4\nHugepagesize:       2048 kB\n";
        assert_eq!(
            parse_huge_pages(meminfo),
            HugePages {
                total: 16,
                free: 4,
                size_kb: 2048
            }
        );
        assert_eq!(parse_huge_pages(""), HugePages::default());
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         8388608              8388608              bytes\n";
        assert_eq!(parse_memlock(limits), Some(Some(8_388_608)));
        let unlimited =
            "Max locked memory         unlimited            unlimited            bytes\n";
        assert_eq!(parse_memlock(unlimited), Some(None));
        assert_eq!(parse_memlock("nothing"), None);
    }

    #[test]
    fn a_ready_host_has_no_findings() {
        assert!(diagnose(&report()).is_empty());
    }

    #[test]
    fn each_missing_piece_is_named_with_a_fix() {
        let mut r = report();
        r.devices[0].ports[0].gids[0].kind = "RoCE v1";
        r.memlock_unlimited = false;
        r.memlock_bytes = Some(8 << 20);
        r.huge_pages.total = 0;
        let f = diagnose(&r);
        let problems: Vec<&str> = f.iter().map(|f| f.problem.as_str()).collect();
        assert_eq!(f.len(), 3, "{problems:?}");
        assert!(problems[0].contains("no RoCE v2 GID"));
        assert!(problems[1].contains("8192 KiB"));
        assert!(problems[2].contains("no huge pages"));
        assert!(f.iter().all(|f| !f.fix.is_empty()));
        r.devices.clear();
        r.device_error = Some("Function not implemented".into());
        assert!(diagnose(&r)[0]
            .problem
            .contains("no RDMA device: Function not implemented"));
        r.verbs_feature = false;
        let f = diagnose(&r);
        assert!(f[0].problem.contains("without the `verbs` feature"));
        assert!(f[0].fix.contains("--features verbs"));
        assert!(text(&r).contains("NOT built in"));
    }
}
