//! The driver: the [`Switch`] over UDP sockets, on a thread of its own.
//!
//! One socket at the topology's `listen` address receives every host's datagrams;
//! the source address picks the path and destination (the forwarding table), and
//! deliveries leave from six sending sockets, one per class and CE mark, whose TOS
//! byte carries the class's DSCP and the ECN codepoint (ECT(0), or CE when marked),
//! so the receiver's datapath reads the mark back as from a real switch.

use crate::counters::Counters;
use crate::switch::{Class, Switch};
use crate::topology::Topology;
use rondo_proto::time::Instant;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration as StdDuration;

/// Largest datagram the fabric receives.
const MAX_DATAGRAM: usize = 65_536;
/// Longest single wait, so that a stop request is seen within it.
const MAX_WAIT: StdDuration = StdDuration::from_millis(2);
/// Waits shorter than this are polled, not slept (a sleep that short comes back late
/// by the kernel's timer slack).
const MIN_WAIT: StdDuration = StdDuration::from_micros(30);

/// Why the fabric could not start or failed while running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FabricError {
    /// The listen address or a sending socket could not be bound.
    #[error("bind the fabric's socket {addr}: {source} (is another fabric running there?)")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: io::Error,
    },
    /// A socket option could not be set.
    #[error("set up the fabric's sockets: {0}")]
    Setup(io::Error),
    /// The fabric's thread panicked.
    #[error("the fabric's thread stopped unexpectedly")]
    Thread,
}

/// What a stopped fabric reports.
#[derive(Clone, Debug)]
pub struct Report {
    /// Every counter.
    pub counters: Counters,
    /// CPU time of the fabric's thread, nanoseconds (0 where the platform has no
    /// thread clock).
    pub cpu_ns: u64,
}

impl Report {
    /// CPU time per datagram handled (received and, when forwarded, sent), µs.
    pub fn cpu_us_per_datagram(&self) -> f64 {
        let n = self.counters.datagrams_in.max(1);
        self.cpu_ns as f64 / 1e3 / n as f64
    }
}

/// A running fabric.
#[derive(Debug)]
pub struct Fabric {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    live: Arc<Mutex<Counters>>,
    thread: Option<JoinHandle<Report>>,
}

/// The process clock (nanoseconds since the first call), as the switch's time.
pub fn now() -> Instant {
    use std::sync::OnceLock;
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    let e = EPOCH.get_or_init(std::time::Instant::now);
    Instant::from_ns(e.elapsed().as_nanos() as u64)
}

impl Fabric {
    /// Binds the topology's listen address and starts forwarding.
    pub fn spawn(topo: &Topology) -> Result<Fabric, FabricError> {
        let rx = UdpSocket::bind(topo.listen).map_err(|source| FabricError::Bind {
            addr: topo.listen,
            source,
        })?;
        let addr = rx.local_addr().map_err(FabricError::Setup)?;
        let mut tx = Vec::new();
        for class in Class::ALL {
            let dscp = match class {
                Class::Control => topo.dscp.control,
                Class::Data => topo.dscp.data,
                Class::Probe => topo.dscp.probe,
            };
            for ce in [false, true] {
                let bind = SocketAddr::new(topo.listen.ip(), 0);
                let s = UdpSocket::bind(bind)
                    .map_err(|source| FabricError::Bind { addr: bind, source })?;
                let s2 = socket2::SockRef::from(&s);
                let tos = u32::from(dscp & 63) << 2 | if ce { 0b11 } else { 0b10 };
                // IPv6: no traffic class is set (socket2 0.5 has no setter); the
                // receiver sees no CE marks then.
                if topo.listen.is_ipv4() {
                    s2.set_tos(tos).map_err(FabricError::Setup)?;
                }
                let _ = s2.set_send_buffer_size(4 << 20);
                tx.push(s);
            }
        }
        set_int(&rx, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 16 << 20)
            .or_else(|_| set_int(&rx, libc::SOL_SOCKET, libc::SO_RCVBUF, 16 << 20))
            .map_err(FabricError::Setup)?;
        // Kernel receive timestamps: a datagram's arrival is when the kernel got it,
        // not when this thread came to read it (on a loaded host, much later).
        set_int(&rx, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).map_err(FabricError::Setup)?;
        let switch = Switch::new(topo, now());
        let live = Arc::new(Mutex::new(switch.counters().clone()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, live) = (stop.clone(), live.clone());
            std::thread::Builder::new()
                .name("rondo-fabric".into())
                .spawn(move || forward(switch, rx, tx, &stop, &live))
                .map_err(FabricError::Setup)?
        };
        Ok(Fabric {
            addr,
            stop,
            live,
            thread: Some(thread),
        })
    }

