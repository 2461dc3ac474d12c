// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: reads xdp_md->egress_ifindex (offset 20) from a plain XDP program.
 * The field is only readable for programs loaded with expected attach type
 * BPF_XDP_DEVMAP (SEC("xdp/devmap")); for SEC("xdp") the context access check
 * refuses it. (Found while writing xdp_ctx_probe.c.)
 * EXPECT: invalid bpf_context access off=20 size=4
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_ctx_egress_ifindex(struct xdp_md *ctx)
{
	return ctx->egress_ifindex ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
