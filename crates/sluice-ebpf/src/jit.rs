//! A JIT compiler from eBPF to native code, built on Cranelift.
//!
//! [`Jit::compile`] verifies a linked [`Program`] and translates it into one Cranelift
//! function per bpf sub-program (the entry at slot 0 plus every target of a `call` with
//! `BPF_PSEUDO_CALL`), finalized into executable memory owned by the returned
//! [`JitProgram`], which runs like the [`Interpreter`](crate::interp::Interpreter) (same
//! [`Engine`] trait, same [`RunState`], same helpers, same results).
//!
//! # Only verified programs
//!
//! The generated code does **not** check memory accesses: loads and stores go straight to the
//! address the program computes, and the stack is not cleared between runs. It is only ever
//! generated for programs the verifier accepted (which proves every access stays in the
//! stack, the context, the packet or a map value, and that no stack byte is read before the
//! program wrote it): [`Jit::compile`] runs [`verify`] itself, [`Jit::compile_verified`]
//! takes the [`VerifiedProgram`] the caller already has. What the verifier cannot prove is
//! handled at run time exactly as the interpreter does: division by zero (`x / 0 = 0`,
//! `x % 0 = x`), signed `INT_MIN / -1` (wraps), shift amounts (masked to the operand width).
//! Helper argument faults cannot happen in verified programs; the code still checks
//! `state.fault` after every helper call (the run ends with `RunErrorKind::HelperFault`).
//! [`Jit::check_translation`] translates without verifying and throws the code away (tests
//! and diagnostics: nothing unverified is ever run).
//!
//! # Translation
//!
//! * Registers r0-r10 are Cranelift variables (SSA construction does the rest); ALU32 results
//!   are zero-extended, immediates are sign-extended (ALU64 / JMP) or taken as `u32`
//!   (ALU32 / JMP32), as in the interpreter.
//! * The entry is the native function `fn(state, r10) -> r0` (System V; r1 is `&state.ctx`),
//!   every other sub-program `fn(state, r1, r2, r3, r4, r5, r10) -> r0`. A bpf-to-bpf call
//!   is a direct native call passing r1-r5 and `r10 - 512` (a fresh 512-byte frame below the
//!   caller's, as in the interpreter); r6-r9 survive the call because they are the caller's
//!   own variables.
//! * The bpf stack lives on the native stack of [`JitProgram::run`], uninitialised when the
//!   verifier saw no read of a stack byte the program has not written in this run (also
//!   through helper arguments), so what a previous run or the host left there is never
//!   observed. Two exceptions get all their frames zeroed per run (per packet in a burst),
//!   like the interpreter: a program the verifier let read unwritten stack (a privileged
//!   loader's allow_uninit_stack, `VerifiedProgram::reads_uninit_stack`), and one calling
//!   `bpf_trace_printk` / `bpf_trace_vprintk`, whose `%s` and `%pI4`-style arguments are
//!   unchecked values the helper dereferences. The stack
//!   declared to the helpers ([`RunState::set_stack`]) is what the verifier's per-function
//!   stack depths allow over every call chain.
//! * Helpers are the interpreter's `extern "C"` functions ([`helper_fn`]), called with the
//!   `RunState` pointer first; after each call the code checks `state.fault` and, if a helper
//!   refused its arguments, stores the instruction slot in `state.fault_pc` and unwinds
//!   through all frames (every bpf-to-bpf call site checks `state.fault` too). A successful
//!   `bpf_tail_call` reports one: from the entry function the run ends
//!   ([`RunErrorKind::TailCall`]); from a subprogram the code calls back into the runtime,
//!   which runs the target nested ([`crate::tail_call`]), and the subprogram returns the
//!   target's r0 to its caller.
//! * `bpf_map_lookup_elem` on an ARRAY or PERCPU_ARRAY map is inlined when r1 is known to be
//!   that map (an `lddw` pseudo map fd earlier in the same basic block, possibly through
//!   register copies), like the kernel's `array_map_gen_lookup`: the 4-byte key is compared
//!   with `max_entries` (out of range → NULL) and the value address computed directly (per-CPU:
//!   the run's CPU's copy). The layout is checked against [`Map::prog_lookup`] at compile time.
//! * A program that (after inlining) calls no helper runs with only the 48-byte
//!   [`RunHead`] (context, CPU) on the stack instead of a whole [`RunState`], and its buffer
//!   offsets need no write-back (nothing can move them). `Env::cpu_id` is only read when the
//!   program can look at the CPU (per-CPU maps, `bpf_get_smp_processor_id`).
//! * `lddw` map references resolve to the same values as in the interpreter:
//!   [`map_handle`](crate::helpers::map_handle) for `BPF_PSEUDO_MAP_FD`, [`Map::direct_value_addr`] for
//!   `BPF_PSEUDO_MAP_VALUE`.
//! * Atomics use Cranelift's `atomic_rmw` / `atomic_cas` / `atomic_load` / `atomic_store`
//!   (sequentially consistent); with [`RunConfig::single_writer`] the read-modify-writes are
//!   plain loads and stores (no bus lock: one thread runs the program).
//!
//! Anything the JIT cannot translate (invalid or unsupported instructions, an unknown helper,
//! a jump leaving its function, code that can fall off the end of a function, recursion or a
//! call chain deeper than 8 frames, Cranelift failures) makes [`Jit::compile`] return a
//! [`JitError`]; the caller then uses the interpreter.
//!
//! Differences from the interpreter that verified programs cannot observe: there is no
//! instruction budget (verified programs terminate); the stack is not zeroed (when nothing
//! reads it unwritten); after a
//! bpf-to-bpf call the caller's r1-r5 keep their values (the interpreter leaves the callee's
//! r1-r5 in place; the verifier forbids reading them either way); helpers accept pointers
//! into the stack any call chain can use from the start of the run (the interpreter only into
//! frames entered so far; verified programs only pass pointers into bytes they initialised).
//! A program that cannot look at the CPU does not call `Env::cpu_id`, so an out-of-range CPU
//! (a host bug) is only reported (`RunErrorKind::BadCpu`) for programs that could use it.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::mem::MaybeUninit;

