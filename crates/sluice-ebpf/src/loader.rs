//! Loads an eBPF ELF object compiled by clang (`clang -O2 -g -target bpf`): programs, maps
//! (BTF-defined `SEC(".maps")` and legacy `SEC("maps") struct bpf_map_def`), global data
//! (`.data*`, `.rodata*`, `.bss*` as single-entry ARRAY maps initialised from the ELF) and
//! bpf-to-bpf calls. ELF/BTF parsing and relocation are done by `aya-obj`.
//!
//! Result conventions (see [`Program`]): all maps of the object are in [`Maps`] and in every
//! `Program::maps`, at the same indices, in ELF order (map sections first, then data
//! sections); `lddw` map references carry the map index; every sub-program reachable from a
//! program is appended after it and calls carry relative offsets.
//!
//! Not supported: CO-RE relocations (left at their compile-time values, which is right for
//! the packet-header types XDP programs use), `.kconfig`/`.ksyms` externs, map-in-map,
//! program sections `aya-obj` does not know (e.g. `tc`, legacy `xdp_*` names: the whole object
//! is refused).

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aya_obj::programs::XdpAttachType;
use aya_obj::{EbpfSectionKind, ProgramSection};

use crate::insn::*;
use crate::maps::{MapError, Maps, BPF_ANY, DEFAULT_MAX_MAP_BYTES};
use crate::program::{MapDef, Program};

/// Options for loading an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// CPUs (sluice workers) per-CPU maps keep a value for. Every run's `Env::cpu_id` must be
    /// below this.
    pub ncpus: u32,
    /// Cap on the memory one map may reserve.
    pub max_map_bytes: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { ncpus: 1, max_map_bytes: DEFAULT_MAX_MAP_BYTES }
    }
}

/// Why an object could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing the object: {0}")]
    Parse(String),
    #[error("malformed object (the ELF parser failed: {0})")]
    Malformed(String),
    #[error("relocating: {0}")]
    Relocation(String),
    #[error("map `{name}`: map-in-map is not supported")]
    MapInMap { name: String },
    #[error(transparent)]
    Map(#[from] MapError),
    #[error("program `{name}`: {reason}")]
    Program { name: String, reason: String },
}

/// A loaded object: its programs (all sections, in ELF order) and its maps.
#[derive(Debug, Clone)]
pub struct Object {
    pub programs: Vec<Program>,
    pub maps: Arc<Maps>,
    pub license: String,
}

/// Formats an error with its whole source chain.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// The message of a caught panic (a third-party parser's or code generator's), for an error.
pub(crate) fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}

/// Runs `f` (aya-obj code), turning a panic on malformed input into an error.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, LoadError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| LoadError::Malformed(panic_message(p)))
}

/// The ELF section name of a program section as written in `SEC(...)` (exact for XDP).
fn section_name(s: &ProgramSection) -> String {
    match s {
        ProgramSection::Xdp { frags, attach_type } => {
            let base = if *frags { "xdp.frags" } else { "xdp" };
            match attach_type {
                XdpAttachType::Interface => base.to_owned(),
                XdpAttachType::CpuMap => format!("{base}/cpumap"),
                XdpAttachType::DevMap => format!("{base}/devmap"),
            }
        }
        ProgramSection::SchedClassifier => "classifier".to_owned(),
        ProgramSection::SocketFilter => "socket".to_owned(),
        other => {
            let d = format!("{other:?}");
            d.split([' ', '{']).next().unwrap_or("").to_lowercase()
        }
    }
}

impl Object {
    /// Loads an object from its ELF bytes with default options (1 CPU).
    pub fn from_bytes(bytes: &[u8]) -> Result<Object, LoadError> {
        Object::from_bytes_with(bytes, &LoadOptions::default())
    }

