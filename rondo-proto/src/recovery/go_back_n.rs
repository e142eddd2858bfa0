//! NAK-driven recovery of an RC NIC (docs/baselines.md, `rc-gbn` and `rc-sr`):
//! a NAK names the receiver's expected PSN e; go-back-N resends everything from e,
//! selective repeat resends e alone. No early recovery besides the NAK; a
//! retransmission timeout resends everything in flight. The NIC tracks a bounded
//! range of outstanding PSNs (ConnectX-7: 512): new PSNs wait beyond it.

use super::LossRecovery;
use super::RtoTimer;
use crate::config::FlowConfig;
use crate::event::Event;
use crate::sender::Core;
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

/// What a NAK of expected PSN e resends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NakRecovery {
    /// Everything sent from e on (RoCE go-back-N).
    GoBackN,
    /// e alone (ConnectX selective repeat: the receiver kept what came after).
    Selective,
}

/// RC loss recovery: NAKs, an RTO, and an outstanding-PSN limit.
///
/// A NAK is acted on only when it is newer than e's last transmission (the
/// packet the receiver NAKed was sent after e was): a NAK triggered before e was
/// resent says nothing about the resent copy. The RTO is max(`rto_min`, 3 x the
/// largest smoothed RTT), doubling per timeout without progress; the connection
/// fails after `retry_limit` of them (as [`super::SelectiveRepeat`]'s).
#[derive(Clone, Debug)]
pub struct GoBackN {
    mode: NakRecovery,
    psn_window: Option<u64>,
    rto_timer: RtoTimer,
}

impl GoBackN {
    /// The scheme of a flow configured by `cfg`, starting at `now`: NAKs resend
    /// as `mode` says, and at most `psn_window` PSNs are outstanding (from the
    /// lowest unacknowledged one; `None`: no limit).
    pub fn new(
        cfg: &FlowConfig,
        now: Instant,
        mode: NakRecovery,
        psn_window: Option<u64>,
    ) -> GoBackN {
        GoBackN {
            mode,
            psn_window,
            rto_timer: RtoTimer::new(cfg, now),
        }
    }
}

impl LossRecovery for GoBackN {
    fn set_rto_bounds(&mut self, min: Duration, max: Option<Duration>, retry_limit: u32) {
        self.rto_timer.set_bounds(min, max, retry_limit);
    }

    fn on_transmit(&mut self, _psn: u64) {}

    fn on_transmitted(&mut self, now: Instant, in_flight: u32) {
        self.rto_timer.on_transmitted(now, in_flight);
    }

    fn on_progress(&mut self, now: Instant) {
        self.rto_timer.on_progress(now);
    }

    fn detect_losses(&mut self, _now: Instant, _core: &mut Core) {}

    fn on_nak(&mut self, now: Instant, expected: u64, naked_sent: Instant, core: &mut Core) {
        let Some(first) = expected.checked_sub(core.base) else {
            return; // already delivered and forgotten
        };
        let first = first as usize;
        let Some(e) = core.table.get(first).copied() else {
            return;
        };
        if e.acked || e.tx_count == 0 || e.sent_at.as_ns() > naked_sent.as_ns() {
            return; // resent after the NAKed packet went out: a stale NAK
        }
        let end = match self.mode {
            NakRecovery::GoBackN => core.table.len(),
            NakRecovery::Selective => first + 1,
        };
        for i in first..end {
            let p = core.table[i];
            if p.in_flight && !p.acked {
                // Not counted toward path failure: the NAK proves the path delivers.
                core.declare_lost(core.base + i as u64, now, true);
            }
        }
    }

    fn psn_window(&self) -> Option<u64> {
        self.psn_window
    }

    fn poll_timeout(&self, core: &Core) -> Option<Instant> {
        self.rto_timer.deadline(core)
    }

