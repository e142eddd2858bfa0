//! Devices and contexts.

use crate::cq::{CompletionQueue, CqShared};
use crate::fabric::MemFabric;
use crate::host::{Keys, VerbsHost};
use crate::mr::{MrShared, ProtectionDomain};
use crate::qp::QueuePair;
use crate::types::{ContextAttr, ContextStats, DeviceInfo, QpInitAttr};
#[cfg(target_os = "linux")]
use crate::udp::{UdpAttr, UdpBackend};
#[cfg(all(feature = "verbs", target_os = "linux"))]
use crate::verbs_backend::{VerbsAttr, VerbsBackend, VerbsContextStats};
use crate::VerbsError;
use reorder::BufferConfig;
use rondo_proto::{Endpoint, Instant, SharedBuffer};
use rondo_sim::pair::HostId;
use std::sync::Arc;

/// The devices this build can open: `mem`, `udp`, and with the `verbs` feature
/// one `verbs:<name>` per RDMA device of the host.
pub fn devices() -> Vec<DeviceInfo> {
    #[allow(unused_mut)] // extended only with the `verbs` feature
    let mut list = vec![
        DeviceInfo {
            name: "mem".into(),
            description: "in-process fabric, deterministic, seeded (Context::open_mem)",
        },
        DeviceInfo {
            name: "udp".into(),
            description: "kernel UDP sockets, one per path (Context::open_udp)",
        },
    ];
    #[cfg(all(feature = "verbs", target_os = "linux"))]
    list.extend(crate::verbs_backend::devices());
    list
}

pub(crate) enum Backend {
    Mem {
        fabric: MemFabric,
        index: usize,
        host: HostId,
    },
    #[cfg(target_os = "linux")]
    Udp(UdpBackend),
    #[cfg(all(feature = "verbs", target_os = "linux"))]
    Verbs(VerbsBackend),
}

pub(crate) struct ContextInner {
    pub backend: Backend,
    pub attr: ContextAttr,
}

/// An opened device (`ibv_context`): one engine endpoint with its NIC-level reorder
/// buffer. Clones share it; every object created from it keeps it alive.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl core::fmt::Debug for Context {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.device_name())
            .finish()
    }
}

fn endpoint(attr: &ContextAttr) -> Result<Endpoint, VerbsError> {
    if attr.max_mtu <= rondo_proto::wire::DATA_HEADER_LEN || attr.max_mtu > 65_535 {
        return Err(VerbsError::InvalidAttr {
            name: "max_mtu",
            reason: format!(
                "{} bytes; give {} to 65535",
                attr.max_mtu,
                rondo_proto::wire::DATA_HEADER_LEN + 1
            ),
        });
    }
    let buffer = SharedBuffer::new(BufferConfig {
        capacity_bytes: attr.reorder_buffer_bytes,
        slot_size: attr.max_mtu,
        ..BufferConfig::default()
    })
    .map_err(|e| VerbsError::Alloc {
        bytes: attr.reorder_buffer_bytes,
        reason: e.to_string(),
    })?;
    Ok(Endpoint::new(buffer))
}

impl Context {
    /// Opens a context on the in-process fabric. Keys and QP numbers come from the
    /// fabric's seed and `attr.seed`.
    pub fn open_mem(fabric: &MemFabric, attr: ContextAttr) -> Result<Context, VerbsError> {
        let ep = endpoint(&attr)?;
        if attr.max_mtu > fabric.mtu() {
            return Err(VerbsError::InvalidAttr {
                name: "max_mtu",
                reason: format!(
                    "{} bytes; the fabric carries datagrams of at most {} (FabricConfig::mtu)",
                    attr.max_mtu,
                    fabric.mtu()
                ),
            });
        }
        // Distinct streams per context even when two use the same `attr.seed`.
        let index = fabric.host_count() as u64;
        let keys = Keys::seeded(fabric.seed() ^ attr.seed.rotate_left(17) ^ index.rotate_left(41));
        let host = VerbsHost::new(ep, keys, fabric.line_rate_bps());
        let (index, host) = fabric.add_host(host)?;
        Ok(Context {
            inner: Arc::new(ContextInner {
                backend: Backend::Mem {
                    fabric: fabric.clone(),
                    index,
                    host,
                },
                attr,
            }),
        })
    }

