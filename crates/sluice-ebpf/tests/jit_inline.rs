//! The JIT's fast paths, each against the interpreter (differential, every observable) and
//! against the JIT's own statistics: inlined ARRAY / PERCPU_ARRAY lookups, runs of programs
//! that call no helper, the stack the verifier's depths give, reading the CPU only when the
//! program can use it, and the compile API (`compile` verifies, `compile_verified`).

mod jit_common;

use std::sync::Arc;

use jit_common::*;
use sluice_ebpf::asm::*;
use sluice_ebpf::helpers::id as hid;
use sluice_ebpf::insn::*;
use sluice_ebpf::jit::{Jit, JitError, JitProgram};
use sluice_ebpf::program::map_type;
use sluice_ebpf::verifier::{verify, VerifyOptions};
use sluice_ebpf::{Interpreter, LowMem, MapDef, Maps, NullEnv, RunErrorKind, XdpBuff};

fn compiled(insns: &[Insn], defs: &[MapDef], ncpus: u32) -> JitProgram {
    Jit::compile(prog(insns.to_vec(), defs), Arc::new(Maps::new(defs, ncpus).unwrap())).unwrap()
}

fn same_runs(insns: &[Insn], defs: &[MapDef], ncpus: u32, inputs: &[Input]) -> Vec<Snapshot> {
    match diff_runs(insns.to_vec(), defs, ncpus, &|_| {}, inputs) {
        Diff::Same(v) => v,
        Diff::Refused(e) => panic!("refused: {e}"),
    }
}

/// A 64-byte packet starting with `key` (little endian).
fn keyed(key: u32) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[..4].copy_from_slice(&key.to_le_bytes());
    p
}

/// Key = the packet's first 4 bytes, copied to the stack; looks it up in map 0; if found,
/// adds 1 to the value's first byte and 3 to its last; returns 7 (found), 8 (NULL) or 9
/// (short packet).
fn lookup_and_bump(value_size: u32) -> Vec<Insn> {
    let last = value_size as i16 - 1;
    flat(&[
        &[ldx(BPF_W, 6, 1, 0), ldx(BPF_W, 7, 1, 4), mov64_reg(8, 6), alu64_imm(BPF_ADD, 8, 4), jmp_reg(BPF_JGT, 8, 7, 18)],
        &[ldx(BPF_W, 9, 6, 0), stx(BPF_W, 10, 9, -4), mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -4)],
        &lddw_map(1, 0),
        &[call(hid::MAP_LOOKUP_ELEM), jmp_imm(BPF_JEQ, 0, 0, 8)],
        &[ldx(BPF_B, 3, 0, 0), alu64_imm(BPF_ADD, 3, 1), stx(BPF_B, 0, 3, 0)],
        &[ldx(BPF_B, 3, 0, last), alu64_imm(BPF_ADD, 3, 3), stx(BPF_B, 0, 3, last)],
        &[mov64_imm(0, 7), exit(), mov64_imm(0, 8), exit(), mov64_imm(0, 9), exit()],
    ])
}

fn keys(n: u32) -> Vec<u32> {
    let mut k = vec![0, 1, n / 2, n - 1, n, n + 1, 0x7fff_ffff, 0x8000_0000, u32::MAX];
    k.sort_unstable();
    k.dedup();
    k
}

/// Inlined ARRAY lookups: every key in and out of range, value sizes that are and are not
/// multiples of 8, one and several entries; the same verdicts and map contents as the
/// helper in the interpreter.
#[test]
fn array_lookups_are_inlined_exactly() {
    for (vs, n) in [(4, 1), (8, 1), (3, 5), (12, 3), (16, 7), (24, 2), (8, 1000)] {
        let defs = [MapDef::new("a", map_type::ARRAY, 4, vs, n)];
        let p = lookup_and_bump(vs);
        let j = compiled(&p, &defs, 1);
        assert_eq!(j.inlined_lookups(), 1, "vs {vs} n {n}");
        assert!(!j.calls_helpers());
        let mut inputs: Vec<Input> = keys(n).into_iter().map(|k| Input::pkt(&keyed(k))).collect();
        inputs.extend(inputs.clone());
        inputs.push(Input::pkt(&[1, 0, 0]));
        let v = same_runs(&p, &defs, 1, &inputs);
        assert_eq!(v[0].r0(), 7);
        assert_eq!(v.last().unwrap().r0(), 9);
    }
}

