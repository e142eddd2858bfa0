//! Transmission: path selection, packet selection (the scheduler's skip), DATA and
//! probe emission, pacing and the line-rate clock.

use super::{PayloadAt, Sender, SentPacket};
use crate::config::PathSelection;
use crate::path::PathStatus;
use crate::scheduler::phase_skip;
use crate::time::{Duration, Instant};
use crate::transmit::{Priority, Transmit};
use crate::wire::{Body, CommonRepr, DataRepr, Flags, ProbeRepr, Repr};
use crate::Psn;

impl Sender {
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        remote_flow: u32,
    ) -> Option<Transmit> {
        if self.failed.is_some() {
            return None;
        }
        if let Some(p) = (0..self.paths.len()).find(|&i| {
            self.paths[i].status == PathStatus::Down && self.paths[i].next_down_probe <= now
        }) {
            self.paths[p].next_down_probe = now + self.cfg.down_probe_interval;
            return self.emit_probe(now, p, buf, remote_flow);
        }
        if !self.has_data() {
            return None;
        }
        if !self.cfg.pacing || now >= self.pace_next {
            if let Some(path) = self.select_path() {
                return self.emit_data(now, path, buf, remote_flow);
            }
        }
        if self.probing(now) && now >= self.line_next {
            // Round robin over the paths in rotation, starting after the last probed.
            let n = self.paths.len();
            let next = (1..=n)
                .map(|k| (self.probe_rr + k) % n)
                .find(|&i| self.paths[i].status == PathStatus::Up);
            if let Some(p) = next {
                self.probe_rr = p;
                return self.emit_probe(now, p, buf, remote_flow);
            }
        }
        None
    }

    /// Deficit-based path selection (paper §4.2.3, eq. (6)), or random spraying.
    fn select_path(&mut self) -> Option<usize> {
        for (o, p) in self.open.iter_mut().zip(&self.paths) {
            *o = p.open_window();
        }
        match self.cfg.path_selection {
            PathSelection::Deficit => self.selector.select(&self.open),
            PathSelection::Random => {
                let n = self.open.iter().filter(|&&o| o > 0.0).count() as u64;
                if n == 0 {
                    return None;
                }
                let k = self.rng.gen_range(0..n) as usize;
                self.open
                    .iter()
                    .enumerate()
                    .filter(|(_, &o)| o > 0.0)
                    .nth(k)
                    .map(|(i, _)| i)
            }
        }
    }

    fn emit_data(
        &mut self,
        now: Instant,
        path: usize,
        buf: &mut [u8],
        remote_flow: u32,
    ) -> Option<Transmit> {
        let (psn, retx) = match self.retx.pop_first(&self.table, self.base) {
            Some(psn) => (psn, true),
            None => {
                let k = if !self.scheduler_on {
                    1
                } else if self.cfg.scheduler_phase {
                    self.phase_skip(path, now) + 1
                } else {
                    self.paths[path].skip as u64 + 1
                };
                let mut psn = self.unsent.kth(k)?;
                if self.rx_window.is_some_and(|w| psn >= self.una + w) {
                    psn = self.unsent.lowest()?; // the receiver cannot hold the skip
                }
                (psn, false)
            }
        };
        let idx = (psn - self.base) as usize;
        self.loss_scan = self.loss_scan.min(psn);
        if !retx {
            self.unsent.mark_sent(psn);
            while self.table.len() <= idx {
                self.table.push_back(SentPacket::default());
            }
        }
        let mi = self
            .messages
            .partition_point(|m| m.first_psn + m.packets <= psn);
        let msg = &self.messages[mi];
        let offset = (psn - msg.first_psn) * self.payload;
        let len = (msg.data.len() as u64 - offset).min(self.payload) as usize;
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
        let hdr = repr.emit_with_token(buf, self.cfg.token).ok()?;
        let total = hdr + len;
        // Split: the payload stays where it is from the first byte that can (the
        // message's head, or an address of its external body): bytes before that
        // (the owned head's end, when the payload straddles head and body) are
        // copied after the header, and the rest is referenced. Without split, or
        // when nothing can stay, all of it is copied after the header.
        let copied = if self.split {
            msg.data.split_point(offset as usize, len)
        } else {
            None
        };
        let written = match copied {
            Some(k) => {
                msg.data.read(offset as usize, &mut buf[hdr..hdr + k]);
                self.split_out = Some((msg.first_psn, offset + k as u64, (len - k) as u32));
                self.stats.payloads_by_reference += 1;
                hdr + k
            }
            None => {
                msg.data.read(offset as usize, &mut buf[hdr..total]);
                total
            }
        };

        let entry = &mut self.table[idx];
        entry.queued = false;
        entry.in_flight = true;
        entry.path = path as u16;
        entry.sent_at = now;
        entry.tx_count = entry.tx_count.saturating_add(1);
        let p = &mut self.paths[path];
        p.inflight += 1;
        p.sent_in_interval += 1;
        p.last_sent = Some(now);
        p.counters.data_sent += 1;
        self.stats.data_packets_sent += 1;
        self.stats.data_bytes_sent += total as u64;
        if retx {
            self.stats.retransmissions += 1;
        }
        let rate = self.pacing_rate();
        if rate > 0.0 {
            let gap = Duration::from_us_f64(total as f64 / self.cfg.mtu as f64 / rate);
            self.pace_next = self.pace_next.max(self.burst_floor(now, gap)) + gap;
        }
        self.advance_line_clock(now, total);
        if self.last_progress < now && self.in_flight_count() == 1 {
            self.last_progress = now; // the RTO runs from the first packet of a busy period
        }
        Some(Transmit {
            path: path as u16,
            priority: Priority::Data,
            len: written,
            flow: 0,
        })
    }

    /// [`Sender::poll_transmit`] that leaves a DATA payload in its message and says
    /// where: (message first PSN, offset, length).
    pub(crate) fn poll_transmit_split(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        remote_flow: u32,
    ) -> Option<(Transmit, Option<PayloadAt>)> {
        self.split = true;
        self.split_out = None;
        let t = self.poll_transmit(now, buf, remote_flow);
        self.split = false;
        t.map(|t| (t, self.split_out.take()))
    }

    /// The earliest a pacing clock may lag `now`: `pacing_burst - 1` slots of `gap`
    /// (exactly `now` without burst credit).
    fn burst_floor(&self, now: Instant, gap: Duration) -> Instant {
        let credit = gap.saturating_mul(u64::from(self.cfg.pacing_burst - 1));
        Instant::from_ps(now.as_ps().saturating_sub(credit.as_ps()))
    }

    /// Moves the line-rate clock past a `len`-byte datagram sent at `now`.
    fn advance_line_clock(&mut self, now: Instant, len: usize) {
        let wire = Duration::serialisation(len as u64, self.cfg.line_rate_bps);
        self.line_next = self.line_next.max(self.burst_floor(now, wire)) + wire;
    }

    /// The skip of a transmission on `path` now, from the other paths' phases.
    fn phase_skip(&mut self, path: usize, now: Instant) -> u64 {
        let now_ns = now.as_ps() as f64 / 1e3;
        let sc = &mut self.skip_scratch;
        if sc.rates.len() != self.paths.len() {
            return self.paths[path].skip as u64; // no skip computation yet
        }
        sc.next.clear();
        for (q, p) in self.paths.iter().enumerate() {
            let rate = sc.rates.get(q).copied().unwrap_or(0.0);
            let next = match (p.last_sent, rate > 0.0) {
                (Some(t), true) => t.as_ps() as f64 / 1e3 + 1.0 / rate,
                _ => now_ns,
            };
            sc.next.push(next);
        }
        phase_skip(path, now_ns, &sc.rates, &sc.delays, &sc.next)
    }

    fn emit_probe(
        &mut self,
        now: Instant,
        path: usize,
        buf: &mut [u8],
        remote_flow: u32,
    ) -> Option<Transmit> {
        let pad = self.cfg.mtu
            - crate::wire::PROBE_HEADER_LEN
            - crate::wire::token_overhead(self.cfg.token);
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
        self.probe_seq = self.probe_seq.wrapping_add(1);
        let len = repr.buffer_len_with_token(self.cfg.token);
        repr.emit_with_token(buf, self.cfg.token).ok()?;
        self.paths[path].counters.probes_sent += 1;
        self.stats.probes_sent += 1;
        self.advance_line_clock(now, len);
        Some(Transmit {
            path: path as u16,
            priority: Priority::Probe,
            len,
            flow: 0,
        })
    }
}
