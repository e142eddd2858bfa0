//! Queue pairs and the endpoint descriptor peers exchange to connect them.

use crate::context::{Backend, Context};
use crate::cq::CompletionQueue;
use crate::header::HEADER_LEN;
use crate::host::MAX_MESSAGE_BYTES;
use crate::mr::ProtectionDomain;
use crate::types::{QpInitAttr, QpState, QpStats, RecvWr, SendWr};
use crate::VerbsError;
use rondo_proto::auth::{AuthMode, KeyPair};
use rondo_proto::FlowConfig;
use std::sync::Arc;

/// The authentication a QP of `ctx` created with `attr` uses: `attr.auth` on real
/// backends, none on the deterministic `mem` fabric.
fn auth_mode(ctx: &Context, attr: &QpInitAttr) -> AuthMode {
    match ctx.inner.backend {
        Backend::Mem { .. } => AuthMode::None,
        #[allow(unreachable_patterns)]
        _ => attr.auth,
    }
}

/// Where a QP can be reached.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerAddr {
    /// A host of an in-process fabric.
    Mem {
        /// Which fabric (QPs of different fabrics cannot connect).
        fabric: u64,
        /// The context's host index on it.
        host: u32,
    },
    /// UDP sockets, one per path.
    Udp {
        /// Address of each path's socket.
        paths: Vec<std::net::SocketAddr>,
    },
    /// The UD queue pair of a `verbs` context (its QPN, qkey, GID, LID, MTU and
    /// paths; the Rondo QP number is [`QpEndpoint::qpn`]).
    #[cfg(all(feature = "verbs", target_os = "linux"))]
    Verbs {
        /// The context's endpoint record (`rondo_ud::verbs::exchange`).
        info: rondo_ud::verbs::exchange::EndpointInfo,
    },
}

/// Address kind of a `verbs` descriptor: the 40-byte endpoint record follows.
const KIND_VERBS: u8 = 2;

/// Everything a peer needs to connect to a QP (`qpn`, addresses per path, the
/// connection token, paths and MTU), exchanged out of band like perftest's
/// descriptor. [`QpEndpoint::to_bytes`] / [`QpEndpoint::from_bytes`] give a stable
/// binary form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpEndpoint {
    /// QP number (the engine flow id datagrams for it carry).
    pub qpn: u32,
    /// This side's half of the connection token.
    pub token: u64,
    /// Paths the QP sprays over.
    pub paths: u16,
    /// Datagram size.
    pub mtu: u32,
    /// Where it is.
    pub addr: PeerAddr,
    /// Datagram authentication the QP uses (both sides must agree).
    pub auth: AuthMode,
    /// The QP's X25519 public key (all zero with [`AuthMode::None`]).
    pub public_key: [u8; 32],
}

const MAGIC: &[u8; 4] = b"RQPE";

