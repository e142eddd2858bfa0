//! Completion queues.

use crate::context::Context;
use crate::types::{WcStatus, WorkCompletion};
use crate::VerbsError;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The queue the transport fills.
#[derive(Debug)]
pub(crate) struct CqShared {
    /// Completions, each with whether it ends a solicited-only arming (a
    /// solicited receive, or an error).
    queue: Mutex<VecDeque<(WorkCompletion, bool)>>,
    /// Entries it holds (changed only under the queue's lock: [`CompletionQueue::resize`]).
    depth: AtomicUsize,
    /// The CQ's handle in async events.
    id: u32,
    overruns: AtomicU64,
    /// A completion found the queue full: the CQ is in error, as a NIC's CQ after
    /// an overrun, and takes no more completions.
    overflowed: AtomicBool,
    /// The overrun's async event has been queued.
    reported: AtomicBool,
    /// Signalled on a push while `waiters` is nonzero (see [`CqShared::wait`]).
    ready: Condvar,
    /// Threads blocked in [`CqShared::wait`]: a push pays for a wake-up only then.
    waiters: AtomicUsize,
    /// The completion notification hook ([`CompletionQueue::set_notify`]).
    notify: Mutex<Hook>,
    /// What the armed notification waits for: [`DISARMED`], [`NEXT`]
    /// ([`CompletionQueue::arm_notify`]) or [`SOLICITED`]
    /// ([`CompletionQueue::arm_notify_solicited`]).
    armed: AtomicU8,
}

/// What a completion notification runs (`ibv_req_notify_cq`'s event).
pub type NotifyHook = Arc<dyn Fn() + Send + Sync>;

/// The hook, if one is set.
#[derive(Default)]
struct Hook(Option<NotifyHook>);

impl core::fmt::Debug for Hook {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Hook(set)"
        } else {
            "Hook(none)"
        })
    }
}

/// No notification armed.
const DISARMED: u8 = 0;
/// Armed for the next completion.
const NEXT: u8 = 1;
/// Armed for the next solicited receive completion or error completion.
const SOLICITED: u8 = 2;

/// Handles of completion queues (process-wide, as they only name a CQ in events).
static NEXT_CQ_ID: AtomicU32 = AtomicU32::new(1);

impl CqShared {
    pub(crate) fn new(depth: usize) -> CqShared {
        CqShared {
            queue: Mutex::new(VecDeque::with_capacity(depth.min(4096))),
            depth: AtomicUsize::new(depth),
            id: NEXT_CQ_ID.fetch_add(1, Ordering::Relaxed),
            overruns: AtomicU64::new(0),
            overflowed: AtomicBool::new(false),
            reported: AtomicBool::new(false),
            ready: Condvar::new(),
            waiters: AtomicUsize::new(0),
            notify: Mutex::new(Hook::default()),
            armed: AtomicU8::new(DISARMED),
        }
    }

    /// Adds a completion. One that finds `depth` entries queued is lost, as on a
    /// NIC: the CQ goes to error and takes no more (counted in `overruns`); the host
    /// then reports it and moves its QPs to error ([`CqShared::take_overrun`]).
    pub(crate) fn push(&self, wc: WorkCompletion) {
        self.push_solicited(wc, false);
    }

