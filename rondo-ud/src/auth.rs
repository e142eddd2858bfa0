//! Authenticated datagrams around any host ([`Authenticated`]): every datagram
//! of a connection that has a [`Sealer`] is sealed on the way out and checked on
//! the way in ([`rondo_proto::auth`], `docs/wire.md` "Authentication trailer"),
//! so the engine behind it only ever sees datagrams its peer sealed, once each.
//! What fails is dropped and counted ([`AuthStats`]), never handed on.
//!
//! The UDP and verbs datapaths of `rondo-verbs` put it in front of the verbs host;
//! the simulator and the in-memory fabric do not (mode `none`).

use crate::datapath::InPlaceHost;
use rondo_proto::auth::{AuthMode, AuthStats, Sealer, TRAILER_LEN};
use rondo_proto::time::Instant;
use rondo_proto::transmit::{Host, PayloadRef, Priority, Transmit, TxBuffer};
use rondo_proto::PayloadBytes;
use std::collections::HashMap;

/// A host whose connections' datagrams are sealed and opened by flow id.
#[derive(Debug)]
pub struct Authenticated<H> {
    inner: H,
    /// By local flow id: the `flow` of arriving datagrams, [`Transmit::flow`] of
    /// departing ones.
    flows: HashMap<u32, Sealer>,
    stats: AuthStats,
    /// Flows whose mode adds a trailer.
    sealing: usize,
    /// An arriving encrypted datagram, decrypted here.
    scratch: Vec<u8>,
}

impl<H> Authenticated<H> {
    /// `inner` with no sealed connection yet (everything passes unchanged).
    pub fn new(inner: H) -> Authenticated<H> {
        Authenticated {
            inner,
            flows: HashMap::new(),
            stats: AuthStats::default(),
            sealing: 0,
            scratch: Vec::new(),
        }
    }

    /// Seals and checks the datagrams of local flow `flow` with `sealer` from now
    /// on (replacing an earlier one). The flow's `FlowConfig::mtu` must leave room
    /// for the trailer (`AuthMode::overhead`).
    pub fn add_flow(&mut self, flow: u32, sealer: Sealer) {
        self.flows.insert(flow, sealer);
        self.count_sealing();
    }

    /// Stops sealing `flow` (its connection is gone).
    pub fn remove_flow(&mut self, flow: u32) {
        self.flows.remove(&flow);
        self.count_sealing();
    }

    fn count_sealing(&mut self) {
        self.sealing = self
            .flows
            .values()
            .filter(|s| s.mode() != AuthMode::None)
            .count();
    }

    /// Connections with a sealer now.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// What was sealed, accepted and dropped so far.
    pub fn stats(&self) -> AuthStats {
        self.stats
    }

    /// The wrapped host.
    pub fn inner(&self) -> &H {
        &self.inner
    }

    /// The wrapped host, mutable.
    pub fn inner_mut(&mut self) -> &mut H {
        &mut self.inner
    }
}

impl<H> std::ops::Deref for Authenticated<H> {
    type Target = H;
    fn deref(&self) -> &H {
        &self.inner
    }
}

impl<H> std::ops::DerefMut for Authenticated<H> {
    fn deref_mut(&mut self) -> &mut H {
        &mut self.inner
    }
}

/// The datapath's buffer with room kept for the trailer, and the bytes the host
/// wrote kept reachable for the seal.
struct SealTx<'a, B: ?Sized> {
    inner: Option<&'a mut B>,
    capacity: usize,
    sealing: bool,
    taken: Option<&'a mut [u8]>,
    spare: Vec<u8>,
}

impl<B: TxBuffer + ?Sized> TxBuffer for SealTx<'_, B> {
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn payload_by_reference(&self) -> bool {
        // A sealed datagram is one contiguous buffer (the tag covers the payload).
        !self.sealing
            && self
                .inner
                .as_ref()
                .is_some_and(|b| b.payload_by_reference())
    }

    fn take(&mut self, path: u16, priority: Priority, len: usize) -> &mut [u8] {
        let extra = if self.sealing { TRAILER_LEN } else { 0 };
        match self.inner.take() {
            Some(b) => {
                let full = b.take(path, priority, len + extra);
                &mut self.taken.insert(full)[..len]
            }
            // Called twice (a host bug): the second datagram goes nowhere.
            None => {
                self.spare.resize(len, 0);
                &mut self.spare[..]
            }
        }
    }
}

impl<H: Host> Host for Authenticated<H> {
    fn handle_datagram(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool) {
        let flow = match data.get(8..12) {
            Some(f) => u32::from_be_bytes([f[0], f[1], f[2], f[3]]),
            // Not even a flow id: the engine counts it as malformed.
            None => return self.inner.handle_datagram(now, path, data, ecn_ce),
        };
        let Some(sealer) = self.flows.get_mut(&flow) else {
            // No sealed connection: the engine checks it (unknown flow, token).
            return self.inner.handle_datagram(now, path, data, ecn_ce);
        };
        let r = match sealer.mode() {
            AuthMode::Encrypt => {
                self.scratch.clear();
                self.scratch.extend_from_slice(data);
                let r = sealer.open(&mut self.scratch);
                self.stats.count_open(&r);
                if let Ok(n) = r {
                    self.inner
                        .handle_datagram(now, path, &self.scratch[..n], ecn_ce);
                }
                return;
            }
            _ => sealer.verify(data),
        };
        self.stats.count_open(&r);
        if let Ok(n) = r {
            self.inner.handle_datagram(now, path, &data[..n], ecn_ce);
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
    }

    fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        let sealing = self.sealing > 0;
        let capacity = if sealing {
            tx.capacity().saturating_sub(TRAILER_LEN)
        } else {
            tx.capacity()
        };
        let mut st = SealTx {
            inner: Some(tx),
            capacity,
            sealing,
            taken: None,
            spare: Vec::new(),
        };
        let mut t = self.inner.poll_transmit(now, &mut st)?;
        let Some(sealer) = self.flows.get_mut(&t.flow) else {
            // A connection without a sealer: the trailer room stays unused, and
            // the datagram goes out as the host wrote it.
            return Some(t);
        };
        let buf = st.taken?;
        match sealer.seal(buf, t.len) {
            Ok(n) => {
                self.stats.sealed += 1;
                t.len = n;
                Some(t)
            }
            Err(_) => {
                // The buffer is left unused; the engine's recovery resends.
                self.stats.seal_failed += 1;
                None
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }

    fn payload(&self, r: PayloadRef) -> PayloadBytes<'_> {
        self.inner.payload(r)
    }
}

impl<H: Host> InPlaceHost for Authenticated<H> {
    fn handle_in_place(&mut self, _: Instant, _: u16, _: &[u8], _: usize, _: bool) {
        // Never called: `takes_in_place` is false (the tag is checked over a
        // whole datagram before anything is placed).
    }

    fn takes_in_place(&self) -> bool {
        false
    }
}
