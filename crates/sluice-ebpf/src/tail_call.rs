//! Tail calls made from bpf-to-bpf subprograms.
//!
//! A successful `bpf_tail_call` in a program's entry function ends the run: the engines
//! report [`RunErrorKind::TailCall`] and their caller (sluice's XDP runner) runs the target
//! on the same packet, whose verdict is the packet's. From a subprogram, the kernel (x86-64
//! JIT since 5.10, "bpf, x64: rework pro/epilogue and tailcall handling in JIT") unwinds only
//! that subprogram's frame: the target runs, and its `exit` returns to the subprogram's
//! caller with the target's r0, the caller's frames intact. The engines do the same by
//! running the target *nested* (`run_from_subprogram`): on the run's own [`RunState`]
//! (context and packet as they are, redirect, CPU, the tail-call count the whole run
//! shares), with a stack of its own; then the subprogram's caller resumes.
//!
//! The engines know only their own program: the programs a PROG_ARRAY slot names come from
//! the caller of the run, as [`TailCallTargets`] (`Interpreter::run_with_tail_calls`,
//! `JitProgram::run_with_tail_calls`). A run without them ends with
//! [`RunErrorKind::NoTailCallTargets`] at such a call.
//!
//! The verifier explores the return (the caller gets any r0) and, as the kernel, refuses a
//! tail call in a subprogram whose callers' frames use 256 bytes of stack or more. Nested
//! runs stack up on the native stack, a few KiB each (the bpf stack of the target plus the
//! engine's frames), at most 33 deep: the count bounds them.

use std::cell::Cell;

use crate::state::{RunError, RunErrorKind, RunState};

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
    targets: &'t dyn TailCallTargets,
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
    st: &'r mut RunState<'a>,
}

impl<'a> RunInProgress<'_, 'a> {
    pub(crate) fn state(&mut self) -> &mut RunState<'a> {
        self.st
    }
}

/// Runs program `target`, which a subprogram of the run `st` belongs to tail-called (the
/// helper counted the call), and the programs it tail-calls from its entry function in turn:
/// the r0 the last of them exits with, which the subprogram's caller receives, or the error
/// of one of them, which ends the whole run. `None` if the run was given no targets. The
/// run's stack bounds are restored afterwards; context, redirect and tail-call count are what
/// the targets left.
pub(crate) fn run_from_subprogram(st: &mut RunState<'_>, target: u32) -> Option<Result<u64, RunError>> {
    let nested = st.nested_tail_calls?;
    // The caller may not have read the CPU (a JIT program that cannot look at it); targets may.
    let cpu = st.env.cpu_id();
    let ncpus = st.maps.ncpus();
    if cpu >= ncpus {
        return Some(Err(RunError::new(0, RunErrorKind::BadCpu { cpu, ncpus })));
    }
    st.cpu = cpu;
    let stack = (st.stack_ptr, st.stack_lo, st.stack_hi);
    let mut next = target;
    let result = loop {
        match nested.targets.run_target(next, &mut RunInProgress { st: &mut *st }) {
            // The helper counts every tail call against the run's limit: the chain ends.
            Err(RunError { kind: RunErrorKind::TailCall { target }, .. }) => next = target,
            r => break r,
        }
    };
    (st.stack_ptr, st.stack_lo, st.stack_hi) = stack;
    Some(result)
}
