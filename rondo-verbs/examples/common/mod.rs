//! What the WRITE examples share: numeric arguments, two connected ends with a
//! region each, and a WRITE loop that keeps a fixed number of requests outstanding.

use rondo_verbs::*;

/// The command-line arguments, each a number, in order.
pub fn numeric_args() -> Vec<usize> {
    std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect()
}

/// One end of a WRITE run: a context, one CQ for sends and receives, a queue pair
/// and a region of the message size open to every access.
pub struct End {
    #[allow(dead_code, reason = "mem_cost only keeps it open")]
    pub ctx: Context,
    pub cq: CompletionQueue,
    pub qp: QueuePair,
    pub mr: MemoryRegion,
}

/// Two ends on contexts from `open_context` (given 1, then 2: a seed for the `mem`
/// backend), with `attr` queue pairs connected to each other and `size`-byte regions.
pub fn connected_pair(
    mut open_context: impl FnMut(u64) -> Result<Context, VerbsError>,
    attr: &QpInitAttr,
    size: usize,
) -> Result<(End, End), VerbsError> {
    let mut open = |seed| -> Result<End, VerbsError> {
        let ctx = open_context(seed)?;
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(4 * attr.max_send_wr)?;
        let qp = ctx.create_qp(&pd, &cq, &cq, attr.clone())?;
        let mr = pd.register(size.max(1), AccessFlags::ALL)?;
        Ok(End { ctx, cq, qp, mr })
    };
    let a = open(1)?;
    let b = open(2)?;
    a.qp.connect(&b.qp.endpoint())?;
    b.qp.connect(&a.qp.endpoint())?;
    Ok((a, b))
}

/// WRITEs the first `size` bytes of `a`'s region into `b`'s `iters` times, at most
/// `depth` outstanding, until every one has completed (successfully: anything else
/// panics). With `poll_b`, `b`'s CQ is polled after each poll of `a`'s: an end
/// without a progress thread moves only when polled.
pub fn write_loop(
    a: &End,
    b: &End,
    size: usize,
    iters: usize,
    depth: usize,
    poll_b: bool,
) -> Result<(), VerbsError> {
    let remote = RemoteAddr {
        addr: b.mr.addr(),
        rkey: b.mr.rkey(),
    };
    let wr = SendWr::write(0, vec![Sge::new(&a.mr, 0, size as u32)], remote);
    let (mut posted, mut done) = (0, 0);
    let mut wc = vec![WorkCompletion::default(); depth];
    while done < iters {
        while posted < iters && posted - done < depth {
            a.qp.post_send(&wr)?;
            posted += 1;
        }
        let n = a.cq.poll(&mut wc)?;
        for w in &wc[..n] {
            assert_eq!(w.status, WcStatus::Success, "{w:?}");
        }
        done += n;
        if poll_b {
            // B only serves WRITEs: its completions are not looked at.
            b.cq.poll(&mut wc)?;
        }
    }
    Ok(())
}
