//! A checked interpreter for the whole standard eBPF ISA (RFC 9669 plus the v4 additions:
//! signed div/mod, movsx, sign-extending loads, unconditional bswap, `gotol`, load-acquire /
//! store-release).
//!
//! It runs unverified programs safely: every memory access is checked against the regions of
//! the run (see [`RunState::translate`]): the stack frames in use, the 24-byte context
//! (loads only), the packet `[data_meta, data_end)` as it currently is, and the value regions
//! of the object's maps (stores only where programs may write). A fault, an invalid
//! instruction, a jump out of the program, more than 8 nested calls or an exhausted
//! instruction budget end the run with a [`RunError`]; nothing the program does can touch
//! other memory or hang the host.
//!
//! Per run: no heap allocation. The stack (8 frames × 512 bytes) lives on the native stack;
//! a frame is zeroed the first time a call reaches its depth. A program tail-called from a
//! subprogram runs nested, with a stack of its own, each with its own instruction budget
//! ([`crate::tail_call`]).

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use crate::env::Env;
use crate::helpers::{helper_fn, resolve_map_refs};
use crate::insn::*;
use crate::maps::Maps;
use crate::program::Program;
use crate::state::{Engine, MemKind, RunConfig, RunError, RunErrorKind, RunState};
use crate::tail_call::{run_from_subprogram, NestedTailCalls, RunInProgress, TailCallTargets};
use crate::xdp::{RunOutcome, XdpBuff};

/// Maximum number of call frames (the entry function plus 7 nested bpf-to-bpf calls).
pub const MAX_CALL_FRAMES: usize = 8;
/// Stack bytes per frame.
pub const FRAME_STACK_SIZE: usize = 512;
const STACK_SIZE: usize = MAX_CALL_FRAMES * FRAME_STACK_SIZE;

/// `imm` of BPF_STX | BPF_ATOMIC for load-acquire and store-release.
pub const BPF_LOAD_ACQ: i32 = 0x100;
pub const BPF_STORE_REL: i32 = 0x110;

/// What a run gives back or uses besides the packet (see `Interpreter::run_inner`).
struct RunExtras<'n> {
    /// The full r0, written after the run.
    r0: u64,
    /// Tail calls from subprograms run these ([`crate::tail_call`]).
    nested: Option<&'n NestedTailCalls<'n>>,
}

/// The interpreter engine for one program and its maps.
#[derive(Debug, Clone)]
pub struct Interpreter {
    program: Arc<Program>,
    maps: Arc<Maps>,
    /// The 64-bit value of each `lddw` with a pseudo source, indexed by slot (0 elsewhere).
    wide: Vec<u64>,
    config: RunConfig,
}

impl Interpreter {
    /// Prepares `program` to run against `maps` (which must be the maps the program was linked
    /// with: same definitions at the same indices). Resolves `lddw` map references: a pseudo
    /// map fd becomes the map's handle ([`crate::helpers::map_handle`]), a pseudo map value becomes the real
    /// address of the value of key 0 plus the offset.
    pub fn new(program: Arc<Program>, maps: Arc<Maps>) -> Result<Interpreter, RunError> {
        Interpreter::with_config(program, maps, RunConfig::default())
    }

    pub fn with_config(program: Arc<Program>, maps: Arc<Maps>, config: RunConfig) -> Result<Interpreter, RunError> {
        // Dense by slot: the run loop indexes it directly.
        let mut wide = vec![0u64; program.insns.len()];
        for (pc, v) in resolve_map_refs(&program, &maps)? {
            wide[pc] = v;
        }
        Ok(Interpreter { program, maps, wide, config })
    }

    pub fn program(&self) -> &Arc<Program> {
        &self.program
    }

    pub fn maps(&self) -> &Arc<Maps> {
        &self.maps
    }

    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    pub fn set_config(&mut self, config: RunConfig) {
        self.config = config;
    }

    /// Runs the program once (same as [`Engine::run`]). A tail call from a subprogram ends
    /// the run with an error: use [`Interpreter::run_with_tail_calls`] for programs that make
    /// tail calls.
    #[inline]
    pub fn run(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env) -> Result<RunOutcome, RunError> {
        self.run_inner(xdp, env, None)
    }

