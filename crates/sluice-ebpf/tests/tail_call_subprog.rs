//! Tail calls made from bpf-to-bpf subprograms, in both engines: as in the kernel (x86-64 JIT
//! since 5.10, selftests tailcall_bpf2bpf*), a successful `bpf_tail_call` in a subprogram
//! unwinds only that subprogram; the target's `exit` returns to the subprogram's caller with
//! the target's r0, the caller's registers and stack intact. From the entry function it still
//! ends the run. The count of tail calls (33 at most) is shared by the whole run.

#[path = "verifier_asm.rs"]
mod asm;

use std::sync::Arc;

use asm::{asm, map, program};
use sluice_ebpf::jit::{Jit, JitProgram};
use sluice_ebpf::program::{map_type, MapDef, Program};
use sluice_ebpf::xdp::MAX_TAIL_CALL_CNT;
use sluice_ebpf::{
    Interpreter, LowMem, Maps, NullEnv, RedirectTarget, RunError, RunErrorKind, RunInProgress, RunOutcome, TailCallTargets, XdpBuff,
};

const HEADROOM: usize = 256;
const PKT_LEN: usize = 64;

/// Map 0: the PROG_ARRAY `jmp` (4 slots) every program tail-calls through.
fn map_defs() -> Vec<MapDef> {
    vec![map("jmp", map_type::PROG_ARRAY, 4, 4, 4)]
}

/// Calls `sub` with 40 on its stack and 60 in r7, then returns the r0 `sub` gave plus both:
/// `sub` tail-calls slot 0, or returns 1 when the slot is empty.
const ENTRY: &str = "
    r6 = r1
    r1 = 40
    *(u64 *)(r10 - 8) = r1
    r7 = 60
    r1 = r6
    call @sub
    r1 = *(u64 *)(r10 - 8)
    r0 += r1
    r0 += r7
    exit
sub:
    *(u64 *)(r10 - 8) = 5
    r2 = map[0] ll
    r3 = 0
    call 12
    r0 = 1
    exit";

/// Returns 7, its stack scribbled over (it must not be the caller's).
const SEVEN: &str = "
    r1 = 999
    *(u64 *)(r10 - 8) = r1
    r0 = 7
    exit";

/// Tail-calls slot 0 from its entry function; returns 1 when the slot is empty.
const ENTRY_TAIL_CALL: &str = "
    r2 = map[0] ll
    r3 = 0
    call 12
    r0 = 1
    exit";

/// Tail-calls slot 1 from its entry function; returns 1 when the slot is empty.
const CHAIN_TO_SLOT_1: &str = "
    r2 = map[0] ll
    r3 = 1
    call 12
    r0 = 1
    exit";

/// Two subprograms deep: `f1` doubles what `f2` returns; `f2` tail-calls slot 0.
const TWO_DEEP: &str = "
    call @f1
    r0 += 100
    exit
f1:
    r6 = 2
    call @f2
    r0 *= r6
    exit
f2:
    r2 = map[0] ll
    r3 = 0
    call 12
    r0 = 1
    exit";

/// Calls `sub`, which tail-calls slot 1, and returns what it returns plus 1 (0 when the tail
/// call fails). In slot 1 itself, every run nests one more: the entry returns how many ran.
const NEST: &str = "
    call @sub
    r0 += 1
    exit
sub:
    r2 = map[0] ll
    r3 = 1
    call 12
    r0 = -1
    exit";

/// Strips 14 bytes off the packet's head and returns 2.
const ADJUST_HEAD: &str = "
    r2 = 14
    call 44
    r0 = 2
    exit";

/// Calls `sub` (which tail-calls slot 0), then returns the packet length it sees then.
const ENTRY_LEN_AFTER: &str = "
    r6 = r1
    call @sub
    r2 = *(u32 *)(r6 + 0)
    r0 = *(u32 *)(r6 + 4)
    r0 -= r2
    exit
sub:
    r2 = map[0] ll
    r3 = 0
    call 12
    r0 = 1
    exit";

