/* A stand-in RDMA device for tests/nic_standin.rs, on hosts without one: preloaded
 * after librondo_ibv.so, its functions are what the drop-in finds as "the real
 * libibverbs" (dlvsym(RTLD_NEXT, ...)), so the drop-in lists one real device,
 * "standin0", and makes rondo_standin0 over it. It answers the queries a NIC
 * answers (a ConnectX-7's identity, one active Ethernet port, MTU 1024, a GID
 * table of RoCE v1 and v2 entries of a link-local and an IPv4-mapped address);
 * it has no data path: ibv_alloc_pd fails with ENOSYS. Versioned by
 * standin.map as libibverbs' own symbols. */
#include <infiniband/verbs.h>
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIDS 4

static struct ibv_device dev = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "standin0",
	.dev_name = "uverbs-standin0",
	.dev_path = "/nonexistent/standin0",
	.ibdev_path = "/nonexistent/standin0",
};

static void gid_of(int index, union ibv_gid *gid, int *roce_v2)
{
	memset(gid, 0, sizeof(*gid));
	if (index < 2) {
		gid->raw[0] = 0xfe; /* fe80::1 */
		gid->raw[1] = 0x80;
		gid->raw[15] = 1;
	} else {
		gid->raw[10] = 0xff; /* ::ffff:127.0.0.1 */
		gid->raw[11] = 0xff;
		gid->raw[12] = 127;
		gid->raw[15] = 1;
	}
	*roce_v2 = index % 2;
}

struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **l = calloc(2, sizeof(*l));

	if (!l) return NULL;
	l[0] = &dev;
	if (num) *num = 1;
	return l;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *d)
{
	return d->name;
}

__be64 ibv_get_device_guid(struct ibv_device *d)
{
	(void)d;
	return htobe64(0x0002c90300abcdefULL);
}

int ibv_get_device_index(struct ibv_device *d)
{
	(void)d;
	return 7;
}

struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	struct verbs_context *v = calloc(1, sizeof(*v));

	if (!v) return NULL;
	v->context.device = d;
	v->context.cmd_fd = -1;
	v->context.async_fd = -1;
	return &v->context;
}

int ibv_close_device(struct ibv_context *ctx)
{
	free((char *)ctx - offsetof(struct verbs_context, context));
	return 0;
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	(void)ctx;
	memset(a, 0, sizeof(*a));
	strcpy(a->fw_ver, "28.39.1002");
	a->node_guid = htobe64(0x0002c90300abcdefULL);
	a->sys_image_guid = a->node_guid;
	a->vendor_id = 0x02c9;
	a->vendor_part_id = 4129;
	a->max_qp_wr = 16384;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_srq = 1 << 20;
	a->max_mr_size = ~0ULL;
	a->max_pkeys = 128;
	a->phys_port_cnt = 1;
	return 0;
}

/* The exported call fills struct _compat_ibv_port_attr: ibv_port_attr up to
 * port_cap_flags2. */
int (ibv_query_port)(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *out)
{
	struct ibv_port_attr attr, *a = &attr;

	(void)ctx;
	if (port != 1) return EINVAL;
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_1024;
	a->gid_tbl_len = GIDS;
	a->max_msg_sz = 1 << 30;
	a->pkey_tbl_len = 128;
	a->active_width = 2;
	a->active_speed = 64;
	a->phys_state = 5;
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	memcpy(out, a, offsetof(struct ibv_port_attr, port_cap_flags2));
	return 0;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	int v2;

	(void)ctx;
	if (port != 1 || index < 0 || index >= GIDS) return -1;
	gid_of(index, gid, &v2);
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index, struct ibv_gid_entry *e,
		      uint32_t flags, size_t size)
{
	int v2;

	(void)ctx;
	if (port != 1 || index >= GIDS || flags || size < sizeof(*e)) return EINVAL;
	memset(e, 0, sizeof(*e));
	gid_of((int)index, &e->gid, &v2);
	e->gid_index = index;
	e->port_num = 1;
	e->gid_type = v2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
	return 0;
}

ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *e, size_t max, uint32_t flags,
			     size_t size)
{
	size_t n = max < GIDS ? max : GIDS;

	for (size_t i = 0; i < n; i++)
		if (_ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e[i], flags, size)) return -EINVAL;
	return (ssize_t)n;
}

int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index, int *type)
{
	(void)ctx;
	if (port != 1 || index >= GIDS) return EINVAL;
	*type = index % 2; /* sysfs enum: RoCE v1 0, RoCE v2 1 */
	return 0;
}

int ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey)
{
	(void)ctx;
	if (port != 1 || index != 0) return -1;
	*pkey = htobe16(0xffff);
	return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	(void)ctx;
	fprintf(stderr, "standin0: no data path (a stand-in device)\n");
	errno = ENOSYS;
	return NULL;
}
