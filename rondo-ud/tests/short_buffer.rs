//! A transmit buffer shorter than the flow's `mtu`: nothing is written, nothing is
//! lost, the refusal is counted, and a driver can refuse such buffers up front.

use rondo_proto::{
    check_transmit_buffer, BufferConfig, ByReference, Endpoint, Event, FlowConfig, Host, Instant,
    SharedBuffer, MAX_MTU,
};

fn endpoint(local: u32, remote: u32) -> (Endpoint, rondo_proto::ConnectionHandle) {
    let cfg = FlowConfig {
        pacing: false,
        ..FlowConfig::default()
    };
    let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
    let h = ep.connect(Instant::ZERO, local, remote, &cfg).unwrap();
    (ep, h)
}

#[test]
fn a_short_buffer_sends_nothing_loses_nothing_and_is_counted() {
    let mtu = FlowConfig::default().mtu;
    let (mut a, ha) = endpoint(1, 2);
    let (mut b, hb) = endpoint(2, 1);
    let now = Instant::from_us(1);
    let msg = vec![0x5a; 100];
    a.post(ha, now, 3, msg.clone()).unwrap();

    let mut short = vec![0u8; mtu - 1];
    assert_eq!(a.poll_transmit(now, &mut short), None);
    assert_eq!(a.poll_transmit(now, &mut ByReference(&mut short)), None);
    let stats = a.connection(ha).sender_stats();
    assert_eq!(stats.short_buffers, 2);
    assert_eq!(stats.data_packets_sent, 0, "nothing was half sent");

    // Offered `mtu` bytes, the same packet goes and the message arrives whole.
    let mut buf = vec![0u8; mtu];
    let t = a
        .poll_transmit(now, &mut buf)
        .expect("the packet is still queued");
    b.receive(now, t.path, &buf[..t.len], false).unwrap();
    assert_eq!(
        b.poll_event(hb),
        Some(Event::Received {
            msg_id: 3,
            data: msg
        })
    );
    assert_eq!(a.connection(ha).sender_stats().short_buffers, 2);
}

#[test]
fn drivers_check_their_buffers_against_the_mtu() {
    assert_eq!(check_transmit_buffer(1500, 1500), Ok(()));
    assert_eq!(check_transmit_buffer(MAX_MTU, MAX_MTU), Ok(()));
    let e = check_transmit_buffer(1024, 1500).unwrap_err();
    assert_eq!((e.buf, e.mtu), (1024, 1500));
    let text = e.to_string();
    assert!(
        text.contains("1024") && text.contains("1500") && text.contains("FlowConfig::mtu"),
        "{text}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn the_udp_datapath_refuses_a_flow_larger_than_its_datagrams() {
    use rondo_ud::udp::{UdpConfig, UdpDatapath};
    let flow_config = |paths| rondo_ud::HostProfile::HOST_STACK.flow_config(paths);
    let udp = UdpConfig {
        max_datagram: 1000,
        ..udp_loopback()
    };
    let dp = UdpDatapath::bind(udp).unwrap();
    let big = flow_config(1);
    let e = dp.check_flow(&big).unwrap_err();
    assert_eq!((e.buf, e.mtu), (1000, big.mtu));
    let fits = FlowConfig {
        mtu: 1000,
        ..flow_config(1)
    };
    assert_eq!(dp.check_flow(&fits), Ok(()));
    // The defaults go together.
    let dp = UdpDatapath::bind(udp_loopback()).unwrap();
    assert_eq!(dp.check_flow(&flow_config(1)), Ok(()));
}

#[cfg(target_os = "linux")]
fn udp_loopback() -> rondo_ud::udp::UdpConfig {
    rondo_ud::udp::UdpConfig {
        local_ip: "127.0.0.1".parse().unwrap(),
        base_port: 0,
        paths: 1,
        ..rondo_ud::udp::UdpConfig::default()
    }
}

#[cfg(feature = "verbs")]
#[test]
fn the_verbs_error_names_the_sizes() {
    let e = rondo_ud::verbs::VerbsError::from(check_transmit_buffer(1024, 1500).unwrap_err());
    let text = e.to_string();
    assert!(text.contains("1024") && text.contains("1500"), "{text}");
}
