//! Differential tests, JIT vs interpreter, on real clang-compiled objects: the runtime's own
//! test objects (`tests/progs/*.o`) and the repository's XDP corpus (`bpf/obj/*.o`: drop
//! counter, macswap, protocol counter with a bpf-to-bpf call, IP-in-IP encap with
//! adjust_head, LRU rate limiter, devmap redirect, ...). Every XDP program of every object runs
//! over the packet set in both engines, each with its own copy of the object's maps; verdicts,
//! redirect targets, output bytes, buffer offsets, map contents and env use must be identical
//! after every packet.

mod jit_common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jit_common::*;
use sluice_ebpf::jit::Jit;
use sluice_ebpf::maps::BPF_ANY;
use sluice_ebpf::program::map_type;
use sluice_ebpf::{Interpreter, LoadOptions, Maps, Object};

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn objects_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "o")).collect();
    v.sort();
    v
}

/// Ethernet + IPv4 + UDP, `total` bytes.
fn udp4(src: [u8; 4], dst: [u8; 4], total: usize) -> Vec<u8> {
    let mut p = vec![0u8; total.max(42)];
    p[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    p[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (p.len() - 14) as u16;
    p[14] = 0x45;
    p[16..18].copy_from_slice(&ip_len.to_be_bytes());
    p[22] = 64;
    p[23] = 17;
    p[26..30].copy_from_slice(&src);
    p[30..34].copy_from_slice(&dst);
    p[34..36].copy_from_slice(&1234u16.to_be_bytes());
    p[36..38].copy_from_slice(&53u16.to_be_bytes());
    p[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    p
}

/// The corpus packet set plus synthetic frames (runts, VLAN, many sources, odd lengths).
fn packets() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let dir = manifest().join("../../bpf/packets");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        let mut files: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "bin")).collect();
        files.sort();
        for f in files {
            v.push(std::fs::read(f).unwrap());
        }
    }
    for i in 0..12u8 {
        v.push(udp4([10, 0, 0, i % 5], [10, 0, 0, 1], 60 + i as usize * 37));
    }
    let base = udp4([192, 168, 1, 1], [10, 0, 0, 1], 64);
    for n in [0usize, 1, 10, 13, 14, 15, 20, 33, 34, 41] {
        v.push(base[..n].to_vec());
    }
    let mut tagged = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0x00, 0x00, 0x05];
    tagged.extend_from_slice(&base[12..]);
    v.push(tagged);
    let mut arp = base.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    v.push(arp);
    let mut v6 = vec![0u8; 80];
    v6[12..14].copy_from_slice(&[0x86, 0xdd]);
    v6[14] = 0x60;
    v6[20] = 17;
    v.push(v6);
    v
}

/// Identical map contents for both engines: redirect maps get targets, small hash maps of u32
/// get a few entries (e.g. a verdict table), so more program paths run.
fn setup(maps: &Maps) {
    for m in maps.iter() {
        let d = m.def();
        let n = d.max_entries.min(4);
        let val = |x: u32| {
            let mut v = vec![0u8; d.value_size as usize];
            let b = x.to_le_bytes();
            let k = b.len().min(v.len());
            v[..k].copy_from_slice(&b[..k]);
            v
        };
        match d.map_type {
            map_type::DEVMAP | map_type::XSKMAP => {
                for k in 0..n {
                    let _ = m.update(&k.to_le_bytes(), &val(k + 1), BPF_ANY);
                }
            }
            map_type::DEVMAP_HASH => {
                for k in [1u32, 3, 300] {
                    let _ = m.update(&k.to_le_bytes(), &val(k + 5), BPF_ANY);
                }
            }
            map_type::CPUMAP => {
                for k in 0..n {
                    let _ = m.update(&k.to_le_bytes(), &val(64), BPF_ANY);
                }
            }
            map_type::HASH if d.key_size == 4 && d.value_size == 4 => {
                for (k, x) in [(3u32, 1u32), (5, 9), (1, 2)] {
                    let _ = m.update(&k.to_le_bytes(), &val(x), BPF_ANY);
                }
            }
            _ => {}
        }
    }
}

