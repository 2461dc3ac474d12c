//! Unsafe programs the verifier must refuse, each with the instruction it must name and a
//! fragment of the reason.

#[path = "verifier_asm.rs"]
mod asm;

use asm::{asm, map, program, ARRAY1_VALUE, PAD_TWICE_TO_JOIN};
use sluice_ebpf::program::{map_type, MapDef};
use sluice_ebpf::verifier::{verify, VerifyOptions};

fn maps() -> Vec<MapDef> {
    let mut rodata = map(".rodata", map_type::ARRAY, 4, 32, 1);
    rodata.flags = 1 << 7; // BPF_F_RDONLY_PROG
    vec![
        map("hash", map_type::HASH, 4, 8, 16),    // 0
        map("array", map_type::ARRAY, 4, 16, 4),  // 1
        map("devmap", map_type::DEVMAP, 4, 4, 8), // 2
        rodata,                                   // 3
        map(".bss", map_type::ARRAY, 4, 64, 1),   // 4
    ]
}

#[track_caller]
fn rejects_with(src: &str, maps: Vec<MapDef>, opts: VerifyOptions, insn: usize, frag: &str) {
    let p = program(asm(src), maps);
    match verify(&p, &opts) {
        Ok(v) => panic!("accepted (stats {:?}); expected insn {insn}: ...{frag}...", v.stats()),
        Err(e) => {
            assert!(e.insn == insn && e.msg.contains(frag), "expected insn {insn} with {frag:?}, got: {e}");
            assert!(e.to_string().starts_with(&format!("insn {insn}: ")), "display: {e}");
        }
    }
}

#[track_caller]
fn rejects(src: &str, insn: usize, frag: &str) {
    rejects_with(src, maps(), VerifyOptions::default(), insn, frag);
}

/// A rule of the kernel's unprivileged mode (no `allow_ptr_leaks`): refused there, with
/// the message saying so, and accepted under the privileged rules sluice uses by default.
#[track_caller]
fn rejects_unprivileged(src: &str, insn: usize, frag: &str) {
    rejects_with(src, maps(), VerifyOptions::unprivileged(), insn, frag);
    let e = verify(&program(asm(src), maps()), &VerifyOptions::unprivileged()).unwrap_err();
    assert!(e.msg.contains("unprivileged rule"), "{e}");
    if let Err(e) = verify(&program(asm(src), maps()), &VerifyOptions::default()) {
        panic!("privileged rules refused it: {e}");
    }
}

/// Loads data into r2, data_end into r3 (insns 0-1).
const PKT: &str = "
    r2 = *(u32 *)(r1 + 0)
    r3 = *(u32 *)(r1 + 4)
";

/// Key 0 on the stack, lookup in map 1 (array, value 16 bytes); r6 = ctx. Insns 0-7.
const LOOKUP: &str = "
    r6 = r1
    *(u32 *)(r10 - 4) = 0
    r2 = r10
    r2 += -4
    r1 = map[1] ll
    call 1
";

// ---------------------------------------------------------------- packet

#[test]
fn packet_read_without_bounds_check() {
    rejects(&format!("{PKT} r0 = *(u8 *)(r2 + 0) \n exit"), 2, "invalid access to packet, off=0 size=1, R2 range=0");
}

#[test]
fn packet_off_by_one_check() {
    let src = format!(
        "{PKT}
        r4 = r2
        r4 += 14
        if r4 > r3 goto drop
        r0 = *(u16 *)(r2 + 13)
        exit
    drop:
        r0 = 1
        exit"
    );
    rejects(&src, 5, "invalid access to packet, off=13 size=2, R2 range=14");
}

#[test]
fn packet_check_on_wrong_side() {
    let src = format!(
        "{PKT}
        r4 = r2
        r4 += 14
        if r4 <= r3 goto ok
        r0 = *(u8 *)(r2 + 0)
        exit
    ok:
        r0 = 2
        exit"
    );
    rejects(&src, 5, "invalid access to packet, off=0 size=1, R2 range=0");
}

#[test]
fn packet_check_with_strict_compare_against_wrong_pointer() {
    // data_end < data + 14 taken: nothing is known in the taken branch.
    let src = format!(
        "{PKT}
        r4 = r2
        r4 += 14
        if r3 < r4 goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u32 *)(r2 + 0)
        exit"
    );
    rejects(&src, 7, "invalid access to packet, off=0 size=4, R2 range=0");
}

#[test]
fn packet_variable_offset_without_recheck() {
    let src = format!(
        "{PKT}
        r4 = r2
        r4 += 15
        if r4 > r3 goto out
        r5 = *(u8 *)(r2 + 14)
        r5 &= 15
        r5 <<= 2
        r2 += r5
        r0 = *(u8 *)(r2 + 0)
        exit
    out:
        r0 = 2
        exit"
    );
    rejects(&src, 9, "invalid access to packet, off=0 size=1, R2 range=0");
}

#[test]
fn packet_pointer_use_after_adjust_head() {
    let src = "r6 = r1
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r4 = r2
        r4 += 14
        if r4 > r3 goto out
        r7 = r2
        r1 = r6
        r2 = 0
        call 44
        r0 = *(u8 *)(r7 + 0)
        exit
    out:
        r0 = 2
        exit"
        .to_string();
    rejects(&src, 10, "R7 invalid mem access 'scalar': packet pointer invalidated");
}

/// The kernel's mark_reg_invalid: after bpf_xdp_adjust_head a stale packet pointer is an
/// unknown scalar for a privileged loader (it may be used as a number, never dereferenced)
/// and unreadable for an unprivileged one (refused at its first use, here the arithmetic).
#[test]
fn stale_packet_pointer_privileged_scalar_unprivileged_unreadable() {
    let stale_use = "r6 = r1
        r7 = *(u32 *)(r1 + 0)
        r1 = r6
        r2 = -4
        call 44
        r7 += 1
        if r7 == 0 goto zero
        r0 = 2
        exit
    zero:
        r0 = 1
        exit";
    rejects_unprivileged(stale_use, 5, "R7 !read_ok: packet pointer invalidated");
    let deref = "r6 = r1
        r7 = *(u32 *)(r1 + 0)
        r1 = r6
        r2 = -4
        call 44
        r7 += 1
        r0 = *(u8 *)(r7 + 0)
        exit";
    rejects_with(deref, maps(), VerifyOptions::default(), 6, "R7 invalid mem access 'scalar'");
    rejects_with(deref, maps(), VerifyOptions::unprivileged(), 5, "R7 !read_ok");
}

/// Privileged only: two unrelated pointers subtracted give a number, a 32-bit copy of a
/// pointer gives a number; unprivileged, both are refused.
#[test]
fn pointer_difference_and_partial_copy_are_privileged_only() {
    rejects_unprivileged("r2 = r10\n r2 -= r1\n r0 = 2\n exit", 1, "pointer arithmetic prohibited: fp -= ctx");
    rejects_unprivileged("w2 = w1\n r0 = 2\n exit", 0, "R1 partial copy of pointer");
    // Even privileged, the number is not a pointer: no access through it.
    rejects("w2 = w1\n r0 = *(u8 *)(r2 + 0)\n exit", 1, "R2 invalid mem access 'scalar'");
}

#[test]
fn atomic_on_packet() {
    let src = format!(
        "{PKT}
        r4 = r2
        r4 += 8
        if r4 > r3 goto out
        r5 = 1
        atomic u32 r2 + 0 add r5
    out:
        r0 = 2
        exit"
    );
    rejects(&src, 6, "BPF_ATOMIC stores into R2 pkt is not allowed");
}

#[test]
fn pointer_stored_into_packet() {
    let src = format!(
        "{PKT}
        r4 = r2
        r4 += 8
        if r4 > r3 goto out
        *(u64 *)(r2 + 0) = r10
    out:
        r0 = 2
        exit"
    );
    rejects_unprivileged(&src, 5, "R10 leaks addr into packet");
}

#[test]
fn packet_meta_read_without_check() {
    rejects("r2 = *(u32 *)(r1 + 8) \n r0 = *(u32 *)(r2 + 0) \n exit", 1, "invalid access to packet metadata");
}

/// `meta + 8 <= data + x` with x anywhere in [0, 7] leaves only one metadata byte known
/// readable: the bound is granted only against a packet pointer at or below `data`
/// (try_match_pkt_pointers requires `data` itself), never one that may be past it.
#[test]
fn packet_meta_checked_against_data_plus_a_variable_gets_no_range() {
    rejects(
        "
        r6 = r1
        call 7
        r0 &= 7
        r2 = *(u32 *)(r6 + 8)
        r3 = *(u32 *)(r6 + 0)
        r3 += r0
        r4 = r2
        r4 += 8
        if r4 > r3 goto out
        r0 = *(u64 *)(r2 + 0)
    out:
        r0 = 2
        exit",
        9,
        "invalid access to packet metadata",
    );
}

#[test]
fn pkt_end_arithmetic() {
    rejects(&format!("{PKT} r3 += 1 \n r0 = 2 \n exit"), 2, "R3 pointer arithmetic on pkt_end prohibited");
}

// ---------------------------------------------------------------- stack

#[test]
fn stack_out_of_bounds_below_frame() {
    rejects("*(u64 *)(r10 - 520) = 1 \n r0 = 2 \n exit", 0, "invalid write to stack R10 off=-520 size=8");
}

#[test]
fn stack_out_of_bounds_above_frame() {
    rejects("r0 = 2 \n *(u32 *)(r10 + 0) = r0 \n exit", 1, "invalid write to stack R10 off=0 size=4");
}

#[test]
fn uninitialised_stack_read() {
    // allow_uninit_stack: a privileged loader reads never-written bytes as unknown data.
    rejects_unprivileged("*(u32 *)(r10 - 8) = 0 \n r0 = *(u64 *)(r10 - 8) \n exit", 1, "invalid read from stack R10 off=-8 size=8");
}

#[test]
fn uninitialised_stack_as_map_key() {
    let src = "
        r2 = r10
        r2 += -4
        r1 = map[0] ll
        call 1
        r0 = 2
        exit";
    rejects_unprivileged(src, 4, "invalid read from stack R2 off=-4 size=4");
}

#[test]
fn variable_offset_stack_access() {
    let src = "
        r3 = *(u32 *)(r1 + 12)
        r3 &= 7
        r2 = r10
        r2 += r3
        r0 = *(u8 *)(r2 - 16)
        exit";
    rejects(src, 4, "invalid variable-offset read from stack R2");
}

#[test]
fn partial_pointer_spill() {
    rejects("*(u32 *)(r10 - 4) = r1 \n r0 = 2 \n exit", 0, "R1 misaligned or partial spill of a pointer");
}

#[test]
fn partial_fill_of_spilled_pointer() {
    rejects("*(u64 *)(r10 - 8) = r1 \n r0 = *(u32 *)(r10 - 8) \n exit", 1, "the slot holds a spilled ctx");
}

/// Stack accesses must be aligned to their size, whatever the architecture
/// (check_ptr_alignment is strict for PTR_TO_STACK), before any bounds check; loads,
/// stores and atomics alike. Packet and map value accesses are not (x86 handles unaligned
/// accesses), so a misaligned packet load stays fine.
#[test]
fn misaligned_stack_accesses_are_refused() {
    rejects("r0 = *(u64 *)(r10 - 12) \n exit", 0, "misaligned stack access off (0x0; 0x0)+0+-12 size 8");
    rejects("*(u32 *)(r10 - 6) = 0 \n r0 = 2 \n exit", 0, "misaligned stack access off (0x0; 0x0)+0+-6 size 4");
    rejects("r1 = r10 \n r1 += -16 \n *(u16 *)(r1 + 3) = 0 \n r0 = 2 \n exit", 2, "misaligned stack access off (0x0; 0x0)+-16+3 size 2");
    rejects("*(u64 *)(r10 - 8) = 0 \n r1 = 1 \n r2 = r10 \n atomic u32 r2 - 6 add r1 \n r0 = 2 \n exit", 3, "misaligned stack access");
    // Past the frame and misaligned: the alignment is named first, as the kernel does.
    rejects("r0 = *(u32 *)(r10 - 514) \n exit", 0, "misaligned stack access");
}

/// A branch decided by a link between its operands (one id: they hold one value) rests on
/// that link: the pruned state must agree on it. Here the first path links r1 and r2 (r1 =
/// r2 = 5 or 6), so `r1 > r2` cannot be taken; the second path reaches the branch with r1
/// unknown and r2 = 0, which must not be pruned against the first (precision marked for the
/// decision, as the kernel marks it for every decided branch): the taken side's unbounded
/// stack offset is refused.
#[test]
fn a_branch_decided_by_linked_registers_does_not_prune_an_unlinked_path() {
    let src = "
        r6 = *(u32 *)(r1 + 16)
        r7 = *(u32 *)(r1 + 12)
        if r7 == 0 goto other
        r2 = r6
        r2 &= 1
        r2 += 5
        r1 = r2
        r0 = 0
        r0 = 0
        r0 = 0
        goto join
    other:
        r1 = r6
        r2 = 0
    join:
        if r1 > r2 goto bad
        r0 = 2
        exit
    bad:
        r3 = r10
        r3 += r1
        r0 = *(u8 *)(r3 - 8)
        exit";
    rejects(src, 17, "R3");
}

/// A spilled constant partly overwritten leaves bytes of no known value (the kernel's
/// scrub_spilled_slot makes them STACK_MISC), not zero bytes: the first path's read of them
/// must not stand for the second path's spilled unknown. Both sides of `r1 != 0` are then
/// explored, and the taken side's unbounded stack offset is refused.
#[test]
fn a_broken_spill_of_zero_reads_back_unknown() {
    let src = "
        r6 = *(u32 *)(r1 + 16)
        r7 = 0
        if r6 > 7 goto spill
        *(u64 *)(r10 - 8) = 0
        r0 = 0
        r0 = 0
        r0 = 0
        r0 = 0
        goto join
    spill:
        *(u64 *)(r10 - 8) = r6
    join:
        *(u32 *)(r10 - 4) = r7
        r1 = *(u32 *)(r10 - 8)
        if r1 != 0 goto bad
        r0 = 2
        exit
    bad:
        r2 = r10
        r2 += r1
        r0 = *(u8 *)(r2 - 8)
        exit";
    rejects(src, 16, "R2");
}

