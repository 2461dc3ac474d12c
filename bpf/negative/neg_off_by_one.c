// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: off-by-one bounds check. Proves 14 bytes are present, then reads
 * the first byte after the Ethernet header (offset 14, i.e. the 15th byte).
 * EXPECT: invalid access to packet, off=14 size=1
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_off_by_one(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;

	if (data + ETH_HLEN > data_end)
		return XDP_DROP;
	if (p[ETH_HLEN] == 0x45) /* one past the checked range */
		return XDP_TX;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
