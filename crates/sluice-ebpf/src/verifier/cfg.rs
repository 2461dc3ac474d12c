//! Structural checks that need no abstract interpretation: instruction encodings, jump and
//! call targets, function boundaries, reachability, the call graph, plus the static
//! register liveness used to compare states.

use super::helpers;
use super::{err, VerifyError};
use crate::insn::*;
use crate::program::Program;

/// Kernel MAX_CALL_FRAMES: the entry function plus 7 nested bpf-to-bpf calls.
pub(crate) const MAX_CALL_FRAMES: usize = 8;

const R0: u16 = 1;
const R1_5: u16 = 0b11_1110;
const R0_5: u16 = 0b11_1111;
const R10: u16 = 1 << 10;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    /// Falls through to the next slot.
    Normal,
    /// First slot of a 64-bit immediate load; falls through two slots.
    Lddw,
    /// Second slot of `lddw`: never executed on its own.
    Second,
    Jump(usize),
    Cond(usize),
    CallHelper(i32),
    CallSub(usize),
    Exit,
}

pub(crate) struct Cfg {
    pub kinds: Vec<Kind>,
    /// [start, end) of each function; the entry is first.
    pub subprogs: Vec<(usize, usize)>,
    pub insn_subprog: Vec<u32>,
    /// Where states are saved and compared: jump targets, branch fall-throughs,
    /// function entries and call return points.
    pub prune: Vec<bool>,
    /// Registers (bit n = Rn) that some path from here reads before writing.
    pub live_in: Vec<u16>,
    /// Per function: (call insn, callee function) for every bpf-to-bpf call in it.
    pub callees: Vec<Vec<(usize, usize)>>,
}

fn target(pc: usize, delta: i64, n: usize) -> Result<usize, VerifyError> {
    let t = pc as i64 + delta + 1;
    if t < 0 || t >= n as i64 {
        return Err(err(pc, format!("jump out of range from insn {pc} to {t}")));
    }
    Ok(t as usize)
}

fn check_reg(pc: usize, r: u8) -> Result<(), VerifyError> {
    if r > 10 {
        return Err(err(pc, format!("R{r} is invalid")));
    }
    Ok(())
}

fn check_dst_write(pc: usize, r: u8) -> Result<(), VerifyError> {
    check_reg(pc, r)?;
    if r == 10 {
        return Err(err(pc, "frame pointer is read only (write to R10)"));
    }
    Ok(())
}

fn reserved(pc: usize, what: &str) -> VerifyError {
    err(pc, format!("{what} uses reserved fields"))
}

fn unknown(pc: usize, code: u8) -> VerifyError {
    err(pc, format!("unknown opcode {code:#04x}"))
}

