//! The receiver NIC's in-order reorder buffer: fixed-size slots carved from one
//! [`Arena`], shared by all flows, with OOD and RBO accounting (DESIGN.md, Metrics).

use crate::{HugePages, Psn, ReorderError, SlotMemory};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;

/// How a [`ReorderBuffer`] is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferConfig {
    /// Bytes of slots shared by all flows; the buffer holds `capacity_bytes / slot_size`
    /// slots (0 is allowed: then only in-order packets are accepted).
    pub capacity_bytes: usize,
    /// Bytes of one slot: the largest payload a packet can carry.
    pub slot_size: usize,
    /// Whether the arena uses huge pages ([`ReorderBuffer::new`] only).
    pub huge_pages: HugePages,
    /// A PSN at or beyond `expected + max_distance` is rejected as
    /// [`Outcome::OutOfWindow`]; taken to lie in `1..=2^31 - 1`.
    pub max_distance: u32,
}

impl Default for BufferConfig {
    /// 1.2 MB (1200 KB) of 1500-byte slots (819 slots), huge pages when available,
    /// PSNs up to 2^20 ahead.
    fn default() -> Self {
        BufferConfig {
            capacity_bytes: 1_228_800,
            slot_size: 1500,
            huge_pages: HugePages::Auto,
            max_distance: 1 << 20,
        }
    }
}

/// Least number of distances a flow's ring of held packets covers, however few
/// slots the buffer has.
const MIN_RING: usize = 256;

/// Names a flow of a [`ReorderBuffer`]: its place in the buffer's table of
/// flows (the low 32 bits) and how many flows that place held before it (the
/// high 32 bits). An id is not reused after [`ReorderBuffer::remove_flow`]
/// (until one place has held 2^32 flows), and a lookup is an index and a
/// compare: no hash, and an address known before anything is read
/// ([`ReorderBuffer::prefetch_place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowId(pub u64);

impl FlowId {
    /// The flow's place in its buffer's table.
    pub fn place(self) -> u32 {
        self.0 as u32
    }

    /// The flows that place held before this one.
    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }

    fn new(place: u32, generation: u32) -> FlowId {
        FlowId(u64::from(generation) << 32 | u64::from(place))
    }
}

/// The flow `flow` names in `flows` (a function of the table alone, so that
/// the buffer's other fields stay usable beside it).
fn flow_mut<M>(flows: &mut [Place<M>], flow: FlowId) -> Result<&mut Flow<M>, ReorderError> {
    match flows.get_mut(flow.place() as usize) {
        Some(Place { id, flow: Some(f) }) if *id == flow => Ok(f),
        _ => Err(ReorderError::UnknownFlow(flow)),
    }
}

/// One place of the table of flows: the id of the flow it holds or held last.
struct Place<M> {
    id: FlowId,
    flow: Option<Flow<M>>,
}

/// What [`ReorderBuffer::arrive`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The PSN was the expected one: `expected` advanced by one and nothing was copied;
    /// the caller places the payload itself, then drains with [`ReorderBuffer::pop_ready`].
    InOrder,
    /// A PSN after the expected one, copied into a free slot.
    Buffered,
    /// A PSN before the expected one, or already held: nothing changed.
    Duplicate,
    /// A PSN after the expected one with no free slot: dropped, for the sender to resend
    /// (the engine NAKs it, paper §6.2.1). The expected PSN itself is never refused.
    Full,
    /// A PSN at least `max_distance` after the expected one: dropped.
    OutOfWindow,
}

/// The result of one arrival, with the metrics sampled just before it was applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// What happened to the packet.
    pub outcome: Outcome,
    /// The flow's OOD (out-of-order degree, paper §2.2): highest PSN seen so far minus
    /// the expected PSN, clamped at 0; 0 before the first arrival.
    pub ood: u32,
    /// The flow's RBO (reorder-buffer occupancy): packets it holds out of order.
    pub rbo: u32,
    /// NIC-level OOD: the sum of OOD over all flows of this buffer.
    pub nic_ood: u64,
}

