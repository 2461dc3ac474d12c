//! Abstract semantics of each instruction: ALU and pointer arithmetic, memory accesses,
//! branches, helper and bpf-to-bpf calls.

use super::cfg::{Kind, MAX_CALL_FRAMES};
use super::helpers::{self, Arg, Ret, TAIL_CALL};
use super::mem;
use super::scalar::{alu32, alu64, refine32, refine64, AluOp, Cmp, Scalar};
use super::state::{stack_pos, Frame, RefState, Reg, RegType, Slot, State, INNER_MAP, MAX_BPF_STACK, SB};
use super::{err, Verifier, VerifyError};
use crate::insn::*;
use crate::program::MapDef;

/// Bound on pointer offsets (kernel BPF_MAX_VAR_OFF): keeps every address computation far
/// from wrapping, whatever the program adds.
const MAX_VAR_OFF: i64 = 1 << 29;
/// Largest packet range a comparison can establish (kernel MAX_PACKET_OFF).
const MAX_PACKET_OFF: i64 = 0xffff;
/// Largest size a helper may be asked to read or write through a pointer.
const MAX_HELPER_SIZE: u64 = 1 << 29;

const XDP_MD_SIZE: i64 = 24;

pub(crate) enum Flow {
    Next(usize),
    /// Continue at `next`; `other` waits on the worklist at `other_pc`.
    Fork {
        other: State,
        other_pc: usize,
        next: usize,
    },
    /// The path ended (program exit, or an infeasible branch).
    End,
}

#[derive(Clone, Copy)]
enum Access {
    Read {
        sx: bool,
    },
    /// A store of `val`, which came from register `src` (255 for an immediate).
    Write {
        val: Reg,
        src: u8,
    },
    Atomic,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Rw {
    Read,
    ReadWrite,
    /// Written only: may be uninitialised.
    Write,
    /// Read; spilled pointers may be among the bytes (printk arguments).
    ReadPtrsOk,
}

fn size_bytes(code: u8) -> u32 {
    match code & 0x18 {
        BPF_B => 1,
        BPF_H => 2,
        BPF_W => 4,
        _ => 8,
    }
}

/// `bpf_tail_call` at `pc` in a subprogram: when it fails the subprogram goes on; when it
/// succeeds the target runs in place of the rest of the subprogram and returns to its
/// caller with the target's r0, any scalar (the kernel's x86-64 JIT since 5.10; its
/// verifier explores that return the same way). The caller's frames are as they were,
/// less the packet pointers the call invalidated.
fn tail_call_returns(st: &State, pc: usize) -> Flow {
    let mut returned = st.clone();
    let callsite = returned.cur().callsite;
    returned.frames.pop();
    returned.cur_mut().regs[0] = Reg::scalar(Scalar::UNKNOWN);
    Flow::Fork { other: returned, other_pc: callsite + 1, next: pc + 1 }
}

fn op_name(op: AluOp) -> &'static str {
    match op {
        AluOp::Add => "+=",
        AluOp::Sub => "-=",
        AluOp::Mul => "*=",
        AluOp::Div | AluOp::SDiv => "/=",
        AluOp::Mod | AluOp::SMod => "%=",
        AluOp::Or => "|=",
        AluOp::And => "&=",
        AluOp::Xor => "^=",
        AluOp::Lsh => "<<=",
        AluOp::Rsh => ">>=",
        AluOp::Arsh => "s>>=",
    }
}

impl<'a> Verifier<'a> {
    pub(crate) fn step(&mut self, st: &mut State, pc: usize) -> Result<Flow, VerifyError> {
        let insn = *self.insns.get(pc).ok_or_else(|| err(pc, "internal: pc out of range"))?;
        let kind = *self.cfg.kinds.get(pc).ok_or_else(|| err(pc, "internal: pc out of range"))?;
        match kind {
            Kind::Second => Err(err(pc, "internal: executing the second half of ldimm64")),
            Kind::Lddw => {
                self.lddw(st, pc, insn)?;
                Ok(Flow::Next(pc + 2))
            }
            Kind::Jump(t) => Ok(Flow::Next(t)),
            Kind::Cond(t) => self.cond(st, pc, insn, t),
            Kind::Exit => self.exit(st, pc),
            Kind::CallSub(t) => self.call_sub(st, pc, t),
            Kind::CallHelper(id) => {
                self.call_helper(st, pc, id)?;
                if id == TAIL_CALL && st.frames.len() > 1 {
                    return Ok(tail_call_returns(st, pc));
                }
                Ok(Flow::Next(pc + 1))
            }
            Kind::Normal => {
                match insn.class() {
                    BPF_ALU | BPF_ALU64 => self.alu(st, pc, insn)?,
                    BPF_LDX => self.ldx(st, pc, insn)?,
                    BPF_ST | BPF_STX => self.store(st, pc, insn)?,
                    _ => return Err(err(pc, "internal: unexpected instruction class")),
                }
                Ok(Flow::Next(pc + 1))
            }
        }
    }

    fn read(&self, st: &State, pc: usize, r: u8) -> Result<Reg, VerifyError> {
        let reg = *st.cur().regs.get(r as usize).ok_or_else(|| err(pc, format!("R{r} is invalid")))?;
        if reg.ty == RegType::NotInit {
            if reg.invalidated {
                return Err(err(
                    pc,
                    format!("R{r} !read_ok: packet pointer invalidated by a helper that changes packet data (reload it from ctx; unprivileged rule, a privileged loader gets a scalar)"),
                ));
            }
            return Err(err(pc, format!("R{r} !read_ok (uninitialized register)")));
        }
        Ok(reg)
    }

    /// A register used as a memory base (clearer message for invalidated packet pointers).
    fn read_base(&self, st: &State, pc: usize, r: u8) -> Result<Reg, VerifyError> {
        if st.cur().regs.get(r as usize).is_some_and(|q| q.invalidated && matches!(q.ty, RegType::NotInit | RegType::Scalar)) {
            return Err(err(
                pc,
                format!(
                "R{r} invalid mem access 'scalar': packet pointer invalidated by a helper that changes packet data (reload it from ctx)"
            ),
            ));
        }
        self.read(st, pc, r)
    }

    fn write(&self, st: &mut State, pc: usize, r: u8, v: Reg) -> Result<(), VerifyError> {
        if r >= 10 {
            return Err(err(pc, format!("R{r} cannot be written")));
        }
        st.cur_mut().regs[r as usize] = v;
        Ok(())
    }

