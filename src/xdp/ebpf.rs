//! XDP programs from eBPF objects compiled by clang: loaded and linked by sluice-ebpf,
//! verified, then run by the JIT (or the checked interpreter when asked or when the JIT
//! cannot translate a program).

use super::env::SluiceEnv;
use super::{RunOutcome, XdpBuff, XdpProgram};
use crate::buf::Pkt;
use sluice_ebpf::insn::XDP_ABORTED;
use sluice_ebpf::jit::{Jit, JitProgram};
use sluice_ebpf::verifier::{verify_with_frozen, VerifiedProgram, VerifyOptions};
use sluice_ebpf::{BurstCtx, BurstFaults, FrameRegion, Interpreter, LoadOptions, Maps, Object, RunConfig, RunInProgress, TailCallTargets};

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
    tail_targets: TailTargets,
    /// Names of the object's programs (same indexes), to fill PROG_ARRAY slots by name.
    program_names: Vec<String>,
    /// Why each of the object's programs cannot go in a PROG_ARRAY (`None`: it can); empty
    /// when the object has no PROG_ARRAY.
    tail_refusals: Vec<Option<String>>,
    /// What [`EbpfProgram::instance`] builds another engine from: the verified entry program,
    /// the tail-call targets, and the run configuration.
    entry: Arc<VerifiedProgram>,
    tail_programs: Vec<Option<Arc<VerifiedProgram>>>,
    config: RunConfig,
}

impl EbpfProgram {
    /// Loads `path`, picks the program by function or section name (first XDP program when
    /// `section` is None), verifies it and prepares the engine.
    pub fn load(path: &Path, section: Option<&str>, kind: EngineKind) -> Result<EbpfProgram, XdpLoadError> {
        EbpfProgram::load_with(path, section, kind, false)
    }

    /// [`EbpfProgram::load`]; `locked_atomics` keeps bus-locked atomics even with one worker
    /// (the `xdp.locked_atomics` tunable). Nothing is set before the load: to set maps or
    /// `.rodata` first, [`OpenedXdp::open`], set them, then [`OpenedXdp::load`].
    pub fn load_with(path: &Path, section: Option<&str>, kind: EngineKind, locked_atomics: bool) -> Result<EbpfProgram, XdpLoadError> {
        OpenedXdp::open(path, section, false, 1)?.load(&VerifyOptions::default(), kind, locked_atomics)
    }

    /// Another instance of this program for another worker: its own engine (and JIT code),
    /// the same maps.
    pub fn instance(&self) -> Result<EbpfProgram, XdpLoadError> {
        let load_error = |msg| XdpLoadError::Load { path: self.name.clone(), msg };
        let engine = make_engine(self.engine_kind, &self.entry, &self.maps, self.config).map_err(load_error)?.0;
        let tail_targets = TailTargets(
            self.tail_programs
                .iter()
                .map(|t| t.as_ref().and_then(|t| make_engine(self.engine_kind, t, &self.maps, self.config).ok()).map(|e| e.0))
                .collect(),
        );
        Ok(EbpfProgram {
            name: self.name.clone(),
            engine,
            maps: self.maps.clone(),
            engine_kind: self.engine_kind,
            jit_fallback: self.jit_fallback.clone(),
            faults: 0,
            last_fault: None,
            frags_aware: self.frags_aware,
            tail_targets,
            program_names: self.program_names.clone(),
            tail_refusals: self.tail_refusals.clone(),
            entry: self.entry.clone(),
            tail_programs: self.tail_programs.clone(),
            config: self.config,
        })
    }

    /// The index of program `name` in the object (what a PROG_ARRAY slot holds).
    pub fn program_index(&self, name: &str) -> Option<u32> {
        self.program_names.iter().position(|n| n == name).map(|i| i as u32)
    }

    /// Whether program `index` of the object may go in a PROG_ARRAY slot, as the kernel's
    /// map update checks it (`Err`: why not).
    pub fn tail_target_allowed(&self, index: u32) -> Result<(), String> {
        tail_slot_allowed(&self.tail_refusals, index)
    }
}

