//! Bad input from the network: truncated datagrams, wrong QP, wrong or missing
//! token, PSN far outside the window, garbage. Counted and dropped, never applied,
//! never a panic; the QPs keep working.

mod common;
use common::*;
use rondo_proto::rng::Rng;
use rondo_proto::wire::{Body, CommonRepr, DataRepr, Flags, Repr};
use rondo_proto::Psn;
use rondo_verbs::header::HEADER_LEN;
use rondo_verbs::*;

/// A DATA datagram carrying a verbs WRITE of `b"EVIL"` into `target`.
fn forged_write(flow: u32, psn: u32, token: Option<u64>, target: &MemoryRegion) -> Vec<u8> {
    let mut msg = vec![0u8; HEADER_LEN + 4];
    msg[0] = 1; // version
    msg[1] = 2; // WRITE
    msg[16..24].copy_from_slice(&target.addr().to_be_bytes());
    msg[24..28].copy_from_slice(&target.rkey().to_be_bytes());
    msg[32..40].copy_from_slice(&4u64.to_be_bytes());
    msg[HEADER_LEN..].copy_from_slice(b"EVIL");
    let repr = Repr {
        common: CommonRepr {
            flow,
            psn: Psn(psn),
            path: 0,
            flags: Flags::empty(),
            timestamp_ns: 1,
        },
        body: Body::Data(DataRepr {
            msg_id: 0,
            msg_len: msg.len() as u64,
            offset: 0,
            payload_len: msg.len(),
        }),
    };
    repr.to_datagram(&msg, token).unwrap()
}

fn untouched(mr: &MemoryRegion) {
    let mut got = [0u8; 4];
    mr.read(0, &mut got).unwrap();
    assert_eq!(got, [0; 4], "a forged WRITE was applied");
}

/// After the abuse the pair still moves bytes exactly.
fn still_works(p: &Pair) {
    let data = pattern(9, 5000);
    p.a.mr.write(100, &data).unwrap();
    let to = RemoteAddr {
        addr: p.b.mr.addr() + 100,
        rkey: p.b.mr.rkey(),
    };
    p.a.qp
        .post_send(&SendWr::write(1, vec![Sge::new(&p.a.mr, 100, 5000)], to))
        .unwrap();
    assert_eq!(one(&p.a.cq).status, WcStatus::Success);
    let mut got = vec![0; 5000];
    p.b.mr.read(100, &mut got).unwrap();
    assert_eq!(got, data);
}

fn token(p: &Pair) -> u64 {
    p.a.qp.endpoint().token ^ p.b.qp.endpoint().token
}

#[test]
fn wrong_or_missing_token_is_dropped_and_counted() {
    let p = pair(1 << 16);
    let qpn = p.b.qp.qp_num();
    let good = token(&p);
    for t in [None, Some(good ^ 1), Some(0), Some(u64::MAX)] {
        p.fabric
            .inject(&p.b.ctx, 0, &forged_write(qpn, 0, t, &p.b.mr))
            .unwrap();
    }
    p.fabric.run_until(p.fabric.now() + Duration::from_us(100));
    assert_eq!(p.b.ctx.stats().bad_token, 4);
    assert_eq!(p.b.qp.stats().data_packets_received, 0);
    untouched(&p.b.mr);
    still_works(&p);
}

#[test]
fn wrong_qp_is_dropped_and_counted() {
    let p = pair(1 << 16);
    let qpn = p.b.qp.qp_num();
    let before = p.b.ctx.stats();
    for flow in [qpn ^ 1, 0, u32::MAX, p.a.qp.qp_num()] {
        if flow != qpn {
            p.fabric
                .inject(
                    &p.b.ctx,
                    0,
                    &forged_write(flow, 0, Some(token(&p)), &p.b.mr),
                )
                .unwrap();
        }
    }
    let after = p.b.ctx.stats();
    assert_eq!(after.unknown_qp - before.unknown_qp, 4);
    untouched(&p.b.mr);
    still_works(&p);
}

#[test]
fn truncated_datagrams_are_dropped_and_counted() {
    let p = pair(1 << 16);
    let d = forged_write(p.b.qp.qp_num(), 0, Some(token(&p)), &p.b.mr);
    for n in 0..d.len() {
        p.fabric.inject(&p.b.ctx, 0, &d[..n]).unwrap();
    }
    let s = p.b.ctx.stats();
    // Cuts inside the headers do not parse; cuts inside the payload parse but
    // contradict the message length, and the engine drops them.
    assert!(s.malformed >= 60, "{s:?}");
    assert_eq!(
        s.malformed + s.bad_token + p.b.qp.stats().dropped_inconsistent,
        d.len() as u64,
        "{s:?}"
    );
    untouched(&p.b.mr);
    still_works(&p);
}

