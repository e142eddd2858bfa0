//! GRH flow label to RoCEv2 UDP source port, and the flow labels of a flow's paths.
//!
//! ConnectX derives the UDP source port of a RoCEv2 packet sent through an address
//! handle from the GRH flow label (a label of 0 gives a port of the NIC's choice):
//!
//! ```text
//! sport = ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)) | 0xC000
//! ```
//!
//! Rondo's path `p` of a datapath whose first source port is `base` (in
//! `0xC000..=0xFFFF`) uses source port `base + p`, wrapping within that range, and the
//! flow label that yields it ([`flow_label_for_port`]): a port `0xC000 | x` with
//! `x != 0` comes from label `x`, and port `0xC000` itself from label `0x4001`. Every
//! one of the 16384 ports of the range is therefore reachable, the P ports of P < 16384
//! paths are distinct, and a switch that steers on the UDP source port (`p4/`) sees
//! path `p` as `base + p`.

use thiserror::Error;

/// Lowest RoCEv2 UDP source port a ConnectX derives from a flow label.
pub const ROCE_SPORT_MIN: u16 = 0xC000;
/// Number of distinct source ports flow labels can give (`0xC000..=0xFFFF`).
pub const ROCE_SPORT_COUNT: u32 = 0x4000;
/// Largest valid flow label (20 bits).
pub const FLOW_LABEL_MAX: u32 = 0xF_FFFF;

/// A flow-label mapping that cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FlowLabelError {
    /// The base port is below the RoCEv2 range.
    #[error("base source port {0:#06x} is below 0xC000: ConnectX only derives ports 0xC000..=0xFFFF from flow labels")]
    PortOutOfRange(u16),
    /// More paths than distinct ports.
    #[error("{0} paths asked for, but flow labels give at most 16384 distinct source ports: use fewer paths")]
    TooManyPaths(usize),
}

/// The RoCEv2 UDP source port ConnectX derives from flow label `fl` (its low 20
/// bits); `None` for label 0, for which the NIC picks a port itself.
pub fn roce_source_port(fl: u32) -> Option<u16> {
    let fl = fl & FLOW_LABEL_MAX;
    if fl == 0 {
        return None;
    }
    let port = ((fl & 0x3FFF) ^ ((fl & 0xF_C000) >> 14)) | 0xC000;
    Some(port as u16) // at most 0xFFFF by construction
}

/// The smallest non-zero flow label whose source port is `port`.
pub fn flow_label_for_port(port: u16) -> Result<u32, FlowLabelError> {
    if port < ROCE_SPORT_MIN {
        return Err(FlowLabelError::PortOutOfRange(port));
    }
    let low = u32::from(port) & 0x3FFF;
    // Label `low` alone gives the port; for low bits 0, label 0x4001 does
    // (0x0001 ^ 0x1 = 0), since label 0 would leave the port to the NIC.
    Ok(if low == 0 { 0x4001 } else { low })
}

/// The flow label of each of `paths` paths, path 0 first, such that path `p` leaves
/// with source port `base + p` (wrapping within `0xC000..=0xFFFF`).
pub fn path_flow_labels(base: u16, paths: usize) -> Result<Vec<u32>, FlowLabelError> {
    if base < ROCE_SPORT_MIN {
        return Err(FlowLabelError::PortOutOfRange(base));
    }
    if paths > ROCE_SPORT_COUNT as usize {
        return Err(FlowLabelError::TooManyPaths(paths));
    }
    (0..paths)
        .map(|p| flow_label_for_port(path_source_port(base, p)))
        .collect()
}

/// The source port of path `p` when path 0 uses `base` (wrapping within the RoCEv2
/// range). `base` must be at least `0xC000`.
pub fn path_source_port(base: u16, p: usize) -> u16 {
    let off = (u32::from(base.max(ROCE_SPORT_MIN) - ROCE_SPORT_MIN) + p as u32) % ROCE_SPORT_COUNT;
    (u32::from(ROCE_SPORT_MIN) + off) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn formula_matches_known_values() {
        assert_eq!(roce_source_port(0), None, "label 0: the NIC chooses");
        assert_eq!(roce_source_port(1), Some(0xC001));
        assert_eq!(roce_source_port(0x3FFF), Some(0xFFFF));
        // High six bits fold into the low ones.
        assert_eq!(roce_source_port(0x4000), Some(0xC001));
        assert_eq!(roce_source_port(0x4001), Some(0xC000));
        assert_eq!(roce_source_port(0xF_C000 | 0x3F), Some(0xC000));
        assert_eq!(
            roce_source_port(0x1234 | (0x15 << 14)),
            Some((0x1234 ^ 0x15) | 0xC000)
        );
        // Bits above 20 are not part of the label.
        assert_eq!(roce_source_port(0x10_0001), Some(0xC001));
    }

    #[test]
    fn every_port_is_reachable_and_round_trips() {
        for port in ROCE_SPORT_MIN..=u16::MAX {
            let fl = flow_label_for_port(port).unwrap();
            assert!(fl != 0 && fl <= FLOW_LABEL_MAX);
            assert_eq!(roce_source_port(fl), Some(port), "port {port:#x}");
        }
        assert_eq!(
            flow_label_for_port(0xBFFF),
            Err(FlowLabelError::PortOutOfRange(0xBFFF))
        );
    }

    #[test]
    fn path_labels_give_distinct_consecutive_ports() {
        for (base, paths) in [(0xC000, 8), (0xC100, 64), (0xFFFC, 8), (0xC000, 16384)] {
            let labels = path_flow_labels(base, paths).unwrap();
            let ports: Vec<u16> = labels
                .iter()
                .map(|&fl| roce_source_port(fl).unwrap())
                .collect();
            let distinct: HashSet<_> = ports.iter().collect();
            assert_eq!(distinct.len(), paths, "base {base:#x}");
            for (p, &port) in ports.iter().enumerate() {
                assert_eq!(port, path_source_port(base, p));
            }
        }
        // Wrapping: the port after 0xFFFF is 0xC000.
        assert_eq!(path_source_port(0xFFFF, 1), 0xC000);
        assert_eq!(
            path_flow_labels(0xC000, 16385),
            Err(FlowLabelError::TooManyPaths(16385))
        );
        assert_eq!(
            path_flow_labels(4791, 2),
            Err(FlowLabelError::PortOutOfRange(4791))
        );
    }
}