    fn map(&self, pc: usize, idx: u32) -> Result<&'a MapDef, VerifyError> {
        let prog = self.prog;
        if idx & INNER_MAP != 0 {
            let outer = (idx & !INNER_MAP) as usize;
            return prog
                .maps
                .get(outer)
                .and_then(|m| m.inner.as_deref())
                .ok_or_else(|| err(pc, format!("internal: map {outer} has no inner-map template")));
        }
        prog.maps.get(idx as usize).ok_or_else(|| err(pc, format!("map index {idx} out of range")))
    }

    // ---------------------------------------------------------------- ALU

    fn alu(&mut self, st: &mut State, pc: usize, insn: Insn) -> Result<(), VerifyError> {
        let is64 = insn.class() == BPF_ALU64;
        let op = insn.code & 0xf0;
        let x = insn.code & BPF_X != 0;
        let dst = insn.dst;
        let imm64 = if is64 { insn.imm as i64 as u64 } else { insn.imm as u32 as u64 };
        match op {
            BPF_MOV => {
                if !x {
                    return self.write(st, pc, dst, Reg::konst(imm64));
                }
                let src = self.read(st, pc, insn.src)?;
                if insn.off != 0 {
                    if src.ty != RegType::Scalar {
                        return Err(err(pc, format!("R{} sign-extending move of a pointer prohibited", insn.src)));
                    }
                    let mut v = src.var.sext(insn.off as u32);
                    if !is64 {
                        v = v.trunc(32);
                    }
                    return self.write(st, pc, dst, Reg::scalar(v));
                }
                if is64 {
                    let mut r = src;
                    // Copies share an id so a later comparison on one bounds both.
                    if src.ty == RegType::Scalar && src.id == 0 && src.var.as_const().is_none() {
                        r.id = self.fresh_id();
                        st.cur_mut().regs[insn.src as usize].id = r.id;
                    }
                    return self.write(st, pc, dst, r);
                }
                if src.ty.is_ptr() {
                    if self.opts.privileged {
                        return self.write(st, pc, dst, Reg::scalar(Scalar::bounded(32)));
                    }
                    return Err(err(pc, format!("R{} partial copy of pointer (unprivileged rule)", insn.src)));
                }
                let mut r = Reg::scalar(src.var.trunc(32));
                // A value that already fits 32 bits is copied unchanged: link it too.
                if src.var.umax <= u32::MAX as u64 && src.var.as_const().is_none() {
                    let id = if src.id != 0 { src.id } else { self.fresh_id() };
                    st.cur_mut().regs[insn.src as usize].id = id;
                    r.id = id;
                }
                self.write(st, pc, dst, r)
            }
            BPF_NEG => {
                let d = self.read(st, pc, dst)?;
                if d.ty != RegType::Scalar {
                    return Err(err(pc, format!("R{dst} pointer arithmetic prohibited: negation of {}", d.ty.name())));
                }
                let z = Scalar::konst(0);
                let v = if is64 { alu64(AluOp::Sub, z, d.var) } else { alu32(AluOp::Sub, z, d.var) };
                self.write(st, pc, dst, Reg::scalar(v))
            }
            BPF_END => {
                let d = self.read(st, pc, dst)?;
                if d.ty != RegType::Scalar {
                    return Err(err(pc, format!("R{dst} pointer arithmetic prohibited: byte swap of {}", d.ty.name())));
                }
                let bits = insn.imm as u32;
                // Little-endian host: to_le only truncates, to_be (and ALU64 bswap) swaps.
                let v = if is64 || x { d.var.bswap(bits) } else { d.var.trunc(bits) };
                self.write(st, pc, dst, Reg::scalar(v))
            }
            _ => {
                let signed = insn.off == 1;
                let aop = match op {
                    BPF_ADD => AluOp::Add,
                    BPF_SUB => AluOp::Sub,
                    BPF_MUL => AluOp::Mul,
                    BPF_DIV if signed => AluOp::SDiv,
                    BPF_DIV => AluOp::Div,
                    BPF_MOD if signed => AluOp::SMod,
                    BPF_MOD => AluOp::Mod,
                    BPF_OR => AluOp::Or,
                    BPF_AND => AluOp::And,
                    BPF_XOR => AluOp::Xor,
                    BPF_LSH => AluOp::Lsh,
                    BPF_RSH => AluOp::Rsh,
                    BPF_ARSH => AluOp::Arsh,
                    _ => return Err(err(pc, format!("unknown opcode {:#04x}", insn.code))),
                };
                let s = if x { self.read(st, pc, insn.src)? } else { Reg::konst(imm64) };
                let d = self.read(st, pc, dst)?;
                if d.ty == RegType::Scalar && s.ty == RegType::Scalar {
                    let v = if is64 { alu64(aop, d.var, s.var) } else { alu32(aop, d.var, s.var) };
                    return self.write(st, pc, dst, Reg::scalar(v));
                }
                // The scalar's exact bounds become part of the pointer.
                if x && !d.ty.is_ptr() && aop == AluOp::Add {
                    self.mark_reg_precise(st, dst);
                }
                if x && !s.ty.is_ptr() && matches!(aop, AluOp::Add | AluOp::Sub) {
                    self.mark_reg_precise(st, insn.src);
                }
                let r = self.ptr_alu(pc, insn, aop, is64, d, s)?;
                self.write(st, pc, dst, r)
            }
        }
    }

    fn ptr_alu(&mut self, pc: usize, insn: Insn, op: AluOp, is64: bool, d: Reg, s: Reg) -> Result<Reg, VerifyError> {
        let dst = insn.dst;
        if !is64 {
            return Err(err(pc, format!("R{dst} 32-bit pointer arithmetic prohibited")));
        }
        match (d.ty.is_ptr(), s.ty.is_ptr()) {
            (true, true) => {
                if op == AluOp::Sub {
                    // adjust_reg_min_max_vals: a privileged loader gets an unknown number for
                    // any pointer minus pointer, even two into one object (the distance is
                    // not tracked).
                    if self.opts.privileged {
                        return Ok(Reg::scalar(Scalar::UNKNOWN));
                    }
                    if let Some(v) = ptr_diff(&d, &s) {
                        return Ok(Reg::scalar(v));
                    }
                }
                let rule = if op == AluOp::Sub { " (unprivileged rule)" } else { "" };
                Err(err(pc, format!("R{dst} pointer arithmetic prohibited: {} {} {}{rule}", d.ty.name(), op_name(op), s.ty.name())))
            }
            (true, false) => match op {
                AluOp::Add => self.ptr_add(pc, dst, d, s.var, false),
                AluOp::Sub => self.ptr_add(pc, dst, d, s.var, true),
                _ => Err(err(pc, format!("R{dst} pointer arithmetic prohibited: {} {} scalar", d.ty.name(), op_name(op)))),
            },
            (false, true) => match op {
                AluOp::Add => self.ptr_add(pc, dst, s, d.var, false),
                _ => Err(err(pc, format!("R{dst} pointer arithmetic prohibited: scalar {} {}", op_name(op), s.ty.name()))),
            },
            (false, false) => Err(err(pc, "internal: pointer arithmetic on scalars")),
        }
    }

    /// `p + s` (or `p - s`): constants move the fixed offset, anything else the bounded
    /// variable part. Packet pointers with a new variable part get a new id and no range.
    fn ptr_add(&mut self, pc: usize, dst: u8, p: Reg, s: Scalar, sub: bool) -> Result<Reg, VerifyError> {
        match p.ty {
            RegType::PacketEnd | RegType::MapPtr => {
                return Err(err(pc, format!("R{dst} pointer arithmetic on {} prohibited", p.ty.name())));
            }
            RegType::MapValueOrNull | RegType::RingbufMemOrNull | RegType::MapPtrOrNull => {
                return Err(err(pc, format!("R{dst} pointer arithmetic on {} prohibited, null-check it first", p.ty.name())));
            }
            _ => {}
        }
        let mut r = p;
        if let Some(c) = s.as_const() {
            // check_reg_sane_offset, on both operands before the operation: the constant and
            // the pointer's fixed offset each strictly within ±2^29 (the sum may reach
            // twice that; accesses check it against their memory).
            let c = c as i64;
            let sane = |v: i64| -MAX_VAR_OFF < v && v < MAX_VAR_OFF;
            if !sane(c) {
                return Err(err(pc, format!("R{dst} math between {} pointer and {c} is not allowed", p.ty.name())));
            }
            if !sane(p.off) {
                return Err(err(pc, format!("R{dst} {} pointer offset {} is not allowed", p.ty.name(), p.off)));
            }
            r.off = if sub { p.off - c } else { p.off + c };
            return Ok(r);
        }
        if p.ty == RegType::Ctx {
            return Err(err(pc, format!("R{dst} variable ctx pointer arithmetic prohibited")));
        }
        let v = alu64(if sub { AluOp::Sub } else { AluOp::Add }, p.var, s);
        if v.smin < -MAX_VAR_OFF || v.smax > MAX_VAR_OFF {
            return Err(err(pc, format!(
                "R{dst} pointer arithmetic with unbounded register prohibited: {} variable offset [{}, {}] exceeds 2^29 (bound the scalar first)",
                p.ty.name(),
                v.smin,
                v.smax
            )));
        }
        r.var = v;
        if matches!(p.ty, RegType::Packet | RegType::PacketMeta) {
            r.id = self.fresh_id();
            r.range = 0;
        }
        Ok(r)
    }

    // ---------------------------------------------------------------- loads and stores

    fn lddw(&mut self, st: &mut State, pc: usize, insn: Insn) -> Result<(), VerifyError> {
        let next = *self.insns.get(pc + 1).ok_or_else(|| err(pc, "invalid BPF_LD_IMM64 insn: truncated"))?;
        let r = match insn.src {
            0 => Reg::konst((insn.imm as u32 as u64) | ((next.imm as u32 as u64) << 32)),
            BPF_PSEUDO_MAP_FD => {
                self.map(pc, insn.imm as u32)?;
                Reg::ptr(RegType::MapPtr, insn.imm as u32)
            }
            BPF_PSEUDO_MAP_VALUE => {
                self.map(pc, insn.imm as u32)?;
                Reg { off: next.imm as u32 as i64, ..Reg::ptr(RegType::MapValue, insn.imm as u32) }
            }
            s => return Err(err(pc, format!("unsupported BPF_LD_IMM64 pseudo source {s}"))),
        };
        self.write(st, pc, insn.dst, r)
    }

    fn ldx(&mut self, st: &mut State, pc: usize, insn: Insn) -> Result<(), VerifyError> {
        let size = size_bytes(insn.code);
        let sx = insn.code & 0xe0 == BPF_MEMSX;
        let base = self.read_base(st, pc, insn.src)?;
        let v = self.mem_access(st, pc, insn.src, base, insn.off as i64, size, Access::Read { sx })?;
        let v = if sx {
            if v.ty != RegType::Scalar {
                return Err(err(pc, format!("sign-extending load of a spilled {} prohibited", v.ty.name())));
            }
            Reg::scalar(v.var.sext(size * 8))
        } else {
            v
        };
        self.write(st, pc, insn.dst, v)
    }

    fn store(&mut self, st: &mut State, pc: usize, insn: Insn) -> Result<(), VerifyError> {
        let size = size_bytes(insn.code);
        let base = self.read_base(st, pc, insn.dst)?;
        if insn.class() == BPF_ST {
            let val = Reg::konst(insn.imm as i64 as u64);
            self.mem_access(st, pc, insn.dst, base, insn.off as i64, size, Access::Write { val, src: 255 })?;
            return Ok(());
        }
        if insn.code & 0xe0 == BPF_ATOMIC {
            return self.atomic(st, pc, insn, base, size);
        }
        let val = self.read(st, pc, insn.src)?;
        self.mem_access(st, pc, insn.dst, base, insn.off as i64, size, Access::Write { val, src: insn.src })?;
        Ok(())
    }

    fn atomic(&mut self, st: &mut State, pc: usize, insn: Insn, base: Reg, size: u32) -> Result<(), VerifyError> {
        let val = self.read(st, pc, insn.src)?;
        if val.ty != RegType::Scalar && !self.opts.privileged {
            return Err(err(pc, format!("R{} leaks addr into memory (atomic operand is a pointer; unprivileged rule)", insn.src)));
        }
        let cmpxchg = insn.imm == BPF_CMPXCHG;
        if cmpxchg {
            let r0 = self.read(st, pc, 0)?;
            if r0.ty != RegType::Scalar && !self.opts.privileged {
                return Err(err(pc, "R0 leaks addr into memory (cmpxchg operand is a pointer; unprivileged rule)"));
            }
        }
        let old = self.mem_access(st, pc, insn.dst, base, insn.off as i64, size, Access::Atomic)?;
        if cmpxchg {
            self.write(st, pc, 0, old)?;
        } else if insn.imm & BPF_FETCH != 0 {
            self.write(st, pc, insn.src, old)?;
        }
        Ok(())
    }

    /// Checks one load/store/atomic through `base` (register `regno`) at `base + off`, and
    /// returns the loaded value (or the old value for atomics).
    #[allow(clippy::too_many_arguments)]
    fn mem_access(
        &mut self,
        st: &mut State,
        pc: usize,
        regno: u8,
        base: Reg,
        off: i64,
        size: u32,
        acc: Access,
    ) -> Result<Reg, VerifyError> {
        let (bit, r) = match base.ty {
            RegType::NotInit => return Err(err(pc, format!("R{regno} !read_ok (uninitialized register)"))),
            RegType::Scalar => return Err(err(pc, format!("R{regno} invalid mem access 'scalar'"))),
            RegType::PacketEnd | RegType::MapPtr | RegType::MapPtrOrNull => {
                return Err(err(pc, format!("R{regno} invalid mem access '{}'", base.ty.name())))
            }
            RegType::MapValueOrNull => {
                return Err(err(pc, format!("R{regno} invalid mem access 'map_value_or_null' (null-check the map lookup result first)")))
            }
            RegType::RingbufMemOrNull => {
                return Err(err(pc, format!("R{regno} invalid mem access 'ringbuf_mem_or_null' (null-check the reserved record first)")))
            }
            RegType::RingbufMem => (mem::RINGBUF, self.ringbuf_access(pc, regno, base, off, size, acc)?),
            RegType::Ctx => (mem::CTX, self.ctx_access(pc, regno, base, off, size, acc)?),
            RegType::Packet | RegType::PacketMeta => {
                let bit = if base.ty == RegType::Packet { mem::PACKET } else { mem::PACKET_META };
                (bit, self.pkt_access(pc, regno, base, off, size, acc)?)
            }
            RegType::MapValue => (mem::MAP_VALUE, self.map_value_access(pc, regno, base, off, size, acc)?),
            RegType::Stack => (mem::STACK, self.stack_access(st, pc, regno, base, off, size, acc)?),
        };
        let prev = self.insn_mem.get(pc).copied().unwrap_or(0);
        let now = prev | bit;
        // Ctx loads are rewritten by the engines, so one instruction cannot serve both.
        if now & mem::CTX != 0 && now != mem::CTX {
            return Err(err(pc, "same insn cannot be used with ctx and other pointer types"));
        }
        if let Some(m) = self.insn_mem.get_mut(pc) {
            *m = now;
        }
        Ok(r)
    }

    fn ctx_access(&self, pc: usize, regno: u8, base: Reg, off: i64, size: u32, acc: Access) -> Result<Reg, VerifyError> {
        match acc {
            Access::Read { sx: false } => {}
            Access::Read { sx: true } => return Err(err(pc, "sign-extending load from ctx prohibited")),
            Access::Write { .. } => {
                return Err(err(pc, format!("invalid bpf_context access off={off} size={size} (R{regno}: the context is read-only)")))
            }
            Access::Atomic => return Err(err(pc, format!("BPF_ATOMIC stores into R{regno} ctx is not allowed"))),
        }
        if base.off != 0 || base.var.as_const() != Some(0) {
            return Err(err(pc, format!("dereference of modified ctx ptr R{regno} off={} disallowed", base.off)));
        }
        // struct xdp_md: six u32 fields, only whole-field aligned 4-byte loads (as the kernel).
        if size != 4 || !(0..XDP_MD_SIZE).contains(&off) || off % 4 != 0 {
            return Err(err(pc, format!("invalid bpf_context access off={off} size={size}")));
        }
        // As the kernel: egress_ifindex exists only for programs run from a device map.
        let sec = self.prog.section.as_str();
        if off == 20 && !(sec.starts_with("xdp/devmap") || sec.starts_with("xdp.frags/devmap")) {
            return Err(err(
                pc,
                format!("invalid bpf_context access off={off} size={size} (egress_ifindex is only readable in xdp/devmap programs)"),
            ));
        }
        Ok(match off {
            0 => Reg::ptr(RegType::Packet, 0),
            4 => Reg::ptr(RegType::PacketEnd, 0),
            8 => Reg::ptr(RegType::PacketMeta, 0),
            _ => Reg::scalar(Scalar::bounded(32)),
        })
    }

    fn check_pkt_range(&self, pc: usize, regno: u8, base: &Reg, off: i64, size: i64) -> Result<(), VerifyError> {
        let what = if base.ty == RegType::Packet { "packet" } else { "packet metadata" };
        let fixed = base.off + off;
        if base.var.smin + fixed < 0 {
            if base.var.smin < 0 {
                return Err(err(
                    pc,
                    format!("R{regno} min value is negative (variable offset may be {}): invalid access to {what}", base.var.smin),
                ));
            }
            return Err(err(pc, format!("invalid access to {what}, off={fixed} size={size}, R{regno} range={}", base.range)));
        }
        if fixed + size > base.range {
            return Err(err(pc, format!("invalid access to {what}, off={fixed} size={size}, R{regno} range={}", base.range)));
        }
        Ok(())
    }

    fn pkt_access(&self, pc: usize, regno: u8, base: Reg, off: i64, size: u32, acc: Access) -> Result<Reg, VerifyError> {
        let what = if base.ty == RegType::Packet { "packet" } else { "packet metadata" };
        match acc {
            Access::Atomic => {
                let t = if base.ty == RegType::Packet { "pkt" } else { "pkt_meta" };
                return Err(err(pc, format!("BPF_ATOMIC stores into R{regno} {t} is not allowed")));
            }
            Access::Write { val, src } if val.ty.is_ptr() && !self.opts.privileged => {
                return Err(err(pc, format!("R{src} leaks addr into {what} (unprivileged rule)")));
            }
            _ => {}
        }
        self.check_pkt_range(pc, regno, &base, off, size as i64)?;
        Ok(Reg::scalar(Scalar::bounded(size * 8)))
    }

    /// `[off, off + size)` from `base` lies inside its ring buffer record of `base.aux` bytes.
    fn ringbuf_bounds(&self, pc: usize, regno: u8, base: &Reg, off: i64, size: i64) -> Result<(), VerifyError> {
        let limit = base.aux as i64;
        let fixed = base.off + off;
        if base.var.smin + fixed < 0 {
            return Err(err(pc, format!("R{regno} invalid access to ringbuf memory: min offset {} is negative", base.var.smin + fixed)));
        }
        let max = base.var.smax + fixed;
        if max + size > limit {
            return Err(err(pc, format!("invalid access to memory, mem_size={limit} off={max} size={size} (R{regno}: ringbuf record)")));
        }
        Ok(())
    }

    fn ringbuf_access(&self, pc: usize, regno: u8, base: Reg, off: i64, size: u32, acc: Access) -> Result<Reg, VerifyError> {
        match acc {
            Access::Write { val, src } if val.ty.is_ptr() && !self.opts.privileged => {
                return Err(err(pc, format!("R{src} leaks addr into ringbuf memory (unprivileged rule)")));
            }
            Access::Atomic => {
                let low = size as u64 - 1;
                let fixed = (base.off + off) as u64;
                if base.var.t.mask & low != 0 || base.var.t.value.wrapping_add(fixed) & low != 0 {
                    return Err(err(pc, format!("misaligned atomic access to ringbuf memory off={} size={size}", base.off + off)));
                }
            }
            _ => {}
        }
        self.ringbuf_bounds(pc, regno, &base, off, size as i64)?;
        Ok(Reg::scalar(Scalar::bounded(size * 8)))
    }

    fn map_value_bounds(&self, pc: usize, regno: u8, base: &Reg, off: i64, size: i64) -> Result<(), VerifyError> {
        let m = self.map(pc, base.aux)?;
        let vs = m.value_size as i64;
        let fixed = base.off + off;
        let variable = base.var.as_const().is_none();
        if base.var.smin + fixed < 0 {
            if base.var.smin < 0 {
                return Err(err(pc, format!(
                    "R{regno} min value is negative, either use unsigned index or do a if (index >=0) check (invalid access to map value, value_size={vs})"
                )));
            }
            return Err(err(pc, format!("invalid access to map value, value_size={vs} off={fixed} size={size}")));
        }
        let max = base.var.smax + fixed;
        if max + size > vs {
            let why = if variable { format!(" (R{regno} max value is outside of the allowed memory range)") } else { String::new() };
            return Err(err(pc, format!("invalid access to map value, value_size={vs} off={max} size={size}{why}")));
        }
        Ok(())
    }

    fn map_value_access(&self, pc: usize, regno: u8, base: Reg, off: i64, size: u32, acc: Access) -> Result<Reg, VerifyError> {
        let m = self.map(pc, base.aux)?;
        let ro = helpers::map_value_readonly(m.map_type, m.flags);
        match acc {
            Access::Write { val, src } => {
                if ro {
                    return Err(err(pc, format!("R{regno} write into read-only map value (map '{}')", m.name)));
                }
                if val.ty.is_ptr() && !self.opts.privileged {
                    return Err(err(pc, format!("R{src} leaks addr into map value (map '{}'; unprivileged rule)", m.name)));
                }
            }
            Access::Atomic => {
                if ro || helpers::map_value_writeonly(m.flags) {
                    return Err(err(pc, format!("R{regno} atomic on a read-only or write-only map value (map '{}')", m.name)));
                }
                let low = size as u64 - 1;
                let fixed = (base.off + off) as u64;
                if base.var.t.mask & low != 0 || base.var.t.value.wrapping_add(fixed) & low != 0 {
                    return Err(err(pc, format!("misaligned atomic access to map value off={} size={size}", base.off + off)));
                }
            }
            Access::Read { .. } => {
                if helpers::map_value_writeonly(m.flags) {
                    return Err(err(pc, format!("R{regno} read from write-only map value (map '{}')", m.name)));
                }
            }
        }
        self.map_value_bounds(pc, regno, &base, off, size as i64)?;
        if let Access::Read { .. } = acc {
            if let Some(v) = self.frozen_read(&base, off, size) {
                return Ok(Reg::konst(v));
            }
        }
        Ok(Reg::scalar(Scalar::bounded(size * 8)))
    }

    /// A load at a constant offset from a frozen read-only map (`.rodata`) is the value
    /// there (check_mem_access: bpf_map_is_rdonly + bpf_map_direct_read), zero-extended;
    /// `ldx` sign-extends it for a sign-extending load, as any other loaded scalar.
    fn frozen_read(&self, base: &Reg, off: i64, size: u32) -> Option<u64> {
        let bytes = self.frozen.get(base.aux as usize)?.as_deref()?;
        // Only what the kernel reads so: a read-only array of one value, of its size.
        let m = self.prog.maps.get(base.aux as usize)?;
        if !m.is_readonly_one_value_array() || bytes.len() != m.value_size as usize {
            return None;
        }
        let at = usize::try_from(base.off.checked_add(off)?.checked_add(base.var.as_const()? as i64)?).ok()?;
        let b = bytes.get(at..at.checked_add(size as usize)?)?;
        let mut le = [0u8; 8];
        le[..b.len()].copy_from_slice(b);
        Some(u64::from_le_bytes(le))
    }

    fn touch_stack(&mut self, st: &State, fno: usize, o: i64) {
        let sp = st.frames.get(fno).map(|f| f.subprog).unwrap_or(0);
        let d = (-o).clamp(0, MAX_BPF_STACK) as u32;
        if let Some(x) = self.stack_depth.get_mut(sp) {
            *x = (*x).max(d);
        }
    }

    fn stack_frame(&self, st: &State, pc: usize, regno: u8, base: &Reg) -> Result<(usize, i64), VerifyError> {
        let fno = base.aux as usize;
        if fno >= st.frames.len() {
            return Err(err(pc, format!("internal: R{regno} points to a dead stack frame")));
        }
        let Some(c) = base.var.as_const() else {
            return Err(err(
                pc,
                format!(
                    "invalid variable-offset access to stack R{regno} (offset range [{}, {}]): sluice allows constant stack offsets only",
                    base.off.saturating_add(base.var.smin),
                    base.off.saturating_add(base.var.smax)
                ),
            ));
        };
        Ok((fno, base.off + c as i64))
    }

    #[allow(clippy::too_many_arguments)]
    fn stack_access(
        &mut self,
        st: &mut State,
        pc: usize,
        regno: u8,
        base: Reg,
        off: i64,
        size: u32,
        acc: Access,
    ) -> Result<Reg, VerifyError> {
        let dir = match acc {
            Access::Read { .. } => "read from",
            _ => "write to",
        };
        let (fno, b) = match self.stack_frame(st, pc, regno, &base) {
            Err(e) if e.msg.starts_with("invalid variable-offset access") => {
                return Err(err(pc, e.msg.replacen("access to", dir, 1)));
            }
            r => r?,
        };
        let o = b + off;
        let size_i = size as i64;
        // check_ptr_alignment is always strict for the stack (unlike packet or map memory
        // on x86), and comes before the bounds.
        if o.rem_euclid(size_i) != 0 {
            let var = b - base.off;
            return Err(err(pc, format!("misaligned stack access off ({var:#x}; 0x0)+{}+{off} size {size}", base.off)));
        }
        if o < -MAX_BPF_STACK || o + size_i > 0 {
            return Err(err(pc, format!("invalid {dir} stack R{regno} off={o} size={size} (outside the 512-byte frame [-512, 0))")));
        }
        self.touch_stack(st, fno, o);
        let slot_id = stack_pos(o).map(|(si, _)| (fno as u8, si as u8));
        if !matches!(acc, Access::Write { .. }) && reads_uninit(st, fno, o, size) {
            self.reads_uninit_stack = true;
        }
        match acc {
            Access::Read { .. } => {
                let (v, from_spill) = stack_read(st, fno, pc, regno, o, size, self.opts.privileged)?;
                if from_spill {
                    self.cur_spill = slot_id;
                }
                Ok(v)
            }
            Access::Write { val, src } => {
                let zero = val.ty == RegType::Scalar && val.var.trunc(size * 8).as_const() == Some(0);
                if stack_write(st, fno, pc, o, size, val, src)? {
                    self.cur_spill = slot_id;
                } else if zero && src < 10 {
                    // Zero bytes read back as the constant 0: the value matters.
                    self.mark_reg_precise(st, src);
                }
                Ok(Reg::NOT_INIT)
            }
            Access::Atomic => {
                let (old, _) = stack_read(st, fno, pc, regno, o, size, self.opts.privileged)?;
                if old.ty != RegType::Scalar {
                    return Err(err(pc, format!("atomic on a spilled {} at stack off={o}", old.ty.name())));
                }
                let unknown = Reg::scalar(Scalar::bounded(size * 8));
                if stack_write(st, fno, pc, o, size, unknown, 255)? {
                    self.cur_spill = slot_id;
                }
                // The fetched old value is treated as unknown (no precision source).
                Ok(unknown)
            }
        }
    }

    // ---------------------------------------------------------------- control flow

    fn cond(&mut self, st: &mut State, pc: usize, insn: Insn, target: usize) -> Result<Flow, VerifyError> {
        let is32 = insn.class() == BPF_JMP32;
        let x = insn.code & BPF_X != 0;
        let cmp = match insn.code & 0xf0 {
            BPF_JEQ => Cmp::Eq,
            BPF_JNE => Cmp::Ne,
            BPF_JGT => Cmp::Gt,
            BPF_JGE => Cmp::Ge,
            BPF_JLT => Cmp::Lt,
            BPF_JLE => Cmp::Le,
            BPF_JSGT => Cmp::Sgt,
            BPF_JSGE => Cmp::Sge,
            BPF_JSLT => Cmp::Slt,
            BPF_JSLE => Cmp::Sle,
            BPF_JSET => Cmp::Set,
            _ => return Err(err(pc, format!("unknown opcode {:#04x}", insn.code))),
        };
        let d = self.read(st, pc, insn.dst)?;
        let s = if x { self.read(st, pc, insn.src)? } else { Reg::konst(insn.imm as i64 as u64) };

        let (taken, fall) = if d.ty == RegType::Scalar && s.ty == RegType::Scalar {
            let refine = |c: Cmp| if is32 { refine32(c, d.var, s.var) } else { refine64(c, d.var, s.var) };
            let (mut rt, mut rf) = (refine(cmp), refine(cmp.negate()));
            // A register compared with itself: the comparison alone decides (the kernel's
            // is_scalar_branch_taken for reg1 == reg2), whatever its bounds. `&` still
            // depends on the value (whether it can be 0): the refinement below decides it.
            if x && insn.src == insn.dst {
                match cmp {
                    Cmp::Eq | Cmp::Ge | Cmp::Le | Cmp::Sge | Cmp::Sle => rf = None,
                    Cmp::Ne | Cmp::Gt | Cmp::Lt | Cmp::Sgt | Cmp::Slt => rt = None,
                    Cmp::Set | Cmp::NotSet => {}
                }
            }
            // A side is feasible when its refined bounds exist and, for operands linked by an
            // id (one value), also agree with each other (`apply_scalar`).
            let linked = x && (insn.src == insn.dst || (d.id != 0 && d.id == s.id));
            let feasible = |r: &Option<(Scalar, Scalar)>| r.as_ref().is_some_and(|(nd, ns)| !linked || nd.meet(ns).is_some());
            if !(feasible(&rt) && feasible(&rf)) {
                // Only one side is explored: that decision rests on the operands' bounds (and
                // their link), so a state that prunes this one must agree on them.
                self.mark_reg_precise(st, insn.dst);
                if x {
                    self.mark_reg_precise(st, insn.src);
                }
            }
            self.cur_linked = linked_with(st, &d, if x { Some(&s) } else { None });
            let mut taken = None;
            if let Some((nd, ns)) = rt {
                let mut t = if rf.is_some() { st.clone() } else { std::mem::replace(st, State::entry()) };
                if apply_scalar(&mut t, insn, x, linked, nd, ns) {
                    taken = Some(t);
                }
            }
            let mut fall = None;
            if let Some((nd, ns)) = rf {
                let mut f = std::mem::replace(st, State::entry());
                if apply_scalar(&mut f, insn, x, linked, nd, ns) {
                    fall = Some(f);
                }
            }
            (taken, fall)
        } else {
            if is32 {
                // Nothing is learned from a 32-bit comparison of pointers (kernel: no packet
                // range from JMP32); only a privileged loader may compare their bits.
                if !self.opts.privileged {
                    return Err(err(pc, format!("R{} 32-bit pointer comparison prohibited (unprivileged rule)", insn.dst)));
                }
                (Some(st.clone()), Some(st.clone()))
            } else {
                self.cmp_ptr(st, pc, insn, cmp, d, s)?
            }
        };
        match (taken, fall) {
            (Some(t), Some(f)) => {
                *st = f;
                Ok(Flow::Fork { other: t, other_pc: target, next: pc + 1 })
            }
            (Some(t), None) => {
                *st = t;
                Ok(Flow::Next(target))
            }
            (None, Some(f)) => {
                *st = f;
                Ok(Flow::Next(pc + 1))
            }
            (None, None) => Ok(Flow::End),
        }
    }

    fn cmp_ptr(
        &mut self,
        st: &State,
        pc: usize,
        insn: Insn,
        cmp: Cmp,
        d: Reg,
        s: Reg,
    ) -> Result<(Option<State>, Option<State>), VerifyError> {
        if d.ty.is_ptr() && s.ty.is_ptr() {
            if !(d.ty.is_pkt_family() && s.ty.is_pkt_family()) {
                if self.opts.privileged {
                    return Ok((Some(st.clone()), Some(st.clone())));
                }
                return Err(err(
                    pc,
                    format!("R{} pointer comparison prohibited ({} vs {}; unprivileged rule)", insn.dst, d.ty.name(), s.ty.name()),
                ));
            }
            let mut t = st.clone();
            learn_pkt(&mut t, &d, &s, cmp);
            let mut f = st.clone();
            learn_pkt(&mut f, &d, &s, cmp.negate());
            return Ok((Some(t), Some(f)));
        }
        let (p, preg, sc) = if d.ty.is_ptr() { (d, insn.dst, s) } else { (s, insn.src, d) };
        let x = insn.code & BPF_X != 0;
        if x {
            // Being exactly 0 is what makes this comparison allowed.
            let sreg = if d.ty.is_ptr() { insn.src } else { insn.dst };
            self.mark_reg_precise(st, sreg);
        }
        if sc.var.as_const() != Some(0) {
            if self.opts.privileged {
                return Ok((Some(st.clone()), Some(st.clone())));
            }
            return Err(err(
                pc,
                format!("R{preg} pointer comparison prohibited ({} compared with a scalar other than 0; unprivileged rule)", p.ty.name()),
            ));
        }
        match cmp {
            Cmp::Eq | Cmp::Ne => {
                let (null, nonnull) = if matches!(p.ty, RegType::MapValueOrNull | RegType::RingbufMemOrNull | RegType::MapPtrOrNull) {
                    let mut n = st.clone();
                    mark_or_null(&mut n, p.id, true);
                    let mut nn = st.clone();
                    mark_or_null(&mut nn, p.id, false);
                    (Some(n), Some(nn))
                } else {
                    // Any other pointer is never NULL.
                    (None, Some(st.clone()))
                };
                Ok(if cmp == Cmp::Eq { (null, nonnull) } else { (nonnull, null) })
            }
            _ => Ok((Some(st.clone()), Some(st.clone()))),
        }
    }

    fn exit(&mut self, st: &mut State, pc: usize) -> Result<Flow, VerifyError> {
        let r0 = st.cur().regs[0];
        if st.frames.len() == 1 {
            if !r0.is_init() {
                return Err(err(pc, "R0 !read_ok: R0 must be set before exit"));
            }
            if r0.ty != RegType::Scalar && !self.opts.privileged {
                return Err(err(pc, format!("R0 leaks addr as return value ({}; unprivileged rule)", r0.ty.name())));
            }
            if let Some(r) = st.refs.first() {
                return Err(err(
                    pc,
                    format!(
                        "Unreleased reference id={} alloc_insn={} (a ring buffer record reserved there is neither submitted nor discarded on this path)",
                        r.id, r.insn
                    ),
                ));
            }
            return Ok(Flow::End);
        }
        let fno = st.frames.len() - 1;
        if r0.ty == RegType::Stack && r0.aux as usize >= fno {
            return Err(err(pc, "cannot return stack pointer to the caller"));
        }
        // A void function returns an uninitialised R0: the caller may not read it.
        let callsite = st.cur().callsite;
        st.frames.pop();
        st.cur_mut().regs[0] = r0;
        Ok(Flow::Next(callsite + 1))
    }

    fn call_sub(&mut self, st: &mut State, pc: usize, target: usize) -> Result<Flow, VerifyError> {
        if st.frames.len() >= MAX_CALL_FRAMES {
            return Err(err(pc, format!("the call stack of {} frames is too deep (max {MAX_CALL_FRAMES})", st.frames.len() + 1)));
        }
        let sp = *self.cfg.insn_subprog.get(target).ok_or_else(|| err(pc, "internal: bad call target"))? as usize;
        let mut f = Frame::new(st.frames.len() as u32, pc, sp);
        let caller = st.cur_mut();
        f.regs[1..=5].copy_from_slice(&caller.regs[1..=5]);
        // R0-R5 are clobbered by the call; R0 receives the return value.
        for r in &mut caller.regs[0..=5] {
            *r = Reg::NOT_INIT;
        }
        st.frames.push(f);
        Ok(Flow::Next(target))
    }

    // ---------------------------------------------------------------- helpers

    fn call_helper(&mut self, st: &mut State, pc: usize, id: i32) -> Result<(), VerifyError> {
        let proto = helpers::proto(id).ok_or_else(|| err(pc, format!("unknown or unsupported helper function id {id}")))?;
        let name = proto.name;
        let regs = st.cur().regs;
        let mut map: Option<(u32, &MapDef)> = None;
        let mut writes: Vec<(usize, i64, i64)> = Vec::new();
        let mut alloc_size: Option<u32> = None;
        let mut release: Option<u32> = None;
        if id == TAIL_CALL && !st.refs.is_empty() {
            return Err(err(pc, format!("tail_call would lead to reference leak (reference id={} held)", st.refs[0].id)));
        }
        let mut i = 0usize;
        while i < 5 {
            let regno = (i + 1) as u8;
            let r = regs[i + 1];
            match proto.args[i] {
                Arg::None => {}
                Arg::Anything => {
                    self.read(st, pc, regno)?;
                    if r.ty != RegType::Scalar && !self.opts.privileged {
                        return Err(err(pc, format!("R{regno} leaks addr into helper function {name} (unprivileged rule)")));
                    }
                }
                Arg::AnythingOrUninit => {}
                Arg::MapPtr => {
                    self.read(st, pc, regno)?;
                    if r.ty == RegType::MapPtrOrNull {
                        return Err(err(
                            pc,
                            format!("R{regno} type=map_value_or_null expected=map_ptr ({name}): null-check the inner map first"),
                        ));
                    }
                    if r.ty != RegType::MapPtr {
                        return Err(err(pc, format!("R{regno} type={} expected=map_ptr ({name})", r.ty.name())));
                    }
                    let m = self.map(pc, r.aux)?;
                    if !helpers::map_allowed(proto.maps, m.map_type) {
                        return Err(err(pc, format!("cannot pass map_type {} (map '{}') into func {name}#{id}", m.map_type, m.name)));
                    }
                    // record_func_map: a read-only map (.rodata) takes no update, delete,
                    // push or pop from a program.
                    const MAP_UPDATE_ELEM: i32 = 2;
                    const MAP_DELETE_ELEM: i32 = 3;
                    const MAP_PUSH_ELEM: i32 = 87;
                    const MAP_POP_ELEM: i32 = 88;
                    if m.flags & helpers::BPF_F_RDONLY_PROG != 0
                        && matches!(id, MAP_UPDATE_ELEM | MAP_DELETE_ELEM | MAP_PUSH_ELEM | MAP_POP_ELEM)
                    {
                        return Err(err(pc, format!("write into map forbidden (map '{}' is BPF_F_RDONLY_PROG; {name})", m.name)));
                    }
                    map = Some((r.aux, m));
                }
                Arg::MapKey | Arg::MapValue => {
                    self.read(st, pc, regno)?;
                    let (_, m) = map.ok_or_else(|| err(pc, "internal: map argument missing"))?;
                    let size = if proto.args[i] == Arg::MapKey { m.key_size } else { m.value_size };
                    self.helper_mem(st, pc, regno, &r, size as i64, Rw::Read, &mut writes)?;
                }
                Arg::Ctx => {
                    self.read(st, pc, regno)?;
                    if r.ty != RegType::Ctx || r.off != 0 || r.var.as_const() != Some(0) {
                        return Err(err(pc, format!("R{regno} type={} expected=ctx ({name})", r.ty.name())));
                    }
                }
                Arg::Mem | Arg::MemOrNull | Arg::MemRw | Arg::MemWrite | Arg::PrintkArgs => {
                    let sregno = regno + 1;
                    let sreg = *regs.get(i + 2).ok_or_else(|| err(pc, "internal: size argument missing"))?;
                    let size_kind = *proto.args.get(i + 1).ok_or_else(|| err(pc, "internal: size argument missing"))?;
                    self.read(st, pc, sregno)?;
                    self.mark_reg_precise(st, sregno);
                    let size = check_size(pc, sregno, &sreg, size_kind, name)?;
                    let maybe_null = matches!(proto.args[i], Arg::MemOrNull | Arg::PrintkArgs);
                    if maybe_null && r.ty == RegType::Scalar {
                        self.mark_reg_precise(st, regno);
                    }
                    if maybe_null && r.ty == RegType::Scalar && r.var.as_const() == Some(0) {
                        if size != 0 {
                            return Err(err(pc, format!("R{regno} is NULL but the size in R{sregno} may be non-zero ({name})")));
                        }
                    } else {
                        self.read(st, pc, regno)?;
                        let rw = match proto.args[i] {
                            Arg::MemRw => Rw::ReadWrite,
                            Arg::MemWrite => Rw::Write,
                            Arg::PrintkArgs => Rw::ReadPtrsOk,
                            _ => Rw::Read,
                        };
                        self.helper_mem(st, pc, regno, &r, size as i64, rw, &mut writes)?;
                    }
                    i += 2;
                    continue;
                }
                Arg::AllocSize => {
                    self.read(st, pc, regno)?;
                    self.mark_reg_precise(st, regno);
                    match (r.ty, r.var.as_const()) {
                        (RegType::Scalar, Some(c)) if c < MAX_HELPER_SIZE => alloc_size = Some(c as u32),
                        _ => return Err(err(pc, format!("R{regno} is not a known constant (size for {name})"))),
                    }
                }
                Arg::RingbufRelease => {
                    self.read(st, pc, regno)?;
                    if r.ty != RegType::RingbufMem {
                        let hint = if r.ty == RegType::RingbufMemOrNull { ", null-check it first" } else { "" };
                        return Err(err(pc, format!("R{regno} type={} expected=ringbuf_mem ({name}{hint})", r.ty.name())));
                    }
                    if r.off != 0 || r.var.as_const() != Some(0) {
                        return Err(err(pc, format!("R{regno} must have zero offset when passed to release func {name}")));
                    }
                    if !st.refs.iter().any(|q| q.id == r.id) {
                        return Err(err(pc, format!("R{regno} release of an unacquired reference id={} ({name})", r.id)));
                    }
                    release = Some(r.id);
                }
                Arg::Size | Arg::SizeOrZeroMult4 | Arg::SizeOrZero | Arg::FibSize => {
                    return Err(err(pc, "internal: size argument without memory argument"));
                }
            }
            i += 1;
        }

        // The helper wrote these stack bytes: they now hold unknown scalar data.
        for (fno, o, size) in writes {
            if let Some(fr) = st.frames.get_mut(fno) {
                for a in o..o + size {
                    if let Some((si, bi)) = stack_pos(a) {
                        if let Some(slot) = fr.slot_mut(si) {
                            break_spill(slot);
                            slot.b[bi] = SB::Misc;
                        }
                    }
                }
            }
        }
        if proto.changes_pkt {
            // Packet data may have moved: every packet pointer anywhere is stale. The kernel
            // (mark_reg_invalid) makes it an unknown scalar for a privileged loader, which
            // may hold addresses as numbers, and unreadable otherwise.
            let stale = if self.opts.privileged { Reg::scalar(Scalar::UNKNOWN) } else { Reg::NOT_INIT };
            st.for_each_reg(|q| {
                if q.ty.is_pkt_family() {
                    *q = Reg { invalidated: true, ..stale };
                }
            });
        }
        if let Some(rid) = release {
            // Every copy of the released record is stale (the kernel's release_reference:
            // an unknown scalar for a privileged loader, unreadable otherwise).
            st.refs.retain(|q| q.id != rid);
            let stale = if self.opts.privileged { Reg::scalar(Scalar::UNKNOWN) } else { Reg::NOT_INIT };
            st.for_each_reg(|q| {
                if matches!(q.ty, RegType::RingbufMem | RegType::RingbufMemOrNull) && q.id == rid {
                    *q = stale;
                }
            });
        }
        let cur = st.cur_mut();
        for r in &mut cur.regs[1..=5] {
            *r = Reg::NOT_INIT;
        }
        let r0 = match proto.ret {
            Ret::Void => Reg::NOT_INIT,
            Ret::RingbufMemOrNull => {
                let size = alloc_size.ok_or_else(|| err(pc, "internal: size argument missing"))?;
                let id = self.fresh_id();
                st.refs.push(RefState { id, insn: pc });
                Reg { id, ..Reg::ptr(RegType::RingbufMemOrNull, size) }
            }
            Ret::Scalar => Reg::scalar(Scalar::UNKNOWN),
            Ret::U32 => Reg::scalar(Scalar::bounded(32)),
            Ret::MapValueOrNull => {
                let (idx, m) = map.ok_or_else(|| err(pc, "internal: map argument missing"))?;
                let id = self.fresh_id();
                if m.is_map_of_maps() {
                    // The inner map (or NULL), checked against the outer map's template.
                    Reg { id, ..Reg::ptr(RegType::MapPtrOrNull, INNER_MAP | idx) }
                } else {
                    Reg { id, ..Reg::ptr(RegType::MapValueOrNull, idx) }
                }
            }
        };
        st.cur_mut().regs[0] = r0;
        Ok(())
    }

    /// Memory a helper reads (and maybe writes) through register `regno`.
    #[allow(clippy::too_many_arguments)]
    fn helper_mem(
        &mut self,
        st: &State,
        pc: usize,
        regno: u8,
        r: &Reg,
        size: i64,
        rw: Rw,
        writes: &mut Vec<(usize, i64, i64)>,
    ) -> Result<(), VerifyError> {
        match r.ty {
            RegType::Stack => {
                let (fno, o) = self.stack_frame(st, pc, regno, r)?;
                if size == 0 {
                    return Ok(());
                }
                if o < -MAX_BPF_STACK || o + size > 0 {
                    return Err(err(pc, format!("invalid indirect access to stack R{regno} off={o} size={size}")));
                }
                self.touch_stack(st, fno, o);
                if rw == Rw::Write {
                    // The bytes count as written after the call, as in the kernel, though
                    // the helper may fail or write fewer (bpf_xdp_load_bytes): never-written
                    // ones among them must then read as zeros, not the host's leftovers.
                    if reads_uninit(st, fno, o, size as u32) {
                        self.reads_uninit_stack = true;
                    }
                    writes.push((fno, o, size));
                    return Ok(());
                }
                let fr = &st.frames[fno];
                for a in o..o + size {
                    let Some((si, bi)) = stack_pos(a) else {
                        return Err(err(pc, format!("invalid indirect access to stack R{regno} off={o} size={size}")));
                    };
                    let slot = fr.slot(si);
                    match slot.b[bi] {
                        // allow_uninit_stack: a privileged loader may pass never-written bytes.
                        SB::Invalid if self.opts.privileged => self.reads_uninit_stack = true,
                        SB::Invalid => {
                            return Err(err(pc, format!(
                                "invalid read from stack R{regno} off={o} size={size} (byte at off={a} is uninitialized; helper argument; unprivileged rule)"
                            )))
                        }
                        // A privileged loader may hand a spilled pointer's bytes to a helper.
                        SB::Spill if slot.spill.ty != RegType::Scalar && rw != Rw::ReadPtrsOk && !self.opts.privileged => {
                            return Err(err(pc, format!(
                                "invalid read from stack R{regno} off={o} size={size}: byte at off={a} holds a spilled {} (pointer leak into helper; unprivileged rule)",
                                slot.spill.ty.name()
                            )))
                        }
                        _ => {}
                    }
                }
                if rw == Rw::ReadWrite {
                    writes.push((fno, o, size));
                }
                Ok(())
            }
            RegType::Packet | RegType::PacketMeta => {
                if matches!(rw, Rw::ReadWrite | Rw::Write) {
                    return Err(err(pc, format!("R{regno} type={} expected=fp or map_value (the helper writes it)", r.ty.name())));
                }
                if size == 0 {
                    return Ok(());
                }
                self.check_pkt_range(pc, regno, r, 0, size)
            }
            RegType::MapValue => {
                let m = self.map(pc, r.aux)?;
                if matches!(rw, Rw::ReadWrite | Rw::Write) && helpers::map_value_readonly(m.map_type, m.flags) {
                    return Err(err(pc, format!("R{regno} points to a read-only map value (map '{}') the helper writes", m.name)));
                }
                if rw != Rw::Write && helpers::map_value_writeonly(m.flags) {
                    return Err(err(pc, format!("R{regno} points to a write-only map value (map '{}') the helper reads", m.name)));
                }
                if size == 0 {
                    return Ok(());
                }
                self.map_value_bounds(pc, regno, r, 0, size)
            }
            RegType::RingbufMem => {
                if size == 0 {
                    return Ok(());
                }
                self.ringbuf_bounds(pc, regno, r, 0, size)
            }
            RegType::MapValueOrNull | RegType::RingbufMemOrNull | RegType::MapPtrOrNull => {
                Err(err(pc, format!("R{regno} type={} expected=fp, pkt, map_value or ringbuf_mem (null-check it first)", r.ty.name())))
            }
            other => Err(err(pc, format!("R{regno} type={} expected=fp, pkt, pkt_meta or map_value", other.name()))),
        }
    }
}

