// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: the result of a lookup in an ARRAY_OF_MAPS (the inner map, or NULL for an empty
 * slot) is used as a map without a NULL check.
 * EXPECT: R1 type=map_value_or_null expected=map_ptr
 */
#include "sluice_xdp.h"

struct inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} inner_a SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct inner);
} outer SEC(".maps") = { .values = { [0] = &inner_a } };

SEC("xdp")
int neg_inner_map_unchecked(struct xdp_md *ctx)
{
	__u32 key = ctx->rx_queue_index & 1, zero = 0;
	void *inner = bpf_map_lookup_elem(&outer, &key);
	__u64 *v = bpf_map_lookup_elem(inner, &zero);

	if (v)
		*v += 1;
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
