//! Waiting for a datapath outside its owner's lock: a [`Waiter`] sleeps until a path
//! socket is readable, a [`Waker`] fires or a timeout passes, so that a progress
//! thread can sleep until the engine's next timer while another thread posts work
//! (and wakes it) through the lock the datapath lives behind.

#![allow(unsafe_code)] // eventfd(2) and its 8-byte reads and writes

use super::sys;
use super::UdpDatapath;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Wakes a [`Waiter`] from any thread (an `eventfd`). A wake while nobody waits is
/// kept until the next wait, which then returns at once.
#[derive(Debug)]
pub struct Waker {
    fd: OwnedFd,
    /// Set while a waiter may be asleep: wakes at other times skip the system call.
    armed: AtomicBool,
}

impl Waker {
    /// A new waker.
    ///
    /// Errors: the kernel refuses an `eventfd` (out of descriptors).
    pub fn new() -> io::Result<Arc<Waker>> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor
        // that nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by eventfd and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Arc::new(Waker {
            fd,
            armed: AtomicBool::new(false),
        }))
    }

    /// Wakes the waiter if it sleeps (or is about to).
    pub fn wake(&self) {
        if self.armed.swap(false, Ordering::AcqRel) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: the buffer is 8 live bytes, as eventfd writes need. A full counter
            // (EAGAIN) means a wake is pending anyway.
            unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        }
    }

    /// Clears a pending wake.
    fn drain(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: the buffer is 8 live, writable bytes; the fd is non-blocking, so an
        // empty counter returns EAGAIN, which is ignored.
        unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    }
}

/// Sleeps until a path socket of a [`UdpDatapath`] is readable, its [`Waker`] fires,
/// or a timeout passes; made by [`UdpDatapath::waiter`]. It holds copies of the
/// socket descriptors: use it only while the datapath lives (after that a wait
/// returns at once).
#[derive(Debug)]
pub struct Waiter {
    pollfds: Vec<libc::pollfd>,
    waker: Arc<Waker>,
}

impl Waiter {
    /// Sleeps at most `timeout`. Call [`Waiter::arm`] first, then check (under the
    /// datapath's lock) that there is nothing to do, then wait: a wake between the
    /// two is not lost. Returns whether a socket is readable or a wake came.
    ///
    /// Errors: a failing `ppoll`.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        let ready = sys::wait_readable(&mut self.pollfds, timeout)?;
        self.waker.armed.store(false, Ordering::Release);
        if self.pollfds.last().is_some_and(|p| p.revents != 0) {
            self.waker.drain();
        }
        Ok(ready > 0)
    }

    /// Announces a wait: from now on [`Waker::wake`] writes to the eventfd.
    pub fn arm(&self) {
        self.waker.armed.store(true, Ordering::Release);
    }
}

impl UdpDatapath {
    /// A [`Waiter`] on this datapath's sockets and `waker`.
    pub fn waiter(&self, waker: Arc<Waker>) -> Waiter {
        let mut pollfds: Vec<libc::pollfd> = self
            .sockets
            .iter()
            .map(|s| sys::pollfd(s.as_raw_fd()))
            .collect();
        pollfds.push(sys::pollfd(waker.fd.as_raw_fd()));
        Waiter { pollfds, waker }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::UdpConfig;

    fn datapath() -> UdpDatapath {
        UdpDatapath::bind(UdpConfig {
            local_ip: std::net::Ipv4Addr::LOCALHOST.into(),
            base_port: 0,
            paths: 2,
            ..UdpConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn a_wake_before_the_wait_is_kept_and_an_unarmed_wake_is_not() {
        let dp = datapath();
        let waker = Waker::new().unwrap();
        let mut w = dp.waiter(waker.clone());
        waker.wake(); // not armed: nothing to wake
        assert!(!w.wait(Duration::ZERO).unwrap());
        w.arm();
        waker.wake();
        assert!(w.wait(Duration::from_secs(5)).unwrap());
        // The wake was consumed.
        w.arm();
        assert!(!w.wait(Duration::ZERO).unwrap());
    }

    #[test]
    fn a_datagram_on_a_path_socket_ends_the_wait() {
        let dp = datapath();
        let mut w = dp.waiter(Waker::new().unwrap());
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.send_to(b"x", dp.local_addrs()[1]).unwrap();
        w.arm();
        assert!(w.wait(Duration::from_secs(5)).unwrap());
    }

    #[test]
    fn a_wake_from_another_thread_ends_the_wait() {
        let dp = datapath();
        let waker = Waker::new().unwrap();
        let mut w = dp.waiter(waker.clone());
        w.arm();
        let t = std::thread::spawn(move || waker.wake());
        assert!(w.wait(Duration::from_secs(30)).unwrap());
        t.join().unwrap();
    }
}
