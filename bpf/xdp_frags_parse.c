// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_frags_parse: a multi-buffer (frags-aware) program that reaches the bytes past the
 * linear part through the helpers, as programs for jumbo frames do.
 *
 * For every frame:
 *   stats[0] += 1, stats[1] += bpf_xdp_get_buff_len(ctx) (the whole frame),
 *   stats[2] += data_end - data (the linear part only),
 *   tail[0] = the frame's last 4 bytes, read with bpf_xdp_load_bytes (in a fragment for
 *   frames longer than the linear part);
 *   frames of more than 4000 bytes: the byte at offset 4000 is XORed with 0xff through
 *   bpf_xdp_load_bytes / bpf_xdp_store_bytes, then 100 bytes are cut from the end with
 *   bpf_xdp_adjust_tail(ctx, -100) (fragments shrink, emptied ones are released).
 * Verdict: XDP_PASS (2); XDP_ABORTED (0) if a helper fails.
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} tail SEC(".maps");

static __always_inline void add(__u32 key, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&stats, &key);

	if (p)
		__sync_fetch_and_add(p, v);
}

SEC("xdp.frags")
int xdp_frags_parse(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 total = bpf_xdp_get_buff_len(ctx);
	__u32 zero = 0, last4 = 0;
	__u8 b = 0;

	add(0, 1);
	add(1, total);
	add(2, data_end - data);
	if (total < 4 || total > 0xffff)
		return XDP_ABORTED;
	if (bpf_xdp_load_bytes(ctx, total - 4, &last4, sizeof(last4)) < 0)
		return XDP_ABORTED;
	bpf_map_update_elem(&tail, &zero, &last4, BPF_ANY);
	if (total > 4000) {
		if (bpf_xdp_load_bytes(ctx, 4000, &b, 1) < 0)
			return XDP_ABORTED;
		b ^= 0xff;
		if (bpf_xdp_store_bytes(ctx, 4000, &b, 1) < 0)
			return XDP_ABORTED;
		if (bpf_xdp_adjust_tail(ctx, -100) < 0)
			return XDP_ABORTED;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