use std::sync::{Arc, Mutex};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, AtomicRmwOp, Block, FuncRef, InstBuilder, MemFlagsData, SigRef, Signature, Type, UserFuncName, Value,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};

use crate::burst::{bad_desc, run_burst_each, BurstCtx, BurstFaults, FrameDesc, FrameRegion, ABORTED};
use crate::env::Env;
use crate::helpers::{helper_fn, id as helper_id, resolve_map_refs};
use crate::insn::*;
use crate::interp::{BPF_LOAD_ACQ, BPF_STORE_REL, FRAME_STACK_SIZE, MAX_CALL_FRAMES};
use crate::maps::Maps;
use crate::program::{map_type, Program};
use crate::state::{
    xdp_context, Engine, HelperFault, RunConfig, RunError, RunErrorKind, RunHead, RunState, OFF_CPU, OFF_CTX, OFF_FAULT, OFF_FAULT_PC,
};
use crate::tail_call::{run_from_subprogram, NestedTailCalls, RunInProgress, TailCallTargets};
use crate::verifier::{verify_with_frozen, SubprogInfo, VerifiedProgram, VerifyError, VerifyOptions};
use crate::xdp::{RunOutcome, XdpBuff, XdpMd};

/// Called by the code of a subprogram after its `bpf_tail_call` recorded a fault: a
/// successful tail call runs its target ([`crate::tail_call`]), whose r0 the subprogram
/// returns; any other fault, or the target's failure, stays recorded for the code to unwind.
extern "C" fn tail_call_from_subprogram(st: &mut RunState<'_>) -> u64 {
    if st.fault != HelperFault::TailCall as u32 {
        return 0;
    }
    st.fault = 0;
    let target = st.tail_target;
    match run_from_subprogram(st, target) {
        Some(Ok(r0)) => r0,
        Some(Err(e)) => {
            crate::tail_call::fail_with_target_error(st, e);
            0
        }
        None => {
            st.set_fault(helper_id::TAIL_CALL, HelperFault::NoTailCallTargets);
            0
        }
    }
}

/// Why a program could not be compiled (the caller falls back to the interpreter).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JitError {
    /// The verifier refused the program ([`Jit::compile`]): it may only run in the
    /// interpreter.
    #[error("verifier: {0}")]
    Verify(VerifyError),
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
    /// Verifies `program` (default [`VerifyOptions`], knowing the values of the frozen
    /// read-only maps among `maps`: [`Maps::frozen_values`]) and compiles it for `maps`, which
    /// must be the maps it was linked with (same definitions at the same indices). A program
    /// the verifier refuses gives [`JitError::Verify`].
    pub fn compile(program: Arc<Program>, maps: Arc<Maps>) -> Result<JitProgram, JitError> {
        Jit::compile_with_config(program, maps, RunConfig::default())
    }

    /// [`Jit::compile`] with an engine configuration (`insn_budget` is ignored: verified
    /// programs terminate).
    pub fn compile_with_config(program: Arc<Program>, maps: Arc<Maps>, config: RunConfig) -> Result<JitProgram, JitError> {
        let verified = verify_with_frozen(&program, &VerifyOptions::default(), &maps.frozen_values()).map_err(JitError::Verify)?;
        build(program, verified.subprogs(), verified.reads_uninit_stack(), maps, config)
    }

    /// Compiles a program the verifier accepted (`verified.program`) for `maps`, which must be
    /// the maps it was linked with. Uses the verifier's per-function stack depths.
    pub fn compile_verified(verified: &VerifiedProgram, maps: Arc<Maps>) -> Result<JitProgram, JitError> {
        Jit::compile_verified_with_config(verified, maps, RunConfig::default())
    }

    /// [`Jit::compile_verified`] with an engine configuration. The maps must hold, frozen,
    /// the read-only values the verifier took as constants (else [`JitError::Codegen`]): the
    /// code's safety rests on them.
    pub fn compile_verified_with_config(verified: &VerifiedProgram, maps: Arc<Maps>, config: RunConfig) -> Result<JitProgram, JitError> {
        let now = maps.frozen_values();
        for (i, v) in verified.frozen_values().iter().enumerate() {
            if v.is_some() && now.get(i) != Some(v) {
                return Err(JitError::Codegen(format!("map {i} does not hold, frozen, the value the program was verified with")));
            }
        }
        build(Arc::new(verified.program().clone()), verified.subprogs(), verified.reads_uninit_stack(), maps, config)
    }

    /// Translates `program` for `maps` **without verifying it** and throws the code away:
    /// whether the JIT itself can translate it (for tests and diagnostics). Nothing is run.
    pub fn check_translation(program: &Program, maps: &Maps) -> Result<(), JitError> {
        let plan = Plan::new(program, maps, None)?;
        let module = generate(&program.insns, &plan)?.0;
        // SAFETY: nothing compiled in this module was handed out or run.
        unsafe { module.free_memory() };
        Ok(())
    }
}

/// Generates the code, turning a panic in Cranelift (a bug) into an error: the caller falls
/// back to the interpreter instead of the host going down.
fn generate(insns: &[Insn], plan: &Plan) -> Result<(JITModule, EntryFn), JitError> {
    crate::loader::quiet_catch(|| codegen(insns, plan)).map_err(JitError::Codegen)?
}

