//! The `verbs` backend (cargo feature `verbs`, Linux): the context's verbs host over
//! `rondo_ud::verbs`' datapath (one UD queue pair on an RDMA NIC, one address handle
//! per path and priority towards each peer), driven by a progress thread per context,
//! with the same receive-side fault injection as the `udp` backend.
//!
//! Progress: as on `udp` (`crate::udp`), a thread runs the datapath so that one-sided
//! WRITE and READ are served while the responder's application does not poll, and
//! runs rounds back to back while they move datagrams. The verbs datapath has no
//! eventfd to sleep on (completion channels would cost an interrupt and a system
//! call per wake-up), so after [`IDLE_ROUNDS`](crate::progress::IDLE_ROUNDS) empty rounds
//! the thread sleeps for [`VerbsAttr::idle_sleep`] (default [`IDLE_SLEEP`], 20 us;
//! less when an engine timer is due sooner) with the context's lock released, then
//! polls the completion queues again. What that costs: a request posted to an idle
//! context, or a datagram arriving at one, waits up to one sleep (20 us asked; the
//! kernel's default 50 us timer slack makes it 60-80 us on a stock kernel) before it
//! is handled; an idle context wakes 10-50 thousand times a second, a few percent of
//! a core. A busy context never sleeps. `idle_sleep = 0` spins instead (a whole core
//! per context, lowest latency: perftest's way); `progress_thread = false` moves
//! progress into `poll_cq` and `CompletionQueue::wait` as on `udp` (`wait` runs the
//! progress thread's loop, naps included). Both backends are driven by the same
//! loop (`crate::progress`, over `rondo_ud::datapath`).

use crate::host::{Keys, VerbsHost};
use crate::progress::{Driven, Policy, Progress, Routes, Sleep};
use crate::udp::UdpHost;
use crate::VerbsError;
use rondo_proto::{Endpoint, FlowConfig};
use rondo_ud::verbs::exchange::EndpointInfo;
use rondo_ud::verbs::{VerbsConfig, VerbsDatapath, VerbsStats};
use std::time::Duration;

/// Default sleep of an idle progress thread (see the module docs for its cost).
pub const IDLE_SLEEP: Duration = Duration::from_micros(20);

/// Engine timers closer than this are waited for by running rounds, not by sleeping.
const SHORT_WAIT: Duration = Duration::from_micros(5);

/// What a context open on a host without an RDMA device says (when the device list
/// cannot even be read, as without the `ib_uverbs` module, the error starts with
/// "no RDMA device: " too and says why).
pub const NO_DEVICE: &str = "no RDMA device: ibv_get_device_list is empty; run `rondo doctor`";

/// Attributes of a verbs context.
#[derive(Clone, Debug, PartialEq)]
pub struct VerbsAttr {
    /// RDMA device name (`mlx5_0`; `rondo doctor` lists them).
    pub device: String,
    /// Physical port, from 1.
    pub port: u8,
    /// Local GID index: a RoCE v2 GID on Ethernet (`rondo doctor` suggests one).
    pub gid_index: u8,
    /// Paths (address handles per peer; each path its own RoCEv2 UDP source port).
    pub paths: u16,
    /// Largest datagram below the port's active MTU, in bytes (256 to 4096; `None`:
    /// the active MTU).
    pub mtu: Option<u32>,
    /// Host line rate given to the engine (probes fill up to it), bits per second.
    pub line_rate_bps: u64,
    /// Run a progress thread (default). Without one, each `poll` of any of the
    /// context's CQs runs one datapath round, as on `udp`.
    pub progress_thread: bool,
    /// How long an idle progress thread sleeps between polls of the completion
    /// queues (0: spin).
    pub idle_sleep: Duration,
    /// Fault injection: probability that an arriving datagram is dropped.
    pub loss: f64,
    /// Fault injection: probability that an arriving datagram is held back behind
    /// the next one.
    pub reorder: f64,
    /// Seed of the fault injection.
    pub fault_seed: u64,
}

