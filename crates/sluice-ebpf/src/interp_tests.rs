//! Hand-assembled programs exercising every instruction class, atomics, calls, faults and the
//! XDP helpers' bounds.

use std::sync::Arc;

use super::*;
use crate::asm::*;
use crate::env::NullEnv;
use crate::helpers::id as hid;
use crate::maps::Maps;
use crate::program::{map_type, MapDef, Program};
use crate::state::RunErrorKind as K;
use crate::xdp::{LowMem, RedirectTarget, XdpBuff, XDP_FRAME_RESERVED};

const HEADROOM: usize = 256;
const FRAME: usize = 2048;

fn prog(insns: Vec<Insn>, maps: &[MapDef]) -> Arc<Program> {
    Arc::new(Program { name: "t".into(), section: "xdp".into(), insns, maps: maps.to_vec() })
}

fn flat(parts: &[&[Insn]]) -> Vec<Insn> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

struct Run {
    result: Result<(RunOutcome, u64), RunError>,
    data: usize,
    data_end: usize,
    data_meta: usize,
    frame: Vec<u8>,
    env: NullEnv,
}

fn run_with(insns: Vec<Insn>, defs: &[MapDef], maps: Arc<Maps>, pkt: &[u8]) -> Run {
    let interp = Interpreter::new(prog(insns, defs), maps).expect("interpreter");
    let mut mem = LowMem::new(FRAME).unwrap();
    let frame = &mut mem.as_mut_slice()[..FRAME];
    frame[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
    let mut xdp = XdpBuff::new(frame, HEADROOM, pkt.len());
    xdp.ingress_ifindex = 3;
    xdp.rx_queue_index = 1;
    let mut env = NullEnv::new();
    let result = interp.run_full(&mut xdp, &mut env);
    Run { result, data: xdp.data, data_end: xdp.data_end, data_meta: xdp.data_meta, frame: xdp.frame.to_vec(), env }
}

fn run(insns: Vec<Insn>, pkt: &[u8]) -> Run {
    run_with(insns, &[], Arc::new(Maps::empty(1)), pkt)
}

fn r0(insns: Vec<Insn>) -> u64 {
    match run(insns, &[0u8; 64]).result {
        Ok((_, r0)) => r0,
        Err(e) => panic!("run failed: {e}"),
    }
}

fn err(insns: Vec<Insn>) -> RunErrorKind {
    match run(insns, &[0u8; 64]).result {
        Ok((_, r0)) => panic!("expected an error, got r0 = {r0:#x}"),
        Err(e) => e.kind,
    }
}

/// r0 = a; r1 = b; r0 <op>= r1 (64-bit); exit
fn alu64(op: u8, a: u64, b: u64) -> u64 {
    r0(flat(&[&lddw(0, a), &lddw(1, b), &[alu64_reg(op, 0, 1), exit()]]))
}

fn alu32(op: u8, a: u64, b: u64) -> u64 {
    r0(flat(&[&lddw(0, a), &lddw(1, b), &[alu32_reg(op, 0, 1), exit()]]))
}

#[test]
fn alu64_ops() {
    assert_eq!(alu64(BPF_ADD, u64::MAX, 2), 1);
    assert_eq!(alu64(BPF_SUB, 1, 2), u64::MAX);
    assert_eq!(alu64(BPF_MUL, 1 << 40, 1 << 30), 0);
    assert_eq!(alu64(BPF_MUL, 7, 6), 42);
    assert_eq!(alu64(BPF_DIV, 100, 7), 14);
    assert_eq!(alu64(BPF_DIV, 100, 0), 0);
    assert_eq!(alu64(BPF_MOD, 100, 7), 2);
    assert_eq!(alu64(BPF_MOD, 100, 0), 100);
    assert_eq!(alu64(BPF_OR, 0xf0, 0x0f), 0xff);
    assert_eq!(alu64(BPF_AND, 0xf0, 0x3c), 0x30);
    assert_eq!(alu64(BPF_XOR, 0xff, 0x0f), 0xf0);
    assert_eq!(alu64(BPF_LSH, 1, 65), 2, "shift amount masked to 6 bits");
    assert_eq!(alu64(BPF_RSH, 1 << 63, 63), 1);
    assert_eq!(alu64(BPF_ARSH, 1 << 63, 63), u64::MAX);
    assert_eq!(alu64(BPF_MOV, 5, 9), 9);
    assert_eq!(r0(vec![mov64_imm(0, 5), alu64_imm(BPF_NEG, 0, 0), exit()]), (-5i64) as u64);
    // Immediate operands are sign-extended to 64 bits.
    assert_eq!(r0(vec![mov64_imm(0, 1), alu64_imm(BPF_ADD, 0, -2), exit()]), u64::MAX);
    assert_eq!(r0(vec![mov64_imm(0, -1), exit()]), u64::MAX);
    assert_eq!(r0(flat(&[&lddw(0, 0x1234_5678_9abc_def0), &[exit()]])), 0x1234_5678_9abc_def0);
}

#[test]
fn signed_div_mod() {
    let sdiv = |a: i64, b: i64, op: u8| r0(flat(&[&lddw(0, a as u64), &lddw(1, b as u64), &[sdiv64_reg(op, 0, 1), exit()]])) as i64;
    assert_eq!(sdiv(-7, 2, BPF_DIV), -3);
    assert_eq!(sdiv(7, -2, BPF_DIV), -3);
    assert_eq!(sdiv(-7, 2, BPF_MOD), -1);
    assert_eq!(sdiv(7, -2, BPF_MOD), 1);
    assert_eq!(sdiv(i64::MIN, -1, BPF_DIV), i64::MIN);
    assert_eq!(sdiv(i64::MIN, -1, BPF_MOD), 0);
    assert_eq!(sdiv(-7, 0, BPF_DIV), 0);
    assert_eq!(sdiv(-7, 0, BPF_MOD), -7);
    // 32-bit signed, immediate.
    let s32 = |a: i32, imm: i32, op: u8| r0(vec![mov32_imm(0, a), sdiv32_imm(op, 0, imm), exit()]);
    assert_eq!(s32(-7, 2, BPF_DIV), (-3i32) as u32 as u64);
    assert_eq!(s32(-7, 2, BPF_MOD), (-1i32) as u32 as u64);
    assert_eq!(s32(i32::MIN, -1, BPF_DIV), i32::MIN as u32 as u64);
    assert_eq!(s32(i32::MIN, -1, BPF_MOD), 0);
    assert_eq!(s32(-7, 0, BPF_MOD), (-7i32) as u32 as u64);
    // Invalid offset on div.
    assert!(matches!(err(vec![mov64_imm(0, 1), Insn::new(BPF_ALU64 | BPF_DIV | BPF_K, 0, 0, 2, 1), exit()]), K::InvalidInstruction { .. }));
}

#[test]
fn alu32_ops_zero_extend() {
    assert_eq!(alu32(BPF_ADD, 0xffff_ffff_ffff_ffff, 2), 1);
    assert_eq!(alu32(BPF_SUB, 0xdead_0000_0000_0001, 2), 0xffff_ffff);
    assert_eq!(alu32(BPF_MUL, 0x1_0000_0003, 3), 9);
    assert_eq!(alu32(BPF_DIV, 0x1_0000_0064, 7), 14);
    assert_eq!(alu32(BPF_DIV, 5, 0x1_0000_0000), 0, "divisor is the low 32 bits (0)");
    assert_eq!(alu32(BPF_MOD, 0xffff_ffff_0000_0064, 0), 0x64, "mod by 0 keeps the low half");
    assert_eq!(alu32(BPF_LSH, 1, 33), 2);
    assert_eq!(alu32(BPF_RSH, 0x8000_0000, 31), 1);
    assert_eq!(alu32(BPF_ARSH, 0x8000_0000, 31), 0xffff_ffff);
    assert_eq!(alu32(BPF_MOV, 0x1234, 0xffff_ffff_8000_0000), 0x8000_0000);
    assert_eq!(alu32(BPF_XOR, 0xffff_ffff_ffff_ffff, 0), 0xffff_ffff);
    assert_eq!(r0(vec![mov32_imm(0, 5), alu32_imm(BPF_NEG, 0, 0), exit()]), 0xffff_fffb);
    assert_eq!(r0(vec![mov32_imm(0, -1), exit()]), 0xffff_ffff);
}

#[test]
fn movsx_and_byte_swaps() {
    let v = 0x1122_3344_5566_8788u64;
    let mv = |ins: Insn| r0(flat(&[&lddw(1, v), &[ins, exit()]]));
    assert_eq!(mv(movsx64(0, 1, 8)), 0xffff_ffff_ffff_ff88);
    assert_eq!(mv(movsx64(0, 1, 16)), 0xffff_ffff_ffff_8788);
    assert_eq!(mv(movsx64(0, 1, 32)), 0x5566_8788);
    assert_eq!(mv(movsx32(0, 1, 8)), 0xffff_ff88);
    assert_eq!(mv(movsx32(0, 1, 16)), 0xffff_8788);
    let sw = |ins: Insn| r0(flat(&[&lddw(0, v), &[ins, exit()]]));
    assert_eq!(sw(be(0, 16)), 0x8887);
    assert_eq!(sw(be(0, 32)), 0x8887_6655);
    assert_eq!(sw(be(0, 64)), 0x8887_6655_4433_2211);
    assert_eq!(sw(le(0, 16)), 0x8788);
    assert_eq!(sw(le(0, 32)), 0x5566_8788);
    assert_eq!(sw(le(0, 64)), v);
    assert_eq!(sw(bswap(0, 16)), 0x8887);
    assert_eq!(sw(bswap(0, 32)), 0x8887_6655);
    assert_eq!(sw(bswap(0, 64)), 0x8887_6655_4433_2211);
    assert!(matches!(err(vec![le(0, 8), exit()]), K::InvalidInstruction { .. }));
    assert!(matches!(err(vec![movsx64(0, 1, 4), exit()]), K::InvalidInstruction { .. }));
}

fn taken(j: Insn, a: u64, b: u64) -> bool {
    r0(flat(&[&lddw(1, a), &lddw(2, b), &[mov64_imm(0, 0), j, exit(), mov64_imm(0, 1), exit()]])) == 1
}

#[test]
fn conditional_jumps() {
    let big = 0xffff_ffff_ffff_fff0u64; // negative when signed
    let cases: &[(u8, u64, u64, bool)] = &[
        (BPF_JEQ, 5, 5, true),
        (BPF_JEQ, 5, 6, false),
        (BPF_JNE, 5, 6, true),
        (BPF_JGT, big, 1, true),
        (BPF_JGT, 1, 1, false),
        (BPF_JGE, 1, 1, true),
        (BPF_JLT, 1, big, true),
        (BPF_JLE, 2, 1, false),
        (BPF_JSET, 6, 2, true),
        (BPF_JSET, 4, 2, false),
        (BPF_JSGT, big, 1, false),
        (BPF_JSGT, 1, big, true),
        (BPF_JSGE, big, big, true),
        (BPF_JSLT, big, 1, true),
        (BPF_JSLE, 1, big, false),
    ];
    for &(op, a, b, want) in cases {
        assert_eq!(taken(jmp_reg(op, 1, 2, 1), a, b), want, "jmp op {op:#x} {a:#x} {b:#x}");
    }
    // 32-bit compares look at the low halves only.
    let cases32: &[(u8, u64, u64, bool)] = &[
        (BPF_JEQ, 0x1_0000_0005, 5, true),
        (BPF_JGT, 0x0_8000_0000, 1, true),
        (BPF_JSGT, 0x0_8000_0000, 1, false),
        (BPF_JSLT, 0x7_ffff_fffe, 0, true),
        (BPF_JLE, 0xffff_ffff_0000_0000, 0, true),
        (BPF_JSET, 0x1_0000_0000, 0x1_0000_0000, false),
        (BPF_JNE, 0x1_0000_0000, 0, false),
        (BPF_JSGE, 0, 0xffff_ffff, true),
        (BPF_JLT, 0, 0xffff_ffff, true),
        (BPF_JGE, 3, 3, true),
        (BPF_JSLE, 0xffff_ffff, 0, true),
    ];
    for &(op, a, b, want) in cases32 {
        assert_eq!(taken(jmp32_reg(op, 1, 2, 1), a, b), want, "jmp32 op {op:#x} {a:#x} {b:#x}");
    }
    // Immediates: sign-extended for JMP, as u32 for JMP32.
    assert!(taken(jmp_imm(BPF_JEQ, 1, -1, 1), u64::MAX, 0));
    assert!(!taken(jmp_imm(BPF_JEQ, 1, -1, 1), 0xffff_ffff, 0));
    assert!(taken(jmp32_imm(BPF_JEQ, 1, -1, 1), 0xffff_ffff, 0));
    assert!(taken(jmp_imm(BPF_JSLT, 1, 0, 1), u64::MAX, 0));
}

#[test]
fn unconditional_jumps() {
    assert_eq!(r0(vec![mov64_imm(0, 1), ja(1), mov64_imm(0, 2), exit()]), 1);
    assert_eq!(r0(vec![mov64_imm(0, 1), gotol(1), mov64_imm(0, 2), exit()]), 1);
    // Backward jump: a counted loop.
    assert_eq!(
        r0(
            vec![mov64_imm(0, 0), mov64_imm(1, 10), alu64_imm(BPF_ADD, 0, 3), alu64_imm(BPF_SUB, 1, 1), jmp_imm(BPF_JNE, 1, 0, -3), exit(),]
        ),
        30
    );
    assert_eq!(err(vec![ja(5), exit()]), K::PcOutOfRange);
    assert_eq!(err(vec![ja(-3), exit()]), K::PcOutOfRange);
    assert_eq!(err(vec![mov64_imm(0, 1)]), K::PcOutOfRange);
}

#[test]
fn loads_and_stores_all_sizes() {
    // Store with ST and STX of every size on the stack, load them back.
    let p = vec![
        st(BPF_DW, 10, -8, -2), // 0xffff_ffff_ffff_fffe
        st(BPF_W, 10, -12, 0x1234_5678),
        st(BPF_H, 10, -14, 0x9abc),
        st(BPF_B, 10, -15, 0xde),
        ldx(BPF_DW, 0, 10, -8),
        ldx(BPF_W, 1, 10, -12),
        alu64_reg(BPF_ADD, 0, 1),
        ldx(BPF_H, 1, 10, -14),
        alu64_reg(BPF_ADD, 0, 1),
        ldx(BPF_B, 1, 10, -15),
        alu64_reg(BPF_ADD, 0, 1),
        exit(),
    ];
    assert_eq!(r0(p), 0xffff_ffff_ffff_fffeu64.wrapping_add(0x1234_5678 + 0x9abc + 0xde));
    let p = flat(&[
        &lddw(1, 0x8182_8384_8586_8788),
        &[
            stx(BPF_DW, 10, 1, -16),
            ldx(BPF_W, 0, 10, -16),
            stx(BPF_B, 10, 1, -1),
            ldx(BPF_B, 2, 10, -1),
            alu64_imm(BPF_LSH, 2, 32),
            alu64_reg(BPF_OR, 0, 2),
            exit(),
        ],
    ]);
    assert_eq!(r0(p), 0x88_8586_8788);
    // Unaligned stack access is fine.
    assert_eq!(r0(vec![st(BPF_W, 10, -7, 0x01020304), ldx(BPF_H, 0, 10, -6), exit()]), 0x0203);
}

#[test]
fn sign_extending_loads() {
    let p = |size: u8| r0(flat(&[&lddw(1, 0x8081_8283_8485_8687), &[stx(BPF_DW, 10, 1, -8), ldxsx(size, 0, 10, -8), exit()]]));
    assert_eq!(p(BPF_B), 0xffff_ffff_ffff_ff87);
    assert_eq!(p(BPF_H), 0xffff_ffff_ffff_8687);
    assert_eq!(p(BPF_W), 0xffff_ffff_8485_8687);
    assert!(matches!(err(vec![ldxsx(BPF_DW, 0, 10, -8), exit()]), K::InvalidInstruction { .. }));
}

#[test]
fn reads_context_and_packet() {
    let pkt: Vec<u8> = (0..64u8).collect();
    let r = run(
        vec![
            ldx(BPF_W, 2, 1, 0), // data
            ldx(BPF_W, 3, 1, 4), // data_end
            mov64_reg(0, 3),
            alu64_reg(BPF_SUB, 0, 2), // len
            ldx(BPF_B, 4, 2, 10),     // pkt[10]
            alu64_imm(BPF_LSH, 4, 8),
            alu64_reg(BPF_OR, 0, 4),
            ldx(BPF_W, 5, 1, 12), // ingress_ifindex
            alu64_imm(BPF_LSH, 5, 16),
            alu64_reg(BPF_OR, 0, 5),
            ldx(BPF_W, 5, 1, 16), // rx_queue_index
            alu64_imm(BPF_LSH, 5, 24),
            alu64_reg(BPF_OR, 0, 5),
            ldx(BPF_B, 5, 2, 63), // last byte
            alu64_imm(BPF_LSH, 5, 32),
            alu64_reg(BPF_OR, 0, 5),
            exit(),
        ],
        &pkt,
    );
    let (_, r0) = r.result.unwrap();
    assert_eq!(r0, 64 | (10 << 8) | (3 << 16) | (1 << 24) | (63 << 32));
    // Writing the packet is fine and visible afterwards.
    let r = run(vec![ldx(BPF_W, 2, 1, 0), st(BPF_H, 2, 2, 0x4242), mov64_imm(0, 2), exit()], &pkt);
    assert_eq!(r.result.unwrap().0.action, XDP_PASS);
    assert_eq!(&r.frame[HEADROOM..HEADROOM + 5], &[0, 1, 0x42, 0x42, 4]);
}

#[test]
fn memory_faults_are_errors() {
    let pkt = [0u8; 64];
    let e = |insns: Vec<Insn>| run(insns, &pkt).result.unwrap_err().kind;
    // One byte past data_end.
    assert!(matches!(e(vec![ldx(BPF_W, 2, 1, 0), ldx(BPF_B, 0, 2, 64), exit()]), K::MemoryFault { len: 1, write: false, .. }));
    // A 4-byte read straddling data_end.
    assert!(matches!(e(vec![ldx(BPF_W, 2, 1, 0), ldx(BPF_W, 0, 2, 62), exit()]), K::MemoryFault { len: 4, .. }));
    // Headroom before data is not part of the packet.
    assert!(matches!(e(vec![ldx(BPF_W, 2, 1, 0), ldx(BPF_B, 0, 2, -1), exit()]), K::MemoryFault { .. }));
    // Writing the context.
    assert!(matches!(e(vec![st(BPF_W, 1, 0, 0), exit()]), K::MemoryFault { write: true, .. }));
    // Reading past the context.
    assert!(matches!(e(vec![ldx(BPF_W, 0, 1, 24), exit()]), K::MemoryFault { .. }));
    // Above the frame pointer and below frame 0.
    assert!(matches!(e(vec![ldx(BPF_B, 0, 10, 0), exit()]), K::MemoryFault { .. }));
    assert!(matches!(e(vec![ldx(BPF_B, 0, 10, -513), exit()]), K::MemoryFault { .. }));
    // NULL and wild pointers.
    assert!(matches!(e(vec![mov64_imm(1, 0), ldx(BPF_DW, 0, 1, 0), exit()]), K::MemoryFault { .. }));
    assert!(matches!(e(flat(&[&lddw(1, u64::MAX - 2), &[ldx(BPF_DW, 0, 1, 0), exit()]])), K::MemoryFault { .. }));
    // Writing r10, bad registers, bad opcodes.
    assert!(matches!(e(vec![mov64_imm(10, 0), exit()]), K::InvalidInstruction { .. }));
    assert!(matches!(e(vec![Insn::new(0xb7, 11, 0, 0, 0), exit()]), K::InvalidInstruction { .. }));
    assert!(matches!(e(vec![Insn::new(0xff, 0, 0, 0, 0)]), K::InvalidInstruction { .. }));
    assert!(matches!(e(vec![Insn::new(0x20, 0, 0, 0, 0), exit()]), K::InvalidInstruction { .. })); // LD_ABS
    assert!(matches!(e(vec![Insn::new(0x18, 0, 0, 0, 0)]), K::PcOutOfRange)); // truncated lddw
    assert!(matches!(e(vec![call(9999), exit()]), K::UnknownHelper { id: 9999 }));
    assert!(matches!(e(vec![Insn::new(BPF_JMP | BPF_CALL, 0, 2, 0, 5), exit()]), K::Unsupported(_)));
}

#[test]
fn budget_stops_infinite_loops() {
    let p = prog(vec![ja(-1), exit()], &[]);
    let config = RunConfig { insn_budget: 10_000, ..RunConfig::default() };
    let interp = Interpreter::with_config(p, Arc::new(Maps::empty(1)), config).unwrap();
    let mut mem = LowMem::new(4096).unwrap();
    let mut xdp = XdpBuff::new(mem.as_mut_slice(), 256, 64);
    let e = interp.run(&mut xdp, &mut NullEnv::new()).unwrap_err();
    assert_eq!(e.kind, K::BudgetExceeded { budget: 10_000 });
    assert_eq!(e.pc, 0);
}

#[test]
fn bpf_to_bpf_calls() {
    // main: r6 = 100; r1 = 5; [r10-8] = 11; call f; r0 += r6; r0 += [r10-8]; exit
    // f:    r6 = 7 (callee-saved: restored on return); r0 = r1 * 2; [r10-8] = 99 (own frame)
    let p = vec![
        mov64_imm(6, 100),
        mov64_imm(1, 5),
        st(BPF_DW, 10, -8, 11),
        call_local(4),
        alu64_reg(BPF_ADD, 0, 6),
        ldx(BPF_DW, 1, 10, -8),
        alu64_reg(BPF_ADD, 0, 1),
        exit(),
        mov64_imm(6, 7),
        mov64_reg(0, 1),
        alu64_imm(BPF_MUL, 0, 2),
        st(BPF_DW, 10, -8, 99),
        exit(),
    ];
    assert_eq!(r0(p), 10 + 100 + 11);
}

#[test]
fn calls_pass_stack_pointers_and_limit_depth() {
    // The callee writes through a pointer into the caller's frame.
    let p = vec![
        mov64_reg(1, 10),
        alu64_imm(BPF_ADD, 1, -8),
        st(BPF_DW, 10, -8, 0),
        call_local(2),
        ldx(BPF_DW, 0, 10, -8),
        exit(),
        st(BPF_DW, 1, 0, 1234),
        exit(),
    ];
    assert_eq!(r0(p), 1234);
    // Unbounded recursion stops at 8 frames.
    assert_eq!(err(vec![call_local(-1), exit()]), K::CallDepthExceeded { max: 8 });
    // 7 nested calls are fine (8 frames): f(n) = n == 0 ? 0 : 1 + f(n - 1), main calls f(6).
    let rec = |n: i32| {
        vec![
            mov64_imm(1, n),
            call_local(1),
            exit(),
            // f:
            mov64_imm(0, 0),
            jmp_imm(BPF_JEQ, 1, 0, 4),
            mov64_reg(6, 1),
            alu64_imm(BPF_SUB, 1, 1),
            call_local(-5),
            alu64_imm(BPF_ADD, 0, 1),
            exit(),
        ]
    };
    assert_eq!(r0(rec(6)), 6);
    assert_eq!(err(rec(7)), K::CallDepthExceeded { max: 8 });
    let p = vec![
        mov64_imm(1, 6),
        call_local(1),
        exit(),
        // f:
        mov64_imm(0, 0),
        jmp_imm(BPF_JEQ, 1, 0, 4),
        mov64_reg(6, 1),
        alu64_imm(BPF_SUB, 1, 1),
        call_local(-5),
        alu64_imm(BPF_ADD, 0, 1),
        exit(),
    ];
    assert_eq!(r0(p), 6);
    // Every frame has its own 512 bytes: frame 1's r10 is 512 below frame 0's.
    // r6 (callee-saved) keeps the caller's r10; the callee returns its own r10.
    let p = vec![mov64_reg(6, 10), call_local(3), alu64_reg(BPF_SUB, 6, 0), mov64_reg(0, 6), exit(), mov64_reg(0, 10), exit()];
    assert_eq!(r0(p), 512);
}

fn array_def(name: &str, vs: u32, n: u32, flags: u32) -> MapDef {
    MapDef::new(name, map_type::ARRAY, 4, vs, n).with_flags(flags)
}

fn maps_of(defs: &[MapDef], ncpus: u32) -> Arc<Maps> {
    Arc::new(Maps::new(defs, ncpus).unwrap())
}

#[test]
fn atomics_on_stack_and_map() {
    let defs = [array_def("g", 16, 1, 0)];
    let maps = maps_of(&defs, 1);
    // On a global (map value): add, fetch_add, or, and, xor, xchg, cmpxchg (64 and 32 bit).
    let p = flat(&[
        &lddw_map_value(6, 0, 0),
        &[
            st(BPF_DW, 6, 0, 10),
            mov64_imm(1, 5),
            atomic(BPF_DW, BPF_ADD as i32, 6, 1, 0), // 15
            mov64_imm(2, 1),
            atomic(BPF_DW, BPF_ADD as i32 | BPF_FETCH, 6, 2, 0), // r2 = 15, mem 16
            mov64_imm(3, 0x100),
            atomic(BPF_DW, BPF_OR as i32 | BPF_FETCH, 6, 3, 0), // r3 = 16, mem 0x110
            mov64_imm(4, 0x1f0),
            atomic(BPF_DW, BPF_AND as i32, 6, 4, 0), // mem 0x110
            mov64_imm(5, 0x11),
            atomic(BPF_DW, BPF_XOR as i32, 6, 5, 0), // mem 0x101
            mov64_imm(7, 9),
            atomic(BPF_DW, BPF_XCHG, 6, 7, 0), // r7 = 0x101, mem 9
            mov64_imm(0, 8),
            mov64_imm(8, 50),
            atomic(BPF_DW, BPF_CMPXCHG, 6, 8, 0), // fails: r0 = 9, mem 9
            atomic(BPF_DW, BPF_CMPXCHG, 6, 8, 0), // succeeds: r0 = 9, mem 50
            // 32-bit at offset 8.
            st(BPF_W, 6, 8, -1),
            mov64_imm(9, 1),
            atomic(BPF_W, BPF_ADD as i32 | BPF_FETCH, 6, 9, 8), // r9 = 0xffffffff zero-extended, mem 0
            // combine: r0 = mem64 + r2 + r3 + r7 + r9
            ldx(BPF_DW, 0, 6, 0),
            alu64_reg(BPF_ADD, 0, 2),
            alu64_reg(BPF_ADD, 0, 3),
            alu64_reg(BPF_ADD, 0, 7),
            alu64_reg(BPF_ADD, 0, 9),
            exit(),
        ],
    ]);
    let r = run_with(p, &defs, maps.clone(), &[0; 64]);
    let (_, v) = r.result.unwrap();
    assert_eq!(v, 50 + 15 + 16 + 0x101 + 0xffff_ffff);
    let val = maps.get(0).unwrap().lookup(&0u32.to_le_bytes(), 0).unwrap();
    assert_eq!(u64::from_le_bytes(val[0..8].try_into().unwrap()), 50);
    assert_eq!(u32::from_le_bytes(val[8..12].try_into().unwrap()), 0);

    // On the stack, 32-bit cmpxchg compares the low half of r0.
    let p = flat(&[
        &lddw(0, 0xffff_ffff_0000_0007),
        &[
            st(BPF_W, 10, -4, 7),
            mov64_imm(1, 8),
            atomic(BPF_W, BPF_CMPXCHG, 10, 1, -4),
            ldx(BPF_W, 2, 10, -4),
            alu64_imm(BPF_LSH, 2, 32),
            alu64_reg(BPF_OR, 0, 2),
            exit(),
        ],
    ]);
    assert_eq!(r0(p), (8 << 32) | 7);

    // Misaligned atomics and atomics on packet memory are refused.
    assert!(matches!(err(vec![mov64_imm(1, 1), atomic(BPF_DW, BPF_ADD as i32, 10, 1, -12), exit()]), K::MisalignedAtomic { .. }));
    assert!(matches!(
        err(vec![ldx(BPF_W, 2, 1, 0), mov64_imm(1, 1), atomic(BPF_W, BPF_ADD as i32, 2, 1, 0), exit()]),
        K::AtomicNotAllowed { .. }
    ));
    assert!(matches!(err(vec![mov64_imm(1, 1), atomic(BPF_B, BPF_ADD as i32, 10, 1, -1), exit()]), K::InvalidInstruction { .. }));
    assert!(matches!(err(vec![mov64_imm(1, 1), atomic(BPF_DW, 0x30, 10, 1, -8), exit()]), K::InvalidInstruction { .. }));
    // load-acquire / store-release.
    assert_eq!(
        r0(vec![mov64_imm(1, 0x55), atomic(BPF_H, BPF_STORE_REL, 10, 1, -2), atomic(BPF_H, BPF_LOAD_ACQ, 0, 10, -2), exit(),]),
        0x55
    );
}

#[test]
fn globals_rodata_is_read_only() {
    let defs = [array_def(".rodata", 8, 1, crate::maps::BPF_F_RDONLY_PROG)];
    let maps = maps_of(&defs, 1);
    maps.get(0).unwrap().update(&0u32.to_le_bytes(), &77u64.to_le_bytes(), 0).unwrap();
    let rd = flat(&[&lddw_map_value(1, 0, 0), &[ldx(BPF_DW, 0, 1, 0), exit()]]);
    assert_eq!(run_with(rd, &defs, maps.clone(), &[0; 64]).result.unwrap().1, 77);
    let wr = flat(&[&lddw_map_value(1, 0, 4), &[st(BPF_W, 1, 0, 1), exit()]]);
    assert!(matches!(run_with(wr, &defs, maps.clone(), &[0; 64]).result.unwrap_err().kind, K::MemoryFault { write: true, .. }));
    // Offsets outside the value are refused when preparing the program.
    let bad = flat(&[&lddw_map_value(1, 0, 8), &[exit()]]);
    assert!(Interpreter::new(prog(bad, &defs), maps.clone()).is_err());
    let bad = flat(&[&lddw_map(1, 3), &[exit()]]);
    assert!(Interpreter::new(prog(bad, &defs), maps).is_err());
}

#[test]
fn map_helpers() {
    let defs = [MapDef::new("h", map_type::HASH, 4, 8, 4), array_def("a", 8, 4, 0)];
    let maps = maps_of(&defs, 1);
    // update(h, key=7, value=42); v = lookup(h, 7); *v += 1; delete(h, 8) -> -ENOENT;
    // return *v + (delete result << 32)
    let p = flat(&[
        &[st(BPF_W, 10, -4, 7), st(BPF_DW, 10, -16, 42)],
        &lddw_map(1, 0),
        &[
            mov64_reg(2, 10),
            alu64_imm(BPF_ADD, 2, -4),
            mov64_reg(3, 10),
            alu64_imm(BPF_ADD, 3, -16),
            mov64_imm(4, 0),
            call(hid::MAP_UPDATE_ELEM),
        ],
        &lddw_map(1, 0),
        &[mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -4), call(hid::MAP_LOOKUP_ELEM)],
        &[jmp_imm(BPF_JEQ, 0, 0, 100)],
        &[ldx(BPF_DW, 6, 0, 0), alu64_imm(BPF_ADD, 6, 1), stx(BPF_DW, 0, 6, 0)],
        &[st(BPF_W, 10, -8, 8)],
        &lddw_map(1, 0),
        &[mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -8), call(hid::MAP_DELETE_ELEM)],
        &[alu64_imm(BPF_LSH, 0, 32), alu64_reg(BPF_OR, 0, 6), exit()],
    ]);
    // Make the "not found" branch target valid.
    let mut p = p;
    let n = p.len();
    for (i, ins) in p.iter_mut().enumerate() {
        if ins.code == (BPF_JMP | BPF_JEQ | BPF_K) && ins.off == 100 {
            ins.off = (n - i - 2) as i16;
        }
    }
    let r = run_with(p, &defs, maps.clone(), &[0; 64]);
    let (_, v) = r.result.unwrap();
    assert_eq!(v as u32, 43);
    assert_eq!((v >> 32) as i32, -libc::ENOENT);
    assert_eq!(maps.get(0).unwrap().lookup(&7u32.to_le_bytes(), 0), Some(43u64.to_le_bytes().to_vec()));

    // A key pointer outside the allowed memory is a fault, not a crash.
    let p = flat(&[&lddw_map(1, 0), &[mov64_imm(2, 16), call(hid::MAP_LOOKUP_ELEM), exit()]]);
    assert!(matches!(run_with(p, &defs, maps.clone(), &[0; 64]).result.unwrap_err().kind, K::HelperFault { helper: 1, .. }));
    // Not a map handle.
    let p = vec![mov64_reg(1, 10), mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -4), call(1), exit()];
    assert!(matches!(
        run_with(p, &defs, maps.clone(), &[0; 64]).result.unwrap_err().kind,
        K::HelperFault { helper: 1, fault: crate::state::HelperFault::BadMap }
    ));
    // A key straddling the end of the stack frame.
    let p = flat(&[&lddw_map(1, 0), &[mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -2), call(1), exit()]]);
    assert!(run_with(p, &defs, maps.clone(), &[0; 64]).result.is_err());
    // The key can be in the packet.
    let p = flat(&[
        &[ldx(BPF_W, 6, 1, 0), st(BPF_DW, 10, -8, 5)],
        &lddw_map(1, 1),
        &[
            mov64_reg(2, 6), // key = first 4 packet bytes (= 2)
            mov64_reg(3, 10),
            alu64_imm(BPF_ADD, 3, -8),
            mov64_imm(4, 0),
            call(hid::MAP_UPDATE_ELEM),
            exit(),
        ],
    ]);
    let r = run_with(p, &defs, maps.clone(), &[2, 0, 0, 0, 9, 9]);
    assert_eq!(r.result.unwrap().1, 0);
    assert_eq!(maps.get(1).unwrap().lookup(&2u32.to_le_bytes(), 0), Some(5u64.to_le_bytes().to_vec()));
}

