//! Numbers `rondo reproduce` reads from a run's per-flow results, which the
//! report does not carry: the "likely reason" lines of Figs. 12 and 23 need
//! them. They go into the run's JSON under `per_flow` (the report keys are
//! untouched), so a figure reads them as dotted keys: `per_flow.size.10k_100k.p50`.

use rondo_sim::FlowResult;
use serde_json::{json, Map, Value};

/// Flow-size classes, bytes: [lower, upper), their key and their name in text.
pub(super) const SIZES: [(u64, u64, &str, &str); 4] = [
    (0, 10_000, "under_10k", "under 10 KB"),
    (10_000, 100_000, "10k_100k", "10-100 KB"),
    (100_000, 1_000_000, "100k_1m", "100 KB-1 MB"),
    (1_000_000, u64::MAX, "1m_up", "1 MB and more"),
];

/// The entry at `q` (0 to 1) of sorted `v`, as the report's percentiles take it.
fn quantile(v: &[f64], q: f64) -> f64 {
    v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
}

/// `per_flow` of the completed finite flows: per size class the count and the
/// p50 and p99 FCT (us); per number of logical paths the largest FCT (us).
pub(super) fn summary(flows: &[FlowResult]) -> Value {
    let done: Vec<(u64, u16, f64)> = flows
        .iter()
        .filter_map(|f| Some((f.bytes?, f.paths, f.fct()?.as_us_f64())))
        .collect();
    let mut size = Map::new();
    for (lo, hi, key, _) in SIZES {
        let mut v: Vec<f64> = done
            .iter()
            .filter(|(b, _, _)| (lo..hi).contains(b))
            .map(|d| d.2)
            .collect();
        if v.is_empty() {
            continue;
        }
        v.sort_by(f64::total_cmp);
        size.insert(
            key.to_owned(),
            json!({"flows": v.len(), "p50": quantile(&v, 0.5), "p99": quantile(&v, 0.99)}),
        );
    }
    let mut paths = Map::new();
    for &(_, p, fct) in &done {
        let e = paths.entry(p.to_string()).or_insert(json!(0.0));
        if fct > e.as_f64().unwrap_or(0.0) {
            *e = json!(fct);
        }
    }
    json!({"size": size, "max_fct_by_paths": paths})
}

#[cfg(test)]
mod tests {
    use super::*;
    use rondo_proto::Instant;

    fn flow(bytes: Option<u64>, paths: u16, fct_us: Option<u64>) -> FlowResult {
        FlowResult {
            src: 0,
            dst: 1,
            group: 0,
            bytes,
            paths,
            start: Instant::from_us(10),
            finish: fct_us.map(|f| Instant::from_us(10 + f)),
            stop: None,
            delivered: 0,
            delivered_in_window: 0,
            failed: false,
        }
    }

    #[test]
    fn classes_by_size_and_slowest_by_paths_over_completed_finite_flows() {
        let flows = [
            flow(Some(5_000), 16, Some(4)),
            flow(Some(6_000), 16, Some(8)),
            flow(Some(50_000), 4, Some(30)),
            flow(Some(2_000_000), 4, Some(200)),
            flow(Some(60_000), 4, None), // not completed
            flow(None, 16, None),        // long-lived
        ];
        let v = summary(&flows);
        let get = |k: &str| crate::reproduce::metric(&v, k);
        assert_eq!(get("size.under_10k.flows"), Some(2.0));
        assert_eq!(get("size.under_10k.p50"), Some(8.0));
        assert_eq!(get("size.10k_100k.p99"), Some(30.0));
        assert_eq!(get("size.100k_1m.flows"), None);
        assert_eq!(get("size.1m_up.p50"), Some(200.0));
        assert_eq!(get("max_fct_by_paths.4"), Some(200.0));
        assert_eq!(get("max_fct_by_paths.16"), Some(8.0));
    }
}
