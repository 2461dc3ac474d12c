//! Per-run state shared by the execution engines and the helpers, run errors, and the
//! [`Engine`] abstraction.
//!
//! # `RunState` layout (for the JIT)
//!
//! `RunState` is `#[repr(C)]`; a JIT passes a pointer to it as the first argument of every
//! helper (see [`crate::helpers::HelperFn`]) and may read the fields below at fixed offsets
//! (the `OFF_*` constants):
//!
//! | offset | field | meaning |
//! |---|---|---|
//! | 0  | `ctx: XdpMd` (24 bytes) | the program's context: r1 at entry is `&state.ctx` |
//! | 24 | `fault: u32` | non-zero after a helper refused an argument ([`HelperFault`]) |
//! | 28 | `fault_helper: u32` | the helper id that set `fault` |
//! | 32 | `redirect_kind: u32` | 0 none, 1 ifindex, 2 cpu, 3 xsk (see [`RunState::redirect`]) |
//! | 36 | `redirect_target: u32` | ifindex / cpu / consumer id |
//! | 40 | `cpu: u32` | the CPU (worker) of this run, for per-CPU maps |
//! | 44 | `fault_pc: u32` | free for the engine: the JIT stores the slot of the faulting helper call |
//!
//! The first 48 bytes ([`RunHead`]) are all generated code reads or writes; the remaining
//! fields (buffer and stack bounds, maps, env) are for the helpers' use.
//! Helpers update `ctx.data/data_end/data_meta` in place (adjust_head/tail/meta), so a JIT must
//! re-read packet pointers from the context after any helper call — exactly what programs do.
//! After the program returns, call [`RunState::finish`] to write the new offsets back into the
//! [`XdpBuff`] and get the [`RunOutcome`].

use std::mem::offset_of;

use crate::env::Env;
use crate::maps::{Maps, MemRegion};
use crate::xdp::{RedirectTarget, RunOutcome, XdpBuff, XdpMd, XDP_MD_SIZE, XDP_META_MAX, XDP_TAILROOM_DEFAULT};
use std::cell::Cell;

/// Default instruction budget of one run of the interpreter.
pub const DEFAULT_INSN_BUDGET: u64 = 1_000_000;

/// Engine configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunConfig {
    /// Instructions one run may execute before it is stopped with
    /// [`RunErrorKind::BudgetExceeded`] (interpreter).
    pub insn_budget: u64,
    /// Bytes at the end of the frame `bpf_xdp_adjust_tail` never grows into.
    pub tailroom: usize,
    /// Largest metadata `bpf_xdp_adjust_meta` accepts ([`crate::xdp::XDP_META_MAX`] = 255 like
    /// current kernels; [`crate::xdp::XDP_META_MAX_LEGACY`] = 32 for older ones).
    pub meta_max: usize,
    /// Only one thread at a time runs programs that write these maps (one datapath worker):
    /// atomic read-modify-writes then need no bus lock, and are done as a plain load, op and
    /// store. Every observer sees the same values as with locked instructions: readers of an
    /// aligned word see the old or the new value, and user space writes whole values as the
    /// kernel's `map_update_elem` does (not atomically with the program either). With more
    /// than one thread running the program, counts would be lost: leave it off. The JIT
    /// fixes this choice at compile time.
    pub single_writer: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig { insn_budget: DEFAULT_INSN_BUDGET, tailroom: XDP_TAILROOM_DEFAULT, meta_max: XDP_META_MAX, single_writer: false }
    }
}

/// Why a helper refused to run (stored as a `u32` in [`RunState::fault`]).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelperFault {
    /// An argument that must be a map (from `lddw` with a pseudo map fd) is not one.
    BadMap = 1,
    /// A pointer argument does not point into memory the program may access for that size.
    BadPointer = 2,
    /// An argument that must be the context pointer is not.
    BadCtx = 3,
    /// Not a fault: `bpf_tail_call` succeeded; the run ends here and the target program
    /// (`RunState::tail_target`) runs on the same context (from a subprogram: the engine runs
    /// it nested, see [`crate::tail_call`]).
    TailCall = 4,
    /// The program a subprogram tail-called failed: its error ends the run
    /// ([`RunState::take_error`]).
    TailCallTargetFailed = 5,
    /// Not a helper's refusal: a tail call from a subprogram succeeded in a run given no
    /// tail-call targets ([`RunErrorKind::NoTailCallTargets`]).
    NoTailCallTargets = 6,
}