#[test]
fn percpu_lookup_uses_env_cpu() {
    let defs = [MapDef::new("pc", map_type::PERCPU_ARRAY, 4, 8, 1)];
    let maps = maps_of(&defs, 4);
    let p = flat(&[
        &[st(BPF_W, 10, -4, 0)],
        &lddw_map(1, 0),
        &[
            mov64_reg(2, 10),
            alu64_imm(BPF_ADD, 2, -4),
            call(hid::MAP_LOOKUP_ELEM),
            jmp_imm(BPF_JEQ, 0, 0, 3),
            mov64_imm(1, 1),
            atomic(BPF_DW, BPF_ADD as i32, 0, 1, 0),
            call(hid::GET_SMP_PROCESSOR_ID),
            exit(),
        ],
    ]);
    let interp = Interpreter::new(prog(p, &defs), maps.clone()).unwrap();
    let mut mem = LowMem::new(4096).unwrap();
    for cpu in [2u32, 2, 3] {
        let mut xdp = XdpBuff::new(mem.as_mut_slice(), 256, 64);
        let out = interp.run_full(&mut xdp, &mut NullEnv::on_cpu(cpu)).unwrap();
        assert_eq!(out.1, cpu as u64);
    }
    let all = maps.get(0).unwrap().lookup_percpu(&0u32.to_le_bytes()).unwrap();
    let counts: Vec<u64> = all.iter().map(|v| u64::from_le_bytes(v[..8].try_into().unwrap())).collect();
    assert_eq!(counts, vec![0, 0, 2, 1]);
    let mut xdp = XdpBuff::new(mem.as_mut_slice(), 256, 64);
    assert_eq!(interp.run(&mut xdp, &mut NullEnv::on_cpu(4)).unwrap_err().kind, K::BadCpu { cpu: 4, ncpus: 4 });
}

