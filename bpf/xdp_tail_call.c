// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_tail_call: an entry program dispatching by IP version through a PROG_ARRAY, as
 * packet-processing pipelines built of tail calls do.
 *
 * Maps:
 *   jmp     PROG_ARRAY, 4 slots: [0] xdp_tail_v4, [1] xdp_tail_v6, [2] xdp_tail_loop,
 *           [3] empty, filled from user space: the kernel oracle with
 *           ORACLE_PROG_ARRAY (bpftool map update ... value pinned PROG), sluice with
 *           --map jmp:00000000=xdp_tail_v4 etc.
 *           Built with -DSTATIC_SLOTS (xdp_tail_call_static.o), the slots are filled in
 *           the object itself (`.values = { [0] = &xdp_tail_v4, ... }`, libbpf's static
 *           prog array initialisation): the loader fills them, nobody else.
 *   hits    ARRAY, 4 entries, key u32 -> u64: [0] entry runs, [1] v4, [2] v6, [3] loop runs.
 * Verdicts: IPv4 -> xdp_tail_v4: DROP (1) for UDP, else PASS (2); IPv6 -> xdp_tail_v6:
 *   TX (3) with the MACs swapped; ARP -> slot 3 is empty, the call falls through: ABORTED
 *   (0); anything else -> xdp_tail_loop, which tail-calls itself until the kernel's limit
 *   of 33 stops it (34 runs), then returns PASS (2).
 * Also: xdp_tail_redirect (a redirect chosen before a tail call) and two programs the
 * kernel refuses in `jmp` (below).
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline void hit(__u32 key)
{
	__u64 *p = bpf_map_lookup_elem(&hits, &key);

	if (p)
		__sync_fetch_and_add(p, 1);
}

#ifdef STATIC_SLOTS
int xdp_tail_v4(struct xdp_md *ctx);
int xdp_tail_v6(struct xdp_md *ctx);
int xdp_tail_loop(struct xdp_md *ctx);

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, int (struct xdp_md *));
} jmp SEC(".maps") = {
	.values = {
		[0] = &xdp_tail_v4,
		[1] = &xdp_tail_v6,
		[2] = &xdp_tail_loop,
	},
};
#else
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} jmp SEC(".maps");
#endif

SEC("xdp")
int xdp_tail_v4(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);

	hit(1);
	if ((void *)(ip + 1) > data_end)
		return XDP_PASS;
	return ip->protocol == 17 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_tail_v6(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	unsigned char tmp[ETH_ALEN];

	hit(2);
	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);
	return XDP_TX;
}

SEC("xdp")
int xdp_tail_loop(struct xdp_md *ctx)
{
	hit(3);
	bpf_tail_call(ctx, &jmp, 2);
	return XDP_PASS;
}

SEC("xdp")
int xdp_tail_entry(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	hit(0);
	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		bpf_tail_call(ctx, &jmp, 0);
	else if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		bpf_tail_call(ctx, &jmp, 1);
	else if (eth->h_proto == bpf_htons(ETH_P_ARP))
		bpf_tail_call(ctx, &jmp, 3);
	else
		bpf_tail_call(ctx, &jmp, 2);
	return XDP_ABORTED;
}

/*
 * A redirect chosen before a tail call holds after it (the kernel keeps it per CPU until
 * xdp_do_redirect): xdp_tail_redirect picks ifindex 7 and tail-calls slot 3; filled with
 * xdp_tail_redirect_verdict, which only returns XDP_REDIRECT, the packet goes to ifindex 7.
 */
SEC("xdp")
int xdp_tail_redirect_verdict(struct xdp_md *ctx)
{
	return XDP_REDIRECT;
}

SEC("xdp")
int xdp_tail_redirect(struct xdp_md *ctx)
{
	bpf_redirect(7, 0);
	bpf_tail_call(ctx, &jmp, 3);
	return XDP_ABORTED;
}

#ifndef STATIC_SLOTS
/*
 * Not for `jmp`: the kernel refuses to put a program of another type, or of another frags
 * awareness than the programs using the map, in a PROG_ARRAY (bpf_prog_map_compatible).
 */
SEC("tc")
int tc_not_xdp(void *ctx)
{
	return 0;
}

SEC("xdp.frags")
int xdp_tail_frags(struct xdp_md *ctx)
{
	return XDP_PASS;
}
#endif

char _license[] SEC("license") = "Dual BSD/GPL";