    fn on_timeout(&mut self, now: Instant, core: &mut Core, events: &mut VecDeque<Event>) -> bool {
        self.rto_timer.fire(now, core, events)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{feedback, resent, send, sent};
    use crate::config::FlowConfig;
    use crate::sender::Sender;
    use crate::time::Instant;
    use crate::transport::Transport;
    use crate::wire::NakReason;

    fn rc(name: &str) -> FlowConfig {
        FlowConfig {
            transport: Transport::from_name(name).unwrap(),
            paths: 1,
            initial_window: 64.0,
            // Every packet goes out at once (DCQCN would pace them at line rate).
            pacing: false,
            ..FlowConfig::default()
        }
    }

    #[test]
    fn go_back_n_resends_everything_from_the_naked_psn() {
        let mut s = sent(&rc("rc-gbn"), 10);
        feedback(&mut s, 10, 0, 1, 0, None); // PSN 0 acknowledged
        feedback(&mut s, 11, 4, 1, 0, Some(NakReason::SequenceError)); // 1 missing, 4 dropped
        assert_eq!(resent(&mut s, 12), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
        // A NAK triggered by a packet sent before the go-back is stale.
        feedback(&mut s, 13, 6, 1, 0, Some(NakReason::SequenceError));
        assert_eq!(resent(&mut s, 14), Vec::<u32>::new());
        // One from after it (PSN 2's copy sent at 12 arrived, 1's did not) is not.
        feedback(&mut s, 40, 2, 1, 12, Some(NakReason::SequenceError));
        assert_eq!(resent(&mut s, 41), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn selective_repeat_resends_the_hole_once_per_transmission() {
        let mut s = sent(&rc("rc-sr"), 10);
        // PSN 1 is missing; 2..=5 arrive and are kept, each NAKing 1.
        feedback(&mut s, 10, 0, 1, 0, None);
        for psn in 2..=5 {
            feedback(
                &mut s,
                10 + u64::from(psn),
                psn,
                1,
                0,
                Some(NakReason::OutOfOrder),
            );
        }
        assert_eq!(
            resent(&mut s, 16),
            [1],
            "one resend for four NAKs (sent before it)"
        );
        feedback(&mut s, 17, 6, 1, 0, Some(NakReason::OutOfOrder));
        assert_eq!(resent(&mut s, 18), Vec::<u32>::new());
        // The NAKed PSNs were selectively acknowledged: the hole's ACK completes 0..=6.
        feedback(&mut s, 30, 1, 7, 16, None);
        assert_eq!(
            (s.core.base, s.core.table.len()),
            (7, 3),
            "0..=6 delivered and forgotten"
        );
        assert_eq!(s.core.stats.retransmissions, 1);
    }

    #[test]
    fn the_psn_window_holds_new_psns_until_the_lowest_is_acknowledged() {
        let cfg = FlowConfig {
            initial_window: 2000.0,
            // DCQCN caps inflight at 2 BDP: make that far more than 512 packets.
            initial_rtt: crate::time::Duration::from_us(200),
            ..rc("rc-sr")
        };
        let mut s = Sender::new(&cfg, Instant::ZERO);
        s.post(
            Instant::ZERO,
            1,
            vec![0u8; 600 * cfg.payload_per_packet()].into(),
            &mut Default::default(),
        );
        let n = std::iter::from_fn(|| send(&mut s, Instant::ZERO)).count();
        assert_eq!(n, 512);
        // PSN 0 acknowledged: PSN 512 may go, nothing more.
        feedback(&mut s, 200, 0, 1, 0, None);
        let more: Vec<(u32, bool)> =
            std::iter::from_fn(|| send(&mut s, Instant::from_us(200))).collect();
        assert_eq!(more, [(512, false)]);
        // Later PSNs acknowledged out of order do not move the window.
        feedback(&mut s, 201, 5, 1, 0, Some(NakReason::OutOfOrder));
        let _ = resent(&mut s, 201); // the hole, PSN 1
        assert_eq!(send(&mut s, Instant::from_us(201)), None);
    }

    #[test]
    fn packets_acknowledged_only_cumulatively_leave_inflight_on_a_timer_of_their_own() {
        // rc-sr whose NAKs a switch dropped: PSNs 0-8 were placed out of order
        // (their NAKs lost), 9 filled the hole; its ACK acknowledges all ten.
        let mut s = sent(&rc("rc-sr"), 10);
        feedback(&mut s, 10, 9, 10, 0, None);
        assert_eq!(
            s.core.paths.inflight(0),
            9,
            "known delivered, still counted"
        );
        // They leave two RTTs (10 us measured) after they were sent: a wake-up
        // then, not whenever another timer fires.
        let t = s.poll_timeout().expect("a wake-up for the expiry");
        assert!(t <= Instant::from_us(20), "{t:?}");
        s.handle_timeout(Instant::from_us(20), &mut std::collections::VecDeque::new());
        assert_eq!(s.core.paths.inflight(0), 0);
        assert_eq!(s.core.inflight_expiry, None);
    }
}
