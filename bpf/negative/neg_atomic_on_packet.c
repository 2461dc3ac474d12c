// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: an atomic add (BPF_ATOMIC | BPF_ADD) on packet memory. Atomics are
 * only allowed on stack and map values (and a few other memory kinds), never
 * on the packet, even when bounds-checked.
 * EXPECT: BPF_ATOMIC stores into R1 pkt is not allowed
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_atomic_on_packet(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 *p = data;

	if ((void *)(p + 1) > data_end)
		return XDP_PASS;
	__sync_fetch_and_add(p, 1);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