/// Counters of one flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Calls to [`ReorderBuffer::arrive`] that returned an [`Arrival`].
    pub arrivals: u64,
    /// [`Outcome::InOrder`] arrivals.
    pub in_order: u64,
    /// [`Outcome::Buffered`] arrivals.
    pub buffered: u64,
    /// [`Outcome::Duplicate`] arrivals.
    pub duplicates: u64,
    /// [`Outcome::Full`] arrivals.
    pub dropped_full: u64,
    /// [`Outcome::OutOfWindow`] arrivals.
    pub dropped_out_of_window: u64,
    /// Largest OOD sampled.
    pub max_ood: u32,
    /// Largest RBO sampled.
    pub max_rbo: u32,
}

/// Counters over all flows, removed ones included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferStats {
    /// The per-flow counters added up over all flows; `max_ood` and `max_rbo` are
    /// the largest per-flow values sampled.
    pub all_flows: FlowStats,
    /// Largest NIC-level OOD sampled.
    pub max_nic_ood: u64,
}

impl FlowStats {
    fn record(&mut self, a: &Arrival) {
        self.arrivals += 1;
        *match a.outcome {
            Outcome::InOrder => &mut self.in_order,
            Outcome::Buffered => &mut self.buffered,
            Outcome::Duplicate => &mut self.duplicates,
            Outcome::Full => &mut self.dropped_full,
            Outcome::OutOfWindow => &mut self.dropped_out_of_window,
        } += 1;
        self.max_ood = self.max_ood.max(a.ood);
        self.max_rbo = self.max_rbo.max(a.rbo);
    }
}

impl BufferStats {
    fn record(&mut self, a: &Arrival) {
        self.all_flows.record(a);
        self.max_nic_ood = self.max_nic_ood.max(a.nic_ood);
    }
}

/// A packet held in a slot.
#[derive(Clone, Copy)]
struct Held<M> {
    slot: usize,
    len: usize,
    meta: M,
}

struct Flow<M> {
    expected: Psn,
    /// Highest PSN seen by an InOrder, Buffered or Full arrival.
    highest: Option<Psn>,
    /// `held[i]` is PSN `expected + i`, for `i` below the buffer's `ring_len`;
    /// empty, or its last entry is occupied.
    held: VecDeque<Option<Held<M>>>,
    /// Packets held further ahead, by position (`advanced` + distance from
    /// `expected`): what a far-ahead PSN costs is one entry, not a ring reaching
    /// out to it (a forged PSN 2^20 ahead used to cost 48 MiB).
    far: BTreeMap<u64, Held<M>>,
    /// PSNs `expected` has advanced by since the flow started.
    advanced: u64,
    rbo: u32,
    stats: FlowStats,
}

impl<M: Copy> Flow<M> {
    fn ood(&self) -> u32 {
        self.highest
            .map_or(0, |h| h.diff(self.expected).max(0) as u32)
    }

    fn holds(&self, offset: usize) -> bool {
        matches!(self.held.get(offset), Some(Some(_)))
            || (!self.far.is_empty() && self.far.contains_key(&(self.advanced + offset as u64)))
    }

    /// `expected` moved on by one (entry 0 of `held` is gone): the packet held
    /// far ahead that is now `ring_len - 1` ahead moves into the ring.
    fn advance(&mut self, ring_len: usize) {
        self.advanced += 1;
        while let Some(e) = self.far.first_entry() {
            let offset = (*e.key() - self.advanced) as usize;
            if offset >= ring_len {
                break;
            }
            let h = e.remove();
            if self.held.len() <= offset {
                self.held.resize(offset + 1, None);
            }
            self.held[offset] = Some(h);
        }
    }
}

/// Hashes flow ids for the buffer's flow table (and an endpoint's, and the verbs
/// layer's QP numbers and memory keys): every packet looks its flow up several
/// times, so a multiplicative hash (Fibonacci hashing, its high half folded into
/// the low one, which picks the bucket) replaces the default SipHash, which took
/// 3-6% of a receiver's CPU in `rondo perf`. The tables' keys are the host's own,
/// never chosen by a peer (a forged one is only looked up), so flooding a bucket
/// is not a concern.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowIdHash;

impl std::hash::BuildHasher for FlowIdHash {
    type Hasher = FlowIdHasher;
    fn build_hasher(&self) -> FlowIdHasher {
        FlowIdHasher(0)
    }
}

