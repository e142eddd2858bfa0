//! Errors of loading, checking and running a scenario.

use thiserror::Error;

/// What went wrong with a scenario. Every message names the file (or built-in), the
/// key and what is allowed, so the user knows what to change.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The scenario file could not be read.
    #[error("{file}: cannot read the scenario file: {reason}")]
    Read {
        /// The file.
        file: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The file is not valid TOML.
    #[error("{file}: not valid TOML: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A key is unknown, has the wrong type, or a name is not one of the allowed ones.
    #[error("{file}: {key}: {message}")]
    Schema {
        /// The file.
        file: String,
        /// The dotted key (the table holding it for an unknown key).
        key: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// A value has the right type but is out of range or impossible.
    #[error("{file}: {key} = {value}: {allowed}")]
    Invalid {
        /// The file.
        file: String,
        /// The dotted key.
        key: String,
        /// The value given.
        value: String,
        /// What is allowed instead.
        allowed: String,
    },
    /// A `--set table.key=value` override is malformed.
    #[error("--set {given}: {reason}")]
    Override {
        /// The override as given.
        given: String,
        /// What is wrong and what the form is.
        reason: String,
    },
    /// `transport.kind` names a transport that is not implemented yet.
    #[error(
        "{file}: transport.kind = \"{kind}\": not implemented yet (baselines issue); \
         use one of: {known}",
        known = implemented()
    )]
    TransportNotImplemented {
        /// The file.
        file: String,
        /// The transport named.
        kind: String,
    },
    /// No built-in scenario has this name.
    #[error("no built-in scenario `{name}`; `rondo sim --list` shows them: {known}")]
    UnknownBuiltin {
        /// The name given.
        name: String,
        /// The built-in names.
        known: String,
    },
    /// The simulator refused the scenario (for example a topology it cannot build).
    #[error("{file}: the simulator refused the scenario: {reason}")]
    Simulator {
        /// The file.
        file: String,
        /// The simulator's error.
        reason: String,
    },
}

impl ScenarioError {
    /// An [`ScenarioError::Invalid`] error.
    pub(crate) fn invalid(
        file: &str,
        key: impl Into<String>,
        value: impl ToString,
        allowed: impl Into<String>,
    ) -> ScenarioError {
        ScenarioError::Invalid {
            file: file.to_owned(),
            key: key.into(),
            value: value.to_string(),
            allowed: allowed.into(),
        }
    }
}

/// The engine's transports, for messages.
fn implemented() -> String {
    rondo_proto::Transport::all()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}
