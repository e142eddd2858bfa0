//! WRITE bandwidth between two UDP contexts of this process over loopback.
//!
//! `cargo run --release -p rondo-verbs --example udp_write_bw -- [BYTES] [ITERS] [PATHS]`
//!
//! Environment: `RV_NO_THREAD=1` uses explicit progress (this thread polls both
//! CQs) instead of a progress thread per context; `RV_PACED=1` uses the engine's
//! default flow configuration (pacing and probing on) instead of
//! `QpInitAttr::udp`'s.

mod common;

use common::{connected_pair, numeric_args, write_loop};
use rondo_verbs::*;

fn main() -> Result<(), VerbsError> {
    let args = numeric_args();
    let size = args.first().copied().unwrap_or(65_536);
    let iters = args.get(1).copied().unwrap_or(2_000);
    let paths = args.get(2).copied().unwrap_or(4) as u16;
    let depth = 32;
    let threaded = std::env::var_os("RV_NO_THREAD").is_none();
    let udp = UdpAttr {
        udp: UdpConfig {
            paths,
            ..UdpAttr::default().udp
        },
        progress_thread: threaded,
        ..UdpAttr::default()
    };
    let mut attr = QpInitAttr {
        max_send_wr: depth,
        ..QpInitAttr::udp(paths)
    };
    if std::env::var_os("RV_PACED").is_some() {
        attr.flow = FlowConfig {
            rto_min: Duration::from_ms(5),
            retry_limit: 30,
            ..FlowConfig::default()
        };
    }
    let open = |_| Context::open_udp(ContextAttr::default(), udp.clone());
    let (a, b) = connected_pair(open, &attr, size)?;
    let start = std::time::Instant::now();
    write_loop(&a, &b, size, iters, depth, !threaded)?;
    let secs = start.elapsed().as_secs_f64();
    let s = a.qp.stats();
    println!(
        "{size} B x {iters}: {:.2} Gb/s, {:.3} Mmsg/s, retx {}, ood_max(b) {}, acks(b) {}, ctx a {:?} b {:?}",
        (size * iters) as f64 * 8.0 / secs / 1e9,
        iters as f64 / secs / 1e6,
        s.retx_packets,
        b.qp.stats().ood_max,
        b.qp.stats().acks_sent,
        a.ctx.stats(),
        b.ctx.stats(),
    );
    Ok(())
}
