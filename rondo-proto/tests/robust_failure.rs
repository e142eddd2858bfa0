//! Paths and peers that fail mid-transfer: a black-holed path is taken out of
//! rotation and the transfer still completes; a path that comes back rejoins; a peer
//! that disappears ends the connection with exactly one `RetryExceeded`.
//!
//! Every run has a simulated-time deadline, so a stuck engine fails instead of
//! hanging.

use rondo_proto::{
    BufferConfig, ConnectionError, Duration, Event, FlowConfig, Instant, PostError, SharedBuffer,
};
use rondo_sim::pair::PathSpec;
use rondo_sim::Testbed;

/// Four 10 Gbps paths (40 Gbps together), one-way delays 3 to 6 us.
fn four_paths() -> Vec<PathSpec> {
    (0..4)
        .map(|i| PathSpec::new(10.0, 3.0 + i as f64))
        .collect()
}

/// A four-path testbed (seed `seed`) with message `msg_id`, `len` pattern bytes,
/// posted; returns the message too.
fn posted(seed: u64, msg_id: u64, len: usize) -> (Testbed, Vec<u8>) {
    let paths = four_paths();
    let cfg = FlowConfig::default();
    let mut tb = Testbed::new(seed, 100.0, &paths, &cfg, BufferConfig::default()).unwrap();
    let data = pattern(seed, len);
    tb.post(msg_id, data.clone()).unwrap();
    (tb, data)
}

/// Every path of [`four_paths`].
const ALL: [usize; 4] = [0, 1, 2, 3];

/// Sets the loss rate of the `forward` (data) and `reverse` (ACK) links of the
/// paths listed.
fn set_loss(tb: &mut Testbed, forward: &[usize], reverse: &[usize], loss: f64) {
    let pair = &mut tb.pair;
    for &p in forward {
        pair.net.link_mut(pair.forward[p]).loss = loss;
    }
    for &p in reverse {
        pair.net.link_mut(pair.reverse[p]).loss = loss;
    }
}

/// Deterministic message contents.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) ^ seed ^ (i >> 11)) as u8)
        .collect()
}

/// Runs until message `msg_id` (the only one posted) is received and completed, by
/// `deadline`, and checks it byte for byte.
fn finish(tb: &mut Testbed, msg_id: u64, data: &[u8], deadline: Instant) {
    let done = tb.run_until(deadline, |t| {
        t.send_completions() == 1 && t.received().count() == 1
    });
    assert!(
        done,
        "not done by {:?}: received {}, completed {}\nsender {:?}\nevents {:?}",
        tb.now(),
        tb.received().count(),
        tb.send_completions(),
        tb.sender().sender_stats(),
        path_events(tb),
    );
    let got: Vec<_> = tb.received().collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, msg_id);
    assert_eq!(got[0].1.len(), data.len());
    if let Some(i) = got[0].1.iter().zip(data).position(|(a, b)| a != b) {
        panic!("first wrong byte at offset {i}");
    }
    assert!(
        !tb.events_a
            .iter()
            .any(|(_, e)| matches!(e, Event::Error(_))),
        "the sender failed: {:?}",
        tb.events_a
    );
}

/// PathDown / PathUp / Error events of the sender, with their times.
fn path_events(tb: &Testbed) -> Vec<(Instant, Event)> {
    tb.events_a
        .iter()
        .filter(|(_, e)| {
            matches!(
                e,
                Event::PathDown { .. } | Event::PathUp { .. } | Event::Error(_)
            )
        })
        .cloned()
        .collect()
}

fn saw(tb: &Testbed, want: &Event) -> bool {
    tb.events_a.iter().any(|(_, e)| e == want)
}

