// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: an infinite loop (for (;;) with an empty asm statement, so clang
 * keeps it: it compiles to "goto -1"). The verifier sees the same state twice
 * at the loop head.
 * EXPECT: infinite loop detected
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_infinite_loop(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;

	if (data + 1 > data_end)
		return XDP_PASS;
	if (*(__u8 *)data == 0xff)
		for (;;)
			asm volatile("");
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
