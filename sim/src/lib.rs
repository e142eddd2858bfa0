//! Rondo's discrete-event packet-level simulator.
//!
//! Not written yet: the issue "Packet-level simulator and `rondo sim`" builds it.
//! Until then the deterministic in-memory network of `rondo_ud::mem` is the only
//! place the engine runs. This crate exports nothing.
#![forbid(unsafe_code)]
