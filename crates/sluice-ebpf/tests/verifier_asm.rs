//! A small assembler for verifier tests (llvm-objdump-like syntax, with labels), shared by
//! the verifier_* test files through `#[path]`. Its own tests check the encodings.
#![allow(dead_code)]

use sluice_ebpf::insn::*;
use sluice_ebpf::program::{MapDef, Program};

fn parse_reg(t: &str) -> (u8, bool) {
    let t = t.trim();
    let (w, rest) = if let Some(r) = t.strip_prefix('r') {
        (false, r)
    } else if let Some(r) = t.strip_prefix('w') {
        (true, r)
    } else {
        panic!("bad register {t:?}")
    };
    let n: u8 = rest.parse().unwrap_or_else(|_| panic!("bad register {t:?}"));
    assert!(n < 16, "register out of encoding range: {t}");
    (n, w)
}

fn is_reg(t: &str) -> bool {
    let t = t.trim();
    (t.starts_with('r') || t.starts_with('w')) && t.len() > 1 && t[1..].chars().all(|c| c.is_ascii_digit())
}

fn parse_imm(t: &str) -> i64 {
    let t = t.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let v = if let Some(h) = body.strip_prefix("0x") {
        u64::from_str_radix(h, 16).unwrap_or_else(|_| panic!("bad immediate {t:?}")) as i64
    } else {
        body.parse::<u64>().unwrap_or_else(|_| panic!("bad immediate {t:?}")) as i64
    };
    if neg {
        v.wrapping_neg()
    } else {
        v
    }
}

fn size_code(name: &str) -> (u8, bool) {
    match name {
        "u8" => (BPF_B, false),
        "u16" => (BPF_H, false),
        "u32" => (BPF_W, false),
        "u64" => (BPF_DW, false),
        "s8" => (BPF_B, true),
        "s16" => (BPF_H, true),
        "s32" => (BPF_W, true),
        _ => panic!("bad size {name}"),
    }
}

/// `*(u32 *)(r1 + 4)` → (size code, signed, reg, off)
fn parse_mem(t: &str) -> (u8, bool, u8, i16) {
    let s: String = t.chars().filter(|c| !c.is_whitespace()).collect();
    let s = s.strip_prefix("*(").unwrap_or_else(|| panic!("bad mem operand {t:?}"));
    let (sz, rest) = s.split_once("*)(").unwrap_or_else(|| panic!("bad mem operand {t:?}"));
    let rest = rest.strip_suffix(')').unwrap_or_else(|| panic!("bad mem operand {t:?}"));
    let (code, signed) = size_code(sz);
    let (reg, off) = if let Some(p) = rest.find(['+', '-']) {
        let (r, o) = rest.split_at(p);
        (parse_reg(r).0, parse_imm(o) as i16)
    } else {
        (parse_reg(rest).0, 0)
    };
    (code, signed, reg, off)
}

fn alu_op(op: &str) -> u8 {
    match op {
        "+=" => BPF_ADD,
        "-=" => BPF_SUB,
        "*=" => BPF_MUL,
        "/=" => BPF_DIV,
        "%=" => BPF_MOD,
        "|=" => BPF_OR,
        "&=" => BPF_AND,
        "^=" => BPF_XOR,
        "<<=" => BPF_LSH,
        ">>=" => BPF_RSH,
        "s>>=" => BPF_ARSH,
        "s/=" => BPF_DIV,
        "s%=" => BPF_MOD,
        _ => panic!("bad alu op {op}"),
    }
}

fn jmp_op(op: &str) -> u8 {
    match op {
        "==" => BPF_JEQ,
        "!=" => BPF_JNE,
        ">" => BPF_JGT,
        ">=" => BPF_JGE,
        "<" => BPF_JLT,
        "<=" => BPF_JLE,
        "s>" => BPF_JSGT,
        "s>=" => BPF_JSGE,
        "s<" => BPF_JSLT,
        "s<=" => BPF_JSLE,
        "&" => BPF_JSET,
        _ => panic!("bad jump op {op}"),
    }
}

fn slots_of(line: &str) -> usize {
    if line.ends_with(" ll") {
        2
    } else {
        1
    }
}

/// A lookup of key 0 in map 1 (an ARRAY of 16-byte values in the verifier tests' maps):
/// r0 is the value, null-checked to the label `out`. Clobbers r1-r5.
pub const ARRAY1_VALUE: &str = "*(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out";

