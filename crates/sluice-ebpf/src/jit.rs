//! A JIT compiler from eBPF to native code, built on Cranelift.
//!
//! [`Jit::compile`] translates a linked [`Program`] into one Cranelift function per bpf
//! sub-program (the entry at slot 0 plus every target of a `call` with `BPF_PSEUDO_CALL`) and
//! finalizes them into executable memory owned by the returned [`JitProgram`], which runs like
//! the [`Interpreter`](crate::interp::Interpreter) (same [`Engine`] trait, same [`RunState`]
//! setup, same helpers, same results).
//!
//! # Only verified programs
//!
//! The generated code does **not** check memory accesses: loads and stores go straight to the
//! address the program computes. It must only be used for programs the verifier accepted
//! (which proves every access stays in the stack, the context, the packet or a map value).
//! What the verifier cannot prove is handled at run time exactly as the interpreter does:
//! division by zero (`x / 0 = 0`, `x % 0 = x`), signed `INT_MIN / -1` (wraps), shift amounts
//! (masked to the operand width), helper argument faults (the run ends with
//! `RunErrorKind::HelperFault`).
//!
//! # Translation
//!
//! * Registers r0-r10 are Cranelift variables (SSA construction does the rest); ALU32 results
//!   are zero-extended, immediates are sign-extended (ALU64 / JMP) or taken as `u32`
//!   (ALU32 / JMP32), as in the interpreter.
//! * Every sub-program is a native function
//!   `fn(state, err_pc, r1, r2, r3, r4, r5, r10) -> r0` (System V). A bpf-to-bpf call is a
//!   direct native call passing r1-r5 and `r10 - 512` (a fresh 512-byte frame below the
//!   caller's); r6-r9 survive the call because they are the caller's own variables.
//! * The bpf stack is one 4 KiB buffer (8 frames × 512 bytes) on the native stack of
//!   [`JitProgram::run`], laid out like the interpreter's: frame 0 is the top 512 bytes, r10
//!   at entry is the end of the buffer. The frames the program's call graph can reach are
//!   zeroed per run and declared to the helpers with [`RunState::set_stack`].
//! * Helpers are the interpreter's `extern "C"` functions ([`helper_fn`]), called with the
//!   `RunState` pointer first; after each call the code checks `state.fault` and, if a helper
//!   refused its arguments, stores the instruction slot in `err_pc` and unwinds through all
//!   frames (every bpf-to-bpf call site checks `state.fault` too).
//! * `lddw` map references resolve to the same values as in the interpreter:
//!   [`map_handle`] for `BPF_PSEUDO_MAP_FD`, [`Map::direct_value_addr`](crate::maps::Map::direct_value_addr)
//!   for `BPF_PSEUDO_MAP_VALUE`.
//! * Atomics use Cranelift's `atomic_rmw` / `atomic_cas` / `atomic_load` / `atomic_store`
//!   (sequentially consistent).
//!
//! Anything the JIT cannot translate (invalid or unsupported instructions, an unknown helper,
//! a jump leaving its function, code that can fall off the end of a function, recursion or a
//! call chain deeper than 8 frames, Cranelift failures) makes [`Jit::compile`] return a
//! [`JitError`]; the caller then uses the interpreter.
//!
//! Differences from the interpreter that verified programs cannot observe: there is no
//! instruction budget (verified programs terminate); after a bpf-to-bpf call the caller's
//! r1-r5 keep their values (the interpreter leaves the callee's r1-r5 in place; the verifier
//! forbids reading them either way); helpers accept pointers into every frame the call graph
//! can reach from the start of the run (the interpreter only into frames entered so far;
//! verified programs only pass pointers into active frames).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, AtomicRmwOp, Block, FuncRef, InstBuilder, MemFlagsData, SigRef, Signature, Type, UserFuncName, Value,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};

use crate::env::Env;
use crate::helpers::{helper_fn, map_handle};
use crate::insn::*;
use crate::interp::{BPF_LOAD_ACQ, BPF_STORE_REL, FRAME_STACK_SIZE, MAX_CALL_FRAMES};
use crate::maps::Maps;
use crate::program::Program;
use crate::state::{Engine, RunConfig, RunError, RunErrorKind, RunState, OFF_FAULT};
use crate::xdp::{RunOutcome, XdpBuff};

const STACK_SIZE: usize = MAX_CALL_FRAMES * FRAME_STACK_SIZE;

/// Why a program could not be compiled (the caller falls back to the interpreter).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JitError {
    #[error("empty program")]
    Empty,
    #[error("insn {pc}: invalid instruction (opcode {code:#04x})")]
    InvalidInstruction { pc: usize, code: u8 },
    #[error("insn {pc}: not supported by the JIT: {what}")]
    Unsupported { pc: usize, what: &'static str },
    #[error("insn {pc}: jump or call target {target} is not an instruction of its function")]
    BadTarget { pc: usize, target: i64 },
    #[error("insn {pc}: execution can run past the end of its function")]
    FallsOffEnd { pc: usize },
    #[error("insn {pc}: unknown helper {id}")]
    UnknownHelper { pc: usize, id: i32 },
    #[error("recursive bpf-to-bpf calls (function at insn {pc})")]
    Recursion { pc: usize },
    #[error("bpf-to-bpf call chain needs more than {max} frames")]
    CallDepth { max: usize },
    #[error("maps: {0}")]
    Maps(RunError),
    #[error("code generation failed: {0}")]
    Codegen(String),
}

/// The JIT compiler (a namespace; every compilation gets its own code module).
#[derive(Debug, Clone, Copy, Default)]
pub struct Jit;

