//! [`VerbsDatapath`]: a UD QP, send and receive buffers in registered arenas,
//! one AH per path and priority per peer, and [`VerbsDatapath::poll`] driving any
//! [`Host`] like the UDP datapath's `poll` (the loop itself is `driver`).
#![allow(unsafe_code)] // the two posts, whose buffer contracts the driver keeps

use super::address::{address_plan, AddressConfig};
use super::driver::{Completion, Driver, Nic, RecvDesc, Route, SendDesc, VerbsStats};
use super::error::VerbsError;
use super::exchange::EndpointInfo;
use super::grh::GRH_LEN;
use super::inventory::GidKind;
use super::qp_attr::{mtu_bytes, UdTransition, ACCESS_LOCAL_WRITE};
use super::rx_ring::RxRing;
use super::send::{SendConfig, SendQueue};
use super::sys::{self, Ah, AnyCq, Context, Mr, Pd, RegisteredArena, Sge, UdQp, UdSend, WcBuf};
use super::timestamp::{NicClock, NicRttSample};
use crate::datapath::{ByCopy, Clock, Datapath, InPlaceHost, PollOutcome};
use crate::HostProfile;
use reorder::HugePages;
use rondo_proto::time::Instant;
use rondo_proto::transmit::{Host, Priority, Transmit};
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
    /// Use NIC completion timestamps when the device offers them.
    pub timestamps: bool,
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
            timestamps: true,
        }
    }
}

/// The real NIC: a UD QP, its CQs, the registered arenas and the AH table.
/// Field order is drop order: QP and AHs before the CQs and the memory.
#[derive(Debug)]
pub(crate) struct IbvNic {
    qp: UdQp,
    ahs: Vec<Ah>,
    send_cq: AnyCq,
    recv_cq: AnyCq,
    /// Landing buffers of in-place receives, by the driver's key.
    landing: HashMap<u64, Mr>,
    send_mem: RegisteredArena,
    recv_mem: RegisteredArena,
    pd: Pd,
    _ctx: Context,
    clock: Option<NicClock>,
    wc: WcBuf,
}

impl Nic for IbvNic {
    fn send_mem(&mut self) -> &mut [u8] {
        self.send_mem.as_mut_slice()
    }

    fn recv_mem(&self) -> &[u8] {
        self.recv_mem.as_slice()
    }

    fn post_send(&mut self, chain: &[SendDesc], slot_len: usize) -> Result<(), VerbsError> {
        let lkey = self.send_mem.lkey();
        let addr = self.send_mem.addr();
        let mut sends = Vec::with_capacity(chain.len());
        for d in chain {
            let ah = self
                .ahs
                .get(d.ah)
                .ok_or(VerbsError::Config("send through an AH that does not exist"))?;
            sends.push(UdSend {
                wr_id: d.wr.wr_id,
                sge: Sge {
                    addr: addr + (d.wr.slot * slot_len) as u64,
                    length: d.wr.len as u32,
                    lkey,
                },
                ah,
                remote_qpn: d.remote_qpn,
                remote_qkey: d.remote_qkey,
                signaled: d.wr.signaled,
                inline: d.wr.inline,
            });
        }
        // SAFETY: each slot stays untouched until the SendQueue retires its WR on
        // a (later) signaled completion; the arena outlives the QP (field order).
        unsafe { self.qp.post_send(&sends) }
    }

    fn post_recv(&mut self, descs: &[RecvDesc], stride: usize) -> Result<(), VerbsError> {
        let base = self.recv_mem.addr();
        let lkey = self.recv_mem.lkey();
        let mut wrs = Vec::with_capacity(descs.len());
        for d in descs {
            let slot = Sge {
                addr: base + (d.slot * stride) as u64,
                length: d.header.min(stride) as u32,
                lkey,
            };
            let wr = match d.target {
                None => (d.slot as u64, [slot, Sge::default()], 1),
                Some((key, addr, len)) => {
                    let mr = self.landing.get(&key).ok_or(VerbsError::Config(
                        "in-place receive into a landing buffer that is not registered",
                    ))?;
                    let target = Sge {
                        addr: addr as u64,
                        length: len as u32,
                        lkey: mr.lkey(),
                    };
                    (d.slot as u64, [slot, target], 2)
                }
            };
            wrs.push(wr);
        }
        // SAFETY: each slot lies in the registered receive arena, which outlives
        // the QP, and is not read until its completion is polled; each target
        // lies in a registered landing buffer that the driver keeps allocated
        // and registered until the WR's completion is polled (`reorder::landing`).
        unsafe { self.qp.post_recv(&mut wrs) }
    }

