// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_lru_ratelimit: per-IPv4-source packet budget.
 *
 * Maps:
 *   src_budget  LRU_HASH, 1024 entries, key __be32 IPv4 source address (network
 *               byte order as in the header) -> struct budget {
 *                   u64 first_seen_ns;  bpf_ktime_get_ns() when the window opened
 *                   u64 packets;        packets seen in the window (incl. dropped)
 *               }
 * Policy: a window lasts WINDOW_NS = 10 s from the first packet of a source; the
 *   first BURST = 4 packets per source per window get XDP_PASS (2), later ones
 *   XDP_DROP (1). When a window has expired the entry is reset to {now, 1}.
 *   A test run finishing within 10 s therefore gets verdicts and `packets` values
 *   independent of time; only `first_seen_ns` depends on the clock.
 * Other frames: non-IPv4 (incl. VLAN-tagged) -> XDP_PASS; IPv4 ethertype but the
 *   IPv4 header is truncated -> XDP_DROP; map update failure -> XDP_ABORTED (0).
 */
#include "sluice_xdp.h"

#define WINDOW_NS (10ULL * 1000 * 1000 * 1000)
#define BURST 4

struct budget {
	__u64 first_seen_ns;
	__u64 packets;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __be32);
	__type(value, struct budget);
} src_budget SEC(".maps");

SEC("xdp")
int xdp_lru_ratelimit(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph;
	struct budget *b;
	__be32 src;
	__u64 now;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end)
		return XDP_DROP;

	src = iph->saddr;
	now = bpf_ktime_get_ns();
	b = bpf_map_lookup_elem(&src_budget, &src);
	if (!b || now - b->first_seen_ns > WINDOW_NS) {
		struct budget fresh = { .first_seen_ns = now, .packets = 1 };

		if (bpf_map_update_elem(&src_budget, &src, &fresh, BPF_ANY))
			return XDP_ABORTED;
		return XDP_PASS;
	}
	__sync_fetch_and_add(&b->packets, 1);
	if (b->packets > BURST)
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
