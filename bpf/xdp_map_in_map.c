// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_map_in_map: per-class counters and per-CPU flow tables reached through outer maps,
 * as load balancers and firewalls do (BPF_MAP_TYPE_ARRAY_OF_MAPS, BPF_MAP_TYPE_HASH_OF_MAPS).
 *
 * Maps:
 *   by_class      ARRAY_OF_MAPS[4], inner template ARRAY[2] u64: key = frame class (0 IPv4,
 *                 1 IPv6, 2 ARP, 3 other). Slots 0, 1 filled in the object (class_v4,
 *                 class_v6); slot 2 inserted from user space (class_arp: the oracle with
 *                 ORACLE_MAP_IN_MAP, sluice with --map by_class:02000000=class_arp); slot 3 empty.
 *   class_*       ARRAY[2] u64 {frames, bytes}.
 *   flows_by_cpu  HASH_OF_MAPS[8], key u32 CPU, inner template LRU_HASH[64] saddr -> u64:
 *                 key 0 -> flows_cpu0 in the object, key 1 -> flows_cpu1 from user space.
 *   by_l4         HASH_OF_MAPS[16], key u32 IPv4 protocol, inner template ARRAY[1] u64:
 *                 17 -> l4_udp in the object, 6 -> l4_tcp from user space, others absent.
 *   misses        ARRAY[3] u64: outer lookups that found no inner map (by_class,
 *                 flows_by_cpu, by_l4).
 * Verdict: XDP_DROP (1) when the frame's class has no inner map (slot 3), else XDP_PASS (2).
 */
#include "sluice_xdp.h"

struct class_counters {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
};

struct class_counters class_v4 SEC(".maps"), class_v6 SEC(".maps"), class_arp SEC(".maps");

struct flow_table {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
};

struct flow_table flows_cpu0 SEC(".maps"), flows_cpu1 SEC(".maps");

struct l4_counter {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
};

struct l4_counter l4_udp SEC(".maps"), l4_tcp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, struct class_counters);
} by_class SEC(".maps") = { .values = { [0] = &class_v4, [1] = &class_v6 } };

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 8);
	__type(key, __u32);
	__array(values, struct flow_table);
} flows_by_cpu SEC(".maps") = { .values = { [0] = &flows_cpu0 } };

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 16);
	__type(key, __u32);
	__array(values, struct l4_counter);
} by_l4 SEC(".maps") = { .values = { [17] = &l4_udp } };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} misses SEC(".maps");

static __always_inline void miss(__u32 which)
{
	__u64 *m = bpf_map_lookup_elem(&misses, &which);

	if (m)
		__sync_fetch_and_add(m, 1);
}

SEC("xdp")
int xdp_map_in_map(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	__u32 class = 3, zero = 0, one = 1, cpu, proto;
	__u64 *cnt, init = 1;
	void *inner;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		class = 0;
	else if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		class = 1;
	else if (eth->h_proto == bpf_htons(ETH_P_ARP))
		class = 2;

	inner = bpf_map_lookup_elem(&by_class, &class);
	if (!inner) {
		miss(0);
		return XDP_DROP;
	}
	cnt = bpf_map_lookup_elem(inner, &zero);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	cnt = bpf_map_lookup_elem(inner, &one);
	if (cnt)
		__sync_fetch_and_add(cnt, data_end - data);

	if (class != 0)
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return XDP_PASS;

	cpu = bpf_get_smp_processor_id();
	inner = bpf_map_lookup_elem(&flows_by_cpu, &cpu);
	if (inner) {
		__u32 saddr = ip->saddr;

		cnt = bpf_map_lookup_elem(inner, &saddr);
		if (cnt)
			*cnt += 1;
		else
			bpf_map_update_elem(inner, &saddr, &init, BPF_NOEXIST);
	} else {
		miss(1);
	}

	proto = ip->protocol;
	inner = bpf_map_lookup_elem(&by_l4, &proto);
	if (!inner) {
		miss(2);
		return XDP_PASS;
	}
	cnt = bpf_map_lookup_elem(inner, &zero);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