/// An object opened and its XDP program picked, its maps filled from the ELF, nothing
/// verified yet: what user space sets before the load (libbpf's open → set `.rodata` and
/// maps → load). [`OpenedXdp::load`] then freezes `.rodata`, verifies with its values known
/// (so `const volatile` settings prune branches and bound offsets, as in the kernel) and
/// prepares the engines.
pub struct OpenedXdp {
    path: String,
    obj: Object,
    prog: sluice_ebpf::Program,
    force_xdp: bool,
}

impl OpenedXdp {
    /// Opens `path` and picks the program as [`Object::select_xdp`] (`force_xdp` takes one of
    /// any section as XDP, as bpftool's `prog load ... type xdp`); per-CPU maps get a copy for
    /// each of `workers`.
    pub fn open(path: &Path, section: Option<&str>, force_xdp: bool, workers: u32) -> Result<OpenedXdp, XdpLoadError> {
        let p = path.display().to_string();
        let obj = Object::from_file_with(path, &LoadOptions { ncpus: workers.max(1), ..LoadOptions::default() })
            .map_err(|e| XdpLoadError::Load { path: p.clone(), msg: e.to_string() })?;
        let prog = obj.select_xdp(section, force_xdp).cloned().map_err(|why| XdpLoadError::Select { path: p.clone(), why })?;
        Ok(OpenedXdp { path: p, obj, prog, force_xdp })
    }

    pub fn maps(&self) -> &Arc<Maps> {
        &self.obj.maps
    }

    /// The index of program `name` in the object (what a PROG_ARRAY slot holds).
    pub fn program_index(&self, name: &str) -> Option<u32> {
        self.obj.programs.iter().position(|p| p.name == name).map(|i| i as u32)
    }

    /// Whether program `index` may go in a PROG_ARRAY slot before the load: its type and
    /// frags awareness; the load verifies the programs the filled slots name.
    pub fn tail_target_allowed(&self, index: u32) -> Result<(), String> {
        let t = self
            .obj
            .programs
            .get(index as usize)
            .ok_or_else(|| format!("a PROG_ARRAY slot names program {index}; the object has {}", self.obj.programs.len()))?;
        tail_target_kind(t, self.force_xdp, self.prog.frags_aware())
            .map_err(|why| format!("a PROG_ARRAY cannot hold program {index}: {why}"))
    }

    /// Loads the opened program: freezes the object's `.rodata` maps as libbpf does once they
    /// are set (user space can no longer write them, programs never could), verifies the
    /// program knowing their values, and prepares the engine and the tail-call targets. The
    /// JIT compiles the program the verifier accepted with those values.
    pub fn load(self, verify_opts: &VerifyOptions, kind: EngineKind, locked_atomics: bool) -> Result<EbpfProgram, XdpLoadError> {
        let OpenedXdp { path: p, obj, prog, force_xdp } = self;
        let frozen = obj.freeze_rodata();
        let name = format!("{}:{}", Path::new(&p).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(), prog.name);
        // Every program is verified, whichever engine runs it: the JIT's code has no checks.
        let verified = verify_with_frozen(&prog, verify_opts, &frozen).map_err(|e| XdpLoadError::Verifier {
            path: p.clone(),
            prog: prog.name.clone(),
            msg: e.to_string(),
        })?;
        let frags_aware = prog.frags_aware();
        let calls_tail =
            prog.insns.iter().any(|i| i.code == sluice_ebpf::insn::BPF_JMP | sluice_ebpf::insn::BPF_CALL && i.src == 0 && i.imm == 12);
        let entry = Arc::new(verified);
        let maps = obj.maps.clone();
        // Per-CPU maps have a copy per worker; unless asked for locked atomics, one worker
        // runs the program and is the single writer (no bus lock needed; RunConfig::single_writer).
        let config = RunConfig { single_writer: !locked_atomics, ..RunConfig::default() };
        let (engine, engine_kind, jit_fallback) =
            make_engine(kind, &entry, &maps, config).map_err(|msg| XdpLoadError::Load { path: p.clone(), msg })?;
        // Tail-call targets: the object's programs a PROG_ARRAY may hold, each checked as the
        // kernel checks a program put in one (bpf_prog_map_compatible: an XDP program with the
        // entry's frags awareness, loaded, i.e. verified).
        let has_prog_array = obj.maps.iter().any(|m| m.def().map_type == sluice_ebpf::program::map_type::PROG_ARRAY);
        let tail_fit: Vec<Result<Arc<VerifiedProgram>, String>> = if has_prog_array {
            obj.programs.iter().map(|t| tail_target_fit(t, force_xdp, frags_aware, verify_opts, &frozen)).collect()
        } else {
            Vec::new()
        };
        let tail_refusals: Vec<Option<String>> = tail_fit.iter().map(|r| r.as_ref().err().cloned()).collect();
        if calls_tail {
            // The entry program uses the maps it tail-calls through: their filled slots must fit it.
            check_prog_arrays(&obj.maps, &tail_refusals).map_err(|msg| XdpLoadError::Load { path: p.clone(), msg })?;
        }
        let tail_programs: Vec<Option<Arc<VerifiedProgram>>> =
            if calls_tail { tail_fit.into_iter().map(Result::ok).collect() } else { Vec::new() };
        let tail_targets = TailTargets(
            tail_programs.iter().map(|t| t.as_ref().and_then(|t| make_engine(engine_kind, t, &maps, config).ok()).map(|e| e.0)).collect(),
        );
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
            tail_refusals,
            entry,
            tail_programs,
            config,
        })
    }
}

