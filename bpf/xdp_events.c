// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_events: report every frame to user space twice, as xdpdump-like tools
 * do: bpf_perf_event_output (a 192-byte record plus the first <= 64 packet
 * bytes, BPF_F_CURRENT_CPU) and bpf_ringbuf_output (the same 192 bytes), and
 * keep the helpers' return values.
 *
 * Maps: perf_events PERF_EVENT_ARRAY, ring RINGBUF (4096 bytes), results
 *       ARRAY[4] u64 {last perf ret, last ringbuf ret, ring bytes available,
 *       ringbuf failures}.
 * With nobody listening (BPF_PROG_TEST_RUN): perf output -ENOENT (-2) for
 * every frame; each ring record takes 200 bytes, so 20 fit in the 4096-byte
 * ring and the rest get -EAGAIN (-11). Verdict: PASS (2).
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} perf_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} results SEC(".maps");

struct frame_meta {
	__u32 len;
	__u32 seq;
	__u8 head[184];
};

static __always_inline void put(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&results, &k);
	if (p)
		*p = v;
}

SEC("xdp")
int xdp_events(struct xdp_md *ctx)
{
	struct frame_meta m = {};
	__u64 len = ctx->data_end - ctx->data;
	__u64 cap = len < 64 ? len : 64;
	__u32 k = 3;
	__u64 *fails;
	long r;

	m.len = len;
	m.seq = 7;
	r = bpf_perf_event_output(ctx, &perf_events, BPF_F_CURRENT_CPU | (cap << 32), &m, sizeof(m));
	put(0, r);
	r = bpf_ringbuf_output(&ring, &m, sizeof(m), 0);
	put(1, r);
	put(2, bpf_ringbuf_query(&ring, BPF_RB_AVAIL_DATA));
	fails = bpf_map_lookup_elem(&results, &k);
	if (fails && r)
		__sync_fetch_and_add(fails, 1);
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
