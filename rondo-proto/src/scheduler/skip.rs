//! Rondo's skip scheduler: eq. (7)'s skips, their phase-counted variant, and
//! when the scheduler starts.

use super::PacketSelector;
use crate::cc::{AnyCc, CongestionControl};
use crate::config::FlowConfig;
use crate::event::Event;
use crate::path::Paths;
use crate::time::Instant;
use std::collections::VecDeque;

/// The skips of eq. (7) from per-path transmission rates (packets per ns) and
/// forward delays (ns, any common offset; `None` for a path without an estimate or
/// out of rotation): skip_p = round( sum_{p' != p} rate_p' * max(D_p - D_p', 0) ).
pub fn skips(rates_per_ns: &[f64], delays_ns: &[Option<f64>], out: &mut [u32]) {
    for (p, slot) in out.iter_mut().enumerate() {
        *slot = skip_of(p, rates_per_ns, delays_ns);
    }
}

/// Path `p`'s skip of [`skips`].
fn skip_of(p: usize, rates_per_ns: &[f64], delays_ns: &[Option<f64>]) -> u32 {
    let Some(dp) = delays_ns[p] else {
        return 0;
    };
    let mut sum = 0.0;
    for (q, (&rate, dq)) in rates_per_ns.iter().zip(delays_ns).enumerate() {
        if let (true, Some(dq)) = (q != p, dq) {
            sum += rate * (dp - dq).max(0.0);
        }
    }
    crate::time::round_u64(sum).min(u64::from(u32::MAX)) as u32
}

/// The skip of a transmission on path `p` at `now_ns`, counting the other paths'
/// actual upcoming opportunities rather than their fluid rate: path q, whose next
/// transmission is expected at `next_ns[q]` and then every `1 / rates_per_ns[q]`,
/// contributes the opportunities it has before `now + D_p - D_q` (App. C.4, eq. (55)
/// without the fluid rounding). A path already past its expected next transmission
/// contributes the rounded expected count instead. Paths without a delay estimate
/// contribute nothing.
pub fn phase_skip(
    p: usize,
    now_ns: f64,
    rates_per_ns: &[f64],
    delays_ns: &[Option<f64>],
    next_ns: &[f64],
) -> u64 {
    phase_skip_by(p, now_ns, rates_per_ns, delays_ns, |q| next_ns[q])
}

/// [`phase_skip`] with path q's expected next transmission read by `next_ns(q)`,
/// only for the paths that can contribute (a rate, a delay estimate, and a
/// shorter delay than p's).
#[inline]
fn phase_skip_by(
    p: usize,
    now_ns: f64,
    rates_per_ns: &[f64],
    delays_ns: &[Option<f64>],
    next_ns: impl Fn(usize) -> f64,
) -> u64 {
    let Some(dp) = delays_ns[p] else { return 0 };
    let mut skip = 0u64;
    for q in 0..rates_per_ns.len() {
        let (Some(dq), rate) = (delays_ns[q], rates_per_ns[q]) else {
            continue;
        };
        if q == p || rate <= 0.0 || dp <= dq {
            continue;
        }
        let horizon = now_ns + (dp - dq);
        let next = next_ns(q);
        if next >= now_ns {
            // On schedule: its opportunities at next, next + 1/r, ... before the horizon.
            if next < horizon {
                skip += ((horizon - next) * rate).ceil() as u64;
            }
        } else {
            // Overdue (held by its window or the pacer): its phase is unknown, so count
            // the expected number of opportunities in the window, rounded. Counting
            // it as due now would add one skip per overdue path for any delay
            // difference, however small, and reorder equal-delay paths.
            skip += crate::time::round_u64((horizon - now_ns) * rate);
        }
    }
    skip
}

/// A path's forward delay (ns) for a transmission now under
/// `FlowConfig::scheduler_ahead`: the estimate `d_ns`, plus (or minus) the
/// packets in flight on the path now beyond the `ahead` its samples' packets
/// found, at the path's `rate_per_ns`. The queue a packet sent now meets is
/// the one in flight now. The count moves by one with every send and ACK, so
/// the first packet of difference is its granularity, not a queue that moved
/// ([`AHEAD_DEADBAND_PACKETS`]); a difference beyond a quarter of `ahead` is a
/// transient of the controller (start-up, a probing phase's jump) that the
/// estimate sees within a round trip ([`AHEAD_MOST_FRACTION`]). `ahead`
/// `None` (fewer than [`AHEAD_MIN_PACKETS`]) or no rate: the estimate as it is.
pub fn delay_now(d_ns: f64, ahead: Option<f64>, inflight: u32, rate_per_ns: f64) -> f64 {
    let Some(ahead) = ahead.filter(|_| rate_per_ns > 0.0) else {
        return d_ns;
    };
    let beyond = f64::from(inflight) - ahead;
    let beyond = beyond.signum() * (beyond.abs() - AHEAD_DEADBAND_PACKETS).max(0.0);
    let most = AHEAD_MOST_FRACTION * ahead;
    d_ns + beyond.clamp(-most, most) / rate_per_ns
}

