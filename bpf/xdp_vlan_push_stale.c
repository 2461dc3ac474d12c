// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_vlan_push_stale: push an 802.1Q tag (VID 42) in front of the ethertype
 * of every untagged frame, with bpf_xdp_adjust_head(-4), and keep using the
 * packet pointer taken BEFORE the call as a plain number afterwards (a sanity
 * check that it was not NULL). The kernel accepts this only from a privileged
 * loader (allow_ptr_leaks: the stale pointer becomes an unknown scalar); an
 * unprivileged one is refused ("R8 !read_ok") at that use.
 * PRIVILEGED-ONLY: R8 !read_ok
 *
 * Maps: none.
 * Verdicts: frames shorter than an Ethernet header: DROP (1); already tagged
 *           (0x8100 / 0x88a8): PASS (2) unchanged; otherwise the tag is pushed:
 *           PASS (2), 4 bytes longer.
 */
#include "sluice_xdp.h"

#define VLAN_ID 42

SEC("xdp")
int xdp_vlan_push_stale(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data, saved;
	struct vlan_hdr *vlan;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto == bpf_htons(ETH_P_8021Q) || eth->h_proto == bpf_htons(ETH_P_8021AD))
		return XDP_PASS;
	__builtin_memcpy(&saved, eth, sizeof(saved));

	if (bpf_xdp_adjust_head(ctx, -(int)sizeof(struct vlan_hdr)))
		return XDP_ABORTED;

	/* `data` is stale now: read as a number only (keep it in a register). */
	asm volatile("" : "+r"(data));
	if (!data)
		return XDP_ABORTED;

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	vlan = (void *)(eth + 1);
	if ((void *)(vlan + 1) > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(eth->h_dest, saved.h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_source, saved.h_source, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_8021Q);
	vlan->h_vlan_TCI = bpf_htons(VLAN_ID);
	vlan->h_vlan_encapsulated_proto = saved.h_proto;
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
