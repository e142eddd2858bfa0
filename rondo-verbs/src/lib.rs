//! Rondo's verbs-like application API.
//!
//! Not written yet: the issue "The verbs-like API, the UDP datapath, and
//! `rondo perf`" builds it on top of `rondo-ud`. This crate exports nothing until then.
