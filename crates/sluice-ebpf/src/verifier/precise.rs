//! Precision tracking: which scalars' exact bounds a verified path relied on.
//!
//! Saved states compare scalars loosely (any scalar covers any scalar) unless the scalar is
//! marked `precise`, which makes pruning effective for the many branch-refined but otherwise
//! irrelevant scalars of real programs. A scalar becomes precise when its bounds decide
//! something: pointer arithmetic, a helper size, a branch with only one feasible side, a
//! pointer compared with it, a zero-byte stack store. The mark is then propagated backwards
//! along the current path (through moves, ALU ops, spills and fills, calls and returns) to
//! every saved state the value came through. Pruning against a state also propagates that
//! state's precise scalars to the pruned path's ancestors, whose safety now relies on them.

use super::cfg::{Kind, MAX_CALL_FRAMES};
use super::helpers::TAIL_CALL;
use super::state::{RegType, State};
use super::Verifier;
use crate::insn::*;

const R0_5: u16 = 0b11_1111;
const R1_5: u16 = 0b11_1110;

/// One executed instruction of the current path, with what backtracking needs to know.
#[derive(Clone, Debug, Default)]
pub(crate) struct Hist {
    pub pc: u32,
    /// Frame depth the instruction ran in (0 = entry function).
    pub frame: u8,
    /// A whole 8-byte spill or fill: (frame, slot) of the stack slot.
    pub spill: Option<(u8, u8)>,
    /// Conditional jumps on id-linked scalars: every (frame, reg or 16 + slot) refined with them.
    pub linked: Vec<(u8, u8)>,
}

/// Per frame depth: registers (bit n = Rn) and stack slots whose values are needed.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Need {
    pub regs: [u16; MAX_CALL_FRAMES],
    pub slots: [u64; MAX_CALL_FRAMES],
}

impl Need {
    pub fn reg(frame: usize, r: u8) -> Need {
        let mut n = Need::default();
        if frame < MAX_CALL_FRAMES && r < 10 {
            n.regs[frame] = 1 << r;
        }
        n
    }

    /// Is everything needed here already in `done`?
    pub fn subset_of(&self, done: &Need) -> bool {
        (0..MAX_CALL_FRAMES).all(|k| self.regs[k] & !done.regs[k] == 0 && self.slots[k] & !done.slots[k] == 0)
    }

    pub fn union_with(&mut self, o: &Need) {
        for k in 0..MAX_CALL_FRAMES {
            self.regs[k] |= o.regs[k];
            self.slots[k] |= o.slots[k];
        }
    }

    fn is_empty(&self) -> bool {
        self.regs.iter().all(|&r| r == 0) && self.slots.iter().all(|&s| s == 0)
    }

    fn has(&self, frame: u8, idx: u8) -> bool {
        let f = frame as usize;
        if f >= MAX_CALL_FRAMES {
            return false;
        }
        if idx < 16 {
            self.regs[f] & (1 << idx) != 0
        } else {
            self.slots[f] & (1u64 << ((idx - 16) & 63)) != 0
        }
    }

    fn add(&mut self, frame: u8, idx: u8) {
        let f = frame as usize;
        if f >= MAX_CALL_FRAMES {
            return;
        }
        if idx < 16 {
            self.regs[f] |= 1 << idx;
        } else {
            self.slots[f] |= 1u64 << ((idx - 16) & 63);
        }
    }
}

/// Marks the needed scalars of `st` precise; `true` if any mark is new.
fn mark_state(st: &mut State, need: &Need) -> bool {
    let mut newly = false;
    for (k, fr) in st.frames.iter_mut().enumerate().take(MAX_CALL_FRAMES) {
        for r in 0..10 {
            if need.regs[k] & (1 << r) != 0 {
                let reg = &mut fr.regs[r];
                if reg.ty == RegType::Scalar && !reg.precise {
                    reg.precise = true;
                    newly = true;
                }
            }
        }
        let mut slots = need.slots[k];
        while slots != 0 {
            let s = slots.trailing_zeros() as usize;
            slots &= slots - 1;
            if let Some(slot) = fr.stack.get_mut(s) {
                if slot.is_spill() && slot.spill.ty == RegType::Scalar && !slot.spill.precise {
                    slot.spill.precise = true;
                    newly = true;
                }
            }
        }
    }
    newly
}

