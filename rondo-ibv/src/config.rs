//! Configuration by environment, read once when the library is first used.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `RONDO_IBV_IP` | IPv4 address of `rondo0` (its GID is `::ffff:<ip>`); the address a `rondo_<dev>`'s set-up listener binds | the first non-loopback IPv4 address, else 127.0.0.1; `rondo_<dev>`: every address |
//! | `RONDO_IBV_PATHS` | paths each QP sprays over (one UDP socket, or one address handle, each); both ends the same | 4 |
//! | `RONDO_IBV_MTU` | datagram size in bytes (engine and verbs headers included: 4196 carries 4096 bytes of data, as a RoCE packet at MTU 4096, and `rondo perf`'s default); `rondo_<dev>`: at most the port's active MTU; both ends the same | 4196; `rondo_<dev>`: the port's active MTU |
//! | `RONDO_IBV_PEER` | peer address for programs that exchange no GID (`ibv_rc_pingpong` without `-g`, qperf) or a GID without an IPv4 address in it | the local address |
//! | `RONDO_IBV_VENDOR` | `mlx5`: report a ConnectX-6 so perftest takes its `ibv_wr_*`/inline path; `rondo`: vendor 0 | `rondo0`: vendor 0; `rondo_<dev>`: the device's |
//! | `RONDO_IBV_PORT`, `RONDO_IBV_GID_INDEX` | `rondo_<dev>`: the port and GID index its UD queue pair uses | the first active port; its first RoCE v2 GID with an IPv4 address, else RoCE v2, else IB |
//! | `RONDO_IBV_LOSS`, `RONDO_IBV_REORDER` | fault injection on arrival: probability of a drop, of a reordering | 0 |
//! | `RONDO_IBV_SEED` | seed of the fault injection | 1 |
//! | `RONDO_IBV_DEBUG` | `1`: log every object and connection set-up to stderr | off |

use std::net::Ipv4Addr;

/// Why the environment could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A variable's value does not parse or is out of range.
    #[error("{name}={value}: {reason}")]
    Bad {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is allowed.
        reason: &'static str,
    },
}

/// The vendor a device of ours reports in `ibv_query_device` when
/// `RONDO_IBV_VENDOR` names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Vendor {
    /// Vendor and part 0: perftest uses `ibv_post_send` and no inline data.
    Rondo,
    /// Mellanox ConnectX-6 (0x02c9, part 4123): perftest uses `ibv_wr_*` and inline data.
    Mlx5,
}

/// The library's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Address of `rondo0`'s sockets and listener.
    pub ip: Ipv4Addr,
    /// `ip` was given (`RONDO_IBV_IP`), not guessed.
    pub ip_given: bool,
    /// Paths per QP.
    pub paths: u16,
    /// Datagram size.
    pub mtu: usize,
    /// `mtu` was given (`RONDO_IBV_MTU`).
    pub mtu_given: bool,
    /// Peer address when the application gives no GID.
    pub peer: Ipv4Addr,
    /// Reported vendor, when not the device's own.
    pub vendor: Option<Vendor>,
    /// `rondo_<dev>`: the port of its UD queue pair (`None`: the first active one).
    pub port: Option<u8>,
    /// `rondo_<dev>`: the GID index of its UD queue pair (`None`: the best one).
    pub gid_index: Option<u8>,
    /// Injected loss probability.
    pub loss: f64,
    /// Injected reordering probability.
    pub reorder: f64,
    /// Seed of the fault injection.
    pub seed: u64,
    /// Log to stderr.
    pub debug: bool,
}

fn parse<T: std::str::FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
    default: T,
    reason: &'static str,
    ok: impl Fn(&T) -> bool,
) -> Result<T, ConfigError> {
    match get(name) {
        None => Ok(default),
        Some(v) => match v.trim().parse::<T>() {
            Ok(x) if ok(&x) => Ok(x),
            _ => Err(ConfigError::Bad {
                name,
                value: v,
                reason,
            }),
        },
    }
}

