//! Connection set-up: what `modify_qp` to RTR needs that the verbs exchange does not
//! carry (`IBVERBS-SHIM.md`, "Addressing"). Each context listens on TCP and reports
//! that port as its LID; its GID is `::ffff:<ip>`. At RTR the drop-in connects to
//! (the IP inside the destination GID, the destination LID), sends the destination
//! QP number with its own endpoint descriptor and gets the peer QP's descriptor
//! back; the listener connects the passive QP from the request, so a side that only
//! reaches RTR is ready. One TCP round trip per QP; Rondo's tokens, paths and ports
//! stay as `rondo-verbs` makes them.

use crate::objects::{debug, lock};
use rondo_verbs::{QpEndpoint, QueuePair};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a set-up exchange may take.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
const MAGIC: &[u8; 4] = b"RIBV";
const OK: u8 = 0;
const NO_QP: u8 = 1;
const REFUSED: u8 = 2;

/// A QP as the listener sees it.
pub struct Link {
    /// The Rondo QP.
    pub qp: QueuePair,
    /// The peer QP number once connected.
    pub peer: Mutex<Option<u32>>,
}

impl Link {
    /// Connects the QP to `peer` unless it is connected already.
    pub fn connect(&self, peer: &QpEndpoint) -> Result<(), String> {
        let mut p = lock(&self.peer);
        if p.is_some() {
            return Ok(());
        }
        self.qp.connect(peer).map_err(|e| e.to_string())?;
        *p = Some(peer.qpn);
        debug!(
            "QP {:#x} connected to peer QP {:#x}",
            self.qp.qp_num(),
            peer.qpn
        );
        Ok(())
    }

    /// Whether the QP is connected.
    pub fn connected(&self) -> bool {
        lock(&self.peer).is_some()
    }
}

/// The set-up listener of a context.
pub struct Listener {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl Listener {
    /// Listens on `ip`, an ephemeral port, answering for the QPs of `qps`.
    pub fn start(
        ip: Ipv4Addr,
        qps: Arc<Mutex<HashMap<u32, Arc<Link>>>>,
    ) -> std::io::Result<Listener> {
        let l = TcpListener::bind((ip, 0))?;
        let addr = l.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rondo-ibv-setup".into())
            .spawn(move || {
                for conn in l.incoming() {
                    if s.load(Ordering::Acquire) {
                        break;
                    }
                    if let Ok(c) = conn {
                        if let Err(e) = serve(c, &qps) {
                            debug!("set-up request: {e}");
                        }
                    }
                }
            })?;
        Ok(Listener {
            port: addr.port(),
            stop,
            thread: Some(thread),
            addr,
        })
    }

    /// The port (reported as the LID).
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut n = [0u8; 2];
    s.read_exact(&mut n)?;
    let mut b = vec![0; u16::from_be_bytes(n) as usize];
    s.read_exact(&mut b)?;
    Ok(b)
}

fn frame(b: &[u8]) -> Vec<u8> {
    let mut v = (b.len() as u16).to_be_bytes().to_vec();
    v.extend_from_slice(b);
    v
}

fn serve(mut s: TcpStream, qps: &Mutex<HashMap<u32, Arc<Link>>>) -> Result<(), String> {
    s.set_read_timeout(Some(SETUP_TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut head = [0u8; 8];
    s.read_exact(&mut head).map_err(|e| e.to_string())?;
    if &head[..4] != MAGIC {
        return Err("not a rondo-ibv set-up request".into());
    }
    let qpn = u32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
    let peer = read_frame(&mut s).map_err(|e| e.to_string())?;
    let link = lock(qps).get(&qpn).cloned();
    let reply = match link {
        None => vec![NO_QP],
        Some(link) => match QpEndpoint::from_bytes(&peer)
            .map_err(|e| e.to_string())
            .and_then(|p| link.connect(&p))
        {
            Ok(()) => {
                let mut r = vec![OK];
                r.extend(frame(&link.qp.endpoint().to_bytes()));
                r
            }
            Err(e) => {
                let mut r = vec![REFUSED];
                r.extend(frame(e.as_bytes()));
                r
            }
        },
    };
    s.write_all(&reply).map_err(|e| e.to_string())
}

/// The active side of the set-up: asks the context listening at `at` to connect
/// its QP `dest_qpn` to `link`'s QP, then connects `link` to it.
pub fn connect_to(link: &Link, at: SocketAddr, dest_qpn: u32) -> Result<(), String> {
    if link.connected() {
        return Ok(());
    }
    debug!(
        "QP {:#x}: set-up with {at}, peer QP {dest_qpn:#x}",
        link.qp.qp_num()
    );
    let mut s = TcpStream::connect_timeout(&at, SETUP_TIMEOUT).map_err(|e| {
        format!("cannot reach the peer's rondo-ibv listener at {at} (from its GID and LID): {e}")
    })?;
    s.set_read_timeout(Some(SETUP_TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut req = MAGIC.to_vec();
    req.extend_from_slice(&dest_qpn.to_be_bytes());
    req.extend(frame(&link.qp.endpoint().to_bytes()));
    s.write_all(&req).map_err(|e| e.to_string())?;
    let mut status = [0u8; 1];
    s.read_exact(&mut status)
        .map_err(|e| format!("set-up reply from {at}: {e}"))?;
    match status[0] {
        OK => {
            let b = read_frame(&mut s).map_err(|e| e.to_string())?;
            let peer = QpEndpoint::from_bytes(&b).map_err(|e| e.to_string())?;
            link.connect(&peer)
        }
        NO_QP => Err(format!("the peer at {at} has no QP {dest_qpn:#x}")),
        _ => {
            let b = read_frame(&mut s).map_err(|e| e.to_string())?;
            Err(format!(
                "the peer at {at} refused: {}",
                String::from_utf8_lossy(&b)
            ))
        }
    }
}