#[test]
fn losing_a_whole_path_mid_transfer() {
    let (mut tb, data) = posted(11, 5, 16 << 20); // ~3.4 ms at 40 Gbps
    tb.run_until(Instant::from_us(1_000), |_| false);
    assert_eq!(tb.received().count(), 0, "still transferring at 1 ms");
    let before = *tb.sender().sender_stats();
    set_loss(&mut tb, &[1], &[], 1.0);

    finish(&mut tb, 5, &data, Instant::from_us(200_000));
    let s = *tb.sender().sender_stats();
    assert!(
        saw(&tb, &Event::PathDown { path: 1 }),
        "no PathDown for the black-holed path: {:?}",
        path_events(&tb)
    );
    assert!(
        !saw(&tb, &Event::PathUp { path: 1 }),
        "path 1 is still black-holed, it cannot be back: {:?}",
        path_events(&tb)
    );
    for p in [0, 2, 3] {
        assert!(
            !saw(&tb, &Event::PathDown { path: p }),
            "{:?}",
            path_events(&tb)
        );
    }
    assert!(s.path_downs >= 1);
    assert!(
        s.retransmissions > before.retransmissions,
        "the packets lost on path 1 were resent: {s:?}"
    );
}

#[test]
fn path_comes_back() {
    let (mut tb, data) = posted(12, 6, 32 << 20);
    tb.run_until(Instant::from_us(1_000), |_| false);
    set_loss(&mut tb, &[1], &[], 1.0);
    let down = tb.run_until(Instant::from_us(20_000), |t| {
        saw(t, &Event::PathDown { path: 1 })
    });
    assert!(down, "no PathDown: {:?}", path_events(&tb));
    let t_restore = tb.now() + Duration::from_us(500);
    tb.run_until(t_restore, |_| false);
    set_loss(&mut tb, &[1], &[], 0.0);
    let up = tb.run_until(t_restore + Duration::from_ms(20), |t| {
        saw(t, &Event::PathUp { path: 1 })
    });
    assert!(
        up,
        "no PathUp after the path was restored: {:?}",
        path_events(&tb)
    );
    finish(&mut tb, 6, &data, Instant::from_us(300_000));
    // Path 1 carried data again after it rejoined.
    let p1 = tb.sender().paths()[1].counters();
    assert!(p1.data_acked > 0, "{p1:?}");
}

#[test]
fn peer_disappears_gives_retry_exceeded() {
    let (mut tb, _) = posted(13, 7, 16 << 20);
    let t_gone = Instant::from_us(1_000);
    tb.run_until(t_gone, |_| false);
    assert_eq!(tb.send_completions(), 0);
    set_loss(&mut tb, &ALL, &ALL, 1.0);
    // retry_limit (8) doubling RTOs from rto_min (500 us) take about 256 ms.
    let bound = t_gone + Duration::from_ms(2_000);
    let failed = tb.run_until(bound, |t| {
        t.events_a.iter().any(|(_, e)| matches!(e, Event::Error(_)))
    });
    assert!(
        failed,
        "no Error by {:?}: {:?}",
        tb.now(),
        tb.sender().sender_stats()
    );
    let t_failed = tb.now();
    let cfg = FlowConfig::default();
    let retry_limit = cfg.retry_limit;
    // It does not give up early either: retry_limit + 1 timeouts of at least rto_min.
    assert!(
        t_failed >= t_gone + cfg.rto_min.saturating_mul(u64::from(retry_limit) + 1),
        "gave up at {t_failed:?}"
    );
    let stats_at_failure = *tb.sender().sender_stats();
    assert!(stats_at_failure.rto_fired > u64::from(retry_limit));
    assert!(tb.sender().is_failed());

    // Nothing more happens: no second error, nothing sent.
    tb.run_until(t_failed + Duration::from_ms(1_000), |_| false);
    let errors: Vec<_> = tb
        .events_a
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Error(err) => Some(*err),
            _ => None,
        })
        .collect();
    assert_eq!(
        errors,
        [ConnectionError::RetryExceeded {
            retries: retry_limit
        }]
    );
    let s = *tb.sender().sender_stats();
    assert_eq!(s.data_packets_sent, stats_at_failure.data_packets_sent);
    assert_eq!(s.probes_sent, stats_at_failure.probes_sent);
    assert_eq!(tb.send_completions(), 0);

    assert_eq!(
        tb.post(8, vec![1; 100]),
        Err(PostError::Failed(ConnectionError::RetryExceeded {
            retries: retry_limit
        }))
    );
}

