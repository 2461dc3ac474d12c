// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_devmap_redirect: redirect every frame to the device in tx_port[0].
 *
 * Maps:
 *   tx_port       DEVMAP, 4 entries, key u32 -> u32 ifindex (populated from user
 *                 space; the oracle puts lo's ifindex 1 in key 0).
 *   redirect_stats ARRAY, 2 entries, key u32 -> u64, atomic adds:
 *                 [0] frames for which bpf_redirect_map returned XDP_REDIRECT
 *                 [1] frames for which it failed (returned the flags' fallback)
 * Verdict: bpf_redirect_map(&tx_port, 0, 0): XDP_REDIRECT (4) when key 0 holds a
 *   device, otherwise the fallback from the low bits of flags = 0, i.e.
 *   XDP_ABORTED (0). Frame unchanged.
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} redirect_stats SEC(".maps");

SEC("xdp")
int xdp_devmap_redirect(struct xdp_md *ctx)
{
	__u32 key;
	__u64 *cnt;
	long ret;

	ret = bpf_redirect_map(&tx_port, 0, 0);
	key = ret == XDP_REDIRECT ? 0 : 1;
	cnt = bpf_map_lookup_elem(&redirect_stats, &key);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	return ret;
}

char _license[] SEC("license") = "Dual BSD/GPL";
