//! The C layouts of `abi.rs` against the installed `<infiniband/verbs.h>`: a C
//! program prints every size and offset the drop-in relies on with `offsetof`, and
//! they must equal what Rust computes (`abi::layout_table`, `abi::slot_table`). The
//! same numbers are also checked at compile time against rdma-core 44's.

use std::process::Command;

mod common;

#[test]
fn every_size_and_offset_matches_the_installed_header() {
    let header = std::path::Path::new("/usr/include/infiniband/verbs.h");
    if !header.exists() {
        assert!(
            std::env::var("RONDO_IBV_REQUIRE_PROGRAMS").as_deref() != Ok("1"),
            "no {} (apt-get install libibverbs-dev)",
            header.display()
        );
        eprintln!(
            "skipped: no {} (apt-get install libibverbs-dev)",
            header.display()
        );
        return;
    }
    let exe = common::build_c("layout", "layout", &[]);
    let out = Command::new(&exe).output().expect("run layout");
    assert!(out.status.success());
    let c = String::from_utf8(out.stdout).unwrap();
    let rust = format!(
        "{}{}",
        rondo_ibv::abi::layout_table(),
        rondo_ibv::abi::slot_table()
    );
    let c_lines: Vec<&str> = c.lines().collect();
    let r_lines: Vec<&str> = rust.lines().collect();
    for (a, b) in c_lines.iter().zip(&r_lines) {
        assert_eq!(a, b, "C (left) and Rust (right) disagree");
    }
    assert_eq!(
        c_lines.len(),
        r_lines.len(),
        "C printed {} entries, Rust {}",
        c_lines.len(),
        r_lines.len()
    );
    if let Some(dir) = exe.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}