/// Constant or bounded size argument of a helper; returns its maximum.
fn check_size(pc: usize, regno: u8, r: &Reg, kind: Arg, name: &str) -> Result<u64, VerifyError> {
    if r.ty != RegType::Scalar {
        return Err(err(pc, format!("R{regno} type={} expected=scalar (size for {name})", r.ty.name())));
    }
    let v = r.var;
    if v.smin < 0 {
        return Err(err(pc, format!("R{regno} min value is negative, either use unsigned or 'var &= const'")));
    }
    if v.umax >= MAX_HELPER_SIZE {
        return Err(err(pc, format!("R{regno} unbounded memory access, use 'var &= const' or 'if (var < const)'")));
    }
    match kind {
        Arg::Size => {
            if v.umin == 0 {
                return Err(err(pc, format!("R{regno} invalid zero-sized read")));
            }
        }
        Arg::SizeOrZeroMult4 => {
            if v.t.umax() & 3 != 0 {
                return Err(err(pc, format!("R{regno} size for {name} must be a multiple of 4")));
            }
        }
        Arg::SizeOrZero => {}
        Arg::FibSize => match v.as_const() {
            Some(c) if c >= 64 => {}
            _ => return Err(err(pc, format!("R{regno} size for {name} must be a constant >= 64 (sizeof(struct bpf_fib_lookup))"))),
        },
        _ => return Err(err(pc, "internal: not a size argument")),
    }
    Ok(v.umax)
}