impl Jit {
    /// Compiles a **verified** program (see the module docs) for `maps`, which must be the
    /// maps it was linked with (same definitions at the same indices).
    pub fn compile(program: Arc<Program>, maps: Arc<Maps>) -> Result<JitProgram, JitError> {
        Jit::compile_with_config(program, maps, RunConfig::default())
    }

    /// [`Jit::compile`] with an engine configuration (`insn_budget` is ignored: verified
    /// programs terminate).
    pub fn compile_with_config(program: Arc<Program>, maps: Arc<Maps>, config: RunConfig) -> Result<JitProgram, JitError> {
        let wide = resolve_wide(&program, &maps).map_err(JitError::Maps)?;
        let layout = Layout::analyse(&program.insns)?;
        // Cranelift reports bad input as errors, but a panic in it (a bug) must not take the
        // host down: the caller falls back to the interpreter.
        let (module, entry) = catch_unwind(AssertUnwindSafe(|| codegen(&program.insns, &wide, &layout)))
            .map_err(|p| JitError::Codegen(panic_message(p)))??;
        Ok(JitProgram { program, maps, config, entry, frames: layout.frames, module: Mutex::new(Some(module)) })
    }
}

/// The native entry point: `(state, err_pc, r1, r2, r3, r4, r5, r10) -> r0`.
type EntryFn = unsafe extern "C" fn(*mut c_void, *mut u64, u64, u64, u64, u64, u64, u64) -> u64;

/// A compiled program, ready to run. Owns its code memory (freed on drop).
pub struct JitProgram {
    program: Arc<Program>,
    maps: Arc<Maps>,
    config: RunConfig,
    entry: EntryFn,
    /// Stack frames the call graph can reach (1 + deepest call chain).
    frames: usize,
    /// The code module, only kept to keep `entry` valid and to free the memory on drop.
    /// (`JITModule` is `Send` but not `Sync`; the mutex is never locked.)
    module: Mutex<Option<JITModule>>,
}

impl std::fmt::Debug for JitProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JitProgram")
            .field("program", &self.program.name)
            .field("insns", &self.program.insns.len())
            .field("frames", &self.frames)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl JitProgram {
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

    /// Runs the program once (same as [`Engine::run`]).
    pub fn run(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env) -> Result<RunOutcome, RunError> {
        self.exec(xdp, env).map(|(outcome, _)| outcome)
    }

    /// Runs the program once and also returns the full 64-bit r0 (differential testing).
    pub fn run_full(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env) -> Result<(RunOutcome, u64), RunError> {
        self.exec(xdp, env)
    }

    // Inlined into `run` and `run_full`, so `run` does not pass the outcome through memory
    // in a different shape (an 8-byte reload of two 4-byte stores stalls store forwarding).
    #[inline(always)]
    fn exec(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env) -> Result<(RunOutcome, u64), RunError> {
        let mut st = RunState::new(xdp, &self.maps, env, &self.config).map_err(|k| RunError::new(0, k))?;
        let mut stack = MaybeUninit::<[u64; STACK_SIZE / 8]>::uninit();
        let base = stack.as_mut_ptr() as *mut u8;
        let used = self.frames * FRAME_STACK_SIZE;
        let lo = base.wrapping_add(STACK_SIZE - used);
        // SAFETY: frames <= MAX_CALL_FRAMES, so [lo, lo + used) is the top of the 4 KiB buffer.
        unsafe { std::ptr::write_bytes(lo, 0, used) };
        st.set_stack(lo, used);
        let r1 = st.ctx_addr();
        let r10 = base as u64 + STACK_SIZE as u64;
        let mut err_pc = 0u64;
        let state: *mut RunState<'_> = &mut st;
        // SAFETY: `entry` is finalized code owned by `self.module`, alive as long as `self`,
        // generated for this program's (verified) instructions: it only touches `st`,
        // `err_pc`, the stack frames zeroed above, the packet and context described by `st`,
        // and map values, and calls helpers with `st` exactly as the interpreter does.
        let r0 = unsafe { (self.entry)(state.cast(), &mut err_pc, r1, 0, 0, 0, 0, r10) };
        if let Some(kind) = st.take_fault() {
            return Err(RunError::new(err_pc as usize, kind));
        }
        Ok((st.finish(xdp, r0), r0))
    }
}

impl Engine for JitProgram {
    fn run(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env) -> Result<RunOutcome, RunError> {
        JitProgram::run(self, xdp, env)
    }
}