    /// Runs the program once; tail calls from subprograms run the programs of `targets`
    /// ([`crate::tail_call`]). A tail call from the entry function ends the run with
    /// [`RunErrorKind::TailCall`], as in [`Interpreter::run`].
    pub fn run_with_tail_calls(
        &self,
        xdp: &mut XdpBuff<'_>,
        env: &mut dyn Env,
        targets: &dyn TailCallTargets,
    ) -> Result<RunOutcome, RunError> {
        let nested = NestedTailCalls::new(targets);
        self.run_inner(xdp, env, Some(&mut RunExtras { r0: 0, nested: Some(&nested) }))
    }

    /// Runs the program as the target of a tail call a subprogram made in `run`, with a
    /// stack of its own: its r0 (see [`TailCallTargets::run_target`]).
    pub fn run_tail_call_target(&self, run: &mut RunInProgress<'_, '_>) -> Result<u64, RunError> {
        let st = run.state();
        if !std::ptr::eq(st.maps, &*self.maps) {
            return Err(RunError::new(
                0,
                RunErrorKind::MapMismatch("a tail call target must use the maps of the program calling it".into()),
            ));
        }
        self.exec(st)
    }

    /// Runs the program on every packet of a burst, one at a time (see [`crate::burst`]).
    pub fn run_burst<D: crate::burst::FrameDesc>(
        &self,
        region: &mut crate::burst::FrameRegion<'_>,
        pkts: &mut [D],
        ctx: crate::burst::BurstCtx,
        env: &mut dyn Env,
        out: &mut [RunOutcome],
    ) -> crate::burst::BurstFaults {
        crate::burst::run_burst_each(self, region, pkts, ctx, env, out)
    }

    /// Runs the program once and also returns the full 64-bit r0 (for tests and for
    /// differential testing of other engines).
    pub fn run_full(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env) -> Result<(RunOutcome, u64), RunError> {
        let mut extras = RunExtras { r0: 0, nested: None };
        let outcome = self.run_inner(xdp, env, Some(&mut extras))?;
        Ok((outcome, extras.r0))
    }

    /// One run; with `extras`, the full r0 goes there and tail calls from subprograms run its
    /// `nested` targets (one argument for both: a separate one lengthened every run's setup).
    /// `run` returns the outcome in the shape it is built in (going through `run_full`'s tuple
    /// made the caller reload it in another shape, which stalls on store forwarding). Not
    /// inlined into its callers, so that `exec` is inlined here once (with `RunState` in
    /// registers).
    #[inline(never)]
    fn run_inner(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env, extras: Option<&mut RunExtras<'_>>) -> Result<RunOutcome, RunError> {
        if xdp.frags.is_some() {
            return self.run_with_frags(xdp, env, extras);
        }
        let mut st = RunState::new(xdp, &self.maps, env, &self.config).map_err(|k| RunError::new(0, k))?;
        if let Some(e) = &extras {
            st.nested_tail_calls = e.nested;
        }
        let r0 = match self.exec(&mut st) {
            Ok(r0) => r0,
            Err(e) => {
                if let RunErrorKind::TailCall { .. } = e.kind {
                    st.finish_for_tail_call(xdp);
                }
                return Err(e);
            }
        };
        if let Some(e) = extras {
            e.r0 = r0;
            if e.nested.is_some() {
                xdp.tail_calls = st.tail_calls;
            }
        }
        Ok(st.finish(xdp, r0))
    }

    /// A multi-buffer packet: the helpers reach its fragments through the run's `Env`.
    #[cold]
    #[inline(never)]
    fn run_with_frags(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env, extras: Option<&mut RunExtras<'_>>) -> Result<RunOutcome, RunError> {
        crate::env::with_frags_of(xdp, env, |xdp, env| self.run_inner(xdp, env, extras))
    }

