//! Send-queue accounting: work-request chains with one doorbell per batch,
//! selective signaling and inline sends, as plain data.
//!
//! Every send WR gets a sequence number (its `wr_id`) and the send-buffer slot
//! `wr_id % depth`. One WR in `signal_every` asks for a completion; a signaled
//! completion retires it and every unsignaled WR posted before it, which frees
//! their slots. WRs of at most `max_inline` bytes are sent inline (the NIC copies
//! them at post time). [`SendQueue::chains`] cuts what is planned into chains of at
//! most `max_chain` WRs, each posted with one `ibv_post_send` (one doorbell).

use thiserror::Error;

/// Parameters of a UD send queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendConfig {
    /// Send-queue depth (WRs outstanding at most) and send-buffer slots.
    pub depth: usize,
    /// WRs per `ibv_post_send` chain at most. Default 16 (eRPC's recipe).
    pub max_chain: usize,
    /// One WR in this many is signaled. Default 64; at most `depth / 2`, so that
    /// the queue never fills with WRs no completion will retire.
    pub signal_every: usize,
    /// Largest datagram sent inline, in bytes (0: never). Default 60; the device's
    /// `max_inline_data` caps it.
    pub max_inline: usize,
}

impl Default for SendConfig {
    fn default() -> SendConfig {
        SendConfig {
            depth: 512,
            max_chain: 16,
            signal_every: 64,
            max_inline: 60,
        }
    }
}

/// A send-queue configuration or completion that does not fit.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SendError {
    /// The configuration cannot work.
    #[error("invalid send-queue configuration: {0}")]
    Config(&'static str),
    /// A completion names a WR that is not outstanding.
    #[error("completion for wr_id {wr_id}, but outstanding WRs are {first}..{end}: a completion from another QP or a bug in the driver")]
    UnknownCompletion {
        /// The completion's WR id.
        wr_id: u64,
        /// First outstanding WR id.
        first: u64,
        /// One past the last posted WR id.
        end: u64,
    },
}

/// One planned send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// Sequence number, used as the WR id.
    pub wr_id: u64,
    /// Send-buffer slot holding the datagram.
    pub slot: usize,
    /// Datagram length in bytes.
    pub len: usize,
    /// Address handle (path and priority) it goes through.
    pub ah: usize,
    /// Remote QP number.
    pub remote_qpn: u32,
    /// Sent inline.
    pub inline: bool,
    /// Asks for a completion.
    pub signaled: bool,
}

/// Counters of a send queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendCounters {
    /// WRs planned.
    pub wrs: u64,
    /// WR chains cut (one doorbell each).
    pub doorbells: u64,
    /// WRs sent inline.
    pub inline: u64,
    /// WRs signaled.
    pub signaled: u64,
}

/// Send-queue accounting of one QP.
#[derive(Clone, Debug)]
pub struct SendQueue {
    cfg: SendConfig,
    /// Next WR id.
    next: u64,
    /// First WR id not yet retired.
    retired: u64,
    counters: SendCounters,
}