/// After `sub`'s tail call returns, the caller hands its own stack to a helper that checks
/// stack bounds (bpf_xdp_load_bytes, never inlined): 4 zero packet bytes overwrite 0x5555,
/// so it returns 100 only if the helper took the caller's stack; 3 if it refused it.
const ENTRY_STACK_HELPER_AFTER: &str = "
    r6 = r1
    r1 = 0x5555
    *(u64 *)(r10 - 8) = r1
    r1 = r6
    call @sub
    r1 = r6
    r2 = 0
    r3 = r10
    r3 += -8
    r4 = 4
    call 189
    if r0 != 0 goto bad
    r0 = *(u32 *)(r10 - 8)
    r0 += 100
    exit
bad:
    r0 = 3
    exit
sub:
    r2 = map[0] ll
    r3 = 0
    call 12
    r0 = 1
    exit";

/// Picks ifindex 7 with bpf_redirect and returns 0.
const REDIRECT_7: &str = "
    r1 = 7
    r2 = 0
    call 23
    r0 = 0
    exit";

/// Calls `sub` (which tail-calls slot 0), then returns XDP_REDIRECT (4).
const ENTRY_REDIRECT_AFTER: &str = "
    call @sub
    r0 = 4
    exit
sub:
    r2 = map[0] ll
    r3 = 0
    call 12
    r0 = 1
    exit";

/// Loads through a null pointer: a fault (interpreter only: the verifier refuses it).
const FAULTS: &str = "
    r1 = 0
    r0 = *(u64 *)(r1 + 0)
    exit";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Interp,
    Jit,
}

/// One per program: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Engine {
    Interp(Interpreter),
    Jit(JitProgram),
}

/// Programs of one object (sharing its maps), each prepared in the engine asked for; slot
/// values of `jmp` are indices into `engines`.
struct Object {
    engines: Vec<Engine>,
}

impl Object {
    /// `progs`: source and engine of each program; `slots`: (slot, program index).
    fn new(progs: &[(&str, Kind)], slots: &[(u32, u32)]) -> Object {
        let maps = Arc::new(Maps::new(&map_defs(), 1).unwrap());
        let engines = progs
            .iter()
            .map(|&(src, kind)| {
                let p: Arc<Program> = Arc::new(program(asm(src), map_defs()));
                match kind {
                    Kind::Interp => Engine::Interp(Interpreter::new(p, maps.clone()).unwrap()),
                    Kind::Jit => Engine::Jit(Jit::compile(p, maps.clone()).unwrap()),
                }
            })
            .collect();
        let jmp = maps.get(0).unwrap();
        for &(slot, prog) in slots {
            jmp.update(&slot.to_le_bytes(), &prog.to_le_bytes(), 0).unwrap();
        }
        Object { engines }
    }

    /// Runs program 0 on a 64-byte packet that has made `tail_calls` tail calls already:
    /// the result and the buffer after the run.
    fn run(&self, tail_calls: u32) -> (Result<RunOutcome, RunError>, usize, usize, u32) {
        let mut mem = LowMem::new(4096).unwrap();
        let mut xdp = XdpBuff::new(mem.as_mut_slice(), HEADROOM, PKT_LEN);
        xdp.tail_calls = tail_calls;
        let mut env = NullEnv::new();
        let r = match &self.engines[0] {
            Engine::Interp(i) => i.run_with_tail_calls(&mut xdp, &mut env, self),
            Engine::Jit(j) => j.run_with_tail_calls(&mut xdp, &mut env, self),
        };
        (r, xdp.data, xdp.data_end, xdp.tail_calls)
    }
}

impl TailCallTargets for Object {
    fn run_target(&self, index: u32, run: &mut RunInProgress<'_, '_>) -> Result<u64, RunError> {
        match self.engines.get(index as usize) {
            Some(Engine::Interp(i)) => i.run_tail_call_target(run),
            Some(Engine::Jit(j)) => j.run_tail_call_target(run),
            None => Err(RunError::new(0, RunErrorKind::MapMismatch(format!("no program {index}")))),
        }
    }
}

fn verdict(r: Result<RunOutcome, RunError>) -> u32 {
    r.unwrap_or_else(|e| panic!("run failed: {e}")).action
}

const BOTH: [Kind; 2] = [Kind::Interp, Kind::Jit];

