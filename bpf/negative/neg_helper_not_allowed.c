// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: calls a helper that XDP programs may not use: bpf_skb_load_bytes
 * (#26) exists only for socket-buffer program types; xdp_func_proto does not
 * offer it, so the verifier refuses the call for this program type.
 * (bpf_get_current_pid_tgid, the classic example, LOADS in an XDP program on
 * 6.18: recent kernels offer it to every program type.)
 * EXPECT: program of this type cannot use helper bpf_skb_load_bytes#26
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_helper_not_allowed(struct xdp_md *ctx)
{
	__u8 b = 0;

	if (bpf_skb_load_bytes(ctx, 0, &b, 1))
		return XDP_ABORTED;
	return b & 1 ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