impl<'a> Verifier<'a> {
    /// Undoes one instruction: turns "needed after it" into "needed before it".
    fn backtrack(&self, h: &Hist, need: &mut Need) {
        let pc = h.pc as usize;
        let (Some(&insn), Some(&kind)) = (self.insns.get(pc), self.cfg.kinds.get(pc)) else { return };
        let f = (h.frame as usize).min(MAX_CALL_FRAMES - 1);
        let dst = 1u16 << (insn.dst & 0x0f);
        let src = 1u16 << (insn.src & 0x0f);
        let x = insn.code & BPF_X != 0;
        match kind {
            Kind::Lddw => need.regs[f] &= !dst,
            Kind::Jump(_) | Kind::Second => {}
            Kind::Exit => {
                // Backwards from the caller's return point into the callee's exit.
                if f >= 1 {
                    let r0 = need.regs[f - 1] & 1;
                    need.regs[f - 1] &= !R0_5;
                    need.regs[f] = r0;
                    need.slots[f] = 0;
                }
            }
            Kind::CallSub(_) => {
                // Backwards from the callee's entry to the call: arguments come from R1-R5.
                if f + 1 < MAX_CALL_FRAMES {
                    let args = need.regs[f + 1] & R1_5;
                    need.regs[f + 1] = 0;
                    need.slots[f + 1] = 0;
                    need.regs[f] = (need.regs[f] & !R0_5) | args;
                }
            }
            // R0 is the helper's result (no source); R1-R5 are dead afterwards.
            Kind::CallHelper(id) => {
                need.regs[f] &= !R0_5;
                if id == TAIL_CALL && f >= 1 {
                    // The path where the tail call returned to the caller: its R0 is the
                    // target's (no source). On the other path the caller's R0 is not live.
                    need.regs[f - 1] &= !1;
                }
            }
            Kind::Cond(_) => {
                let involved = dst | if x { src } else { 0 };
                let hit = need.regs[f] & involved != 0 || h.linked.iter().any(|&(lf, i)| need.has(lf, i));
                if hit {
                    // The refined value depended on both operands and on every linked copy.
                    need.regs[f] |= involved;
                    for &(lf, i) in &h.linked {
                        need.add(lf, i);
                    }
                }
            }
            Kind::Normal => match insn.class() {
                BPF_ALU | BPF_ALU64 => {
                    let op = insn.code & 0xf0;
                    if need.regs[f] & dst != 0 {
                        if op == BPF_MOV {
                            need.regs[f] &= !dst;
                            if x {
                                need.regs[f] |= src;
                            }
                        } else if x && op != BPF_NEG && op != BPF_END {
                            need.regs[f] |= src;
                        }
                    }
                }
                BPF_LDX if need.regs[f] & dst != 0 => {
                    need.regs[f] &= !dst;
                    if let Some((fno, slot)) = h.spill {
                        need.add(fno, 16 + slot);
                    }
                }
                BPF_ST | BPF_STX => {
                    if let Some((fno, slot)) = h.spill {
                        if need.has(fno, 16 + slot) {
                            let fi = (fno as usize).min(MAX_CALL_FRAMES - 1);
                            need.slots[fi] &= !(1u64 << (slot & 63));
                            let atomic = insn.code & 0xe0 == BPF_ATOMIC;
                            if insn.class() == BPF_STX && !atomic {
                                need.regs[f] |= src;
                            }
                        }
                    }
                    if insn.class() == BPF_STX && insn.code & 0xe0 == BPF_ATOMIC {
                        // Fetched values are unknown scalars: no source.
                        if insn.imm == BPF_CMPXCHG {
                            need.regs[f] &= !1;
                        } else if insn.imm & BPF_FETCH != 0 {
                            need.regs[f] &= !src;
                        }
                    }
                }
                _ => {}
            },
        }
        need.regs[f] &= !(1 << 10);
    }

    /// Propagates `need` (as of the state before the current instruction) backwards along
    /// the current path into every saved state it passes.
    pub(crate) fn mark_precise(&mut self, mut need: Need) {
        for h in self.hist.iter().rev() {
            self.backtrack(h, &mut need);
        }
        let mut p = self.parent;
        while let Some(ci) = p {
            if need.is_empty() {
                break;
            }
            let ci = ci as usize;
            // A superset was propagated from here before: everything further back is done
            // (backtracking is monotone), which keeps repeated marking linear overall.
            if need.subset_of(&self.ckpts[ci].propagated) {
                break;
            }
            self.ckpts[ci].propagated.union_with(&need);
            if let Some(st) = self.ckpts[ci].state.as_mut() {
                mark_state(st, &need);
            }
            let seg = std::mem::take(&mut self.ckpts[ci].seg);
            for h in seg.iter().rev() {
                self.backtrack(h, &mut need);
            }
            self.ckpts[ci].seg = seg;
            p = self.ckpts[ci].parent;
        }
    }

    /// The bounds of register `r` of the current (innermost) frame decide safety here.
    pub(crate) fn mark_reg_precise(&mut self, st: &State, r: u8) {
        let f = st.frames.len().saturating_sub(1);
        if st.cur().regs.get(r as usize).is_some_and(|q| q.ty == RegType::Scalar) {
            self.mark_precise(Need::reg(f, r));
        }
    }
}

/// What the pruning state relied on, restricted to what was compared (live registers).
pub(crate) fn need_of(old: &State, live: &[u16]) -> Need {
    let mut n = Need::default();
    for (k, fr) in old.frames.iter().enumerate().take(MAX_CALL_FRAMES) {
        let mask = live.get(k).copied().unwrap_or(0);
        for r in 0..10 {
            let q = &fr.regs[r];
            if mask & (1 << r) != 0 && q.ty == RegType::Scalar && q.precise {
                n.regs[k] |= 1 << r;
            }
        }
        for (s, slot) in fr.stack.iter().enumerate().take(64) {
            if slot.is_spill() && slot.spill.ty == RegType::Scalar && slot.spill.precise {
                n.slots[k] |= 1u64 << s;
            }
        }
    }
    n
}