/// Inlined PERCPU_ARRAY lookups give the run's CPU's copy.
#[test]
fn percpu_array_lookups_use_the_run_cpu() {
    for (vs, n, ncpus) in [(8, 1, 4), (12, 3, 3), (5, 2, 1)] {
        let defs = [MapDef::new("pc", map_type::PERCPU_ARRAY, 4, vs, n)];
        let p = lookup_and_bump(vs);
        let j = compiled(&p, &defs, ncpus);
        assert_eq!(j.inlined_lookups(), 1);
        assert!(!j.calls_helpers());
        let mut inputs = Vec::new();
        for cpu in 0..ncpus {
            for k in keys(n) {
                inputs.push(Input { cpu, ..Input::pkt(&keyed(k)) });
            }
        }
        inputs.push(Input { cpu: ncpus - 1, ..Input::pkt(&keyed(0)) });
        same_runs(&p, &defs, ncpus, &inputs);
    }
}

/// Keys in the packet and in a map value, the map reaching r1 through a register copy; all
/// inlined.
#[test]
fn inlined_lookups_with_other_key_memory() {
    let defs = [MapDef::new("a", map_type::ARRAY, 4, 8, 4), MapDef::new(".bss", map_type::ARRAY, 4, 8, 1)];
    let p = flat(&[
        // r6 = data, r7 = data_end; short packet: return 9.
        &[ldx(BPF_W, 6, 1, 0), ldx(BPF_W, 7, 1, 4), mov64_reg(8, 6), alu64_imm(BPF_ADD, 8, 8), jmp_reg(BPF_JGT, 8, 7, 21)],
        // Key in the packet; map via r9.
        &lddw_map(9, 0),
        &[mov64_reg(1, 9), mov64_reg(2, 6), call(hid::MAP_LOOKUP_ELEM), jmp_imm(BPF_JEQ, 0, 0, 1), st(BPF_DW, 0, 0, 11)],
        // Key in .bss (bytes 4..8 of the packet stored there first).
        &lddw_map_value(8, 1, 0),
        &[ldx(BPF_W, 3, 6, 4), stx(BPF_W, 8, 3, 0)],
        &lddw_map(1, 0),
        &[mov64_reg(2, 8), call(hid::MAP_LOOKUP_ELEM), jmp_imm(BPF_JEQ, 0, 0, 3), ldx(BPF_DW, 4, 0, 0), alu64_imm(BPF_ADD, 4, 5)],
        &[stx(BPF_DW, 0, 4, 0)],
        &[mov64_imm(0, 2), exit()],
        &[mov64_imm(0, 9), exit()],
    ]);
    let j = compiled(&p, &defs, 1);
    assert_eq!(j.inlined_lookups(), 2);
    assert!(!j.calls_helpers());
    let mut inputs = Vec::new();
    for (a, b) in [(0u32, 1u32), (3, 3), (4, 0), (1, 9), (u32::MAX, 2)] {
        let mut pkt = keyed(a);
        pkt[4..8].copy_from_slice(&b.to_le_bytes());
        inputs.push(Input::pkt(&pkt));
    }
    inputs.push(Input::pkt(&[0; 7]));
    let v = same_runs(&p, &defs, 1, &inputs);
    assert_eq!(v[4].r0(), 2);
    assert_eq!(v[5].r0(), 9);
}

/// Where r1 is not known to be the map at the call (set in another basic block), or the map is
/// not an array, the helper is called.
#[test]
fn other_lookups_call_the_helper() {
    let defs = [MapDef::new("a", map_type::ARRAY, 4, 8, 4), MapDef::new("h", map_type::HASH, 4, 8, 4)];
    // `goto +0` makes the call start a new block.
    let p = flat(&[
        &[st(BPF_W, 10, -4, 1)],
        &lddw_map(1, 0),
        &[ja(0), mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -4), call(hid::MAP_LOOKUP_ELEM), mov64_imm(6, 0)],
        &[jmp_imm(BPF_JEQ, 0, 0, 1), ldx(BPF_DW, 6, 0, 0)],
        &lddw_map(1, 1),
        &[mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -4), call(hid::MAP_LOOKUP_ELEM)],
        &[jmp_imm(BPF_JEQ, 0, 0, 1), alu64_imm(BPF_ADD, 6, 100)],
        &[mov64_reg(0, 6), exit()],
    ]);
    let j = compiled(&p, &defs, 1);
    assert_eq!(j.inlined_lookups(), 0);
    assert!(j.calls_helpers());
    same_runs(&p, &defs, 1, &[Input::pkt(&[0; 64]), Input::pkt(&[0; 64])]);
}

