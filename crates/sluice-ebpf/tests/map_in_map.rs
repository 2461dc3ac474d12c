//! Maps of maps without root: the verifier accepts the kernel's lookup-null check-use
//! pattern, both engines return the inner map from an outer lookup (NULL for an empty slot)
//! and reach it with the map helpers, a per-CPU outer slot is picked with
//! bpf_get_smp_processor_id, and user space inserts, replaces and deletes inner maps
//! (checked against the template as the kernel checks them).

#[path = "verifier_asm.rs"]
mod asm;

use std::sync::Arc;

use asm::{asm, map, program};
use sluice_ebpf::jit::Jit;
use sluice_ebpf::maps::{DumpScope, BPF_ANY};
use sluice_ebpf::program::{map_type, MapDef};
use sluice_ebpf::verifier::{verify, VerifyOptions};
use sluice_ebpf::{Interpreter, LowMem, Maps, NullEnv, XdpBuff};

/// [0] `by_cpu` ARRAY_OF_MAPS[4] (template ARRAY[2] u64), [1] `by_key` HASH_OF_MAPS[8]
/// (same template), [2..=4] inner arrays `a`, `b`, `c`, [5] `wrong` (8 entries: does not
/// fit the template).
fn defs() -> Vec<MapDef> {
    let template = Box::new(map("t", map_type::ARRAY, 4, 8, 2));
    let mut by_cpu = map("by_cpu", map_type::ARRAY_OF_MAPS, 4, 4, 4);
    by_cpu.inner = Some(template.clone());
    let mut by_key = map("by_key", map_type::HASH_OF_MAPS, 4, 4, 8);
    by_key.inner = Some(template);
    vec![
        by_cpu,
        by_key,
        map("a", map_type::ARRAY, 4, 8, 2),
        map("b", map_type::ARRAY, 4, 8, 2),
        map("c", map_type::ARRAY, 4, 8, 2),
        map("wrong", map_type::ARRAY, 4, 8, 8),
    ]
}

/// inner = by_cpu[cpu]; if NULL return 1 (DROP); inner[0] += 1; then
/// inner2 = by_key[frame length]; if NULL return 2; inner2[1] += 1; return 3.
const PROG: &str = "
    r6 = r1
    call 8
    *(u32 *)(r10 - 4) = r0
    r2 = r10
    r2 += -4
    r1 = map[0] ll
    call 1
    if r0 != 0 goto found
    r0 = 1
    exit
  found:
    *(u32 *)(r10 - 8) = 0
    r1 = r0
    r2 = r10
    r2 += -8
    call 1
    if r0 == 0 goto second
    r1 = 1
    atomic u64 r0 + 0 add r1
  second:
    r2 = *(u32 *)(r6 + 0)
    r3 = *(u32 *)(r6 + 4)
    r3 -= r2
    *(u32 *)(r10 - 12) = r3
    r2 = r10
    r2 += -12
    r1 = map[1] ll
    call 1
    if r0 == 0 goto none
    *(u32 *)(r10 - 16) = 1
    r1 = r0
    r2 = r10
    r2 += -16
    call 1
    if r0 == 0 goto none
    r1 = 1
    atomic u64 r0 + 0 add r1
    r0 = 3
    exit
  none:
    r0 = 2
    exit
";

fn value(maps: &Maps, name: &str, key: u32) -> u64 {
    u64::from_le_bytes(maps.by_name(name).unwrap().lookup(&key.to_le_bytes(), 0).unwrap().try_into().unwrap())
}

