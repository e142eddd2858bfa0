/* Our own verbs program, run under the drop-in by tests/transfer.rs: two contexts
 * of rondo0 (or the device named by the first argument, GID index the second) in
 * one process, one RC QP each, connected the usual way (GID, LID, QP number at
 * RTR). SEND, WRITE_WITH_IMM and READ of 1 B to 1 MiB with every byte checked (run
 * under injected loss and reordering); ibv_query_device_ex; a solicited-only
 * notification that waits for a solicited SEND; a CQ resized below what a third
 * pair's WRITEs complete overruns and is reported by ibv_get_async_event; then a
 * WRITE with a wrong rkey must complete with IBV_WC_REM_ACCESS_ERR. Exit 0 when
 * everything held. */
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX (1 << 20)
#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)

struct side {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *buf;
	uint16_t lid;
	union ibv_gid gid;
};

static int gid_index;

static void open_side(struct ibv_device *dev, struct side *s)
{
	struct ibv_port_attr port;
	struct ibv_qp_init_attr init = { 0 };
	struct ibv_qp_attr attr = { 0 };

	s->ctx = ibv_open_device(dev);
	if (!s->ctx) FAIL("ibv_open_device");
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd) FAIL("ibv_alloc_pd");
	s->ch = ibv_create_comp_channel(s->ctx);
	if (!s->ch) FAIL("ibv_create_comp_channel");
	s->cq = ibv_create_cq(s->ctx, 64, NULL, s->ch, 0);
	s->buf = aligned_alloc(4096, 2 * MAX + 4096);
	memset(s->buf, 0, 2 * MAX + 4096);
	s->mr = ibv_reg_mr(s->pd, s->buf, 2 * MAX + 4096,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!s->cq || !s->mr) FAIL("cq/mr");
	init.send_cq = s->cq;
	init.recv_cq = s->cq;
	init.cap.max_send_wr = 16;
	init.cap.max_recv_wr = 16;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	init.qp_type = IBV_QPT_RC;
	s->qp = ibv_create_qp(s->pd, &init);
	if (!s->qp) FAIL("ibv_create_qp");
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(s->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		FAIL("to INIT");
	if (ibv_query_port(s->ctx, 1, &port) || port.state != IBV_PORT_ACTIVE) FAIL("port");
	s->lid = port.lid;
	if (ibv_query_gid(s->ctx, 1, gid_index, &s->gid)) FAIL("gid");
	{
		/* The GID table holds the same GID at that index, port 1. */
		struct ibv_gid_entry e[8];
		ssize_t n = ibv_query_gid_table(s->ctx, e, 8, 0);
		int found = 0;

		if (n < 1) FAIL("ibv_query_gid_table: %zd", n);
		for (ssize_t i = 0; i < n; i++)
			if (e[i].gid_index == (uint32_t)gid_index && e[i].port_num == 1 &&
			    !memcmp(&e[i].gid, &s->gid, sizeof(s->gid)))
				found = 1;
		if (!found) FAIL("GID %d is not in the GID table", gid_index);
		/* Ours refuses a table too small for its entry, and flags. */
		if (!strcmp(ibv_get_device_name(s->ctx->device), "rondo0") &&
		    (ibv_query_gid_table(s->ctx, e, 0, 0) != -EINVAL ||
		     ibv_query_gid_table(s->ctx, e, 8, 1) != -EINVAL))
			FAIL("ibv_query_gid_table took a bad table or flags");
	}
}

