//! Hosts that stop now and then (`SimConfig::host_stalls`): a software datapath's
//! thread waiting for a core. While a host is stalled, what reaches it waits in its
//! backlog (a socket's receive buffer) and its timer waits; when it resumes it
//! handles the backlog in arrival order, then its timer, as a descheduled thread
//! does when it runs again.

use super::Simulator;
use crate::net::Ev;
use rondo_proto::rng::Rng;
use rondo_proto::time::Duration;

/// A draw from the exponential distribution of mean `mean`.
pub(super) fn exponential(rng: &mut Rng, mean: Duration) -> Duration {
    // 1 - u is in (0, 1]: its logarithm is finite.
    mean.mul_f64(-(1.0 - rng.gen_f64()).ln())
}

impl Simulator {
    /// Whether host `host` is stalled now; an arrival or a timer then waits.
    pub(super) fn stalled(&self, host: u32) -> bool {
        self.hosts[host as usize]
            .stalled_until
            .is_some_and(|t| self.now < t)
    }

    /// Host `host` stops until a drawn time.
    pub(super) fn stall(&mut self, host: u32) {
        let Some(st) = &self.cfg.host_stalls else {
            return;
        };
        let length = st.length.mul_f64(0.5 + self.stall_rng.gen_f64());
        let until = self.now + length;
        self.hosts[host as usize].stalled_until = Some(until);
        self.agenda.push(until, Ev::StallEnd(host));
    }

    /// Host `host` resumes: its backlog in arrival order, then its timer and what it
    /// has to send; the next stall is drawn.
    pub(super) fn resume(&mut self, host: u32) {
        let hi = host as usize;
        self.hosts[hi].stalled_until = None;
        let backlog = std::mem::take(&mut self.hosts[hi].backlog);
        for &m in &backlog {
            self.deliver(host, m);
        }
        let mut backlog = backlog;
        backlog.clear();
        self.hosts[hi].backlog = backlog;
        if self.hosts[hi].timer_at.is_some_and(|t| t <= self.now) {
            let gen = self.hosts[hi].gen;
            self.on_timer(host, gen);
        }
        self.service(host);
        if let Some(st) = &self.cfg.host_stalls {
            let gap = exponential(&mut self.stall_rng, st.mean_gap);
            self.agenda.push(self.now + gap, Ev::StallStart(host));
        }
    }
}
