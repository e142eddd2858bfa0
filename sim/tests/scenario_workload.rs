//! Workload generators: seeded, and shaped as their names say.

use rondo_proto::rng::Rng;
use rondo_proto::Duration;
use rondo_sim::scenario::workload::{
    all_to_all_sizes, derangement, generate, incast_senders, Context, FlowPlan,
};
use rondo_sim::scenario::{parse, FlowSizeCdf, Override, WorkloadSpec, HADOOP, WEB_SEARCH};

fn ctx(hosts: usize) -> Context {
    Context {
        hosts,
        seed: 7,
        host_bps: 100e9,
        duration: Duration::from_us(2000),
    }
}

fn workloads(toml_workload: &str, sets: &[&str]) -> Vec<WorkloadSpec> {
    let text =
        format!("duration_us = 2000\n[topology]\nkind = \"fattree\"\nk = 8\n{toml_workload}");
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let s = parse("w.toml", &text, &sets).unwrap_or_else(|e| panic!("{e}"));
    s.check("w.toml").unwrap_or_else(|e| panic!("{e}"));
    s.workload.0
}

/// Mean of the piecewise-linear CDF, computed independently from the table.
fn table_mean(points: &[(f64, f64)]) -> f64 {
    points
        .windows(2)
        .map(|w| (w[1].1 - w[0].1) / 100.0 * (w[0].0 + w[1].0) / 2.0)
        .sum()
}

#[test]
fn cdf_samples_have_the_table_mean() {
    for (name, cdf, table) in [
        ("websearch", FlowSizeCdf::web_search(), &WEB_SEARCH[..]),
        ("hadoop", FlowSizeCdf::hadoop(), &HADOOP[..]),
    ] {
        let expected = table_mean(table);
        assert!((cdf.mean() - expected).abs() < 1e-6 * expected, "{name}");
        let mut rng = Rng::new(3);
        let n = 200_000;
        let sum: f64 = (0..n).map(|_| cdf.sample(&mut rng) as f64).sum();
        let mean = sum / n as f64;
        // Heavy tails: 200k samples put the standard error under 1% for both tables.
        assert!(
            (mean / expected - 1.0).abs() < 0.03,
            "{name}: sample mean {mean:.0} vs table mean {expected:.0}"
        );
    }
}

#[test]
fn cdf_samples_follow_the_percentiles() {
    let cdf = FlowSizeCdf::hadoop();
    let mut rng = Rng::new(11);
    let n = 100_000;
    let mut v: Vec<u64> = (0..n).map(|_| cdf.sample(&mut rng)).collect();
    v.sort_unstable();
    // Hadoop: 50% of flows are at most 700 bytes, 90% at most 120 KB.
    let median = v[n / 2];
    let p90 = v[n * 9 / 10];
    assert!((650..=750).contains(&median), "median {median}");
    assert!((110_000..=130_000).contains(&p90), "p90 {p90}");
    assert!(v.iter().all(|&b| (1..=10_000_000).contains(&b)));
}

#[test]
fn invalid_cdfs_are_refused() {
    assert!(FlowSizeCdf::new(&[(0.0, 0.0)]).is_err());
    assert!(FlowSizeCdf::new(&[(0.0, 0.0), (10.0, 50.0), (5.0, 100.0)]).is_err());
    assert!(FlowSizeCdf::new(&[(0.0, 0.0), (10.0, 50.0)]).is_err());
    assert!(FlowSizeCdf::new(&[(0.0, 0.0), (f64::NAN, 100.0)]).is_err());
}

#[test]
fn permutations_are_seeded_derangements() {
    for n in [2, 3, 10, 320] {
        for seed in 0..20 {
            let p = derangement(n, &mut Rng::new(seed));
            let mut sorted = p.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "a permutation");
            assert!(p.iter().enumerate().all(|(i, &d)| i != d), "no fixed point");
        }
    }
    let a = derangement(320, &mut Rng::new(1));
    assert_eq!(
        a,
        derangement(320, &mut Rng::new(1)),
        "same seed, same permutation"
    );
    assert_ne!(
        a,
        derangement(320, &mut Rng::new(2)),
        "another seed, another one"
    );
}

