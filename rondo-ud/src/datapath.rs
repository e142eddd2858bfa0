//! The one [`Datapath`] trait and the one driver loop ([`poll`]) over it: the UDP
//! datapath and the ibverbs UD datapath implement the trait, and the same loop
//! runs the engine's timers, takes its datagrams into the datapath's transmit
//! buffers and hands it what arrived, whichever datapath is under it.
//!
//! A round: if a timer is due, read what has arrived first (after the thread was
//! descheduled, the ACKs that cancel the retransmission and loss timers are
//! waiting; firing the timers before them resends delivered packets); run the due
//! timers; transmit; wait for arrivals up to the next timer or the caller's limit
//! (not at all after sending, and not below [`Datapath::spin`]: those waits are
//! polled); hand them over; run timers and transmit once more.

use crate::HostProfile;
use rondo_proto::time::Instant;
use rondo_proto::transmit::{Host, PayloadRef, Transmit, TxBuffer};
use rondo_proto::{Endpoint, PayloadBytes};
use std::time::Duration;

/// A monotonic clock for the engine: [`Instant`]s counted from its creation.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: std::time::Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock whose zero is now.
    pub fn new() -> Clock {
        Clock {
            origin: std::time::Instant::now(),
        }
    }

    /// The engine time now (nanosecond resolution).
    pub fn now(&self) -> Instant {
        Instant::from_ns(self.origin.elapsed().as_nanos() as u64)
    }

    /// The wall-clock wait until `t`, zero when it has passed.
    pub fn until(&self, t: Instant) -> Duration {
        Duration::from_nanos(t.saturating_since(self.now()).as_ns())
    }
}

/// What one round of [`poll`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollOutcome {
    /// Datagrams handed to the host.
    pub received: usize,
    /// Datagrams the host produced for the datapath.
    pub sent: usize,
}

/// A host that can take a datagram whose payload a datapath received in place
/// (at the target its [`Placement`](rondo_proto::placement::Placement) handed out).
/// [`Endpoint`] is one; [`ByCopy`] makes any [`Host`] one that never is.
pub trait InPlaceHost: Host {
    /// A DATA datagram whose header is `header` and whose `payload_len` payload
    /// bytes lie at the place its placement gave for the next expected bytes
    /// ([`Endpoint::receive_in_place`]).
    fn handle_in_place(
        &mut self,
        now: Instant,
        path: u16,
        header: &[u8],
        payload_len: usize,
        ecn_ce: bool,
    );

    /// True when [`InPlaceHost::handle_in_place`] may be called (a datapath then
    /// posts in-place receives).
    fn takes_in_place(&self) -> bool {
        true
    }
}

impl InPlaceHost for Endpoint {
    fn handle_in_place(
        &mut self,
        now: Instant,
        path: u16,
        header: &[u8],
        payload_len: usize,
        ecn_ce: bool,
    ) {
        // Errors are counted in the endpoint's stats.
        let _ = self.receive_in_place(now, path, header, payload_len, ecn_ce);
    }
}

/// Any [`Host`] as an [`InPlaceHost`] that receives by copy only.
#[derive(Debug)]
pub struct ByCopy<'a, H>(pub &'a mut H);

impl<H: Host> Host for ByCopy<'_, H> {
    fn handle_datagram(&mut self, now: Instant, path: u16, data: &[u8], ecn_ce: bool) {
        self.0.handle_datagram(now, path, data, ecn_ce);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.0.handle_timeout(now);
    }
    fn poll_transmit<B: TxBuffer + ?Sized>(
        &mut self,
        now: Instant,
        tx: &mut B,
    ) -> Option<Transmit> {
        self.0.poll_transmit(now, tx)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.0.poll_timeout()
    }
    fn payload(&self, r: PayloadRef) -> PayloadBytes<'_> {
        self.0.payload(r)
    }
}

impl<H: Host> InPlaceHost for ByCopy<'_, H> {
    fn handle_in_place(&mut self, _: Instant, _: u16, _: &[u8], _: usize, _: bool) {
        // Never called: `takes_in_place` is false.
    }
    fn takes_in_place(&self) -> bool {
        false
    }
}

/// A datapath under the engine: transmit buffers the host writes datagrams into,
/// sending them in batches, and receiving. [`poll`] drives any host over it.
pub trait Datapath {
    /// What a failed round returns.
    type Error;

    /// How the engine is tuned over this datapath ([`crate::profile`]).
    const PROFILE: HostProfile;