    // Inlined into `run_inner`, where the state stays in registers (out of line, the fixed
    // cost of a run grows by ~70 instructions), and into `run_tail_call_target`, a copy that
    // only runs programs tail-called from subprograms (`exec_atomic` is forced inline too:
    // with two callers it was not inlined into either).
    #[inline(always)]
    fn exec(&self, st: &mut RunState<'_>) -> Result<u64, RunError> {
        let mut stack = MaybeUninit::<[u64; STACK_SIZE / 8]>::uninit();
        let stack_base = stack.as_mut_ptr() as *mut u8;
        let insns: &[Insn] = &self.program.insns;
        let budget = self.config.insn_budget;
        let mut executed: u64 = 0;

        // Frame 0 occupies the top FRAME_STACK_SIZE bytes.
        let frame0 = stack_base.wrapping_add(STACK_SIZE - FRAME_STACK_SIZE);
        // SAFETY: [frame0, frame0 + 512) is inside the 4 KiB stack buffer.
        unsafe { std::ptr::write_bytes(frame0, 0, FRAME_STACK_SIZE) };
        let mut initialized = 1usize;
        st.set_stack(frame0, FRAME_STACK_SIZE);

        let mut regs = [0u64; 11];
        regs[1] = st.ctx_addr();
        regs[10] = stack_base as u64 + STACK_SIZE as u64;

        #[derive(Clone, Copy, Default)]
        struct Frame {
            ret: usize,
            saved: [u64; 5],
        }
        let mut frames = [Frame::default(); MAX_CALL_FRAMES];
        let mut depth = 0usize;

        let mut pc = 0usize;
        loop {
            let Some(&insn) = insns.get(pc) else {
                return Err(RunError::new(pc, RunErrorKind::PcOutOfRange));
            };
            executed += 1;
            if executed > budget {
                return Err(RunError::new(pc, RunErrorKind::BudgetExceeded { budget }));
            }
            let err = move |kind| RunError::new(pc, kind);
            let invalid = move || RunError::new(pc, RunErrorKind::InvalidInstruction { code: insn.code });
            let code = insn.code;
            let dst = insn.dst as usize;
            let src = insn.src as usize;
            if dst > 10 || src > 10 {
                return Err(invalid());
            }
            match code & 0x07 {
                BPF_ALU64 => {
                    if dst == 10 {
                        return Err(invalid());
                    }
                    let use_x = code & BPF_X != 0;
                    let s = if use_x { regs[src] } else { insn.imm as i64 as u64 };
                    let d = regs[dst];
                    let signed = match insn.off {
                        0 => false,
                        1 if matches!(code & 0xf0, BPF_DIV | BPF_MOD) => true,
                        8 | 16 | 32 if code & 0xf0 == BPF_MOV && use_x => false,
                        1 if code & 0xf0 == BPF_MOV && use_x => return Err(err(RunErrorKind::Unsupported("addr_space_cast (arena)"))),
                        _ => return Err(invalid()),
                    };
                    regs[dst] = match code & 0xf0 {
                        BPF_ADD => d.wrapping_add(s),
                        BPF_SUB => d.wrapping_sub(s),
                        BPF_MUL => d.wrapping_mul(s),
                        BPF_DIV => {
                            if s == 0 {
                                0
                            } else if signed {
                                (d as i64).wrapping_div(s as i64) as u64
                            } else {
                                d / s
                            }
                        }
                        BPF_MOD => {
                            if s == 0 {
                                d
                            } else if signed {
                                (d as i64).wrapping_rem(s as i64) as u64
                            } else {
                                d % s
                            }
                        }
                        BPF_OR => d | s,
                        BPF_AND => d & s,
                        BPF_XOR => d ^ s,
                        BPF_LSH => d << (s & 63),
                        BPF_RSH => d >> (s & 63),
                        BPF_ARSH => ((d as i64) >> (s & 63)) as u64,
                        BPF_NEG => (d as i64).wrapping_neg() as u64,
                        BPF_MOV => match insn.off {
                            8 => s as i8 as i64 as u64,
                            16 => s as i16 as i64 as u64,
                            32 => s as i32 as i64 as u64,
                            _ => s,
                        },
                        BPF_END => {
                            if use_x {
                                return Err(invalid());
                            }
                            match insn.imm {
                                16 => (d as u16).swap_bytes() as u64,
                                32 => (d as u32).swap_bytes() as u64,
                                64 => d.swap_bytes(),
                                _ => return Err(invalid()),
                            }
                        }
                        _ => return Err(invalid()),
                    };
                    pc += 1;
                }
                BPF_ALU => {
                    if dst == 10 {
                        return Err(invalid());
                    }
                    let use_x = code & BPF_X != 0;
                    let s = if use_x { regs[src] as u32 } else { insn.imm as u32 };
                    let d64 = regs[dst];
                    let d = d64 as u32;
                    let signed = match insn.off {
                        0 => false,
                        1 if matches!(code & 0xf0, BPF_DIV | BPF_MOD) => true,
                        8 | 16 if code & 0xf0 == BPF_MOV && use_x => false,
                        _ => return Err(invalid()),
                    };
                    let r: u64 = match code & 0xf0 {
                        BPF_ADD => d.wrapping_add(s) as u64,
                        BPF_SUB => d.wrapping_sub(s) as u64,
                        BPF_MUL => d.wrapping_mul(s) as u64,
                        BPF_DIV => {
                            (if s == 0 {
                                0
                            } else if signed {
                                (d as i32).wrapping_div(s as i32) as u32
                            } else {
                                d / s
                            }) as u64
                        }
                        BPF_MOD => {
                            (if s == 0 {
                                d
                            } else if signed {
                                (d as i32).wrapping_rem(s as i32) as u32
                            } else {
                                d % s
                            }) as u64
                        }
                        BPF_OR => (d | s) as u64,
                        BPF_AND => (d & s) as u64,
                        BPF_XOR => (d ^ s) as u64,
                        BPF_LSH => (d << (s & 31)) as u64,
                        BPF_RSH => (d >> (s & 31)) as u64,
                        BPF_ARSH => ((d as i32) >> (s & 31)) as u32 as u64,
                        BPF_NEG => (d as i32).wrapping_neg() as u32 as u64,
                        BPF_MOV => match insn.off {
                            8 => s as i8 as i32 as u32 as u64,
                            16 => s as i16 as i32 as u32 as u64,
                            _ => s as u64,
                        },
                        BPF_END => {
                            // BPF_TO_LE (src bit clear) on a little-endian host truncates;
                            // BPF_TO_BE swaps.
                            match (use_x, insn.imm) {
                                (false, 16) => d64 & 0xffff,
                                (false, 32) => d64 & 0xffff_ffff,
                                (false, 64) => d64,
                                (true, 16) => (d64 as u16).swap_bytes() as u64,
                                (true, 32) => (d64 as u32).swap_bytes() as u64,
                                (true, 64) => d64.swap_bytes(),
                                _ => return Err(invalid()),
                            }
                        }
                        _ => return Err(invalid()),
                    };
                    regs[dst] = r;
                    pc += 1;
                }
                class @ (BPF_JMP | BPF_JMP32) => {
                    let op = code & 0xf0;
                    let jump = move |off: i64| -> Result<usize, RunError> {
                        let t = pc as i64 + 1 + off;
                        if t < 0 || t as usize >= insns.len() {
                            Err(err(RunErrorKind::PcOutOfRange))
                        } else {
                            Ok(t as usize)
                        }
                    };
                    match op {
                        BPF_JA => {
                            if code & BPF_X != 0 {
                                return Err(invalid());
                            }
                            pc = if class == BPF_JMP { jump(insn.off as i64)? } else { jump(insn.imm as i64)? };
                        }
                        BPF_CALL => {
                            if class != BPF_JMP || code & BPF_X != 0 {
                                return Err(invalid());
                            }
                            match insn.src {
                                0 => {
                                    let Some(f) = helper_fn(insn.imm) else {
                                        return Err(err(RunErrorKind::UnknownHelper { id: insn.imm }));
                                    };
                                    regs[0] = f(st, regs[1], regs[2], regs[3], regs[4], regs[5]);
                                    if let Some(kind) = st.take_fault() {
                                        if depth == 0 {
                                            return Err(err(kind));
                                        }
                                        // A tail call from a subprogram: the target runs in
                                        // place of the rest of it and returns to its caller.
                                        regs[0] = tail_call_from_subprogram(st, kind).map_err(err)??;
                                        depth -= 1;
                                        let f = frames[depth];
                                        regs[6..11].copy_from_slice(&f.saved);
                                        pc = f.ret;
                                        continue;
                                    }
                                    pc += 1;
                                }
                                BPF_PSEUDO_CALL => {
                                    let target = jump(insn.imm as i64)?;
                                    if depth + 1 >= MAX_CALL_FRAMES {
                                        return Err(err(RunErrorKind::CallDepthExceeded { max: MAX_CALL_FRAMES }));
                                    }
                                    frames[depth] = Frame { ret: pc + 1, saved: [regs[6], regs[7], regs[8], regs[9], regs[10]] };
                                    depth += 1;
                                    if depth >= initialized {
                                        let lo = stack_base.wrapping_add(STACK_SIZE - (depth + 1) * FRAME_STACK_SIZE);
                                        // SAFETY: frame `depth` lies inside the 4 KiB stack buffer
                                        // (depth < MAX_CALL_FRAMES).
                                        unsafe { std::ptr::write_bytes(lo, 0, FRAME_STACK_SIZE) };
                                        initialized = depth + 1;
                                        st.set_stack(lo, initialized * FRAME_STACK_SIZE);
                                    }
                                    regs[10] = stack_base as u64 + (STACK_SIZE - depth * FRAME_STACK_SIZE) as u64;
                                    pc = target;
                                }
                                _ => return Err(err(RunErrorKind::Unsupported("kfunc call"))),
                            }
                        }
                        BPF_EXIT => {
                            if class != BPF_JMP || code & BPF_X != 0 {
                                return Err(invalid());
                            }
                            if depth == 0 {
                                return Ok(regs[0]);
                            }
                            depth -= 1;
                            let f = frames[depth];
                            regs[6..11].copy_from_slice(&f.saved);
                            pc = f.ret;
                        }
                        _ => {
                            let use_x = code & BPF_X != 0;
                            // JMP32 compares the low halves: as unsigned values zero-extended,
                            // as signed ones sign-extended, so one comparison serves both.
                            let (a, b) = (regs[dst], if use_x { regs[src] } else { insn.imm as i64 as u64 });
                            let (a, b, sa, sb) = if class == BPF_JMP {
                                (a, b, a as i64, b as i64)
                            } else {
                                (a as u32 as u64, b as u32 as u64, a as i32 as i64, b as i32 as i64)
                            };
                            let taken = match op {
                                BPF_JEQ => a == b,
                                BPF_JNE => a != b,
                                BPF_JGT => a > b,
                                BPF_JGE => a >= b,
                                BPF_JLT => a < b,
                                BPF_JLE => a <= b,
                                BPF_JSET => a & b != 0,
                                BPF_JSGT => sa > sb,
                                BPF_JSGE => sa >= sb,
                                BPF_JSLT => sa < sb,
                                BPF_JSLE => sa <= sb,
                                _ => return Err(invalid()),
                            };
                            pc = if taken { jump(insn.off as i64)? } else { pc + 1 };
                        }
                    }
                }
                BPF_LDX => {
                    if dst == 10 {
                        return Err(invalid());
                    }
                    let size = size_bytes(code);
                    let addr = regs[src].wrapping_add(insn.off as i64 as u64);
                    let v = match code & 0xe0 {
                        BPF_MEM => load(st, addr, size),
                        BPF_MEMSX if size < 8 => load(st, addr, size).map(|v| sign_extend(v, size)),
                        _ => return Err(invalid()),
                    };
                    regs[dst] = v.ok_or_else(|| err(fault(addr, size, false)))?;
                    pc += 1;
                }
                BPF_ST => {
                    if code & 0xe0 != BPF_MEM {
                        return Err(invalid());
                    }
                    let size = size_bytes(code);
                    let addr = regs[dst].wrapping_add(insn.off as i64 as u64);
                    store(st, addr, size, insn.imm as i64 as u64).ok_or_else(|| err(fault(addr, size, true)))?;
                    pc += 1;
                }
                BPF_STX => {
                    let size = size_bytes(code);
                    match code & 0xe0 {
                        BPF_MEM => {
                            let addr = regs[dst].wrapping_add(insn.off as i64 as u64);
                            store(st, addr, size, regs[src]).ok_or_else(|| err(fault(addr, size, true)))?;
                        }
                        BPF_ATOMIC => exec_atomic(st, insn, size, &mut regs, self.config.single_writer).map_err(err)?,
                        _ => return Err(invalid()),
                    }
                    pc += 1;
                }
                BPF_LD => {
                    if code != (BPF_LD | BPF_IMM | BPF_DW) || dst == 10 {
                        return Err(invalid());
                    }
                    let Some(next) = insns.get(pc + 1) else {
                        return Err(err(RunErrorKind::PcOutOfRange));
                    };
                    if next.code != 0 {
                        return Err(invalid());
                    }
                    regs[dst] = match insn.src {
                        0 => (insn.imm as u32 as u64) | ((next.imm as u32 as u64) << 32),
                        BPF_PSEUDO_MAP_FD | BPF_PSEUDO_MAP_VALUE => self.wide[pc],
                        _ => return Err(err(RunErrorKind::Unsupported("lddw pseudo source"))),
                    };
                    pc += 2;
                }
                _ => return Err(invalid()),
            }
        }
    }
}

