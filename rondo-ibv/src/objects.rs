//! The objects behind the C handles: each C struct the application holds is the
//! first member of a `#[repr(C)]` struct of ours, so a handle converts back to our
//! object; whether a handle is ours is decided from its context's `device`.

use crate::abi::*;
use crate::config::{Config, Vendor};
use crate::connect::{Link, Listener};
use crate::devices::{Device, Over};
use libc::{c_int, c_void};
use rondo_verbs::{
    CompletionQueue, Context, ContextAttr, MemoryRegion, ProtectionDomain, QpInitAttr, QueuePair,
    SendWr, Sge, UdpAttr, UdpConfig,
};
use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Largest inline payload of a send work request.
pub const MAX_INLINE: u32 = 4096;
/// Send queue depth limit reported in `max_qp_wr`.
pub const MAX_QP_WR: u32 = 32_768;
/// Outstanding READs per QP reported in `max_qp_rd_atom`.
pub const MAX_RD_ATOM: i32 = 16;
/// Largest message reported in `max_msg_sz`.
pub const MAX_MSG: u32 = 1 << 31;

/// Locks, taking over a poisoned lock (a panic was already reported as an error).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Process-wide state.
pub struct Global {
    /// The configuration, or why the environment was refused.
    pub config: Result<Config, String>,
    /// Device lists we handed out: ours -> (the real one, our length).
    pub lists: Mutex<HashMap<usize, (usize, usize)>>,
}

/// The process-wide state, made on first use.
pub fn global() -> &'static Global {
    static G: OnceLock<Global> = OnceLock::new();
    G.get_or_init(|| Global {
        config: Config::from_env().map_err(|e| e.to_string()),
        lists: Mutex::new(HashMap::new()),
    })
}

/// Writes a line to stderr when `RONDO_IBV_DEBUG` is set.
macro_rules! debug {
    ($($t:tt)*) => {
        if $crate::objects::global().config.as_ref().is_ok_and(|c| c.debug) {
            eprintln!("rondo-ibv: {}", format_args!($($t)*));
        }
    };
}
pub(crate) use debug;

/// Reports what the application asked for and Rondo does not do (always printed).
pub fn refuse(what: &str) {
    eprintln!("rondo-ibv: {what}");
}

/// What a context of ours runs over.
pub enum Via {
    /// `rondo0`: kernel UDP sockets.
    Udp,
    /// `rondo_<dev>`: a real device's UD queue pairs.
    #[cfg(feature = "verbs")]
    Nic(crate::nic::Nic),
}

/// The C handles of a context's CQs and QPs, by the numbers async events name
/// them with.
#[derive(Default)]
pub struct Handles {
    /// CQ handle (`CompletionQueue::handle`) -> `*mut Cq`.
    pub cqs: HashMap<u32, usize>,
    /// QP number -> `*mut Qp`.
    pub qps: HashMap<u32, usize>,
}

/// Our context: the `verbs_context` the application's `ibv_context` lives in.
#[repr(C)]
pub struct Ctx {
    /// The C part (the application holds `&vctx.context`).
    pub vctx: verbs_context,
    /// The Rondo context, once opened ([`Ctx::rondo`]).
    rondo: OnceLock<Context>,
    /// Held while the Rondo context is being opened.
    opening: Mutex<()>,
    /// The configuration it was opened with.
    pub cfg: Config,
    /// What it runs over.
    pub via: Via,
    /// The QPs the listener connects, by QP number.
    pub qps: Arc<Mutex<HashMap<u32, Arc<Link>>>>,
    /// The C handles async events name.
    pub handles: Mutex<Handles>,
    /// The set-up listener (its port is the LID).
    pub listener: Listener,
}

