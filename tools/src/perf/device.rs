//! `--backend verbs` and `--transport rc`: which options go together, and which RDMA
//! device, port and GID index a run uses (given, or the first active port's first
//! RoCE v2 GID, preferring IPv4, as `rondo doctor` suggests).

use super::exchange::{Backend, Transport};

use crate::doctor::REBUILD;

/// Device options shared by `rondo perf server` and `rondo perf client`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct DeviceArgs {
    /// Datapath of Rondo queue pairs: kernel UDP sockets, or UD queue pairs on an
    /// RDMA NIC (`verbs` feature). A server with `--backend verbs` also serves UDP
    /// clients.
    #[arg(long, value_enum, default_value_t = Backend::Udp)]
    pub backend: Backend,
    /// RDMA device (`--backend verbs`; default: the first with an active port and a
    /// RoCE v2 GID; `rondo doctor` lists them).
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,
    /// GID index (`--backend verbs`): a RoCE v2 GID of the port (default: the first,
    /// IPv4 preferred; `rondo doctor` lists them).
    #[arg(long, value_name = "N")]
    pub gid_index: Option<u8>,
    /// Port of the RDMA device, from 1 (`--backend verbs`; default: its first
    /// active port).
    #[arg(long, value_name = "PORT")]
    pub ib_port: Option<u8>,
}

/// The RDMA device, port and GID index a run uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdmaDevice {
    /// Device name.
    pub name: String,
    /// Port, from 1.
    pub port: u8,
    /// GID index.
    pub gid_index: u8,
}

