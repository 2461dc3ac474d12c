/* A user XDP program for the afxdp port's tests: frames of ethertype 0x88b5 go to the
 * AF_XDP socket of their receive queue (xsks_map), 0x88b6 are dropped in the kernel and
 * counted (a global), everything else passes to the stack.
 * Rebuild: ./build.sh (clang, linux-libc-dev, libbpf-dev); the .o is committed. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 64);
} xsks_map SEC(".maps");

__u64 dropped = 0;
volatile const __u16 to_socket = 0x88b5;

SEC("xdp")
int xsk_filter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(to_socket))
		return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
	if (eth->h_proto == bpf_htons(0x88b6)) {
		__sync_fetch_and_add(&dropped, 1);
		return XDP_DROP;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual MIT/GPL";