    /// The transmit buffer this datapath hands the host for one datagram: memory of
    /// the path the host chooses ([`TxBuffer::take`]), and whether a DATA payload
    /// may stay in the host's memory ([`TxBuffer::payload_by_reference`]).
    type Tx<'a>: TxBuffer
    where
        Self: 'a;

    /// Most datagrams one transmit pass takes from the host before receiving gets
    /// its turn.
    fn tx_limit(&self) -> usize;

    /// A transmit buffer for the host's next datagram, on whichever path it
    /// chooses (of at least the `mtu` of every flow: the datapaths' `check_flow`),
    /// or `None` when every transmit buffer is taken (the pass ends). It may send
    /// queued datagrams first to make room (their payloads in `host`).
    fn tx_buffer<H: Host>(&mut self, host: &H) -> Option<Self::Tx<'_>>;

    /// Queues the datagram `t` that the host wrote into the buffer it took from the
    /// last [`Datapath::tx_buffer`]. A datagram without a route is counted and
    /// dropped.
    fn tx_queue(&mut self, t: Transmit);

    /// Sends everything queued (payloads left in `host` are read from it).
    fn tx_flush<H: Host>(&mut self, host: &H) -> Result<(), Self::Error>;

    /// Waits for arrivals shorter than this are not slept but polled.
    fn spin(&self) -> Duration {
        Duration::ZERO
    }

    /// The time to hand the host now: `clock.now()`, never before a time already
    /// handed to it (a datapath that stamps arrivals with NIC times keeps that).
    fn now(&mut self, clock: &Clock) -> Instant {
        clock.now()
    }

    /// Waits up to `wait` for datagrams and hands every one that arrived to `host`
    /// (in place where the host takes it so and the datapath can); returns how many.
    fn receive<H: InPlaceHost>(
        &mut self,
        host: &mut H,
        clock: &Clock,
        wait: Duration,
    ) -> Result<usize, Self::Error>;
}

/// One round of the driver loop over `dp` (see the module documentation): due
/// timers, transmits, a wait of at most `max_wait` for arrivals (shorter when the
/// host's next timer is sooner, none after sending), the arrivals, timers and
/// transmits once more.
///
/// Errors: the datapath's, from a failing receive or send call.
pub fn poll<D: Datapath, H: InPlaceHost>(
    dp: &mut D,
    host: &mut H,
    clock: &Clock,
    max_wait: Duration,
) -> Result<PollOutcome, D::Error> {
    let mut out = PollOutcome::default();
    if host.poll_timeout().is_some_and(|t| t <= clock.now()) {
        out.received += dp.receive(host, clock, Duration::ZERO)?;
    }
    let now = dp.now(clock);
    run_timers(host, now);
    out.sent += transmit(dp, host, now)?;
    let mut wait = match host.poll_timeout() {
        Some(t) => clock.until(t).min(max_wait),
        None => max_wait,
    };
    if out.sent > 0 || wait < dp.spin() {
        wait = Duration::ZERO;
    }
    out.received += dp.receive(host, clock, wait)?;
    let now = dp.now(clock);
    run_timers(host, now);
    out.sent += transmit(dp, host, now)?;
    Ok(out)
}

/// Fires the host's timers when they are due at `now`.
fn run_timers<H: Host>(host: &mut H, now: Instant) {
    if host.poll_timeout().is_some_and(|t| t <= now) {
        host.handle_timeout(now);
    }
}

