//! The verifier: refuses every XDP program that could crash or hang the host.
//!
//! The JIT runs verified programs as native code without runtime checks, so anything this
//! module accepts must be memory-safe and terminating for every input packet and map
//! content. It works like the kernel's verifier (kernel/bpf/verifier.c), written anew:
//!
//! 1. structural checks (`cfg.rs`): encodings, register numbers, jump/call targets, function
//!    boundaries, no fall-through off a function, no unreachable code, no recursion, at
//!    most 8 call frames;
//! 2. abstract interpretation of every path (depth-first with a worklist of branch states):
//!    registers carry types (scalar with interval + known-bits bounds, ctx, packet,
//!    packet_end, packet_meta, stack, map pointer, map value, map value or NULL), stacks
//!    track initialised bytes and spilled registers, and every memory access, helper call
//!    and pointer operation is checked against them;
//! 3. termination: states are saved at jump targets; a state covered by an already fully
//!    verified one is pruned, a state covered by one of its own ancestors is an infinite
//!    loop, and exploring more than `max_processed_insns` instructions is "too complex".
//!    Bounded loops therefore verify exactly when their exploration terminates.
//!
//! Precision tracking (`precise.rs`) and static register liveness (`cfg.rs`) keep pruning
//! effective on real clang output; memory for saved and pending states is budgeted.
//!
//! Runtime contract the engines must honour (the verifier relies on it; sluice's
//! interpreter, JIT, helpers and maps do): x/0 = 0 and x%0 = x (32-bit forms zero-extend),
//! signed INT_MIN/-1 = INT_MIN and INT_MIN%-1 = 0, register shift amounts are masked to the
//! operand width, 32-bit ALU results are zero-extended, helpers returning u32 zero-extend,
//! every frame has 512 bytes of stack, map values never move or get freed while a program
//! runs (a deleted element's memory stays mapped) and are 8-byte aligned, and
//! map_lookup_elem on device/socket maps returns a pointer to `value_size` readable bytes
//! (or NULL). Context loads are plain 4-byte loads of `struct xdp_md`;
//! [`VerifiedProgram::insn_mem`] still tells which instructions access the context.

mod cfg;
mod exec;
mod helpers;
mod precise;
mod scalar;
mod state;
mod tnum;

use crate::insn::Insn;
use crate::program::Program;
use cfg::Cfg;
use state::State;

/// Why a program was refused, always naming the instruction slot it was refused at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("insn {insn}: {msg}")]
pub struct VerifyError {
    pub insn: usize,
    pub msg: String,
}

pub(crate) fn err(insn: usize, msg: impl Into<String>) -> VerifyError {
    VerifyError { insn, msg: msg.into() }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Instructions the abstract interpretation may process over all paths (kernel: 1M).
    pub max_processed_insns: usize,
    /// Instruction slots a program may have (kernel: 1M for privileged programs).
    pub max_insns: usize,
    /// The kernel's rules for a loader that may see kernel addresses (`allow_ptr_leaks`,
    /// CAP_PERFMON / root): sluice's loader owns the program, so this is the default.
    /// - a packet pointer a packet-changing helper invalidated becomes an unknown scalar
    ///   (unprivileged: unreadable, `!read_ok` on its next use);
    /// - pointers may be stored to maps and packets, passed to helpers as plain values,
    ///   returned, compared with any pointer or scalar (nothing learned), and subtracted
    ///   from each other (an unknown scalar); a 32-bit move of a pointer gives an unknown
    ///   scalar. Unprivileged, each of these is refused ("leaks addr", "pointer comparison
    ///   prohibited", "partial copy of pointer", ...).
    pub privileged: bool,
}

impl VerifyOptions {
    /// The kernel's rules without `allow_ptr_leaks` (no CAP_PERFMON).
    pub fn unprivileged() -> VerifyOptions {
        VerifyOptions { privileged: false, ..VerifyOptions::default() }
    }
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions { max_processed_insns: 1_000_000, max_insns: 1_000_000, privileged: true }
    }
}

