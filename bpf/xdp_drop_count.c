// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_drop_count: count every frame and its length, then drop it.
 *
 * Maps:
 *   drop_stats  ARRAY, 1 entry, key u32 0 -> struct datarec { u64 packets; u64 bytes; }
 *               updated with __sync_fetch_and_add (BPF_ATOMIC ADD, result unused).
 * Verdict: always XDP_DROP (1).
 * After N frames: packets == N, bytes == sum of (data_end - data).
 */
#include "sluice_xdp.h"

struct datarec {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct datarec);
} drop_stats SEC(".maps");

SEC("xdp")
int xdp_drop_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 len = data_end - data;
	__u32 key = 0;
	struct datarec *rec;

	rec = bpf_map_lookup_elem(&drop_stats, &key);
	if (!rec)
		return XDP_ABORTED;
	__sync_fetch_and_add(&rec->packets, 1);
	__sync_fetch_and_add(&rec->bytes, len);
	return XDP_DROP;
}

char _license[] SEC("license") = "Dual BSD/GPL";
