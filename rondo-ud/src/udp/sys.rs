//! The kernel calls of the UDP datapath: socket options, `sendmmsg` / `recvmmsg`
//! with their control messages (`IP_TOS` / `IPV6_TCLASS`, `UDP_SEGMENT`,
//! `UDP_GRO`), and `ppoll`. This is the only module of the crate with `unsafe`;
//! everything above it works with safe descriptors ([`OutMsg`], [`InMsg`]).
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::Duration;

/// Bytes of control buffer per message: room for a TOS/traffic class and a GSO or
/// GRO segment size, with the kernel's alignment.
const CONTROL_WORDS: usize = 8;

/// One datagram (or one GSO train of equal-sized datagrams) to send.
#[derive(Clone, Copy, Debug)]
pub(super) struct OutMsg {
    /// Destination.
    pub dest: SocketAddr,
    /// First of its slices (iovecs) in the slice list given to [`send`].
    pub iov_start: usize,
    /// Number of slices.
    pub iov_count: usize,
    /// Bytes, all slices together.
    pub len: usize,
    /// GSO segment size (`UDP_SEGMENT`), 0 for a single datagram.
    pub segment: u16,
    /// TOS / traffic-class byte for this message, `None` for the socket's default.
    pub tos: Option<u8>,
}

impl OutMsg {
    /// Datagrams this message puts on the wire.
    pub fn datagrams(&self) -> usize {
        if self.segment > 0 {
            self.len.div_ceil(usize::from(self.segment))
        } else {
            1
        }
    }
}

/// What `recvmmsg` said about one received message.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct InMsg {
    /// Bytes received into the message's slot.
    pub len: usize,
    /// GRO segment size when the kernel coalesced several datagrams, else 0.
    pub segment: usize,
    /// The TOS / traffic-class byte it arrived with, when the kernel reported it.
    pub tos: Option<u8>,
    /// The datagram was longer than its slot and was cut (`MSG_TRUNC`).
    pub truncated: bool,
}

/// Reusable `mmsghdr` / `iovec` / address / control arrays for one batch size, so
/// that a batch allocates nothing.
pub(super) struct MsgArrays {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_storage>,
    control: Vec<[u64; CONTROL_WORDS]>,
}

// SAFETY: the raw pointers inside `hdrs` and `iovs` are only written and read inside
// one `send` / `recv` call, which holds `&mut self` and the buffers they point to;
// between calls they are stale and never dereferenced.
unsafe impl Send for MsgArrays {}

impl std::fmt::Debug for MsgArrays {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsgArrays")
            .field("capacity", &self.hdrs.len())
            .finish()
    }
}

impl MsgArrays {
    /// Arrays for batches of up to `n` messages.
    pub(super) fn new(n: usize) -> MsgArrays {
        // SAFETY: mmsghdr, iovec and sockaddr_storage are plain C structs for which
        // all-zero bytes are a valid value (null pointers, zero lengths).
        let (hdr, iov, name) = unsafe {
            (
                zeroed::<libc::mmsghdr>(),
                zeroed::<libc::iovec>(),
                zeroed::<libc::sockaddr_storage>(),
            )
        };
        MsgArrays {
            hdrs: vec![hdr; n],
            // Sends use two iovecs per datagram (head and payload).
            iovs: vec![iov; 2 * n],
            names: vec![name; n],
            control: vec![[0; CONTROL_WORDS]; n],
        }
    }

    /// Largest batch.
    pub(super) fn capacity(&self) -> usize {
        self.hdrs.len()
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `setsockopt` with an `int` value.
pub(super) fn set_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the value pointer and length describe a live c_int.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const i32).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// `getsockopt` of an `int` value.
pub(super) fn get_int(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = size_of::<i32>() as libc::socklen_t;
    // SAFETY: value and len are live and len says how many bytes value has.
    cvt(unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut i32).cast(), &mut len) })?;
    Ok(value)
}

/// Length of the C form of `addr`.
fn addr_len(addr: &SocketAddr) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(_) => size_of::<libc::sockaddr_in>() as libc::socklen_t,
        SocketAddr::V6(_) => size_of::<libc::sockaddr_in6>() as libc::socklen_t,
    }
}