impl QpEndpoint {
    /// Binary form: `RQPE`, version 2, then the fields big-endian (`docs/verbs.md`).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(100);
        b.extend_from_slice(MAGIC);
        b.push(2);
        b.push(self.auth.code());
        b.extend_from_slice(&self.public_key);
        b.extend_from_slice(&self.qpn.to_be_bytes());
        b.extend_from_slice(&self.token.to_be_bytes());
        b.extend_from_slice(&self.paths.to_be_bytes());
        b.extend_from_slice(&self.mtu.to_be_bytes());
        match &self.addr {
            PeerAddr::Mem { fabric, host } => {
                b.push(0);
                b.extend_from_slice(&fabric.to_be_bytes());
                b.extend_from_slice(&host.to_be_bytes());
            }
            PeerAddr::Udp { paths } => {
                b.push(1);
                b.extend_from_slice(&(paths.len() as u16).to_be_bytes());
                for a in paths {
                    match a.ip() {
                        std::net::IpAddr::V4(ip) => {
                            b.push(4);
                            b.extend_from_slice(&ip.octets());
                        }
                        std::net::IpAddr::V6(ip) => {
                            b.push(6);
                            b.extend_from_slice(&ip.octets());
                        }
                    }
                    b.extend_from_slice(&a.port().to_be_bytes());
                }
            }
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            PeerAddr::Verbs { info } => {
                b.push(KIND_VERBS);
                b.extend_from_slice(&info.encode());
            }
        }
        b
    }

    /// Parses [`Self::to_bytes`]' form.
    pub fn from_bytes(b: &[u8]) -> Result<QpEndpoint, VerbsError> {
        let bad = |what: &str| {
            VerbsError::BadEndpoint(format!("{what}; was it made by QpEndpoint::to_bytes?"))
        };
        let mut r = Reader { b, at: 0 };
        if r.take(4).ok_or_else(|| bad("truncated"))? != MAGIC {
            return Err(bad("bad magic"));
        }
        if r.u8().ok_or_else(|| bad("truncated"))? != 2 {
            return Err(bad("unknown version"));
        }
        let t = || bad("truncated");
        let auth = AuthMode::from_code(r.u8().ok_or_else(t)?)
            .ok_or_else(|| bad("unknown authentication mode"))?;
        let public_key: [u8; 32] = r.take(32).ok_or_else(t)?.try_into().expect("32");
        let qpn = r.u32().ok_or_else(t)?;
        let token = r.u64().ok_or_else(t)?;
        let paths = r.u16().ok_or_else(t)?;
        let mtu = r.u32().ok_or_else(t)?;
        let addr = match r.u8().ok_or_else(t)? {
            0 => PeerAddr::Mem {
                fabric: r.u64().ok_or_else(t)?,
                host: r.u32().ok_or_else(t)?,
            },
            1 => {
                let n = r.u16().ok_or_else(t)?;
                let mut v = Vec::with_capacity(usize::from(n).min(1024));
                for _ in 0..n {
                    let ip: std::net::IpAddr = match r.u8().ok_or_else(t)? {
                        4 => {
                            let o: [u8; 4] = r.take(4).ok_or_else(t)?.try_into().expect("4");
                            o.into()
                        }
                        6 => {
                            let o: [u8; 16] = r.take(16).ok_or_else(t)?.try_into().expect("16");
                            o.into()
                        }
                        _ => return Err(bad("bad address family")),
                    };
                    v.push(std::net::SocketAddr::new(ip, r.u16().ok_or_else(t)?));
                }
                PeerAddr::Udp { paths: v }
            }
            KIND_VERBS => verbs_addr(&mut r)?,
            _ => return Err(bad("unknown address kind")),
        };
        if r.at != b.len() {
            return Err(bad("trailing bytes"));
        }
        Ok(QpEndpoint {
            auth,
            public_key,
            qpn,
            token,
            paths,
            mtu,
            addr,
        })
    }
}

/// The address of a `verbs` descriptor: its 40-byte endpoint record.
#[cfg(all(feature = "verbs", target_os = "linux"))]
fn verbs_addr(r: &mut Reader<'_>) -> Result<PeerAddr, VerbsError> {
    use rondo_ud::verbs::exchange::{EndpointInfo, ENDPOINT_INFO_LEN};
    let record = r
        .take(ENDPOINT_INFO_LEN)
        .ok_or_else(|| VerbsError::BadEndpoint("truncated verbs endpoint record".into()))?;
    let info = EndpointInfo::decode(record)
        .map_err(|e| VerbsError::BadEndpoint(format!("verbs endpoint record: {e}")))?;
    Ok(PeerAddr::Verbs { info })
}

/// A `verbs` descriptor in a build without the feature.
#[cfg(not(all(feature = "verbs", target_os = "linux")))]
fn verbs_addr(_: &mut Reader<'_>) -> Result<PeerAddr, VerbsError> {
    Err(VerbsError::BadEndpoint(
        "the peer is a `verbs` QP and this build has no `verbs` feature: rebuild with `--features verbs`".into(),
    ))
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|s| s[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|s| u16::from_be_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|s| u32::from_be_bytes(s.try_into().expect("4")))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|s| u64::from_be_bytes(s.try_into().expect("8")))
    }
}

