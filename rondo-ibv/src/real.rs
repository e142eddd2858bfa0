//! The real libibverbs' functions, for devices and objects that are not ours: the
//! next definition after this library (`dlvsym(RTLD_NEXT, name, version)`), looked
//! up once. Each one the exports forward to is declared once, with its version
//! and what it gives when the real library is not loaded ([`forwards!`]).

use crate::abi::*;
use crate::exports::fail;
use libc::{c_char, c_int, c_void};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A looked-up symbol: 0 not yet, 1 absent, else the address.
pub struct Next(AtomicUsize);

impl Next {
    /// Not yet looked up.
    pub const fn new() -> Next {
        Next(AtomicUsize::new(0))
    }

    /// The address of `name` (NUL-terminated) at `version`, or `None` when no later
    /// object defines it (the real libibverbs is not loaded).
    pub fn get(&self, name: &'static [u8], version: &'static [u8]) -> Option<usize> {
        match self.0.load(Ordering::Acquire) {
            0 => {
                // SAFETY: both strings are NUL-terminated literals (the macro adds it).
                let p = unsafe {
                    libc::dlvsym(
                        libc::RTLD_NEXT,
                        name.as_ptr().cast(),
                        version.as_ptr().cast(),
                    )
                } as usize;
                let v = if p == 0 { 1 } else { p };
                self.0.store(v, Ordering::Release);
                (p != 0).then_some(p)
            }
            1 => None,
            p => Some(p),
        }
    }
}

impl Default for Next {
    fn default() -> Self {
        Self::new()
    }
}

/// `next!(ibv_open_device, "IBVERBS_1.1", fn(*mut ibv_device) -> *mut ibv_context)`:
/// the real function as an `Option<unsafe extern "C" fn ...>`.
macro_rules! next {
    ($name:ident, $ver:literal, fn($($arg:ty),*) $(-> $ret:ty)?) => {{
        static NEXT: $crate::real::Next = $crate::real::Next::new();
        NEXT.get(concat!(stringify!($name), "\0").as_bytes(), concat!($ver, "\0").as_bytes())
            .map(|p| {
                // SAFETY: the symbol of that name and version has this signature
                // (libibverbs' ABI).
                unsafe { core::mem::transmute::<usize, unsafe extern "C" fn($($arg),*) $(-> $ret)?>(p) }
            })
    }};
}

/// `forwards! { name "VERSION" (arg: type, ...) -> ret, or fallback; ... }` makes
/// `real::name(args)`: the real function of that name and version, or `fallback`
/// when no later object defines it.
macro_rules! forwards {
    ($($name:ident $ver:literal ($($a:ident: $t:ty),*) $(-> $r:ty)?, or $fb:expr;)*) => {$(
        #[doc = concat!("The real `", stringify!($name), "`.")]
        ///
        /// # Safety
        /// libibverbs' contract for this function.
        pub(crate) unsafe fn $name($($a: $t),*) $(-> $r)? {
            next!($name, $ver, fn($($t),*) $(-> $r)?)
                // SAFETY: the caller's contract is the real function's.
                .map_or($fb, |f| unsafe { f($($a),*) })
        }
    )*};
}