/// Assembles one instruction per line. Comments start with `;` or `//`.
/// Syntax (r = 64-bit, w = 32-bit):
///   `L:` label · `exit` · `goto L|+N` · `call N` (helper) · `call @L` / `callrel N` (bpf-to-bpf)
///   `if r1 > r2 goto L` (ops == != > >= < <= s> s>= s< s<= &) · `if w1 < 16 goto L`
///   `r1 = 5` · `r1 = r2` · `r1 = (s8)r2` · `r1 += r2` (+= -= *= /= %= s/= s%= |= &= ^= <<= >>= s>>=)
///   `r1 = -r1` · `r1 = be16 r1` / `le32` / `bswap64` · `r1 = 0x1234 ll` · `r1 = map[0] ll` · `r1 = map_value[0][8] ll`
///   `r0 = *(u32 *)(r1 + 4)` · `r0 = *(s8 *)(r1 + 4)` · `*(u16 *)(r10 - 2) = r1` · `*(u64 *)(r10 - 8) = 7`
///   `atomic u64 r0 + 0 add r1` (add/or/and/xor, fetch_add/…, xchg, cmpxchg)
///   `raw CODE DST SRC OFF IMM`
pub fn asm(src: &str) -> Vec<Insn> {
    let lines: Vec<String> = src
        .lines()
        .map(|l| {
            let l = l.split("//").next().unwrap_or("");
            let l = l.split(';').next().unwrap_or("");
            l.trim().to_string()
        })
        .filter(|l| !l.is_empty())
        .collect();
    let mut labels = std::collections::HashMap::new();
    let mut pc = 0usize;
    for l in &lines {
        if let Some(name) = l.strip_suffix(':') {
            labels.insert(name.trim().to_string(), pc);
        } else {
            pc += slots_of(l);
        }
    }
    let mut out = Vec::new();
    for l in &lines {
        if l.ends_with(':') {
            continue;
        }
        let here = out.len();
        let target = |t: &str| -> i64 {
            let t = t.trim();
            if t.starts_with('+') || t.starts_with('-') || t.chars().all(|c| c.is_ascii_digit()) {
                parse_imm(t)
            } else {
                *labels.get(t).unwrap_or_else(|| panic!("unknown label {t}")) as i64 - here as i64 - 1
            }
        };
        out.extend(encode(l, &target));
    }
    out
}

