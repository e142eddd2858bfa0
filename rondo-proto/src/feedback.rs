//! The receiver's feedback queue: ACKs and NAKs waiting for a transmit
//! opportunity, and ACK coalescing ([`AckCoalesce`]; docs/engine.md, "Coalesced
//! ACKs").
//!
//! Without coalescing every data packet gets its own ACK, queued when it arrives.
//! With it, the ACKs of accepted first transmissions gather in an open batch per
//! path; a batch closes into one datagram when it holds `packets` of them, when
//! its first waited `delay`, when a message's last packet arrives (every batch
//! then, when `delay` is not 0), when its blocks would not fit in a header, or before any other
//! feedback on its path (a retransmission's or duplicate's ACK, a probe ACK, a
//! NAK), which keeps the path's feedback in arrival order. The closed batch is
//! the per-packet ACK its newest arrival would have got (same cumulative ACK and
//! highest PSN), sent at the close on the batch's path, with the others as an
//! ACK block ([`crate::wire::AckBlock`]).

use crate::config::AckCoalesce;
use crate::time::{Duration, Instant};
use crate::transmit::{Priority, Transmit, TxBuffer};
use crate::wire::{
    self, ack_block_len, Body, CommonRepr, FeedbackRepr, Flags, NakReason, Repr, ACK_BLOCK_MAX_PSNS,
};
use crate::Psn;
use std::collections::VecDeque;

#[derive(Debug)]
struct Pending {
    at: Instant,
    path: u16,
    repr: Repr,
    /// How many entries at the front of [`FeedbackQueue::blocks`] go out with it.
    blocks: u16,
}

/// One acknowledged arrival waiting in a batch.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    fb: FeedbackRepr,
    ce: bool,
}

/// Arrivals on one path waiting for their ACK.
#[derive(Debug)]
struct Batch {
    path: u16,
    /// When the first arrival came (the batch is empty when `arrivals` is).
    since: Instant,
    /// Block bytes the batch would take if every arrival were in a block.
    bytes: usize,
    /// Flow id written into the batch's ACK.
    flow: u32,
    arrivals: Vec<Arrival>,
}

/// ACKs and NAKs to send, oldest first, and the open batches of coalesced ACKs,
/// one per path: an ACK returns on the path its packets came on, so that its
/// RTT samples and its effect on the path's inflight are the path's own.
#[derive(Debug)]
pub(crate) struct FeedbackQueue {
    queue: VecDeque<Pending>,
    /// The coalescing state; `None` for an ACK per packet (a pointer's size,
    /// no heap: a closed connection's tombstone keeps this queue).
    batches: Option<Box<Batches>>,
}

#[derive(Debug)]
struct Batches {
    coalesce: AckCoalesce,
    /// Header bytes an ACK has for blocks (the MTU and `header_words` bound it).
    budget: usize,
    /// One batch per path that had arrivals (empty ones are kept for reuse).
    open: Vec<Batch>,
    /// Block entries of queued ACKs, in queue order.
    blocks: VecDeque<Arrival>,
}

impl FeedbackQueue {
    /// A queue whose ACKs coalesce as `coalesce` says, in datagrams of at most
    /// `mtu` bytes carrying `token`.
    pub(crate) fn new(coalesce: AckCoalesce, mtu: usize, token: Option<u64>) -> FeedbackQueue {
        let fixed = wire::FEEDBACK_HEADER_LEN + wire::token_overhead(token);
        // Three bytes for the pads that round the header to whole words.
        let budget = mtu.min(wire::MAX_HEADER_LEN).saturating_sub(fixed + 3);
        FeedbackQueue {
            queue: VecDeque::new(),
            batches: coalesce.is_on().then(|| {
                Box::new(Batches {
                    coalesce,
                    budget,
                    open: Vec::new(),
                    blocks: VecDeque::new(),
                })
            }),
        }
    }

