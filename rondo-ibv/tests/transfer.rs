//! Our own C verbs program (`tests/c/transfer.c`) under the drop-in: SEND,
//! WRITE_WITH_IMM and READ of 1 B to 1 MiB, every byte checked, with 1% injected
//! loss and 5% reordering on arrival (`RONDO_IBV_LOSS`, `RONDO_IBV_REORDER`, seeded);
//! `ibv_query_device_ex` answers; a solicited-only notification waits for a
//! solicited SEND; a CQ resized to 2 entries overruns and `ibv_get_async_event`
//! reports `IBV_EVENT_CQ_ERR` and `IBV_EVENT_QP_FATAL`;
//! a WRITE with a wrong rkey completes with `IBV_WC_REM_ACCESS_ERR`; `timeout` and
//! `retry_cnt` of `ibv_modify_qp` reach the rondo-verbs QP (`ibv_query_qp` reads them
//! back), and values out of range are refused with EINVAL.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn send_write_with_imm_and_read_move_every_byte_under_loss_and_reordering() {
    if !std::path::Path::new("/usr/include/infiniband/verbs.h").exists() {
        assert!(
            std::env::var("RONDO_IBV_REQUIRE_PROGRAMS").as_deref() != Ok("1"),
            "no verbs.h (apt-get install libibverbs-dev)"
        );
        eprintln!("skipped: no verbs.h (apt-get install libibverbs-dev)");
        return;
    }
    let exe = build_c("transfer", "transfer", &["-libverbs"]);
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for seed in ["1", "2"] {
        let env = [
            ("RONDO_IBV_LOSS", "0.01"),
            ("RONDO_IBV_REORDER", "0.05"),
            ("RONDO_IBV_SEED", seed),
            ("RONDO_IBV_DEBUG", "1"),
        ];
        let end = run(exe.to_str().unwrap(), &[], &env, Duration::from_secs(180));
        let text = end.text;
        assert!(
            end.code == Some(0) && !end.timed_out,
            "seed {seed}:\n{text}"
        );
        assert!(
            text.contains("1048576 B: SEND, WRITE_WITH_IMM, READ ok"),
            "{text}"
        );
        assert!(text.contains("wrong rkey: remote access error"), "{text}");
        for line in [
            "ibv_query_device_ex ok",
            "solicited-only notification ok",
            "CQ overrun: async events CQ_ERR, QP_FATAL",
        ] {
            assert!(text.contains(line), "missing {line:?}:\n{text}");
        }
        assert!(
            text.contains("timeout and retry_cnt reach the QP"),
            "{text}"
        );
        // The faults were injected: each context's closing line counts them.
        let dropped: u64 = text
            .lines()
            .filter_map(|l| l.split("fault injection dropped ").nth(1))
            .filter_map(|r| r.split_whitespace().next()?.parse::<u64>().ok())
            .sum();
        assert!(dropped > 0, "no datagram was dropped:\n{text}");
    }
}