/// r0 = helper(ctx, delta); exit — then look at the buffer offsets.
fn adjust(helper: u32, delta: i32, pkt_len: usize) -> Run {
    let pkt: Vec<u8> = (0..pkt_len).map(|i| i as u8).collect();
    run(vec![mov64_imm(2, delta), call(helper), exit()], &pkt)
}

fn rc(r: &Run) -> i64 {
    r.result.as_ref().unwrap().1 as i64
}

#[test]
fn adjust_head_bounds() {
    // Grow the head up to the reserved xdp_frame area.
    let max_push = (HEADROOM - XDP_FRAME_RESERVED) as i32;
    let r = adjust(hid::XDP_ADJUST_HEAD, -max_push, 64);
    assert_eq!(rc(&r), 0);
    assert_eq!(r.data, XDP_FRAME_RESERVED);
    assert_eq!(r.data_meta, r.data);
    assert_eq!(r.data_end, HEADROOM + 64);
    let r = adjust(hid::XDP_ADJUST_HEAD, -max_push - 1, 64);
    assert_eq!(rc(&r), -(libc::EINVAL as i64));
    assert_eq!(r.data, HEADROOM, "offsets unchanged on failure");
    // Shrink down to ETH_HLEN bytes.
    let r = adjust(hid::XDP_ADJUST_HEAD, 50, 64);
    assert_eq!(rc(&r), 0);
    assert_eq!(r.data_end - r.data, 14);
    assert_eq!(r.frame[r.data], 50);
    let r = adjust(hid::XDP_ADJUST_HEAD, 51, 64);
    assert_eq!(rc(&r), -(libc::EINVAL as i64));
    // Not the context pointer.
    let r = run(vec![mov64_reg(1, 10), mov64_imm(2, 4), call(hid::XDP_ADJUST_HEAD), exit()], &[0; 64]);
    assert!(matches!(r.result.unwrap_err().kind, K::HelperFault { helper: 44, .. }));
}