/// Takes what the host has to send at `now` into the datapath's transmit buffers,
/// at most [`Datapath::tx_limit`] datagrams, and sends it; returns the datagrams.
fn transmit<D: Datapath, H: Host>(
    dp: &mut D,
    host: &mut H,
    now: Instant,
) -> Result<usize, D::Error> {
    let limit = dp.tx_limit();
    let mut n = 0;
    while n < limit {
        let Some(mut tx) = dp.tx_buffer(&*host) else {
            break;
        };
        let sent = host.poll_transmit(now, &mut tx);
        drop(tx);
        let Some(t) = sent else {
            break;
        };
        n += 1;
        dp.tx_queue(t);
    }
    dp.tx_flush(&*host)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rondo_proto::transmit::Priority;

    /// A host that fires its timer once and then sends `left` datagrams.
    struct Script {
        timer: Option<Instant>,
        fired: u32,
        left: usize,
        got: Vec<u16>,
    }

    impl Host for Script {
        fn handle_datagram(&mut self, _: Instant, path: u16, _: &[u8], _: bool) {
            self.got.push(path);
        }
        fn handle_timeout(&mut self, _: Instant) {
            self.fired += 1;
            self.timer = None;
        }
        fn poll_transmit<B: TxBuffer + ?Sized>(
            &mut self,
            _: Instant,
            tx: &mut B,
        ) -> Option<Transmit> {
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            let path = self.left as u16;
            tx.take(path, Priority::Data, 1)[0] = self.left as u8;
            Some(Transmit {
                path,
                priority: Priority::Data,
                len: 1,
                flow: 0,
                payload: None,
            })
        }
        fn poll_timeout(&self) -> Option<Instant> {
            self.timer
        }
    }

    /// A datapath with two transmit buffers that records what the loop did, and
    /// whose receive hands over one datagram per call that has one waiting.
    #[derive(Default)]
    struct Log {
        bufs: [u8; 2],
        used: usize,
        queued: Vec<(u16, u8)>,
        flushes: u32,
        waits: Vec<Duration>,
        arrivals: usize,
        calls: Vec<&'static str>,
    }

    impl Datapath for Log {
        type Error = ();
        const PROFILE: HostProfile = HostProfile::HOST_STACK;
        type Tx<'a> = &'a mut [u8];
        fn tx_limit(&self) -> usize {
            8
        }
        fn tx_buffer<H: Host>(&mut self, _: &H) -> Option<&mut [u8]> {
            let i = self.used;
            self.bufs.get_mut(i..i + 1)
        }
        fn tx_queue(&mut self, t: Transmit) {
            self.queued.push((t.path, self.bufs[self.used]));
            self.used += 1;
        }
        fn tx_flush<H: Host>(&mut self, _: &H) -> Result<(), ()> {
            self.flushes += 1;
            self.used = 0;
            self.calls.push("flush");
            Ok(())
        }
        fn spin(&self) -> Duration {
            Duration::from_micros(50)
        }
        fn receive<H: InPlaceHost>(
            &mut self,
            host: &mut H,
            _: &Clock,
            wait: Duration,
        ) -> Result<usize, ()> {
            self.waits.push(wait);
            self.calls.push("receive");
            if self.arrivals == 0 {
                return Ok(0);
            }
            self.arrivals -= 1;
            host.handle_datagram(Instant::ZERO, 9, &[], false);
            Ok(1)
        }
    }

    #[test]
    fn a_due_timer_reads_arrivals_first_and_a_round_sends_in_passes_of_free_buffers() {
        let clock = Clock::new();
        let mut host = Script {
            timer: Some(Instant::ZERO),
            fired: 0,
            left: 3,
            got: Vec::new(),
        };
        let mut dp = Log {
            arrivals: 1,
            ..Log::default()
        };
        let out = poll(
            &mut dp,
            &mut ByCopy(&mut host),
            &clock,
            Duration::from_millis(5),
        )
        .unwrap();
        // The arrival was read before the timer fired; two buffers, so two passes of
        // two and one datagram; no wait after sending.
        assert_eq!(dp.calls, ["receive", "flush", "receive", "flush"]);
        assert_eq!(host.got, [9]);
        assert_eq!(host.fired, 1);
        assert_eq!(
            out,
            PollOutcome {
                received: 1,
                sent: 3
            }
        );
        assert_eq!(dp.queued, [(2, 2), (1, 1), (0, 0)]);
        assert_eq!(dp.waits, [Duration::ZERO, Duration::ZERO]);
    }

    #[test]
    fn an_idle_round_waits_up_to_the_limit_and_short_waits_are_polled() {
        let clock = Clock::new();
        let mut host = Script {
            timer: None,
            fired: 0,
            left: 0,
            got: Vec::new(),
        };
        let mut dp = Log::default();
        let limit = Duration::from_millis(3);
        let out = poll(&mut dp, &mut ByCopy(&mut host), &clock, limit).unwrap();
        assert_eq!(out, PollOutcome::default());
        assert_eq!(dp.waits, [limit], "no timer: the caller's limit");
        let mut dp = Log::default();
        poll(
            &mut dp,
            &mut ByCopy(&mut host),
            &clock,
            Duration::from_micros(10),
        )
        .unwrap();
        assert_eq!(dp.waits, [Duration::ZERO], "below spin: polled");
        assert_eq!(host.fired, 0);
    }
}
