//! Our devices: `rondo0` (Rondo over kernel UDP) and, with the `verbs` feature,
//! one `rondo_<dev>` per real RDMA device (Rondo over that device's UD queue
//! pairs). Each is an `ibv_device` that lives as long as the process; a handle is
//! ours exactly when it is one of them. [`listing`] decides what
//! `ibv_get_device_list` returns from the real list, without touching a device.

use crate::abi::*;
use std::sync::{Mutex, OnceLock};

/// Name of the UDP device.
pub const UDP_DEVICE: &str = "rondo0";
/// Prefix of a device over a real one: `rondo_mlx5_0` runs over `mlx5_0`.
pub const NIC_PREFIX: &str = "rondo_";

/// What a device of ours runs over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Over {
    /// Kernel UDP sockets (`rondo0`).
    Udp,
    /// The UD queue pairs of the real RDMA device of this name.
    Nic(String),
}

/// A device of ours: the C part first, so that the handle converts back.
#[repr(C)]
pub struct Device {
    /// What the application holds.
    pub dev: ibv_device,
    /// What it runs over.
    pub over: Over,
}

impl Device {
    fn new(name: &str, over: Over) -> Device {
        let mut dev = ibv_device {
            _ops: [0; 2],
            node_type: IBV_NODE_CA,
            transport_type: IBV_TRANSPORT_IB,
            name: [0; SYSFS_NAME_MAX],
            dev_name: [0; SYSFS_NAME_MAX],
            dev_path: [0; SYSFS_PATH_MAX],
            ibdev_path: [0; SYSFS_PATH_MAX],
        };
        fill(&mut dev.name, name);
        fill(&mut dev.dev_name, &format!("uverbs-{name}"));
        fill(&mut dev.dev_path, &format!("/nonexistent/rondo-ibv/{name}"));
        fill(
            &mut dev.ibdev_path,
            &format!("/nonexistent/rondo-ibv/{name}"),
        );
        Device { dev, over }
    }

    /// The handle the application gets.
    pub fn handle(&'static self) -> *mut ibv_device {
        &self.dev as *const ibv_device as *mut ibv_device
    }

    /// The device's name.
    pub fn name(&self) -> String {
        c_name(&self.dev.name)
    }
}

fn fill(dst: &mut [libc::c_char], s: &str) {
    let n = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as libc::c_char;
    }
}

/// A NUL-terminated name of an `ibv_device` (all of it when there is no NUL).
pub fn c_name(name: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The name of the Rondo device over real device `real`, if one fits in
/// `IBV_SYSFS_NAME_MAX` with its NUL.
pub fn nic_name(real: &str) -> Option<String> {
    let name = format!("{NIC_PREFIX}{real}");
    (!real.is_empty() && name.len() < SYSFS_NAME_MAX).then_some(name)
}

/// One entry of the list `ibv_get_device_list` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    /// `rondo0`.
    Udp,
    /// `rondo_<dev>` over the real device at this index of the real list.
    Nic(usize),
    /// The real device at this index, passed through.
    Real(usize),
}

/// What `ibv_get_device_list` returns for the real devices `real` (their names, in
/// the real library's order): `rondo0`, then with `nic` one `rondo_<dev>` per real
/// device whose name leaves room for the prefix and does not collide with a real
/// device's name, then the real devices themselves.
pub fn listing(real: &[String], nic: bool) -> Vec<Listed> {
    let mut out = vec![Listed::Udp];
    if nic {
        for (i, name) in real.iter().enumerate() {
            if nic_name(name).is_some_and(|n| n != UDP_DEVICE && !real.contains(&n)) {
                out.push(Listed::Nic(i));
            }
        }
    }
    out.extend((0..real.len()).map(Listed::Real));
    out
}

/// Every device of ours made so far (never freed: applications keep handles).
struct Registry {
    udp: &'static Device,
    nics: Mutex<Vec<&'static Device>>,
}

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| Registry {
        udp: Box::leak(Box::new(Device::new(UDP_DEVICE, Over::Udp))),
        nics: Mutex::new(Vec::new()),
    })
}

/// `rondo0`.
pub fn udp() -> &'static Device {
    registry().udp
}

/// The device over real device `real` (made on first use), or `None` when its
/// name does not fit.
pub fn nic(
    real: &str,
    node_type: libc::c_int,
    transport_type: libc::c_int,
) -> Option<&'static Device> {
    let name = nic_name(real)?;
    let mut nics = crate::objects::lock(&registry().nics);
    if let Some(d) = nics.iter().find(|d| d.over == Over::Nic(real.into())) {
        return Some(d);
    }
    let mut d = Device::new(&name, Over::Nic(real.into()));
    d.dev.node_type = node_type;
    d.dev.transport_type = transport_type;
    let d: &'static Device = Box::leak(Box::new(d));
    nics.push(d);
    Some(d)
}

/// `dev` as one of ours, if it is.
pub fn ours(dev: *const ibv_device) -> Option<&'static Device> {
    let r = registry();
    if std::ptr::eq(dev, &r.udp.dev) {
        return Some(r.udp);
    }
    if dev.is_null() {
        return None;
    }
    crate::objects::lock(&r.nics)
        .iter()
        .find(|d| std::ptr::eq(dev, &d.dev))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn rondo0_comes_first_then_one_rondo_device_per_real_one_then_the_real_ones() {
        let real = names(&["mlx5_0", "mlx5_1"]);
        assert_eq!(
            listing(&real, true),
            [
                Listed::Udp,
                Listed::Nic(0),
                Listed::Nic(1),
                Listed::Real(0),
                Listed::Real(1)
            ]
        );
        // Without the `verbs` feature the real devices only pass through.
        assert_eq!(
            listing(&real, false),
            [Listed::Udp, Listed::Real(0), Listed::Real(1)]
        );
        // No real device: rondo0 alone.
        assert_eq!(listing(&[], true), [Listed::Udp]);
    }

    #[test]
    fn names_that_do_not_fit_or_collide_get_no_rondo_device() {
        assert_eq!(nic_name("mlx5_0").as_deref(), Some("rondo_mlx5_0"));
        assert_eq!(nic_name(""), None);
        // 57 bytes + "rondo_" = 63 and the NUL: fits; one more does not.
        assert!(nic_name(&"x".repeat(57)).is_some());
        assert_eq!(nic_name(&"x".repeat(58)), None);
        // A real device already called rondo_mlx5_0 keeps its name to itself.
        let real = names(&["mlx5_0", "rondo_mlx5_0", &"y".repeat(60)]);
        assert_eq!(
            listing(&real, true),
            [
                Listed::Udp,
                Listed::Nic(1),
                Listed::Real(0),
                Listed::Real(1),
                Listed::Real(2)
            ]
        );
    }

    #[test]
    fn devices_are_made_once_and_recognised_by_handle() {
        let a = nic("test_dev_a", 1, 0).unwrap();
        let b = nic("test_dev_a", 1, 0).unwrap();
        assert!(std::ptr::eq(a, b));
        assert_eq!(a.name(), "rondo_test_dev_a");
        assert_eq!(a.over, Over::Nic("test_dev_a".into()));
        assert!(ours(a.handle()).is_some());
        assert_eq!(
            ours(udp().handle()).map(|d| d.name()),
            Some("rondo0".into())
        );
        let foreign = Device::new("mlx5_0", Over::Udp);
        assert!(ours(&foreign.dev).is_none());
        assert!(ours(std::ptr::null()).is_none());
        assert!(nic(&"z".repeat(60), 1, 0).is_none());
    }
}