/// `d - s` for two pointers: a scalar when both point into the same object.
fn ptr_diff(d: &Reg, s: &Reg) -> Option<Scalar> {
    let same_obj = match (d.ty, s.ty) {
        (RegType::Packet, RegType::Packet) | (RegType::PacketMeta, RegType::PacketMeta) => true,
        (RegType::Stack, RegType::Stack) | (RegType::MapValue, RegType::MapValue) => d.aux == s.aux,
        (RegType::RingbufMem, RegType::RingbufMem) => d.id == s.id,
        (a, b) if a.is_pkt_family() && b.is_pkt_family() => {
            // e.g. data_end - data: a length, unknown.
            return Some(Scalar::UNKNOWN);
        }
        _ => false,
    };
    if !same_obj {
        return None;
    }
    let fixed = Scalar::konst((d.off - s.off) as u64);
    let var = if d.id != 0 && d.id == s.id && d.ty.is_pkt_family() {
        // Same id: the variable parts are the same value.
        Scalar::konst(0)
    } else {
        alu64(AluOp::Sub, d.var, s.var)
    };
    Some(alu64(AluOp::Add, var, fixed))
}

/// Writes the refined operands back (and to every register linked to them); `linked`: the
/// operands are one value (same register or id). `false` if the branch is infeasible.
fn apply_scalar(st: &mut State, insn: Insn, x: bool, linked: bool, nd: Scalar, ns: Scalar) -> bool {
    if linked {
        match nd.meet(&ns) {
            Some(m) => set_linked(st, insn.dst, m),
            None => return false,
        }
        return true;
    }
    set_linked(st, insn.dst, nd);
    if x {
        set_linked(st, insn.src, ns);
    }
    true
}