impl Default for VerbsAttr {
    /// `mlx5_0`, port 1, GID index 3, four paths, the port's MTU, 100 Gb/s, a progress
    /// thread sleeping [`IDLE_SLEEP`] when idle, no faults.
    fn default() -> Self {
        VerbsAttr {
            device: "mlx5_0".into(),
            port: 1,
            gid_index: 3,
            paths: 4,
            mtu: None,
            line_rate_bps: 100_000_000_000,
            progress_thread: true,
            idle_sleep: IDLE_SLEEP,
            loss: 0.0,
            reorder: 0.0,
            fault_seed: 1,
        }
    }
}

impl VerbsAttr {
    /// The datapath settings these attributes ask for (the rest is
    /// [`VerbsConfig::default`]: qkey, source ports, DSCPs, queue sizes).
    pub fn datapath_config(&self) -> VerbsConfig {
        let mut cfg = VerbsConfig {
            device: self.device.clone(),
            paths: self.paths,
            mtu: self.mtu,
            ..VerbsConfig::default()
        };
        cfg.address.port = self.port;
        cfg.address.sgid_index = self.gid_index;
        cfg
    }

    /// Checks what can be checked without a device.
    fn validate(&self) -> Result<(), VerbsError> {
        for (name, p) in [("loss", self.loss), ("reorder", self.reorder)] {
            if !(0.0..=1.0).contains(&p) {
                return Err(VerbsError::InvalidAttr {
                    name,
                    reason: format!("{p}; a probability is in [0, 1]"),
                });
            }
        }
        if self.paths == 0 {
            return Err(VerbsError::InvalidAttr {
                name: "paths",
                reason: "at least 1".into(),
            });
        }
        if self.port == 0 {
            return Err(VerbsError::InvalidAttr {
                name: "port",
                reason: "ports are numbered from 1".into(),
            });
        }
        if self.mtu.is_some_and(|m| !(256..=4096).contains(&m)) {
            return Err(VerbsError::InvalidAttr {
                name: "mtu",
                reason: "RoCE datagrams are 256 to 4096 bytes".into(),
            });
        }
        Ok(())
    }
}

/// The datapath's own counters, and how its rounds went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerbsContextStats {
    /// Datagrams, doorbells, inline and signaled sends, completions.
    pub datapath: VerbsStats,
    /// Datapath rounds that failed (a post or a poll returned an error; the UD QP is
    /// then unusable).
    pub round_errors: u64,
    /// The last such error.
    pub last_error: Option<String>,
    /// Largest datagram now (the smallest MTU of this side and its peers).
    pub mtu: usize,
    /// True when huge pages back the send and receive buffers.
    pub huge_pages: bool,
}

/// The RDMA devices of this host, as [`crate::devices`] lists them.
pub(crate) fn devices() -> Vec<crate::DeviceInfo> {
    rondo_ud::verbs::sys::device_names()
        .unwrap_or_default()
        .into_iter()
        .map(|n| crate::DeviceInfo {
            name: format!("verbs:{n}"),
            description: "RDMA device: Rondo over UD queue pairs (Context::open_verbs)",
        })
        .collect()
}

/// A verbs-datapath error as a verbs-call error.
fn device_error(e: rondo_ud::verbs::VerbsError) -> VerbsError {
    match e {
        rondo_ud::verbs::VerbsError::NoDevice => VerbsError::Device(NO_DEVICE.into()),
        e => VerbsError::Device(e.to_string()),
    }
}

/// The progress thread naps with the context's lock released (the NIC's completion
/// queues have no descriptor to sleep on, so nothing ends the nap early).
pub(crate) struct Nap;

impl Sleep for Nap {
    fn sleep(&mut self, d: Duration) -> bool {
        std::thread::sleep(d);
        false
    }
}

impl Routes for VerbsDatapath {
    fn remove_route(&mut self, flow: u32) {
        self.remove_peer(flow);
    }
    fn route_count(&self) -> usize {
        self.peer_count()
    }
}

