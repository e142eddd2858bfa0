//! Time series sampled at a fixed interval (see [`crate::Simulator::enable_trace`]).

use crate::LinkId;
use rondo_proto::time::{Duration, Instant};

/// One sample of a [`Trace`].
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSample {
    /// When it was taken.
    pub at: Instant,
    /// Queued bytes of each traced link, in [`Trace::links`] order.
    pub queue_bytes: Vec<u64>,
    /// NIC-level OOD summed over every host at that moment.
    pub nic_ood_sum: u64,
    /// The largest NIC-level OOD of any host at that moment.
    pub nic_ood_max: u64,
}

/// Queue and NIC-level OOD time series.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Sampling interval.
    pub interval: Duration,
    /// The links whose queues are sampled.
    pub links: Vec<LinkId>,
    /// The samples, in time order.
    pub samples: Vec<TraceSample>,
}

impl Trace {
    pub(crate) fn new(interval: Duration, links: Vec<LinkId>) -> Trace {
        Trace {
            interval,
            links,
            samples: Vec::new(),
        }
    }

    pub(crate) fn push(
        &mut self,
        at: Instant,
        queue_bytes: Vec<u64>,
        nic_ood_sum: u64,
        nic_ood_max: u64,
    ) {
        self.samples.push(TraceSample {
            at,
            queue_bytes,
            nic_ood_sum,
            nic_ood_max,
        });
    }
}
