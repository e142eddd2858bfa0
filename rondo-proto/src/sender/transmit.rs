//! Transmission: path selection and packet selection through the seams, DATA and
//! probe emission, pacing and the line-rate clock.

use super::{Core, Sender, SentPacket};
use crate::cc::CongestionControl;
use crate::config::FlowConfig;
use crate::recovery::LossRecovery;
use crate::scheduler::PacketSelector;
use crate::select::PathSelector;
use crate::time::{Duration, Instant};
use crate::transmit::{PayloadRef, Priority, Transmit, TxBuffer};
use crate::wire::{Body, CommonRepr, DataRepr, Flags, ProbeRepr, Repr};
use crate::Psn;

/// The packet a transmission on a chosen path carries.
enum Pick {
    /// This PSN; `retx`: a retransmission.
    Send { psn: u64, retx: bool },
    /// None: the path waits for this transmission and another one is chosen.
    Rest,
    /// Nothing to send now.
    Nothing,
}

/// What a probe asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProbeKind {
    /// For spare capacity: filling the line while the windows block data (§4.2),
    /// or asking a path out of rotation back while others carry the flow.
    /// MTU-sized, at the lowest priority, so that it only takes what data leaves.
    Capacity,
    /// Whether a path delivers at all: header-sized, at data priority. Sent when
    /// every path of the flow is out of rotation, and by transports without the
    /// low-priority class ([`CongestionControl::low_priority_probes`]). At probe
    /// priority it is dropped behind a congested fabric's data, so paths that
    /// only lost packets to congestion never rejoin: with no path left the flow
    /// stalls for good; with one left, a sprayed flow is single-path for good.
    Liveness,
}

