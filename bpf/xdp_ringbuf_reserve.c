// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_ringbuf_reserve: report frames through bpf_ringbuf_reserve / submit /
 * discard, as modern event-reporting programs do (libbpf's ring buffer).
 * Per frame: reserve a 200-byte record; on failure count it and PASS.
 * Frames of 64 bytes or more: the first 64 bytes go into the record with
 * bpf_xdp_load_bytes (a helper writing ring buffer memory) and the record is
 * submitted; frames of 34..63 bytes: the Ethernet header is copied by direct
 * packet access, the record submitted; shorter frames (no room for an IPv4
 * header): the record is discarded (it still takes its place in the ring
 * until consumed).
 *
 * Maps: ring RINGBUF (4096 bytes), results ARRAY[5] u64 {reserved,
 *       reserve failures, submitted, discarded, ring bytes available}.
 * With nobody listening (BPF_PROG_TEST_RUN) a record takes 208 bytes: 19 fit
 * in the ring, later reservations fail (NULL). Verdict: PASS (2).
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __u64);
} results SEC(".maps");

struct frame_rec {
	__u32 len;
	__u32 kind;
	__u8 head[64];
	__u8 pad[128];
};

static __always_inline void bump(__u32 k)
{
	__u64 *p = bpf_map_lookup_elem(&results, &k);
	if (p)
		__sync_fetch_and_add(p, 1);
}

SEC("xdp")
int xdp_ringbuf_reserve(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 len = data_end - data;
	struct frame_rec *r;
	__u32 k = 4;
	__u64 *avail;

	r = bpf_ringbuf_reserve(&ring, sizeof(*r), 0);
	if (!r) {
		bump(1);
		return XDP_PASS;
	}
	bump(0);
	r->len = len;
	if (len >= 64) {
		r->kind = 2;
		if (bpf_xdp_load_bytes(ctx, 0, r->head, 64) < 0)
			r->kind = 9;
		bpf_ringbuf_submit(r, 0);
		bump(2);
	} else if (data + 34 <= data_end) {
		r->kind = 1;
		__builtin_memcpy(r->head, data, 14);
		bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
		bump(2);
	} else {
		bpf_ringbuf_discard(r, 0);
		bump(3);
	}
	avail = bpf_map_lookup_elem(&results, &k);
	if (avail)
		*avail = bpf_ringbuf_query(&ring, BPF_RB_AVAIL_DATA);
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