    /// Like [`CqShared::push`]; `solicited`: a receive completion of a request
    /// that asked for a solicited event.
    pub(crate) fn push_solicited(&self, wc: WorkCompletion, solicited: bool) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= self.depth.load(Ordering::Relaxed) || self.overflowed.load(Ordering::Relaxed)
        {
            self.overruns.fetch_add(1, Ordering::Relaxed);
            self.overflowed.store(true, Ordering::Release);
            // A waiter learns of the error from `poll`.
            if self.waiters.load(Ordering::Acquire) > 0 {
                self.ready.notify_all();
            }
            return;
        }
        let event = solicited || wc.status != WcStatus::Success;
        q.push_back((wc, event));
        // Counted under the queue's lock by a waiter before it checks for entries,
        // so a push either comes before that check or sees the waiter.
        if self.waiters.load(Ordering::Acquire) > 0 {
            self.ready.notify_all();
        }
        drop(q);
        self.fire_if_armed(event);
    }

    /// Runs the hook once if a notification is armed for this completion (any
    /// when armed for the next, a solicited or error one when armed for those),
    /// outside the queue's lock, so that the hook may poll.
    fn fire_if_armed(&self, event: bool) {
        let want = self.armed.load(Ordering::Acquire);
        if want == DISARMED || (want == SOLICITED && !event) {
            return;
        }
        // Lost only to another firing, or to an arming that checks the queue.
        if self
            .armed
            .compare_exchange(want, DISARMED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            let hook = self
                .notify
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .0
                .clone();
            if let Some(hook) = hook {
                hook();
            }
        }
    }

    /// Blocks until the queue holds a completion or `deadline` passes, for a
    /// backend whose progress thread fills it.
    pub(crate) fn wait(&self, deadline: Instant) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        self.waiters.fetch_add(1, Ordering::AcqRel);
        while q.is_empty() && !self.overflowed() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            q = match self.ready.wait_timeout(q, left) {
                Ok((q, _)) => q,
                Err(p) => p.into_inner().0,
            };
        }
        self.waiters.fetch_sub(1, Ordering::AcqRel);
    }

    /// Moves up to `out.len()` completions into `out`.
    pub(crate) fn drain(&self, out: &mut [WorkCompletion]) -> usize {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let n = out.len().min(q.len());
        for (slot, (wc, _)) in out.iter_mut().zip(q.drain(..n)) {
            *slot = wc;
        }
        n
    }

    /// Whether the CQ overran (it is in error).
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }

    /// The CQ's handle, once, after it overran: the host's cue to queue the async
    /// event.
    pub(crate) fn take_overrun(&self) -> Option<u32> {
        (self.overflowed() && !self.reported.swap(true, Ordering::AcqRel)).then_some(self.id)
    }

    /// What `poll` returns when the queue is empty: nothing, or the overrun.
    fn empty_result(&self) -> Result<usize, VerbsError> {
        if self.overflowed() {
            return Err(VerbsError::CqOverrun {
                cq: self.id,
                depth: self.depth.load(Ordering::Relaxed),
            });
        }
        Ok(0)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }
}

struct CqInner {
    shared: Arc<CqShared>,
    ctx: Context,
}

/// A completion queue (`ibv_cq`). Clones share the queue.
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<CqInner>,
}

impl core::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("depth", &self.depth())
            .finish()
    }
}

impl CompletionQueue {
    pub(crate) fn new(ctx: Context, depth: usize) -> CompletionQueue {
        CompletionQueue {
            inner: Arc::new(CqInner {
                shared: Arc::new(CqShared::new(depth)),
                ctx,
            }),
        }
    }

    pub(crate) fn shared(&self) -> &Arc<CqShared> {
        &self.inner.shared
    }

    pub(crate) fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// Fills the front of `wc` with completions, oldest first, and returns how many
    /// (`ibv_poll_cq`). On the `mem` backend this also runs the in-process fabric
    /// (explicit progress) until a completion is available or a bounded number of
    /// events has been processed; on `udp` the context's progress thread does the work.
    ///
    /// A CQ that overran (a completion found `depth` entries queued) still hands out
    /// the completions it holds, then fails with [`VerbsError::CqOverrun`], as a
    /// NIC's CQ in error; its QPs are in error and the context has an async event
    /// ([`Context::poll_async_event`]).
    pub fn poll(&self, wc: &mut [WorkCompletion]) -> Result<usize, VerbsError> {
        if wc.is_empty() {
            return Ok(0);
        }
        let n = self.inner.shared.drain(wc);
        if n > 0 {
            return Ok(n);
        }
        self.inner.ctx.progress(&self.inner.shared);
        match self.inner.shared.drain(wc) {
            0 => self.inner.shared.empty_result(),
            n => Ok(n),
        }
    }

    /// The CQ's handle, as async events name it ([`AsyncEvent::CqError`]).
    ///
    /// [`AsyncEvent::CqError`]: crate::AsyncEvent::CqError
    pub fn handle(&self) -> u32 {
        self.inner.shared.id
    }

