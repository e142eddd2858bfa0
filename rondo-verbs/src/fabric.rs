//! The in-process fabric behind the `mem` backend: every context opened on a
//! [`MemFabric`] is a host of one deterministic [`Network`] of the simulator
//! (`rondo_sim::pair`, the simulator's links), joined to every other
//! (and to itself) by the fabric's parallel paths, each with its own rate, delay,
//! loss, duplication and jitter (jitter reorders packets).
//!
//! Progress is explicit: polling a completion queue runs the network in virtual
//! time. With one thread driving it, the same seed gives the same run.

use crate::host::VerbsHost;
use crate::VerbsError;
use rondo_proto::{Host, Instant, Transmit, TxBuffer};
use rondo_sim::pair::{HostId, LinkId, Network, PathSpec, DEFAULT_MTU};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Events processed by one poll of a completion queue that finds it empty, at most.
const EVENTS_PER_POLL: usize = 4096;

/// Configuration of a [`MemFabric`].
#[derive(Clone, Debug, PartialEq)]
pub struct FabricConfig {
    /// Each host's NIC rate in Gbit/s.
    pub host_gbps: f64,
    /// The parallel paths between every two hosts (both directions get the spec).
    pub paths: Vec<PathSpec>,
    /// Bytes of the largest datagram the fabric carries (default 9216); a context
    /// opened on it may have a `max_mtu` up to this.
    pub mtu: usize,
}

impl FabricConfig {
    /// `n` lossless paths of `gbps` Gbit/s and `delay_us` one-way delay, hosts at
    /// `n * gbps`.
    pub fn uniform(n: u16, gbps: f64, delay_us: f64) -> FabricConfig {
        FabricConfig {
            host_gbps: gbps * f64::from(n),
            paths: (0..n).map(|_| PathSpec::new(gbps, delay_us)).collect(),
            mtu: DEFAULT_MTU,
        }
    }

    /// The same fabric with loss probability `p` on every path.
    pub fn with_loss(mut self, p: f64) -> FabricConfig {
        for s in &mut self.paths {
            s.loss = p;
        }
        self
    }

    /// The same fabric with a uniform extra delay in `[0, jitter)` per packet on every
    /// path: packets overtake each other.
    pub fn with_jitter(mut self, jitter: rondo_proto::Duration) -> FabricConfig {
        for s in &mut self.paths {
            s.jitter = jitter;
        }
        self
    }
}

impl Default for FabricConfig {
    /// Four 25 Gbit/s paths of 2 us one-way delay.
    fn default() -> Self {
        FabricConfig::uniform(4, 25.0, 2.0)
    }
}

/// A context's host on the fabric: the verbs host plus the routing of its flows.
pub(crate) struct FabricHost {
    pub host: VerbsHost,
    paths: u16,
    /// Fabric host index of the peer of each local flow (QP number).
    pub peer_of_flow: HashMap<u32, usize>,
}

impl Host for FabricHost {
    fn handle_datagram(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool) {
        self.host
            .handle_datagram(now, path % self.paths, data, ecn_ce);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.host.handle_timeout(now);
    }
    fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        let t = self.host.poll_transmit(now, tx)?;
        // Fabric path id = peer * P + path; an unknown flow gets an unrouted id.
        let peer = self
            .peer_of_flow
            .get(&t.flow)
            .copied()
            .unwrap_or(usize::MAX);
        let path = peer
            .checked_mul(usize::from(self.paths))
            .and_then(|x| x.checked_add(usize::from(t.path)))
            .and_then(|x| u16::try_from(x).ok())
            .unwrap_or(u16::MAX);
        Some(Transmit { path, ..t })
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.host.poll_timeout()
    }
}

pub(crate) struct FabricInner {
    pub net: Network<FabricHost>,
    cfg: FabricConfig,
    hosts: Vec<HostId>,
    links: Vec<LinkId>,
}

