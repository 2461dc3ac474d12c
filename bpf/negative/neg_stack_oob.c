// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: writes outside the 512-byte stack frame (8 bytes at fp-520).
 * In plain C clang treats such a store as undefined behaviour and deletes it
 * (a p[-75] store through a volatile pointer vanished), and clang refuses
 * frames larger than 512 bytes itself, so the store is in inline assembly.
 * EXPECT: invalid write to stack R10 off=-520 size=8
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_stack_oob(struct xdp_md *ctx)
{
	__u64 v = XDP_PASS;

	asm volatile("*(u64 *)(r10 - 520) = %[v]" : : [v] "r"(v) : "memory");
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
