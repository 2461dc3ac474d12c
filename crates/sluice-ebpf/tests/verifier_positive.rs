//! Safe programs the verifier must accept.

#[path = "verifier_asm.rs"]
mod asm;

use asm::{asm, map, program, ARRAY1_VALUE, PAD_TWICE_TO_JOIN};
use sluice_ebpf::program::{map_type, MapDef};
use sluice_ebpf::verifier::{mem, verify, VerifiedProgram, VerifyOptions};

fn maps() -> Vec<MapDef> {
    let mut rodata = map(".rodata", map_type::ARRAY, 4, 32, 1);
    rodata.flags = 1 << 7;
    vec![
        map("hash", map_type::HASH, 4, 8, 16),    // 0
        map("array", map_type::ARRAY, 4, 16, 4),  // 1
        map("devmap", map_type::DEVMAP, 4, 4, 8), // 2
        rodata,                                   // 3
        map(".bss", map_type::ARRAY, 4, 64, 1),   // 4
        map("xsks", map_type::XSKMAP, 4, 4, 8),   // 5
    ]
}

#[track_caller]
fn accepts(src: &str) -> VerifiedProgram {
    let p = program(asm(src), maps());
    match verify(&p, &VerifyOptions::default()) {
        Ok(v) => v,
        Err(e) => panic!("refused: {e}"),
    }
}

const PKT: &str = "
    r2 = *(u32 *)(r1 + 0)
    r3 = *(u32 *)(r1 + 4)
";

#[test]
fn bounds_checked_parse_with_variable_header_length() {
    let v = accepts(&format!(
        "{PKT}
        r4 = r2
        r4 += 34
        if r4 > r3 goto pass
        r5 = *(u16 *)(r2 + 12)
        if r5 != 8 goto pass
        r6 = *(u8 *)(r2 + 14)
        r6 &= 15
        r6 <<= 2
        r7 = r2
        r7 += 14
        r7 += r6
        r8 = r7
        r8 += 8
        if r8 > r3 goto pass
        r0 = *(u16 *)(r7 + 2)
        r0 = be16 r0
        if r0 == 53 goto drop
    pass:
        r0 = 2
        exit
    drop:
        r0 = 1
        exit"
    ));
    assert_eq!(v.insn_mem()[0], mem::CTX);
    assert_eq!(v.insn_mem()[5], mem::PACKET);
    assert!(v.is_ctx_access(1));
}

#[test]
fn all_four_comparison_shapes() {
    // pkt > end (fall), end < pkt (fall), pkt < end (taken), end > pkt (taken),
    // plus >= / <= variants.
    // (condition, safe branch is the taken one, the safe relation is strict "pkt < end")
    for (cond, safe_on_taken, strict) in [
        ("if r4 > r3 goto L", false, false),
        ("if r3 < r4 goto L", false, false),
        ("if r4 >= r3 goto L", false, true),
        ("if r3 <= r4 goto L", false, true),
        ("if r4 <= r3 goto L", true, false),
        ("if r3 >= r4 goto L", true, false),
        ("if r4 < r3 goto L", true, true),
        ("if r3 > r4 goto L", true, true),
    ] {
        let (fall, taken) = if safe_on_taken { ("r0 = 2", "r0 = *(u8 *)(r2 + 13)") } else { ("r0 = *(u8 *)(r2 + 13)", "r0 = 2") };
        let src = format!("{PKT} r4 = r2 \n r4 += 14 \n {cond} \n {fall} \n exit \n L: \n {taken} \n exit");
        let p = program(asm(&src), vec![]);
        verify(&p, &VerifyOptions::default()).unwrap_or_else(|e| panic!("{cond}: {e}"));
        // One byte further is only proven by a strict comparison; two bytes never.
        let p = program(asm(&src.replace("(r2 + 13)", "(r2 + 14)")), vec![]);
        let r = verify(&p, &VerifyOptions::default());
        assert_eq!(r.is_ok(), strict, "{cond}: {r:?}");
        let p = program(asm(&src.replace("(r2 + 13)", "(r2 + 15)")), vec![]);
        let e = verify(&p, &VerifyOptions::default()).unwrap_err();
        assert!(e.msg.contains("invalid access to packet, off=15 size=1"), "{cond}: {e}");
    }
}

#[test]
fn range_propagates_to_copies_and_spills() {
    accepts(&format!(
        "{PKT}
        *(u64 *)(r10 - 8) = r2
        r4 = r2
        r4 += 20
        if r4 > r3 goto out
        r5 = *(u64 *)(r10 - 8)
        r0 = *(u32 *)(r5 + 16)
        r0 = *(u32 *)(r4 - 4)
    out:
        r0 = 2
        exit"
    ));
}

#[test]
fn packet_meta_checked_against_data() {
    accepts(
        "
        r2 = *(u32 *)(r1 + 8)
        r3 = *(u32 *)(r1 + 0)
        r4 = r2
        r4 += 4
        if r4 > r3 goto out
        r0 = *(u32 *)(r2 + 0)
    out:
        r0 = 2
        exit",
    );
}

#[test]
fn bounded_loop_with_constant_bound() {
    let v = accepts(
        "
        r0 = 0
        r1 = 0
    l:
        r0 += r1
        r1 += 1
        if r1 < 16 goto l
        r0 &= 3
        exit",
    );
    assert!(v.stats().processed_insns < 200, "{:?}", v.stats());
}

/// Inside a loop (a state saved at the same instruction is still being explored) a new
/// state is saved only after 20 jumps or 100 instructions, not every 2 jumps and 8
/// instructions as elsewhere (the kernel's is_state_visited: loop iterations rarely prune
/// each other). 1000 iterations of a 2-instruction loop, one jump each: a state every 20
/// iterations at the loop head (51 states in all here; the rule outside loops, a state
/// every 4 iterations, would save about 250).
#[test]
fn inside_a_loop_a_state_is_saved_every_20_jumps() {
    let v = accepts(
        "
        r1 = 0
    l:
        r1 += 1
        if r1 < 1000 goto l
        r0 = 2
        exit",
    );
    let s = v.stats();
    assert_eq!(s.processed_insns, 2003, "{s:?}");
    assert!((45..=55).contains(&s.states_stored), "{s:?}");
}

#[test]
fn bounded_loop_32bit_counter() {
    accepts(
        "
        w0 = 0
        w1 = 0
    l:
        w0 ^= w1
        w1 += 1
        if w1 != 100 goto l
        exit",
    );
}