    /// The address hosts send to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Counters as of the last few milliseconds.
    pub fn counters(&self) -> Counters {
        self.live
            .lock()
            .map(|c| c.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// True while the forwarding thread runs.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops forwarding and returns the counters.
    pub fn stop(mut self) -> Result<Report, FabricError> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .ok_or(FabricError::Thread)?
            .join()
            .map_err(|_| FabricError::Thread)
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn forward(
    mut switch: Switch,
    rx: UdpSocket,
    tx: Vec<UdpSocket>,
    stop: &AtomicBool,
    live: &Mutex<Counters>,
) -> Report {
    let cpu0 = thread_cpu_ns();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut last_publish = now();
    let mut last_arrival = Instant::ZERO;
    if rx.set_nonblocking(true).is_err() {
        switch.counters_mut().recv_errors += 1;
    }
    while !stop.load(Ordering::Relaxed) {
        // Wait for a datagram until the switch's next event (at most MAX_WAIT).
        let t = now();
        let wait = switch.poll_timeout().map_or(MAX_WAIT, |w| {
            StdDuration::from_nanos(w.saturating_since(t).as_ns()).min(MAX_WAIT)
        });
        if wait >= MIN_WAIT {
            wait_readable(&rx, wait);
        }
        for _ in 0..1024 {
            match recv_stamped(&rx, &mut buf) {
                Ok((n, from, stamp)) => {
                    let t = now();
                    let at = match stamp {
                        Some(real_ns) => {
                            let age = wall_ns().saturating_sub(real_ns);
                            Instant::from_ns(t.as_ns().saturating_sub(age)).max(last_arrival)
                        }
                        None => t,
                    };
                    last_arrival = at;
                    switch.arrive(at, from, &buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // ICMP errors of earlier sends (a host that went away) land here.
                Err(_) => switch.counters_mut().recv_errors += 1,
            }
        }
        let t = now();
        while let Some(d) = switch.poll_delivery(t) {
            let sock = &tx[d.class as usize * 2 + usize::from(d.ce)];
            if sock.send_to(&d.data, d.to).is_err() {
                switch.counters_mut().send_errors += 1;
            }
        }
        if t.saturating_since(last_publish).as_ns() > 5_000_000 {
            last_publish = t;
            if let Ok(mut c) = live.lock() {
                *c = switch.counters().clone();
            }
        }
    }
    let counters = switch.counters().clone();
    if let Ok(mut c) = live.lock() {
        *c = counters.clone();
    }
    Report {
        counters,
        cpu_ns: thread_cpu_ns().saturating_sub(cpu0),
    }
}

pub(crate) fn set_int(
    sock: &UdpSocket,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the pointer and length describe `v`, an int that lives for the call.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The wall clock (CLOCK_REALTIME, the clock of SO_TIMESTAMPNS), ns.
pub(crate) fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// One datagram with its source and its kernel receive time (wall clock, ns).
pub(crate) fn recv_stamped(
    sock: &UdpSocket,
    buf: &mut [u8],
) -> io::Result<(usize, SocketAddr, Option<u64>)> {
    use std::os::fd::AsRawFd;
    // SAFETY: all-zero bytes are a valid sockaddr_storage and msghdr.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut control = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg points at `addr`, `iov` (over `buf`) and `control`, all live and
    // writable for the call, with their true lengths.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the kernel filled msg_control with msg_controllen bytes of cmsgs; the
    // CMSG_* macros walk them within that length.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let from = match i32::from(addr.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a =
                unsafe { &*(&addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            SocketAddr::from((
                std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a =
                unsafe { &*(&addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            SocketAddr::from((
                std::net::Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
            ))
        }
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "datagram from an unknown address family",
            ))
        }
    };
    Ok((n as usize, from, stamp))
}

/// Waits until `sock` is readable or `wait` has passed.
pub(crate) fn wait_readable(sock: &UdpSocket, wait: StdDuration) {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
    };
    // SAFETY: one valid pollfd and a valid timespec, both live for the call; no
    // signal mask is passed.
    let _ = unsafe { libc::ppoll(&mut fd, 1, &ts, std::ptr::null()) };
}

/// CPU time of the calling thread, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Set by SIGINT / SIGTERM once [`stop_on_signals`] was called.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::Relaxed);
}

/// Makes SIGINT (Ctrl-C) and SIGTERM set a flag instead of killing the process,
/// so that a command can clean up and print its counters; see [`signalled`].
pub fn stop_on_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

/// True once SIGINT or SIGTERM arrived (after [`stop_on_signals`]).
pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::Relaxed)
}
