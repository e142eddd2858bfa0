//! The datapaths under Rondo's sans-IO engine ([`rondo_proto`]): kernel UDP sockets
//! ([`udp`], Linux; `docs/udp.md`) and ibverbs UD queue pairs (`verbs`, cargo
//! feature `verbs`; `docs/ibverbs.md`), with [`fault`] injection around any of
//! them; [`mem`], a deterministic in-memory network for tests, and [`testbed`],
//! two hosts over parallel paths on it.
#![deny(unsafe_code)] // allowed only where the datapaths call the kernel or the NIC: `udp::sys`, `verbs::sys`, `verbs::datapath`

pub mod fault;
pub mod mem;
pub mod testbed;
#[cfg(target_os = "linux")]
pub mod udp;
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub mod verbs;
