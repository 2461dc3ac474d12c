//! Shared harness of the JIT tests: run a program in the interpreter and in the JIT, each
//! against its own (identically prepared) maps, packet buffer and environment, and compare
//! everything observable.

#![allow(dead_code)]

use std::sync::Arc;

use sluice_ebpf::env::fib_ret;
use sluice_ebpf::jit::{Jit, JitError, JitProgram};
use sluice_ebpf::{
    Env, Interpreter, LowMem, MapDef, MapDump, Maps, NullEnv, Program, RunConfig, RunError, RunErrorKind, RunOutcome, XdpBuff,
};

/// A deterministic environment (a [`NullEnv`]) that can also answer FIB lookups: with `fib`
/// set, IPv4 lookups succeed (egress ifindex 9, fixed MACs). Every lookup is recorded.
#[derive(Debug, Clone, Default)]
pub struct TestEnv {
    pub null: NullEnv,
    pub fib: bool,
    pub fib_calls: Vec<(Vec<u8>, u32)>,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        TestEnv::default()
    }

    pub fn with_fib() -> TestEnv {
        TestEnv { fib: true, ..TestEnv::default() }
    }
}

impl Env for TestEnv {
    fn ktime_ns(&mut self) -> u64 {
        self.null.ktime_ns()
    }
    fn ktime_boot_ns(&mut self) -> u64 {
        self.null.ktime_boot_ns()
    }
    fn ktime_coarse_ns(&mut self) -> u64 {
        self.null.ktime_coarse_ns()
    }
    fn cpu_id(&mut self) -> u32 {
        self.null.cpu_id()
    }
    fn prandom_u32(&mut self) -> u32 {
        self.null.prandom_u32()
    }
    fn trace(&mut self, msg: &str) {
        self.null.trace(msg)
    }
    fn fib_lookup(&mut self, params: &mut [u8; 64], flags: u32) -> i64 {
        self.fib_calls.push((params.to_vec(), flags));
        if !self.fib || params[0] != 2 {
            return self.null.fib_lookup(params, flags);
        }
        params[8..12].copy_from_slice(&9u32.to_le_bytes());
        params[52..58].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
        params[58..64].copy_from_slice(&[0xee; 6]);
        fib_ret::SUCCESS
    }
}

pub const HEADROOM: usize = 256;
pub const FRAME: usize = 2048;

pub fn prog(insns: Vec<sluice_ebpf::insn::Insn>, defs: &[MapDef]) -> Arc<Program> {
    Arc::new(Program { name: "t".into(), section: "xdp".into(), insns, maps: defs.to_vec() })
}

/// Everything a run can change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub result: Result<(RunOutcome, u64), RunError>,
    pub data: usize,
    pub data_end: usize,
    pub data_meta: usize,
    pub frame: Vec<u8>,
    pub maps: Vec<MapDump>,
    pub traces: Vec<String>,
    pub now_ns: u64,
    pub rng: u64,
    pub fib_calls: Vec<(Vec<u8>, u32)>,
}

impl Snapshot {
    pub fn r0(&self) -> u64 {
        match &self.result {
            Ok((_, r0)) => *r0,
            Err(e) => panic!("run failed: {e}"),
        }
    }

    pub fn outcome(&self) -> RunOutcome {
        match &self.result {
            Ok((o, _)) => *o,
            Err(e) => panic!("run failed: {e}"),
        }
    }
}

/// Input of one run: packet, interface numbers, CPU.
#[derive(Debug, Clone)]
pub struct Input {
    pub pkt: Vec<u8>,
    pub ingress: u32,
    pub rxq: u32,
    pub cpu: u32,
    pub headroom: usize,
    pub frame: usize,
}

impl Input {
    pub fn pkt(pkt: &[u8]) -> Input {
        Input { pkt: pkt.to_vec(), ingress: 3, rxq: 1, cpu: 0, headroom: HEADROOM, frame: FRAME }
    }
}

