//! Adaptive routing: the hosts run ECMP's parts (DCQCN, one logical path,
//! selective repeat, the shared reorder buffer) and the switches spread the
//! packets, each to the equal-cost next hop with the shortest queue. The engine
//! cannot route; the simulator switches its fabric to adaptive routing for this
//! transport (`[switch] routing = "adaptive"`, unless a scenario sets another).
//! Packets of one flow then arrive out of order, and the reorder buffer takes
//! them.

use super::{ecmp, Entry};

pub(super) const ENTRY: Entry = Entry {
    name: "ar",
    description: "switch adaptive routing (in the fabric), DCQCN, selective repeat",
    sender: ecmp::sender,
    receiver: ecmp::receiver,
};