impl Engine for Interpreter {
    fn run(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env) -> Result<RunOutcome, RunError> {
        Interpreter::run(self, xdp, env)
    }
}

/// After a helper called from a subprogram recorded `fault`: a successful tail call runs its
/// target ([`crate::tail_call`]), whose r0 (or error) the subprogram returns; any other fault
/// ends the run (the outer error, at the helper call).
#[cold]
#[inline(never)]
fn tail_call_from_subprogram(st: &mut RunState<'_>, fault: RunErrorKind) -> Result<Result<u64, RunError>, RunErrorKind> {
    let RunErrorKind::TailCall { target } = fault else { return Err(fault) };
    run_from_subprogram(st, target).ok_or(RunErrorKind::NoTailCallTargets { target })
}

#[inline]
fn size_bytes(code: u8) -> usize {
    match code & 0x18 {
        BPF_B => 1,
        BPF_H => 2,
        BPF_W => 4,
        _ => 8,
    }
}

#[inline]
fn sign_extend(v: u64, size: usize) -> u64 {
    match size {
        1 => v as u8 as i8 as i64 as u64,
        2 => v as u16 as i16 as i64 as u64,
        4 => v as u32 as i32 as i64 as u64,
        _ => v,
    }
}

fn fault(addr: u64, size: usize, write: bool) -> RunErrorKind {
    RunErrorKind::MemoryFault { addr, len: size as u32, write }
}