struct QpInner {
    qpn: u32,
    token: u64,
    /// The QP's key pair when it authenticates its datagrams.
    keys: Option<KeyPair>,
    ctx: Context,
    _pd: ProtectionDomain,
    _send_cq: CompletionQueue,
    _recv_cq: CompletionQueue,
    attr: QpInitAttr,
}

impl Drop for QpInner {
    fn drop(&mut self) {
        self.ctx.with_host(|h, now| h.destroy_qp(now, self.qpn));
    }
}

/// A reliable, connected queue pair (`ibv_qp`, RC semantics) over Rondo. It keeps
/// its PD and CQs alive; it is destroyed when the last clone drops (outstanding
/// requests are discarded without completions, as `ibv_destroy_qp` does).
#[derive(Clone)]
pub struct QueuePair {
    inner: Arc<QpInner>,
}

impl core::fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("QueuePair")
            .field("qpn", &format_args!("{:#x}", self.inner.qpn))
            .field("state", &self.state())
            .finish()
    }
}

fn attr_err(name: &'static str, reason: String) -> VerbsError {
    VerbsError::InvalidAttr { name, reason }
}

impl QueuePair {
    pub(crate) fn create(
        ctx: &Context,
        pd: &ProtectionDomain,
        send_cq: &CompletionQueue,
        recv_cq: &CompletionQueue,
        attr: QpInitAttr,
    ) -> Result<QueuePair, VerbsError> {
        if !pd.context().same(ctx) || !send_cq.context().same(ctx) || !recv_cq.context().same(ctx) {
            return Err(VerbsError::InvalidWr(
                "the PD and both CQs must come from the context creating the QP",
            ));
        }
        if attr.max_send_wr == 0 || attr.max_recv_wr == 0 || attr.max_sge == 0 {
            return Err(attr_err(
                "max_send_wr/max_recv_wr/max_sge",
                "each must be at least 1".into(),
            ));
        }
        if attr.paths == 0 || attr.paths > ctx.max_paths() {
            return Err(attr_err(
                "paths",
                format!(
                    "{}; this device offers 1 to {}",
                    attr.paths,
                    ctx.max_paths()
                ),
            ));
        }
        if attr.mtu > ctx.attr().max_mtu {
            return Err(attr_err(
                "mtu",
                format!(
                    "{} exceeds the context's max_mtu {}; open the context with a larger one",
                    attr.mtu,
                    ctx.attr().max_mtu
                ),
            ));
        }
        let cfg = Self::flow_config(&attr, 0, 0, 0);
        cfg.validate()
            .map_err(|e| attr_err("flow", e.to_string()))?;
        let (qpn, token) = ctx.with_host(|h, _| {
            let qpn = h.create_qp(
                pd.id(),
                send_cq.shared().clone(),
                recv_cq.shared().clone(),
                attr.clone(),
            );
            (qpn, h.keys.next_u64())
        });
        let keys = match auth_mode(ctx, &attr) {
            AuthMode::None => None,
            _ => Some(KeyPair::generate().map_err(|e| VerbsError::Io(e.to_string()))?),
        };
        Ok(QueuePair {
            inner: Arc::new(QpInner {
                qpn,
                token,
                keys,
                ctx: ctx.clone(),
                _pd: pd.clone(),
                _send_cq: send_cq.clone(),
                _recv_cq: recv_cq.clone(),
                attr,
            }),
        })
    }

    fn flow_config(attr: &QpInitAttr, line_rate_bps: u64, seed: u64, token: u64) -> FlowConfig {
        let mut cfg = attr.flow.clone();
        (cfg.rto_min, cfg.rto_max, cfg.retry_limit) = rto_bounds(&attr.flow, attr.ack_timeout());
        cfg.token = Some(token);
        cfg.paths = attr.paths;
        cfg.mtu = attr.mtu;
        if line_rate_bps > 0 {
            cfg.line_rate_bps = line_rate_bps;
        }
        cfg.seed = seed;
        cfg.initial_psn = 0;
        cfg.max_message_len = MAX_MESSAGE_BYTES + HEADER_LEN as u64;
        cfg
    }

