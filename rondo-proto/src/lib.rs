//! Rondo's sans-IO transport engine.
//!
//! One flow between two endpoints over P logical paths, built from transport seams
//! ([`transport`]): congestion control ([`cc`]), path selection ([`select`]),
//! packet selection ([`scheduler`]), loss recovery ([`recovery`]) and receiver
//! policy ([`receiver_policy`]). Rondo's own parts are ACK-rate-based congestion
//! control per path (paper §4.2.1) with low-priority capacity probing (§4.2.2),
//! deficit-based path selection (§4.2.3), and a packet scheduler that sends higher
//! PSNs earlier on slower paths (§4.3), with selective-repeat loss recovery. The
//! engine never reads a clock, opens a socket, touches a file or spawns a thread:
//! time comes in as an argument, datagrams as byte slices, the reorder buffer's
//! memory from the driver, and what the engine wants sent comes out of
//! `poll_transmit`.
//!
//! Datapaths drive any [`Host`]: the simulator (crate `rondo-sim`), kernel UDP
//! sockets and ibverbs UD queue pairs (crate `rondo-ud`).
#![forbid(unsafe_code)]

pub mod auth;
pub mod cc;
pub mod config;
pub mod connection;
pub mod endpoint;
pub mod event;
pub mod fault;
mod feedback;
pub mod message;
pub mod path;
pub mod placement;
mod receiver;
pub mod receiver_policy;
pub mod recovery;
pub mod rng;
pub mod scheduler;
pub mod select;
mod sender;
pub mod stats;
pub mod tap;
pub mod time;
pub mod transmit;
pub mod transport;
pub mod wire;

pub use config::{
    AckCoalesce, AlphaWeight, ConfigError, EarlyRecovery, FlowConfig, LossRecoveryKind,
    MarginScope, PathSelection, QueueEstimate, MAX_MTU,
};
pub use connection::{Connection, ConnectionSummary};
pub use endpoint::{ConnectionHandle, DatagramError, Endpoint, EndpointError};
pub use event::{ConnectionError, Event, PostError};
pub use message::{ExternalBytes, Message, PayloadBytes};
pub use path::{PathCounters, PathState, PathStatus, Paths};
pub use receiver::{RxMeta, SharedBuffer};
pub use reorder::{BufferConfig, Psn};
pub use stats::{EndpointStats, Histogram, ReceiverStats, SenderStats};
pub use time::{Duration, Instant};
pub use transmit::{
    check_transmit_buffer, BufferTooSmall, ByReference, Host, PayloadRef, Priority, Transmit,
    TxBuffer,
};
pub use transport::Transport;
