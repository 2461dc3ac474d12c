//! Abstract machine state: registers, per-frame stacks, and the "is this state covered by
//! an already-verified one" relation used for pruning and loop detection.

use super::scalar::Scalar;

pub(crate) const MAX_BPF_STACK: i64 = 512;
pub(crate) const STACK_SLOTS: usize = (MAX_BPF_STACK as usize) / 8;
pub(crate) const NREGS: usize = 11;
/// Set in a map pointer's or map value's `aux` when the map is the inner map of the outer map
/// whose index is in the low bits (its template, [`crate::program::MapDef::inner`]).
pub(crate) const INNER_MAP: u32 = 1 << 31;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RegType {
    NotInit,
    Scalar,
    Ctx,
    Packet,
    PacketMeta,
    PacketEnd,
    Stack,
    MapPtr,
    /// A map of maps' lookup result (kernel CONST_PTR_TO_MAP | PTR_MAYBE_NULL): `aux` is
    /// [`INNER_MAP`] | the outer map's index, whose template the inner map is checked against.
    MapPtrOrNull,
    MapValue,
    MapValueOrNull,
    /// A ring buffer record from `bpf_ringbuf_reserve` (kernel PTR_TO_MEM | MEM_RINGBUF):
    /// `aux` is its size, `id` the reference that submit/discard must release.
    RingbufMem,
    RingbufMemOrNull,
}

impl RegType {
    pub fn name(self) -> &'static str {
        match self {
            RegType::NotInit => "uninit",
            RegType::Scalar => "scalar",
            RegType::Ctx => "ctx",
            RegType::Packet => "pkt",
            RegType::PacketMeta => "pkt_meta",
            RegType::PacketEnd => "pkt_end",
            RegType::Stack => "fp",
            RegType::MapPtr => "map_ptr",
            // The kernel types the lookup result PTR_TO_MAP_VALUE_OR_NULL until the null check
            // makes it CONST_PTR_TO_MAP: its messages say map_value_or_null.
            RegType::MapPtrOrNull => "map_value_or_null",
            RegType::MapValue => "map_value",
            RegType::MapValueOrNull => "map_value_or_null",
            RegType::RingbufMem => "ringbuf_mem",
            RegType::RingbufMemOrNull => "ringbuf_mem_or_null",
        }
    }

    pub fn is_ptr(self) -> bool {
        !matches!(self, RegType::NotInit | RegType::Scalar)
    }

    pub fn is_pkt_family(self) -> bool {
        matches!(self, RegType::Packet | RegType::PacketMeta | RegType::PacketEnd)
    }
}

/// One register. Pointers are `base + off + var`: `off` is the constant part, `var` the
/// bounded variable part (a known 0 unless a non-constant scalar was added).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Reg {
    pub ty: RegType,
    pub off: i64,
    /// Scalar value, or the variable offset of a pointer.
    pub var: Scalar,
    /// Scalars: copies share an id (refining one refines all). Packet pointers: same id means
    /// same variable part, so a range learned for one holds for all. Or-null: same lookup.
    pub id: u32,
    /// Packet pointers: `base + var + range <= end` has been proven (in `off` units).
    pub range: i64,
    /// Map index (map pointers/values) or frame number (stack pointers).
    pub aux: u32,
    /// NotInit because a packet-changing helper invalidated a packet pointer (for messages).
    pub invalidated: bool,
    /// Saved states only: some verified path's safety depends on this scalar's exact bounds,
    /// so a state may only be pruned against this one if its value is contained in them.
    pub precise: bool,
}

impl Reg {
    pub const NOT_INIT: Reg =
        Reg { ty: RegType::NotInit, off: 0, var: Scalar::konst(0), id: 0, range: 0, aux: 0, invalidated: false, precise: false };

    pub fn scalar(v: Scalar) -> Reg {
        Reg { ty: RegType::Scalar, var: v, ..Reg::NOT_INIT }
    }

    pub fn konst(v: u64) -> Reg {
        Reg::scalar(Scalar::konst(v))
    }

    pub fn ptr(ty: RegType, aux: u32) -> Reg {
        Reg { ty, aux, ..Reg::NOT_INIT }
    }

    pub fn is_init(&self) -> bool {
        self.ty != RegType::NotInit
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SB {
    /// Never written (reading it is refused).
    Invalid,
    /// Written with some scalar bytes.
    Misc,
    /// Written with zero.
    Zero,
    /// Part of an 8-byte spilled register (see `Slot::spill`).
    Spill,
}

/// 8 bytes of stack. A spilled register occupies a prefix of 1, 2, 4 or 8 bytes marked
/// `Spill` (only scalars are spilled narrower than 8 bytes); `spill` is that register.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Slot {
    pub b: [SB; 8],
    pub spill: Reg,
}

impl Slot {
    pub const EMPTY: Slot = Slot { b: [SB::Invalid; 8], spill: Reg::NOT_INIT };

    pub fn is_spill(&self) -> bool {
        self.b[0] == SB::Spill
    }

