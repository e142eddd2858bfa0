//! How close the running emulator comes to its topology (`rondo fabric --measure`):
//! delivered rate and added delay per path against the configured values, and the
//! fabric thread's CPU time per datagram.
//!
//! Two phases, both from the first host's sockets to the second host's, through a
//! fabric on the topology's listen address:
//! 1. **rate**: one path after the other, rounds of one burst that fills 90% of the
//!    path's data queue, sent as fast as the socket takes it (so the measurement
//!    does not depend on a sender keeping pace on a loaded host); the fabric
//!    serialises each burst at the path's rate. The delivered rate is the bytes that arrived after each
//!    round's first datagram over the time from its first to its last arrival,
//!    summed over the rounds of the run's time;
//! 2. **delay**: with the queues drained, one datagram per path every 2 ms, stamped
//!    with its send time; the added delay is the median of arrival minus send time,
//!    against the configured delay plus the datagram's serialisation time.

use crate::run::{now, recv_stamped, set_int, wait_readable, wall_ns, Fabric, FabricError};
use crate::topology::Topology;
use rondo_proto::time::Duration;
use serde::Serialize;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration as StdDuration;

/// Probes of the delay phase per path.
const DELAY_SAMPLES: usize = 100;
/// Their spacing.
const DELAY_GAP: StdDuration = StdDuration::from_millis(2);

/// One path's measured values.
#[derive(Clone, Debug, Serialize)]
pub struct PathAccuracy {
    /// The path.
    pub path: usize,
    /// Configured rate, Mb/s.
    pub rate_mbps: f64,
    /// Delivered rate, Mb/s.
    pub measured_rate_mbps: f64,
    /// (measured - configured) / configured, percent.
    pub rate_error_pct: f64,
    /// Configured one-way delay plus one datagram's serialisation, µs.
    pub delay_us: f64,
    /// Median added delay, µs.
    pub measured_delay_us: f64,
    /// (measured - configured) / configured, percent.
    pub delay_error_pct: f64,
    /// Delay probes that arrived.
    pub delay_samples: usize,
}

/// The measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Accuracy {
    /// Per path.
    pub paths: Vec<PathAccuracy>,
    /// Datagram size used, bytes.
    pub datagram_bytes: usize,
    /// Datagrams the fabric handled.
    pub datagrams: u64,
    /// The fabric thread's CPU time per datagram, µs.
    pub cpu_us_per_datagram: f64,
    /// The fabric's counters at the end.
    pub counters: crate::Counters,
}

impl Accuracy {
    /// A table for people.
    pub fn to_table(&self) -> String {
        let mut s = format!(
            "{:>4} {:>10} {:>12} {:>8} {:>10} {:>12} {:>8}\n",
            "path", "rate_Mb/s", "measured", "err_%", "delay_us", "measured", "err_%"
        );
        for p in &self.paths {
            s += &format!(
                "{:>4} {:>10.2} {:>12.2} {:>8.2} {:>10.1} {:>12.1} {:>8.2}\n",
                p.path,
                p.rate_mbps,
                p.measured_rate_mbps,
                p.rate_error_pct,
                p.delay_us,
                p.measured_delay_us,
                p.delay_error_pct
            );
        }
        s += &format!(
            "{} datagrams of {} B, fabric CPU {:.2} us per datagram\n",
            self.datagrams, self.datagram_bytes, self.cpu_us_per_datagram
        );
        s += &self.counters.to_table();
        s
    }
}

/// A datagram the fabric classes as data: Rondo version 1, type DATA; bytes 8..12
/// carry the round, bytes 24..32 the send time.
fn datagram(len: usize, round: u32, sent_ns: u64) -> Vec<u8> {
    let mut d = vec![0u8; len.max(32)];
    d[0] = 1;
    d[1] = 1;
    d[8..12].copy_from_slice(&round.to_be_bytes());
    d[24..32].copy_from_slice(&sent_ns.to_be_bytes());
    d
}

/// What a receiver saw of one round.
#[derive(Default, Clone, Copy)]
struct Seen {
    round: u32,
    first_ns: u64,
    last_ns: u64,
    bytes_after_first: u64,
}

/// Rounds summed: bytes after each round's first arrival, and the spans.
#[derive(Default, Clone, Copy)]
struct Sum {
    bytes: u64,
    span_ns: u64,
}

impl Sum {
    fn add(&mut self, s: &Seen) {
        if s.last_ns > s.first_ns {
            self.bytes += s.bytes_after_first;
            self.span_ns += s.last_ns - s.first_ns;
        }
    }
}