    /// Like [`CompletionQueue::poll`], but when the queue is empty it waits up to
    /// `timeout` for a completion instead of returning at once (what a completion
    /// channel, `ibv_req_notify_cq` and `ibv_get_cq_event`, gives on a NIC).
    /// Returns 0 when the timeout passed with nothing completed.
    ///
    /// How it waits depends on the backend: on `udp` with a progress thread it
    /// sleeps until the thread queues a completion; on `udp` with explicit progress
    /// it runs datapath rounds while they move datagrams and sleeps in `ppoll` on
    /// the path sockets in between (so one thread per process does all the work and
    /// burns no CPU while it waits); on `mem` it runs the in-process fabric, as
    /// `poll` does, once.
    pub fn wait(&self, wc: &mut [WorkCompletion], timeout: Duration) -> Result<usize, VerbsError> {
        if wc.is_empty() {
            return Ok(0);
        }
        let n = self.inner.shared.drain(wc);
        if n > 0 {
            return Ok(n);
        }
        let deadline = Instant::now() + timeout;
        self.inner.ctx.wait_progress(&self.inner.shared, deadline);
        match self.inner.shared.drain(wc) {
            0 => self.inner.shared.empty_result(),
            n => Ok(n),
        }
    }

    /// Polls until `n` completions have been collected or `max_polls` polls found
    /// nothing new. Returns what was collected.
    pub fn poll_n(&self, n: usize, max_polls: usize) -> Result<Vec<WorkCompletion>, VerbsError> {
        let mut out = Vec::with_capacity(n);
        let mut buf = [WorkCompletion::default(); 16];
        let mut idle = 0;
        while out.len() < n && idle < max_polls {
            let want = (n - out.len()).min(buf.len());
            let got = self.poll(&mut buf[..want])?;
            if got == 0 {
                idle += 1;
            } else {
                idle = 0;
                out.extend_from_slice(&buf[..got]);
            }
        }
        Ok(out)
    }

    /// Sets the hook a completion notification runs (replacing any earlier one). It
    /// runs on whichever thread adds the completion (the progress thread, usually),
    /// outside the queue's lock: keep it short (write an eventfd, signal a condvar).
    pub fn set_notify(&self, hook: NotifyHook) {
        *self
            .inner
            .shared
            .notify
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Hook(Some(hook));
    }

    /// Arms one notification (`ibv_req_notify_cq`): the hook runs once, when the
    /// next completion is added, or at once if the queue already holds one (so a
    /// completion that came between the last poll and the arming is never missed).
    /// Arming twice before it fires still fires once.
    pub fn arm_notify(&self) {
        let shared = &self.inner.shared;
        shared.armed.store(NEXT, Ordering::Release);
        if !shared.is_empty() {
            shared.fire_if_armed(true);
        }
    }

    /// Arms one solicited-only notification (`ibv_req_notify_cq` with
    /// `solicited_only`): the hook runs once, for the next receive completion of a
    /// request posted with [`SendWr::solicited`](crate::SendWr::solicited) or the
    /// next completion in error, or at once if the queue holds such a one. A CQ
    /// armed for the next completion stays armed for it.
    pub fn arm_notify_solicited(&self) {
        let shared = &self.inner.shared;
        let _ =
            shared
                .armed
                .compare_exchange(DISARMED, SOLICITED, Ordering::AcqRel, Ordering::Acquire);
        let queued = shared
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|(_, event)| *event);
        if queued {
            shared.fire_if_armed(true);
        }
    }

    /// The number of entries the CQ holds.
    pub fn depth(&self) -> usize {
        self.inner.shared.depth.load(Ordering::Relaxed)
    }

    /// Changes the number of entries the CQ holds (`ibv_resize_cq`), keeping the
    /// completions it holds. A depth of 0, or below the completions queued now, is
    /// an [`VerbsError::InvalidAttr`] and changes nothing; so is resizing a CQ that
    /// overran (it is in error, as a NIC's).
    pub fn resize(&self, depth: usize) -> Result<(), VerbsError> {
        let shared = &self.inner.shared;
        let q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
        let refuse = |reason: String| {
            Err(VerbsError::InvalidAttr {
                name: "depth",
                reason,
            })
        };
        if shared.overflowed() {
            return refuse("the CQ overran and is in error; create a new one".into());
        }
        if depth == 0 || depth < q.len() {
            return refuse(format!(
                "{depth}; the CQ holds {} completions now: poll them first, or give at least that many (and 1)",
                q.len()
            ));
        }
        shared.depth.store(depth, Ordering::Relaxed);
        Ok(())
    }

    /// Completions lost because they arrived while the queue held `depth` entries,
    /// or after that overrun (poll more often or create a deeper CQ).
    pub fn overruns(&self) -> u64 {
        self.inner.shared.overruns.load(Ordering::Relaxed)
    }
}
