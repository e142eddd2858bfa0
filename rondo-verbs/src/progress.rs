//! The progress of the host-stack backends (`udp`, and `verbs` with its feature):
//! a context's verbs host over a datapath ([`Driven`]), behind a lock that lets
//! application threads in first, driven by the one driver loop of `rondo_ud`
//! ([`rondo_ud::datapath::poll`]) in rounds: rounds while they move datagrams, a
//! few empty ones more, then a sleep (never past the engine's next timer), in a
//! progress thread or, for explicit progress, in the caller's ([`Progress`]). How
//! it sleeps is the backend's: in `ppoll` on `udp`, a bounded nap on `verbs`.

use crate::cq::CqShared;
use crate::host::VerbsHost;
use crate::types::ContextStats;
use crate::udp::UdpHost;
use crate::VerbsError;
use rondo_proto::{Host, Instant};
use rondo_ud::datapath::{ByCopy, Clock, Datapath};
use rondo_ud::udp::Waker;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// Rounds that moved nothing before the progress thread sleeps: a few, to catch
/// the answer to what it just sent without a wake-up, not more (on a busy host a
/// spinning thread takes the core from the peer and the application).
pub const IDLE_ROUNDS: u32 = 4;

/// A backend's state as the progress thread drives it.
pub(crate) trait Rounds {
    /// One non-blocking round: timers, receive, send. Returns whether anything moved.
    fn round(&mut self) -> bool;
    /// How long until the engine's next timer, if it has one.
    fn until_timer(&self) -> Option<Duration>;
}

/// The routes of a datapath: one per connected flow, forgotten when a destroyed
/// QP's connection is retired.
pub(crate) trait Routes {
    /// Forgets the route of `flow`.
    fn remove_route(&mut self, flow: u32);
    /// Flows with a route.
    fn route_count(&self) -> usize;
}

/// How an idle progress thread sleeps.
pub(crate) trait Sleep {
    /// Called with the state locked, right before a sleep: what is posted from now
    /// on must end it early, if the backend can wake the thread at all.
    fn arm(&mut self) {}
    /// Sleeps `d` at most; true when woken early by work (a datagram, a post).
    fn sleep(&mut self, d: Duration) -> bool;
}

/// State shared with the progress thread. Its lock lets application threads that
/// wait for it (a post, a poll) in ahead of the thread's next round.
pub(crate) struct Shared<S> {
    state: Mutex<S>,
    stop: AtomicBool,
    /// Threads waiting for the state lock (the progress thread lets them in).
    waiting: AtomicUsize,
}