/// Every register and spill (frame, reg or 16 + slot) sharing an id with the compared scalars.
fn linked_with(st: &State, d: &Reg, s: Option<&Reg>) -> Vec<(u8, u8)> {
    let ids = [d.id, s.map_or(0, |r| r.id)];
    if ids == [0, 0] {
        return Vec::new();
    }
    let hit = |q: &Reg| q.ty == RegType::Scalar && q.id != 0 && ids.contains(&q.id);
    let mut out = Vec::new();
    for (k, fr) in st.frames.iter().enumerate() {
        for (r, q) in fr.regs.iter().enumerate() {
            if hit(q) {
                out.push((k as u8, r as u8));
            }
        }
        for (si, slot) in fr.stack.iter().enumerate() {
            if slot.is_spill() && hit(&slot.spill) {
                out.push((k as u8, 16 + si as u8));
            }
        }
    }
    out
}

fn set_linked(st: &mut State, regno: u8, v: Scalar) {
    let Some(r) = st.cur_mut().regs.get_mut(regno as usize) else { return };
    r.var = v;
    let id = r.id;
    if id != 0 {
        st.for_each_reg(|q| {
            if q.ty == RegType::Scalar && q.id == id {
                q.var = v;
            }
        });
    }
}

/// The null check of a map lookup or ring buffer reservation `id`: NULL on one branch (a
/// reservation that failed holds no reference), a usable pointer on the other.
fn mark_or_null(st: &mut State, id: u32, is_null: bool) {
    if is_null {
        st.refs.retain(|q| q.id != id);
    }
    st.for_each_reg(|q| {
        if q.id != id {
            return;
        }
        match q.ty {
            RegType::MapValueOrNull | RegType::RingbufMemOrNull | RegType::MapPtrOrNull if is_null => *q = Reg::konst(0),
            RegType::MapPtrOrNull => {
                q.ty = RegType::MapPtr;
                q.id = 0;
            }
            RegType::MapValueOrNull => {
                q.ty = RegType::MapValue;
                q.id = 0;
            }
            // The id stays: it names the reference submit/discard releases.
            RegType::RingbufMemOrNull => q.ty = RegType::RingbufMem,
            _ => {}
        }
    });
}

