//! `rondo_<dev>` (cargo feature `verbs`): Rondo over the UD queue pairs of a real
//! RDMA device, through `rondo-verbs`' `verbs` backend. The device's identity, its
//! ports and its GID table are the real device's, read from a context of it that
//! the drop-in opens beside the Rondo one (so `ibv_devinfo -d rondo_mlx5_0` shows
//! mlx5_0's GIDs, MTU and link layer); its capabilities are Rondo's (RC QPs, no
//! atomics, no SRQ); its LID is the set-up listener's port, as `rondo0`'s.
//!
//! The UD queue pair runs on one port and one GID: `RONDO_IBV_PORT` and
//! `RONDO_IBV_GID_INDEX`, else the first active port and its best GID ([`choose`],
//! ranked as `rondo doctor` suggests: RoCE v2 with an IPv4 address, RoCE v2, IB).
//! The GID an application exchanges (perftest's `-x`) only carries the set-up
//! listener's address to the peer: an IPv4-mapped GID gives the address, any other
//! the fallback `RONDO_IBV_PEER`.

use crate::abi::*;
use crate::config::Config;
use crate::devices::c_name;
use crate::real;
use libc::c_int;
use rondo_verbs::{Context, ContextAttr, VerbsAttr};
use std::sync::OnceLock;

/// A context of the real device, for its attributes and GID table; closed on drop.
pub struct RealCtx(pub *mut ibv_context);

impl Drop for RealCtx {
    fn drop(&mut self) {
        // SAFETY: a context the real ibv_open_device gave us, closed once.
        unsafe { real::ibv_close_device(self.0) };
    }
}

// SAFETY: libibverbs contexts may be used from any thread.
unsafe impl Send for RealCtx {}
// SAFETY: as above; the queries used take no lock of ours.
unsafe impl Sync for RealCtx {}

/// The real device under a `rondo_<dev>` context, and what its UD QP runs on.
pub struct Nic {
    /// A context of the real device.
    pub real: RealCtx,
    /// The real device's name.
    pub name: String,
    /// Where the UD QP runs, once the Rondo context is open.
    data: OnceLock<DataPath>,
}

/// Where a `rondo_<dev>`'s UD QP runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPath {
    /// The port.
    pub port: u8,
    /// The GID index.
    pub gid_index: u8,
    /// The QPs' datagram size (at most the port's active MTU).
    pub mtu: usize,
}

/// One GID table entry of a real port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gid {
    /// Index in the port's table.
    pub index: u32,
    /// The 16 bytes.
    pub gid: [u8; 16],
    /// `ibv_gid_type` (public enum): IB 0, RoCE v1 1, RoCE v2 2.
    pub kind: u32,
}

/// A real port as [`choose`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// Its number, from 1.
    pub port: u8,
    /// `IBV_PORT_ACTIVE`.
    pub active: bool,
    /// Its GID table (the entries that could be read).
    pub gids: Vec<Gid>,
}

/// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
pub fn mapped_ipv4(g: &[u8; 16]) -> Option<std::net::Ipv4Addr> {
    std::net::Ipv6Addr::from(*g).to_ipv4_mapped()
}

/// The port and GID index the UD QP of `rondo_<device>` uses: `want_port` (else the
/// first active port) and `want_gid` (else that port's best GID: RoCE v2 with an
/// IPv4 address, then RoCE v2, then IB).
pub fn choose(
    device: &str,
    ports: &[Port],
    want_port: Option<u8>,
    want_gid: Option<u8>,
) -> Result<(u8, u8), String> {
    let mut why = format!("{device} has no active port");
    for p in ports
        .iter()
        .filter(|p| p.active && want_port.is_none_or(|w| w == p.port))
    {
        let gids = p.gids.iter().map(|g| (g.index, g.kind, g.gid));
        match rondo_verbs::pick_gid_index(gids, want_gid) {
            Some(g) => return Ok((p.port, g)),
            None => {
                why = match want_gid {
                    Some(i) => format!("port {} of {device} has no GID {i}", p.port),
                    None => format!(
                        "port {} of {device} has no RoCE v2 or IB GID (set RONDO_IBV_GID_INDEX)",
                        p.port
                    ),
                }
            }
        }
    }
    if let Some(w) = want_port.filter(|w| !ports.iter().any(|p| p.active && p.port == *w)) {
        why = format!("port {w} of {device} is not an active port (RONDO_IBV_PORT)");
    }
    Err(format!("{why}; `rondo doctor` lists ports and GIDs"))
}

