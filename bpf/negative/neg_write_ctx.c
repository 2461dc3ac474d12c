// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: writes to the context (struct xdp_md is read-only for XDP; the
 * packet boundaries may only move through bpf_xdp_adjust_head/tail/meta).
 * EXPECT: invalid bpf_context access off=0 size=4
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_write_ctx(struct xdp_md *ctx)
{
	ctx->data += 14;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
