//! What the `rondo perf` CLI tests share: the binary, a client on loopback, and a
//! server on an ephemeral loopback port.

// Each test crate uses a part of this module.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;

/// The perf exchange's version (`perf::exchange::VERSION`; 2 since the
/// `--verify` pattern changed).
pub const PERF_VERSION: u16 = 2;

/// One perf control frame with JSON `body`, as the exchange writes it: `RPRF`,
/// the version, the body's length, the body.
pub fn perf_frame(body: &str) -> Vec<u8> {
    let mut f = b"RPRF".to_vec();
    f.extend_from_slice(&PERF_VERSION.to_be_bytes());
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend_from_slice(body.as_bytes());
    f
}

/// `rondo` with `args`, run to completion.
pub fn rondo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rondo"))
        .args(args)
        .output()
        .expect("run rondo")
}

/// `rondo perf client` against loopback `port`, run to completion.
pub fn client(port: u16, args: &[&str]) -> Output {
    let port = port.to_string();
    rondo(&[&["perf", "client", "127.0.0.1", "--port", &port], args].concat())
}

/// A `rondo perf server` on an ephemeral loopback port, killed on drop.
pub struct Server {
    child: Child,
    /// The port it listens on.
    pub port: u16,
    log: Arc<Mutex<String>>,
}

impl Server {
    /// A server started with `extra` options.
    pub fn start(extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rondo"))
            .args(["perf", "server", "--port", "0", "--bind", "127.0.0.1"])
            .args(extra)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the server");
        let mut stderr = BufReader::new(child.stderr.take().expect("piped stderr"));
        let mut first = String::new();
        stderr.read_line(&mut first).expect("server banner");
        let port = first
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {first:?}"));
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        Server { child, port, log }
    }

    /// A client of this server, run to completion.
    pub fn client(&self, args: &[&str]) -> Output {
        client(self.port, args)
    }

    /// A client of this server with `--json`, which must succeed: its report.
    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.client(&[args, &["--json"]].concat());
        assert!(
            out.status.success(),
            "client {args:?} failed: {}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
    }

    /// The server's stderr so far (waits briefly for the line about the last client).
    pub fn log(&self) -> String {
        thread::sleep(std::time::Duration::from_millis(200));
        self.log.lock().unwrap().clone()
    }

    /// Asserts that the server logged `pattern` exactly `times` times; returns the log.
    pub fn assert_logged(&self, pattern: &str, times: usize) -> String {
        let log = self.log();
        assert_eq!(log.matches(pattern).count(), times, "{pattern:?}: {log}");
        log
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Stdout of `rondo args`, which must succeed.
pub fn ok_stdout(args: &[&str]) -> String {
    let out = rondo(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rondo {args:?} failed: {stderr}");
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

/// Stderr of `rondo args`, which must fail.
pub fn fails(args: &[&str]) -> String {
    let out = rondo(args);
    assert!(!out.status.success(), "rondo {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A path in the temp directory, unique to this test process and `test` (a test
/// binary's name) and `name`, with whatever a previous run left there removed.
pub fn fresh_temp(test: &str, name: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("rondo-{test}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    let _ = std::fs::remove_file(&p);
    p
}
