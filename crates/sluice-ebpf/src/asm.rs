//! A tiny assembler for hand-written test programs (used by this crate's tests, handy for the
//! verifier's and the JIT's tests too). Each function returns one instruction slot, except
//! the `lddw*` ones which return the two slots of a 64-bit load.

use crate::insn::*;

pub fn alu64_imm(op: u8, dst: u8, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | op | BPF_K, dst, 0, 0, imm)
}
pub fn alu64_reg(op: u8, dst: u8, src: u8) -> Insn {
    Insn::new(BPF_ALU64 | op | BPF_X, dst, src, 0, 0)
}
pub fn alu32_imm(op: u8, dst: u8, imm: i32) -> Insn {
    Insn::new(BPF_ALU | op | BPF_K, dst, 0, 0, imm)
}
pub fn alu32_reg(op: u8, dst: u8, src: u8) -> Insn {
    Insn::new(BPF_ALU | op | BPF_X, dst, src, 0, 0)
}
/// Signed division / modulo (`off = 1`), 64-bit, register source.
pub fn sdiv64_reg(op: u8, dst: u8, src: u8) -> Insn {
    Insn::new(BPF_ALU64 | op | BPF_X, dst, src, 1, 0)
}
/// Signed division / modulo (`off = 1`), 32-bit, immediate.
pub fn sdiv32_imm(op: u8, dst: u8, imm: i32) -> Insn {
    Insn::new(BPF_ALU | op | BPF_K, dst, 0, 1, imm)
}
pub fn mov64_imm(dst: u8, imm: i32) -> Insn {
    alu64_imm(BPF_MOV, dst, imm)
}
pub fn mov64_reg(dst: u8, src: u8) -> Insn {
    alu64_reg(BPF_MOV, dst, src)
}
pub fn mov32_imm(dst: u8, imm: i32) -> Insn {
    alu32_imm(BPF_MOV, dst, imm)
}
pub fn mov32_reg(dst: u8, src: u8) -> Insn {
    alu32_reg(BPF_MOV, dst, src)
}
/// `dst = (s<bits>) src` sign-extending move (64-bit; bits 8, 16, 32).
pub fn movsx64(dst: u8, src: u8, bits: i16) -> Insn {
    Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, bits, 0)
}
/// `w_dst = (s<bits>) w_src` (32-bit; bits 8, 16).
pub fn movsx32(dst: u8, src: u8, bits: i16) -> Insn {
    Insn::new(BPF_ALU | BPF_MOV | BPF_X, dst, src, bits, 0)
}
/// `dst = htobe<bits>(dst)`.
pub fn be(dst: u8, bits: i32) -> Insn {
    Insn::new(BPF_ALU | BPF_END | BPF_X, dst, 0, 0, bits)
}
/// `dst = htole<bits>(dst)`.
pub fn le(dst: u8, bits: i32) -> Insn {
    Insn::new(BPF_ALU | BPF_END | BPF_K, dst, 0, 0, bits)
}
/// `dst = bswap<bits>(dst)` (ALU64 class, unconditional).
pub fn bswap(dst: u8, bits: i32) -> Insn {
    Insn::new(BPF_ALU64 | BPF_END | BPF_K, dst, 0, 0, bits)
}
pub fn ldx(size: u8, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(BPF_LDX | BPF_MEM | size, dst, src, off, 0)
}
/// Sign-extending load.
pub fn ldxsx(size: u8, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(BPF_LDX | BPF_MEMSX | size, dst, src, off, 0)
}
pub fn st(size: u8, dst: u8, off: i16, imm: i32) -> Insn {
    Insn::new(BPF_ST | BPF_MEM | size, dst, 0, off, imm)
}
pub fn stx(size: u8, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(BPF_STX | BPF_MEM | size, dst, src, off, 0)
}
/// Atomic operation `op` (BPF_ADD, BPF_ADD | BPF_FETCH, BPF_XCHG, BPF_CMPXCHG, ...) on
/// `*(size *)(dst + off)` with `src`.
pub fn atomic(size: u8, op: i32, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(BPF_STX | BPF_ATOMIC | size, dst, src, off, op)
}
pub fn lddw(dst: u8, imm: u64) -> [Insn; 2] {
    [Insn::new(BPF_LD | BPF_IMM | BPF_DW, dst, 0, 0, imm as u32 as i32), Insn::new(0, 0, 0, 0, (imm >> 32) as u32 as i32)]
}
/// `dst = &map[index]` (pseudo map fd after linking: imm = map index).
pub fn lddw_map(dst: u8, index: u32) -> [Insn; 2] {
    [Insn::new(BPF_LD | BPF_IMM | BPF_DW, dst, BPF_PSEUDO_MAP_FD, 0, index as i32), Insn::new(0, 0, 0, 0, 0)]
}
/// `dst = &value_of_key0(map[index]) + offset` (pseudo map value).
pub fn lddw_map_value(dst: u8, index: u32, offset: u32) -> [Insn; 2] {
    [Insn::new(BPF_LD | BPF_IMM | BPF_DW, dst, BPF_PSEUDO_MAP_VALUE, 0, index as i32), Insn::new(0, 0, 0, 0, offset as i32)]
}
pub fn jmp_imm(op: u8, dst: u8, imm: i32, off: i16) -> Insn {
    Insn::new(BPF_JMP | op | BPF_K, dst, 0, off, imm)
}
pub fn jmp_reg(op: u8, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(BPF_JMP | op | BPF_X, dst, src, off, 0)
}
pub fn jmp32_imm(op: u8, dst: u8, imm: i32, off: i16) -> Insn {
    Insn::new(BPF_JMP32 | op | BPF_K, dst, 0, off, imm)
}
pub fn jmp32_reg(op: u8, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(BPF_JMP32 | op | BPF_X, dst, src, off, 0)
}
pub fn ja(off: i16) -> Insn {
    Insn::new(BPF_JMP | BPF_JA, 0, 0, off, 0)
}
/// `gotol`: JA in the JMP32 class with a 32-bit offset in imm.
pub fn gotol(imm: i32) -> Insn {
    Insn::new(BPF_JMP32 | BPF_JA, 0, 0, 0, imm)
}
/// Helper call.
pub fn call(helper: u32) -> Insn {
    Insn::new(BPF_JMP | BPF_CALL, 0, 0, 0, helper as i32)
}
/// bpf-to-bpf call, `rel` slots after the next instruction.
pub fn call_local(rel: i32) -> Insn {
    Insn::new(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, rel)
}
pub fn exit() -> Insn {
    Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
}
