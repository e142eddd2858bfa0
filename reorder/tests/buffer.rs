//! Packet-by-packet tests of the reorder buffer: OOD and RBO at every arrival, shared
//! capacity, and errors.

use reorder::{Arena, BufferConfig, FlowId, HugePages, Outcome, Psn, ReorderBuffer, ReorderError};

fn buffer(slots: usize) -> ReorderBuffer<u32> {
    let cfg = BufferConfig {
        capacity_bytes: slots * 64,
        slot_size: 64,
        huge_pages: HugePages::Never,
        ..BufferConfig::default()
    };
    ReorderBuffer::new(cfg).unwrap()
}

/// Delivers everything now in order, returning the PSNs.
fn drain(buf: &mut ReorderBuffer<u32>, flow: FlowId) -> Vec<u32> {
    let mut out = Vec::new();
    while let Some(psn) = buf
        .pop_ready(flow, |psn, meta, payload| {
            assert_eq!((meta, payload), (psn.0, &psn.0.to_le_bytes()[..]));
            psn.0
        })
        .unwrap()
    {
        out.push(psn);
    }
    out
}

/// Feeds `psns` with a drain after each; returns (outcome, ood, rbo) per arrival.
fn feed(buf: &mut ReorderBuffer<u32>, flow: FlowId, psns: &[u32]) -> Vec<(Outcome, u32, u32)> {
    psns.iter()
        .map(|&p| {
            let a = buf.arrive(flow, Psn(p), p, &p.to_le_bytes()).unwrap();
            drain(buf, flow);
            (a.outcome, a.ood, a.rbo)
        })
        .collect()
}

#[test]
fn ood_and_rbo_are_sampled_before_each_arrival() {
    use Outcome::*;
    let mut buf = buffer(8);
    let flow = buf.add_flow(Psn(0));
    // Before 2: highest 0, expected 1. Before 3: highest 2, expected 1, 2 held.
    // Before 1: highest 3, expected 1, 2 and 3 held. 1 then delivers 2 and 3.
    let got = feed(&mut buf, flow, &[0, 2, 3, 1, 4]);
    assert_eq!(
        got,
        [
            (InOrder, 0, 0),
            (Buffered, 0, 0),
            (Buffered, 1, 1),
            (InOrder, 2, 2),
            (InOrder, 0, 0)
        ]
    );
    assert_eq!(buf.expected(flow).unwrap(), Psn(5));
    assert_eq!(buf.highest(flow).unwrap(), Some(Psn(4)));

    // 5 is lost for a while: 8, 6, 7, a duplicate 6, then 5.
    let got = feed(&mut buf, flow, &[8, 6, 7, 6, 5]);
    assert_eq!(
        got,
        [
            (Buffered, 0, 0),
            (Buffered, 3, 1),
            (Buffered, 3, 2),
            (Duplicate, 3, 3),
            (InOrder, 3, 3)
        ]
    );
    assert_eq!(buf.expected(flow).unwrap(), Psn(9));
    let stats = buf.flow_stats(flow).unwrap();
    assert_eq!(
        (
            stats.arrivals,
            stats.in_order,
            stats.buffered,
            stats.duplicates
        ),
        (10, 4, 5, 1)
    );
    assert_eq!((stats.max_ood, stats.max_rbo), (3, 3));
}

#[test]
fn ood_counts_until_drained() {
    let mut buf = buffer(8);
    let flow = buf.add_flow(Psn(0));
    buf.arrive(flow, Psn(1), 1, &1u32.to_le_bytes()).unwrap();
    assert_eq!(buf.arrive(flow, Psn(0), 0, &[]).unwrap().ood, 1);
    // 1 is ready but not yet popped: still held, still out of order.
    let a = buf.arrive(flow, Psn(1), 1, &[]).unwrap();
    assert_eq!((a.outcome, a.ood, a.rbo), (Outcome::Duplicate, 0, 1));
    assert_eq!(drain(&mut buf, flow), [1]);
}

