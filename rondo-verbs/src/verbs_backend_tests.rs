//! Tests of the `verbs` backend that need no device.

use super::*;

#[test]
fn attr_maps_onto_the_datapath_config() {
    let a = VerbsAttr {
        device: "mlx5_1".into(),
        port: 2,
        gid_index: 5,
        paths: 8,
        mtu: Some(1024),
        ..VerbsAttr::default()
    };
    let c = a.datapath_config();
    assert_eq!(c.device, "mlx5_1");
    assert_eq!((c.paths, c.mtu), (8, Some(1024)));
    assert_eq!((c.address.port, c.address.sgid_index), (2, 5));
    assert_eq!(
        c.qkey,
        VerbsConfig::default().qkey,
        "both sides share the qkey"
    );
}

#[test]
fn bad_attributes_are_refused_before_any_device_is_touched() {
    for (a, name) in [
        (
            VerbsAttr {
                loss: 1.5,
                ..VerbsAttr::default()
            },
            "loss",
        ),
        (
            VerbsAttr {
                paths: 0,
                ..VerbsAttr::default()
            },
            "paths",
        ),
        (
            VerbsAttr {
                port: 0,
                ..VerbsAttr::default()
            },
            "port",
        ),
        (
            VerbsAttr {
                mtu: Some(9000),
                ..VerbsAttr::default()
            },
            "mtu",
        ),
    ] {
        match a.validate() {
            Err(VerbsError::InvalidAttr { name: n, .. }) => assert_eq!(n, name),
            other => panic!("{name}: {other:?}"),
        }
    }
    assert_eq!(VerbsAttr::default().validate(), Ok(()));
}

#[test]
fn flow_config_is_the_nic_profile_with_the_port_mtu() {
    let f = crate::QpInitAttr::verbs(4, 4096).flow;
    let n = crate::HostProfile::NIC;
    assert_eq!(f.mtu, 4096);
    assert_eq!(
        f,
        FlowConfig {
            mtu: 4096,
            ..n.flow_config(4)
        }
    );
    assert_eq!(f.base_rtt, Some(vec![n.base_rtt; 4]));
    assert_eq!(
        (f.rto_min, f.early_recovery_threshold),
        (n.rto_min, n.early_recovery_threshold)
    );
}

fn record() -> EndpointInfo {
    EndpointInfo {
        qpn: 0x12_3456,
        qkey: VerbsConfig::default().qkey,
        gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 1],
        lid: 0,
        mtu: 4096,
        paths: 4,
    }
}

#[test]
fn verbs_descriptors_round_trip_and_refuse_bad_records() {
    use crate::{PeerAddr, QpEndpoint};
    let e = QpEndpoint {
        qpn: 0xAB_CDEF,
        token: 0x1122_3344_5566_7788,
        paths: 4,
        mtu: 4096,
        addr: PeerAddr::Verbs { info: record() },
        auth: rondo_proto::auth::AuthMode::Auth,
        public_key: [7; 32],
    };
    let b = e.to_bytes();
    // RQPE, version, auth mode, public key, qpn, token, paths, mtu, kind 2, the
    // 40-byte record.
    assert_eq!(b.len(), 4 + 1 + 1 + 32 + 4 + 8 + 2 + 4 + 1 + 40);
    assert_eq!(b[56], 2, "address kind");
    assert_eq!(&b[57..61], b"RNDV");
    assert_eq!(&b[57..], &record().encode()[..]);
    assert_eq!(QpEndpoint::from_bytes(&b), Ok(e.clone()));
    for cut in 57..b.len() {
        assert!(
            matches!(
                QpEndpoint::from_bytes(&b[..cut]),
                Err(VerbsError::BadEndpoint(_))
            ),
            "cut at {cut}"
        );
    }
    let mut trailing = b.clone();
    trailing.push(0);
    assert!(matches!(
        QpEndpoint::from_bytes(&trailing),
        Err(VerbsError::BadEndpoint(_))
    ));
    // A record that does not decode (MTU 9000 is no RoCE MTU) is refused.
    let mut bad = b.clone();
    bad[57 + 20..57 + 24].copy_from_slice(&9000u32.to_be_bytes());
    match QpEndpoint::from_bytes(&bad) {
        Err(VerbsError::BadEndpoint(m)) => assert!(m.contains("MTU"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn without_a_device_open_says_so() {
    let names = rondo_ud::verbs::sys::device_names().unwrap_or_default();
    if !names.is_empty() {
        println!("skipped: this host has RDMA devices ({names:?}), so the no-device error cannot be checked here");
        return;
    }
    let err = crate::Context::open_verbs(crate::ContextAttr::default(), VerbsAttr::default())
        .expect_err("no device");
    let VerbsError::Device(m) = &err else {
        panic!("{err:?}")
    };
    assert!(m.starts_with("no RDMA device: "), "{m}");
    assert!(m.contains("rondo doctor"), "{m}");
    assert!(
        crate::devices()
            .iter()
            .all(|d| !d.name.starts_with("verbs:")),
        "no verbs device is listed"
    );
}
