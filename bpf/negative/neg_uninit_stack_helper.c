// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE only WITHOUT CAP_PERFMON/CAP_SYS_ADMIN: passes an uninitialised
 * stack slot as the map key of bpf_map_lookup_elem. The asm barrier taking the
 * key's address keeps clang from dropping or initialising it.
 * KERNEL QUIRK: recent verifiers (6.18 here) ALLOW reads of uninitialised
 * stack (plain loads and helper memory arguments) when the loader has
 * CAP_PERFMON or CAP_SYS_ADMIN ("allow_uninit_stack"), so as full root on 6.18
 * this program LOADS (the key is then whatever the stack held). With those two
 * capabilities dropped (CAP_BPF + CAP_NET_ADMIN kept, via setpriv) it is
 * rejected. kernel-load-test.sh checks both.
 * EXPECT-ROOT: loads
 * EXPECT-NOPERFMON: invalid read from stack R2 off=-4 size=4
 */
#include "sluice_xdp.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} h SEC(".maps");

SEC("xdp")
int neg_uninit_stack_helper(struct xdp_md *ctx)
{
	__u32 key; /* never written */
	__u64 *v;

	asm volatile("" : : "r"(&key) : "memory");
	v = bpf_map_lookup_elem(&h, &key);
	return v ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
