//! A loaded, linked eBPF program: what the verifier checks and the interpreter / JIT run.

use crate::insn::Insn;

/// Kernel map type numbers (enum bpf_map_type) that sluice understands.
pub mod map_type {
    pub const HASH: u32 = 1;
    pub const ARRAY: u32 = 2;
    pub const PERCPU_HASH: u32 = 5;
    pub const PERCPU_ARRAY: u32 = 6;
    pub const LRU_HASH: u32 = 9;
    pub const LRU_PERCPU_HASH: u32 = 10;
    pub const DEVMAP: u32 = 14;
    pub const CPUMAP: u32 = 16;
    pub const XSKMAP: u32 = 17;
    pub const DEVMAP_HASH: u32 = 25;
}

/// The static description of a map, as declared in the object (BTF-defined or legacy `maps` section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapDef {
    pub name: String,
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
}

/// A program after relocation and linking:
/// - `lddw` with `src == BPF_PSEUDO_MAP_FD` has `imm` = index into `maps` (second slot imm = 0);
/// - `lddw` with `src == BPF_PSEUDO_MAP_VALUE` has `imm` = map index and the second slot's `imm` = offset
///   into the value of key 0 (used for `.data`/`.rodata`/`.bss` globals, which are ARRAY maps of one entry);
/// - `call` with `src == BPF_PSEUDO_CALL` has `imm` = relative slot offset of the callee (bpf-to-bpf call),
///   `src == 0` has `imm` = kernel helper id;
/// - all sub-programs the entry calls are appended after it in `insns`; execution starts at slot 0.
#[derive(Debug, Clone)]
pub struct Program {
    pub name: String,
    pub section: String,
    pub insns: Vec<Insn>,
    pub maps: Vec<MapDef>,
}

impl Program {
    /// Whether this is an XDP program (section `xdp`, `xdp.frags`, `xdp/...`, `xdp.frags/...`).
    pub fn is_xdp(&self) -> bool {
        self.section == "xdp" || self.section == "xdp.frags" || self.section.starts_with("xdp/") || self.section.starts_with("xdp.frags/")
    }
}