/// The port attributes of `rondo_<dev>`: the real port's (state, MTUs, link layer,
/// GID table length, speed), with the set-up listener's port as LID and Rondo's
/// largest message.
pub fn port_attr(real: &ibv_port_attr, lid: u16) -> ibv_port_attr {
    ibv_port_attr {
        lid,
        sm_lid: 0,
        lmc: 0,
        max_msg_sz: real.max_msg_sz.min(crate::objects::MAX_MSG),
        ..*real
    }
}

/// The GUID of `rondo_<dev>` (network order, as `ibv_get_device_guid` and
/// `node_guid` hold it): the real device's with the locally-administered bit
/// flipped, so that nothing that finds devices by GUID (librdmacm without kernel
/// device indices) takes one for the other.
pub fn guid(real: u64) -> u64 {
    (u64::from_be(real) ^ (0x02 << 56)).to_be()
}

/// The device attributes of `rondo_<dev>`: the identity of the real device
/// (firmware, vendor, part, ports; its GUIDs, made ours by [`guid`]) with Rondo's
/// capabilities (`ours`).
pub fn device_attr(real: &ibv_device_attr, ours: &ibv_device_attr) -> ibv_device_attr {
    ibv_device_attr {
        fw_ver: real.fw_ver,
        node_guid: guid(real.node_guid),
        sys_image_guid: guid(real.sys_image_guid),
        max_mr_size: real.max_mr_size.min(ours.max_mr_size),
        page_size_cap: real.page_size_cap,
        vendor_id: real.vendor_id,
        vendor_part_id: real.vendor_part_id,
        hw_ver: real.hw_ver,
        max_pkeys: real.max_pkeys,
        local_ca_ack_delay: real.local_ca_ack_delay,
        phys_port_cnt: real.phys_port_cnt,
        ..*ours
    }
}

/// The real device called `name`: `f` runs with its `ibv_device` while the real
/// device list is held.
fn with_real_device<R>(name: &str, f: impl FnOnce(*mut ibv_device) -> R) -> Result<R, String> {
    let mut n: c_int = 0;
    // SAFETY: the real function with its own contract.
    let l = unsafe { real::ibv_get_device_list(&mut n) };
    if l.is_null() {
        return Err(format!(
            "no RDMA device {name:?}: the device list cannot be read"
        ));
    }
    let mut found = None;
    for i in 0..n.max(0) as usize {
        // SAFETY: the real list holds `n` live devices.
        let d = unsafe { *l.add(i) };
        // SAFETY: a live device.
        if c_name(unsafe { &(*d).name }) == name {
            found = Some(d);
            break;
        }
    }
    let r = found.map(f);
    // SAFETY: the list the real ibv_get_device_list returned, freed once.
    unsafe { real::ibv_free_device_list(l) };
    r.ok_or_else(|| format!("no RDMA device {name:?} any more"))
}

/// The GUID of `rondo_<name>` (network order, [`guid`]), 0 when unknown.
pub fn device_guid(name: &str) -> u64 {
    // SAFETY: a live device of the real list.
    with_real_device(name, |d| guid(unsafe { real::ibv_get_device_guid(d) })).unwrap_or(0)
}

impl Nic {
    /// Real device attributes.
    pub fn query_device(&self) -> Result<ibv_device_attr, c_int> {
        // SAFETY: plain integers, filled by the call.
        let mut a: ibv_device_attr = unsafe { core::mem::zeroed() };
        // SAFETY: our real context and a local out-parameter.
        match unsafe { real::ibv_query_device(self.real.0, &mut a) } {
            0 => Ok(a),
            e => Err(e),
        }
    }

    /// Real port attributes (the 48 bytes of the exported call; the rest zero).
    pub fn query_port(&self, port: u8) -> Result<ibv_port_attr, c_int> {
        query_port(self.real.0, port)
    }
}

fn query_port(real: *mut ibv_context, port: u8) -> Result<ibv_port_attr, c_int> {
    let mut a = ibv_port_attr::default();
    // SAFETY: a real context; `a` is larger than the 48-byte compat struct written.
    match unsafe { real::ibv_query_port(real, port, (&mut a as *mut ibv_port_attr).cast()) } {
        0 => Ok(a),
        e => Err(e),
    }
}

