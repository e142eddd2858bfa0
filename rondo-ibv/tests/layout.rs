//! The C layouts of `abi.rs` against the installed `<infiniband/verbs.h>`: a C
//! program prints every size and offset the drop-in relies on with `offsetof`, and
//! they must equal what Rust computes (`abi::layout_table`, `abi::slot_table`). The
//! same numbers are also checked at compile time against rdma-core 44's.

use std::process::Command;

#[test]
fn every_size_and_offset_matches_the_installed_header() {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/layout.c");
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
    let dir = std::env::temp_dir().join(format!("rondo-ibv-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("layout");
    let cc = Command::new("cc")
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(src)
        .output()
        .expect("cc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
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
    let _ = std::fs::remove_dir_all(&dir);
}