/// The in-process fabric of the `mem` backend; open contexts on it with
/// [`crate::Context::open_mem`]. Clones share the fabric.
#[derive(Clone)]
pub struct MemFabric {
    inner: Arc<Mutex<FabricInner>>,
    /// Threads waiting for the fabric's lock ([`MemFabric::lock`]): a poll that
    /// runs the network gives it up to them instead of running on (see
    /// [`MemFabric::progress`]).
    waiting: Arc<AtomicUsize>,
    id: u64,
    seed: u64,
}

impl core::fmt::Debug for MemFabric {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MemFabric").field("id", &self.id).finish()
    }
}

static FABRIC_IDS: AtomicU64 = AtomicU64::new(1);

impl MemFabric {
    /// A fabric whose every random choice (losses, jitter, keys, QP numbers) derives
    /// from `seed`.
    pub fn new(seed: u64, cfg: FabricConfig) -> Result<MemFabric, VerbsError> {
        if cfg.paths.is_empty() || cfg.paths.len() > 1024 {
            return Err(VerbsError::InvalidAttr {
                name: "paths",
                reason: format!("{} paths; a fabric has 1 to 1024", cfg.paths.len()),
            });
        }
        if !(rondo_proto::wire::DATA_HEADER_LEN < cfg.mtu && cfg.mtu <= 65_535) {
            return Err(VerbsError::InvalidAttr {
                name: "mtu",
                reason: format!(
                    "{} bytes; a fabric carries datagrams of {} to 65535 bytes",
                    cfg.mtu,
                    rondo_proto::wire::DATA_HEADER_LEN + 1
                ),
            });
        }
        Ok(MemFabric {
            inner: Arc::new(Mutex::new(FabricInner {
                net: Network::with_mtu(seed, cfg.mtu),
                cfg,
                hosts: Vec::new(),
                links: Vec::new(),
            })),
            waiting: Arc::new(AtomicUsize::new(0)),
            id: FABRIC_IDS.fetch_add(1, Ordering::Relaxed),
            seed,
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, FabricInner> {
        if let Ok(f) = self.inner.try_lock() {
            return f;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let f = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        f
    }

    /// Whether another thread waits for the fabric.
    fn contended(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }

    /// Number of contexts opened on the fabric.
    pub(crate) fn host_count(&self) -> usize {
        self.lock().hosts.len()
    }

    /// Number of paths between two hosts.
    pub fn paths(&self) -> u16 {
        self.lock().cfg.paths.len() as u16
    }

    /// Bytes of the largest datagram the fabric carries.
    pub(crate) fn mtu(&self) -> usize {
        self.lock().cfg.mtu
    }

    /// Host NIC rate in bits per second.
    pub(crate) fn line_rate_bps(&self) -> u64 {
        (self.lock().cfg.host_gbps * 1e9) as u64
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.lock().net.now()
    }

    /// Runs the fabric until nothing is pending or `deadline` passes (responders
    /// on the fabric make progress without anyone polling their CQs).
    pub fn run_until(&self, deadline: Instant) {
        self.lock().net.run_until(deadline);
    }

    /// Sets the loss probability of every link of the fabric, from now on (1.0
    /// black-holes the fabric: peers look gone).
    pub fn set_loss(&self, p: f64) {
        let mut f = self.lock();
        for l in f.links.clone() {
            f.net.link_mut(l).loss = p;
        }
    }

    /// Fault injection: hands `datagram` to `ctx`'s engine as if it had arrived on
    /// `path` now (forged, truncated or replayed input).
    pub fn inject(
        &self,
        ctx: &crate::Context,
        path: u16,
        datagram: &[u8],
    ) -> Result<(), VerbsError> {
        let host = ctx.mem_host(self.id).ok_or(VerbsError::BadEndpoint(
            "the context is not on this fabric".into(),
        ))?;
        let mut f = self.lock();
        let now = f.net.now();
        f.net
            .host_mut(host)
            .handle_datagram(now, path, datagram, false);
        Ok(())
    }

    /// Adds a host wired to every existing host and to itself; returns its index.
    pub(crate) fn add_host(&self, host: VerbsHost) -> Result<(usize, HostId), VerbsError> {
        let mut f = self.lock();
        let p = f.cfg.paths.len();
        let index = f.hosts.len();
        if (index + 1) * p > usize::from(u16::MAX) {
            return Err(VerbsError::InvalidAttr {
                name: "contexts",
                reason: format!(
                    "a fabric of {p} paths holds at most {} contexts",
                    65_535 / p
                ),
            });
        }
        let gbps = f.cfg.host_gbps;
        let me = f.net.add_host(
            FabricHost {
                host,
                paths: p as u16,
                peer_of_flow: HashMap::new(),
            },
            gbps,
        );
        f.hosts.push(me);
        // Every link's probe class holds a QP's MTU-sized capacity probes.
        let mtu = f.cfg.mtu;
        let specs: Vec<PathSpec> = f.cfg.paths.iter().map(|s| s.for_mtu(mtu)).collect();
        for (j, &other) in f.hosts.clone().iter().enumerate() {
            for (k, spec) in specs.iter().enumerate() {
                let fwd = f.net.add_link(spec.link_config());
                f.net.set_route(me, (j * p + k) as u16, other, &[fwd]);
                f.links.push(fwd);
                if other != me {
                    let rev = f.net.add_link(spec.link_config());
                    f.net.set_route(other, (index * p + k) as u16, me, &[rev]);
                    f.links.push(rev);
                }
            }
        }
        Ok((index, me))
    }

    /// Processes events until `done` holds, [`EVENTS_PER_POLL`] steps were
    /// taken, nothing is pending, or another thread waits for the fabric.
    ///
    /// The last keeps every thread of a program going: the lock is not fair,
    /// and a thread polling an empty queue while the network always has an
    /// event due (a timer) would take it back again and again, running virtual
    /// seconds, while another thread waited seconds of wall time to post its
    /// next request. With a thread waiting, a poll takes one step and lets it in.
    pub(crate) fn progress(&self, done: impl Fn() -> bool) {
        let mut f = self.lock();
        for i in 0..EVENTS_PER_POLL {
            // At least one step per call, so that two threads polling in turn
            // both move the network.
            if done() || (i > 0 && self.contended()) || !f.net.step() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AccessFlags, Context, ContextAttr, QpInitAttr, RemoteAddr, SendWr, Sge};

    /// A poll made while another thread waits for the fabric takes one step
    /// (every event of the earliest instant) and returns; without a waiter it
    /// runs on.
    #[test]
    fn a_poll_lets_a_waiting_thread_in_after_one_step() {
        let fabric = MemFabric::new(1, FabricConfig::default()).unwrap();
        let open = |seed| {
            let ctx = Context::open_mem(
                &fabric,
                ContextAttr {
                    seed,
                    ..ContextAttr::default()
                },
            )
            .unwrap();
            let pd = ctx.alloc_pd().unwrap();
            let cq = ctx.create_cq(16).unwrap();
            let qp = ctx.create_qp(&pd, &cq, &cq, QpInitAttr::default()).unwrap();
            let mr = pd.register(1 << 20, AccessFlags::ALL).unwrap();
            (ctx, cq, qp, mr)
        };
        let (_a, _acq, aqp, amr) = open(1);
        let (_b, _bcq, bqp, bmr) = open(2);
        aqp.connect(&bqp.endpoint()).unwrap();
        bqp.connect(&aqp.endpoint()).unwrap();
        let remote = RemoteAddr {
            addr: bmr.addr(),
            rkey: bmr.rkey(),
        };
        let src = vec![Sge::new(&amr, 0, 1 << 20)];
        aqp.post_send(&SendWr::write(1, src, remote)).unwrap();

        let next = |f: &MemFabric| f.lock().net.next_event().expect("the WRITE is pending");
        let first = next(&fabric);
        fabric.waiting.fetch_add(1, Ordering::AcqRel);
        fabric.progress(|| false);
        fabric.waiting.fetch_sub(1, Ordering::AcqRel);
        assert_eq!(
            fabric.now(),
            first,
            "a contended poll took more than one step"
        );

        let second = next(&fabric);
        fabric.progress(|| false);
        assert!(
            fabric.now() > second,
            "an uncontended poll took one step only"
        );
    }
}