impl Drop for JitProgram {
    fn drop(&mut self) {
        let slot = self.module.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(module) = slot.take() {
            // SAFETY: `&mut self` means no run is executing this code, and `entry` (the only
            // pointer into it) is dropped together with `self`.
            unsafe { module.free_memory() };
        }
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}

/// The 64-bit value of every `lddw` with a map source, by slot (as the interpreter resolves
/// them), after checking that `maps` matches the program's map definitions.
fn resolve_wide(program: &Program, maps: &Maps) -> Result<BTreeMap<usize, u64>, RunError> {
    for (i, def) in program.maps.iter().enumerate() {
        match maps.get(i) {
            Some(m) if m.def() == def => {}
            Some(m) => {
                return Err(RunError::new(
                    0,
                    RunErrorKind::MapMismatch(format!("map {i} is `{}` in the maps but `{}` in the program", m.name(), def.name)),
                ))
            }
            None => return Err(RunError::new(0, RunErrorKind::MapMismatch(format!("map {i} (`{}`) is missing", def.name)))),
        }
    }
    let insns = &program.insns;
    let mut wide = BTreeMap::new();
    for pc in 0..insns.len() {
        let insn = insns[pc];
        if insn.code != (BPF_LD | BPF_IMM | BPF_DW) || pc + 1 >= insns.len() {
            continue;
        }
        let index = insn.imm as u32;
        match insn.src {
            BPF_PSEUDO_MAP_FD => {
                if maps.get(index as usize).is_none() {
                    return Err(RunError::new(pc, RunErrorKind::BadMapIndex { index }));
                }
                wide.insert(pc, map_handle(index));
            }
            BPF_PSEUDO_MAP_VALUE => {
                let offset = insns[pc + 1].imm as u32;
                let addr = maps
                    .get(index as usize)
                    .ok_or(RunError::new(pc, RunErrorKind::BadMapIndex { index }))?
                    .direct_value_addr(offset)
                    .ok_or(RunError::new(pc, RunErrorKind::BadMapValue { index, offset }))?;
                wide.insert(pc, addr);
            }
            _ => {}
        }
    }
    Ok(wide)
}

/// Static structure of a program: instruction boundaries, functions, call depth.
struct Layout {
    /// `true` for the second slot of an `lddw`.
    tail: Vec<bool>,
    /// Function start slots, ascending (the first is 0). Function `i` spans
    /// `starts[i]..starts[i + 1]` (the last one up to the end).
    starts: Vec<usize>,
    /// Frames the deepest call chain from the entry uses (1 without calls).
    frames: usize,
}

impl Layout {
    fn analyse(insns: &[Insn]) -> Result<Layout, JitError> {
        let n = insns.len();
        if n == 0 {
            return Err(JitError::Empty);
        }
        let mut tail = vec![false; n];
        let mut pc = 0;
        while pc < n {
            if insns[pc].code == (BPF_LD | BPF_IMM | BPF_DW) {
                if pc + 1 >= n {
                    return Err(JitError::FallsOffEnd { pc });
                }
                tail[pc + 1] = true;
                pc += 2;
            } else {
                pc += 1;
            }
        }
        let is_insn = |t: i64| t >= 0 && (t as usize) < n && !tail[t as usize];
        let mut starts = vec![0usize];
        let mut calls = Vec::new(); // (call slot, target)
        for (pc, insn) in insns.iter().enumerate() {
            if !tail[pc] && insn.code == (BPF_JMP | BPF_CALL) && insn.src == BPF_PSEUDO_CALL {
                let target = pc as i64 + 1 + insn.imm as i64;
                if !is_insn(target) {
                    return Err(JitError::BadTarget { pc, target });
                }
                starts.push(target as usize);
                calls.push((pc, target as usize));
            }
        }
        starts.sort_unstable();
        starts.dedup();
        let func_of = |pc: usize| starts.partition_point(|&s| s <= pc) - 1;
        let nf = starts.len();
        let mut callees = vec![Vec::new(); nf];
        for &(pc, target) in &calls {
            let callee = func_of(target);
            callees[func_of(pc)].push(callee);
        }
        // Frames used from each function down, rejecting cycles: iterative DFS from the
        // entry, then from functions it never calls (compiled too, so checked too).
        const NEW: u8 = 0;
        const ACTIVE: u8 = 1;
        const DONE: u8 = 2;
        let mut state = vec![NEW; nf];
        let mut depth = vec![0usize; nf];
        let mut work: Vec<(usize, usize)> = Vec::new(); // (function, next callee index)
        for root in std::iter::once(0).chain(0..nf) {
            if state[root] != NEW {
                continue;
            }
            state[root] = ACTIVE;
            work.push((root, 0));
            while let Some(&mut (f, ref mut next)) = work.last_mut() {
                if let Some(&c) = callees[f].get(*next) {
                    *next += 1;
                    match state[c] {
                        NEW => {
                            state[c] = ACTIVE;
                            work.push((c, 0));
                        }
                        ACTIVE => return Err(JitError::Recursion { pc: starts[c] }),
                        _ => {}
                    }
                } else {
                    depth[f] = 1 + callees[f].iter().map(|&c| depth[c]).max().unwrap_or(0);
                    state[f] = DONE;
                    work.pop();
                }
            }
        }
        if depth.iter().any(|&d| d > MAX_CALL_FRAMES) {
            return Err(JitError::CallDepth { max: MAX_CALL_FRAMES });
        }
        Ok(Layout { tail, frames: depth[0], starts })
    }

    fn end_of(&self, f: usize) -> usize {
        self.starts.get(f + 1).copied().unwrap_or(self.tail.len())
    }
}

fn bpf_signature(call_conv: cranelift_codegen::isa::CallConv) -> Signature {
    let mut sig = Signature::new(call_conv);
    // state, err_pc, r1..r5, r10
    for _ in 0..8 {
        sig.params.push(AbiParam::new(types::I64));
    }
    sig.returns.push(AbiParam::new(types::I64));
    sig
}

fn helper_signature(call_conv: cranelift_codegen::isa::CallConv) -> Signature {
    let mut sig = Signature::new(call_conv);
    // state, r1..r5
    for _ in 0..6 {
        sig.params.push(AbiParam::new(types::I64));
    }
    sig.returns.push(AbiParam::new(types::I64));
    sig
}

fn codegen_err<E: std::fmt::Display>(e: E) -> JitError {
    JitError::Codegen(e.to_string())
}

fn codegen(insns: &[Insn], wide: &BTreeMap<usize, u64>, layout: &Layout) -> Result<(JITModule, EntryFn), JitError> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(codegen_err)?;
    flags.set("use_colocated_libcalls", "false").map_err(codegen_err)?;
    flags.set("is_pic", "false").map_err(codegen_err)?;
    flags.set("enable_probestack", "false").map_err(codegen_err)?;
    let isa = cranelift_native::builder().map_err(codegen_err)?.finish(settings::Flags::new(flags)).map_err(codegen_err)?;
    let call_conv = isa.default_call_conv();
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    match define_all(&mut module, call_conv, insns, wide, layout) {
        Ok(entry) => Ok((module, entry)),
        Err(e) => {
            // SAFETY: nothing compiled in this module was handed out or run.
            unsafe { module.free_memory() };
            Err(e)
        }
    }
}