impl Config {
    /// The configuration from the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// The configuration from the variables `get` gives (the environment's, in
    /// [`Config::from_env`]).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let ip_given = get("RONDO_IBV_IP").is_some();
        let ip = match get("RONDO_IBV_IP") {
            Some(v) => v.trim().parse().map_err(|_| ConfigError::Bad {
                name: "RONDO_IBV_IP",
                value: v,
                reason: "give an IPv4 address such as 192.168.1.10",
            })?,
            None => first_non_loopback().unwrap_or(Ipv4Addr::LOCALHOST),
        };
        let paths = parse(&get, "RONDO_IBV_PATHS", 4u16, "give 1 to 64 paths", |p| {
            (1..=64).contains(p)
        })?;
        let mtu_given = get("RONDO_IBV_MTU").is_some();
        let mtu = parse(
            &get,
            "RONDO_IBV_MTU",
            datagram_for(ip, 4196),
            "give a datagram size of 512 to 9216 bytes",
            |m| (512..=9216).contains(m),
        )?;
        let peer = parse(
            &get,
            "RONDO_IBV_PEER",
            ip,
            "give the peer's IPv4 address",
            |_| true,
        )?;
        let vendor = match get("RONDO_IBV_VENDOR").as_deref().map(str::trim) {
            None | Some("") => None,
            Some("rondo") => Some(Vendor::Rondo),
            Some("mlx5") => Some(Vendor::Mlx5),
            Some(v) => {
                return Err(ConfigError::Bad {
                    name: "RONDO_IBV_VENDOR",
                    value: v.into(),
                    reason: "give mlx5 (ConnectX emulation) or rondo",
                })
            }
        };
        let prob = |p: &f64| (0.0..1.0).contains(p);
        let loss = parse(
            &get,
            "RONDO_IBV_LOSS",
            0.0,
            "give a probability in [0, 1)",
            prob,
        )?;
        let reorder = parse(
            &get,
            "RONDO_IBV_REORDER",
            0.0,
            "give a probability in [0, 1)",
            prob,
        )?;
        let seed = parse(
            &get,
            "RONDO_IBV_SEED",
            1u64,
            "give an unsigned integer",
            |_| true,
        )?;
        let port = parse(
            &get,
            "RONDO_IBV_PORT",
            0u8,
            "give a port number, from 1",
            |p| *p >= 1,
        )?;
        let gid_index = parse(
            &get,
            "RONDO_IBV_GID_INDEX",
            0u8,
            "give a GID index of 0 to 255",
            |_| true,
        )?;
        let debug = get("RONDO_IBV_DEBUG").is_some_and(|v| !v.is_empty() && v != "0");
        Ok(Config {
            ip,
            ip_given,
            paths,
            mtu,
            mtu_given,
            peer,
            vendor,
            port: get("RONDO_IBV_PORT").map(|_| port),
            gid_index: get("RONDO_IBV_GID_INDEX").map(|_| gid_index),
            loss,
            reorder,
            seed,
            debug,
        })
    }
}

/// The first IPv4 address of an interface that is up and not loopback.
fn first_non_loopback() -> Option<Ipv4Addr> {
    ipv4_interfaces()
        .into_iter()
        .find(|i| i.up && !i.loopback)
        .map(|i| i.addr)
}