/// Loads `size` bytes (1, 2, 4, 8) little-endian from program memory; `None` if not allowed.
#[inline]
fn load(st: &RunState<'_>, addr: u64, size: usize) -> Option<u64> {
    let (p, kind) = st.translate(addr, size, false)?;
    Some(match kind {
        // SAFETY: translate checked that [p, p+size) lies in this run's stack or packet.
        MemKind::Stack | MemKind::Packet => unsafe { read_plain(p, size) },
        // SAFETY: translate checked that [p, p+size) lies in a map value region.
        MemKind::Map(_) => unsafe { read_relaxed(p, size) },
        MemKind::Ctx => {
            let off = usize::try_from(addr - st.ctx_addr()).ok()?;
            let b = st.ctx.to_bytes();
            let bytes = b.get(off..off + size)?;
            bytes.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64)
        }
    })
}

/// Stores the low `size` bytes of `v` into program memory; `None` if not allowed.
#[inline]
fn store(st: &RunState<'_>, addr: u64, size: usize, v: u64) -> Option<()> {
    let (p, kind) = st.translate(addr, size, true)?;
    match kind {
        // SAFETY: translate checked that [p, p+size) lies in this run's stack or packet.
        MemKind::Stack | MemKind::Packet => unsafe { write_plain(p, size, v) },
        // SAFETY: translate checked that [p, p+size) lies in a writable map value region.
        MemKind::Map(_) => unsafe { write_relaxed(p, size, v) },
        MemKind::Ctx => return None,
    }
    Some(())
}