/// Range facts from a packet-pointer comparison assumed to hold: `d cmp s`.
fn learn_pkt(st: &mut State, d: &Reg, s: &Reg, cmp: Cmp) {
    match cmp {
        Cmp::Gt => pkt_below(st, s, d, true),
        Cmp::Ge => pkt_below(st, s, d, false),
        Cmp::Lt => pkt_below(st, d, s, true),
        Cmp::Le => pkt_below(st, d, s, false),
        Cmp::Eq => {
            pkt_below(st, d, s, false);
            pkt_below(st, s, d, false);
        }
        _ => {}
    }
}

/// `x < y` (strict) or `x <= y` holds. With x a packet pointer and y data_end, every
/// packet pointer sharing x's id has `range` bytes readable (likewise meta below data).
fn pkt_below(st: &mut State, x: &Reg, y: &Reg, strict: bool) {
    let ok = (x.ty == RegType::Packet && y.ty == RegType::PacketEnd)
        || (x.ty == RegType::PacketMeta && y.ty == RegType::Packet && y.off + y.var.smax <= 0);
    if !ok {
        return;
    }
    let new = x.off + strict as i64;
    if new <= 0 || new > MAX_PACKET_OFF {
        return;
    }
    let (ty, id) = (x.ty, x.id);
    st.for_each_reg(|q| {
        if q.ty == ty && q.id == id && q.range < new {
            q.range = new;
        }
    });
}