/// Whether `t` may be the target of a tail call from an entry program of `entry_frags`
/// awareness: what bpf_prog_map_compatible requires (same program type, same
/// `xdp_has_frags`) of a program that loaded (verified, knowing the frozen `.rodata`).
fn tail_target_fit(
    t: &sluice_ebpf::Program,
    force_xdp: bool,
    entry_frags: bool,
    verify_opts: &VerifyOptions,
    frozen: &[Option<Vec<u8>>],
) -> Result<Arc<VerifiedProgram>, String> {
    tail_target_kind(t, force_xdp, entry_frags)?;
    let verified = verify_with_frozen(t, verify_opts, frozen).map_err(|e| format!("`{}` is refused by the verifier: {e}", t.name))?;
    Ok(Arc::new(verified))
}

/// The type and frags-awareness half of [`tail_target_fit`].
fn tail_target_kind(t: &sluice_ebpf::Program, force_xdp: bool, entry_frags: bool) -> Result<(), String> {
    if !(t.is_xdp() || force_xdp) {
        return Err(format!("`{}` (section `{}`) is not an XDP program", t.name, t.section));
    }
    if t.frags_aware() != entry_frags {
        return Err(format!("`{}` differs from the entry program in frags awareness (xdp.frags)", t.name));
    }
    Ok(())
}

/// `refusals` has one entry per program of the object.
fn tail_slot_allowed(refusals: &[Option<String>], index: u32) -> Result<(), String> {
    match refusals.get(index as usize) {
        Some(None) => Ok(()),
        Some(Some(why)) => Err(format!("a PROG_ARRAY cannot hold program {index}: {why}")),
        None => Err(format!("a PROG_ARRAY slot names program {index}; the object has {}", refusals.len())),
    }
}

/// Every filled slot of the object's PROG_ARRAYs (libbpf's `values` initialisers) must name a
/// program that may go there: libbpf's update of such a slot fails, and so does the load.
fn check_prog_arrays(maps: &Maps, refusals: &[Option<String>]) -> Result<(), String> {
    for m in maps.iter().filter(|m| m.def().map_type == sluice_ebpf::program::map_type::PROG_ARRAY) {
        for slot in 0..m.def().max_entries {
            if let Some(t) = m.tail_call_target(slot) {
                tail_slot_allowed(refusals, t).map_err(|e| format!("map `{}` slot {slot}: {e}", m.def().name))?;
            }
        }
    }
    Ok(())
}

/// The engine `kind` asks for over the verified program: the JIT (compiling what the
/// verifier accepted), or the checked interpreter when asked or when the JIT cannot
/// translate the program (the reason is returned then).
fn make_engine(
    kind: EngineKind,
    verified: &VerifiedProgram,
    maps: &Arc<Maps>,
    config: RunConfig,
) -> Result<(Engine, EngineKind, Option<String>), String> {
    let interp = || {
        Interpreter::with_config(Arc::new(verified.program().clone()), maps.clone(), config).map(Engine::Interp).map_err(|e| e.to_string())
    };
    Ok(match kind {
        EngineKind::Interp => (interp()?, EngineKind::Interp, None),
        EngineKind::Jit => match Jit::compile_verified_with_config(verified, maps.clone(), config) {
            Ok(j) => (Engine::Jit(j), EngineKind::Jit, None),
            Err(e) => (interp()?, EngineKind::Interp, Some(e.to_string())),
        },
    })
}