/// One function of the program (the entry is the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubprogInfo {
    /// First instruction slot.
    pub start: usize,
    /// One past the last instruction slot.
    pub end: usize,
    /// Deepest stack byte the function's frame uses, rounded up to 8 (<= 512).
    pub stack_depth: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyStats {
    /// Instructions processed by the abstract interpretation, over all paths.
    pub processed_insns: usize,
    /// States saved at prune points.
    pub states_stored: usize,
    /// Paths cut short because an already verified state covered them.
    pub states_pruned: usize,
    /// Per function (same order as [`VerifiedProgram::subprogs`]): stack depth in bytes.
    pub subprog_stack_depth: Vec<u32>,
    /// Largest sum of frame sizes over any chain of calls (<= 512).
    pub max_call_chain_stack: u32,
}

/// Bits of [`VerifiedProgram::insn_mem`]: which kinds of pointer a load/store/atomic at that
/// slot was verified with (0 for other instructions and for dead code).
pub mod mem {
    /// `struct xdp_md` (always alone: a ctx access never shares its instruction with others).
    pub const CTX: u8 = 1;
    pub const PACKET: u8 = 2;
    pub const PACKET_META: u8 = 4;
    pub const STACK: u8 = 8;
    pub const MAP_VALUE: u8 = 16;
    /// A ring buffer record (`bpf_ringbuf_reserve`).
    pub const RINGBUF: u8 = 32;
}

/// A program that passed verification. Only [`verify`] makes one (the fields are private):
/// the JIT compiles its code without checks on the strength of it.
#[derive(Debug, Clone)]
pub struct VerifiedProgram {
    program: Program,
    subprogs: Vec<SubprogInfo>,
    /// Per instruction slot, a set of [`mem`] bits.
    insn_mem: Vec<u8>,
    stats: VerifyStats,
    reads_uninit_stack: bool,
    /// The frozen map values it was verified knowing (by map index): the maps it runs with
    /// must hold them, frozen.
    frozen: Vec<Option<Vec<u8>>>,
}

impl VerifiedProgram {
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The frozen read-only map values the verification relied on, by map index
    /// ([`verify_with_frozen`]); the maps the program runs with must hold these, frozen.
    pub fn frozen_values(&self) -> &[Option<Vec<u8>>] {
        &self.frozen
    }

    /// Whether some path may read stack bytes it never wrote (a privileged loader's
    /// allow_uninit_stack): what it reads must then not be the host's leftovers, so the JIT
    /// zeroes the program's stack on every run, as the interpreter always does.
    pub fn reads_uninit_stack(&self) -> bool {
        self.reads_uninit_stack
    }

    /// The functions (entry first) with their verified stack depths.
    pub fn subprogs(&self) -> &[SubprogInfo] {
        &self.subprogs
    }

    /// Per instruction slot, the [`mem`] bits of the memory it may access.
    pub fn insn_mem(&self) -> &[u8] {
        &self.insn_mem
    }

    pub fn stats(&self) -> &VerifyStats {
        &self.stats
    }

    pub fn into_program(self) -> Program {
        self.program
    }

    /// Is the instruction at `pc` a load from the context (an xdp_md field read)?
    pub fn is_ctx_access(&self, pc: usize) -> bool {
        self.insn_mem.get(pc).is_some_and(|m| m & mem::CTX != 0)
    }
}

/// Verifies an XDP program: `Ok` only if no input can make it crash, corrupt memory or run
/// forever.
pub fn verify(prog: &Program, opts: &VerifyOptions) -> Result<VerifiedProgram, VerifyError> {
    verify_with_frozen(prog, opts, &[])
}

/// [`verify`] knowing the values of frozen read-only maps: `frozen[i]` is the one value of
/// the program's map `i` when that map is a frozen `BPF_F_RDONLY_PROG` array of one entry
/// (`.rodata` after libbpf's bpf_map_freeze, [`crate::maps::Map::freeze`]); entries for any
/// other map are ignored. Loads from it at a constant offset are those constants, as in the
/// kernel (check_mem_access: bpf_map_is_rdonly, bpf_map_direct_read), so `const volatile`
/// settings prune branches and bound loops. The maps must stay frozen while the program runs.
/// [`crate::Object::freeze_rodata`] freezes an object's `.rodata` and gives these values.
pub fn verify_with_frozen(prog: &Program, opts: &VerifyOptions, frozen: &[Option<Vec<u8>>]) -> Result<VerifiedProgram, VerifyError> {
    // Internal invariant violations must refuse the program, never take the host down.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| verify_inner(prog, opts, frozen))) {
        Ok(r) => r,
        Err(_) => Err(err(0, "internal verifier error (program refused)")),
    }
}