    /// Opens a context on UDP sockets, one per path (`udp.udp.paths`), with a
    /// progress thread. Keys, QP numbers and tokens come from OS randomness.
    #[cfg(target_os = "linux")]
    pub fn open_udp(attr: ContextAttr, udp: UdpAttr) -> Result<Context, VerbsError> {
        if attr.max_mtu > udp.udp.max_datagram {
            return Err(VerbsError::InvalidAttr {
                name: "max_mtu",
                reason: format!(
                    "{} exceeds the datapath's max_datagram {}; raise UdpConfig::max_datagram",
                    attr.max_mtu, udp.udp.max_datagram
                ),
            });
        }
        let backend = UdpBackend::open(endpoint(&attr)?, &udp)?;
        Ok(Context {
            inner: Arc::new(ContextInner {
                backend: Backend::Udp(backend),
                attr,
            }),
        })
    }

    /// Opens a context on an RDMA device (`verbs` feature): one UD queue pair
    /// brought to RTS, registered send and receive buffers, and a progress thread.
    /// Keys, QP numbers and tokens come from OS randomness. Without a device this is
    /// [`VerbsError::Device`] saying so (`rondo doctor` explains the host).
    #[cfg(all(feature = "verbs", target_os = "linux"))]
    pub fn open_verbs(attr: ContextAttr, verbs: VerbsAttr) -> Result<Context, VerbsError> {
        let backend = VerbsBackend::open(endpoint(&attr)?, &verbs)?;
        Ok(Context {
            inner: Arc::new(ContextInner {
                backend: Backend::Verbs(backend),
                attr,
            }),
        })
    }

