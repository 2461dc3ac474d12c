//! sluice-ebpf: a userspace runtime for XDP eBPF objects compiled by stock clang.
//!
//! Pipeline: `loader` (ELF via aya-obj, relocation, bpf-to-bpf linking) → `verifier`
//! (refuses anything that could crash or hang the host) → `interp` (checked interpreter) or
//! `jit` (native code, verified programs only). `maps` and `helpers` are shared by both engines.

pub mod insn;
pub mod program;
