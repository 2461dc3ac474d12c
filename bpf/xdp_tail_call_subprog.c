// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_tail_call_subprog: tail calls made from a bpf-to-bpf subprogram. Since Linux 5.10
 * (x86-64 JIT, "bpf, x64: rework pro/epilogue and tailcall handling in JIT") a successful
 * bpf_tail_call in a subprogram unwinds only that subprogram: the target's exit returns to
 * the subprogram's caller with the target's return value, the caller's frames intact. The 33
 * tail calls a packet may make are counted over the whole run.
 *
 * Maps:
 *   jmp     PROG_ARRAY, 4 slots: [0] xdp_sub_v4, [1] xdp_sub_v6, [2] xdp_sub_nest, [3]
 *           empty; filled from user space as in xdp_tail_call.c (the kernel oracle with
 *           ORACLE_PROG_ARRAY, sluice with --map jmp:00000000=xdp_sub_v4 etc.).
 *   hits    ARRAY, 4 entries, key u32 -> u64: [0] the entry resumed after its subprogram,
 *           [1] v4 runs, [2] v6 runs, [3] nest runs.
 * The entry xdp_sub_entry calls dispatch(ctx, slot by ethertype), a subprogram that
 * tail-calls the slot and returns 50 when the call fails. Then it writes the low byte of
 * what dispatch returned over the first byte of the packet as it is then, and returns that
 * value plus 1 (ABORTED, 0, for 50):
 *   IPv4 -> xdp_sub_v4: UDP -> DROP (1), the entry PASS (2); else xdp_sub_v4 tail-calls
 *           slot 1 from its own entry function: the chain's last program returns to the
 *           entry's subprogram call;
 *   IPv6 -> xdp_sub_v6 strips the Ethernet header (bpf_xdp_adjust_head) and returns PASS:
 *           the entry writes 2 over the first byte of the IPv6 header, returns TX (3);
 *   ARP  -> slot 3 is empty: the call falls through, ABORTED;
 *   else -> xdp_sub_nest calls dispatch(ctx, 2) itself, one more nested run each time,
 *           until the 34th tail call fails: the innermost returns 51, every other one what
 *           it got plus 1, the entry's subprogram call gets 83, the entry returns 84.
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} jmp SEC(".maps");

#define FELL_THROUGH 50

static __always_inline void hit(__u32 key)
{
	__u64 *p = bpf_map_lookup_elem(&hits, &key);

	if (p)
		__sync_fetch_and_add(p, 1);
}

static __noinline int dispatch(struct xdp_md *ctx, __u32 slot)
{
	int ret = FELL_THROUGH;

	bpf_tail_call(ctx, &jmp, slot);
	/*
	 * clang takes bpf_tail_call for an ordinary call: seeing dispatch always return 50, it
	 * would fold that constant into the callers. The empty asm hides the value.
	 */
	asm volatile("" : "+r"(ret));
	return ret;
}

SEC("xdp")
int xdp_sub_v4(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);

	hit(1);
	if ((void *)(ip + 1) <= data_end && ip->protocol == IPPROTO_UDP)
		return XDP_DROP;
	bpf_tail_call(ctx, &jmp, 1);
	return XDP_ABORTED;
}

SEC("xdp")
int xdp_sub_v6(struct xdp_md *ctx)
{
	hit(2);
	bpf_xdp_adjust_head(ctx, ETH_HLEN);
	return XDP_PASS;
}

SEC("xdp")
int xdp_sub_nest(struct xdp_md *ctx)
{
	hit(3);
	return dispatch(ctx, 2) + 1;
}

SEC("xdp")
int xdp_sub_entry(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 slot;
	int ret;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		slot = 0;
	else if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		slot = 1;
	else if (eth->h_proto == bpf_htons(ETH_P_ARP))
		slot = 3;
	else
		slot = 2;
	ret = dispatch(ctx, slot);
	hit(0);
	/* The target may have moved the packet: read its bounds again. */
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + 1 <= data_end)
		*(__u8 *)data = ret;
	return ret == FELL_THROUGH ? XDP_ABORTED : ret + 1;
}

char _license[] SEC("license") = "Dual BSD/GPL";