#[test]
fn total_outage_shorter_than_the_retry_limit() {
    // Every link black-holed for 20 ms (a few RTOs), then restored: the transfer
    // resumes and completes without an error.
    let (mut tb, data) = posted(14, 9, 8 << 20);
    tb.run_until(Instant::from_us(800), |_| false);
    set_loss(&mut tb, &ALL, &ALL, 1.0);
    tb.run_until(Instant::from_us(20_800), |_| false);
    assert!(tb.sender().sender_stats().rto_fired > 0);
    set_loss(&mut tb, &ALL, &ALL, 0.0);
    finish(&mut tb, 9, &data, Instant::from_us(500_000));
}

#[test]
fn lossy_reverse_path_only() {
    let (mut tb, data) = posted(15, 10, 4 << 20);
    set_loss(&mut tb, &[], &ALL, 0.10);
    finish(&mut tb, 10, &data, Instant::from_us(200_000));
}

#[test]
fn losing_the_ack_direction_of_a_path() {
    // Data on path 1 still arrives, but its ACKs never come back: cumulative ACKs
    // on the other paths must carry the transfer to completion.
    let (mut tb, data) = posted(16, 11, 8 << 20);
    tb.run_until(Instant::from_us(500), |_| false);
    set_loss(&mut tb, &[], &[1], 1.0);
    finish(&mut tb, 11, &data, Instant::from_us(200_000));
}

#[test]
fn buffer_full_naks_do_not_take_paths_down() {
    // Lossless paths into a receiver with only eight reorder slots: packets dropped
    // for lack of buffer are NAKed BUFFER_FULL. The paths delivered them, so they are
    // not path losses and no path may leave rotation (docs/engine.md: "A path with 8
    // losses in a row leaves rotation"; DESIGN.md: a small buffer degrades gracefully).
    let paths = [PathSpec::new(25.0, 3.0), PathSpec::new(10.0, 8.0)];
    let mut endpoint = BufferConfig::default();
    endpoint.capacity_bytes = 8 * endpoint.slot_size;
    let mut tb = Testbed::new(17, 100.0, &paths, &FlowConfig::default(), endpoint).unwrap();
    let data = pattern(7, 1 << 20);
    tb.post(12, data.clone()).unwrap();
    finish(&mut tb, 12, &data, Instant::from_us(200_000));
    assert!(tb.receiver().receiver_stats().dropped_buffer_full > 0);
    assert_eq!(
        path_events(&tb),
        [],
        "sender {:?}",
        tb.sender().sender_stats()
    );
}

