// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_macswap_tx: swap the Ethernet source and destination MAC addresses and
 * bounce the frame back out of the interface it came in on.
 *
 * Maps: none.
 * Verdict: XDP_TX (3) for every frame with a full Ethernet header (>= 14 bytes),
 *          XDP_DROP (1) otherwise (cannot happen under BPF_PROG_TEST_RUN, which
 *          refuses frames shorter than 14 bytes).
 * Output: the same frame with bytes 0..5 and 6..11 exchanged; length unchanged.
 */
#include "sluice_xdp.h"

SEC("xdp")
int xdp_macswap_tx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	unsigned char tmp[ETH_ALEN];

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;

	__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);
	return XDP_TX;
}

char _license[] SEC("license") = "Dual BSD/GPL";