impl Ctx {
    /// Opens `dev`: `rondo0`'s Rondo context at once; a `rondo_<dev>`'s real
    /// device (for its attributes), its Rondo context over the device's UD QPs on
    /// first use ([`Ctx::rondo`]), so that listing and querying (`ibv_devinfo`)
    /// sets up no queue pair.
    pub fn open(
        cfg: &Config,
        dev: &'static Device,
        ops: [usize; ops::COUNT],
        slots: [usize; vctx::COUNT],
    ) -> Result<Box<Ctx>, String> {
        let (via, at) = match &dev.over {
            Over::Udp => (Via::Udp, cfg.ip),
            #[cfg(feature = "verbs")]
            Over::Nic(real) => {
                // The peer connects to the address in the GID it was given, whichever
                // of the device's that is.
                let at = if cfg.ip_given {
                    cfg.ip
                } else {
                    Ipv4Addr::UNSPECIFIED
                };
                (Via::Nic(crate::nic::Nic::open(real)?), at)
            }
            #[cfg(not(feature = "verbs"))]
            Over::Nic(real) => {
                return Err(format!(
                    "rondo_{real} needs a build with the `verbs` feature"
                ))
            }
        };
        let qps: Arc<Mutex<HashMap<u32, Arc<Link>>>> = Arc::default();
        // Our threads (the progress thread, the set-up listener) block every signal,
        // so that the application's (qperf's run timer, Ctrl-C) reach its own
        // threads and interrupt their blocking calls as without the drop-in.
        let listener = with_signals_blocked(|| Listener::start(at, qps.clone()))
            .map_err(|e| format!("set-up listener on {at}: {e}"))?;
        // Async events count on an eventfd, one per event, as the real async_fd.
        // SAFETY: creating an fd.
        let async_fd = unsafe { libc::eventfd(0, libc::EFD_SEMAPHORE | libc::EFD_CLOEXEC) };
        if async_fd < 0 {
            return Err(format!(
                "creating the async event fd: {}",
                std::io::Error::last_os_error()
            ));
        }
        let mut c = Box::new(Ctx {
            vctx: verbs_context {
                slots,
                context: ibv_context {
                    device: dev.handle(),
                    ops,
                    cmd_fd: -1,
                    async_fd,
                    num_comp_vectors: 1,
                    // SAFETY: plain bytes, initialised with pthread_mutex_init below.
                    mutex: unsafe { core::mem::zeroed() },
                    abi_compat: VERBS_ABI_IS_EXTENDED,
                },
            },
            rondo: OnceLock::new(),
            opening: Mutex::new(()),
            cfg: cfg.clone(),
            via,
            qps,
            handles: Mutex::default(),
            listener,
        });
        c.vctx.slots[vctx::SZ] = core::mem::size_of::<verbs_context>();
        // SAFETY: initialising a mutex we own.
        unsafe { libc::pthread_mutex_init(&mut c.vctx.context.mutex, std::ptr::null()) };
        if matches!(c.via, Via::Udp) {
            c.rondo()?;
        }
        Ok(c)
    }

    /// The Rondo context, opened on first use.
    pub fn rondo(&self) -> Result<&Context, String> {
        if let Some(r) = self.rondo.get() {
            return Ok(r);
        }
        let _one = lock(&self.opening);
        if let Some(r) = self.rondo.get() {
            return Ok(r);
        }
        let ctx = with_signals_blocked(|| match &self.via {
            Via::Udp => open_udp(&self.cfg),
            #[cfg(feature = "verbs")]
            Via::Nic(n) => n.open_rondo(&self.cfg),
        })?;
        let async_fd = self.vctx.context.async_fd;
        ctx.set_async_notify(Arc::new(move || {
            let one: u64 = 1;
            // SAFETY: writing 8 bytes from a local to the eventfd, which is closed
            // only after this hook is replaced (`Drop for Ctx`).
            unsafe { libc::write(async_fd, (&one as *const u64).cast(), 8) };
        }));
        debug!(
            "{}: Rondo context open, {} paths, MTU {}, LID {}",
            self.name(),
            self.cfg.paths,
            self.qp_attr().mtu,
            self.lid()
        );
        Ok(self.rondo.get_or_init(|| ctx))
    }

    /// The Rondo context if it is open.
    pub fn rondo_if_open(&self) -> Option<&Context> {
        self.rondo.get()
    }

    /// The application's handle.
    pub fn handle(&mut self) -> *mut ibv_context {
        &mut self.vctx.context
    }

