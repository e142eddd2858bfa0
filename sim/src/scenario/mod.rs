//! Scenarios: TOML files (or built-ins) that describe a topology, a transport, a
//! workload and timed events, and run them on the simulator.
//!
//! ```
//! use rondo_sim::scenario::{parse, Override};
//!
//! let text = r#"
//!     seed = 1
//!     duration_us = 500
//!     [topology]
//!     kind = "parallel"
//!     host_gbps = 100
//!     paths = [ { gbps = 25, delay_us = 5.0 }, { gbps = 10, delay_us = 15.0 } ]
//!     [workload]
//!     kind = "long_flows"
//! "#;
//! let set = Override::parse("transport.reorder_buffer_kb=32").unwrap();
//! let scenario = parse("example.toml", text, &[set]).unwrap();
//! scenario.check("example.toml").unwrap();
//! assert_eq!(scenario.transport.reorder_buffer_kb, 32.0);
//! ```

mod builtin;
mod cdf;
mod check;
mod error;
mod load;
mod report;
mod run;
mod schema;
pub mod workload;

pub use builtin::{
    builtin, builtins, fig24_cliff, Builtin, BuiltinRun, SweepPoint, FIG24_OOD, FIG4_EXTRA_US,
    HETERO_BUFFER_KB, HOST_STALL_MS, HOST_STALL_SERIES,
};
pub use cdf::{CdfError, FlowSizeCdf, HADOOP, WEB_SEARCH};
pub use check::MTU_RANGE;
pub use error::ScenarioError;
pub use load::{load, parse, Override};
pub use report::{
    Drops, NicDistribution, Percentiles, Queues, Report, Retransmissions, SimStats, WorkloadResult,
};
pub use run::{build, link_name, run, Outcome, RunOptions};
pub use schema::{
    AllToAllSpec, BackgroundSpec, BaseRttSpec, CdfName, Clos3Spec, CollectiveOp, CollectiveSpec,
    EventAction, EventSpec, FatTreeSpec, Fig2Spec, IncastSpec, LongFlowsSpec, LossRecoverySpec,
    MarginScopeSpec, ParallelSpec, PathEntry, PathSelectionSpec, PermutationSpec, PhaseSpec,
    PoissonSpec, RoutingSpec, Scenario, SwitchSpec, TauQBaseSpec, TauQFloorSpec, TopologySpec,
    TransportKind, TransportSpec, WorkloadSpec, Workloads, PLANNED_TRANSPORTS,
};