/// Validates every field of the instruction at `pc` (fields it does not use must be zero).
fn decode(prog: &Program, pc: usize) -> Result<Kind, VerifyError> {
    let insns = &prog.insns;
    let n = insns.len();
    let i = insns[pc];
    let code = i.code;
    let class = code & 0x07;
    let x = code & BPF_X != 0;
    match class {
        BPF_ALU | BPF_ALU64 => {
            let is64 = class == BPF_ALU64;
            let op = code & 0xf0;
            match op {
                BPF_NEG => {
                    if x || i.src != 0 || i.off != 0 || i.imm != 0 {
                        return Err(reserved(pc, "BPF_NEG"));
                    }
                    check_dst_write(pc, i.dst)?;
                }
                BPF_END => {
                    // ALU64 form is the unconditional byte swap and has no source bit.
                    if i.src != 0 || i.off != 0 || !matches!(i.imm, 16 | 32 | 64) || (is64 && x) {
                        return Err(reserved(pc, "BPF_END"));
                    }
                    check_dst_write(pc, i.dst)?;
                }
                BPF_ADD | BPF_SUB | BPF_MUL | BPF_DIV | BPF_OR | BPF_AND | BPF_LSH | BPF_RSH | BPF_MOD | BPF_XOR | BPF_MOV | BPF_ARSH => {
                    // off selects signed div/mod (1) or a sign-extending move (8/16/32).
                    let off_ok = match op {
                        BPF_DIV | BPF_MOD => i.off == 0 || i.off == 1,
                        BPF_MOV => i.off == 0 || (x && (i.off == 8 || i.off == 16 || (is64 && i.off == 32))),
                        _ => i.off == 0,
                    };
                    if !off_ok {
                        return Err(reserved(pc, "BPF_ALU"));
                    }
                    if x {
                        if i.imm != 0 {
                            return Err(reserved(pc, "BPF_ALU"));
                        }
                        check_reg(pc, i.src)?;
                    } else if i.src != 0 {
                        return Err(reserved(pc, "BPF_ALU"));
                    }
                    check_dst_write(pc, i.dst)?;
                    if !x {
                        let width = if is64 { 64 } else { 32 };
                        if matches!(op, BPF_LSH | BPF_RSH | BPF_ARSH) && !(0..width).contains(&i.imm) {
                            return Err(err(pc, format!("invalid shift {}", i.imm)));
                        }
                        // A constant zero divisor is always a bug (a register divisor is
                        // allowed: the runtime defines x/0 = 0 and x%0 = x).
                        if matches!(op, BPF_DIV | BPF_MOD) && i.imm == 0 {
                            return Err(err(pc, "div by zero"));
                        }
                    }
                }
                _ => return Err(unknown(pc, code)),
            }
            Ok(Kind::Normal)
        }
        BPF_LD => {
            if code != BPF_LD | BPF_IMM | BPF_DW {
                let mode = code & 0xe0;
                if mode == BPF_ABS || mode == BPF_IND {
                    return Err(err(pc, "BPF_LD_[ABS|IND] instructions are not allowed in XDP programs"));
                }
                return Err(unknown(pc, code));
            }
            if i.off != 0 {
                return Err(reserved(pc, "BPF_LD_IMM64"));
            }
            check_dst_write(pc, i.dst)?;
            let Some(nx) = insns.get(pc + 1).copied() else {
                return Err(err(pc, "invalid BPF_LD_IMM64 insn: truncated (no second slot)"));
            };
            if nx.code != 0 || nx.dst != 0 || nx.src != 0 || nx.off != 0 {
                return Err(err(pc, "invalid BPF_LD_IMM64 insn: malformed second slot"));
            }
            match i.src {
                0 => {}
                BPF_PSEUDO_MAP_FD | BPF_PSEUDO_MAP_VALUE => {
                    let idx = i.imm;
                    let m = usize::try_from(idx)
                        .ok()
                        .and_then(|k| prog.maps.get(k))
                        .ok_or_else(|| err(pc, format!("map index {idx} out of range ({} maps)", prog.maps.len())))?;
                    if !helpers::is_known_map(m.map_type) {
                        return Err(err(pc, format!("map '{}' has unsupported map type {}", m.name, m.map_type)));
                    }
                    if i.src == BPF_PSEUDO_MAP_FD {
                        if nx.imm != 0 {
                            return Err(err(pc, "invalid BPF_LD_IMM64 insn: map reference with non-zero upper half"));
                        }
                    } else {
                        // Direct value access: global data lives in single-entry arrays.
                        if m.map_type != crate::program::map_type::ARRAY || m.max_entries != 1 {
                            return Err(err(pc, format!("map '{}' does not support direct value access", m.name)));
                        }
                        let off = nx.imm as u32;
                        if off >= m.value_size {
                            return Err(err(pc, format!("direct value offset of {off} is not allowed (value_size={})", m.value_size)));
                        }
                    }
                }
                s => return Err(err(pc, format!("unsupported BPF_LD_IMM64 pseudo source {s}"))),
            }
            Ok(Kind::Lddw)
        }
        BPF_LDX => {
            let mode = code & 0xe0;
            let size = code & 0x18;
            if !(mode == BPF_MEM || (mode == BPF_MEMSX && size != BPF_DW)) {
                return Err(unknown(pc, code));
            }
            if i.imm != 0 {
                return Err(reserved(pc, "BPF_LDX"));
            }
            check_reg(pc, i.src)?;
            check_dst_write(pc, i.dst)?;
            Ok(Kind::Normal)
        }
        BPF_ST => {
            if code & 0xe0 != BPF_MEM {
                return Err(unknown(pc, code));
            }
            if i.src != 0 {
                return Err(reserved(pc, "BPF_ST"));
            }
            check_reg(pc, i.dst)?;
            Ok(Kind::Normal)
        }
        BPF_STX => {
            let mode = code & 0xe0;
            check_reg(pc, i.dst)?;
            check_reg(pc, i.src)?;
            if mode == BPF_MEM {
                if i.imm != 0 {
                    return Err(reserved(pc, "BPF_STX"));
                }
            } else if mode == BPF_ATOMIC {
                let size = code & 0x18;
                if size != BPF_W && size != BPF_DW {
                    return Err(err(pc, "invalid atomic operand size (only 4 and 8 bytes)"));
                }
                if !atomic_op_ok(i.imm) {
                    return Err(err(pc, format!("invalid atomic op {:#x}", i.imm)));
                }
                // Fetching forms write the source register.
                if i.imm & BPF_FETCH != 0 && i.imm != BPF_CMPXCHG && i.src == 10 {
                    return Err(err(pc, "frame pointer is read only (write to R10)"));
                }
            } else {
                return Err(unknown(pc, code));
            }
            Ok(Kind::Normal)
        }
        _ => {
            // BPF_JMP / BPF_JMP32
            let op = code & 0xf0;
            let is32 = class == BPF_JMP32;
            match op {
                BPF_JA => {
                    if x || i.dst != 0 || i.src != 0 {
                        return Err(reserved(pc, "BPF_JA"));
                    }
                    // JMP32|JA ("gotol") carries its offset in imm.
                    let delta = if is32 {
                        if i.off != 0 {
                            return Err(reserved(pc, "BPF_JA"));
                        }
                        i.imm as i64
                    } else {
                        if i.imm != 0 {
                            return Err(reserved(pc, "BPF_JA"));
                        }
                        i.off as i64
                    };
                    Ok(Kind::Jump(target(pc, delta, n)?))
                }
                BPF_CALL if !is32 => {
                    if x || i.dst != 0 || i.off != 0 {
                        return Err(reserved(pc, "BPF_CALL"));
                    }
                    match i.src {
                        0 => {
                            if helpers::proto(i.imm).is_none() {
                                return Err(err(
                                    pc,
                                    match helpers::helper_name(i.imm) {
                                        Some(n) => format!(
                                            "program of this type cannot use helper {n}#{} (not supported by sluice for XDP)",
                                            i.imm
                                        ),
                                        None => format!("invalid func unknown#{}", i.imm),
                                    },
                                ));
                            }
                            Ok(Kind::CallHelper(i.imm))
                        }
                        BPF_PSEUDO_CALL => Ok(Kind::CallSub(target(pc, i.imm as i64, n)?)),
                        2 => Err(err(pc, "kfunc calls are not supported")),
                        _ => Err(reserved(pc, "BPF_CALL")),
                    }
                }
                BPF_EXIT if !is32 => {
                    if x || i.dst != 0 || i.src != 0 || i.off != 0 || i.imm != 0 {
                        return Err(reserved(pc, "BPF_EXIT"));
                    }
                    Ok(Kind::Exit)
                }
                BPF_JEQ | BPF_JGT | BPF_JGE | BPF_JSET | BPF_JNE | BPF_JSGT | BPF_JSGE | BPF_JLT | BPF_JLE | BPF_JSLT | BPF_JSLE => {
                    check_reg(pc, i.dst)?;
                    if x {
                        if i.imm != 0 {
                            return Err(reserved(pc, "BPF_JMP"));
                        }
                        check_reg(pc, i.src)?;
                    } else if i.src != 0 {
                        return Err(reserved(pc, "BPF_JMP"));
                    }
                    Ok(Kind::Cond(target(pc, i.off as i64, n)?))
                }
                _ => Err(unknown(pc, code)),
            }
        }
    }
}