impl<S> Shared<S> {
    pub(crate) fn new(state: S) -> Shared<S> {
        Shared {
            state: Mutex::new(state),
            stop: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, S> {
        if let Ok(g) = self.state.try_lock() {
            return g;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        g
    }

    /// Tells the progress thread to end (it sees it after its round or sleep).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// When an idle progress thread sleeps, and how long at most.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    /// Engine timers closer than this are waited for by running rounds, not by
    /// sleeping (the kernel's timer slack makes short sleeps long).
    pub short_wait: Duration,
    /// Longest sleep (0: spin).
    pub max_sleep: Duration,
}

/// What the progress thread does after a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Run the next round at once.
    Round,
    /// Yield the core, then run a round (a thread waits for the lock, or a timer is
    /// due within [`Policy::short_wait`], or the thread spins by configuration).
    Yield,
    /// Sleep this long with the lock released.
    Sleep(Duration),
}

/// The progress thread's policy after a round that `moved` datagrams or not, with
/// `idle` empty rounds before it; `until_timer` is asked only when idle.
pub(crate) fn next_step(
    moved: bool,
    idle: &mut u32,
    until_timer: impl FnOnce() -> Option<Duration>,
    policy: Policy,
    waiting: bool,
) -> Next {
    if moved || *idle < IDLE_ROUNDS {
        *idle = if moved { 0 } else { *idle + 1 };
        return if waiting { Next::Yield } else { Next::Round };
    }
    let d = until_timer()
        .unwrap_or(policy.max_sleep)
        .min(policy.max_sleep);
    if d < policy.short_wait {
        Next::Yield
    } else {
        Next::Sleep(d)
    }
}

/// A context's verbs host (behind the receive-side fault injection) over datapath
/// `D`, with the clock both are driven by.
pub(crate) struct Driven<D> {
    pub host: UdpHost,
    pub dp: D,
    pub clock: Clock,
    /// Rounds that failed (a send or receive call returned an error), and the last
    /// error.
    pub round_errors: u64,
    pub last_error: Option<String>,
    /// Rounds run by a polling application thread (`ContextStats::polled_rounds`).
    pub polled_rounds: u64,
}

impl<D> Driven<D> {
    pub(crate) fn new(host: UdpHost, dp: D) -> Driven<D> {
        Driven {
            host,
            dp,
            clock: Clock::new(),
            round_errors: 0,
            last_error: None,
            polled_rounds: 0,
        }
    }
}

impl<D: Datapath + Routes> Rounds for Driven<D>
where
    D::Error: std::fmt::Display,
{
    fn round(&mut self) -> bool {
        let mut host = ByCopy(&mut self.host);
        let moved =
            match rondo_ud::datapath::poll(&mut self.dp, &mut host, &self.clock, Duration::ZERO) {
                Ok(o) => o.received + o.sent > 0,
                Err(e) => {
                    self.round_errors += 1;
                    self.last_error = Some(e.to_string());
                    false
                }
            };
        // Destroyed QPs whose connections are gone: their routes go too.
        for flow in self.host.retired.drain(..) {
            self.dp.remove_route(flow);
        }
        moved
    }

    fn until_timer(&self) -> Option<Duration> {
        self.host.poll_timeout().map(|t| self.clock.until(t))
    }
}

/// A context's [`Driven`] state and its progress: a thread running rounds, or
/// (explicit progress) rounds run by the application's `poll` and `wait` calls.
/// `S` is how an idle round sleeps; `L` what the context tells its peers about
/// itself.
pub(crate) struct Progress<D, S, L> {
    shared: Arc<Shared<Driven<D>>>,
    policy: Policy,
    thread: Option<JoinHandle<()>>,
    /// Explicit progress: the sleep of [`Progress::wait_progress`] (the progress
    /// thread owns it otherwise).
    sleep: Option<Mutex<S>>,
    /// Wakes a progress thread that sleeps (posts, shutdown), where the datapath
    /// has something to sleep on.
    waker: Option<Arc<Waker>>,
    pub local: L,
}

impl<D, S, L> Progress<D, S, L>
where
    D: Datapath + Routes + Send + 'static,
    D::Error: std::fmt::Display,
    S: Sleep + Send + 'static,
{
    /// Starts the progress of `state`: a thread called `thread` running rounds,
    /// or, without a name, explicit progress.
    pub(crate) fn start(
        state: Driven<D>,
        policy: Policy,
        mut sleep: S,
        waker: Option<Arc<Waker>>,
        thread: Option<&str>,
        local: L,
    ) -> Result<Progress<D, S, L>, VerbsError> {
        let shared = Arc::new(Shared::new(state));
        let (thread, sleep) = match thread {
            Some(name) => {
                let s = shared.clone();
                let t = std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || progress_loop(&s, policy, &mut sleep))
                    .map_err(|e| VerbsError::Io(format!("spawning the progress thread: {e}")))?;
                (Some(t), None)
            }
            None => (None, Some(Mutex::new(sleep))),
        };
        Ok(Progress {
            shared,
            policy,
            thread,
            sleep,
            waker,
            local,
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Driven<D>> {
        self.shared.lock()
    }

    /// Runs `f` on the host at the current time. What it queued is sent by the
    /// progress thread (woken if asleep; the wake costs a system call only then) or
    /// by the next `poll`: a datapath round per post cost a receive syscall per path
    /// and halved the message rate.
    pub(crate) fn with_host<R>(&self, f: impl FnOnce(&mut VerbsHost, Instant) -> R) -> R {
        let r = {
            let mut s = self.lock();
            let now = s.clock.now();
            f(&mut s.host.host, now)
        };
        if let Some(w) = &self.waker {
            w.wake();
        }
        r
    }

    /// What `poll` does on an empty queue: run a datapath round, with a progress
    /// thread only when it is not running one (else leave it the core).
    pub(crate) fn idle_poll(&self) {
        if self.thread.is_some() {
            // A thread that spins on its queue may as well move the datagrams
            // itself when the progress thread is not at it: its completion then
            // waits for no other thread to be scheduled. perftest's ib_send_lat
            // over the drop-in: round trip 116-190 -> 33 us (docs/ibv.md).
            // A round that moved something may have armed a timer earlier than
            // the sleeping progress thread's wake-up: wake it to look (a system
            // call only when it sleeps, as after a post).
            let moved = match self.shared.state.try_lock() {
                Ok(mut s) => {
                    s.polled_rounds += 1;
                    s.round()
                }
                Err(_) => {
                    std::thread::yield_now();
                    false
                }
            };
            if moved {
                if let Some(w) = &self.waker {
                    w.wake();
                }
            }
        } else {
            self.lock().round();
        }
    }

    /// What `wait` does on an empty queue: with a progress thread, sleep until it
    /// queues a completion in `cq`; without one, the progress thread's loop in the
    /// caller's thread (rounds while they move datagrams, then sleeps until a
    /// datagram, a post or the engine's next timer where the datapath can wake it,
    /// bounded naps where it cannot), until `cq` has a completion or `deadline`
    /// passes.
    pub(crate) fn wait_progress(&self, cq: &CqShared, deadline: std::time::Instant) {
        let Some(sleep) = &self.sleep else {
            cq.wait(deadline);
            return;
        };
        let mut sleep = sleep.lock().unwrap_or_else(|p| p.into_inner());
        drive_until(&self.shared, self.policy, &mut *sleep, deadline, || {
            !cq.is_empty()
        });
    }

    /// The host's counters, those of the fault injection, and the routes.
    pub(crate) fn stats(&self) -> ContextStats {
        let s = self.lock();
        ContextStats {
            routes: s.dp.route_count() as u64,
            polled_rounds: s.polled_rounds,
            ..s.host.context_stats()
        }
    }
}

impl<D, S, L> Drop for Progress<D, S, L> {
    fn drop(&mut self) {
        self.shared.stop();
        if let Some(t) = self.thread.take() {
            // A thread about to sleep sees `stop` after its sleep at worst.
            if let Some(w) = &self.waker {
                w.wake();
            }
            let _ = t.join();
        }
    }
}

/// The progress thread: rounds while they move datagrams, a sleep when they stop,
/// until [`Shared::stop`].
pub(crate) fn progress_loop<S: Rounds>(shared: &Shared<S>, policy: Policy, sleep: &mut impl Sleep) {
    drive(shared, policy, sleep, None, || {
        shared.stop.load(Ordering::Relaxed)
    });
}

/// Explicit progress in the caller's thread, the progress thread's way: until
/// `done` (checked before every round) or `deadline`, whichever comes first;
/// sleeps never run past the deadline.
pub(crate) fn drive_until<S: Rounds>(
    shared: &Shared<S>,
    policy: Policy,
    sleep: &mut impl Sleep,
    deadline: std::time::Instant,
    done: impl Fn() -> bool,
) {
    drive(shared, policy, sleep, Some(deadline), done);
}

fn drive<S: Rounds>(
    shared: &Shared<S>,
    policy: Policy,
    sleep: &mut impl Sleep,
    deadline: Option<std::time::Instant>,
    done: impl Fn() -> bool,
) {
    let mut idle = 0u32;
    while !done() {
        let left = match deadline {
            Some(t) => match t.checked_duration_since(std::time::Instant::now()) {
                Some(left) => Some(left),
                None => return,
            },
            None => None,
        };
        let next = {
            let mut s = shared.lock();
            let moved = s.round();
            let waiting = shared.waiting.load(Ordering::Acquire) > 0;
            let next = match next_step(moved, &mut idle, || s.until_timer(), policy, waiting) {
                Next::Sleep(d) => Next::Sleep(left.map_or(d, |l| d.min(l))),
                n => n,
            };
            if let Next::Sleep(_) = next {
                // Armed before the lock is released: a post from now on wakes the
                // thread, and what was posted before is what this round found.
                sleep.arm();
            }
            next
        };
        match next {
            Next::Round => {}
            Next::Yield => std::thread::yield_now(),
            // Woken by a datagram or a post: run rounds again before sleeping.
            Next::Sleep(d) => {
                if sleep.sleep(d) {
                    idle = 0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_policy_runs_while_busy_then_sleeps_bounded() {
        let policy = Policy {
            short_wait: Duration::from_micros(5),
            max_sleep: Duration::from_micros(20),
        };
        let sleep = policy.max_sleep;
        let mut idle = 0;
        assert_eq!(
            next_step(true, &mut idle, || None, policy, false),
            Next::Round
        );
        assert_eq!(idle, 0);
        for i in 1..=IDLE_ROUNDS {
            let asked = std::cell::Cell::new(false);
            let until = || {
                asked.set(true);
                None
            };
            assert_eq!(
                next_step(false, &mut idle, until, policy, false),
                Next::Round
            );
            assert_eq!(idle, i);
            assert!(!asked.get(), "the timer is asked only when idle");
        }
        // Idle: sleep, never past the engine's next timer, and yield when it is close.
        assert_eq!(
            next_step(false, &mut idle, || None, policy, false),
            Next::Sleep(sleep)
        );
        let soon = Duration::from_micros(8);
        assert_eq!(
            next_step(false, &mut idle, || Some(soon), policy, false),
            Next::Sleep(soon)
        );
        let close = Duration::from_micros(1);
        assert_eq!(
            next_step(false, &mut idle, || Some(close), policy, false),
            Next::Yield
        );
        // Spinning by configuration, and a waiting application thread goes first.
        let spin = Policy {
            max_sleep: Duration::ZERO,
            ..policy
        };
        assert_eq!(
            next_step(false, &mut idle, || None, spin, false),
            Next::Yield
        );
        assert_eq!(
            next_step(true, &mut idle, || None, policy, true),
            Next::Yield
        );
        assert_eq!(idle, 0, "a round that moved resets the idle count");
    }

    /// Rounds that move datagrams `busy` times, then nothing.
    struct Script {
        busy: u32,
        rounds: u32,
    }

    impl Rounds for Script {
        fn round(&mut self) -> bool {
            self.rounds += 1;
            self.rounds <= self.busy
        }
        fn until_timer(&self) -> Option<Duration> {
            None
        }
    }

    /// Counts arms and sleeps; stops the loop at the second sleep.
    struct Count<'a> {
        shared: &'a Shared<Script>,
        arms: u32,
        sleeps: Vec<Duration>,
    }

    impl Sleep for Count<'_> {
        fn arm(&mut self) {
            self.arms += 1;
        }
        fn sleep(&mut self, d: Duration) -> bool {
            self.sleeps.push(d);
            if self.sleeps.len() == 2 {
                self.shared.stop();
            }
            false
        }
    }

    #[test]
    fn the_loop_runs_busy_and_idle_rounds_then_arms_and_sleeps_until_stopped() {
        let shared = Shared::new(Script { busy: 3, rounds: 0 });
        let policy = Policy {
            short_wait: Duration::from_micros(5),
            max_sleep: Duration::from_micros(50),
        };
        let mut count = Count {
            shared: &shared,
            arms: 0,
            sleeps: Vec::new(),
        };
        progress_loop(&shared, policy, &mut count);
        // 3 busy rounds, IDLE_ROUNDS empty ones, then one round per sleep.
        assert_eq!(shared.lock().rounds, 3 + IDLE_ROUNDS + 2);
        assert_eq!(count.arms, 2, "armed before each sleep");
        assert_eq!(count.sleeps, vec![policy.max_sleep; 2]);
    }
}
