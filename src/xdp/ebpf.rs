//! XDP programs from eBPF objects compiled by clang: loaded and linked by sluice-ebpf,
//! verified, then run by the JIT (or the checked interpreter when asked or when the JIT
//! cannot translate a program).

use super::env::SluiceEnv;
use super::{RunOutcome, XdpBuff, XdpProgram};
use crate::buf::Pkt;
use sluice_ebpf::insn::XDP_ABORTED;
use sluice_ebpf::jit::{Jit, JitProgram};
use sluice_ebpf::verifier::{verify, VerifyOptions};
use sluice_ebpf::{BurstCtx, BurstFaults, FrameRegion, Interpreter, LoadOptions, Maps, Object, RunConfig};

/// Worker threads that run XDP programs (the datapath has one; RPS workers will add more).
const WORKERS: u32 = 1;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Jit,
    Interp,
}

impl std::str::FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "jit" => Ok(EngineKind::Jit),
            "interp" | "interpreter" => Ok(EngineKind::Interp),
            _ => Err(format!("unknown engine `{s}` (jit, interp)")),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum XdpLoadError {
    #[error("{path}: {msg}")]
    Load { path: String, msg: String },
    #[error("{path}: {why}")]
    Select { path: String, why: sluice_ebpf::SelectError },
    #[error("{path}: program `{prog}` refused by the verifier: {msg}")]
    Verifier { path: String, prog: String, msg: String },
}

/// The engine running a program (an enum, not a trait object: bursts are generic over the
/// packet descriptor and the calls stay direct). One per program: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Engine {
    Jit(JitProgram),
    Interp(Interpreter),
}

pub struct EbpfProgram {
    name: String,
    engine: Engine,
    pub maps: Arc<Maps>,
    pub engine_kind: EngineKind,
    /// Why the JIT was not used when it was asked for.
    pub jit_fallback: Option<String>,
    /// Runs that faulted (treated as XDP_ABORTED).
    pub faults: u64,
    pub last_fault: Option<String>,
    /// Declared multi-buffer aware (`xdp.frags` section).
    frags_aware: bool,
    /// The object's programs by index, for a program that calls `bpf_tail_call` (a
    /// PROG_ARRAY slot holds an index): each verified and prepared like the entry program;
    /// `None` for one that is not XDP or that the verifier refused. Empty otherwise.
    tail_targets: Vec<Option<Engine>>,
    /// Names of the object's programs (same indexes), to fill PROG_ARRAY slots by name.
    program_names: Vec<String>,
}

impl EbpfProgram {
    /// Loads `path`, picks the program by function or section name (first XDP program when
    /// `section` is None), verifies it and prepares the engine.
    pub fn load(path: &Path, section: Option<&str>, kind: EngineKind) -> Result<EbpfProgram, XdpLoadError> {
        EbpfProgram::load_with(path, section, kind, false)
    }

    /// [`EbpfProgram::load`]; `locked_atomics` keeps bus-locked atomics even with one worker
    /// (the `xdp.locked_atomics` tunable).
    pub fn load_with(path: &Path, section: Option<&str>, kind: EngineKind, locked_atomics: bool) -> Result<EbpfProgram, XdpLoadError> {
        EbpfProgram::load_selected(path, section, false, &VerifyOptions::default(), kind, locked_atomics)
    }