static void connect_side(struct side *s, struct side *peer)
{
	struct ibv_qp_attr attr = { 0 };

	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_4096;
	attr.dest_qp_num = peer->qp->qp_num;
	attr.rq_psn = 0;
	attr.max_dest_rd_atomic = 1;
	attr.min_rnr_timer = 12;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.grh.dgid = peer->gid;
	attr.ah_attr.grh.hop_limit = 1;
	attr.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	attr.ah_attr.dlid = peer->lid;
	attr.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("to RTR");
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.sq_psn = 0;
	attr.max_rd_atomic = 1;
	if (ibv_modify_qp(s->qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("to RTS");
}

/* ibv_query_qp reads the QP's timeout and retry_cnt back from rondo-verbs. */
static void check_retry(struct side *s, unsigned timeout, unsigned retry_cnt, const char *when)
{
	struct ibv_qp_attr attr = { 0 };
	struct ibv_qp_init_attr init = { 0 };

	if (ibv_query_qp(s->qp, &attr, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &init)) FAIL("ibv_query_qp");
	if (attr.timeout != timeout || attr.retry_cnt != retry_cnt)
		FAIL("%s: timeout %u retry_cnt %u, not %u and %u", when, attr.timeout, attr.retry_cnt,
		     timeout, retry_cnt);
}

/* timeout and retry_cnt given at RTS, and changed in RTS, reach the QP; values out
 * of range are refused with EINVAL and change nothing. */
static void retry_attributes(struct side *s)
{
	struct ibv_qp_attr attr = { 0 };

	check_retry(s, 14, 7, "after RTS");
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 12;
	attr.retry_cnt = 3;
	if (ibv_modify_qp(s->qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT))
		FAIL("RTS to RTS with timeout 12, retry_cnt 3");
	check_retry(s, 12, 3, "after RTS to RTS");
	attr.timeout = 32;
	if (ibv_modify_qp(s->qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT) != EINVAL) FAIL("timeout 32 accepted");
	attr.timeout = 9;
	attr.retry_cnt = 8;
	if (ibv_modify_qp(s->qp, &attr, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT) != EINVAL) FAIL("retry_cnt 8 accepted");
	check_retry(s, 12, 3, "after refused values");
	/* Back to the values of RTS for the transfers (12 and 3 give up after 67 ms). */
	attr.timeout = 14;
	attr.retry_cnt = 7;
	if (ibv_modify_qp(s->qp, &attr, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT)) FAIL("timeout 14, retry_cnt 7");
	check_retry(s, 14, 7, "after setting them back");
	printf("timeout and retry_cnt reach the QP\n");
}

/* One completion of `cq` within 60 s. */
static struct ibv_wc one(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;
	time_t start = time(NULL);

	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0) FAIL("%s: ibv_poll_cq", what);
		if (n == 1) return wc;
		if (time(NULL) - start > 60) FAIL("%s: no completion within 60 s", what);
	}
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u | 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13; x ^= x >> 17; x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}

static void post(struct side *s, enum ibv_wr_opcode op, size_t off, size_t len, uint64_t raddr,
		 uint32_t rkey, uint32_t imm, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf + off, .length = (uint32_t)len, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { 0 }, *bad;

	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(s->qp, &wr, &bad)) FAIL("ibv_post_send");
}

static void post_recv(struct side *s, size_t off, size_t len, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf + off, .length = (uint32_t)len, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = len ? 1 : 0 }, *bad;

	if (ibv_post_recv(s->qp, &wr, &bad)) FAIL("ibv_post_recv");
}

static void check_wc(struct ibv_wc wc, uint64_t id, enum ibv_wc_opcode op, const char *what, size_t len)
{
	if (wc.status != IBV_WC_SUCCESS) FAIL("%s of %zu B: status %s", what, len, ibv_wc_status_str(wc.status));
	if (wc.wr_id != id || wc.opcode != op) FAIL("%s of %zu B: wr_id %llu opcode %d", what, len,
						 (unsigned long long)wc.wr_id, wc.opcode);
}

/* ibv_query_device_ex answers as ibv_query_device (the drop-in leaves the
 * extended slot empty: verbs.h falls back to the plain call). */
static void query_device_ex(struct side *s)
{
	struct ibv_device_attr plain;
	struct ibv_device_attr_ex ex;

	memset(&ex, 0xff, sizeof(ex));
	if (ibv_query_device(s->ctx, &plain)) FAIL("ibv_query_device");
	if (ibv_query_device_ex(s->ctx, NULL, &ex)) FAIL("ibv_query_device_ex");
	if (memcmp(&plain, &ex.orig_attr, sizeof(plain)) || ex.comp_mask || ex.completion_timestamp_mask)
		FAIL("ibv_query_device_ex differs from ibv_query_device");
	printf("ibv_query_device_ex ok\n");
}

