//! Parse arbitrary datagrams; whatever parses must re-emit and re-parse unchanged,
//! and its ACK blocks must read back within their checked bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rondo_proto::wire;

fuzz_target!(|data: &[u8]| {
    let Ok((repr, payload)) = wire::parse(data) else {
        return;
    };
    for block in wire::Packet::new_unchecked(data).ack_blocks() {
        assert!(matches!(repr.body, wire::Body::Ack(_)));
        assert!(!block.is_empty() && usize::from(block.ce_count) <= block.len());
        assert_eq!(block.psns().count(), block.len());
    }
    let mut buf = vec![0; repr.buffer_len()];
    let header_len = repr.emit(&mut buf).expect("a parsed Repr emits");
    buf[header_len..header_len + payload.len()].copy_from_slice(payload);
    let (reparsed, repayload) = wire::parse(&buf).expect("emitted packet parses");
    assert_eq!(reparsed, repr);
    assert_eq!(repayload, payload);
});