#[test]
fn bounded_loop_over_packet_bytes() {
    accepts(&format!(
        "{PKT}
        r0 = 0
        r6 = 0
    l:
        r4 = r2
        r4 += r6
        r5 = r4
        r5 += 1
        if r5 > r3 goto out
        r7 = *(u8 *)(r4 + 0)
        r0 += r7
        r6 += 1
        if r6 < 32 goto l
    out:
        r0 &= 3
        exit"
    ));
}

#[test]
fn map_lookup_with_null_check_and_atomics() {
    let v = accepts(
        "
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r1 = 1
        atomic u64 r0 + 8 add r1
        atomic u32 r0 + 4 fetch_add r1
        r2 = r1
        atomic u64 r0 + 0 xchg r2
        r3 = r0
        r0 = 5
        atomic u64 r3 + 8 cmpxchg r1
        r1 = *(u64 *)(r3 + 8)
    out:
        r0 = 2
        exit",
    );
    assert_eq!(v.insn_mem()[8], mem::MAP_VALUE);
    assert_eq!(v.insn_mem()[7], 0);
}

#[test]
fn map_value_variable_offset_within_bounds() {
    accepts(
        "
        r6 = r1
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 != 0 goto ok
        r0 = 2
        exit
    ok:
        r2 = *(u32 *)(r6 + 16)
        if r2 > 8 goto out
        r0 += r2
        r1 = *(u64 *)(r0 + 0)
        *(u64 *)(r0 + 0) = r1
    out:
        r0 = 2
        exit",
    );
}

#[test]
fn map_update_and_delete() {
    accepts(
        "
        *(u32 *)(r10 - 4) = 0
        *(u64 *)(r10 - 16) = 0
        r2 = r10
        r2 += -4
        r3 = r10
        r3 += -16
        r4 = 0
        r1 = map[0] ll
        call 2
        r2 = r10
        r2 += -4
        r1 = map[0] ll
        call 3
        r0 = 2
        exit",
    );
}

#[test]
fn bpf_to_bpf_call_with_stack_argument() {
    let v = accepts(
        "
        r6 = 7
        *(u64 *)(r10 - 8) = 0
        r1 = r10
        r1 += -8
        call @f
        r0 += r6
        r0 &= 3
        exit
    f:
        *(u64 *)(r10 - 16) = r1
        r2 = *(u64 *)(r10 - 16)
        r0 = *(u64 *)(r2 + 0)
        *(u64 *)(r2 + 0) = 1
        exit",
    );
    assert_eq!(v.subprogs().len(), 2);
    assert_eq!(v.stats().subprog_stack_depth, vec![8, 16]);
    assert_eq!(v.stats().max_call_chain_stack, 24);
}

#[test]
fn callee_returns_packet_pointer() {
    accepts(
        "
        r6 = r1
        call @parse
        if r0 == 0 goto out
        r0 = 2
        exit
    out:
        r0 = 1
        exit
    parse:
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r4 = r2
        r4 += 14
        r0 = 0
        if r4 > r3 goto no
        r0 = r2
    no:
        exit",
    );
}

#[test]
fn adjust_head_then_reload() {
    accepts(
        "
        r6 = r1
        r2 = -14
        call 44
        if r0 != 0 goto out
        r2 = *(u32 *)(r6 + 0)
        r3 = *(u32 *)(r6 + 4)
        r4 = r2
        r4 += 14
        if r4 > r3 goto out
        *(u16 *)(r2 + 12) = 8
        r0 = 3
        exit
    out:
        r0 = 2
        exit",
    );
}

#[test]
fn global_data_read_and_write() {
    accepts(
        "
        r1 = map_value[4][8] ll
        r2 = *(u64 *)(r1 + 0)
        r2 += 1
        *(u64 *)(r1 + 0) = r2
        r1 = map_value[3][0] ll
        r0 = *(u32 *)(r1 + 28)
        r0 &= 3
        exit",
    );
}

#[test]
fn redirect_map_and_xsk_lookup() {
    accepts(
        "
        r6 = r1
        r7 = *(u32 *)(r6 + 16)
        *(u32 *)(r10 - 4) = r7
        r2 = r10
        r2 += -4
        r1 = map[5] ll
        call 1
        if r0 == 0 goto pass
        r1 = map[5] ll
        r2 = r7
        r3 = 0
        call 51
        exit
    pass:
        r1 = map[2] ll
        r2 = 0
        r3 = 2
        call 51
        exit",
    );
}

#[test]
fn helpers_with_memory_arguments() {
    accepts(
        "
        r6 = r1
        *(u64 *)(r10 - 8) = 0
        *(u64 *)(r10 - 16) = 0
        r1 = r10
        r1 += -16
        r2 = 16
        r3 = 0
        r4 = 0
        r5 = 0
        call 28
        r1 = map_value[3][0] ll
        r2 = 8
        r3 = r0
        call 6
        call 5
        call 7
        call 8
        call 125
        r2 = r10
        r2 += -64
        *(u64 *)(r10 - 64) = 0
        *(u64 *)(r10 - 56) = 0
        *(u64 *)(r10 - 48) = 0
        *(u64 *)(r10 - 40) = 0
        *(u64 *)(r10 - 32) = 0
        *(u64 *)(r10 - 24) = 0
        r1 = r6
        r3 = 64
        r4 = 0
        call 69
        r0 = *(u64 *)(r10 - 32)
        r1 = r6
        r2 = -4
        call 65
        r1 = 2
        r2 = 0
        call 23
        exit",
    );
}

#[test]
fn division_by_register_zero_is_allowed() {
    // The runtime defines x/0 = 0 and x%0 = x, as the kernel does.
    accepts("r0 = 10 \n r1 = 0 \n r0 /= r1 \n w0 %= w1 \n r0 s/= r1 \n exit");
}

#[test]
fn spilled_scalar_keeps_bounds() {
    accepts(
        "
        r6 = r1
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r1 = *(u32 *)(r6 + 12)
        r1 &= 7
        *(u64 *)(r10 - 16) = r1
        r2 = *(u64 *)(r10 - 16)
        r0 += r2
        r0 = *(u64 *)(r0 + 0)
    out:
        r0 = 2
        exit",
    );
}

#[test]
fn linked_scalars_share_bounds() {
    // r2 is a copy of r1; bounding r2 bounds r1.
    accepts(
        "
        r6 = r1
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r1 = *(u32 *)(r6 + 12)
        r2 = r1
        if r2 > 8 goto out
        r0 += r1
        r0 = *(u64 *)(r0 + 0)
    out:
        r0 = 2
        exit",
    );
}

