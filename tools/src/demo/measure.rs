//! One demo run: a single long message over the simulator's two-host testbed, measured.

use anyhow::{bail, ensure, Context};
use rondo_proto::wire::DATA_HEADER_LEN;
use rondo_proto::{BufferConfig, Duration, Event, FlowConfig, Histogram, Instant};
use rondo_sim::pair::PathSpec;
use rondo_sim::Testbed;
use serde::Serialize;

/// What one run is asked to do.
pub struct Run<'a> {
    /// Seed of the network and of the flow's random choices.
    pub seed: u64,
    /// Host NIC rate, Gbit/s.
    pub host_gbps: f64,
    /// The parallel paths.
    pub paths: &'a [PathSpec],
    /// Packet scheduler on or off.
    pub scheduler: bool,
    /// Message length in bytes.
    pub bytes: u64,
    /// OOD and RBO samples before this time are discarded (0: keep all).
    pub warmup: Duration,
}

/// Average, 99th percentile and maximum of a distribution, in packets.
#[derive(Clone, Debug, Serialize)]
pub struct Dist {
    /// Mean.
    pub avg: f64,
    /// 99th percentile.
    pub p99: u64,
    /// Maximum.
    pub max: u64,
    /// Number of samples (one per data packet arrival after the warm-up).
    pub samples: u64,
}

impl From<&Histogram> for Dist {
    fn from(h: &Histogram) -> Dist {
        Dist {
            avg: h.mean(),
            p99: h.quantile(0.99),
            max: h.max(),
            samples: h.count(),
        }
    }
}

/// The result of one run. Field names are the keys of `rondo demo --json`.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    /// Scenario name.
    pub scenario: String,
    /// Packet scheduler on or off.
    pub scheduler: bool,
    /// From posting the message to its in-order delivery at the receiver, in us.
    pub transfer_us: f64,
    /// Payload delivered in order / transfer time, Gbit/s.
    pub goodput_gbps: f64,
    /// Unique data packets arriving at the receiver, engine headers included
    /// (probes and duplicate copies excluded) / transfer time, Gbit/s.
    pub throughput_gbps: f64,
    /// Throughput / ideal (min of host rate and sum of path rates).
    pub utilization: f64,
    /// Unique data packets of the message.
    pub data_packets: u64,
    /// OOD at each data arrival after the warm-up, in packets.
    pub ood: Dist,
    /// RBO (packets held out of order) at each data arrival after the warm-up.
    pub rbo: Dist,
    /// Data packets sent again.
    pub retransmissions: u64,
    /// Retransmissions whose original copy arrived after all.
    pub spurious_retransmissions: u64,
    /// When the sender switched the packet scheduler on (us), if it did.
    pub scheduler_enabled_us: Option<f64>,
}

/// Runs one transfer to completion and measures it.
pub fn measure(scenario: &str, run: &Run<'_>) -> anyhow::Result<Measurement> {
    let cfg = FlowConfig {
        scheduler: run.scheduler,
        seed: run.seed,
        ..FlowConfig::default()
    };
    let mut tb = Testbed::new(
        run.seed,
        run.host_gbps,
        run.paths,
        &cfg,
        BufferConfig::default(),
    )
    .context("building the two-host testbed")?;
    let len = usize::try_from(run.bytes).context("--bytes does not fit in memory")?;
    let message: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    tb.post(1, message).context("posting the message")?;

    let ideal_gbps = ideal_gbps(run.host_gbps, run.paths);
    let packets = run.bytes.div_ceil(cfg.payload_per_packet() as u64);
    let wire_bits = (run.bytes + packets * DATA_HEADER_LEN as u64) * 8;
    // Fifty times the ideal transfer time, plus 100 ms for start-up and recovery.
    let deadline = Instant::ZERO
        + Duration::from_us_f64(wire_bits as f64 / ideal_gbps / 1e3 * 50.0)
        + Duration::from_ms(100);

    let delivered = |tb: &Testbed| tb.received().next().is_some();
    if run.warmup > Duration::ZERO && !tb.run_until(Instant::ZERO + run.warmup, delivered) {
        // `host_mut` re-polls the host: call it once, at the end of the warm-up.
        let (b, conn_b) = (tb.pair.b, tb.conn_b);
        tb.pair
            .net
            .host_mut(b)
            .connection_mut(conn_b)
            .clear_distributions();
    }
    if !tb.run_until(deadline, delivered) {
        let failed = tb.sender().is_failed();
        bail!(
            "the transfer did not finish within {:.1} ms of simulated time \
             ({} of {} bytes delivered{})",
            deadline.saturating_since(Instant::ZERO).as_us_f64() / 1e3,
            tb.receiver().receiver_stats().bytes_delivered,
            run.bytes,
            if failed {
                "; the connection failed"
            } else {
                ""
            },
        );
    }
    let done_at = tb
        .events_b
        .iter()
        .find_map(|(at, e)| matches!(e, Event::Received { .. }).then_some(*at))
        .context("no delivery event")?;
    let got = tb.received().next().map(|(_, data)| data);
    ensure!(
        got.is_some_and(
            |d| d.len() == len && d.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8)
        ),
        "the message arrived corrupted"
    );
    ensure!(
        run.warmup < done_at.saturating_since(Instant::ZERO),
        "the transfer finished at {:.1} us, before the end of the {:.1} us warm-up: \
         lower --warmup-us or raise --bytes",
        done_at.saturating_since(Instant::ZERO).as_us_f64(),
        run.warmup.as_us_f64()
    );

    let secs = done_at.saturating_since(Instant::ZERO).as_secs_f64();
    let sender = tb.sender();
    let rx = tb.receiver().receiver_stats();
    let tx = sender.sender_stats();
    let throughput_gbps = wire_bits as f64 / secs / 1e9;
    Ok(Measurement {
        scenario: scenario.to_owned(),
        scheduler: run.scheduler,
        transfer_us: secs * 1e6,
        goodput_gbps: rx.bytes_delivered as f64 * 8.0 / secs / 1e9,
        throughput_gbps,
        utilization: throughput_gbps / ideal_gbps,
        data_packets: packets,
        ood: Dist::from(&rx.ood),
        rbo: Dist::from(&rx.rbo),
        retransmissions: tx.retransmissions,
        spurious_retransmissions: tx.spurious_retransmissions,
        scheduler_enabled_us: sender
            .scheduler_enabled_at()
            .map(|t| t.saturating_since(Instant::ZERO).as_us_f64()),
    })
}

/// The best aggregate two hosts can reach over parallel paths: min(host rate, sum of
/// path rates), in Gbit/s (DESIGN.md, Metrics).
pub fn ideal_gbps(host_gbps: f64, paths: &[PathSpec]) -> f64 {
    host_gbps.min(paths.iter().map(|p| p.gbps).sum())
}