/// An exit ends its basic block after itself (the next instruction starts a new one), not
/// before: a lookup right before a function's exit, with r1 set earlier in that block, is
/// still inlined (here a subprogram returning the value pointer to its caller, which bumps
/// the value), and gives what the helper gives.
#[test]
fn lookup_right_before_an_exit_is_inlined() {
    let defs = [MapDef::new("a", map_type::ARRAY, 4, 8, 4)];
    let p = flat(&[
        // main: key = the packet's first 4 bytes (short packet: 9); r0 = f(&key);
        // NULL: 8; else bump the value's first byte, 7.
        &[ldx(BPF_W, 6, 1, 0), ldx(BPF_W, 7, 1, 4), mov64_reg(8, 6), alu64_imm(BPF_ADD, 8, 4), jmp_reg(BPF_JGT, 8, 7, 13)],
        &[ldx(BPF_W, 9, 6, 0), stx(BPF_W, 10, 9, -4), mov64_reg(1, 10), alu64_imm(BPF_ADD, 1, -4), call_local(10)],
        &[jmp_imm(BPF_JEQ, 0, 0, 5), ldx(BPF_B, 3, 0, 0), alu64_imm(BPF_ADD, 3, 1), stx(BPF_B, 0, 3, 0)],
        &[mov64_imm(0, 7), exit(), mov64_imm(0, 8), exit(), mov64_imm(0, 9), exit()],
        // f(key ptr) at 20: return bpf_map_lookup_elem(&a, key), the call right before the exit.
        &[mov64_reg(2, 1)],
        &lddw_map(1, 0),
        &[call(hid::MAP_LOOKUP_ELEM), exit()],
    ]);
    let j = compiled(&p, &defs, 1);
    assert_eq!(j.inlined_lookups(), 1);
    assert!(!j.calls_helpers());
    let mut inputs: Vec<Input> = keys(4).into_iter().map(|k| Input::pkt(&keyed(k))).collect();
    inputs.push(Input::pkt(&keyed(3)));
    inputs.push(Input::pkt(&[1, 0, 0]));
    let v = same_runs(&p, &defs, 1, &inputs);
    assert_eq!(v[0].r0(), 7, "key 0 found");
    assert_eq!(v[4].r0(), 8, "key 4 out of range");
    assert_eq!(v.last().unwrap().r0(), 9);
}

/// A program without helper calls runs with the small setup: XDP_REDIRECT without a target
/// (a failed redirect), offsets untouched, packet writes kept.
#[test]
fn helper_free_runs() {
    let p = [mov64_imm(0, XDP_REDIRECT as i32), exit()];
    let j = compiled(&p, &[], 1);
    assert!(!j.calls_helpers());
    assert_eq!(j.stack_bytes(), 0);
    let s = same(p.to_vec());
    assert_eq!(s.outcome().redirect, None);
    let p = flat(&[
        &[ldx(BPF_W, 2, 1, 0), ldx(BPF_W, 3, 1, 4), mov64_reg(4, 2), alu64_imm(BPF_ADD, 4, 2), jmp_reg(BPF_JGT, 4, 3, 1)],
        &[st(BPF_H, 2, 0, 0x4142), mov64_imm(0, XDP_TX as i32), exit()],
    ]);
    let s = same_pkt(p, &[0; 60]);
    assert_eq!(&s.frame[HEADROOM..HEADROOM + 2], &[0x42, 0x41]);
}

