//! Client and server on two contexts of one in-process fabric.

use super::*;
use crate::perf::exchange::{Op, Report};
use crate::perf::report::Outcome;
use crate::perf::slotted_checks::{self as checks, hello};
use rondo_verbs::{FabricConfig, MemFabric};

/// Runs client and server on two contexts of one in-process fabric, with the
/// control exchange over loopback TCP.
fn run(h: Hello, loss: f64) -> (Outcome, Report) {
    run_with(h, loss, |_| {})
}

/// [`run`], with the server's copy of the hello changed by `tamper`.
fn run_with(
    h: Hello,
    loss: f64,
    tamper: impl FnOnce(&mut Hello) + Send + 'static,
) -> (Outcome, Report) {
    let fabric = MemFabric::new(3, FabricConfig::uniform(4, 25.0, 5.0).with_loss(loss)).unwrap();
    let server_ctx = Context::open_mem(
        &fabric,
        ContextAttr {
            seed: 2,
            ..context_attr(&h)
        },
    )
    .unwrap();
    let client_ctx = Context::open_mem(
        &fabric,
        ContextAttr {
            seed: 1,
            ..context_attr(&h)
        },
    )
    .unwrap();
    checks::over_loopback(
        h,
        tamper,
        move |ctrl, h| server_on(&server_ctx, ctrl, h, NetArgs::default()).unwrap(),
        |ctrl, h| {
            client_on(
                &client_ctx,
                ctrl,
                h,
                &mut Progress::new(false),
                NetArgs::default(),
            )
            .unwrap()
        },
    )
}

/// [`run_with`] without loss, the server expecting the pattern of `seed` when given.
fn run_seeded(h: Hello, seed: Option<u64>) -> (Outcome, Report) {
    run_with(h, 0.0, move |h| h.verify_seed = seed.or(h.verify_seed))
}

#[test]
fn every_operation_moves_verified_bytes_over_the_mem_fabric() {
    for o in checks::every_operation_moves_verified_bytes(hello, run_seeded) {
        assert_eq!((o.transport, o.paths), ("rondo", 4));
    }
}

#[test]
fn a_receiver_expecting_other_bytes_does_not_verify() {
    checks::a_receiver_expecting_other_bytes_does_not_verify(hello, run_seeded);
}

#[test]
fn verification_holds_under_loss_and_retransmits_show() {
    let (o, _) = run(hello(Op::Write, 30_000, 60), 0.05);
    assert!(o.verified, "{o:?}");
    assert!(o.retx_packets > 0, "5% loss must cost retransmits: {o:?}");
}

#[test]
fn latency_mode_echoes_every_operation() {
    checks::latency_mode_echoes_every_operation(hello, run_seeded);
}