impl HelperFault {
    pub fn from_u32(v: u32) -> Option<HelperFault> {
        match v {
            1 => Some(HelperFault::BadMap),
            2 => Some(HelperFault::BadPointer),
            3 => Some(HelperFault::BadCtx),
            4 => Some(HelperFault::TailCall),
            5 => Some(HelperFault::TailCallTargetFailed),
            6 => Some(HelperFault::NoTailCallTargets),
            _ => None,
        }
    }
}

/// What went wrong in a run. The datapath treats every error as `XDP_ABORTED`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunErrorKind {
    #[error("invalid instruction (opcode {code:#04x})")]
    InvalidInstruction { code: u8 },
    #[error("unsupported instruction: {0}")]
    Unsupported(&'static str),
    #[error("jump or fall-through out of the program")]
    PcOutOfRange,
    #[error("invalid {len}-byte {} at {addr:#x}", if *.write { "store" } else { "load" })]
    MemoryFault { addr: u64, len: u32, write: bool },
    #[error("misaligned atomic access at {addr:#x}")]
    MisalignedAtomic { addr: u64 },
    #[error("atomic operation on packet or context memory at {addr:#x}")]
    AtomicNotAllowed { addr: u64 },
    #[error("more than {max} nested bpf-to-bpf calls")]
    CallDepthExceeded { max: usize },
    #[error("instruction budget of {budget} exhausted")]
    BudgetExceeded { budget: u64 },
    #[error("unknown helper {id}")]
    UnknownHelper { id: i32 },
    /// The program's entry function tail-called program `target` (an index into its
    /// object's programs): not an error, the caller runs the target next (see
    /// `XdpBuff::tail_calls`).
    #[error("tail call to program {target}")]
    TailCall { target: u32 },
    /// A subprogram tail-called program `target` in a run that was given no programs to run
    /// (see `Interpreter::run_with_tail_calls`).
    #[error("tail call to program {target} from a subprogram, in a run given no tail-call targets")]
    NoTailCallTargets { target: u32 },
    #[error("helper {helper} refused its arguments: {fault:?}")]
    HelperFault { helper: u32, fault: HelperFault },
    #[error("lddw refers to map {index}, which does not exist")]
    BadMapIndex { index: u32 },
    #[error("lddw map value: map {index} has no direct value at offset {offset}")]
    BadMapValue { index: u32, offset: u32 },
    #[error("program and maps do not belong together: {0}")]
    MapMismatch(String),
    #[error("packet buffer lies above 4 GiB (xdp_md holds 32-bit addresses)")]
    BufferAbove4G,
    #[error("inconsistent packet offsets: meta {data_meta} data {data} end {data_end} frame {frame_len}")]
    BadBuffer { data_meta: usize, data: usize, data_end: usize, frame_len: usize },
    #[error("cpu {cpu} out of range (maps created for {ncpus} CPUs)")]
    BadCpu { cpu: u32, ncpus: u32 },
}

/// A failed run (or a program an engine refused to prepare): `pc` is the instruction slot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at insn {pc}: {kind}")]
pub struct RunError {
    pub pc: usize,
    pub kind: RunErrorKind,
}

impl RunError {
    pub fn new(pc: usize, kind: RunErrorKind) -> RunError {
        RunError { pc, kind }
    }
}

/// An execution engine for one linked program (interpreter or JIT).
pub trait Engine: Send + Sync {
    /// Runs the program once on `xdp`. On success the buffer offsets reflect the program's
    /// adjust_head/tail/meta calls; on error the offsets are left as they were before the run
    /// (the packet bytes may have been modified) and the caller treats it as `XDP_ABORTED`.
    fn run(&self, xdp: &mut XdpBuff<'_>, env: &mut dyn Env) -> Result<RunOutcome, RunError>;
}

/// Redirect kinds in [`RunState::redirect_kind`].
pub const REDIRECT_NONE: u32 = 0;
pub const REDIRECT_IFINDEX: u32 = 1;
pub const REDIRECT_CPU: u32 = 2;
pub const REDIRECT_XSK: u32 = 3;

/// Where an address lies (result of [`RunState::translate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemKind {
    Stack,
    Packet,
    /// The 24-byte context (loads only; the pointer returned is null: read `state.ctx`).
    Ctx,
    /// A map value region (index of the map).
    Map(usize),
}

