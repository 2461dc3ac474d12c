// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * NEGATIVE: reads a register that was never written. At entry only R1 (ctx)
 * and R10 (frame pointer) are initialised; this program copies R7 into R0
 * before anything wrote R7 (clang cannot be made to do that from plain C, so
 * the read is in inline assembly).
 * EXPECT: R7 !read_ok
 */
#include "sluice_xdp.h"

SEC("xdp")
int neg_uninit_register(struct xdp_md *ctx)
{
	int ret;

	asm volatile("%[ret] = r7" : [ret] "=r"(ret) : : "r7");
	return ret;
}

char _license[] SEC("license") = "GPL";
