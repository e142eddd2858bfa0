//! The two-host and small networks of `rondo_sim::pair`: timing, priorities,
//! faults, determinism, routing.

use std::collections::VecDeque;

use rondo_proto::{Duration, Host, Instant, Priority, Transmit, TxBuffer};
use rondo_sim::pair::{HostId, LinkConfig, LinkId, Network, Pair, PathSpec};

/// A datagram a [`Script`] received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Arrival {
    at: Instant,
    path: u16,
    id: u32,
    len: usize,
    ce: bool,
}

/// A datagram a [`Script`] will send.
#[derive(Clone, Copy, Debug)]
struct Send {
    at: Instant,
    path: u16,
    priority: Priority,
    len: usize,
    id: u32,
}

/// Sends numbered datagrams at set times (the id in the first 4 bytes) and
/// records what arrives.
#[derive(Default)]
struct Script {
    sends: VecDeque<Send>,
    arrivals: Vec<Arrival>,
}

impl Script {
    /// Adds a datagram, keeping sends in time order (stable for equal times).
    fn send(&mut self, at: Instant, path: u16, priority: Priority, len: usize, id: u32) {
        assert!(len >= 4);
        let i = self.sends.partition_point(|s| s.at <= at);
        let s = Send {
            at,
            path,
            priority,
            len,
            id,
        };
        self.sends.insert(i, s);
    }

    /// `n` datagrams at `at` with ids `first..first + n`.
    fn burst(mut self, at: Instant, priority: Priority, len: usize, first: u32, n: u32) -> Self {
        for id in first..first + n {
            self.send(at, 0, priority, len, id);
        }
        self
    }

    fn ids(&self) -> Vec<u32> {
        self.arrivals.iter().map(|a| a.id).collect()
    }

    fn times(&self) -> Vec<Instant> {
        self.arrivals.iter().map(|a| a.at).collect()
    }
}