/// # Safety
/// `p` must be valid for reads of `size` bytes not concurrently written.
#[inline]
unsafe fn read_plain(p: *const u8, size: usize) -> u64 {
    // SAFETY: per the contract.
    unsafe {
        match size {
            1 => *p as u64,
            2 => std::ptr::read_unaligned(p as *const u16) as u64,
            4 => std::ptr::read_unaligned(p as *const u32) as u64,
            _ => std::ptr::read_unaligned(p as *const u64),
        }
    }
}

/// # Safety
/// `p` must be valid for writes of `size` bytes not concurrently accessed.
#[inline]
unsafe fn write_plain(p: *mut u8, size: usize, v: u64) {
    // SAFETY: per the contract.
    unsafe {
        match size {
            1 => *p = v as u8,
            2 => std::ptr::write_unaligned(p as *mut u16, v as u16),
            4 => std::ptr::write_unaligned(p as *mut u32, v as u32),
            _ => std::ptr::write_unaligned(p as *mut u64, v),
        }
    }
}

/// Relaxed atomic load (byte-wise when misaligned) of memory other threads may access.
///
/// # Safety
/// `p` must be valid for reads of `size` bytes.
#[inline]
unsafe fn read_relaxed(p: *mut u8, size: usize) -> u64 {
    // SAFETY: per the contract; each typed atomic is used only when p is aligned for it.
    unsafe {
        if (p as usize).is_multiple_of(size) {
            match size {
                1 => AtomicU8::from_ptr(p).load(Ordering::Relaxed) as u64,
                2 => AtomicU16::from_ptr(p as *mut u16).load(Ordering::Relaxed) as u64,
                4 => AtomicU32::from_ptr(p as *mut u32).load(Ordering::Relaxed) as u64,
                _ => AtomicU64::from_ptr(p as *mut u64).load(Ordering::Relaxed),
            }
        } else {
            let mut v = 0u64;
            for i in 0..size {
                v |= (AtomicU8::from_ptr(p.add(i)).load(Ordering::Relaxed) as u64) << (8 * i);
            }
            v
        }
    }
}

