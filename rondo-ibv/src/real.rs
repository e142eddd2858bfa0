//! The real libibverbs' functions, for devices and objects that are not ours: the
//! next definition after this library (`dlvsym(RTLD_NEXT, name, version)`), looked
//! up once.

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
pub(crate) use next;