    /// Bytes of application data that fit in one packet (the MTU less the engine
    /// header, token extension and verbs header): "MTU payload" of a message.
    pub fn packet_payload(&self) -> usize {
        self.inner.attr.mtu
            - auth_mode(&self.inner.ctx, &self.inner.attr).overhead()
            - rondo_proto::wire::DATA_HEADER_LEN
            - rondo_proto::wire::token_overhead(Some(0))
            - HEADER_LEN
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        self.inner.qpn
    }

    /// The descriptor to hand the peer.
    pub fn endpoint(&self) -> QpEndpoint {
        let addr = match &self.inner.ctx.inner.backend {
            Backend::Mem { fabric, index, .. } => PeerAddr::Mem {
                fabric: fabric.id(),
                host: *index as u32,
            },
            #[cfg(target_os = "linux")]
            Backend::Udp(u) => PeerAddr::Udp {
                paths: u.addrs().to_vec(),
            },
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            Backend::Verbs(v) => PeerAddr::Verbs {
                info: v.local_info(),
            },
        };
        QpEndpoint {
            qpn: self.inner.qpn,
            token: self.inner.token,
            paths: self.inner.attr.paths,
            mtu: self.inner.attr.mtu as u32,
            addr,
            auth: auth_mode(&self.inner.ctx, &self.inner.attr),
            public_key: self.inner.keys.as_ref().map_or([0; 32], KeyPair::public),
        }
    }

    /// Connects to the peer QP described by `remote` (INIT to RTS).
    pub fn connect(&self, remote: &QpEndpoint) -> Result<(), VerbsError> {
        // The attributes as created, with the `timeout` in force now.
        let a = &QpInitAttr {
            timeout: self.retry().0,
            ..self.inner.attr.clone()
        };
        if remote.paths != a.paths || remote.mtu as usize != a.mtu {
            return Err(VerbsError::BadEndpoint(format!(
                "peer uses {} paths and MTU {}, this QP {} and {}; create both with the same",
                remote.paths, remote.mtu, a.paths, a.mtu
            )));
        }
        let mode = auth_mode(&self.inner.ctx, a);
        if remote.auth != mode {
            return Err(VerbsError::BadEndpoint(format!(
                "peer authenticates datagrams with {}, this QP with {}; create both with the same QpInitAttr::auth",
                remote.auth.name(),
                mode.name()
            )));
        }
        let sealer = match &self.inner.keys {
            Some(k) => Some(
                k.agree(self.inner.qpn, &remote.public_key, remote.qpn, mode)
                    .map_err(|e| VerbsError::BadEndpoint(e.to_string()))?,
            ),
            None => None,
        };
        match (&self.inner.ctx.inner.backend, &remote.addr) {
            (
                Backend::Mem { fabric, host, .. },
                PeerAddr::Mem {
                    fabric: f,
                    host: peer,
                },
            ) if fabric.id() == *f => {
                let mut fab = fabric.lock();
                let now = fab.net.now();
                let fh = fab.net.host_mut(*host);
                let seed = fh.host.keys.next_u64();
                let token = self.inner.token ^ remote.token;
                let cfg = Self::flow_config(a, fh.host.line_rate_bps, seed, token);
                fh.host.connect(now, self.inner.qpn, remote.qpn, &cfg)?;
                fh.peer_of_flow.insert(self.inner.qpn, *peer as usize);
                Ok(())
            }
            #[cfg(target_os = "linux")]
            (Backend::Udp(u), PeerAddr::Udp { paths }) => {
                let mut s = u.lock();
                if paths.len() != u.addrs().len() {
                    return Err(VerbsError::BadEndpoint(format!(
                        "peer has {} path sockets, this context {}; open both with the same UdpConfig::paths",
                        paths.len(),
                        u.addrs().len()
                    )));
                }
                let now = s.clock.now();
                let h = &mut s.host.host;
                let seed = h.keys.next_u64();
                let token = self.inner.token ^ remote.token;
                let mut cfg = Self::flow_config(a, h.line_rate_bps, seed, token);
                cfg.mtu -= mode.overhead();
                s.dp.check_flow(&cfg).map_err(|e| VerbsError::InvalidAttr {
                    name: "mtu",
                    reason: e.to_string(),
                })?;
                let h = &mut s.host.host;
                h.connect(now, self.inner.qpn, remote.qpn, &cfg)?;
                if let Some(sealer) = sealer {
                    s.host.host.add_flow(self.inner.qpn, sealer);
                }
                s.dp.add_peer(self.inner.qpn, paths.clone())
                    .map_err(|e| VerbsError::BadEndpoint(e.to_string()))?;
                Ok(())
            }
            #[cfg(all(feature = "verbs", target_os = "linux"))]
            (Backend::Verbs(v), PeerAddr::Verbs { info }) => {
                let (seed, line_rate) = self
                    .inner
                    .ctx
                    .with_host(|h, _| (h.keys.next_u64(), h.line_rate_bps));
                let token = self.inner.token ^ remote.token;
                let mut cfg = Self::flow_config(a, line_rate, seed, token);
                cfg.mtu -= mode.overhead();
                v.connect(self.inner.qpn, remote.qpn, &cfg, info, sealer)
            }
            _ => Err(VerbsError::BadEndpoint(
                "the peer is on another device or fabric; connect QPs of the same backend".into(),
            )),
        }
    }

