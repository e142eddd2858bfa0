//! The driver loop: a UD QP, send and receive buffers in registered arenas, one
//! AH per path and priority per peer, and [`VerbsDatapath::poll`] driving any
//! [`Host`] like the UDP datapath's `poll`.
#![allow(unsafe_code)] // the two posts, whose buffer contracts this driver keeps

use super::address::{address_plan, ah_index, AddressConfig};
use super::error::VerbsError;
use super::exchange::EndpointInfo;
use super::grh::{self, GRH_LEN};
use super::inventory::{mtu_bytes, GidKind};
use super::qp_attr::UdTransition;
use super::rx_ring::RxRing;
use super::send::{SendConfig, SendQueue, SendWr};
use super::sys::{self, Ah, Context, Cq, Pd, RegisteredArena, Sge, UdQp, UdSend};
use crate::time::Instant;
use crate::transmit::Host;
use crate::udp::{Clock, PollOutcome};
use reorder::HugePages;
use std::collections::HashMap;
use std::time::Duration;

/// Settings of a [`VerbsDatapath`].
#[derive(Clone, Debug)]
pub struct VerbsConfig {
    /// Device name (`mlx5_0`; `rondo doctor` lists them).
    pub device: String,
    /// Logical paths (one AH per path and priority per peer).
    pub paths: u16,
    /// Queue key of the QP, the same on both sides.
    pub qkey: u32,
    /// Port, GID index, source ports and traffic classes.
    pub address: AddressConfig,
    /// Send queue: depth, chain length, signaling, inline size.
    pub send: SendConfig,
    /// Receive buffers of `GRH + MTU` bytes.
    pub recv_slots: usize,
    /// Receives reposted per `ibv_post_recv` chain. Default 32.
    pub recv_batch: usize,
    /// Largest datagram, in bytes, below the port's active MTU (`None`: the MTU).
    pub mtu: Option<u32>,
    /// Huge pages for the buffers.
    pub huge_pages: HugePages,
}

impl Default for VerbsConfig {
    fn default() -> VerbsConfig {
        VerbsConfig {
            device: String::from("mlx5_0"),
            paths: 8,
            qkey: 0x5247_0001,
            address: AddressConfig::default(),
            send: SendConfig::default(),
            recv_slots: 1024,
            recv_batch: 32,
            mtu: None,
            huge_pages: HugePages::Auto,
        }
    }
}

/// Counters of a [`VerbsDatapath`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerbsStats {
    /// Datagrams posted.
    pub datagrams_out: u64,
    /// Bytes posted.
    pub bytes_out: u64,
    /// `ibv_post_send` calls (doorbells).
    pub doorbells: u64,
    /// Inline sends.
    pub inline: u64,
    /// Signaled sends.
    pub signaled: u64,
    /// Datagrams received and handed to the host.
    pub datagrams_in: u64,
    /// Their bytes (GRH excluded).
    pub bytes_in: u64,
    /// Received with ECN CE.
    pub ce_marks: u64,
    /// Completions with an error status (send or receive).
    pub completion_errors: u64,
    /// Receives whose length did not fit a GRH and a buffer.
    pub malformed: u64,
    /// Transmits with no peer or path.
    pub unroutable: u64,
}

/// A peer: its addressing data and its AHs.
#[derive(Debug)]
struct Peer {
    info: EndpointInfo,
    ahs: Vec<Ah>,
}

/// One UD QP with its buffers, driving a [`Host`].
///
/// Field order is drop order: the QP before its CQs and PD, the MRs before the
/// arenas they cover.
#[derive(Debug)]
pub struct VerbsDatapath {
    peers: HashMap<u32, Peer>,
    qp: UdQp,
    send_cq: Cq,
    recv_cq: Cq,
    send_mem: RegisteredArena,
    recv_mem: RegisteredArena,
    pd: Pd,
    _ctx: Context,
    cfg: VerbsConfig,
    local: EndpointInfo,
    /// Largest datagram now (the smallest MTU of this side and its peers).
    mtu: usize,
    /// Bytes of a send slot, and of a receive slot after its GRH: the MTU at open.
    slot_len: usize,
    sq: SendQueue,
    rx: RxRing,
    wc: Vec<ibverbs_sys::ibv_wc>,
    planned: Vec<SendWr>,
    /// The peer key (local flow) of each planned WR.
    planned_peer: Vec<u32>,
    rx_batch: Vec<usize>,
    stats: VerbsStats,
}

