// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_proto_count: classify each frame by L3 and L4 protocol and count it.
 *
 * Parsing: Ethernet, at most one 802.1Q / 802.1ad tag, then IPv4 (IHL honoured,
 * protocol field used even for fragments) or IPv6 (extension headers hop-by-hop,
 * routing, destination options, fragment and AH are skipped by a real, bounded
 * loop of at most MAX_EXT_HDRS = 4 iterations; a chain longer than that, or one
 * that runs past the end of the frame, counts as L4 "other").
 *
 * Maps:
 *   proto_stats PERCPU_ARRAY, 9 entries, key u32 -> u64 packet count:
 *     0 L3 IPv4      1 L3 IPv6     2 L3 other (ARP, bare Ethernet, ...)
 *     3 L4 TCP       4 L4 UDP      5 L4 ICMP    6 L4 ICMPv6    7 L4 other
 *     8 malformed (IPv4/IPv6 ethertype but the fixed header is truncated, or a
 *       VLAN tag that is truncated); such frames get no L3/L4 count.
 *   Every frame with a parsable L3 header gets exactly one L3 and one L4 count.
 * Code structure: the counter update is a `static __noinline` function, so the
 *   object contains bpf-to-bpf calls (BPF_PSEUDO_CALL) and two subprograms.
 * Verdict: always XDP_PASS (2).
 */
#include "sluice_xdp.h"

#define MAX_EXT_HDRS 4

enum {
	C_L3_IPV4 = 0,
	C_L3_IPV6,
	C_L3_OTHER,
	C_L4_TCP,
	C_L4_UDP,
	C_L4_ICMP,
	C_L4_ICMPV6,
	C_L4_OTHER,
	C_MALFORMED,
	C_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} proto_stats SEC(".maps");

/* Non-inlined: every call is a BPF_CALL with src_reg = BPF_PSEUDO_CALL. */
static __noinline int count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&proto_stats, &idx);

	if (!v)
		return -1;
	*v += 1; /* per-CPU value: no atomic needed */
	return 0;
}

static __always_inline __u32 l4_index(__u8 proto, int v6)
{
	switch (proto) {
	case IPPROTO_TCP:
		return C_L4_TCP;
	case IPPROTO_UDP:
		return C_L4_UDP;
	case IPPROTO_ICMP:
		return v6 ? C_L4_OTHER : C_L4_ICMP;
	case IPPROTO_ICMPV6:
		return v6 ? C_L4_ICMPV6 : C_L4_OTHER;
	default:
		return C_L4_OTHER;
	}
}

static __always_inline int is_ipv6_ext(__u8 nh)
{
	return nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_DSTOPTS ||
	       nh == IPPROTO_FRAGMENT || nh == IPPROTO_AH;
}

SEC("xdp")
int xdp_proto_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *cur;
	__u16 proto;

	if ((void *)(eth + 1) > data_end) {
		count(C_L3_OTHER);
		return XDP_PASS;
	}
	proto = eth->h_proto;
	cur = eth + 1;

	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		struct vlan_hdr *vh = cur;

		if ((void *)(vh + 1) > data_end) {
			count(C_MALFORMED);
			return XDP_PASS;
		}
		proto = vh->h_vlan_encapsulated_proto;
		cur = vh + 1;
	}

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = cur;

		if ((void *)(iph + 1) > data_end) {
			count(C_MALFORMED);
			return XDP_PASS;
		}
		count(C_L3_IPV4);
		count(l4_index(iph->protocol, 0));
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = cur;
		__u8 nh;
		int i;

		if ((void *)(ip6h + 1) > data_end) {
			count(C_MALFORMED);
			return XDP_PASS;
		}
		count(C_L3_IPV6);
		nh = ip6h->nexthdr;
		cur = ip6h + 1;

		/* A real back-edge: keep clang from unrolling it. */
#pragma clang loop unroll(disable)
		for (i = 0; i < MAX_EXT_HDRS; i++) {
			struct ipv6_opt_hdr *oh = cur;
			__u32 len;

			if (!is_ipv6_ext(nh))
				break;
			if ((void *)(oh + 1) > data_end) {
				nh = IPPROTO_NONE;
				break;
			}
			if (nh == IPPROTO_FRAGMENT)
				len = 8;
			else if (nh == IPPROTO_AH)
				len = ((__u32)oh->hdrlen + 2) * 4;
			else
				len = ((__u32)oh->hdrlen + 1) * 8;
			nh = oh->nexthdr;
			cur += len;
		}
		if (is_ipv6_ext(nh))
			nh = IPPROTO_NONE; /* chain longer than MAX_EXT_HDRS */
		count(l4_index(nh, 1));
	} else {
		count(C_L3_OTHER);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