/// A 32-bit copy of a value that already fits 32 bits is the same value: the two registers
/// are linked as a 64-bit copy would be (the kernel's assign_scalar_id_before_mov for a u32
/// source), so bounding w2 bounds r1.
#[test]
fn a_32_bit_copy_of_a_32_bit_value_shares_its_bounds() {
    accepts(
        "
        r6 = r1
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r1 = *(u32 *)(r6 + 12)
        w2 = w1
        if r2 > 8 goto out
        r0 += r1
        r0 = *(u64 *)(r0 + 0)
    out:
        r0 = 2
        exit",
    );
}

/// Registers linked by an id hold one value at run time, and sluice refines a comparison of
/// two of them as one (`apply_scalar`): r2 = r1 in [0, 1], so `r2 > r1` never holds (the
/// taken side's refined operands, [1, 1] and [0, 0], cannot both be the value) and its taken
/// side is not walked.
#[test]
fn linked_copies_compared_with_each_other_are_one_value() {
    accepts(
        "r1 = *(u32 *)(r1 + 16)
        r1 &= 1
        r2 = r1
        if r2 > r1 goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u64 *)(r10 + 8)
        exit",
    );
}

/// A register compared with itself: the comparison alone decides, whatever the register's
/// bounds (the kernel's is_scalar_branch_taken when reg1 == reg2): `>`, `<`, `!=`, `s>`,
/// `s<` never jump, `==`, `>=`, `<=`, `s>=`, `s<=` always do, in both widths; the side that
/// cannot happen is not walked (here it would read outside the stack).
#[test]
fn a_register_compared_with_itself_is_decided_by_the_comparison_alone() {
    for r in ["r1", "w1"] {
        for op in [">", "<", "!=", "s>", "s<"] {
            accepts(&format!(
                "r1 = *(u32 *)(r1 + 16)
                if {r} {op} {r} goto bad
                r0 = 2
                exit
            bad:
                r0 = *(u64 *)(r10 + 8)
                exit"
            ));
        }
        for op in ["==", ">=", "<=", "s>=", "s<="] {
            accepts(&format!(
                "r1 = *(u32 *)(r1 + 16)
                if {r} {op} {r} goto ok
                r0 = *(u64 *)(r10 + 8)
                exit
            ok:
                r0 = 2
                exit"
            ));
        }
    }
}

/// A left shift whose bounds overflow still knows its low bits are zero (the kernel's
/// scalar_min_max_lsh keeps `tnum_lshift` when the bounds are lost): a u32 shifted by 40
/// has its low 40 bits clear, so `r1 & 0xff` is never true.
#[test]
fn a_left_shift_past_the_top_keeps_the_known_zero_low_bits() {
    accepts(
        "r1 = *(u32 *)(r1 + 16)
        r1 <<= 40
        if r1 & 0xff goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u64 *)(r10 + 8)
        exit",
    );
}

#[test]
fn many_branches_are_pruned() {
    // 40 independent diamonds on bits of one value: 2^40 paths without pruning.
    let mut src = String::from("r6 = r1 \n call 5 \n r7 = r0 \n r0 = 0\n");
    for i in 0..40 {
        src += &format!("r9 = {} ll \n if r7 & r9 goto a{i} \n r8 = 1 \n goto b{i} \n a{i}: \n r8 = 2 \n b{i}: \n r0 += 1\n", 1u64 << i);
    }
    src += "r0 &= 3 \n exit";
    let v = accepts(&src);
    assert!(v.stats().processed_insns < 10_000, "{:?}", v.stats());
}

#[test]
fn null_checked_twice() {
    accepts(
        "
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[0] ll
        call 1
        r6 = r0
        if r0 == 0 goto out
        if r6 == 0 goto out
        r0 = *(u64 *)(r6 + 0)
    out:
        r0 = 2
        exit",
    );
}

#[test]
fn cpu_v4_instructions() {
    accepts(
        "
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r4 = r2
        r4 += 4
        if r4 > r3 goto out
        r0 = *(s8 *)(r2 + 0)
        r0 = (s16)r0
        r0 = bswap32 r0
        r0 s%= 7
        gotol out
    out:
        r0 = 2
        exit",
    );
}

#[test]
fn narrow_spill_keeps_loop_counter_bounds() {
    // alu32 code spills 32-bit registers with 4-byte stores; at an 8-aligned slot the
    // bounds survive the fill, as in the kernel.
    let v = accepts(
        "
        w6 = 0
    l:
        *(u32 *)(r10 - 8) = w6
        w6 = 100
        w6 = *(u32 *)(r10 - 8)
        w6 += 1
        if w6 < 10 goto l
        r0 = 0
        exit",
    );
    assert_eq!(v.stats().subprog_stack_depth, vec![8]);
}

#[test]
fn narrow_spill_bounds_a_map_value_offset() {
    accepts(
        "
        r6 = r1
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r1 = *(u32 *)(r6 + 12)
        r1 &= 7
        *(u16 *)(r10 - 16) = r1
        r2 = *(u16 *)(r10 - 16)
        r0 += r2
        r0 = *(u64 *)(r0 + 0)
    out:
        r0 = 2
        exit",
    );
}

