//! The sans-IO switch at explicit timestamps: serialisation, propagation, strict
//! priority, thresholds, ECN, loss, the schedule, and bad input.

use rondo_fabric::{Class, Switch, Topology, Verdict};
use rondo_proto::rng::Rng;
use rondo_proto::time::{Duration, Instant};
use std::net::SocketAddr;

const BASE: &str = r#"
listen = "127.0.0.1:4900"
seed = 7
[[host]]
name = "a"
ip = "127.0.0.1"
base_port = 20000
ports = 2
[[host]]
name = "b"
ip = "127.0.0.1"
base_port = 21000
ports = 2
[[path]]
rate_mbps = 100
delay_us = 1000
ecn_kb = 4
queue_kb = { control = 64, data = 64, probe = 4 }
[[path]]
rate_mbps = 50
delay_us = 3000
"#;

fn topo(extra: &str) -> Topology {
    Topology::parse(&format!("{BASE}{extra}"), &[]).unwrap()
}

fn packet(kind: u8, len: usize) -> Vec<u8> {
    let mut d = vec![0u8; len];
    d[0] = 1;
    d[1] = kind;
    d
}

fn a(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn drain(sw: &mut Switch, until: Instant) -> Vec<rondo_fabric::Delivery> {
    let mut out = Vec::new();
    let mut t = Instant::ZERO;
    while let Some(w) = sw.poll_timeout() {
        t = w.max(t);
        if t > until {
            break;
        }
        while let Some(d) = sw.poll_delivery(t) {
            out.push(d);
        }
    }
    out
}

#[test]
fn packets_leave_at_the_path_rate_after_the_propagation_delay() {
    let mut sw = Switch::new(&topo(""), Instant::ZERO);
    for _ in 0..40 {
        assert!(matches!(
            sw.arrive(Instant::ZERO, a(20000), &packet(1, 1250)),
            Verdict::Queued { path: 0, .. }
        ));
    }
    let got = drain(&mut sw, Instant::from_us(1_000_000));
    assert_eq!(got.len(), 40);
    // 1250 B at 100 Mb/s: 100 us each, then 1 ms.
    for (k, d) in got.iter().enumerate() {
        assert_eq!(
            d.due,
            Instant::from_us(100 * (k as u64 + 1) + 1000),
            "packet {k}"
        );
        assert_eq!(d.to, a(21000));
        assert_eq!(d.path, 0);
    }
    // The reverse direction and the other path.
    sw.arrive(Instant::from_us(10_000), a(21001), &packet(3, 625));
    let d = drain(&mut sw, Instant::from_us(1_000_000)).pop().unwrap();
    assert_eq!((d.to, d.path, d.class), (a(20001), 1, Class::Control));
    assert_eq!(d.due, Instant::from_us(10_000 + 100 + 3000));
}

#[test]
fn control_goes_before_waiting_data_and_data_before_probes() {
    let mut sw = Switch::new(&topo(""), Instant::ZERO);
    for _ in 0..3 {
        sw.arrive(Instant::ZERO, a(20000), &packet(1, 1250));
    }
    sw.arrive(Instant::from_us(10), a(20000), &packet(2, 1000));
    sw.arrive(Instant::from_us(20), a(20000), &packet(3, 100));
    let order: Vec<Class> = drain(&mut sw, Instant::from_us(100_000))
        .iter()
        .map(|d| d.class)
        .collect();
    // The first data packet was on the wire when the others came.
    assert_eq!(
        order,
        [
            Class::Data,
            Class::Control,
            Class::Data,
            Class::Data,
            Class::Probe
        ]
    );
}

#[test]
fn the_small_probe_threshold_drops_probes_and_spares_data() {
    let mut sw = Switch::new(&topo(""), Instant::ZERO);
    let mut verdicts = Vec::new();
    for _ in 0..10 {
        verdicts.push(sw.arrive(Instant::ZERO, a(20000), &packet(2, 1000)));
        verdicts.push(sw.arrive(Instant::ZERO, a(20000), &packet(1, 1000)));
    }
    let c = sw.counters();
    let probe = c.class(1, 0, Class::Probe);
    let data = c.class(1, 0, Class::Data);
    // The first probe finds the wire idle; then 4 KB of probe queue hold 4 more.
    assert_eq!(probe.enqueued, 5);
    assert_eq!(probe.dropped_queue, 5);
    assert_eq!(data.enqueued, 10);
    assert_eq!(data.dropped_queue, 0);
    assert!(verdicts.contains(&Verdict::QueueFull));
}

/// A probe larger than the probe class's whole threshold (4 KB here, a 9000-byte
/// capacity probe) is dropped even on an idle path, every time: counted apart,
/// and the table says what to raise.
#[test]
fn a_datagram_larger_than_its_class_threshold_is_counted_and_reported() {
    let mut sw = Switch::new(&topo(""), Instant::ZERO);
    for _ in 0..3 {
        assert_eq!(
            sw.arrive(Instant::ZERO, a(20000), &packet(2, 9000)),
            Verdict::QueueFull
        );
    }
    sw.arrive(Instant::ZERO, a(20000), &packet(2, 1000));
    let c = sw.counters();
    let probe = c.class(1, 0, Class::Probe);
    assert_eq!(
        (probe.dropped_queue, probe.oversize, probe.enqueued),
        (3, 3, 1)
    );
    let table = c.to_table();
    assert!(
        table.contains("warning: 3 probe datagrams") && table.contains("queue_kb.probe"),
        "{table}"
    );
    assert!(!Switch::new(&topo(""), Instant::ZERO)
        .counters()
        .to_table()
        .contains("warning"));
}

#[test]
fn data_above_the_ecn_threshold_is_marked() {
    let mut sw = Switch::new(&topo(""), Instant::ZERO);
    for _ in 0..10 {
        sw.arrive(Instant::ZERO, a(20000), &packet(1, 1000));
    }
    let marked = drain(&mut sw, Instant::from_us(100_000))
        .iter()
        .filter(|d| d.ce)
        .count();
    // The first goes on the wire; the 2nd to 6th see 0 to 4000 B waiting (not
    // above 4 KB), the last four see 5000 B or more.
    assert_eq!(marked, 4);
    assert_eq!(sw.counters().class(1, 0, Class::Data).marked, 4);
    assert_eq!(sw.counters().class(1, 0, Class::Data).max_queue_bytes, 9000);
}

#[test]
fn loss_is_seeded_and_near_its_rate() {
    let t = Topology::parse(BASE, &["path.1.loss=0.1"]).unwrap();
    let run = || {
        let mut sw = Switch::new(&t, Instant::ZERO);
        let mut lost = 0;
        for k in 0..20_000u64 {
            let now = Instant::from_us(k * 200);
            if sw.arrive(now, a(20001), &packet(1, 100)) == Verdict::Lost {
                lost += 1;
            }
            while sw.poll_delivery(now).is_some() {}
        }
        lost
    };
    let lost = run();
    assert_eq!(lost, run(), "same seed, same losses");
    assert!(
        (1700..2300).contains(&lost),
        "{lost} of 20000 lost at p = 0.1"
    );
}

#[test]
fn the_schedule_takes_a_path_down_changes_its_rate_and_brings_it_back() {
    let mut sw = Switch::new(
        &topo(
            r#"
[[change]]
at_ms = 1
path = 0
down = true
[[change]]
at_ms = 2
path = 0
down = false
rate_mbps = 50
delay_us = 500
"#,
        ),
        Instant::ZERO,
    );
    assert_eq!(
        sw.arrive(Instant::from_us(1500), a(20000), &packet(1, 1250)),
        Verdict::Down
    );
    assert!(matches!(
        sw.arrive(Instant::from_us(2500), a(20000), &packet(1, 1250)),
        Verdict::Queued { .. }
    ));
    let d = drain(&mut sw, Instant::from_us(100_000)).pop().unwrap();
    // 1250 B at 50 Mb/s: 200 us, then the new 500 us.
    assert_eq!(d.due, Instant::from_us(2500 + 200 + 500));
    assert_eq!(sw.counters().changes_applied, 2);
    assert_eq!(sw.counters().class(1, 0, Class::Data).dropped_down, 1);
}

#[test]
fn garbage_and_strangers_are_counted_never_forwarded() {
    let mut sw = Switch::new(&topo(""), Instant::ZERO);
    let mut rng = Rng::new(3);
    let mut forwarded = 0;
    for k in 0..5000u64 {
        let len = rng.gen_range(0..200) as usize;
        let mut d: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if k % 2 == 0 && len >= 24 {
            d[0] = 1; // sometimes a plausible header
        }
        let port = 19_998 + rng.gen_range(0..6) as u16;
        let now = Instant::ZERO + Duration::from_us(k);
        if let Verdict::Queued { .. } = sw.arrive(now, a(port), &d) {
            forwarded += 1;
        }
    }
    let c = sw.counters().clone();
    assert_eq!(c.datagrams_in, 5000);
    assert!(c.malformed > 1000, "{c:?}");
    assert!(c.unknown_source > 0, "{c:?}");
    let accepted: u64 = c
        .egress
        .iter()
        .map(|e| e.data.enqueued + e.control.enqueued + e.probe.enqueued)
        .sum();
    assert_eq!(accepted, forwarded);
    assert_eq!(
        c.malformed
            + c.unknown_source
            + accepted
            + c.egress
                .iter()
                .map(|e| e.data.dropped_queue + e.control.dropped_queue + e.probe.dropped_queue)
                .sum::<u64>(),
        5000
    );
}

#[test]
fn bad_topologies_say_what_is_wrong() {
    let cases: &[(&str, &[&str], &str)] = &[
        (BASE, &["path.0.rate_mbps=0"], "rate_mbps"),
        (BASE, &["path.0.loss=1.5"], "loss"),
        (BASE, &["host.1.base_port=20001"], "share ports"),
        (BASE, &["host.0.peer=\"c\""], "peer"),
        (BASE, &["path.9.rate_mbps=1"], "index"),
        (BASE, &["nonsense"], "key=value"),
        ("listen = 3", &[], "not valid"),
        (
            "listen = \"127.0.0.1:1\"\n[[host]]\nname=\"a\"\nip=\"127.0.0.1\"\nbase_port=2\nports=1\n[[path]]\nrate_mbps=1",
            &[],
            "two [[host]]",
        ),
    ];
    for (text, overrides, want) in cases {
        let e = Topology::parse(text, overrides).unwrap_err().to_string();
        assert!(
            e.contains(want),
            "{overrides:?}: {e:?} should mention {want:?}"
        );
    }
    let routed = format!("{BASE}[[route]]\ndst = \"b\"\nsrc_port = 20000\npath = 5\n");
    assert!(Topology::parse(&routed, &[])
        .unwrap_err()
        .to_string()
        .contains("path 5"));
}

#[test]
fn explicit_routes_override_the_default_mapping() {
    let t = topo("[[route]]\ndst = \"b\"\nsrc_port = 20000\npath = 1\n");
    let table = t.route_table();
    assert_eq!(table.len(), 4);
    let sw = Switch::new(&t, Instant::ZERO);
    for r in &table {
        let from = SocketAddr::new(t.hosts[r.src_host].ip, r.src_port);
        assert_eq!(sw.route(from), Some((r.path, r.dst_host)));
    }
    assert_eq!(sw.route(a(20000)), Some((1, 1)));
    assert_eq!(sw.route(a(20001)), Some((1, 1)));
    assert_eq!(sw.route(a(21000)), Some((0, 0)));
}

#[test]
fn the_shipped_testbed_topology_loads() {
    let t = Topology::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/testbed.toml"),
        &[],
    )
    .unwrap();
    assert_eq!(t.paths.len(), 4);
    assert_eq!(t.total_bps(), 700e6);
}