    fn register(&mut self, key: u64, addr: *mut u8, len: usize) -> Result<(), VerbsError> {
        // SAFETY: the driver keeps the buffer allocated until it deregisters it.
        let mr = unsafe { self.pd.register(addr, len, ACCESS_LOCAL_WRITE)? };
        self.landing.insert(key, mr);
        Ok(())
    }

    fn deregister(&mut self, key: u64) {
        self.landing.remove(&key);
    }

    fn clock(&self) -> Option<NicClock> {
        self.clock
    }

    fn poll_send(&mut self, out: &mut [Completion]) -> Result<usize, VerbsError> {
        self.send_cq.poll(&mut self.wc, out)
    }

    fn poll_recv(&mut self, out: &mut [Completion]) -> Result<usize, VerbsError> {
        self.recv_cq.poll(&mut self.wc, out)
    }
}

/// One UD QP with its buffers, driving a [`Host`].
///
/// ```no_run
/// use rondo_ud::datapath::Clock;
/// use rondo_ud::verbs::{VerbsConfig, VerbsDatapath};
/// use rondo_proto::{Endpoint, BufferConfig, SharedBuffer};
/// use std::net::TcpStream;
/// use std::time::Duration;
///
/// let cfg = VerbsConfig { device: "mlx5_0".into(), paths: 8, ..VerbsConfig::default() };
/// let mut dp = VerbsDatapath::open(cfg)?;
/// let mut tcp = TcpStream::connect("192.0.2.2:18515")?;
/// let peer = dp.local_info().exchange(&mut tcp)?;
/// dp.add_peer(1, peer)?;
/// let clock = Clock::new();
/// let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
/// let flow = dp.flow_config(8); // the NIC profile at the agreed MTU
/// dp.check_flow(&flow)?; // after add_peer: the flow's mtu fits the send slots
/// ep.connect(clock.now(), 1, 2, &flow).unwrap();
/// loop {
///     dp.poll(&mut ep, &clock, Duration::from_millis(1))?;
///     # break;
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct VerbsDatapath {
    driver: Driver<IbvNic>,
    cfg: VerbsConfig,
    local: EndpointInfo,
}

impl VerbsDatapath {
    /// Opens the device, creates the QP and brings it to RTS, maps and registers
    /// the buffers and posts the receives.
    pub fn open(cfg: VerbsConfig) -> Result<VerbsDatapath, VerbsError> {
        if cfg.paths == 0 {
            return Err(VerbsError::Config("paths must be at least 1"));
        }
        if cfg.mtu.is_some_and(|m| !(256..=4096).contains(&m)) {
            return Err(VerbsError::Config(
                "mtu must be 256 to 4096 bytes (RoCE MTUs)",
            ));
        }
        // Settings first: they fail without touching a device.
        SendQueue::new(cfg.send)?;
        let rx = RxRing::new(cfg.recv_slots, cfg.recv_batch)?;
        if sys::device_names()?.is_empty() {
            return Err(VerbsError::NoDevice);
        }
        let ctx = Context::open(&cfg.device)?;
        let port = cfg.address.port;
        let attr = ctx.query_port(port)?;
        if attr.state != sys::PORT_ACTIVE {
            return Err(VerbsError::Port {
                port,
                what: "is not ACTIVE: check the cable and `ip link` of its netdev".into(),
            });
        }
        let active = mtu_bytes(attr.active_mtu).max(256);
        let mtu = cfg.mtu.map_or(active, |m| m.min(active));
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
        // NIC completion timestamps when the device has them (and its extended
        // CQs can be created); plain CQs otherwise.
        let stamped = if cfg.timestamps {
            ctx.completion_clock().and_then(|c| {
                let send = ctx.create_cq_ex(depth).ok()?;
                let recv = ctx.create_cq_ex(cfg.recv_slots).ok()?;
                Some((c, send, recv))
            })
        } else {
            None
        };
        let (clock, send_cq, recv_cq) = match stamped {
            Some((c, send, recv)) => (Some(c), AnyCq::Ex(send), AnyCq::Ex(recv)),
            None => (
                None,
                AnyCq::Plain(ctx.create_cq(depth)?),
                AnyCq::Plain(ctx.create_cq(cfg.recv_slots)?),
            ),
        };
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
        let sq = SendQueue::new(send_cfg)?;
        let mtu_us = mtu as usize;
        let send_mem = pd.register_arena(depth * mtu_us, cfg.huge_pages, ACCESS_LOCAL_WRITE)?;
        let recv_bytes = cfg.recv_slots * (GRH_LEN + mtu_us);
        let recv_mem = pd.register_arena(recv_bytes, cfg.huge_pages, ACCESS_LOCAL_WRITE)?;
        let local = EndpointInfo {
            qpn: qp.qpn(),
            qkey: cfg.qkey,
            gid: sys::gid_raw(&gid.gid),
            lid: attr.lid,
            mtu,
            paths: cfg.paths,
        };
        let nic = IbvNic {
            qp,
            ahs: Vec::new(),
            send_cq,
            recv_cq,
            landing: HashMap::new(),
            send_mem,
            recv_mem,
            pd,
            _ctx: ctx,
            clock,
            wc: WcBuf::new(64),
        };
        Ok(VerbsDatapath {
            driver: Driver::new(nic, mtu_us, sq, rx)?,
            cfg,
            local,
        })
    }

