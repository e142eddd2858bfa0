/* Rondo's switch for Tofino (TNA).
 *
 * What Rondo asks of a switch (paper §5): steer by UDP source port, serve ACKs
 * before data before probes (strict priority), drop probes early (a small
 * per-queue threshold), and mark ECN. The same behaviour as `rondo fabric`
 * (fabric/src/switch.rs); `rondo p4-config TOPOLOGY --target tna` writes the
 * bfrt_python table entries and traffic-manager settings from the same topology
 * file. Queues: qid 0 control (strict priority 7), 1 data (5), 2 probes (1), each
 * with its own buffer limit (the probe queue's small one drops probes early).
 *
 * NOT COMPILED HERE: no P4 compiler (bf-p4c) could be installed on the machines
 * this was written on. p4/README.md has the compile and load commands.
 */

#include <core.p4>
#include <tna.p4>

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  PROTO_UDP      = 17;
const bit<16> ROCEV2_PORT    = 4791;
/* Rondo's UDP backend: path i uses port 4792 + i (docs/wire.md). */
const bit<16> RONDO_PORT_MIN = 4792;
const bit<16> RONDO_PORT_MAX = 5815;
const bit<2>  ECN_NOT_ECT    = 0;
const bit<2>  ECN_CE         = 3;
const int     MAX_PATHS      = 1024;

header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_h {
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

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* RoCEv2 base transport header (IBTA). */
header bth_h {
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

/* Rondo's common header (docs/wire.md), the first 8 bytes. */
header rondo_h {
    bit<8>  version;
    bit<8>  kind;        /* 1 DATA, 2 PROBE, 3 ACK, 4 NAK */
    bit<8>  flags;
    bit<8>  header_words;
    bit<16> path;
    bit<16> reserved;
}

struct headers_t {
    ethernet_h ethernet;
    ipv4_h     ipv4;
    udp_h      udp;
    bth_h      bth;
    rondo_h    rondo;
}

struct ig_metadata_t {
    bit<16> path;
}

struct eg_metadata_t {
    bit<19> ecn_threshold;
}

parser RondoIngressParser(packet_in pkt, out headers_t hdr, out ig_metadata_t meta,
                          out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.path = 0;
        transition parse_ethernet;
    }
    state parse_ethernet {
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

control RondoIngress(inout headers_t hdr, inout ig_metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md,
                     in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                     inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                     inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* Per path: packets and bytes steered onto it. */
    Counter<bit<64>, bit<16>>(MAX_PATHS, CounterType_t.PACKETS_AND_BYTES) path_counter;

    action drop() {
        ig_dprsr_md.drop_ctl = 1;
    }

    action set_path(PortId_t port, bit<16> path) {
        ig_tm_md.ucast_egress_port = port;
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

    action set_class(QueueId_t qid) {
        ig_tm_md.qid = qid;
    }

    /* DSCP -> queue: ACK/NAK (46) 0, data (26) 1, probes (8) 2; the traffic
     * manager serves them in strict priority (bfrt settings of p4-config). */
    table class_table {
        key = { hdr.ipv4.dscp : exact; }
        actions = { set_class; }
        default_action = set_class(1);
        size = 64;
    }

    apply {
        if (!hdr.ipv4.isValid() || !hdr.udp.isValid()) {
            drop();
        } else if (path_table.apply().hit) {
            path_counter.count(meta.path);
            class_table.apply();
        }
    }
}

control RondoIngressDeparser(packet_out pkt, inout headers_t hdr, in ig_metadata_t meta,
                             in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply {
        pkt.emit(hdr);
    }
}

parser RondoEgressParser(packet_in pkt, out headers_t hdr, out eg_metadata_t meta,
                         out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        meta.ecn_threshold = 0;
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control RondoEgress(inout headers_t hdr, inout eg_metadata_t meta,
                    in egress_intrinsic_metadata_t eg_intr_md,
                    in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                    inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                    inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    /* Per egress port: packets marked CE. */
    Counter<bit<64>, PortId_t>(512, CounterType_t.PACKETS) ecn_marked;

    /* Mark ECN-capable data packets that found more than `cells` (80 B) queued. */
    action set_ecn_threshold(bit<19> cells) {
        meta.ecn_threshold = cells;
    }

    table ecn_table {
        key = { eg_intr_md.egress_port : exact; }
        actions = { set_ecn_threshold; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    apply {
        /* Data only (queue 1): ACKs and probes are never marked. */
        if (hdr.ipv4.isValid() && eg_intr_md.egress_qid == 1 && ecn_table.apply().hit) {
            if (hdr.ipv4.ecn != ECN_NOT_ECT && eg_intr_md.enq_qdepth > meta.ecn_threshold) {
                hdr.ipv4.ecn = ECN_CE;
                ecn_marked.count(eg_intr_md.egress_port);
            }
        }
    }
}

control RondoEgressDeparser(packet_out pkt, inout headers_t hdr, in eg_metadata_t meta,
                            in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        hdr.ipv4.hdr_checksum = ipv4_checksum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
            hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
            hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
            hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

Pipeline(
    RondoIngressParser(),
    RondoIngress(),
    RondoIngressDeparser(),
    RondoEgressParser(),
    RondoEgress(),
    RondoEgressDeparser()
) pipe;

Switch(pipe) main;