impl VerbsDatapath {
    /// Opens the device, creates the QP and brings it to RTS, maps and registers
    /// the buffers and posts the receives.
    pub fn open(cfg: VerbsConfig) -> Result<VerbsDatapath, VerbsError> {
        if cfg.paths == 0 {
            return Err(VerbsError::Config("paths must be at least 1"));
        }
        if sys::device_names()?.is_empty() {
            return Err(VerbsError::NoDevice);
        }
        let ctx = Context::open(&cfg.device)?;
        let port = cfg.address.port;
        let attr = ctx.query_port(port)?;
        if attr.state != 4 {
            return Err(VerbsError::Port {
                port,
                what: "is not ACTIVE: check the cable and `ip link` of its netdev".into(),
            });
        }
        let active = mtu_bytes(attr.active_mtu);
        let mtu = cfg.mtu.map_or(active, |m| m.min(active));
        if mtu < 256 {
            return Err(VerbsError::Config("MTU must be at least 256 bytes"));
        }
        let gid = ctx
            .all_gids()?
            .into_iter()
            .find(|g| {
                g.port_num == u32::from(port) && g.gid_index == u32::from(cfg.address.sgid_index)
            })
            .ok_or_else(|| VerbsError::Port {
                port,
                what: format!(
                    "has no GID at index {}: pick one from `rondo doctor`",
                    cfg.address.sgid_index
                ),
            })?;
        if attr.link_layer == 2 && GidKind::from_raw(gid.gid_type) != GidKind::RoceV2 {
            return Err(VerbsError::Port {
                port,
                what: format!(
                    "GID index {} is not RoCE v2: flow labels only steer RoCEv2 (UDP) traffic; pick a RoCE v2 GID from `rondo doctor`",
                    cfg.address.sgid_index
                ),
            });
        }
        let pd = ctx.alloc_pd()?;
        let depth = cfg.send.depth;
        let send_cq = ctx.create_cq(depth)?;
        let recv_cq = ctx.create_cq(cfg.recv_slots)?;
        let max_wr =
            |n: usize| u32::try_from(n).map_err(|_| VerbsError::Config("queue size above u32"));
        let qp = pd.create_ud_qp(
            &send_cq,
            &recv_cq,
            max_wr(depth)?,
            max_wr(cfg.recv_slots)?,
            max_wr(cfg.send.max_inline)?,
        )?;
        for t in UdTransition::bring_up(port, cfg.qkey, 0) {
            qp.modify(&t.attrs())?;
        }
        let mut send_cfg = cfg.send;
        send_cfg.max_inline = send_cfg.max_inline.min(qp.max_inline() as usize);
        let sq = SendQueue::new(send_cfg).map_err(|_| VerbsError::Config("send queue settings"))?;
        let rx = RxRing::new(cfg.recv_slots, cfg.recv_batch)
            .map_err(|_| VerbsError::Config("recv_slots and recv_batch: 1 <= batch <= slots"))?;
        let mtu_us = mtu as usize;
        let send_mem = pd.register_arena(depth * mtu_us, cfg.huge_pages)?;
        let recv_mem = pd.register_arena(cfg.recv_slots * (GRH_LEN + mtu_us), cfg.huge_pages)?;
        let local = EndpointInfo {
            qpn: qp.qpn(),
            qkey: cfg.qkey,
            gid: sys::gid_raw(&gid.gid),
            lid: attr.lid,
            mtu,
            paths: cfg.paths,
        };
        let mut dp = VerbsDatapath {
            peers: HashMap::new(),
            qp,
            send_cq,
            recv_cq,
            pd,
            _ctx: ctx,
            send_mem,
            recv_mem,
            local,
            mtu: mtu_us,
            slot_len: mtu_us,
            sq,
            rx,
            wc: vec![ibverbs_sys::ibv_wc::default(); 64],
            planned: Vec::with_capacity(depth),
            planned_peer: Vec::with_capacity(depth),
            rx_batch: Vec::with_capacity(cfg.recv_batch),
            stats: VerbsStats::default(),
            cfg,
        };
        dp.repost()?;
        Ok(dp)
    }

    /// This endpoint's addressing data, for the peer (over TCP:
    /// [`EndpointInfo::exchange`]).
    pub fn local_info(&self) -> EndpointInfo {
        self.local
    }

