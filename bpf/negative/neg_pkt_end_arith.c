// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: pointer arithmetic on data_end (PTR_TO_PACKET_END), used to read
 * the last byte of the frame. Only comparisons are allowed on pkt_end.
 * EXPECT: pointer arithmetic on pkt_end prohibited
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_pkt_end_arith(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	volatile __u8 *last = (void *)(long)ctx->data_end;

	last -= 1;
	if ((void *)last < data)
		return XDP_PASS;
	return *last ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