fn encode(l: &str, target: &dyn Fn(&str) -> i64) -> Vec<Insn> {
    let ins = |code: u8, dst: u8, src: u8, off: i16, imm: i32| Insn::new(code, dst, src, off, imm);
    let toks: Vec<&str> = l.split_whitespace().collect();
    match toks[0] {
        "exit" => return vec![ins(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)],
        "goto" => return vec![ins(BPF_JMP | BPF_JA, 0, 0, target(toks[1]) as i16, 0)],
        "gotol" => return vec![ins(BPF_JMP32 | BPF_JA, 0, 0, 0, target(toks[1]) as i32)],
        "call" => {
            if let Some(lbl) = toks[1].strip_prefix('@') {
                return vec![ins(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, target(lbl) as i32)];
            }
            return vec![ins(BPF_JMP | BPF_CALL, 0, 0, 0, parse_imm(toks[1]) as i32)];
        }
        "callrel" => return vec![ins(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, parse_imm(toks[1]) as i32)],
        "raw" => {
            return vec![ins(
                parse_imm(toks[1]) as u8,
                parse_imm(toks[2]) as u8,
                parse_imm(toks[3]) as u8,
                parse_imm(toks[4]) as i16,
                parse_imm(toks[5]) as i32,
            )]
        }
        "if" => {
            // if A OP B goto T
            let (a, w) = parse_reg(toks[1]);
            let op = jmp_op(toks[2]);
            let class = if w { BPF_JMP32 } else { BPF_JMP };
            let off = target(toks[5]) as i16;
            return if is_reg(toks[3]) {
                vec![ins(class | op | BPF_X, a, parse_reg(toks[3]).0, off, 0)]
            } else {
                vec![ins(class | op | BPF_K, a, 0, off, parse_imm(toks[3]) as i32)]
            };
        }
        "atomic" => {
            // atomic u64 r0 + 0 add r1
            let (sz, _) = size_code(toks[1]);
            let dst = parse_reg(toks[2]).0;
            let off = parse_imm(&format!("{}{}", toks[3], toks[4])) as i16;
            let imm = match toks[5] {
                "add" => BPF_ADD as i32,
                "or" => BPF_OR as i32,
                "and" => BPF_AND as i32,
                "xor" => BPF_XOR as i32,
                "fetch_add" => BPF_ADD as i32 | BPF_FETCH,
                "fetch_or" => BPF_OR as i32 | BPF_FETCH,
                "xchg" => BPF_XCHG,
                "cmpxchg" => BPF_CMPXCHG,
                o => panic!("bad atomic op {o}"),
            };
            return vec![ins(BPF_STX | BPF_ATOMIC | sz, dst, parse_reg(toks[6]).0, off, imm)];
        }
        _ => {}
    }
    if l.starts_with("*(") {
        // store
        let (lhs, rhs) = l.split_once('=').unwrap();
        let (sz, _, dst, off) = parse_mem(lhs);
        let rhs = rhs.trim();
        return if is_reg(rhs) {
            vec![ins(BPF_STX | BPF_MEM | sz, dst, parse_reg(rhs).0, off, 0)]
        } else {
            vec![ins(BPF_ST | BPF_MEM | sz, dst, 0, off, parse_imm(rhs) as i32)]
        };
    }
    // Register destination forms.
    let (dst, w) = parse_reg(toks[0]);
    let op = toks[1];
    let rest = l.split_once(op).map(|x| x.1).unwrap().trim();
    let class = if w { BPF_ALU } else { BPF_ALU64 };
    if op == "=" {
        if let Some(body) = rest.strip_suffix(" ll") {
            let body = body.trim();
            if let Some(m) = body.strip_prefix("map_value[") {
                let (idx, off) = m.split_once("][").unwrap();
                let off = off.strip_suffix(']').unwrap();
                return vec![
                    ins(BPF_LD | BPF_IMM | BPF_DW, dst, BPF_PSEUDO_MAP_VALUE, 0, parse_imm(idx) as i32),
                    ins(0, 0, 0, 0, parse_imm(off) as i32),
                ];
            }
            if let Some(m) = body.strip_prefix("map[") {
                let idx = m.strip_suffix(']').unwrap();
                return vec![ins(BPF_LD | BPF_IMM | BPF_DW, dst, BPF_PSEUDO_MAP_FD, 0, parse_imm(idx) as i32), ins(0, 0, 0, 0, 0)];
            }
            let v = parse_imm(body) as u64;
            return vec![ins(BPF_LD | BPF_IMM | BPF_DW, dst, 0, 0, v as u32 as i32), ins(0, 0, 0, 0, (v >> 32) as u32 as i32)];
        }
        if rest.starts_with("*(") {
            let (sz, signed, src, off) = parse_mem(rest);
            let mode = if signed { BPF_MEMSX } else { BPF_MEM };
            return vec![ins(BPF_LDX | mode | sz, dst, src, off, 0)];
        }
        if let Some(r) = rest.strip_prefix('-') {
            if is_reg(r) {
                return vec![ins(class | BPF_NEG, dst, 0, 0, 0)];
            }
        }
        for (name, bits, be) in
            [("be16", 16, true), ("be32", 32, true), ("be64", 64, true), ("le16", 16, false), ("le32", 32, false), ("le64", 64, false)]
        {
            if rest.starts_with(name) {
                let src = if be { BPF_X } else { BPF_K };
                return vec![ins(BPF_ALU | BPF_END | src, dst, 0, 0, bits)];
            }
        }
        for (name, bits) in [("bswap16", 16), ("bswap32", 32), ("bswap64", 64)] {
            if rest.starts_with(name) {
                return vec![ins(BPF_ALU64 | BPF_END, dst, 0, 0, bits)];
            }
        }
        for (name, bits) in [("(s8)", 8), ("(s16)", 16), ("(s32)", 32)] {
            if let Some(r) = rest.strip_prefix(name) {
                return vec![ins(class | BPF_MOV | BPF_X, dst, parse_reg(r).0, bits, 0)];
            }
        }
        return if is_reg(rest) {
            vec![ins(class | BPF_MOV | BPF_X, dst, parse_reg(rest).0, 0, 0)]
        } else {
            vec![ins(class | BPF_MOV | BPF_K, dst, 0, 0, parse_imm(rest) as i32)]
        };
    }
    let code = alu_op(op);
    let off = if op == "s/=" || op == "s%=" { 1 } else { 0 };
    if is_reg(rest) {
        vec![ins(class | code | BPF_X, dst, parse_reg(rest).0, off, 0)]
    } else {
        vec![ins(class | code | BPF_K, dst, 0, off, parse_imm(rest) as i32)]
    }
}

pub fn map(name: &str, map_type: u32, key_size: u32, value_size: u32, max_entries: u32) -> MapDef {
    MapDef::new(name, map_type, key_size, value_size, max_entries)
}

