//! NIC completion timestamps, as plain data: the NIC's free-running clock in
//! ticks ([`NicClock`]: `hca_core_clock` kHz, `completion_timestamp_mask` bits),
//! its wrap-around ([`Unwrap`]), its mapping onto the host clock the engine runs
//! on ([`HostMap`]), and NIC-level RTT samples from the send completion of a DATA
//! packet and the receive completion of its ACK ([`RttMatcher`]).
//!
//! How the driver uses them (DESIGN.md, "Get delay samples early"):
//! - every received datagram is handed to the engine at its NIC arrival time
//!   (mapped onto the host clock) instead of the time its completion was polled,
//!   so the receiver's ACK carries a NIC-level receive time (the engine's
//!   forward-delay samples) and the sender times each ACK at its arrival (the
//!   engine's RTT samples);
//! - a signaled DATA send's completion time and its ACK's arrival time, both on the
//!   NIC clock, give a NIC-level RTT sample without any host latency in it
//!   (`VerbsDatapath::take_rtt_samples`).

use rondo_proto::time::{Duration, Instant};
use std::collections::{HashMap, VecDeque};

/// The NIC clock of a device: `completion_timestamp_mask` (which bits of a
/// completion timestamp are valid) and `hca_core_clock` (its frequency, kHz), from
/// `ibv_query_device_ex`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NicClock {
    /// Valid bits of a raw timestamp (low bits; the counter wraps at `mask + 1`).
    pub mask: u64,
    /// Ticks per millisecond.
    pub khz: u64,
}

impl NicClock {
    /// The clock, when the device offers completion timestamps (a mask and a
    /// frequency both above 0).
    pub fn new(mask: u64, khz: u64) -> Option<NicClock> {
        (mask != 0 && khz != 0).then_some(NicClock { mask, khz })
    }

    /// Nanoseconds of `ticks` ticks (exact to the nanosecond below, no overflow).
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        let ns = u128::from(ticks) * 1_000_000 / u128::from(self.khz);
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// Ticks from raw timestamp `earlier` to raw timestamp `later`, across one
    /// wrap of the counter.
    pub fn delta_ticks(&self, earlier: u64, later: u64) -> u64 {
        later.wrapping_sub(earlier) & self.mask
    }
}

/// Extends raw, wrapping timestamps to a 64-bit tick count that never wraps.
/// Timestamps may come slightly out of order (send and receive CQs are polled
/// apart): a step of more than half the counter's range counts as backwards.
#[derive(Clone, Copy, Debug)]
pub struct Unwrap {
    clock: NicClock,
    last_raw: Option<u64>,
    ext: u64,
}

impl Unwrap {
    /// A fresh unwrapper for `clock`.
    pub fn new(clock: NicClock) -> Unwrap {
        Unwrap {
            clock,
            last_raw: None,
            ext: 0,
        }
    }

    /// The extended tick count of raw timestamp `raw`.
    pub fn extend(&mut self, raw: u64) -> u64 {
        let raw = raw & self.clock.mask;
        let Some(last) = self.last_raw else {
            self.last_raw = Some(raw);
            self.ext = raw;
            return raw;
        };
        let fwd = self.clock.delta_ticks(last, raw);
        let half = self.clock.mask / 2;
        if fwd <= half {
            self.ext = self.ext.wrapping_add(fwd);
            self.last_raw = Some(raw);
            self.ext
        } else {
            // Behind the newest timestamp: report it, keep the newest as reference.
            let back = self.clock.delta_ticks(raw, last);
            self.ext.saturating_sub(back)
        }
    }

    /// Nanoseconds on the extended NIC clock of raw timestamp `raw`.
    pub fn extend_ns(&mut self, raw: u64) -> u64 {
        let ticks = self.extend(raw);
        self.clock.ticks_to_ns(ticks)
    }
}

/// Samples per window of the [`HostMap`] offset filter.
const MAP_WINDOW: u32 = 4096;

/// Maps NIC nanoseconds onto the host clock. A completion is always polled after
/// it happened, so `host poll time - NIC time` is at least the true offset; the
/// smallest such difference seen (over the current and the previous window of
/// samples, so that the estimate follows a drifting NIC clock) is the offset.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostMap {
    offset_ps: Option<i128>,
    window_min: Option<i128>,
    prev_min: Option<i128>,
    in_window: u32,
}

