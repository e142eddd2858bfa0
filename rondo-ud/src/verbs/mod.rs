//! The ibverbs UD datapath (cargo feature `verbs`, Linux): Rondo over
//! unreliable-datagram queue pairs on RDMA NICs (ConnectX), replacing RC QPs.
//! `docs/ibverbs.md` has the setup and the commands. The plain-data modules
//! (addressing, queue accounting, attributes, timestamps, the endpoint exchange)
//! build without the feature; the FFI layer ([`sys`], also `rondo perf
//! --transport rc`'s) and the datapath need it.
//!
//! One UD QP per endpoint; towards each peer one address handle per path and per
//! priority class ([`address`]): the GRH flow label of path `p` makes the NIC send
//! it with RoCEv2 UDP source port `base + p` ([`flow_label`]), which the fabric's
//! ECMP hash (or `p4/`) turns into a path; probes use the low-priority traffic
//! class. Datagrams are at most the port's active MTU, the Rondo header inside the
//! UD payload. Sends go out in WR chains with one doorbell each, one WR in N
//! signaled, small ones inline ([`send`]); receives land in registered arena
//! memory with room for the 40-byte GRH ([`grh`]), reposted in batches
//! ([`rx_ring`]). A connection set up with [`VerbsDatapath::receive_in_place`]
//! is received in place: WRs posted in expected order with a two-entry scatter
//! list put each payload straight into its message buffer, registered with the
//! NIC (`in_place`), and a datagram that lands elsewhere is copied out and
//! repaired by the engine's reorder buffer, as plain data is. When the device offers
//! NIC completion timestamps, arrivals reach the engine at their NIC time and
//! signaled DATA sends pair with their ACKs for NIC-level RTT samples
//! ([`timestamp`]). Endpoints exchange [`exchange::EndpointInfo`] over TCP.
//!
//! Everything but `sys` (the thin FFI layer) is plain Rust, unit-tested without
//! a device; the driver runs over a `Nic` trait, tested over an in-memory NIC
//! that stamps completions with its own clock and scatters into in-place targets.

pub mod address;
#[cfg(all(feature = "verbs", target_os = "linux"))]
mod datapath;
#[cfg(all(feature = "verbs", target_os = "linux"))]
mod driver;
#[cfg(all(feature = "verbs", target_os = "linux"))]
mod error;
pub mod exchange;
pub mod flow_label;
pub mod grh;
#[cfg(all(feature = "verbs", target_os = "linux"))]
mod in_place;
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub mod inventory;
pub mod qp_attr;
pub mod rx_ring;
pub mod send;
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub mod sys;
pub mod timestamp;
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub use datapath::{VerbsConfig, VerbsDatapath};
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub use driver::VerbsStats;
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub use error::VerbsError;
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub use reorder::landing::LandingCounters;