fn verify_inner(prog: &Program, opts: &VerifyOptions, frozen: &[Option<Vec<u8>>]) -> Result<VerifiedProgram, VerifyError> {
    let cfg = cfg::build(prog, opts.max_insns)?;
    let mut v = Verifier::new(prog, *opts, cfg);
    v.frozen = frozen;
    v.run()?;
    let chain = v.check_stack_chains()?;
    v.check_tail_call_stack()?;
    let depths: Vec<u32> = v.stack_depth.iter().map(|&d| round8(d)).collect();
    let subprogs =
        v.cfg.subprogs.iter().zip(&depths).map(|(&(start, end), &stack_depth)| SubprogInfo { start, end, stack_depth }).collect();
    Ok(VerifiedProgram {
        program: prog.clone(),
        subprogs,
        insn_mem: v.insn_mem,
        reads_uninit_stack: v.reads_uninit_stack,
        // Only what the verifier reads as constants (`frozen_read`'s maps): the rest was ignored.
        frozen: frozen
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let m = prog.maps.get(i)?;
                v.clone().filter(|b| m.is_readonly_one_value_array() && b.len() == m.value_size as usize)
            })
            .collect(),
        stats: VerifyStats {
            processed_insns: v.processed,
            states_stored: v.stored,
            states_pruned: v.pruned,
            subprog_stack_depth: depths,
            max_call_chain_stack: chain,
        },
    })
}

/// Branches waiting on the worklist (kernel BPF_COMPLEXITY_LIMIT_JMP_SEQ): bounds memory.
const MAX_PENDING: usize = 8192;
/// Ids are never reused; stop well before the counter could wrap.
const MAX_ID: u32 = u32::MAX - (1 << 24);
/// Memory for saved states: beyond it no new states are saved (pruning weakens, exploration
/// stays bounded by `max_processed_insns`).
const MAX_STORED_BYTES: usize = 256 << 20;
/// Memory for branches waiting on the worklist: beyond it the program is refused.
const MAX_PENDING_BYTES: usize = 256 << 20;
/// History entries after which a state-less saved point is made, so the history copied to
/// every pending branch stays short.
const MAX_HIST: usize = 64;

fn round8(d: u32) -> u32 {
    d.div_ceil(8) * 8
}

/// A saved state at a prune point.
struct Ckpt {
    /// `None` once evicted (it stays in the tree only for branch accounting).
    state: Option<State>,
    parent: Option<u32>,
    /// Paths still being explored below this state. Non-zero means it is an ancestor of the
    /// current path (the worklist is LIFO), so reaching it again means a loop.
    branches: u32,
    hits: u32,
    misses: u32,
    /// Instructions executed from the parent's state to this one (for precision backtracking).
    seg: Vec<precise::Hist>,
    pc: u32,
    /// Precision needs already propagated backwards from this point.
    propagated: precise::Need,
}

/// A branch waiting to be explored.
struct Pending {
    state: State,
    pc: usize,
    parent: Option<u32>,
    hist: Vec<precise::Hist>,
}

pub(crate) struct Verifier<'a> {
    prog: &'a Program,
    /// Values of frozen read-only maps by map index ([`verify_with_frozen`]).
    frozen: &'a [Option<Vec<u8>>],
    insns: &'a [Insn],
    opts: VerifyOptions,
    cfg: Cfg,
    ckpts: Vec<Ckpt>,
    /// Per instruction: fully explored saved states (candidates for pruning).
    done: Vec<Vec<u32>>,
    /// Per instruction: saved states still being explored (ancestors of the current path).
    ancestors_at: Vec<u32>,
    /// (instruction, hash of the current frame's live registers) → saved states.
    loop_cands: std::collections::HashMap<(u32, u64), Vec<u32>>,
    /// Most recent saved state on the current path.
    parent: Option<u32>,
    /// Instructions executed on the current path since `parent`.
    hist: Vec<precise::Hist>,
    stored_bytes: usize,
    pending_bytes: usize,
    /// Filled in by `step` for the history entry of the instruction it executes.
    cur_spill: Option<(u8, u8)>,
    cur_linked: Vec<(u8, u8)>,
    work: Vec<Pending>,
    processed: usize,
    jmps: usize,
    ckpt_processed: usize,
    ckpt_jmps: usize,
    id_gen: u32,
    /// Per function: deepest stack byte touched (unrounded).
    stack_depth: Vec<u32>,
    insn_mem: Vec<u8>,
    stored: usize,
    pruned: usize,
    /// Some path reads stack bytes it never wrote (allowed to a privileged loader, as the
    /// kernel's allow_uninit_stack): the engines must then start from zeroed stack frames.
    reads_uninit_stack: bool,
}