/// Helpers get pointers into the deepest frame of a call chain and into a caller's frame:
/// the stack declared to them (from the verifier's depths) covers exactly that.
#[test]
fn stack_from_verifier_depths_covers_helper_pointers() {
    let defs = [MapDef::new("h", map_type::HASH, 4, 8, 8)];
    let p = flat(&[
        // main: key 7 at r10-8, f(r10 - 8); 2 + the update's result.
        &[st(BPF_W, 10, -8, 7), mov64_reg(1, 10), alu64_imm(BPF_ADD, 1, -8), call_local(2), alu64_imm(BPF_ADD, 0, 2), exit()],
        // f(key ptr) at 6: g(key ptr), uses 16 bytes itself.
        &[st(BPF_DW, 10, -16, 1), call_local(1), exit()],
        // g(key ptr) at 9: value at r10-488 (its deepest byte: the verifier allows 512 bytes
        // over the chain); update h[*key] = 77; then h[5] = 78 with the key at r10-480.
        &[st(BPF_DW, 10, -488, 77), mov64_reg(2, 1)],
        &lddw_map(1, 0),
        &[mov64_reg(3, 10), alu64_imm(BPF_ADD, 3, -488), mov64_imm(4, 0), call(hid::MAP_UPDATE_ELEM), mov64_reg(6, 0)],
        &[st(BPF_DW, 10, -480, 5), st(BPF_DW, 10, -488, 78)],
        &lddw_map(1, 0),
        &[mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -480), mov64_reg(3, 10), alu64_imm(BPF_ADD, 3, -488), mov64_imm(4, 0)],
        &[call(hid::MAP_UPDATE_ELEM), alu64_reg(BPF_ADD, 0, 6), exit()],
    ]);
    let j = compiled(&p, &defs, 1);
    assert_eq!(j.stack_bytes(), 2 * 512 + 488);
    let v = same_runs(&p, &defs, 1, &[Input::pkt(&[0; 64])]);
    assert_eq!(v[0].r0(), 2);
    let m = v[0].maps.iter().find(|m| m.name == "h").unwrap();
    assert_eq!(m.entries.len(), 2);
}

/// `Env::cpu_id` is only read (and checked) for programs that can use the CPU; the
/// interpreter always checks it.
#[test]
fn cpu_only_read_when_used() {
    let mut mem = LowMem::new(2048).unwrap();
    let run = |j: &JitProgram, mem: &mut LowMem, cpu: u32| {
        let mut xdp = XdpBuff::new(mem.as_mut_slice(), HEADROOM, 64);
        j.run(&mut xdp, &mut NullEnv::on_cpu(cpu))
    };
    // Per-CPU map: CPU 4 of 4 is refused, like in the interpreter.
    let defs = [MapDef::new("pc", map_type::PERCPU_ARRAY, 4, 8, 1)];
    let p = lookup_and_bump(8);
    let j = compiled(&p, &defs, 4);
    assert_eq!(run(&j, &mut mem, 4).unwrap_err().kind, RunErrorKind::BadCpu { cpu: 4, ncpus: 4 });
    assert!(run(&j, &mut mem, 3).is_ok());
    let i = Interpreter::new(prog(p, &defs), Arc::new(Maps::new(&defs, 4).unwrap())).unwrap();
    let mut xdp = XdpBuff::new(mem.as_mut_slice(), HEADROOM, 64);
    assert_eq!(i.run(&mut xdp, &mut NullEnv::on_cpu(4)).unwrap_err().kind, RunErrorKind::BadCpu { cpu: 4, ncpus: 4 });
    // bpf_get_smp_processor_id reads it too.
    let j = compiled(&[call(hid::GET_SMP_PROCESSOR_ID), exit()], &[], 2);
    assert!(run(&j, &mut mem, 2).is_err());
    assert_eq!(run(&j, &mut mem, 1).unwrap().action, 1);
    // A program that cannot look at the CPU never asks for it (key 0: found).
    let defs = [MapDef::new("a", map_type::ARRAY, 4, 8, 1)];
    let j = compiled(&lookup_and_bump(8), &defs, 4);
    assert_eq!(run(&j, &mut mem, 9).unwrap().action, 7);
}