pub fn program(insns: Vec<Insn>, maps: Vec<MapDef>) -> Program {
    Program { name: "test".to_string(), section: "xdp".to_string(), insns, maps }
}

#[test]
fn encodings() {
    let p = asm("
        r2 = *(u32 *)(r1 + 0)
        w3 = 5
        r3 += r2
        if r3 > r2 goto out
        *(u64 *)(r10 - 8) = r3
        r1 = map[0] ll
      out:
        r0 = 2
        exit
        ");
    assert_eq!(p[0], Insn::new(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0));
    assert_eq!(p[1], Insn::new(BPF_ALU | BPF_MOV | BPF_K, 3, 0, 0, 5));
    assert_eq!(p[2], Insn::new(BPF_ALU64 | BPF_ADD | BPF_X, 3, 2, 0, 0));
    assert_eq!(p[3], Insn::new(BPF_JMP | BPF_JGT | BPF_X, 3, 2, 3, 0));
    assert_eq!(p[4], Insn::new(BPF_STX | BPF_MEM | BPF_DW, 10, 3, -8, 0));
    assert_eq!(p[5], Insn::new(BPF_LD | BPF_IMM | BPF_DW, 1, BPF_PSEUDO_MAP_FD, 0, 0));
    assert_eq!(p.len(), 9);
}

// ---------------------------------------------------------------- verifier rules
//
// Rules pinned here are checked with no maps under the default (privileged) options; each
// outcome is the kernel verifier's.

fn verify_src(src: &str) -> Result<sluice_ebpf::verifier::VerifiedProgram, sluice_ebpf::verifier::VerifyError> {
    sluice_ebpf::verifier::verify(&program(asm(src), vec![]), &sluice_ebpf::verifier::VerifyOptions::default())
}

#[track_caller]
fn accepts(src: &str) -> sluice_ebpf::verifier::VerifiedProgram {
    match verify_src(src) {
        Ok(v) => v,
        Err(e) => panic!("refused: {e}"),
    }
}

#[track_caller]
fn rejects(src: &str, insn: usize, frag: &str) {
    match verify_src(src) {
        Ok(v) => panic!("accepted (stats {:?}); expected insn {insn}: ...{frag}...", v.stats()),
        Err(e) => assert!(e.insn == insn && e.msg.contains(frag), "expected insn {insn} with {frag:?}, got: {e}"),
    }
}

/// Liveness: a conditional jump comparing a register with itself (`if r1 & r1`) reads it.
/// The path with r1 = 0 (never taken) is saved at `check` with r1 precise; the path with
/// r1 > 10 must not be pruned against it (r1 is live there), so its taken side is explored
/// and refused.
#[test]
fn a_jump_comparing_a_register_with_itself_reads_it() {
    rejects(
        "call 7
        r1 = 0
        r2 = 0
        r3 = 0
        r4 = 0
        r5 = 0
        if r0 > 10 goto unknown
        r2 = 1
        r3 = 1
        goto check
    unknown:
        r1 = r0
    check:
        if r1 & r1 goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u64 *)(r10 + 8)
        exit",
        14,
        "invalid read from stack R10 off=8 size=8",
    );
}

/// Pointer arithmetic bound (BPF_MAX_VAR_OFF = 2^29): a packet pointer plus a scalar in
/// [0, 2^29] is allowed; the bound on the variable offset is inclusive (the kernel's
/// check_reg_sane_offset refuses a minimum at or beyond 2^29, not a maximum of exactly 2^29).
#[test]
fn a_variable_pointer_offset_of_exactly_the_bound_is_allowed() {
    accepts(
        "r2 = *(u32 *)(r1 + 0)
        r4 = *(u32 *)(r1 + 16)
        if r4 > 0x20000000 goto out
        r2 += r4
    out:
        r0 = 2
        exit",
    );
}

/// check_packet_access: an access below a packet pointer at a constant offset is outside
/// the checked range ("invalid access to packet, off=-1"), not a negative minimum (the
/// pointer's variable part is 0).
#[test]
fn a_packet_access_at_a_negative_constant_offset_is_out_of_range() {
    rejects(
        "r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r4 = r2
        r4 += 8
        if r4 > r3 goto out
        r0 = *(u8 *)(r2 - 1)
    out:
        r0 = 2
        exit",
        5,
        "invalid access to packet, off=-1 size=1",
    );
}