fn atomic_op_ok(imm: i32) -> bool {
    let base = imm & !BPF_FETCH;
    matches!(base, 0x00 | 0x40 | 0x50 | 0xa0) || imm == BPF_XCHG || imm == BPF_CMPXCHG
}

fn successors(kind: Kind, pc: usize) -> ([usize; 2], usize) {
    match kind {
        Kind::Normal | Kind::CallHelper(_) => ([pc + 1, 0], 1),
        Kind::Lddw => ([pc + 2, 0], 1),
        Kind::Jump(t) => ([t, 0], 1),
        Kind::Cond(t) => ([pc + 1, t], 2),
        // The callee runs in its own frame; control returns to pc + 1.
        Kind::CallSub(_) => ([pc + 1, 0], 1),
        Kind::Exit | Kind::Second => ([0, 0], 0),
    }
}

pub(crate) fn build(prog: &Program, max_insns: usize) -> Result<Cfg, VerifyError> {
    let insns = &prog.insns;
    let n = insns.len();
    if n == 0 {
        return Err(err(0, "empty program"));
    }
    if n > max_insns {
        return Err(err(max_insns, format!("program too large: {n} insns (max {max_insns})")));
    }

    let mut kinds = vec![Kind::Normal; n];
    let mut pc = 0;
    while pc < n {
        let k = decode(prog, pc)?;
        kinds[pc] = k;
        if k == Kind::Lddw {
            kinds[pc + 1] = Kind::Second;
            pc += 2;
        } else {
            pc += 1;
        }
    }
    for (pc, k) in kinds.iter().enumerate() {
        if let Kind::Jump(t) | Kind::Cond(t) | Kind::CallSub(t) = *k {
            if kinds[t] == Kind::Second {
                return Err(err(pc, format!("jump into the middle of ldimm64 insn {}", t - 1)));
            }
        }
    }

    // Functions: the entry plus every call target, each running to the next one.
    let mut starts: Vec<usize> = vec![0];
    starts.extend(kinds.iter().filter_map(|k| if let Kind::CallSub(t) = *k { Some(t) } else { None }));
    starts.sort_unstable();
    starts.dedup();
    let subprogs: Vec<(usize, usize)> = starts.iter().enumerate().map(|(k, &s)| (s, starts.get(k + 1).copied().unwrap_or(n))).collect();
    let mut insn_subprog = vec![0u32; n];
    for (k, &(s, e)) in subprogs.iter().enumerate() {
        for x in &mut insn_subprog[s..e] {
            *x = k as u32;
        }
    }
    for (pc, k) in kinds.iter().enumerate() {
        if let Kind::Jump(t) | Kind::Cond(t) = *k {
            if insn_subprog[t] != insn_subprog[pc] {
                return Err(err(pc, format!("jump out of range from insn {pc} to {t} (into another function)")));
            }
        }
    }
    for &(s, e) in &subprogs {
        let mut last = e - 1;
        if kinds[last] == Kind::Second && last > s {
            last -= 1;
        }
        if !matches!(kinds[last], Kind::Exit | Kind::Jump(_)) {
            return Err(err(last, "last insn is not an exit or jmp (execution would fall off the end)"));
        }
    }

    // Every instruction must be reachable from the entry (the kernel refuses dead code too).
    let mut seen = vec![false; n];
    let mut stack = vec![0usize];
    while let Some(pc) = stack.pop() {
        if pc >= n || seen[pc] {
            continue;
        }
        seen[pc] = true;
        let (succ, cnt) = successors(kinds[pc], pc);
        stack.extend_from_slice(&succ[..cnt]);
        if let Kind::CallSub(t) = kinds[pc] {
            stack.push(t);
        }
    }
    if let Some(pc) = (0..n).find(|&pc| !seen[pc] && kinds[pc] != Kind::Second) {
        return Err(err(pc, format!("unreachable insn {pc}")));
    }

    // Call graph: no recursion, and at most MAX_CALL_FRAMES frames deep.
    let m = subprogs.len();
    let mut callees: Vec<Vec<(usize, usize)>> = vec![Vec::new(); m];
    for (pc, k) in kinds.iter().enumerate() {
        if let Kind::CallSub(t) = *k {
            callees[insn_subprog[pc] as usize].push((pc, insn_subprog[t] as usize));
        }
    }
    let mut color = vec![0u8; m];
    let mut depth = vec![0usize; m];
    let mut deepest: Vec<Option<(usize, usize)>> = vec![None; m];
    let mut dfs: Vec<(usize, usize)> = vec![(0, 0)];
    color[0] = 1;
    while let Some(top) = dfs.last_mut() {
        let (node, idx) = *top;
        if let Some(&(cpc, c)) = callees[node].get(idx) {
            top.1 += 1;
            match color[c] {
                0 => {
                    color[c] = 1;
                    dfs.push((c, 0));
                }
                1 => return Err(err(cpc, format!("recursive call from insn {cpc} to the function at insn {}", subprogs[c].0))),
                _ => {}
            }
        } else {
            let mut best = 0;
            for &(cpc, c) in &callees[node] {
                if depth[c] > best {
                    best = depth[c];
                    deepest[node] = Some((cpc, c));
                }
            }
            depth[node] = best + 1;
            color[node] = 2;
            dfs.pop();
        }
    }
    if depth[0] > MAX_CALL_FRAMES {
        let (mut node, mut frames) = (0usize, 1usize);
        while let Some((cpc, c)) = deepest[node] {
            frames += 1;
            if frames > MAX_CALL_FRAMES {
                return Err(err(cpc, format!("the call stack of {} frames is too deep (max {MAX_CALL_FRAMES})", depth[0])));
            }
            node = c;
        }
    }

    let mut prune = vec![false; n];
    for &(s, _) in &subprogs {
        prune[s] = true;
    }
    for (pc, k) in kinds.iter().enumerate() {
        match *k {
            Kind::Jump(t) => prune[t] = true,
            Kind::Cond(t) => {
                prune[t] = true;
                if pc + 1 < n {
                    prune[pc + 1] = true;
                }
            }
            Kind::CallSub(_) if pc + 1 < n => prune[pc + 1] = true,
            _ => {}
        }
    }

    let live_in = liveness(insns, &kinds);
    Ok(Cfg { kinds, subprogs, insn_subprog, prune, live_in, callees })
}

