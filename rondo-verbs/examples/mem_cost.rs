//! CPU cost per work request over the in-process fabric (wall time of the
//! simulation, not the simulated rate).
//!
//! `cargo run --release -p rondo-verbs --example mem_cost -- [BYTES] [ITERS]`

use rondo_verbs::*;

fn main() -> Result<(), VerbsError> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let size = args.first().copied().unwrap_or(8);
    let iters = args.get(1).copied().unwrap_or(100_000);
    let depth = 64;
    let fabric = MemFabric::new(1, FabricConfig::uniform(4, 100.0, 2.0))?;
    let attr = QpInitAttr {
        mtu: 9000,
        max_send_wr: depth,
        ..QpInitAttr::default()
    };
    let open = |seed| -> Result<_, VerbsError> {
        let ctx = Context::open_mem(
            &fabric,
            ContextAttr {
                seed,
                ..ContextAttr::default()
            },
        )?;
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(4 * depth)?;
        let qp = ctx.create_qp(&pd, &cq, &cq, attr.clone())?;
        let mr = pd.register(size.max(1), AccessFlags::ALL)?;
        Ok((ctx, cq, qp, mr))
    };
    let (_ca, cq, qa, ma) = open(1)?;
    let (_cb, _cqb, qb, mb) = open(2)?;
    qa.connect(&qb.endpoint())?;
    qb.connect(&qa.endpoint())?;
    let remote = RemoteAddr {
        addr: mb.addr(),
        rkey: mb.rkey(),
    };
    let wr = SendWr::write(0, vec![Sge::new(&ma, 0, size as u32)], remote);
    let start = std::time::Instant::now();
    let t0 = fabric.now();
    let (mut posted, mut done) = (0, 0);
    let mut wc = [WorkCompletion::default(); 64];
    while done < iters {
        while posted < iters && posted - done < depth {
            qa.post_send(&wr)?;
            posted += 1;
        }
        done += cq.poll(&mut wc)?;
    }
    let secs = start.elapsed().as_secs_f64();
    let sim = fabric.now().saturating_since(t0).as_secs_f64();
    let s = qa.stats();
    println!(
        "{size} B x {iters}: {:.2} us CPU per request, {:.0} packets sent; simulated {:.3} Mmsg/s, {:.2} Gb/s",
        secs * 1e6 / iters as f64,
        s.data_packets_sent + qb.stats().data_packets_sent,
        iters as f64 / sim / 1e6,
        (size * iters) as f64 * 8.0 / sim / 1e9,
    );
    Ok(())
}