/// Zero bytes in the saved state stand only for current bytes that are zero too: a spilled
/// constant covers them byte by byte where its own byte is 0 (stacksafe). The fall-through
/// (walked first, saved at `join`) leaves fp-6..fp-1 zero bytes (narrow stores off the 8-byte
/// grid, no spill); the branch target spills 0x0101010101010101 over the slot, whose bytes are
/// all 1. The second path must not be pruned there: it reads an unknown 16-bit number back
/// (a fill off the slot's start) and its stack offset is refused. (The kernel does not
/// prune either: STACK_ZERO and STACK_SPILL differ.)
/// A narrow read inside a spilled register but not at its slot's start fills no register
/// (the kernel's check_stack_read_fixed_off: bpf_stack_narrow_access_ok wants `off % 8 ==
/// 0` on little-endian hosts): two bytes at fp-6 of a spilled 0x10000 are an unknown
/// 0..65535, not the constant 1, and refused as a stack offset. At the slot's start they are
/// the constant (0, the low bytes), and a spilled 0 reads as 0 anywhere.
#[test]
fn a_narrow_read_inside_a_spilled_constant_off_its_start_is_unknown() {
    let src = |read: &str| {
        format!(
            "r1 = 0x10000
            *(u64 *)(r10 - 8) = r1
            {read}
            r2 = r10
            r2 += r1
            r0 = *(u8 *)(r2 - 8)
            exit"
        )
    };
    rejects(&src("r1 = *(u16 *)(r10 - 6)"), 5, "invalid variable-offset read from stack R2 (offset range [0, 65535])");
    for ok in ["r1 = *(u16 *)(r10 - 8)", "r1 = 0 \n *(u64 *)(r10 - 8) = r1 \n r1 = *(u16 *)(r10 - 6)"] {
        verify(&program(asm(&src(ok)), maps()), &VerifyOptions::default()).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}

#[test]
fn zero_bytes_do_not_cover_a_spilled_constant_whose_bytes_are_not_zero() {
    rejects(
        "r6 = *(u32 *)(r1 + 16)
        if r6 > 7 goto spill
        *(u16 *)(r10 - 6) = 0
        *(u32 *)(r10 - 4) = 0
        r3 = 0
        r4 = 1
        goto pad
    pad:
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    spill:
        r1 = 0x0101010101010101 ll
        *(u64 *)(r10 - 8) = r1
    join:
        r1 = *(u16 *)(r10 - 6)
        if r1 == 0 goto out
        r2 = r10
        r2 += r1
        r0 = *(u8 *)(r2 - 8)
        exit
    out:
        r0 = 2
        exit",
        18,
        "invalid variable-offset read from stack R2 (offset range [1, 65535])",
    );
}

#[test]
fn stack_overflow_across_calls() {
    let src = "
        *(u64 *)(r10 - 296) = 0
        call @f
        exit
    f:
        *(u64 *)(r10 - 312) = 0
        r0 = 0
        exit";
    rejects(src, 1, "combined stack size of 2 calls is 608 bytes");
}

// ---------------------------------------------------------------- registers and ALU

#[test]
fn uninitialised_register() {
    rejects("r0 = 2 \n r0 += r5 \n exit", 1, "R5 !read_ok");
}

#[test]
fn r0_uninitialised_at_exit() {
    rejects("r1 = 0 \n exit", 1, "R0 !read_ok");
}

#[test]
fn write_to_frame_pointer() {
    rejects("r0 = 0 \n r10 = 0 \n exit", 1, "frame pointer is read only");
}

#[test]
fn load_into_frame_pointer() {
    rejects("r10 = *(u32 *)(r1 + 0) \n r0 = 0 \n exit", 0, "frame pointer is read only");
}

#[test]
fn invalid_register_number() {
    rejects("r0 = 0 \n r11 = 1 \n exit", 1, "R11 is invalid");
}

#[test]
fn pointer_multiply() {
    rejects(&format!("{PKT} r2 *= 2 \n r0 = 2 \n exit"), 2, "R2 pointer arithmetic prohibited");
}

#[test]
fn pointer_division() {
    rejects("r1 /= 3 \n r0 = 2 \n exit", 0, "R1 pointer arithmetic prohibited");
}

#[test]
fn pointer_32bit_arithmetic() {
    rejects("w1 += 4 \n r0 = 2 \n exit", 0, "32-bit pointer arithmetic prohibited");
}

#[test]
fn pointer_plus_pointer() {
    rejects(&format!("{PKT} r2 += r3 \n r0 = 2 \n exit"), 2, "pointer arithmetic prohibited");
}

#[test]
fn division_result_used_as_pointer() {
    rejects("r0 = 100 \n r1 = 3 \n r0 /= r1 \n r0 = *(u8 *)(r0 + 0) \n exit", 3, "R0 invalid mem access 'scalar'");
}

#[test]
fn pointer_returned_from_program() {
    rejects_unprivileged("r0 = r10 \n exit", 1, "R0 leaks addr as return value");
}

#[test]
fn pointer_comparison_between_unrelated_pointers() {
    rejects_unprivileged("if r1 > r10 goto +0 \n r0 = 2 \n exit", 0, "pointer comparison prohibited");
}

#[test]
fn pointer_compared_with_nonzero() {
    rejects_unprivileged("if r1 == 5 goto +0 \n r0 = 2 \n exit", 0, "pointer comparison prohibited");
}

// ---------------------------------------------------------------- ctx

#[test]
fn ctx_store() {
    rejects("*(u32 *)(r1 + 12) = 0 \n r0 = 2 \n exit", 0, "invalid bpf_context access off=12 size=4");
}

#[test]
fn ctx_partial_load_of_data() {
    rejects("r2 = *(u16 *)(r1 + 0) \n r0 = 2 \n exit", 0, "invalid bpf_context access off=0 size=2");
}

#[test]
fn ctx_unaligned_load() {
    rejects("r2 = *(u32 *)(r1 + 2) \n r0 = 2 \n exit", 0, "invalid bpf_context access off=2 size=4");
}

#[test]
fn ctx_load_past_end() {
    rejects("r2 = *(u32 *)(r1 + 24) \n r0 = 2 \n exit", 0, "invalid bpf_context access off=24 size=4");
}

#[test]
fn ctx_dereference_after_arithmetic() {
    rejects("r1 += 4 \n r2 = *(u32 *)(r1 + 0) \n r0 = 2 \n exit", 1, "dereference of modified ctx ptr");
}

// ---------------------------------------------------------------- maps

#[test]
fn map_value_null_dereference() {
    rejects(&format!("{LOOKUP} r0 = *(u64 *)(r0 + 0) \n exit"), 7, "invalid mem access 'map_value_or_null'");
}

#[test]
fn map_value_arithmetic_before_null_check() {
    rejects(&format!("{LOOKUP} r0 += 8 \n r0 = 2 \n exit"), 7, "pointer arithmetic on map_value_or_null prohibited, null-check it first");
}

#[test]
fn map_value_oob_with_variable_offset() {
    let src = format!(
        "{LOOKUP}
        if r0 == 0 goto out
        r2 = *(u32 *)(r6 + 12)
        r2 &= 15
        r0 += r2
        r1 = *(u64 *)(r0 + 0)
    out:
        r0 = 2
        exit"
    );
    rejects(&src, 11, "invalid access to map value, value_size=16 off=15 size=8 (R0 max value is outside of the allowed memory range)");
}

/// The last byte of a 16-byte value is readable; one past it is not (an off-by-one in the
/// bounds check passes every other test).
#[test]
fn map_value_one_byte_past_the_end() {
    let read = |size: &str, off: u32| format!("{LOOKUP} if r0 == 0 goto +1 \n r1 = *({size} *)(r0 + {off}) \n r0 = 2 \n exit");
    for (size, last) in [("u8", 15), ("u16", 14), ("u32", 12), ("u64", 8)] {
        verify(&program(asm(&read(size, last)), maps()), &VerifyOptions::default())
            .unwrap_or_else(|e| panic!("{size} at {last} is inside the value: {e}"));
    }
    rejects(&read("u8", 16), 8, "invalid access to map value, value_size=16 off=16 size=1");
    rejects(&read("u64", 9), 8, "invalid access to map value, value_size=16 off=9 size=8");
}

#[test]
fn map_value_negative_offset() {
    rejects(
        &format!("{LOOKUP} if r0 == 0 goto +1 \n r1 = *(u8 *)(r0 - 1) \n r0 = 2 \n exit"),
        8,
        "invalid access to map value, value_size=16 off=-1 size=1",
    );
}

#[test]
fn pointer_leak_into_map_value() {
    let src = format!(
        "{LOOKUP}
        if r0 == 0 goto out
        *(u64 *)(r0 + 0) = r6
    out:
        r0 = 2
        exit"
    );
    rejects_unprivileged(&src, 8, "R6 leaks addr into map value");
}

#[test]
fn pointer_leak_into_map_via_update_value() {
    let src = "
        *(u32 *)(r10 - 4) = 0
        *(u64 *)(r10 - 16) = r1
        r2 = r10
        r2 += -4
        r3 = r10
        r3 += -16
        r4 = 0
        r1 = map[0] ll
        call 2
        r0 = 2
        exit";
    rejects_unprivileged(src, 9, "holds a spilled ctx (pointer leak into helper");
}

#[test]
fn write_into_readonly_global() {
    rejects("r1 = map_value[3][0] ll \n *(u32 *)(r1 + 0) = 1 \n r0 = 2 \n exit", 2, "write into read-only map value");
}

#[test]
fn global_data_out_of_bounds() {
    rejects("r1 = map_value[4][60] ll \n r0 = *(u64 *)(r1 + 0) \n exit", 2, "invalid access to map value, value_size=64 off=60 size=8");
}

#[test]
fn bad_map_index() {
    rejects("r0 = 0 \n r1 = map[5] ll \n exit", 1, "map index 5 out of range");
}

#[test]
fn unsupported_map_type() {
    let m = vec![map("socks", 15 /* SOCKMAP */, 4, 4, 4)];
    rejects_with("r1 = map[0] ll \n r0 = 0 \n exit", m, VerifyOptions::default(), 0, "unsupported map type 15");
}

#[test]
fn redirect_map_on_hash_map() {
    rejects("r1 = map[0] ll \n r2 = 0 \n r3 = 0 \n call 51 \n exit", 4, "cannot pass map_type 1");
}

#[test]
fn update_on_devmap() {
    let src = "
        *(u32 *)(r10 - 4) = 0
        *(u32 *)(r10 - 8) = 0
        r2 = r10
        r2 += -4
        r3 = r10
        r3 += -8
        r4 = 0
        r1 = map[2] ll
        call 2
        exit";
    rejects(src, 9, "cannot pass map_type 14");
}

// ---------------------------------------------------------------- helpers

#[test]
fn unknown_helper() {
    rejects("r0 = 0 \n call 13 \n exit", 1, "program of this type cannot use helper bpf_clone_redirect#13");
}

#[test]
fn tail_call_needs_a_prog_array() {
    // bpf_tail_call on a data map: the kernel's "cannot pass map_type 2 into func bpf_tail_call".
    rejects("r1 = r1 \n r2 = map[0] ll \n r3 = 0 \n call 12 \n r0 = 0 \n exit", 4, "cannot pass map_type");
}

#[test]
fn wrong_helper_argument_type() {
    // R1 is still the context, not a map.
    let src = "
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        call 1
        r0 = 2
        exit";
    rejects(src, 3, "R1 type=ctx expected=map_ptr");
}

#[test]
fn helper_scalar_argument_is_pointer() {
    rejects_unprivileged("r1 = r10 \n r2 = 0 \n call 23 \n exit", 2, "R1 leaks addr into helper function bpf_redirect");
}

#[test]
fn trace_printk_unbounded_size() {
    let src = "
        *(u64 *)(r10 - 8) = 0
        r2 = *(u32 *)(r1 + 12)
        r1 = r10
        r1 += -8
        call 6
        r0 = 2
        exit";
    rejects(src, 4, "R2 unbounded memory access");
}

#[test]
fn trace_printk_size_larger_than_buffer() {
    let src = "
        *(u64 *)(r10 - 8) = 0
        r2 = *(u32 *)(r1 + 12)
        r2 &= 255
        r2 |= 1
        r1 = r10
        r1 += -8
        call 6
        r0 = 2
        exit";
    rejects(src, 6, "invalid indirect access to stack R1 off=-8 size=255");
}

#[test]
fn csum_diff_size_not_multiple_of_four() {
    let src = "
        *(u64 *)(r10 - 8) = 0
        r1 = r10
        r1 += -8
        r2 = 6
        r3 = 0
        r4 = 0
        r5 = 0
        call 28
        exit";
    rejects(src, 7, "must be a multiple of 4");
}

#[test]
fn fib_lookup_short_buffer() {
    let src = "
        *(u64 *)(r10 - 8) = 0
        r2 = r10
        r2 += -8
        r3 = 64
        r4 = 0
        call 69
        exit";
    rejects(src, 5, "invalid indirect access to stack R2 off=-8 size=64");
}

/// bpf_fib_lookup writes its parameter buffer (ARG_PTR_TO_MEM | MEM_WRITE: the kernel's
/// check_stack_range_initialized with BPF_WRITE scrubs the spills there): a constant spilled
/// into it is an unknown number after the call, so its use as a stack offset is refused.
#[test]
fn a_helper_that_writes_its_stack_buffer_leaves_unknown_bytes_there() {
    let src = "
        r6 = r1
        r2 = r10
        r2 += -64
        *(u64 *)(r10 - 64) = 0
        *(u64 *)(r10 - 56) = 0
        *(u64 *)(r10 - 48) = 0
        *(u64 *)(r10 - 40) = 0
        *(u64 *)(r10 - 32) = 0
        *(u64 *)(r10 - 24) = 0
        *(u64 *)(r10 - 16) = 0
        r1 = 8
        *(u64 *)(r10 - 8) = r1
        r1 = r6
        r3 = 64
        r4 = 0
        call 69
        r1 = *(u64 *)(r10 - 8)
        r2 = r10
        r2 += r1
        r0 = *(u8 *)(r2 - 16)
        exit";
    rejects(src, 18, "R2 pointer arithmetic with unbounded register");
}

/// Memory a helper writes must lie inside the 512-byte frame at both ends
/// (check_helper_mem_access → check_stack_range_initialized): bpf_xdp_load_bytes into
/// 16 bytes from fp-8 would write 8 bytes above the frame, from fp-520 below it.
#[test]
fn a_helper_cannot_write_outside_the_stack_frame() {
    for (start, size) in [(-8, 16), (-520, 16)] {
        let src = format!(
            "r6 = r1
            r1 = r6
            r2 = 0
            r3 = r10
            r3 += {start}
            r4 = {size}
            call 189
            r0 = 2
            exit"
        );
        rejects(&src, 6, &format!("invalid indirect access to stack R3 off={start} size={size}"));
    }
}

#[test]
fn adjust_head_without_ctx() {
    rejects("r1 = 0 \n r2 = 0 \n call 44 \n exit", 2, "R1 type=scalar expected=ctx");
}

// ---------------------------------------------------------------- control flow

#[test]
fn infinite_loop() {
    rejects("r0 = 0 \n l: \n goto l", 1, "infinite loop detected");
}

#[test]
fn loop_without_progress() {
    let src = "
        r0 = 0
        r1 = 0
    l:
        r0 += 1
        r0 &= 1
        if r1 < 10 goto l
        exit";
    rejects(src, 2, "infinite loop detected");
}

#[test]
fn unbounded_loop_on_packet_byte() {
    // Counts a packet byte down to zero: each iteration is a new abstract state, so the
    // exploration never closes and hits the complexity limit.
    let src = format!(
        "{PKT}
        r4 = r2
        r4 += 1
        if r4 > r3 goto out
        r5 = *(u8 *)(r2 + 0)
    l:
        r5 += -1
        if r5 != 0 goto l
    out:
        r0 = 2
        exit"
    );
    let p = program(asm(&src), maps());
    let e = verify(&p, &VerifyOptions { max_processed_insns: 20_000, ..Default::default() }).unwrap_err();
    assert!(e.msg.contains("program too complex (processed 20001 insns)"), "{e}");
    assert!(e.insn == 6 || e.insn == 7, "{e}");
}

#[test]
fn loop_bounded_only_by_packet_data() {
    // while (*p != 0) {} with p unchanged: the same state comes back.
    let src = format!(
        "{PKT}
        r4 = r2
        r4 += 1
        if r4 > r3 goto out
        r5 = *(u8 *)(r2 + 0)
    l:
        if r5 != 0 goto l
    out:
        r0 = 2
        exit"
    );
    rejects(&src, 6, "infinite loop detected");
}

#[test]
fn jump_out_of_range() {
    rejects("r0 = 0 \n goto +5 \n exit", 1, "jump out of range from insn 1 to 7");
}

#[test]
fn jump_backwards_out_of_range() {
    rejects("r0 = 0 \n if r0 == 0 goto -3 \n exit", 1, "jump out of range from insn 1 to -1");
}

#[test]
fn jump_into_lddw() {
    rejects("goto +1 \n r1 = 5 ll \n r0 = 0 \n exit", 0, "jump into the middle of ldimm64 insn 1");
}

#[test]
fn fallthrough_off_end() {
    rejects("r0 = 0 \n r0 += 1", 1, "last insn is not an exit or jmp");
}

/// A function whose last slot is the second half of a 16-byte load falls off its end too;
/// the error names the load (its first slot), the last instruction, not its second half.
#[test]
fn a_function_ending_in_a_16_byte_load_is_refused_at_the_load() {
    rejects("r0 = 0 \n r1 = 5 ll", 1, "last insn is not an exit or jmp");
    rejects("call @f \n r0 = 0 \n exit \n f: \n r0 = 1 \n r1 = 5 ll", 4, "last insn is not an exit or jmp");
}

#[test]
fn conditional_jump_as_last_insn() {
    rejects("r0 = 0 \n if r0 == 0 goto -2", 1, "last insn is not an exit or jmp");
}

#[test]
fn unreachable_insn() {
    rejects("r0 = 0 \n exit \n r0 = 1 \n exit", 2, "unreachable insn 2");
}

#[test]
fn empty_program() {
    rejects("", 0, "empty program");
}

#[test]
fn recursion() {
    rejects("call @f \n exit \n f: \n call @f \n exit", 2, "recursive call from insn 2");
}

#[test]
fn mutual_recursion() {
    rejects("call @f \n exit \n f: \n call @g \n exit \n g: \n call @f \n exit", 4, "recursive call from insn 4");
}

/// `entry` (which ends by calling f1), then functions f1 → f2 → … → f8: 9 frames deep.
fn call_chain_of_nine(entry: &str) -> String {
    let mut src = format!("{entry} \n call @f1 \n exit\n");
    for i in 1..8 {
        src += &format!("f{i}: \n call @f{} \n exit\n", i + 1);
    }
    src + "f8: \n r0 = 0 \n exit"
}

#[test]
fn too_deep_calls() {
    rejects(&call_chain_of_nine("r0 = 0"), 15, "the call stack of 9 frames is too deep");
}

/// record_func_map: a BPF_F_RDONLY_PROG map (.rodata) cannot be written through
/// bpf_map_update_elem or bpf_map_delete_elem either (as its values cannot by stores).
#[test]
fn a_read_only_map_takes_no_update_or_delete_from_a_program() {
    let key = "*(u32 *)(r10 - 4) = 0 \n r2 = r10 \n r2 += -4 \n r1 = map[3] ll";
    rejects(&format!("{key} \n r3 = r10 \n r3 += -4 \n r4 = 0 \n call 2 \n r0 = 0 \n exit"), 8, "write into map forbidden");
    rejects(&format!("{key} \n call 3 \n r0 = 0 \n exit"), 5, "write into map forbidden");
    // Looking it up is fine.
    verify(&program(asm(&format!("{key} \n call 1 \n r0 = 0 \n exit")), maps()), &VerifyOptions::default()).expect("lookup");
}

/// check_mem_access over a frozen read-only map (`.rodata` after libbpf's freeze): a load
/// at a constant offset is the constant stored there, so a `const volatile` switch that is
/// off makes its branch dead, and the invalid access behind it is never looked at (the
/// kernel accepts such programs); switched on, or without the map's values, it is refused.
#[test]
fn a_frozen_rodata_value_is_a_constant_that_prunes_dead_branches() {
    let src = "r1 = map_value[3][0] ll
        r2 = *(u32 *)(r1 + 8)
        if r2 == 0 goto out
        r3 = 7
        r0 = *(u32 *)(r3 + 0)
    out:
        r0 = 2
        exit";
    let p = program(asm(src), maps());
    let rodata = |word: u32| {
        let mut v = vec![0u8; 32];
        v[8..12].copy_from_slice(&word.to_le_bytes());
        let mut frozen = vec![None; 5];
        frozen[3] = Some(v);
        frozen
    };
    sluice_ebpf::verifier::verify_with_frozen(&p, &VerifyOptions::default(), &rodata(0)).expect("the branch is dead");
    let e = sluice_ebpf::verifier::verify_with_frozen(&p, &VerifyOptions::default(), &rodata(1)).unwrap_err();
    assert!(e.insn == 5 && e.msg.contains("invalid mem access 'scalar'"), "{e}");
    rejects(src, 5, "invalid mem access 'scalar'");
}

/// A loop bounded by a `.rodata` count is verified as the bounded loop it is; with the
/// count unknown (any u32) it runs past the instruction limit.
#[test]
fn a_loop_bound_read_from_frozen_rodata_is_known() {
    let src = "r1 = map_value[3][0] ll
        r6 = *(u32 *)(r1 + 0)
        r0 = 0
    again:
        r0 += 1
        if r0 < r6 goto again
        r0 = 2
        exit";
    let p = program(asm(src), maps());
    let opts = VerifyOptions { max_processed_insns: 20_000, ..VerifyOptions::default() };
    let mut v = vec![0u8; 32];
    v[0] = 200;
    let mut frozen = vec![None; 5];
    frozen[3] = Some(v);
    let ok = sluice_ebpf::verifier::verify_with_frozen(&p, &opts, &frozen).expect("200 rounds");
    assert!(ok.stats().processed_insns > 200 * 2, "{:?}", ok.stats());
    assert!(verify(&p, &opts).is_err(), "an unknown bound");
}

/// adjust_reg_min_max_vals: pointer minus pointer is an unknown number for a privileged
/// loader, even for two pointers into one stack frame, so `(r10 - 8) - (r10 - 24)` is not
/// known to be 16 and the exit with an uninitialised r0 is walked and refused, as in the
/// kernel (the unprivileged rules keep the distance of two pointers into one object).
#[test]
fn a_pointer_difference_is_an_unknown_number() {
    rejects(
        "r1 = r10
        r1 += -8
        r2 = r10
        r2 += -24
        r1 -= r2
        if r1 == 16 goto ok
        exit
    ok:
        r0 = 2
        exit",
        6,
        "R0 !read_ok",
    );
}

/// `body` sets up the stack, `read` loads r6 from it, and r6 is used as an offset into a
/// 16-byte map value (only 0 and 8 are in bounds for the 8-byte load).
fn read_back_as_offset(body: &str, read: &str) -> String {
    format!(
        "{body}
        {read}
        *(u32 *)(r10 - 12) = 0
        r2 = r10
        r2 += -12
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r0 += r6
        r0 = *(u64 *)(r0 + 8)
    out:
        r0 = 2
        exit"
    )
}

/// check_stack_read_fixed_off: a read is the constant 0 only when all its bytes are zero
/// bytes or all belong to a spilled constant 0. Four zero bytes (stored first, so the spill
/// after them keeps its slot) and a 4-byte spill of 0 read together as unknown, as in the
/// kernel, and the offset is refused; the four zero bytes alone read as 0.
#[test]
fn a_read_over_a_spilled_zero_and_zero_bytes_is_unknown() {
    let body = "*(u32 *)(r10 - 4) = 0 \n r1 = 0 \n *(u32 *)(r10 - 8) = r1";
    rejects(&read_back_as_offset(body, "r6 = *(u64 *)(r10 - 8)"), 11, "pointer arithmetic with unbounded register");
    let ok = read_back_as_offset(body, "r6 = *(u32 *)(r10 - 4)");
    verify(&program(asm(&ok), maps()), &VerifyOptions::default()).expect("four zero bytes read as 0");
}

/// The fall-through (walked first) reaches `join` with r1 = 0 after enough instructions
/// (and two jumps) for its state to be saved there (no prune point on the way: the padding
/// is straight-line code); the other path brings r1 = 8. After `join`, r1 is stored with
/// `store`, read back with `load` into r6 and used as an offset into a 16-byte map value.
fn zero_store_join(store: &str, load: &str) -> String {
    format!(
        "*(u32 *)(r10 - 4) = 0
        call 7
        r1 = 0
        if r0 != 0 goto other
        r3 = 0
        r4 = 1
        r5 = 2
        r6 = 3
        r7 = 4
        r8 = 5
        r3 = 6
        r4 = 7
        goto join
    other:
        r1 = 8
    join:
        {store}
        {load}
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r0 += r6
        r3 = *(u64 *)(r0 + 8)
    out:
        r0 = 2
        exit"
    )
}

/// r1 is stored as four bytes (a 32-bit spill), read back as the constant 0: r1's value
/// matters in the saved state, so the path with r1 = 8 is not pruned as "the same", and is
/// refused.
#[test]
fn a_zero_stored_and_read_back_as_an_offset_keeps_the_path_that_stored_it_precise() {
    let src = zero_store_join("*(u32 *)(r10 - 8) = r1", "r6 = *(u32 *)(r10 - 8)");
    rejects(&src, 23, "invalid access to map value, value_size=16 off=16 size=8");
}

/// As above with a two-byte store off the 8-byte grid, which is no spill (the stack bytes
/// become zeros, not a copy of the register): a zero stored that way and read back as the
/// constant 0 still makes its source precise (the kernel's STACK_ZERO case), so the path
/// storing 8 there is not pruned at `join`, and its unknown offset is refused.
#[test]
fn a_zero_stored_in_two_bytes_keeps_its_source_register_precise() {
    let src = zero_store_join("*(u16 *)(r10 - 6) = r1", "r6 = *(u16 *)(r10 - 6)");
    rejects(&src, 23, "R0 max value is outside of the allowed memory range");
}

#[test]
fn a_helper_argument_is_live_until_the_call_so_a_bad_one_is_not_pruned() {
    // The fall-through (walked first, straight-line padding: its state is saved at `join`)
    // brings a key pointer in r2; the branch target brings r2 = 0. map_lookup_elem reads
    // two arguments, so r2 is live at `join`: the states differ and the second is refused.
    rejects(
        "*(u32 *)(r10 - 4) = 0
        call 7
        r2 = r10
        r2 += -4
        if r0 != 0 goto bad
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        r3 = 6
        r4 = 7
        goto join
    bad:
        r2 = 0
    join:
        r1 = map[1] ll
        call 1
        r0 = 2
        exit",
        17,
        "R2 type=scalar",
    );
}

#[test]
fn too_deep_calls_are_refused_even_behind_a_branch_never_taken() {
    // The call depth is a property of the call graph (the kernel's check_max_stack_depth
    // walks every call instruction), not of the paths the state walk explores: a chain
    // of 9 frames behind a branch a known constant never takes is refused as well.
    rejects(&call_chain_of_nine("r0 = 0 \n if r0 == 0 goto +1"), 16, "the call stack of 9 frames is too deep");
}

#[test]
fn call_into_lddw() {
    rejects("callrel 2 \n exit \n r1 = 1 ll \n exit", 0, "jump into the middle of ldimm64 insn 2");
}

#[test]
fn jump_across_functions() {
    rejects("call @f \n goto g \n f: \n r0 = 0 \n g: \n exit", 1, "into another function");
}

#[test]
fn callee_returns_its_stack_pointer() {
    rejects("call @f \n r0 = 2 \n exit \n f: \n r0 = r10 \n r0 += -8 \n exit", 5, "cannot return stack pointer to the caller");
}

#[test]
fn callee_stack_pointer_spilled_into_caller() {
    let src = "
        r1 = r10
        r1 += -8
        call @f
        r0 = 2
        exit
    f:
        r2 = r10
        r2 += -8
        *(u64 *)(r1 + 0) = r2
        r0 = 0
        exit";
    rejects(src, 7, "cannot spill a pointer to a callee's stack frame");
}

// ---------------------------------------------------------------- encodings

#[test]
fn unknown_opcode() {
    rejects("r0 = 0 \n raw 0xff 0 0 0 0 \n exit", 1, "unknown opcode 0xff");
}

#[test]
fn reserved_field_in_alu() {
    rejects("raw 0x07 1 2 0 5 \n r0 = 0 \n exit", 0, "uses reserved fields");
}

#[test]
fn reserved_field_in_exit() {
    rejects("r0 = 0 \n raw 0x95 0 0 0 1", 1, "BPF_EXIT uses reserved fields");
}

#[test]
fn lddw_truncated() {
    rejects("r0 = 0 \n exit \n raw 0x18 1 0 0 0", 2, "truncated");
}

#[test]
fn lddw_malformed_second_slot() {
    rejects("raw 0x18 0 0 0 0 \n raw 0x07 0 0 0 1 \n exit", 0, "malformed second slot");
}

/// A call instruction with any one reserved field set is refused (check_subprogs /
/// do_check: BPF_CALL with dst_reg or off non-zero, or the BPF_X bit).
#[test]
fn a_call_with_any_one_reserved_field_set_is_refused() {
    // The X bit; dst; off.
    for call in ["raw 0x8d 0 0 0 7", "raw 0x85 1 0 0 7", "raw 0x85 0 0 1 7"] {
        rejects(&format!("{call} \n r0 = 2 \n exit"), 0, "uses reserved fields");
    }
}

/// Each reserved field of BPF_LD_IMM64's second slot alone makes it malformed (the
/// kernel's check_ld_imm: code, dst_reg, src_reg and off must all be 0): dst, src, off.
#[test]
fn lddw_second_slot_with_any_one_reserved_field_set() {
    for slot in ["raw 0 1 0 0 5", "raw 0 0 1 0 5", "raw 0 0 0 1 5"] {
        rejects(&format!("raw 0x18 0 0 0 0 \n {slot} \n exit"), 0, "malformed second slot");
    }
}

/// One load instruction reached with the context on two paths and a packet pointer on a
/// third: refused (the engines rewrite context loads, so one instruction cannot serve
/// both), however many times the context came first. r8 differs and is used as a stack
/// offset after the load, so no path is pruned at it.
#[test]
fn a_load_reached_twice_with_ctx_then_with_a_packet_pointer_is_refused() {
    rejects(
        "
        r6 = r1
        call 7
        r1 = r6
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r4 = r2
        r4 += 8
        if r4 > r3 goto out
        r7 = r0
        if r7 == 1 goto use_pkt
        if r7 == 2 goto ctx2
        r5 = r6
        r8 = 1
        goto load
    ctx2:
        r5 = r6
        r8 = 2
        goto load
    use_pkt:
        r5 = r2
        r8 = 3
    load:
        r0 = *(u32 *)(r5 + 0)
        r1 = r10
        r1 += r8
        *(u8 *)(r1 - 8) = 0
    out:
        r0 = 2
        exit",
        19,
        "same insn cannot be used with ctx and other pointer types",
    );
}

#[test]
fn ld_abs_refused() {
    rejects("raw 0x20 0 0 0 0 \n exit", 0, "BPF_LD_[ABS|IND]");
}

#[test]
fn shift_out_of_range() {
    rejects("r0 = 1 \n w0 <<= 32 \n exit", 1, "invalid shift 32");
}

/// The runtime masks a shift amount to the width (`w1 <<= w2` with w2 = 32 shifts by 0):
/// an amount that may reach the width leaves any masked amount possible (the kernel makes
/// the result unknown), not the value shifted by 32, whose low half would be 0. So w1 stays
/// unknown, and the side where it is not 0 is walked and refused.
#[test]
fn a_32_bit_shift_by_a_register_holding_32_is_masked_not_a_zero_result() {
    rejects(
        "r1 = *(u32 *)(r1 + 16)
        w2 = 32
        w1 <<= w2
        if r1 != 0 goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u64 *)(r10 + 8)
        exit",
        6,
        "invalid read from stack R10 off=8 size=8",
    );
}

