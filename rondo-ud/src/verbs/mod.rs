//! placeholder
pub mod address;
mod error;
pub mod exchange;
pub mod flow_label;
pub mod grh;
pub mod inventory;
pub mod qp_attr;
pub mod repair;
pub mod rx_ring;
pub mod send;
pub mod sys;
pub use error::VerbsError;
