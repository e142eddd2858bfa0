//! `rondo-ibv`: a libibverbs drop-in. Preloaded (`LD_PRELOAD=librondo_ibv.so`), it
//! makes any unmodified verbs program run its RC queue pairs over Rondo: it adds a
//! device `rondo0` (Rondo over kernel UDP sockets, one per path) and, with the
//! cargo feature `verbs`, one `rondo_<dev>` per RDMA device (Rondo over that
//! device's UD queue pairs) ahead of the real devices, implements every entry point the common benchmarks use (perftest,
//! qperf, `ibv_rc_pingpong`, `ibv_devinfo`), the `context->ops` data path and the
//! `ibv_wr_*` API of `ibv_qp_ex`, and forwards every device and object that is not
//! ours to the real libibverbs untouched. `docs/ibv.md` has the usage, what is
//! supported, and measurements.
//!
//! The transport is `rondo-verbs` (RC semantics over the paper's packet-spraying
//! engine: §3 multipath spraying, §4 the NIC-level reorder buffer, §5 ARCC); this
//! crate holds all the FFI `unsafe` of the feature.
//!
//! Modules: [`abi`] (the C layouts, checked at compile time and against the
//! installed header by `tests/layout.rs`), [`config`] (the environment),
//! [`connect`] (QP set-up at RTR), [`devices`] (our devices and the device list),
//! `nic` (`rondo_<dev>`: the real device under it), `objects` (our objects behind
//! the C handles), `exports` (the exported functions, one module per family),
//! `real` (the real libibverbs' functions), `wr` (the `ibv_wr_*` API).

pub mod abi;
pub mod config;
pub mod connect;
pub mod devices;
pub mod exports;
#[cfg(feature = "verbs")]
pub mod nic;
pub mod objects;
mod real;
mod wr;
