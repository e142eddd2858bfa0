//! The in-place receive path: `wire::parse_split` agrees with `wire::parse` on the
//! same bytes, and an `Endpoint` with an in-place placement fed arbitrary headers
//! through `receive_in_place` (after writing arbitrary bytes at its target) never
//! panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rondo_proto::placement::BufferPlacement;
use rondo_proto::{wire, Endpoint, BufferConfig, SharedBuffer, FlowConfig, Instant};

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let split = usize::from(split).min(rest.len());
    let (header, payload) = rest.split_at(split);
    // parse_split(header, n) must agree with parse(header ++ payload).
    if let Ok(repr) = wire::parse_split(header, payload.len()) {
        let (whole, body) = wire::parse(rest).expect("split parse implies whole parse");
        assert_eq!(repr, whole);
        if matches!(repr.body, wire::Body::Data(_)) {
            assert_eq!(body, payload);
        }
    }
    let cfg = FlowConfig {
        token: Some(9),
        ..FlowConfig::default()
    };
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let h = ep.connect(Instant::ZERO, 1, 2, &cfg).unwrap();
    ep.set_placement(h, Box::new(BufferPlacement::default()));
    let now = Instant::from_us(1);
    let _ = ep.receive(now, 0, rest, false);
    if let Some((_, target)) = ep.expected_target(h) {
        let n = target.len().min(payload.len());
        target[..n].copy_from_slice(&payload[..n]);
        let _ = ep.receive_in_place(now, 0, header, n, false);
    }
    let _ = ep.receive_in_place(now, 0, header, payload.len(), false);
    while ep.poll_event(h).is_some() {}
});