#[test]
fn constant_division_by_zero() {
    rejects("r0 = 1 \n r0 /= 0 \n exit", 1, "div by zero");
}

#[test]
fn too_many_insns() {
    let p = program(asm("r0 = 0 \n r0 = 0 \n r0 = 0 \n exit"), vec![]);
    let e = verify(&p, &VerifyOptions { max_insns: 3, ..Default::default() }).unwrap_err();
    assert_eq!(e.insn, 3);
    assert!(e.msg.contains("program too large"), "{e}");
    // Exactly the limit is allowed (the kernel refuses len > BPF_COMPLEXITY_LIMIT_INSNS).
    verify(&p, &VerifyOptions { max_insns: 4, ..Default::default() }).expect("4 insns with a limit of 4");
}

// ---------------------------------------------------------------- pruning soundness

/// r9 is 4 on the first explored path and 100 on the second; the join point must not
/// prune the second path once r9's bounds decided a pointer offset. The first path's
/// padding (a jump and six instructions) makes `join` a checkpoint (a state is saved only
/// after 2 jumps and 8 instructions since the last one): without it nothing was pruned
/// there and these tests passed on a verifier that ignored precision
/// (`the_prune_prologue_join_is_a_checkpoint` pins that).
const PRUNE_PROLOGUE: &str = "
    r6 = r1
    call 5
    r7 = r0
    *(u32 *)(r10 - 4) = 0
    r2 = r10
    r2 += -4
    r1 = map[1] ll
    call 1
    if r0 == 0 goto out
    r8 = r0
    if r7 > 100 goto big
    r9 = 4
    r3 = 0
    r4 = 1
    r5 = 2
    goto pad