impl SendQueue {
    /// A send queue; errors on a configuration that cannot work.
    pub fn new(cfg: SendConfig) -> Result<SendQueue, SendError> {
        if cfg.depth < 2 {
            return Err(SendError::Config("depth must be at least 2"));
        }
        if cfg.max_chain == 0 || cfg.max_chain > cfg.depth {
            return Err(SendError::Config("max_chain must be 1..=depth"));
        }
        if cfg.signal_every == 0 || cfg.signal_every > cfg.depth / 2 {
            return Err(SendError::Config(
                "signal_every must be 1..=depth/2, or the queue can fill with WRs no completion retires",
            ));
        }
        Ok(SendQueue {
            cfg,
            next: 0,
            retired: 0,
            counters: SendCounters::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SendConfig {
        &self.cfg
    }

    /// WRs posted and not yet retired by a completion.
    pub fn outstanding(&self) -> usize {
        (self.next - self.retired) as usize
    }

    /// WRs that can be planned now.
    pub fn room(&self) -> usize {
        self.cfg.depth - self.outstanding()
    }

    /// Counters so far.
    pub fn counters(&self) -> SendCounters {
        self.counters
    }

    /// The slot the next planned WR will use, when there is room for one.
    pub fn next_slot(&self) -> Option<usize> {
        (self.room() > 0).then(|| (self.next % self.cfg.depth as u64) as usize)
    }

    /// Plans a WR for a datagram of `len` bytes already written to
    /// [`SendQueue::next_slot`]; `None` when the queue is full.
    pub fn plan(&mut self, len: usize, ah: usize, remote_qpn: u32) -> Option<SendWr> {
        let slot = self.next_slot()?;
        let wr_id = self.next;
        self.next += 1;
        let signaled = (wr_id + 1) % self.cfg.signal_every as u64 == 0;
        let inline = len <= self.cfg.max_inline;
        self.counters.wrs += 1;
        self.counters.inline += u64::from(inline);
        self.counters.signaled += u64::from(signaled);
        Some(SendWr {
            wr_id,
            slot,
            len,
            ah,
            remote_qpn,
            inline,
            signaled,
        })
    }

    /// Cuts `wrs` into chains of at most `max_chain`, one doorbell each, and
    /// counts the doorbells.
    pub fn chains<'a>(&mut self, wrs: &'a [SendWr]) -> std::slice::Chunks<'a, SendWr> {
        self.counters.doorbells += wrs.len().div_ceil(self.cfg.max_chain) as u64;
        wrs.chunks(self.cfg.max_chain)
    }

    /// A completion of WR `wr_id` (signaled, or failed): it and every WR posted
    /// before it are retired and their slots free. Returns how many were retired.
    pub fn complete(&mut self, wr_id: u64) -> Result<usize, SendError> {
        if wr_id < self.retired || wr_id >= self.next {
            return Err(SendError::UnknownCompletion {
                wr_id,
                first: self.retired,
                end: self.next,
            });
        }
        let n = (wr_id + 1 - self.retired) as usize;
        self.retired = wr_id + 1;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(depth: usize, max_chain: usize, signal_every: usize) -> SendQueue {
        SendQueue::new(SendConfig {
            depth,
            max_chain,
            signal_every,
            max_inline: 60,
        })
        .unwrap()
    }

    #[test]
    fn chains_of_sixteen_one_doorbell_each() {
        let mut q = queue(512, 16, 64);
        let wrs: Vec<SendWr> = (0..40).map(|_| q.plan(1024, 0, 9).unwrap()).collect();
        let lens: Vec<usize> = q.chains(&wrs).map(<[SendWr]>::len).collect();
        assert_eq!(lens, [16, 16, 8]);
        assert_eq!(q.counters().doorbells, 3);
        assert_eq!(q.counters().wrs, 40);
    }

    #[test]
    fn every_nth_is_signaled_and_retires_those_before() {
        let mut q = queue(16, 4, 8);
        let wrs: Vec<SendWr> = (0..16).map(|_| q.plan(100, 0, 9).unwrap()).collect();
        let signaled: Vec<u64> = wrs.iter().filter(|w| w.signaled).map(|w| w.wr_id).collect();
        assert_eq!(signaled, [7, 15]);
        assert_eq!(q.room(), 0);
        assert!(q.plan(100, 0, 9).is_none(), "full queue plans nothing");
        assert_eq!(q.complete(7), Ok(8));
        assert_eq!(q.room(), 8);
        // Slots are reused in order once retired.
        assert_eq!(q.plan(100, 0, 9).unwrap().slot, 0);
        assert!(matches!(
            q.complete(3),
            Err(SendError::UnknownCompletion { wr_id: 3, .. })
        ));
        assert!(matches!(
            q.complete(99),
            Err(SendError::UnknownCompletion { wr_id: 99, .. })
        ));
        assert_eq!(q.complete(15), Ok(8));
        assert_eq!(q.outstanding(), 1);
    }

    #[test]
    fn small_datagrams_go_inline() {
        let mut q = queue(16, 4, 8);
        let ack = q.plan(56, 1, 9).unwrap();
        let data = q.plan(4096, 0, 9).unwrap();
        let edge = q.plan(60, 0, 9).unwrap();
        assert!(ack.inline && edge.inline && !data.inline);
        assert_eq!(q.counters().inline, 2);
        assert_eq!((ack.slot, data.slot, edge.slot), (0, 1, 2));
    }

    #[test]
    fn bad_configurations_are_refused() {
        let cfg = SendConfig::default();
        for bad in [
            SendConfig { depth: 1, ..cfg },
            SendConfig {
                max_chain: 0,
                ..cfg
            },
            SendConfig {
                signal_every: 0,
                ..cfg
            },
            SendConfig {
                depth: 64,
                signal_every: 33,
                ..cfg
            },
        ] {
            assert!(matches!(SendQueue::new(bad), Err(SendError::Config(_))));
        }
        assert!(SendQueue::new(cfg).is_ok());
    }
}
