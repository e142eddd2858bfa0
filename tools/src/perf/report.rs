//! Measuring a run and printing it: perftest's table, a latency table, or one flat JSON
//! object with perftest's key names plus Rondo's.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Width of one goodput bucket.
const BUCKET: Duration = Duration::from_millis(1);
/// Buckets in the window over which the peak goodput is taken (10 ms).
const PEAK_WINDOW: usize = 10;

/// Counts delivered bytes over time: average goodput over the run and the peak over
/// any 10 ms window (runs shorter than that report the average as their peak).
#[derive(Debug)]
pub struct Meter {
    start: Instant,
    buckets: Vec<u64>,
    bytes: u64,
    messages: u64,
    first: Option<Duration>,
    last: Duration,
}

impl Meter {
    /// A meter whose clock starts now.
    pub fn start() -> Meter {
        Meter {
            start: Instant::now(),
            buckets: Vec::new(),
            bytes: 0,
            messages: 0,
            first: None,
            last: Duration::ZERO,
        }
    }

    /// Records `messages` completions carrying `bytes` now.
    pub fn record(&mut self, bytes: u64, messages: u64) {
        let at = self.start.elapsed();
        let i = (at.as_nanos() / BUCKET.as_nanos()) as usize;
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, 0);
        }
        self.buckets[i] += bytes;
        self.bytes += bytes;
        self.messages += messages;
        self.first.get_or_insert(at);
        self.last = at;
    }

    /// Bytes recorded.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Messages recorded.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Time from the start to the last record.
    pub fn elapsed(&self) -> Duration {
        self.last
    }

    /// Time from the first record to the last.
    pub fn active(&self) -> Duration {
        self.last - self.first.unwrap_or(self.last)
    }

    /// Bytes per elapsed time, in Gb/s (0 before anything is recorded).
    pub fn average_gbps(&self) -> f64 {
        gbps(self.bytes, self.last)
    }

    /// The best 10 ms window, in Gb/s, never below the average.
    pub fn peak_gbps(&self) -> f64 {
        // The last bucket is partial: leave it out of the windows.
        let full = self.buckets.len().saturating_sub(1);
        let window = BUCKET * PEAK_WINDOW as u32;
        let best = (PEAK_WINDOW..=full)
            .map(|end| self.buckets[end - PEAK_WINDOW..end].iter().sum::<u64>())
            .max()
            .map_or(0.0, |b| gbps(b, window));
        best.max(self.average_gbps())
    }
}

/// CPU time (user and system) this process has used, from `/proc/self/stat` (Linux;
/// `None` elsewhere). Resolution: 10 ms.
pub fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold blanks.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 of the line, in USER_HZ (100 Hz) ticks.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// `bytes` over `time`, in Gb/s.
pub fn gbps(bytes: u64, time: Duration) -> f64 {
    if time.is_zero() {
        return 0.0;
    }
    bytes as f64 * 8.0 / time.as_nanos() as f64
}

/// Round-trip latency percentiles, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Latency {
    /// Shortest round trip.
    pub min_us: f64,
    /// Mean round trip.
    pub avg_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Longest round trip.
    pub max_us: f64,
}

/// Collects round-trip times (nanoseconds, 3 significant digits, up to one minute).
pub struct LatencyRecorder {
    histogram: Histogram<u64>,
}

impl LatencyRecorder {
    /// An empty recorder.
    pub fn new() -> LatencyRecorder {
        LatencyRecorder {
            histogram: Histogram::new_with_bounds(1, 60_000_000_000, 3)
                .expect("valid histogram bounds"),
        }
    }

    /// Records one round trip (clamped to the histogram's range).
    pub fn record(&mut self, rtt: Duration) {
        let ns = (rtt.as_nanos() as u64).clamp(1, 60_000_000_000);
        self.histogram.saturating_record(ns);
    }

