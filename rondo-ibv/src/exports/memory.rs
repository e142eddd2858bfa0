//! Protection domains and memory regions (the application's buffers, registered as they are).

use super::*;

/// `ibv_alloc_pd`.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: the caller's live context.
    match unsafe { ctx_of(ctx) } {
        Some(c) => guard(fail(libc::EIO), || {
            match rondo(c).and_then(|r| r.alloc_pd().map_err(errno_of)) {
                Ok(pd) => {
                    let b = Box::new(Pd {
                        pd: ibv_pd {
                            context: ctx,
                            handle: 0,
                        },
                        inner: pd,
                    });
                    Box::into_raw(b).cast()
                }
                Err(e) => fail(e),
            }
        }),
        // SAFETY: not ours: the real function, under its own contract.
        None => unsafe { real::ibv_alloc_pd(ctx) },
    }
}

/// `ibv_dealloc_pd`.
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_some() {
        // SAFETY: made by ibv_alloc_pd; freed once.
        drop(unsafe { Box::from_raw(pd as *mut Pd) });
        return 0;
    }
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_dealloc_pd(pd) }
}

fn access_of(flags: u32) -> Result<AccessFlags, String> {
    let known = IBV_ACCESS_LOCAL_WRITE
        | IBV_ACCESS_REMOTE_WRITE
        | IBV_ACCESS_REMOTE_READ
        | IBV_ACCESS_REMOTE_ATOMIC
        | IBV_ACCESS_MW_BIND;
    let mandatory = flags & (IBV_ACCESS_OPTIONAL_FIRST - 1);
    if mandatory & !known != 0 {
        return Err(format!(
            "memory registration access flags {:#x} (zero-based, on-demand paging, huge pages, ...) are not supported",
            mandatory & !known
        ));
    }
    let mut a = AccessFlags::NONE;
    for (bit, f) in [
        (IBV_ACCESS_LOCAL_WRITE, AccessFlags::LOCAL_WRITE),
        (IBV_ACCESS_REMOTE_WRITE, AccessFlags::REMOTE_WRITE),
        (IBV_ACCESS_REMOTE_READ, AccessFlags::REMOTE_READ),
    ] {
        if flags & bit != 0 {
            a = a | f;
        }
    }
    Ok(a)
}

/// Registers the application's buffer.
///
/// # Safety
/// `pd` is ours; `addr..addr + len` is the application's memory, valid until
/// `ibv_dereg_mr` (the verbs contract).
unsafe fn reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    guard(fail(libc::EIO), || {
        if iova != addr as u64 {
            refuse("memory regions with an I/O virtual address other than the buffer's are not supported");
            return fail(libc::EOPNOTSUPP);
        }
        let flags = match access_of(access) {
            Ok(f) => f,
            Err(e) => {
                refuse(&e);
                return fail(libc::EOPNOTSUPP);
            }
        };
        // SAFETY: the caller says `pd` is ours.
        let p = unsafe { &*(pd as *mut Pd) };
        // SAFETY: the verbs contract: the buffer stays valid until ibv_dereg_mr, which
        // drops the region (and the application drains its QPs first).
        match unsafe { p.inner.register_external(addr.cast(), len, flags) } {
            Ok(mr) => {
                let m = Box::new(Mr {
                    mr: ibv_mr {
                        context: p.pd.context,
                        pd,
                        addr,
                        length: len,
                        handle: 0,
                        lkey: mr.lkey(),
                        rkey: mr.rkey(),
                    },
                    inner: mr,
                });
                debug!("registered {len} bytes at {addr:p}");
                Box::into_raw(m).cast()
            }
            Err(e) => {
                refuse(&format!("memory registration: {e}"));
                fail(errno_of(e))
            }
        }
    })
}

/// `ibv_reg_mr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_some() {
        // SAFETY: ours; the verbs contract on the buffer.
        return unsafe { reg_mr(pd, addr, len, addr as u64, access as u32) };
    }
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_reg_mr(pd, addr, len, access) }
}

/// `ibv_reg_mr_iova`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_some() {
        // SAFETY: ours; the verbs contract on the buffer.
        return unsafe { reg_mr(pd, addr, len, iova, access as u32) };
    }
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_reg_mr_iova(pd, addr, len, iova, access) }
}

/// `ibv_reg_mr_iova2`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    // SAFETY: the caller's live PD.
    if unsafe { owner(pd.cast()) }.is_some() {
        // SAFETY: ours; the verbs contract on the buffer.
        return unsafe { reg_mr(pd, addr, len, iova, access) };
    }
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_reg_mr_iova2(pd, addr, len, iova, access) }
}

/// `ibv_dereg_mr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    // SAFETY: the caller's live MR.
    if unsafe { owner(mr.cast()) }.is_some() {
        // SAFETY: made by reg_mr; freed once.
        drop(unsafe { Box::from_raw(mr as *mut Mr) });
        return 0;
    }
    // SAFETY: not ours: the real function, under its own contract.
    unsafe { real::ibv_dereg_mr(mr) }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn access_flags_map_and_unsupported_mandatory_flags_are_refused() {
        let all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        assert_eq!(access_of(all).unwrap(), AccessFlags::ALL);
        assert_eq!(
            access_of(IBV_ACCESS_REMOTE_READ).unwrap(),
            AccessFlags::REMOTE_READ
        );
        // Optional flags (relaxed ordering, perftest's default) are ignored.
        assert_eq!(
            access_of(all | IBV_ACCESS_OPTIONAL_FIRST).unwrap(),
            AccessFlags::ALL
        );
        // Zero-based (32) and on-demand paging (64) are not.
        for bad in [32, 64] {
            let e = access_of(all | bad).unwrap_err();
            assert!(e.contains(&format!("{bad:#x}")), "{e}");
        }
    }
}