/// A spill partially overwritten: the rest stays readable as unknown scalar bytes (or, for
/// a pointer, becomes unreadable so its bits cannot leak).
fn break_spill(slot: &mut Slot) {
    if !slot.is_spill() {
        return;
    }
    let sp = slot.spill;
    for j in 0..8 {
        if slot.b[j] != SB::Spill {
            continue;
        }
        // As the kernel's scrub_spilled_slot: a scalar's remaining bytes are data of no
        // known value, even if the spill was a constant whose byte is zero (a Zero byte is
        // a precision source the spill, imprecise, would not be).
        slot.b[j] = if sp.ty != RegType::Scalar { SB::Invalid } else { SB::Misc };
    }
    slot.spill = Reg::NOT_INIT;
}

/// Whether any of the `size` bytes at `o` was never written (read only under the kernel's
/// allow_uninit_stack).
fn reads_uninit(st: &State, fno: usize, o: i64, size: u32) -> bool {
    (o..o + size as i64).any(|a| stack_pos(a).is_some_and(|(si, bi)| st.frames[fno].slot(si).b[bi] == SB::Invalid))
}

/// The value read, and whether it came from a spilled register (a precision source).
/// `allow_uninit`: the kernel's `allow_uninit_stack` (a privileged loader reads
/// never-written stack bytes as unknown data).
fn stack_read(st: &State, fno: usize, pc: usize, regno: u8, o: i64, size: u32, allow_uninit: bool) -> Result<(Reg, bool), VerifyError> {
    let fr = &st.frames[fno];
    let bad = || err(pc, format!("invalid stack access off={o} size={size}"));
    let (si, bi) = stack_pos(o).ok_or_else(bad)?;
    let slot = fr.slot(si);
    let k = slot.spill_size();
    if k > 0 && bi + size as usize <= k {
        // Entirely inside the spilled register's bytes.
        let sp = slot.spill;
        if size as usize == k && bi == 0 {
            return Ok((Reg { precise: false, ..sp }, true));
        }
        if sp.ty != RegType::Scalar {
            return Err(err(
                pc,
                format!("invalid size {size} of register fill at stack off={o}: the slot holds a spilled {}", sp.ty.name()),
            ));
        }
        let bits = size * 8;
        if bi == 0 {
            // Little-endian: the low bytes of the spilled value.
            return Ok((Reg::scalar(sp.var.trunc(bits)), true));
        }
        // Further into the slot the kernel fills no register (bpf_stack_narrow_access_ok
        // wants the slot's start): the bytes are data of no known value, even those of a
        // spilled constant, but for a spilled 0 (still a fill, a precision source).
        if sp.var.as_const() == Some(0) {
            return Ok((Reg::konst(0), true));
        }
        return Ok((Reg::scalar(Scalar::bounded(bits)), false));
    }
    // As check_stack_read_fixed_off: the value is the constant 0 only when every byte read
    // is a zero byte, or every one belongs to a spilled constant 0; a mix of the two (or
    // anything else) reads as unknown.
    let (mut zeros, mut spilled_zero) = (0u32, 0u32);
    for a in o..o + size as i64 {
        let (si, bi) = stack_pos(a).ok_or_else(bad)?;
        let s = fr.slot(si);
        match s.b[bi] {
            SB::Invalid if allow_uninit => {}
            SB::Invalid => {
                return Err(err(
                    pc,
                    format!("invalid read from stack R{regno} off={o} size={size} (byte at off={a} is uninitialized; unprivileged rule)"),
                ))
            }
            SB::Misc => {}
            SB::Zero => zeros += 1,
            SB::Spill => {
                if s.spill.ty != RegType::Scalar {
                    return Err(err(
                        pc,
                        format!("invalid read from stack R{regno} off={o} size={size}: it covers part of a spilled {}", s.spill.ty.name()),
                    ));
                }
                if s.spill.var.as_const() == Some(0) {
                    spilled_zero += 1;
                }
            }
        }
    }
    let zero = zeros == size || spilled_zero == size;
    Ok((if zero { Reg::konst(0) } else { Reg::scalar(Scalar::bounded(size * 8)) }, false))
}