impl Engine {
    #[inline]
    fn run(&self, xdp: &mut XdpBuff<'_>, env: &mut SluiceEnv<'_>) -> Result<RunOutcome, sluice_ebpf::RunError> {
        match self {
            Engine::Jit(j) => j.run(xdp, env),
            Engine::Interp(i) => i.run(xdp, env),
        }
    }

    /// [`Engine::run`] for a program that may tail-call into `targets`.
    fn run_with_tail_calls(
        &self,
        xdp: &mut XdpBuff<'_>,
        env: &mut SluiceEnv<'_>,
        targets: &TailTargets,
    ) -> Result<RunOutcome, sluice_ebpf::RunError> {
        match self {
            Engine::Jit(j) => j.run_with_tail_calls(xdp, env, targets),
            Engine::Interp(i) => i.run_with_tail_calls(xdp, env, targets),
        }
    }
}

/// The engines of an object's programs by index (what a PROG_ARRAY slot holds), `None` for
/// one that cannot be a tail call's target.
struct TailTargets(Vec<Option<Engine>>);

impl TailTargets {
    fn get(&self, index: u32) -> Result<&Engine, sluice_ebpf::RunError> {
        self.0.get(index as usize).and_then(Option::as_ref).ok_or_else(|| {
            sluice_ebpf::RunError::new(0, sluice_ebpf::RunErrorKind::MapMismatch(format!("tail call to program {index}, which cannot run")))
        })
    }
}

