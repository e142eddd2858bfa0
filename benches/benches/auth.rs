//! Cost per datagram of authenticating (issue 15): seal at the sender plus open
//! at the receiver, for `none`, `auth` and `encrypt`, with 1 KiB and 4 KiB
//! payloads behind a 60-byte DATA header (with the token). `docs/wire.md`
//! ("Authentication trailer") has the numbers.
//!
//! Run: `cargo bench -p rondo-benches --bench auth -- --warm-up-time 1 --measurement-time 2`

use criterion::{BenchmarkId, Criterion, Throughput};
use rondo_proto::auth::{AuthMode, KeyPair, TRAILER_LEN};
use std::hint::black_box;

const HEADER: usize = 60;

fn seal_open(c: &mut Criterion) {
    let mut g = c.benchmark_group("auth_seal_open");
    for payload in [1024usize, 4096] {
        for mode in [AuthMode::None, AuthMode::Auth, AuthMode::Encrypt] {
            let (ka, kb) = (KeyPair::generate().unwrap(), KeyPair::generate().unwrap());
            let mut tx = ka.agree(1, &kb.public(), 2, mode).unwrap();
            let mut rx = kb.agree(2, &ka.public(), 1, mode).unwrap();
            let len = HEADER + payload;
            let mut buf = vec![0x5au8; len + TRAILER_LEN];
            buf[3] = (HEADER / 4) as u8;
            let template = buf.clone();
            g.throughput(Throughput::Elements(1));
            g.bench_function(BenchmarkId::new(mode.name(), payload), |b| {
                b.iter(|| {
                    buf[..len].copy_from_slice(&template[..len]);
                    let n = tx.seal(&mut buf, len).unwrap();
                    let m = rx.open(&mut buf[..n]).unwrap();
                    black_box(m)
                })
            });
        }
    }
    g.finish();
}

// `criterion_group!` would generate an undocumented `pub fn`; this is what it and
// `criterion_main!` expand to.
fn main() {
    let mut c = Criterion::default().configure_from_args();
    seal_open(&mut c);
    c.final_summary();
}