impl Host for Script {
    fn handle_datagram(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool) {
        let id = u32::from_le_bytes(data[..4].try_into().unwrap());
        assert!(
            data[4..].iter().all(|&b| b == id as u8),
            "payload corrupted"
        );
        self.arrivals.push(Arrival {
            at: now,
            path,
            id,
            len: data.len(),
            ce: ecn_ce,
        });
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        if self.sends.front()?.at > now {
            return None;
        }
        let s = self.sends.pop_front()?;
        let buf = tx.take(s.path, s.priority, s.len);
        buf[..4].copy_from_slice(&s.id.to_le_bytes());
        buf[4..].fill(s.id as u8);
        Some(Transmit {
            path: s.path,
            priority: s.priority,
            len: s.len,
            flow: 0,
            payload: None,
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.sends.front().map(|s| s.at)
    }
}

/// Sender `a` (NIC 100 Gbps) reaches receiver `b` on path 0 over one link.
fn line(seed: u64, sender: Script, cfg: LinkConfig) -> (Network<Script>, HostId, HostId, LinkId) {
    let mut net = Network::new(seed);
    let a = net.add_host(sender, 100.0);
    let b = net.add_host(Script::default(), 100.0);
    let link = net.add_link(cfg);
    net.set_route(a, 0, b, &[link]);
    (net, a, b, link)
}

fn us(x: u64) -> Instant {
    Instant::from_us(x)
}

#[test]
fn serialisation_and_propagation_are_exact() {
    let mut s = Script::default();
    s.send(us(0), 0, Priority::Data, 1500, 0);
    s.send(us(10), 0, Priority::Data, 1500, 1);
    let (mut net, _, b, link) = line(1, s, LinkConfig::new(10.0, Duration::from_us(5)));
    net.run_until(us(100));
    assert_eq!(net.now(), us(100));
    // NIC 120 ns + link 1.2 us + propagation 5 us.
    assert_eq!(
        net.host(b).times(),
        [Instant::from_ps(6_320_000), Instant::from_ps(16_320_000)]
    );
    let d = *net.link_stats(link).class(Priority::Data);
    assert_eq!(
        (d.enqueued, d.sent, d.sent_bytes, d.queue_bytes),
        (2, 2, 3000, 0)
    );
    assert_eq!(d.max_queue_bytes, 1500);
}

#[test]
fn back_to_back_packets_are_spaced_by_serialisation() {
    let s = Script::default().burst(us(0), Priority::Data, 1500, 0, 10);
    let (mut net, _, b, _) = line(1, s, LinkConfig::new(10.0, Duration::from_us(5)));
    net.run_until(Instant::MAX);
    let expect: Vec<Instant> = (0..10)
        .map(|k| Instant::from_ns(6_320 + 1_200 * k))
        .collect();
    assert_eq!(net.host(b).times(), expect);
    assert_eq!(net.host(b).ids(), (0..10).collect::<Vec<_>>());
    assert!(!net.step(), "idle");
}

#[test]
fn a_25g_link_saturates_at_25g() {
    let s = Script::default().burst(us(0), Priority::Data, 1500, 0, 3000);
    let (mut net, _, b, _) = line(1, s, LinkConfig::new(25.0, Duration::from_us(2)));
    net.run_until(Instant::MAX);
    let arrivals = &net.host(b).arrivals;
    let start = arrivals[0].at;
    let window = Duration::from_ms(1);
    let bytes: usize = arrivals
        .iter()
        .filter(|a| a.at.saturating_since(start) < window)
        .map(|a| a.len)
        .sum();
    let expect = 25e9 * window.as_secs_f64() / 8.0;
    assert!(
        (bytes as f64 / expect - 1.0).abs() < 1e-3,
        "{bytes} vs {expect}"
    );
}

#[test]
fn control_jumps_queued_data() {
    let mut s = Script::default().burst(us(0), Priority::Data, 1000, 0, 5);
    s.send(us(1), 0, Priority::Control, 100, 100);
    let (mut net, _, b, _) = line(1, s, LinkConfig::new(1.0, Duration::from_us(1)));
    net.run_until(Instant::MAX);
    // Data 0 was already serialising when the ACK arrived; it goes next.
    assert_eq!(net.host(b).ids(), [0, 100, 1, 2, 3, 4]);
}

#[test]
fn probes_wait_for_data_and_overflow_their_small_queue() {
    let mut s = Script::default()
        .burst(us(0), Priority::Data, 1000, 0, 4)
        .burst(us(0), Priority::Probe, 500, 10, 10);
    s.send(us(2), 0, Priority::Data, 1000, 50);
    let (mut net, _, b, link) = line(1, s, LinkConfig::new(1.0, Duration::from_us(1)));
    net.run_until(Instant::MAX);
    // 3000 bytes of probe queue hold six 500-byte probes; the rest are dropped,
    // and the probes go only once no data is left.
    assert_eq!(net.host(b).ids(), [0, 1, 2, 3, 50, 10, 11, 12, 13, 14, 15]);
    let stats = net.link_stats(link);
    let (data, probe) = (stats.class(Priority::Data), stats.class(Priority::Probe));
    assert_eq!((data.dropped_tail, data.sent), (0, 5));
    assert_eq!((probe.dropped_tail, probe.sent), (4, 6));
    assert_eq!(probe.max_queue_bytes, 3000);
    assert_eq!(stats.total().dropped_tail, 4);
}

#[test]
fn ecn_marks_data_above_the_threshold() {
    let s = Script::default().burst(us(0), Priority::Data, 1000, 0, 10);
    let mut cfg = LinkConfig::new(1.0, Duration::from_us(1));
    cfg.ecn_threshold_bytes = Some(3000);
    let (mut net, _, b, link) = line(1, s, cfg);
    net.run_until(Instant::MAX);
    let ce: Vec<bool> = net.host(b).arrivals.iter().map(|a| a.ce).collect();
    // Packet k finds k packets (k kB) queued; marked once that exceeds 3 kB.
    assert_eq!(ce, (0..10).map(|k| k > 3).collect::<Vec<_>>());
    assert_eq!(net.link_stats(link).class(Priority::Data).ce_marked, 6);
}

#[test]
fn full_loss_delivers_nothing() {
    let s = Script::default().burst(us(0), Priority::Data, 1500, 0, 100);
    let mut cfg = LinkConfig::new(10.0, Duration::from_us(1));
    cfg.loss = 1.0;
    let (mut net, _, b, link) = line(1, s, cfg);
    net.run_until(Instant::MAX);
    assert!(net.host(b).arrivals.is_empty());
    let d = *net.link_stats(link).class(Priority::Data);
    assert_eq!((d.sent, d.lost), (100, 100));
}

/// 20,000 small packets over a link with `loss` and `duplicate`; returns
/// (delivered, lost, duplicated).
fn faulty_run(loss: f64, duplicate: f64) -> (usize, u64, u64) {
    let s = Script::default().burst(us(0), Priority::Data, 100, 0, 20_000);
    let mut cfg = LinkConfig::new(100.0, Duration::from_us(1));
    cfg.loss = loss;
    cfg.duplicate = duplicate;
    let (mut net, _, b, link) = line(42, s, cfg);
    net.run_until(Instant::MAX);
    let d = *net.link_stats(link).class(Priority::Data);
    (net.host(b).arrivals.len(), d.lost, d.duplicated)
}

#[test]
fn random_loss_matches_its_rate() {
    let (delivered, lost, _) = faulty_run(0.05, 0.0);
    assert_eq!(delivered as u64 + lost, 20_000);
    let rate = lost as f64 / 20_000.0;
    assert!((rate - 0.05).abs() < 0.006, "loss rate {rate}");
}

#[test]
fn duplication_matches_its_rate() {
    let (delivered, _, duplicated) = faulty_run(0.0, 0.1);
    assert_eq!(delivered as u64, 20_000 + duplicated);
    let rate = duplicated as f64 / 20_000.0;
    assert!((rate - 0.1).abs() < 0.006, "duplication rate {rate}");
}

#[test]
fn jitter_reorders_within_a_link() {
    let s = Script::default().burst(us(0), Priority::Data, 1500, 0, 100);
    let mut cfg = LinkConfig::new(10.0, Duration::from_us(5));
    cfg.jitter = Duration::from_us(5);
    let (mut net, _, b, _) = line(3, s, cfg);
    net.run_until(Instant::MAX);
    let host = net.host(b);
    let mut ids = host.ids();
    assert!(ids.windows(2).any(|w| w[0] > w[1]), "no reordering");
    ids.sort_unstable();
    assert_eq!(ids, (0..100).collect::<Vec<_>>());
    for a in &host.arrivals {
        let nominal = Instant::from_ns(6_320 + 1_200 * u64::from(a.id));
        let extra = a.at.checked_since(nominal).expect("arrived early");
        assert!(extra < Duration::from_us(5));
    }
}

fn lossy_log(seed: u64) -> Vec<Arrival> {
    let s = Script::default().burst(us(0), Priority::Data, 1000, 0, 2000);
    let mut cfg = LinkConfig::new(10.0, Duration::from_us(3));
    cfg.loss = 0.1;
    cfg.duplicate = 0.05;
    cfg.jitter = Duration::from_us(2);
    let (mut net, _, b, _) = line(seed, s, cfg);
    net.run_until(Instant::MAX);
    net.host(b).arrivals.clone()
}

#[test]
fn same_seed_same_run() {
    assert_eq!(lossy_log(7), lossy_log(7));
    assert_ne!(lossy_log(7), lossy_log(8));
}

#[test]
fn two_senders_share_a_bottleneck() {
    let mut net = Network::new(1);
    let s1 = net.add_host(
        Script::default().burst(us(0), Priority::Data, 1500, 0, 20),
        100.0,
    );
    let s2 = net.add_host(
        Script::default().burst(us(0), Priority::Data, 1500, 1000, 20),
        100.0,
    );
    let d = net.add_host(Script::default(), 100.0);
    let l1 = net.add_link(LinkConfig::new(100.0, Duration::from_us(1)));
    let l2 = net.add_link(LinkConfig::new(100.0, Duration::from_us(1)));
    let shared = net.add_link(LinkConfig::new(10.0, Duration::from_us(2)));
    net.set_route(s1, 0, d, &[l1, shared]);
    net.set_route(s2, 0, d, &[l2, shared]);
    net.trace_queue(shared);
    net.run_until(Instant::MAX);

    let ids = net.host(d).ids();
    assert_eq!(ids.len(), 40);
    let from_s2 = ids[..10].iter().filter(|&&id| id >= 1000).count();
    assert!((4..=6).contains(&from_s2), "not interleaved: {ids:?}");
    let stats = net.link_stats(shared);
    assert!(stats.max_queue_bytes >= 30 * 1500, "{stats:?}");
    assert_eq!(stats.queue_bytes, 0);
    let trace = net.queue_trace(shared);
    assert_eq!(
        trace.iter().map(|s| s.bytes).max(),
        Some(stats.max_queue_bytes)
    );
    assert_eq!(trace.last().map(|s| s.bytes), Some(0));
    assert!(trace.windows(2).all(|w| w[0].at <= w[1].at));
}

#[test]
fn a_rate_change_applies_to_packets_not_yet_serialised() {
    let s = Script::default().burst(us(0), Priority::Data, 1500, 0, 6);
    let (mut net, _, b, link) = line(1, s, LinkConfig::new(10.0, Duration::from_us(1)));
    // Packet 2 serialises from 2.52 us to 3.72 us; the change at 3 us leaves it be.
    net.run_until(us(3));
    net.link_mut(link).gbps = 1.0;
    net.run_until(Instant::MAX);
    let t = net.host(b).times();
    let gaps: Vec<Duration> = t.windows(2).map(|w| w[1].saturating_since(w[0])).collect();
    let (fast, slow) = (Duration::from_ns(1_200), Duration::from_us(12));
    assert_eq!(gaps, [fast, fast, slow, slow, slow]);
}

#[test]
fn black_holing_a_link_mid_run() {
    let mut s = Script::default();
    for id in 0..10 {
        s.send(us(10 * u64::from(id)), 0, Priority::Data, 1500, id);
    }
    let (mut net, _, b, link) = line(1, s, LinkConfig::new(10.0, Duration::from_us(1)));
    net.run_until(us(45));
    net.link_mut(link).loss = 1.0;
    net.run_until(us(75));
    net.link_mut(link).loss = 0.0;
    net.run_until(Instant::MAX);
    assert_eq!(net.host(b).ids(), [0, 1, 2, 3, 4, 8, 9]);
    assert_eq!(net.link_stats(link).class(Priority::Data).lost, 3);
}

#[test]
fn a_paused_link_holds_packets_until_resumed() {
    let s = Script::default().burst(us(0), Priority::Data, 1500, 0, 3);
    let (mut net, _, b, link) = line(1, s, LinkConfig::new(0.0, Duration::from_us(1)));
    net.run_until(us(50));
    assert!(net.host(b).arrivals.is_empty());
    assert_eq!(net.link_stats(link).queue_bytes, 4500);
    net.link_mut(link).gbps = 10.0;
    net.run_until(Instant::MAX);
    assert_eq!(
        net.host(b).times()[0],
        Instant::from_ns(50_000 + 1_200 + 1_000)
    );
    assert_eq!(net.host(b).ids(), [0, 1, 2]);
}

#[test]
fn unrouted_datagrams_are_counted() {
    let mut s = Script::default();
    s.send(us(0), 7, Priority::Data, 100, 1);
    s.send(us(0), 0, Priority::Data, 100, 2);
    let (mut net, _, b, _) = line(1, s, LinkConfig::new(10.0, Duration::from_us(1)));
    net.run_until(Instant::MAX);
    assert_eq!(net.unrouted(), 1);
    assert_eq!(net.host(b).ids(), [2]);
}

#[test]
fn host_mut_repolls_and_stale_timers_are_ignored() {
    let mut s = Script::default();
    s.send(us(100), 0, Priority::Data, 1500, 1);
    let (mut net, a, b, _) = line(1, s, LinkConfig::new(10.0, Duration::from_us(5)));
    net.run_until(us(10));
    // Replace the send at 100 us by one now: its timer at 100 us goes stale.
    let host = net.host_mut(a);
    host.sends.clear();
    host.send(us(10), 0, Priority::Data, 1500, 2);
    let done = net.drive_until(us(50), |n| !n.host(b).arrivals.is_empty());
    assert!(done);
    assert_eq!(net.now(), Instant::from_ns(16_320));
    assert!(!net.step(), "the stale timer counts as pending");
    assert_eq!(net.host(b).ids(), [2]);
}

#[test]
fn drive_until_gives_up_at_the_deadline() {
    let s = Script::default().burst(us(0), Priority::Data, 1500, 0, 1);
    let (mut net, _, _, _) = line(1, s, LinkConfig::new(10.0, Duration::from_us(5)));
    assert!(!net.drive_until(us(3), |_| false));
    assert_eq!(net.now(), us(3));
}

#[test]
fn a_pair_of_hosts_over_four_paths() {
    let mut a = Script::default();
    for path in 0..4 {
        a.send(us(0), path, Priority::Data, 1500, u32::from(path));
    }
    let mut b = Script::default();
    b.send(us(0), 2, Priority::Control, 64, 9);
    let paths: Vec<PathSpec> = (0..4)
        .map(|i| PathSpec::new(25.0, 2.0 + f64::from(i)))
        .collect();
    let mut pair = Pair::new(1, a, b, 100.0, &paths);
    while pair.drive() {}
    assert_eq!((pair.forward.len(), pair.reverse.len()), (4, 4));
    let got = &pair.net.host(pair.b).arrivals;
    assert_eq!(
        got.iter().map(|x| (x.path, x.id)).collect::<Vec<_>>(),
        [(0, 0), (1, 1), (2, 2), (3, 3)]
    );
    // Path i: NIC queueing (i + 1) x 120 ns, 480 ns at 25 Gbps, (2 + i) us.
    for (i, x) in got.iter().enumerate() {
        let i = i as u64;
        assert_eq!(
            x.at,
            Instant::from_ns(120 * (i + 1) + 480 + 1_000 * (2 + i))
        );
    }
    let back = &pair.net.host(pair.a).arrivals;
    assert_eq!(
        back.iter().map(|x| (x.path, x.id)).collect::<Vec<_>>(),
        [(2, 9)]
    );
    assert_eq!(
        pair.net
            .link_stats(pair.reverse[2])
            .class(Priority::Control)
            .sent,
        1
    );
}