/* Whether `s`'s channel has an event now (the fd is non-blocking). */
static int cq_event(struct side *s)
{
	struct ibv_cq *cq;
	void *ctx;

	if (ibv_get_cq_event(s->ch, &cq, &ctx)) {
		if (errno != EAGAIN) FAIL("ibv_get_cq_event: %s", strerror(errno));
		return 0;
	}
	if (cq != s->cq) FAIL("ibv_get_cq_event: another CQ");
	ibv_ack_cq_events(cq, 1);
	return 1;
}

static void post(struct side *s, enum ibv_wr_opcode op, size_t off, size_t len, uint64_t raddr,
		 uint32_t rkey, uint32_t imm, uint64_t id);
static void post_recv(struct side *s, size_t off, size_t len, uint64_t id);
static struct ibv_wc one(struct ibv_cq *cq, const char *what);

/* A notification armed with solicited_only fires for a SEND posted with
 * IBV_SEND_SOLICITED, not for one without. */
static void solicited(struct side *a, struct side *b, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)a->buf, .length = 8, .lkey = a->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (fcntl(b->ch->fd, F_SETFL, fcntl(b->ch->fd, F_GETFL) | O_NONBLOCK)) FAIL("fcntl");
	while (cq_event(b)) {}
	if (ibv_req_notify_cq(b->cq, 1)) FAIL("ibv_req_notify_cq(solicited_only)");
	post_recv(b, 0, 64, id);
	if (ibv_post_send(a->qp, &wr, &bad)) FAIL("ibv_post_send");
	one(a->cq, "unsolicited SEND");
	one(b->cq, "unsolicited RECV");
	if (cq_event(b)) FAIL("an unsolicited SEND fired a solicited-only notification");
	post_recv(b, 0, 64, id + 1);
	wr.wr_id = id + 1;
	wr.send_flags |= IBV_SEND_SOLICITED;
	if (ibv_post_send(a->qp, &wr, &bad)) FAIL("ibv_post_send");
	one(a->cq, "solicited SEND");
	one(b->cq, "solicited RECV");
	if (!cq_event(b)) FAIL("a solicited SEND fired no solicited-only notification");
	printf("solicited-only notification ok\n");
}

/* A CQ resized to 2 entries overruns on the third of four unpolled WRITEs: the
 * context reports IBV_EVENT_CQ_ERR for it, then IBV_EVENT_QP_FATAL for its QP. */