fn build(
    program: Arc<Program>,
    subprogs: &[SubprogInfo],
    reads_uninit: bool,
    maps: Arc<Maps>,
    config: RunConfig,
) -> Result<JitProgram, JitError> {
    let mut plan = Plan::new(&program, &maps, Some(subprogs))?;
    if reads_uninit {
        // What it reads unwritten must be zero, as in the interpreter, not the host's stack
        // or the previous packet's.
        plan.zero_stack = true;
        plan.stack_bytes = plan.layout.frames * FRAME_STACK_SIZE;
    }
    plan.single_writer = config.single_writer;
    if plan.stack_bytes > STACK_SIZE {
        return Err(JitError::Codegen(format!("stack of {} bytes", plan.stack_bytes)));
    }
    let (module, entry) = generate(&program.insns, &plan)?;
    // The run function with the smallest native stack buffer that holds the bpf stack (so a
    // run does not probe or touch more native stack than it needs).
    let runner: Runner = match (plan.calls_helpers, plan.stack_bytes) {
        (false, 0..=512) => JitProgram::exec_lean::<{ 512 / 8 }>,
        (false, 513..=1024) => JitProgram::exec_lean::<{ 1024 / 8 }>,
        (false, 1025..=2048) => JitProgram::exec_lean::<{ 2048 / 8 }>,
        (false, _) => JitProgram::exec_lean::<{ STACK_SIZE / 8 }>,
        (true, 0..=512) => JitProgram::exec_full::<{ 512 / 8 }>,
        (true, 513..=1024) => JitProgram::exec_full::<{ 1024 / 8 }>,
        (true, 1025..=2048) => JitProgram::exec_full::<{ 2048 / 8 }>,
        (true, _) => JitProgram::exec_full::<{ STACK_SIZE / 8 }>,
    };
    Ok(JitProgram {
        program,
        maps,
        config,
        entry,
        runner,
        frames: plan.layout.frames,
        stack_bytes: plan.stack_bytes,
        zero_stack: plan.zero_stack,
        needs_cpu: plan.needs_cpu,
        calls_helpers: plan.calls_helpers,
        inlined_lookups: plan.inline.len(),
        module: Mutex::new(Some(module)),
    })
}

/// The native entry point: `(state, r10) -> r0` (r1 is `state + OFF_CTX`).
type EntryFn = unsafe extern "C" fn(*mut c_void, u64) -> u64;

/// Stack bytes of all frames (8 × 512).
const STACK_SIZE: usize = MAX_CALL_FRAMES * FRAME_STACK_SIZE;

