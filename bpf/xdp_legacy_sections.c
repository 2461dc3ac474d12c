// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_legacy_sections: XDP programs under the section names older tutorials
 * and samples use (`prog`, `xdp_sock`, `xdp_icmp_echo`), none of which libbpf
 * maps to a program type: the loader is told the type (`bpftool prog load ...
 * type xdp`) or the section (`ip link set ... xdp obj O sec S`).
 *
 * prog           (xdp_prog_drop_arp): DROP (1) for ARP, PASS (2) otherwise.
 * xdp_sock       (xdp_sock_pass):     PASS (2).
 * xdp_icmp_echo  (xdp_icmp_echo_func): an untagged IPv4 ICMP echo request (IHL 5)
 *                is turned into the echo reply in place (MACs and addresses
 *                swapped, type 8 -> 0, checksum updated incrementally) and sent
 *                back: TX (3); everything else PASS (2).
 * Maps: none.
 */
#include "sluice_xdp.h"

struct icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be16 id;
	__be16 sequence;
};

SEC("prog")
int xdp_prog_drop_arp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	return eth->h_proto == bpf_htons(ETH_P_ARP) ? XDP_DROP : XDP_PASS;
}

SEC("xdp_sock")
int xdp_sock_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp_icmp_echo")
int xdp_icmp_echo_func(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct icmphdr *icmp = (void *)(ip + 1);
	unsigned char mac[ETH_ALEN];
	__be32 addr;
	__u32 sum;

	if ((void *)(icmp + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ver_ihl != 0x45 || ip->protocol != IPPROTO_ICMP)
		return XDP_PASS;
	if (icmp->type != 8 || icmp->code != 0)
		return XDP_PASS;

	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	addr = ip->saddr;
	ip->saddr = ip->daddr;
	ip->daddr = addr;

	/* RFC 1624: type 8 -> 0 lowers the first 16-bit word by 0x0800. */
	icmp->type = 0;
	sum = (__u16)~bpf_ntohs(icmp->checksum) + (__u16)~0x0800 + 1;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	icmp->checksum = bpf_htons(~sum & 0xffff);
	return XDP_TX;
}

char _license[] SEC("license") = "Dual BSD/GPL";