static void overrun(struct ibv_device *dev)
{
	struct side c, d;
	struct ibv_async_event ev;
	struct pollfd pfd;

	open_side(dev, &c);
	open_side(dev, &d);
	connect_side(&c, &d);
	connect_side(&d, &c);
	if (ibv_resize_cq(c.cq, 2)) FAIL("ibv_resize_cq to 2");
	for (int i = 0; i < 4; i++)
		post(&c, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)d.buf, d.mr->rkey, 0, (uint64_t)i);
	pfd.fd = c.ctx->async_fd;
	pfd.events = POLLIN;
	for (int k = 0; k < 2; k++) {
		if (poll(&pfd, 1, 30000) != 1) FAIL("no async event within 30 s");
		if (ibv_get_async_event(c.ctx, &ev)) FAIL("ibv_get_async_event");
		if (k == 0 && (ev.event_type != IBV_EVENT_CQ_ERR || ev.element.cq != c.cq))
			FAIL("first async event %d, not IBV_EVENT_CQ_ERR of the CQ", ev.event_type);
		if (k == 1 && (ev.event_type != IBV_EVENT_QP_FATAL || ev.element.qp != c.qp))
			FAIL("second async event %d, not IBV_EVENT_QP_FATAL of the QP", ev.event_type);
		ibv_ack_async_event(&ev);
	}
	printf("CQ overrun: async events CQ_ERR, QP_FATAL\n");
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "rondo0";
	static const size_t sizes[] = { 1, 2, 63, 4096, 8999, 65537, 300000, MAX };
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *dev = NULL;
	struct side a, b;
	uint64_t id = 1;

	gid_index = argc > 2 ? atoi(argv[2]) : 0;
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name)) dev = list[i];
	if (!dev) FAIL("no %s (is librondo_ibv.so preloaded?)", name);
	open_side(dev, &a);
	open_side(dev, &b);
	connect_side(&a, &b);
	connect_side(&b, &a);
	retry_attributes(&a);

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		struct ibv_wc wc;

		/* SEND into a receive. */
		fill(a.buf, n, (unsigned)(k + 1));
		memset(b.buf, 0, MAX);
		post_recv(&b, 0, MAX, id);
		post(&a, IBV_WR_SEND, 0, n, 0, 0, 0, id + 1);
		check_wc(one(a.cq, "SEND"), id + 1, IBV_WC_SEND, "SEND", n);
		wc = one(b.cq, "RECV");
		check_wc(wc, id, IBV_WC_RECV, "RECV", n);
		if (wc.byte_len != n || wc.wc_flags & IBV_WC_WITH_IMM) FAIL("RECV of %zu B: byte_len %u", n, wc.byte_len);
		if (memcmp(a.buf, b.buf, n)) FAIL("SEND of %zu B: bytes differ", n);
		id += 2;

		/* WRITE_WITH_IMM at an offset, consuming a zero-length receive. */
		fill(a.buf, n, (unsigned)(k + 100));
		post_recv(&b, 0, 0, id);
		post(&a, IBV_WR_RDMA_WRITE_WITH_IMM, 0, n, (uintptr_t)b.buf + MAX + 3, b.mr->rkey, 0xabc000 + (unsigned)k, id + 1);
		check_wc(one(a.cq, "WRITE_WITH_IMM"), id + 1, IBV_WC_RDMA_WRITE, "WRITE_WITH_IMM", n);
		wc = one(b.cq, "RECV_RDMA_WITH_IMM");
		check_wc(wc, id, IBV_WC_RECV_RDMA_WITH_IMM, "RECV_RDMA_WITH_IMM", n);
		if (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != 0xabc000 + (unsigned)k)
			FAIL("WRITE_WITH_IMM of %zu B: immediate %#x flags %#x", n, ntohl(wc.imm_data), wc.wc_flags);
		if (memcmp(a.buf, b.buf + MAX + 3, n)) FAIL("WRITE_WITH_IMM of %zu B: bytes differ", n);
		id += 2;

		/* READ B's bytes into A. */
		fill(b.buf, n, (unsigned)(k + 200));
		memset(a.buf + MAX, 0, n);
		post(&a, IBV_WR_RDMA_READ, MAX, n, (uintptr_t)b.buf, b.mr->rkey, 0, id);
		wc = one(a.cq, "READ");
		check_wc(wc, id, IBV_WC_RDMA_READ, "READ", n);
		if (memcmp(a.buf + MAX, b.buf, n)) FAIL("READ of %zu B: bytes differ", n);
		id += 1;
		printf("%zu B: SEND, WRITE_WITH_IMM, READ ok\n", n);
	}

	query_device_ex(&a);
	solicited(&a, &b, id);
	id += 2;
	overrun(dev);

	/* A wrong rkey. */
	post(&a, IBV_WR_RDMA_WRITE, 0, 16, (uintptr_t)b.buf, b.mr->rkey ^ 0x5a5a, 0, id);
	{
		struct ibv_wc wc = one(a.cq, "bad rkey");
		if (wc.status != IBV_WC_REM_ACCESS_ERR)
			FAIL("WRITE with a wrong rkey: status %s, not remote access error", ibv_wc_status_str(wc.status));
	}
	printf("wrong rkey: %s\n", ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR));
	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_dereg_mr(a.mr);
	ibv_dereg_mr(b.mr);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_destroy_comp_channel(a.ch);
	ibv_destroy_comp_channel(b.ch);
	ibv_dealloc_pd(a.pd);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(a.ctx);
	ibv_close_device(b.ctx);
	ibv_free_device_list(list);
	printf("all transfers checked\n");
	return 0;
}
