//! What Rondo does not carry (SRQs, address handles, multicast): refused with a
//! message for our objects, forwarded for the real devices'.

use super::*;

/// `refused! { fn name(obj: type, ...) -> ret; by obj: "message", error; ... }`
/// exports `name`: for an object of ours (`obj`, the PD or QP) it prints the
/// message and returns `error`; anything else goes to the real function.
macro_rules! refused {
    ($(fn $name:ident($($a:ident: $t:ty),*) -> $r:ty; by $obj:ident: $what:literal, $err:expr;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: refused for our devices (", $what, ").")]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
            // SAFETY: the caller's live PD or QP.
            if unsafe { owner($obj.cast()) }.is_some() {
                refuse(concat!($what, " are not supported"));
                return $err;
            }
            // SAFETY: not ours: the real function, under its own contract.
            unsafe { real::$name($($a),*) }
        }
    )*};
}

refused! {
    fn ibv_create_srq(pd: *mut ibv_pd, attr: *mut c_void) -> *mut c_void;
        by pd: "shared receive queues (SRQ)", fail(libc::EOPNOTSUPP);
    fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut c_void;
        by pd: "address handles (UD QPs)", fail(libc::EOPNOTSUPP);
    fn ibv_create_ah_from_wc(pd: *mut ibv_pd, wc: *mut ibv_wc, grh: *mut c_void, port: u8) -> *mut c_void;
        by pd: "address handles (UD QPs)", fail(libc::EOPNOTSUPP);
    fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const c_void, lid: u16) -> c_int;
        by qp: "multicast groups", libc::EOPNOTSUPP;
    fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const c_void, lid: u16) -> c_int;
        by qp: "multicast groups", libc::EOPNOTSUPP;
}