pub enum Engine2<'a> {
    Interp(&'a Interpreter),
    Jit(&'a JitProgram),
}

/// One run on a fresh buffer; `env` is carried across runs by the caller.
pub fn run_one(engine: Engine2<'_>, maps: &Maps, input: &Input, env: &mut TestEnv) -> Snapshot {
    let mut mem = LowMem::new(input.frame).unwrap();
    let frame = &mut mem.as_mut_slice()[..input.frame];
    frame[input.headroom..input.headroom + input.pkt.len()].copy_from_slice(&input.pkt);
    let mut xdp = XdpBuff::new(frame, input.headroom, input.pkt.len());
    xdp.ingress_ifindex = input.ingress;
    xdp.rx_queue_index = input.rxq;
    env.null.cpu = input.cpu;
    let result = match engine {
        Engine2::Interp(i) => i.run_full(&mut xdp, env),
        Engine2::Jit(j) => j.run_full(&mut xdp, env),
    };
    Snapshot {
        result,
        data: xdp.data,
        data_end: xdp.data_end,
        data_meta: xdp.data_meta,
        frame: xdp.frame.to_vec(),
        maps: maps.dump(),
        traces: env.null.traces.clone(),
        now_ns: env.null.now_ns,
        rng: env.null.rng,
        fib_calls: env.fib_calls.clone(),
    }
}

/// Whether the interpreter's result is one a verified program can produce (so the JIT may run
/// the same program on the same input safely): success or a helper refusing its arguments.
pub fn jit_safe(r: &Result<(RunOutcome, u64), RunError>) -> bool {
    match r {
        Ok(_) => true,
        Err(e) => matches!(e.kind, RunErrorKind::HelperFault { .. }),
    }
}

pub enum Diff {
    /// Both engines ran every input and agreed; the interpreter's snapshots.
    Same(Vec<Snapshot>),
    /// The JIT refused the program.
    Refused(JitError),
}

/// Runs `insns` over `inputs` in both engines (each with its own maps made from `defs` with
/// `ncpus` copies and prepared by `setup`, and its own env) and asserts identical snapshots.
/// Stops at the first input the interpreter fails on in a way only unverified programs can.
pub fn diff_runs(insns: Vec<sluice_ebpf::insn::Insn>, defs: &[MapDef], ncpus: u32, setup: &dyn Fn(&Maps), inputs: &[Input]) -> Diff {
    let p = prog(insns, defs);
    let mi = Arc::new(Maps::new(defs, ncpus).unwrap());
    let mj = Arc::new(Maps::new(defs, ncpus).unwrap());
    setup(&mi);
    setup(&mj);
    let interp = Interpreter::new(p.clone(), mi.clone());
    let jit = Jit::compile(p.clone(), mj.clone());
    let (interp, jit) = match (interp, jit) {
        (Ok(i), Ok(j)) => (i, j),
        (Err(_), Err(e)) => return Diff::Refused(e),
        (Ok(_), Err(e)) => return Diff::Refused(e),
        (Err(e), Ok(_)) => panic!("interpreter refused ({e}) but the JIT compiled"),
    };
    let mut ei = TestEnv::new();
    let mut ej = TestEnv::new();
    let mut out = Vec::new();
    for (n, input) in inputs.iter().enumerate() {
        let a = run_one(Engine2::Interp(&interp), &mi, input, &mut ei);
        if !jit_safe(&a.result) {
            panic!("input {n}: the interpreter failed with {:?}; not a verified-program case", a.result);
        }
        let b = run_one(Engine2::Jit(&jit), &mj, input, &mut ej);
        assert_snap_eq(&a, &b, &format!("input {n}"));
        out.push(a);
    }
    if insns_have_atomics(&p.insns) {
        single_writer_matches(&p, defs, ncpus, setup, inputs, &out);
    }
    Diff::Same(out)
}

fn insns_have_atomics(insns: &[sluice_ebpf::insn::Insn]) -> bool {
    use sluice_ebpf::insn::{BPF_ATOMIC, BPF_STX};
    insns.iter().any(|i| i.code & 0x07 == BPF_STX && i.code & 0xe0 == BPF_ATOMIC)
}

/// Both engines with `RunConfig::single_writer` (plain read-modify-writes) must give what the
/// locked runs gave (`want`, the interpreter's snapshots).
fn single_writer_matches(p: &Arc<Program>, defs: &[MapDef], ncpus: u32, setup: &dyn Fn(&Maps), inputs: &[Input], want: &[Snapshot]) {
    let config = RunConfig { single_writer: true, ..RunConfig::default() };
    let mi = Arc::new(Maps::new(defs, ncpus).unwrap());
    let mj = Arc::new(Maps::new(defs, ncpus).unwrap());
    setup(&mi);
    setup(&mj);
    let interp = Interpreter::with_config(p.clone(), mi.clone(), config).unwrap();
    let jit = Jit::compile_with_config(p.clone(), mj.clone(), config).unwrap();
    let (mut ei, mut ej) = (TestEnv::new(), TestEnv::new());
    for (n, (input, w)) in inputs.iter().zip(want).enumerate() {
        let a = run_one(Engine2::Interp(&interp), &mi, input, &mut ei);
        assert_snap_eq(w, &a, &format!("input {n}, single-writer interpreter"));
        let b = run_one(Engine2::Jit(&jit), &mj, input, &mut ej);
        assert_snap_eq(w, &b, &format!("input {n}, single-writer JIT"));
    }
}

pub fn assert_snap_eq(a: &Snapshot, b: &Snapshot, what: &str) {
    assert_eq!(a.result, b.result, "{what}: result (interpreter, jit)");
    assert_eq!((a.data, a.data_end, a.data_meta), (b.data, b.data_end, b.data_meta), "{what}: buffer offsets");
    if a.frame != b.frame {
        let i = a.frame.iter().zip(&b.frame).position(|(x, y)| x != y);
        panic!("{what}: frame bytes differ (first at {i:?})");
    }
    assert_eq!(a.maps, b.maps, "{what}: maps");
    assert_eq!(a.traces, b.traces, "{what}: traces");
    assert_eq!((a.now_ns, a.rng), (b.now_ns, b.rng), "{what}: env");
    assert_eq!(a.fib_calls, b.fib_calls, "{what}: fib lookups");
}

/// Single run, no maps; asserts both engines agree and returns the snapshot.
pub fn same(insns: Vec<sluice_ebpf::insn::Insn>) -> Snapshot {
    same_pkt(insns, &[0u8; 64])
}

pub fn same_pkt(insns: Vec<sluice_ebpf::insn::Insn>, pkt: &[u8]) -> Snapshot {
    same_with(insns, &[], &|_| {}, pkt)
}

pub fn same_with(insns: Vec<sluice_ebpf::insn::Insn>, defs: &[MapDef], setup: &dyn Fn(&Maps), pkt: &[u8]) -> Snapshot {
    match diff_runs(insns, defs, 1, setup, &[Input::pkt(pkt)]) {
        Diff::Same(mut v) => v.remove(0),
        Diff::Refused(e) => panic!("JIT refused: {e}"),
    }
}

/// Asserts the JIT's translation (without the verifier) refuses the program.
pub fn refused(insns: Vec<sluice_ebpf::insn::Insn>) -> JitError {
    let p = prog(insns, &[]);
    match Jit::check_translation(&p, &Maps::empty(1)) {
        Ok(()) => panic!("the JIT translated a program it should refuse"),
        Err(e) => e,
    }
}

/// Asserts [`Jit::compile`] refuses the program because the verifier does; returns the
/// verifier's error.
pub fn unverified(insns: Vec<sluice_ebpf::insn::Insn>, defs: &[MapDef]) -> sluice_ebpf::verifier::VerifyError {
    let p = prog(insns, defs);
    match Jit::compile(p, Arc::new(Maps::new(defs, 1).unwrap())) {
        Ok(_) => panic!("the JIT compiled a program the verifier should refuse"),
        Err(JitError::Verify(e)) => e,
        Err(e) => panic!("refused, but not by the verifier: {e}"),
    }
}

/// One run in the interpreter only (for programs the verifier refuses).
pub fn interp_only(insns: Vec<sluice_ebpf::insn::Insn>, defs: &[MapDef], pkt: &[u8]) -> Snapshot {
    let p = prog(insns, defs);
    let m = Arc::new(Maps::new(defs, 1).unwrap());
    let interp = Interpreter::new(p, m.clone()).unwrap();
    run_one(Engine2::Interp(&interp), &m, &Input::pkt(pkt), &mut TestEnv::new())
}

pub fn flat(parts: &[&[sluice_ebpf::insn::Insn]]) -> Vec<sluice_ebpf::insn::Insn> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}
