//! PLB re-pathing (Qureshi et al., SIGCOMM'22) as Falcon uses it per path: a
//! path whose delay stays above its Swift target for a random 5 to 7 rounds
//! (RTTs) in a row is moved.
//!
//! A round is congested when at least half of its ACKs saw a delay at or above
//! target (PLB's congested-round rule, with delay in place of ECN marks). Our
//! logical paths are fixed routes of the network (the simulator hashes the
//! path index; over UDP it is a source port), and the engine has no entropy it
//! could re-draw without the receiver's help, so a move is modelled as a fresh
//! start of the path's controller state ([`super::Swift`] restarts its window).

use crate::rng::Rng;
use crate::time::{Duration, Instant};

/// Rounds in a row that move a path: drawn uniformly from this range per move.
const ROUNDS: std::ops::Range<u64> = 5..8;

#[derive(Clone, Debug)]
struct PlbPath {
    round_end: Option<Instant>,
    acks: u32,
    over_target: u32,
    congested_rounds: u32,
    threshold: u32,
}

/// PLB state of a flow's paths.
#[derive(Clone, Debug)]
pub(crate) struct Plb {
    paths: Vec<PlbPath>,
    rng: Rng,
    repaths: u64,
}

impl Plb {
    /// PLB over `paths` paths, its random thresholds drawn from `seed`.
    pub(crate) fn new(paths: usize, seed: u64) -> Plb {
        let mut rng = Rng::new(seed ^ 0x504c_4200);
        let paths = (0..paths)
            .map(|_| PlbPath {
                round_end: None,
                acks: 0,
                over_target: 0,
                congested_rounds: 0,
                threshold: rng.gen_range(ROUNDS) as u32,
            })
            .collect();
        Plb {
            paths,
            rng,
            repaths: 0,
        }
    }

    /// Paths moved so far.
    pub(crate) fn repaths(&self) -> u64 {
        self.repaths
    }

    /// An ACK on `path` saw a delay at or above target (`over`); rounds last `rtt`.
    /// Returns true when the path is to be moved now.
    pub(crate) fn on_ack(&mut self, now: Instant, path: usize, over: bool, rtt: Duration) -> bool {
        let p = &mut self.paths[path];
        p.acks += 1;
        p.over_target += u32::from(over);
        let Some(end) = p.round_end else {
            p.round_end = Some(now + rtt);
            return false;
        };
        if now < end {
            return false;
        }
        let congested = 2 * p.over_target >= p.acks;
        p.congested_rounds = if congested { p.congested_rounds + 1 } else { 0 };
        p.acks = 0;
        p.over_target = 0;
        p.round_end = Some(now + rtt);
        if p.congested_rounds < p.threshold {
            return false;
        }
        p.congested_rounds = 0;
        p.round_end = None;
        p.threshold = self.rng.gen_range(ROUNDS) as u32;
        self.repaths += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_congested_for_its_threshold_of_rounds_moves() {
        let mut plb = Plb::new(2, 7);
        let threshold = plb.paths[0].threshold;
        assert!((5..=7).contains(&threshold));
        let rtt = Duration::from_us(10);
        let mut moved_at = None;
        // Every ACK over target, one ACK per microsecond: a round ends every 10 us.
        for us in 0..200u64 {
            if plb.on_ack(Instant::from_us(us), 0, true, rtt) {
                moved_at = Some(us);
                break;
            }
        }
        // The first ACK opens round 1; round k closes at 10 k us.
        assert_eq!(moved_at, Some(10 * u64::from(threshold)));
        assert_eq!(plb.repaths(), 1);
    }

    #[test]
    fn an_uncongested_round_starts_the_count_again() {
        let mut plb = Plb::new(1, 3);
        let rtt = Duration::from_us(10);
        for us in 0..1000u64 {
            // Rounds alternate four congested, one not: never enough in a row.
            let over = (us / 10) % 5 != 4;
            assert!(!plb.on_ack(Instant::from_us(us), 0, over, rtt), "{us}");
        }
        assert_eq!(plb.repaths(), 0);
    }
}