pad:
    r3 = 3
    r4 = 4
    r5 = 5
    goto join
big:
    r9 = 100
join:
";

/// The tests below are only meaningful if the second path reaches `join` when a state is
/// saved there: with r9 dead after the join, it is pruned.
#[test]
fn the_prune_prologue_join_is_a_checkpoint() {
    let p = program(asm(&format!("{PRUNE_PROLOGUE} r0 = 2 \n exit \n out: \n r0 = 2 \n exit")), maps());
    let v = verify(&p, &VerifyOptions::default()).expect("accepted");
    assert_eq!(v.stats().states_pruned, 1, "{:?}", v.stats());
}

/// Nullable map values are equal at a join only with consistent ids (regsafe: the same
/// map, offset and range, and the id mapping holds): on the first path r8 and r9 are one
/// lookup (null-checking r8 checks r9), on the second r9 is another lookup; pruning the
/// second path at `join` would let it read through a possibly null r9.
#[test]
fn nullable_map_values_of_other_lookups_are_not_pruned_as_one() {
    rejects(
        "r6 = r1
        call 5
        r7 = r0
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        r8 = r0
        r9 = r0
        if r7 > 100 goto big
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        goto pad
    pad:
        r3 = 3
        goto join
    big:
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        r9 = r0
    join:
        if r8 == 0 goto out
        r0 = *(u8 *)(r9 + 0)
    out:
        r0 = 2
        exit",
        27,
        "invalid mem access 'map_value_or_null'",
    );
}

#[test]
fn precision_prevents_unsound_pruning() {
    let src = format!("{PRUNE_PROLOGUE} r8 += r9 \n r0 = *(u8 *)(r8 + 0) \n out: \n r0 = 2 \n exit");
    rejects(&src, 23, "invalid access to map value, value_size=16 off=100 size=1");
}

#[test]
fn precision_follows_spills_and_calls() {
    let src = format!(
        "{PRUNE_PROLOGUE}
        *(u64 *)(r10 - 16) = r9
        call @f
        r9 = *(u64 *)(r10 - 16)
        r8 += r9
        r0 = *(u8 *)(r8 + 0)
    out:
        r0 = 2
        exit
    f:
        r0 = 0
        exit"
    );
    rejects(&src, 26, "invalid access to map value, value_size=16 off=100 size=1");
}

#[test]
fn precision_follows_arguments_into_callee() {
    let src = format!(
        "{PRUNE_PROLOGUE}
        r1 = r8
        r2 = r9
        call @f
    out:
        r0 = 2
        exit
    f:
        r1 += r2
        r0 = *(u8 *)(r1 + 0)
        exit"
    );
    rejects(&src, 28, "invalid access to map value, value_size=16 off=100 size=1");
}

/// A scalar ALU step with a register source (`r1 += r9`) makes the source as needed as
/// the result (mutant sample 7: only NEG or only END kept the source).
#[test]
fn precision_follows_a_register_operand_of_scalar_alu() {
    let src = format!(
        "{PRUNE_PROLOGUE}
        r1 = 0
        r1 += r9
        r8 += r1
        r0 = *(u8 *)(r8 + 0)
    out:
        r0 = 2
        exit"
    );
    rejects(&src, 25, "invalid access to map value, value_size=16 off=100 size=1");
}

#[test]
fn precision_of_branch_decisions() {
    // The second path only reaches the bad access because r9 decides the inner branch.
    let src = format!(
        "{PRUNE_PROLOGUE}
        if r9 < 50 goto out
        r0 = *(u8 *)(r8 + 99)
    out:
        r0 = 2
        exit"
    );
    rejects(&src, 23, "invalid access to map value, value_size=16 off=99 size=1");
}

#[test]
fn narrow_spill_truncates_the_value() {
    // Only the low byte is spilled: the fill is 0..255, too far for a 16-byte value.
    let src = format!(
        "{LOOKUP}
        if r0 == 0 goto out
        r1 = *(u32 *)(r6 + 12)
        r1 &= 0x1ff
        *(u8 *)(r10 - 16) = r1
        r2 = *(u8 *)(r10 - 16)
        if r2 > 15 goto out
        r0 += r1
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
    );
    rejects(&src, 14, "invalid access to map value, value_size=16 off=511 size=1");
}

#[test]
fn load_bytes_into_readonly_global() {
    let src = "
        r6 = r1
        r3 = map_value[3][0] ll
        r1 = r6
        r2 = 0
        r4 = 8
        call 189
        exit";
    rejects(src, 6, "R3 points to a read-only map value");
}

#[test]
fn percpu_lookup_on_plain_array() {
    let src = "
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        r3 = 0
        call 195
        r0 = 2
        exit";
    rejects(src, 6, "cannot pass map_type 2 (map 'array') into func bpf_map_lookup_percpu_elem#195");
}

#[test]
fn write_only_map_value_read() {
    let mut m = maps();
    m[1].flags = 1 << 8; // BPF_F_WRONLY_PROG
    let src = format!("{LOOKUP} if r0 == 0 goto +1 \n r1 = *(u8 *)(r0 + 0) \n r0 = 2 \n exit");
    rejects_with(&src, m, VerifyOptions::default(), 8, "read from write-only map value");
}

#[test]
fn unknown_helper_id() {
    rejects("r0 = 0 \n call 1000 \n exit", 1, "invalid func unknown#1000");
}

#[test]
fn ctx_egress_ifindex_outside_devmap_programs() {
    rejects("r0 = *(u32 *)(r1 + 20) \n exit", 0, "invalid bpf_context access off=20 size=4");
    let mut p = program(asm("r0 = *(u32 *)(r1 + 20) \n exit"), maps());
    p.section = "xdp/devmap".to_string();
    verify(&p, &VerifyOptions::default()).expect("devmap programs may read egress_ifindex");
}

#[test]
fn variable_offset_stack_write() {
    let src = "
        r3 = *(u32 *)(r1 + 12)
        r3 &= 7
        r2 = r10
        r2 += r3
        *(u8 *)(r2 - 16) = 1
        r0 = 2
        exit";
    rejects(src, 4, "invalid variable-offset write to stack R2");
}

#[test]
fn pointer_plus_i64_min() {
    // The offset must be range-checked without overflowing (i64::MIN has no absolute value).
    rejects(
        "r1 = 0x8000000000000000 ll \n r2 = r10 \n r2 += r1 \n *(u64 *)(r2 + 0) = 0 \n r0 = 0 \n exit",
        3,
        "math between fp pointer and -9223372036854775808 is not allowed",
    );
    rejects("r1 = 0x8000000000000000 ll \n r2 = r10 \n r2 -= r1 \n r0 = 0 \n exit", 3, "is not allowed");
}

/// check_reg_sane_offset: a constant added to a pointer, and the pointer's own fixed offset,
/// must each be strictly within ±2^29 (BPF_MAX_VAR_OFF), checked before the operation;
/// the sum itself is left to the access that uses it.
#[test]
fn pointer_constants_must_be_within_two_to_the_29() {
    rejects("r2 = r10 \n r2 += 536870912 \n r0 = 0 \n exit", 1, "math between fp pointer and 536870912 is not allowed");
    rejects("r2 = r10 \n r2 += -536870912 \n r0 = 0 \n exit", 1, "math between fp pointer and -536870912 is not allowed");
    // 2^29 - 1 twice: the first sum is fine, the next add sees an offset past the bound.
    rejects(
        "r2 = r10 \n r2 += 536870911 \n r2 += 536870911 \n r2 += 1 \n r0 = 0 \n exit",
        3,
        "fp pointer offset 1073741822 is not allowed",
    );
    let ok = "r2 = r10 \n r2 += 536870911 \n r2 += -536870911 \n *(u64 *)(r2 - 8) = 0 \n r0 = 0 \n exit";
    verify(&program(asm(ok), vec![]), &VerifyOptions::default()).expect("back within the frame");
}

/// A variable offset must stay within ±2^29 on both sides (the kernel's check of the
/// pointer's signed bounds after adding a scalar): a map value pointer plus a scalar of
/// [-2^30, -2^30 + 65535] is refused at the addition, before any access.
#[test]
fn a_variable_offset_below_minus_two_to_the_29_is_refused() {
    rejects(
        &format!(
            "call 7
        r6 = r0
        r6 &= 0xffff
        r6 += -1073741824
        {ARRAY1_VALUE}
        r0 += r6
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
        ),
        11,
        "map_value variable offset [-1073741824, -1073676289] exceeds 2^29",
    );
}

/// An atomic on a map value must be aligned to its size (check_ptr_alignment for atomics is
/// strict on every pointer): the pointer's own offset and the instruction's both count, so
/// a value pointer moved by 4 with an instruction offset of 0, or one at 0 with an
/// instruction offset of 4, is misaligned for 8 bytes; 4 + 4 is aligned.
#[test]
fn an_atomic_on_a_map_value_counts_both_offsets_for_alignment() {
    for (moved, off, ok) in [(4, 0, false), (0, 4, false), (4, 4, true)] {
        let src = format!(
            "{ARRAY1_VALUE}
        r0 += {moved}
        r1 = 1
        atomic u64 r0 + {off} add r1
    out:
        r0 = 2
        exit"
        );
        let res = verify(&program(asm(&src), maps()), &VerifyOptions::default());
        match (ok, res) {
            (true, Ok(_)) => {}
            (false, Err(e)) => assert!(
                e.insn == 9 && e.msg.contains(&format!("misaligned atomic access to map value off={} size=8", moved + off)),
                "{moved}+{off}: {e}"
            ),
            (ok, res) => panic!("{moved}+{off}: expected ok={ok}, got {:?}", res.map(|v| v.stats().clone())),
        }
    }
}

// ---------------------------------------------------------------- ring buffer records

/// `maps()` plus a 4 KiB ring buffer (5) and a program array (6).
fn rb_maps() -> Vec<MapDef> {
    let mut m = maps();
    m.push(map("ring", map_type::RINGBUF, 0, 0, 4096));
    m.push(map("jmp", map_type::PROG_ARRAY, 4, 4, 2));
    m
}

/// A packet pointer is stale after bpf_tail_call (the kernel since 6.13: the tail-called
/// program may change packet data, and a tail call from a subprogram returns to its
/// caller): a privileged loader gets an unknown scalar, never dereferenced.
#[test]
fn a_tail_call_invalidates_packet_pointers() {
    let src = "r6 = r1
        r7 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r4 = r7
        r4 += 14
        if r4 > r3 goto out
        r1 = r6
        r2 = map[6] ll
        r3 = 0
        call 12
        r0 = *(u8 *)(r7 + 12)
        exit
    out:
        r0 = 2
        exit";
    rb_rejects(src, 11, "R7 invalid mem access 'scalar': packet pointer invalidated");
}

/// A successful tail call in a subprogram returns the target's r0, any scalar, to the
/// subprogram's caller (the kernel's x86-64 JIT since 5.10; its verifier explores that return
/// too): what the subprogram would have returned after the call proves nothing.
#[test]
fn a_tail_call_in_a_subprogram_returns_any_r0_to_its_caller() {
    let src = "r6 = r1
        r1 = 0
        *(u32 *)(r10 - 4) = r1
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 != 0 goto found
        exit
    found:
        r7 = r0
        r1 = r6
        call @sub
        r7 += r0
        r0 = *(u8 *)(r7 + 0)
        exit
    sub:
        r2 = map[6] ll
        r3 = 0
        call 12
        r0 = 0
        exit";
    rb_rejects(src, 13, "R7 pointer arithmetic with unbounded register prohibited");
}