    /// [`EbpfProgram::load_with`] with libbpf / bpftool program selection: `force_xdp` takes a
    /// program of any section as XDP (bpftool's `prog load ... type xdp`), see
    /// [`Object::select_xdp`]; `verify` chooses the verifier's rule set (privileged by default).
    pub fn load_selected(
        path: &Path,
        section: Option<&str>,
        force_xdp: bool,
        verify_opts: &VerifyOptions,
        kind: EngineKind,
        locked_atomics: bool,
    ) -> Result<EbpfProgram, XdpLoadError> {
        let p = path.display().to_string();
        // One datapath worker (CPU 0) runs every program: per-CPU maps have one copy, and
        // atomics have a single writer (no bus lock needed; see RunConfig::single_writer).
        let obj = Object::from_file_with(path, &LoadOptions { ncpus: WORKERS, ..LoadOptions::default() })
            .map_err(|e| XdpLoadError::Load { path: p.clone(), msg: e.to_string() })?;
        let prog = obj.select_xdp(section, force_xdp).cloned().map_err(|why| XdpLoadError::Select { path: p.clone(), why })?;
        let name = format!("{}:{}", path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(), prog.name);
        // Every program is verified, whichever engine runs it: the JIT's code has no checks.
        verify(&prog, verify_opts).map_err(|e| XdpLoadError::Verifier { path: p.clone(), prog: prog.name.clone(), msg: e.to_string() })?;
        let frags_aware = prog.frags_aware();
        let calls_tail =
            prog.insns.iter().any(|i| i.code == sluice_ebpf::insn::BPF_JMP | sluice_ebpf::insn::BPF_CALL && i.src == 0 && i.imm == 12);
        let prog = Arc::new(prog);
        let maps = obj.maps.clone();
        let config = RunConfig { single_writer: WORKERS == 1 && !locked_atomics, ..RunConfig::default() };
        let interp = || -> Result<Engine, XdpLoadError> {
            Ok(Engine::Interp(
                Interpreter::with_config(prog.clone(), maps.clone(), config)
                    .map_err(|e| XdpLoadError::Load { path: p.clone(), msg: e.to_string() })?,
            ))
        };
        let (engine, engine_kind, jit_fallback) = match kind {
            EngineKind::Interp => (interp()?, EngineKind::Interp, None),
            EngineKind::Jit => match Jit::compile_with_config(prog.clone(), maps.clone(), config) {
                Ok(j) => (Engine::Jit(j), EngineKind::Jit, None),
                // A program the JIT cannot translate still runs, checked, in the interpreter.
                Err(e) => (interp()?, EngineKind::Interp, Some(e.to_string())),
            },
        };
        // Tail-call targets: the object's XDP programs, each verified as the entry one.
        let tail_targets = if calls_tail {
            obj.programs
                .iter()
                .map(|t| {
                    let t = Arc::new(t.clone());
                    if !(t.is_xdp() || force_xdp) || verify(&t, verify_opts).is_err() {
                        return None;
                    }
                    match engine_kind {
                        EngineKind::Jit => Jit::compile_with_config(t.clone(), maps.clone(), config).ok().map(Engine::Jit),
                        EngineKind::Interp => None,
                    }
                    .or_else(|| Interpreter::with_config(t, maps.clone(), config).ok().map(Engine::Interp))
                })
                .collect()
        } else {
            Vec::new()
        };
        let program_names = obj.programs.iter().map(|p| p.name.clone()).collect();
        Ok(EbpfProgram {
            name,
            engine,
            maps,
            engine_kind,
            jit_fallback,
            faults: 0,
            last_fault: None,
            frags_aware,
            tail_targets,
            program_names,
        })
    }

    /// The index of program `name` in the object (what a PROG_ARRAY slot holds).
    pub fn program_index(&self, name: &str) -> Option<u32> {
        self.program_names.iter().position(|n| n == name).map(|i| i as u32)
    }
}

impl Engine {
    #[inline]
    fn run(&self, xdp: &mut XdpBuff<'_>, env: &mut SluiceEnv<'_>) -> Result<RunOutcome, sluice_ebpf::RunError> {
        match self {
            Engine::Jit(j) => j.run(xdp, env),
            Engine::Interp(i) => i.run(xdp, env),
        }
    }
}

impl XdpProgram for EbpfProgram {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn frags_aware(&self) -> bool {
        self.frags_aware
    }

    #[inline]
    fn run(&mut self, xdp: &mut XdpBuff<'_>, env: &mut SluiceEnv<'_>) -> RunOutcome {
        let mut r = self.engine.run(xdp, env);
        // A tail call ends the run and names the program to run next on the same context.
        while let Err(sluice_ebpf::RunError { kind: sluice_ebpf::RunErrorKind::TailCall { target }, .. }) = r {
            xdp.tail_calls += 1;
            r = match self.tail_targets.get(target as usize).and_then(Option::as_ref) {
                Some(next) => next.run(xdp, env),
                None => Err(sluice_ebpf::RunError::new(
                    0,
                    sluice_ebpf::RunErrorKind::MapMismatch(format!("tail call to program {target}, which cannot run")),
                )),
            };
        }
        match r {
            Ok(out) => out,
            Err(e) => {
                self.faults += 1;
                if self.last_fault.is_none() {
                    self.last_fault = Some(e.to_string());
                }
                RunOutcome { action: XDP_ABORTED, redirect: None }
            }
        }
    }

    fn run_burst(
        &mut self,
        region: &mut FrameRegion<'_>,
        pkts: &mut [Pkt],
        ctx: BurstCtx,
        env: &mut SluiceEnv<'_>,
        out: &mut [RunOutcome],
    ) {
        if !self.tail_targets.is_empty() {
            // Tail calls chain programs per packet: one run at a time.
            return super::run_each(self, region, pkts, ctx, env, out);
        }
        let faults: BurstFaults = match &self.engine {
            Engine::Jit(j) => j.run_burst(region, pkts, ctx, env, out),
            Engine::Interp(i) => i.run_burst(region, pkts, ctx, env, out),
        };
        if faults.count > 0 {
            self.faults += faults.count;
            if self.last_fault.is_none() {
                self.last_fault = faults.first.map(|e| e.to_string());
            }
        }
    }
}
