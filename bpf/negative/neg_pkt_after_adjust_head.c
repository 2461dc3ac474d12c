// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: keeps using a packet pointer after bpf_xdp_adjust_head. Helpers
 * that can move packet data invalidate every packet pointer (they become
 * unknown scalars); the program must reload ctx->data/data_end and re-check.
 * EXPECT: invalid mem access 'scalar'
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_pkt_after_adjust_head(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (bpf_xdp_adjust_head(ctx, -4))
		return XDP_ABORTED;
	eth->h_proto = bpf_htons(ETH_P_IP); /* stale pointer */
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
