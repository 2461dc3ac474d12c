// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: writes a ring buffer record after submitting it. Submission hands
 * the record to the consumer; every copy of the pointer is invalid from then
 * on (for root an unknown scalar, not memory).
 * EXPECT: invalid mem access 'scalar'
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} ring SEC(".maps");

SEC("xdp")
int neg_ringbuf_use_after_submit(struct xdp_md *ctx)
{
	volatile __u32 *r = bpf_ringbuf_reserve(&ring, 8, 0);

	if (!r)
		return XDP_PASS;
	r[0] = 1;
	bpf_ringbuf_submit((void *)r, 0);
	r[1] = 2;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