/// Everything one run needs; see the module docs for the layout contract.
#[repr(C)]
pub struct RunState<'a> {
    pub ctx: XdpMd,
    pub fault: u32,
    pub fault_helper: u32,
    pub redirect_kind: u32,
    pub redirect_target: u32,
    pub cpu: u32,
    /// Not used by helpers: the JIT stores the slot of a helper call that set `fault` here.
    pub fault_pc: u32,
    /// Start of the packet buffer (`data_hard_start`), as a pointer with provenance.
    pub frame_ptr: *mut u8,
    pub frame_len: usize,
    /// Bytes at the end of the frame that `adjust_tail` never grows into.
    pub tailroom: usize,
    /// Largest metadata length `adjust_meta` accepts.
    pub meta_max: usize,
    /// Stack memory programs may access: `[stack_lo, stack_hi)`; `stack_ptr` is the pointer
    /// (with provenance) for address `stack_lo`. Set by the engine with [`RunState::set_stack`].
    pub stack_ptr: *mut u8,
    pub stack_lo: usize,
    pub stack_hi: usize,
    pub maps: &'a Maps,
    pub regions: &'a [MemRegion],
    pub env: &'a mut dyn Env,
    /// Tail calls made on this packet so far, this run's included (`XdpBuff::tail_calls`
    /// before the run, written back after it).
    pub tail_calls: u32,
    /// The program `bpf_tail_call` chose (valid with a `TailCall` fault).
    pub tail_target: u32,
    /// What tail calls from subprograms need ([`crate::tail_call`]); `None` in a run given
    /// no tail-call targets.
    pub(crate) nested_tail_calls: Option<&'a NestedTailCalls<'a>>,
}

