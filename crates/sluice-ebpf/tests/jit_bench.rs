//! Speed of the JIT against the interpreter (prints, asserts nothing about speed). Run with
//!
//! ```text
//! cargo test --release -p sluice-ebpf --test jit_bench -- --ignored --nocapture
//! ```
//!
//! Each program runs on one 64-byte IPv4/UDP frame (from `bpf/packets` when present) in a loop;
//! the time per run includes each engine's per-run setup (interpreter: `RunState::new`,
//! zeroing the stack frame, writing the offsets back; JIT: the context, plus the `RunState`
//! only for programs that still call helpers) and the harness (`XdpBuff::new`, the dynamic
//! `Engine::run` call), shown alone in the `(harness)` row. `helpers` tells whether the JIT'd
//! code still calls helpers, `inl` how many map lookups it inlined.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sluice_ebpf::jit::{Jit, JitProgram};
use sluice_ebpf::{Engine, Env, LoadOptions, LowMem, NullEnv, Object, RunError, RunOutcome, XdpBuff};

/// The harness alone: an engine that does nothing.
struct Noop;

impl Engine for Noop {
    fn run(&self, xdp: &mut XdpBuff<'_>, _env: &mut dyn Env) -> Result<RunOutcome, RunError> {
        Ok(RunOutcome { action: std::hint::black_box(xdp.data) as u32, redirect: None })
    }
}

fn stats(j: &JitProgram) -> String {
    format!("{:>8} {:>4}", if j.calls_helpers() { "yes" } else { "no" }, j.inlined_lookups())
}

fn bpf_obj(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bpf/obj").join(name);
    p.exists().then_some(p)
}

fn frame() -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bpf/packets/00_ipv4_udp.bin");
    std::fs::read(p).unwrap_or_else(|_| {
        let mut f = vec![0u8; 64];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f
    })
}

/// Nanoseconds per run of `engine`: the best of 40 rounds of `n / 20` runs (the minimum
/// filters out interference from other processes).
fn ns_per_run(engine: &dyn Engine, pkt: &[u8], n: u32) -> f64 {
    let mut mem = LowMem::new(4096).unwrap();
    let mut env = NullEnv::new();
    env.keep_traces = false;
    let per_round = (n / 20).max(1);
    let mut best = f64::MAX;
    for _ in 0..40 {
        let t = Instant::now();
        for _ in 0..per_round {
            let buf = mem.as_mut_slice();
            let mut xdp = XdpBuff::new(buf, 256, pkt.len());
            let out = engine.run(&mut xdp, &mut env).unwrap();
            // Use the fields (copying the whole outcome would reload it in another shape and
            // stall on store forwarding, which no real consumer does).
            std::hint::black_box(out.action);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / per_round as f64);
    }
    best
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn jit_vs_interpreter_speed() {
    let pkt = frame();
    let n = if cfg!(debug_assertions) { 20_000 } else { 1_000_000 };
    println!("{:<28} {:>12} {:>12} {:>8} {:>8} {:>4}", "program", "interp ns", "jit ns", "ratio", "helpers", "inl");
    let only = std::env::var("JIT_BENCH_ONLY").ok();
    let skip = |name: &str| only.as_deref().is_some_and(|o| !name.contains(o));
    for name in [
        "xdp_drop_count.o",
        "xdp_bench_drop_notouch.o",
        "xdp_bench_drop_read.o",
        "xdp_macswap_tx.o",
        "xdp_proto_count.o",
        "xdp_ipip_encap.o",
    ] {
        if skip(name) {
            continue;
        }
        let Some(path) = bpf_obj(name) else {
            println!("{name}: not found, skipped");
            continue;
        };
        let obj = Object::from_file_with(&path, &LoadOptions { ncpus: 1, ..LoadOptions::default() }).unwrap();
        let prog = Arc::new(obj.program("").unwrap().clone());
        let interp = sluice_ebpf::Interpreter::new(prog.clone(), obj.maps.clone()).unwrap();
        let jit = Jit::compile(prog, obj.maps.clone()).unwrap();
        // Warm up both.
        ns_per_run(&interp, &pkt, n / 10);
        ns_per_run(&jit, &pkt, n / 10);
        let i = ns_per_run(&interp, &pkt, n);
        let j = ns_per_run(&jit, &pkt, n);
        println!("{name:<28} {i:>12.1} {j:>12.1} {:>7.1}x {}", i / j, stats(&jit));
    }
    // The fixed per-run cost: `r0 = XDP_PASS; exit`.
    if !skip("(r0 = 2; exit)") {
        let prog = Arc::new(sluice_ebpf::Program {
            name: "pass".into(),
            section: "xdp".into(),
            insns: vec![sluice_ebpf::asm::mov64_imm(0, 2), sluice_ebpf::asm::exit()],
            maps: Vec::new(),
        });
        let maps = Arc::new(sluice_ebpf::Maps::empty(1));
        let interp = sluice_ebpf::Interpreter::new(prog.clone(), maps.clone()).unwrap();
        let jit = Jit::compile(prog, maps).unwrap();
        ns_per_run(&interp, &pkt, n / 10);
        ns_per_run(&jit, &pkt, n / 10);
        let i = ns_per_run(&interp, &pkt, n);
        let j = ns_per_run(&jit, &pkt, n);
        println!("{:<28} {i:>12.1} {j:>12.1} {:>7.1}x {}", "(r0 = 2; exit)", i / j, stats(&jit));
    }
    if !skip("(harness)") {
        ns_per_run(&Noop, &pkt, n / 10);
        let h = ns_per_run(&Noop, &pkt, n);
        println!("{:<28} {h:>12.1} {h:>12.1}", "(harness)");
    }
    // Compile time of the drop counter.
    if let (false, Some(path)) = (skip("compile"), bpf_obj("xdp_drop_count.o")) {
        let obj = Object::from_file(&path).unwrap();
        let prog = Arc::new(obj.program("").unwrap().clone());
        let t = Instant::now();
        let rounds = 20;
        for _ in 0..rounds {
            std::hint::black_box(Jit::compile(prog.clone(), obj.maps.clone()).unwrap());
        }
        println!("verify + compile xdp_drop_count: {:.0} us", t.elapsed().as_micros() as f64 / rounds as f64);
    }
}

#[derive(Clone, Copy)]
struct Desc(u32, u16, u16);

impl sluice_ebpf::FrameDesc for Desc {
    fn frame(&self) -> u32 {
        self.0
    }
    fn data(&self) -> usize {
        self.1 as usize
    }
    fn data_len(&self) -> usize {
        self.2 as usize
    }
    fn set_bounds(&mut self, data: usize, len: usize) {
        self.1 = data as u16;
        self.2 = len as u16;
    }
}

/// Nanoseconds per packet of `run` over bursts of 64 frames (best of 40 rounds).
type BurstFn<'a> = dyn FnMut(&mut sluice_ebpf::FrameRegion<'_>, &mut [Desc], &mut [RunOutcome]) + 'a;