fn bit(r: u8) -> u16 {
    1u16 << (r & 0x0f)
}

/// (registers read, registers written) by one instruction.
fn use_def(i: Insn, kind: Kind, live_in: &[u16]) -> (u16, u16) {
    let x = i.code & BPF_X != 0;
    let (u, d) = match i.class() {
        BPF_ALU | BPF_ALU64 => match i.code & 0xf0 {
            BPF_MOV => (if x { bit(i.src) } else { 0 }, bit(i.dst)),
            BPF_NEG | BPF_END => (bit(i.dst), bit(i.dst)),
            _ => (bit(i.dst) | if x { bit(i.src) } else { 0 }, bit(i.dst)),
        },
        BPF_LD => (0, if kind == Kind::Lddw { bit(i.dst) } else { 0 }),
        BPF_LDX => (bit(i.src), bit(i.dst)),
        BPF_ST => (bit(i.dst), 0),
        BPF_STX => {
            if i.code & 0xe0 == BPF_ATOMIC {
                if i.imm == BPF_CMPXCHG {
                    (bit(i.dst) | bit(i.src) | R0, R0)
                } else if i.imm & BPF_FETCH != 0 {
                    (bit(i.dst) | bit(i.src), bit(i.src))
                } else {
                    (bit(i.dst) | bit(i.src), 0)
                }
            } else {
                (bit(i.dst) | bit(i.src), 0)
            }
        }
        _ => match kind {
            Kind::Cond(_) => (bit(i.dst) | if x { bit(i.src) } else { 0 }, 0),
            Kind::CallHelper(id) => {
                let nargs = helpers::proto(id).map(|p| p.nargs()).unwrap_or(5);
                (((1u16 << (nargs + 1)) - 1) & R1_5, R0_5)
            }
            // A callee reads only the argument registers live at its entry.
            Kind::CallSub(t) => (live_in.get(t).copied().unwrap_or(R1_5) & R1_5, R0_5),
            Kind::Exit => (R0, 0),
            _ => (0, 0),
        },
    };
    (u & !R10, d & !R10)
}