/// The hasher of [`FlowIdHash`].
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowIdHasher(u64);

impl std::hash::Hasher for FlowIdHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The in-order reorder buffer of one receiving NIC, shared by all its flows.
///
/// Slots of `slot_size` bytes are carved from one [`SlotMemory`]; each flow keeps a ring of
/// held packets indexed by `psn - expected`, grown on demand up to the buffer's slot
/// count (at least 256) and reused afterwards, so steady-state arrivals
/// allocate nothing; packets held further ahead (up to `max_distance`) are kept by
/// position in a map, so that a flow's bookkeeping is bounded by the slots it holds,
/// not by how far ahead a PSN claims to be. `M` is the small
/// per-packet metadata the caller gets back with each payload.
pub struct ReorderBuffer<M: Copy> {
    memory: Box<dyn SlotMemory>,
    slot_size: usize,
    capacity: usize,
    free: Vec<usize>,
    peak_used: usize,
    max_distance: u32,
    /// Distances from `expected` that a flow's ring covers.
    ring_len: usize,
    /// The flows by [`FlowId::place`].
    flows: Vec<Place<M>>,
    /// Places whose flow was removed, the longest vacant first (so that a
    /// place's generation grows as slowly as the churn allows).
    vacant: VecDeque<u32>,
    /// Flows held.
    live: usize,
    nic_ood: u64,
    stats: BufferStats,
}

impl<M: Copy> ReorderBuffer<M> {
    /// Maps an [`Arena`](crate::Arena) for `cfg.capacity_bytes / cfg.slot_size`
    /// slots (at least one page, even for 0 slots), with `cfg.huge_pages`.
    ///
    /// Errors: [`ReorderError::ZeroSlotSize`], or an `Arena::new` error.
    #[cfg(feature = "arena")]
    pub fn new(cfg: BufferConfig) -> Result<Self, ReorderError> {
        let bytes = Self::bytes_needed(&cfg)?;
        let arena = crate::Arena::new(bytes.max(1), cfg.huge_pages)?;
        Self::with_memory(cfg, Box::new(arena))
    }

    /// The slots in zeroed heap memory (`cfg.huge_pages` is not used).
    pub fn in_heap(cfg: BufferConfig) -> Result<Self, ReorderError> {
        let bytes = Self::bytes_needed(&cfg)?;
        let memory: Box<[u8]> = vec![0u8; bytes].into_boxed_slice();
        Self::with_memory(cfg, Box::new(memory))
    }

    /// The slots in `memory`, which the caller made (registered with a NIC, say);
    /// `cfg.huge_pages` is not used.
    ///
    /// Errors: [`ReorderError::ZeroSlotSize`], [`ReorderError::MemoryTooSmall`].
    pub fn with_memory(
        cfg: BufferConfig,
        memory: Box<dyn SlotMemory>,
    ) -> Result<Self, ReorderError> {
        let need = Self::bytes_needed(&cfg)?;
        let len = memory.bytes().len();
        if len < need {
            return Err(ReorderError::MemoryTooSmall { len, need });
        }
        let capacity = cfg.capacity_bytes / cfg.slot_size;
        let max_distance = cfg.max_distance.clamp(1, i32::MAX as u32);
        Ok(ReorderBuffer {
            memory,
            slot_size: cfg.slot_size,
            capacity,
            free: (0..capacity).rev().collect(),
            peak_used: 0,
            max_distance,
            ring_len: capacity.max(MIN_RING).min(max_distance as usize),
            flows: Vec::new(),
            vacant: VecDeque::new(),
            live: 0,
            nic_ood: 0,
            stats: BufferStats::default(),
        })
    }

    /// Bytes of slot memory `cfg` asks for: whole slots only.
    fn bytes_needed(cfg: &BufferConfig) -> Result<usize, ReorderError> {
        if cfg.slot_size == 0 {
            return Err(ReorderError::ZeroSlotSize);
        }
        Ok(cfg.capacity_bytes / cfg.slot_size * cfg.slot_size)
    }

    /// The memory all slots live in; slot `i` starts at byte `i * slot_size`.
    pub fn memory(&self) -> &dyn SlotMemory {
        &*self.memory
    }