#[test]
fn the_permutation_workload_gives_every_host_one_flow_out_and_in() {
    let w = workloads("[workload]\nkind = \"permutation\"\nbytes = 2000000\n", &[]);
    let flows = generate(&w, &ctx(128));
    assert_eq!(flows.len(), 128);
    let mut ins = vec![0; 128];
    for (i, f) in flows.iter().enumerate() {
        assert_eq!(f.src, i);
        assert_ne!(f.src, f.dst);
        assert_eq!(f.bytes, Some(2_000_000));
        ins[f.dst] += 1;
    }
    assert!(ins.iter().all(|&n| n == 1));
}

#[test]
fn incast_senders_skip_the_receiver_and_wrap() {
    let w = workloads(
        "[workload]\nkind = \"incast\"\nreceiver = 5\nfirst_sender = 3\nsenders = 4\n",
        &[],
    );
    let flows = generate(&w, &ctx(128));
    let src: Vec<usize> = flows.iter().map(|f| f.src).collect();
    assert_eq!(src, [3, 4, 6, 7]);
    assert!(flows.iter().all(|f| f.dst == 5 && f.bytes.is_none()));
    let WorkloadSpec::Incast(spec) = &w[0] else {
        panic!()
    };
    let mut wrap = spec.clone();
    wrap.first_sender = 126;
    assert_eq!(incast_senders(&wrap, 128), [126, 127, 0, 1]);
}

#[test]
fn several_workload_tables_join_and_leave() {
    let w = workloads(
        "[[workload]]\nkind = \"incast\"\nsenders = 8\nfirst_sender = 16\n\
         [[workload]]\nkind = \"incast\"\nsenders = 32\nfirst_sender = 24\n\
         start_us = 500\nstop_us = 1000\n",
        &[],
    );
    let flows = generate(&w, &ctx(128));
    assert_eq!(flows.len(), 40);
    let late: Vec<&FlowPlan> = flows.iter().filter(|f| f.group == 1).collect();
    assert_eq!(late.len(), 32);
    assert!(late
        .iter()
        .all(|f| f.start == Duration::from_us(500) && f.stop == Some(Duration::from_us(1000))));
    let mut senders: Vec<usize> = flows.iter().map(|f| f.src).collect();
    senders.sort_unstable();
    senders.dedup();
    assert_eq!(senders.len(), 40, "every flow has its own sender");
}

#[test]
fn moe_all_to_all_is_skewed_but_keeps_the_mean() {
    let sizes = all_to_all_sizes(100_000, 16, 1.0, &mut Rng::new(5));
    let mean = sizes.iter().sum::<u64>() as f64 / 16.0;
    assert!((mean - 100_000.0).abs() < 16.0, "mean {mean}");
    let max = *sizes.iter().max().unwrap() as f64;
    let min = *sizes.iter().min().unwrap() as f64;
    assert!(
        (max / min - 16.0).abs() < 0.01,
        "Zipf(1) over 16 ranks: {max}/{min}"
    );
    let flat = all_to_all_sizes(100_000, 16, 0.0, &mut Rng::new(5));
    assert!(flat.iter().all(|&b| b == 100_000));

    let w = workloads(
        "[workload]\nkind = \"all_to_all\"\nbytes = 50000\ngroup_size = 8\nskew = 1.2\n",
        &[],
    );
    let flows = generate(&w, &ctx(128));
    assert_eq!(
        flows.len(),
        16 * 8 * 7,
        "16 groups of 8, each host to 7 others"
    );
    for f in &flows {
        assert_eq!(f.src / 8, f.dst / 8, "flows stay within a group");
        assert_ne!(f.src, f.dst);
    }
    // Within a group every sender sends the same size to a given expert.
    let to = |dst: usize| -> Vec<u64> {
        flows
            .iter()
            .filter(|f| f.dst == dst)
            .map(|f| f.bytes.unwrap())
            .collect()
    };
    let a = to(3);
    assert_eq!(a.len(), 7);
    assert!(a.iter().all(|&b| b == a[0]));
}

