// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_mixed_types: one object holding programs of several types, as real
 * projects ship them (an XDP program next to its tc and tracing companions).
 * A loader picks the XDP program and leaves the others alone.
 *
 * Sections, in ELF order: tc, tracepoint/syscalls/sys_enter_write, xdp/pass,
 * kprobe/do_nanosleep, xdp.frags/devmap, xdp/cpumap.
 * Maps: pkt_stats ARRAY[2] u64 {frames, bytes} (xdp/pass), event_count ARRAY[1]
 *       u64 (tc, tracepoint, kprobe).
 * Verdict of xdp/pass (the first XDP program): PASS (2) for every frame, after
 * counting it; the devmap/cpumap programs return PASS too.
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} pkt_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} event_count SEC(".maps");

static __always_inline void count_event(void)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&event_count, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
}

SEC("tc")
int tc_count(struct __sk_buff *skb)
{
	count_event();
	return 0; /* TC_ACT_OK */
}

SEC("tracepoint/syscalls/sys_enter_write")
int trace_write(void *ctx)
{
	count_event();
	return 0;
}

SEC("xdp/pass")
int xdp_pass_count(struct xdp_md *ctx)
{
	__u32 frames = 0, bytes = 1;
	__u64 *f = bpf_map_lookup_elem(&pkt_stats, &frames);
	__u64 *b = bpf_map_lookup_elem(&pkt_stats, &bytes);

	if (f)
		__sync_fetch_and_add(f, 1);
	if (b)
		__sync_fetch_and_add(b, ctx->data_end - ctx->data);
	return XDP_PASS;
}

SEC("kprobe/do_nanosleep")
int probe_nanosleep(void *ctx)
{
	count_event();
	return 0;
}

SEC("xdp.frags/devmap")
int xdp_devmap_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp/cpumap")
int xdp_cpumap_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