    /// `rondo0`'s GID: `::ffff:<ip>`.
    pub fn gid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&self.cfg.ip.octets());
        g
    }

    /// The LID: the listener's port.
    pub fn lid(&self) -> u16 {
        self.listener.port()
    }

    /// The real device's context under a `rondo_<dev>` (`None` for `rondo0`).
    pub fn real(&self) -> Option<*mut ibv_context> {
        match &self.via {
            Via::Udp => None,
            #[cfg(feature = "verbs")]
            Via::Nic(n) => Some(n.real.0),
        }
    }

    /// The device's name.
    pub fn name(&self) -> String {
        crate::devices::ours(self.vctx.context.device).map_or_else(String::new, |d| d.name())
    }

    /// `(vendor_id, vendor_part_id)` of `RONDO_IBV_VENDOR`, else `own`.
    pub fn vendor(&self, own: (u32, u32)) -> (u32, u32) {
        match self.cfg.vendor {
            None => own,
            Some(Vendor::Rondo) => (0, 0),
            Some(Vendor::Mlx5) => (0x02c9, 4123),
        }
    }

    /// The attributes of a new QP (before its queue depths).
    pub fn qp_attr(&self) -> QpInitAttr {
        match &self.via {
            Via::Udp => QpInitAttr {
                mtu: self.cfg.mtu,
                ..QpInitAttr::udp(self.cfg.paths)
            },
            #[cfg(feature = "verbs")]
            Via::Nic(n) => QpInitAttr::verbs(self.cfg.paths, n.data().map_or(4096, |d| d.mtu)),
        }
    }

    /// The QPs' path MTU (`enum ibv_mtu`): what their datagrams carry, rounded down.
    pub fn path_mtu(&self) -> u32 {
        let bytes = match &self.via {
            Via::Udp => 4096,
            #[cfg(feature = "verbs")]
            Via::Nic(n) => n.data().map_or(4096, |d| d.mtu),
        };
        // IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5.
        (1..=5u32).rev().find(|c| bytes >= 128 << c).unwrap_or(1)
    }
}

/// Opens `rondo0`'s Rondo context over UDP.
fn open_udp(cfg: &Config) -> Result<Context, String> {
    let attr = ContextAttr {
        max_mtu: cfg.mtu,
        ..ContextAttr::default()
    };
    let udp = UdpAttr {
        udp: UdpConfig {
            local_ip: cfg.ip.into(),
            base_port: 0,
            paths: cfg.paths,
            max_datagram: UdpConfig::default().max_datagram.max(cfg.mtu),
            ..UdpConfig::default()
        },
        loss: cfg.loss,
        reorder: cfg.reorder,
        fault_seed: cfg.seed,
        ..UdpAttr::default()
    };
    Context::open_udp(attr, udp).map_err(|e| format!("opening the UDP context: {e}"))
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // The hook writes the fd: replaced first (it is not running once this
        // returns), then the fd closes.
        if let Some(r) = self.rondo.get() {
            r.set_async_notify(Arc::new(|| {}));
        }
        // SAFETY: our eventfd, closed once.
        unsafe { libc::close(self.vctx.context.async_fd) };
    }
}

/// Runs `f` with every signal blocked in the calling thread (threads it spawns
/// inherit the mask), then restores the mask.
fn with_signals_blocked<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: sigset_t is plain data, filled by sigfillset; pthread_sigmask only
    // changes the calling thread's mask and `old` restores it.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let r = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r
    }
}

/// A GUID for `rondo0` at `ip` (as `ibv_get_device_guid` returns it: network order).
pub fn guid_of(ip: Ipv4Addr) -> u64 {
    let o = ip.octets();
    u64::from_be_bytes([0x02, 0x52, 0x4f, 0xff, o[0], o[1], o[2], o[3]]).to_be()
}

/// `ctx` as ours, if it is.
///
/// # Safety
/// `ctx` is null or a live `ibv_context`.
pub unsafe fn ctx_of<'a>(ctx: *mut ibv_context) -> Option<&'a mut Ctx> {
    if ctx.is_null() {
        return None;
    }
    // SAFETY: a live context (the caller's contract).
    crate::devices::ours(unsafe { (*ctx).device })?;
    let off = core::mem::offset_of!(verbs_context, context);
    // SAFETY: our contexts are the `context` member of a `Ctx` (at `off` from its start).
    Some(unsafe { &mut *((ctx as *mut u8).sub(off) as *mut Ctx) })
}

/// A protection domain.
#[repr(C)]
pub struct Pd {
    /// The C part.
    pub pd: ibv_pd,
    /// The Rondo PD.
    pub inner: ProtectionDomain,
}

/// A memory region over the application's buffer.
#[repr(C)]
pub struct Mr {
    /// The C part.
    pub mr: ibv_mr,
    /// The Rondo region.
    pub inner: MemoryRegion,
}

/// A completion channel: an eventfd in semaphore mode, one count per fired CQ.
#[repr(C)]
pub struct Channel {
    /// The C part (`fd` is the eventfd).
    pub ch: ibv_comp_channel,
    /// CQs whose notification fired, oldest first.
    pub fired: Mutex<VecDeque<usize>>,
}

