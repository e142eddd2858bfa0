//! Liveness of every transport under loss: a sender with a message outstanding
//! that has not failed always has a wake-up (`Connection::poll_timeout`), checked
//! after every step of the network. Without one nothing would ever move it: no
//! feedback comes for a flow with nothing in flight.

use rondo_proto::*;
use rondo_sim::pair::PathSpec;
use rondo_sim::Testbed;

/// Messages of 1 to 60 KB, one at a time, over four paths with `loss` and 3 us
/// of jitter; panics where the sender is left without a wake-up, and returns
/// the messages completed.
fn one_at_a_time(transport: Transport, seed: u64, loss: f64) -> usize {
    let paths: Vec<PathSpec> = (0..4)
        .map(|_| PathSpec {
            loss,
            jitter: Duration::from_us(3),
            ..PathSpec::new(25.0, 2.0)
        })
        .collect();
    let cfg = FlowConfig {
        transport,
        seed,
        ..FlowConfig::default()
    };
    let mut tb = Testbed::new(seed, 100.0, &paths, &cfg, BufferConfig::default()).unwrap();
    let mut rng = rng::Rng::new(seed);
    let messages = 40;
    for id in 0..messages {
        let len = 1_000 + rng.gen_range(0..60_000) as usize;
        tb.post(id, vec![id as u8; len]).unwrap();
        let done = tb.run_until(tb.now() + Duration::from_ms(2_000), |t| {
            let s = t.sender();
            assert!(
                s.outstanding_messages() == 0 || s.is_failed() || s.poll_timeout().is_some(),
                "{} seed {seed}: message {id} outstanding, no wake-up at {:?}: {:?}",
                transport.name(),
                t.now(),
                s.sender_stats()
            );
            t.send_completions() as u64 > id || s.is_failed()
        });
        if !done || tb.sender().is_failed() {
            return id as usize;
        }
    }
    messages as usize
}

/// Every transport, seeds 1-6, 10% loss: never without a wake-up. UET was (seed
/// 4 over the verbs layer): an acknowledged packet whose own ACK was lost left
/// its path's inflight at a timer that did not tell path selection the window
/// had room again.
#[test]
fn a_sender_with_a_message_outstanding_always_has_a_wake_up() {
    for transport in Transport::all() {
        let completed: usize = (1..=6)
            .map(|seed| one_at_a_time(transport, seed, 0.1))
            .sum();
        assert_eq!(
            completed,
            6 * 40,
            "{} completed {completed}",
            transport.name()
        );
    }
}
