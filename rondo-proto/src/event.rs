//! What the engine tells the application.

use thiserror::Error;

/// An application-visible event, from [`crate::Connection::poll_event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Every packet of message `msg_id` has been acknowledged.
    SendComplete {
        /// The message id given to `post`.
        msg_id: u64,
    },
    /// A whole message arrived, in order.
    Received {
        /// The sender's message id.
        msg_id: u64,
        /// The message bytes.
        data: Vec<u8>,
    },
    /// A path was taken out of rotation after repeated losses.
    PathDown {
        /// The path.
        path: u16,
    },
    /// A path out of rotation answered a probe and is back.
    PathUp {
        /// The path.
        path: u16,
    },
    /// The forward-delay estimates became stable and the packet scheduler started.
    SchedulerEnabled,
    /// The connection failed; nothing more will be sent.
    Error(ConnectionError),
}

/// Why a connection failed.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionError {
    /// The retransmission timer expired `retry_limit` times in a row without
    /// progress: the peer is gone or every path is broken.
    #[error(
        "retry exceeded: {retries} retransmission timeouts without progress (peer unreachable?)"
    )]
    RetryExceeded {
        /// Timeouts in a row.
        retries: u32,
    },
}

/// Why `post` refused a message.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostError {
    /// Messages carry at least one byte.
    #[error("empty message: messages carry at least one byte")]
    Empty,
    /// Larger than `FlowConfig::max_message_len`.
    #[error(
        "message of {len} bytes exceeds the limit of {max} bytes (FlowConfig::max_message_len)"
    )]
    TooLarge {
        /// Message length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The connection has failed.
    #[error("connection failed: {0}")]
    Failed(ConnectionError),
    /// The connection was closed ([`crate::Endpoint::close`]); open a new one.
    #[error("the connection is closed; connect again to send more")]
    Closed,
}
