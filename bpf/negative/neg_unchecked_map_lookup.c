// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: dereferences the result of bpf_map_lookup_elem without a NULL check.
 * The helper returns PTR_TO_MAP_VALUE_OR_NULL; only a comparison with 0 turns
 * it into a map value pointer.
 * KERNEL QUIRK: the map is a HASH on purpose. Recent verifiers (6.18 here)
 * treat a lookup in an ARRAY map with a constant, in-range key as never NULL
 * (PTR_TO_MAP_VALUE directly), so the same code on an ARRAY map LOADS.
 * EXPECT: invalid mem access 'map_value_or_null'
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cnt SEC(".maps");

SEC("xdp")
int neg_unchecked_map_lookup(struct xdp_md *ctx)
{
	__u32 key = 0;
	__u64 *v = bpf_map_lookup_elem(&cnt, &key);

	*v += 1;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
