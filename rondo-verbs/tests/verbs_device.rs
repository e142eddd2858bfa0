//! Rondo queue pairs over the `verbs` backend on a real RDMA device: two contexts
//! on the first device with a usable port (or `RONDO_VERBS_DEVICE`), looped through
//! the NIC, every operation, bytes checked.
//!
//! A custom harness (`harness = false`): on a host without a device it prints one
//! line saying the test was skipped and why, and reports it as ignored, never as
//! passed.

use rondo_ud::verbs::inventory::{inventory, GidKind};
use rondo_verbs::{
    AccessFlags, Context, ContextAttr, QpEndpoint, QpInitAttr, RecvWr, RemoteAddr, SendWr, Sge,
    VerbsAttr, WcOpcode, WcStatus, WorkCompletion,
};

/// The device, port and GID to test on, or why there is none.
fn device_attr() -> Result<VerbsAttr, String> {
    let devices = inventory().map_err(|e| format!("no RDMA device ({e})"))?;
    if devices.is_empty() {
        return Err("no RDMA device (ibverbs' device list is empty); run `rondo doctor` on a host with a NIC".into());
    }
    let wanted = std::env::var("RONDO_VERBS_DEVICE").ok();
    for dev in devices
        .iter()
        .filter(|d| wanted.as_ref().is_none_or(|w| w == &d.name))
    {
        for port in dev.ports.iter().filter(|p| p.active) {
            let gid = port
                .gids
                .iter()
                .find(|g| g.kind == GidKind::RoceV2 || g.kind == GidKind::Ib);
            if let Some(g) = gid {
                return Ok(VerbsAttr {
                    device: dev.name.clone(),
                    port: port.port,
                    gid_index: g.index as u8,
                    paths: 4,
                    ..VerbsAttr::default()
                });
            }
        }
    }
    Err(format!(
        "{} RDMA device(s) but no active port with a RoCE v2 or IB GID",
        devices.len()
    ))
}

fn wait(cq: &rondo_verbs::CompletionQueue) -> WorkCompletion {
    let mut wc = [WorkCompletion::default(); 1];
    let start = std::time::Instant::now();
    while cq.poll(&mut wc).expect("poll") == 0 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "no completion in 10 s"
        );
    }
    assert_eq!(wc[0].status, WcStatus::Success, "{:?}", wc[0]);
    wc[0]
}

fn every_operation_moves_exact_bytes(attr: &VerbsAttr) {
    let open = || {
        let ctx = Context::open_verbs(
            ContextAttr {
                max_mtu: 4096,
                ..ContextAttr::default()
            },
            attr.clone(),
        )
        .expect("open a verbs context");
        let mtu = ctx.verbs_stats().expect("a verbs context").mtu;
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(64).unwrap();
        let qp = ctx
            .create_qp(&pd, &cq, &cq, QpInitAttr::verbs(attr.paths, mtu))
            .expect("create a QP");
        let mr = pd.register(1 << 20, AccessFlags::ALL).unwrap();
        (ctx, cq, qp, mr)
    };
    let (_ca, cq_a, qp_a, mr_a) = open();
    let (cb, cq_b, qp_b, mr_b) = open();
    let ep_b = QpEndpoint::from_bytes(&qp_b.endpoint().to_bytes()).unwrap();
    qp_a.connect(&ep_b).expect("connect A to B");
    qp_b.connect(&qp_a.endpoint()).expect("connect B to A");

    let data: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    mr_a.write(0, &data).unwrap();
    let remote = RemoteAddr {
        addr: mr_b.addr(),
        rkey: mr_b.rkey(),
    };
    qp_a.post_send(&SendWr::write(1, vec![Sge::new(&mr_a, 0, 1 << 20)], remote))
        .unwrap();
    assert_eq!(wait(&cq_a).opcode, WcOpcode::RdmaWrite);
    let mut got = vec![0u8; 1 << 20];
    mr_b.read(0, &mut got).unwrap();
    assert!(got == data, "the WRITE arrived byte-exact");

    qp_b.post_recv(&RecvWr {
        wr_id: 7,
        sg_list: vec![Sge::new(&mr_b, 0, 4096)],
    })
    .unwrap();
    mr_a.write(0, b"over UD, in order").unwrap();
    qp_a.post_send(&SendWr::send(2, vec![Sge::new(&mr_a, 0, 17)]))
        .unwrap();
    let wc = wait(&cq_b);
    assert_eq!((wc.wr_id, wc.opcode, wc.byte_len), (7, WcOpcode::Recv, 17));
    let mut got = [0u8; 17];
    mr_b.read(0, &mut got).unwrap();
    assert_eq!(&got, b"over UD, in order");
    assert_eq!(wait(&cq_a).opcode, WcOpcode::Send);

    mr_b.write(1000, b"read me").unwrap();
    let at = RemoteAddr {
        addr: mr_b.addr() + 1000,
        rkey: mr_b.rkey(),
    };
    qp_a.post_send(&SendWr::read(3, vec![Sge::new(&mr_a, 500, 7)], at))
        .unwrap();
    assert_eq!(wait(&cq_a).opcode, WcOpcode::RdmaRead);
    let mut got = [0u8; 7];
    mr_a.read(500, &mut got).unwrap();
    assert_eq!(&got, b"read me");

    let s = cb.verbs_stats().unwrap();
    assert!(s.datapath.datagrams_in > 256, "{s:?}");
    assert_eq!(s.round_errors, 0, "{s:?}");
}

fn main() {
    let attr = match device_attr() {
        Ok(a) => a,
        Err(why) => {
            println!("verbs_device: skipped 1 test: {why}");
            println!("test result: ok. 0 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out");
            return;
        }
    };
    println!(
        "verbs_device: device {} port {} gid index {}",
        attr.device, attr.port, attr.gid_index
    );
    every_operation_moves_exact_bytes(&attr);
    println!("test every_operation_moves_exact_bytes ... ok");
    println!("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}