/// The MTU of the interface that holds `ip` (from `/sys/class/net`), if one does.
fn interface_mtu(ip: Ipv4Addr) -> Option<usize> {
    let name = ipv4_interfaces().into_iter().find(|i| i.addr == ip)?.name;
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The default datagram for sockets on `ip`: `default`, or less where the
/// interface's MTU less the IPv4 and UDP headers is less, so that the
/// kernel does not fragment every datagram (a lost fragment loses the whole
/// datagram, and fragmenting costs the host: `rondo perf --auth none` between
/// two namespaces on a veth of MTU 1500 moved 6.0 Gb/s with 4,156-byte datagrams
/// and 18.0-19.6 Gb/s with 1,472-byte ones, 2026-12-07).
fn datagram_for(ip: Ipv4Addr, default: usize) -> usize {
    let headers = rondo_ud::udp::ip_udp_header_len(ip.into());
    interface_mtu(ip).map_or(default, |m| default.min(m.saturating_sub(headers).max(512)))
}

/// One IPv4 address of an interface.
struct Ipv4Interface {
    name: String,
    addr: Ipv4Addr,
    up: bool,
    loopback: bool,
}

/// Every IPv4 address of every interface (`getifaddrs`), in its order.
fn ipv4_interfaces() -> Vec<Ipv4Interface> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list we free below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned, alive until freed.
        let ifa = unsafe { &*at };
        if !ifa.ifa_addr.is_null() && !ifa.ifa_name.is_null() {
            // SAFETY: a non-null ifa_addr points to a sockaddr of its family.
            let family = unsafe { (*ifa.ifa_addr).sa_family };
            if i32::from(family) == libc::AF_INET {
                // SAFETY: AF_INET addresses are sockaddr_in; ifa_name is a C string
                // alive until the list is freed.
                let (sin, name) = unsafe {
                    (
                        &*(ifa.ifa_addr as *const libc::sockaddr_in),
                        std::ffi::CStr::from_ptr(ifa.ifa_name),
                    )
                };
                found.push(Ipv4Interface {
                    name: name.to_string_lossy().into_owned(),
                    addr: Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                    up: ifa.ifa_flags & libc::IFF_UP as u32 != 0,
                    loopback: ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0,
                });
            }
        }
        at = ifa.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(v: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| v.iter().find(|(n, _)| *n == k).map(|(_, x)| x.to_string())
    }

    #[test]
    fn the_default_datagram_fits_the_interface() {
        // Loopback carries 4196 bytes unfragmented; an address of no interface
        // keeps the default.
        assert_eq!(datagram_for(Ipv4Addr::LOCALHOST, 4196), 4196);
        assert_eq!(datagram_for(Ipv4Addr::new(192, 0, 2, 77), 4196), 4196);
        if let Some(lo) = interface_mtu(Ipv4Addr::LOCALHOST) {
            assert_eq!(datagram_for(Ipv4Addr::LOCALHOST, 100_000), lo - 28);
        }
    }

    #[test]
    fn defaults_and_overrides_parse_and_bad_values_are_named() {
        let c = Config::from_vars(vars(&[("RONDO_IBV_IP", "127.0.0.1")])).unwrap();
        assert_eq!(
            (c.paths, c.mtu, c.peer, c.vendor, c.port, c.gid_index),
            (4, 4196, Ipv4Addr::LOCALHOST, None, None, None)
        );
        assert_eq!((c.ip_given, c.mtu_given), (true, false));
        let c = Config::from_vars(vars(&[
            ("RONDO_IBV_IP", "10.0.0.1"),
            ("RONDO_IBV_PEER", "10.0.0.2"),
            ("RONDO_IBV_PATHS", "8"),
            ("RONDO_IBV_MTU", "4096"),
            ("RONDO_IBV_VENDOR", "mlx5"),
            ("RONDO_IBV_LOSS", "0.01"),
            ("RONDO_IBV_DEBUG", "1"),
            ("RONDO_IBV_PORT", "2"),
            ("RONDO_IBV_GID_INDEX", "3"),
        ]))
        .unwrap();
        assert_eq!(
            (c.paths, c.mtu, c.vendor, c.loss, c.debug),
            (8, 4096, Some(Vendor::Mlx5), 0.01, true)
        );
        assert_eq!((c.port, c.gid_index, c.mtu_given), (Some(2), Some(3), true));
        assert_eq!(c.peer, Ipv4Addr::new(10, 0, 0, 2));
        for (k, v) in [
            ("RONDO_IBV_PATHS", "0"),
            ("RONDO_IBV_MTU", "100"),
            ("RONDO_IBV_IP", "::1"),
            ("RONDO_IBV_VENDOR", "bnxt"),
            ("RONDO_IBV_LOSS", "1.5"),
            ("RONDO_IBV_PORT", "0"),
            ("RONDO_IBV_GID_INDEX", "256"),
        ] {
            let e = Config::from_vars(vars(&[(k, v)])).unwrap_err();
            assert!(e.to_string().starts_with(&format!("{k}={v}: ")), "{e}");
        }
    }
}