/// Declares, translates and defines every function, finalizes the module and returns the
/// entry point.
fn define_all(
    module: &mut JITModule,
    call_conv: cranelift_codegen::isa::CallConv,
    insns: &[Insn],
    wide: &BTreeMap<usize, u64>,
    layout: &Layout,
) -> Result<EntryFn, JitError> {
    let sig = bpf_signature(call_conv);
    let mut ids = Vec::with_capacity(layout.starts.len());
    for &start in &layout.starts {
        let id = module.declare_function(&format!("bpf_{start}"), Linkage::Local, &sig).map_err(codegen_err)?;
        ids.push(id);
    }

    let mut ctx = module.make_context();
    let mut fctx = FunctionBuilderContext::new();
    for (f, &id) in ids.iter().enumerate() {
        ctx.func.signature = sig.clone();
        ctx.func.name = UserFuncName::user(0, f as u32);
        {
            let mut refs = BTreeMap::new();
            for (g, &gid) in ids.iter().enumerate() {
                refs.insert(layout.starts[g], module.declare_func_in_func(gid, &mut ctx.func));
            }
            let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let t = Translator {
                b,
                insns,
                wide,
                layout,
                lo: layout.starts[f],
                hi: layout.end_of(f),
                regs: [Variable::from_u32(0); 11],
                state: Variable::from_u32(0),
                err_pc: Variable::from_u32(0),
                blocks: BTreeMap::new(),
                reached: vec![false; layout.end_of(f) - layout.starts[f]],
                funcs: refs,
                helper_sig: None,
                call_conv,
                frontend: module.target_config(),
            };
            t.translate()?;
        }
        module.define_function(id, &mut ctx).map_err(|e| JitError::Codegen(format!("function at insn {}: {e:?}", layout.starts[f])))?;
        module.clear_context(&mut ctx);
    }
    module.finalize_definitions().map_err(codegen_err)?;
    let code = module.get_finalized_function(ids[0]);
    // SAFETY: `code` is the finalized entry function, compiled with `bpf_signature` under the
    // ISA's default (System V on x86-64) calling convention, which is what `extern "C"`
    // means for `EntryFn`: 8 integer arguments, one integer result.
    let entry = unsafe { std::mem::transmute::<*const u8, EntryFn>(code) };
    Ok(entry)
}

fn flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

struct Translator<'a, 'f> {
    b: FunctionBuilder<'f>,
    insns: &'a [Insn],
    wide: &'a BTreeMap<usize, u64>,
    layout: &'a Layout,
    lo: usize,
    hi: usize,
    regs: [Variable; 11],
    state: Variable,
    err_pc: Variable,
    /// Cranelift block of every reachable basic-block leader slot.
    blocks: BTreeMap<usize, Block>,
    /// Slots reachable from the function start (index `pc - lo`).
    reached: Vec<bool>,
    /// Native function of every sub-program start slot.
    funcs: BTreeMap<usize, FuncRef>,
    helper_sig: Option<SigRef>,
    call_conv: cranelift_codegen::isa::CallConv,
    frontend: cranelift_codegen::isa::TargetFrontendConfig,
}

impl Translator<'_, '_> {
    fn invalid(&self, pc: usize) -> JitError {
        JitError::InvalidInstruction { pc, code: self.insns[pc].code }
    }

    /// A jump from `pc` with relative offset `off`: the leader slot it lands on.
    fn target(&self, pc: usize, off: i64) -> Result<usize, JitError> {
        let t = pc as i64 + 1 + off;
        if t < self.lo as i64 || t >= self.hi as i64 || self.layout.tail[t as usize] {
            return Err(JitError::BadTarget { pc, target: t });
        }
        Ok(t as usize)
    }

    /// Finds the slots reachable from the function start and creates a block for every
    /// reachable basic-block leader (the start, jump targets, slots after conditional jumps).
    /// Unreachable code is never translated (it never runs, in either engine).
    fn find_blocks(&mut self) -> Result<(), JitError> {
        let (lo, hi) = (self.lo, self.hi);
        let mut reached = std::mem::take(&mut self.reached);
        let mut leaders = vec![lo];
        let mut work = vec![lo];
        reached[0] = true;
        let visit = |t: usize, reached: &mut Vec<bool>, work: &mut Vec<usize>| {
            if t < hi && !reached[t - lo] {
                reached[t - lo] = true;
                work.push(t);
            }
        };
        while let Some(pc) = work.pop() {
            let insn = self.insns[pc];
            let class = insn.class();
            let next = if insn.code == (BPF_LD | BPF_IMM | BPF_DW) { pc + 2 } else { pc + 1 };
            if class == BPF_JMP || class == BPF_JMP32 {
                match insn.code & 0xf0 {
                    BPF_CALL => visit(next, &mut reached, &mut work),
                    BPF_EXIT => {}
                    BPF_JA => {
                        let off = if class == BPF_JMP { insn.off as i64 } else { insn.imm as i64 };
                        let t = self.target(pc, off)?;
                        leaders.push(t);
                        visit(t, &mut reached, &mut work);
                    }
                    _ => {
                        let t = self.target(pc, insn.off as i64)?;
                        leaders.push(t);
                        leaders.push(next);
                        visit(t, &mut reached, &mut work);
                        visit(next, &mut reached, &mut work);
                    }
                }
            } else {
                visit(next, &mut reached, &mut work);
            }
        }
        self.reached = reached;
        for l in leaders {
            if l < self.hi && !self.blocks.contains_key(&l) {
                let blk = self.b.create_block();
                self.blocks.insert(l, blk);
            }
        }
        Ok(())
    }

