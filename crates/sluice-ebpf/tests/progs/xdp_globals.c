/* Global variables: .data (initialised), .rodata (const volatile, set before load),
 * .bss (zero), plus a string in .rodata.str1.1 through bpf_printk. */
#include "common.h"

const volatile __u32 drop_port = 9;         /* .rodata */
const volatile __u8 verbose = 1;            /* .rodata */
__u64 packets = 100;                        /* .data */
__u32 magic = 0xfeedbeef;                   /* .data */
__u64 bytes;                                /* .bss */
__u32 last_len;                             /* .bss */

SEC("xdp")
int globals(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 len = data_end - data;

	__sync_fetch_and_add(&packets, 1);
	__sync_fetch_and_add(&bytes, len);
	last_len = len;
	if (verbose)
		bpf_printk("len %u magic %x port %d", len, magic, drop_port);
	if (len == drop_port)
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