#[test]
fn runtime_extra_helpers() {
    // ktime_get_coarse_ns, xdp_get_buff_len, xdp_load_bytes into uninitialised stack,
    // xdp_store_bytes from it, trace_vprintk with a pointer argument (%s),
    // map_lookup_percpu_elem, and trace_printk with a pointer vararg.
    let mut m = maps();
    m.push(map("percpu", map_type::PERCPU_ARRAY, 4, 8, 4)); // 6
    let p = program(
        asm("
        r6 = r1
        call 160
        r1 = r6
        call 188
        r1 = r6
        r2 = 14
        r3 = r10
        r3 += -16
        r4 = 8
        call 189
        r1 = r6
        r2 = 0
        r3 = r10
        r3 += -16
        r4 = 6
        call 190
        r1 = r10
        r1 += -16
        *(u64 *)(r10 - 24) = r1
        r1 = map_value[3][0] ll
        r2 = 4
        r3 = r10
        r3 += -24
        r4 = 8
        call 177
        r1 = map_value[3][0] ll
        r2 = 4
        r3 = r10
        call 6
        *(u32 *)(r10 - 28) = 1
        r2 = r10
        r2 += -28
        r1 = map[6] ll
        r3 = 0
        call 195
        if r0 == 0 goto out
        r0 = *(u64 *)(r0 + 0)
    out:
        r0 = 2
        exit"),
        m,
    );
    verify(&p, &VerifyOptions::default()).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_packet_length_data_end_minus_data_is_a_scalar() {
    // Two pointers of the packet family subtract to an unknown length (a scalar the program
    // may compare and return). It leaks no address, so sluice's unprivileged model (no
    // pointer leaks) allows it too, unlike the difference of two unrelated pointers.
    let src = format!(
        "{PKT}
        r3 -= r2
        if r3 < 14 goto short
        r0 = 2
        exit
    short:
        r0 = 1
        exit"
    );
    accepts(&src);
    if let Err(e) = verify(&program(asm(&src), maps()), &VerifyOptions::unprivileged()) {
        panic!("unprivileged rules refused it: {e}");
    }
}

/// r6 is 1 on the fall-through (walked first; straight-line padding, so its state is saved
/// at `join`) and `other_r6` on the branch target; `join` runs `tail`.
fn diamond_r6(other_r6: u32, tail: &str) -> VerifiedProgram {
    accepts(&format!(
        "call 7
        r6 = 1
        if r0 != 0 goto other
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    other:
        r6 = {other_r6}
    join:
        {tail}"
    ))
}

/// A path cut short at a join by an equivalent saved state is counted in
/// `VerifyStats::states_pruned` (the kernel's "states pruned" statistic).
#[test]
fn pruned_paths_are_counted_in_the_stats() {
    let v = diamond_r6(1, "r0 = r6 \n exit");
    assert_eq!(v.stats().states_pruned, 1, "{:?}", v.stats());
}

/// Only a store of zero bytes (read back later as the constant 0) makes the stored register
/// precise; a misaligned narrow store of another value leaves unknown bytes, so the value
/// does not matter and the join still prunes (the kernel marks the source precise only when
/// `register_is_null`, for STACK_ZERO).
#[test]
fn a_nonzero_narrow_store_does_not_make_its_source_precise() {
    let v = diamond_r6(2, "*(u8 *)(r10 - 3) = r6 \n r0 = 2 \n exit");
    assert_eq!(v.stats().states_pruned, 1, "{:?}", v.stats());
}

/// Precision backtracking (backtrack_insn, ALU with an immediate): `r6 += -9` with r6
/// needed needs r6 only; it reads no source register (its src field, 0, is not r0). r0
/// differs at the join (0 on the fall-through, non-zero on the other path) and is read
/// there, but no decision depends on it, so the join prunes.
#[test]
fn an_alu_op_with_an_immediate_makes_no_other_register_precise() {
    let v = diamond_r6(1, "r7 = r0 \n r6 += -9 \n r1 = r10 \n r1 += r6 \n *(u8 *)(r1 + 0) = 0 \n r0 = 2 \n exit");
    assert_eq!(v.stats().states_pruned, 1, "{:?}", v.stats());
}

/// A fully explored state at a join does not stop another state from being saved there
/// (only an ancestor at the same instruction, a loop, does; the kernel's
/// `is_state_visited` heuristic): r6 = 1 is saved at `join` and explored, r6 = 2 is not
/// covered by it (r6 is a stack offset after `join`, so it is precise) and is saved in
/// turn, and the third path (r6 = 2 again) is then pruned against that second state (no
/// other prune point follows `join`, so only a state saved there can prune it).
#[test]
fn a_second_state_is_saved_at_a_join_whose_first_is_fully_explored() {
    let v = accepts(
        "call 7
        r7 = r0
        r6 = 1
        if r7 > 5 goto two
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    two:
        if r7 == 6 goto three
        r6 = 2
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    three:
        r6 = 2
        goto join
    join:
        r1 = r10
        r1 += r6
        *(u8 *)(r1 - 8) = 0
        r0 = 2
        exit",
    );
    assert_eq!(v.stats().states_pruned, 1, "{:?}", v.stats());
}

/// A byte swap reads and writes only its destination (liveness; the kernel's BPF_END
/// uses dst_reg alone, its src field is 0 even though `be` sets the BPF_X bit): r0 holds
/// a stack pointer on one path and a number on the other, but it is dead at `join`
/// (`r6 = be16 r6` does not read it, `r0 = 2` overwrites it), so the join prunes.
#[test]
fn a_byte_swap_reads_only_its_destination_so_a_dead_r0_still_prunes() {
    let v = accepts(
        "call 7
        r6 = 1
        if r0 != 0 goto other
        r0 = r10
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    other:
        r0 = 1
    join:
        r6 = be16 r6
        r0 = 2
        exit",
    );
    assert_eq!(v.stats().states_pruned, 1, "{:?}", v.stats());
}

/// The positive sibling of verifier_negative's
/// `precision_of_a_returned_r0_follows_it_into_the_callee`: with r0 = 4 on both paths
/// through `f`, the second is pruned at `join` (a state is saved there), so that test's
/// refusal depends on r0's precision and not on a join that never prunes.
#[test]
fn a_callee_join_with_the_same_returned_r0_prunes() {
    let v = accepts(
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
        r0 = 4
    join:
        exit",
    );
    assert_eq!(v.stats().states_pruned, 1, "{:?}", v.stats());
}

/// Subtracting a constant from a pointer moves its fixed offset down by that constant
/// (adjust_ptr_min_max_vals, BPF_SUB with a known scalar: `off = ptr.off - val`): r10 - 8
/// addresses the stack slot at fp-8.
#[test]
fn pointer_minus_constant_moves_the_offset_down() {
    accepts("r2 = r10 \n r2 -= 8 \n *(u64 *)(r2 + 0) = 0 \n r2 -= 8 \n *(u64 *)(r2 + 0) = 0 \n r0 = *(u64 *)(r10 - 16) \n exit");
}

/// Scalar plus pointer is pointer arithmetic too (adjust_ptr_min_max_vals takes the pointer
/// from either operand of an add): `r1 = -8; r1 += r10` is a stack pointer to fp-8.
#[test]
fn a_scalar_plus_a_pointer_is_a_pointer() {
    accepts("r1 = -8 \n r1 += r10 \n *(u64 *)(r1 + 0) = 0 \n r0 = *(u64 *)(r10 - 8) \n exit");
}

/// A plain (zero-extending) load from frozen `.rodata` is the byte's unsigned value
/// (bpf_map_direct_read, no sign extension but for BPF_MEMSX): 0xff reads as 255, so the
/// branch to the bad access is never taken and the program is accepted; as a sign-extending
/// load it is -1.
#[test]
fn frozen_rodata_bytes_read_unsigned_unless_sign_extended() {
    let mut frozen = vec![None; maps().len()];
    let mut value = vec![0u8; 32];
    value[0] = 0xff;
    frozen[3] = Some(value);
    let bad = "\n r0 = *(u64 *)(r10 + 8) \n exit";
    let unsigned = format!("r1 = map_value[3][0] ll \n r2 = *(u8 *)(r1 + 0) \n if r2 != 255 goto bad \n r0 = 2 \n exit \n bad:{bad}");
    let p = program(asm(&unsigned), maps());
    sluice_ebpf::verifier::verify_with_frozen(&p, &VerifyOptions::default(), &frozen).expect("255: the bad branch is dead");
    let signed = format!("r1 = map_value[3][0] ll \n r2 = *(s8 *)(r1 + 0) \n if r2 != -1 goto bad \n r0 = 2 \n exit \n bad:{bad}");
    let p = program(asm(&signed), maps());
    sluice_ebpf::verifier::verify_with_frozen(&p, &VerifyOptions::default(), &frozen).expect("-1: the bad branch is dead");
}

/// `x / y` is at most `x` for every divisor, 0 included (the runtime defines `x / 0 = 0`):
/// a dividend of 0..15 divided by a register that may be zero still indexes a 16-byte
/// map value.
#[test]
fn a_division_by_a_register_that_may_be_zero_is_at_most_the_dividend() {
    accepts(&format!(
        "call 7
        r8 = r0
        r8 &= 15
        call 7
        r9 = r0
        r9 &= 255
        {ARRAY1_VALUE}
        r8 /= r9
        r0 += r8
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
    ));
}

/// Precision backtracking (the kernel's backtrack_insn): a pointer plus an immediate
/// (`r1 += -8`, src field 0) reads no scalar, so it makes none precise, r0 included: r0
/// differs at the join (0 and non-zero) and is read after it, but nothing depends on its
/// value, so the join prunes.
#[test]
fn a_pointer_plus_an_immediate_makes_no_scalar_precise() {
    let v = diamond_r6(1, "r7 = r0 \n r1 = r10 \n r1 += -8 \n *(u64 *)(r1 + 0) = r7 \n r0 = 2 \n exit");
    assert_eq!(v.stats().states_pruned, 1, "{:?}", v.stats());
}

/// `if r2 & r1` with r2 the constant 4 (a single bit) sets bit 2 of r1 on the taken side, as
/// `if r1 & 4` does: the kernel's regs_refine_cond_op swaps the operands of BPF_JSET so the
/// constant is the mask, whichever register holds it. `r1 &= 4` is then exactly 4 and the
/// branch to the bad access never taken.
#[test]
fn a_jset_with_the_constant_bit_in_the_destination_sets_that_bit_in_the_source() {
    let bad = "\n r0 = *(u64 *)(r10 + 8) \n exit";
    accepts(&format!(
        "r1 = *(u32 *)(r1 + 16)
        r2 = 4
        if r2 & r1 goto set
        r0 = 2
        exit
    set:
        r1 &= 4
        if r1 == 0 goto bad
        r0 = 2
        exit
    bad:{bad}"
    ));
}

/// A tail call in a subprogram (the path where it returned) gives the caller's r0 no source,
/// and makes nothing else of the caller precise: r8's precision in `sub` (a stack offset)
/// stops at `r8 = 0`, so the caller's r6, live but never deciding anything, stays
/// imprecise at `join` and the second path (r6 = 2) is pruned there: two prunes in all
/// (26 instructions processed). Were r6 made precise, the second path would go on into
/// `sub` and be pruned further on, twice (3 prunes, 37 instructions).
#[test]
fn a_tail_call_in_a_subprogram_makes_no_caller_register_precise() {
    let mut m = maps();
    m.push(map("jmp", map_type::PROG_ARRAY, 4, 4, 2)); // 6
    let p = program(
        asm("r9 = r1
        call 7
        r6 = 1
        if r0 != 0 goto other
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    other:
        r6 = 2
    join:
        r1 = r9
        call @sub
        *(u8 *)(r10 - 3) = r6
        r0 = 2
        exit
    sub:
        r8 = 0
        r2 = map[6] ll
        r3 = 0
        call 12
        r1 = r10
        r1 += r8
        *(u8 *)(r1 - 8) = 0
        r0 = 0
        exit"),
        m,
    );
    let v = verify(&p, &VerifyOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.stats().states_pruned, 2, "{:?}", v.stats());
}

/// A map key on the stack is only read by the lookup (ARG_PTR_TO_MAP_KEY is read-only; the
/// kernel writes nothing there): a constant spilled as the key is the same constant after
/// the call, so it may index the value.
#[test]
fn a_map_key_on_the_stack_keeps_its_spilled_constant_after_the_lookup() {
    accepts(
        "r1 = 3
        *(u64 *)(r10 - 8) = r1
        r2 = r10
        r2 += -8
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r1 = *(u64 *)(r10 - 8)
        r0 += r1
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit",
    );
}

/// The instruction after a call to a subprogram is a prune point (the kernel's
/// visit_func_call_insn marks t + 1), the call at instruction 0 included. The two paths
/// through `f` differ in r6, a stack offset there (precise), so the second is not pruned
/// inside `f`; back in the caller `f`'s frame is gone, both states are the same, and the
/// second path is pruned at instruction 1 (the only prune point left on its way).
#[test]
fn the_return_point_of_a_call_at_the_first_instruction_is_a_prune_point() {
    let v = accepts(
        "call @f
        r0 = 2
        exit
    f:
        call 7
        r6 = 1
        if r0 != 0 goto other
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    other:
        r6 = 2
    join:
        r1 = r10
        r1 += r6
        *(u8 *)(r1 - 8) = 0
        call 7
        r0 = 0
        r1 = 0
        r2 = 0
        r3 = 0
        exit",
    );
    assert_eq!(v.stats().states_pruned, 1, "{:?}", v.stats());
}

/// A saved state that keeps failing to match is dropped (the kernel's is_state_visited:
/// `miss_cnt > hit_cnt * 3 + 3`, memory and time): r6 = 0, 1, 2, 3, 4 reach `join`
/// one after the other (each path saved there, r6 a stack offset after it, so precise),
/// and the r6 = 0 state, missed by the four after it, is gone when a sixth path brings
/// r6 = 0 again: that path is walked, not pruned (were the state kept, it would be).
#[test]
fn a_saved_state_missed_four_times_without_a_hit_is_dropped() {
    let pad = |k: u32| format!("r3 = 0 \n r4 = 1 \n goto pad{k} \n pad{k}: \n r3 = 3 \n r4 = 4 \n r5 = 5 \n goto join \n");
    let mut src = String::from("call 7 \n r7 = r0 \n");
    for k in 1..=5 {
        src += &format!("if r7 > {k} goto a{k} \n r6 = {} \n{} a{k}: \n", k - 1, pad(k));
    }
    src += &format!("r6 = 0 \n{} join: \n r1 = r10 \n r1 += r6 \n *(u8 *)(r1 - 8) = 0 \n r0 = 2 \n exit", pad(6));
    let v = accepts(&src);
    assert_eq!(v.stats().states_pruned, 0, "{:?}", v.stats());
}

#[test]
fn a_byte_swapped_constant_is_a_known_constant() {
    // BPF_END on a known value gives a known value (the kernel's tnum_bswap*): each compare
    // below decides its branch, so the out-of-frame reads behind them are never reached.
    accepts(
        "
        r1 = 0x1234
        r1 = bswap16 r1
        if r1 == 0x3412 goto w
        r0 = *(u8 *)(r10 + 8)
    w:
        r2 = 0x12345678
        r2 = bswap32 r2
        if r2 == 0x78563412 goto d
        r0 = *(u8 *)(r10 + 8)
    d:
        r3 = 0x0102030405060708 ll
        r3 = bswap64 r3
        r4 = 0x0807060504030201 ll
        if r3 == r4 goto out
        r0 = *(u8 *)(r10 + 8)
    out:
        r0 = 2
        exit",
    );
}

#[test]
fn a_packet_range_of_exactly_max_packet_off_is_granted() {
    // data + 0xffff <= data_end proves 0xffff bytes: MAX_PACKET_OFF itself is allowed
    // (find_good_pkt_pointers refuses only an offset above it).
    accepts(&format!(
        "{PKT}
        r4 = r2
        r4 += 0xffff
        if r4 > r3 goto out
        r5 = r2
        r5 += 0xfff0
        r0 = *(u8 *)(r5 + 14)
    out:
        r0 = 2
        exit"
    ));
}

#[test]
fn unprivileged_atomics_on_a_map_value_with_number_operands_are_allowed() {
    // Adding, exchanging and comparing numbers in a map value leaks no address: the
    // kernel's unprivileged mode accepts them (check_atomic refuses only pointer operands).
    let src = "
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r1 = 1
        atomic u64 r0 + 8 add r1
        atomic u32 r0 + 4 fetch_add r1
        r3 = r0
        r0 = 5
        atomic u64 r3 + 8 cmpxchg r1
    out:
        r0 = 2
        exit";
    if let Err(e) = verify(&program(asm(src), maps()), &VerifyOptions::unprivileged()) {
        panic!("unprivileged rules refused it: {e}");
    }
}

#[test]
fn an_unsigned_quotient_is_at_least_the_least_dividend_over_the_largest_divisor() {
    // r1 in [10, 25], r2 in [2, 5]: r1 / r2 >= 2, so the out-of-frame read is dead code.
    accepts(
        "
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
        if r1 < 2 goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u8 *)(r10 + 8)
        exit",
    );
}

#[test]
fn a_right_shift_by_any_amount_never_grows_the_value() {
    // r1 in [0, 100] shifted right by an unknown amount (masked to 0..63) stays <= 100.
    accepts(
        "
        call 7
        r6 = r0
        call 7
        r1 = r6
        r1 &= 63
        r1 += 37
        r1 >>= r0
        if r1 > 100 goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u8 *)(r10 + 8)
        exit",
    );
}

/// Zero bytes (`*(u32 *)(r10 - 4) = 0`: not at a slot's start, so no spill but STACK_ZERO)
/// in the saved state cover the same bytes of a spilled register that holds 0 (the
/// kernel's stacksafe: STACK_ZERO against a spill of a known zero): the fall-through path,
/// walked first, stores the immediate; the other spills `r1 = 0` over the whole slot; the
/// bytes are read after the join, and the join prunes.
#[test]
fn a_zeroed_slot_covers_a_spilled_zero_so_the_join_prunes() {
    let v = accepts(
        "call 7
        r1 = 0
        if r0 != 0 goto other
        *(u32 *)(r10 - 4) = 0
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    other:
        *(u64 *)(r10 - 8) = r1
    join:
        r2 = *(u32 *)(r10 - 4)
        r0 = 2
        exit",
    );
    assert_eq!(v.stats().states_pruned, 1, "{:?}", v.stats());
}

/// Precision backtracking through a store of an immediate (BPF_ST): the slot's value came
/// from no register, so none becomes precise (only BPF_STX spills its source register; the
/// ST's src field, 0, is not r0). r0 differs at the join and is read after it, but nothing
/// depends on its value, so the join prunes.
#[test]
fn a_stored_immediate_makes_no_register_precise() {
    let v = diamond_r6(
        1,
        "r7 = r0 \n *(u64 *)(r10 - 8) = 3 \n r1 = *(u64 *)(r10 - 8) \n r2 = r10 \n r2 += r1 \n *(u8 *)(r2 - 16) = 0 \n r0 = 2 \n exit",
    );
    assert_eq!(v.stats().states_pruned, 1, "{:?}", v.stats());
}

/// `x % y` is at most `x` for every divisor, 0 included (the runtime defines `x % 0 = x`):
/// a dividend of 0..15 modulo a register that may be zero still indexes a 16-byte map value.
#[test]
fn a_modulo_by_a_register_that_may_be_zero_is_at_most_the_dividend() {
    accepts(&format!(
        "call 7
        r8 = r0
        r8 &= 15
        call 7
        r9 = r0
        r9 &= 255
        {ARRAY1_VALUE}
        r8 %= r9
        r0 += r8
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
    ));
}

/// Subtraction keeps the bits it knows (the kernel's tnum_sub): `(x & 0x101) - 2` is one
/// of -2, -1, 0xfe, 0xff, whose bits 1 to 7 are all set; no range says so (it is
/// [-2, 255] signed), only the tnum. So `r1 & 2` is always set and the bad branch is dead.
#[test]
fn a_difference_keeps_the_bits_every_value_has() {
    accepts(
        "call 7
        r1 = r0
        r1 &= 0x101
        r1 -= 2
        if r1 & 2 goto ok
        r0 = *(u64 *)(r10 + 8)
        exit
    ok:
        r0 = 2
        exit",
    );
}

/// A left shift keeps its lower bound (the kernel's scalar_min_max_lsh): `((x & 3) + 1) << 2`
/// is 4..16, so `value + r1 - 4` is inside a 16-byte map value.
#[test]
fn a_left_shift_keeps_the_lower_bound() {
    accepts(&format!(
        "call 7
        r8 = r0
        r8 &= 3
        r8 += 1
        r8 <<= 2
        {ARRAY1_VALUE}
        r0 += r8
        r0 = *(u8 *)(r0 - 4)
    out:
        r0 = 2
        exit"
    ));
}

/// An arithmetic right shift keeps a negative range's lower bound (the kernel's
/// scalar_min_max_arsh: smin >> k): [-17, -8] s>> 1 is [-9, -4], so `+ 9` indexes
/// bytes 0..5 of a 16-byte map value. The range crosses 0x..f0, so the tnum alone says
/// only [-16, -1]: the bound must come from the range.
#[test]
fn an_arithmetic_right_shift_keeps_a_negative_lower_bound() {
    accepts(&format!(
        "call 7
        r8 = r0
        r8 -= 100
        if r8 s< -17 goto out
        if r8 s> -8 goto out
        r8 s>>= 1
        r8 += 9
        {ARRAY1_VALUE}
        r0 += r8
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
    ));
}

/// The combined stack of a call chain may be exactly 512 bytes (check_max_stack_depth
/// refuses only more): main uses 256, the function it calls 256.
#[test]
fn a_call_chain_of_exactly_512_stack_bytes_is_accepted() {
    let v = accepts(
        "*(u64 *)(r10 - 256) = 0
        call @f
        r0 = 2
        exit
    f:
        *(u64 *)(r10 - 256) = 0
        r0 = 0
        exit",
    );
    assert_eq!(v.stats().max_call_chain_stack, 512);
}

/// A product keeps the bits it knows (the kernel's tnum_mul): `(x & 0x10) * 3` is one of 0,
/// 0x30 (bits 4 and 5 unknown, every other bit 0), which no range says ([0, 48]); so
/// `r1 & 0xf` is never set and the bad branch is dead.
#[test]
fn a_product_keeps_the_bits_every_value_has() {
    accepts(
        "call 7
        r1 = r0
        r1 &= 0x10
        r1 *= 3
        if r1 & 0xf goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u64 *)(r10 + 8)
        exit",
    );
}

