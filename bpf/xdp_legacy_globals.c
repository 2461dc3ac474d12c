// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_legacy_globals: a loader test for the old object layout plus global data.
 *
 * Built twice (see build.sh):
 *   xdp_legacy_globals.o  the map is a LEGACY definition: `struct bpf_map_def`
 *                         (5 x u32: type, key_size, value_size, max_entries,
 *                         map_flags) in ELF section "maps". libbpf >= 1.0 (and
 *                         so bpftool 7.x and `ip ... xdp obj`) refuses it:
 *                         "legacy map definitions in 'maps' section are not
 *                         supported" -> sluice-only loader test.
 *   xdp_globals.o         -DSLUICE_BTF_MAPS: the same program with a BTF-defined
 *                         map, which the kernel loads, so the .data/.bss/.rodata
 *                         handling is still cross-checked against the kernel.
 * Globals:
 *   .bss    __u64 counter         atomic add of 1 per frame
 *   .bss    __u64 last_len        plain store of the frame length
 *   .data   __u64 base = 1000     read-only in practice (added to the map value)
 *   .data   __u32 seen_ipv4 = 100 plain increment per IPv4 frame (starts at 100)
 *   .rodata const volatile __u32 len_shift = 0 (so stats[1] = len >> 0)
 * Maps:
 *   legacy_stats ARRAY (legacy or BTF), 2 entries, u32 -> u64:
 *       [0] = base + frames so far (set to base + counter after the add)
 *       [1] += frame length >> len_shift (atomic add)
 * Verdict: always XDP_PASS (2).
 */
#include "sluice_xdp.h"

#ifdef SLUICE_BTF_MAPS
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} legacy_stats SEC(".maps");
#else
/* The pre-BTF libbpf / samples/bpf layout; libbpf 1.x dropped the struct. */
struct bpf_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct bpf_map_def SEC("maps") legacy_stats = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 2,
	.map_flags = 0,
};
#endif

__u64 counter = 0;       /* .bss */
__u64 last_len;          /* .bss */
__u64 base = 1000;       /* .data */
__u32 seen_ipv4 = 100;   /* .data */
const volatile __u32 len_shift = 0; /* .rodata */

SEC("xdp")
int xdp_legacy_globals(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u64 len = data_end - data;
	__u32 key;
	__u64 *v;

	__sync_fetch_and_add(&counter, 1);
	last_len = len;
	if ((void *)(eth + 1) <= data_end && eth->h_proto == bpf_htons(ETH_P_IP))
		seen_ipv4++;

	key = 0;
	v = bpf_map_lookup_elem(&legacy_stats, &key);
	if (v)
		*v = base + counter;
	key = 1;
	v = bpf_map_lookup_elem(&legacy_stats, &key);
	if (v)
		__sync_fetch_and_add(v, len >> len_shift);
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