    /// Largest datagram this datapath sends (the MTU agreed with the peers).
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// Counters so far.
    pub fn stats(&self) -> VerbsStats {
        let c = self.sq.counters();
        VerbsStats {
            doorbells: c.doorbells,
            inline: c.inline,
            signaled: c.signaled,
            ..self.stats
        }
    }

    /// Routes local flow `local_flow` to `peer`: one AH per path and priority.
    /// The datagram size becomes the smaller of the two MTUs.
    pub fn add_peer(&mut self, local_flow: u32, peer: EndpointInfo) -> Result<(), VerbsError> {
        if peer.paths != self.cfg.paths {
            return Err(VerbsError::Peer(format!(
                "peer sprays over {} paths, this side over {}: use the same --paths on both",
                peer.paths, self.cfg.paths
            )));
        }
        if peer.qkey != self.cfg.qkey {
            return Err(VerbsError::Peer(format!(
                "peer qkey {:#x} differs from ours {:#x}: use the same qkey on both",
                peer.qkey, self.cfg.qkey
            )));
        }
        let plan = address_plan(&self.cfg.address, &peer, self.cfg.paths)
            .map_err(|e| VerbsError::Peer(e.to_string()))?;
        let ahs = plan
            .iter()
            .map(|spec| self.pd.create_ah(spec))
            .collect::<Result<Vec<_>, _>>()?;
        self.mtu = self.mtu.min(peer.mtu as usize);
        self.peers.insert(local_flow, Peer { info: peer, ahs });
        Ok(())
    }

    /// One round of the driver loop, as `UdpDatapath::poll`: due timers, sends,
    /// then busy-polls the completion queues for up to `max_wait` (less when the
    /// host's next timer is sooner, not at all after sending), hands every
    /// received datagram to the host, reposts receives, and runs timers and sends
    /// once more.
    pub fn poll<H: Host>(
        &mut self,
        host: &mut H,
        clock: &Clock,
        max_wait: Duration,
    ) -> Result<PollOutcome, VerbsError> {
        let mut out = PollOutcome::default();
        let now = clock.now();
        run_timers(host, now);
        out.sent += self.flush(host, now)?;
        let wait = match host.poll_timeout() {
            Some(t) => clock.until(t).min(max_wait),
            None => max_wait,
        };
        let wait = if out.sent > 0 { Duration::ZERO } else { wait };
        let start = std::time::Instant::now();
        loop {
            self.reap_sends()?;
            let n = self.receive(host, clock)?;
            out.received += n;
            if n > 0 || start.elapsed() >= wait {
                break;
            }
            std::hint::spin_loop();
        }
        self.repost()?;
        let now = clock.now();
        run_timers(host, now);
        out.sent += self.flush(host, now)?;
        Ok(out)
    }

    /// Polls the host for transmits into free send slots and posts them in
    /// chains, one doorbell per chain.
    fn flush<H: Host>(&mut self, host: &mut H, now: Instant) -> Result<usize, VerbsError> {
        self.planned.clear();
        self.planned_peer.clear();
        while let Some(slot) = self.sq.next_slot() {
            let base = slot * self.slot_len;
            let buf = &mut self.send_mem.as_mut_slice()[base..base + self.mtu];
            let Some(t) = host.poll_transmit(now, buf) else {
                break;
            };
            let key = match self.peers.get_key_value(&t.flow) {
                Some((&k, _)) => Some(k),
                None if self.peers.len() == 1 => self.peers.keys().next().copied(),
                None => None,
            };
            let ah = ah_index(t.path, t.priority);
            let Some((key, peer)) = key
                .and_then(|k| self.peers.get(&k).map(|p| (k, p)))
                .filter(|(_, p)| ah < p.ahs.len() && t.len <= self.mtu)
            else {
                self.stats.unroutable += 1;
                continue;
            };
            if let Some(wr) = self.sq.plan(t.len, ah, peer.info.qpn) {
                self.stats.datagrams_out += 1;
                self.stats.bytes_out += t.len as u64;
                self.planned.push(wr);
                self.planned_peer.push(key);
            }
        }
        let n = self.planned.len();
        let planned = std::mem::take(&mut self.planned);
        let result = self.post_planned(&planned);
        self.planned = planned;
        result.map(|()| n)
    }