#[test]
fn a_tail_call_from_a_subprogram_returns_to_its_caller() {
    for k in BOTH {
        let o = Object::new(&[(ENTRY, k), (SEVEN, k)], &[(0, 1)]);
        let (r, _, _, tail_calls) = o.run(0);
        assert_eq!(verdict(r), 7 + 40 + 60, "{k:?}: the target's r0 plus the caller's stack and r7");
        assert_eq!(tail_calls, 1, "{k:?}");
    }
}

#[test]
fn a_tail_call_returns_to_the_caller_of_the_subprogram_that_made_it() {
    for k in BOTH {
        let o = Object::new(&[(TWO_DEEP, k), (SEVEN, k)], &[(0, 1)]);
        assert_eq!(verdict(o.run(0).0), 7 * 2 + 100, "{k:?}");
    }
}

#[test]
fn a_failed_tail_call_in_a_subprogram_falls_through() {
    for k in BOTH {
        let o = Object::new(&[(ENTRY, k), (SEVEN, k)], &[]);
        let (r, _, _, tail_calls) = o.run(0);
        assert_eq!(verdict(r), 1 + 40 + 60, "{k:?}");
        assert_eq!(tail_calls, 0, "{k:?}");
    }
}

#[test]
fn a_tail_call_from_the_entry_function_still_ends_the_run() {
    for k in BOTH {
        let o = Object::new(&[(ENTRY_TAIL_CALL, k), (SEVEN, k)], &[(0, 1)]);
        let (r, _, _, tail_calls) = o.run(0);
        assert_eq!(r.unwrap_err().kind, RunErrorKind::TailCall { target: 1 }, "{k:?}");
        assert_eq!(tail_calls, 1, "{k:?}");
    }
}

/// The target nests itself through its own subprogram until the limit: 33 tail calls in
/// all, counting the ones made before the run on the same packet.
#[test]
fn nested_tail_calls_share_the_limit_of_33() {
    for k in BOTH {
        let o = Object::new(&[(NEST, k), (NEST, k)], &[(1, 1)]);
        let (r, _, _, tail_calls) = o.run(0);
        assert_eq!(verdict(r), MAX_TAIL_CALL_CNT, "{k:?}");
        assert_eq!(tail_calls, MAX_TAIL_CALL_CNT, "{k:?}");
        let (r, _, _, tail_calls) = o.run(30);
        assert_eq!(verdict(r), 3, "{k:?}: 30 were made before");
        assert_eq!(tail_calls, MAX_TAIL_CALL_CNT, "{k:?}");
    }
}

/// A program tail-called from a subprogram that tail-calls from its entry function in turn:
/// the chain's last program returns to the subprogram's caller.
#[test]
fn a_chain_of_tail_calls_from_a_subprogram_returns_to_its_caller() {
    for k in BOTH {
        let o = Object::new(&[(ENTRY, k), (CHAIN_TO_SLOT_1, k), (SEVEN, k)], &[(0, 1), (1, 2)]);
        let (r, _, _, tail_calls) = o.run(0);
        assert_eq!(verdict(r), 7 + 40 + 60, "{k:?}");
        assert_eq!(tail_calls, 2, "{k:?}");
    }
}

#[test]
fn the_caller_sees_the_packet_as_the_target_left_it() {
    for k in BOTH {
        let o = Object::new(&[(ENTRY_LEN_AFTER, k), (ADJUST_HEAD, k)], &[(0, 1)]);
        let (r, data, data_end, _) = o.run(0);
        assert_eq!(verdict(r), (PKT_LEN - 14) as u32, "{k:?}");
        assert_eq!((data, data_end), (HEADROOM + 14, HEADROOM + PKT_LEN), "{k:?}");
    }
}

#[test]
fn a_redirect_the_target_chose_holds_for_the_caller() {
    for k in BOTH {
        let o = Object::new(&[(ENTRY_REDIRECT_AFTER, k), (REDIRECT_7, k)], &[(0, 1)]);
        let out = o.run(0).0.unwrap();
        assert_eq!((out.action, out.redirect), (4, Some(RedirectTarget::Ifindex(7))), "{k:?}");
    }
}

