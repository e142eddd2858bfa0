//! Rondo's sans-IO transport engine.
//!
//! One flow between two endpoints over P logical paths: ACK-rate-based congestion
//! control per path (paper §4.2.1), low-priority capacity probing (§4.2.2),
//! deficit-based path selection (§4.2.3), and a packet scheduler that sends higher
//! PSNs earlier on slower paths (§4.3), with selective-repeat loss recovery. The
//! engine never reads a clock, opens a socket or spawns a thread: time comes in as
//! an argument, datagrams as byte slices, and what it wants sent comes out of
//! `poll_transmit`.
//!
//! Datapaths drive any [`Host`]: [`mem`] (deterministic, in memory, for tests),
//! `udp` (kernel UDP sockets, Linux; `docs/udp.md`), `verbs` (ibverbs UD queue
//! pairs on RDMA NICs, cargo feature `verbs`; `docs/ibverbs.md`), and the simulator
//! in the `sim` crate. [`fault`] injects faults around any of them; [`placement`] decides where
//! received payloads land.
#![deny(unsafe_code)] // allowed only where the datapaths call the kernel or the NIC: `udp::sys`, `verbs::sys`, `verbs::datapath`

pub mod config;
pub mod connection;
pub mod endpoint;
pub mod event;
pub mod fault;
pub mod mem;
pub mod message;
pub mod path;
pub mod placement;
mod receiver;
pub mod scheduler;
pub mod select;
mod sender;
pub mod stats;
pub mod testbed;
pub mod time;
pub mod transmit;
#[cfg(target_os = "linux")]
pub mod udp;
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub mod verbs;
pub mod wire;

pub use config::{AlphaWeight, ConfigError, FlowConfig, PathSelection, QueueEstimate, MAX_MTU};
pub use connection::Connection;
pub use endpoint::{ConnectionHandle, DatagramError, Endpoint, EndpointConfig, EndpointError};
pub use event::{ConnectionError, Event, PostError};
pub use message::{ExternalBytes, Message, PayloadBytes};
pub use path::{PathCounters, PathState, PathStatus};
pub use receiver::{RxMeta, SharedBuffer};
pub use reorder::Psn;
pub use stats::{EndpointStats, Histogram, ReceiverStats, SenderStats};
pub use time::{Duration, Instant};
pub use transmit::{check_transmit_buffer, BufferTooSmall, Host, PayloadRef, Priority, Transmit};
