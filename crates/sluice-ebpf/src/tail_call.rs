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

use crate::state::{HelperFault, RunError, RunErrorKind, RunState};
// Defined with RunState, which holds them, so state.rs need not import this module.
pub(crate) use crate::state::NestedTailCalls;
pub use crate::state::{RunInProgress, TailCallTargets};

/// Ends the run with `e`, the error of a program a subprogram tail-called (for the JIT's
/// code, which unwinds on a fault).
pub(crate) fn fail_with_target_error(st: &mut RunState<'_>, e: RunError) {
    if let Some(n) = st.nested_tail_calls {
        n.fail(e);
    }
    st.fault = HelperFault::TailCallTargetFailed as u32;
    st.fault_helper = crate::helpers::id::TAIL_CALL;
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