#[test]
fn adjust_meta_bounds_and_head_moves_meta() {
    assert_eq!(rc(&adjust(hid::XDP_ADJUST_META, -32, 64)), 0);
    assert_eq!(rc(&adjust(hid::XDP_ADJUST_META, -36, 64)), 0, "current kernels allow up to 255 bytes");
    let max_meta = (HEADROOM - XDP_FRAME_RESERVED) as i32;
    assert_eq!(rc(&adjust(hid::XDP_ADJUST_META, -max_meta, 64)), 0);
    assert_eq!(rc(&adjust(hid::XDP_ADJUST_META, -max_meta - 4, 64)), -(libc::EINVAL as i64));
    // The legacy 32-byte limit is a configuration.
    let config = RunConfig { meta_max: crate::xdp::XDP_META_MAX_LEGACY, ..RunConfig::default() };
    let interp =
        Interpreter::with_config(prog(vec![mov64_imm(2, -36), call(hid::XDP_ADJUST_META), exit()], &[]), Arc::new(Maps::empty(1)), config)
            .unwrap();
    let mut mem = LowMem::new(4096).unwrap();
    let mut xdp = XdpBuff::new(mem.as_mut_slice(), 256, 64);
    assert_eq!(interp.run_full(&mut xdp, &mut NullEnv::new()).unwrap().1 as i64, -(libc::EACCES as i64));
    assert_eq!(rc(&adjust(hid::XDP_ADJUST_META, -6, 64)), -(libc::EACCES as i64));
    assert_eq!(rc(&adjust(hid::XDP_ADJUST_META, 4, 64)), -(libc::EINVAL as i64));
    let r = adjust(hid::XDP_ADJUST_META, -8, 64);
    assert_eq!((r.data_meta, r.data), (HEADROOM - 8, HEADROOM));
    // meta must stay above the reserved area.
    let p = vec![
        mov64_reg(6, 1),
        mov64_imm(2, -(HEADROOM as i32 - XDP_FRAME_RESERVED as i32)),
        call(hid::XDP_ADJUST_HEAD),
        mov64_reg(1, 6),
        mov64_imm(2, -4),
        call(hid::XDP_ADJUST_META),
        exit(),
    ];
    assert_eq!(rc(&run(p, &[0; 64])), -(libc::EINVAL as i64));
    // With 8 bytes of metadata written, adjust_head(-10) moves it along; the head can then no
    // longer reach the reserved area + metadata.
    let p = vec![
        mov64_reg(6, 1),
        mov64_imm(2, -8),
        call(hid::XDP_ADJUST_META),
        ldx(BPF_W, 3, 6, 8), // data_meta
        st(BPF_W, 3, 0, 0x11223344),
        st(BPF_W, 3, 4, 0x55667788),
        mov64_reg(1, 6),
        mov64_imm(2, -10),
        call(hid::XDP_ADJUST_HEAD),
        mov64_reg(7, 0),
        mov64_reg(1, 6),
        mov64_imm(2, -(HEADROOM as i32 - 10 - 8 - XDP_FRAME_RESERVED as i32) - 1),
        call(hid::XDP_ADJUST_HEAD),
        alu64_imm(BPF_LSH, 0, 32),
        alu64_reg(BPF_OR, 0, 7),
        exit(),
    ];
    let r = run(p, &[0; 64]);
    let v = rc(&r);
    assert_eq!(v as u32, 0);
    assert_eq!((v >> 32) as i32, -libc::EINVAL);
    assert_eq!((r.data_meta, r.data), (HEADROOM - 18, HEADROOM - 10));
    assert_eq!(&r.frame[r.data_meta..r.data], &[0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55]);
}