/// Loads an object as a loader does: `.rodata` frozen (the JIT's verifier reads it).
fn load(path: &Path) -> Option<Object> {
    let opts = LoadOptions { ncpus: 2, ..LoadOptions::default() };
    let obj = Object::from_file_with(path, &opts).ok()?;
    obj.freeze_rodata();
    Some(obj)
}

/// Runs every XDP program of the object at `path` in both engines; returns the number of runs
/// compared and the programs the JIT refused.
fn check_object(path: &Path, pkts: &[Vec<u8>]) -> (usize, Vec<String>) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let (Some(a), Some(b)) = (load(path), load(path)) else {
        eprintln!("{name}: not loadable, skipped");
        return (0, Vec::new());
    };
    setup(&a.maps);
    setup(&b.maps);
    let mut runs = 0;
    let mut refused = Vec::new();
    for (pa, pb) in a.programs.iter().zip(&b.programs) {
        if !pa.is_xdp() {
            continue;
        }
        let interp = Interpreter::new(Arc::new(pa.clone()), a.maps.clone()).unwrap();
        let jit = match Jit::compile(Arc::new(pb.clone()), b.maps.clone()) {
            Ok(j) => j,
            Err(e) => {
                refused.push(format!("{name}/{}: {e}", pa.name));
                continue;
            }
        };
        // Plain env and one answering FIB lookups, alternately, each engine its own pair.
        let mut envs_a = [TestEnv::new(), TestEnv::with_fib()];
        let mut envs_b = [TestEnv::new(), TestEnv::with_fib()];
        for (n, pkt) in pkts.iter().enumerate() {
            let input = Input {
                pkt: pkt.clone(),
                ingress: [1, 3, 300][n % 3],
                rxq: (n % 4) as u32,
                cpu: (n % 2) as u32,
                headroom: HEADROOM,
                frame: 4096,
            };
            let what = format!("{name}/{} packet {n}", pa.name);
            let sa = run_one(Engine2::Interp(&interp), &a.maps, &input, &mut envs_a[(n / 2) % 2]);
            assert!(jit_safe(&sa.result), "{what}: interpreter: {:?}", sa.result);
            let sb = run_one(Engine2::Jit(&jit), &b.maps, &input, &mut envs_b[(n / 2) % 2]);
            assert_snap_eq(&sa, &sb, &what);
            runs += 1;
        }
    }
    (runs, refused)
}

#[test]
fn runtime_test_objects() {
    let pkts = packets();
    let objs = objects_in(&manifest().join("tests/progs"));
    assert!(!objs.is_empty(), "tests/progs has no objects");
    let mut total = 0;
    let mut refused = Vec::new();
    for o in &objs {
        let (n, r) = check_object(o, &pkts);
        total += n;
        refused.extend(r);
    }
    eprintln!("{} objects, {total} runs compared", objs.len());
    assert!(refused.is_empty(), "the JIT refused: {refused:#?}");
    assert!(total > 0);
}

/// The 50M-slot arrays object: these tests snapshot every map slot after every run (its
/// memory is tested by tests/xdp_big_maps.rs).
fn is_big(p: &std::path::Path) -> bool {
    p.ends_with("xdp_big_arrays.o")
}

#[test]
fn repository_xdp_corpus() {
    let objs = objects_in(&manifest().join("../../bpf/obj"));
    if objs.is_empty() {
        eprintln!("no bpf/obj corpus: skipped");
        return;
    }
    let pkts = packets();
    let mut total = 0;
    let mut refused = Vec::new();
    for o in &objs {
        // Its prog array is filled in the object: runs end in tail calls, which sluice's
        // runner follows (`xdp::ebpf::EbpfProgram`, tested in tests/xdp_tail_calls.rs).
        if o.ends_with("xdp_tail_call_static.o") || is_big(o) {
            continue;
        }
        let (n, r) = check_object(o, &pkts);
        eprintln!("{}: {n} runs", o.display());
        total += n;
        refused.extend(r);
    }
    assert!(refused.is_empty(), "the JIT refused: {refused:#?}");
    assert!(total > 0);
}

