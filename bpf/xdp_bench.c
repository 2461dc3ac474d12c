// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_bench: the memory-access-cost benchmark program, in the spirit of the
 * kernel sample xdp_bench01_mem_access_cost, specialised at compile time.
 *
 * Build variants (see build.sh):
 *   xdp_bench_drop_notouch.o  -DBENCH_ACTION=XDP_DROP -DBENCH_TOUCH=0
 *   xdp_bench_drop_read.o     -DBENCH_ACTION=XDP_DROP -DBENCH_TOUCH=1
 *   xdp_bench_tx_notouch.o    -DBENCH_ACTION=XDP_TX   -DBENCH_TOUCH=0
 *   xdp_bench_tx_read.o       -DBENCH_ACTION=XDP_TX   -DBENCH_TOUCH=1
 * TOUCH=1 reads the Ethernet protocol (through a volatile, so the load stays);
 * for XDP_TX, TOUCH=1 also swaps the MACs (the original sample always swaps for
 * TX; tx_notouch is the "does not look at the frame" lower bound).
 *
 * Maps:
 *   rx_cnt  PERCPU_ARRAY, 1 entry, key u32 0 -> u64 packets, plain increment
 *           (per-CPU, so no atomic; like the sample).
 * Verdict: BENCH_ACTION for frames >= 14 bytes (all frames under test_run);
 *          XDP_ABORTED (0) for shorter ones when touching.
 */
#include "sluice_xdp.h"

#ifndef BENCH_ACTION
#define BENCH_ACTION XDP_DROP
#endif
#ifndef BENCH_TOUCH
#define BENCH_TOUCH 0
#endif

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rx_cnt SEC(".maps");

#if BENCH_TOUCH
static __always_inline void swap_src_dst_mac(void *data)
{
	__u16 *p = data;
	__u16 dst[3];

	dst[0] = p[0];
	dst[1] = p[1];
	dst[2] = p[2];
	p[0] = p[3];
	p[1] = p[4];
	p[2] = p[5];
	p[3] = dst[0];
	p[4] = dst[1];
	p[5] = dst[2];
}
#endif

SEC("xdp")
int xdp_bench(struct xdp_md *ctx)
{
	__u32 key = 0;
	__u64 *value;
#if BENCH_TOUCH
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	volatile __u16 eth_type;

	if ((void *)(eth + 1) > data_end)
		return XDP_ABORTED;
	eth_type = eth->h_proto;
	(void)eth_type;
#endif

	value = bpf_map_lookup_elem(&rx_cnt, &key);
	if (value)
		*value += 1;

#if BENCH_TOUCH
	if (BENCH_ACTION == XDP_TX)
		swap_src_dst_mac(data);
#endif
	return BENCH_ACTION;
}

char _license[] SEC("license") = "Dual BSD/GPL";