#[test]
fn poisson_arrivals_offer_the_requested_load() {
    for (cdf, load) in [("websearch", 0.5), ("hadoop", 0.3)] {
        let w = workloads(
            &format!("[workload]\nkind = \"poisson\"\ncdf = \"{cdf}\"\nload = {load}\n"),
            &[],
        );
        let c = Context {
            duration: Duration::from_us(100_000),
            ..ctx(128)
        };
        let flows = generate(&w, &c);
        let bytes: f64 = flows.iter().map(|f| f.bytes.unwrap() as f64).sum();
        let offered = bytes * 8.0 / (128.0 * 100e9 * 0.1);
        // Hadoop has many small flows (tight); WebSearch's 30 MB tail is looser.
        assert!(
            (offered / load - 1.0).abs() < 0.1,
            "{cdf}: offered load {offered:.3}, asked {load}"
        );
        assert!(flows.windows(2).all(|p| p[0].start <= p[1].start));
        assert!(flows.iter().all(|f| f.src != f.dst && f.start < c.duration));
        let again = generate(&w, &c);
        assert_eq!(flows, again, "seeded");
    }
    let w = workloads(
        "[workload]\nkind = \"poisson\"\nload = 0.5\nflows = 10\nhosts = 4\n",
        &[],
    );
    let flows = generate(&w, &ctx(128));
    assert_eq!(flows.len(), 10);
    assert!(flows.iter().all(|f| f.src < 4 && f.dst < 4));
}

#[test]
fn background_flows_use_one_path() {
    let w = workloads(
        "[[workload]]\nkind = \"long_flows\"\n[[workload]]\nkind = \"background\"\n\
         src = 2\ndst = 9\nflows = 2\n",
        &[],
    );
    let flows = generate(&w, &ctx(128));
    assert_eq!(flows.len(), 3);
    assert_eq!((flows[0].src, flows[0].dst, flows[0].paths), (0, 1, None));
    assert!(flows[1..]
        .iter()
        .all(|f| f.paths == Some(1) && f.src == 2 && f.dst == 9));
}

#[test]
fn all_to_all_with_random_receivers_crosses_pods_and_is_seeded() {
    // fattree k = 8: 128 hosts in 8 pods of 16.
    let w = workloads(
        "[workload]\nkind = \"all_to_all\"\nbytes = 1000\nreceivers = 4\n",
        &[],
    );
    let flows = generate(&w, &ctx(128));
    assert_eq!(flows.len(), 128 * 4);
    let mut cross_pod = 0;
    for src in 0..128 {
        let mut dsts: Vec<usize> = flows
            .iter()
            .filter(|f| f.src == src)
            .map(|f| f.dst)
            .collect();
        assert_eq!(dsts.len(), 4);
        assert!(dsts.iter().all(|&d| d != src));
        dsts.sort_unstable();
        dsts.dedup();
        assert_eq!(dsts.len(), 4, "distinct receivers");
        cross_pod += dsts.iter().filter(|&&d| d / 16 != src / 16).count();
    }
    // A uniformly drawn receiver lies outside the sender's pod with probability 112/127.
    assert!(
        cross_pod > 128 * 4 * 8 / 10,
        "{cross_pod} of 512 cross pods"
    );
    assert_eq!(generate(&w, &ctx(128)), flows, "same seed, same receivers");
    let mut other = ctx(128);
    other.seed = 8;
    assert_ne!(generate(&w, &other), flows);
    for bad in [
        "receivers = 0",
        "receivers = 128",
        "receivers = 2\ngroup_size = 8",
    ] {
        let text = format!(
            "duration_us = 10\n[topology]\nkind = \"fattree\"\nk = 8\n\
             [workload]\nkind = \"all_to_all\"\nbytes = 1000\n{bad}\n"
        );
        let s = parse("w.toml", &text, &[]).unwrap();
        let e = s.check("w.toml").unwrap_err().to_string();
        assert!(e.contains("receivers"), "{bad}: {e}");
    }
}
