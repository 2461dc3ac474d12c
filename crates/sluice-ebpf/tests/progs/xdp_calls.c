/* bpf-to-bpf calls (static and global __noinline functions, nested), a bounded loop
 * over the payload, and several programs in one object ("xdp" and "xdp.frags"). */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 4);
} results SEC(".maps");

static __noinline __u64 sum_bytes(__u8 *p, __u8 *end, int n)
{
	__u64 s = 0;
	int i;

	for (i = 0; i < 64; i++) {
		if (i >= n)
			break;
		if (p + i + 1 > end)
			break;
		s += p[i];
	}
	return s;
}

static __noinline __u64 mix(__u64 a, __u64 b)
{
	return (a * 31) ^ (b + 7);
}

__noinline int store_result(__u32 idx, __u64 val)
{
	__u64 *slot = bpf_map_lookup_elem(&results, &idx);

	if (!slot)
		return -1;
	*slot = mix(val, idx);
	return 0;
}

SEC("xdp")
int calls(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	__u64 s = sum_bytes(data, data_end, 16);

	store_result(0, s);
	store_result(1, sum_bytes(data, data_end, 64));
	return s & 1 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int always_tx(struct xdp_md *ctx)
{
	store_result(2, 42);
	return XDP_TX;
}

SEC("xdp.frags")
int frags_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
