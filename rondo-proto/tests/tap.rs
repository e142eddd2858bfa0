//! The measurement tap (`rondo_proto::tap`): what the endpoint reports agrees with
//! its own counters, over a lossy, jittery two-host testbed.

use rondo_proto::tap::{MetricsTap, TapEvent};
use rondo_proto::*;
use rondo_sim::pair::PathSpec;
use rondo_sim::Testbed;

#[test]
fn the_tap_reports_what_the_engine_counts() {
    let paths: Vec<PathSpec> = (0..4)
        .map(|i| PathSpec {
            loss: 0.01,
            jitter: Duration::from_us(3),
            ..PathSpec::new(25.0 - 5.0 * f64::from(i), 3.0 + 2.0 * f64::from(i))
        })
        .collect();
    let mut tb = Testbed::new(
        11,
        100.0,
        &paths,
        &FlowConfig::default(),
        BufferConfig::default(),
    )
    .unwrap();
    let (a, b) = (tb.pair.a, tb.pair.b);
    tb.pair.net.host_mut_quiet(a).set_tap(true);
    tb.pair.net.host_mut_quiet(b).set_tap(true);
    tb.post(1, vec![0x5a; 2 << 20]).unwrap();
    assert!(tb.run_until(Instant::from_us(200_000), |t| t.send_completions() == 1));

    let (mut sent, mut retx) = (0u64, 0u64);
    while let Some(e) = tb.pair.net.host_mut_quiet(a).poll_tap() {
        if let TapEvent::DataSent {
            flow,
            retransmission,
            ..
        } = e
        {
            assert_eq!(flow, 1, "the sender's local flow id");
            sent += 1;
            retx += u64::from(retransmission);
        }
    }
    let (mut delivered, mut arrivals, mut max_ood) = (0u64, 0u64, 0u64);
    while let Some(e) = tb.pair.net.host_mut_quiet(b).poll_tap() {
        if let TapEvent::Arrival {
            flow,
            nic_ood,
            delivered: d,
            ..
        } = e
        {
            assert_eq!(flow, Some(2), "the receiver's local flow id");
            arrivals += 1;
            delivered += d;
            max_ood = max_ood.max(nic_ood);
        }
    }
    let s = *tb.sender().sender_stats();
    let r = tb.receiver().receiver_stats().clone();
    assert_eq!(
        sent, s.data_packets_sent,
        "every data packet written is reported"
    );
    assert!(retx > 0, "1% loss makes retransmissions");
    assert_eq!(retx, s.retransmissions);
    assert_eq!(delivered, r.bytes_delivered);
    assert_eq!(delivered, 2 << 20);
    assert!(
        arrivals as f64 >= 0.95 * sent as f64,
        "{arrivals} arrivals of {sent}"
    );
    assert!(max_ood > 0, "jitter reorders");
    let c = tb.pair.net.host(a).tap_counters();
    assert_eq!(c.spurious_retransmissions, s.spurious_retransmissions);
    // Turning the tap off drops what is queued and records nothing more.
    tb.pair.net.host_mut_quiet(b).set_tap(false);
    assert_eq!(tb.pair.net.host_mut_quiet(b).poll_tap(), None);
}
