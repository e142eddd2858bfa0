//! WRITE bandwidth between two UDP contexts of this process over loopback.
//!
//! `cargo run --release -p rondo-verbs --example udp_write_bw -- [BYTES] [ITERS] [PATHS]`
//!
//! Environment: `RV_NO_THREAD=1` uses explicit progress (this thread polls both
//! CQs) instead of a progress thread per context; `RV_PACED=1` uses the engine's
//! default flow configuration (pacing and probing on) instead of
//! `QpInitAttr::udp`'s.

use rondo_verbs::*;

fn main() -> Result<(), VerbsError> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
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
    let open = || -> Result<_, VerbsError> {
        let ctx = Context::open_udp(ContextAttr::default(), udp.clone())?;
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(4 * depth)?;
        let qp = ctx.create_qp(&pd, &cq, &cq, attr.clone())?;
        let mr = pd.register(size.max(1), AccessFlags::ALL)?;
        Ok((ctx, cq, qp, mr))
    };
    let (ca, cq, qa, ma) = open()?;
    let (cb, cqb, qb, mb) = open()?;
    qa.connect(&qb.endpoint())?;
    qb.connect(&qa.endpoint())?;
    let remote = RemoteAddr {
        addr: mb.addr(),
        rkey: mb.rkey(),
    };
    let wr = SendWr::write(0, vec![Sge::new(&ma, 0, size as u32)], remote);
    let start = std::time::Instant::now();
    let (mut posted, mut done) = (0, 0);
    let mut wc = [WorkCompletion::default(); 32];
    while done < iters {
        while posted < iters && posted - done < depth {
            qa.post_send(&wr)?;
            posted += 1;
        }
        let n = cq.poll(&mut wc)?;
        for w in &wc[..n] {
            assert_eq!(w.status, WcStatus::Success, "{w:?}");
        }
        done += n;
        if !threaded {
            // B only serves WRITEs, but without a thread it moves only when polled.
            cqb.poll(&mut wc)?;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let s = qa.stats();
    println!(
        "{size} B x {iters}: {:.2} Gb/s, {:.3} Mmsg/s, retx {}, ood_max(b) {}, acks(b) {}, ctx a {:?} b {:?}",
        (size * iters) as f64 * 8.0 / secs / 1e9,
        iters as f64 / secs / 1e6,
        s.retx_packets,
        qb.stats().ood_max,
        qb.stats().acks_sent,
        ca.stats(),
        cb.stats(),
    );
    Ok(())
}