/// A fault in the target ends the whole run with the target's error, whichever engine the
/// caller runs in (the target is interpreted: the verifier refuses it).
#[test]
fn a_fault_in_the_target_ends_the_run() {
    for k in BOTH {
        let o = Object::new(&[(ENTRY, k), (FAULTS, Kind::Interp)], &[(0, 1)]);
        let e = o.run(0).0.unwrap_err();
        assert_eq!((e.pc, e.kind), (1, RunErrorKind::MemoryFault { addr: 0, len: 8, write: false }), "{k:?}");
    }
}

/// The engines may differ per program: a JIT caller, an interpreted target, and back.
#[test]
fn callers_and_targets_may_run_in_either_engine() {
    for (a, b) in [(Kind::Jit, Kind::Interp), (Kind::Interp, Kind::Jit)] {
        let o = Object::new(&[(ENTRY, a), (SEVEN, b)], &[(0, 1)]);
        assert_eq!(verdict(o.run(0).0), 107, "{a:?} calling {b:?}");
        let o = Object::new(&[(NEST, a), (NEST, b)], &[(1, 1)]);
        assert_eq!(verdict(o.run(0).0), MAX_TAIL_CALL_CNT, "{a:?} calling {b:?}");
    }
}

/// A run given no targets cannot follow a tail call from a subprogram: it ends with an error
/// at the call.
#[test]
fn without_targets_a_tail_call_from_a_subprogram_is_an_error() {
    for k in BOTH {
        let o = Object::new(&[(ENTRY, k), (SEVEN, k)], &[(0, 1)]);
        let mut mem = LowMem::new(4096).unwrap();
        let mut xdp = XdpBuff::new(mem.as_mut_slice(), HEADROOM, PKT_LEN);
        let r = match &o.engines[0] {
            Engine::Interp(i) => i.run(&mut xdp, &mut NullEnv::new()),
            Engine::Jit(j) => j.run(&mut xdp, &mut NullEnv::new()),
        };
        let e = r.unwrap_err();
        assert_eq!((e.pc, e.kind), (14, RunErrorKind::NoTailCallTargets { target: 1 }), "{k:?}");
    }
}

/// The stack bounds the helpers check are the caller's again once a nested target returned
/// (the target ran with a stack of its own): a helper given the caller's stack takes it.
#[test]
fn after_a_nested_target_the_helpers_see_the_callers_stack() {
    for k in BOTH {
        for target in BOTH {
            let o = Object::new(&[(ENTRY_STACK_HELPER_AFTER, k), (SEVEN, target)], &[(0, 1)]);
            let (r, _, _, tail_calls) = o.run(0);
            assert_eq!(verdict(r), 100, "{k:?} calling {target:?}");
            assert_eq!(tail_calls, 1);
        }
    }
}

/// A target whose call chain has a function using 256 bytes of stack: with the entry's
/// 512-byte frame, the 1 KiB class of the JIT's native stacks. 11 on its own stack, 22 + 33
/// + 33 from its function, kept there across a helper call (whose native frame must not
/// land on them).
const DEEP_STACK: &str = "
    r1 = 11
    *(u64 *)(r10 - 8) = r1
    call @g
    r1 = *(u64 *)(r10 - 8)
    r0 += r1
    exit
g:
    r1 = 22
    *(u64 *)(r10 - 256) = r1
    r2 = 33
    *(u64 *)(r10 - 8) = r2
    *(u64 *)(r10 - 128) = r2
    call 7
    r0 = *(u64 *)(r10 - 256)
    r3 = *(u64 *)(r10 - 8)
    r0 += r3
    r3 = *(u64 *)(r10 - 128)
    r0 += r3
    exit";

/// A target run from a subprogram gets a stack for its whole call chain, whatever its size
/// class, and the caller's stack is left alone.
#[test]
fn a_tail_call_target_with_a_deep_call_chain_has_the_stack_it_needs() {
    let maps = Arc::new(Maps::new(&map_defs(), 1).unwrap());
    let j = Jit::compile(Arc::new(program(asm(DEEP_STACK), map_defs())), maps).unwrap();
    assert!((513..=1024).contains(&j.stack_bytes()), "stack {}", j.stack_bytes());
    for k in BOTH {
        let o = Object::new(&[(ENTRY, k), (DEEP_STACK, k)], &[(0, 1)]);
        assert_eq!(verdict(o.run(0).0), 11 + 22 + 33 + 33 + 40 + 60, "{k:?}");
    }
}