    fn block_at(&self, pc: usize) -> Result<Block, JitError> {
        self.blocks.get(&pc).copied().ok_or(JitError::FallsOffEnd { pc: pc.saturating_sub(1) })
    }

    fn translate(mut self) -> Result<(), JitError> {
        // Variables: r0..r10, state, err_pc.
        for i in 0..11 {
            self.regs[i] = self.b.declare_var(types::I64);
        }
        self.state = self.b.declare_var(types::I64);
        self.err_pc = self.b.declare_var(types::I64);
        self.find_blocks()?;

        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let params = self.b.block_params(entry).to_vec();
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.def_var(self.state, params[0]);
        self.b.def_var(self.err_pc, params[1]);
        self.b.def_var(self.regs[0], zero);
        for r in 1..=5 {
            self.b.def_var(self.regs[r], params[r + 1]);
        }
        for r in 6..=9 {
            self.b.def_var(self.regs[r], zero);
        }
        self.b.def_var(self.regs[10], params[7]);
        let first = self.block_at(self.lo)?;
        self.b.ins().jump(first, &[]);

        // `open`: the current block can still fall through to the next slot.
        let mut open = false;
        let mut pc = self.lo;
        while pc < self.hi {
            if !self.reached[pc - self.lo] {
                pc += 1;
                continue;
            }
            if let Some(&blk) = self.blocks.get(&pc) {
                if open {
                    self.b.ins().jump(blk, &[]);
                }
                self.b.switch_to_block(blk);
            } else if !open {
                // Reached only by falling through a terminator: cannot happen.
                return Err(JitError::Codegen(format!("insn {pc}: no block")));
            }
            let insn = self.insns[pc];
            let wide = insn.code == (BPF_LD | BPF_IMM | BPF_DW);
            open = self.insn(pc)?;
            pc += if wide { 2 } else { 1 };
        }
        if open {
            return Err(JitError::FallsOffEnd { pc: self.hi - 1 });
        }
        self.b.seal_all_blocks();
        self.b.finalize(self.frontend);
        Ok(())
    }

    fn reg(&mut self, r: u8) -> Value {
        self.b.use_var(self.regs[r as usize])
    }

    fn set(&mut self, r: u8, v: Value) {
        self.b.def_var(self.regs[r as usize], v);
    }

    fn iconst(&mut self, ty: Type, v: i64) -> Value {
        // Narrow constants are given zero-extended, as Cranelift expects.
        let v = match ty.bits() {
            8 => v as u8 as i64,
            16 => v as u16 as i64,
            32 => v as u32 as i64,
            _ => v,
        };
        self.b.ins().iconst(ty, v)
    }

    /// Translates the instruction at `pc`; returns whether execution can continue to the
    /// next slot.
    fn insn(&mut self, pc: usize) -> Result<bool, JitError> {
        let insn = self.insns[pc];
        if insn.dst > 10 || insn.src > 10 {
            return Err(self.invalid(pc));
        }
        match insn.class() {
            BPF_ALU64 => self.alu(pc, true)?,
            BPF_ALU => self.alu(pc, false)?,
            BPF_JMP | BPF_JMP32 => return self.jmp(pc),
            BPF_LDX => self.ldx(pc)?,
            BPF_ST => self.st(pc)?,
            BPF_STX => self.stx(pc)?,
            BPF_LD => self.lddw(pc)?,
            _ => return Err(self.invalid(pc)),
        }
        Ok(true)
    }