    /// Loads an object from a file with default options.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Object, LoadError> {
        Object::from_file_with(path, &LoadOptions::default())
    }

    pub fn from_file_with(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Object, LoadError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| LoadError::Io { path: path.to_owned(), source })?;
        Object::from_bytes_with(&bytes, opts)
    }

    /// Loads an object from its ELF bytes.
    pub fn from_bytes_with(bytes: &[u8], opts: &LoadOptions) -> Result<Object, LoadError> {
        let mut obj = guarded(|| aya_obj::Object::parse(bytes))?.map_err(|e| LoadError::Parse(chain(&e)))?;

        // Maps in a stable order: map sections (BTF / legacy) by section and symbol, then the
        // data sections by section index.
        let mut named: Vec<(String, aya_obj::Map)> = obj.maps.iter().map(|(n, m)| (n.clone(), m.clone())).collect();
        named.sort_by_key(|(name, m)| {
            let data = matches!(m.section_kind(), EbpfSectionKind::Data | EbpfSectionKind::Rodata | EbpfSectionKind::Bss);
            (data, m.section_index(), m.symbol_index().unwrap_or(0), name.clone())
        });
        let mut defs = Vec::with_capacity(named.len());
        for (name, m) in &named {
            if m.inner().is_some() {
                return Err(LoadError::MapInMap { name: name.clone() });
            }
            defs.push(MapDef {
                name: name.clone(),
                map_type: m.map_type(),
                key_size: m.key_size(),
                value_size: m.value_size(),
                max_entries: m.max_entries(),
                flags: m.map_flags(),
            });
        }
        let maps = Maps::with_limit(&defs, opts.ncpus.max(1), opts.max_map_bytes)?;
        for (i, (_, m)) in named.iter().enumerate() {
            let data = m.data();
            let is_init = matches!(m.section_kind(), EbpfSectionKind::Data | EbpfSectionKind::Rodata);
            if is_init && !data.is_empty() {
                if let Some(map) = maps.get(i) {
                    map.update(&0u32.to_le_bytes(), data, BPF_ANY)?;
                }
            }
        }

        // Relocate map references (the "fd" we hand aya-obj is the map index) and link calls.
        let text_sections: HashSet<usize> = obj.functions.keys().map(|(s, _)| *s).collect();
        let mut reloc_maps = Vec::with_capacity(named.len());
        for (i, (name, m)) in named.iter().enumerate() {
            let fd = i32::try_from(i).map_err(|_| LoadError::Relocation("too many maps".into()))?;
            reloc_maps.push((name.as_str(), fd, m));
        }
        guarded(|| obj.relocate_maps(reloc_maps.iter().map(|(n, fd, m)| (*n, *fd, *m)), &text_sections))?
            .map_err(|e| LoadError::Relocation(chain(&e)))?;
        guarded(|| obj.relocate_calls(&text_sections))?.map_err(|e| LoadError::Relocation(chain(&e)))?;

        let mut progs: Vec<(usize, u64, String, &aya_obj::Program)> =
            obj.programs.iter().map(|(name, p)| (p.section_index, p.address, name.clone(), p)).collect();
        progs.sort_by_key(|p| (p.0, p.1));
        let mut programs = Vec::with_capacity(progs.len());
        for (_, _, name, p) in progs {
            let func = obj
                .functions
                .get(&p.function_key())
                .ok_or_else(|| LoadError::Program { name: name.clone(), reason: "function not found".into() })?;
            let insns: Vec<Insn> = func
                .instructions
                .iter()
                .map(|i| Insn { code: i.code, dst: i.dst_reg(), src: i.src_reg(), off: i.off, imm: i.imm })
                .collect();
            check_linked(&name, &insns, &defs)?;
            programs.push(Program { name, section: section_name(&p.section), insns, maps: defs.clone() });
        }
        Ok(Object { programs, maps: Arc::new(maps), license: obj.license.to_string_lossy().into_owned() })
    }

    /// The program whose function name is `name_or_section`, else the first program of the ELF
    /// section of that name (`"xdp"`, `"xdp.frags"`, ...), else `None`. An empty string picks
    /// the first XDP program.
    pub fn program(&self, name_or_section: &str) -> Option<&Program> {
        if name_or_section.is_empty() {
            return self.programs.iter().find(|p| p.is_xdp());
        }
        self.programs.iter().find(|p| p.name == name_or_section).or_else(|| self.programs.iter().find(|p| p.section == name_or_section))
    }

    /// Names of all programs, in ELF order.
    pub fn program_names(&self) -> Vec<&str> {
        self.programs.iter().map(|p| p.name.as_str()).collect()
    }
}

/// Checks the linked program follows the `Program` conventions (so nothing downstream has to
/// guess): lddw pairs complete, map indices valid, direct value offsets inside the value,
/// call targets inside the program.
fn check_linked(name: &str, insns: &[Insn], defs: &[MapDef]) -> Result<(), LoadError> {
    let bad = |pc: usize, what: String| LoadError::Program { name: name.to_owned(), reason: format!("insn {pc}: {what}") };
    let mut pc = 0usize;
    while pc < insns.len() {
        let i = insns[pc];
        if i.code == (BPF_LD | BPF_IMM | BPF_DW) {
            let Some(next) = insns.get(pc + 1) else {
                return Err(bad(pc, "lddw without its second slot".into()));
            };
            match i.src {
                BPF_PSEUDO_MAP_FD | BPF_PSEUDO_MAP_VALUE => {
                    let Some(def) = defs.get(i.imm as u32 as usize) else {
                        return Err(bad(pc, format!("reference to unknown map {}", i.imm)));
                    };
                    if i.src == BPF_PSEUDO_MAP_VALUE && next.imm as u32 >= def.value_size {
                        return Err(bad(pc, format!("offset {} outside map `{}`", next.imm, def.name)));
                    }
                }
                _ => {}
            }
            pc += 2;
            continue;
        }
        if i.code == (BPF_JMP | BPF_CALL) && i.src == BPF_PSEUDO_CALL {
            let t = pc as i64 + 1 + i.imm as i64;
            if t < 0 || t as usize >= insns.len() {
                return Err(bad(pc, "call target outside the program".into()));
            }
        }
        pc += 1;
    }
    Ok(())
}
