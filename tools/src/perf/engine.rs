//! `rondo perf --engine KEY=VALUE`: engine settings of the run's queue pairs, applied
//! on both sides over the backend's host profile.

use anyhow::{bail, Context as _};
use rondo_proto::{Duration, FlowConfig, LossRecoveryKind, PathSelection};

/// The keys `--engine` takes, for messages.
pub const KEYS: &str = "scheduler, scheduler_ahead, intervals_run_on, probing, pacing, base_rtt_us, rto_min_us, early_recovery_threshold, q0, initial_window, target_queue_rtts, stall_allowance_us, path_selection, loss_recovery, ack_coalesce_packets, ack_coalesce_us";

/// `cfg` with every `KEY=VALUE` of `settings` applied (a flow of `paths` paths).
pub fn apply(mut cfg: FlowConfig, settings: &[String], paths: u16) -> anyhow::Result<FlowConfig> {
    for s in settings {
        let (key, value) = s
            .split_once('=')
            .with_context(|| format!("--engine {s:?}: write KEY=VALUE (keys: {KEYS})"))?;
        let (key, value) = (key.trim(), value.trim());
        let what = || format!("--engine {key}={value}");
        let flag = || -> anyhow::Result<bool> {
            value
                .parse()
                .with_context(|| format!("{}: give true or false", what()))
        };
        let number = || -> anyhow::Result<f64> {
            let v: f64 = value
                .parse()
                .with_context(|| format!("{}: give a number", what()))?;
            anyhow::ensure!(
                v.is_finite() && v >= 0.0,
                "{}: give a number of 0 or more",
                what()
            );
            Ok(v)
        };
        match key {
            "scheduler" => cfg.scheduler = flag()?,
            "scheduler_ahead" => cfg.scheduler_ahead = flag()?,
            "intervals_run_on" => cfg.intervals_run_on = flag()?,
            "probing" => cfg.probing = flag()?,
            "pacing" => cfg.pacing = flag()?,
            "base_rtt_us" => {
                let rtts = value
                    .split(',')
                    .map(|v| {
                        v.trim()
                            .parse::<f64>()
                            .ok()
                            .filter(|v| v.is_finite() && *v > 0.0 && *v <= 10e6)
                            .map(Duration::from_us_f64)
                    })
                    .collect::<Option<Vec<_>>>()
                    .with_context(|| {
                        format!("{}: give microseconds above 0, one or one per path", what())
                    })?;
                cfg.base_rtt = Some(match rtts.len() {
                    1 => vec![rtts[0]; usize::from(paths)],
                    n if n == usize::from(paths) => rtts,
                    n => bail!(
                        "{}: {n} values for {paths} paths: give one, or one per path",
                        what()
                    ),
                });
            }
            "rto_min_us" => cfg.rto_min = Duration::from_us_f64(number()?),
            "early_recovery_threshold" => {
                cfg.early_recovery_threshold = value
                    .parse()
                    .with_context(|| format!("{}: give a whole number of packets", what()))?
            }
            "q0" => cfg.q0 = number()?,
            "initial_window" => cfg.initial_window = number()?,
            "target_queue_rtts" => cfg.target_queue_rtts = number()?,
            "stall_allowance_us" => cfg.stall_allowance = Duration::from_us_f64(number()?),
            "ack_coalesce_packets" => {
                let mut a = cfg.ack_coalescing();
                a.packets = value
                    .parse()
                    .with_context(|| format!("{}: give a whole number of packets", what()))?;
                cfg.ack_coalesce = Some(a);
            }
            "ack_coalesce_us" => {
                let mut a = cfg.ack_coalescing();
                a.delay = Duration::from_us_f64(number()?);
                cfg.ack_coalesce = Some(a);
            }
            "loss_recovery" => {
                cfg.loss_recovery = match value {
                    "sr" => LossRecoveryKind::SelectiveRepeat,
                    "rack-flow" => LossRecoveryKind::RackFlow,
                    "rack-path" => LossRecoveryKind::RackPath,
                    _ => bail!("{}: give sr, rack-flow or rack-path", what()),
                }
            }
            "path_selection" => {
                cfg.path_selection = match value {
                    "deficit" => PathSelection::Deficit,
                    "random" => PathSelection::Random,
                    _ => bail!("{}: give deficit or random", what()),
                }
            }
            _ => bail!("--engine {key}: no such engine setting (keys: {KEYS})"),
        }
    }
    cfg.validate().map_err(|e| {
        anyhow::anyhow!("--engine settings give an engine configuration that does not work: {e}")
    })?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_apply_and_bad_ones_say_why() {
        let base = FlowConfig {
            paths: 4,
            ..FlowConfig::default()
        };
        let c = apply(
            base.clone(),
            &[
                "scheduler=false".into(),
                "scheduler_ahead=false".into(),
                "intervals_run_on=true".into(),
                "base_rtt_us=100,200,300,400".into(),
                "path_selection=random".into(),
                "ack_coalesce_packets=16".into(),
                "ack_coalesce_us=50".into(),
                "loss_recovery=rack-path".into(),
            ],
            4,
        )
        .unwrap();
        assert!(!c.scheduler && !c.scheduler_ahead && c.intervals_run_on);
        let acks = c.ack_coalesce.unwrap();
        assert_eq!((acks.packets, acks.delay), (16, Duration::from_us(50)));
        assert_eq!(c.base_rtt.unwrap()[3], Duration::from_us(400));
        assert_eq!(c.path_selection, PathSelection::Random);
        assert_eq!(c.loss_recovery, LossRecoveryKind::RackPath);
        for (bad, want) in [
            ("loss_recovery=gbn", "sr, rack-flow or rack-path"),
            ("nope=1", "no such engine setting"),
            ("scheduler=maybe", "true or false"),
            ("base_rtt_us=1,2", "2 values for 4 paths"),
            ("q0=-1", "0 or more"),
            ("q0", "KEY=VALUE"),
        ] {
            let e = apply(base.clone(), &[bad.into()], 4)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
