/* Redirects: bpf_redirect_map into DEVMAP / CPUMAP / XSKMAP (fallback action in flags),
 * plain bpf_redirect, and a bpf_fib_lookup call. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
	__uint(max_entries, 8);
} tx_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
	__uint(max_entries, 4);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 4);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 8);
} tx_hash SEC(".maps");

SEC("xdp")
int to_port(struct xdp_md *ctx)
{
	return bpf_redirect_map(&tx_ports, ctx->ingress_ifindex, XDP_DROP);
}

SEC("xdp")
int to_hash_port(struct xdp_md *ctx)
{
	return bpf_redirect_map(&tx_hash, ctx->ingress_ifindex, XDP_PASS);
}

SEC("xdp")
int to_cpu(struct xdp_md *ctx)
{
	return bpf_redirect_map(&cpus, ctx->rx_queue_index, XDP_PASS);
}

SEC("xdp")
int to_xsk(struct xdp_md *ctx)
{
	__u32 q = ctx->rx_queue_index;

	if (bpf_map_lookup_elem(&xsks, &q))
		return bpf_redirect_map(&xsks, q, 0);
	return XDP_PASS;
}

SEC("xdp")
int to_ifindex(struct xdp_md *ctx)
{
	return bpf_redirect(ctx->ingress_ifindex + 1, 0);
}

SEC("xdp")
int fib(struct xdp_md *ctx)
{
	struct bpf_fib_lookup p = {};
	long rc;

	p.family = 2; /* AF_INET */
	p.ifindex = ctx->ingress_ifindex;
	p.ipv4_dst = bpf_htonl(0x0a000001);
	rc = bpf_fib_lookup(ctx, &p, sizeof(p), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS)
		return bpf_redirect(p.ifindex, 0);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