impl HostMap {
    /// The host time of NIC time `nic_ns`, given that its completion was polled at
    /// `polled`; never later than `polled`.
    pub fn map(&mut self, nic_ns: u64, polled: Instant) -> Instant {
        let diff = i128::from(polled.as_ps()) - i128::from(nic_ns) * 1000;
        self.window_min = Some(self.window_min.map_or(diff, |m| m.min(diff)));
        self.in_window += 1;
        if self.in_window >= MAP_WINDOW {
            self.prev_min = self.window_min.take();
            self.in_window = 0;
        }
        let offset = match (self.window_min, self.prev_min) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(diff),
        };
        self.offset_ps = Some(offset);
        let ps = i128::from(nic_ns) * 1000 + offset;
        let ps = u64::try_from(ps.max(0)).unwrap_or(u64::MAX);
        Instant::from_ps(ps).min(polled)
    }

    /// The current offset estimate (host minus NIC), in picoseconds.
    pub fn offset_ps(&self) -> Option<i128> {
        self.offset_ps
    }
}

/// A NIC-level RTT sample: the NIC send time of a DATA packet to the NIC arrival
/// time of its ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NicRttSample {
    /// Local flow id of the connection.
    pub flow: u32,
    /// The path the DATA packet took (the ACK's `acked_path`).
    pub path: u16,
    /// The DATA packet's PSN.
    pub psn: u32,
    /// The round-trip time on the NIC clock.
    pub rtt: Duration,
}

/// A DATA packet's send, waiting for the other half of its sample.
#[derive(Clone, Copy, Debug)]
struct TxRecord {
    /// The host timestamp in its header, which its ACK echoes.
    header_ts_ns: u64,
    /// NIC send time, once its completion was polled.
    nic_ns: Option<u64>,
}

/// Records kept at most (old ones are dropped first).
const MAX_RECORDS: usize = 4096;
/// Samples kept for `take_rtt_samples` at most (old ones are dropped first).
const MAX_SAMPLES: usize = 1024;

/// Pairs signaled DATA sends with their ACKs. A send is matched by flow, PSN and
/// the header timestamp its ACK echoes, so an ACK of a retransmission never pairs
/// with the first transmission's send time.
#[derive(Debug, Default)]
pub struct RttMatcher {
    /// wr_id -> (flow, psn), for signaled DATA sends not yet completed.
    by_wr: HashMap<u64, (u32, u32)>,
    by_psn: HashMap<(u32, u32), TxRecord>,
    order: VecDeque<(u32, u32)>,
    samples: VecDeque<NicRttSample>,
    /// Samples made so far.
    pub made: u64,
}

impl RttMatcher {
    /// A signaled send `wr_id` carries DATA packet `psn` of `flow` with header
    /// timestamp `header_ts_ns`.
    pub fn on_send(&mut self, wr_id: u64, flow: u32, psn: u32, header_ts_ns: u64) {
        if self.order.len() >= MAX_RECORDS {
            if let Some(old) = self.order.pop_front() {
                self.by_psn.remove(&old);
                self.by_wr.retain(|_, v| *v != old);
            }
        }
        self.by_wr.insert(wr_id, (flow, psn));
        let rec = TxRecord {
            header_ts_ns,
            nic_ns: None,
        };
        if self.by_psn.insert((flow, psn), rec).is_none() {
            self.order.push_back((flow, psn));
        }
    }

    /// Send `wr_id` completed at NIC time `nic_ns`.
    pub fn on_send_completion(&mut self, wr_id: u64, nic_ns: u64) {
        if let Some(key) = self.by_wr.remove(&wr_id) {
            if let Some(rec) = self.by_psn.get_mut(&key) {
                rec.nic_ns = Some(nic_ns);
            }
        }
    }

    /// An ACK for `flow` arrived at NIC time `nic_ns`, acknowledging `psn` sent on
    /// `path` and echoing header timestamp `echo_ns`: a sample when that send's
    /// NIC time is known.
    pub fn on_ack(
        &mut self,
        flow: u32,
        psn: u32,
        path: u16,
        echo_ns: u64,
        nic_ns: u64,
    ) -> Option<NicRttSample> {
        let rec = *self.by_psn.get(&(flow, psn))?;
        if rec.header_ts_ns != echo_ns {
            return None; // the ACK of another transmission of this PSN
        }
        let sent = rec.nic_ns?;
        self.by_psn.remove(&(flow, psn));
        let sample = NicRttSample {
            flow,
            path,
            psn,
            rtt: Duration::from_ns(nic_ns.checked_sub(sent)?),
        };
        if self.samples.len() >= MAX_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
        self.made += 1;
        Some(sample)
    }