impl Channel {
    /// Records that `cq` fired and counts it on the eventfd.
    pub fn fire(&self, cq: usize) {
        lock(&self.fired).push_back(cq);
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a local to our eventfd.
        unsafe { libc::write(self.ch.fd, (&one as *const u64).cast(), 8) };
    }
}

/// A completion queue.
#[repr(C)]
pub struct Cq {
    /// The C part.
    pub cq: ibv_cq,
    /// The Rondo CQ.
    pub inner: CompletionQueue,
}

/// The verbs state of a QP as the application sees it.
pub struct QpState {
    /// `IBV_QPS_*`.
    pub state: AtomicU32,
    /// The peer QP number given at RTR.
    pub dest_qpn: AtomicU32,
}

/// Inline data: a region the drop-in owns, one slot per post, `depth + 1` slots so
/// that a slot is reused only after the request that used it completed (at most
/// `depth` requests are outstanding and they complete in order).
pub struct Inline {
    /// The region.
    pub mr: MemoryRegion,
    /// Bytes per slot.
    pub slot: usize,
    /// Slots.
    pub slots: usize,
    /// Next slot (advanced only by a successful post).
    pub next: Mutex<usize>,
}

/// A send work request being built with the `ibv_wr_*` API.
pub struct Building {
    /// The request.
    pub wr: SendWr,
    /// Its inline data, copied at `wr_complete`.
    pub inline: Option<Vec<u8>>,
}

/// A queue pair: an `ibv_qp_ex` (its `ibv_qp` first) and the Rondo QP.
#[repr(C)]
pub struct Qp {
    /// The C part.
    pub ex: ibv_qp_ex,
    /// The Rondo QP, shared with the listener.
    pub link: Arc<Link>,
    /// Every send is signaled.
    pub sq_sig_all: bool,
    /// The capabilities granted.
    pub cap: ibv_qp_cap,
    /// Verbs state.
    pub st: QpState,
    /// Inline slots.
    pub inline: Inline,
    /// Requests of the `ibv_wr_*` API between `wr_start` and `wr_complete`.
    pub building: Mutex<Vec<Building>>,
    /// First error of the `ibv_wr_*` calls since `wr_start` (errno).
    pub build_err: AtomicUsize,
    /// The owner context (its `qps` table holds `link`).
    pub ctx: *mut Ctx,
}

impl Qp {
    /// The Rondo QP.
    pub fn qp(&self) -> &QueuePair {
        &self.link.qp
    }

    /// Posts `wr`, its bytes `inline` copied into the next inline slot first.
    pub fn post(&self, mut wr: SendWr, inline: Option<&[&[u8]]>) -> Result<(), c_int> {
        let Some(parts) = inline else {
            return self.qp().post_send_owned(wr).map_err(errno_of);
        };
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total > self.inline.slot {
            refuse(&format!(
                "inline data of {total} bytes exceeds the QP's max_inline_data {}",
                self.inline.slot
            ));
            return Err(libc::EINVAL);
        }
        let mut next = lock(&self.inline.next);
        let base = (*next % self.inline.slots) * self.inline.slot;
        let mut at = base;
        for p in parts {
            self.inline.mr.write(at, p).map_err(|_| libc::EINVAL)?;
            at += p.len();
        }
        wr.sg_list.clear();
        if total > 0 {
            wr.sg_list
                .push(Sge::new(&self.inline.mr, base, total as u32));
        }
        self.qp().post_send_owned(wr).map_err(errno_of)?;
        *next += 1;
        Ok(())
    }
}

/// The errno of a failed verbs call.
pub fn errno_of(e: rondo_verbs::VerbsError) -> c_int {
    use rondo_verbs::VerbsError as E;
    match e {
        E::SendQueueFull { .. } | E::RecvQueueFull { .. } | E::Alloc { .. } => libc::ENOMEM,
        E::Unsupported(..) => libc::EOPNOTSUPP,
        E::Io(_) | E::Device(_) => libc::EIO,
        other => {
            debug!("{other}");
            libc::EINVAL
        }
    }
}

/// The owner context of a PD, QP, CQ, MR or channel handle (their first member is
/// the context pointer), if ours.
///
/// # Safety
/// `obj` is null or a live libibverbs object whose first member is its context.
pub unsafe fn owner<'a>(obj: *const c_void) -> Option<&'a mut Ctx> {
    if obj.is_null() {
        return None;
    }
    // SAFETY: the first member of a live object is its context pointer.
    unsafe { ctx_of(*(obj as *const *mut ibv_context)) }
}
