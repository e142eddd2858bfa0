//! Running unmodified verbs programs under the drop-in: the library's path, free
//! ports, a server/client pair with timeouts, and their outputs.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One program pair at a time: the host is small and shared.
pub static SERIAL: Mutex<()> = Mutex::new(());

/// The `librondo_ibv.so` cargo built with this test: beside the test executable
/// (`target/<profile>/deps`; `cargo build` copies it up to `target/<profile>`).
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("target/<profile>/deps");
    let lib = deps.join("librondo_ibv.so");
    assert!(
        lib.exists(),
        "{} not built (cargo builds the cdylib with the tests)",
        lib.display()
    );
    lib
}

/// Whether `prog` is installed; when it is not, the test says so and is skipped,
/// unless `RONDO_IBV_REQUIRE_PROGRAMS=1` (CI) makes that a failure.
pub fn have(prog: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {prog}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("RONDO_IBV_REQUIRE_PROGRAMS").as_deref() != Ok("1"),
            "{prog} is not installed (apt-get install perftest ibverbs-utils qperf)"
        );
        eprintln!(
            "skipped: {prog} is not installed (apt-get install perftest ibverbs-utils qperf)"
        );
    }
    found
}

/// Builds C program `tests/c/<name>.c` (with `args` after the source) into a
/// scratch directory; the path of the result.
pub fn build_c(name: &str, out: &str, args: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rondo-ibv-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let exe = dir.join(out);
    let src = format!("{}/tests/c/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let cc = Command::new("cc")
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(src)
        .args(args)
        .output()
        .expect("cc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    exe
}

/// A TCP port free right now: one the kernel hands out that no socket uses in
/// any state. Binding port 0 alone is not enough: the standard library's listener
/// sets `SO_REUSEADDR`, so it may be given a port that an earlier connection
/// holds in `TIME_WAIT`, where a server without that option then fails to listen
/// ("Couldn't listen to port", seen in CI).
pub fn free_port() -> u16 {
    for _ in 0..100 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("an ephemeral port");
        if tcp_states(port).is_empty() {
            return port;
        }
    }
    panic!("no TCP port without sockets in 100 tries");
}

/// A command under the drop-in, on 127.0.0.1, with `env` added.
pub fn preloaded(prog: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(prog);
    c.args(args)
        .env("LD_PRELOAD", library())
        .env("RONDO_IBV_IP", "127.0.0.1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// The states (hex, as /proc/net/tcp writes them: 0A listening, 06 TIME_WAIT)
/// of every TCP socket whose local port is `port`.
fn tcp_states(port: u16) -> Vec<String> {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|s| {
            s.lines()
                .filter_map(|l| {
                    let mut w = l.split_whitespace();
                    let local = w.nth(1)?;
                    let state = w.nth(1)?;
                    local.ends_with(&want).then(|| state.to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether some socket listens on TCP `port` (read from /proc/net/tcp, so that the
/// check does not take the server's one connection).
fn listening(port: u16) -> bool {
    tcp_states(port).iter().any(|s| s == "0A")
}

/// Waits for `child` to end within `limit`; kills it after.
pub fn finish(mut child: Child, limit: Duration) -> (Output, bool) {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("output");
                return (out, true);
            }
        }
    }
    (child.wait_with_output().expect("output"), false)
}

/// What one end printed and how it ended.
pub struct End {
    /// Exit code (`None`: killed by a signal or the timeout).
    pub code: Option<i32>,
    /// Killed by the timeout.
    pub timed_out: bool,
    /// stdout and stderr.
    pub text: String,
}

impl End {
    fn of((o, timed_out): (Output, bool)) -> End {
        End {
            code: o.status.code(),
            timed_out,
            text: format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        }
    }
}

/// Runs `prog` under the drop-in with `args` and `env` added, within `limit`.
pub fn run(prog: &str, args: &[&str], env: &[(&str, &str)], limit: Duration) -> End {
    let child = preloaded(prog, args, env).spawn().expect(prog);
    End::of(finish(child, limit))
}

/// Runs `prog` as server (`args` plus the port option) and as client (the same plus
/// 127.0.0.1), the client once the server listens; both within `limit`.
pub fn pair(
    prog: &str,
    args: &[&str],
    port_opt: &str,
    env: &[(&str, &str)],
    limit: Duration,
) -> (End, End) {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let port = free_port().to_string();
    let mut sargs: Vec<&str> = args.to_vec();
    sargs.extend([port_opt, port.as_str()]);
    let mut server = preloaded(prog, &sargs, env).spawn().expect("spawn server");
    let start = Instant::now();
    let p: u16 = port.parse().expect("port");
    // Until it listens, or ends (a server that fails at set-up), or the limit.
    while !listening(p) && start.elapsed() < limit && matches!(server.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut cargs = sargs.clone();
    cargs.push("127.0.0.1");
    let client = preloaded(prog, &cargs, env).spawn().expect("spawn client");
    let c = End::of(finish(client, limit));
    let s = End::of(finish(server, limit));
    (s, c)
}

/// Rows of a perftest table: lines starting with a size in bytes.
pub fn rows(text: &str) -> Vec<Vec<f64>> {
    text.lines()
        .filter_map(|l| {
            let v: Vec<f64> = l
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            let first = l.split_whitespace().next()?;
            (first.parse::<u64>().is_ok() && v.len() >= 3).then_some(v)
        })
        .collect()
}

/// Asserts both ends exited 0, the client with `expect_rows` table rows (when
/// given; perftest's bandwidth servers print no rows).
pub fn both_ok(what: &str, (s, c): &(End, End), expect_rows: Option<usize>) {
    for (side, e, other) in [("server", s, c), ("client", c, s)] {
        // Both sides' output: a side killed at the limit prints little, and
        // where the other stopped says which size or step hung.
        assert_eq!(
            e.code,
            Some(0),
            "{what}: {side} failed (timed out: {}):\n{}\n-- the other side (exit {:?}, timed out: {}):\n{}",
            e.timed_out,
            e.text,
            other.code,
            other.timed_out,
            other.text
        );
    }
    if let Some(n) = expect_rows {
        let r = rows(&c.text);
        assert_eq!(
            r.len(),
            n,
            "{what}: the client printed {} rows, expected {n}:\n{}",
            r.len(),
            c.text
        );
    }
}