enum Visit {
    Prune,
    Continue,
}

impl<'a> Verifier<'a> {
    fn new(prog: &'a Program, opts: VerifyOptions, cfg: Cfg) -> Verifier<'a> {
        let n = prog.insns.len();
        let m = cfg.subprogs.len();
        Verifier {
            prog,
            frozen: &[],
            insns: &prog.insns,
            opts,
            cfg,
            ckpts: Vec::new(),
            done: vec![Vec::new(); n],
            ancestors_at: vec![0; n],
            loop_cands: std::collections::HashMap::new(),
            parent: None,
            hist: Vec::new(),
            stored_bytes: 0,
            pending_bytes: 0,
            cur_spill: None,
            cur_linked: Vec::new(),
            work: Vec::new(),
            processed: 0,
            jmps: 0,
            ckpt_processed: 0,
            ckpt_jmps: 0,
            id_gen: 0,
            stack_depth: vec![0; m],
            insn_mem: vec![0; n],
            stored: 0,
            pruned: 0,
            reads_uninit_stack: false,
        }
    }

    pub(crate) fn fresh_id(&mut self) -> u32 {
        self.id_gen = self.id_gen.wrapping_add(1).max(1);
        self.id_gen
    }

    fn run(&mut self) -> Result<(), VerifyError> {
        let mut st = State::entry();
        let mut pc = 0usize;
        loop {
            let mut ended = false;
            if self.cfg.prune.get(pc).copied().unwrap_or(false) {
                if let Visit::Prune = self.visit(&st, pc)? {
                    self.pruned += 1;
                    ended = true;
                }
            }
            if !ended {
                self.processed += 1;
                if self.processed > self.opts.max_processed_insns || self.id_gen > MAX_ID {
                    return Err(err(pc, format!("program too complex (processed {} insns): BPF program is too large", self.processed)));
                }
                self.cur_spill = None;
                self.cur_linked.clear();
                let frame = (st.frames.len() - 1) as u8;
                if self.insns.get(pc).is_some_and(|i| matches!(i.class(), crate::insn::BPF_JMP | crate::insn::BPF_JMP32)) {
                    self.jmps += 1;
                }
                let flow = self.step(&mut st, pc)?;
                let h = precise::Hist { pc: pc as u32, frame, spill: self.cur_spill, linked: std::mem::take(&mut self.cur_linked) };
                match flow {
                    exec::Flow::Next(n) => {
                        self.hist.push(h);
                        pc = n;
                    }
                    exec::Flow::Fork { other, other_pc, next } => {
                        if let Some(p) = self.parent {
                            self.ckpts[p as usize].branches += 1;
                        }
                        self.hist.push(h);
                        if self.work.len() >= MAX_PENDING {
                            return Err(err(
                                pc,
                                format!("the sequence of {} jumps is too complex (program too complex)", self.work.len() + 1),
                            ));
                        }
                        self.pending_bytes += other.approx_bytes() + self.hist.len() * std::mem::size_of::<precise::Hist>();
                        if self.pending_bytes > MAX_PENDING_BYTES {
                            return Err(err(pc, "program too complex (verifier memory limit for pending branches)"));
                        }
                        self.work.push(Pending { state: other, pc: other_pc, parent: self.parent, hist: self.hist.clone() });
                        pc = next;
                    }
                    exec::Flow::End => ended = true,
                }
            }
            if ended {
                self.finish_path(self.parent);
                match self.work.pop() {
                    Some(p) => {
                        self.pending_bytes =
                            self.pending_bytes.saturating_sub(p.state.approx_bytes() + p.hist.len() * std::mem::size_of::<precise::Hist>());
                        st = p.state;
                        pc = p.pc;
                        self.parent = p.parent;
                        self.hist = p.hist;
                    }
                    None => return Ok(()),
                }
            }
        }
    }

    /// A path ended (exit, pruned or infeasible): its ancestors have one branch less.
    fn finish_path(&mut self, mut parent: Option<u32>) {
        while let Some(p) = parent {
            let c = &mut self.ckpts[p as usize];
            c.branches = c.branches.saturating_sub(1);
            if c.branches > 0 {
                break;
            }
            // Fully explored: from now on it can prune other paths.
            let pc = c.pc as usize;
            if c.state.is_some() {
                if let Some(a) = self.ancestors_at.get_mut(pc) {
                    *a = a.saturating_sub(1);
                }
                if let Some(d) = self.done.get_mut(pc) {
                    d.push(p);
                }
            }
            parent = c.parent;
        }
    }

    /// Liveness masks for each frame: the innermost uses the current instruction's live-in,
    /// callers the live-in of their return point (only callee-saved R6-R9 survive a call).
    fn live_masks(&self, st: &State, pc: usize) -> Vec<u16> {
        let n = st.frames.len();
        (0..n)
            .map(|k| {
                if k + 1 == n {
                    self.cfg.live_in.get(pc).copied().unwrap_or(0x7ff)
                } else {
                    let ret = st.frames[k + 1].callsite + 1;
                    self.cfg.live_in.get(ret).copied().unwrap_or(0x7ff) & 0x3c0
                }
            })
            .collect()
    }

    fn visit(&mut self, st: &State, pc: usize) -> Result<Visit, VerifyError> {
        let live = self.live_masks(st, pc);

        // Ancestors on the current path whose registers are identical to ours (as the
        // kernel, only those are loop candidates): coming back to a state one of them
        // covers means the exploration would never end.
        let h = state::loop_hash(st, &live);
        if let Some(cands) = self.loop_cands.get_mut(&(pc as u32, h)) {
            let ckpts = &self.ckpts;
            cands.retain(|&ci| ckpts[ci as usize].branches > 0);
            for &ci in cands.iter() {
                if let Some(old) = &ckpts[ci as usize].state {
                    if state::states_safe(old, st, &live, true) {
                        return Err(err(pc, format!("infinite loop detected at insn {pc}")));
                    }
                }
            }
        }
        // As the kernel: save a state only after 2 jumps and 8 instructions (memory and
        // time), and inside a loop only every 20 jumps or 100 instructions; never beyond the
        // memory budget.
        let since_jmps = self.jmps - self.ckpt_jmps;
        let since_insns = self.processed - self.ckpt_processed;
        let mut add = since_jmps >= 2 && since_insns >= 8;
        if self.ancestors_at[pc] > 0 && since_jmps < 20 && since_insns < 100 {
            add = false;
        }
        if self.stored_bytes > MAX_STORED_BYTES {
            add = false;
        }

        // Fully explored states: one covering us proves this path safe.
        let mut evict: Vec<usize> = Vec::new();
        let mut need = None;
        let list = std::mem::take(&mut self.done[pc]);
        for (k, &ci) in list.iter().enumerate() {
            let c = &mut self.ckpts[ci as usize];
            let Some(old) = &c.state else { continue };
            if state::states_safe(old, st, &live, false) {
                c.hits += 1;
                need = Some(precise::need_of(old, &live));
                break;
            }
            c.misses += 1;
            // States that keep failing to match only cost time and memory.
            if c.misses > c.hits * 3 + 3 {
                evict.push(k);
            }
        }
        let mut list = list;
        for &k in evict.iter().rev() {
            let ci = list.remove(k);
            if let Some(old) = self.ckpts[ci as usize].state.take() {
                self.stored_bytes = self.stored_bytes.saturating_sub(old.approx_bytes());
            }
        }
        self.done[pc] = list;
        if let Some(n) = need {
            // This path is safe because the old one was: what it relied on, we rely on.
            self.mark_precise(n);
            return Ok(Visit::Prune);
        }
        if add || self.hist.len() >= MAX_HIST {
            // Without `add`, a state-less point: it only cuts the history (for precision
            // backtracking and branch accounting), it can neither prune nor detect loops.
            let idx = self.ckpts.len() as u32;
            let seg = std::mem::take(&mut self.hist);
            let state = if add {
                self.stored_bytes += st.approx_bytes();
                self.loop_cands.entry((pc as u32, h)).or_default().push(idx);
                self.ancestors_at[pc] += 1;
                self.stored += 1;
                self.ckpt_jmps = self.jmps;
                self.ckpt_processed = self.processed;
                Some(st.clone())
            } else {
                None
            };
            self.ckpts.push(Ckpt {
                state,
                parent: self.parent,
                branches: 1,
                hits: 0,
                misses: 0,
                seg,
                pc: pc as u32,
                propagated: precise::Need::default(),
            });
            self.parent = Some(idx);
        }
        Ok(Visit::Continue)
    }

    /// A subprogram may only tail-call when the frames below it on every call chain use less
    /// than 256 bytes of stack: a tail call unwinds the subprogram's frame only, so the
    /// callers' stay while the target runs, up to 33 times over (the kernel's
    /// check_max_stack_depth_subprog; its depths rounded up to 16 bytes, as for a JIT).
    fn check_tail_call_stack(&self) -> Result<(), VerifyError> {
        const MAX_STACK_BELOW_TAIL_CALL: u32 = 256;
        let m = self.cfg.subprogs.len();
        // Functions callers first (reverse post-order of the acyclic call graph from the entry).
        let mut order = Vec::with_capacity(m);
        let mut seen = vec![false; m];
        let mut dfs: Vec<(usize, usize)> = vec![(0, 0)];
        seen[0] = true;
        while let Some(top) = dfs.last_mut() {
            let (node, idx) = *top;
            if let Some(&(_, c)) = self.cfg.callees[node].get(idx) {
                top.1 += 1;
                if !seen[c] {
                    seen[c] = true;
                    dfs.push((c, 0));
                }
            } else {
                order.push(node);
                dfs.pop();
            }
        }
        // Per function, the most stack the frames below it use on a chain reaching it.
        let mut below: Vec<Option<u32>> = vec![None; m];
        below[0] = Some(0);
        for &f in order.iter().rev() {
            let Some(b) = below[f] else { continue };
            let with_f = b + self.stack_depth[f].div_ceil(16) * 16;
            for &(_, c) in &self.cfg.callees[f] {
                below[c] = Some(below[c].map_or(with_f, |x| x.max(with_f)));
            }
        }
        for (f, &(start, end)) in self.cfg.subprogs.iter().enumerate().skip(1) {
            let Some(b) = below[f].filter(|&b| b >= MAX_STACK_BELOW_TAIL_CALL) else { continue };
            if let Some(pc) = (start..end).find(|&pc| self.cfg.kinds.get(pc) == Some(&cfg::Kind::CallHelper(helpers::TAIL_CALL))) {
                return Err(err(pc, format!("tail_calls are not allowed when call stack of previous frames is {b} bytes. Too large")));
            }
        }
        Ok(())
    }

    /// Frames live on one host stack: the sum over any call chain must fit 512 bytes.
    fn check_stack_chains(&self) -> Result<u32, VerifyError> {
        let m = self.cfg.subprogs.len();
        // The call graph is acyclic (checked in cfg); evaluate callees before callers.
        let mut total = vec![0u32; m];
        let mut best: Vec<Option<(usize, usize)>> = vec![None; m];
        let mut state = vec![0u8; m];
        let mut dfs: Vec<(usize, usize)> = vec![(0, 0)];
        state[0] = 1;
        while let Some(top) = dfs.last_mut() {
            let (node, idx) = *top;
            if let Some(&(_, c)) = self.cfg.callees[node].get(idx) {
                top.1 += 1;
                if state[c] == 0 {
                    state[c] = 1;
                    dfs.push((c, 0));
                }
            } else {
                let mut deepest = 0;
                for &(cpc, c) in &self.cfg.callees[node] {
                    if best[node].is_none() || total[c] > deepest {
                        deepest = total[c];
                        best[node] = Some((cpc, c));
                    }
                }
                total[node] = round8(self.stack_depth[node]) + deepest;
                state[node] = 2;
                dfs.pop();
            }
        }
        if total[0] > state::MAX_BPF_STACK as u32 {
            // Report the call that pushes the chain over the limit.
            let mut node = 0usize;
            let mut sum = round8(self.stack_depth[0]);
            let mut frames = 1;
            while let Some((cpc, c)) = best[node] {
                sum += round8(self.stack_depth[c]);
                frames += 1;
                if sum > state::MAX_BPF_STACK as u32 {
                    return Err(err(cpc, format!("combined stack size of {frames} calls is {} bytes, more than 512", total[0])));
                }
                node = c;
            }
            return Err(err(0, format!("combined stack size is {} bytes, more than 512", total[0])));
        }
        Ok(total[0])
    }
}
