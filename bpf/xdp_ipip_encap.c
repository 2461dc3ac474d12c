// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_ipip_encap: encapsulate IPv4 frames in an outer IPv4 header (IP-in-IP,
 * protocol 4) and send them back out (XDP_TX).
 *
 * For an untagged Ethernet frame carrying IPv4 with at least a full 20-byte
 * IPv4 header:
 *   1. copy the Ethernet header to the stack,
 *   2. bpf_xdp_adjust_head(ctx, -20) (grows the frame at the front by 20 bytes),
 *   3. re-check bounds, write the Ethernet header back at the new start
 *      (addresses unchanged, ethertype 0x0800),
 *   4. write the outer IPv4 header right after it:
 *        version 4, IHL 5, TOS copied from the inner header, tot_len =
 *        (frame length after adjust) - 14, id 0, frag_off 0x4000 (DF), TTL 64,
 *        protocol 4, saddr/daddr from the .rodata config below, checksum
 *        computed in-program with a bounded loop over the 10 header words.
 *   Verdict XDP_TX (3); the output frame is 20 bytes longer than the input.
 * Anything else (non-IPv4, VLAN-tagged, IPv4 header truncated): XDP_PASS (2),
 * frame unchanged. If adjust_head fails: XDP_ABORTED (0).
 *
 * Maps: only the internal .rodata map ("xdp_ipip.rodata" in the kernel, a
 * frozen 1-entry ARRAY holding `cfg`), created by libbpf.
 */
#include "sluice_xdp.h"

/* const volatile: placed in .rodata, loaded through BPF_PSEUDO_MAP_VALUE
 * ld_imm64, so the loads are real map-value loads and not folded by clang. */
const volatile struct {
	__be32 outer_saddr;
	__be32 outer_daddr;
	__u8 outer_ttl;
} cfg = {
	.outer_saddr = bpf_htonl(0xC0000201), /* 192.0.2.1 (TEST-NET-1) */
	.outer_daddr = bpf_htonl(0xC0000202), /* 192.0.2.2 */
	.outer_ttl = 64,
};

static __always_inline __u16 ip_checksum(struct iphdr *iph, void *data_end)
{
	__u16 *w = (__u16 *)iph;
	__u32 sum = 0;
	int i;

	if ((void *)(iph + 1) > data_end)
		return 0;
#pragma clang loop unroll(disable)
	for (i = 0; i < (int)(sizeof(*iph) / 2); i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

SEC("xdp")
int xdp_ipip_encap(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ethhdr eth_copy;
	struct iphdr *inner, *outer;
	__u8 tos;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	inner = (void *)(eth + 1);
	if ((void *)(inner + 1) > data_end)
		return XDP_PASS;
	tos = inner->tos;
	__builtin_memcpy(&eth_copy, eth, sizeof(eth_copy));

	if (bpf_xdp_adjust_head(ctx, -(int)sizeof(struct iphdr)))
		return XDP_ABORTED;

	/* All packet pointers are invalid after adjust_head: reload and re-check. */
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	outer = (void *)(eth + 1);
	if ((void *)(outer + 1) > data_end)
		return XDP_ABORTED;

	__builtin_memcpy(eth, &eth_copy, sizeof(*eth));
	eth->h_proto = bpf_htons(ETH_P_IP);

	outer->ver_ihl = 0x45;
	outer->tos = tos;
	outer->tot_len = bpf_htons((__u16)(data_end - data - sizeof(*eth)));
	outer->id = 0;
	outer->frag_off = bpf_htons(0x4000);
	outer->ttl = cfg.outer_ttl;
	outer->protocol = IPPROTO_IPIP;
	outer->check = 0;
	outer->saddr = cfg.outer_saddr;
	outer->daddr = cfg.outer_daddr;
	outer->check = ip_checksum(outer, data_end);
	return XDP_TX;
}

char _license[] SEC("license") = "Dual BSD/GPL";