/// The programs the verifier must refuse still compile or are refused by the JIT without
/// crashing it (they are never run: the JIT only runs verified programs).
#[test]
fn negative_corpus_compiles_without_crashing() {
    // The JIT verifies first: a program the verifier refuses is refused by the JIT with the
    // verifier's error (never compiled, never a crash), one it accepts (root's rules let some
    // negatives through) compiles.
    let objects = objects_in(&manifest().join("../../bpf/negative/obj"));
    assert!(objects.len() >= 10, "the negative corpus is missing: {} objects", objects.len());
    let (mut refused, mut compiled) = (0, 0);
    for o in &objects {
        let Some(obj) = load(o) else { continue };
        for p in &obj.programs {
            let verdict = sluice_ebpf::verifier::verify(p, &sluice_ebpf::verifier::VerifyOptions::default());
            match (verdict, Jit::compile(Arc::new(p.clone()), obj.maps.clone())) {
                (Err(_), Err(sluice_ebpf::jit::JitError::Verify(_))) => refused += 1,
                (Ok(_), Ok(_)) => compiled += 1,
                (v, j) => panic!("{}: verifier {:?} but JIT {:?}", o.display(), v.map(|_| ()), j.map(|_| ())),
            }
        }
    }
    assert!(refused > compiled, "most negatives must be refused: {refused} refused, {compiled} compiled");
}