    /// This endpoint's addressing data, for the peer (over TCP:
    /// [`EndpointInfo::exchange`]).
    pub fn local_info(&self) -> EndpointInfo {
        self.local
    }

    /// Largest datagram this datapath sends (the MTU agreed with the peers).
    pub fn mtu(&self) -> usize {
        self.driver.mtu
    }

    /// True when huge pages back the send and receive buffers.
    pub fn huge_pages(&self) -> bool {
        self.driver.nic.send_mem.is_huge() && self.driver.nic.recv_mem.is_huge()
    }

    /// Counters so far.
    pub fn stats(&self) -> VerbsStats {
        self.driver.stats()
    }

    /// The NIC clock, when completions carry NIC timestamps (the device offers
    /// them and [`VerbsConfig::timestamps`] is on).
    pub fn nic_clock(&self) -> Option<NicClock> {
        self.driver.nic.clock
    }

    /// Moves the NIC-level RTT samples made since the last call into `out`: the
    /// NIC send time of a signaled DATA packet to the NIC arrival time of its ACK
    /// (no host latency in them). The engine takes its own RTT samples from the
    /// ACKs' NIC arrival times; these are for measurement and tuning.
    pub fn take_rtt_samples(&mut self, out: &mut Vec<NicRttSample>) {
        self.driver.take_rtt_samples(out);
    }

    /// Receives connection `h` of `ep` in place from now on (DESIGN.md,
    /// "Receive placement"): installs a placement whose message buffers are
    /// registered with the NIC, and [`VerbsDatapath::poll_in_place`] posts
    /// receive WRs in expected order with the payload going straight to its
    /// place in the message. Messages of `min_len..=max_len` bytes are received
    /// in place (others by copy). `cfg` is the connection's configuration; its
    /// `mtu` must be this datapath's ([`VerbsDatapath::mtu`]), so that every
    /// datagram fits a WR's header and payload entries.
    pub fn receive_in_place(
        &mut self,
        ep: &mut rondo_proto::Endpoint,
        h: rondo_proto::ConnectionHandle,
        cfg: &rondo_proto::FlowConfig,
        min_len: u64,
        max_len: u64,
    ) -> Result<(), VerbsError> {
        self.driver.receive_in_place(ep, h, cfg, min_len, max_len)
    }

    /// Checks that datagrams of a flow with configuration `cfg` fit this datapath's
    /// send slots ([`VerbsDatapath::mtu`] bytes, after every `add_peer`). Call it
    /// for every flow of the host before driving it: a flow whose `mtu` is larger
    /// would never send (see [`Host::poll_transmit`]);
    /// [`VerbsDatapath::flow_config`] makes one that fits.
    pub fn check_flow(&self, cfg: &rondo_proto::FlowConfig) -> Result<(), VerbsError> {
        Ok(rondo_proto::check_transmit_buffer(
            self.driver.mtu,
            cfg.mtu,
        )?)
    }

    /// A flow configuration over `paths` paths for this datapath: the NIC profile
    /// ([`HostProfile::NIC`]) with datagrams of [`VerbsDatapath::mtu`] bytes (call
    /// it after `add_peer`, which may lower the MTU).
    pub fn flow_config(&self, paths: u16) -> rondo_proto::FlowConfig {
        rondo_proto::FlowConfig {
            mtu: self.driver.mtu,
            ..HostProfile::NIC.flow_config(paths)
        }
    }

