//! The libibverbs ABI this library implements: `struct`s laid out as rdma-core's
//! `<infiniband/verbs.h>` (rdma-core 44 on x86_64 Linux), the enum values it uses,
//! and compile-time checks of every size and offset the programs rely on. A C
//! `offsetof` program (`tests/c/layout.c`, run by `tests/layout.rs`) checks the same
//! numbers against the header installed on the host.
//!
//! Tables of function pointers (`ibv_context_ops`, the part of `verbs_context`
//! before the context) are arrays of slots; the slot indices name the entries.
#![allow(non_camel_case_types, missing_docs)]

use core::mem::{offset_of, size_of};
use libc::{c_char, c_int, c_void, pthread_cond_t, pthread_mutex_t};

/// `IBV_SYSFS_NAME_MAX`.
pub const SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const SYSFS_PATH_MAX: usize = 256;

#[repr(C)]
pub struct ibv_device {
    pub _ops: [usize; 2],
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; SYSFS_NAME_MAX],
    pub dev_name: [c_char; SYSFS_NAME_MAX],
    pub dev_path: [c_char; SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; SYSFS_PATH_MAX],
}

/// Slots of `struct ibv_context_ops` (32 pointers).
pub mod ops {
    pub const POLL_CQ: usize = 11;
    pub const REQ_NOTIFY_CQ: usize = 12;
    pub const POST_SRQ_RECV: usize = 20;
    pub const POST_SEND: usize = 25;
    pub const POST_RECV: usize = 26;
    pub const COUNT: usize = 32;
}

#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: [usize; ops::COUNT],
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// Slots of `struct verbs_context` before its `context` member (40 pointers).
pub mod vctx {
    pub const QUERY_PORT: usize = 0;
    pub const QUERY_DEVICE_EX: usize = 27;
    pub const CREATE_QP_EX: usize = 33;
    /// `sz`: the size of `struct verbs_context`.
    pub const SZ: usize = 39;
    pub const COUNT: usize = 40;
}

#[repr(C)]
pub struct verbs_context {
    pub slots: [usize; vctx::COUNT],
    pub context: ibv_context,
}

/// `__VERBS_ABI_IS_EXTENDED`.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// Slots of `struct ibv_qp_ex` after `wr_flags` (21 pointers).
pub mod wr {
    pub const ATOMIC_CMP_SWP: usize = 0;
    pub const ATOMIC_FETCH_ADD: usize = 1;
    pub const BIND_MW: usize = 2;
    pub const LOCAL_INV: usize = 3;
    pub const RDMA_READ: usize = 4;
    pub const RDMA_WRITE: usize = 5;
    pub const RDMA_WRITE_IMM: usize = 6;
    pub const SEND: usize = 7;
    pub const SEND_IMM: usize = 8;
    pub const SEND_INV: usize = 9;
    pub const SEND_TSO: usize = 10;
    pub const SET_UD_ADDR: usize = 11;
    pub const SET_XRC_SRQN: usize = 12;
    pub const SET_INLINE_DATA: usize = 13;
    pub const SET_INLINE_DATA_LIST: usize = 14;
    pub const SET_SGE: usize = 15;
    pub const SET_SGE_LIST: usize = 16;
    pub const START: usize = 17;
    pub const COMPLETE: usize = 18;
    pub const ABORT: usize = 19;
    pub const ATOMIC_WRITE: usize = 20;
    pub const COUNT: usize = 21;
}

#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: u32,
    pub slots: [usize; wr::COUNT],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

#[repr(C)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: u32,
    pub send_flags: u32,
    pub imm_data: u32,
    /// `wr.rdma.remote_addr` (and the other members of the `wr` union).
    pub remote_addr: u64,
    /// `wr.rdma.rkey`.
    pub rkey: u32,
    pub _wr_rest: [u32; 5],
    pub _qp_type: u32,
    pub _bind_tso: [u64; 6],
}

#[repr(C)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

