//! The engine-alone workload of `benches/engine.rs` ([`rondo_benches::EnginePair`])
//! for a fixed number of messages, without criterion: for instruction counts under
//! `valgrind --tool=callgrind` (exact where wall-clock samples are noisy) and
//! profiles. Prints the data packets sent, so that a count divides into a per-packet
//! figure; run it twice with different message counts and divide the difference
//! to leave the set-up out.
//!
//! Usage: `engine_packets [P (4)] [messages (200)]` (MTU 4096, 1 MiB messages)

use rondo_benches::EnginePair;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let paths: u16 = match args.first().map(|a| a.parse()) {
        None => 4,
        Some(Ok(p)) if p > 0 => p,
        Some(_) => {
            eprintln!("P: a number of paths, at least 1");
            std::process::exit(2);
        }
    };
    let messages: u64 = match args.get(1).map(|a| a.parse()) {
        None => 200,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("messages: a number");
            std::process::exit(2);
        }
    };
    let mut pair = EnginePair::new(paths, 4096, 1 << 20);
    pair.run_messages(messages);
    println!(
        "P={paths}: {messages} messages, {} data packets, {} retransmissions",
        pair.data_packets_sent(),
        pair.retransmissions()
    );
}