/// Runs `prog` on a `len`-byte frame on CPU `cpu` with both engines (fresh maps each, set
/// up by `setup`); returns the verdicts and the maps, which must agree.
fn run_both(cpu: u32, len: usize, setup: impl Fn(&Maps)) -> (u32, Arc<Maps>) {
    let p = Arc::new(program(asm(PROG), defs()));
    verify(&p, &VerifyOptions::default()).unwrap_or_else(|e| panic!("refused: {e}"));
    let mut out = Vec::new();
    for jit in [false, true] {
        let maps = Arc::new(Maps::new(&defs(), 4).unwrap());
        setup(&maps);
        let mut mem = LowMem::new(4096).unwrap();
        let frame = mem.as_mut_slice();
        let mut xdp = XdpBuff::new(frame, 256, len);
        let mut env = NullEnv { cpu, ..NullEnv::default() };
        let r = if jit {
            Jit::compile(p.clone(), maps.clone()).unwrap().run(&mut xdp, &mut env)
        } else {
            Interpreter::new(p.clone(), maps.clone()).unwrap().run(&mut xdp, &mut env)
        };
        out.push((r.unwrap().action, maps));
    }
    let (b, a) = (out.pop().unwrap(), out.pop().unwrap());
    assert_eq!(a.0, b.0, "interpreter and JIT verdicts");
    assert_eq!(a.1.dump(), b.1.dump(), "interpreter and JIT maps");
    a
}

fn idx(maps: &Maps, name: &str) -> usize {
    maps.index_of(name).unwrap()
}

#[test]
fn inner_maps_reached_through_outer_lookups_in_both_engines() {
    let setup = |m: &Maps| {
        m.set_inner(idx(m, "by_cpu"), &1u32.to_le_bytes(), idx(m, "a"), BPF_ANY).unwrap();
        m.set_inner(idx(m, "by_cpu"), &2u32.to_le_bytes(), idx(m, "b"), BPF_ANY).unwrap();
        m.set_inner(idx(m, "by_key"), &60u32.to_le_bytes(), idx(m, "c"), BPF_ANY).unwrap();
    };
    // CPU 0 has no inner map: NULL, DROP, nothing counted.
    let (v, m) = run_both(0, 60, setup);
    assert_eq!(v, 1);
    assert_eq!((value(&m, "a", 0), value(&m, "b", 0), value(&m, "c", 1)), (0, 0, 0));
    // CPU 1 counts in `a`, CPU 2 in `b`; a 60-byte frame finds `c` in the hash of maps.
    let (v, m) = run_both(1, 60, setup);
    assert_eq!(v, 3);
    assert_eq!((value(&m, "a", 0), value(&m, "b", 0), value(&m, "c", 1)), (1, 0, 1));
    let (v, m) = run_both(2, 61, setup);
    assert_eq!(v, 2, "no inner map for length 61");
    assert_eq!((value(&m, "a", 0), value(&m, "b", 0), value(&m, "c", 1)), (0, 1, 0));
}

#[test]
fn user_space_inserts_replaces_and_deletes_inner_maps() {
    let m = Maps::new(&defs(), 1).unwrap();
    let (by_cpu, by_key) = (idx(&m, "by_cpu"), idx(&m, "by_key"));
    m.set_inner(by_cpu, &0u32.to_le_bytes(), idx(&m, "a"), BPF_ANY).unwrap();
    assert_eq!(m.inner_map_name(by_cpu, &0u32.to_le_bytes()), Some("a"));
    m.set_inner(by_cpu, &0u32.to_le_bytes(), idx(&m, "b"), BPF_ANY).unwrap();
    assert_eq!(m.inner_map_name(by_cpu, &0u32.to_le_bytes()), Some("b"));
    // Templates are enforced (bpf_map_meta_equal), and maps of maps are not inner maps.
    let e = m.set_inner(by_cpu, &1u32.to_le_bytes(), idx(&m, "wrong"), BPF_ANY).unwrap_err();
    assert!(e.to_string().contains("does not match the template"), "{e}");
    assert!(m.set_inner(by_cpu, &1u32.to_le_bytes(), by_key, BPF_ANY).is_err());
    assert!(m.set_inner(by_cpu, &4u32.to_le_bytes(), idx(&m, "a"), BPF_ANY).is_err(), "past max_entries");
    assert!(m.set_inner(idx(&m, "a"), &0u32.to_le_bytes(), idx(&m, "b"), BPF_ANY).is_err(), "not a map of maps");
    // Raw values cannot be written into a map of maps.
    assert!(m.by_name("by_cpu").unwrap().update(&1u32.to_le_bytes(), &2u32.to_le_bytes(), BPF_ANY).is_err());
    m.set_inner(by_key, &77u32.to_le_bytes(), idx(&m, "c"), BPF_ANY).unwrap();
    let d = m.dump_with(DumpScope::NonZero);
    let names: Vec<Option<String>> = d[by_key].entries.iter().map(|e| e.inner_map.clone()).collect();
    assert_eq!(names, vec![Some("c".to_owned())]);
    assert_eq!(d[by_cpu].entries.len(), 1, "empty slots are absent");
    m.by_name("by_key").unwrap().delete(&77u32.to_le_bytes()).unwrap();
    m.by_name("by_cpu").unwrap().delete(&0u32.to_le_bytes()).unwrap();
    assert_eq!(m.inner_map_name(by_cpu, &0u32.to_le_bytes()), None);
    assert!(m.dump()[by_key].entries.is_empty());
}