/// A subprogram may tail-call only when its callers' frames use less than 256 bytes of stack
/// (each rounded up to 16, as the kernel's check_max_stack_depth_subprog does for a JIT,
/// checked against Linux 6.18): the target runs while they stay. The entry function's own
/// tail calls have no such limit.
#[test]
fn a_tail_call_in_a_subprogram_needs_less_than_256_bytes_of_stack_below_it() {
    let src = |depth: u32| {
        format!(
            "r2 = 0
            *(u32 *)(r10 - {depth}) = r2
            call @sub
            exit
        sub:
            r2 = map[6] ll
            r3 = 0
            call 12
            r0 = 0
            exit"
        )
    };
    rb_rejects(&src(244), 7, "tail_calls are not allowed when call stack of previous frames is 256 bytes. Too large");
    verify(&program(asm(&src(240)), rb_maps()), &VerifyOptions::default()).expect("240 bytes below it");
    // Two callers of 128 bytes each.
    let two = "r2 = 0
            *(u64 *)(r10 - 128) = r2
            call @f1
            exit
        f1:
            r2 = 0
            *(u64 *)(r10 - 128) = r2
            call @f2
            exit
        f2:
            r2 = map[6] ll
            r3 = 0
            call 12
            r0 = 0
            exit";
    rb_rejects(two, 11, "call stack of previous frames is 256 bytes");
    let entry = "r2 = 0
            *(u64 *)(r10 - 512) = r2
            r2 = map[6] ll
            r3 = 0
            call 12
            r0 = 0
            exit";
    verify(&program(asm(entry), rb_maps()), &VerifyOptions::default()).expect("a tail call from the entry function");
}

#[track_caller]
fn rb_rejects(src: &str, insn: usize, frag: &str) {
    rejects_with(src, rb_maps(), VerifyOptions::default(), insn, frag);
}

/// Reserves an 8-byte record into r0 (insns 0-5: lddw takes two slots); r6 = ctx.
const RESERVE8: &str = "
    r6 = r1
    r1 = map[5] ll
    r2 = 8
    r3 = 0
    call 131
";

#[test]
fn ringbuf_record_must_be_released_on_every_path() {
    let src =
        format!("{RESERVE8} if r0 == 0 goto +4 \n r7 = *(u32 *)(r6 + 0) \n if r7 == 0 goto +2 \n r1 = r0 \n r2 = 0 \n r0 = 2 \n exit");
    rb_rejects(&src, 12, "Unreleased reference id=");
}

#[test]
fn ringbuf_record_needs_a_null_check() {
    rb_rejects(&format!("{RESERVE8} *(u32 *)(r0 + 0) = 1 \n r0 = 2 \n exit"), 6, "invalid mem access 'ringbuf_mem_or_null'");
    let submit_unchecked = format!("{RESERVE8} r1 = r0 \n r2 = 0 \n call 132 \n r0 = 2 \n exit");
    rb_rejects(&submit_unchecked, 8, "type=ringbuf_mem_or_null expected=ringbuf_mem");
}

#[test]
fn ringbuf_record_bounds() {
    let src = format!("{RESERVE8} if r0 == 0 goto +5 \n *(u32 *)(r0 + 6) = 1 \n r1 = r0 \n r2 = 0 \n call 132 \n r0 = 2 \n exit");
    rb_rejects(&src, 7, "mem_size=8 off=6 size=4");
}

/// A record's bytes start at its pointer: 4 bytes before it (the ring's header) are out of
/// bounds however small the access (the kernel's check_mem_region_access: off < 0).
#[test]
fn ringbuf_record_bytes_before_the_record_are_refused() {
    let src = format!("{RESERVE8} if r0 == 0 goto +5 \n *(u32 *)(r0 - 4) = 1 \n r1 = r0 \n r2 = 0 \n call 132 \n r0 = 2 \n exit");
    rb_rejects(&src, 7, "min offset -4 is negative");
}

#[test]
fn ringbuf_release_needs_the_record_start() {
    let src = format!("{RESERVE8} if r0 == 0 goto +5 \n r1 = r0 \n r1 += 4 \n r2 = 0 \n call 133 \n r0 = 2 \n exit");
    rb_rejects(&src, 10, "must have zero offset when passed to release func");
}

#[test]
fn ringbuf_record_unusable_after_submit() {
    // r7 is a copy of the record: submitting through r1 invalidates it too.
    let double = format!(
        "{RESERVE8} if r0 == 0 goto +8 \n r7 = r0 \n r1 = r0 \n r2 = 0 \n call 132 \n r1 = r7 \n r2 = 0 \n call 133 \n r0 = 2 \n exit"
    );
    rb_rejects(&double, 13, "R1 type=scalar expected=ringbuf_mem");
    let write_after =
        format!("{RESERVE8} if r0 == 0 goto +5 \n r7 = r0 \n r1 = r0 \n r2 = 0 \n call 132 \n *(u32 *)(r7 + 0) = 1 \n r0 = 2 \n exit");
    rb_rejects(&write_after, 11, "R7 invalid mem access 'scalar'");
}

#[test]
fn ringbuf_reserve_size_must_be_constant() {
    let src = "r6 = r1 \n r2 = *(u32 *)(r6 + 0) \n r1 = map[5] ll \n r3 = 0 \n call 131 \n r0 = 2 \n exit";
    rb_rejects(src, 5, "R2 is not a known constant (size for bpf_ringbuf_reserve)");
}

#[test]
fn ringbuf_release_of_other_memory() {
    rb_rejects("*(u64 *)(r10 - 8) = 0 \n r1 = r10 \n r1 += -8 \n r2 = 0 \n call 132 \n r0 = 2 \n exit", 4, "type=fp expected=ringbuf_mem");
}

#[test]
fn ringbuf_tail_call_with_a_record_held() {
    let src = format!("{RESERVE8} if r0 == 0 goto +9 \n r7 = r0 \n r1 = r6 \n r2 = map[6] ll \n r3 = 0 \n call 12 \n r1 = r7 \n r2 = 0 \n call 132 \n r0 = 2 \n exit");
    rb_rejects(&src, 12, "tail_call would lead to reference leak");
}

#[test]
fn ringbuf_pointer_stored_into_record_unprivileged() {
    let src = format!("{RESERVE8} if r0 == 0 goto +4 \n *(u64 *)(r0 + 0) = r6 \n r1 = r0 \n r2 = 0 \n call 132 \n r0 = 2 \n exit");
    rejects_with(&src, rb_maps(), VerifyOptions::unprivileged(), 7, "leaks addr into ringbuf memory (unprivileged rule)");
    assert!(verify(&program(asm(&src), rb_maps()), &VerifyOptions::default()).is_ok());
}