/// check_packet_access: a packet pointer whose variable offset may be negative is refused
/// with "min value is negative" before its range is looked at.
#[test]
fn a_packet_access_through_a_possibly_negative_variable_offset_has_a_negative_minimum() {
    rejects(
        "r2 = *(u32 *)(r1 + 0)
        r5 = *(u32 *)(r1 + 16)
        if r5 > 8 goto out
        r5 -= 4
        r2 += r5
        r0 = *(u8 *)(r2 + 0)
    out:
        r0 = 2
        exit",
        5,
        "R2 min value is negative",
    );
}

/// Sign extension (MOVSX, coerce_reg_to_size_sx): r1 in [0, 128] sign-extended from 8 bits
/// is in [-128, 127] (128 is 0x80, i.e. -128), so `r2 s< 0` can be taken.
#[test]
fn sign_extending_a_value_whose_top_is_the_sign_bit_can_be_negative() {
    rejects(
        "r1 = *(u32 *)(r1 + 16)
        if r1 > 128 goto out
        r2 = (s8)r1
        if r2 s< 0 goto bad
    out:
        r0 = 2
        exit
    bad:
        r0 = *(u64 *)(r10 + 8)
        exit",
        6,
        "invalid read from stack R10 off=8 size=8",
    );
}

/// A chain of `n` diamonds on unknown packet metadata: the taken side of diamond k sets
/// bit k of r7, so every path reaches the end with a different r7; r9 = -8 throughout.
fn diamonds(n: u32, tail: &str) -> String {
    let mut s = String::from("r6 = r1\n r7 = 0\n r9 = -8\n");
    for k in 0..n {
        s += &format!(
            "r0 = *(u32 *)(r6 + 16)
            if r0 > 3 goto t{k}
            r2 = 1
            r3 = 2
            r4 = 3
            r5 = 4
            r8 = 5
            goto j{k}
        t{k}:
            r7 |= {bit}
            r2 = 1
            r3 = 2
            r4 = 3
            r5 = 4
            r8 = 5
        j{k}:
        ",
            bit = 1u32 << k
        );
    }
    s + tail
}

/// Precision backtracking (backtrack_insn, ALU): `r8 += r7` with r8 not needed needs
/// nothing, so only r9 (a stack offset) becomes precise; r7 stays imprecise and the 2^20
/// paths, differing only in r7, are pruned at the joins (far below the 1M-insn limit).
#[test]
fn an_alu_op_whose_destination_is_not_needed_makes_nothing_precise() {
    let v = accepts(&diamonds(
        20,
        "r8 = 0
        r8 += r7
        r1 = r10
        r1 += r9
        r0 = 2
        exit",
    ));
    assert!(v.stats().processed_insns < 10_000, "{:?}", v.stats());
}

/// Precision backtracking (backtrack_insn, atomic with BPF_FETCH): the fetched register
/// gets an unknown value with no source; nothing else becomes needed, so r7 (read by
/// `r8 = r7`, so live at every join) stays imprecise and the joins prune.
#[test]
fn an_atomic_fetch_makes_nothing_else_precise() {
    let v = accepts(&diamonds(
        20,
        "r8 = r7
        *(u64 *)(r10 - 8) = 0
        r1 = 1
        atomic u64 r10 - 8 fetch_add r1
        r1 = r10
        r1 += r9
        r0 = 2
        exit",
    ));
    assert!(v.stats().processed_insns < 10_000, "{:?}", v.stats());
}

/// A misaligned stack load spanning two spilled non-zero constants (8 and 7): the kernel
/// refuses the load itself (check_ptr_alignment is strict for stack pointers), and so does
/// sluice now; were the load let through, it would read unknown bytes, not the constant 0,
/// and the taken side's bad read would be refused (so either refusal passes).
#[test]
fn a_misaligned_stack_load_across_two_nonzero_spills_is_not_zero() {
    let e = verify_src(
        "r1 = 8
        *(u64 *)(r10 - 16) = r1
        r1 = 7
        *(u64 *)(r10 - 8) = r1
        r0 = *(u64 *)(r10 - 12)
        if r0 != 0 goto bad
        r0 = 2
        exit
    bad:
        r0 = *(u64 *)(r10 + 8)
        exit",
    )
    .expect_err("accepted");
    assert!(e.insn == 4 || e.insn == 8, "{e}");
}

/// verifier_negative's `PAD_TO_JOIN` with one more jump, for a path whose state the verifier
/// saved again at `pad` (a longer prologue): 2 jumps and 10 instructions, so the verifier
/// saves its state at the `join` that follows. Clobbers r3-r5.
pub const PAD_TWICE_TO_JOIN: &str = "
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
        goto pad2
    pad2:
        r3 = 8
        r4 = 9
        goto join";