/// Relaxed atomic store (byte-wise when misaligned) to memory other threads may access.
///
/// # Safety
/// `p` must be valid for writes of `size` bytes.
#[inline]
unsafe fn write_relaxed(p: *mut u8, size: usize, v: u64) {
    // SAFETY: per the contract; each typed atomic is used only when p is aligned for it.
    unsafe {
        if (p as usize).is_multiple_of(size) {
            match size {
                1 => AtomicU8::from_ptr(p).store(v as u8, Ordering::Relaxed),
                2 => AtomicU16::from_ptr(p as *mut u16).store(v as u16, Ordering::Relaxed),
                4 => AtomicU32::from_ptr(p as *mut u32).store(v as u32, Ordering::Relaxed),
                _ => AtomicU64::from_ptr(p as *mut u64).store(v, Ordering::Relaxed),
            }
        } else {
            for i in 0..size {
                AtomicU8::from_ptr(p.add(i)).store((v >> (8 * i)) as u8, Ordering::Relaxed);
            }
        }
    }
}

/// One BPF read-modify-write (add/or/and/xor, xchg, cmpxchg) on the `$T` at `$p` through
/// `$A`; the old value, zero-extended. With `$single` a plain load and store (single writer).
macro_rules! atomic_rmw {
    ($A:ty, $T:ty, $p:expr, $op:expr, $v:expr, $expected:expr, $single:expr) => {{
        const SC: Ordering = Ordering::SeqCst;
        // SAFETY: the caller checked that [p, p + size_of::<$T>()) is writable stack or map
        // memory valid for the run, aligned to its size, as the atomic type requires.
        let a = unsafe { <$A>::from_ptr($p as *mut $T) };
        let (v, expected) = ($v as $T, $expected as $T);
        let old = if $single {
            let old = a.load(Ordering::Relaxed);
            a.store(rmw_result($op, old as u64, v as u64, expected as u64) as $T, Ordering::Relaxed);
            old
        } else {
            match $op {
                BPF_XCHG => a.swap(v, SC),
                BPF_CMPXCHG => match a.compare_exchange(expected, v, SC, SC) {
                    Ok(o) | Err(o) => o,
                },
                _ => match $op & !BPF_FETCH {
                    0x00 => a.fetch_add(v, SC),
                    0x40 => a.fetch_or(v, SC),
                    0x50 => a.fetch_and(v, SC),
                    _ => a.fetch_xor(v, SC),
                },
            }
        };
        old as u64
    }};
}