#[test]
fn ringbuf_reserve_submit_accepted() {
    // Reserve, write through a copy, move the pointer and back, submit on one branch and
    // discard on the other, with the record spilled to the stack and reloaded in between.
    let src = format!(
        "{RESERVE8} if r0 == 0 goto +14 \n r7 = r0 \n *(u64 *)(r10 - 8) = r0 \n r7 += 4 \n *(u32 *)(r7 + 0) = 5 \n r8 = *(u32 *)(r6 + 0) \n
         r1 = *(u64 *)(r10 - 8) \n if r8 == 0 goto +3 \n r2 = 0 \n call 132 \n goto +2 \n r2 = 0 \n call 133 \n r0 = 2 \n exit \n r0 = 1 \n exit"
    );
    let p = program(asm(&src), rb_maps());
    verify(&p, &VerifyOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    verify(&p, &VerifyOptions::unprivileged()).unwrap_or_else(|e| panic!("{e}"));
}

/// Maps of maps: [0] ARRAY_OF_MAPS whose inner template is an ARRAY of 16-byte values,
/// [1] HASH_OF_MAPS (same template).
fn map_in_map_maps() -> Vec<MapDef> {
    let template = Box::new(map("inner", map_type::ARRAY, 4, 16, 4));
    let mut outer = map("outer", map_type::ARRAY_OF_MAPS, 4, 4, 4);
    outer.inner = Some(template.clone());
    let mut houter = map("houter", map_type::HASH_OF_MAPS, 4, 4, 8);
    houter.inner = Some(template);
    vec![outer, houter]
}

/// Key 0 on the stack, r0 = lookup in map 0 (the outer array). Insns 0-6 (lddw is two).
const OUTER_LOOKUP: &str = "
    r2 = r10
    r2 += -8
    *(u32 *)(r2 + 0) = 0
    r1 = map[0] ll
    call 1
";

#[test]
fn inner_map_must_be_null_checked_before_use() {
    // The lookup result goes to bpf_map_lookup_elem as a map without a null check.
    let src = format!("{OUTER_LOOKUP} r1 = r0\n r2 = r10\n r2 += -8\n call 1\n r0 = 2\n exit");
    rejects_with(&src, map_in_map_maps(), VerifyOptions::default(), 9, "type=map_value_or_null expected=map_ptr");
    // Nor is it memory.
    let src = format!("{OUTER_LOOKUP} if r0 == 0 goto out\n r0 = *(u64 *)(r0 + 0)\n out:\n r0 = 2\n exit");
    rejects_with(&src, map_in_map_maps(), VerifyOptions::default(), 7, "invalid mem access 'map_ptr'");
}

#[test]
fn inner_map_values_are_bounded_by_the_template() {
    // The inner map's values are 16 bytes (the template's): offset 16 is past the end.
    let src = format!(
        "{OUTER_LOOKUP}
        if r0 == 0 goto out
        r1 = r0
        r2 = r10
        r2 += -8
        call 1
        if r0 == 0 goto out
        r0 = *(u64 *)(r0 + 16)
      out:
        r0 = 2
        exit"
    );
    rejects_with(&src, map_in_map_maps(), VerifyOptions::default(), 12, "value_size=16 off=16");
}

#[test]
fn programs_cannot_update_maps_of_maps() {
    let src = "
        r2 = r10
        r2 += -8
        *(u32 *)(r2 + 0) = 0
        r3 = r10
        r3 += -16
        *(u64 *)(r3 + 0) = 0
        r1 = map[1] ll
        r4 = 0
        call 2
        r0 = 2
        exit";
    rejects_with(src, map_in_map_maps(), VerifyOptions::default(), 9, "cannot pass map_type 13");
}

/// A sign-extending load (BPF_MEMSX) of a byte gives -128..127, not 0..255 (the kernel's
/// `coerce_reg_to_size_sx`): the negative side of a sign test is reachable and checked.
#[test]
fn sign_extending_byte_load_can_be_negative() {
    let src = format!(
        "{PKT}
        r4 = r2
        r4 += 1
        if r4 > r3 goto out
        r5 = *(s8 *)(r2 + 0)
        if r5 s>= 0 goto out
        r0 = r9
        exit
    out:
        r0 = 2
        exit"
    );
    rejects(&src, 7, "R9 !read_ok");
}

/// BPF_NEG has no source: a source register or an offset is a reserved field (the
/// kernel's check_alu_op refuses `src_reg != BPF_REG_0 || off != 0` for BPF_NEG).
#[test]
fn neg_with_a_source_register_or_an_offset_is_refused() {
    rejects("r0 = 0 \n raw 0x87 0 1 0 0 \n exit", 1, "BPF_NEG uses reserved fields");
    rejects("r0 = 0 \n raw 0x87 0 0 1 0 \n exit", 1, "BPF_NEG uses reserved fields");
    rejects("r0 = 0 \n raw 0x84 0 2 0 0 \n exit", 1, "BPF_NEG uses reserved fields");
}

/// Sign-extending loads exist for 1, 2 and 4 bytes only: BPF_LDX | BPF_MEMSX | BPF_DW (0x99)
/// is not an instruction (the kernel's bpf_opcode_in_insntable has no INSN_3(LDX, MEMSX, DW):
/// "unknown opcode 99").
#[test]
fn a_sign_extending_8_byte_load_is_not_an_instruction() {
    rejects("r0 = 0 \n raw 0x99 0 10 -8 0 \n exit", 1, "unknown opcode 0x99");
    // The three real sizes decode.
    for code in [0x91, 0x89, 0x81] {
        let src = format!("*(u64 *)(r10 - 8) = 0 \n raw {code:#x} 0 10 -8 0 \n exit");
        verify(&program(asm(&src), maps()), &VerifyOptions::default()).expect("a sign-extending load of 1, 2 or 4 bytes");
    }
}

/// A signed 32-bit comparison reads the low word as a signed number: w1 = -1 is
/// 0xffffffff, which `if w1 s< 0` takes (refine32 projects the operands with sext(32) for
/// signed comparisons, trunc(32) for unsigned ones). The taken side is walked and refused.
#[test]
fn a_signed_32_bit_comparison_sees_the_low_word_as_negative() {
    rejects("w1 = -1 \n if w1 s< 0 goto bad \n r0 = 2 \n exit \n bad: \n r0 = r9 \n exit", 4, "R9 !read_ok");
    rejects("w1 = -1 \n if w1 s> 0 goto ok \n r0 = r9 \n exit \n ok: \n r0 = 2 \n exit", 2, "R9 !read_ok");
}

/// An atomic without BPF_FETCH leaves its source register as it was: precision of that
/// register after the atomic is precision before it (the kernel's backtrack_insn only
/// clears the source of fetching atomics). r9 (4 or 100) is added to memory, then used as a
/// map value offset: the join must not prune the r9 = 100 path. (The fall-through's padding
/// is straight-line code, so its state is saved at `join`: 2 jumps and 8 insns.)
#[test]
fn precision_passes_a_non_fetching_atomic_back_to_its_source() {
    let src = "
        r6 = r1
        call 5
        r7 = r0
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r8 = r0
        if r7 > 100 goto big
        r9 = 4
        r3 = 0
        r4 = 0
        r5 = 0
        r3 = 0
        r4 = 0
        goto join
    big:
        r9 = 100
    join:
        *(u64 *)(r10 - 16) = 0
        atomic u64 r10 - 16 add r9
        r8 += r9
        r0 = *(u8 *)(r8 + 0)
    out:
        r0 = 2
        exit";
    rejects(src, 23, "invalid access to map value, value_size=16 off=100 size=1");
}

/// Pruning against a saved state makes the pruned path rely on that state's precise
/// scalars, spilled ones included: they are marked precise in the pruned path's own saved
/// states (the kernel's propagate_precision walks the stack slots too). Here the path
/// through `mid` (X = 4 spilled) is pruned at `join` against the first path's state, whose
/// spilled X decided a map value offset; `mid`'s saved state must then keep X precise, so the
/// third path (X = 100) is not pruned at `mid` and is refused.
#[test]
fn pruning_propagates_precise_spilled_scalars_to_the_pruned_path() {
    let src = "
        r6 = r1
        call 5
        r7 = r0
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r8 = r0
        if r7 > 100 goto third
        r9 = 4
        *(u64 *)(r10 - 16) = r9
        if r7 > 50 goto second
        r3 = 0
        r4 = 0
        r5 = 0
        r3 = 0
        goto join
    second:
        r3 = 0
        r4 = 0
        r5 = 0
        goto mid
    mid:
        goto join
    third:
        r9 = 100
        *(u64 *)(r10 - 16) = r9
        goto mid
    join:
        r9 = *(u64 *)(r10 - 16)
        r8 += r9
        r0 = *(u8 *)(r8 + 0)
    out:
        r0 = 2
        exit";
    rejects(src, 30, "invalid access to map value, value_size=16 off=100 size=1");
}

/// A callee's return value that decides a pointer offset in the caller is precise inside
/// the callee too (the kernel's backtrack_insn on BPF_EXIT: r0 of the caller's return point
/// is the callee's r0): r0 is 4 on the first path through `f` and 100 on the second, so
/// `join` in `f` must not prune the second path once `r8 += r0` relied on r0 = 4.
#[test]
fn precision_of_a_returned_r0_follows_it_into_the_callee() {
    rejects(
        "r6 = r1
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r8 = r0
        call @f
        r8 += r0
        r0 = *(u8 *)(r8 + 0)
    out:
        r0 = 2
        exit
    f:
        call 5
        r7 = r0
        if r7 > 100 goto big
        r0 = 4
        goto pad
    pad:
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    big:
        r0 = 100
    join:
        exit",
        11,
        "invalid access to map value, value_size=16 off=100 size=1",
    );
}

/// Subtracting a constant from a pointer moves its fixed offset down by exactly that
/// constant (adjust_ptr_min_max_vals, BPF_SUB: `off = ptr.off - val`): r10 - 512, then 8
/// below that, is fp-520, out of the stack.
#[test]
fn pointer_minus_constant_below_the_stack() {
    rejects("r2 = r10 \n r2 -= 512 \n *(u64 *)(r2 - 8) = 0 \n r0 = 0 \n exit", 2, "invalid write to stack R2 off=-520 size=8");
}

/// Kernel regsafe: a ctx pointer (default case, regs_exact) covers another only with the
/// same offset and the same variable part. The first path reaches `join` with r9 = ctx, the
/// second with r9 = ctx + 8; pruning the second against the first would let it load through
/// a modified ctx pointer (check_ptr_off_reg: "dereference of modified ctx ptr").
#[test]
fn ctx_pointers_with_other_offsets_are_not_pruned_as_one() {
    rejects(
        "r6 = r1
        call 5
        r7 = r0
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r8 = r0
        if r7 > 100 goto big
        r9 = r6
        r3 = 0
        r4 = 1
        r5 = 2
        goto pad
    pad:
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    big:
        r9 = r6
        r9 += 8
        r3 = 3
        r4 = 4
        r5 = 5
    join:
        r0 = *(u32 *)(r9 + 0)
    out:
        r0 = 2
        exit",
        26,
        "dereference of modified ctx ptr R9 off=8 disallowed",
    );
}

/// Static liveness (the kernel's helper call reads R1..R(nargs), as in check_helper_call /
/// compute_live_registers): R2, the key of bpf_map_lookup_elem, is live at `join` though
/// only the call reads it. The first path reaches `join` with a stack key in R2, the second
/// with the scalar 0; had R2 been dead there, the second path would be pruned and its call
/// accepted.
#[test]
fn helper_arguments_are_live_before_the_call() {
    rejects(
        "r6 = r1
        call 5
        r7 = r0
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r8 = r0
        if r7 > 100 goto big
        r2 = r10
        r2 += -4
        r4 = 1
        r5 = 2
        goto pad
    pad:
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    big:
        r2 = 0
        r3 = 3
        r4 = 4
        r5 = 5
    join:
        r1 = map[1] ll
        call 1
    out:
        r0 = 2
        exit",
        27,
        "R2 type=scalar expected=",
    );
}

/// A kfunc call (BPF_CALL with src_reg BPF_PSEUDO_KFUNC_CALL) is refused as such, not as
/// a reserved-field error: sluice has no kernel BTF, like a kernel without kfunc support
/// (check_kfunc_call refuses it before the program runs).
#[test]
fn kfunc_calls_are_refused_by_name() {
    rejects("raw 0x85 0 2 0 1 \n r0 = 0 \n exit", 0, "kfunc calls are not supported");
}

/// Comparing two packet pointers learns nothing about the packet's length (only a
/// comparison against data_end does, find_good_pkt_pointers): reading 8 bytes at data after
/// `data + 8 <= data` is still out of range.
#[test]
fn comparing_two_packet_pointers_grants_no_range() {
    let src = "
        r2 = *(u32 *)(r1 + 0)
        r4 = r2
        r4 += 8
        if r4 > r2 goto out
        r0 = *(u64 *)(r2 + 0)
        exit
    out:
        r0 = 2
        exit";
    rejects(src, 4, "invalid access to packet");
}

/// BPF_EXIT exists only in the BPF_JMP class: the same opcode in BPF_JMP32 (0x96) is not an
/// instruction (the kernel's check_cond_jmp_op / "unknown opcode").
#[test]
fn exit_in_the_jmp32_class_is_not_an_instruction() {
    let e = verify(&program(asm("r0 = 2 \n raw 0x96 0 0 0 0"), vec![]), &VerifyOptions::default()).unwrap_err();
    assert_eq!(e.insn, 1, "{e}");
}

/// The 512-byte limit holds over every call chain, not the first callee's only: main calls
/// a small function, then a deep one (the kernel's check_max_stack_depth walks every callee).
#[test]
fn the_stack_limit_counts_the_deepest_callee_not_the_first() {
    let src = "
        *(u64 *)(r10 - 296) = 0
        call @small
        call @deep
        exit
    small:
        *(u64 *)(r10 - 8) = 0
        r0 = 0
        exit
    deep:
        *(u64 *)(r10 - 312) = 0
        r0 = 0
        exit";
    rejects(src, 2, "combined stack size of 2 calls is 608 bytes");
}

/// A fetching atomic writes the old value to its source register (cmpxchg to r0): with r10
/// as the source that is a write to the frame pointer, refused as the kernel refuses it.
#[test]
fn a_fetching_atomic_cannot_write_the_frame_pointer() {
    for op in ["xchg", "fetch_add", "fetch_or"] {
        let src = format!(
            "
            *(u64 *)(r10 - 8) = 0
            atomic u64 r10 - 8 {op} r10
            r0 = 0
            exit"
        );
        rejects(&src, 1, "frame pointer is read only");
    }
}

/// Atomics on a ringbuf record must be aligned to their size (as every atomic access): an
/// aligned one is accepted, a misaligned one refused at the atomic.
#[test]
fn atomics_on_a_ringbuf_record_are_accepted_when_aligned() {
    for (size, off) in [("u64", 0), ("u32", 4), ("u64", 8)] {
        let src = format!(
            "{RESERVE8}
            if r0 == 0 goto out
            r1 = 1
            atomic {size} r0 + {off} add r1
            r1 = r0
            r2 = 0
            call 132
        out:
            r0 = 2
            exit"
        );
        let p = program(asm(&src), rb_maps());
        match (off, verify(&p, &VerifyOptions::default())) {
            (8, Err(e)) => assert!(e.insn == 8 && e.msg.contains("invalid access to memory"), "{e}"),
            (8, Ok(_)) => panic!("an atomic past the 8-byte record accepted"),
            (_, r) => {
                r.unwrap_or_else(|e| panic!("{size} at +{off}: {e}"));
            }
        }
    }
    let src = format!(
        "{RESERVE8} if r0 == 0 goto out \n r1 = 1 \n atomic u32 r0 + 2 add r1 \n r1 = r0 \n r2 = 0 \n call 132 \n out: \n r0 = 2 \n exit"
    );
    rb_rejects(&src, 8, "misaligned atomic access to ringbuf memory off=2 size=4");
}

/// Unprivileged, the difference of two pointers into one ringbuf record keeps their
/// variable parts: the record plus r8 (0..7) minus the record is 0..7, not 0, so the record
/// plus that difference reaches past the 8-byte record with a 4-byte write at offset 4.
/// (A privileged loader gets an unknown scalar, as in the kernel.)
#[test]
fn the_difference_of_two_record_pointers_keeps_their_variable_offsets() {
    let src = format!(
        "r9 = r1
        call 7
        r8 = r0
        r8 &= 7
        r1 = r9
        {RESERVE8}
        if r0 == 0 goto out
        r7 = r0
        r1 = r7
        r1 += r8
        r1 -= r7
        r2 = r7
        r2 += r1
        *(u32 *)(r2 + 4) = 0
        r1 = r7
        r2 = 0
        call 132
    out:
        r0 = 2
        exit"
    );
    rejects_with(&src, rb_maps(), VerifyOptions::unprivileged(), 18, "invalid access to memory, mem_size=8");
}

/// cmpxchg reads r0 (the value compared): r0 is live before it even when its result is not
/// used, so a path reaching the join with r0 unset is not pruned against one that set it,
/// and is refused at the cmpxchg as the kernel refuses it (R0 !read_ok).
#[test]
fn cmpxchg_reads_r0_so_r0_is_live_before_it() {
    let src = "
        r2 = *(u32 *)(r1 + 12)
        if r2 == 0 goto join
        r0 = 0
        r3 = 0
        r3 = 1
        r3 = 2
        r3 = 3
        r3 = 4
        r3 = 5
        r3 = 6
        r3 = 7
        goto join
    join:
        *(u64 *)(r10 - 8) = 0
        r3 = 0
        atomic u64 r10 - 8 cmpxchg r3
        r0 = 0
        exit";
    rejects(src, 14, "R0 !read_ok");
}

#[test]
fn an_unprivileged_atomic_cannot_store_a_pointer() {
    // check_atomic: a pointer as the operand (or as cmpxchg's expected value in r0) would
    // leak an address into the map value.
    let add = "
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r1 = r10
        atomic u64 r0 + 8 add r1
    out:
        r0 = 2
        exit";
    rejects_unprivileged(add, 8, "R1 leaks addr into memory");
    let cmpxchg = "
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r3 = r0
        r0 = r10
        r1 = 1
        atomic u64 r3 + 8 cmpxchg r1
    out:
        r0 = 2
        exit";
    rejects_unprivileged(cmpxchg, 10, "R0 leaks addr into memory");
}

#[test]
fn a_callee_state_keeps_the_callers_registers_live_after_the_return_point() {
    // r6 is set just before the call (so it is not live there) and read after the return:
    // a callee state saved on one path must not prune the other, whose r6 differs. The
    // caller's part of a callee state is compared by what is live at the return point.
    let src = "
        call 7
        r3 = 1000
        if r0 > 5 goto set
        r3 = 0
    set:
        r6 = r3
        call @f
        if r6 == 0 goto ok
        r0 = *(u8 *)(r10 + 8)
    ok:
        r0 = 2
        exit
    f:
        call 7
        r2 = 1
        r2 += 1
        r2 += 1
        r2 += 1
        r2 += 1
        r2 += 1
        r2 += 1
        if r0 == 5 goto m
        r2 = 1
    m:
        if r0 == 6 goto l
        r2 = 1
    l:
        r0 = 0
        exit";
    rejects(src, 7, "invalid read from stack R10 off=8");
}

#[test]
fn precision_passes_through_an_atomic_that_does_not_write_the_tracked_register() {
    // r0 carries r6 past a fetch_add whose fetched value lands in r1, not r0, then decides a
    // map value offset: backtracking must go on through the atomic to `r0 = r6`, so r6 is
    // precise in the state saved at `join` and the path bringing r6 = 8 is not pruned.
    let src = r6_zero_or_eight_at_join(
        "r0 = r6
        *(u64 *)(r10 - 16) = 0
        r1 = 1
        atomic u64 r10 - 16 fetch_add r1
        r7 = r0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r0 += r7
        r3 = *(u64 *)(r0 + 8)
    out:
        r0 = 2
        exit",
    );
    rejects(&src, 26, "invalid access to map value, value_size=16 off=16 size=8");
}

#[test]
fn an_unsigned_quotient_can_be_as_small_as_the_least_dividend_over_the_largest_divisor() {
    // r1 in [10, 25], r2 in [2, 5]: r1 / r2 in [2, 12]. The path with a quotient below 3 is
    // reachable (10 / 5) and its out-of-frame read is refused.
    let src = "
        call 7
        r6 = r0
        call 7
        r1 = r6
        r1 &= 15
        r1 += 10
        r2 = r0
        r2 &= 3
        r2 += 2
        r1 /= r2
        if r1 < 3 goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u8 *)(r10 + 8)
        exit";
    rejects(src, 13, "invalid read from stack R10 off=8");
}

#[test]
fn a_context_pointer_at_another_offset_is_not_the_same_state() {
    // The fall-through (walked first, straight-line padding: its state is saved at `join`)
    // brings the context pointer itself; the branch brings it moved by 4, which may not be
    // dereferenced: the states differ at `join` and the second path is refused.
    rejects(
        "r6 = r1
        call 7
        if r0 != 0 goto other
        r3 = 0
        r4 = 1
        r5 = 2
        r7 = 3
        r8 = 4
        r9 = 5
        r3 = 6
        r4 = 7
        goto join
    other:
        r6 += 4
    join:
        r0 = *(u32 *)(r6 + 0)
        r0 = 2
        exit",
        13,
        "dereference of modified ctx ptr",
    );
}

#[test]
fn a_scalar_plus_a_pointer_makes_the_scalar_precise() {
    // `r6 += r0` with r6 a number and r0 a map value pointer: r6's value becomes the
    // pointer's offset, so it is precise back to `join`, and the path bringing r6 = 8 (an
    // access 8 bytes past the 16-byte value) is not pruned against the one bringing 0.
    let src = r6_zero_or_eight_at_join(
        "r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r6 += r0
        r3 = *(u64 *)(r6 + 8)
    out:
        r0 = 2
        exit",
    );
    rejects(&src, 21, "invalid access to map value, value_size=16 off=16 size=8");
}

#[test]
fn precision_passes_through_an_add_to_its_destination() {
    // `r6 += r7` keeps r6's old value in the result: when the sum becomes a map value
    // offset, r6 is precise back to `join` (and r7 too), so the path bringing r6 = 8 is not
    // pruned against the one bringing 0.
    let src = r6_zero_or_eight_at_join(
        "r7 = 0
        r6 += r7
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r0 += r6
        r3 = *(u64 *)(r0 + 8)
    out:
        r0 = 2
        exit",
    );
    rejects(&src, 23, "invalid access to map value, value_size=16 off=16 size=8");
}

/// Key 0 at fp-4, then two paths to `join`: the fall-through (walked first; straight-line
/// padding so its state is saved at `join`, no prune point on the way) with r6 = 0, the
/// branch target with r6 = 8; `rest` follows `join` (its first instruction is insn 14).
fn r6_zero_or_eight_at_join(rest: &str) -> String {
    format!(
        "*(u32 *)(r10 - 4) = 0
        call 7
        r6 = 0
        if r0 != 0 goto other
        r3 = 0
        r4 = 1
        r5 = 2
        r7 = 3
        r8 = 4
        r9 = 5
        r3 = 6
        r4 = 7
        goto join
    other:
        r6 = 8
    join:
        {rest}"
    )
}