forwards! {
    ibv_get_device_list "IBVERBS_1.1" (num: *mut c_int) -> *mut *mut ibv_device, or null_mut();
    ibv_free_device_list "IBVERBS_1.1" (list: *mut *mut ibv_device), or ();
    ibv_get_device_name "IBVERBS_1.1" (dev: *mut ibv_device) -> *const c_char, or std::ptr::null();
    ibv_get_device_guid "IBVERBS_1.1" (dev: *mut ibv_device) -> u64, or 0;
    ibv_get_device_index "IBVERBS_1.9" (dev: *mut ibv_device) -> c_int, or -1;
    ibv_open_device "IBVERBS_1.1" (dev: *mut ibv_device) -> *mut ibv_context, or fail(libc::ENODEV);
    ibv_close_device "IBVERBS_1.1" (ctx: *mut ibv_context) -> c_int, or libc::ENODEV;
    ibv_query_device "IBVERBS_1.1" (ctx: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int, or libc::ENODEV;
    ibv_query_port "IBVERBS_1.1" (ctx: *mut ibv_context, port: u8, attr: *mut c_void) -> c_int, or libc::ENODEV;
    ibv_query_gid "IBVERBS_1.1" (ctx: *mut ibv_context, port: u8, index: c_int, gid: *mut [u8; 16]) -> c_int, or -1;
    _ibv_query_gid_ex "IBVERBS_1.11" (ctx: *mut ibv_context, port: u32, index: u32, entry: *mut ibv_gid_entry, flags: u32, size: usize) -> c_int, or libc::ENODEV;
    _ibv_query_gid_table "IBVERBS_1.11" (ctx: *mut ibv_context, entries: *mut ibv_gid_entry, max: usize, flags: u32, size: usize) -> isize, or -(libc::ENODEV as isize);
    ibv_query_gid_type "IBVERBS_PRIVATE_34" (ctx: *mut ibv_context, port: u8, index: u32, ty: *mut u32) -> c_int, or libc::ENODEV;
    ibv_query_pkey "IBVERBS_1.1" (ctx: *mut ibv_context, port: u8, index: c_int, pkey: *mut u16) -> c_int, or -1;
    ibv_alloc_pd "IBVERBS_1.1" (ctx: *mut ibv_context) -> *mut ibv_pd, or fail(libc::ENODEV);
    ibv_dealloc_pd "IBVERBS_1.1" (pd: *mut ibv_pd) -> c_int, or libc::ENODEV;
    ibv_reg_mr "IBVERBS_1.1" (pd: *mut ibv_pd, addr: *mut c_void, len: usize, access: c_int) -> *mut ibv_mr, or fail(libc::ENODEV);
    ibv_reg_mr_iova "IBVERBS_1.7" (pd: *mut ibv_pd, addr: *mut c_void, len: usize, iova: u64, access: c_int) -> *mut ibv_mr, or fail(libc::ENODEV);
    ibv_reg_mr_iova2 "IBVERBS_1.8" (pd: *mut ibv_pd, addr: *mut c_void, len: usize, iova: u64, access: u32) -> *mut ibv_mr, or fail(libc::ENODEV);
    ibv_dereg_mr "IBVERBS_1.1" (mr: *mut ibv_mr) -> c_int, or libc::ENODEV;
    ibv_create_comp_channel "IBVERBS_1.0" (ctx: *mut ibv_context) -> *mut ibv_comp_channel, or fail(libc::ENODEV);
    ibv_destroy_comp_channel "IBVERBS_1.0" (ch: *mut ibv_comp_channel) -> c_int, or libc::ENODEV;
    ibv_create_cq "IBVERBS_1.1" (ctx: *mut ibv_context, cqe: c_int, cq_context: *mut c_void, channel: *mut ibv_comp_channel, vector: c_int) -> *mut ibv_cq, or fail(libc::ENODEV);
    ibv_resize_cq "IBVERBS_1.1" (cq: *mut ibv_cq, cqe: c_int) -> c_int, or libc::ENODEV;
    ibv_destroy_cq "IBVERBS_1.1" (cq: *mut ibv_cq) -> c_int, or libc::ENODEV;
    ibv_get_cq_event "IBVERBS_1.1" (ch: *mut ibv_comp_channel, cq: *mut *mut ibv_cq, cq_context: *mut *mut c_void) -> c_int, or -1;
    ibv_ack_cq_events "IBVERBS_1.1" (cq: *mut ibv_cq, n: u32), or ();
    ibv_get_async_event "IBVERBS_1.1" (ctx: *mut ibv_context, event: *mut ibv_async_event) -> c_int, or -1;
    ibv_ack_async_event "IBVERBS_1.1" (event: *mut ibv_async_event), or ();
    ibv_create_qp "IBVERBS_1.1" (pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp, or fail(libc::ENODEV);
    ibv_qp_to_qp_ex "IBVERBS_1.6" (qp: *mut ibv_qp) -> *mut ibv_qp_ex, or null_mut();
    ibv_modify_qp "IBVERBS_1.1" (qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int, or libc::ENODEV;
    ibv_query_qp "IBVERBS_1.1" (qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int, init: *mut ibv_qp_init_attr) -> c_int, or libc::ENODEV;
    ibv_destroy_qp "IBVERBS_1.1" (qp: *mut ibv_qp) -> c_int, or libc::ENODEV;
    ibv_create_srq "IBVERBS_1.1" (pd: *mut ibv_pd, attr: *mut c_void) -> *mut c_void, or fail(libc::ENODEV);
    ibv_create_ah "IBVERBS_1.1" (pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut c_void, or fail(libc::ENODEV);
    ibv_create_ah_from_wc "IBVERBS_1.1" (pd: *mut ibv_pd, wc: *mut ibv_wc, grh: *mut c_void, port: u8) -> *mut c_void, or fail(libc::ENODEV);
    ibv_attach_mcast "IBVERBS_1.1" (qp: *mut ibv_qp, gid: *const c_void, lid: u16) -> c_int, or libc::ENODEV;
    ibv_detach_mcast "IBVERBS_1.1" (qp: *mut ibv_qp, gid: *const c_void, lid: u16) -> c_int, or libc::ENODEV;
}