fn ns_per_packet_burst(run: &mut BurstFn<'_>, pkt: &[u8], n: u32) -> f64 {
    const FRAME: usize = 2048;
    const BURST: usize = 64;
    let mut mem = LowMem::new(FRAME * BURST).unwrap();
    let mut descs: Vec<Desc> = (0..BURST).map(|i| Desc(i as u32, 256, pkt.len() as u16)).collect();
    for i in 0..BURST {
        mem.as_mut_slice()[i * FRAME + 256..i * FRAME + 256 + pkt.len()].copy_from_slice(pkt);
    }
    let mut out = vec![RunOutcome { action: 0, redirect: None }; BURST];
    let bursts = (n / 20 / BURST as u32).max(1);
    let mut best = f64::MAX;
    for _ in 0..40 {
        let t = Instant::now();
        for _ in 0..bursts {
            let mut region = sluice_ebpf::FrameRegion::new(mem.as_mut_slice(), FRAME).unwrap();
            run(&mut region, &mut descs, &mut out);
            std::hint::black_box(out[BURST - 1].action);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / (bursts as usize * BURST) as f64);
    }
    best
}

/// The datapath's way: `run_burst` over bursts of 64 frames, with locked atomics and with
/// `RunConfig::single_writer` (one worker thread, sluice's configuration).
#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn burst_jit_vs_interpreter_speed() {
    let pkt = frame();
    let n = if cfg!(debug_assertions) { 20_000 } else { 2_000_000 };
    println!("{:<28} {:>8} {:>12} {:>12} {:>8}", "program (burst of 64)", "atomics", "interp ns", "jit ns", "ratio");
    // Not the IP-in-IP encapsulation: it moves the packet, so repeated bursts over the same
    // frames would measure a different packet every round.
    for name in ["xdp_drop_count.o", "xdp_bench_drop_notouch.o", "xdp_bench_drop_read.o", "xdp_macswap_tx.o", "xdp_proto_count.o"] {
        let Some(path) = bpf_obj(name) else {
            println!("{name}: not found, skipped");
            continue;
        };
        for single_writer in [false, true] {
            let obj = Object::from_file_with(&path, &LoadOptions { ncpus: 1, ..LoadOptions::default() }).unwrap();
            let prog = Arc::new(obj.program("").unwrap().clone());
            let config = sluice_ebpf::RunConfig { single_writer, ..sluice_ebpf::RunConfig::default() };
            let interp = sluice_ebpf::Interpreter::with_config(prog.clone(), obj.maps.clone(), config).unwrap();
            let jit = Jit::compile_with_config(prog, obj.maps.clone(), config).unwrap();
            let ctx = sluice_ebpf::BurstCtx { ingress_ifindex: 1, rx_queue_index: 0 };
            let mut env = NullEnv::new();
            env.keep_traces = false;
            let mut ri = |r: &mut sluice_ebpf::FrameRegion<'_>, d: &mut [Desc], o: &mut [RunOutcome]| {
                interp.run_burst(r, d, ctx, &mut env, o);
            };
            ns_per_packet_burst(&mut ri, &pkt, n / 10);
            let i = ns_per_packet_burst(&mut ri, &pkt, n);
            let mut env = NullEnv::new();
            env.keep_traces = false;
            let mut rj = |r: &mut sluice_ebpf::FrameRegion<'_>, d: &mut [Desc], o: &mut [RunOutcome]| {
                jit.run_burst(r, d, ctx, &mut env, o);
            };
            ns_per_packet_burst(&mut rj, &pkt, n / 10);
            let j = ns_per_packet_burst(&mut rj, &pkt, n);
            let mode = if single_writer { "single" } else { "locked" };
            println!("{name:<28} {mode:>8} {i:>12.1} {j:>12.1} {:>7.1}x", i / j);
        }
    }
}