    /// Posts a send work request (`ibv_post_send`). Its bytes stay in the regions:
    /// the transport sends them from there (zero copy on the UDP backend, by
    /// address) and reads them again for a retransmission or after an RNR NAK, so
    /// leave them unchanged until the completion, as with a NIC.
    pub fn post_send(&self, wr: &SendWr) -> Result<(), VerbsError> {
        let qpn = self.inner.qpn;
        self.inner.ctx.with_host(|h, now| h.post_send(now, qpn, wr))
    }

    /// Like [`Self::post_send`], taking the request by value: the queue keeps it
    /// as it is, without the copy (and its scatter/gather allocation) that
    /// `post_send` makes.
    pub fn post_send_owned(&self, wr: SendWr) -> Result<(), VerbsError> {
        let qpn = self.inner.qpn;
        self.inner
            .ctx
            .with_host(|h, now| h.post_send_owned(now, qpn, wr))
    }

    /// Posts a receive work request (`ibv_post_recv`).
    pub fn post_recv(&self, wr: &RecvWr) -> Result<(), VerbsError> {
        self.post_recv_owned(wr.clone())
    }

    /// Like [`Self::post_recv`], taking the request by value (no copy).
    pub fn post_recv_owned(&self, wr: RecvWr) -> Result<(), VerbsError> {
        self.inner
            .ctx
            .with_host(|h, _| h.post_recv(self.inner.qpn, wr))
    }

    /// Forces the QP into the error state (`ibv_modify_qp` to `IBV_QPS_ERR`): every
    /// outstanding send and every posted receive completes with
    /// [`WcStatus::WrFlushErr`](crate::WcStatus::WrFlushErr), and so does whatever is
    /// posted afterwards. A QP already in error is left as it is.
    pub fn set_error(&self) {
        let qpn = self.inner.qpn;
        self.inner.ctx.with_host(|h, _| {
            if h.qp_state(qpn) != QpState::Error {
                h.fail_qp(qpn, None);
            }
        });
    }

