//! The ibverbs UD datapath (cargo feature `verbs`, Linux): Rondo over
//! unreliable-datagram queue pairs on RDMA NICs (ConnectX), replacing RC QPs.
//! `docs/ibverbs.md` has the setup and the commands.
//!
//! One UD QP per endpoint; towards each peer one address handle per path and per
//! priority class ([`address`]): the GRH flow label of path `p` makes the NIC send
//! it with RoCEv2 UDP source port `base + p` ([`flow_label`]), which the fabric's
//! ECMP hash (or `p4/`) turns into a path; probes use the low-priority traffic
//! class. Datagrams are at most the port's active MTU, the Rondo header inside the
//! UD payload. Sends go out in WR chains with one doorbell each, one WR in N
//! signaled, small ones inline ([`send`]); receives land in registered arena
//! memory with room for the 40-byte GRH ([`grh`]), reposted in batches
//! ([`rx_ring`]). A connection set up with [`VerbsDatapath::receive_in_place`]
//! is received in place: WRs posted in expected order with a two-entry scatter
//! list put each payload straight into its message buffer, registered with the
//! NIC, and a datagram that lands elsewhere is copied out and repaired by the
//! engine ([`repair`] is the same scheme as plain data). When the device offers
//! NIC completion timestamps, arrivals reach the engine at their NIC time and
//! signaled DATA sends pair with their ACKs for NIC-level RTT samples
//! ([`timestamp`]). Endpoints exchange [`exchange::EndpointInfo`] over TCP.
//!
//! Everything but [`sys`] (the thin FFI layer) is plain Rust, unit-tested without
//! a device; the driver loop runs over a `Nic` trait, tested over an in-memory NIC
//! that stamps completions with its own clock and scatters into in-place targets.
//!
//! ```no_run
//! use rondo_ud::udp::Clock;
//! use rondo_ud::verbs::{flow_config, VerbsConfig, VerbsDatapath};
//! use rondo_proto::{Endpoint, BufferConfig, SharedBuffer};
//! use std::net::TcpStream;
//! use std::time::Duration;
//!
//! let cfg = VerbsConfig { device: "mlx5_0".into(), paths: 8, ..VerbsConfig::default() };
//! let mut dp = VerbsDatapath::open(cfg)?;
//! let mut tcp = TcpStream::connect("192.0.2.2:18515")?;
//! let peer = dp.local_info().exchange(&mut tcp)?;
//! dp.add_peer(1, peer)?;
//! let clock = Clock::new();
//! let mut ep = Endpoint::new(SharedBuffer::new(BufferConfig::default()).unwrap());
//! let flow = flow_config(8, dp.mtu());
//! dp.check_flow(&flow)?; // after add_peer: the flow's mtu fits the send slots
//! ep.connect(clock.now(), 1, 2, &flow).unwrap();
//! loop {
//!     dp.poll(&mut ep, &clock, Duration::from_millis(1))?;
//!     # break;
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod address;
mod datapath;
mod driver;
mod error;
pub mod exchange;
pub mod flow_label;
pub mod grh;
pub mod inventory;
mod landing;
pub mod qp_attr;
pub mod rx_ring;
pub mod send;
pub mod sys;
pub mod timestamp;
pub use datapath::{flow_config, VerbsConfig, VerbsDatapath};
pub use driver::{InPlaceHost, VerbsStats};
pub use error::VerbsError;
pub use landing::LandingCounters;