impl Sender {
    /// The next probe or DATA packet, written into a buffer taken from `tx` once
    /// its path and length are chosen. A payload stays in its message (with
    /// [`Transmit::payload`] saying where, its `source` left 0 for the endpoint to
    /// fill in) when `tx` takes payloads by reference and the message allows it.
    pub(crate) fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
        remote_flow: u32,
    ) -> Option<Transmit> {
        let c = &mut self.core;
        if c.failed.is_some() {
            return None;
        }
        let down_probe = if c.probes_down_paths() {
            (0..c.paths.len()).find(|&i| !c.paths.is_up(i) && c.paths[i].next_down_probe <= now)
        } else {
            None
        };
        if let Some(p) = down_probe {
            c.paths[p].next_down_probe = now + c.cfg.down_probe_interval;
            // While another path carries the flow, a path out of rotation is spare
            // capacity, asked for at probe priority where the transport has it;
            // with none left, the flow's only way forward is an answer, asked for
            // at data priority.
            let kind = if self.cc.low_priority_probes() && c.paths.up() > 0 {
                ProbeKind::Capacity
            } else {
                ProbeKind::Liveness
            };
            return c.emit_probe(now, p, kind, tx, remote_flow);
        }
        if !c.has_data() {
            return None;
        }
        if !self.cc.paced() || now >= self.core.pace_next {
            let c = &mut self.core;
            c.open.resize(c.paths.len(), 0.0);
            self.cc.open_windows(&c.paths, &mut c.open);
            loop {
                let Some(path) = self.selector.select(&self.core.open) else {
                    self.select_blocked = true;
                    break;
                };
                self.select_blocked = false;
                match self.pick_psn(now, path) {
                    Pick::Send { psn, retx } => {
                        return self.emit_data(now, path, psn, retx, tx, remote_flow)
                    }
                    Pick::Rest => self.core.open[path] = 0.0,
                    Pick::Nothing => return None,
                }
            }
        }
        None
    }

    /// Whether the flow is in a capacity-probing phase (§4.2.2), or its
    /// controller wants probes to measure ([`CongestionControl::sends_probes`]),
    /// with data waiting and a path to probe: the endpoint then offers it the
    /// host line's spare transmission opportunities ([`Sender::poll_probe`]).
    pub(crate) fn wants_probe(&self, now: Instant) -> bool {
        let c = &self.core;
        c.failed.is_none() && c.has_data() && self.cc.sends_probes(now) && c.paths.up() > 0
    }

    /// A capacity probe on the next path in rotation after the last probed, if
    /// the flow [wants one](Sender::wants_probe). The endpoint calls it when no
    /// connection has data to send now and the host line has room: one line
    /// clock for all its connections, so that probing stays within the host's
    /// line rate however many flows probe at once.
    pub(crate) fn poll_probe<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
        remote_flow: u32,
    ) -> Option<Transmit> {
        if !self.wants_probe(now) {
            return None;
        }
        let c = &mut self.core;
        let n = c.paths.len();
        let cc = &self.cc;
        let p = (1..=n)
            .map(|k| (c.probe_rr + k) % n)
            .find(|&i| c.paths.is_up(i) && cc.probes_path(now, i))?;
        c.probe_rr = p;
        c.emit_probe(now, p, ProbeKind::Capacity, tx, remote_flow)
    }

    /// The PSN a transmission on `path` carries now: the oldest retransmission,
    /// else the unsent PSN the packet selector ranks for the path.
    fn pick_psn(&mut self, now: Instant, path: usize) -> Pick {
        let c = &mut self.core;
        if let Some(psn) = c.retx.pop_first(&c.table, c.base) {
            return Pick::Send { psn, retx: true };
        }
        let k = self.scheduler.rank(now, path, &c.paths);
        let Some(psn) = c.unsent.kth(k) else {
            return Pick::Nothing;
        };
        let span = |w: Option<u64>| w.is_some_and(|w| psn >= c.una + w);
        if !(span(c.rx_window) || span(c.psn_window)) {
            Pick::Send { psn, retx: false }
        } else if k > 1 {
            // A slower path's skip lies beyond what the receiver can hold: sent
            // with a lower PSN, its packet would arrive behind the faster paths'
            // and the reordering would fill the small buffer again.
            Pick::Rest
        } else {
            match c.unsent.lowest() {
                Some(psn) => Pick::Send { psn, retx: false },
                None => Pick::Nothing,
            }
        }
    }

    fn emit_data<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        path: usize,
        psn: u64,
        retx: bool,
        tx: &mut B,
        remote_flow: u32,
    ) -> Option<Transmit> {
        let c = &mut self.core;
        let idx = (psn - c.base) as usize;
        self.recovery.on_transmit(psn);
        if !retx {
            c.unsent.mark_sent(psn);
            while c.table.len() <= idx {
                c.table.push_back(SentPacket::default());
            }
        }
        let mi = c
            .messages
            .partition_point(|m| m.first_psn + m.packets <= psn);
        let msg = &c.messages[mi];
        let offset = (psn - msg.first_psn) * c.payload;
        let len = (msg.data.len() as u64 - offset).min(c.payload) as usize;
        let mut flags = Flags::empty();
        if retx {
            flags.insert(Flags::RETX);
        }
        let repr = Repr {
            common: CommonRepr {
                flow: remote_flow,
                psn: Psn(psn as u32),
                path: path as u16,
                flags,
                timestamp_ns: now.as_ns(),
            },
            body: Body::Data(DataRepr {
                msg_id: msg.id,
                msg_len: msg.data.len() as u64,
                offset,
                payload_len: len,
            }),
        };
        let hdr = repr.header_len_with_token(c.cfg.token);
        let total = hdr + len;
        // By reference: the payload stays where it is from the first byte that can
        // (the message's head, or an address of its external body): bytes before
        // that (the owned head's end, when the payload straddles head and body) are
        // copied after the header, and the rest is referenced. Otherwise, or when
        // nothing can stay, all of it is copied after the header.
        let copied = if tx.payload_by_reference() {
            msg.data.split_point(offset as usize, len)
        } else {
            None
        };
        let (written, payload) = match copied {
            Some(k) => (
                hdr + k,
                Some(PayloadRef {
                    source: 0,
                    key: msg.first_psn,
                    offset: offset + k as u64,
                    len: (len - k) as u32,
                }),
            ),
            None => (total, None),
        };
        let buf = tx.take(path as u16, Priority::Data, written);
        repr.emit_header_with_token(buf, c.cfg.token).ok()?;
        msg.data.read(offset as usize, &mut buf[hdr..written]);
        if payload.is_some() {
            c.stats.payloads_by_reference += 1;
        }
        c.last_data = Some((psn as u32, retx));

        let entry = &mut c.table[idx];
        entry.queued = false;
        entry.in_flight = true;
        entry.path = path as u16;
        entry.sent_at = now;
        entry.ahead = c.paths.inflight(path).min(u32::from(u16::MAX)) as u16;
        entry.tx_count = entry.tx_count.saturating_add(1);
        c.paths.add_in_flight(path);
        self.cc.on_sent(now, path, &c.paths);
        let p = &mut c.paths[path];
        p.last_sent = Some(now);
        p.counters.data_sent += 1;
        c.stats.data_packets_sent += 1;
        c.stats.data_bytes_sent += total as u64;
        if retx {
            c.stats.retransmissions += 1;
        }
        let rate = self.cc.pacing_rate(&c.paths);
        if rate > 0.0 {
            let gap = Duration::from_us_f64(total as f64 / c.cfg.mtu as f64 / rate);
            c.pace_next = c.pace_next.max(burst_floor(&c.cfg, now, gap)) + gap;
        }
        let in_flight = c.in_flight_count();
        self.recovery.on_transmitted(now, in_flight);
        Some(Transmit {
            path: path as u16,
            priority: Priority::Data,
            len: written,
            flow: 0,
            payload,
        })
    }
}