    fn alu(&mut self, pc: usize, is64: bool) -> Result<(), JitError> {
        let insn = self.insns[pc];
        let code = insn.code;
        let op = code & 0xf0;
        let use_x = code & BPF_X != 0;
        if insn.dst == 10 {
            return Err(self.invalid(pc));
        }
        let signed = match insn.off {
            0 => false,
            1 if matches!(op, BPF_DIV | BPF_MOD) => true,
            8 | 16 if op == BPF_MOV && use_x => false,
            32 if is64 && op == BPF_MOV && use_x => false,
            1 if is64 && op == BPF_MOV && use_x => return Err(JitError::Unsupported { pc, what: "addr_space_cast (arena)" }),
            _ => return Err(self.invalid(pc)),
        };
        let ty = if is64 { types::I64 } else { types::I32 };
        let width = if is64 { 64 } else { 32 };
        // Immediate operand: sign-extended for ALU64, u32 for ALU32.
        let imm = if is64 { insn.imm as i64 } else { insn.imm as u32 as i64 };
        let d64 = self.reg(insn.dst);

        // Operations that look at the full 64-bit register or need no source operand.
        match op {
            BPF_END => {
                let v = match (is64, use_x, insn.imm) {
                    // ALU64 BPF_END: unconditional byte swap.
                    (true, true, _) => return Err(self.invalid(pc)),
                    (true, false, 16) | (false, true, 16) => self.bswap(d64, types::I16),
                    (true, false, 32) | (false, true, 32) => self.bswap(d64, types::I32),
                    (true, false, 64) | (false, true, 64) => self.b.ins().bswap(d64),
                    // BPF_TO_LE on a little-endian host: truncate.
                    (false, false, 16) => self.b.ins().band_imm_u(d64, 0xffff),
                    (false, false, 32) => self.b.ins().band_imm_u(d64, 0xffff_ffff),
                    (false, false, 64) => d64,
                    _ => return Err(self.invalid(pc)),
                };
                self.set(insn.dst, v);
                return Ok(());
            }
            BPF_MOV => {
                let v = if !use_x {
                    self.iconst(types::I64, imm)
                } else {
                    let s = self.reg(insn.src);
                    match (is64, insn.off) {
                        (true, 0) => s,
                        (true, bits) => {
                            let nt = Type::int(bits as u16).ok_or(self.invalid(pc))?;
                            let n = self.b.ins().ireduce(nt, s);
                            self.b.ins().sextend(types::I64, n)
                        }
                        (false, 0) => {
                            let n = self.b.ins().ireduce(types::I32, s);
                            self.b.ins().uextend(types::I64, n)
                        }
                        (false, bits) => {
                            let nt = Type::int(bits as u16).ok_or(self.invalid(pc))?;
                            let n = self.b.ins().ireduce(nt, s);
                            let w = self.b.ins().sextend(types::I32, n);
                            self.b.ins().uextend(types::I64, w)
                        }
                    }
                };
                self.set(insn.dst, v);
                return Ok(());
            }
            _ => {}
        }

        let d = if is64 { d64 } else { self.b.ins().ireduce(types::I32, d64) };
        // The source: a value, plus the constant when it is an immediate.
        let (s, k) = if use_x {
            let s64 = self.reg(insn.src);
            let s = if is64 { s64 } else { self.b.ins().ireduce(types::I32, s64) };
            (s, None)
        } else {
            (self.iconst(ty, imm), Some(imm))
        };
        let mask = (width - 1) as i64;
        let r = match op {
            BPF_ADD => self.b.ins().iadd(d, s),
            BPF_SUB => self.b.ins().isub(d, s),
            BPF_MUL => self.b.ins().imul(d, s),
            BPF_OR => self.b.ins().bor(d, s),
            BPF_AND => self.b.ins().band(d, s),
            BPF_XOR => self.b.ins().bxor(d, s),
            BPF_LSH | BPF_RSH | BPF_ARSH => {
                let amt = match k {
                    Some(k) => self.iconst(ty, k & mask),
                    None => self.b.ins().band_imm_u(s, mask),
                };
                match op {
                    BPF_LSH => self.b.ins().ishl(d, amt),
                    BPF_RSH => self.b.ins().ushr(d, amt),
                    _ => self.b.ins().sshr(d, amt),
                }
            }
            BPF_NEG => self.b.ins().ineg(d),
            BPF_DIV | BPF_MOD => self.divmod(ty, op == BPF_DIV, signed, d, s, k),
            _ => return Err(self.invalid(pc)),
        };
        let r = if is64 { r } else { self.b.ins().uextend(types::I64, r) };
        self.set(insn.dst, r);
        Ok(())
    }

    /// Byte-swaps the low `nt` bits of `v`, zero-extended to 64 bits.
    fn bswap(&mut self, v: Value, nt: Type) -> Value {
        let n = self.b.ins().ireduce(nt, v);
        let s = self.b.ins().bswap(n);
        self.b.ins().uextend(types::I64, s)
    }

    /// BPF division / modulo of `ty` values: `x / 0 = 0`, `x % 0 = x`; signed `MIN / -1`
    /// wraps to `MIN` and `MIN % -1 = 0` (none of them traps). `k` is the constant divisor
    /// when the source is an immediate.
    fn divmod(&mut self, ty: Type, div: bool, signed: bool, d: Value, s: Value, k: Option<i64>) -> Value {
        // The divisor as a signed value of the operand width.
        let ks = k.map(|k| if ty == types::I32 { k as u32 as i32 as i64 } else { k });
        match ks {
            Some(0) => {
                if div {
                    self.iconst(ty, 0)
                } else {
                    d
                }
            }
            Some(-1) if signed => {
                if div {
                    self.b.ins().ineg(d)
                } else {
                    self.iconst(ty, 0)
                }
            }
            Some(_) => match (div, signed) {
                (true, false) => self.b.ins().udiv(d, s),
                (false, false) => self.b.ins().urem(d, s),
                (true, true) => self.b.ins().sdiv(d, s),
                (false, true) => self.b.ins().srem(d, s),
            },
            None => {
                let one = self.iconst(ty, 1);
                let zero = self.iconst(ty, 0);
                let is_zero = self.b.ins().icmp_imm_u(IntCC::Equal, s, 0);
                if !signed {
                    let safe = self.b.ins().select(is_zero, one, s);
                    if div {
                        let q = self.b.ins().udiv(d, safe);
                        self.b.ins().select(is_zero, zero, q)
                    } else {
                        let r = self.b.ins().urem(d, safe);
                        self.b.ins().select(is_zero, d, r)
                    }
                } else {
                    let minus_one = self.iconst(ty, -1);
                    let is_m1 = self.b.ins().icmp(IntCC::Equal, s, minus_one);
                    let special = self.b.ins().bor(is_zero, is_m1);
                    let safe = self.b.ins().select(special, one, s);
                    if div {
                        let q = self.b.ins().sdiv(d, safe);
                        let neg = self.b.ins().ineg(d);
                        let q = self.b.ins().select(is_m1, neg, q);
                        self.b.ins().select(is_zero, zero, q)
                    } else {
                        let r = self.b.ins().srem(d, safe);
                        let r = self.b.ins().select(is_m1, zero, r);
                        self.b.ins().select(is_zero, d, r)
                    }
                }
            }
        }
    }

