/* Prints the sizes and offsets rondo-ibv's abi.rs relies on, from the installed
 * <infiniband/verbs.h>, in the form abi::layout_table() and abi::slot_table() give
 * them (tests/layout.rs compares the two). */
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdio.h>

#define SZ(t) printf(#t ".sizeof %zu\n", sizeof(struct t))
#define OFF(t, f) printf(#t "." #f " %zu\n", offsetof(struct t, f))
#define OFF_AS(t, path, name) printf(#t "." name " %zu\n", offsetof(struct t, path))
#define SLOT(prefix, t, f) printf(prefix "." #f " %zu\n", offsetof(struct t, f))

int main(void)
{
	SZ(ibv_device); OFF(ibv_device, node_type); OFF(ibv_device, transport_type);
	OFF(ibv_device, name); OFF(ibv_device, dev_name); OFF(ibv_device, dev_path);
	OFF(ibv_device, ibdev_path);
	SZ(ibv_context); OFF(ibv_context, device); OFF(ibv_context, ops); OFF(ibv_context, cmd_fd);
	OFF(ibv_context, async_fd); OFF(ibv_context, num_comp_vectors); OFF(ibv_context, mutex);
	OFF(ibv_context, abi_compat);
	SZ(verbs_context); OFF(verbs_context, context);
	SZ(ibv_pd); OFF(ibv_pd, context); OFF(ibv_pd, handle);
	SZ(ibv_mr); OFF(ibv_mr, context); OFF(ibv_mr, pd); OFF(ibv_mr, addr); OFF(ibv_mr, length);
	OFF(ibv_mr, handle); OFF(ibv_mr, lkey); OFF(ibv_mr, rkey);
	SZ(ibv_comp_channel); OFF(ibv_comp_channel, context); OFF(ibv_comp_channel, fd);
	OFF(ibv_comp_channel, refcnt);
	SZ(ibv_cq); OFF(ibv_cq, context); OFF(ibv_cq, channel); OFF(ibv_cq, cq_context);
	OFF(ibv_cq, handle); OFF(ibv_cq, cqe); OFF(ibv_cq, mutex); OFF(ibv_cq, cond);
	OFF(ibv_cq, comp_events_completed); OFF(ibv_cq, async_events_completed);
	SZ(ibv_qp); OFF(ibv_qp, context); OFF(ibv_qp, qp_context); OFF(ibv_qp, pd);
	OFF(ibv_qp, send_cq); OFF(ibv_qp, recv_cq); OFF(ibv_qp, srq); OFF(ibv_qp, handle);
	OFF(ibv_qp, qp_num); OFF(ibv_qp, state); OFF(ibv_qp, qp_type); OFF(ibv_qp, mutex);
	OFF(ibv_qp, cond); OFF(ibv_qp, events_completed);
	SZ(ibv_qp_ex); OFF(ibv_qp_ex, qp_base); OFF(ibv_qp_ex, comp_mask); OFF(ibv_qp_ex, wr_id);
	OFF(ibv_qp_ex, wr_flags); OFF_AS(ibv_qp_ex, wr_atomic_cmp_swp, "slots");
	SZ(ibv_sge); OFF(ibv_sge, addr); OFF(ibv_sge, length); OFF(ibv_sge, lkey);
	SZ(ibv_data_buf); OFF(ibv_data_buf, addr); OFF(ibv_data_buf, length);
	SZ(ibv_send_wr); OFF(ibv_send_wr, wr_id); OFF(ibv_send_wr, next); OFF(ibv_send_wr, sg_list);
	OFF(ibv_send_wr, num_sge); OFF(ibv_send_wr, opcode); OFF(ibv_send_wr, send_flags);
	OFF(ibv_send_wr, imm_data); OFF_AS(ibv_send_wr, wr.rdma.remote_addr, "remote_addr");
	OFF_AS(ibv_send_wr, wr.rdma.rkey, "rkey");
	SZ(ibv_recv_wr); OFF(ibv_recv_wr, wr_id); OFF(ibv_recv_wr, next); OFF(ibv_recv_wr, sg_list);
	OFF(ibv_recv_wr, num_sge);
	SZ(ibv_wc); OFF(ibv_wc, wr_id); OFF(ibv_wc, status); OFF(ibv_wc, opcode);
	OFF(ibv_wc, vendor_err); OFF(ibv_wc, byte_len); OFF(ibv_wc, imm_data); OFF(ibv_wc, qp_num);
	OFF(ibv_wc, src_qp); OFF(ibv_wc, wc_flags); OFF(ibv_wc, pkey_index); OFF(ibv_wc, slid);
	OFF(ibv_wc, sl); OFF(ibv_wc, dlid_path_bits);
	SZ(ibv_qp_cap); OFF(ibv_qp_cap, max_send_wr); OFF(ibv_qp_cap, max_recv_wr);
	OFF(ibv_qp_cap, max_send_sge); OFF(ibv_qp_cap, max_recv_sge); OFF(ibv_qp_cap, max_inline_data);
	SZ(ibv_qp_init_attr); OFF(ibv_qp_init_attr, qp_context); OFF(ibv_qp_init_attr, send_cq);
	OFF(ibv_qp_init_attr, recv_cq); OFF(ibv_qp_init_attr, srq); OFF(ibv_qp_init_attr, cap);
	OFF(ibv_qp_init_attr, qp_type); OFF(ibv_qp_init_attr, sq_sig_all);
	SZ(ibv_qp_init_attr_ex); OFF(ibv_qp_init_attr_ex, cap); OFF(ibv_qp_init_attr_ex, qp_type);
	OFF(ibv_qp_init_attr_ex, sq_sig_all); OFF(ibv_qp_init_attr_ex, comp_mask);
	OFF(ibv_qp_init_attr_ex, pd); OFF(ibv_qp_init_attr_ex, create_flags);
	OFF(ibv_qp_init_attr_ex, source_qpn); OFF(ibv_qp_init_attr_ex, send_ops_flags);
	SZ(ibv_global_route); OFF(ibv_global_route, dgid); OFF(ibv_global_route, flow_label);
	OFF(ibv_global_route, sgid_index); OFF(ibv_global_route, hop_limit);
	OFF(ibv_global_route, traffic_class);
	SZ(ibv_ah_attr); OFF(ibv_ah_attr, grh); OFF(ibv_ah_attr, dlid); OFF(ibv_ah_attr, sl);
	OFF(ibv_ah_attr, src_path_bits); OFF(ibv_ah_attr, static_rate); OFF(ibv_ah_attr, is_global);
	OFF(ibv_ah_attr, port_num);
	SZ(ibv_qp_attr); OFF(ibv_qp_attr, qp_state); OFF(ibv_qp_attr, path_mtu); OFF(ibv_qp_attr, qkey);
	OFF(ibv_qp_attr, rq_psn); OFF(ibv_qp_attr, sq_psn); OFF(ibv_qp_attr, dest_qp_num);
	OFF(ibv_qp_attr, qp_access_flags); OFF(ibv_qp_attr, cap); OFF(ibv_qp_attr, ah_attr);
	OFF(ibv_qp_attr, alt_ah_attr); OFF(ibv_qp_attr, pkey_index); OFF(ibv_qp_attr, max_rd_atomic);
	OFF(ibv_qp_attr, max_dest_rd_atomic); OFF(ibv_qp_attr, min_rnr_timer);
	OFF(ibv_qp_attr, port_num); OFF(ibv_qp_attr, timeout); OFF(ibv_qp_attr, retry_cnt);
	OFF(ibv_qp_attr, rnr_retry); OFF(ibv_qp_attr, rate_limit);
	SZ(ibv_device_attr); OFF(ibv_device_attr, node_guid); OFF(ibv_device_attr, max_mr_size);
	OFF(ibv_device_attr, vendor_id); OFF(ibv_device_attr, vendor_part_id);
	OFF(ibv_device_attr, max_qp); OFF(ibv_device_attr, max_qp_wr); OFF(ibv_device_attr, max_sge);
	OFF(ibv_device_attr, max_cqe); OFF(ibv_device_attr, max_qp_rd_atom);
	OFF(ibv_device_attr, max_qp_init_rd_atom); OFF(ibv_device_attr, atomic_cap);
	OFF(ibv_device_attr, max_srq); OFF(ibv_device_attr, max_pkeys);
	OFF(ibv_device_attr, phys_port_cnt);
	SZ(ibv_port_attr); OFF(ibv_port_attr, state); OFF(ibv_port_attr, max_mtu);
	OFF(ibv_port_attr, active_mtu); OFF(ibv_port_attr, gid_tbl_len);
	OFF(ibv_port_attr, port_cap_flags); OFF(ibv_port_attr, max_msg_sz);
	OFF(ibv_port_attr, pkey_tbl_len); OFF(ibv_port_attr, lid); OFF(ibv_port_attr, sm_lid);
	OFF(ibv_port_attr, lmc); OFF(ibv_port_attr, max_vl_num); OFF(ibv_port_attr, active_width);
	OFF(ibv_port_attr, active_speed); OFF(ibv_port_attr, phys_state);
	OFF(ibv_port_attr, link_layer); OFF(ibv_port_attr, flags); OFF(ibv_port_attr, port_cap_flags2);
	SZ(ibv_gid_entry); OFF(ibv_gid_entry, gid); OFF(ibv_gid_entry, gid_index);
	OFF(ibv_gid_entry, port_num); OFF(ibv_gid_entry, gid_type); OFF(ibv_gid_entry, ndev_ifindex);
	SZ(ibv_async_event); OFF(ibv_async_event, element); OFF(ibv_async_event, event_type);

	SLOT("ops", ibv_context_ops, poll_cq); SLOT("ops", ibv_context_ops, req_notify_cq);
	SLOT("ops", ibv_context_ops, post_srq_recv); SLOT("ops", ibv_context_ops, post_send);
	SLOT("ops", ibv_context_ops, post_recv);
	SLOT("vctx", verbs_context, query_port); SLOT("vctx", verbs_context, query_device_ex);
	SLOT("vctx", verbs_context, create_qp_ex); SLOT("vctx", verbs_context, sz);
	SLOT("wr", ibv_qp_ex, wr_rdma_read); SLOT("wr", ibv_qp_ex, wr_rdma_write);
	SLOT("wr", ibv_qp_ex, wr_rdma_write_imm); SLOT("wr", ibv_qp_ex, wr_send);
	SLOT("wr", ibv_qp_ex, wr_send_imm); SLOT("wr", ibv_qp_ex, wr_set_inline_data);
	SLOT("wr", ibv_qp_ex, wr_set_inline_data_list); SLOT("wr", ibv_qp_ex, wr_set_sge);
	SLOT("wr", ibv_qp_ex, wr_set_sge_list); SLOT("wr", ibv_qp_ex, wr_start);
	SLOT("wr", ibv_qp_ex, wr_complete); SLOT("wr", ibv_qp_ex, wr_abort);
	SLOT("wr", ibv_qp_ex, wr_atomic_write);
	printf("sizeof.ibv_context_ops %zu\n", sizeof(struct ibv_context_ops));
	return 0;
}