#[test]
fn of_two_equally_deep_call_chains_the_first_is_reported() {
    // main calls a1 then b1, each the head of a chain of 8 functions: 9 frames either way.
    // The error names the call that makes the 9th frame on the first chain (a7 calling
    // a8), as the kernel's walk of the call graph meets it first.
    let mut src = String::from("call @a1\n call @b1\n r0 = 0\n exit\n");
    for chain in ["a", "b"] {
        for i in 1..8 {
            src += &format!("{chain}{i}:\n call @{chain}{}\n exit\n", i + 1);
        }
        src += &format!("{chain}8:\n r0 = 0\n exit\n");
    }
    // a7's call is insn 4 + 6 * 2.
    rejects(&src, 16, "the call stack of 9 frames is too deep");
}

#[test]
fn a_32_bit_copy_of_a_wider_value_is_not_linked_to_it() {
    // r6 has 64 unknown bits; w7 = w6 keeps only its low half: r7 == 0 says nothing about
    // r6, so r6 stays unknown as a map value offset and the access is refused.
    rejects(
        "*(u32 *)(r10 - 4) = 0
        call 7
        r6 = r0
        r6 <<= 32
        call 7
        r6 |= r0
        w7 = w6
        if r7 != 0 goto out
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r0 += r6
        r3 = *(u64 *)(r0 + 0)
    out:
        r0 = 2
        exit",
        14,
        "pointer arithmetic with unbounded register prohibited",
    );
}

/// A byte of an unknown 32-bit value spilled to the stack is not that value: the fill is
/// a new number, not linked to the source (only a spill that keeps every bit of its
/// source is), so learning the byte is 0 says nothing of r6, and `r10 + r6` is stack
/// arithmetic with a 32-bit unknown, refused.
#[test]
fn a_narrow_spill_of_a_wider_value_is_not_linked_to_it() {
    rejects(
        "call 7
        r6 = r0
        *(u8 *)(r10 - 8) = r6
        r7 = *(u8 *)(r10 - 8)
        if r7 != 0 goto out
        r1 = r10
        r1 += r6
        *(u8 *)(r1 - 8) = 0
    out:
        r0 = 2
        exit",
        6,
        "fp variable offset [0, 4294967295]",
    );
}

/// A signed remainder can be negative (-9 s% 4 = -1): BPF_MOD with off 1 is not the
/// unsigned modulo, whose result would be below the divisor; `value + (x s% 4)` is refused
/// (its range is unknown).
#[test]
fn a_signed_remainder_of_a_negative_number_is_not_below_the_divisor() {
    rejects(
        &format!(
            "call 7
        r8 = r0
        r8 &= 7
        r8 -= 9
        r9 = 4
        r8 s%= r9
        {ARRAY1_VALUE}
        r0 += r8
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
        ),
        13,
        "map_value variable offset",
    );
}

/// The path walked first when a call and a branch came just before it: straight-line moves
/// and two more jumps, so that the verifier saves its state at the `join` that follows
/// (is_state_visited's heuristic: 2 jumps and 8 instructions since the last saved state).
/// Clobbers r3-r5.
const PAD_TO_JOIN: &str = "
        r3 = 0
        r4 = 1
        goto pad
    pad:
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        r3 = 6
        r4 = 7
        goto join";

/// Straight-line padding and a second jump on the path walked first, so that the verifier
/// saves its state at the `join` label that follows (is_state_visited's heuristic: enough
/// instructions and jumps since the last saved state). Clobbers r1 and r5.
const SAVE_AT_JOIN: &str = "
        r5 = 1
        r5 = 2
        r5 = 3
        r5 = 4
        r5 = 5
        goto pad
    pad:
        r5 = 6
        r1 = 1
        r1 = 2
        r1 = 3
        r1 = 4
        goto join";

/// A saved state's packet pointer with 8 bytes checked does not cover the same pointer
/// with 2 checked (regsafe: the current range must be at least the old one). The
/// fall-through checks 8 bytes and is walked first (its padding and second jump make the
/// verifier save its state at `join`); the other path, with the same registers but 2 bytes
/// checked, is not pruned there, and its 8-byte read is refused.
#[test]
fn a_packet_pointer_with_a_shorter_checked_range_is_not_pruned() {
    rejects(
        &format!(
            "r6 = r1
        call 7
        r2 = *(u32 *)(r6 + 0)
        r3 = *(u32 *)(r6 + 4)
        if r0 != 0 goto other
        r4 = r2
        r4 += 8
        if r4 > r3 goto out
        r4 = 0
        {SAVE_AT_JOIN}
    other:
        r4 = r2
        r4 += 2
        if r4 > r3 goto out
        r4 = 0
        r5 = 6
        r1 = 4
    join:
        r0 = *(u64 *)(r2 + 0)
    out:
        r0 = 2
        exit"
        ),
        27,
        "invalid access to packet, off=0 size=8, R2 range=2",
    );
}

/// Precision crosses a subprogram call backwards in the caller's frame: r6, used as a map
/// value offset after `call @f`, must be precise at the join before the call, so the path
/// with r6 = 100 is not pruned against the one with r6 = 0, and its access is refused.
#[test]
fn precision_of_a_callers_register_crosses_a_subprogram_call() {
    rejects(
        &format!(
            "call 7
        r6 = 0
        if r0 != 0 goto other
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    other:
        r6 = 100
    join:
        call @f
        {ARRAY1_VALUE}
        r0 += r6
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit
    f:
        r0 = 0
        exit"
        ),
        20,
        "off=100",
    );
}

/// The call reported for a chain over 512 stack bytes is the one that passes 512, not one
/// that reaches it exactly: main 256 + f 256 is 512 (allowed), f's call of g (8 more)
/// is the one over.
#[test]
fn the_call_reported_over_the_stack_limit_is_the_one_past_512_not_at_it() {
    rejects(
        "*(u64 *)(r10 - 256) = 0
        call @f
        r0 = 2
        exit
    f:
        *(u64 *)(r10 - 256) = 0
        call @g
        r0 = 0
        exit
    g:
        *(u64 *)(r10 - 8) = 0
        r0 = 0
        exit",
        5,
        "combined stack size of 3 calls is 520 bytes",
    );
}

/// A comparison's refinement through a register copy does not carry over to a path where
/// the "copy" is another number: on the first path r7 is a copy of r6, so `if r7 > 4`
/// bounds r6 too and the offset is fine. The state saved at `join` (before the comparison)
/// has r6 precise for the offset and r7 precise only because it is linked to r6 at the
/// comparison (the kernel's linked-register precision, `bt_sync_linked_regs`): the second
/// path's r7 is unrelated to its unbounded r6, so it is not pruned there and is refused.
/// An imprecise r7 would cover it (regsafe ignores an imprecise scalar's value and id).
#[test]
fn a_refinement_through_a_copy_does_not_prune_a_path_whose_copy_is_another_number() {
    rejects(
        &format!(
            "call 7
        r6 = r0
        call 7
        if r0 != 0 goto other
        r7 = r6
        r5 = 1
        r5 = 2
        r5 = 3
        r5 = 4
        goto join
    other:
        r7 = r0
        r5 = 4
    join:
        if r7 > 4 goto out
        {ARRAY1_VALUE}
        r0 += r6
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
        ),
        20,
        "map_value variable offset",
    );
}

/// A pruned path passes back what the state that pruned it relied on (the kernel's
/// `propagate_precision`), for the registers compared there. Three paths: the first saves
/// its state at `join` with r6 (0..3) precise for the map value offset; the second saves
/// its state at `mid` with the same r6, not yet precise, and is pruned at `join`, which
/// makes its r6 precise at `mid` too; the third reaches `mid` with r6 unbounded and must not
/// be pruned there: its offset is refused.
#[test]
fn a_pruned_path_marks_what_the_pruning_state_relied_on_precise_in_its_own_states() {
    rejects(&three_paths_to_mid(), 28, "map_value variable offset [1, 4294967295]");
}

/// The three paths of the test above (28 instructions before the refused load).
fn three_paths_to_mid() -> String {
    format!(
        "call 7
        r6 = r0
        r6 &= 3
        call 7
        if r0 == 0 goto second
        r5 = 1
        r5 = 2
        r5 = 3
        r5 = 4
        goto join
    second:
        call 7
        if r0 != 0 goto third
        r5 = 1
        r5 = 2
        r5 = 3
        r5 = 4
        goto mid
    third:
        r6 = r0
    mid:
        r5 = 3
        r5 = 4
        goto join
    join:
        {ARRAY1_VALUE}
        r0 += r6
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
    )
}

// ---------------------------------------------------------------- refusals of single rules

/// A pointer's bits may not be sign-extended by a move, negated or byte-swapped: each
/// would make a pointer of unknown value (or leak its bits).
#[test]
fn pointers_are_not_sign_extended_negated_or_byte_swapped() {
    rejects("r2 = (s8)r1 \n r0 = 2 \n exit", 0, "R1 sign-extending move of a pointer prohibited");
    rejects("r1 = -r1 \n r0 = 2 \n exit", 0, "R1 pointer arithmetic prohibited: negation of ctx");
    rejects("r1 = be16 r1 \n r0 = 2 \n exit", 0, "R1 pointer arithmetic prohibited: byte swap of ctx");
}

/// A scalar minus a pointer is no pointer (only scalar + pointer is).
#[test]
fn a_scalar_minus_a_pointer_is_refused() {
    rejects("r2 = 1 \n r2 -= r1 \n r0 = 2 \n exit", 1, "R2 pointer arithmetic prohibited: scalar -= ctx");
}

/// The context's fields sit at fixed offsets: a variable offset into it is refused at the
/// addition.
#[test]
fn a_variable_offset_into_the_context_is_refused() {
    rejects("r6 = r1 \n call 7 \n r6 += r0 \n r0 = 2 \n exit", 2, "R6 variable ctx pointer arithmetic prohibited");
}

/// The context is read with zero extension only, and never by an atomic.
#[test]
fn the_context_refuses_sign_extending_loads_and_atomics() {
    rejects("r2 = *(s32 *)(r1 + 0) \n r0 = 2 \n exit", 0, "sign-extending load from ctx prohibited");
    rejects("r2 = 1 \n atomic u32 r1 + 0 add r2 \n r0 = 2 \n exit", 1, "BPF_ATOMIC stores into R1 ctx is not allowed");
}

/// A map value index that may be negative is refused with the kernel's advice, even when
/// its largest value is in range (here -8..7 into a 16-byte value).
#[test]
fn a_map_value_index_that_may_be_negative_is_refused() {
    rejects(
        &format!(
            "{ARRAY1_VALUE} \n r1 = *(u8 *)(r0 + 0) \n r1 &= 15 \n r1 += -8 \n r0 += r1 \n r2 = *(u8 *)(r0 + 0) \n out: \n r0 = 2 \n exit"
        ),
        11,
        "R0 min value is negative, either use unsigned index",
    );
}

/// A read-only map value (.rodata, BPF_F_RDONLY_PROG) takes no atomic.
#[test]
fn an_atomic_on_a_read_only_map_value_is_refused() {
    rejects(
        "*(u32 *)(r10 - 4) = 0 \n r2 = r10 \n r2 += -4 \n r1 = map[3] ll \n call 1 \n if r0 == 0 goto out \n r1 = 1 \n atomic u64 r0 + 0 add r1 \n out: \n r0 = 2 \n exit",
        8,
        "R0 atomic on a read-only or write-only map value (map '.rodata')",
    );
}

/// An atomic on a stack slot holding a spilled pointer would add to the pointer's bits.
#[test]
fn an_atomic_on_a_spilled_pointer_is_refused() {
    rejects(
        "*(u64 *)(r10 - 8) = r1 \n r2 = 1 \n atomic u64 r10 - 8 add r2 \n r0 = 2 \n exit",
        2,
        "atomic on a spilled ctx at stack off=-8",
    );
}

/// A 32-bit comparison of pointers: refused under the unprivileged rules; privileged, it is
/// allowed but teaches nothing (no packet range from JMP32, as the kernel), so the read
/// after it is still unchecked.
#[test]
fn a_32_bit_pointer_comparison_teaches_no_packet_range() {
    rejects_unprivileged(&format!("{PKT} if w2 > w3 goto out \n out: \n r0 = 2 \n exit"), 2, "R2 32-bit pointer comparison prohibited");
    rejects(
        &format!("{PKT} r4 = r2 \n r4 += 8 \n if w4 > w3 goto out \n r0 = *(u64 *)(r2 + 0) \n out: \n r0 = 2 \n exit"),
        5,
        "invalid access to packet, off=0 size=8, R2 range=0",
    );
}

/// Only `==` and `!=` against 0 null-check a lookup's result; `r0 > 0` teaches nothing
/// (privileged: allowed), so the pointer on either side may still be NULL.
#[test]
fn an_ordering_comparison_with_zero_is_no_null_check() {
    rejects(
        "*(u32 *)(r10 - 4) = 0 \n r2 = r10 \n r2 += -4 \n r1 = map[1] ll \n call 1 \n if r0 > 0 goto deref \n r0 = 2 \n exit \n deref: \n r1 = *(u64 *)(r0 + 0) \n r0 = 2 \n exit",
        9,
        "invalid mem access 'map_value_or_null'",
    );
}

/// At most 8 frames: a chain of 8 nested subprogram calls (9 frames) is refused at the call
/// that would open the ninth.
#[test]
fn nine_nested_frames_are_too_deep() {
    let mut src = String::from("call @f1 \n r0 = 2 \n exit\n");
    for k in 1..=8 {
        if k < 8 {
            src += &format!("f{k}: \n call @f{} \n r0 = 0 \n exit\n", k + 1);
        } else {
            src += &format!("f{k}: \n r0 = 0 \n exit\n");
        }
    }
    // f7's call (insn 3 * 7) opens the ninth frame.
    rejects(&src, 21, "the call stack of 9 frames is too deep (max 8)");
}