/// `compile` verifies; `compile_verified` takes the verifier's result; both give the same
/// program. The maps are still checked against the program's definitions.
#[test]
fn compile_api() {
    let defs = [MapDef::new("a", map_type::ARRAY, 4, 16, 2)];
    let p = prog(lookup_and_bump(16), &defs);
    let maps = Arc::new(Maps::new(&defs, 1).unwrap());
    let verified = verify(&p, &VerifyOptions::default()).unwrap();
    let a = Jit::compile_verified(&verified, maps.clone()).unwrap();
    let b = Jit::compile(p.clone(), maps.clone()).unwrap();
    assert_eq!(a.stack_bytes(), b.stack_bytes());
    assert_eq!(a.stack_bytes(), 8);
    let mut mem = LowMem::new(2048).unwrap();
    for j in [&a, &b] {
        let buf = mem.as_mut_slice();
        buf[HEADROOM..HEADROOM + 4].copy_from_slice(&1u32.to_le_bytes());
        let mut xdp = XdpBuff::new(buf, HEADROOM, 64);
        assert_eq!(j.run_full(&mut xdp, &mut NullEnv::new()).unwrap().1, 7);
    }
    assert_eq!(maps.get(0).unwrap().lookup(&1u32.to_le_bytes(), 0).unwrap()[..2], [2, 0]);
    // Maps that do not match the program.
    let other = Arc::new(Maps::new(&[MapDef::new("b", map_type::ARRAY, 4, 16, 2)], 1).unwrap());
    assert!(matches!(Jit::compile_verified(&verified, other), Err(JitError::Maps(_))));
    // A program the verifier refuses (reads below the stack).
    let e = unverified(vec![ldx(BPF_DW, 0, 10, -520), exit()], &[]);
    assert_eq!(e.insn, 0);
}

/// A `ja` target starts a block: the map known to be in r1 on the fall-through into it is
/// not the map of the path that jumps there. Queue 1 jumps with map 0 in r1, queue 0 falls
/// in with map 1; the lookup after the join must read each path's own map (11 and 22), as
/// the interpreter does, not inline map 1 for both.
#[test]
fn a_jump_target_forgets_the_map_known_before_it() {
    let defs = [MapDef::new("m0", map_type::ARRAY, 4, 8, 1), MapDef::new("m1", map_type::ARRAY, 4, 8, 1)];
    let p = flat(&[
        &[ldx(BPF_W, 6, 1, 16), st(BPF_W, 10, -4, 0), jmp_imm(BPF_JEQ, 6, 0, 3)],
        &lddw_map(1, 0),
        &[ja(2)],
        &lddw_map(1, 1),
        &[mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -4), call(hid::MAP_LOOKUP_ELEM), jmp_imm(BPF_JEQ, 0, 0, 2)],
        &[ldx(BPF_B, 0, 0, 0), exit(), mov64_imm(0, 0), exit()],
    ]);
    let setup = |m: &Maps| {
        m.get(0).unwrap().update(&0u32.to_le_bytes(), &[11, 0, 0, 0, 0, 0, 0, 0], 0).unwrap();
        m.get(1).unwrap().update(&0u32.to_le_bytes(), &[22, 0, 0, 0, 0, 0, 0, 0], 0).unwrap();
    };
    let inputs = [Input { rxq: 1, ..Input::pkt(&[0u8; 64]) }, Input { rxq: 0, ..Input::pkt(&[0u8; 64]) }];
    match diff_runs(p, &defs, 1, &setup, &inputs) {
        Diff::Same(v) => assert_eq!((v[0].r0(), v[1].r0()), (11, 22)),
        Diff::Refused(e) => panic!("refused: {e}"),
    }
}

/// A packet of a burst: frame index and bounds within it.
#[derive(Debug, Clone, Copy)]
struct Desc {
    frame: u32,
    data: u16,
    len: u16,
}

impl sluice_ebpf::FrameDesc for Desc {
    fn frame(&self) -> u32 {
        self.frame
    }
    fn data(&self) -> usize {
        self.data as usize
    }
    fn data_len(&self) -> usize {
        self.len as usize
    }
    fn set_bounds(&mut self, data: usize, len: usize) {
        self.data = data as u16;
        self.len = len as u16;
    }
}

