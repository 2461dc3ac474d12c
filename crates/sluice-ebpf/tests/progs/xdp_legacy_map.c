/* A legacy `SEC("maps") struct bpf_map_def` map (pre-BTF style, still found in old objects). */
#include "common.h"

struct bpf_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct bpf_map_def SEC("maps") action_count = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 5,
};

struct bpf_map_def SEC("maps") verdict_cfg = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u32),
	.max_entries = 16,
};

SEC("xdp")
int legacy(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 action = XDP_PASS;
	__u32 *cfg = bpf_map_lookup_elem(&verdict_cfg, &ifindex);
	__u64 *cnt;

	if (cfg && *cfg <= XDP_REDIRECT)
		action = *cfg;
	cnt = bpf_map_lookup_elem(&action_count, &action);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	return action;
}

char _license[] SEC("license") = "GPL";