#[test]
fn sparse_dumps_skip_zero_array_slots_of_huge_arrays() {
    let defs = [map("big", map_type::ARRAY, 4, 8, 10_000_000), map("pc", map_type::PERCPU_ARRAY, 4, 8, 4)];
    let m = Maps::new(&defs, 2).unwrap();
    m.get(0).unwrap().update(&9_999_999u32.to_le_bytes(), &5u64.to_le_bytes(), BPF_ANY).unwrap();
    m.get(0).unwrap().update(&3u32.to_le_bytes(), &1u64.to_le_bytes(), BPF_ANY).unwrap();
    // Per-CPU: a slot non-zero on CPU 1 only is dumped.
    let mut per = vec![0u8; 16];
    per[8] = 7;
    m.get(1).unwrap().update(&2u32.to_le_bytes(), &per, BPF_ANY).unwrap();
    let d = m.dump_with(DumpScope::NonZero);
    let keys: Vec<u32> = d[0].entries.iter().map(|e| u32::from_le_bytes(e.key.clone().try_into().unwrap())).collect();
    assert_eq!(keys, vec![3, 9_999_999]);
    assert_eq!(d[1].entries.len(), 1);
    assert_eq!(d[1].entries[0].values.as_ref().unwrap()[1], 7u64.to_le_bytes().to_vec());
    assert_eq!(m.get(1).unwrap().dump_with(DumpScope::All).entries.len(), 4);
}

/// A per-CPU inner map reached only through an outer map (the program never asks for its
/// CPU): both engines update the running CPU's copy.
#[test]
fn per_cpu_inner_maps_use_the_running_cpu() {
    let mut outer = map("outer", map_type::ARRAY_OF_MAPS, 4, 4, 1);
    outer.inner = Some(Box::new(map("t", map_type::PERCPU_ARRAY, 4, 8, 1)));
    let defs = vec![outer, map("pc", map_type::PERCPU_ARRAY, 4, 8, 1)];
    let src = "
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[0] ll
        call 1
        if r0 == 0 goto out
        r1 = r0
        r2 = r10
        r2 += -4
        call 1
        if r0 == 0 goto out
        r1 = 5
        atomic u64 r0 + 0 add r1
      out:
        r0 = 2
        exit";
    let p = Arc::new(program(asm(src), defs.clone()));
    verify(&p, &VerifyOptions::default()).unwrap_or_else(|e| panic!("refused: {e}"));
    for jit in [false, true] {
        let maps = Arc::new(Maps::new(&defs, 3).unwrap());
        maps.set_inner(0, &0u32.to_le_bytes(), 1, BPF_ANY).unwrap();
        let mut mem = LowMem::new(4096).unwrap();
        let mut xdp = XdpBuff::new(mem.as_mut_slice(), 256, 60);
        let mut env = NullEnv { cpu: 2, ..NullEnv::default() };
        let r = if jit {
            Jit::compile(p.clone(), maps.clone()).unwrap().run(&mut xdp, &mut env)
        } else {
            Interpreter::new(p.clone(), maps.clone()).unwrap().run(&mut xdp, &mut env)
        };
        assert_eq!(r.unwrap().action, 2);
        let per = maps.get(1).unwrap().lookup_percpu(&0u32.to_le_bytes()).unwrap();
        assert_eq!(per, vec![vec![0; 8], vec![0; 8], 5u64.to_le_bytes().to_vec()], "jit {jit}: CPU 2's copy");
    }
}