    /// Jumps, calls and exit; returns whether execution can continue to the next slot.
    fn jmp(&mut self, pc: usize) -> Result<bool, JitError> {
        let insn = self.insns[pc];
        let code = insn.code;
        let class = insn.class();
        let op = code & 0xf0;
        let use_x = code & BPF_X != 0;
        match op {
            BPF_JA => {
                if use_x {
                    return Err(self.invalid(pc));
                }
                let off = if class == BPF_JMP { insn.off as i64 } else { insn.imm as i64 };
                let t = self.target(pc, off)?;
                let blk = self.block_at(t)?;
                self.b.ins().jump(blk, &[]);
                Ok(false)
            }
            BPF_CALL => {
                if class != BPF_JMP || use_x {
                    return Err(self.invalid(pc));
                }
                match insn.src {
                    0 => self.call_helper(pc)?,
                    BPF_PSEUDO_CALL => self.call_local(pc)?,
                    _ => return Err(JitError::Unsupported { pc, what: "kfunc call" }),
                }
                Ok(true)
            }
            BPF_EXIT => {
                if class != BPF_JMP || use_x {
                    return Err(self.invalid(pc));
                }
                let r0 = self.reg(0);
                self.b.ins().return_(&[r0]);
                Ok(false)
            }
            _ => {
                let is64 = class == BPF_JMP;
                let cc = match op {
                    BPF_JEQ => IntCC::Equal,
                    BPF_JNE => IntCC::NotEqual,
                    BPF_JGT => IntCC::UnsignedGreaterThan,
                    BPF_JGE => IntCC::UnsignedGreaterThanOrEqual,
                    BPF_JLT => IntCC::UnsignedLessThan,
                    BPF_JLE => IntCC::UnsignedLessThanOrEqual,
                    BPF_JSGT => IntCC::SignedGreaterThan,
                    BPF_JSGE => IntCC::SignedGreaterThanOrEqual,
                    BPF_JSLT => IntCC::SignedLessThan,
                    BPF_JSLE => IntCC::SignedLessThanOrEqual,
                    BPF_JSET => IntCC::NotEqual, // (a & b) != 0
                    _ => return Err(self.invalid(pc)),
                };
                let t = self.target(pc, insn.off as i64)?;
                let taken = self.block_at(t)?;
                let next = self.block_at(pc + 1)?;
                let (ty, imm) = if is64 { (types::I64, insn.imm as i64) } else { (types::I32, insn.imm as u32 as i64) };
                let a64 = self.reg(insn.dst);
                let a = if is64 { a64 } else { self.b.ins().ireduce(types::I32, a64) };
                let bv = if use_x {
                    let b64 = self.reg(insn.src);
                    if is64 {
                        b64
                    } else {
                        self.b.ins().ireduce(types::I32, b64)
                    }
                } else {
                    self.iconst(ty, imm)
                };
                let cond = if op == BPF_JSET {
                    let m = self.b.ins().band(a, bv);
                    self.b.ins().icmp_imm_u(IntCC::NotEqual, m, 0)
                } else {
                    self.b.ins().icmp(cc, a, bv)
                };
                self.b.ins().brif(cond, taken, &[], next, &[]);
                Ok(false)
            }
        }
    }

    /// After a helper or a bpf-to-bpf call: if a helper recorded a fault, leave the function
    /// (storing `pc` in `err_pc` when `store_pc`, i.e. at the helper call itself).
    fn check_fault(&mut self, pc: usize, store_pc: bool) {
        let st = self.b.use_var(self.state);
        let fault = self.b.ins().load(types::I32, flags(), st, OFF_FAULT as i32);
        let bail = self.b.create_block();
        let cont = self.b.create_block();
        self.b.set_cold_block(bail);
        self.b.ins().brif(fault, bail, &[], cont, &[]);
        self.b.switch_to_block(bail);
        if store_pc {
            let errp = self.b.use_var(self.err_pc);
            let pcv = self.iconst(types::I64, pc as i64);
            self.b.ins().store(flags(), pcv, errp, 0);
        }
        let zero = self.iconst(types::I64, 0);
        self.b.ins().return_(&[zero]);
        self.b.switch_to_block(cont);
    }

    fn call_helper(&mut self, pc: usize) -> Result<(), JitError> {
        let id = self.insns[pc].imm;
        let f = helper_fn(id).ok_or(JitError::UnknownHelper { pc, id })?;
        let sig = match self.helper_sig {
            Some(s) => s,
            None => {
                let s = self.b.import_signature(helper_signature(self.call_conv));
                self.helper_sig = Some(s);
                s
            }
        };
        let addr = self.iconst(types::I64, f as usize as i64);
        let mut args = Vec::with_capacity(6);
        args.push(self.b.use_var(self.state));
        for r in 1..=5 {
            args.push(self.reg(r));
        }
        let call = self.b.ins().call_indirect(sig, addr, &args);
        let r0 = self.b.inst_results(call)[0];
        self.set(0, r0);
        self.check_fault(pc, true);
        Ok(())
    }

    fn call_local(&mut self, pc: usize) -> Result<(), JitError> {
        let insn = self.insns[pc];
        let target = pc as i64 + 1 + insn.imm as i64;
        let fref = usize::try_from(target).ok().and_then(|t| self.funcs.get(&t).copied()).ok_or(JitError::BadTarget { pc, target })?;
        let mut args = Vec::with_capacity(8);
        args.push(self.b.use_var(self.state));
        args.push(self.b.use_var(self.err_pc));
        for r in 1..=5 {
            args.push(self.reg(r));
        }
        let r10 = self.reg(10);
        let frame = self.b.ins().iadd_imm_s(r10, -(FRAME_STACK_SIZE as i64));
        args.push(frame);
        let call = self.b.ins().call(fref, &args);
        let r0 = self.b.inst_results(call)[0];
        self.set(0, r0);
        self.check_fault(pc, false);
        Ok(())
    }

