//! Property test, JIT vs interpreter: random straight-line programs of ALU64 / ALU32 operations
//! (every op incl. signed div/mod, movsx, neg, byte swaps), register or immediate operands
//! over r0-r9, with forward JMP / JMP32 / JA jumps, always valid and verifiable (no memory
//! access, forward jumps only, no dead code, ending in exit). Every register is folded into
//! r0 at the end, so the returned value checks the whole register file.

mod jit_common;

use jit_common::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use sluice_ebpf::asm::*;
use sluice_ebpf::insn::*;

const ALU_OPS: [u8; 13] =
    [BPF_ADD, BPF_SUB, BPF_MUL, BPF_DIV, BPF_OR, BPF_AND, BPF_LSH, BPF_RSH, BPF_NEG, BPF_MOD, BPF_XOR, BPF_MOV, BPF_ARSH];
const JMP_OPS: [u8; 11] = [BPF_JEQ, BPF_JGT, BPF_JGE, BPF_JSET, BPF_JNE, BPF_JSGT, BPF_JSGE, BPF_JLT, BPF_JLE, BPF_JSLT, BPF_JSLE];

/// One body instruction, before its jump distance is clamped to the program.
#[derive(Debug, Clone)]
struct Raw {
    kind: u8,
    op: u8,
    wide: bool,
    use_reg: bool,
    signed: bool,
    dst: u8,
    src: u8,
    imm: i32,
    sel: u8,
    skip: u16,
}

fn imm_strategy() -> impl Strategy<Value = i32> {
    prop_oneof![
        any::<i32>(),
        prop::sample::select(vec![0, 1, -1, 2, 7, -7, 31, 32, 33, 63, 64, 65, 0x7fff_ffff, i32::MIN, 0xff, 0xffff, -0x8000]),
    ]
}

fn val_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        prop::sample::select(vec![
            0u64,
            1,
            u64::MAX,
            i64::MIN as u64,
            i64::MAX as u64,
            0xffff_ffff,
            0x8000_0000,
            0x7fff_ffff,
            0xffff_ffff_8000_0000,
            0x1_0000_0000,
            63,
            64,
            32,
            0xffff_ffff_ffff_fff9,
        ]),
        (0u64..300),
    ]
}

fn raw_strategy() -> impl Strategy<Value = Raw> {
    ((0u8..12, 0u8..13, any::<bool>(), any::<bool>(), any::<bool>()), (0u8..10, 0u8..10, imm_strategy(), any::<u8>(), 0u16..8)).prop_map(
        |((kind, op, wide, use_reg, signed), (dst, src, imm, sel, skip))| Raw { kind, op, wide, use_reg, signed, dst, src, imm, sel, skip },
    )
}

/// Encodes the body: `raws[i]` at slot `i` of a body of `n` slots; jumps go forward to at most
/// the first slot after the body.
fn encode(raws: &[Raw]) -> Vec<Insn> {
    let n = raws.len();
    let mut out = Vec::with_capacity(n);
    for (i, r) in raws.iter().enumerate() {
        let max_skip = (n - i - 1) as u16;
        let skip = r.skip.min(max_skip) as i16;
        let class_alu = if r.wide { BPF_ALU64 } else { BPF_ALU };
        let insn = match r.kind {
            0..=5 => {
                let op = ALU_OPS[r.op as usize % ALU_OPS.len()];
                let off = (r.signed && matches!(op, BPF_DIV | BPF_MOD)) as i16;
                let width = if r.wide { 64 } else { 32 };
                if op == BPF_NEG {
                    Insn::new(class_alu | op, r.dst, 0, 0, 0)
                } else if r.use_reg {
                    Insn::new(class_alu | op | BPF_X, r.dst, r.src, off, 0)
                } else {
                    // What the verifier accepts: constant shifts below the width, constant
                    // divisors other than 0 (the register forms cover the rest at run time).
                    let imm = match op {
                        BPF_LSH | BPF_RSH | BPF_ARSH => r.imm.rem_euclid(width),
                        BPF_DIV | BPF_MOD if r.imm == 0 => 1,
                        _ => r.imm,
                    };
                    Insn::new(class_alu | op | BPF_K, r.dst, 0, off, imm)
                }
            }
            6 => {
                if r.wide {
                    movsx64(r.dst, r.src, [8, 16, 32][r.sel as usize % 3])
                } else {
                    movsx32(r.dst, r.src, [8, 16][r.sel as usize % 2])
                }
            }
            7 => {
                let bits = [16, 32, 64][r.sel as usize % 3];
                match r.sel / 3 % 3 {
                    0 => be(r.dst, bits),
                    1 => le(r.dst, bits),
                    _ => bswap(r.dst, bits),
                }
            }
            8 | 9 => {
                let op = JMP_OPS[r.op as usize % JMP_OPS.len()];
                let class = if r.wide { BPF_JMP } else { BPF_JMP32 };
                if r.use_reg {
                    Insn::new(class | op | BPF_X, r.dst, r.src, skip, 0)
                } else {
                    Insn::new(class | op | BPF_K, r.dst, 0, skip, r.imm)
                }
            }
            // Unconditional jumps skip nothing: skipped slots would be dead code, which the
            // verifier refuses.
            10 => {
                if r.wide {
                    ja(0)
                } else {
                    gotol(0)
                }
            }
            _ => mov64_imm(r.dst, r.imm),
        };
        out.push(insn);
    }
    out
}

fn program(init: &[u64], raws: &[Raw]) -> Vec<Insn> {
    let mut p = Vec::new();
    for (r, &v) in init.iter().enumerate() {
        p.extend_from_slice(&lddw(r as u8, v));
    }
    p.extend(encode(raws));
    // r0 = fold(r0..r9)
    for r in 1..10 {
        p.push(alu64_imm(BPF_MUL, 0, 0x2f));
        p.push(alu64_reg(BPF_XOR, 0, r));
    }
    p.push(exit());
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_alu_jmp_programs_agree(
        init in prop::collection::vec(val_strategy(), 10),
        raws in prop::collection::vec(raw_strategy(), 1..60),
    ) {
        let p = program(&init, &raws);
        // `same` asserts identical results, buffers and env in both engines.
        same(p);
    }
}

/// A few long programs (hundreds of instructions, many blocks).
#[test]
fn long_random_programs_agree() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for _ in 0..8 {
        let init = prop::collection::vec(val_strategy(), 10).new_tree(&mut runner).unwrap().current();
        let raws = prop::collection::vec(raw_strategy(), 400..600).new_tree(&mut runner).unwrap().current();
        same(program(&init, &raws));
    }
}
