//! `transport.timers_on_time` (`rondo_proto::FlowConfig::timers_on_time`): a
//! flow with nothing to send runs its controller's timers at its next event,
//! each at its own time, instead of waking its host for each. The simulator
//! runs timers on time, so the report must be the same with it on or off, with
//! fewer events on; host stalls turn it off.

use rondo_sim::scenario::{parse, run, Override, Report, RunOptions};

fn report(text: &str, sets: &[&str]) -> Report {
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let s = parse("timers.toml", text, &sets).unwrap_or_else(|e| panic!("{e}"));
    run(&s, "timers.toml", RunOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

/// Every host of a k = 4 fat tree sends 16 KB to every other at once: each
/// flow sends its last packet long before its last ACK comes back.
const ALL_TO_ALL: &str = "seed = 3\nduration_us = 3000\n[topology]\nkind = \"fattree\"\nk = 4\n\
                          [workload]\nkind = \"all_to_all\"\nbytes = 16384\n";

/// The report and its event count, without the wall-clock figures.
fn run_of(text: &str, sets: &[&str]) -> (Report, u64) {
    let mut r = report(text, sets);
    let events = r.sim.events;
    r.sim = Default::default();
    (r, events)
}

#[test]
fn deferred_timers_give_the_same_report_with_fewer_events() {
    let (on, on_events) = run_of(ALL_TO_ALL, &[]);
    let (off, off_events) = run_of(ALL_TO_ALL, &["transport.timers_on_time=false"]);
    assert_eq!(on.flows_completed, on.flows_total);
    assert_eq!(on, off, "the same updates at the same times");
    // The per-path updates of flows waiting for their last ACKs no longer
    // wake their hosts (1.5% of this run's events; 6.5% in the 320-host
    // all-to-all, where flows wait longer).
    assert!(
        on_events * 100 < off_events * 99,
        "events {on_events} with, {off_events} without"
    );
}

#[test]
fn host_stalls_run_every_timer_when_it_comes() {
    // A stalled host runs its timers late, at its resume: the deferral is off.
    let stalls = format!("{ALL_TO_ALL}[host]\nstall_every_us = 200\nstall_us = 20\n");
    let (on, on_events) = run_of(&stalls, &[]);
    let (off, off_events) = run_of(&stalls, &["transport.timers_on_time=false"]);
    assert_eq!(on, off);
    assert_eq!(on_events, off_events);
}

/// The same fat tree with 128 KB per pair: flows wait with data behind shut
/// windows, and the per-path updates that can open none of them wait for the
/// flow's next event too (`CongestionControl::ticks_idle_until`). Probing
/// off: a probe goes at a transmission opportunity of its host, and a host
/// not woken for a deferred update offers its line at other moments (with
/// probing on this run's JCT moves 226.5 -> 228.9 us; the built-ins and
/// scenario files stay identical).
#[test]
fn ticks_behind_shut_windows_give_the_same_report_with_fewer_events() {
    let text = ALL_TO_ALL.replace("bytes = 16384", "bytes = 131072");
    let (on, on_events) = run_of(&text, &["transport.probing=false"]);
    let (off, off_events) = run_of(
        &text,
        &["transport.probing=false", "transport.timers_on_time=false"],
    );
    assert_eq!(on.flows_completed, on.flows_total);
    assert_eq!(on, off, "the same updates at the same times");
    // 468,282 events against 471,296; deferring only the ticks of flows with
    // nothing to send left 469,636 (0.35% fewer).
    assert!(
        on_events * 1000 < off_events * 995,
        "events {on_events} with, {off_events} without"
    );
}