    fn ldx(&mut self, pc: usize) -> Result<(), JitError> {
        let insn = self.insns[pc];
        if insn.dst == 10 {
            return Err(self.invalid(pc));
        }
        let size = size_bytes(insn.code);
        let sx = match insn.code & 0xe0 {
            BPF_MEM => false,
            BPF_MEMSX if size < 8 => true,
            _ => return Err(self.invalid(pc)),
        };
        let base = self.reg(insn.src);
        let off = insn.off as i32;
        let ins = self.b.ins();
        let v = match (size, sx) {
            (1, false) => ins.uload8(types::I64, flags(), base, off),
            (2, false) => ins.uload16(types::I64, flags(), base, off),
            (4, false) => ins.uload32(flags(), base, off),
            (1, true) => ins.sload8(types::I64, flags(), base, off),
            (2, true) => ins.sload16(types::I64, flags(), base, off),
            (4, true) => ins.sload32(flags(), base, off),
            _ => ins.load(types::I64, flags(), base, off),
        };
        self.set(insn.dst, v);
        Ok(())
    }

    fn store(&mut self, size: usize, v: Value, base: Value, off: i32) {
        let ins = self.b.ins();
        match size {
            1 => ins.istore8(flags(), v, base, off),
            2 => ins.istore16(flags(), v, base, off),
            4 => ins.istore32(flags(), v, base, off),
            _ => ins.store(flags(), v, base, off),
        };
    }

    fn st(&mut self, pc: usize) -> Result<(), JitError> {
        let insn = self.insns[pc];
        if insn.code & 0xe0 != BPF_MEM {
            return Err(self.invalid(pc));
        }
        let size = size_bytes(insn.code);
        let v = self.iconst(types::I64, insn.imm as i64);
        let base = self.reg(insn.dst);
        self.store(size, v, base, insn.off as i32);
        Ok(())
    }

    fn stx(&mut self, pc: usize) -> Result<(), JitError> {
        let insn = self.insns[pc];
        let size = size_bytes(insn.code);
        match insn.code & 0xe0 {
            BPF_MEM => {
                let v = self.reg(insn.src);
                let base = self.reg(insn.dst);
                self.store(size, v, base, insn.off as i32);
                Ok(())
            }
            BPF_ATOMIC => self.atomic(pc, size),
            _ => Err(self.invalid(pc)),
        }
    }

    fn atomic(&mut self, pc: usize, size: usize) -> Result<(), JitError> {
        let insn = self.insns[pc];
        let op = insn.imm;
        let writes_src = op & BPF_FETCH != 0 && op != BPF_CMPXCHG;
        if (op == BPF_LOAD_ACQ && insn.dst == 10) || (writes_src && insn.src == 10) {
            return Err(self.invalid(pc));
        }
        if !matches!(op, BPF_LOAD_ACQ | BPF_STORE_REL) && size < 4 {
            return Err(self.invalid(pc));
        }
        let rmw = match op {
            BPF_LOAD_ACQ | BPF_STORE_REL | BPF_CMPXCHG => None,
            BPF_XCHG => Some(AtomicRmwOp::Xchg),
            _ => Some(match op & !BPF_FETCH {
                0x00 => AtomicRmwOp::Add,
                0x40 => AtomicRmwOp::Or,
                0x50 => AtomicRmwOp::And,
                0xa0 => AtomicRmwOp::Xor,
                _ => return Err(self.invalid(pc)),
            }),
        };
        let ty = match size {
            1 => types::I8,
            2 => types::I16,
            4 => types::I32,
            _ => types::I64,
        };
        let widen = |t: &mut Self, v: Value| {
            if ty == types::I64 {
                v
            } else {
                t.b.ins().uextend(types::I64, v)
            }
        };
        let narrow = |t: &mut Self, v: Value| {
            if ty == types::I64 {
                v
            } else {
                t.b.ins().ireduce(ty, v)
            }
        };
        if op == BPF_LOAD_ACQ {
            let base = self.reg(insn.src);
            let addr = self.b.ins().iadd_imm_s(base, insn.off as i64);
            let v = self.b.ins().atomic_load(ty, flags(), addr);
            let v = widen(self, v);
            self.set(insn.dst, v);
            return Ok(());
        }
        let base = self.reg(insn.dst);
        let addr = self.b.ins().iadd_imm_s(base, insn.off as i64);
        let src = self.reg(insn.src);
        let src = narrow(self, src);
        if op == BPF_STORE_REL {
            self.b.ins().atomic_store(flags(), src, addr);
            return Ok(());
        }
        if op == BPF_CMPXCHG {
            let r0 = self.reg(0);
            let expected = narrow(self, r0);
            let old = self.b.ins().atomic_cas(flags(), addr, expected, src);
            let old = widen(self, old);
            self.set(0, old);
            return Ok(());
        }
        let Some(rmw) = rmw else {
            return Err(self.invalid(pc));
        };
        let old = self.b.ins().atomic_rmw(ty, flags(), rmw, addr, src);
        if writes_src {
            let old = widen(self, old);
            self.set(insn.src, old);
        }
        Ok(())
    }

    fn lddw(&mut self, pc: usize) -> Result<(), JitError> {
        let insn = self.insns[pc];
        if insn.code != (BPF_LD | BPF_IMM | BPF_DW) || insn.dst == 10 {
            return Err(self.invalid(pc));
        }
        let Some(next) = self.insns.get(pc + 1) else {
            return Err(JitError::FallsOffEnd { pc });
        };
        if next.code != 0 {
            return Err(self.invalid(pc));
        }
        let v = match insn.src {
            0 => (insn.imm as u32 as u64) | ((next.imm as u32 as u64) << 32),
            BPF_PSEUDO_MAP_FD | BPF_PSEUDO_MAP_VALUE => {
                *self.wide.get(&pc).ok_or(JitError::Unsupported { pc, what: "unresolved map reference" })?
            }
            _ => return Err(JitError::Unsupported { pc, what: "lddw pseudo source" }),
        };
        let c = self.iconst(types::I64, v as i64);
        self.set(insn.dst, c);
        Ok(())
    }
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