#[test]
fn adjust_tail_bounds() {
    let tailroom = crate::xdp::XDP_TAILROOM_DEFAULT;
    let max_grow = (FRAME - tailroom - HEADROOM - 64) as i32;
    let r = adjust(hid::XDP_ADJUST_TAIL, max_grow, 64);
    assert_eq!(rc(&r), 0);
    assert_eq!(r.data_end, FRAME - tailroom);
    assert!(r.frame[HEADROOM + 64..r.data_end].iter().all(|&b| b == 0), "grown bytes zeroed");
    assert_eq!(r.frame[HEADROOM + 63], 63);
    assert_eq!(rc(&adjust(hid::XDP_ADJUST_TAIL, max_grow + 1, 64)), -(libc::EINVAL as i64));
    let r = adjust(hid::XDP_ADJUST_TAIL, -50, 64);
    assert_eq!((rc(&r), r.data_end - r.data), (0, 14));
    assert_eq!(rc(&adjust(hid::XDP_ADJUST_TAIL, -51, 64)), -(libc::EINVAL as i64));
    // After shrinking, the cut bytes are no longer readable.
    let p = vec![mov64_reg(6, 1), mov64_imm(2, -10), call(hid::XDP_ADJUST_TAIL), ldx(BPF_W, 2, 6, 0), ldx(BPF_B, 0, 2, 60), exit()];
    assert!(matches!(run(p, &[0; 64]).result.unwrap_err().kind, K::MemoryFault { .. }));
    // buff_len.
    assert_eq!(rc(&run(vec![call(hid::XDP_GET_BUFF_LEN), exit()], &[0; 77])), 77);
}

#[test]
fn redirect_helpers() {
    let defs = [MapDef::new("dev", map_type::DEVMAP, 4, 4, 8), MapDef::new("xsk", map_type::XSKMAP, 4, 4, 8), array_def("arr", 4, 8, 0)];
    let maps = maps_of(&defs, 1);
    maps.get(0).unwrap().update(&3u32.to_le_bytes(), &12u32.to_le_bytes(), 0).unwrap();
    maps.get(1).unwrap().update(&1u32.to_le_bytes(), &5u32.to_le_bytes(), 0).unwrap();
    let redirect_map = |map: u32, key: i32, flags: i32| {
        let p = flat(&[&lddw_map(1, map), &[mov64_imm(2, key), mov64_imm(3, flags), call(hid::REDIRECT_MAP), exit()]]);
        run_with(p, &defs, maps.clone(), &[0; 64]).result
    };
    let out = redirect_map(0, 3, 0).unwrap().0;
    assert_eq!(out.action, XDP_REDIRECT);
    assert_eq!(out.redirect, Some(RedirectTarget::Ifindex(12)));
    let out = redirect_map(0, 4, XDP_PASS as i32).unwrap().0;
    assert_eq!((out.action, out.redirect), (XDP_PASS, None));
    let out = redirect_map(1, 1, 0).unwrap().0;
    assert_eq!(out.redirect, Some(RedirectTarget::Xsk(5)));
    assert_eq!(redirect_map(1, 2, 0).unwrap().0.action, XDP_ABORTED);
    // Broadcast unsupported, unknown flags → ABORTED; non-redirect map → fault.
    assert_eq!(redirect_map(0, 3, 1 << 3).unwrap().0.action, XDP_ABORTED);
    assert_eq!(redirect_map(1, 1, 1 << 4).unwrap().0.action, XDP_ABORTED);
    assert!(redirect_map(2, 1, 0).is_err());
    // A later failed lookup clears an earlier redirect (last call wins).
    let p = flat(&[
        &lddw_map(1, 0),
        &[mov64_imm(2, 3), mov64_imm(3, 0), call(hid::REDIRECT_MAP)],
        &lddw_map(1, 0),
        &[mov64_imm(2, 5), mov64_imm(3, 0), call(hid::REDIRECT_MAP), mov64_imm(0, XDP_REDIRECT as i32), exit()],
    ]);
    let out = run_with(p, &defs, maps.clone(), &[0; 64]).result.unwrap().0;
    assert_eq!((out.action, out.redirect), (XDP_REDIRECT, None));
    // bpf_redirect.
    let out = r_out(vec![mov64_imm(1, 9), mov64_imm(2, 0), call(hid::REDIRECT), exit()]);
    assert_eq!((out.action, out.redirect), (XDP_REDIRECT, Some(RedirectTarget::Ifindex(9))));
    let out = r_out(vec![mov64_imm(1, 9), mov64_imm(2, 1), call(hid::REDIRECT), exit()]);
    assert_eq!((out.action, out.redirect), (XDP_ABORTED, None));
    // A redirect recorded but another action returned: no target reported.
    let out = r_out(vec![mov64_imm(1, 9), mov64_imm(2, 0), call(hid::REDIRECT), mov64_imm(0, 2), exit()]);
    assert_eq!((out.action, out.redirect), (XDP_PASS, None));
}

fn r_out(p: Vec<Insn>) -> RunOutcome {
    run(p, &[0; 64]).result.unwrap().0
}

#[test]
fn csum_diff_matches_reference() {
    // Replace the 4 bytes 0x0a000001 with 0x0a000002 in a checksum: diff = ~old + new.
    let p = vec![
        st(BPF_W, 10, -4, 0x0100000a_u32 as i32),
        st(BPF_W, 10, -8, 0x0200000a_u32 as i32),
        mov64_reg(1, 10),
        alu64_imm(BPF_ADD, 1, -4),
        mov64_imm(2, 4),
        mov64_reg(3, 10),
        alu64_imm(BPF_ADD, 3, -8),
        mov64_imm(4, 4),
        mov64_imm(5, 0),
        call(hid::CSUM_DIFF),
        exit(),
    ];
    let v = r0(p);
    let fold = |mut s: u64| {
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        s
    };
    let expect = (!0x0100000au32) as u64 + 0x0200000au64;
    assert_eq!(fold(v), fold(expect));
    // Sizes not multiple of 4 → -EINVAL; size 0 with NULL allowed (returns the seed).
    let p = vec![mov64_imm(1, 0), mov64_imm(2, 0), mov64_imm(3, 0), mov64_imm(4, 0), mov64_imm(5, 1234), call(28), exit()];
    assert_eq!(r0(p), 1234);
    let p = vec![
        mov64_reg(1, 10),
        alu64_imm(BPF_ADD, 1, -4),
        mov64_imm(2, 3),
        mov64_imm(3, 0),
        mov64_imm(4, 0),
        mov64_imm(5, 0),
        call(28),
        exit(),
    ];
    assert_eq!(r0(p) as i64, -(libc::EINVAL as i64));
    // A from pointer that overruns the stack faults.
    let p = vec![
        mov64_reg(1, 10),
        alu64_imm(BPF_ADD, 1, -4),
        mov64_imm(2, 8),
        mov64_imm(3, 0),
        mov64_imm(4, 0),
        mov64_imm(5, 0),
        call(28),
        exit(),
    ];
    assert!(matches!(err(p), K::HelperFault { helper: 28, .. }));
}

#[test]
fn trace_printk_formats() {
    // "v=%d u=%u x=%x\0" on the stack, args -5, 7, 255
    let fmt = b"v=%d u=%u x=%x\0\0";
    let mut p = Vec::new();
    for (i, chunk) in fmt.chunks(8).enumerate() {
        let w = u64::from_le_bytes(chunk.try_into().unwrap());
        p.extend_from_slice(&lddw(1, w));
        p.push(stx(BPF_DW, 10, 1, -16 + 8 * i as i16));
    }
    p.extend_from_slice(&[
        mov64_reg(1, 10),
        alu64_imm(BPF_ADD, 1, -16),
        mov64_imm(2, 15),
        mov64_imm(3, -5),
        mov64_imm(4, 7),
        mov64_imm(5, 255),
        call(hid::TRACE_PRINTK),
        exit(),
    ]);
    let r = run(p, &[0; 64]);
    assert_eq!(r.env.traces, vec!["v=-5 u=7 x=ff".to_owned()]);
    assert_eq!(rc(&r), "v=-5 u=7 x=ff".len() as i64);
}

#[test]
fn printk_format_subset() {
    let mut mem = LowMem::new(4096).unwrap();
    let maps = Maps::empty(1);
    let mut env = NullEnv::new();
    let mut xdp = XdpBuff::new(mem.as_mut_slice(), 256, 64);
    let mut st = RunState::new(&mut xdp, &maps, &mut env, &RunConfig::default()).unwrap();
    let mut stack = [0u8; 64];
    stack[..4].copy_from_slice(&[10, 0, 0, 1]);
    stack[8..13].copy_from_slice(b"eth0\0");
    stack[16..32].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    st.set_stack(stack.as_mut_ptr(), 64);
    let base = stack.as_ptr() as u64;
    let f = |st: &RunState<'_>, fmt: &str, args: &[u64]| crate::helpers::tests_format(st, fmt.as_bytes(), args);
    assert_eq!(f(&st, "%lld %llu %llx", &[u64::MAX, u64::MAX, 255]).as_deref(), Some("-1 18446744073709551615 ff"));
    assert_eq!(f(&st, "%d", &[0xffff_ffff]).as_deref(), Some("-1"));
    assert_eq!(f(&st, "%u", &[0x1_0000_0002]).as_deref(), Some("2"));
    assert_eq!(f(&st, "[%5d|%-5d|%05d|%+d]", &[42, 42, 42, 42]).as_deref(), Some("[   42|42   |00042|+42]"));
    // Zero has no minus sign (only a negative value does), with or without the `+` flag.
    assert_eq!(f(&st, "%d %+d %lld %i", &[0, 0, 0, 0]).as_deref(), Some("0 +0 0 0"));
    assert_eq!(f(&st, "%x %X %c%%", &[255, 255, b'z' as u64]).as_deref(), Some("ff FF z%"));
    // No `#` flag: the kernel's bpf_bprintf_prepare refuses it (-EINVAL), for x as for X.
    assert_eq!(f(&st, "%#x", &[255]), None);
    assert_eq!(f(&st, "%#X", &[255]), None);
    assert_eq!(f(&st, "[%12d|%-10u]", &[42, 7]).as_deref(), Some("[          42|7         ]"), "widths of two digits");
    // %px and %pK print the pointer's 16 hex digits (the letter consumed), as plain %p.
    assert_eq!(f(&st, "%px|%pK|%p|", &[0x1234, 0xab, 0xcd]).as_deref(), Some("0000000000001234|00000000000000ab|00000000000000cd|"));
    assert_eq!(f(&st, "%pI4 %pi4", &[base, base]).as_deref(), Some("10.0.0.1 010.000.000.001"));
    assert_eq!(f(&st, "dev %s", &[base + 8]).as_deref(), Some("dev eth0"));
    // The kernel's %pI6: eight colon-separated groups of four hex digits; %pi6 without colons.
    assert_eq!(f(&st, "%pI6", &[base + 16]).as_deref(), Some("2001:0db8:0000:0000:0000:0000:0000:0001"));
    assert_eq!(f(&st, "%pi6", &[base + 16]).as_deref(), Some("20010db8000000000000000000000001"));
    assert_eq!(f(&st, "%s", &[16]).as_deref(), Some("(fault)"));
    assert_eq!(f(&st, "%d %d %d %d", &[1, 2, 3]), None, "too many conversions");
    assert_eq!(f(&st, "%q", &[1, 2, 3]), None);
    assert_eq!(f(&st, "%pB", &[1, 2, 3]), None);
    assert_eq!(f(&st, "end %", &[1, 2, 3]), None);
}

