// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_cpumap_redirect: spread frames over CPUs through a CPUMAP, as an RSS-in-software
 * program does: key = frame length & 1.
 *
 * Maps:
 *   cpus          CPUMAP, 2 entries, key u32 -> u32 queue size (populated from user
 *                 space; the oracle puts qsize 192 in key 0 only).
 *   cpu_stats     ARRAY, 2 entries, key u32 -> u64, atomic adds: [0] redirected,
 *                 [1] fell back (the CPU slot is empty).
 * Verdict: bpf_redirect_map(&cpus, len & 1, XDP_PASS): XDP_REDIRECT (4) for even lengths
 *   (CPU 0 is in the map), the fallback XDP_PASS (2) for odd ones. Frame unchanged.
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} cpu_stats SEC(".maps");

SEC("xdp")
int xdp_cpumap_redirect(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	__u32 key;
	__u64 *cnt;
	long ret;

	ret = bpf_redirect_map(&cpus, len & 1, XDP_PASS);
	key = ret == XDP_REDIRECT ? 0 : 1;
	cnt = bpf_map_lookup_elem(&cpu_stats, &key);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	return ret;
}

char _license[] SEC("license") = "Dual BSD/GPL";
