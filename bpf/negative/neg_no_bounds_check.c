// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: reads the Ethernet protocol without comparing against data_end.
 * Why unsafe: the frame may be shorter than 14 bytes; the verifier only knows
 * a packet pointer's readable range from a data_end comparison (range r=0 here).
 * (clang splits the u16 load; the first byte read is offset 12.)
 * EXPECT: invalid access to packet, off=12 size=1
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_no_bounds_check(struct xdp_md *ctx)
{
	struct ethhdr *eth = (void *)(long)ctx->data;

	if (eth->h_proto == bpf_htons(ETH_P_IP))
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
