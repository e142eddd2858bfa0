//! Flow-size distributions: piecewise-linear CDFs of (bytes, cumulative percent).

use rondo_proto::rng::Rng;
use thiserror::Error;

/// WebSearch (from the DCTCP paper): (bytes, cumulative percent).
pub const WEB_SEARCH: [(f64, f64); 12] = [
    (0.0, 0.0),
    (10_000.0, 15.0),
    (20_000.0, 20.0),
    (30_000.0, 30.0),
    (50_000.0, 40.0),
    (80_000.0, 53.0),
    (200_000.0, 60.0),
    (1_000_000.0, 70.0),
    (2_000_000.0, 80.0),
    (5_000_000.0, 90.0),
    (10_000_000.0, 97.0),
    (30_000_000.0, 100.0),
];

/// Facebook Hadoop: (bytes, cumulative percent). The paper's Cache Follower trace is
/// not public; Hadoop is the closest public one, and reports call it Hadoop.
pub const HADOOP: [(f64, f64); 20] = [
    (0.0, 0.0),
    (100.0, 1.0),
    (200.0, 2.0),
    (300.0, 5.0),
    (350.0, 15.0),
    (400.0, 20.0),
    (500.0, 30.0),
    (600.0, 40.0),
    (700.0, 50.0),
    (1_000.0, 60.0),
    (2_000.0, 67.0),
    (7_000.0, 70.0),
    (30_000.0, 72.0),
    (50_000.0, 82.0),
    (80_000.0, 87.0),
    (120_000.0, 90.0),
    (300_000.0, 95.0),
    (1_000_000.0, 97.5),
    (2_000_000.0, 99.0),
    (10_000_000.0, 100.0),
];

/// A CDF that cannot be sampled.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum CdfError {
    /// Fewer than two points.
    #[error("a CDF needs at least two [bytes, percent] points")]
    TooFewPoints,
    /// Sizes or percents go down, or a value is not finite or negative.
    #[error(
        "point {index} ({bytes}, {percent}) breaks the order: sizes and percents must be \
         finite, at least 0 and never decrease"
    )]
    NotMonotone {
        /// Index of the offending point.
        index: usize,
        /// Its size.
        bytes: f64,
        /// Its cumulative percent.
        percent: f64,
    },
    /// The last point is not at 100 percent.
    #[error("the last point is at {0} percent; it must be at 100")]
    NotComplete(f64),
}

/// A flow-size distribution, sampled by inverse transform with linear interpolation
/// between points.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSizeCdf {
    /// (bytes, cumulative fraction in 0..=1).
    points: Vec<(f64, f64)>,
}

impl FlowSizeCdf {
    /// A CDF from (bytes, cumulative percent) points.
    pub fn new(points: &[(f64, f64)]) -> Result<FlowSizeCdf, CdfError> {
        if points.len() < 2 {
            return Err(CdfError::TooFewPoints);
        }
        let mut prev = (0.0, 0.0);
        for (index, &(bytes, percent)) in points.iter().enumerate() {
            let ok = bytes.is_finite()
                && percent.is_finite()
                && bytes >= prev.0
                && percent >= prev.1
                && percent <= 100.0;
            if !ok {
                return Err(CdfError::NotMonotone {
                    index,
                    bytes,
                    percent,
                });
            }
            prev = (bytes, percent);
        }
        if (prev.1 - 100.0).abs() > 1e-9 {
            return Err(CdfError::NotComplete(prev.1));
        }
        Ok(FlowSizeCdf {
            points: points.iter().map(|&(b, p)| (b, p / 100.0)).collect(),
        })
    }

    /// WebSearch.
    pub fn web_search() -> FlowSizeCdf {
        FlowSizeCdf::new(&WEB_SEARCH).expect("the WebSearch table is a valid CDF")
    }

    /// Facebook Hadoop.
    pub fn hadoop() -> FlowSizeCdf {
        FlowSizeCdf::new(&HADOOP).expect("the Hadoop table is a valid CDF")
    }

    /// Mean flow size in bytes of the interpolated distribution.
    pub fn mean(&self) -> f64 {
        let mut first = self.points[0];
        // Mass at or below the first point sits at its size.
        let mut sum = first.0 * first.1;
        for &p in &self.points[1..] {
            sum += (p.1 - first.1) * (p.0 + first.0) / 2.0;
            first = p;
        }
        sum
    }

    /// One flow size in bytes (at least 1).
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.gen_f64();
        let mut prev = self.points[0];
        if u <= prev.1 {
            return (prev.0.round() as u64).max(1);
        }
        for &p in &self.points[1..] {
            if u <= p.1 {
                let span = p.1 - prev.1;
                let bytes = if span > 0.0 {
                    prev.0 + (p.0 - prev.0) * (u - prev.1) / span
                } else {
                    p.0
                };
                return (bytes.round() as u64).max(1);
            }
            prev = p;
        }
        (prev.0.round() as u64).max(1)
    }
}