#[test]
fn every_path_out_of_rotation_keeps_the_timer_moving() {
    // A sans-IO endpoint on one path: 13 packets go out (the first on the initial
    // window, 12 on the credit of the ACKs of 12 of its probes), then one late ACK of the last
    // reports PSNs 0-7 lost at once: 8 losses in a row take the only path out of
    // rotation with data left to resend. Nothing can be sent now but down-path
    // probes, and the timer must keep moving forward: `poll_timeout` may not return
    // an instant that `handle_timeout` and `poll_transmit` at that instant ignore.
    use rondo_proto::wire::{self, Body, CommonRepr, FeedbackRepr, Flags, Repr};
    use rondo_proto::{Endpoint, Host, Psn};

    let cfg = FlowConfig {
        paths: 1,
        ..FlowConfig::default()
    };
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let h = ep.connect(Instant::ZERO, 1, 2, &cfg).unwrap();
    ep.post(h, Instant::ZERO, 1, vec![9; 1 << 20]).unwrap();
    // Timestamps of the data packets sent, by PSN, and the events seen.
    let mut data_sent: Vec<u64> = Vec::new();
    let mut events = Vec::new();
    // PSNs of the probes sent (only an outstanding probe's ACK is believed).
    let probes = std::cell::RefCell::new(Vec::<u32>::new());
    let mut step = |ep: &mut Endpoint, now: Instant, data_sent: &mut Vec<u64>| {
        let mut buf = [0; 2048];
        if ep.poll_timeout().is_some_and(|t| t <= now) {
            ep.handle_timeout(now);
        }
        while let Some(t) = ep.poll_transmit(now, &mut buf) {
            let (repr, _) = wire::parse(&buf[..t.len]).unwrap();
            if let Body::Data(_) = repr.body {
                assert_eq!(
                    repr.common.psn,
                    Psn(data_sent.len() as u32),
                    "no resends yet"
                );
                data_sent.push(repr.common.timestamp_ns);
            } else if let Body::Probe(_) = repr.body {
                probes.borrow_mut().push(repr.common.psn.0);
            }
        }
        let mut path_down = false;
        while let Some(e) = ep.poll_event(h) {
            path_down |= e == (Event::PathDown { path: 0 });
            events.push((now, e));
        }
        path_down
    };
    let feedback = |ep: &mut Endpoint, now: Instant, fb: FeedbackRepr| {
        let repr = Repr {
            common: CommonRepr {
                flow: 1,
                psn: Psn(0),
                path: 0,
                flags: Flags::empty(),
                timestamp_ns: now.as_ns(),
            },
            body: Body::Ack(fb),
        };
        let mut b = [0; 64];
        let n = repr.emit(&mut b).unwrap();
        ep.receive(now, 0, &b[..n], false).unwrap();
    };
    let fb = |acked: u32, highest: u32, probe: bool, echo_ns: u64| FeedbackRepr {
        acked_psn: Psn(acked),
        cum_ack: Psn(0),
        highest_psn: Psn(highest),
        acked_path: 0,
        of_probe: probe,
        duplicate: false,
        echo_timestamp_ns: echo_ns,
        rx_timestamp_ns: echo_ns + 3_000,
    };

    step(&mut ep, Instant::ZERO, &mut data_sent);
    assert_eq!(data_sent.len(), 1);
    // Acknowledge the probes as they go out, 12 in all.
    let mut now = Instant::from_us(1);
    let mut acked = 0;
    while data_sent.len() < 13 && now < Instant::from_us(100) {
        step(&mut ep, now, &mut data_sent);
        let sent: Vec<u32> = probes.borrow_mut().drain(..).collect();
        for psn in sent {
            if acked < 12 {
                feedback(&mut ep, now, fb(psn, 0, true, 0));
                acked += 1;
            }
        }
        step(&mut ep, now, &mut data_sent);
        now = ep.poll_timeout().unwrap().max(now + Duration::from_ns(100));
    }
    assert_eq!(data_sent.len(), 13, "the 12 probe credits were not used");

    // The path's first RTT sample, 2 us, from the ACK of PSN 12 (sent last,
    // 4.5 us after PSN 7): PSNs 0-7 are overdue at once. (Before its first
    // sample a path has no ACK deadline, so this ACK must carry one.)
    let sent_12 = data_sent[12];
    let late = Instant::from_ns(sent_12 + 2_000).max(now);
    feedback(&mut ep, late, fb(12, 12, false, sent_12));
    assert!(
        step(&mut ep, late, &mut data_sent),
        "8 losses in a row did not take the path down: {:?}",
        ep.connection(h).sender_stats()
    );

    let mut now = late;
    let mut same_instant = 0;
    while now < late + Duration::from_ms(2) {
        step(&mut ep, now, &mut data_sent);
        let Some(next) = ep.poll_timeout() else { break };
        if next <= now {
            same_instant += 1;
            assert!(
                same_instant < 100,
                "the timer is stuck at {now:?} with the only path down: {:?}",
                ep.connection(h).sender_stats()
            );
        } else {
            same_instant = 0;
            now = next;
        }
    }
}