/// `bpf_ktime_get_ns` (after `narrow`) spilled whole at -16, precise (read back, masked and
/// used as a map value offset after `join`); the path walked first keeps it, the other
/// overwrites its first 4 bytes with a 4-byte spill (bytes 4..8 stay initialised).
fn spill_then_a_narrower_spill_at_the_join(narrow: &str) -> VerifiedProgram {
    accepts(&format!(
        "call 5
        {narrow}
        *(u64 *)(r10 - 16) = r0
        call 7
        if r0 != 0 goto other
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    other:
        *(u32 *)(r10 - 16) = r0
    join:
        {ARRAY1_VALUE}
        r3 = *(u64 *)(r10 - 16)
        r3 &= 7
        r0 += r3
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
    ))
}

/// A precise spilled scalar that covers every value of its 8 bytes (`bpf_ktime_get_ns`'s
/// unknown u64, no id) asks nothing of the bytes but that they are initialised: the other
/// path's 4-byte spill over that slot (bytes 4..8 left initialised) is a different spill,
/// but reading the slot back can give no value the first path did not allow, so the join
/// prunes. (sluice's stacksafe is more permissive here than mainline's, which wants the
/// current slot all MISC/ZERO bytes; sound, since the old value covers every value.)
#[test]
fn a_precise_spill_covering_every_value_prunes_against_initialised_bytes() {
    let v = spill_then_a_narrower_spill_at_the_join("");
    assert_eq!(v.stats().states_pruned, 2, "{:?}", v.stats());
}

