//! Capacity probing fills the host's line rate, not a line rate per connection
//! (paper §4.2.2: probes fill transmission opportunities "up to the host line
//! rate"). One endpoint, many connections probing at start-up and no ACK back:
//! what the endpoint emits stays within one line's worth.

use rondo_proto::{
    BufferConfig, Duration, Endpoint, FlowConfig, Host, Instant, Priority, SharedBuffer,
};

/// Bytes the endpoint emits in `span`, polled every 10 ns as a NIC would, and
/// how many of them were probes.
fn emitted(connections: u32, span: Duration) -> (u64, u64) {
    let cfg = FlowConfig::default();
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    for i in 0..connections {
        let h = ep
            .connect(Instant::ZERO, 2 * i + 1, 2 * i + 2, &cfg)
            .unwrap();
        ep.post(h, Instant::ZERO, 1, vec![7; 1 << 20]).unwrap();
    }
    let mut buf = vec![0u8; cfg.mtu];
    let (mut bytes, mut probes) = (0, 0);
    let end = Instant::ZERO + span;
    let mut now = Instant::ZERO;
    while now < end {
        ep.handle_timeout(now);
        while let Some(t) = ep.poll_transmit(now, &mut buf) {
            bytes += t.datagram_len() as u64;
            probes += u64::from(t.priority == Priority::Probe);
        }
        now += Duration::from_ns(10);
    }
    (bytes, probes)
}

#[test]
fn many_probing_connections_share_one_line() {
    let span = Duration::from_us(50);
    let line = FlowConfig::default().line_rate_bps as f64 * span.as_us_f64() / 8e6;
    let (one, one_probes) = emitted(1, span);
    let (many, many_probes) = emitted(64, span);
    // One connection probes the idle line full (its window holds little data).
    assert!(one_probes > 0, "a lone connection probes");
    assert!(
        one as f64 >= 0.9 * line && one as f64 <= 1.05 * line,
        "one connection: {one} bytes of a line's {line:.0}"
    );
    // 64 of them share it: before one clock per endpoint, each filled a line of
    // its own (64 x the host's rate, dropped at the NIC).
    assert!(
        many as f64 <= 1.05 * line,
        "64 connections: {many} bytes of a line's {line:.0} ({many_probes} probes)"
    );
    assert!(many_probes > 0);
}
