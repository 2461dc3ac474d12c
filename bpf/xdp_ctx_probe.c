// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_ctx_probe: record what the runtime puts in struct xdp_md and how far the
 * head/tail/meta helpers let the frame move, so the sluice runtime can be
 * compared with the kernel's BPF_PROG_TEST_RUN environment field by field.
 *
 * Maps:
 *   ctx_seen ARRAY, 1 entry, key u32 0 -> struct ctx_seen (last frame only):
 *     len              data_end - data on entry
 *     meta_len         data - data_meta on entry (0: empty metadata area)
 *     ingress_ifindex  xdp_md field (test_run: 1, the netns loopback device)
 *     rx_queue_index   xdp_md field (test_run: 0)
 *                      (egress_ifindex may only be read by programs attached
 *                      to a DEVMAP entry, see negative/neg_ctx_egress_ifindex.c)
 *     head_max         largest d in [0,256] with bpf_xdp_adjust_head(ctx,-d)==0
 *                      (binary search, head restored after each success)
 *     tail_max         largest d in [0,4095] with bpf_xdp_adjust_tail(ctx,d)==0
 *                      (binary search, tail restored after each success)
 *     meta_max         largest d in {4,8,..,256} with bpf_xdp_adjust_meta(ctx,-d)
 *                      == 0 (linear scan, restored; 6.18: 216, no 32-byte cap)
 *     meta_rc          return of bpf_xdp_adjust_meta(ctx, -8) (after the probes)
 *     tail_rc          return of bpf_xdp_adjust_tail(ctx, +4) (after meta)
 *     frames           frames seen (atomic add)
 * Frame changes: net effect is 8 bytes of metadata in front of the frame,
 *   filled with the ASCII marker "SLUICEMD", and the tail grown by 4 bytes,
 *   which the kernel zero-fills.
 *   KERNEL QUIRK: BPF_PROG_TEST_RUN's data_out starts at data_meta, not at
 *   data, so data_out = "SLUICEMD" + input + 00 00 00 00 (input + 12 bytes).
 * Verdict: XDP_PASS (2); XDP_ABORTED (0) if a restore fails.
 * Contains three real bounded loops (9, 12 and 64 iterations) calling helpers.
 */
#include "sluice_xdp.h"

struct ctx_seen {
	__u32 len;
	__u32 meta_len;
	__u32 ingress_ifindex;
	__u32 rx_queue_index;
	__u32 head_max;
	__u32 tail_max;
	__u32 meta_max;
	__u32 pad;
	__s32 meta_rc;
	__s32 tail_rc;
	__u64 frames;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ctx_seen);
} ctx_seen SEC(".maps");

SEC("xdp")
int xdp_ctx_probe(struct xdp_md *ctx)
{
	__u32 key = 0, lo, hi, mid;
	struct ctx_seen *s;
	int i;

	s = bpf_map_lookup_elem(&ctx_seen, &key);
	if (!s)
		return XDP_ABORTED;
	s->len = ctx->data_end - ctx->data;
	s->meta_len = ctx->data - ctx->data_meta;
	s->ingress_ifindex = ctx->ingress_ifindex;
	s->rx_queue_index = ctx->rx_queue_index;

	/* head: invariant adjust_head(-lo) succeeds, adjust_head(-hi) fails */
	lo = 0;
	hi = 257;
#pragma clang loop unroll(disable)
	for (i = 0; i < 9; i++) {
		mid = (lo + hi) / 2;
		if (bpf_xdp_adjust_head(ctx, -(int)mid) == 0) {
			if (bpf_xdp_adjust_head(ctx, (int)mid))
				return XDP_ABORTED;
			lo = mid;
		} else {
			hi = mid;
		}
	}
	s->head_max = lo;

	lo = 0;
	hi = 4096;
#pragma clang loop unroll(disable)
	for (i = 0; i < 12; i++) {
		mid = (lo + hi) / 2;
		if (bpf_xdp_adjust_tail(ctx, (int)mid) == 0) {
			if (bpf_xdp_adjust_tail(ctx, -(int)mid))
				return XDP_ABORTED;
			lo = mid;
		} else {
			hi = mid;
		}
	}
	s->tail_max = lo;

	lo = 0;
#pragma clang loop unroll(disable)
	for (i = 4; i <= 256; i += 4) {
		if (bpf_xdp_adjust_meta(ctx, -i) == 0) {
			if (bpf_xdp_adjust_meta(ctx, i))
				return XDP_ABORTED;
			lo = i;
		}
	}
	s->meta_max = lo;

	s->meta_rc = bpf_xdp_adjust_meta(ctx, -8);
	if (s->meta_rc == 0) {
		void *meta = (void *)(long)ctx->data_meta;
		void *data = (void *)(long)ctx->data;

		if (meta + 8 <= data)
			__builtin_memcpy(meta, "SLUICEMD", 8);
	}
	s->tail_rc = bpf_xdp_adjust_tail(ctx, 4);
	__sync_fetch_and_add(&s->frames, 1);
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
