//! The address handles of a peer: one per path and per priority class, as plain
//! data for the FFI layer.
//!
//! Path `p` of a peer gets the flow label of [`path_flow_labels`] (so its RoCEv2
//! UDP source port is `base_sport + p`); each priority class gets its traffic
//! class (DSCP << 2, ECN bits left to the NIC) and service level. AH `i` is path
//! `i / 3`, priority `i % 3` ([`ah_index`]).

use super::exchange::EndpointInfo;
use super::flow_label::{path_flow_labels, FlowLabelError};
use rondo_proto::transmit::Priority;

/// Addressing parameters of the local port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressConfig {
    /// Physical port, from 1.
    pub port: u8,
    /// Local GID index (a RoCEv2 GID for routable traffic; `rondo doctor` lists them).
    pub sgid_index: u8,
    /// IP TTL / hop limit.
    pub hop_limit: u8,
    /// UDP source port of path 0 (0xC000..=0xFFFF); path p uses base + p.
    pub base_sport: u16,
    /// DSCP of ACKs and NAKs. Default 46 (EF).
    pub dscp_control: u8,
    /// DSCP of data. Default 26 (RoCEv2's usual class).
    pub dscp_data: u8,
    /// DSCP of capacity probes, the switch's low-priority queue. Default 8 (CS1).
    pub dscp_probe: u8,
}

impl Default for AddressConfig {
    fn default() -> AddressConfig {
        AddressConfig {
            port: 1,
            sgid_index: 3,
            hop_limit: 64,
            base_sport: 0xC000,
            dscp_control: 46,
            dscp_data: 26,
            dscp_probe: 8,
        }
    }
}

impl AddressConfig {
    /// DSCP of a priority class.
    pub fn dscp(&self, priority: Priority) -> u8 {
        match priority {
            Priority::Control => self.dscp_control,
            Priority::Data => self.dscp_data,
            Priority::Probe => self.dscp_probe,
        }
    }
}

/// One address handle's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AhSpec {
    /// Path it belongs to.
    pub path: u16,
    /// Priority class.
    pub priority: Priority,
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Destination LID (InfiniBand; 0 on RoCE).
    pub dlid: u16,
    /// GRH flow label (sets the RoCEv2 UDP source port).
    pub flow_label: u32,
    /// GRH traffic class: DSCP << 2.
    pub traffic_class: u8,
    /// Service level: DSCP >> 3 (the usual DSCP-to-priority trust mapping).
    pub sl: u8,
    /// Local GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Local port.
    pub port: u8,
}

/// Index of the AH of `path` and `priority`.
pub fn ah_index(path: u16, priority: Priority) -> usize {
    usize::from(path) * Priority::COUNT + priority.index()
}

/// The AHs towards `peer` for `paths` paths, in [`ah_index`] order.
pub fn address_plan(
    cfg: &AddressConfig,
    peer: &EndpointInfo,
    paths: u16,
) -> Result<Vec<AhSpec>, FlowLabelError> {
    let labels = path_flow_labels(cfg.base_sport, usize::from(paths))?;
    let mut out = Vec::with_capacity(labels.len() * Priority::COUNT);
    for (path, &flow_label) in (0u16..).zip(&labels) {
        for priority in [Priority::Control, Priority::Data, Priority::Probe] {
            let dscp = cfg.dscp(priority) & 0x3F;
            out.push(AhSpec {
                path,
                priority,
                dgid: peer.gid,
                dlid: peer.lid,
                flow_label,
                traffic_class: dscp << 2,
                sl: dscp >> 3,
                sgid_index: cfg.sgid_index,
                hop_limit: cfg.hop_limit,
                port: cfg.port,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::flow_label::roce_source_port;
    use super::*;

    #[test]
    fn one_ah_per_path_and_priority() {
        let peer = EndpointInfo {
            qpn: 7,
            qkey: 1,
            gid: [9; 16],
            lid: 0,
            mtu: 4096,
            paths: 4,
        };
        let cfg = AddressConfig::default();
        let plan = address_plan(&cfg, &peer, 4).unwrap();
        assert_eq!(plan.len(), 12);
        for (i, ah) in plan.iter().enumerate() {
            assert_eq!(ah_index(ah.path, ah.priority), i);
            assert_eq!(roce_source_port(ah.flow_label), Some(0xC000 + ah.path));
            assert_eq!(ah.dgid, [9; 16]);
        }
        let probe = plan[ah_index(2, Priority::Probe)];
        let data = plan[ah_index(2, Priority::Data)];
        assert_eq!((probe.traffic_class, probe.sl), (8 << 2, 1));
        assert_eq!((data.traffic_class, data.sl), (26 << 2, 3));
        assert!(probe.sl < data.sl, "probes ride the low-priority class");
        assert_eq!(probe.flow_label, data.flow_label, "same path, same port");
        let bad = AddressConfig {
            base_sport: 1000,
            ..cfg
        };
        assert!(address_plan(&bad, &peer, 4).is_err());
    }
}
