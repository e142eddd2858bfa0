//! Opening the verbs datapath fails with a typed error that says what to do, on
//! hosts with and without an RDMA device (both branches assert).
#![cfg(all(feature = "verbs", target_os = "linux"))]

use rondo_ud::verbs::sys::device_names;
use rondo_ud::verbs::{VerbsConfig, VerbsDatapath, VerbsError};

#[test]
fn open_without_a_usable_device_is_a_typed_error() {
    let cfg = VerbsConfig {
        device: "rondo_no_such_device".into(),
        ..VerbsConfig::default()
    };
    let err = VerbsDatapath::open(cfg).expect_err("no device of that name exists");
    match device_names() {
        Ok(names) if !names.is_empty() => {
            assert!(
                matches!(err, VerbsError::Open(ref n) if n == "rondo_no_such_device"),
                "{err}"
            );
        }
        // No device, or no kernel support for listing them (ENOSYS without ib_uverbs).
        _ => assert!(
            matches!(err, VerbsError::NoDevice | VerbsError::DeviceList(_)),
            "{err}"
        ),
    }
    assert!(
        err.to_string().contains("rondo doctor"),
        "the message says what to run: {err}"
    );
}

#[test]
fn zero_paths_are_refused_before_touching_a_device() {
    let cfg = VerbsConfig {
        paths: 0,
        ..VerbsConfig::default()
    };
    assert!(matches!(
        VerbsDatapath::open(cfg),
        Err(VerbsError::Config(_))
    ));
}

#[test]
fn bad_queue_settings_are_refused_before_touching_a_device() {
    let mut cfg = VerbsConfig::default();
    cfg.send.signal_every = cfg.send.depth; // would fill the queue with unsignaled WRs
    let err = VerbsDatapath::open(cfg).unwrap_err();
    assert!(matches!(err, VerbsError::SendQueue(_)), "{err}");
    assert!(err.to_string().contains("signal_every"), "{err}");
    let cfg = VerbsConfig {
        recv_batch: 0,
        ..VerbsConfig::default()
    };
    assert!(matches!(
        VerbsDatapath::open(cfg),
        Err(VerbsError::RxRing(_))
    ));
    let cfg = VerbsConfig {
        mtu: Some(9000),
        ..VerbsConfig::default()
    };
    assert!(matches!(
        VerbsDatapath::open(cfg),
        Err(VerbsError::Config(_))
    ));
}