    /// Bytes covered by the spilled register (0 if none).
    pub fn spill_size(&self) -> usize {
        self.b.iter().take_while(|b| **b == SB::Spill).count()
    }
}

/// Slot index and byte index of a frame offset in [-512, -1]. Slot 0 holds [-8, -1].
pub(crate) fn stack_pos(off: i64) -> Option<(usize, usize)> {
    if !(-MAX_BPF_STACK..0).contains(&off) {
        return None;
    }
    let p = (off + MAX_BPF_STACK) as usize;
    Some((STACK_SLOTS - 1 - p / 8, p % 8))
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Frame {
    pub regs: [Reg; NREGS],
    /// Grows on demand; missing slots are `Slot::EMPTY`.
    pub stack: Vec<Slot>,
    /// Instruction of the call that created this frame (0 for the entry frame).
    pub callsite: usize,
    pub subprog: usize,
}

impl Frame {
    pub fn new(frameno: u32, callsite: usize, subprog: usize) -> Frame {
        let mut regs = [Reg::NOT_INIT; NREGS];
        regs[10] = Reg { var: Scalar::konst(0), ..Reg::ptr(RegType::Stack, frameno) };
        Frame { regs, stack: Vec::new(), callsite, subprog }
    }

    pub fn slot(&self, i: usize) -> Slot {
        self.stack.get(i).copied().unwrap_or(Slot::EMPTY)
    }

    pub fn slot_mut(&mut self, i: usize) -> Option<&mut Slot> {
        if i >= STACK_SLOTS {
            return None;
        }
        if self.stack.len() <= i {
            self.stack.resize(i + 1, Slot::EMPTY);
        }
        self.stack.get_mut(i)
    }
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct State {
    /// Call frames, outermost first; never empty.
    pub frames: Vec<Frame>,
    /// References held (ring buffer records reserved and not yet submitted or discarded):
    /// every path must release them before the program exits.
    pub refs: Vec<RefState>,
}

/// An acquired reference: its id (shared by every register pointing to the object) and
/// the instruction that acquired it (for messages).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct RefState {
    pub id: u32,
    pub insn: usize,
}

impl State {
    pub fn entry() -> State {
        let mut f = Frame::new(0, 0, 0);
        f.regs[1] = Reg::ptr(RegType::Ctx, 0);
        State { frames: vec![f], refs: Vec::new() }
    }

    /// Approximate heap footprint, for the verifier's memory budget.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<State>()
            + self.refs.capacity() * std::mem::size_of::<RefState>()
            + self.frames.iter().map(|f| std::mem::size_of::<Frame>() + f.stack.capacity() * std::mem::size_of::<Slot>()).sum::<usize>()
    }

    pub fn cur(&self) -> &Frame {
        // `frames` is never empty: created with one frame, popped only above the first.
        &self.frames[self.frames.len() - 1]
    }

    pub fn cur_mut(&mut self) -> &mut Frame {
        let n = self.frames.len() - 1;
        &mut self.frames[n]
    }

    /// Applies `f` to every register and every spilled register in every frame.
    pub fn for_each_reg(&mut self, mut f: impl FnMut(&mut Reg)) {
        for fr in &mut self.frames {
            for r in &mut fr.regs {
                f(r);
            }
            for s in &mut fr.stack {
                if s.is_spill() {
                    f(&mut s.spill);
                    if s.spill.ty == RegType::NotInit {
                        // A spill that became invalid no longer holds readable bytes.
                        *s = Slot::EMPTY;
                    }
                }
            }
        }
    }
}

/// The id correspondence built while checking that an old state covers the current one:
/// registers linked in the old state must be linked the same way in the current one.
pub(crate) struct IdMap {
    pairs: Vec<(u32, u32)>,
    next_tmp: u32,
}

impl IdMap {
    pub fn new() -> IdMap {
        IdMap { pairs: Vec::new(), next_tmp: u32::MAX }
    }