#[repr(C)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: [u64; 3],
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// 8-aligned: `union ibv_gid` holds two `__be64`s.
#[repr(C, align(8))]
#[derive(Clone, Copy, Default)]
pub struct ibv_global_route {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_qp_attr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: u32,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: u32,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr` of rdma-core 44 (52 bytes; the exported `ibv_query_port`
/// takes only its first [`COMPAT_PORT_ATTR_LEN`] bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_port_attr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// Size of `struct _compat_ibv_port_attr`: `ibv_port_attr` up to `flags`.
pub const COMPAT_PORT_ATTR_LEN: usize = 48;

/// 8-aligned, as `union ibv_gid`.
#[repr(C, align(8))]
#[derive(Clone, Copy, Default)]
pub struct ibv_gid_entry {
    pub gid: [u8; 16],
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

/// `struct ibv_async_event`: `element` is the union of a CQ, QP, SRQ or WQ
/// pointer and a port number (which one, `event_type` says).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_async_event {
    pub element: usize,
    pub event_type: u32,
}

// Enum values.
pub const IBV_NODE_CA: c_int = 1;
pub const IBV_TRANSPORT_IB: c_int = 0;
pub const IBV_QPT_RC: u32 = 2;
pub const IBV_QPS_RESET: u32 = 0;
pub const IBV_QPS_INIT: u32 = 1;
pub const IBV_QPS_RTR: u32 = 2;
pub const IBV_QPS_RTS: u32 = 3;
pub const IBV_QPS_ERR: u32 = 6;
pub const IBV_QP_STATE: c_int = 1;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_AV: c_int = 1 << 7;
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;
pub const IBV_PORT_ACTIVE: u32 = 4;
pub const IBV_MTU_4096: u32 = 5;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
pub const IBV_WR_RDMA_WRITE: u32 = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
pub const IBV_WR_SEND: u32 = 2;
pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
pub const IBV_WR_RDMA_READ: u32 = 4;
pub const IBV_SEND_SIGNALED: u32 = 2;
pub const IBV_SEND_SOLICITED: u32 = 4;
pub const IBV_SEND_INLINE: u32 = 8;
/// `IBV_EVENT_CQ_ERR` (`enum ibv_event_type`).
pub const IBV_EVENT_CQ_ERR: u32 = 0;
/// `IBV_EVENT_QP_FATAL`.
pub const IBV_EVENT_QP_FATAL: u32 = 1;
pub const IBV_WC_WITH_IMM: u32 = 2;
pub const IBV_WC_SEND: u32 = 0;
pub const IBV_WC_RDMA_WRITE: u32 = 1;
pub const IBV_WC_RDMA_READ: u32 = 2;
pub const IBV_WC_RECV: u32 = 128;
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = 129;
pub const IBV_ACCESS_LOCAL_WRITE: u32 = 1;
pub const IBV_ACCESS_REMOTE_WRITE: u32 = 2;
pub const IBV_ACCESS_REMOTE_READ: u32 = 4;
pub const IBV_ACCESS_REMOTE_ATOMIC: u32 = 8;
pub const IBV_ACCESS_MW_BIND: u32 = 16;
/// `IBV_ACCESS_OPTIONAL_FIRST`: flags from here up may be ignored by a provider.
pub const IBV_ACCESS_OPTIONAL_FIRST: u32 = 1 << 20;
pub const IBV_QP_INIT_ATTR_PD: u32 = 1;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;
/// `IBV_QP_EX_WITH_*` of what Rondo carries: WRITE, WRITE_WITH_IMM, SEND,
/// SEND_WITH_IMM, READ.
pub const SUPPORTED_SEND_OPS: u64 = 0x1f;
/// `IBV_GID_TYPE_ROCE_V2` (public enum `ibv_gid_type`).
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;
/// `IBV_GID_TYPE_SYSFS_ROCE_V2` (private enum `ibv_gid_type_sysfs`).
pub const IBV_GID_TYPE_SYSFS_ROCE_V2: u32 = 1;

/// Work completion statuses (`enum ibv_wc_status`).
pub mod wc_status {
    pub const SUCCESS: u32 = 0;
    pub const LOC_LEN_ERR: u32 = 1;
    pub const LOC_PROT_ERR: u32 = 4;
    pub const WR_FLUSH_ERR: u32 = 5;
    pub const REM_INV_REQ_ERR: u32 = 9;
    pub const REM_ACCESS_ERR: u32 = 10;
    pub const REM_OP_ERR: u32 = 11;
    pub const RETRY_EXC_ERR: u32 = 12;
    pub const RNR_RETRY_EXC_ERR: u32 = 13;
    pub const GENERAL_ERR: u32 = 21;
}

macro_rules! layout {
    ($( $ty:ident { size $size:expr $(, $field:ident @ $off:expr)* } )*) => {
        $(
            const _: () = assert!(size_of::<$ty>() == $size);
            $( const _: () = assert!(offset_of!($ty, $field) == $off); )*
        )*
        /// Every size and offset checked above, as `struct.field offset` lines (sizes
        /// as `struct.sizeof`), in the form `tests/c/layout.c` prints them from the
        /// installed header.
        pub fn layout_table() -> String {
            let mut s = String::new();
            $(
                s.push_str(&format!("{}.sizeof {}\n", stringify!($ty), size_of::<$ty>()));
                $( s.push_str(&format!("{}.{} {}\n", stringify!($ty), stringify!($field), offset_of!($ty, $field))); )*
            )*
            s
        }
    };
}

layout! {
    ibv_device { size 664, node_type @ 16, transport_type @ 20, name @ 24, dev_name @ 88, dev_path @ 152, ibdev_path @ 408 }
    ibv_context { size 328, device @ 0, ops @ 8, cmd_fd @ 264, async_fd @ 268, num_comp_vectors @ 272, mutex @ 280, abi_compat @ 320 }
    verbs_context { size 648, context @ 320 }
    ibv_pd { size 16, context @ 0, handle @ 8 }
    ibv_mr { size 48, context @ 0, pd @ 8, addr @ 16, length @ 24, handle @ 32, lkey @ 36, rkey @ 40 }
    ibv_comp_channel { size 16, context @ 0, fd @ 8, refcnt @ 12 }
    ibv_cq { size 128, context @ 0, channel @ 8, cq_context @ 16, handle @ 24, cqe @ 28, mutex @ 32, cond @ 72, comp_events_completed @ 120, async_events_completed @ 124 }
    ibv_qp { size 160, context @ 0, qp_context @ 8, pd @ 16, send_cq @ 24, recv_cq @ 32, srq @ 40, handle @ 48, qp_num @ 52, state @ 56, qp_type @ 60, mutex @ 64, cond @ 104, events_completed @ 152 }
    ibv_qp_ex { size 352, qp_base @ 0, comp_mask @ 160, wr_id @ 168, wr_flags @ 176, slots @ 184 }
    ibv_sge { size 16, addr @ 0, length @ 8, lkey @ 12 }
    ibv_data_buf { size 16, addr @ 0, length @ 8 }
    ibv_send_wr { size 128, wr_id @ 0, next @ 8, sg_list @ 16, num_sge @ 24, opcode @ 28, send_flags @ 32, imm_data @ 36, remote_addr @ 40, rkey @ 48 }
    ibv_recv_wr { size 32, wr_id @ 0, next @ 8, sg_list @ 16, num_sge @ 24 }
    ibv_wc { size 48, wr_id @ 0, status @ 8, opcode @ 12, vendor_err @ 16, byte_len @ 20, imm_data @ 24, qp_num @ 28, src_qp @ 32, wc_flags @ 36, pkey_index @ 40, slid @ 42, sl @ 44, dlid_path_bits @ 45 }
    ibv_qp_cap { size 20, max_send_wr @ 0, max_recv_wr @ 4, max_send_sge @ 8, max_recv_sge @ 12, max_inline_data @ 16 }
    ibv_qp_init_attr { size 64, qp_context @ 0, send_cq @ 8, recv_cq @ 16, srq @ 24, cap @ 32, qp_type @ 52, sq_sig_all @ 56 }
    ibv_qp_init_attr_ex { size 136, cap @ 32, qp_type @ 52, sq_sig_all @ 56, comp_mask @ 60, pd @ 64, create_flags @ 80, source_qpn @ 120, send_ops_flags @ 128 }
    ibv_global_route { size 24, dgid @ 0, flow_label @ 16, sgid_index @ 20, hop_limit @ 21, traffic_class @ 22 }
    ibv_ah_attr { size 32, grh @ 0, dlid @ 24, sl @ 26, src_path_bits @ 27, static_rate @ 28, is_global @ 29, port_num @ 30 }
    ibv_qp_attr { size 144, qp_state @ 0, path_mtu @ 8, qkey @ 16, rq_psn @ 20, sq_psn @ 24, dest_qp_num @ 28, qp_access_flags @ 32, cap @ 36, ah_attr @ 56, alt_ah_attr @ 88, pkey_index @ 120, max_rd_atomic @ 126, max_dest_rd_atomic @ 127, min_rnr_timer @ 128, port_num @ 129, timeout @ 130, retry_cnt @ 131, rnr_retry @ 132, rate_limit @ 136 }
    ibv_device_attr { size 232, node_guid @ 64, max_mr_size @ 80, vendor_id @ 96, vendor_part_id @ 100, max_qp @ 108, max_qp_wr @ 112, max_sge @ 120, max_cqe @ 132, max_qp_rd_atom @ 144, max_qp_init_rd_atom @ 156, atomic_cap @ 164, max_srq @ 212, max_pkeys @ 224, phys_port_cnt @ 227 }
    ibv_port_attr { size 52, state @ 0, max_mtu @ 4, active_mtu @ 8, gid_tbl_len @ 12, port_cap_flags @ 16, max_msg_sz @ 20, pkey_tbl_len @ 32, lid @ 34, sm_lid @ 36, lmc @ 38, max_vl_num @ 39, active_width @ 43, active_speed @ 44, phys_state @ 45, link_layer @ 46, flags @ 47, port_cap_flags2 @ 48 }
    ibv_gid_entry { size 32, gid @ 0, gid_index @ 16, port_num @ 20, gid_type @ 24, ndev_ifindex @ 28 }
    ibv_async_event { size 16, element @ 0, event_type @ 8 }
}

/// The slot offsets the inline functions of `verbs.h` use, as `tests/c/layout.c`
/// prints them (`ops.*` into `struct ibv_context_ops`, `vctx.*` into
/// `struct verbs_context`, `wr.*` into `struct ibv_qp_ex`).
pub fn slot_table() -> String {
    let ops_at = |slot: usize| slot * 8;
    let vctx_at = |slot: usize| slot * 8;
    let wr_at = |slot: usize| offset_of!(ibv_qp_ex, slots) + slot * 8;
    [
        ("ops.poll_cq", ops_at(ops::POLL_CQ)),
        ("ops.req_notify_cq", ops_at(ops::REQ_NOTIFY_CQ)),
        ("ops.post_srq_recv", ops_at(ops::POST_SRQ_RECV)),
        ("ops.post_send", ops_at(ops::POST_SEND)),
        ("ops.post_recv", ops_at(ops::POST_RECV)),
        ("vctx.query_port", vctx_at(vctx::QUERY_PORT)),
        ("vctx.query_device_ex", vctx_at(vctx::QUERY_DEVICE_EX)),
        ("vctx.create_qp_ex", vctx_at(vctx::CREATE_QP_EX)),
        ("vctx.sz", vctx_at(vctx::SZ)),
        ("wr.wr_rdma_read", wr_at(wr::RDMA_READ)),
        ("wr.wr_rdma_write", wr_at(wr::RDMA_WRITE)),
        ("wr.wr_rdma_write_imm", wr_at(wr::RDMA_WRITE_IMM)),
        ("wr.wr_send", wr_at(wr::SEND)),
        ("wr.wr_send_imm", wr_at(wr::SEND_IMM)),
        ("wr.wr_set_inline_data", wr_at(wr::SET_INLINE_DATA)),
        (
            "wr.wr_set_inline_data_list",
            wr_at(wr::SET_INLINE_DATA_LIST),
        ),
        ("wr.wr_set_sge", wr_at(wr::SET_SGE)),
        ("wr.wr_set_sge_list", wr_at(wr::SET_SGE_LIST)),
        ("wr.wr_start", wr_at(wr::START)),
        ("wr.wr_complete", wr_at(wr::COMPLETE)),
        ("wr.wr_abort", wr_at(wr::ABORT)),
        ("wr.wr_atomic_write", wr_at(wr::ATOMIC_WRITE)),
        ("sizeof.ibv_context_ops", ops::COUNT * 8),
    ]
    .iter()
    .map(|(n, o)| format!("{n} {o}\n"))
    .collect()
}