    /// The device name (`mem`, `udp`, `verbs`).
    pub fn device_name(&self) -> &'static str {
        match self.inner.backend {
            Backend::Mem { .. } => "mem",
            #[cfg(target_os = "linux")]
            Backend::Udp(_) => "udp",
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            Backend::Verbs(_) => "verbs",
        }
    }

    /// The verbs datapath's counters and MTU (`verbs` only; `None` otherwise).
    #[cfg(all(feature = "verbs", target_os = "linux"))]
    pub fn verbs_stats(&self) -> Option<VerbsContextStats> {
        match &self.inner.backend {
            Backend::Verbs(v) => Some(v.verbs_stats()),
            _ => None,
        }
    }

    /// The local socket address of each path (`udp` only; empty otherwise).
    pub fn local_addrs(&self) -> Vec<std::net::SocketAddr> {
        match &self.inner.backend {
            Backend::Mem { .. } => Vec::new(),
            #[cfg(target_os = "linux")]
            Backend::Udp(u) => u.addrs().to_vec(),
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            Backend::Verbs(_) => Vec::new(),
        }
    }

    /// The attributes the context was opened with.
    pub fn attr(&self) -> &ContextAttr {
        &self.inner.attr
    }

    /// The fabric host of a `mem` context on fabric `fabric_id`.
    pub(crate) fn mem_host(&self, fabric_id: u64) -> Option<HostId> {
        match &self.inner.backend {
            Backend::Mem { fabric, host, .. } => (fabric.id() == fabric_id).then_some(*host),
            #[cfg(target_os = "linux")]
            Backend::Udp(_) => None,
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            Backend::Verbs(_) => None,
        }
    }

    pub(crate) fn same(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Runs `f` on the verbs host at the backend's current time; the backend then
    /// transmits whatever `f` queued.
    pub(crate) fn with_host<R>(&self, f: impl FnOnce(&mut VerbsHost, Instant) -> R) -> R {
        match &self.inner.backend {
            Backend::Mem { fabric, host, .. } => {
                let mut fab = fabric.lock();
                let now = fab.net.now();
                f(&mut fab.net.host_mut(*host).host, now)
            }
            #[cfg(target_os = "linux")]
            Backend::Udp(u) => u.with_host(f),
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            Backend::Verbs(v) => v.with_host(f),
        }
    }

    /// Like [`Self::with_host`], for reads that queue nothing.
    pub(crate) fn with_host_ref<R>(&self, f: impl FnOnce(&VerbsHost) -> R) -> R {
        match &self.inner.backend {
            Backend::Mem { fabric, host, .. } => f(&fabric.lock().net.host(*host).host),
            #[cfg(target_os = "linux")]
            Backend::Udp(u) => f(&u.lock().host.host),
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            Backend::Verbs(v) => f(&v.lock().host.host),
        }
    }

    /// Lets the transport make progress until `cq` has a completion (bounded).
    pub(crate) fn progress(&self, cq: &CqShared) {
        match &self.inner.backend {
            Backend::Mem { fabric, .. } => fabric.progress(|| !cq.is_empty()),
            #[cfg(target_os = "linux")]
            Backend::Udp(u) => u.idle_poll(),
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            Backend::Verbs(v) => v.idle_poll(),
        }
    }

    /// Lets the transport make progress until `cq` has a completion or `deadline`
    /// passes (see [`CompletionQueue::wait`]).
    pub(crate) fn wait_progress(&self, cq: &CqShared, deadline: std::time::Instant) {
        match &self.inner.backend {
            Backend::Mem { fabric, .. } => fabric.progress(|| !cq.is_empty()),
            #[cfg(target_os = "linux")]
            Backend::Udp(u) => u.wait_progress(cq, deadline),
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            Backend::Verbs(v) => v.wait_progress(cq, deadline),
        }
    }

    pub(crate) fn register(&self, mr: MrShared) -> Result<Arc<MrShared>, VerbsError> {
        Ok(self.with_host(|h, _| h.register(mr)))
    }

    pub(crate) fn deregister(&self, lkey: u32, rkey: u32) {
        self.with_host(|h, _| h.deregister(lkey, rkey));
    }

    /// Allocates a protection domain (`ibv_alloc_pd`).
    pub fn alloc_pd(&self) -> Result<ProtectionDomain, VerbsError> {
        let id = self.with_host(|h, _| h.alloc_pd());
        Ok(ProtectionDomain::new(self.clone(), id))
    }

    /// Creates a completion queue of `depth` entries (`ibv_create_cq`).
    pub fn create_cq(&self, depth: usize) -> Result<CompletionQueue, VerbsError> {
        if depth == 0 {
            return Err(VerbsError::InvalidAttr {
                name: "depth",
                reason: "a completion queue holds at least one entry".into(),
            });
        }
        Ok(CompletionQueue::new(self.clone(), depth))
    }

    /// Creates a queue pair (`ibv_create_qp`, RC-like); connect it with
    /// [`QueuePair::connect`].
    pub fn create_qp(
        &self,
        pd: &ProtectionDomain,
        send_cq: &CompletionQueue,
        recv_cq: &CompletionQueue,
        attr: QpInitAttr,
    ) -> Result<QueuePair, VerbsError> {
        QueuePair::create(self, pd, send_cq, recv_cq, attr)
    }

    /// Datagrams dropped before reaching any QP, by cause.
    pub fn stats(&self) -> ContextStats {
        match &self.inner.backend {
            #[cfg(target_os = "linux")]
            Backend::Udp(u) => u.stats(),
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            Backend::Verbs(v) => v.stats(),
            Backend::Mem { .. } => self.with_host_ref(|h| h.context_stats()),
        }
    }

    /// Number of paths the backend offers between two contexts.
    pub fn max_paths(&self) -> u16 {
        match &self.inner.backend {
            Backend::Mem { fabric, .. } => fabric.paths(),
            #[cfg(target_os = "linux")]
            Backend::Udp(u) => u.addrs().len() as u16,
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            Backend::Verbs(v) => v.paths(),
        }
    }

    /// The oldest async event not yet taken, if any (`ibv_get_async_event`, without
    /// blocking): a CQ that overran, a QP that went to error because of it.
    pub fn poll_async_event(&self) -> Option<crate::AsyncEvent> {
        self.with_host(|h, _| h.async_events.pop_front())
    }

    /// Sets the hook that runs once for each async event queued (replacing any
    /// earlier one), so that an application can block until one comes
    /// (`ibv_get_async_event` on an event fd). It runs on whichever thread queues
    /// the event, with the context's lock held: keep it short and do not call
    /// into the context from it. Once this returns, the earlier hook is not
    /// running and will not run again.
    pub fn set_async_notify(&self, hook: crate::NotifyHook) {
        self.with_host(|h, _| h.async_notify = Some(hook));
    }

    /// Peak slots used in the NIC-level reorder buffer.
    pub fn reorder_peak_slots(&self) -> usize {
        self.with_host_ref(|h| h.endpoint.reorder_buffer().peak_used_slots())
    }
}