/// The ports of a real context with their GID tables.
fn ports(real: *mut ibv_context, count: u8) -> Vec<Port> {
    (1..=count)
        .filter_map(|port| {
            let a = query_port(real, port).ok()?;
            let gids = (0..a.gid_tbl_len.max(0) as u32)
                .filter_map(|index| {
                    let mut e = ibv_gid_entry::default();
                    // SAFETY: a real context and a local entry of the size given.
                    let r = unsafe {
                        real::_ibv_query_gid_ex(
                            real,
                            u32::from(port),
                            index,
                            &mut e,
                            0,
                            core::mem::size_of::<ibv_gid_entry>(),
                        )
                    };
                    (r == 0).then_some(Gid {
                        index,
                        gid: e.gid,
                        kind: e.gid_type,
                    })
                })
                .collect();
            Some(Port {
                port,
                active: a.state == IBV_PORT_ACTIVE,
                gids,
            })
        })
        .collect()
}

impl Nic {
    /// Opens a context of real device `name` (for its attributes and GIDs).
    pub fn open(name: &str) -> Result<Nic, String> {
        // SAFETY: a live device of the real list.
        let real = with_real_device(name, |d| unsafe { real::ibv_open_device(d) })?;
        if real.is_null() {
            return Err(format!(
                "the real ibv_open_device({name}) failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Nic {
            real: RealCtx(real),
            name: name.into(),
            data: OnceLock::new(),
        })
    }

    /// Where the UD QP runs (once [`Nic::open_rondo`] succeeded).
    pub fn data(&self) -> Option<&DataPath> {
        self.data.get()
    }

    /// Opens the Rondo context over the device's UD QPs, on the chosen port and GID.
    pub fn open_rondo(&self, cfg: &Config) -> Result<Context, String> {
        let name = &self.name;
        let dev = self
            .query_device()
            .map_err(|e| format!("querying {name}: errno {e}"))?;
        let (port, gid_index) = choose(
            name,
            &ports(self.real.0, dev.phys_port_cnt),
            cfg.port,
            cfg.gid_index,
        )?;
        let attr = VerbsAttr {
            device: name.clone(),
            port,
            gid_index,
            paths: cfg.paths,
            mtu: cfg.mtu_given.then_some(cfg.mtu.min(4096) as u32),
            loss: cfg.loss,
            reorder: cfg.reorder,
            fault_seed: cfg.seed,
            ..VerbsAttr::default()
        };
        let ctx = Context::open_verbs(
            ContextAttr {
                max_mtu: 4096,
                ..ContextAttr::default()
            },
            attr,
        )
        .map_err(|e| format!("opening Rondo over {name} port {port} GID {gid_index}: {e}"))?;
        let mtu = ctx.verbs_stats().map_or(4096, |s| s.mtu);
        let _ = self.data.set(DataPath {
            port,
            gid_index,
            mtu,
        });
        Ok(ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(ip: [u8; 4]) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&ip);
        g
    }

    fn link_local() -> [u8; 16] {
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[15] = 1;
        g
    }

    /// A ConnectX port's usual table: RoCE v1 and v2 of the link-local address,
    /// then RoCE v1 and v2 of its IPv4 address.
    fn roce_port(port: u8, active: bool) -> Port {
        Port {
            port,
            active,
            gids: vec![
                Gid {
                    index: 0,
                    gid: link_local(),
                    kind: 1,
                },
                Gid {
                    index: 1,
                    gid: link_local(),
                    kind: 2,
                },
                Gid {
                    index: 2,
                    gid: mapped([10, 0, 0, port]),
                    kind: 1,
                },
                Gid {
                    index: 3,
                    gid: mapped([10, 0, 0, port]),
                    kind: 2,
                },
            ],
        }
    }

    #[test]
    fn the_first_active_port_and_its_roce_v2_ipv4_gid_are_chosen() {
        let ports = [roce_port(1, false), roce_port(2, true)];
        assert_eq!(choose("mlx5_0", &ports, None, None), Ok((2, 3)));
        // Asked for: a port, a GID index.
        let both = [roce_port(1, true), roce_port(2, true)];
        assert_eq!(choose("mlx5_0", &both, Some(2), None), Ok((2, 3)));
        assert_eq!(choose("mlx5_0", &both, None, Some(1)), Ok((1, 1)));
        // RoCE v2 without IPv4, then IB.
        let mut v6 = roce_port(1, true);
        v6.gids.truncate(2);
        assert_eq!(choose("mlx5_0", &[v6], None, None), Ok((1, 1)));
        let ib = Port {
            port: 1,
            active: true,
            gids: vec![Gid {
                index: 0,
                gid: link_local(),
                kind: 0,
            }],
        };
        assert_eq!(choose("mlx5_0", &[ib], None, None), Ok((1, 0)));
    }

    #[test]
    fn no_usable_port_or_gid_says_what_is_missing() {
        let down = [roce_port(1, false)];
        let e = choose("mlx5_0", &down, None, None).unwrap_err();
        assert!(e.contains("mlx5_0 has no active port"), "{e}");
        let up = [roce_port(1, true)];
        let e = choose("mlx5_0", &up, Some(2), None).unwrap_err();
        assert!(e.contains("port 2 of mlx5_0 is not an active port"), "{e}");
        let e = choose("mlx5_0", &up, None, Some(9)).unwrap_err();
        assert!(e.contains("port 1 of mlx5_0 has no GID 9"), "{e}");
        let v1_only = Port {
            port: 1,
            active: true,
            gids: vec![Gid {
                index: 0,
                gid: link_local(),
                kind: 1,
            }],
        };
        let e = choose("mlx5_0", &[v1_only], None, None).unwrap_err();
        assert!(e.contains("RONDO_IBV_GID_INDEX"), "{e}");
        // An all-zero entry is never chosen.
        let empty = Port {
            port: 1,
            active: true,
            gids: vec![Gid {
                index: 0,
                gid: [0; 16],
                kind: 2,
            }],
        };
        assert!(choose("mlx5_0", &[empty], None, None).is_err());
    }

    #[test]
    fn port_attributes_are_the_real_ports_with_the_listener_as_lid() {
        let real = ibv_port_attr {
            state: IBV_PORT_ACTIVE,
            max_mtu: IBV_MTU_4096,
            active_mtu: 3, // 1024
            gid_tbl_len: 255,
            max_msg_sz: u32::MAX,
            lid: 0,
            sm_lid: 7,
            link_layer: IBV_LINK_LAYER_ETHERNET,
            active_speed: 64,
            active_width: 2,
            ..ibv_port_attr::default()
        };
        let a = port_attr(&real, 40_001);
        assert_eq!(
            (
                a.state,
                a.max_mtu,
                a.active_mtu,
                a.gid_tbl_len,
                a.link_layer
            ),
            (
                IBV_PORT_ACTIVE,
                IBV_MTU_4096,
                3,
                255,
                IBV_LINK_LAYER_ETHERNET
            )
        );
        assert_eq!((a.active_speed, a.active_width), (64, 2));
        assert_eq!(
            (a.lid, a.sm_lid, a.max_msg_sz),
            (40_001, 0, crate::objects::MAX_MSG)
        );
    }

    #[test]
    fn device_attributes_are_the_real_identity_with_rondos_capabilities() {
        // SAFETY: plain integers.
        let mut real: ibv_device_attr = unsafe { core::mem::zeroed() };
        real.vendor_id = 0x02c9;
        real.vendor_part_id = 4129;
        real.node_guid = 0x1122_3344_5566_7788u64.to_be();
        real.phys_port_cnt = 2;
        real.max_qp_wr = 1 << 15;
        real.atomic_cap = 1;
        real.max_srq = 1 << 20;
        real.fw_ver[0] = b'2' as libc::c_char;
        // SAFETY: plain integers.
        let mut ours: ibv_device_attr = unsafe { core::mem::zeroed() };
        ours.max_qp_wr = 4096;
        ours.max_qp_rd_atom = 16;
        ours.max_mr_size = 1 << 40;
        let a = device_attr(&real, &ours);
        assert_eq!(
            (a.vendor_id, a.vendor_part_id, a.node_guid, a.phys_port_cnt),
            (0x02c9, 4129, 0x1322_3344_5566_7788u64.to_be(), 2)
        );
        assert_eq!(a.fw_ver[0], b'2' as libc::c_char);
        assert_eq!(
            (
                a.max_qp_wr,
                a.max_qp_rd_atom,
                a.atomic_cap,
                a.max_srq,
                a.max_mr_size
            ),
            (4096, 16, 0, 0, 0)
        );
    }

    #[test]
    fn only_ipv4_mapped_gids_carry_an_address() {
        assert_eq!(
            mapped_ipv4(&mapped([192, 168, 1, 7])),
            Some([192, 168, 1, 7].into())
        );
        assert_eq!(mapped_ipv4(&link_local()), None);
    }
}