/// The fewest packets a path must keep in flight on average (its forward-delay
/// samples' packets found ahead of them) for `FlowConfig::scheduler_ahead` to
/// correct its delay: below it a flow's own packets are not what queues at the
/// path, and a packet more or less in flight says little about the delay
/// (docs/engine.md "Packets ahead (row 7)").
pub const AHEAD_MIN_PACKETS: f64 = 16.0;

/// The part of a path's in-flight difference that `FlowConfig::scheduler_ahead`
/// leaves uncorrected, packets (the count's own granularity).
pub const AHEAD_DEADBAND_PACKETS: f64 = 1.0;

/// The most a path's in-flight difference may correct under
/// `FlowConfig::scheduler_ahead`, as a fraction of the packets ahead of its
/// samples' packets.
pub const AHEAD_MOST_FRACTION: f64 = 0.25;

/// Rondo's packet scheduler (paper §4.3): a transmission on path p carries the
/// (skip_p + 1)-th smallest unsent PSN, so that packets sent on slower paths carry
/// higher PSNs and arrive in order. It starts when every path in rotation has
/// `scheduler_stable_samples` consecutive stable forward-delay samples and an RTT,
/// and probing is over or the paths' forward delays span more than
/// `scheduler_start_gap` (docs/engine.md, "The scheduler's rate term and when it
/// starts" and "The scheduler during probing (row 8)"); until then, and when
/// `scheduler` is off, it sends the lowest unsent PSN.
#[derive(Clone, Debug)]
pub struct SkipScheduler {
    /// `FlowConfig::scheduler`: may it start at all.
    allowed: bool,
    /// `FlowConfig::scheduler_phase`: count the other paths' opportunities from
    /// their phase at every transmission, instead of eq. (7)'s skips.
    phase: bool,
    stable_samples: u32,
    /// `FlowConfig::scheduler_ahead`.
    ahead: bool,
    /// `FlowConfig::scheduler_start_gap`, picoseconds.
    start_gap_ps: Option<u64>,
    on: bool,
    enabled_at: Option<Instant>,
    /// Eq. (7)'s skip per path, as of the last update (when not `skip_stale`).
    skip: Vec<u32>,
    /// An update took new rates and delays into the scratch and `skip` has not
    /// been recomputed from them yet: it is recomputed when it is read, so that an
    /// update costs O(P), not eq. (7)'s O(P^2) (the phase-counted scheduler, the
    /// default, never reads it on the transmit path).
    skip_stale: bool,
    scratch: SkipScratch,
}

/// Reusable buffers of the skip computations (no allocation per update).
#[derive(Clone, Debug, Default)]
struct SkipScratch {
    /// Per path: transmission rate in packets per ns (0 when unusable).
    rates: Vec<f64>,
    /// Per path: forward delay in ns (`None` when unusable).
    delays: Vec<Option<f64>>,
    /// Per path: the packets ahead of the forward-delay samples' packets
    /// (`PathState::fwd_ahead`; `None`: no correction), with `ahead` on.
    ahead: Vec<Option<f64>>,
    /// Per path: the delay for a transmission now, with `ahead` on.
    now_delays: Vec<Option<f64>>,
}

impl SkipScheduler {
    /// The scheduler of a flow configured by `cfg`.
    pub fn new(cfg: &FlowConfig) -> SkipScheduler {
        SkipScheduler {
            allowed: cfg.scheduler,
            phase: cfg.scheduler_phase,
            stable_samples: cfg.scheduler_stable_samples,
            ahead: cfg.scheduler_ahead,
            start_gap_ps: cfg.scheduler_start_gap.map(|g| g.as_ps()),
            on: false,
            enabled_at: None,
            skip: vec![0; usize::from(cfg.paths)],
            skip_stale: false,
            scratch: SkipScratch::default(),
        }
    }

    /// Takes every path's measured transmission rate and forward delay, from which
    /// its skip (eq. (7)) is recomputed when next read. The paper estimates a path's transmission rate as
    /// W_p / RTT_p; we use the measured data transmission rate of the path (the
    /// congestion controller's EWMA over update intervals), which is the quantity
    /// eq. (7) multiplies and does not overestimate when the flow's pacer, not its
    /// window, limits the path. See docs/engine.md.
    fn take_skip_inputs(&mut self, paths: &Paths, cc: &AnyCc) {
        let sc = &mut self.scratch;
        sc.rates.clear();
        sc.delays.clear();
        sc.ahead.clear();
        for (i, p) in paths.iter().enumerate() {
            let usable = paths.is_up(i) && p.srtt.is_some();
            sc.rates
                .push(if usable { cc.path_rate(i) / 1e3 } else { 0.0 });
            sc.delays
                .push(if usable { p.forward_delay_ns() } else { None });
            if self.ahead {
                sc.ahead
                    .push(p.fwd_ahead.filter(|&a| a >= AHEAD_MIN_PACKETS));
            }
        }
        self.skip_stale = true;
    }

