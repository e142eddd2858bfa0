//! Heap bytes per connection, from a counting global allocator (issue 10: a NIC
//! holds thousands of QPs, so must an endpoint): an idle connection (its sender
//! is built at the first post), one with its sender built, one with a 16 KB
//! message in flight, and what closing gives back.
//!
//! One test function only: the allocator counts every thread of this binary.

use rondo_proto::{BufferConfig, Endpoint, FlowConfig, Host, Instant, SharedBuffer};
#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::live_bytes as live;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

/// Connections per measurement: enough that per-endpoint tables amortise.
const N: u32 = 2000;
/// Logical paths per connection, as between pods of the paper's 320-host Clos.
const PATHS: u16 = 16;
/// The message of a sending connection.
const MESSAGE: usize = 16 * 1024;
/// The budget of an idle connection (issue 10).
const IDLE_BUDGET: isize = 16 * 1024;

fn endpoint() -> Endpoint {
    Endpoint::new(
        SharedBuffer::in_heap(BufferConfig {
            capacity_bytes: 64 * 1024,
            slot_size: 1500,
            ..BufferConfig::default()
        })
        .unwrap(),
    )
}

#[test]
fn bytes_per_connection_idle_sending_and_closed() {
    let cfg = FlowConfig {
        paths: PATHS,
        ..FlowConfig::default()
    };
    let now = Instant::from_us(1);
    let mut a = endpoint();
    let mut b = endpoint();

    let before = live();
    let mut handles = Vec::new();
    for f in 0..N {
        let ha = a.connect(now, 2 * f, 2 * f + 1, &cfg).unwrap();
        let hb = b.connect(now, 2 * f + 1, 2 * f, &cfg).unwrap();
        handles.push((ha, hb));
    }
    let idle = (live() - before) / (2 * N as isize);

    // Every connection of `a` posts 16 KB (building its sender) and sends what
    // its windows allow; `b` receives it and queues its ACKs.
    let made = live();
    let bodies: Vec<Vec<u8>> = (0..N).map(|_| vec![7u8; MESSAGE]).collect();
    let messages = (live() - made) / N as isize;
    let posted = live();
    for (f, (&(ha, _), body)) in handles.iter().zip(bodies).enumerate() {
        a.post(ha, now, f as u64, body).unwrap();
    }
    // An idle connection with its sender built (the message not counted).
    let built = idle + (live() - posted) / N as isize;
    // Sender side: everything `a` sends now (the datagrams are kept outside the
    // count); receiver side: `b` takes them in and queues its ACKs.
    let mut datagrams = Vec::with_capacity(64 * N as usize);
    let mut buf = vec![0u8; 2048];
    let start = live();
    // The first 20 us of sending: as much as the windows and the pacer let go
    // before the first ACK could be back.
    for us in 0..20 {
        let t_now = now + rondo_proto::Duration::from_us(us);
        a.handle_timeout(t_now);
        while datagrams.len() < datagrams.capacity() {
            let Some(t) = a.poll_transmit(t_now, &mut buf) else {
                break;
            };
            datagrams.push((t.path, buf[..t.len].to_vec()));
        }
    }
    let copies: isize = datagrams.iter().map(|(_, d)| d.len() as isize).sum();
    let sender = built + (live() - start - copies) / N as isize;
    assert!(
        datagrams.len() >= N as usize,
        "every connection sent something ({})",
        datagrams.len()
    );
    let start = live();
    let arrival = now + rondo_proto::Duration::from_us(20);
    for (path, d) in &datagrams {
        b.handle_datagram(arrival, *path, d, false);
    }
    let receiver = idle + (live() - start) / N as isize;

    eprintln!(
        "bytes per connection ({PATHS} paths): idle {idle}, with its sender built {built}; \
         sending a {MESSAGE}-byte message ({} datagrams per flow in flight, the message \
         itself not counted): sender {sender}, receiver {receiver}; the message {messages}",
        datagrams.len() / N as usize
    );
    // Closing gives the state back: what stays is a tombstone per connection.
    drop(datagrams);
    // `b` sends its ACKs (a tombstone would keep answers not yet sent).
    let ack_at = arrival + rondo_proto::Duration::from_us(1);
    while let Some(t) = b.poll_transmit(ack_at, &mut buf) {
        a.handle_datagram(ack_at, t.path, &buf[..t.len], false);
    }
    for &(ha, hb) in &handles {
        a.close(ha).expect("open");
        b.close(hb).expect("open");
    }
    let left = (live() - before) / (2 * N as isize);
    eprintln!("after close: {left} bytes per connection left (tombstone, tables)");
    assert!(
        left < 512,
        "a closed connection keeps {left} bytes; an idle one takes {idle}"
    );
    assert!(
        idle < IDLE_BUDGET && built < IDLE_BUDGET,
        "an idle connection takes {idle} bytes, {built} with its sender; the budget is \
         {IDLE_BUDGET}"
    );
    assert!(
        sender > idle,
        "the sender keeps per-packet state while sending"
    );
}