/// Options that do not go together, or a device that is not there.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionError {
    /// `--transport rc` without `--backend verbs`.
    #[error("--transport rc runs plain RC queue pairs on an RDMA device: add --backend verbs (with --device NAME --gid-index N)")]
    RcNeedsVerbs,
    /// `--transport raw-udp` with `--backend verbs`.
    #[error("--transport raw-udp is the UDP backend's ceiling: drop --backend verbs, or compare Rondo on an RDMA device against --transport rc")]
    RawUdpOnVerbs,
    /// `--device`, `--gid-index` or `--ib-port` without `--backend verbs`.
    #[error("{0} picks the RDMA device of --backend verbs: add --backend verbs, or drop {0}")]
    DeviceOptionWithoutVerbs(&'static str),
    /// A Rondo-only setting with `--transport rc`.
    #[error("{0} is a setting of Rondo's datapath; RC queue pairs run in the NIC: drop it with --transport rc")]
    RondoOnly(&'static str),
    /// `--backend verbs` in a build without the `verbs` feature.
    #[cfg_attr(all(feature = "verbs", target_os = "linux"), allow(dead_code))]
    #[error("--backend verbs needs the `verbs` feature, and this rondo was built without it; rebuild it: {REBUILD}")]
    NotBuilt,
    /// No usable RDMA device (the message says why and what to do).
    #[cfg_attr(not(all(feature = "verbs", target_os = "linux")), allow(dead_code))]
    #[error("{0}")]
    NoDevice(String),
}

/// Checks that the backend, transport and device options go together.
pub fn check_combination(
    backend: Backend,
    transport: Option<Transport>,
    dev: &DeviceArgs,
) -> Result<(), OptionError> {
    match (backend, transport) {
        (Backend::Udp, Some(Transport::Rc)) => return Err(OptionError::RcNeedsVerbs),
        (Backend::Verbs, Some(Transport::RawUdp)) => return Err(OptionError::RawUdpOnVerbs),
        _ => {}
    }
    if backend == Backend::Udp {
        for (name, given) in [
            ("--device", dev.device.is_some()),
            ("--gid-index", dev.gid_index.is_some()),
            ("--ib-port", dev.ib_port.is_some()),
        ] {
            if given {
                return Err(OptionError::DeviceOptionWithoutVerbs(name));
            }
        }
    }
    Ok(())
}

/// The device a `--backend verbs` run uses: the options, completed from the host's
/// devices. Fails with [`OptionError::NotBuilt`] without the `verbs` feature and
/// [`OptionError::NoDevice`] when the host has no usable device.
#[cfg(not(all(feature = "verbs", target_os = "linux")))]
pub fn resolve(_: &DeviceArgs) -> Result<RdmaDevice, OptionError> {
    Err(OptionError::NotBuilt)
}

/// The device a `--backend verbs` run uses: the options, completed from the host's
/// devices. Fails with [`OptionError::NoDevice`] when the host has no usable device.
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub fn resolve(dev: &DeviceArgs) -> Result<RdmaDevice, OptionError> {
    let devices = rondo_ud::verbs::inventory::inventory()
        .map_err(|e| OptionError::NoDevice(format!("no RDMA device: {e}")))?;
    pick(&devices, dev)
}

/// [`resolve`] over a device inventory.
#[cfg(all(feature = "verbs", target_os = "linux"))]
pub fn pick(
    devices: &[rondo_ud::verbs::inventory::DeviceReport],
    dev: &DeviceArgs,
) -> Result<RdmaDevice, OptionError> {
    let none = |why: String| OptionError::NoDevice(why);
    if devices.is_empty() {
        return Err(none(rondo_verbs::NO_DEVICE.into()));
    }
    let names = || {
        devices
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let candidates: Vec<_> = match &dev.device {
        Some(n) => {
            let d = devices.iter().find(|d| &d.name == n).ok_or_else(|| {
                none(format!(
                    "no RDMA device {n:?} on this host (it has {}); run `rondo doctor`",
                    names()
                ))
            })?;
            vec![d]
        }
        None => devices.iter().collect(),
    };
    for d in candidates {
        for p in d
            .ports
            .iter()
            .filter(|p| p.active && dev.ib_port.is_none_or(|want| want == p.port))
        {
            // One rule with the drop-in's rondo_<dev>: RoCE v2 with IPv4, RoCE
            // v2, IB (`rondo_verbs::gid_rank`).
            let gids = p.gids.iter().map(|g| (g.index, g.kind.raw(), g.gid));
            if let Some(gid_index) = rondo_verbs::pick_gid_index(gids, dev.gid_index) {
                return Ok(RdmaDevice {
                    name: d.name.clone(),
                    port: p.port,
                    gid_index,
                });
            }
        }
    }
    Err(none(format!(
        "no active port{}{} with {} on RDMA device(s) {}: `rondo doctor` lists ports and GIDs",
        dev.ib_port.map_or(String::new(), |p| format!(" {p}")),
        dev.device
            .as_ref()
            .map_or(String::new(), |n| format!(" of {n}")),
        dev.gid_index
            .map_or("a RoCE v2 or IB GID".to_string(), |i| format!(
                "GID index {i}"
            )),
        names()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(backend: Backend) -> DeviceArgs {
        DeviceArgs {
            backend,
            ..DeviceArgs::default()
        }
    }

    #[test]
    fn combinations_that_cannot_run_are_typed_errors() {
        let udp = args(Backend::Udp);
        let verbs = args(Backend::Verbs);
        assert_eq!(
            check_combination(Backend::Udp, Some(Transport::Rc), &udp),
            Err(OptionError::RcNeedsVerbs)
        );
        assert_eq!(
            check_combination(Backend::Verbs, Some(Transport::RawUdp), &verbs),
            Err(OptionError::RawUdpOnVerbs)
        );
        for (d, name) in [
            (
                DeviceArgs {
                    gid_index: Some(3),
                    ..udp.clone()
                },
                "--gid-index",
            ),
            (
                DeviceArgs {
                    device: Some("mlx5_0".into()),
                    ..udp.clone()
                },
                "--device",
            ),
            (
                DeviceArgs {
                    ib_port: Some(1),
                    ..udp.clone()
                },
                "--ib-port",
            ),
        ] {
            assert_eq!(
                check_combination(Backend::Udp, Some(Transport::RONDO), &d),
                Err(OptionError::DeviceOptionWithoutVerbs(name))
            );
        }
        for t in [None, Some(Transport::RONDO), Some(Transport::Rc)] {
            assert_eq!(check_combination(Backend::Verbs, t, &verbs), Ok(()));
        }
        assert_eq!(
            check_combination(Backend::Udp, Some(Transport::RawUdp), &udp),
            Ok(())
        );
        assert!(OptionError::NotBuilt
            .to_string()
            .contains("--features verbs"));
    }

    #[cfg(all(feature = "verbs", target_os = "linux"))]
    #[test]
    fn the_device_port_and_gid_are_picked_as_doctor_suggests() {
        use rondo_ud::verbs::inventory::{DeviceReport, GidKind, GidReport, LinkLayer, PortReport};
        let v4 = |index, last| GidReport {
            index,
            kind: GidKind::RoceV2,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, last],
        };
        let v1 = GidReport {
            index: 0,
            kind: GidKind::RoceV1,
            gid: [0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        };
        let port = |port, active, gids| PortReport {
            port,
            active,
            state: if active { "ACTIVE" } else { "DOWN" },
            link_layer: LinkLayer::Ethernet,
            active_mtu: 4096,
            max_mtu: 4096,
            lid: 0,
            gids,
        };
        let devices = vec![
            DeviceReport {
                name: "mlx5_0".into(),
                ports: vec![port(1, false, vec![v1, v4(3, 1)])],
                error: None,
            },
            DeviceReport {
                name: "mlx5_1".into(),
                ports: vec![port(1, true, vec![v1, v4(3, 2), v4(5, 3)])],
                error: None,
            },
        ];
        let want = |name: &str, port, gid_index| RdmaDevice {
            name: name.into(),
            port,
            gid_index,
        };
        let verbs = args(Backend::Verbs);
        assert_eq!(pick(&devices, &verbs), Ok(want("mlx5_1", 1, 3)));
        let given = DeviceArgs {
            gid_index: Some(5),
            ..verbs.clone()
        };
        assert_eq!(pick(&devices, &given), Ok(want("mlx5_1", 1, 5)));
        let down = DeviceArgs {
            device: Some("mlx5_0".into()),
            ..verbs.clone()
        };
        assert!(
            matches!(pick(&devices, &down), Err(OptionError::NoDevice(m)) if m.contains("no active port"))
        );
        let absent = DeviceArgs {
            device: Some("mlx5_9".into()),
            ..verbs.clone()
        };
        assert!(
            matches!(pick(&devices, &absent), Err(OptionError::NoDevice(m)) if m.contains("mlx5_0, mlx5_1"))
        );
        let bad_gid = DeviceArgs {
            gid_index: Some(7),
            ..verbs.clone()
        };
        assert!(pick(&devices, &bad_gid).is_err());
        assert_eq!(
            pick(&[], &verbs),
            Err(OptionError::NoDevice(rondo_verbs::NO_DEVICE.into()))
        );
    }
}
