//! The exported libibverbs functions (plain, unversioned definitions: they bind the
//! programs' versioned imports when preloaded) and the functions of the tables the
//! inline parts of `verbs.h` call through (`context->ops`, `verbs_context`,
//! `ibv_qp_ex`). Every export forwards a device or object that is not ours to the
//! real libibverbs. Every body runs under [`guard`]: a panic becomes an error
//! return, never an unwind into C. One module per family: [`device`] (devices,
//! contexts, queries), [`memory`] (PDs, MRs), [`cq`] (channels, CQs, async
//! events), [`qp`] (QPs), [`post`] (the posting ops), [`refused`] (what Rondo
//! does not carry).
//
// Every export's safety contract is libibverbs' for the function of that name.
#![allow(clippy::missing_safety_doc)]

pub mod cq;
pub mod device;
pub mod memory;
pub mod post;
pub mod qp;
pub mod refused;

use crate::abi::*;
use crate::connect::{connect_to, Link};
use crate::devices::{self, c_name, listing, Listed, Over};
use crate::objects::*;
use crate::real;
use libc::{c_char, c_int, c_void};
use rondo_verbs::{
    AccessFlags, AsyncEvent, Opcode, RecvWr, RemoteAddr, SendWr, Sge, WcOpcode, WcStatus,
    WorkCompletion,
};
use std::net::{Ipv4Addr, SocketAddr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Runs `f`; a panic is reported and becomes `fallback`.
fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        refuse("internal error (a panic, reported above); failing the call");
        fallback
    })
}

fn set_errno(e: c_int) {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = e };
}

/// A NULL handle with `errno` set.
pub(crate) fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

fn config() -> Result<&'static crate::config::Config, c_int> {
    global().config.as_ref().map_err(|e| {
        refuse(&format!("bad configuration: {e}"));
        libc::EINVAL
    })
}

pub(crate) use post::opcode_of;

/// The context a query goes to: the real device's under a `rondo_<dev>`
/// (`found` is ours with a real context), else the caller's own (not ours).
fn real_of(
    found: Option<(Option<*mut ibv_context>, &mut Ctx)>,
    ctx: *mut ibv_context,
) -> *mut ibv_context {
    found.and_then(|(real, _)| real).unwrap_or(ctx)
}

/// The Rondo context of `c`, opened on first use; why not on stderr.
fn rondo(c: &Ctx) -> Result<&rondo_verbs::Context, c_int> {
    c.rondo().map_err(|e| {
        refuse(&format!("cannot open {}: {e}", c.name()));
        libc::EIO
    })
}

/// A slice from a C array (empty for a null pointer or a non-positive count).
///
/// # Safety
/// `p` points to `n` elements when non-null and `n > 0`.
pub(crate) unsafe fn c_slice<'a, T>(p: *const T, n: c_int) -> &'a [T] {
    if p.is_null() || n <= 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(p, n as usize) }
}
