//! Event output costs no allocation per event on the fast path: a program that calls
//! `bpf_ringbuf_output` and `bpf_perf_event_output` on every packet, with nobody consuming
//! (the datapath's case: `sluice run` attaches no reader), allocates nothing in the
//! interpreter or the JIT — the ring buffer's bytes are copied straight from program memory
//! into the ring, and a perf record is built only for a listener. (Both helpers had copied
//! the program's bytes into a fresh `Vec` before looking whether anyone would take them.)
//!
//! One test in this binary: its global allocator counts the allocations of the thread that
//! switched counting on.

mod jit_common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use jit_common::*;
use sluice_ebpf::asm::*;
use sluice_ebpf::helpers::id as hid;
use sluice_ebpf::insn::*;
use sluice_ebpf::jit::Jit;
use sluice_ebpf::program::map_type;
use sluice_ebpf::{Interpreter, LowMem, MapDef, Maps, XdpBuff};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: every call is passed on to the system allocator unchanged; counting only reads a
// const-initialised thread-local flag (no allocation) and bumps an atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this thread while `f` runs.
fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCS.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCS.load(Ordering::Relaxed) - before
}

fn defs() -> Vec<MapDef> {
    vec![MapDef::new("rb", map_type::RINGBUF, 0, 0, 4096), MapDef::new("perf", map_type::PERF_EVENT_ARRAY, 4, 4, 2)]
}

/// "abcd" to the ring buffer, then "abcd" + the packet's first 4 bytes to this CPU's perf
/// slot; returns the perf helper's result (the ring's fills up: -EAGAIN after a while).
fn emit_both() -> Vec<Insn> {
    flat(&[
        &[mov64_reg(6, 1), st(BPF_W, 10, -8, 0x6463_6261), mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -8)],
        &lddw_map(1, 0),
        &[mov64_imm(3, 4), mov64_imm(4, 0), call(hid::RINGBUF_OUTPUT)],
        &[mov64_reg(1, 6)],
        &lddw_map(2, 1),
        // flags = BPF_F_CURRENT_CPU | 4 << 32 (ctxlen)
        &lddw(3, 0xffff_ffff | (4u64 << 32)),
        &[mov64_reg(4, 10), alu64_imm(BPF_ADD, 4, -8), mov64_imm(5, 4), call(hid::PERF_EVENT_OUTPUT), exit()],
    ])
}

#[test]
fn event_output_without_a_consumer_allocates_nothing_per_packet() {
    let defs = defs();
    let program = prog(emit_both(), &defs);
    let pkt = [0x11u8, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut mem = LowMem::new(FRAME).unwrap();
    let mut env = TestEnv::new();
    for jit in [false, true] {
        let maps = Arc::new(Maps::new(&defs, 2).unwrap());
        let interp = Interpreter::new(program.clone(), maps.clone()).unwrap();
        let compiled = Jit::compile(program.clone(), maps.clone()).unwrap();
        let mut run = |mem: &mut LowMem| {
            let frame = &mut mem.as_mut_slice()[..FRAME];
            frame[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(&pkt);
            let mut xdp = XdpBuff::new(frame, HEADROOM, pkt.len());
            let r = if jit { compiled.run_full(&mut xdp, &mut env) } else { interp.run_full(&mut xdp, &mut env) };
            r.unwrap().1 as i64
        };
        // Warm up until the ring is full (255 records of 16 bytes below 4096 - 1): its
        // queue of record places grows to its bound once, by doubling (amortised, not per
        // packet). Then 1000 packets, refused by the full ring.
        for _ in 0..300 {
            assert_eq!(run(&mut mem), -(libc::ENOENT as i64), "no perf listener: -ENOENT");
        }
        let n = allocations_in(|| {
            for _ in 0..1000 {
                assert_eq!(run(&mut mem), -(libc::ENOENT as i64));
            }
        });
        assert_eq!(n, 0, "jit={jit}: allocations in 1000 event-emitting runs without a consumer");
        let ring = maps.get(0).unwrap();
        assert_eq!(ring.ringbuf_query(0), 255 * 16, "the ring filled up (BPF_RB_AVAIL_DATA)");
        // Read: the ring has room again, and records are copied in without allocating.
        assert_eq!(ring.take_events().len(), 255);
        let n = allocations_in(|| {
            for _ in 0..200 {
                assert_eq!(run(&mut mem), -(libc::ENOENT as i64));
            }
        });
        assert_eq!(n, 0, "jit={jit}: allocations in 200 runs whose records the ring took");
        assert_eq!(ring.ringbuf_query(0), 200 * 16);
        assert!(ring.take_events().iter().all(|r| r.data == b"abcd"), "jit={jit}: the bytes copied into the ring");

        // With a perf listener its records arrive, whole: the program's bytes, then the
        // packet's first 4.
        maps.get(1).unwrap().attach_consumer();
        assert_eq!(run(&mut mem), 0, "a perf listener: 0");
        let ring = maps.get(0).unwrap().take_events();
        let perf = maps.get(1).unwrap().take_events();
        assert_eq!(ring.last().map(|r| r.data.clone()), Some(b"abcd".to_vec()), "jit={jit}");
        assert_eq!(perf.len(), 1);
        assert_eq!(perf[0].data, [b"abcd".as_slice(), &pkt[..4]].concat(), "jit={jit}");
    }
}
