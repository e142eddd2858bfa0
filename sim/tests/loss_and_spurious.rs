//! Random loss at the switches (`switch.loss`) and the simulator's count of
//! spurious retransmissions: it knows every drop, so a retransmission is spurious
//! exactly when an earlier copy of its PSN was not lost.

use rondo_sim::scenario::{parse, run, Override, Report, RunOptions};

fn overrides(sets: &[&str]) -> Vec<Override> {
    sets.iter().map(|s| Override::parse(s).unwrap()).collect()
}

fn report(extra: &[&str]) -> Report {
    report_with("", extra)
}

fn report_with(events: &str, extra: &[&str]) -> Report {
    let text = "seed = 3\nduration_us = 1500\nwarmup_us = 300\n[topology]\nkind = \"parallel\"\n\
                host_gbps = 100\npaths = [\n{ gbps = 25, delay_us = 5.0 },\n\
                { gbps = 25, delay_us = 5.0 },\n]\n[workload]\nkind = \"long_flows\"\nflows = 1\n";
    let text = format!("{text}{events}");
    let s = parse("loss.toml", &text, &overrides(extra)).unwrap_or_else(|e| panic!("{e}"));
    run(&s, "loss.toml", RunOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

#[test]
fn random_loss_drops_about_its_probability_and_retransmissions_repair_it() {
    let clean = report(&[]);
    assert_eq!(clean.drops.random, 0);
    assert_eq!(clean.retx.packets, 0, "no loss, no retransmission");
    let lossy = report(&["switch.loss=0.01"]);
    // Each data packet and ACK crosses one switch egress: about 1% of them drop.
    let data = lossy.retx.data_packets as f64;
    let dropped = lossy.drops.random as f64;
    assert!(
        dropped > 0.005 * data && dropped < 0.04 * data,
        "{dropped} random drops of {data} data packets (and as many ACKs)"
    );
    assert!(lossy.retx.packets > 0);
    // The retransmissions repair real losses: few of them are spurious.
    assert!(
        lossy.retx.spurious * 2 < lossy.retx.packets,
        "{} of {} spurious",
        lossy.retx.spurious,
        lossy.retx.packets
    );
    assert!(lossy.retx.spurious_ratio < 0.01);
    assert!(lossy.utilization > 0.5, "utilization {}", lossy.utilization);
    let again = report(&["switch.loss=0.01"]);
    assert_eq!(
        again.drops.random, lossy.drops.random,
        "same seed, same drops"
    );
    assert_eq!(again.retx, lossy.retx);
}

#[test]
fn retransmissions_without_any_drop_are_all_spurious() {
    // One path's delay grows 60-fold: the retransmission timer, sized for the old
    // RTT, fires while the originals are still on their way.
    let r = report_with(
        "[[events]]\nat_us = 800\npath = 0\naction = \"delay\"\ndelay_us = 300.0\n",
        &["transport.rto_min_us=5"],
    );
    let drops = r.drops.random + r.drops.switch + r.drops.reorder_buffer;
    assert_eq!(drops, 0, "{:?}", r.drops);
    assert!(r.retx.packets > 0, "the short RTO retransmits");
    assert_eq!(r.retx.spurious, r.retx.packets);
    let ratio = r.retx.spurious as f64 / r.retx.data_packets as f64;
    assert!((r.retx.spurious_ratio - ratio).abs() < 1e-12);
}

#[test]
fn a_loss_probability_of_one_or_more_is_refused() {
    let text = "duration_us = 100\n[topology]\nkind = \"parallel\"\npaths = [{ gbps = 10, delay_us = 1.0 }]\n\
                [workload]\nkind = \"long_flows\"\nflows = 1\n";
    for bad in ["switch.loss=1.0", "switch.loss=-0.1"] {
        let s = parse("bad.toml", text, &overrides(&[bad])).unwrap();
        let e = s.check("bad.toml").unwrap_err().to_string();
        assert!(e.contains("switch.loss"), "{e}");
    }
}
