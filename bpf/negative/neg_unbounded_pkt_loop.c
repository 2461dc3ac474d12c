// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: a loop whose trip count comes from the packet (a 32-bit length
 * field) with no cap. Every iteration has a distinct, precise counter, so the
 * verifier can neither prune nor prove termination and walks until the
 * 1M-instruction complexity limit.
 * EXPECT: BPF program is too large
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_unbounded_pkt_loop(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 n, i, sum = 0;

	if (data + ETH_HLEN + 4 > data_end)
		return XDP_PASS;
	n = *(__u32 *)(data + ETH_HLEN);
#pragma clang loop unroll(disable)
	for (i = 0; i < n; i++) {
		__u8 *p = data + ETH_HLEN;

		if ((void *)(p + 1) > data_end)
			break;
		sum += *p ^ i;
		asm volatile("" : "+r"(sum));
	}
	return sum & 1 ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
