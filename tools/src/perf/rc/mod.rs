//! `--transport rc` (cargo feature `verbs`): the workload of a Rondo run over plain RC
//! queue pairs on the same RDMA device, through libibverbs, so that Rondo and the
//! transport it replaces are measured by one tool with the same columns.
//!
//! Each side opens the device (`--device`, `--ib-port`, `--gid-index`), one CQ, and
//! per queue pair an RC QP and one registered buffer of message-sized slots, as the
//! Rondo run does. The QPs' endpoint records ([`attr::RcEndpoint`]: QPN, PSN, LID,
//! MTU, GID) and buffers travel over the TCP control exchange; each side then brings
//! its QPs RESET -> INIT -> RTR -> RTS ([`attr::bring_up`], perftest's settings) and
//! the client posts RDMA WRITE, SEND or RDMA READ with the same message size, depth
//! and count or duration rules, polling the CQ. With `--verify`: SENDs land in
//! receives that the server reposts after checking; verified WRITEs carry an
//! immediate, and since an RC responder may place a WRITE's payload before it finds
//! no receive for the immediate, the server returns a credit (a zero-byte SEND)
//! after checking each slot and the client reuses a slot only on its credit; READs
//! are checked by the client. Latency mode ping-pongs as the Rondo run does.
//!
//! The QP's packets carry Rondo's data DSCP (26) and flow label 0, so the NIC picks
//! one RoCEv2 source port and the fabric one ECMP path; with ConnectX-7 selective
//! repeat or adaptive routing switched on (`docs/ibverbs.md`) the same run measures
//! those. `retx_packets`, `ood_max` and `packets` are 0: the NIC keeps those counts
//! (`ethtool -S`, `/sys/class/infiniband/DEV/ports/N/hw_counters`).

#[cfg_attr(not(all(feature = "verbs", target_os = "linux")), allow(dead_code))]
pub mod attr;
#[cfg_attr(not(all(feature = "verbs", target_os = "linux")), allow(dead_code))]
mod nic;
#[cfg_attr(not(all(feature = "verbs", target_os = "linux")), allow(dead_code))]
mod run;
#[cfg_attr(not(all(feature = "verbs", target_os = "linux")), allow(dead_code))]
mod serve;
#[cfg(all(feature = "verbs", target_os = "linux"))]
mod sys;
#[cfg(test)]
mod tests;

#[cfg(all(feature = "verbs", target_os = "linux"))]
mod present {
    use super::{run, sys};
    use crate::perf::device::RdmaDevice;
    use crate::perf::exchange::{Control, Hello, Report};
    use crate::perf::report::Outcome;
    use crate::perf::Progress;
    use anyhow::Context as _;

    /// Opens the RDMA device for a run's RC side.
    fn open(rdma: Option<&RdmaDevice>, h: &Hello) -> anyhow::Result<run::Side<sys::RcDevice>> {
        let rdma = rdma.context(
            "this side has no RDMA device: --transport rc runs with --backend verbs (a server needs `rondo perf server --backend verbs`)",
        )?;
        let (dev, port) =
            sys::RcDevice::open(&rdma.name, rdma.port, rdma.gid_index, run::cq_entries(h))
                .with_context(|| format!("open RDMA device {} for RC queue pairs", rdma.name))?;
        run::Side::new(dev, port, rdma.port, rdma.gid_index, h)
    }

    /// Client side of an RC run on this host's RDMA device.
    pub fn client(
        ctrl: &mut Control,
        hello: Hello,
        progress: &mut Progress,
        rdma: Option<&RdmaDevice>,
    ) -> anyhow::Result<Outcome> {
        let side = open(rdma, &hello)?;
        run::client_on(side, ctrl, hello, progress)
    }

    /// Server side of an RC run on this host's RDMA device (a client whose run
    /// cannot be set up here is told why).
    pub fn server(
        ctrl: &mut Control,
        hello: &Hello,
        rdma: Option<&RdmaDevice>,
    ) -> anyhow::Result<Report> {
        super::serve::server_on(open(rdma, hello), ctrl, hello)
    }
}
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub use present::{client, server};

#[cfg(not(all(feature = "verbs", target_os = "linux")))]
mod absent {
    use crate::perf::device::{OptionError, RdmaDevice};
    use crate::perf::exchange::{Control, Hello, Message, Report};
    use crate::perf::report::Outcome;
    use crate::perf::Progress;

    /// Client side of an RC run: not in this build.
    pub fn client(
        _: &mut Control,
        _: Hello,
        _: &mut Progress,
        _: Option<&RdmaDevice>,
    ) -> anyhow::Result<Outcome> {
        Err(OptionError::NotBuilt.into())
    }

    /// Server side of an RC run: not in this build; the client is told why.
    pub fn server(ctrl: &mut Control, _: &Hello, _: Option<&RdmaDevice>) -> anyhow::Result<Report> {
        let e = OptionError::NotBuilt;
        let _ = ctrl.send(&Message::reject(format!("server: {e}")));
        Err(e.into())
    }
}
#[cfg(not(all(feature = "verbs", target_os = "linux")))]
pub use absent::{client, server};