#[test]
fn psn_far_outside_the_window_is_dropped_and_counted() {
    let p = pair(1 << 16);
    let t = Some(token(&p));
    for psn in [1 << 21, 1 << 25, 1 << 29, (1 << 30) + 7] {
        p.fabric
            .inject(&p.b.ctx, 0, &forged_write(p.b.qp.qp_num(), psn, t, &p.b.mr))
            .unwrap();
    }
    p.fabric.run_until(p.fabric.now() + Duration::from_us(100));
    let s = p.b.qp.stats();
    assert_eq!(s.dropped_out_of_window, 4, "{s:?}");
    untouched(&p.b.mr);
    still_works(&p);
}

#[test]
fn garbage_never_panics_and_is_counted() {
    let p = pair(1 << 16);
    let mut rng = Rng::new(42);
    // A wrong token: byte flips in the header cannot make it right.
    let good = forged_write(p.b.qp.qp_num(), 0, Some(token(&p) ^ 0xdead), &p.b.mr);
    let mut injected = 0;
    for i in 0..5000 {
        let mut d = if i % 2 == 0 {
            let n = rng.gen_range(0..200) as usize;
            (0..n).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>()
        } else {
            good.clone()
        };
        if i % 2 == 1 {
            // Flip a few bytes of a valid-looking datagram (header or token).
            for _ in 0..3 {
                let k = rng.gen_range(0..48) as usize;
                d[k] ^= 1 + rng.gen_range(0..255) as u8;
            }
        }
        p.fabric.inject(&p.b.ctx, (i % 4) as u16, &d).unwrap();
        injected += 1;
    }
    p.fabric.run_until(p.fabric.now() + Duration::from_us(200));
    let s = p.b.ctx.stats();
    assert_eq!(s.datagrams, injected);
    assert_eq!(s.malformed + s.unknown_qp + s.bad_token, injected, "{s:?}");
    assert_eq!(p.b.qp.stats().data_packets_received, 0);
    untouched(&p.b.mr);
    still_works(&p);
}

#[test]
fn endpoint_descriptors_round_trip_and_refuse_garbage() {
    let p = pair(1 << 16);
    let e = p.a.qp.endpoint();
    let b = e.to_bytes();
    assert_eq!(QpEndpoint::from_bytes(&b).unwrap(), e);
    for n in 0..b.len() {
        assert!(QpEndpoint::from_bytes(&b[..n]).is_err());
    }
    let mut extra = b.clone();
    extra.push(0);
    assert!(QpEndpoint::from_bytes(&extra).is_err());
    let udp = QpEndpoint {
        addr: PeerAddr::Udp {
            paths: vec![
                "127.0.0.1:5000".parse().unwrap(),
                "[::1]:6000".parse().unwrap(),
            ],
        },
        ..e.clone()
    };
    assert_eq!(QpEndpoint::from_bytes(&udp.to_bytes()).unwrap(), udp);
    // Mismatched paths are refused at connect.
    let other = QpEndpoint {
        paths: e.paths + 1,
        ..e
    };
    assert!(matches!(
        p.b.qp.connect(&other),
        Err(VerbsError::BadEndpoint(_))
    ));
}

#[test]
fn keys_differ_between_contexts_and_registrations() {
    let fabric = MemFabric::new(3, FabricConfig::default()).unwrap();
    let a = side(&fabric, 1, &QpInitAttr::default(), 4096);
    let b = side(&fabric, 1, &QpInitAttr::default(), 4096); // same attr seed
    let a2 = a.pd.register(4096, AccessFlags::ALL).unwrap();
    let keys = [
        a.mr.lkey(),
        a.mr.rkey(),
        a2.lkey(),
        a2.rkey(),
        b.mr.lkey(),
        b.mr.rkey(),
    ];
    for i in 0..keys.len() {
        for j in i + 1..keys.len() {
            assert_ne!(keys[i], keys[j], "keys {i} and {j}");
        }
    }
    assert_ne!(a.qp.endpoint().token, b.qp.endpoint().token);
    // The same seeds give the same keys (mem is deterministic).
    let again = MemFabric::new(3, FabricConfig::default()).unwrap();
    let a_again = side(&again, 1, &QpInitAttr::default(), 4096);
    assert_eq!(
        (a_again.mr.lkey(), a_again.mr.rkey()),
        (a.mr.lkey(), a.mr.rkey())
    );
    assert_eq!(a_again.qp.qp_num(), a.qp.qp_num());
}