/// Writes `addr` into `storage`, returns its length.
fn write_addr(storage: &mut libc::sockaddr_storage, addr: &SocketAddr) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((storage as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((storage as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// Appends one control message with an `int` value at `*cmsg`, advancing it.
///
/// # Safety
/// `hdr` points to a msghdr whose control buffer is live and has room for the
/// message; `*cmsg` is a header inside it from `CMSG_FIRSTHDR` / `CMSG_NXTHDR`.
unsafe fn push_cmsg<T: Copy>(
    hdr: *const libc::msghdr,
    cmsg: &mut *mut libc::cmsghdr,
    level: i32,
    kind: i32,
    value: T,
) -> usize {
    if cmsg.is_null() {
        return 0;
    }
    // SAFETY: per the function contract *cmsg lies in the control buffer with room
    // for CMSG_SPACE(size_of::<T>()) bytes.
    unsafe {
        (**cmsg).cmsg_level = level;
        (**cmsg).cmsg_type = kind;
        (**cmsg).cmsg_len = libc::CMSG_LEN(size_of::<T>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(*cmsg).cast::<T>(), value);
        *cmsg = libc::CMSG_NXTHDR(hdr, *cmsg);
        libc::CMSG_SPACE(size_of::<T>() as u32) as usize
    }
}

/// Sends `msgs` (at most `arrays.capacity()`) with one `sendmmsg`; message `m` is
/// the concatenation of slices `slice(m.iov_start)` to
/// `slice(m.iov_start + m.iov_count - 1)`. Returns
/// how many messages the kernel took (the rest are the caller's to retry or drop).
/// `v6` says which TOS control message the socket family uses.
pub(super) fn send<'a>(
    fd: RawFd,
    arrays: &mut MsgArrays,
    slice: &dyn Fn(usize) -> rondo_proto::message::PayloadBytes<'a>,
    msgs: &[OutMsg],
    v6: bool,
) -> io::Result<usize> {
    let n = msgs.len().min(arrays.capacity());
    // The iovecs of the messages sent, in order: at most two per datagram of a
    // queue, which has at most `capacity` datagrams.
    let first_iov = msgs.first().map_or(0, |m| m.iov_start);
    let iov_range = |m: &OutMsg| {
        let start = m.iov_start - first_iov;
        start..start + m.iov_count
    };
    // First every write through references (iovecs, addresses, zeroed control
    // buffers), then the headers with pointers taken once from each array, so that
    // no later reference invalidates a pointer the kernel will read.
    for (i, m) in msgs[..n].iter().enumerate() {
        let iovs = iov_range(m);
        assert!(
            iovs.end <= arrays.iovs.len() && m.iov_count > 0,
            "send message outside the iovec arrays"
        );
        for (j, iov) in arrays.iovs[iovs].iter_mut().enumerate() {
            // By address: bytes of this process that the engine keeps until they
            // are acknowledged (its own, or registered memory it holds).
            let bytes = slice(m.iov_start + j);
            *iov = libc::iovec {
                iov_base: bytes.addr() as *mut libc::c_void,
                iov_len: bytes.len(),
            };
        }
        write_addr(&mut arrays.names[i], &m.dest);
        // Zeroed, so that CMSG_NXTHDR reads no stale length.
        arrays.control[i] = [0; CONTROL_WORDS];
    }
    let iovs_ptr = arrays.iovs.as_mut_ptr();
    let names_ptr = arrays.names.as_mut_ptr();
    let control_ptr = arrays.control.as_mut_ptr();
    for (i, m) in msgs[..n].iter().enumerate() {
        let hdr = &mut arrays.hdrs[i].msg_hdr;
        hdr.msg_name = names_ptr.wrapping_add(i).cast();
        hdr.msg_namelen = addr_len(&m.dest);
        hdr.msg_iov = iovs_ptr.wrapping_add(iov_range(m).start);
        hdr.msg_iovlen = m.iov_count as _;
        hdr.msg_flags = 0;
        hdr.msg_control = control_ptr.wrapping_add(i).cast();
        hdr.msg_controllen = size_of::<[u64; CONTROL_WORDS]>() as _;
        let mut used = 0;
        // SAFETY: the control buffer is live, 8-byte aligned, and 64 bytes long,
        // room for two CMSG_SPACE(4) messages; hdr points at it.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
            if let Some(tos) = m.tos {
                let (level, kind) = if v6 {
                    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
                } else {
                    (libc::IPPROTO_IP, libc::IP_TOS)
                };
                used += push_cmsg(hdr, &mut cmsg, level, kind, i32::from(tos));
            }
            if m.segment > 0 {
                used += push_cmsg(hdr, &mut cmsg, libc::SOL_UDP, libc::UDP_SEGMENT, m.segment);
            }
        }
        if used == 0 {
            hdr.msg_control = std::ptr::null_mut();
        }
        hdr.msg_controllen = used as _;
        arrays.hdrs[i].msg_len = 0;
    }
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: the first n headers point at live iovecs, addresses and control
    // buffers set up above, and the iovecs at slices that live for 'a, beyond the
    // call.
    let sent = cvt(unsafe { libc::sendmmsg(fd, arrays.hdrs.as_mut_ptr(), n as u32, 0) })?;
    Ok(sent as usize)
}

/// Receives up to `out.len()` messages into `buf`, slot `i` being
/// `buf[i * slot..(i + 1) * slot]`, without blocking. Returns how many arrived
/// (0 when none was waiting) and fills `out[..n]`.
pub(super) fn recv(
    fd: RawFd,
    arrays: &mut MsgArrays,
    buf: &mut [u8],
    slot: usize,
    out: &mut [InMsg],
) -> io::Result<usize> {
    let n = out.len().min(arrays.capacity()).min(buf.len() / slot);
    // Pointers are taken once per array, after every write through a reference
    // (as in `send`).
    let buf_ptr = buf.as_mut_ptr();
    for (i, iov) in arrays.iovs[..n].iter_mut().enumerate() {
        *iov = libc::iovec {
            iov_base: buf_ptr.wrapping_add(i * slot).cast(),
            iov_len: slot,
        };
    }
    let iovs_ptr = arrays.iovs.as_mut_ptr();
    let control_ptr = arrays.control.as_mut_ptr();
    for (i, mh) in arrays.hdrs[..n].iter_mut().enumerate() {
        let hdr = &mut mh.msg_hdr;
        hdr.msg_name = std::ptr::null_mut();
        hdr.msg_namelen = 0;
        hdr.msg_iov = iovs_ptr.wrapping_add(i);
        hdr.msg_iovlen = 1;
        hdr.msg_control = control_ptr.wrapping_add(i).cast();
        hdr.msg_controllen = size_of::<[u64; CONTROL_WORDS]>() as _;
        hdr.msg_flags = 0;
        mh.msg_len = 0;
    }
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: the first n headers point at live iovecs over disjoint slots of `buf`
    // (n slots fit in it) and at live control buffers, all exclusively borrowed for
    // the call.
    let got = unsafe {
        libc::recvmmsg(
            fd,
            arrays.hdrs.as_mut_ptr(),
            n as u32,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if got < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ => Err(e),
        };
    }
    let got = got as usize;
    for (i, o) in out[..got].iter_mut().enumerate() {
        let mh = &arrays.hdrs[i];
        *o = InMsg {
            len: (mh.msg_len as usize).min(slot),
            segment: 0,
            tos: None,
            truncated: mh.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        };
        let hdr: *const libc::msghdr = &mh.msg_hdr;
        // SAFETY: the kernel filled msg_controllen bytes of the live control buffer
        // with well-formed cmsg headers; CMSG_FIRSTHDR / CMSG_NXTHDR stay inside it
        // and return null at its end; each data read is bounded by cmsg_len.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
            while !cmsg.is_null() {
                let c = &*cmsg;
                let data = libc::CMSG_DATA(cmsg);
                let data_len = (c.cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                match (c.cmsg_level, c.cmsg_type) {
                    (libc::IPPROTO_IP, libc::IP_TOS) if data_len >= 1 => o.tos = Some(*data),
                    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if data_len >= 4 => {
                        o.tos = Some(std::ptr::read_unaligned(data.cast::<i32>()) as u8)
                    }
                    (libc::SOL_UDP, libc::UDP_GRO) if data_len >= 4 => {
                        o.segment = std::ptr::read_unaligned(data.cast::<i32>()).max(0) as usize
                    }
                    _ => {}
                }
                cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
            }
        }
    }
    Ok(got)
}

/// Waits until one of `fds` is readable or `timeout` passes. Returns how many are
/// readable (their `revents` are set).
pub(super) fn wait_readable(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    for p in fds.iter_mut() {
        p.events = libc::POLLIN;
        p.revents = 0;
    }
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    // SAFETY: fds is a live, exclusively borrowed array of fds.len() pollfds and ts a
    // live timespec; a null signal mask leaves the mask unchanged.
    let r = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as _, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// A `pollfd` for `fd`.
pub(super) fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}
