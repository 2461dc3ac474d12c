/* Packet-size helpers: decapsulate a VLAN-like 4-byte tag with bpf_xdp_adjust_head,
 * push metadata with bpf_xdp_adjust_meta, trim/grow with bpf_xdp_adjust_tail. */
#include "common.h"

#define ETH_P_SLUICE_TAG 0x88b5 /* "local experimental" ethertype used as a 4-byte tag */

struct tagged {
	__u8 dst[6];
	__u8 src[6];
	__u16 tag_proto;
	__u16 tag;
	__u16 inner_proto;
};

SEC("xdp")
int pop_tag(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct tagged *t = data;
	struct ethhdr *eth;
	__u8 macs[12];
	__u32 *meta;

	if ((void *)(t + 1) > data_end)
		return XDP_PASS;
	if (t->tag_proto != bpf_htons(ETH_P_SLUICE_TAG))
		return XDP_PASS;
	__builtin_memcpy(macs, t, 12);
	if (bpf_xdp_adjust_head(ctx, 4))
		return XDP_ABORTED;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(eth, macs, 12);

	/* remember the tag in 4 bytes of metadata */
	if (bpf_xdp_adjust_meta(ctx, -4))
		return XDP_ABORTED;
	meta = (void *)(long)ctx->data_meta;
	data = (void *)(long)ctx->data;
	if ((void *)(meta + 1) > data)
		return XDP_ABORTED;
	*meta = 0xabcd0000 | 7;
	return XDP_PASS;
}

SEC("xdp")
int push_tag(struct xdp_md *ctx)
{
	void *data, *data_end;
	struct tagged *t;
	__u8 macs[12];

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + 14 > data_end)
		return XDP_PASS;
	__builtin_memcpy(macs, data, 12);
	if (bpf_xdp_adjust_head(ctx, -4))
		return XDP_ABORTED;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	t = data;
	if ((void *)(t + 1) > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(t, macs, 12);
	t->tag_proto = bpf_htons(ETH_P_SLUICE_TAG);
	t->tag = bpf_htons(7);
	return XDP_TX;
}

/* Truncate to 60 bytes, or pad up to 60 bytes when shorter (grown bytes are zero). */
SEC("xdp")
int set_len_60(struct xdp_md *ctx)
{
	int len = ctx->data_end - ctx->data;

	if (bpf_xdp_adjust_tail(ctx, 60 - len))
		return XDP_ABORTED;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
