//! What RDMA hardware the host has: devices, ports, GIDs, MTUs (for `rondo
//! doctor` and for choosing a GID index).

use super::error::VerbsError;
use super::qp_attr::mtu_bytes;
use super::sys::{device_names, Context};
use std::net::{IpAddr, Ipv6Addr};

/// Kind of a GID table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GidKind {
    /// InfiniBand.
    Ib,
    /// RoCE v1 (Ethernet, not routable).
    RoceV1,
    /// RoCE v2 (UDP/IP, routable): what Rondo needs on Ethernet.
    RoceV2,
    /// A type this build does not know.
    Other(u32),
}

impl GidKind {
    /// From `ibv_gid_entry::gid_type`.
    pub fn from_raw(t: u32) -> GidKind {
        match t {
            0 => GidKind::Ib,
            1 => GidKind::RoceV1,
            2 => GidKind::RoceV2,
            t => GidKind::Other(t),
        }
    }

    /// As `ibv_gid_entry::gid_type`.
    pub fn raw(self) -> u32 {
        match self {
            GidKind::Ib => 0,
            GidKind::RoceV1 => 1,
            GidKind::RoceV2 => 2,
            GidKind::Other(t) => t,
        }
    }

    /// Short name as `show_gids` prints it.
    pub fn name(self) -> &'static str {
        match self {
            GidKind::Ib => "IB",
            GidKind::RoceV1 => "RoCE v1",
            GidKind::RoceV2 => "RoCE v2",
            GidKind::Other(_) => "unknown",
        }
    }
}

/// One GID table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidReport {
    /// Index, for `--gid-index`.
    pub index: u32,
    /// Kind.
    pub kind: GidKind,
    /// The 16 bytes.
    pub gid: [u8; 16],
}

impl GidReport {
    /// The IP address the GID carries: IPv4 for IPv4-mapped GIDs (`::ffff:a.b.c.d`),
    /// IPv6 otherwise.
    pub fn ip(&self) -> IpAddr {
        let v6 = Ipv6Addr::from(self.gid);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }
}

/// Link layer of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE).
    Ethernet,
    /// Not reported.
    Unspecified,
}

/// One port of a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortReport {
    /// Port number, from 1.
    pub port: u8,
    /// True when the port state is ACTIVE.
    pub active: bool,
    /// State name (DOWN, INIT, ARMED, ACTIVE).
    pub state: &'static str,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// Active MTU in bytes (0 when unknown).
    pub active_mtu: u32,
    /// Largest MTU in bytes.
    pub max_mtu: u32,
    /// LID (InfiniBand).
    pub lid: u16,
    /// GID table.
    pub gids: Vec<GidReport>,
}

/// One RDMA device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceReport {
    /// Device name (`mlx5_0`).
    pub name: String,
    /// Its ports (empty when it could not be opened).
    pub ports: Vec<PortReport>,
    /// Why it could not be queried, if so.
    pub error: Option<String>,
}

fn state_name(s: u32) -> &'static str {
    match s {
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "NOP",
    }
}

/// Every device with its ports and GIDs. An empty list means no device; a device
/// that cannot be opened or queried is listed with its error.
pub fn inventory() -> Result<Vec<DeviceReport>, VerbsError> {
    Ok(device_names()?.into_iter().map(device_report).collect())
}

fn device_report(name: String) -> DeviceReport {
    match query_device(&name) {
        Ok(ports) => DeviceReport {
            name,
            ports,
            error: None,
        },
        Err(e) => DeviceReport {
            name,
            ports: Vec::new(),
            error: Some(e.to_string()),
        },
    }
}

fn query_device(name: &str) -> Result<Vec<PortReport>, VerbsError> {
    let ctx = Context::open(name)?;
    let dev = ctx.query_device()?;
    let mut ports = Vec::new();
    let mut total_gids = 0usize;
    let mut attrs = Vec::new();
    for port in 1..=dev.phys_port_cnt {
        let a = ctx.query_port(port)?;
        total_gids += usize::try_from(a.gid_tbl_len).unwrap_or(0);
        attrs.push((port, a));
    }
    // The GID table of an inactive port may be unreadable: report no GIDs then.
    let gids = ctx.gid_table(total_gids.max(1)).unwrap_or_default();
    for (port, a) in attrs {
        ports.push(PortReport {
            port,
            active: a.state == 4,
            state: state_name(a.state),
            link_layer: match u32::from(a.link_layer) {
                1 => LinkLayer::InfiniBand,
                2 => LinkLayer::Ethernet,
                _ => LinkLayer::Unspecified,
            },
            active_mtu: mtu_bytes(a.active_mtu),
            max_mtu: mtu_bytes(a.max_mtu),
            lid: a.lid,
            gids: gids
                .iter()
                .filter(|g| g.port_num == u32::from(port))
                .map(|g| GidReport {
                    index: g.gid_index,
                    kind: GidKind::from_raw(g.gid_type),
                    gid: gid_bytes(g),
                })
                .collect(),
        });
    }
    Ok(ports)
}

fn gid_bytes(g: &ibverbs_sys::ibv_gid_entry) -> [u8; 16] {
    super::sys::gid_raw(&g.gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_ip_and_kinds() {
        let mut gid = [0u8; 16];
        gid[10] = 0xFF;
        gid[11] = 0xFF;
        gid[12..].copy_from_slice(&[192, 168, 1, 7]);
        let g = GidReport {
            index: 3,
            kind: GidKind::from_raw(2),
            gid,
        };
        assert_eq!(g.ip().to_string(), "192.168.1.7");
        assert_eq!(g.kind.name(), "RoCE v2");
        let link_local = GidReport {
            index: 0,
            kind: GidKind::from_raw(1),
            gid: [0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        };
        assert_eq!(link_local.ip().to_string(), "fe80::1");
        assert_eq!(GidKind::from_raw(0), GidKind::Ib);
        assert_eq!(GidKind::from_raw(9), GidKind::Other(9));
    }

    #[test]
    fn mtu_codes_to_bytes() {
        let bytes: Vec<u32> = (0..7).map(mtu_bytes).collect();
        assert_eq!(bytes, [0, 256, 512, 1024, 2048, 4096, 0]);
    }
}
