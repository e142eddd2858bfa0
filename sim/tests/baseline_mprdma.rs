//! The MP-RDMA baseline (`transport.kind = "mprdma"`): one ECN window, ACK-clocked
//! path choice that prunes paths with late ACKs, a 64-entry receiver bitmap.

use rondo_sim::scenario::{parse, run, Override, Report, RunOptions};

fn report(paths: &str, extra: &[&str]) -> Report {
    let text = format!(
        "seed = 5\nduration_us = 1500\nwarmup_us = 300\n[topology]\nkind = \"parallel\"\n\
         host_gbps = 100\npaths = [\n{paths}]\n[workload]\nkind = \"long_flows\"\nflows = 1\n"
    );
    let mut sets = vec![Override::parse("transport.kind=\"mprdma\"").unwrap()];
    sets.extend(extra.iter().map(|s| Override::parse(s).unwrap()));
    let s = parse("mprdma.toml", &text, &sets).unwrap_or_else(|e| panic!("{e}"));
    run(&s, "mprdma.toml", RunOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

#[test]
fn equal_paths_carry_the_flow_with_little_reordering() {
    let r = report(
        "{ gbps = 25, delay_us = 5.0 },\n{ gbps = 25, delay_us = 5.0 },\n",
        &[],
    );
    assert_eq!(r.transport, "mprdma");
    assert!(r.utilization > 0.5, "utilization {}", r.utilization);
    assert!(r.utilization < 1.01, "utilization {}", r.utilization);
    // The bitmap never holds more than 64 PSNs past the next expected one.
    assert!(r.ood.nic_max <= 64, "{:?}", r.ood);
    assert_eq!(r.drops.reorder_buffer, 0, "nothing lands beyond the bitmap");
}

#[test]
fn a_slow_path_overflows_the_bitmap_and_gets_pruned() {
    // Path 1's packets and ACKs take 40 us longer each way: its packets land beyond
    // the 64-entry bitmap (refused, resent), and its late ACKs prune it.
    let r = report(
        "{ gbps = 25, delay_us = 5.0 },\n{ gbps = 25, delay_us = 45.0 },\n",
        &[],
    );
    assert!(r.ood.nic_max <= 64, "{:?}", r.ood);
    assert!(
        r.ood.nic_max >= 32,
        "the slow path does reorder: {:?}",
        r.ood
    );
    // Nothing is dropped in the network: every retransmission repairs a packet the
    // bitmap refused (the simulator counts those as lost, so none is spurious).
    assert_eq!(r.drops.switch + r.drops.random, 0, "{:?}", r.drops);
    assert!(r.retx.packets > 0, "refused packets are resent: {r:?}");
    assert_eq!(r.retx.spurious, 0, "{:?}", r.retx);
    // Data keeps moving, but the pruned path leaves capacity unused.
    assert!(r.goodput_gbps > 5.0, "goodput {}", r.goodput_gbps);
    assert!(r.utilization < 0.9, "utilization {}", r.utilization);
}