/// `true` if the write spilled a whole register (a precision source for later fills).
fn stack_write(st: &mut State, fno: usize, pc: usize, o: i64, size: u32, val: Reg, src: u8) -> Result<bool, VerifyError> {
    let bad = || err(pc, format!("invalid stack access off={o} size={size}"));
    let (si, bi) = stack_pos(o).ok_or_else(bad)?;
    if val.ty.is_ptr() {
        if size != 8 || bi != 0 {
            return Err(err(pc, format!("R{src} misaligned or partial spill of a pointer (stack off={o} size={size})")));
        }
        if val.ty == RegType::Stack && val.aux as usize > fno {
            return Err(err(pc, format!("R{src} cannot spill a pointer to a callee's stack frame into a caller's stack")));
        }
    }
    let fr = st.frames.get_mut(fno).ok_or_else(bad)?;
    if size == 8 && bi == 0 {
        // A whole aligned slot keeps the register (type, bounds, id) for a later fill.
        let slot = fr.slot_mut(si).ok_or_else(bad)?;
        *slot = Slot { b: [SB::Spill; 8], spill: Reg { precise: false, ..val } };
        return Ok(true);
    }
    if bi == 0 && val.ty == RegType::Scalar {
        // A narrower scalar at the start of a slot is spilled too (as the kernel does):
        // its low bytes, linked to the source only if nothing was cut off.
        let slot = fr.slot_mut(si).ok_or_else(bad)?;
        break_spill(slot);
        let bits = size * 8;
        let fits = val.var.umax < (1u64 << bits);
        let spill = Reg { id: if fits { val.id } else { 0 }, ..Reg::scalar(val.var.trunc(bits)) };
        for b in &mut slot.b[..size as usize] {
            *b = SB::Spill;
        }
        slot.spill = spill;
        return Ok(true);
    }
    let zero = val.var.trunc(size * 8).as_const() == Some(0);
    for a in o..o + size as i64 {
        let (si, bi) = stack_pos(a).ok_or_else(bad)?;
        let slot = fr.slot_mut(si).ok_or_else(bad)?;
        break_spill(slot);
        slot.b[bi] = if zero { SB::Zero } else { SB::Misc };
    }
    Ok(false)
}
