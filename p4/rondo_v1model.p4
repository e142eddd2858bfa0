/* Rondo's switch for BMv2 simple_switch (v1model).
 *
 * What Rondo asks of a switch (paper §5): steer by UDP source port, serve ACKs
 * before data before probes (strict priority), drop probes early (a small
 * per-queue threshold), and mark ECN. The same behaviour as `rondo fabric`
 * (fabric/src/switch.rs); `rondo p4-config TOPOLOGY --target bmv2` writes the
 * table entries and queue settings from the same topology file.
 *
 * Run simple_switch with --priority-queues 3: standard_metadata.priority 2 is
 * served first (control), then 1 (data), then 0 (probes).
 *
 * NOT COMPILED HERE: no P4 compiler could be installed on the machines this was
 * written on. p4/README.md has the compile and load commands.
 */

#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  PROTO_UDP      = 17;
const bit<16> ROCEV2_PORT    = 4791;
/* Rondo's UDP backend: path i uses port 4792 + i (docs/wire.md). */
const bit<16> RONDO_PORT_MIN = 4792;
const bit<16> RONDO_PORT_MAX = 5815;   /* 4792 + 1024 paths - 1 */
const bit<2>  ECN_NOT_ECT    = 0;
const bit<2>  ECN_CE         = 3;
const bit<32> MAX_PATHS      = 1024;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* RoCEv2 base transport header (IBTA). */
header bth_t {
    bit<8>  opcode;
    bit<1>  solicited;
    bit<1>  mig_req;
    bit<2>  pad_count;
    bit<4>  version;
    bit<16> pkey;
    bit<8>  reserved0;
    bit<24> dst_qp;
    bit<1>  ack_req;
    bit<7>  reserved1;
    bit<24> psn;
}

/* Rondo's common header (docs/wire.md), the first 8 bytes: enough to see the type. */
header rondo_t {
    bit<8>  version;
    bit<8>  kind;        /* 1 DATA, 2 PROBE, 3 ACK, 4 NAK */
    bit<8>  flags;
    bit<8>  header_words;
    bit<16> path;
    bit<16> reserved;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    bth_t      bth;
    rondo_t    rondo;
}

struct metadata_t {
    bit<16> path;
    bit<19> ecn_threshold;
}

parser RondoParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            PROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            ROCEV2_PORT: parse_bth;
            RONDO_PORT_MIN .. RONDO_PORT_MAX: parse_rondo;
            default: accept;
        }
    }
    state parse_bth {
        pkt.extract(hdr.bth);
        transition accept;
    }
    state parse_rondo {
        pkt.extract(hdr.rondo);
        transition accept;
    }
}

control RondoVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control RondoIngress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t std) {
    /* Per path: packets and bytes steered onto it. */
    counter(MAX_PATHS, CounterType.packets_and_bytes) path_counter;

    action drop() {
        mark_to_drop(std);
    }

    action set_path(bit<9> port, bit<16> path) {
        std.egress_spec = port;
        meta.path = path;
    }

    /* (destination, UDP source port) -> egress port of the path: the emulator's
     * forwarding table (Topology::route_table), entries from `rondo p4-config`. */
    table path_table {
        key = {
            hdr.ipv4.dst_addr : exact;
            hdr.udp.src_port  : exact;
        }
        actions = { set_path; drop; }
        default_action = drop();
        size = 65536;
    }

    action set_class(bit<3> priority) {
        std.priority = priority;
    }

    /* DSCP -> strict-priority queue: ACK/NAK (46) 2, data (26) 1, probes (8) 0. */
    table class_table {
        key = { hdr.ipv4.dscp : exact; }
        actions = { set_class; }
        default_action = set_class(1);
        size = 64;
    }

    apply {
        if (!hdr.ipv4.isValid() || !hdr.udp.isValid()) {
            drop();
            return;
        }
        if (path_table.apply().hit) {
            path_counter.count((bit<32>) meta.path);
            class_table.apply();
        }
    }
}

control RondoEgress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t std) {
    /* Per egress port: packets marked CE. */
    counter(512, CounterType.packets) ecn_marked;

    /* Mark ECN-capable data packets that found more than `packets` queued. */
    action set_ecn_threshold(bit<19> packets) {
        meta.ecn_threshold = packets;
    }

    table ecn_table {
        key = { std.egress_port : exact; }
        actions = { set_ecn_threshold; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    apply {
        /* Data only: ACKs (priority 2) and probes (0) are never marked. */
        if (hdr.ipv4.isValid() && std.priority == 1 && ecn_table.apply().hit) {
            if (hdr.ipv4.ecn != ECN_NOT_ECT && std.enq_qdepth > meta.ecn_threshold) {
                hdr.ipv4.ecn = ECN_CE;
                ecn_marked.count((bit<32>) std.egress_port);
            }
        }
    }
}

control RondoComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum,
            HashAlgorithm.csum16);
    }
}

control RondoDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.bth);
        pkt.emit(hdr.rondo);
    }
}

V1Switch(
    RondoParser(),
    RondoVerifyChecksum(),
    RondoIngress(),
    RondoEgress(),
    RondoComputeChecksum(),
    RondoDeparser()
) main;