/// One run: `JitProgram::exec_lean` or `exec_full` for the program's stack size. Writes the
/// full r0 to the last argument if given.
type Runner = fn(&JitProgram, &mut XdpBuff<'_>, &mut dyn Env, Option<&mut u64>) -> Result<RunOutcome, RunError>;

/// A compiled program, ready to run. Owns its code memory (freed on drop).
pub struct JitProgram {
    program: Arc<Program>,
    maps: Arc<Maps>,
    config: RunConfig,
    entry: EntryFn,
    runner: Runner,
    /// Stack frames the call graph can reach (1 + deepest call chain).
    frames: usize,
    /// Stack bytes below the entry's r10 the program and the helpers may use.
    stack_bytes: usize,
    /// Zero `stack_bytes` per run (programs calling trace_printk / trace_vprintk).
    zero_stack: bool,
    /// Whether the program can look at the CPU (read `Env::cpu_id` per run).
    needs_cpu: bool,
    /// Whether the code calls any helper (otherwise runs only need a [`RunHead`]).
    calls_helpers: bool,
    inlined_lookups: usize,
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
            .field("stack_bytes", &self.stack_bytes)
            .field("calls_helpers", &self.calls_helpers)
            .field("inlined_lookups", &self.inlined_lookups)
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

    /// Replaces the run configuration; `single_writer` stays as compiled (it is in the code).
    pub fn set_config(&mut self, config: RunConfig) {
        self.config = RunConfig { single_writer: self.config.single_writer, ..config };
    }

    /// Number of `bpf_map_lookup_elem` calls compiled inline (ARRAY / PERCPU_ARRAY maps).
    pub fn inlined_lookups(&self) -> usize {
        self.inlined_lookups
    }

    /// Whether the generated code calls helpers (after inlining). Programs that do not run
    /// with the smaller per-run setup.
    pub fn calls_helpers(&self) -> bool {
        self.calls_helpers
    }

    /// Stack bytes a run may use (below the entry's r10, over every call chain).
    pub fn stack_bytes(&self) -> usize {
        self.stack_bytes
    }

    /// Runs the program once (same as [`Engine::run`]). A tail call from a subprogram ends
    /// the run with an error: use [`JitProgram::run_with_tail_calls`] for programs that make
    /// tail calls.
    #[inline]
    pub fn run(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env) -> Result<RunOutcome, RunError> {
        (self.runner)(self, xdp, env, None)
    }

    /// Runs the program once; tail calls from subprograms run the programs of `targets`
    /// ([`crate::tail_call`]). A tail call from the entry function ends the run with
    /// [`RunErrorKind::TailCall`], as in [`JitProgram::run`].
    pub fn run_with_tail_calls(
        &self,
        xdp: &mut XdpBuff<'_>,
        env: &mut dyn Env,
        targets: &dyn TailCallTargets,
    ) -> Result<RunOutcome, RunError> {
        if !self.calls_helpers {
            // No helper, no tail call.
            return self.run(xdp, env);
        }
        let nested = NestedTailCalls::new(targets);
        match self.stack_bytes {
            0..=512 => self.exec_full_with::<{ 512 / 8 }>(xdp, env, None, Some(&nested)),
            513..=1024 => self.exec_full_with::<{ 1024 / 8 }>(xdp, env, None, Some(&nested)),
            1025..=2048 => self.exec_full_with::<{ 2048 / 8 }>(xdp, env, None, Some(&nested)),
            _ => self.exec_full_with::<{ STACK_SIZE / 8 }>(xdp, env, None, Some(&nested)),
        }
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
        match self.stack_bytes {
            0..=512 => self.exec_target::<{ 512 / 8 }>(st),
            513..=1024 => self.exec_target::<{ 1024 / 8 }>(st),
            1025..=2048 => self.exec_target::<{ 2048 / 8 }>(st),
            _ => self.exec_target::<{ STACK_SIZE / 8 }>(st),
        }
    }

    /// [`JitProgram::run_tail_call_target`] with a stack of `W` words.
    fn exec_target<const W: usize>(&self, st: &mut RunState<'_>) -> Result<u64, RunError> {
        let mut stack = MaybeUninit::<[u64; W]>::uninit();
        let top = self.stack_top(&mut stack);
        st.set_stack(top.wrapping_sub(self.stack_bytes), self.stack_bytes);
        let state: *mut RunState<'_> = st;
        // SAFETY: as in `exec_full`: finalized code for this verified program, alive with
        // `self`, touching only `st` (the state of a run in progress, which `RunInProgress`
        // guarantees: its context and packet are the run's, its maps this program's, checked
        // by the caller), the `stack_bytes` below `top` and map values. A program that calls
        // no helper reads only the `RunHead` prefix of the state.
        let r0 = unsafe { (self.entry)(state.cast(), top as u64) };
        match st.take_error() {
            Some(e) => Err(e),
            None => Ok(r0),
        }
    }

    /// Runs the program once and also returns the full 64-bit r0 (differential testing).
    pub fn run_full(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env) -> Result<(RunOutcome, u64), RunError> {
        let mut r0 = 0;
        let out = (self.runner)(self, xdp, env, Some(&mut r0))?;
        Ok((out, r0))
    }

    /// The program's r10 on `stack` (its end: the stack grows down), with the `stack_bytes`
    /// below it zeroed when the program may read stack it has not written (the verifier's
    /// `reads_uninit_stack`, allowed to a privileged loader: it then reads zeros); left
    /// uninitialised otherwise (the verifier lets it read only bytes it wrote). The array
    /// stays in the caller's frame, alive for the run.
    #[inline(always)]
    fn stack_top<const W: usize>(&self, stack: &mut MaybeUninit<[u64; W]>) -> *mut u8 {
        // Every caller picks W by the `stack_bytes` size class; the code writes that far
        // below `top`. One compare per run keeps a wrong class from being silent native
        // stack corruption.
        assert!(self.stack_bytes <= W * 8, "a {}-byte bpf stack on a {}-byte native one", self.stack_bytes, W * 8);
        let top = (stack.as_mut_ptr() as *mut u8).wrapping_add(W * 8);
        if self.zero_stack {
            // SAFETY: stack_bytes <= W * 8 (asserted above), so the `stack_bytes` below
            // `top` lie inside `stack`.
            unsafe { std::ptr::write_bytes(top.wrapping_sub(self.stack_bytes), 0, self.stack_bytes) };
        }
        top
    }

    /// The CPU of this run if the program can look at it (checked against the maps), else 0.
    #[inline(always)]
    fn cpu(&self, env: &mut dyn Env) -> Result<u32, RunError> {
        if !self.needs_cpu {
            return Ok(0);
        }
        let cpu = env.cpu_id();
        let ncpus = self.maps.ncpus();
        if cpu >= ncpus {
            return Err(RunError::new(0, RunErrorKind::BadCpu { cpu, ncpus }));
        }
        Ok(cpu)
    }

    /// A run of a program that calls no helper: only the [`RunHead`] is needed, nothing can
    /// move the buffer offsets or record a redirect or a fault.
    fn exec_lean<const W: usize>(
        &self,
        xdp: &mut XdpBuff<'_>,
        env: &mut dyn Env,
        r0_out: Option<&mut u64>,
    ) -> Result<RunOutcome, RunError> {
        let (ctx, _) = xdp_context(xdp).map_err(|k| RunError::new(0, k))?;
        let cpu = self.cpu(env)?;
        let mut head = RunHead { ctx, fault: 0, fault_helper: 0, redirect_kind: 0, redirect_target: 0, cpu, fault_pc: 0 };
        let mut stack = MaybeUninit::<[u64; W]>::uninit();
        let r10 = self.stack_top(&mut stack) as u64;
        let state: *mut RunHead = &mut head;
        // SAFETY: `entry` is finalized code owned by `self.module`, alive as long as `self`,
        // generated for this program's verified instructions, which call no helper: it only
        // touches `head` (the generated code accesses the state only at `RunHead` offsets
        // when no helper is called), the `stack_bytes <= W * 8` bytes below r10, the packet
        // and context described by `head` and map values.
        let r0 = unsafe { (self.entry)(state.cast(), r10) };
        if let Some(out) = r0_out {
            *out = r0;
        }
        // Nothing here records a redirect; one an earlier program of a tail-call chain chose holds.
        let action = r0 as u32;
        Ok(RunOutcome { action, redirect: if action == crate::insn::XDP_REDIRECT { xdp.redirect } else { None } })
    }

    /// Runs the program on every packet of a burst (see [`crate::burst`]); outcome `i`
    /// belongs to packet `i` (`out` must be at least as long as `pkts`). A program that calls
    /// no helper runs in one native stack frame set up once for the whole burst.
    pub fn run_burst<D: FrameDesc>(
        &self,
        region: &mut FrameRegion<'_>,
        pkts: &mut [D],
        ctx: BurstCtx,
        env: &mut dyn Env,
        out: &mut [RunOutcome],
    ) -> BurstFaults {
        if self.calls_helpers {
            return run_burst_each(self, region, pkts, ctx, env, out);
        }
        match self.stack_bytes {
            0..=512 => self.burst_lean::<{ 512 / 8 }, D>(region, pkts, ctx, env, out),
            513..=1024 => self.burst_lean::<{ 1024 / 8 }, D>(region, pkts, ctx, env, out),
            1025..=2048 => self.burst_lean::<{ 2048 / 8 }, D>(region, pkts, ctx, env, out),
            _ => self.burst_lean::<{ STACK_SIZE / 8 }, D>(region, pkts, ctx, env, out),
        }
    }

    /// [`JitProgram::run_burst`] for a program that calls no helper: nothing can move the
    /// packet, record a redirect or fault, so one [`RunHead`] and one stack serve every run.
    fn burst_lean<const W: usize, D: FrameDesc>(
        &self,
        region: &mut FrameRegion<'_>,
        pkts: &[D],
        ctx: BurstCtx,
        env: &mut dyn Env,
        out: &mut [RunOutcome],
    ) -> BurstFaults {
        let mut faults = BurstFaults::default();
        let cpu = match self.cpu(env) {
            Ok(cpu) => cpu,
            Err(e) => {
                for o in out.iter_mut().take(pkts.len()) {
                    *o = ABORTED;
                    faults.record(e.clone());
                }
                return faults;
            }
        };
        // The burst's fields of the context are written once: the verifier refuses every
        // write to it, so the program cannot change them between packets.
        let ctx = XdpMd {
            data: 0,
            data_end: 0,
            data_meta: 0,
            ingress_ifindex: ctx.ingress_ifindex,
            rx_queue_index: ctx.rx_queue_index,
            egress_ifindex: 0,
        };
        let mut head = RunHead { ctx, fault: 0, fault_helper: 0, redirect_kind: 0, redirect_target: 0, cpu, fault_pc: 0 };
        // Not zeroed, and not cleared between packets, unless the program may read stack it
        // has not written in the same run (`zero_stack`): then zeroed for every packet, so no
        // packet sees another's bytes. r10 and the size check are the burst's (hoisted by hand:
        // the compiler must assume the call through `entry` may change `self`).
        let mut stack = MaybeUninit::<[u64; W]>::uninit();
        let r10 = self.stack_top(&mut stack);
        let rezero = self.zero_stack.then_some(self.stack_bytes);
        for (i, (d, o)) in pkts.iter().zip(out.iter_mut()).enumerate() {
            if let (Some(bytes), true) = (rezero, i > 0) {
                // SAFETY: stack_top asserted stack_bytes <= W * 8, so the bytes below r10
                // lie inside `stack`.
                unsafe { std::ptr::write_bytes(r10.wrapping_sub(bytes), 0, bytes) };
            }
            let Some((data, data_end)) = region.addresses(d) else {
                *o = ABORTED;
                faults.record(RunError::new(0, bad_desc(d, region)));
                continue;
            };
            head.ctx.data = data;
            head.ctx.data_end = data_end;
            head.ctx.data_meta = data;
            let state: *mut RunHead = &mut head;
            // SAFETY: as in `exec_lean`: finalized code for this verified, helper-free program,
            // touching only `head`, the stack below r10 and the packet `head.ctx` describes
            // (inside its frame of the region, below 4 GiB, checked by `addresses`), and map
            // values. The region borrow keeps the frames ours for the burst.
            let r0 = unsafe { (self.entry)(state.cast(), r10 as u64) };
            *o = RunOutcome { action: r0 as u32, redirect: None };
        }
        faults
    }

    /// A run with the whole [`RunState`], for programs that call helpers.
    fn exec_full<const W: usize>(
        &self,
        xdp: &mut XdpBuff<'_>,
        env: &mut dyn Env,
        r0_out: Option<&mut u64>,
    ) -> Result<RunOutcome, RunError> {
        self.exec_full_with::<W>(xdp, env, r0_out, None)
    }

    /// [`JitProgram::exec_full`], running tail calls from subprograms with `nested`.
    #[inline(always)]
    fn exec_full_with<const W: usize>(
        &self,
        xdp: &mut XdpBuff<'_>,
        env: &mut dyn Env,
        r0_out: Option<&mut u64>,
        nested: Option<&NestedTailCalls<'_>>,
    ) -> Result<RunOutcome, RunError> {
        if xdp.frags.is_some() {
            // A multi-buffer packet: the helpers reach its fragments through the run's `Env`.
            return crate::env::with_frags_of(xdp, env, |xdp, env| self.exec_full_with::<W>(xdp, env, r0_out, nested));
        }
        let cpu = self.cpu(env)?;
        let mut st = RunState::with_cpu(xdp, &self.maps, env, &self.config, cpu).map_err(|k| RunError::new(0, k))?;
        st.nested_tail_calls = nested;
        let mut stack = MaybeUninit::<[u64; W]>::uninit();
        let top = self.stack_top(&mut stack);
        // Uninitialised unless zeroed: helpers only read bytes the program wrote (verifier).
        st.set_stack(top.wrapping_sub(self.stack_bytes), self.stack_bytes);
        let state: *mut RunState<'_> = &mut st;
        // SAFETY: `entry` is finalized code owned by `self.module`, alive as long as `self`,
        // generated for this program's verified instructions: it only touches `st`, the
        // `stack_bytes` below `top` (inside `stack`), the packet and context described by
        // `st` and map values, and calls helpers with `st` exactly as the interpreter does.
        let r0 = unsafe { (self.entry)(state.cast(), top as u64) };
        if let Some(e) = st.take_error() {
            if let RunErrorKind::TailCall { .. } = e.kind {
                st.finish_for_tail_call(xdp);
            }
            return Err(e);
        }
        if let Some(out) = r0_out {
            *out = r0;
        }
        if nested.is_some() {
            xdp.tail_calls = st.tail_calls;
        }
        Ok(st.finish(xdp, r0))
    }
}

impl Engine for JitProgram {
    #[inline]
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

/// Everything decided before code generation.
struct Plan {
    /// The 64-bit value of every `lddw` with a map source, by slot.
    wide: BTreeMap<usize, u64>,
    layout: Layout,
    /// `bpf_map_lookup_elem` call slots compiled inline.
    inline: BTreeMap<usize, ArrayLookup>,
    /// Whether any helper call remains after inlining.
    calls_helpers: bool,
    /// Whether the program can look at the CPU.
    needs_cpu: bool,
    /// Zero the stack per run (trace_printk / trace_vprintk).
    zero_stack: bool,
    /// Stack bytes below the entry's r10 used over all call chains.
    stack_bytes: usize,
    /// Atomic read-modify-writes as plain load / op / store ([`RunConfig::single_writer`]).
    single_writer: bool,
}

impl Plan {
    /// `subprogs`: the verifier's functions with their stack depths (`None`: 512 each).
    fn new(program: &Program, maps: &Maps, subprogs: Option<&[SubprogInfo]>) -> Result<Plan, JitError> {
        let insns = &program.insns;
        let wide = resolve_map_refs(program, maps).map_err(JitError::Maps)?;
        let layout = Layout::analyse(insns)?;
        let depths: Vec<usize> = match subprogs {
            None => vec![FRAME_STACK_SIZE; layout.starts.len()],
            Some(sp) => layout
                .starts
                .iter()
                .map(|&s| {
                    sp.iter()
                        .find(|i| i.start == s)
                        .map(|i| (i.stack_depth as usize).min(FRAME_STACK_SIZE))
                        .ok_or_else(|| JitError::Codegen(format!("the verifier does not know the function at insn {s}")))
                })
                .collect::<Result<_, _>>()?,
        };
        let mut helpers = Vec::new();
        let mut needs_cpu = false;
        for (pc, insn) in insns.iter().enumerate() {
            if layout.tail[pc] {
                continue;
            }
            if insn.code == (BPF_JMP | BPF_CALL) && insn.src == 0 {
                helpers.push((pc, insn.imm));
                // The helpers that read the run's CPU: the processor id, and the event
                // outputs (BPF_F_CURRENT_CPU picks the perf array slot; records carry it).
                needs_cpu |=
                    [helper_id::GET_SMP_PROCESSOR_ID, helper_id::PERF_EVENT_OUTPUT, helper_id::RINGBUF_OUTPUT, helper_id::RINGBUF_RESERVE]
                        .iter()
                        .any(|&id| insn.imm == id as i32);
            }
            // Per-CPU map lookups and updates use the run's CPU. (Verified programs only get
            // map handles from `lddw`.)
            if insn.code == (BPF_LD | BPF_IMM | BPF_DW) && insn.src == BPF_PSEUDO_MAP_FD {
                // An inner map reached through a map of maps may be per-CPU.
                needs_cpu |= maps.get(insn.imm as u32 as usize).is_some_and(|m| m.is_percpu() || m.def().is_map_of_maps());
            }
        }
        let zero_stack = helpers.iter().any(|&(_, id)| id == helper_id::TRACE_PRINTK as i32 || id == helper_id::TRACE_VPRINTK as i32);
        let inline = find_array_lookups(insns, &layout, maps);
        let calls_helpers = helpers.iter().any(|(pc, _)| !inline.contains_key(pc));
        let stack_bytes = if zero_stack { layout.frames * FRAME_STACK_SIZE } else { layout.stack_need(&depths) };
        Ok(Plan { wide, layout, inline, calls_helpers, needs_cpu, zero_stack, stack_bytes, single_writer: false })
    }
}

/// An inlined `bpf_map_lookup_elem` on an array: the value of key `k < max_entries` (and CPU
/// `c` for per-CPU maps) is at `base + k * entry_stride + c * cpu_stride`.
#[derive(Debug, Clone, Copy)]
struct ArrayLookup {
    base: u64,
    max_entries: u32,
    entry_stride: u64,
    /// `Some` for PERCPU_ARRAY.
    cpu_stride: Option<u64>,
}

impl ArrayLookup {
    /// The inline lookup for map `index`, if it is an ARRAY or PERCPU_ARRAY whose value
    /// layout is the one expected (checked against [`Map::prog_lookup`], the helper's own
    /// lookup, on a sample of keys and CPUs).
    fn of(maps: &Maps, index: u32) -> Option<ArrayLookup> {
        let m = maps.get(index as usize)?;
        let d = m.def();
        if !matches!(d.map_type, map_type::ARRAY | map_type::PERCPU_ARRAY) || d.key_size != 4 {
            return None;
        }
        let stride = (d.value_size as u64).checked_add(7)? & !7;
        let percpu = m.is_percpu();
        let copies = m.copies() as u64;
        // Runs use CPUs below `maps.ncpus()`: every one must have its copy.
        if (percpu && copies != maps.ncpus() as u64) || (!percpu && copies != 1) {
            return None;
        }
        let l = ArrayLookup {
            base: m.region().start as u64,
            max_entries: d.max_entries,
            entry_stride: copies.checked_mul(stride)?,
            cpu_stride: percpu.then_some(stride),
        };
        let n = d.max_entries;
        let keys = [0, 1, n / 2, n.saturating_sub(1), n, n.saturating_add(1), u32::MAX];
        let cpus = [0, 1, maps.ncpus().saturating_sub(1)];
        for &k in &keys {
            for &c in &cpus {
                if c >= maps.ncpus() {
                    continue;
                }
                let want = m.prog_lookup(&k.to_le_bytes(), c).map_or(0, |p| p as u64);
                if l.addr(k, c) != want {
                    return None;
                }
            }
        }
        Some(l)
    }

    /// What the generated code computes for key `k` on CPU `c` (0 = NULL).
    fn addr(&self, k: u32, c: u32) -> u64 {
        if k >= self.max_entries {
            return 0;
        }
        let cpu_off = self.cpu_stride.map_or(0, |s| c as u64 * s);
        self.base.wrapping_add(k as u64 * self.entry_stride).wrapping_add(cpu_off)
    }
}

/// The `bpf_map_lookup_elem` calls whose map argument is known and an array: r1 was loaded
/// with that map's `lddw` pseudo map fd earlier in the same basic block (directly or through
/// 64-bit register copies), so on every path to the call r1 is that map.
fn find_array_lookups(insns: &[Insn], layout: &Layout, maps: &Maps) -> BTreeMap<usize, ArrayLookup> {
    let n = insns.len();
    // Block leaders over the whole program (unreachable code only adds leaders).
    let mut leader = vec![false; n + 1];
    for &s in &layout.starts {
        leader[s] = true;
    }
    let mut mark = |t: i64| {
        if t >= 0 && (t as usize) < n {
            leader[t as usize] = true;
        }
    };
    for (pc, insn) in insns.iter().enumerate() {
        let class = insn.class();
        if layout.tail[pc] || (class != BPF_JMP && class != BPF_JMP32) {
            continue;
        }
        match insn.code & 0xf0 {
            BPF_CALL => {}
            BPF_EXIT => mark(pc as i64 + 1),
            BPF_JA => {
                let off = if class == BPF_JMP { insn.off as i64 } else { insn.imm as i64 };
                mark(pc as i64 + 1 + off);
                mark(pc as i64 + 1);
            }
            _ => {
                mark(pc as i64 + 1 + insn.off as i64);
                mark(pc as i64 + 1);
            }
        }
    }
    let mut out = BTreeMap::new();
    let mut known: [Option<u32>; 11] = [None; 11];
    let mut pc = 0;
    while pc < n {
        if leader[pc] {
            known = [None; 11];
        }
        let insn = insns[pc];
        let is_lddw = insn.code == (BPF_LD | BPF_IMM | BPF_DW);
        let (dst, src) = (insn.dst as usize, insn.src as usize);
        if dst > 10 || src > 10 {
            // Invalid (the translation refuses it).
            known = [None; 11];
        } else {
            match insn.class() {
                BPF_LD => known[dst] = (is_lddw && insn.src == BPF_PSEUDO_MAP_FD).then_some(insn.imm as u32),
                BPF_ALU64 if insn.code == (BPF_ALU64 | BPF_MOV | BPF_X) && insn.off == 0 => known[dst] = known[src],
                BPF_ALU | BPF_ALU64 | BPF_LDX => known[dst] = None,
                BPF_STX if insn.code & 0xe0 == BPF_ATOMIC => {
                    // Fetching atomics write src (cmpxchg r0, load-acquire dst).
                    known[dst] = None;
                    known[src] = None;
                    known[0] = None;
                }
                BPF_ST | BPF_STX => {}
                _ => {
                    if insn.code == (BPF_JMP | BPF_CALL) {
                        if insn.src == 0 && insn.imm == helper_id::MAP_LOOKUP_ELEM as i32 {
                            if let Some(l) = known[1].and_then(|m| ArrayLookup::of(maps, m)) {
                                out.insert(pc, l);
                            }
                        }
                        // Calls clobber r0-r5.
                        known[..=5].fill(None);
                    }
                }
            }
        }
        pc += if is_lddw { 2 } else { 1 };
    }
    out
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
    /// Per function (index into `starts`), the functions it calls.
    callees: Vec<Vec<usize>>,
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
        Ok(Layout { tail, frames: depth[0], starts, callees })
    }

    /// Stack bytes below the entry's r10 any call chain from the entry uses, when function
    /// `f` uses `depths[f]` bytes of its frame: a function at call depth `k` has its frame
    /// `k * 512` bytes below the entry's.
    fn stack_need(&self, depths: &[usize]) -> usize {
        let nf = self.starts.len();
        let mut seen = vec![[false; MAX_CALL_FRAMES]; nf];
        let mut work = vec![(0usize, 0usize)];
        let mut need = 0;
        while let Some((f, k)) = work.pop() {
            if k >= MAX_CALL_FRAMES || seen[f][k] {
                continue;
            }
            seen[f][k] = true;
            need = need.max(k * FRAME_STACK_SIZE + depths.get(f).copied().unwrap_or(FRAME_STACK_SIZE));
            for &c in &self.callees[f] {
                work.push((c, k + 1));
            }
        }
        need
    }

    fn end_of(&self, f: usize) -> usize {
        self.starts.get(f + 1).copied().unwrap_or(self.tail.len())
    }
}

/// The entry function: `(state, r10) -> r0`; other functions: `(state, r1..r5, r10) -> r0`.
fn bpf_signature(call_conv: cranelift_codegen::isa::CallConv, entry: bool) -> Signature {
    let mut sig = Signature::new(call_conv);
    for _ in 0..if entry { 2 } else { 7 } {
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

fn codegen(insns: &[Insn], plan: &Plan) -> Result<(JITModule, EntryFn), JitError> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(codegen_err)?;
    flags.set("use_colocated_libcalls", "false").map_err(codegen_err)?;
    flags.set("is_pic", "false").map_err(codegen_err)?;
    flags.set("enable_probestack", "false").map_err(codegen_err)?;
    let isa = cranelift_native::builder().map_err(codegen_err)?.finish(settings::Flags::new(flags)).map_err(codegen_err)?;
    let call_conv = isa.default_call_conv();
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    match define_all(&mut module, call_conv, insns, plan) {
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
    plan: &Plan,
) -> Result<EntryFn, JitError> {
    let layout = &plan.layout;
    let mut ids = Vec::with_capacity(layout.starts.len());
    for (f, &start) in layout.starts.iter().enumerate() {
        let sig = bpf_signature(call_conv, f == 0);
        let id = module.declare_function(&format!("bpf_{start}"), Linkage::Local, &sig).map_err(codegen_err)?;
        ids.push(id);
    }

    let mut ctx = module.make_context();
    let mut fctx = FunctionBuilderContext::new();
    for (f, &id) in ids.iter().enumerate() {
        ctx.func.signature = bpf_signature(call_conv, f == 0);
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
                plan,
                wide: &plan.wide,
                layout,
                lo: layout.starts[f],
                hi: layout.end_of(f),
                regs: [Variable::from_u32(0); 11],
                state: Variable::from_u32(0),
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
    // SAFETY: `code` is the finalized entry function, compiled with `bpf_signature(_, true)`
    // under the ISA's default (System V on x86-64) calling convention, which is what
    // `extern "C"` means for `EntryFn`: 2 integer arguments, one integer result.
    let entry = unsafe { std::mem::transmute::<*const u8, EntryFn>(code) };
    Ok(entry)
}

fn flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

struct Translator<'a, 'f> {
    b: FunctionBuilder<'f>,
    insns: &'a [Insn],
    plan: &'a Plan,
    wide: &'a BTreeMap<usize, u64>,
    layout: &'a Layout,
    lo: usize,
    hi: usize,
    regs: [Variable; 11],
    /// The `RunState` (or, for programs that call no helper, `RunHead`) pointer.
    state: Variable,
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
        // Variables: r0..r10, state.
        for i in 0..11 {
            self.regs[i] = self.b.declare_var(types::I64);
        }
        self.state = self.b.declare_var(types::I64);
        self.find_blocks()?;

        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let params = self.b.block_params(entry).to_vec();
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.def_var(self.state, params[0]);
        self.b.def_var(self.regs[0], zero);
        if self.lo == 0 {
            // The entry: (state, r10); r1 = &state.ctx.
            let ctx = self.b.ins().iadd_imm_s(params[0], OFF_CTX as i64);
            self.b.def_var(self.regs[1], ctx);
            for r in 2..=5 {
                self.b.def_var(self.regs[r], zero);
            }
            self.b.def_var(self.regs[10], params[1]);
        } else {
            let regs = self.regs;
            for (&var, &p) in regs[1..=5].iter().zip(&params[1..=5]) {
                self.b.def_var(var, p);
            }
            self.b.def_var(self.regs[10], params[6]);
        }
        for r in 6..=9 {
            self.b.def_var(self.regs[r], zero);
        }
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
    /// (storing `pc` in `state.fault_pc` when `store_pc`, i.e. at the helper call itself).
    fn check_fault(&mut self, pc: usize, store_pc: bool) {
        let st = self.b.use_var(self.state);
        let fault = self.b.ins().load(types::I32, flags(), st, OFF_FAULT as i32);
        let bail = self.b.create_block();
        let cont = self.b.create_block();
        self.b.set_cold_block(bail);
        self.b.ins().brif(fault, bail, &[], cont, &[]);
        self.b.switch_to_block(bail);
        if store_pc {
            let pcv = self.iconst(types::I32, pc as i64);
            self.b.ins().store(flags(), pcv, st, OFF_FAULT_PC as i32);
        }
        let zero = self.iconst(types::I64, 0);
        self.b.ins().return_(&[zero]);
        self.b.switch_to_block(cont);
    }

    fn call_helper(&mut self, pc: usize) -> Result<(), JitError> {
        if let Some(&l) = self.plan.inline.get(&pc) {
            self.inline_array_lookup(l);
            return Ok(());
        }
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
        if id == helper_id::TAIL_CALL as i32 && self.lo != 0 {
            self.check_subprogram_tail_call(pc);
        } else {
            self.check_fault(pc, true);
        }
        Ok(())
    }

    /// After `bpf_tail_call` in a subprogram: on a fault (a successful tail call reports one),
    /// [`tail_call_from_subprogram`] runs the target; this function then returns its r0 to
    /// the caller, or unwinds like [`Translator::check_fault`] if a fault is left.
    fn check_subprogram_tail_call(&mut self, pc: usize) {
        let st = self.b.use_var(self.state);
        let fault = self.b.ins().load(types::I32, flags(), st, OFF_FAULT as i32);
        let called = self.b.create_block();
        let unwind = self.b.create_block();
        let returned = self.b.create_block();
        let cont = self.b.create_block();
        for blk in [called, unwind, returned] {
            self.b.set_cold_block(blk);
        }
        self.b.ins().brif(fault, called, &[], cont, &[]);

        self.b.switch_to_block(called);
        let mut sig = Signature::new(self.call_conv);
        sig.params.push(AbiParam::new(types::I64));
        sig.returns.push(AbiParam::new(types::I64));
        let sig = self.b.import_signature(sig);
        let f: extern "C" fn(&mut RunState<'_>) -> u64 = tail_call_from_subprogram;
        let addr = self.iconst(types::I64, f as usize as i64);
        let call = self.b.ins().call_indirect(sig, addr, &[st]);
        let r0 = self.b.inst_results(call)[0];
        let fault = self.b.ins().load(types::I32, flags(), st, OFF_FAULT as i32);
        self.b.ins().brif(fault, unwind, &[], returned, &[]);

        self.b.switch_to_block(unwind);
        let pcv = self.iconst(types::I32, pc as i64);
        self.b.ins().store(flags(), pcv, st, OFF_FAULT_PC as i32);
        let zero = self.iconst(types::I64, 0);
        self.b.ins().return_(&[zero]);

        self.b.switch_to_block(returned);
        self.b.ins().return_(&[r0]);

        self.b.switch_to_block(cont);
    }

    /// `r0 = bpf_map_lookup_elem(map, r2)` for an array `map` (see [`ArrayLookup`]), as
    /// `Map::prog_lookup` computes it: `key < max_entries ? &value[key] : NULL`. A select, not
    /// a branch, so no out-of-range address is formed even speculatively.
    fn inline_array_lookup(&mut self, l: ArrayLookup) {
        let r2 = self.reg(2);
        let key = self.b.ins().uload32(flags(), r2, 0);
        let in_range = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, key, l.max_entries as i64);
        let mut addr = if l.max_entries == 1 {
            // key == 0 when in range.
            self.iconst(types::I64, l.base as i64)
        } else {
            let off = self.b.ins().imul_imm_s(key, l.entry_stride as i64);
            self.b.ins().iadd_imm_s(off, l.base as i64)
        };
        if let Some(cs) = l.cpu_stride {
            let st = self.b.use_var(self.state);
            let cpu = self.b.ins().uload32(flags(), st, OFF_CPU as i32);
            let off = self.b.ins().imul_imm_s(cpu, cs as i64);
            addr = self.b.ins().iadd(addr, off);
        }
        let null = self.iconst(types::I64, 0);
        let r0 = self.b.ins().select(in_range, addr, null);
        self.set(0, r0);
    }

    fn call_local(&mut self, pc: usize) -> Result<(), JitError> {
        let insn = self.insns[pc];
        let target = pc as i64 + 1 + insn.imm as i64;
        let fref = usize::try_from(target).ok().and_then(|t| self.funcs.get(&t).copied()).ok_or(JitError::BadTarget { pc, target })?;
        let mut args = Vec::with_capacity(7);
        args.push(self.b.use_var(self.state));
        for r in 1..=5 {
            args.push(self.reg(r));
        }
        let r10 = self.reg(10);
        let frame = self.b.ins().iadd_imm_s(r10, -(FRAME_STACK_SIZE as i64));
        args.push(frame);
        let call = self.b.ins().call(fref, &args);
        let r0 = self.b.inst_results(call)[0];
        self.set(0, r0);
        if self.plan.calls_helpers {
            self.check_fault(pc, false);
        }
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
            let old = if self.plan.single_writer {
                let old = self.b.ins().load(ty, flags(), addr, 0);
                let hit = self.b.ins().icmp(IntCC::Equal, old, expected);
                let new = self.b.ins().select(hit, src, old);
                self.b.ins().store(flags(), new, addr, 0);
                old
            } else {
                self.b.ins().atomic_cas(flags(), addr, expected, src)
            };
            let old = widen(self, old);
            self.set(0, old);
            return Ok(());
        }
        let Some(rmw) = rmw else {
            return Err(self.invalid(pc));
        };
        let old = if self.plan.single_writer {
            // One writer: a plain read-modify-write is indistinguishable from a locked one.
            let old = self.b.ins().load(ty, flags(), addr, 0);
            let new = match rmw {
                AtomicRmwOp::Xchg => src,
                AtomicRmwOp::Add => self.b.ins().iadd(old, src),
                AtomicRmwOp::Or => self.b.ins().bor(old, src),
                AtomicRmwOp::And => self.b.ins().band(old, src),
                _ => self.b.ins().bxor(old, src),
            };
            self.b.ins().store(flags(), new, addr, 0);
            old
        } else {
            self.b.ins().atomic_rmw(ty, flags(), rmw, addr, src)
        };
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
