//! sluice-ebpf: a userspace runtime for XDP eBPF objects compiled by stock clang.
//!
//! Pipeline: `loader` (ELF via aya-obj, relocation, bpf-to-bpf linking) → `verifier`
//! (refuses anything that could crash or hang the host) → `interp` (checked interpreter) or
//! `jit` (native code, verified programs only). `maps` and `helpers` are shared by both engines.

pub mod asm;
pub mod btf_types;
pub mod burst;
mod elf;
pub mod env;
pub mod helpers;
pub mod insn;
pub mod interp;
pub mod jit;
pub mod loader;
mod map_init;
pub mod maps;
pub mod program;
pub mod state;
pub mod tail_call;
pub mod verifier;
pub mod xdp;

pub use burst::{BurstCtx, BurstFaults, FrameDesc, FrameRegion};
pub use env::{Env, NullEnv, SystemEnv};
pub use interp::Interpreter;
pub use loader::{load_and_verify, LoadError, LoadOptions, Object, ProgramVerdict, SelectError};
pub use maps::{EventRecord, Map, MapDump, MapDumpEntry, MapError, Maps};
pub use program::{section_kind, MapDef, Program, SectionKind};
pub use state::{Engine, RunConfig, RunError, RunErrorKind, RunState};
pub use tail_call::{RunInProgress, TailCallTargets};
pub use xdp::{LowMem, PageFrags, RedirectTarget, RunOutcome, XdpBuff, XdpFrags, XdpMd};