    /// Bytes of one slot.
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Starts a flow whose first expected PSN is `first_expected`.
    pub fn add_flow(&mut self, first_expected: Psn) -> FlowId {
        let id = match self.vacant.pop_front() {
            Some(place) => {
                let last = self.flows[place as usize].id;
                FlowId::new(place, last.generation().wrapping_add(1))
            }
            None => {
                // A place per flow held at once: 2^32 of them would be hundreds
                // of gigabytes of flow state before the index could wrap.
                let place = self.flows.len() as u32;
                self.flows.push(Place {
                    id: FlowId::new(place, 0),
                    flow: None,
                });
                FlowId::new(place, 0)
            }
        };
        let flow = Flow {
            expected: first_expected,
            highest: None,
            held: VecDeque::new(),
            far: BTreeMap::new(),
            advanced: 0,
            rbo: 0,
            stats: FlowStats::default(),
        };
        self.flows[id.place() as usize] = Place {
            id,
            flow: Some(flow),
        };
        self.live += 1;
        id
    }

    /// Ends a flow and frees the slots it holds; an unknown flow is ignored.
    pub fn remove_flow(&mut self, flow: FlowId) {
        let Some(place) = self.flows.get_mut(flow.place() as usize) else {
            return;
        };
        if place.id != flow {
            return;
        }
        if let Some(f) = place.flow.take() {
            self.nic_ood -= u64::from(f.ood());
            self.free.extend(f.held.iter().flatten().map(|h| h.slot));
            self.free.extend(f.far.values().map(|h| h.slot));
            self.vacant.push_back(flow.place());
            self.live -= 1;
        }
    }

    /// Asks for the cache line of the state of the flow at `place`
    /// ([`FlowId::place`]), which its next arrival reads first
    /// ([`crate::prefetch()`]); reads nothing but the table's address.
    pub fn prefetch_place(&self, place: u32) {
        if let Some(p) = self.flows.get(place as usize) {
            crate::prefetch(p);
        }
    }

    fn flow(&self, flow: FlowId) -> Result<&Flow<M>, ReorderError> {
        match self.flows.get(flow.place() as usize) {
            Some(Place { id, flow: Some(f) }) if *id == flow => Ok(f),
            _ => Err(ReorderError::UnknownFlow(flow)),
        }
    }

    /// The next expected PSN: the flow's cumulative ACK.
    pub fn expected(&self, flow: FlowId) -> Result<Psn, ReorderError> {
        Ok(self.flow(flow)?.expected)
    }

    /// The highest PSN seen so far, `None` before the first arrival. Seen means an
    /// [`Outcome::InOrder`], [`Outcome::Buffered`] or [`Outcome::Full`] arrival: a packet
    /// dropped for lack of space was still received by the NIC, so OOD measures the
    /// network's reordering whatever the buffer size. Duplicates and
    /// [`Outcome::OutOfWindow`] PSNs never count.
    pub fn highest(&self, flow: FlowId) -> Result<Option<Psn>, ReorderError> {
        Ok(self.flow(flow)?.highest)
    }

    /// True when `psn` is before the expected PSN or held in a slot: the arrival bitmap.
    pub fn is_received(&self, flow: FlowId, psn: Psn) -> Result<bool, ReorderError> {
        let f = self.flow(flow)?;
        let d = psn.diff(f.expected);
        Ok(d < 0 || f.holds(d as usize))
    }