impl TailCallTargets for TailTargets {
    fn run_target(&self, index: u32, run: &mut RunInProgress<'_, '_>) -> Result<u64, sluice_ebpf::RunError> {
        match self.get(index)? {
            Engine::Jit(j) => j.run_tail_call_target(run),
            Engine::Interp(i) => i.run_tail_call_target(run),
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

    fn maps(&self) -> Option<Arc<Maps>> {
        Some(self.maps.clone())
    }

    #[inline]
    fn run(&mut self, xdp: &mut XdpBuff<'_>, env: &mut SluiceEnv<'_>) -> RunOutcome {
        let mut r = if self.tail_targets.0.is_empty() {
            self.engine.run(xdp, env)
        } else {
            self.engine.run_with_tail_calls(xdp, env, &self.tail_targets)
        };
        // A tail call from an entry function ends the run and names the program to run next
        // on the same context (the helper counted it in `xdp.tail_calls`). One from a
        // subprogram ran its target inside the run, which went on after the subprogram.
        while let Err(sluice_ebpf::RunError { kind: sluice_ebpf::RunErrorKind::TailCall { target }, .. }) = r {
            r = self.tail_targets.get(target).and_then(|next| next.run_with_tail_calls(xdp, env, &self.tail_targets));
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
        if !self.tail_targets.0.is_empty() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdp::env::SluiceEnv;
    use sluice_ebpf::xdp::{LowMem, RedirectTarget};

    fn tail_call_object() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bpf/obj/xdp_tail_call.o")
    }

    /// bpf/xdp_tail_call.o's xdp_tail_redirect picks ifindex 7 with bpf_redirect, then
    /// tail-calls a program that only returns XDP_REDIRECT: the packet goes to ifindex 7, as
    /// the kernel's redirect info outlives the tail call. Both engines.
    #[test]
    fn a_redirect_chosen_before_a_tail_call_holds_after_it() {
        for kind in [EngineKind::Interp, EngineKind::Jit] {
            let mut prog = EbpfProgram::load(&tail_call_object(), Some("xdp_tail_redirect"), kind).unwrap();
            crate::xdp::map_setup::apply_map_flag(&prog, "jmp:03000000=xdp_tail_redirect_verdict").unwrap();
            let mut mem = LowMem::new(4096).unwrap();
            let mut xb = XdpBuff::new(mem.as_mut_slice(), 256, 64);
            let (routes, neigh, mut host) =
                (crate::rx::route::RouteTable::new(), crate::rx::route::Neighbours::default(), crate::xdp::env::HostState::default());
            let out = prog.run(&mut xb, &mut SluiceEnv::new(&routes, &neigh, &[], &mut host));
            assert_eq!((out.action, out.redirect), (sluice_ebpf::insn::XDP_REDIRECT, Some(RedirectTarget::Ifindex(7))), "{kind:?}");
            assert_eq!(xb.tail_calls, 1);
        }
    }

    /// A PROG_ARRAY slot takes only a program the kernel would take there
    /// (bpf_prog_map_compatible): XDP, of the entry's frags awareness.
    #[test]
    fn a_prog_array_refuses_programs_of_another_type_or_frags_awareness() {
        let prog = EbpfProgram::load(&tail_call_object(), Some("xdp_tail_entry"), EngineKind::Interp).unwrap();
        let e = crate::xdp::map_setup::apply_map_flag(&prog, "jmp:03000000=tc_not_xdp").unwrap_err();
        assert!(e.contains("`tc_not_xdp` (section `tc`) is not an XDP program"), "{e}");
        let e = crate::xdp::map_setup::apply_map_flag(&prog, "jmp:03000000=xdp_tail_frags").unwrap_err();
        assert!(e.contains("frags awareness"), "{e}");
        crate::xdp::map_setup::apply_map_flag(&prog, "jmp:03000000=xdp_tail_v4").expect("an XDP program fits");
        assert_eq!(prog.maps.get(prog.maps.index_of("jmp").unwrap()).unwrap().tail_call_target(3), prog.program_index("xdp_tail_v4"));
    }

    /// bpf/obj/xdp_rodata_config.o's `const volatile` settings (verdict table index, counted
    /// byte) are set between open and load, as libbpf skeletons set them, and the load
    /// freezes them: the verifier needs their values (the object is refused otherwise, as in
    /// the kernel), both engines run what it accepted, and user space can no longer write
    /// them afterwards.
    #[test]
    fn rodata_settings_are_set_before_the_load_and_frozen_by_it() {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bpf/obj/xdp_rodata_config.o");
        let mut frame = vec![0u8; 64];
        frame[0] = 0x11;
        frame[14] = 0x45;
        let run = |prog: &mut EbpfProgram| {
            let mut mem = LowMem::new(4096).unwrap();
            mem.as_mut_slice()[256..256 + frame.len()].copy_from_slice(&frame);
            let mut xb = XdpBuff::new(mem.as_mut_slice(), 256, frame.len());
            let (routes, neigh, mut host) =
                (crate::rx::route::RouteTable::new(), crate::rx::route::Neighbours::default(), crate::xdp::env::HostState::default());
            let action = prog.run(&mut xb, &mut SluiceEnv::new(&routes, &neigh, &[], &mut host)).action;
            let peeked = prog.maps.by_name("peeked").unwrap().lookup(&[0; 4], 0).unwrap();
            (action, u64::from_le_bytes(peeked[..8].try_into().unwrap()))
        };
        for kind in [EngineKind::Interp, EngineKind::Jit] {
            let opts = VerifyOptions::default();
            let mut prog = OpenedXdp::open(&path, None, false, 1).unwrap().load(&opts, kind, false).unwrap();
            assert_eq!(prog.engine_kind, kind, "{:?}", prog.jit_fallback);
            assert_eq!(run(&mut prog), (sluice_ebpf::insn::XDP_PASS, 0x45), "defaults: verdicts[1], byte 14");

            let opened = OpenedXdp::open(&path, None, false, 1).unwrap();
            crate::xdp::map_setup::apply_map_flag(&opened, ".rodata:00000000=0200000000000000").unwrap();
            let mut prog = opened.load(&opts, kind, false).unwrap();
            assert_eq!(prog.engine_kind, kind, "{:?}", prog.jit_fallback);
            assert_eq!(run(&mut prog), (sluice_ebpf::insn::XDP_TX, 0x11), "set: verdicts[2], byte 0");
            let e = crate::xdp::map_setup::apply_map_flag(&prog, ".rodata:00000000=0000000000000000").unwrap_err();
            assert!(e.contains("frozen"), "{e}");

            let opened = OpenedXdp::open(&path, None, false, 1).unwrap();
            crate::xdp::map_setup::apply_map_flag(&opened, ".rodata:00000000=0400000000000000").unwrap();
            let e = opened.load(&opts, kind, false).err().expect("verdicts[4] is off the stack");
            assert!(matches!(e, XdpLoadError::Verifier { .. }), "{e}");
        }
    }
}