/// A burst of a helper-free program runs on one native stack sized for the program's call
/// chain: here 512 + 256 bytes (main and a function using 256), the 1 KiB class. Every
/// packet gets the outcome and bytes a run of its own gives, and the values the function
/// keeps at the bottom of its frame.
#[test]
fn a_helper_free_burst_has_the_stack_of_its_call_chain() {
    let p = flat(&[
        // main: 8 bytes or r0 = 1; the first word at r10-8; r0 = f(word) + word = 5 * word;
        // its low byte written to the packet; XDP action r0 & 3.
        &[ldx(BPF_W, 2, 1, 0), ldx(BPF_W, 3, 1, 4), mov64_reg(4, 2), alu64_imm(BPF_ADD, 4, 8), jmp_reg(BPF_JGT, 4, 3, 9)],
        &[ldx(BPF_DW, 1, 2, 0), stx(BPF_DW, 10, 1, -8), mov64_reg(6, 2), call_local(7)],
        &[ldx(BPF_DW, 1, 10, -8), alu64_reg(BPF_ADD, 0, 1), stx(BPF_B, 6, 0, 0), alu64_imm(BPF_AND, 0, 3), exit()],
        &[mov64_imm(0, 1), exit()],
        // f(w) at 16: w at r10-256, 3w at r10-128; returns their sum.
        &[stx(BPF_DW, 10, 1, -256), alu64_imm(BPF_MUL, 1, 3), stx(BPF_DW, 10, 1, -128)],
        &[ldx(BPF_DW, 0, 10, -256), ldx(BPF_DW, 2, 10, -128), alu64_reg(BPF_ADD, 0, 2), exit()],
    ]);
    let j = compiled(&p, &[], 1);
    assert!(!j.calls_helpers());
    assert!((513..=1024).contains(&j.stack_bytes()), "stack {}", j.stack_bytes());
    const FRAME: usize = 2048;
    let words: [u64; 6] = [0, 1, 2, 0x0102_0304_0506_0708, u64::MAX, 0x8000_0000_0000_0003];
    let mut pkts: Vec<Vec<u8>> = words.iter().map(|w| [w.to_le_bytes().as_slice(), &[0xaa; 56]].concat()).collect();
    pkts.push(vec![9, 9, 9, 9]);
    // One run per packet.
    let mut want = Vec::new();
    for p in &pkts {
        let mut mem = LowMem::new(FRAME).unwrap();
        mem.as_mut_slice()[HEADROOM..HEADROOM + p.len()].copy_from_slice(p);
        let mut xdp = XdpBuff::new(&mut mem.as_mut_slice()[..FRAME], HEADROOM, p.len());
        let out = j.run(&mut xdp, &mut NullEnv::default()).unwrap();
        want.push((out, xdp.packet().to_vec()));
    }
    for (w, (out, bytes)) in words.iter().zip(&want) {
        let five = w.wrapping_mul(5);
        assert_eq!((out.action as u64, bytes[0]), (five & 3, five as u8), "word {w:#x}");
    }
    assert_eq!(want[6].0.action, 1);
    // The burst.
    let mut mem = LowMem::new(FRAME * pkts.len()).unwrap();
    let mut descs = Vec::new();
    for (i, p) in pkts.iter().enumerate() {
        let start = i * FRAME + HEADROOM;
        mem.as_mut_slice()[start..start + p.len()].copy_from_slice(p);
        descs.push(Desc { frame: i as u32, data: HEADROOM as u16, len: p.len() as u16 });
    }
    let mut out = vec![sluice_ebpf::RunOutcome { action: 99, redirect: None }; descs.len()];
    let faults = {
        let mut region = sluice_ebpf::FrameRegion::new(mem.as_mut_slice(), FRAME).unwrap();
        let ctx = sluice_ebpf::BurstCtx { ingress_ifindex: 0, rx_queue_index: 0 };
        j.run_burst(&mut region, &mut descs, ctx, &mut NullEnv::default(), &mut out)
    };
    assert_eq!(faults.count, 0);
    for (i, (w, bytes)) in want.iter().enumerate() {
        let start = i * FRAME + HEADROOM;
        assert_eq!(out[i], *w, "packet {i} outcome");
        assert_eq!(&mem.as_slice()[start..start + bytes.len()], &bytes[..], "packet {i} bytes");
    }
}

/// A program that reads stack it never wrote (a privileged loader's right: it reads zeros)
/// gets every frame of its deepest call chain zeroed: the chain is found whichever of a
/// function's calls leads to it (here main calls a leaf first, then g, which calls h).
#[test]
fn the_zeroed_stack_covers_the_deepest_chain_not_the_first_call() {
    let p = [
        mov64_imm(1, 6),
        call_local(3), // f
        call_local(4), // g
        alu64_imm(BPF_AND, 0, 3),
        exit(),
        // f: a leaf.
        mov64_imm(0, 1),
        exit(),
        // g: calls h.
        call_local(1),
        exit(),
        // h: reads a stack word it never wrote: zero.
        ldx(BPF_DW, 0, 10, -8),
        exit(),
    ];
    let j = compiled(&p, &[], 1);
    assert_eq!(j.stack_bytes(), 3 * 512, "three frames: main, g, h");
    let mut mem = LowMem::new(4096).unwrap();
    let mut xdp = XdpBuff::new(&mut mem.as_mut_slice()[..2048], 256, 64);
    assert_eq!(j.run(&mut xdp, &mut NullEnv::default()).unwrap().action, 0, "h read a zero");
}

