//! CPU cost per work request over the in-process fabric (wall time of the
//! simulation, not the simulated rate).
//!
//! `cargo run --release -p rondo-verbs --example mem_cost -- [BYTES] [ITERS]`

mod common;

use common::{connected_pair, numeric_args, write_loop};
use rondo_verbs::*;

fn main() -> Result<(), VerbsError> {
    let args = numeric_args();
    let size = args.first().copied().unwrap_or(8);
    let iters = args.get(1).copied().unwrap_or(100_000);
    let depth = 64;
    let fabric = MemFabric::new(1, FabricConfig::uniform(4, 100.0, 2.0))?;
    let attr = QpInitAttr {
        mtu: 9000,
        max_send_wr: depth,
        ..QpInitAttr::default()
    };
    let open = |seed| {
        let attr = ContextAttr {
            seed,
            ..ContextAttr::default()
        };
        Context::open_mem(&fabric, attr)
    };
    let (a, b) = connected_pair(open, &attr, size)?;
    let start = std::time::Instant::now();
    let t0 = fabric.now();
    write_loop(&a, &b, size, iters, depth, false)?;
    let secs = start.elapsed().as_secs_f64();
    let sim = fabric.now().saturating_since(t0).as_secs_f64();
    println!(
        "{size} B x {iters}: {:.2} us CPU per request, {:.0} packets sent; simulated {:.3} Mmsg/s, {:.2} Gb/s",
        secs * 1e6 / iters as f64,
        a.qp.stats().data_packets_sent + b.qp.stats().data_packets_sent,
        iters as f64 / sim / 1e6,
        (size * iters) as f64 * 8.0 / sim / 1e9,
    );
    Ok(())
}
