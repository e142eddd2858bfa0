//! Rondo's switch in userspace: a fabric emulator over UDP, and the control plane
//! of the P4 program in `p4/`, both read from one topology file.
//!
//! Rondo asks three things of the switch (paper §5): steer by UDP source port, serve
//! data before probes (strict priority), and drop probes early (a small per-queue
//! threshold). [`Switch`] does that sans-IO, [`Fabric`] runs it on a thread over
//! UDP sockets (`rondo fabric`), [`p4`] writes the same forwarding table as P4
//! table entries (`rondo p4-config`).
//!
//! ```
//! use rondo_fabric::{Switch, Topology, Verdict};
//! use rondo_proto::time::Instant;
//!
//! let topo = Topology::parse(r#"
//!     listen = "127.0.0.1:4900"
//!     [[host]]
//!     name = "a"
//!     ip = "127.0.0.1"
//!     base_port = 20000
//!     ports = 2
//!     [[host]]
//!     name = "b"
//!     ip = "127.0.0.1"
//!     base_port = 21000
//!     ports = 2
//!     [[path]]
//!     rate_mbps = 100
//!     delay_us = 1000
//!     [[path]]
//!     rate_mbps = 50
//!     delay_us = 2000
//! "#, &[]).unwrap();
//! let mut sw = Switch::new(&topo, Instant::ZERO);
//! let mut data = vec![0u8; 1250];
//! data[0] = 1; // Rondo version 1
//! data[1] = 1; // DATA
//! let from = "127.0.0.1:20001".parse().unwrap(); // a's second port: path 1
//! assert!(matches!(sw.arrive(Instant::ZERO, from, &data), Verdict::Queued { path: 1, .. }));
//! // 1250 B at 50 Mb/s take 200 us, then 2 ms of propagation.
//! let d = sw.poll_delivery(Instant::from_us(2200)).unwrap();
//! assert_eq!(d.due, Instant::from_us(2200));
//! assert_eq!(d.to, "127.0.0.1:21001".parse().unwrap());
//! ```

pub mod accuracy;
pub mod counters;
pub mod p4;
pub mod run;
pub mod switch;
pub mod topology;

pub use counters::{ClassCounters, Counters, EgressCounters};
pub use run::{Fabric, FabricError, Report};
pub use switch::{classify, Class, Delivery, Switch, Verdict};
pub use topology::{RouteEntry, Topology, TopologyError};
