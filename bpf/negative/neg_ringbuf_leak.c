// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: reserves a ring buffer record and returns without submitting or
 * discarding it on one path (frames shorter than 60 bytes). A reserved record
 * is a reference the program must release on every path, or the ring would
 * stall at a record that is never finished.
 * EXPECT: Unreleased reference
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} ring SEC(".maps");

SEC("xdp")
int neg_ringbuf_leak(struct xdp_md *ctx)
{
	__u32 *r = bpf_ringbuf_reserve(&ring, 8, 0);

	if (!r)
		return XDP_PASS;
	*r = ctx->data_end - ctx->data;
	if (*r < 60)
		return XDP_DROP;
	bpf_ringbuf_submit(r, 0);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
