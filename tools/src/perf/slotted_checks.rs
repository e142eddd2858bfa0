//! Runs every transport over `perf::slotted` must pass, each on the transport's own
//! test pair: `hello(op, size, n)` is a verified bandwidth run of `n` messages of
//! `size` bytes, `run(h, server_seed)` runs it with the server's copy of the hello
//! expecting the pattern of `server_seed` (the client's seed: nothing changed).

use super::client::SETUP_TIMEOUT;
use super::exchange::{Backend, Control, Hello, Message, Op, Report, Transport};
use super::report::Outcome;
use std::net::{TcpListener, TcpStream};

/// A verified bandwidth run of `n` messages of `size` bytes: Rondo on UDP, 4
/// paths, 2 queue pairs of 8 slots.
pub(super) fn hello(op: Op, size: u64, n: u64) -> Hello {
    Hello {
        op,
        size,
        iterations: Some(n),
        duration_s: None,
        paths: 4,
        qps: 2,
        transport: Transport::RONDO,
        backend: Backend::Udp,
        mtu: 4096,
        tx_depth: 8,
        verify_seed: Some(5),
        lat: false,
        busy_poll: false,
        progress_thread: false,
        line_gbps: 0.0,
        reorder_buffer: 0,
        loss: 0.0,
        reorder: 0.0,
        endpoints: Vec::new(),
        regions: Vec::new(),
        udp_paths: Vec::new(),
        engine: Vec::new(),
        auth: "auth".into(),
    }
}

/// Runs `client` with hello `h` and, on another thread, `server` with the hello it
/// receives (changed by `tamper`), over a control connection on loopback TCP.
pub(super) fn over_loopback(
    h: Hello,
    tamper: impl FnOnce(&mut Hello) + Send + 'static,
    server: impl FnOnce(&mut Control, &Hello) -> Report + Send + 'static,
    client: impl FnOnce(&mut Control, Hello) -> Outcome,
) -> (Outcome, Report) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut ctrl = Control::new(stream).unwrap();
        let mut h = match ctrl.recv(SETUP_TIMEOUT).unwrap() {
            Message::Hello(h) => h,
            m => panic!("got {m:?}"),
        };
        tamper(&mut h);
        server(&mut ctrl, &h)
    });
    let mut ctrl = Control::new(TcpStream::connect(addr).unwrap()).unwrap();
    let outcome = client(&mut ctrl, h);
    (outcome, server.join().unwrap())
}

/// Every operation moves its messages, verified; the outcomes, for the transport's
/// own checks.
pub(super) fn every_operation_moves_verified_bytes(
    hello: impl Fn(Op, u64, u64) -> Hello,
    run: impl Fn(Hello, Option<u64>) -> (Outcome, Report),
) -> Vec<Outcome> {
    [Op::Write, Op::Send, Op::Read]
        .into_iter()
        .map(|op| {
            let (o, r) = run(hello(op, 10_000, 40), None);
            assert_eq!(o.n_iterations, 40, "{op:?}");
            assert!(o.verified, "{op:?}: {o:?} {r:?}");
            assert!(o.bw_average > 0.0);
            if op != Op::Read {
                assert_eq!((r.messages, r.mismatched_bytes), (40, 0), "{op:?}");
            }
            o
        })
        .collect()
}

/// A server expecting the pattern of another seed does not verify the run.
pub(super) fn a_receiver_expecting_other_bytes_does_not_verify(
    hello: impl Fn(Op, u64, u64) -> Hello,
    run: impl Fn(Hello, Option<u64>) -> (Outcome, Report),
) {
    for op in [Op::Write, Op::Send, Op::Read] {
        let h = hello(op, 5000, 10);
        let other = h.verify_seed.map_or(1, |s| s + 1);
        let (o, r) = run(h, Some(other));
        assert!(!o.verified, "{op:?}: {o:?}");
        if op != Op::Read {
            assert!(r.mismatched_bytes > 0, "{op:?}: {r:?}");
        }
    }
}

/// Latency mode ping-pongs every operation, verified, and times each ping.
pub(super) fn latency_mode_echoes_every_operation(
    hello: impl Fn(Op, u64, u64) -> Hello,
    run: impl Fn(Hello, Option<u64>) -> (Outcome, Report),
) {
    for op in [Op::Write, Op::Send, Op::Read] {
        let mut h = hello(op, 3000, 20);
        h.lat = true;
        h.qps = 1;
        let (o, _) = run(h, None);
        let l = o.latency.expect("latency mode fills the percentiles");
        assert!(o.verified, "{op:?}: {o:?}");
        assert_eq!(o.n_iterations, 20);
        assert!(l.p50_us > 0.0 && l.p50_us <= l.max_us, "{op:?}: {l:?}");
    }
}