/// Helper memory arguments: a NULL buffer with a size that may be non-zero; a packet
/// pointer where the helper writes; a lookup result not yet null-checked; a size that is a
/// pointer, may be negative or is zero; bpf_fib_lookup's parameter block under 64 bytes.
#[test]
fn helper_memory_arguments_are_checked() {
    rejects(
        "r1 = 0 \n r2 = 4 \n r3 = 0 \n r4 = 0 \n r5 = 0 \n call 28 \n exit",
        5,
        "R1 is NULL but the size in R2 may be non-zero (bpf_csum_diff)",
    );
    rejects(
        &format!("{PKT} r4 = r2 \n r4 += 8 \n if r4 > r3 goto out \n r3 = r2 \n r2 = 0 \n r4 = 4 \n call 189 \n out: \n r0 = 2 \n exit"),
        8,
        "R3 type=pkt expected=fp or map_value (the helper writes it)",
    );
    rejects(
        "*(u32 *)(r10 - 4) = 0 \n r2 = r10 \n r2 += -4 \n r1 = map[1] ll \n call 1 \n r2 = r0 \n r1 = map[1] ll \n call 1 \n r0 = 2 \n exit",
        9,
        "R2 type=map_value_or_null expected=fp, pkt, map_value or ringbuf_mem (null-check it first)",
    );
    rejects(
        "*(u64 *)(r10 - 8) = 0 \n r1 = r10 \n r1 += -8 \n r2 = r10 \n call 6 \n exit",
        4,
        "R2 type=fp expected=scalar (size for bpf_trace_printk)",
    );
    rejects(
        "*(u64 *)(r10 - 8) = 0 \n call 7 \n r2 = r0 \n r2 &= 7 \n r2 += -1 \n r1 = r10 \n r1 += -8 \n call 6 \n exit",
        7,
        "R2 min value is negative",
    );
    rejects("*(u64 *)(r10 - 8) = 0 \n r1 = r10 \n r1 += -8 \n r2 = 0 \n call 6 \n exit", 4, "R2 invalid zero-sized read");
    rejects("r2 = r10 \n r2 += -64 \n r3 = 32 \n r4 = 0 \n call 69 \n exit", 4, "R3 size for bpf_fib_lookup must be a constant >= 64");
}

/// A helper's stack buffer must lie inside the frame.
#[test]
fn a_helper_buffer_past_the_frame_is_refused() {
    rejects(
        "r2 = r10 \n r2 += -516 \n r1 = map[1] ll \n call 1 \n r0 = 2 \n exit",
        4,
        "invalid indirect access to stack R2 off=-516 size=4",
    );
}

/// A write-only map value (BPF_F_WRONLY_PROG) is not read by a helper either.
#[test]
fn a_helper_does_not_read_a_write_only_map_value() {
    let mut wo = map("wo", map_type::ARRAY, 4, 16, 1);
    wo.flags = 1 << 8;
    rejects_with(
        "*(u32 *)(r10 - 4) = 0 \n r2 = r10 \n r2 += -4 \n r1 = map[0] ll \n call 1 \n if r0 == 0 goto out \n r2 = r0 \n r1 = map[0] ll \n call 1 \n out: \n r0 = 2 \n exit",
        vec![wo],
        VerifyOptions::default(),
        10,
        "R2 points to a write-only map value (map 'wo') the helper reads",
    );
}

/// A null check against a register rests on that register being 0: the state saved at
/// `join` with r1 = 0 (the path walked first, whose check works) has r1 precise, so the
/// path with r1 = 1, where `r6 == r1` teaches nothing, is not pruned there, and its
/// dereference of a possibly-NULL value is refused.
#[test]
fn a_null_check_against_a_register_rests_on_its_zero() {
    rejects(
        &format!(
            "*(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        r6 = r0
        call 7
        if r0 != 0 goto other
        r1 = 0
        {PAD_TO_JOIN}
    other:
        r1 = 1
    join:
        if r6 == r1 goto out
        r2 = *(u64 *)(r6 + 0)
    out:
        r0 = 2
        exit"
        ),
        22,
        "invalid mem access 'map_value_or_null'",
    );
}

/// Two registers holding one lookup's result (one id) are null-checked together; two
/// lookups' results are not. The path walked first copies one result into r6 and r7 and
/// saves its state at `join`; the other path holds two lookups there, so its state is not
/// covered (regsafe maps the first path's id to one id only), and checking r6 leaves its r7
/// unchecked: refused.
#[test]
fn one_lookup_in_two_registers_does_not_cover_two_lookups() {
    rejects(
        &format!(
            "*(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        r6 = r0
        r7 = r0
        call 7
        if r0 != 0 goto other
        {PAD_TO_JOIN}
    other:
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        r7 = r0
    join:
        if r6 == 0 goto out
        r1 = *(u64 *)(r7 + 0)
    out:
        r0 = 2
        exit"
        ),
        27,
        "R7 invalid mem access 'map_value_or_null'",
    );
}

/// A saved map value pointer covers only the same fixed offset: the path walked first has
/// r6 at the value's start (an 8-byte read at +8 fits the 16-byte value), the other path at
/// +12, where the same read runs past the end. Not pruned at `join`: refused.
#[test]
fn a_map_value_pointer_at_another_offset_is_not_pruned() {
    rejects(
        &format!(
            "{ARRAY1_VALUE}
        r6 = r0
        call 7
        if r0 != 0 goto other
        {PAD_TO_JOIN}
    other:
        r6 += 12
    join:
        r1 = *(u64 *)(r6 + 8)
    out:
        r0 = 2
        exit"
        ),
        21,
        "invalid access to map value, value_size=16 off=20 size=8",
    );
}

/// Reserved fields of BPF_NEG, BPF_END, the other ALU operations, LD_IMM64, LDX, ST, STX,
/// JA (both classes), CALL and the conditional jumps, one at a time (the kernel's
/// "reserved fields" refusals; EXIT's and CALL's other fields have tests above), and
/// encodings no class defines: each refused at decode, before any state exists.
#[test]
fn each_reserved_field_and_undefined_encoding_is_refused() {
    let cases: &[(&str, &str)] = &[
        ("raw 0x87 1 0 0 1", "BPF_NEG uses reserved fields"),
        ("raw 0x8f 1 0 0 0", "BPF_NEG uses reserved fields"),
        ("raw 0xd4 1 2 0 16", "BPF_END uses reserved fields"),
        ("raw 0xd4 1 0 1 16", "BPF_END uses reserved fields"),
        ("raw 0xd4 1 0 0 8", "BPF_END uses reserved fields"),
        ("raw 0xdf 1 0 0 16", "BPF_END uses reserved fields"),
        ("raw 0x07 1 0 1 5", "BPF_ALU uses reserved fields"),
        ("raw 0x37 1 0 2 5", "BPF_ALU uses reserved fields"),
        ("raw 0xb7 1 0 8 5", "BPF_ALU uses reserved fields"),
        ("raw 0xbc 1 2 32 0", "BPF_ALU uses reserved fields"),
        ("raw 0x0f 1 2 0 5", "BPF_ALU uses reserved fields"),
        ("raw 0x18 1 0 1 0 \n raw 0 0 0 0 0", "BPF_LD_IMM64 uses reserved fields"),
        ("raw 0x18 1 1 0 1 \n raw 0 0 0 0 1", "map reference with non-zero upper half"),
        ("raw 0x18 1 2 0 1 \n raw 0 0 0 0 0", "map 'array' does not support direct value access"),
        ("raw 0x18 1 2 0 4 \n raw 0 0 0 0 64", "direct value offset of 64 is not allowed (value_size=64)"),
        ("raw 0x18 1 7 0 0 \n raw 0 0 0 0 0", "unsupported BPF_LD_IMM64 pseudo source 7"),
        ("raw 0x61 0 1 0 1", "BPF_LDX uses reserved fields"),
        ("raw 0x99 0 1 0 0", "unknown opcode"),
        ("raw 0x62 10 1 -4 0", "BPF_ST uses reserved fields"),
        ("raw 0x22 10 0 -4 0", "unknown opcode"),
        ("raw 0x63 10 1 -4 1", "BPF_STX uses reserved fields"),
        ("raw 0x0d 0 0 0 0", "BPF_JA uses reserved fields"),
        ("raw 0x05 1 0 0 0", "BPF_JA uses reserved fields"),
        ("raw 0x05 0 1 0 0", "BPF_JA uses reserved fields"),
        ("raw 0x05 0 0 0 1", "BPF_JA uses reserved fields"),
        ("raw 0x06 0 0 1 0", "BPF_JA uses reserved fields"),
        ("raw 0x85 0 3 0 1", "BPF_CALL uses reserved fields"),
        ("raw 0x1d 1 2 0 1", "BPF_JMP uses reserved fields"),
        ("raw 0x15 1 2 0 0", "BPF_JMP uses reserved fields"),
    ];
    for (insn, frag) in cases {
        rejects(&format!("{insn} \n r0 = 0 \n exit"), 0, frag);
    }
}

/// A state holding a reference (a ring buffer record not yet submitted) is not covered by
/// one that holds none, whatever the registers say (the kernel's refsafe): the path walked
/// first saves its state at `join` with no record; the other reaches `join` holding a
/// record it dropped the only pointer to, is not pruned there, and its exit is refused.
#[test]
fn a_state_holding_a_reference_is_not_pruned_by_one_without() {
    rb_rejects(
        &format!(
            "r6 = r1
        call 7
        if r0 != 0 goto other
        {PAD_TO_JOIN}
    other:
        r1 = map[5] ll
        r2 = 8
        r3 = 0
        call 131
        if r0 == 0 goto join
        r0 = 0
    join:
        r0 = 2
        exit"
        ),
        21,
        "Unreleased reference id=",
    );
}

/// A subprogram's state reached from one call site does not cover the same state reached
/// from another: it returns elsewhere. `f` is walked first from the call on the fall-through
/// path (its states saved inside it), then from the other path's call, which must not be
/// pruned there: after that call comes a load through a scalar, refused.
#[test]
fn a_subprogram_state_from_another_call_site_is_not_pruned() {
    rejects(
        "call 7
        if r0 != 0 goto other
        call @f
        r0 = 2
        exit
    other:
        call @f
        r1 = 0
        r0 = *(u8 *)(r1 + 0)
        exit
    f:
        r3 = 0
        r4 = 1
        goto pad
    pad:
        r5 = 2
        r3 = 3
        r4 = 4
        goto pad2
    pad2:
        r5 = 5
        r3 = 6
        r0 = 0
        exit",
        7,
        "R1 invalid mem access 'scalar'",
    );
}

/// Two registers linked by one id in the saved state (copies of one value) are not covered
/// by two unlinked registers (id 0 each), even with the same bounds: regsafe gives each
/// unlinked register its own label. On the path walked first r7 is a copy of r6, so
/// `if r6 > 4` bounds r7 too; on the other, r6 and r7 are independent numbers and r7's
/// offset is refused.
#[test]
fn linked_registers_are_not_covered_by_two_unlinked_ones() {
    rejects(
        &format!(
            "call 7
        r6 = r0
        r7 = r6
        call 7
        if r0 != 0 goto other
        {PAD_TWICE_TO_JOIN}
    other:
        call 7
        r6 = r0
        r6 &= 0xffffffff
        call 7
        r7 = r0
        r7 &= 0xffffffff
    join:
        if r6 > 4 goto out
        {ARRAY1_VALUE}
        r0 += r7
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
        ),
        32,
        "map_value variable offset",
    );
}

/// A bounds check gives its range only to the packet pointers sharing the checked one's id
/// (its variable offset): r6 and r7 are data plus two different packet bytes; checking
/// r6 + 8 lets r6 be read, not r7.
#[test]
fn a_bounds_check_covers_only_pointers_with_the_same_variable_offset() {
    rejects(
        &format!(
            "{PKT} r0 = r2 \n r0 += 2 \n if r0 > r3 goto out
        r4 = *(u8 *)(r2 + 0)
        r5 = *(u8 *)(r2 + 1)
        r6 = r2
        r6 += r4
        r7 = r2
        r7 += r5
        r8 = r6
        r8 += 8
        if r8 > r3 goto out
        r0 = *(u64 *)(r6 + 0)
        r0 = *(u64 *)(r7 + 0)
    out:
        r0 = 2
        exit"
        ),
        15,
        "invalid access to packet, off=0 size=8, R7 range=0",
    );
}

/// A spilled copy is linked too: on the path walked first the slot at -16 holds a copy of
/// r6, so `if r6 > 4` bounds the value filled from it, and r6 is precise at `join` because
/// the slot's bounds came from it. On the other path the slot holds an unrelated number:
/// not pruned at `join` (r6's id is paired with the slot's there), and its offset is refused.
#[test]
fn a_spilled_copy_is_linked_to_its_register_for_precision() {
    rejects(
        &format!(
            "call 7
        r6 = r0
        *(u64 *)(r10 - 16) = r6
        call 7
        if r0 != 0 goto other
        {PAD_TWICE_TO_JOIN}
    other:
        call 7
        *(u64 *)(r10 - 16) = r0
    join:
        if r6 > 4 goto out
        {ARRAY1_VALUE}
        r3 = *(u64 *)(r10 - 16)
        r0 += r3
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
        ),
        29,
        "map_value variable offset",
    );
}

/// An atomic reads its source register (liveness): the state saved at `join` with r6 a
/// number keeps r6 live there, so the path where r6 is the frame pointer is not pruned, and
/// adding that pointer into the stack is refused under the unprivileged rules (an address
/// would leak into memory).
#[test]
fn an_atomic_reads_its_source_so_a_pointer_there_is_not_pruned() {
    rejects_with(
        &format!(
            "call 7
        r6 = 1
        if r0 != 0 goto other
        {PAD_TO_JOIN}
    other:
        r6 = r10
    join:
        *(u64 *)(r10 - 8) = 0
        atomic u64 r10 - 8 add r6
        r0 = 2
        exit"
        ),
        maps(),
        VerifyOptions::unprivileged(),
        15,
        "R6 leaks addr into memory (atomic operand is a pointer",
    );
}

/// A load from a ring buffer record is any number of its size (the record's bytes are the
/// program's to fill, nothing known): four bytes read there are up to 2^32 - 1, too large
/// for a map value offset.
#[test]
fn a_load_from_a_ring_buffer_record_is_unknown() {
    rb_rejects(
        &format!(
            "{RESERVE8}
        if r0 == 0 goto out
        r7 = *(u32 *)(r0 + 0)
        r1 = r0
        r2 = 0
        call 133
        {ARRAY1_VALUE}
        r0 += r7
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
        ),
        18,
        "map_value variable offset [0, 4294967295]",
    );
}

/// `a_pruned_path_marks_what_the_pruning_state_relied_on_precise_in_its_own_states` in the
/// eighth frame: main and f1-f6 keep r6 = 0 across their call and use it as a stack offset
/// after it (precise), so the state that prunes the second path at `join` relied on a
/// register in every one of the 8 frames. That need must still reach the second path's state
/// at `mid` (the kernel's propagate_precision), so the third path, bringing an unbounded r6
/// to `mid`, is not pruned there and its offset is refused (insn 72 = 44 + 28).
#[test]
fn a_pruned_path_passes_back_precision_needed_in_all_eight_frames() {
    let mut src = String::new();
    for k in 0..6 {
        let name = if k == 0 { "main".to_string() } else { format!("f{k}") };
        src += &format!("{name}:\n r6 = 0\n call @f{}\n r1 = r10\n r1 += r6\n r0 = 2\n exit\n", k + 1);
    }
    // f6 (insns 36-43) has two more instructions: a state is then saved at f7's first
    // instruction (44), and f7 runs with the jump and instruction counts of the one-frame test.
    src += "f6:\n r6 = 0\n r7 = 1\n r7 = 2\n call @f7\n r1 = r10\n r1 += r6\n r0 = 2\n exit\n";
    src += &format!("f7:\n{}", three_paths_to_mid());
    rejects(&src, 72, "map_value variable offset [1, 4294967295]");
}