/// The host line clock `clock` moved past a `len`-byte datagram sent at `now`
/// at the line rate of a flow configured by `cfg`, with its burst credit.
pub(crate) fn line_clock_after(
    cfg: &FlowConfig,
    clock: Instant,
    now: Instant,
    len: usize,
) -> Instant {
    let wire = Duration::serialisation(len as u64, cfg.line_rate_bps);
    clock.max(burst_floor(cfg, now, wire)) + wire
}

/// The earliest a pacing clock may lag `now`: `pacing_burst - 1` slots of `gap`
/// (exactly `now` without burst credit).
fn burst_floor(cfg: &FlowConfig, now: Instant, gap: Duration) -> Instant {
    let credit = gap.saturating_mul(u64::from(cfg.pacing_burst - 1));
    Instant::from_ps(now.as_ps().saturating_sub(credit.as_ps()))
}

impl Core {
    fn emit_probe<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        path: usize,
        kind: ProbeKind,
        tx: &mut B,
        remote_flow: u32,
    ) -> Option<Transmit> {
        let (pad, priority) = match kind {
            ProbeKind::Capacity => (
                self.cfg.mtu
                    - crate::wire::PROBE_HEADER_LEN
                    - crate::wire::token_overhead(self.cfg.token),
                Priority::Probe,
            ),
            ProbeKind::Liveness => (0, Priority::Data),
        };
        let repr = Repr {
            common: CommonRepr {
                flow: remote_flow,
                psn: Psn(self.probe_seq),
                path: path as u16,
                flags: Flags::empty(),
                timestamp_ns: now.as_ns(),
            },
            body: Body::Probe(ProbeRepr { pad_len: pad }),
        };
        let len = repr.buffer_len_with_token(self.cfg.token);
        repr.emit_with_token(tx.take(path as u16, priority, len), self.cfg.token)
            .ok()?;
        let out = &mut self.paths[path].probes_outstanding;
        if out.len() == crate::path::MAX_PROBES_OUTSTANDING {
            out.pop_front();
        }
        out.push_back(self.probe_seq);
        self.probe_seq = self.probe_seq.wrapping_add(1);
        self.paths[path].counters.probes_sent += 1;
        self.stats.probes_sent += 1;
        Some(Transmit {
            path: path as u16,
            priority,
            len,
            flow: 0,
            payload: None,
        })
    }
}