#[test]
fn nic_ood_sums_over_flows() {
    let mut buf = buffer(8);
    let (a, b) = (buf.add_flow(Psn(0)), buf.add_flow(Psn(100)));
    assert_eq!(buf.arrive(a, Psn(3), 3, &[]).unwrap().nic_ood, 0); // a: ood 3
    assert_eq!(buf.arrive(b, Psn(102), 102, &[]).unwrap().nic_ood, 3); // b: ood 2
    assert_eq!(buf.nic_ood(), 5);
    let x = buf.arrive(a, Psn(0), 0, &[]).unwrap(); // a: ood 2
    assert_eq!((x.ood, x.nic_ood), (3, 5));
    assert_eq!(buf.nic_ood(), 4);
    assert_eq!(
        buf.arrive(b, Psn(50), 50, &[]).unwrap().outcome,
        Outcome::Duplicate
    );
    assert_eq!(buf.nic_ood(), 4);
    buf.remove_flow(a);
    assert_eq!(buf.nic_ood(), 2);
    assert_eq!(buf.stats().max_nic_ood, 5);
    assert_eq!(buf.stats().all_flows.max_ood, 3);
}

#[test]
fn flows_share_capacity() {
    let mut buf = buffer(3);
    let (a, b) = (buf.add_flow(Psn(0)), buf.add_flow(Psn(0)));
    let mut arrive = |flow, p: u32| {
        buf.arrive(flow, Psn(p), p, &p.to_le_bytes())
            .unwrap()
            .outcome
    };
    assert_eq!(arrive(a, 1), Outcome::Buffered);
    assert_eq!(arrive(b, 2), Outcome::Buffered);
    assert_eq!(arrive(a, 2), Outcome::Buffered);
    assert_eq!(arrive(b, 1), Outcome::Full);
    assert_eq!(arrive(a, 3), Outcome::Full);
    assert_eq!(buf.used_slots(), 3);
    assert_eq!(buf.free_slots(), 0);
    // A dropped packet still counts as seen: a's OOD is now 3.
    assert_eq!(buf.highest(a).unwrap(), Some(Psn(3)));
    assert!(!buf.is_received(a, Psn(3)).unwrap());
    // The expected PSN is never refused, and draining gives the slots back.
    assert_eq!(
        buf.arrive(a, Psn(0), 0, &[]).unwrap().outcome,
        Outcome::InOrder
    );
    assert_eq!(drain(&mut buf, a), [1, 2]);
    assert_eq!(buf.used_slots(), 1);
    assert_eq!(
        buf.arrive(b, Psn(1), 1, &1u32.to_le_bytes())
            .unwrap()
            .outcome,
        Outcome::Buffered
    );
    assert_eq!(buf.peak_used_slots(), 3);
    // Removing a flow frees what it holds.
    buf.remove_flow(b);
    assert_eq!(buf.used_slots(), 0);
    assert_eq!(buf.stats().all_flows.dropped_full, 2);
}

#[test]
fn zero_slots_accept_only_in_order() {
    let mut buf = buffer(0);
    let flow = buf.add_flow(Psn(u32::MAX));
    assert_eq!(buf.capacity_slots(), 0);
    assert_eq!(
        buf.arrive(flow, Psn(0), 0, &[]).unwrap().outcome,
        Outcome::Full
    );
    assert_eq!(
        buf.arrive(flow, Psn(u32::MAX), 0, &[]).unwrap().outcome,
        Outcome::InOrder
    );
    assert_eq!(
        buf.arrive(flow, Psn(0), 0, &[]).unwrap().outcome,
        Outcome::InOrder
    );
    assert_eq!(buf.expected(flow).unwrap(), Psn(1));
}

#[test]
fn far_psns_are_out_of_window() {
    let cfg = BufferConfig {
        max_distance: 16,
        huge_pages: HugePages::Never,
        ..BufferConfig::default()
    };
    let mut buf = ReorderBuffer::<()>::new(cfg).unwrap();
    let flow = buf.add_flow(Psn(10));
    assert_eq!(
        buf.arrive(flow, Psn(26), (), &[]).unwrap().outcome,
        Outcome::OutOfWindow
    );
    assert_eq!(buf.highest(flow).unwrap(), None);
    assert_eq!(
        buf.arrive(flow, Psn(25), (), &[]).unwrap().outcome,
        Outcome::Buffered
    );
    assert_eq!(
        buf.arrive(flow, Psn(9), (), &[]).unwrap().outcome,
        Outcome::Duplicate
    );
    assert_eq!(buf.highest(flow).unwrap(), Some(Psn(25)));
    assert!(buf.is_received(flow, Psn(9)).unwrap());
    assert!(buf.is_received(flow, Psn(25)).unwrap());
    assert!(!buf.is_received(flow, Psn(10)).unwrap());
    assert_eq!(buf.stats().all_flows.dropped_out_of_window, 1);
}