/// Runs both phases, `rate_s` seconds of rate measurement with datagrams of `len`
/// bytes.
pub fn measure(topo: &Topology, rate_s: f64, len: usize) -> Result<Accuracy, FabricError> {
    let fabric = Fabric::spawn(topo)?;
    let to = fabric.addr();
    let (src, dst) = (&topo.hosts[0], &topo.hosts[1]);
    let npaths = topo.paths.len();
    let bind = |h: &crate::topology::HostSpec, i: u16| {
        let a = h.addr(i);
        UdpSocket::bind(a).map_err(|source| FabricError::Bind { addr: a, source })
    };
    let senders: Vec<UdpSocket> = (0..npaths as u16)
        .map(|i| bind(src, i))
        .collect::<Result<_, _>>()?;
    let receivers: Vec<UdpSocket> = (0..npaths as u16)
        .map(|i| bind(dst, i))
        .collect::<Result<_, _>>()?;
    // Which path each sender socket's port takes toward the second host.
    let path_of: Vec<usize> = senders
        .iter()
        .map(|s| {
            s.local_addr()
                .ok()
                .and_then(|a| {
                    topo.route_table()
                        .into_iter()
                        .find(|r| r.src_host == 0 && r.src_port == a.port())
                        .map(|r| r.path)
                })
                .unwrap_or(0)
        })
        .collect();
    let phase = Arc::new(AtomicBool::new(false)); // false: rate, true: delay
    let done = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for (i, r) in receivers.into_iter().enumerate() {
        let (phase, done) = (phase.clone(), done.clone());
        // Kernel receive times, so that a receiver thread that runs late on a
        // loaded host does not count against the fabric.
        let _ = set_int(&r, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 16 << 20);
        let _ = set_int(&r, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
        let _ = socket2::SockRef::from(&r).set_recv_buffer_size(8 << 20);
        handles.push(std::thread::spawn(move || {
            let mut seen: Option<Seen> = None;
            let mut sum = Sum::default();
            let mut delays = Vec::new();
            let mut buf = vec![0u8; 65_536];
            while !done.load(Ordering::Relaxed) {
                let Ok((n, _, stamp)) = recv_stamped(&r, &mut buf) else {
                    wait_readable(&r, StdDuration::from_millis(20));
                    continue;
                };
                let t = stamp.unwrap_or_else(wall_ns);
                if n < 32 {
                    continue;
                }
                let round = u32::from_be_bytes(buf[8..12].try_into().unwrap_or_default());
                if phase.load(Ordering::Relaxed) {
                    let sent = u64::from_be_bytes(buf[24..32].try_into().unwrap_or_default());
                    delays.push(t.saturating_sub(sent));
                    continue;
                }
                match &mut seen {
                    Some(s) if s.round == round => {
                        s.last_ns = t;
                        s.bytes_after_first += n as u64;
                    }
                    _ => {
                        if let Some(s) = &seen {
                            sum.add(s);
                        }
                        seen = Some(Seen {
                            round,
                            first_ns: t,
                            last_ns: t,
                            bytes_after_first: 0,
                        });
                    }
                }
            }
            if let Some(s) = &seen {
                sum.add(s);
            }
            (i, sum, delays)
        }));
    }
    // Rate phase: bursts of 90% of each path's data queue.
    let start = now();
    let burst: Vec<usize> = path_of
        .iter()
        .map(|&p| ((topo.paths[p].queue_kb.data * 1024.0 * 0.9) as usize / len).max(1))
        .collect();
    // One path at a time, so that the sender has to keep up with one path's rate
    // only (on a loaded host it cannot feed all of them at once).
    let mut round = 0u32;
    let share = Duration::from_us_f64(rate_s * 1e6 / npaths as f64);
    for (i, s) in senders.iter().enumerate() {
        let until = start + share.saturating_mul(i as u64 + 1);
        let p = &topo.paths[path_of[i]];
        let span = (burst[i] * len) as f64 * 8.0 / (p.rate_mbps * 1e6) + p.delay_us / 1e6;
        loop {
            round += 1;
            let payload = datagram(len, round, 0);
            for _ in 0..burst[i] {
                let _ = s.send_to(&payload, to);
            }
            std::thread::sleep(StdDuration::from_secs_f64(span * 1.1 + 0.01));
            if now() >= until {
                break;
            }
        }
    }
    // Let the queues drain: the largest data queue at the slowest rate, plus delay.
    let drain_s = topo
        .paths
        .iter()
        .map(|p| p.queue_kb.data * 8192.0 / (p.rate_mbps * 1e6) + p.delay_us / 1e6)
        .fold(0.0, f64::max);
    std::thread::sleep(StdDuration::from_secs_f64(drain_s + 0.05));
    phase.store(true, Ordering::Relaxed);
    std::thread::sleep(StdDuration::from_millis(20));
    for _ in 0..DELAY_SAMPLES {
        for s in &senders {
            let _ = s.send_to(&datagram(len, 0, wall_ns()), to);
        }
        std::thread::sleep(DELAY_GAP);
    }
    let max_delay = topo.paths.iter().map(|p| p.delay_us).fold(0.0, f64::max);
    std::thread::sleep(StdDuration::from_secs_f64(max_delay / 1e6 + 0.1));
    done.store(true, Ordering::Relaxed);
    let mut results: Vec<_> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
    results.sort_by_key(|r| r.0);
    let report = fabric.stop()?;
    let paths = results
        .into_iter()
        .map(|(i, sum, mut delays)| {
            // The receiver socket i gets path i (deliveries go to the path's socket).
            let p = &topo.paths[i];
            let measured = if sum.span_ns > 0 {
                sum.bytes as f64 * 8.0 / (sum.span_ns as f64 / 1e9) / 1e6
            } else {
                0.0
            };
            delays.sort_unstable();
            let median = delays.get(delays.len() / 2).copied().unwrap_or(0) as f64 / 1e3;
            let want = p.delay_us + len as f64 * 8.0 / p.rate_mbps;
            PathAccuracy {
                path: i,
                rate_mbps: p.rate_mbps,
                measured_rate_mbps: measured,
                rate_error_pct: (measured - p.rate_mbps) / p.rate_mbps * 100.0,
                delay_us: want,
                measured_delay_us: median,
                delay_error_pct: if want > 0.0 {
                    (median - want) / want * 100.0
                } else {
                    0.0
                },
                delay_samples: delays.len(),
            }
        })
        .collect();
    Ok(Accuracy {
        paths,
        datagram_bytes: len,
        datagrams: report.counters.datagrams_in,
        cpu_us_per_datagram: report.cpu_us_per_datagram(),
        counters: report.counters,
    })
}