    /// `skip` from the rates and delays of the last update.
    fn refresh_skips(&mut self) {
        if self.skip_stale {
            let sc = &self.scratch;
            skips(&sc.rates, &sc.delays, &mut self.skip);
            self.skip_stale = false;
        }
    }

    /// The skip of a transmission on `path` now, from the other paths' phases.
    fn phase_skip(&mut self, path: usize, now: Instant, paths: &Paths) -> u64 {
        let now_ns = now.as_ps() as f64 / 1e3;
        if self.scratch.rates.len() != paths.len() {
            return u64::from(self.skip[path]); // no skip computation yet
        }
        if self.ahead {
            let sc = &mut self.scratch;
            sc.now_delays.clear();
            for q in 0..sc.rates.len() {
                let (d, a, r) = (sc.delays[q], sc.ahead[q], sc.rates[q]);
                sc.now_delays
                    .push(d.map(|d| delay_now(d, a, paths.inflight(q), r)));
            }
        }
        let sc = &self.scratch;
        let delays = if self.ahead {
            &sc.now_delays
        } else {
            &sc.delays
        };
        // A path's next transmission: one interval at its rate after its last
        // (now, without one); read only for the paths that count.
        let next = |q: usize| match paths[q].last_sent {
            Some(t) => t.as_ps() as f64 / 1e3 + 1.0 / sc.rates[q],
            None => now_ns,
        };
        phase_skip_by(path, now_ns, &sc.rates, delays, next)
    }
}

impl PacketSelector for SkipScheduler {
    fn rank(&mut self, now: Instant, path: usize, paths: &Paths) -> u64 {
        if !self.on {
            1
        } else if self.phase {
            self.phase_skip(path, now, paths) + 1
        } else {
            self.refresh_skips();
            u64::from(self.skip[path]) + 1
        }
    }

    fn on_update(&mut self, now: Instant, paths: &Paths, cc: &AnyCc, events: &mut VecDeque<Event>) {
        let probing = cc.probing(now);
        if self.allowed && !self.on && (!probing || self.start_gap_ps.is_some()) {
            // While probing, windows still jump: the delays are not settled yet,
            // unless the paths' delays differ by more than any jump explains
            // (`FlowConfig::scheduler_start_gap`).
            let need = self.stable_samples;
            let mut any = false;
            let mut ready = true;
            let (mut lo, mut hi) = (i64::MAX, i64::MIN);
            for (_, p) in paths.iter().enumerate().filter(|&(i, _)| paths.is_up(i)) {
                let Some(d) = p.fwd_delay_ps.filter(|_| p.srtt.is_some()) else {
                    ready = false;
                    break;
                };
                if p.fwd_stable_samples < need {
                    ready = false;
                    break;
                }
                (lo, hi) = (lo.min(d), hi.max(d));
                any = true;
            }
            let gap = |g: u64| hi.abs_diff(lo) > g;
            if ready && any && (!probing || self.start_gap_ps.is_some_and(gap)) {
                self.on = true;
                self.enabled_at = Some(now);
                events.push_back(Event::SchedulerEnabled);
            }
        }
        if self.on {
            self.take_skip_inputs(paths, cc);
        }
    }

    fn on_paths_changed(&mut self, paths: &Paths, cc: &AnyCc) {
        self.take_skip_inputs(paths, cc);
    }

    fn enabled_at(&self) -> Option<Instant> {
        self.enabled_at
    }

    fn skip(&self, path: usize) -> u32 {
        if self.skip_stale {
            let sc = &self.scratch;
            return skip_of(path, &sc.rates, &sc.delays);
        }
        self.skip[path]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The correction of `scheduler_ahead`: the packets in flight beyond the
    /// first of difference, at the path's rate, within a quarter of those ahead;
    /// none without enough packets ahead or a rate.
    #[test]
    fn the_delay_now_counts_the_packets_in_flight_beyond_those_ahead() {
        // 10 us; a packet per 100 ns.
        let (d, rate) = (10_000.0, 0.01);
        // 24 ahead, 27 in flight: two packets beyond the first, 200 ns later.
        assert_eq!(delay_now(d, Some(24.0), 27, rate), 10_200.0);
        assert_eq!(delay_now(d, Some(24.0), 21, rate), 9_800.0);
        // One packet either way is the count's granularity.
        for n in [23, 24, 25] {
            assert_eq!(delay_now(d, Some(24.0), n, rate), d);
        }
        // At most a quarter of those ahead (6 packets): start-up and probing
        // jumps are the controller's transients.
        assert_eq!(delay_now(d, Some(24.0), 60, rate), 10_600.0);
        assert_eq!(delay_now(d, Some(24.0), 0, rate), 9_400.0);
        // Fewer than AHEAD_MIN_PACKETS ahead (None), or no rate: as it is.
        assert_eq!(delay_now(d, None, 40, rate), d);
        assert_eq!(delay_now(d, Some(24.0), 40, 0.0), d);
    }
}