#[test]
fn misc_helpers_and_env() {
    let r = run(vec![call(hid::KTIME_GET_NS), mov64_reg(6, 0), call(hid::KTIME_GET_NS), alu64_reg(BPF_SUB, 0, 6), exit()], &[0; 64]);
    assert_eq!(rc(&r), 1000, "NullEnv time advances 1 us per read");
    let a = r0(vec![call(hid::GET_PRANDOM_U32), exit()]);
    let b = r0(vec![call(hid::GET_PRANDOM_U32), exit()]);
    assert_eq!(a, b, "NullEnv randomness is deterministic");
    assert_eq!(a, NullEnv::new().prandom_u32() as u64, "the helper returns the environment's number");
    assert!(a <= u32::MAX as u64);
    assert_eq!(r0(vec![call(hid::KTIME_GET_BOOT_NS), exit()]), 1_000_000_000);
    // fib_lookup with the default env: NOT_FWDED; bad plen: -EINVAL.
    let p =
        |plen: i32| vec![mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -64), mov64_imm(3, plen), mov64_imm(4, 0), call(hid::FIB_LOOKUP), exit()];
    assert_eq!(r0(p(64)), 4);
    assert_eq!(r0(p(32)) as i64, -(libc::EINVAL as i64));
    // load/store bytes.
    let pkt: Vec<u8> = (0..64).collect();
    let p = vec![
        mov64_reg(6, 1),
        mov64_imm(2, 10),
        mov64_reg(3, 10),
        alu64_imm(BPF_ADD, 3, -8),
        mov64_imm(4, 8),
        call(hid::XDP_LOAD_BYTES),
        mov64_reg(1, 6),
        mov64_imm(2, 0),
        mov64_reg(3, 10),
        alu64_imm(BPF_ADD, 3, -8),
        mov64_imm(4, 8),
        call(hid::XDP_STORE_BYTES),
        mov64_reg(1, 6),
        mov64_imm(2, 60),
        mov64_reg(3, 10),
        alu64_imm(BPF_ADD, 3, -8),
        mov64_imm(4, 8),
        call(hid::XDP_LOAD_BYTES), // out of range: -EINVAL
        exit(),
    ];
    let r = run(p, &pkt);
    assert_eq!(rc(&r), -(libc::EINVAL as i64));
    assert_eq!(&r.frame[HEADROOM..HEADROOM + 8], &[10, 11, 12, 13, 14, 15, 16, 17]);
}

#[test]
fn buffer_checks() {
    let p = prog(vec![mov64_imm(0, 2), exit()], &[]);
    let interp = Interpreter::new(p, Arc::new(Maps::empty(1))).unwrap();
    let mut mem = LowMem::new(4096).unwrap();
    let mut xdp = XdpBuff::new(mem.as_mut_slice(), 256, 64);
    xdp.data_meta = 300;
    assert!(matches!(interp.run(&mut xdp, &mut NullEnv::new()).unwrap_err().kind, K::BadBuffer { .. }));
    let mut xdp = XdpBuff::new(mem.as_mut_slice(), 4000, 200);
    assert!(matches!(interp.run(&mut xdp, &mut NullEnv::new()).unwrap_err().kind, K::BadBuffer { .. }));
    // A heap buffer is (almost always) above 4 GiB on x86-64.
    let mut heap = vec![0u8; 4096];
    if heap.as_ptr() as usize > u32::MAX as usize {
        let mut xdp = XdpBuff::new(&mut heap, 256, 64);
        assert_eq!(interp.run(&mut xdp, &mut NullEnv::new()).unwrap_err().kind, K::BufferAbove4G);
    }
    let mut xdp = XdpBuff::new(mem.as_mut_slice(), 256, 64);
    let out = interp.run(&mut xdp, &mut NullEnv::new()).unwrap();
    assert_eq!(out, RunOutcome { action: XDP_PASS, redirect: None });
    let out = r_out(vec![mov64_imm(0, 7), exit()]);
    assert_eq!((out.action, out.action_or_aborted()), (7, XDP_ABORTED));
}

#[test]
fn random_programs_never_crash() {
    // Random instruction soup, with a valid map set: every run must end with Ok or Err.
    let defs = [array_def("a", 16, 4, 0), array_def(".rodata", 8, 1, crate::maps::BPF_F_RDONLY_PROG)];
    let maps = maps_of(&defs, 1);
    let mut mem = LowMem::new(4096).unwrap();
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let opcodes: Vec<u8> = (0..=255u8).collect();
    for _ in 0..3000 {
        let n = 1 + (rnd() % 24) as usize;
        let mut insns = Vec::with_capacity(n + 1);
        for _ in 0..n {
            let r = rnd();
            let code = opcodes[(r % 256) as usize];
            let mut i = Insn::new(code, ((r >> 8) % 11) as u8, ((r >> 12) % 11) as u8, ((r >> 16) as i16) % 16, (r >> 32) as i32);
            if code == 0x18 {
                i.src = ((r >> 12) % 3) as u8;
                i.imm = (r >> 40) as i32 % 3;
            }
            if r % 7 == 0 {
                i.off = -8 * (1 + (r >> 20) as i16 % 8);
            }
            insns.push(i);
        }
        insns.push(exit());
        let Ok(interp) =
            Interpreter::with_config(prog(insns, &defs), maps.clone(), RunConfig { insn_budget: 5000, ..RunConfig::default() })
        else {
            continue;
        };
        let mut xdp = XdpBuff::new(mem.as_mut_slice(), 256, 64);
        let _ = interp.run(&mut xdp, &mut NullEnv::new());
    }
}

#[test]
fn xdp_bytes_past_the_packet_fail_whole_without_a_partial_copy() {
    // bpf_xdp_pointer: a range running past the packet is -EINVAL before any byte moves (a
    // store must not write the part that fits, a load must not fill the buffer part way).
    let pkt: Vec<u8> = (0..64).collect();
    let p = vec![
        mov64_reg(6, 1),
        st(BPF_DW, 10, -8, -1), // the stack buffer: eight 0xff bytes
        mov64_imm(2, 60),       // 4 bytes in the packet, 4 past it
        mov64_reg(3, 10),
        alu64_imm(BPF_ADD, 3, -8),
        mov64_imm(4, 8),
        call(hid::XDP_STORE_BYTES),
        mov64_reg(7, 0),
        mov64_reg(1, 6),
        mov64_imm(2, 60),
        mov64_reg(3, 10),
        alu64_imm(BPF_ADD, 3, -8),
        mov64_imm(4, 8),
        call(hid::XDP_LOAD_BYTES),
        alu64_reg(BPF_ADD, 0, 7),
        ldx(BPF_DW, 1, 10, -8), // the buffer must still be all 0xff: r0 += (buf != -1)
        jmp_imm(BPF_JEQ, 1, -1, 1),
        alu64_imm(BPF_ADD, 0, 1000),
        exit(),
    ];
    let r = run(p, &pkt);
    assert_eq!(rc(&r), -2 * libc::EINVAL as i64, "both -EINVAL, the buffer untouched");
    assert_eq!(&r.frame[HEADROOM + 56..HEADROOM + 64], &pkt[56..64], "no byte of the failed store written");
}

/// `bpf_perf_event_output` with a context length in the flags (`flags >> 32`, as xdpdump
/// uses it): the record is the data followed by that many packet bytes (the kernel's
/// `bpf_xdp_event_output` appends them after the sample).
#[test]
fn perf_event_output_appends_ctxlen_packet_bytes_to_the_record() {
    let defs = [MapDef::new("events", map_type::PERF_EVENT_ARRAY, 4, 4, 1)];
    let maps = maps_of(&defs, 1);
    maps.get(0).unwrap().attach_consumer();
    let flags = crate::maps::BPF_F_CURRENT_CPU | (6u64 << 32);
    let p = flat(&[
        &[st(BPF_W, 10, -4, 0x4433_2211)],
        &lddw_map(2, 0),
        &lddw(3, flags),
        &[mov64_reg(4, 10), alu64_imm(BPF_ADD, 4, -4), mov64_imm(5, 4), call(hid::PERF_EVENT_OUTPUT), exit()],
    ]);
    let pkt: Vec<u8> = (0x80..0xc0).collect();
    let r = run_with(p, &defs, maps.clone(), &pkt);
    assert_eq!(rc(&r), 0);
    let ev = maps.get(0).unwrap().take_events();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].data, vec![0x11, 0x22, 0x33, 0x44, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85], "the data, then 6 packet bytes");
}

/// The context length may be the whole packet but no more: all 64 bytes are appended (0),
/// 65 is -EFAULT with no record (the kernel's `bpf_xdp_event_output` checks ctx_size
/// against the packet's length).
#[test]
fn perf_event_output_takes_at_most_the_packet_as_context() {
    let defs = [MapDef::new("events", map_type::PERF_EVENT_ARRAY, 4, 4, 1)];
    let out = |ctxlen: u64| {
        let maps = maps_of(&defs, 1);
        maps.get(0).unwrap().attach_consumer();
        let flags = crate::maps::BPF_F_CURRENT_CPU | (ctxlen << 32);
        let p = flat(&[
            &[st(BPF_W, 10, -4, 1)],
            &lddw_map(2, 0),
            &lddw(3, flags),
            &[mov64_reg(4, 10), alu64_imm(BPF_ADD, 4, -4), mov64_imm(5, 4), call(hid::PERF_EVENT_OUTPUT), exit()],
        ]);
        let r = run_with(p, &defs, maps.clone(), &[7u8; 64]);
        let events = maps.get(0).unwrap().take_events();
        (rc(&r), events.iter().map(|e| e.data.len()).collect::<Vec<_>>())
    };
    assert_eq!(out(64), (0, vec![4 + 64]));
    assert_eq!(out(65), (-(libc::EFAULT as i64), vec![]));
}

