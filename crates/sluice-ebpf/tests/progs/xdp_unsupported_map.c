/* A ring buffer record reserved, written and submitted (once refused: the name stays). */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

SEC("xdp")
int ringbuf_user(struct xdp_md *ctx)
{
	__u32 *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (e) {
		*e = ctx->ingress_ifindex;
		bpf_ringbuf_submit(e, 0);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