/// A verbs context's datapath, state and progress; it tells peers its UD QP's
/// addressing data.
pub(crate) type VerbsBackend = Progress<VerbsDatapath, Nap, EndpointInfo>;

impl VerbsBackend {
    pub(crate) fn open(endpoint: Endpoint, attr: &VerbsAttr) -> Result<VerbsBackend, VerbsError> {
        attr.validate()?;
        // The device list first: "no device" is the common failure and says what to do.
        let names = rondo_ud::verbs::sys::device_names()
            .map_err(|e| VerbsError::Device(format!("no RDMA device: {e}")))?;
        if names.is_empty() {
            return Err(VerbsError::Device(NO_DEVICE.into()));
        }
        if !names.iter().any(|n| n == &attr.device) {
            return Err(VerbsError::Device(format!(
                "no RDMA device {:?} on this host (it has {}); run `rondo doctor`",
                attr.device,
                names.join(", ")
            )));
        }
        let dp = VerbsDatapath::open(attr.datapath_config()).map_err(device_error)?;
        let local = dp.local_info();
        let host = UdpHost::new(
            VerbsHost::new(endpoint, Keys::from_os()?, attr.line_rate_bps),
            attr.loss,
            attr.reorder,
            attr.fault_seed,
        );
        let policy = Policy {
            short_wait: SHORT_WAIT,
            max_sleep: attr.idle_sleep,
        };
        let thread = attr.progress_thread.then_some("rondo-verbs-ibv");
        Progress::start(Driven::new(host, dp), policy, Nap, None, thread, local)
    }

    /// This context's addressing data (UD QPN, qkey, GID, LID, MTU, paths).
    pub(crate) fn local_info(&self) -> EndpointInfo {
        self.local
    }

    pub(crate) fn paths(&self) -> u16 {
        self.local.paths
    }

    /// Connects local QP `qpn`'s engine flow to `remote_qpn` at the peer context
    /// described by `info`: routes the flow to the peer's UD QP (one AH per path and
    /// priority), then connects the engine flow.
    pub(crate) fn connect(
        &self,
        qpn: u32,
        remote_qpn: u32,
        cfg: &FlowConfig,
        info: &EndpointInfo,
        sealer: Option<rondo_proto::auth::Sealer>,
    ) -> Result<(), VerbsError> {
        let mut s = self.lock();
        // Refuse a second connect before routing anything (the host would refuse it
        // after the datapath had added the peer's address handles).
        let state = s.host.host.qp_state(qpn);
        if state != crate::QpState::Init {
            return Err(VerbsError::InvalidState {
                qpn,
                state,
                hint: "connect a QP once, right after creating it",
            });
        }
        let fits = s.dp.mtu().min(info.mtu as usize);
        if cfg.mtu > fits {
            return Err(VerbsError::InvalidAttr {
                name: "mtu",
                reason: format!(
                    "the QP's datagrams are {} bytes, the two ports carry {fits}: create both QPs with mtu {fits} or less",
                    cfg.mtu
                ),
            });
        }
        s.dp.add_peer(qpn, *info)
            .map_err(|e| VerbsError::BadEndpoint(e.to_string()))?;
        s.dp.check_flow(cfg).map_err(|e| VerbsError::InvalidAttr {
            name: "mtu",
            reason: e.to_string(),
        })?;
        let now = s.clock.now();
        s.host.host.connect(now, qpn, remote_qpn, cfg)?;
        if let Some(sealer) = sealer {
            s.host.host.add_flow(qpn, sealer);
        }
        Ok(())
    }

    pub(crate) fn verbs_stats(&self) -> VerbsContextStats {
        let s = self.lock();
        VerbsContextStats {
            datapath: s.dp.stats(),
            round_errors: s.round_errors,
            last_error: s.last_error.clone(),
            mtu: s.dp.mtu(),
            huge_pages: s.dp.huge_pages(),
        }
    }
}

#[cfg(test)]
#[path = "verbs_backend_tests.rs"]
mod tests;