    /// A data packet arrived. OOD, RBO and NIC-level OOD are sampled *before* it is
    /// applied (DESIGN.md, Metrics). An out-of-order payload is copied into a slot; an
    /// in-order one is left to the caller.
    ///
    /// Errors: [`ReorderError::UnknownFlow`]; [`ReorderError::PayloadTooLarge`] when the
    /// payload exceeds a slot (checked before anything changes, whatever the PSN).
    pub fn arrive(
        &mut self,
        flow: FlowId,
        psn: Psn,
        meta: M,
        payload: &[u8],
    ) -> Result<Arrival, ReorderError> {
        let f = flow_mut(&mut self.flows, flow)?;
        if payload.len() > self.slot_size {
            return Err(ReorderError::PayloadTooLarge {
                len: payload.len(),
                slot_size: self.slot_size,
            });
        }
        let (ood, rbo, nic_ood) = (f.ood(), f.rbo, self.nic_ood);
        let d = psn.diff(f.expected);
        let outcome = if d < 0 || f.holds(d as usize) {
            Outcome::Duplicate
        } else if d as u32 >= self.max_distance {
            Outcome::OutOfWindow
        } else if d == 0 {
            f.held.pop_front();
            f.expected = f.expected.next();
            f.advance(self.ring_len);
            Outcome::InOrder
        } else if let Some(slot) = self.free.pop() {
            let start = slot * self.slot_size;
            self.memory.bytes_mut()[start..start + payload.len()].copy_from_slice(payload);
            let offset = d as usize;
            let held = Held {
                slot,
                len: payload.len(),
                meta,
            };
            if offset >= self.ring_len {
                f.far.insert(f.advanced + offset as u64, held);
            } else {
                if f.held.len() <= offset {
                    f.held.resize(offset + 1, None);
                }
                f.held[offset] = Some(held);
            }
            f.rbo += 1;
            self.peak_used = self.peak_used.max(self.capacity - self.free.len());
            Outcome::Buffered
        } else {
            Outcome::Full
        };
        if matches!(
            outcome,
            Outcome::InOrder | Outcome::Buffered | Outcome::Full
        ) {
            f.highest = Some(f.highest.map_or(psn, |h| h.max_of(psn)));
            self.nic_ood = self.nic_ood - u64::from(ood) + u64::from(f.ood());
        }
        let arrival = Arrival {
            outcome,
            ood,
            rbo,
            nic_ood,
        };
        f.stats.record(&arrival);
        self.stats.record(&arrival);
        Ok(arrival)
    }

    /// If the expected PSN is held, delivers it: advances `expected`, calls
    /// `f(psn, meta, payload)`, then frees its slot. `Ok(None)` when the expected PSN is
    /// not held. Call it after [`Outcome::InOrder`] (or at any time) until it returns
    /// `Ok(None)`.
    pub fn pop_ready<R>(
        &mut self,
        flow: FlowId,
        f: impl FnOnce(Psn, M, &[u8]) -> R,
    ) -> Result<Option<R>, ReorderError> {
        let fl = flow_mut(&mut self.flows, flow)?;
        let Some(&Some(held)) = fl.held.front() else {
            return Ok(None);
        };
        let ood_before = fl.ood();
        let psn = fl.expected;
        fl.held.pop_front();
        fl.expected = psn.next();
        fl.advance(self.ring_len);
        fl.rbo -= 1;
        self.nic_ood = self.nic_ood - u64::from(ood_before) + u64::from(fl.ood());
        let start = held.slot * self.slot_size;
        let r = f(
            psn,
            held.meta,
            &self.memory.bytes()[start..start + held.len],
        );
        self.free.push(held.slot);
        Ok(Some(r))
    }

    /// Slots holding a packet, over all flows.
    pub fn used_slots(&self) -> usize {
        self.capacity - self.free.len()
    }

    /// Slots in the buffer: `capacity_bytes / slot_size`.
    pub fn capacity_slots(&self) -> usize {
        self.capacity
    }

    /// Slots free for any flow.
    pub fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Most slots ever used at once.
    pub fn peak_used_slots(&self) -> usize {
        self.peak_used
    }

    /// NIC-level OOD now: the sum of the current OOD of every flow.
    pub fn nic_ood(&self) -> u64 {
        self.nic_ood
    }

    /// Counters of one flow.
    pub fn flow_stats(&self, flow: FlowId) -> Result<FlowStats, ReorderError> {
        Ok(self.flow(flow)?.stats)
    }

    /// Counters over all flows, removed ones included.
    pub fn stats(&self) -> BufferStats {
        self.stats
    }
}

impl<M: Copy> fmt::Debug for ReorderBuffer<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReorderBuffer")
            .field("slot_size", &self.slot_size)
            .field("capacity_slots", &self.capacity)
            .field("used_slots", &self.used_slots())
            .field("flows", &self.live)
            .field("nic_ood", &self.nic_ood)
            .finish_non_exhaustive()
    }
}