    /// The percentiles (all 0 without samples).
    pub fn summary(&self) -> Latency {
        let h = &self.histogram;
        let us = |ns: u64| ns as f64 / 1000.0;
        if h.is_empty() {
            return Latency {
                min_us: 0.0,
                avg_us: 0.0,
                p50_us: 0.0,
                p99_us: 0.0,
                p999_us: 0.0,
                max_us: 0.0,
            };
        }
        Latency {
            min_us: us(h.min()),
            avg_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

/// The result of one client run, as printed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    /// Message size, bytes.
    #[serde(rename = "MsgSize")]
    pub size: u64,
    /// Messages completed.
    pub n_iterations: u64,
    /// Peak goodput, Gb/s.
    #[serde(rename = "BW_peak")]
    pub bw_peak: f64,
    /// Average goodput, Gb/s.
    #[serde(rename = "BW_average")]
    pub bw_average: f64,
    /// Messages per second, millions.
    #[serde(rename = "MsgRate")]
    pub msg_rate: f64,
    /// Every byte was checked at the receiver against the seeded pattern and matched.
    pub verified: bool,
    /// Packets retransmitted (0 for raw UDP).
    pub retx_packets: u64,
    /// Largest OOD of any queue pair at the receiver (0 for raw UDP).
    pub ood_max: u64,
    /// Average OOD at the data receiver over its data packets (0 for raw UDP).
    pub ood_avg: f64,
    /// Largest 99th percentile of OOD of any queue pair at the data receiver.
    pub ood_p99: u64,
    /// Data packets the data receiver dropped with its reorder buffer full (each
    /// one NAKed and sent again).
    pub reorder_buffer_drops: u64,
    /// Operation (`send`, `write`, `read`).
    pub op: &'static str,
    /// Transport (`rondo`, `raw-udp`, `rc`).
    pub transport: &'static str,
    /// Datapath (`udp`, `verbs`).
    pub backend: &'static str,
    /// Paths per queue pair.
    pub paths: u32,
    /// Queue pairs.
    pub qps: u32,
    /// Datagrams received by the data receiver (Rondo: data packets, duplicates
    /// included).
    pub packets: u64,
    /// Raw UDP: datagrams sent but never received (0 for Rondo).
    pub lost_packets: u64,
    /// CPU seconds the client process used for the run (0: unknown).
    pub client_cpu_s: f64,
    /// CPU seconds the server process used for the run (0: unknown).
    pub server_cpu_s: f64,
    /// `packets` per CPU second of both processes together (0: unknown).
    pub packets_per_cpu_s: f64,
    /// Round trips, in latency mode.
    #[serde(skip)]
    pub latency: Option<Latency>,
}

/// The flat `--json` object: the outcome plus, in latency mode, `lat_*_us` keys.
pub fn to_json(o: &Outcome) -> String {
    let mut v = serde_json::to_value(o).expect("outcome serialises");
    if let (Some(l), Some(map)) = (o.latency, v.as_object_mut()) {
        map.insert("lat_min_us".into(), l.min_us.into());
        map.insert("lat_avg_us".into(), l.avg_us.into());
        map.insert("lat_p50_us".into(), l.p50_us.into());
        map.insert("lat_p99_us".into(), l.p99_us.into());
        map.insert("lat_p999_us".into(), l.p999_us.into());
        map.insert("lat_max_us".into(), l.max_us.into());
    }
    v.to_string()
}

const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// perftest's bandwidth table (or its latency table in latency mode).
pub fn to_table(o: &Outcome) -> String {
    let mut s = String::new();
    s.push_str(RULE);
    s.push('\n');
    match o.latency {
        None => {
            let _ = writeln!(
                s,
                " {:<10} {:<13} {:<18} {:<21} {:<14}",
                "#bytes", "#iterations", "BW peak[Gb/sec]", "BW average[Gb/sec]", "MsgRate[Mpps]"
            );
            let _ = writeln!(
                s,
                " {:<10} {:<13} {:<18.2} {:<21.2} {:<14.6}",
                o.size, o.n_iterations, o.bw_peak, o.bw_average, o.msg_rate
            );
        }
        Some(l) => {
            let _ = writeln!(
                s,
                " {:<10} {:<13} {:<12} {:<12} {:<12} {:<12} {:<12} {:<12}",
                "#bytes",
                "#iterations",
                "t_min[usec]",
                "t_max[usec]",
                "t_avg[usec]",
                "p50[usec]",
                "p99[usec]",
                "p99.9[usec]"
            );
            let _ = writeln!(
                s,
                " {:<10} {:<13} {:<12.2} {:<12.2} {:<12.2} {:<12.2} {:<12.2} {:<12.2}",
                o.size, o.n_iterations, l.min_us, l.max_us, l.avg_us, l.p50_us, l.p99_us, l.p999_us
            );
        }
    }
    s.push_str(RULE);
    s.push('\n');
    // No trailing blanks from the padded last column.
    let mut s: String = s.lines().map(|l| format!("{}\n", l.trim_end())).collect();
    let _ = writeln!(
        s,
        " {}{} {} over {} path(s) x {} QP(s); verified: {}; retx packets: {}; OOD max: {}{}",
        o.transport,
        if o.backend == "verbs" && o.transport == "rondo" {
            " (verbs)"
        } else {
            ""
        },
        o.op,
        o.paths,
        o.qps,
        if o.verified { "yes" } else { "no" },
        o.retx_packets,
        o.ood_max,
        if o.lost_packets > 0 {
            format!("; lost datagrams: {}", o.lost_packets)
        } else {
            String::new()
        }
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(latency: Option<Latency>) -> Outcome {
        Outcome {
            size: 65536,
            n_iterations: 1000,
            bw_peak: 12.5,
            bw_average: 10.25,
            msg_rate: 0.019551,
            verified: true,
            retx_packets: 3,
            ood_max: 2,
            ood_avg: 0.5,
            ood_p99: 1,
            reorder_buffer_drops: 0,
            op: "write",
            transport: "rondo",
            backend: "udp",
            paths: 4,
            qps: 1,
            packets: 0,
            lost_packets: 0,
            client_cpu_s: 0.0,
            server_cpu_s: 0.0,
            packets_per_cpu_s: 0.0,
            latency,
        }
    }

    #[test]
    fn json_is_flat_with_perftest_keys() {
        let v: serde_json::Value = serde_json::from_str(&to_json(&outcome(None))).unwrap();
        assert_eq!(v["MsgSize"], 65536);
        assert_eq!(v["n_iterations"], 1000);
        assert_eq!(v["BW_average"], 10.25);
        assert_eq!(v["verified"], true);
        assert!(v.get("lat_p50_us").is_none());
        let lat = Latency {
            min_us: 1.0,
            avg_us: 2.0,
            p50_us: 2.0,
            p99_us: 3.0,
            p999_us: 4.0,
            max_us: 5.0,
        };
        let v: serde_json::Value = serde_json::from_str(&to_json(&outcome(Some(lat)))).unwrap();
        assert_eq!(v["lat_p999_us"], 4.0);
        assert!(v.as_object().unwrap().values().all(|x| !x.is_object()));
    }

    #[test]
    fn table_has_perftest_columns() {
        let t = to_table(&outcome(None));
        assert!(
            t.contains("\n #bytes     #iterations   BW peak[Gb/sec]    BW average[Gb/sec]    MsgRate[Mpps]\n"),
            "{t}"
        );
        assert!(
            t.contains(
                "\n 65536      1000          12.50              10.25                 0.019551\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn meter_and_latency_summaries() {
        let mut m = Meter::start();
        assert_eq!(m.average_gbps(), 0.0);
        m.record(1000, 1);
        m.record(1000, 1);
        assert_eq!((m.bytes(), m.messages()), (2000, 2));
        assert!(m.peak_gbps() >= m.average_gbps());
        let mut r = LatencyRecorder::new();
        for us in 1..=1000u64 {
            r.record(Duration::from_micros(us));
        }
        let s = r.summary();
        assert!((s.p50_us - 500.0).abs() < 1.0, "{s:?}");
        assert!((s.p99_us - 990.0).abs() < 1.0, "{s:?}");
        assert!((s.max_us - 1000.0).abs() < 1.0, "{s:?}");
        assert_eq!(gbps(1_000, Duration::from_micros(1)), 8.0);
        let before = process_cpu().expect("Linux has /proc/self/stat");
        let mut x = 0u64;
        while process_cpu().unwrap() < before + Duration::from_millis(20) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0, "burning CPU shows in the count");
    }
}