/// A `goto` target starts a block: the lookup there is reached with r1 = map b (by the
/// goto) or map a (falling in), so it is not inlined as either, and each path reads its
/// own map's value (the first packet byte 0 takes the goto).
#[test]
fn a_goto_target_starts_a_block_for_the_known_map() {
    let defs = [MapDef::new("a", map_type::ARRAY, 4, 8, 1), MapDef::new("b", map_type::ARRAY, 4, 8, 1)];
    let p = flat(&[
        &[ldx(BPF_W, 2, 1, 0), ldx(BPF_W, 3, 1, 4), mov64_reg(4, 2), alu64_imm(BPF_ADD, 4, 1), jmp_reg(BPF_JGT, 4, 3, 14)],
        &[ldx(BPF_B, 5, 2, 0), jmp_imm(BPF_JNE, 5, 0, 3)],
        &lddw_map(1, 1),
        &[ja(2)],
        &lddw_map(1, 0),
        // lookup: key 0 on the stack.
        &[st(BPF_W, 10, -4, 0), mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -4), call(hid::MAP_LOOKUP_ELEM)],
        &[jmp_imm(BPF_JEQ, 0, 0, 2), ldx(BPF_DW, 0, 0, 0), exit()],
        &[mov64_imm(0, 0), exit()],
    ]);
    let setup = |m: &Maps| {
        m.get(0).unwrap().update(&0u32.to_le_bytes(), &11u64.to_le_bytes(), 0).unwrap();
        m.get(1).unwrap().update(&0u32.to_le_bytes(), &22u64.to_le_bytes(), 0).unwrap();
    };
    let v = match diff_runs(p.clone(), &defs, 1, &setup, &[Input::pkt(&[0; 64]), Input::pkt(&[1; 64])]) {
        Diff::Same(v) => v,
        Diff::Refused(e) => panic!("refused: {e}"),
    };
    assert_eq!((v[0].r0(), v[1].r0()), (22, 11), "b by the goto, a falling in");
}

/// Runs `p` (helper-free) over a burst of frames holding `lens` zero bytes each, ingress
/// ifindex 5 and queue 3; the outcomes' actions.
fn burst_actions(p: &[sluice_ebpf::insn::Insn], lens: &[usize]) -> Vec<u32> {
    const FRAME: usize = 2048;
    const HEADROOM: usize = 256;
    let j = compiled(p, &[], 1);
    assert!(!j.calls_helpers());
    let mut mem = LowMem::new(FRAME * lens.len()).unwrap();
    let mut descs: Vec<Desc> =
        lens.iter().enumerate().map(|(i, &len)| Desc { frame: i as u32, data: HEADROOM as u16, len: len as u16 }).collect();
    let mut out = vec![sluice_ebpf::RunOutcome { action: 99, redirect: None }; descs.len()];
    let mut region = sluice_ebpf::FrameRegion::new(mem.as_mut_slice(), FRAME).unwrap();
    let ctx = sluice_ebpf::BurstCtx { ingress_ifindex: 5, rx_queue_index: 3 };
    let faults = j.run_burst(&mut region, &mut descs, ctx, &mut NullEnv::default(), &mut out);
    assert_eq!(faults.count, 0);
    out.iter().map(|o| o.action).collect()
}

/// In a burst a program that reads stack before writing it reads zeros for every packet,
/// not the 7 the previous packet left there (the stack is zeroed per packet, not per burst).
#[test]
fn a_burst_zeroes_the_stack_for_every_packet_of_a_program_that_reads_it_unwritten() {
    let p = [ldx(BPF_DW, 0, 10, -8), st(BPF_DW, 10, -8, 7), exit()];
    assert_eq!(burst_actions(&p, &[64, 64, 64]), vec![0, 0, 0]);
}