    /// Sets the local ACK timeout and the retry count (`ibv_modify_qp`'s `timeout`
    /// and `retry_cnt`, which ibverbs programs give on the way to RTS, after the QP
    /// was created): `None` keeps a value. They apply from the next request sent or
    /// answered. `timeout` above 31 or `retry_cnt` above 7 (ibverbs' 5 and 3 bits)
    /// is an [`VerbsError::InvalidAttr`] and changes nothing.
    pub fn set_retry(&self, timeout: Option<u8>, retry_cnt: Option<u8>) -> Result<(), VerbsError> {
        if let Some(t) = timeout.filter(|&t| t > 31) {
            return Err(attr_err(
                "timeout",
                format!("{t}; the local ACK timeout is 4.096 us x 2^timeout, timeout 0 to 31"),
            ));
        }
        if let Some(r) = retry_cnt.filter(|&r| r > 7) {
            return Err(attr_err("retry_cnt", format!("{r}; use 0 to 7")));
        }
        let qpn = self.inner.qpn;
        self.inner.ctx.with_host(|h, _| match h.qps.get_mut(&qpn) {
            Some(slot) => {
                slot.attr.timeout = timeout.unwrap_or(slot.attr.timeout);
                slot.attr.retry_cnt = retry_cnt.unwrap_or(slot.attr.retry_cnt);
                // A connected QP's engine resends by the new timeout from now on.
                let (min, max, limit) = rto_bounds(&slot.attr.flow, slot.attr.ack_timeout());
                if let Some(c) = slot.conn.and_then(|c| h.endpoint.get_mut(c)) {
                    c.set_rto_bounds(min, max, limit)
                        .map_err(|e| attr_err("timeout", e.to_string()))?;
                }
                Ok(())
            }
            None => Err(VerbsError::InvalidWr("no such QP")),
        })
    }

    /// The local ACK timeout and retry count in force ([`QueuePair::set_retry`]).
    pub fn retry(&self) -> (u8, u8) {
        let qpn = self.inner.qpn;
        self.inner.ctx.with_host_ref(|h| {
            h.qps
                .get(&qpn)
                .map_or((0, 0), |s| (s.attr.timeout, s.attr.retry_cnt))
        })
    }

    /// Transport and verbs counters.
    pub fn stats(&self) -> QpStats {
        self.inner.ctx.with_host_ref(|h| h.qp_stats(self.inner.qpn))
    }

    /// The QP's state.
    pub fn state(&self) -> QpState {
        self.inner.ctx.with_host_ref(|h| h.qp_state(self.inner.qpn))
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }
}

#[cfg(all(test, not(all(feature = "verbs", target_os = "linux"))))]
mod tests {
    use super::*;

    #[test]
    fn a_verbs_descriptor_without_the_feature_says_to_rebuild() {
        let mem = QpEndpoint {
            qpn: 7,
            token: 9,
            paths: 4,
            mtu: 4096,
            addr: PeerAddr::Mem { fabric: 1, host: 2 },
            auth: AuthMode::None,
            public_key: [0; 32],
        };
        let mut b = mem.to_bytes();
        // RQPE, version, auth mode, public key, qpn, token, paths, mtu.
        b.truncate(4 + 1 + 1 + 32 + 4 + 8 + 2 + 4);
        b.push(KIND_VERBS);
        b.extend_from_slice(&[0; 40]);
        match QpEndpoint::from_bytes(&b) {
            Err(VerbsError::BadEndpoint(m)) => assert!(m.contains("--features verbs"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}

/// The engine's retransmission timer for a QP whose local ACK timeout is
/// `ack_timeout`: (`rto_min`, `rto_max`, `retry_limit`). As an RC NIC resends
/// after each `timeout` without an answer and gives up after `retry_cnt` of them
/// in a row, the engine resends at least once per `timeout` and leaves the
/// giving up to the QP's local ACK timer, which every packet acknowledged or
/// received restarts (docs/verbs.md, "Statuses"). Without the cap the engine's
/// doubling RTO (3 x the largest smoothed RTT, a 25 ms floor on a host stack)
/// outgrew the timer under congestion, and the timer failed a QP whose engine
/// was still resending (`rondo perf --transport rrps` over four shaped paths of
/// 25-200 Mbit/s, about 1 run in 20); with the cap and the engine's own limit
/// of 8, its fast first timeouts used the limit up before `timeout` x
/// (`retry_cnt` + 1). `timeout` 0 (forever): the flow's own settings.
fn rto_bounds(
    flow: &FlowConfig,
    ack_timeout: Option<rondo_proto::Duration>,
) -> (rondo_proto::Duration, Option<rondo_proto::Duration>, u32) {
    match ack_timeout {
        Some(t) => (
            flow.rto_min.min(t),
            Some(flow.rto_max.map_or(t, |m| m.min(t))),
            u32::MAX,
        ),
        None => (flow.rto_min, flow.rto_max, flow.retry_limit),
    }
}