/// Precision backtracking through a spill to a slot other than the first: the fill after
/// `join` needs the slot, the spill right after `join` supplies it from a constant, so
/// nothing before that spill is needed and the slot's older contents (1 on the path walked
/// first, 2 on the other) do not keep the paths apart: the join prunes (backtrack_insn
/// clears the slot's bit at the spill, whatever the slot's index).
#[test]
fn a_spill_ends_the_need_for_its_slot_so_older_contents_prune() {
    let v = accepts(&format!(
        "call 7
        r6 = 1
        if r0 != 0 goto other
        *(u64 *)(r10 - 16) = r6
        r3 = 0
        r4 = 1
        r5 = 2
        r3 = 3
        r4 = 4
        r5 = 5
        goto join
    other:
        r7 = 2
        *(u64 *)(r10 - 16) = r7
    join:
        r1 = 3
        *(u64 *)(r10 - 16) = r1
        {ARRAY1_VALUE}
        r2 = *(u64 *)(r10 - 16)
        r0 += r2
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
    ));
    // Pruned at the join itself: the other path walks 2 instructions (r7 = 2, the spill),
    // not the 10 after the join as well.
    assert_eq!((v.stats().states_pruned, v.stats().processed_insns), (1, 28), "{:?}", v.stats());
}

/// `data + 8 == data_end` leaves exactly 8 bytes: the equal branch may read them (on the
/// fall-through of `!=` as on the target of `==`). More than the kernel, whose
/// try_match_pkt_pointers reads only <, <=, > and >=: sound, as equality bounds both ways.
#[test]
fn an_equal_packet_end_comparison_gives_the_range() {
    accepts(&format!("{PKT} r4 = r2 \n r4 += 8 \n if r4 == r3 goto read \n r0 = 2 \n exit \n read: \n r0 = *(u64 *)(r2 + 0) \n exit"));
    accepts(&format!("{PKT} r4 = r2 \n r4 += 8 \n if r4 != r3 goto out \n r0 = *(u64 *)(r2 + 0) \n out: \n r0 = 2 \n exit"));
}

