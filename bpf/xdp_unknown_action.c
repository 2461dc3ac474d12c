// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_unknown_action: returns the frame length modulo 8, so some frames get a
 * value that is no XDP action (5, 6, 7). The kernel's test run reports the raw
 * value; on a real hook the kernel warns (bpf_warn_invalid_xdp_action) and
 * drops the frame as an exception, like XDP_ABORTED.
 *
 * Maps: none. Verdict: len & 7 (frames unchanged).
 */
#include "sluice_xdp.h"

SEC("xdp")
int xdp_unknown_action(struct xdp_md *ctx)
{
	return (ctx->data_end - ctx->data) & 7;
}

char _license[] SEC("license") = "Dual BSD/GPL";