/// The value an atomic read-modify-write `op` stores over `old` (src value `v`, r0 `expected`).
#[inline]
fn rmw_result(op: i32, old: u64, v: u64, expected: u64) -> u64 {
    match op {
        BPF_XCHG => v,
        BPF_CMPXCHG if old == expected => v,
        BPF_CMPXCHG => old,
        _ => match op & !BPF_FETCH {
            0x00 => old.wrapping_add(v),
            0x40 => old | v,
            0x50 => old & v,
            _ => old ^ v,
        },
    }
}

/// BPF_STX | BPF_ATOMIC: add/and/or/xor (optionally fetching), xchg, cmpxchg on 32/64-bit
/// aligned stack or map memory, plus load-acquire / store-release (any size). With
/// `single_writer` ([`RunConfig::single_writer`]) read-modify-writes are a load and a store.
// Inlined into both copies of `exec` (see there).
#[inline(always)]
fn exec_atomic(st: &RunState<'_>, insn: Insn, size: usize, regs: &mut [u64; 11], single_writer: bool) -> Result<(), RunErrorKind> {
    let dst = insn.dst as usize;
    let src = insn.src as usize;
    let invalid = RunErrorKind::InvalidInstruction { code: insn.code };
    let op = insn.imm;
    let (addr, write) = match op {
        BPF_LOAD_ACQ => (regs[src].wrapping_add(insn.off as i64 as u64), false),
        _ => (regs[dst].wrapping_add(insn.off as i64 as u64), true),
    };
    let writes_src = op & BPF_FETCH != 0 && op != BPF_CMPXCHG;
    if (op == BPF_LOAD_ACQ && dst == 10) || (writes_src && src == 10) {
        return Err(invalid);
    }
    if !matches!(op, BPF_LOAD_ACQ | BPF_STORE_REL) && size < 4 {
        return Err(invalid);
    }
    if !matches!(op, BPF_LOAD_ACQ | BPF_STORE_REL | BPF_XCHG | BPF_CMPXCHG) && !matches!(op & !BPF_FETCH, 0x00 | 0x40 | 0x50 | 0xa0) {
        return Err(invalid);
    }
    let Some((p, kind)) = st.translate(addr, size, write) else {
        return Err(fault(addr, size, write));
    };
    match kind {
        MemKind::Stack | MemKind::Map(_) => {}
        _ => return Err(RunErrorKind::AtomicNotAllowed { addr }),
    }
    if addr % size as u64 != 0 {
        return Err(RunErrorKind::MisalignedAtomic { addr });
    }
    match op {
        BPF_LOAD_ACQ => {
            // SAFETY: translate checked [p, p+size) is stack or map memory valid for the run,
            // and p is aligned to `size`, as the atomic types require.
            regs[dst] = unsafe {
                match size {
                    1 => AtomicU8::from_ptr(p).load(Ordering::Acquire) as u64,
                    2 => AtomicU16::from_ptr(p as *mut u16).load(Ordering::Acquire) as u64,
                    4 => AtomicU32::from_ptr(p as *mut u32).load(Ordering::Acquire) as u64,
                    _ => AtomicU64::from_ptr(p as *mut u64).load(Ordering::Acquire),
                }
            };
        }
        BPF_STORE_REL => {
            let v = regs[src];
            // SAFETY: as for BPF_LOAD_ACQ (writable: translate was asked for a write).
            unsafe {
                match size {
                    1 => AtomicU8::from_ptr(p).store(v as u8, Ordering::Release),
                    2 => AtomicU16::from_ptr(p as *mut u16).store(v as u16, Ordering::Release),
                    4 => AtomicU32::from_ptr(p as *mut u32).store(v as u32, Ordering::Release),
                    _ => AtomicU64::from_ptr(p as *mut u64).store(v, Ordering::Release),
                }
            }
        }
        _ => {
            let old = if size == 4 {
                atomic_rmw!(AtomicU32, u32, p, op, regs[src], regs[0], single_writer)
            } else {
                atomic_rmw!(AtomicU64, u64, p, op, regs[src], regs[0], single_writer)
            };
            if op == BPF_CMPXCHG {
                regs[0] = old;
            } else if writes_src {
                regs[src] = old;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "interp_tests.rs"]
mod tests;
