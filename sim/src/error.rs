//! Why a simulator operation failed.

use thiserror::Error;

/// A simulator error: an impossible topology or configuration, or a bad flow.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SimError {
    /// The topology cannot be built as given.
    #[error("impossible topology: {what} ({allowed})")]
    Topology {
        /// What is wrong, naming the parameter.
        what: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// A simulator configuration value is out of range.
    #[error("invalid simulator configuration: `{name}` = {value} ({allowed})")]
    Config {
        /// Parameter name as in [`crate::SimConfig`] or its parts.
        name: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// A flow cannot be added.
    #[error("invalid flow: {what} ({allowed})")]
    Flow {
        /// What is wrong.
        what: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// A link id or link name does not exist.
    #[error("no link {0:?}: use Simulator::link or Simulator::parallel_path_link to name one")]
    NoSuchLink(crate::LinkId),
    /// A link change is not possible.
    #[error("invalid link change: {what} ({allowed})")]
    LinkChange {
        /// What is wrong.
        what: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// The engine refused a connection (bad flow configuration).
    #[error("the engine refused the flow: {0}")]
    Endpoint(#[from] rondo_proto::EndpointError),
    /// A host's reorder buffer could not be created.
    #[error("reorder buffer: {0}")]
    Reorder(#[from] reorder::ReorderError),
    /// A flow's datagrams do not fit the simulator's packet buffers.
    #[error("the flow cannot send: {0}")]
    TransmitBuffer(#[from] rondo_proto::BufferTooSmall),
    /// The engine refused a message.
    #[error("the engine refused a message: {0}")]
    Post(#[from] rondo_proto::PostError),
}

pub(crate) fn config_err(
    name: &'static str,
    value: impl ToString,
    allowed: &'static str,
) -> SimError {
    SimError::Config {
        name,
        value: value.to_string(),
        allowed,
    }
}

pub(crate) fn topo_err(what: impl Into<String>, allowed: &'static str) -> SimError {
    SimError::Topology {
        what: what.into(),
        allowed,
    }
}
