// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_rodata_config: `const volatile` settings in .rodata as libbpf skeletons
 * use them: set by user space between open and load, then frozen, and read by
 * the verifier as constants. This object loads only when they are known:
 *   verdict_idx  picks the verdict from a table on the stack: as an unknown
 *                number it would be an unbounded variable-offset stack read;
 *   peek_off     the frame byte the program counts, data + peek_off: as an
 *                unknown number it would put the packet pointer out of range.
 * Defaults: verdict_idx = 1 (XDP_PASS), peek_off = 14 (the first byte past
 * the Ethernet header).
 *
 * Per frame: if data + peek_off + 1 <= data_end, peeked[0] += the byte at
 * peek_off; then return verdicts[verdict_idx] with
 * verdicts = { XDP_DROP, XDP_PASS, XDP_TX, XDP_ABORTED }.
 *
 * Maps: peeked (ARRAY, 1 entry, u32 -> u64) and .rodata.
 */
#include "sluice_xdp.h"

const volatile __u32 verdict_idx = 1;
const volatile __u32 peek_off = 14;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} peeked SEC(".maps");

SEC("xdp")
int xdp_rodata_config(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	volatile __u32 verdicts[4];
	__u32 key = 0;
	__u64 *v;

	verdicts[0] = XDP_DROP;
	verdicts[1] = XDP_PASS;
	verdicts[2] = XDP_TX;
	verdicts[3] = XDP_ABORTED;
	if (data + peek_off + 1 <= data_end) {
		v = bpf_map_lookup_elem(&peeked, &key);
		if (v)
			__sync_fetch_and_add(v, *(__u8 *)(data + peek_off));
	}
	return verdicts[verdict_idx];
}

char _license[] SEC("license") = "GPL";
