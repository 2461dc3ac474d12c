// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_big_arrays: the memory shape of a production load balancer: two huge u64 arrays
 * (33,554,432 and 16,777,216 entries) and a 4,194,304-entry hash, 704 MiB in the kernel,
 * of which a run touches a handful of slots.
 *
 * Maps:
 *   conn_slots    ARRAY[1 << 25] u64: slot (saddr * 2654435761) >> 7 (IPv4), += frame length.
 *   ring_slots    ARRAY[1 << 24] u64: slot (frame length * 40503) & (1 << 24) - 1, += 1.
 *   conn_table    HASH[1 << 22] saddr -> u64 (preallocated: BPF_F_NO_PREALLOC absent),
 *                 frames per IPv4 source.
 * Verdict: XDP_PASS (2) always. Not in the kernel oracle corpus (bpftool would dump every
 * slot: 50M JSON entries); sluice's memory for it is measured in BENCHMARKS.md and checked
 * under a memory limit by tests/xdp_big_maps.rs.
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 25);
	__type(key, __u32);
	__type(value, __u64);
} conn_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 24);
	__type(key, __u32);
	__type(value, __u64);
} ring_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 22);
	__type(key, __u32);
	__type(value, __u64);
} conn_table SEC(".maps");

SEC("xdp")
int xdp_big_arrays(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u32 len = data_end - data;
	__u32 key = (len * 40503) & ((1 << 24) - 1);
	__u64 *v;

	v = bpf_map_lookup_elem(&ring_slots, &key);
	if (v)
		*v += 1;
	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	v = bpf_map_lookup_elem(&conn_table, &ip->saddr);
	if (v) {
		*v += 1;
	} else {
		__u64 one = 1;

		bpf_map_update_elem(&conn_table, &ip->saddr, &one, BPF_NOEXIST);
	}
	key = (ip->saddr * 2654435761u) >> 7;
	v = bpf_map_lookup_elem(&conn_slots, &key);
	if (v)
		*v += len;
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
