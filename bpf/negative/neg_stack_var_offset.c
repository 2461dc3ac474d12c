// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: variable-offset stack write whose range leaves the frame: a
 * packet byte (0..255) indexes a 16-byte stack buffer, so buf + idx can reach
 * fp+239, above the frame pointer.
 * EXPECT: invalid variable-offset write to stack
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_stack_var_offset(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	volatile __u8 buf[16] = {};
	__u8 idx;

	if (data + 1 > data_end)
		return XDP_PASS;
	idx = *(__u8 *)data;
	buf[idx] = 1;
	return buf[0] ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