/// Backward may-liveness, solved with a worklist so hostile control flow stays linear-ish.
fn liveness(insns: &[Insn], kinds: &[Kind]) -> Vec<u16> {
    let n = kinds.len();
    // deps[pc]: instructions whose live-in depends on live_in[pc] (CFG predecessors, and
    // the call sites of a function entry).
    let mut count = vec![0u32; n + 1];
    let each_dep = |f: &mut dyn FnMut(usize, usize)| {
        for (pc, &k) in kinds.iter().enumerate() {
            let (succ, cnt) = successors(k, pc);
            for &s in &succ[..cnt] {
                if s < n {
                    f(s, pc);
                }
            }
            if let Kind::CallSub(t) = k {
                f(t, pc);
            }
        }
    };
    each_dep(&mut |s, _| count[s + 1] += 1);
    for k in 0..n {
        count[k + 1] += count[k];
    }
    let mut fill = count.clone();
    let mut deps = vec![0u32; count[n] as usize];
    each_dep(&mut |s, p| {
        deps[fill[s] as usize] = p as u32;
        fill[s] += 1;
    });

    let mut live = vec![0u16; n];
    let mut queued = vec![true; n];
    let mut work: Vec<usize> = (0..n).collect();
    while let Some(pc) = work.pop() {
        queued[pc] = false;
        if kinds[pc] == Kind::Second {
            continue;
        }
        let (succ, cnt) = successors(kinds[pc], pc);
        let out = succ[..cnt].iter().filter(|&&s| s < n).fold(0u16, |a, &s| a | live[s]);
        let (u, d) = use_def(insns[pc], kinds[pc], &live);
        let inn = u | (out & !d);
        if inn != live[pc] {
            live[pc] = inn;
            for &p in &deps[count[pc] as usize..count[pc + 1] as usize] {
                let p = p as usize;
                if !queued[p] {
                    queued[p] = true;
                    work.push(p);
                }
            }
        }
    }
    live
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::*;

    /// Liveness reaches a fixed point across a loop's back edge: r6, read at the loop head,
    /// is live on the back edge's jump and the instructions before it, though the worklist
    /// meets that jump before the head's live set is known (the head's change must re-queue
    /// it: the `r0 = 0` after the loop stops the first cascade, so nothing else revisits it).
    #[test]
    fn liveness_flows_around_a_back_edge() {
        let insns = vec![
            mov64_imm(6, 0),
            mov64_imm(7, 5),
            mov64_reg(8, 6), // 2: the loop head reads r6
            alu64_imm(BPF_ADD, 6, 1),
            alu64_imm(BPF_SUB, 7, 1),
            jmp_imm(BPF_JNE, 7, 0, -4), // 5: back to 2
            mov64_imm(0, 0),
            exit(),
        ];
        let prog = Program { name: "loop".into(), section: "xdp".into(), insns, maps: Vec::new() };
        let cfg = build(&prog, 4096).unwrap();
        let r = |pc: usize, reg: u8| cfg.live_in[pc] & (1 << reg) != 0;
        assert!(r(2, 6) && r(2, 7), "{:#x}", cfg.live_in[2]);
        assert!(r(5, 6) && r(5, 7) && !r(5, 0), "{:#x}", cfg.live_in[5]);
        assert!(r(4, 6) && r(3, 6), "{:?}", &cfg.live_in[3..5]);
        assert_eq!(cfg.live_in[0] & !(1 << 10), 0, "nothing is read before it is written");
    }
}