/// Runs `p` on a multi-buffer packet: 64 linear bytes (zero) and `tail` split into fragments
/// of `page` bytes. Returns r0, the linear packet after the run and the fragments' bytes.
fn run_on_frags(p: Vec<Insn>, tail: &[u8], page: usize) -> (u64, Vec<u8>, Vec<Vec<u8>>) {
    let interp = Interpreter::new(prog(p, &[]), Arc::new(Maps::empty(1))).expect("interpreter");
    let mut frags = crate::xdp::PageFrags::split(tail, page, 17).unwrap();
    let mut mem = LowMem::new(FRAME).unwrap();
    let mut xdp = XdpBuff::new(&mut mem.as_mut_slice()[..FRAME], HEADROOM, 64);
    xdp.frags = Some(&mut frags);
    let (_, r0) = interp.run_full(&mut xdp, &mut NullEnv::new()).unwrap();
    let linear = xdp.packet().to_vec();
    (r0, linear, frags.bytes().map(<[u8]>::to_vec).collect())
}

/// `bpf_xdp_adjust_tail(delta)` on a packet of 64 linear bytes and one 100-byte fragment
/// (of 0xab) in a 4 KiB page: (r0, linear length, the fragments' bytes).
fn adjust_tail_on_frags(delta: i32) -> (i64, usize, Vec<Vec<u8>>) {
    let (r0, linear, frags) = run_on_frags(vec![mov64_imm(2, delta), call(hid::XDP_ADJUST_TAIL), exit()], &[0xab; 100], 4096);
    (r0 as i64, linear.len(), frags)
}

/// `bpf_xdp_adjust_tail` shrinking a multi-buffer packet takes the bytes from the last
/// fragments first (the kernel's `bpf_xdp_frags_shrink_tail`), and only once no fragment
/// is left from the linear part.
#[test]
fn adjust_tail_shrinks_the_fragments_before_the_linear_part() {
    let run_frags = |delta: i32| {
        let (r0, linear, frags) = adjust_tail_on_frags(delta);
        (r0, linear, frags.iter().map(Vec::len).collect::<Vec<_>>())
    };
    assert_eq!(run_frags(-10), (0, 64, vec![90]), "cut from the fragment, the linear part intact");
    assert_eq!(run_frags(-120), (0, 44, vec![]), "the fragment released, then 20 linear bytes");
    // At most everything but the Ethernet header goes: 164 - 14 = 150 bytes.
    assert_eq!(run_frags(-150), (0, 14, vec![]), "down to the Ethernet header");
    assert_eq!(run_frags(-151), (-(libc::EINVAL as i64), 64, vec![100]), "one byte more: refused, nothing cut");
}

/// `bpf_xdp_load_bytes` / `store_bytes`: an offset or length up to 0xffff passes the
/// `bpf_xdp_pointer` size check (then a range past the packet is -EINVAL); only above
/// 0xffff is it -EFAULT.
#[test]
fn xdp_bytes_offset_and_length_limit_is_0xffff_inclusive() {
    let load = |off: i32, len: i32| {
        let p = vec![mov64_imm(2, off), mov64_reg(3, 10), alu64_imm(BPF_ADD, 3, -8), mov64_imm(4, len), call(hid::XDP_LOAD_BYTES), exit()];
        rc(&run(p, &[0; 64]))
    };
    let (einval, efault) = (-(libc::EINVAL as i64), -(libc::EFAULT as i64));
    assert_eq!(load(0, 0xffff), einval, "length 0xffff: only past the packet");
    assert_eq!(load(0, 0x10000), efault);
    assert_eq!(load(0xffff, 1), einval, "offset 0xffff: only past the packet");
    assert_eq!(load(0x10000, 1), efault);
}

/// `bpf_xdp_adjust_tail` growing a multi-buffer packet extends the last fragment within its
/// tailroom (the kernel's `bpf_xdp_frags_increase_tail`): 0, the fragment longer by delta,
/// the new bytes zeroed; a delta of 0 is 0 too; past the tailroom -EINVAL, nothing changed.
#[test]
fn adjust_tail_grows_the_last_fragment_within_its_tailroom() {
    let run_frags = adjust_tail_on_frags;
    let (r0, linear, frags) = run_frags(10);
    assert_eq!((r0, linear, frags.len()), (0, 64, 1));
    assert_eq!(frags[0].len(), 110, "the last fragment grew by 10");
    assert!(frags[0][..100].iter().all(|&b| b == 0xab) && frags[0][100..].iter().all(|&b| b == 0), "the new bytes zeroed");
    let lens = |(r0, linear, frags): (i64, usize, Vec<Vec<u8>>)| (r0, linear, frags.iter().map(Vec::len).collect::<Vec<_>>());
    assert_eq!(lens(run_frags(0)), (0, 64, vec![100]));
    assert_eq!(lens(run_frags(3996)), (0, 64, vec![4096]), "up to the page's end");
    assert_eq!(lens(run_frags(3997)), (-(libc::EINVAL as i64), 64, vec![100]), "past the tailroom");
}

/// `bpf_xdp_store_bytes` only reads its buffer (`ARG_PTR_TO_MEM | MEM_RDONLY`): it may come
/// from read-only memory such as a `.rodata` value. `bpf_xdp_load_bytes` writes its buffer
/// (`ARG_PTR_TO_UNINIT_MEM`): a read-only one is refused and stays as it was.
#[test]
fn xdp_store_bytes_reads_read_only_memory_and_load_bytes_needs_writable() {
    let defs = [array_def(".rodata", 8, 1, crate::maps::BPF_F_RDONLY_PROG)];
    let maps = maps_of(&defs, 1);
    let value = [0x11u8, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];
    maps.get(0).unwrap().update(&0u32.to_le_bytes(), &value, 0).unwrap();
    let copy = |helper: u32| flat(&[&lddw_map_value(3, 0, 0), &[mov64_imm(2, 2), mov64_imm(4, 4), call(helper), exit()]]);
    let pkt: Vec<u8> = (0..64).collect();
    let r = run_with(copy(hid::XDP_STORE_BYTES), &defs, maps.clone(), &pkt);
    assert_eq!(rc(&r), 0);
    assert_eq!(&r.frame[HEADROOM..HEADROOM + 8], &[0, 1, 0x11, 0x22, 0x33, 0x44, 6, 7], "4 .rodata bytes at offset 2");
    let r = run_with(copy(hid::XDP_LOAD_BYTES), &defs, maps.clone(), &pkt);
    assert!(matches!(
        r.result.unwrap_err().kind,
        K::HelperFault { helper: hid::XDP_LOAD_BYTES, fault: crate::state::HelperFault::BadPointer }
    ));
    assert_eq!(maps.get(0).unwrap().lookup(&0u32.to_le_bytes(), 0).unwrap()[..], value, ".rodata untouched");
}

/// `bpf_trace_printk`: `%p` followed by whitespace, punctuation or the end of the format is
/// a plain pointer (the kernel's `bpf_bprintf_prepare` accepts it: "%p\n" is common); only
/// other letters or digits after `%p` (extensions it does not support) are -EINVAL.
#[test]
fn printk_plain_pointer_before_whitespace_or_punctuation() {
    let mut mem = LowMem::new(4096).unwrap();
    let maps = Maps::empty(1);
    let mut env = NullEnv::new();
    let mut xdp = XdpBuff::new(mem.as_mut_slice(), 256, 64);
    let st = RunState::new(&mut xdp, &maps, &mut env, &RunConfig::default()).unwrap();
    let f = |fmt: &str, args: &[u64]| crate::helpers::tests_format(&st, fmt.as_bytes(), args);
    assert_eq!(f("%p\n", &[0x1234]).as_deref(), Some("0000000000001234\n"));
    assert_eq!(f("at %p.", &[0xab]).as_deref(), Some("at 00000000000000ab."));
    assert_eq!(f("[%p] %p", &[1, 2]).as_deref(), Some("[0000000000000001] 0000000000000002"));
    assert_eq!(f("%p-%p\t", &[3, 4]).as_deref(), Some("0000000000000003-0000000000000004\t"));
    assert_eq!(f("%p", &[5]).as_deref(), Some("0000000000000005"));
    assert_eq!(f("%pz", &[5]), None);
    assert_eq!(f("%p4", &[5]), None);
}

/// `bpf_ringbuf_discard` releases its reservation as the kernel's does: the discarded record
/// is skipped by the consumer, which moves past it to the submitted record behind it, and
/// `bpf_ringbuf_query(BPF_RB_AVAIL_DATA)` drops back to 0. A reservation left busy would hold
/// every later record back from the consumer.
#[test]
fn ringbuf_discard_releases_the_record_and_unblocks_the_ones_after_it() {
    let defs = [MapDef::new("rb", map_type::RINGBUF, 0, 0, 4096)];
    let maps = maps_of(&defs, 1);
    maps.get(0).unwrap().attach_consumer();
    let reserve = |len: i32| flat(&[&lddw_map(1, 0), &[mov64_imm(2, len), mov64_imm(3, 0), call(hid::RINGBUF_RESERVE)]]);
    let p = flat(&[
        // A = reserve(8); B = reserve(3); either NULL: return 1.
        &reserve(8),
        &[mov64_reg(6, 0)],
        &reserve(3),
        &[
            mov64_reg(7, 0),
            jmp_imm(BPF_JEQ, 6, 0, 1),
            jmp_imm(BPF_JNE, 7, 0, 2),
            mov64_imm(0, 1),
            exit(),
            // B = "bbb", submitted; then A discarded.
            st(BPF_B, 7, 0, b'b' as i32),
            st(BPF_B, 7, 1, b'b' as i32),
            st(BPF_B, 7, 2, b'b' as i32),
            mov64_reg(1, 7),
            mov64_imm(2, 0),
            call(hid::RINGBUF_SUBMIT),
            mov64_reg(1, 6),
            mov64_imm(2, 0),
            call(hid::RINGBUF_DISCARD),
        ],
        // return bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA)
        &lddw_map(1, 0),
        &[mov64_imm(2, 0), call(hid::RINGBUF_QUERY), exit()],
    ]);
    let r = run_with(p, &defs, maps.clone(), &[0; 64]);
    assert_eq!(rc(&r), 32, "both records (16 bytes each) wait for the reader, the discarded one too");
    let ev = maps.get(0).unwrap().take_events();
    assert_eq!(ev.len(), 1, "only the submitted record reaches the consumer: {ev:?}");
    assert_eq!(ev[0].data, b"bbb".to_vec());
    assert_eq!(maps.get(0).unwrap().ringbuf_query(crate::maps::BPF_RB_AVAIL_DATA), 0, "read past both");
}