/// Under sluice's unprivileged rules two pointers into one object subtract to their distance
/// (a deliberate difference: the kernel refuses pointer - pointer without allow_ptr_leaks
/// and gives an unknown number with it; a distance leaks no address): packet + 8 - packet is 8, two
/// stack pointers 8 apart, pointers 16 and 8 into one map value (8 apart), and two packet
/// pointers sharing one variable offset differ by their fixed parts only. Each difference
/// is then a constant offset that keeps an access in bounds (an unknown number would not).
#[test]
fn pointers_into_one_object_subtract_to_their_distance() {
    let unpriv = |src: &str| {
        if let Err(e) = verify(&program(asm(src), maps()), &VerifyOptions::unprivileged()) {
            panic!("refused: {e}\n{src}");
        }
    };
    let use_as_stack_offset = "r5 = r10 \n r5 += -16 \n r5 += r4 \n *(u64 *)(r5 + 0) = 0 \n r0 = 2 \n exit";
    unpriv(&format!("{PKT} r4 = r2 \n r4 += 8 \n r4 -= r2 \n {use_as_stack_offset}"));
    unpriv(&format!("r4 = r10 \n r4 += -8 \n r2 = r10 \n r2 += -16 \n r4 -= r2 \n {use_as_stack_offset}"));
    unpriv(&format!(
        "{ARRAY1_VALUE} \n r4 = r0 \n r4 += 16 \n r6 = r0 \n r6 += 8 \n r4 -= r6 \n {use_as_stack_offset} \n out: \n r0 = 2 \n exit"
    ));
    unpriv(&format!(
        "{PKT} r0 = r2 \n r0 += 1 \n if r0 > r3 goto out \n r5 = *(u8 *)(r2 + 0) \n r2 += r5 \n r4 = r2 \n r4 += 8 \n r4 -= r2 \n {use_as_stack_offset} \n out: \n r0 = 2 \n exit"
    ));
}

