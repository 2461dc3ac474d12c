// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: indexes an 8-slot array inside a map value with a byte taken from
 * the packet (0..255), with no upper-bound check: up to 2040 bytes past a
 * 64-byte value.
 * EXPECT: invalid access to map value, value_size=64 off=2040 size=8
 */
#include "sluice_xdp.h"

struct slots {
	__u64 slot[8];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct slots);
} tbl SEC(".maps");

SEC("xdp")
int neg_map_value_oob(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	__u32 key = 0;
	struct slots *s;

	if (data + 15 > data_end)
		return XDP_PASS;
	s = bpf_map_lookup_elem(&tbl, &key);
	if (!s)
		return XDP_PASS;
	s->slot[p[14]] += 1; /* p[14] may be 8..255 */
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
