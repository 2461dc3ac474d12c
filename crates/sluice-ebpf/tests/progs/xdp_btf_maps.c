/* BTF-defined maps (SEC(".maps")): per-protocol counters (ARRAY, atomic add),
 * per-source-IP counters (HASH), a PERCPU_ARRAY and an LRU_HASH. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 256);
} proto_count SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1024);
} src_count SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} pcpu_pkts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 4);
} lru_seen SEC(".maps");

SEC("xdp")
int count_proto(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	__u32 key = 0, proto, saddr;
	__u64 *v, one = 1;
	__u32 seen = 1;

	v = bpf_map_lookup_elem(&pcpu_pkts, &key);
	if (v)
		*v += 1;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return XDP_DROP;

	proto = ip->protocol;
	v = bpf_map_lookup_elem(&proto_count, &proto);
	if (v)
		__sync_fetch_and_add(v, 1);

	saddr = ip->saddr;
	v = bpf_map_lookup_elem(&src_count, &saddr);
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		bpf_map_update_elem(&src_count, &saddr, &one, BPF_NOEXIST);

	bpf_map_update_elem(&lru_seen, &saddr, &seen, BPF_ANY);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
