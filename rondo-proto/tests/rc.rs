//! The RC baselines (`rc-gbn`, `rc-sr`) over the two-host testbed: byte-exact,
//! in-order delivery under loss and reordering, and the properties that tell
//! them apart (go-back-N drops what comes out of order and resends from the
//! hole; selective repeat keeps it outside the shared reorder buffer and stays
//! within 512 outstanding PSNs).

use rondo_proto::transport::rc::WRITE_PSN_WINDOW;
use rondo_proto::{BufferConfig, Duration, Event, FlowConfig, Instant, PathSelection, Transport};
use rondo_sim::pair::PathSpec;
use rondo_sim::Testbed;

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64 ^ seed).wrapping_mul(0x9e37_79b9) as u8)
        .collect()
}

/// Runs `sizes` from a to b with transport `name` over `paths`; checks every
/// message arrives once, in order, byte-exact, and returns the testbed.
fn transfer(name: &str, paths: &[PathSpec], spray: bool, sizes: &[usize]) -> Testbed {
    let cfg = FlowConfig {
        transport: Transport::from_name(name).unwrap(),
        path_selection: if spray {
            PathSelection::Random
        } else {
            PathSelection::Deficit
        },
        ..FlowConfig::default()
    };
    let mut tb = Testbed::new(1, 100.0, paths, &cfg, BufferConfig::default()).unwrap();
    let msgs: Vec<(u64, Vec<u8>)> = sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| (i as u64 + 1, pattern(i as u64, len)))
        .collect();
    for (id, data) in &msgs {
        tb.post(*id, data.clone()).unwrap();
    }
    let n = msgs.len();
    let done = tb.run_until(Instant::ZERO + Duration::from_ms(400), |t| {
        t.send_completions() >= n && t.received().count() >= n
    });
    assert!(
        done,
        "{name}: by {:?} {}/{n} received\nsender {:?}\nreceiver {:?}",
        tb.now(),
        tb.received().count(),
        tb.sender().sender_stats(),
        tb.receiver().receiver_stats()
    );
    let got: Vec<(u64, &[u8])> = tb.received().collect();
    assert_eq!(got.len(), n);
    for ((id, data), (want_id, want)) in got.iter().zip(&msgs) {
        assert_eq!(id, want_id);
        assert!(data == want, "message {id} differs");
    }
    assert!(!tb
        .events_a
        .iter()
        .any(|(_, e)| matches!(e, Event::Error(_))));
    tb
}

fn lossy(gbps: f64, delay_us: f64, loss: f64) -> PathSpec {
    PathSpec {
        loss,
        ..PathSpec::new(gbps, delay_us)
    }
}

#[test]
fn both_deliver_byte_exact_under_loss_on_their_one_path() {
    for name in ["rc-gbn", "rc-sr"] {
        let tb = transfer(
            name,
            &vec![lossy(25.0, 5.0, 0.01); 4],
            false,
            &[1, 300_000, 2_000_000],
        );
        let s = tb.sender().sender_stats();
        assert!(
            s.retransmissions > 0 && s.naks_received > 0,
            "{name}: {s:?}"
        );
        // One path per flow: the other three carry nothing.
        let used = tb
            .sender()
            .paths()
            .iter()
            .filter(|p| p.counters().data_sent > 0)
            .count();
        assert_eq!(used, 1, "{name}");
    }
}

#[test]
fn go_back_n_drops_out_of_order_arrivals_and_resends_from_the_hole() {
    // One loss in a window of ~60 packets: go-back-N resends the tail after it,
    // selective repeat only the hole.
    let paths = [lossy(25.0, 5.0, 0.002)];
    let gbn = transfer("rc-gbn", &paths, false, &[4_000_000]);
    let sr = transfer("rc-sr", &paths, false, &[4_000_000]);
    let (g, s) = (gbn.sender().sender_stats(), sr.sender().sender_stats());
    let (gr, sr_rx) = (
        gbn.receiver().receiver_stats(),
        sr.receiver().receiver_stats(),
    );
    assert!(gr.refused > 0 && gr.placed_direct == 0, "{gr:?}");
    assert!(sr_rx.placed_direct > 0 && sr_rx.refused == 0, "{sr_rx:?}");
    assert!(
        g.retransmissions > 5 * s.retransmissions,
        "gbn {} vs sr {}",
        g.retransmissions,
        s.retransmissions
    );
    // Selective repeat NAKs every out-of-order arrival; go-back-N once per hole
    // (and 500 us).
    assert!(s.naks_received >= sr_rx.placed_direct / 2, "{s:?}");
    assert!(g.naks_received < gr.refused / 4, "{g:?} {gr:?}");
}

#[test]
fn selective_repeat_places_out_of_order_payload_outside_the_reorder_buffer() {
    // Sprayed over two paths whose delays differ by 20 us: each hole waits for
    // the fast path's packets, which are placed directly.
    let paths = [PathSpec::new(50.0, 2.0), PathSpec::new(50.0, 22.0)];
    let tb = transfer("rc-sr", &paths, true, &[3_000_000]);
    let r = tb.receiver().receiver_stats();
    assert!(r.placed_direct > 100, "{r:?}");
    assert_eq!(tb.receiver_endpoint().reorder_buffer().peak_used_slots(), 0);
    // (How far ahead depends on the congestion controller's window.)
    assert!(r.ood.max() >= 8, "OOD {:?}", r.ood);
    assert!(
        r.ood.max() <= u64::from(WRITE_PSN_WINDOW),
        "OOD {:?}",
        r.ood
    );
}

#[test]
fn selective_repeat_stalls_at_512_outstanding_psns() {
    // 200 us RTT at 100 Gbit/s: a BDP of ~1700 packets. rc-sr keeps at most 512
    // PSNs outstanding, so it moves at most 512 packets per RTT (~30 Gbit/s);
    // rc-gbn, without the limit, fills the path.
    let paths = [PathSpec::new(100.0, 100.0)];
    let bytes = 20_000_000;
    let sr = transfer("rc-sr", &paths, false, &[bytes]);
    let gbn = transfer("rc-gbn", &paths, false, &[bytes]);
    let packets = bytes.div_ceil(FlowConfig::default().payload_per_packet()) as f64;
    let rtt_us = 200.0;
    let floor_us = packets / f64::from(WRITE_PSN_WINDOW) * rtt_us;
    let us = |tb: &Testbed| tb.now().as_ns() as f64 / 1000.0;
    let (t_sr, t_gbn) = (us(&sr), us(&gbn));
    assert!(
        t_sr >= 0.95 * floor_us,
        "rc-sr took {t_sr} us, 512 per RTT needs {floor_us}"
    );
    assert!(t_gbn * 1.5 < t_sr, "rc-gbn {t_gbn} us, rc-sr {t_sr} us");
}