    fn check(&mut self, old: u32, cur: u32) -> bool {
        if old == 0 {
            return true;
        }
        // An unlinked current register is linked to nothing: give it a unique label.
        let cur = if cur == 0 {
            self.next_tmp -= 1;
            self.next_tmp
        } else {
            cur
        };
        for &(o, c) in &self.pairs {
            if o == old {
                return c == cur;
            }
        }
        self.pairs.push((old, cur));
        true
    }
}

/// Does the old register's set of possible values cover the current one's, so that
/// everything the old state's exploration proved also holds here?
/// `exact`: compare every scalar by its bounds (loop detection); otherwise a scalar no
/// verified path depended on (not `precise`) covers any scalar.
pub(crate) fn regsafe(old: &Reg, cur: &Reg, ids: &mut IdMap, exact: bool) -> bool {
    if old.ty == RegType::NotInit {
        // A verified path never read it before writing it.
        return true;
    }
    if old.ty != cur.ty {
        return false;
    }
    match old.ty {
        RegType::NotInit => true,
        RegType::Scalar => {
            if !exact && !old.precise {
                return true;
            }
            old.var.contains(&cur.var) && ids.check(old.id, cur.id)
        }
        RegType::Ctx | RegType::PacketEnd => old.off == cur.off && old.var == cur.var,
        RegType::MapPtr => old.aux == cur.aux,
        RegType::MapPtrOrNull => old.aux == cur.aux && ids.check(old.id, cur.id),
        RegType::Stack | RegType::MapValue => old.aux == cur.aux && old.off == cur.off && old.var.contains(&cur.var),
        RegType::Packet | RegType::PacketMeta => {
            old.off == cur.off && cur.range >= old.range && old.var.contains(&cur.var) && ids.check(old.id, cur.id)
        }
        RegType::MapValueOrNull | RegType::RingbufMem | RegType::RingbufMemOrNull => {
            old.aux == cur.aux && old.off == cur.off && old.var.contains(&cur.var) && ids.check(old.id, cur.id)
        }
    }
}

fn stacksafe(old: &Frame, cur: &Frame, ids: &mut IdMap, exact: bool) -> bool {
    for (i, o) in old.stack.iter().enumerate() {
        let c = cur.slot(i);
        let k = o.spill_size();
        let mut start = 0;
        if k > 0 {
            if c.spill_size() == k && regsafe(&o.spill, &c.spill, ids, exact) {
                start = k;
            } else {
                // An imprecise spilled scalar (or one covering every value of its bytes)
                // is no more than initialised bytes.
                let covers_all = o.spill.var.contains(&Scalar::bounded(8 * k as u32)) && o.spill.id == 0;
                if !(o.spill.ty == RegType::Scalar && ((!exact && !o.spill.precise) || covers_all)) {
                    return false;
                }
            }
        }
        for j in start..8 {
            let ob = if j < k { SB::Misc } else { o.b[j] };
            let cur_zero_spill = || c.spill.ty == RegType::Scalar && c.spill.var.as_const().is_some_and(|v| (v >> (8 * j)) & 0xff == 0);
            let ok = match ob {
                SB::Invalid => true,
                SB::Misc => match c.b[j] {
                    SB::Misc | SB::Zero => true,
                    SB::Spill => c.spill.ty == RegType::Scalar,
                    SB::Invalid => false,
                },
                SB::Zero => match c.b[j] {
                    SB::Zero => true,
                    SB::Spill => cur_zero_spill(),
                    _ => false,
                },
                SB::Spill => false,
            };
            if !ok {
                return false;
            }
        }
    }
    true
}

/// Does `old` (already verified, or an ancestor when `exact`) cover `cur`? `live` holds the
/// register liveness mask of each frame (innermost last), from the static analysis.
pub(crate) fn states_safe(old: &State, cur: &State, live: &[u16], exact: bool) -> bool {
    if old.frames.len() != cur.frames.len() || live.len() != cur.frames.len() {
        return false;
    }
    if old.refs.len() != cur.refs.len() {
        return false;
    }
    let mut ids = IdMap::new();
    for (o, c) in old.refs.iter().zip(cur.refs.iter()) {
        if !ids.check(o.id, c.id) {
            return false;
        }
    }
    for (k, (of, cf)) in old.frames.iter().zip(cur.frames.iter()).enumerate() {
        if of.callsite != cf.callsite || of.subprog != cf.subprog {
            return false;
        }
        let mask = live[k];
        for r in 0..10 {
            if mask & (1 << r) != 0 && !regsafe(&of.regs[r], &cf.regs[r], &mut ids, exact) {
                return false;
            }
        }
        if !stacksafe(of, cf, &mut ids, exact) {
            return false;
        }
    }
    true
}

/// Hash of what must be identical for two states to be loop candidates: the call chain and
/// the live registers of the innermost frame (ids excluded: they are renamed freely).
pub(crate) fn loop_hash(st: &State, live: &[u16]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in &st.frames {
        (f.callsite, f.subprog).hash(&mut h);
    }
    let mask = live.last().copied().unwrap_or(0);
    for (r, q) in st.cur().regs.iter().enumerate().take(10) {
        if mask & (1 << r) != 0 {
            (r, q.ty as u8, q.off, q.range, q.aux).hash(&mut h);
            (q.var.umin, q.var.umax, q.var.smin, q.var.smax, q.var.t.value, q.var.t.mask).hash(&mut h);
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// The verifier's state-memory budget counts what a stored state holds beyond its fixed
    /// part: every stack slot of every frame and every reference (mutant sample 7: a `/` for
    /// a `*` made a full stack count as a few bytes, so the budget could not bind).
    #[test]
    fn approx_bytes_counts_stack_slots_frames_and_references() {
        let base = State::entry().approx_bytes();
        let mut st = State::entry();
        assert!(st.frames[0].slot_mut(STACK_SLOTS - 1).is_some());
        let with_stack = st.approx_bytes();
        assert!(with_stack >= base + STACK_SLOTS * size_of::<Slot>(), "{base} -> {with_stack}");
        st.frames.push(Frame::new(1, 0, 0));
        let with_frame = st.approx_bytes();
        assert!(with_frame >= with_stack + size_of::<Frame>(), "{with_stack} -> {with_frame}");
        st.refs = Vec::with_capacity(16);
        assert!(st.approx_bytes() >= with_frame + 16 * size_of::<RefState>());
    }
}