pub const OFF_CTX: usize = offset_of!(RunState<'static>, ctx);
pub const OFF_FAULT: usize = offset_of!(RunState<'static>, fault);
pub const OFF_FAULT_HELPER: usize = offset_of!(RunState<'static>, fault_helper);
pub const OFF_REDIRECT_KIND: usize = offset_of!(RunState<'static>, redirect_kind);
pub const OFF_REDIRECT_TARGET: usize = offset_of!(RunState<'static>, redirect_target);
pub const OFF_CPU: usize = offset_of!(RunState<'static>, cpu);
pub const OFF_FAULT_PC: usize = offset_of!(RunState<'static>, fault_pc);

/// The first 48 bytes of [`RunState`], field for field: all a program that calls no helper
/// needs (the JIT runs such programs with only this on its stack).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RunHead {
    pub ctx: XdpMd,
    pub fault: u32,
    pub fault_helper: u32,
    pub redirect_kind: u32,
    pub redirect_target: u32,
    pub cpu: u32,
    pub fault_pc: u32,
}

// `RunHead` is a prefix of `RunState` (generated code uses the same offsets for both).
const _: () = {
    assert!(offset_of!(RunHead, ctx) == OFF_CTX);
    assert!(offset_of!(RunHead, fault) == OFF_FAULT);
    assert!(offset_of!(RunHead, fault_helper) == OFF_FAULT_HELPER);
    assert!(offset_of!(RunHead, redirect_kind) == OFF_REDIRECT_KIND);
    assert!(offset_of!(RunHead, redirect_target) == OFF_REDIRECT_TARGET);
    assert!(offset_of!(RunHead, cpu) == OFF_CPU);
    assert!(offset_of!(RunHead, fault_pc) == OFF_FAULT_PC);
    assert!(std::mem::size_of::<RunHead>() == 48);
};

/// A redirect as the two words of [`RunState`] (kind, target).
#[inline(always)]
fn redirect_words(target: Option<RedirectTarget>) -> (u32, u32) {
    match target {
        None => (REDIRECT_NONE, 0),
        Some(RedirectTarget::Ifindex(i)) => (REDIRECT_IFINDEX, i),
        Some(RedirectTarget::Cpu(c)) => (REDIRECT_CPU, c),
        Some(RedirectTarget::Xsk(x)) => (REDIRECT_XSK, x),
    }
}

/// Checks `xdp`: offsets consistent, frame below 4 GiB (`struct xdp_md` holds 32-bit
/// addresses). Returns the frame pointer.
#[inline(always)]
fn checked_frame(xdp: &mut XdpBuff<'_>) -> Result<*mut u8, RunErrorKind> {
    let frame_len = xdp.frame.len();
    if !(xdp.data_meta <= xdp.data && xdp.data <= xdp.data_end && xdp.data_end <= frame_len) {
        return Err(RunErrorKind::BadBuffer { data_meta: xdp.data_meta, data: xdp.data, data_end: xdp.data_end, frame_len });
    }
    let frame_ptr = xdp.frame.as_mut_ptr();
    if (frame_ptr as usize).checked_add(frame_len).is_none_or(|end| end >= FOUR_GIB) {
        return Err(RunErrorKind::BufferAbove4G);
    }
    Ok(frame_ptr)
}

/// The context a run on `xdp` sees, with the real 32-bit addresses (`base` is the frame
/// address, checked to be below 4 GiB with the whole frame).
#[inline(always)]
fn context_of(xdp: &XdpBuff<'_>, base: usize) -> XdpMd {
    XdpMd {
        data: (base + xdp.data) as u32,
        data_end: (base + xdp.data_end) as u32,
        data_meta: (base + xdp.data_meta) as u32,
        ingress_ifindex: xdp.ingress_ifindex,
        rx_queue_index: xdp.rx_queue_index,
        egress_ifindex: xdp.egress_ifindex,
    }
}

/// Checks `xdp` (offsets consistent, frame below 4 GiB) and builds the context a run of it
/// sees, with the real 32-bit addresses. Also returns the frame pointer.
#[inline(always)]
pub fn xdp_context(xdp: &mut XdpBuff<'_>) -> Result<(XdpMd, *mut u8), RunErrorKind> {
    let frame_ptr = checked_frame(xdp)?;
    Ok((context_of(xdp, frame_ptr as usize), frame_ptr))
}

const FOUR_GIB: usize = 1 << 32;

impl<'a> RunState<'a> {
    /// Prepares a run on `xdp`: validates the offsets, requires the frame to lie below 4 GiB,
    /// builds the context with the real 32-bit addresses, reads the CPU from `env`.
    /// The stack is empty until [`RunState::set_stack`].
    // Inlined so that the interpreter keeps the state in registers (returned through memory,
    // its setup is ~50% slower).
    #[inline(always)]
    pub fn new(xdp: &mut XdpBuff<'_>, maps: &'a Maps, env: &'a mut dyn Env, config: &RunConfig) -> Result<RunState<'a>, RunErrorKind> {
        RunState::build(xdp, maps, env, config, None)
    }

    /// [`RunState::new`] with the CPU given by the caller instead of read from `env` (an
    /// engine that knows the program never looks at the CPU passes 0). `cpu` must be smaller
    /// than `maps.ncpus()`.
    #[inline(always)]
    pub fn with_cpu(
        xdp: &mut XdpBuff<'_>,
        maps: &'a Maps,
        env: &'a mut dyn Env,
        config: &RunConfig,
        cpu: u32,
    ) -> Result<RunState<'a>, RunErrorKind> {
        RunState::build(xdp, maps, env, config, Some(cpu))
    }

    // The context is built in place: building it apart and moving it in made the
    // interpreter's setup 15% slower (small stores reloaded wider: a store-forwarding stall).
    #[inline(always)]
    fn build(
        xdp: &mut XdpBuff<'_>,
        maps: &'a Maps,
        env: &'a mut dyn Env,
        config: &RunConfig,
        cpu: Option<u32>,
    ) -> Result<RunState<'a>, RunErrorKind> {
        let frame_ptr = checked_frame(xdp)?;
        let cpu = match cpu {
            Some(c) => c,
            None => env.cpu_id(),
        };
        if cpu >= maps.ncpus() {
            return Err(RunErrorKind::BadCpu { cpu, ncpus: maps.ncpus() });
        }
        let (redirect_kind, redirect_target) = redirect_words(xdp.redirect);
        Ok(RunState {
            ctx: context_of(xdp, frame_ptr as usize),
            fault: 0,
            fault_helper: 0,
            redirect_kind,
            redirect_target,
            cpu,
            fault_pc: 0,
            frame_ptr,
            frame_len: xdp.frame.len(),
            tailroom: config.tailroom,
            meta_max: config.meta_max,
            stack_ptr: std::ptr::null_mut(),
            stack_lo: 0,
            stack_hi: 0,
            maps,
            regions: maps.regions(),
            env,
            tail_calls: xdp.tail_calls,
            tail_target: 0,
            nested_tail_calls: None,
        })
    }

    /// Declares `[ptr, ptr + len)` as the stack memory programs (and helpers) may access. It
    /// must stay valid for the rest of the run, and every byte a helper reads must be
    /// initialised: the interpreter zeroes its frames; the JIT relies on the verifier, which
    /// refuses helper arguments pointing to stack bytes the program has not written (and
    /// zeroes the stack of programs calling `trace_printk`, whose `%s` pointers are unchecked).
    pub fn set_stack(&mut self, ptr: *mut u8, len: usize) {
        self.stack_ptr = ptr;
        self.stack_lo = ptr as usize;
        self.stack_hi = self.stack_lo + len;
    }

    /// The address of the context as the program sees it (r1 at entry).
    #[inline]
    pub fn ctx_addr(&self) -> u64 {
        &self.ctx as *const XdpMd as u64
    }

    /// Frame address (what `data_hard_start` is) as an integer.
    #[inline]
    pub fn frame_base(&self) -> usize {
        self.frame_ptr as usize
    }

    /// The redirect recorded so far.
    pub fn redirect(&self) -> Option<RedirectTarget> {
        match self.redirect_kind {
            REDIRECT_IFINDEX => Some(RedirectTarget::Ifindex(self.redirect_target)),
            REDIRECT_CPU => Some(RedirectTarget::Cpu(self.redirect_target)),
            REDIRECT_XSK => Some(RedirectTarget::Xsk(self.redirect_target)),
            _ => None,
        }
    }

    pub fn set_redirect(&mut self, target: Option<RedirectTarget>) {
        let (k, t) = redirect_words(target);
        self.redirect_kind = k;
        self.redirect_target = t;
    }

    /// Records a helper fault (the engine turns it into a [`RunError`]).
    #[inline]
    pub fn set_fault(&mut self, helper: u32, fault: HelperFault) {
        if self.fault == 0 {
            self.fault = fault as u32;
            self.fault_helper = helper;
        }
    }

    /// The helper fault recorded, if any.
    pub fn take_fault(&mut self) -> Option<RunErrorKind> {
        if self.fault == 0 {
            return None;
        }
        let fault = HelperFault::from_u32(self.fault).unwrap_or(HelperFault::BadPointer);
        let helper = self.fault_helper;
        self.fault = 0;
        match fault {
            HelperFault::TailCall => return Some(RunErrorKind::TailCall { target: self.tail_target }),
            HelperFault::NoTailCallTargets => return Some(RunErrorKind::NoTailCallTargets { target: self.tail_target }),
            _ => {}
        }
        Some(RunErrorKind::HelperFault { helper, fault })
    }

    /// The helper fault recorded, if any, as the error ending the run at slot `fault_pc` (for
    /// the JIT, whose code stores the slot there); the failure of a program a subprogram
    /// tail-called is that program's own error.
    pub fn take_error(&mut self) -> Option<RunError> {
        let kind = self.take_fault()?;
        let pc = self.fault_pc as usize;
        Some(self.nested_tail_calls.and_then(NestedTailCalls::take_failure).unwrap_or_else(|| RunError::new(pc, kind)))
    }

    /// Finds the memory `[addr, addr + len)` lies in and returns a pointer to it (with the
    /// right provenance). `write` requires writable memory (never the context). Checks, in
    /// order: stack, packet `[data_meta, data_end)` as it currently is, context (loads only;
    /// returns a null pointer, the caller reads `self.ctx`), map value regions.
    #[inline]
    pub fn translate(&self, addr: u64, len: usize, write: bool) -> Option<(*mut u8, MemKind)> {
        if len == 0 {
            return None;
        }
        let a = usize::try_from(addr).ok()?;
        let end = a.checked_add(len)?;
        if a >= self.stack_lo && end <= self.stack_hi {
            return Some((self.stack_ptr.wrapping_add(a - self.stack_lo), MemKind::Stack));
        }
        let meta = self.ctx.data_meta as usize;
        let dend = self.ctx.data_end as usize;
        if a >= meta && end <= dend {
            let base = self.frame_base();
            // data_meta >= base by construction (helpers keep it inside the frame).
            return Some((self.frame_ptr.wrapping_add(a.wrapping_sub(base)), MemKind::Packet));
        }
        let c = self.ctx_addr() as usize;
        if a >= c && end <= c + XDP_MD_SIZE {
            return if write { None } else { Some((std::ptr::null_mut(), MemKind::Ctx)) };
        }
        for (i, r) in self.regions.iter().enumerate() {
            if a >= r.start && end <= r.end {
                if write && !r.writable {
                    return None;
                }
                return Some((r.ptr.wrapping_add(a - r.start), MemKind::Map(i)));
            }
        }
        None
    }

    /// Memory a helper may read `len` bytes from (stack, packet, map values; not the context).
    #[inline]
    pub fn helper_mem(&self, addr: u64, len: usize, write: bool) -> Option<*mut u8> {
        match self.translate(addr, len, write)? {
            (_, MemKind::Ctx) => None,
            (p, _) => Some(p),
        }
    }

    /// The run ended in a successful `bpf_tail_call`: the target runs next on the context as
    /// this program left it, with the redirect it chose, after the tail calls counted so far.
    pub fn finish_for_tail_call(&self, xdp: &mut XdpBuff<'_>) {
        self.finish(xdp, 0);
        xdp.redirect = self.redirect();
        xdp.tail_calls = self.tail_calls;
    }

    /// Writes the new buffer offsets into `xdp` and builds the outcome from r0. (The tail-call
    /// count only changes in a run that made tail calls from subprograms, given targets to run:
    /// the engines write it back after such a run.)
    pub fn finish(&self, xdp: &mut XdpBuff<'_>, r0: u64) -> RunOutcome {
        let base = self.frame_base();
        xdp.data = (self.ctx.data as usize).wrapping_sub(base);
        xdp.data_end = (self.ctx.data_end as usize).wrapping_sub(base);
        xdp.data_meta = (self.ctx.data_meta as usize).wrapping_sub(base);
        let action = r0 as u32;
        RunOutcome { action, redirect: if action == crate::insn::XDP_REDIRECT { self.redirect() } else { None } }
    }
}

// ---- tail calls from subprograms (run by crate::tail_call) ----

/// The programs a run's tail calls can reach, by the index a PROG_ARRAY slot holds.
pub trait TailCallTargets {
    /// Runs program `index` as the target of a tail call a subprogram made in `run`
    /// ([`crate::Interpreter::run_tail_call_target`],
    /// [`crate::jit::JitProgram::run_tail_call_target`]): its r0, or the error that ends the
    /// run. A tail call it makes from its entry function ends it with
    /// [`RunErrorKind::TailCall`], which the caller follows.
    fn run_target(&self, index: u32, run: &mut RunInProgress<'_, '_>) -> Result<u64, RunError>;
}

/// What a run needs for tail calls from subprograms: the programs, and the error of one
/// that failed, on its way out of the code that called it (the JIT's code unwinds on a
/// fault flag only).
pub(crate) struct NestedTailCalls<'t> {
    pub(crate) targets: &'t dyn TailCallTargets,
    failure: Cell<Option<RunError>>,
}

impl<'t> NestedTailCalls<'t> {
    pub(crate) fn new(targets: &'t dyn TailCallTargets) -> NestedTailCalls<'t> {
        NestedTailCalls { targets, failure: Cell::new(None) }
    }

    pub(crate) fn fail(&self, e: RunError) {
        self.failure.set(Some(e));
    }

    pub(crate) fn take_failure(&self) -> Option<RunError> {
        self.failure.take()
    }
}

/// A run in progress, handed to the target of a tail call made in it. Only the engines make
/// one, from the state of a run they are executing: compiled code may trust what it holds.
pub struct RunInProgress<'r, 'a> {
    pub(crate) st: &'r mut RunState<'a>,
}

impl<'a> RunInProgress<'_, 'a> {
    pub(crate) fn state(&mut self) -> &mut RunState<'a> {
        self.st
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_layout() {
        assert_eq!((OFF_CTX, OFF_FAULT, OFF_FAULT_HELPER), (0, 24, 28));
        assert_eq!((OFF_REDIRECT_KIND, OFF_REDIRECT_TARGET, OFF_CPU, OFF_FAULT_PC), (32, 36, 40, 44));
        assert_eq!(std::mem::size_of::<XdpMd>(), XDP_MD_SIZE);
    }
}