/// Each packet of a burst sees its own data and data_end, and the burst's ingress ifindex
/// and queue: r0 = (data_end - data) + 100 * ingress_ifindex + 1000 * rx_queue_index.
#[test]
fn a_burst_gives_each_packet_its_own_bounds_and_the_bursts_ifindex_and_queue() {
    let p = [
        ldx(BPF_W, 2, 1, 0),
        ldx(BPF_W, 3, 1, 4),
        ldx(BPF_W, 4, 1, 12),
        ldx(BPF_W, 5, 1, 16),
        mov64_reg(0, 3),
        alu64_reg(BPF_SUB, 0, 2),
        alu64_imm(BPF_MUL, 4, 100),
        alu64_reg(BPF_ADD, 0, 4),
        alu64_imm(BPF_MUL, 5, 1000),
        alu64_reg(BPF_ADD, 0, 5),
        exit(),
    ];
    assert_eq!(burst_actions(&p, &[60, 1500, 64]), vec![3560, 5000, 3564]);
}

/// A helper call does not end the basic block for the known map: r6 keeps the map across
/// `bpf_get_prandom_u32` (R6-R9 are callee-saved), so the lookup after it with r1 = r6 is
/// inlined (the kernel's verifier tracks the map per call site whatever lies between), and
/// reads what the helper would.
#[test]
fn a_map_kept_in_a_callee_saved_register_across_a_helper_call_is_inlined() {
    let defs = [MapDef::new("a", map_type::ARRAY, 4, 8, 2)];
    let p = flat(&[
        &lddw_map(6, 0),
        &[call(hid::GET_PRANDOM_U32), mov64_reg(1, 6), st(BPF_W, 10, -4, 1), mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -4)],
        &[call(hid::MAP_LOOKUP_ELEM), jmp_imm(BPF_JEQ, 0, 0, 2), ldx(BPF_DW, 0, 0, 0), exit()],
        &[mov64_imm(0, 0), exit()],
    ]);
    let j = compiled(&p, &defs, 1);
    assert_eq!(j.inlined_lookups(), 1);
    let setup = |m: &Maps| m.get(0).unwrap().update(&1u32.to_le_bytes(), &33u64.to_le_bytes(), 0).unwrap();
    let v = match diff_runs(p.clone(), &defs, 1, &setup, &[Input::pkt(&[0; 64])]) {
        Diff::Same(v) => v,
        Diff::Refused(e) => panic!("refused: {e}"),
    };
    assert_eq!(v[0].r0(), 33);
}

/// A conditional jump's target starts a block: the lookup there is reached with r1 = map b
/// (by the jump) or map a (falling in), so it is inlined as neither, and each path reads
/// its own map's value (the first packet byte non-zero takes the jump).
#[test]
fn a_conditional_jump_target_starts_a_block_for_the_known_map() {
    let defs = [MapDef::new("a", map_type::ARRAY, 4, 8, 1), MapDef::new("b", map_type::ARRAY, 4, 8, 1)];
    let p = flat(&[
        &[ldx(BPF_W, 2, 1, 0), ldx(BPF_W, 3, 1, 4), mov64_reg(4, 2), alu64_imm(BPF_ADD, 4, 1), jmp_reg(BPF_JGT, 4, 3, 13)],
        &[ldx(BPF_B, 5, 2, 0)],
        &lddw_map(1, 1),
        &[jmp_imm(BPF_JNE, 5, 0, 2)],
        &lddw_map(1, 0),
        // lookup: key 0 on the stack.
        &[st(BPF_W, 10, -4, 0), mov64_reg(2, 10), alu64_imm(BPF_ADD, 2, -4), call(hid::MAP_LOOKUP_ELEM)],
        &[jmp_imm(BPF_JEQ, 0, 0, 2), ldx(BPF_DW, 0, 0, 0), exit()],
        &[mov64_imm(0, 0), exit()],
    ]);
    assert_eq!(compiled(&p, &defs, 1).inlined_lookups(), 0, "inlined as neither map");
    let setup = |m: &Maps| {
        m.get(0).unwrap().update(&0u32.to_le_bytes(), &11u64.to_le_bytes(), 0).unwrap();
        m.get(1).unwrap().update(&0u32.to_le_bytes(), &22u64.to_le_bytes(), 0).unwrap();
    };
    let v = match diff_runs(p.clone(), &defs, 1, &setup, &[Input::pkt(&[0; 64]), Input::pkt(&[1; 64])]) {
        Diff::Same(v) => v,
        Diff::Refused(e) => panic!("refused: {e}"),
    };
    assert_eq!((v[0].r0(), v[1].r0()), (11, 22), "a falling in, b by the jump");
}