    fn post_planned(&mut self, planned: &[SendWr]) -> Result<(), VerbsError> {
        let lkey = self.send_mem.lkey();
        let addr = self.send_mem.addr();
        let slot_len = self.slot_len as u64;
        let mut sends = Vec::with_capacity(self.sq.config().max_chain);
        let mut keys = self.planned_peer.iter();
        for chain in self.sq.chains(planned) {
            sends.clear();
            for wr in chain {
                // Peers are only ever added or replaced, so the key planned is there.
                let Some(peer) = keys.next().and_then(|k| self.peers.get(k)) else {
                    return Err(VerbsError::Config("planned send without its peer"));
                };
                sends.push(UdSend {
                    wr_id: wr.wr_id,
                    sge: Sge {
                        addr: addr + wr.slot as u64 * slot_len,
                        length: wr.len as u32,
                        lkey,
                    },
                    ah: &peer.ahs[wr.ah],
                    remote_qpn: wr.remote_qpn,
                    remote_qkey: peer.info.qkey,
                    signaled: wr.signaled,
                    inline: wr.inline,
                });
            }
            // SAFETY: each slot stays untouched until the SendQueue retires its WR
            // on a (later) signaled completion; the arena outlives the QP.
            unsafe { self.qp.post_send(&sends)? };
        }
        Ok(())
    }

    /// Retires send WRs whose signaled completions arrived.
    fn reap_sends(&mut self) -> Result<(), VerbsError> {
        loop {
            let n = self.send_cq.poll(&mut self.wc)?;
            for wc in &self.wc[..n] {
                if wc.error().is_some() {
                    self.stats.completion_errors += 1;
                }
                // A failed WR also ends the WRs before it.
                let _ = self.sq.complete(wc.wr_id());
            }
            if n < self.wc.len() {
                return Ok(());
            }
        }
    }

    /// Hands every completed receive to the host; returns how many.
    fn receive<H: Host>(&mut self, host: &mut H, clock: &Clock) -> Result<usize, VerbsError> {
        let n = self.recv_cq.poll(&mut self.wc)?;
        if n == 0 {
            return Ok(0);
        }
        let now = clock.now(); // one arrival time for what one poll receives
        let stride = GRH_LEN + self.slot_len;
        let mut delivered = 0;
        for wc in &self.wc[..n] {
            let slot = wc.wr_id() as usize;
            if self.rx.complete(slot).is_err() {
                self.stats.malformed += 1;
                continue;
            }
            if wc.error().is_some() {
                self.stats.completion_errors += 1;
                continue;
            }
            let buf = &self.recv_mem.as_slice()[slot * stride..(slot + 1) * stride];
            let Ok(datagram) = grh::strip_grh(buf, wc.len()) else {
                self.stats.malformed += 1;
                continue;
            };
            let has_grh = wc.wc_flags.0 & ibverbs_sys::ibv_wc_flags::IBV_WC_GRH.0 != 0;
            let ce = has_grh && grh::ecn_ce(&buf[..GRH_LEN]);
            self.stats.ce_marks += u64::from(ce);
            self.stats.datagrams_in += 1;
            self.stats.bytes_in += datagram.len() as u64;
            // Path 0: the Rondo header's path id is authoritative.
            host.handle_datagram(now, 0, datagram, ce);
            delivered += 1;
        }
        Ok(delivered)
    }

    /// Posts the receive slots that are due, in one chain per batch.
    fn repost(&mut self) -> Result<(), VerbsError> {
        let stride = GRH_LEN + self.slot_len;
        let base = self.recv_mem.addr();
        let lkey = self.recv_mem.lkey();
        let mut batch = std::mem::take(&mut self.rx_batch);
        while self.rx.take_batch(&mut batch) > 0 {
            let mut wrs: Vec<(u64, [Sge; 2], usize)> = batch
                .iter()
                .map(|&slot| {
                    let sge = Sge {
                        addr: base + (slot * stride) as u64,
                        length: stride as u32,
                        lkey,
                    };
                    (slot as u64, [sge, Sge::default()], 1)
                })
                .collect();
            // SAFETY: each slot lies in the registered receive arena, which
            // outlives the QP, and is not read until its completion is polled.
            unsafe { self.qp.post_recv(&mut wrs)? };
        }
        self.rx_batch = batch;
        Ok(())
    }
}

fn run_timers<H: Host>(host: &mut H, now: Instant) {
    if host.poll_timeout().is_some_and(|t| t <= now) {
        host.handle_timeout(now);
    }
}