    /// Routes local flow `local_flow` to `peer`: one AH per path and priority.
    /// The datagram size becomes the smaller of the two MTUs. Replacing the route
    /// of a flow keeps the old AHs (sends may still use them).
    pub fn add_peer(&mut self, local_flow: u32, peer: EndpointInfo) -> Result<(), VerbsError> {
        let route = check_peer(&self.cfg, &peer)?;
        let plan = address_plan(&self.cfg.address, &peer, self.cfg.paths)
            .map_err(|e| VerbsError::Peer(e.to_string()))?;
        let nic = &mut self.driver.nic;
        let ah_base = nic.ahs.len();
        for spec in &plan {
            let ah = nic.pd.create_ah(spec)?;
            nic.ahs.push(ah);
        }
        self.driver.mtu = self.driver.mtu.min(peer.mtu as usize);
        self.driver.routes.insert(
            local_flow,
            Route {
                ah_base,
                ahs: plan.len(),
                ..route
            },
        );
        Ok(())
    }

    /// Forgets the route of `local_flow` (its AHs stay until the datapath closes:
    /// sends may still use them); returns whether it had one.
    pub fn remove_peer(&mut self, local_flow: u32) -> bool {
        self.driver.routes.remove(&local_flow).is_some()
    }

    /// Flows with a route ([`VerbsDatapath::add_peer`]).
    pub fn peer_count(&self) -> usize {
        self.driver.routes.len()
    }

    /// One round of the driver loop ([`crate::datapath::poll`], as
    /// `UdpDatapath::poll`): due timers, sends (WR chains, one doorbell each),
    /// then busy-polls the completion queues for up to `max_wait` (less when the
    /// host's next timer is sooner, not at all after sending), hands every
    /// received datagram to the host, reposts receives, and runs timers and sends
    /// once more.
    ///
    /// Errors: a failing post or poll (the QP is then unusable).
    pub fn poll<H: Host>(
        &mut self,
        host: &mut H,
        clock: &Clock,
        max_wait: Duration,
    ) -> Result<PollOutcome, VerbsError> {
        self.driver.poll(&mut ByCopy(host), clock, max_wait)
    }

    /// [`VerbsDatapath::poll`] for a host that takes datagrams in place (an
    /// [`Endpoint`](rondo_proto::Endpoint)): flows set up with
    /// [`VerbsDatapath::receive_in_place`] are received in place.
    pub fn poll_in_place<H: InPlaceHost>(
        &mut self,
        host: &mut H,
        clock: &Clock,
        max_wait: Duration,
    ) -> Result<PollOutcome, VerbsError> {
        self.driver.poll(host, clock, max_wait)
    }
}

/// The datapath is its driver over the real NIC.
impl Datapath for VerbsDatapath {
    type Error = VerbsError;
    const PROFILE: HostProfile = HostProfile::NIC;
    type Tx<'a> = &'a mut [u8];

    fn tx_limit(&self) -> usize {
        self.driver.tx_limit()
    }
    fn tx_buffer<H: Host>(&mut self, host: &H) -> Option<&mut [u8]> {
        self.driver.tx_buffer(host)
    }
    fn tx_queue(&mut self, t: Transmit) {
        self.driver.tx_queue(t);
    }
    fn tx_flush<H: Host>(&mut self, host: &H) -> Result<(), VerbsError> {
        self.driver.tx_flush(host)
    }
    fn now(&mut self, clock: &Clock) -> Instant {
        self.driver.now(clock)
    }
    fn receive<H: InPlaceHost>(
        &mut self,
        host: &mut H,
        clock: &Clock,
        wait: Duration,
    ) -> Result<usize, VerbsError> {
        self.driver.receive(host, clock, wait)
    }
}

/// Checks a peer against the local settings; its route without AHs yet.
pub(crate) fn check_peer(cfg: &VerbsConfig, peer: &EndpointInfo) -> Result<Route, VerbsError> {
    if peer.paths != cfg.paths {
        return Err(VerbsError::Peer(format!(
            "peer sprays over {} paths, this side over {}: use the same --paths on both",
            peer.paths, cfg.paths
        )));
    }
    if peer.qkey != cfg.qkey {
        return Err(VerbsError::Peer(format!(
            "peer qkey {:#x} differs from ours {:#x}: use the same qkey on both",
            peer.qkey, cfg.qkey
        )));
    }
    Ok(Route {
        qpn: peer.qpn,
        qkey: peer.qkey,
        ah_base: 0,
        ahs: usize::from(peer.paths) * Priority::COUNT,
    })
}