    /// Moves the samples made since the last call into `out`.
    pub fn take(&mut self, out: &mut Vec<NicRttSample>) {
        out.extend(self.samples.drain(..));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_convert_to_nanoseconds_at_the_core_clock() {
        // ConnectX-6 Dx: 1 GHz.
        let c = NicClock::new(u64::MAX, 1_000_000).unwrap();
        assert_eq!(c.ticks_to_ns(12_345), 12_345);
        // 156.25 MHz (ConnectX-4): 6.4 ns per tick.
        let c = NicClock::new(u64::MAX, 156_250).unwrap();
        assert_eq!(c.ticks_to_ns(5), 32);
        assert_eq!(c.ticks_to_ns(156_250_000), 1_000_000_000, "one second");
        // No overflow at the top of the range.
        assert_eq!(c.ticks_to_ns(u64::MAX), u64::MAX);
        assert_eq!(NicClock::new(0, 1000), None, "no timestamps");
        assert_eq!(NicClock::new(u64::MAX, 0), None, "no frequency");
    }

    #[test]
    fn deltas_and_unwrapping_cross_the_mask() {
        let c = NicClock::new((1 << 16) - 1, 1_000_000).unwrap();
        assert_eq!(c.delta_ticks(0xFFF0, 0x0010), 0x20, "across the wrap");
        let mut u = Unwrap::new(c);
        assert_eq!(u.extend(0xFFF0), 0xFFF0);
        assert_eq!(u.extend(0x0010), 0x1_0010, "wrapped once");
        assert_eq!(
            u.extend(0xFFFF_0020),
            0x1_0020,
            "bits above the mask ignored"
        );
        // A slightly older timestamp (another CQ) is behind, not a whole wrap ahead.
        assert_eq!(u.extend(0xFFF8), 0xFFF8);
        assert_eq!(u.extend(0x8000), 0x1_8000);
        assert_eq!(u.extend(0xC000), 0x1_C000);
        assert_eq!(u.extend(0x0001), 0x2_0001, "wrapped twice");
        assert_eq!(u.extend_ns(0x0002), 0x2_0002);
    }

    #[test]
    fn host_map_tracks_the_earliest_offset_and_never_maps_past_the_poll() {
        let mut m = HostMap::default();
        // NIC time 1000 ns polled at host 5 us: offset at most 4 us.
        let t = m.map(1000, Instant::from_ns(5000));
        assert_eq!(t, Instant::from_ns(5000));
        // Polled sooner after the fact: the offset shrinks to 3.5 us.
        let t = m.map(2000, Instant::from_ns(5500));
        assert_eq!(t, Instant::from_ns(5500));
        assert_eq!(m.offset_ps(), Some(3_500_000));
        // A completion polled late maps to its NIC time plus the offset.
        let t = m.map(3000, Instant::from_ns(9000));
        assert_eq!(t, Instant::from_ns(6500));
        // Drift: after two windows of larger differences the old minimum is gone.
        for i in 0..2 * MAP_WINDOW as u64 {
            m.map(10_000 + i, Instant::from_ns(14_000 + i));
        }
        assert_eq!(m.offset_ps(), Some(4_000_000));
    }

    #[test]
    fn rtt_samples_pair_a_send_with_the_ack_of_that_transmission() {
        let mut r = RttMatcher::default();
        r.on_send(64, 1, 100, 5_000);
        // ACK before the send completion was polled: no sample, the record stays.
        assert_eq!(r.on_ack(1, 100, 2, 5_000, 9_000), None);
        r.on_send_completion(64, 6_000);
        // An ACK echoing another transmission's timestamp does not pair.
        assert_eq!(r.on_ack(1, 100, 2, 4_000, 9_000), None);
        let s = r.on_ack(1, 100, 2, 5_000, 10_500).unwrap();
        assert_eq!(
            s,
            NicRttSample {
                flow: 1,
                path: 2,
                psn: 100,
                rtt: Duration::from_ns(4_500)
            }
        );
        assert_eq!(r.on_ack(1, 100, 2, 5_000, 11_000), None, "used once");
        let mut out = Vec::new();
        r.take(&mut out);
        assert_eq!((out.len(), r.made), (1, 1));
        // Unknown completions and ACKs change nothing.
        r.on_send_completion(7, 1);
        assert_eq!(r.on_ack(9, 9, 0, 0, 1), None);
    }

    #[test]
    fn rtt_records_are_bounded() {
        let mut r = RttMatcher::default();
        for i in 0..(MAX_RECORDS as u32 + 10) {
            r.on_send(u64::from(i), 1, i, 1);
        }
        assert_eq!(r.by_psn.len(), MAX_RECORDS);
        assert!(r.by_wr.len() <= MAX_RECORDS);
        r.on_send_completion(5, 100);
        assert_eq!(r.on_ack(1, 5, 0, 1, 200), None, "dropped as oldest");
    }
}
