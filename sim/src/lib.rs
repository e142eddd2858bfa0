//! Rondo's discrete-event packet-level simulator, and the one network model of the
//! workspace: [`Simulator`] runs topologies of switches and flows, [`pair`] puts
//! any set of [`rondo_proto::Host`]s on the same links (the two-host [`Testbed`] of
//! the engine tests and `rondo demo`, the verbs API's in-process fabric).
//!
//! Every host runs a real [`rondo_proto::Endpoint`] (one per host, its shared reorder
//! buffer being the NIC's), driven through the [`rondo_proto::Host`] trait exactly as
//! the datagram backends drive it: the simulator only moves bytes and time, and
//! measures through the engine's tap ([`rondo_proto::tap`]: NIC-level OOD and RBO,
//! new data, in-order delivery, retransmissions), never by reading its state.
//!
//! - Time is integer picoseconds ([`rondo_proto::time::Instant`]). Events sit in a
//!   radix heap keyed by (time, sequence), so ties run in the order they were
//!   scheduled; each link keeps at most one pending serialisation event and one
//!   pending arrival event (the head of its wire), each host at most one valid
//!   timer (stale ones are skipped by generation), so the heap grows with links
//!   and hosts, not with packets. A packet costs one arrival event per hop, plus
//!   a serialisation event at each hop where it had to wait.
//! - Packets live in a slab of one-cache-line slots with a free list (a
//!   datagram's bytes up to its last non-zero one; a longer one takes an
//!   MTU-sized slot besides); forwarding
//!   tables are arrays; ECMP hashes the packet's flow and logical path id with a
//!   per-switch salt at every hop, so logical paths can collide.
//! - Links have a rate and a propagation delay; switches are output-queued with
//!   three strict-priority classes (control > data > probe), per-class drop
//!   thresholds (a small one for probes, paper §4.2.2), a shared buffer, ECN
//!   marking and optional PFC ([`SwitchConfig`]). A host's NIC is a link too.
//!
//! ```
//! use rondo_sim::{FlowSpec, Messages, PathSpec, SimConfig, Simulator, Topology};
//! use rondo_proto::time::{Duration, Instant};
//! use rondo_proto::FlowConfig;
//!
//! let topo = Topology::Parallel {
//!     host_gbps: 100.0,
//!     paths: vec![PathSpec { gbps: 25.0, delay: Duration::from_us(5) }; 2],
//! };
//! let mut sim = Simulator::new(&topo, SimConfig::default())?;
//! sim.add_flow(FlowSpec {
//!     src: 0, dst: 1, start: Instant::ZERO, bytes: Some(100_000), stop: None,
//!     paths: None, cfg: FlowConfig::default(), group: 0,
//!     messages: Messages::default(), after: None,
//! })?;
//! sim.run(Instant::from_us(10_000), &mut |_| {});
//! let m = sim.metrics();
//! assert_eq!(m.flows_completed, 1);
//! assert_eq!(m.flows[0].delivered, 100_000);
//! # Ok::<(), rondo_sim::SimError>(())
//! ```
#![forbid(unsafe_code)]

mod config;
mod error;
mod net;
pub mod pair;
pub mod scenario;
mod sim;
mod topology;
mod trace;

pub use config::{EcnConfig, HostStalls, PfcConfig, Routing, SimConfig, SwitchConfig};
pub use error::SimError;
pub use pair::Testbed;
pub use sim::metrics::{Drops, Metrics, RetxMetrics};
pub use sim::{
    Delivery, FlowResult, FlowSpec, GateId, LinkChange, LinkId, LinkStats, Messages, Op, Progress,
    RunEnd, Simulator, LONG_OUTSTANDING, MESSAGE_BYTES, READ_REQUEST_BYTES,
};
pub use topology::{LinkKind, PathSpec, Topology};
pub use trace::{Trace, TraceSample};
