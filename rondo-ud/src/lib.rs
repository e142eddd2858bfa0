//! The datapaths under Rondo's sans-IO engine ([`rondo_proto`]): kernel UDP sockets
//! ([`udp`], Linux; `docs/udp.md`) and ibverbs UD queue pairs (`verbs`, cargo
//! feature `verbs`; `docs/ibverbs.md`), the engine's tuning over each
//! ([`profile`]), with [`fault`] injection around any of them. The in-memory
//! network of the tests is the simulator's (`rondo_sim::pair`).
#![deny(unsafe_code)] // allowed only where the datapaths call the kernel or the NIC: `udp::sys`, `udp::wait`, `verbs::sys`, `verbs::datapath`, `verbs::in_place`

pub mod auth;
pub mod datapath;
pub mod fault;
pub mod profile;
#[cfg(target_os = "linux")]
pub mod udp;
pub mod verbs;

pub use profile::HostProfile;