/// One compiled program shared by several threads (the `Engine` is `Send + Sync`): the drop
/// counter's atomic adds must not lose updates.
#[test]
fn concurrent_runs_share_one_program() {
    let Some(path) = objects_in(&manifest().join("../../bpf/obj")).into_iter().find(|p| p.ends_with("xdp_drop_count.o")) else {
        eprintln!("no bpf/obj/xdp_drop_count.o: skipped");
        return;
    };
    let obj = load(&path).unwrap();
    let jit = Arc::new(Jit::compile(Arc::new(obj.program("").unwrap().clone()), obj.maps.clone()).unwrap());
    let threads = 4;
    let runs = 20_000u64;
    let len = 60usize;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let jit = jit.clone();
            std::thread::spawn(move || {
                let mut mem = sluice_ebpf::LowMem::new(2048).unwrap();
                let mut env = sluice_ebpf::NullEnv::on_cpu(t % 2);
                for _ in 0..runs {
                    let mut xdp = sluice_ebpf::XdpBuff::new(mem.as_mut_slice(), HEADROOM, len);
                    assert_eq!(jit.run(&mut xdp, &mut env).unwrap().action, sluice_ebpf::insn::XDP_DROP);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let v = obj.maps.by_name("drop_stats").unwrap().lookup(&0u32.to_le_bytes(), 0).unwrap();
    let packets = u64::from_le_bytes(v[0..8].try_into().unwrap());
    let bytes = u64::from_le_bytes(v[8..16].try_into().unwrap());
    assert_eq!((packets, bytes), (threads as u64 * runs, threads as u64 * runs * len as u64));
}

/// A packet of a burst in the test region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// Bursts give exactly what one run per packet gives: every XDP program of the corpus, both
/// engines (lean and helper-calling JIT paths), outcomes, moved bounds, packet bytes and maps;
/// a descriptor outside the region or its frame is ABORTED and counted as a fault.
#[test]
fn bursts_match_single_runs() {
    use sluice_ebpf::{BurstCtx, FrameRegion, NullEnv, RunConfig};
    const FRAME: usize = 2048;
    let objs = objects_in(&manifest().join("../../bpf/obj"));
    if objs.is_empty() {
        eprintln!("no bpf/obj corpus: skipped");
        return;
    }
    let pkts: Vec<Vec<u8>> = packets().into_iter().filter(|p| p.len() <= FRAME - HEADROOM - 320).collect();
    let ctx = BurstCtx { ingress_ifindex: 3, rx_queue_index: 1 };
    let mut checked = 0;
    for path in &objs {
        // Tail calls end runs early by design; followed by sluice's runner (see above).
        if path.ends_with("xdp_tail_call_static.o") || is_big(path) {
            continue;
        }
        for single_writer in [false, true] {
            let config = RunConfig { single_writer, ..RunConfig::default() };
            let (Some(a), Some(b), Some(c)) = (load(path), load(path), load(path)) else { continue };
            for m in [&a.maps, &b.maps, &c.maps] {
                setup(m);
            }
            for ((pa, pb), pc) in a.programs.iter().zip(&b.programs).zip(&c.programs) {
                if !pa.is_xdp() {
                    continue;
                }
                let what = format!("{}/{} (single_writer {single_writer})", path.display(), pa.name);
                let single = Interpreter::with_config(Arc::new(pa.clone()), a.maps.clone(), config).unwrap();
                let interp = Interpreter::with_config(Arc::new(pb.clone()), b.maps.clone(), config).unwrap();
                let jit = Jit::compile_with_config(Arc::new(pc.clone()), c.maps.clone(), config).unwrap();
                // Reference: one run per packet, each in its own frame.
                let mut want = Vec::new();
                let mut env = NullEnv::default();
                for p in &pkts {
                    let mut mem = sluice_ebpf::LowMem::new(FRAME).unwrap();
                    let frame = &mut mem.as_mut_slice()[..FRAME];
                    frame[HEADROOM..HEADROOM + p.len()].copy_from_slice(p);
                    let mut xdp = sluice_ebpf::XdpBuff::new(frame, HEADROOM, p.len());
                    xdp.ingress_ifindex = ctx.ingress_ifindex;
                    xdp.rx_queue_index = ctx.rx_queue_index;
                    let out = single.run(&mut xdp, &mut env).unwrap_or(sluice_ebpf::RunOutcome { action: 0, redirect: None });
                    want.push((out, xdp.packet().to_vec()));
                }
                for engine in ["interp", "jit"] {
                    let n = pkts.len() + 2;
                    let mut mem = sluice_ebpf::LowMem::new(FRAME * n).unwrap();
                    let mut descs = Vec::new();
                    for (i, p) in pkts.iter().enumerate() {
                        let start = i * FRAME + HEADROOM;
                        mem.as_mut_slice()[start..start + p.len()].copy_from_slice(p);
                        descs.push(Desc { frame: i as u32, data: HEADROOM as u16, len: p.len() as u16 });
                    }
                    // Two bad descriptors: a frame past the region, bounds past the frame.
                    descs.push(Desc { frame: n as u32 + 5, data: HEADROOM as u16, len: 60 });
                    descs.push(Desc { frame: 0, data: (FRAME - 10) as u16, len: 60 });
                    let mut out = vec![sluice_ebpf::RunOutcome { action: 99, redirect: None }; descs.len()];
                    let mut env = NullEnv::default();
                    let faults = {
                        let mut region = FrameRegion::new(mem.as_mut_slice(), FRAME).unwrap();
                        match engine {
                            "jit" => jit.run_burst(&mut region, &mut descs, ctx, &mut env, &mut out),
                            _ => interp.run_burst(&mut region, &mut descs, ctx, &mut env, &mut out),
                        }
                    };
                    assert_eq!(faults.count, 2, "{what} {engine}: faults {faults:?}");
                    assert!(faults.first.is_some());
                    for (i, (w, bytes)) in want.iter().enumerate() {
                        let d = descs[i];
                        let start = d.frame as usize * FRAME + d.data as usize;
                        let got = &mem.as_slice()[start..start + d.len as usize];
                        assert_eq!(out[i], *w, "{what} {engine}: packet {i} outcome");
                        assert_eq!(got, &bytes[..], "{what} {engine}: packet {i} bytes");
                    }
                    assert_eq!(out[pkts.len()].action, sluice_ebpf::insn::XDP_ABORTED);
                    assert_eq!(out[pkts.len() + 1].action, sluice_ebpf::insn::XDP_ABORTED);
                    checked += 1;
                }
                assert_eq!(a.maps.dump(), b.maps.dump(), "{what}: maps, interpreter burst");
                assert_eq!(a.maps.dump(), c.maps.dump(), "{what}: maps, JIT burst");
            }
        }
    }
    assert!(checked > 0);
}