/// A lookup result compared with a register holding 0 is null-checked as by `== 0`.
#[test]
fn a_null_check_against_a_register_holding_zero() {
    accepts("*(u32 *)(r10 - 4) = 0 \n r2 = r10 \n r2 += -4 \n r1 = map[1] ll \n call 1 \n r1 = 0 \n if r0 == r1 goto out \n r2 = *(u64 *)(r0 + 0) \n out: \n r0 = 2 \n exit");
}

/// A precise spilled scalar that covers only part of its bytes' values (here 0..0xffff of
/// 8 bytes) is not "any initialised bytes": the other path's 4-byte spill over the slot
/// may hold more, so the join does not prune and that path is walked to the end (it is
/// safe here: the value is masked before use). The twin of the test above.
#[test]
fn a_precise_spill_of_part_of_the_values_does_not_prune_against_initialised_bytes() {
    let v = spill_then_a_narrower_spill_at_the_join("r0 &= 0xffff");
    // The other path goes on past the join (pruned later, where its state matches): 35
    // instructions walked, against 25 if the join had pruned it.
    assert_eq!(v.stats().processed_insns, 35, "{:?}", v.stats());
}

/// Precision backtracking through BPF_CMPXCHG: r0 after it is the memory's old value (no
/// register is its source), so r0's comparand before it is not needed however precisely
/// the result is used. r6 (1 first, 2 on the other path) reaches the comparand through
/// `r0 = r6`; the join prunes.
#[test]
fn a_cmpxchg_result_makes_its_comparand_not_precise() {
    let v = diamond_r6(
        2,
        &format!(
            "*(u64 *)(r10 - 8) = 3
        r1 = 5
        r0 = r6
        atomic u64 r10 - 8 cmpxchg r1
        r6 = r0
        r6 &= 7
        {ARRAY1_VALUE}
        r0 += r6
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
        ),
    );
    // Pruned at the join: the other path walks 1 instruction (r6 = 2), not the 14 after
    // the join as well.
    assert_eq!((v.stats().states_pruned, v.stats().processed_insns), (1, 29), "{:?}", v.stats());
}

/// Sign-extending a byte that may have either sign gives [-128, 127] (movsx): plus 128, a
/// bounded offset a packet pointer may take (then checked against data_end as any).
#[test]
fn a_sign_extended_byte_of_either_sign_is_within_minus_128_and_127() {
    accepts(&format!(
        "{PKT} r4 = r2 \n r4 += 1 \n if r4 > r3 goto out \n r1 = *(u8 *)(r2 + 0) \n r5 = (s8)r1 \n r5 += 128 \n r6 = r2 \n r6 += r5
        r7 = r6
        r7 += 1
        if r7 > r3 goto out
        r0 = *(u8 *)(r6 + 0)
    out:
        r0 = 2
        exit"
    ));
}

/// A signed JMP32 comparison of a value that fits 32 bits bounds the whole register: a
/// packet byte at most 8 (by `w1 s> 8`) indexes an 8-byte read in a 16-byte map value.
#[test]
fn a_signed_32_bit_comparison_bounds_a_value_that_fits_32_bits() {
    accepts(&format!(
        "{PKT} r4 = r2 \n r4 += 1 \n if r4 > r3 goto out \n r6 = *(u8 *)(r2 + 0)
        {ARRAY1_VALUE}
        if w6 s> 8 goto out
        r0 += r6
        r0 = *(u64 *)(r0 + 0)
    out:
        r0 = 2
        exit"
    ));
}

/// `|` keeps the known bits (tnum_or): (x & 0xf0) | 3 has bits 0 and 1 set and bit 2 clear,
/// so `& 7` is exactly 3, and an 8-byte read at value + 3 + 5 fits the 16-byte value (with
/// the bits lost it could be 7, and 7 + 5 + 8 runs past the end).
#[test]
fn an_or_keeps_the_known_bits() {
    accepts(&format!(
        "call 7
        r6 = r0
        r6 &= 0xf0
        r6 |= 3
        r6 &= 7
        {ARRAY1_VALUE}
        r0 += r6
        r2 = *(u64 *)(r0 + 5)
    out:
        r0 = 2
        exit"
    ));
}

/// `if r1 & r6` with the constant in the destination register: on the fall-through every
/// bit of 0xf0 is clear in r6 too (the refinement works from either side), so a packet byte
/// there is at most 15 and indexes the 16-byte value.
#[test]
fn a_bit_test_against_a_constant_on_the_left_bounds_the_right() {
    accepts(&format!(
        "{PKT} r4 = r2 \n r4 += 1 \n if r4 > r3 goto out \n r6 = *(u8 *)(r2 + 0)
        {ARRAY1_VALUE}
        r1 = 0xf0
        if r1 & r6 goto out
        r0 += r6
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = 2
        exit"
    ));
}

/// Linked-register precision (the kernel's bt_sync_linked_regs) reaches only the scalars
/// sharing the compared register's id: `if r7 > 4` on a copy of r6 makes r6 and r7 precise
/// at `join` once r6 is a map value offset, not r8, a constant (id 0) that nothing decided
/// on. The second path is pruned at `join` whatever its r8, so the stats do not depend on it.
#[test]
fn linked_register_precision_reaches_only_registers_sharing_the_id() {
    let stats = |b: u32| {
        let src = format!(
            "call 7
        r6 = r0
        r7 = r6
        call 7
        if r0 != 0 goto other
        r8 = 0
        {PAD_TWICE_TO_JOIN}
    other:
        r8 = {b}
    join:
        if r7 > 4 goto out
        {ARRAY1_VALUE}
        r0 += r6
        r0 = *(u8 *)(r0 + 0)
    out:
        r0 = r8
        r0 = 2
        exit"
        );
        accepts(&src).stats().clone()
    };
    assert_eq!(stats(1), stats(0), "r8 decided nothing: the second path is pruned at join either way");
}

/// `if r8 s> -1` raises r8's lower bound to 0 on the taken side (refine64's Sgt): r8 in
/// [-100, 2^32 - 101] is then non-negative, so `if r8 s< 0` never jumps and the
/// out-of-frame read behind it is dead code.
#[test]
fn a_signed_greater_than_raises_the_lower_bound() {
    accepts(
        "
        call 7
        r8 = r0
        r8 -= 100
        if r8 s> -1 goto nonneg
        r0 = 2
        exit
    nonneg:
        if r8 s< 0 goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u8 *)(r10 + 8)
        exit",
    );
}