#[test]
fn errors_are_typed() {
    let mut buf = buffer(2);
    let flow = buf.add_flow(Psn(0));
    let err = buf.arrive(flow, Psn(1), 1, &[7; 65]).unwrap_err();
    assert!(matches!(
        err,
        ReorderError::PayloadTooLarge {
            len: 65,
            slot_size: 64
        }
    ));
    assert_eq!(buf.used_slots(), 0);
    assert_eq!(buf.highest(flow).unwrap(), None);
    assert!(matches!(
        buf.arrive(flow, Psn(0), 0, &[7; 65]),
        Err(ReorderError::PayloadTooLarge { .. })
    ));
    assert_eq!(buf.expected(flow).unwrap(), Psn(0));

    buf.remove_flow(flow);
    let unknown =
        |r: Result<_, ReorderError>| matches!(r, Err(ReorderError::UnknownFlow(f)) if f == flow);
    assert!(unknown(buf.expected(flow).map(drop)));
    assert!(unknown(buf.highest(flow).map(drop)));
    assert!(unknown(buf.is_received(flow, Psn(0)).map(drop)));
    assert!(unknown(buf.arrive(flow, Psn(0), 0, &[]).map(drop)));
    assert!(unknown(buf.pop_ready(flow, |_, _, _| ()).map(drop)));
    assert!(unknown(buf.flow_stats(flow).map(drop)));
    assert_ne!(buf.add_flow(Psn(0)), flow, "ids are not reused");

    let cfg = BufferConfig {
        slot_size: 0,
        ..BufferConfig::default()
    };
    assert!(matches!(
        ReorderBuffer::<()>::new(cfg),
        Err(ReorderError::ZeroSlotSize)
    ));
    assert!(matches!(
        Arena::new(0, HugePages::Auto),
        Err(ReorderError::ZeroCapacity)
    ));
    assert!(ReorderError::HugePagesUnavailable
        .to_string()
        .contains("echo 16 > /proc/sys/vm/nr_hugepages"));
}

#[test]
fn default_config_is_1200_kb_of_1500_byte_slots() {
    let buf = ReorderBuffer::<()>::new(BufferConfig::default()).unwrap();
    assert_eq!(buf.capacity_slots(), 1_228_800 / 1500);
    assert!(buf.memory().bytes().len() >= 1_228_800);
    assert_eq!(buf.slot_size(), 1500);
}

/// A flow's id names its place in the buffer's table and that place's
/// generation: a removed flow's place is taken again (the table stays as large
/// as the flows held at once), under a new id, and every old or forged id stays
/// unknown, whatever the churn.
#[test]
fn places_are_reused_under_new_ids() {
    let mut buf = buffer(4);
    let keep = buf.add_flow(Psn(0));
    let mut retired = Vec::new();
    let mut places = std::collections::HashSet::new();
    for round in 0..1000u32 {
        let a = buf.add_flow(Psn(round));
        let b = buf.add_flow(Psn(round));
        assert_ne!(a, b);
        assert_eq!(buf.expected(a).unwrap(), Psn(round));
        places.insert(a.place());
        places.insert(b.place());
        buf.remove_flow(a);
        buf.remove_flow(b);
        retired.extend([a, b]);
    }
    assert!(places.len() <= 3, "places used: {}", places.len());
    let fresh = buf.add_flow(Psn(7));
    for old in &retired {
        assert_ne!(*old, fresh);
        assert!(matches!(
            buf.expected(*old),
            Err(ReorderError::UnknownFlow(f)) if f == *old
        ));
        buf.remove_flow(*old); // ignored: it names a flow no longer held
    }
    assert_eq!(buf.expected(fresh).unwrap(), Psn(7));
    assert_eq!(buf.expected(keep).unwrap(), Psn(0));
    for forged in [
        FlowId(u64::MAX),
        FlowId(1 << 40 | u64::from(keep.place())),
        FlowId(99),
    ] {
        assert!(matches!(
            buf.expected(forged),
            Err(ReorderError::UnknownFlow(_))
        ));
        assert!(buf.arrive(forged, Psn(0), 0, &[]).is_err());
        buf.remove_flow(forged);
        buf.prefetch_place(forged.place());
    }
    assert_eq!(buf.expected(keep).unwrap(), Psn(0));
}