    /// Queues the ACK (or, with `nak`, the NAK) of an arrival whose feedback is
    /// `fb` (on path `fb.acked_path`), for the peer flow `flow`. `coalescible`: an
    /// accepted first transmission, which may share an ACK; `last`: it ends a
    /// message (every batch closes with it, unless the delay is 0 and the
    /// batches close at the next transmit anyway: the sender's completion waits).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        now: Instant,
        fb: FeedbackRepr,
        nak: Option<NakReason>,
        ce: bool,
        flow: u32,
        coalescible: bool,
        last: bool,
    ) {
        let Some(c) = self.batches.as_deref_mut() else {
            self.queue.push_back(pending(now, fb, nak, ce, flow, 0));
            return;
        };
        let q = &mut self.queue;
        let path = fb.acked_path;
        let i = match c.open.iter().position(|b| b.path == path) {
            Some(i) => i,
            None => {
                c.open.push(Batch {
                    path,
                    since: now,
                    bytes: 0,
                    flow,
                    arrivals: Vec::new(),
                });
                c.open.len() - 1
            }
        };
        if !coalescible || nak.is_some() {
            c.close(q, i, now);
            q.push_back(pending(now, fb, nak, ce, flow, 0));
            return;
        }
        let mut grow = growth(&c.open[i]);
        if !c.open[i].arrivals.is_empty() && c.open[i].bytes + grow > c.budget {
            c.close(q, i, now);
            grow = growth(&c.open[i]);
        }
        let b = &mut c.open[i];
        if b.arrivals.is_empty() {
            b.since = now;
        }
        b.arrivals.push(Arrival { fb, ce });
        b.bytes += grow;
        b.flow = flow;
        if last && c.coalesce.delay > Duration::ZERO {
            c.close_due(q, Instant::MAX, now);
        } else if b.arrivals.len() >= usize::from(c.coalesce.packets) {
            c.close(q, i, now);
        }
    }

    /// Closes the open batches (the flow is closing): each ACK goes out as its
    /// newest arrival's, without a hold; later feedback is per packet.
    pub(crate) fn close_now(&mut self) {
        if let Some(c) = self.batches.as_deref_mut() {
            while let Some(i) = c.open.iter().position(|b| !b.arrivals.is_empty()) {
                let at = c.open[i].arrivals.last().map(|a| a.fb.rx_timestamp_ns);
                c.close(&mut self.queue, i, Instant::from_ns(at.unwrap_or(0)));
            }
            c.coalesce = AckCoalesce::PER_PACKET;
            c.open = Vec::new();
            c.blocks.shrink_to_fit();
        }
        if self.batches.as_ref().is_some_and(|c| c.blocks.is_empty()) {
            self.batches = None;
        }
        self.queue.shrink_to_fit();
    }

    /// When the next datagram is due: the oldest queued one, or the earliest
    /// batch's deadline.
    pub(crate) fn due(&self) -> Option<Instant> {
        let queued = self.queue.front().map(|p| p.at);
        let Some(c) = self.batches.as_deref() else {
            return queued;
        };
        let open = c
            .open
            .iter()
            .filter(|b| !b.arrivals.is_empty())
            .map(|b| b.since + c.coalesce.delay)
            .min();
        match (queued, open) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Writes the oldest queued datagram into a buffer from `tx`, after closing
    /// the batches whose deadline has come by `now`.
    pub(crate) fn poll<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
        token: Option<u64>,
    ) -> Option<Transmit> {
        if let Some(c) = self.batches.as_deref_mut() {
            c.close_due(&mut self.queue, now, now);
        }
        let front = self.queue.front()?;
        let n = usize::from(front.blocks);
        let arrivals = match self.batches.as_deref_mut() {
            Some(c) if n > 0 => &c.blocks.make_contiguous()[..n],
            _ => &[],
        };
        let area: usize = arrivals
            .chunks(ACK_BLOCK_MAX_PSNS)
            .map(|c| ack_block_len(c.len()))
            .sum();
        let area = area.next_multiple_of(4);
        let len = front.repr.buffer_len_with_token(token) + area;
        if tx.capacity() < len {
            return None; // kept for a buffer that holds it
        }
        let buf = tx.take(front.path, Priority::Control, len);
        let written = if n == 0 {
            front.repr.emit_with_token(buf, token)
        } else {
            front
                .repr
                .emit_ack_with_area(buf, token, area)
                .and_then(|end| write_blocks(&mut buf[end - area..end], arrivals))
        };
        let p = self.queue.pop_front()?;
        if let Some(c) = self.batches.as_deref_mut() {
            c.blocks.drain(..n);
        }
        written.ok()?;
        Some(Transmit {
            path: p.path,
            priority: Priority::Control,
            len,
            flow: 0,
            payload: None,
        })
    }
}