/// `bpf_ringbuf_output` copies `size` bytes into a new record and submits it: 0 on success
/// (the consumer gets the bytes), -EINVAL for flags other than BPF_RB_NO_WAKEUP /
/// BPF_RB_FORCE_WAKEUP, and no record then.
#[test]
fn ringbuf_output_copies_the_bytes_into_a_submitted_record() {
    let defs = [MapDef::new("rb", map_type::RINGBUF, 0, 0, 4096)];
    let maps = maps_of(&defs, 1);
    maps.get(0).unwrap().attach_consumer();
    let output = |flags: i32| {
        flat(&[
            &[st(BPF_W, 10, -8, 0x6463_6261), mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -8)],
            &lddw_map(1, 0),
            &[mov64_imm(3, 4), mov64_imm(4, flags), call(hid::RINGBUF_OUTPUT), exit()],
        ])
    };
    let r = run_with(output(2), &defs, maps.clone(), &[0; 64]);
    assert_eq!(rc(&r), 0);
    let ev = maps.get(0).unwrap().take_events();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].data, b"abcd".to_vec());
    let r = run_with(output(4), &defs, maps.clone(), &[0; 64]);
    assert_eq!(rc(&r), -(libc::EINVAL as i64));
    assert!(maps.get(0).unwrap().take_events().is_empty());
}

/// `bpf_trace_printk`: the ' ' flag is accepted (the kernel's `bpf_bprintf_prepare` skips
/// `[0 +-]` flags) and, as in `vsnprintf`, puts a space where a non-negative signed value's
/// sign goes: `-` wins for a negative value, `+` wins over ' ', unsigned conversions ignore
/// it, and the width counts the space.
#[test]
fn printk_space_flag() {
    let mut mem = LowMem::new(4096).unwrap();
    let maps = Maps::empty(1);
    let mut env = NullEnv::new();
    let mut xdp = XdpBuff::new(mem.as_mut_slice(), 256, 64);
    let st = RunState::new(&mut xdp, &maps, &mut env, &RunConfig::default()).unwrap();
    let f = |fmt: &str, args: &[u64]| crate::helpers::tests_format(&st, fmt.as_bytes(), args);
    assert_eq!(f("% d", &[42]).as_deref(), Some(" 42"));
    assert_eq!(f("% d", &[0]).as_deref(), Some(" 0"));
    assert_eq!(f("% d", &[0xffff_fffb]).as_deref(), Some("-5"));
    assert_eq!(f("% lld", &[u64::MAX]).as_deref(), Some("-1"));
    assert_eq!(f("[% 5d|% 05d|% -5d]", &[42, 42, 42]).as_deref(), Some("[   42| 0042| 42  ]"));
    assert_eq!(f("%+ d % +d", &[7, 7]).as_deref(), Some("+7 +7"));
    assert_eq!(f("% u", &[7]).as_deref(), Some("7"));
}

/// `bpf_xdp_load_bytes` from the middle of one fragment into the next: the part from the
/// first is what is left of it past the offset (10 bytes), the rest from the start of the
/// second; copied back into the linear part with `bpf_xdp_store_bytes` to be compared.
#[test]
fn load_bytes_from_inside_a_fragment_continues_into_the_next() {
    let p = flat(&[
        &[mov64_reg(6, 1), mov64_imm(2, 64 + 90), mov64_reg(3, 10), alu64_imm(BPF_ADD, 3, -32), mov64_imm(4, 20)],
        &[call(hid::XDP_LOAD_BYTES), jmp_imm(BPF_JNE, 0, 0, 6)],
        &[mov64_reg(1, 6), mov64_imm(2, 0), mov64_reg(3, 10), alu64_imm(BPF_ADD, 3, -32), mov64_imm(4, 20)],
        &[call(hid::XDP_STORE_BYTES), exit()],
    ]);
    let data: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
    let (r0, linear, _) = run_on_frags(p, &data, 100);
    assert_eq!(r0, 0);
    assert_eq!(&linear[..20], &data[90..110]);
}

/// `bpf_xdp_get_buff_len` on a multi-buffer packet counts the fragments too: 64 linear
/// bytes and a 100-byte fragment are 164.
#[test]
fn get_buff_len_counts_linear_bytes_and_fragments() {
    let (r0, _, _) = run_on_frags(vec![call(hid::XDP_GET_BUFF_LEN), exit()], &[0xab; 100], 4096);
    assert_eq!(r0, 164);
}

/// `bpf_csum_diff` takes at most 512 bytes in all (the kernel's per-CPU diff buffer of 128
/// words): from 0 bytes and to 516 is -EINVAL before anything is read; 4 + 508 is not.
#[test]
fn csum_diff_refuses_more_than_512_bytes_in_all() {
    let call_with = |from_size: i32, to_size: i32| {
        vec![
            mov64_reg(1, 10),
            alu64_imm(BPF_ADD, 1, -4),
            mov64_imm(2, from_size),
            mov64_reg(3, 10),
            alu64_imm(BPF_ADD, 3, -512),
            mov64_imm(4, to_size),
            mov64_imm(5, 0),
            call(hid::CSUM_DIFF),
            exit(),
        ]
    };
    let mut p = call_with(0, 516);
    p[0] = mov64_imm(1, 0);
    p[1] = mov64_imm(2, 0);
    assert_eq!(r0(p) as i64, -(libc::EINVAL as i64), "0 + 516");
    assert!((r0(call_with(4, 508)) as i64) >= 0, "4 + 508 is 512");
    assert_eq!(r0(call_with(8, 508)) as i64, -(libc::EINVAL as i64), "8 + 508");
}

/// `bpf_xdp_load_bytes` / `store_bytes` on a multi-buffer packet (64 linear bytes, then
/// 200 bytes in fragments of 50): a range starting in the third fragment and ending in the
/// fourth skips the first two and crosses the boundary, reading (or writing) exactly the
/// packet's bytes 184..224.
#[test]
fn xdp_bytes_skip_whole_fragments_and_cross_into_the_next() {
    let tail: Vec<u8> = (0..200u32).map(|i| i as u8).collect();
    let run_on_frags = |p: Vec<Insn>| {
        let (r0, _, frags) = run_on_frags(p, &tail, 50);
        (r0, frags.concat())
    };
    // Load 40 bytes at packet offset 184 (fragment byte 120) into the stack, return the
    // first and last of them.
    let load = vec![
        mov64_reg(6, 1),
        mov64_reg(1, 6),
        mov64_imm(2, 184),
        mov64_reg(3, 10),
        alu64_imm(BPF_ADD, 3, -40),
        mov64_imm(4, 40),
        call(hid::XDP_LOAD_BYTES),
        jmp_imm(BPF_JNE, 0, 0, 5),
        ldx(BPF_B, 0, 10, -40),
        ldx(BPF_B, 7, 10, -1),
        alu64_imm(BPF_LSH, 0, 8),
        alu64_reg(BPF_OR, 0, 7),
        exit(),
        exit(),
    ];
    let (r0, _) = run_on_frags(load);
    assert_eq!(r0, (120 << 8) | 159, "bytes 120 and 159 of the fragments");
    // Store 40 bytes of 0xee at the same offset: only fragment bytes 120..160 change.
    let mut store: Vec<Insn> = (0..10).map(|i| st(BPF_W, 10, -40 + 4 * i, 0xeeee_eeee_u32 as i32)).collect();
    store.extend([mov64_imm(2, 184), mov64_reg(3, 10), alu64_imm(BPF_ADD, 3, -40), mov64_imm(4, 40), call(hid::XDP_STORE_BYTES), exit()]);
    let (r0, bytes) = run_on_frags(store);
    assert_eq!(r0, 0);
    let mut want = tail.clone();
    want[120..160].iter_mut().for_each(|b| *b = 0xee);
    assert_eq!(bytes, want);
}

/// bpf_xdp_adjust_meta may remove all metadata: the kernel refuses only `meta > data`, so
/// data_meta may come back to data (a delta of 0 without metadata; -8 then +8).
#[test]
fn adjust_meta_may_bring_data_meta_back_to_data() {
    let r = adjust(hid::XDP_ADJUST_META, 0, 64);
    assert_eq!(rc(&r), 0);
    assert_eq!((r.data_meta, r.data), (HEADROOM, HEADROOM));
    let p = vec![
        mov64_reg(6, 1),
        mov64_imm(2, -8),
        call(hid::XDP_ADJUST_META),
        mov64_reg(7, 0),
        mov64_reg(1, 6),
        mov64_imm(2, 8),
        call(hid::XDP_ADJUST_META),
        alu64_imm(BPF_LSH, 0, 32),
        alu64_reg(BPF_OR, 0, 7),
        exit(),
    ];
    let r = run(p, &[0; 64]);
    assert_eq!(rc(&r), 0, "both calls return 0 (the second in the high half)");
    assert_eq!((r.data_meta, r.data), (HEADROOM, HEADROOM));
}

/// bpf_trace_printk reads a format buffer of up to 4096 bytes (sluice's bound on the copy):
/// exactly 4096 is taken (the NUL inside ends the format), 4097 is -EINVAL.
#[test]
fn trace_printk_takes_a_format_buffer_of_exactly_4096_bytes() {
    let defs = [array_def("fmt", 4096, 1, 0)];
    let maps = maps_of(&defs, 1);
    // "ok\0\0" at the start of the 4096-byte value.
    let p = |size: i32| flat(&[&lddw_map_value(1, 0, 0), &[st(BPF_W, 1, 0, 0x6b6f), mov64_imm(2, size), call(hid::TRACE_PRINTK), exit()]]);
    let r = run_with(p(4096), &defs, maps.clone(), &[0; 64]);
    assert_eq!(rc(&r), 2);
    assert_eq!(r.env.traces, vec!["ok".to_owned()]);
    let r = run_with(p(4097), &defs, maps, &[0; 64]);
    assert_eq!(rc(&r), -(libc::EINVAL as i64));
    assert!(r.env.traces.is_empty());
}