impl Batches {
    /// Closes batch `i` into one ACK in `queue`, sent at `now`: its newest
    /// arrival's ACK, with the others as blocks.
    fn close(&mut self, queue: &mut VecDeque<Pending>, i: usize, now: Instant) {
        let b = &mut self.open[i];
        let Some(newest) = b.arrivals.pop() else {
            return;
        };
        let blocks = b.arrivals.len() as u16;
        self.blocks.extend(b.arrivals.drain(..));
        b.bytes = 0;
        queue.push_back(pending(now, newest.fb, None, newest.ce, b.flow, blocks));
    }

    /// Closes, at `now`, every batch whose first arrival came `delay` before
    /// `by` or earlier, oldest first.
    fn close_due(&mut self, queue: &mut VecDeque<Pending>, by: Instant, now: Instant) {
        while let Some(i) = self
            .open
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.arrivals.is_empty() && b.since + self.coalesce.delay <= by)
            .min_by_key(|(_, b)| b.since)
            .map(|(i, _)| i)
        {
            self.close(queue, i, now);
        }
    }
}

/// Block bytes one more arrival adds to batch `b`.
fn growth(b: &Batch) -> usize {
    if b.arrivals.len() % ACK_BLOCK_MAX_PSNS == 0 {
        ack_block_len(1)
    } else {
        4
    }
}

/// The queued form of one ACK or NAK for peer flow `flow`, sent on the arrival's path.
fn pending(
    at: Instant,
    fb: FeedbackRepr,
    nak: Option<NakReason>,
    ce: bool,
    flow: u32,
    blocks: u16,
) -> Pending {
    let mut flags = Flags::empty();
    if ce {
        flags.insert(Flags::ECN_ECHO);
    }
    let body = match nak {
        None => Body::Ack(fb),
        Some(r) => Body::Nak(fb, r),
    };
    let repr = Repr {
        common: CommonRepr {
            flow,
            psn: Psn::ZERO,
            path: fb.acked_path,
            flags,
            timestamp_ns: at.as_ns(),
        },
        body,
    };
    Pending {
        at,
        path: fb.acked_path,
        repr,
        blocks,
    }
}

/// Writes `arrivals` (of one path, in arrival order) as blocks of at most
/// [`ACK_BLOCK_MAX_PSNS`] into `area` (pads already there). Each block names its
/// newest arrival (the largest echoed send time, then PSN) first.
fn write_blocks(area: &mut [u8], arrivals: &[Arrival]) -> Result<usize, wire::WireError> {
    let mut at = 0;
    for run in arrivals.chunks(ACK_BLOCK_MAX_PSNS) {
        let newest = run
            .iter()
            .enumerate()
            .max_by_key(|(_, a)| (a.fb.echo_timestamp_ns, a.fb.acked_psn.0))
            .map_or(0, |(i, _)| i);
        let n = &run[newest].fb;
        let ce = run.iter().filter(|a| a.ce).count() as u8;
        let psns = std::iter::once(n.acked_psn).chain(
            run.iter()
                .enumerate()
                .filter(|&(i, _)| i != newest)
                .map(|(_, a)| a.fb.acked_psn),
        );
        let psns = ExactLen(psns, run.len());
        at += wire::emit_ack_block(
            &mut area[at..],
            n.acked_path,
            ce,
            n.echo_timestamp_ns,
            n.rx_timestamp_ns,
            psns,
        )?;
    }
    Ok(at)
}

/// An iterator of a known length.
struct ExactLen<I>(I, usize);

impl<I: Iterator<Item = Psn>> Iterator for ExactLen<I> {
    type Item = Psn;
    fn next(&mut self) -> Option<Psn> {
        let x = self.0.next()?;
        self.1 -= 1;
        Some(x)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.1, Some(self.1))
    }
}

impl<I: Iterator<Item = Psn>> ExactSizeIterator for ExactLen<I> {}
