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
//! Every offset and size aya-obj follows is checked first (`elf.rs`), so a malformed object
//! is an error, never a panic. Program sections may have any name (libbpf / iproute2 /
//! bpftool take any): aya-obj only sees neutral names (`xdp`, `xdp.frags`, `socket`) and
//! each [`Program`] keeps its section's real name, which gives its type
//! ([`crate::program::section_kind`]); programs of other types are loaded and listed, and
//! [`Object::select_xdp`] picks the one to run.
//!
//! Program arrays and maps of maps initialised in the object (`.values = { [0] = &prog }`,
//! `.values = { [0] = &inner_map }`) are filled at load, as libbpf does (`map_init.rs`).
//! A map of maps carries its inner-map template in [`MapDef::inner`].
//!
//! Not supported: CO-RE relocations (left at their compile-time values, which is right for
//! the packet-header types XDP programs use), `.kconfig`/`.ksyms` externs.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};

use aya_obj::EbpfSectionKind;

use crate::elf::Elf;
use crate::insn::*;
use crate::maps::{MapError, Maps, BPF_ANY, DEFAULT_MAX_MAP_BYTES};
use crate::program::{section_kind, MapDef, Program, SectionKind};

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
    #[error("malformed object: {0}")]
    Invalid(String),
    #[error("malformed object (the ELF parser failed: {0})")]
    Malformed(String),
    #[error("relocating: {0}")]
    Relocation(String),
    #[error("map `{name}`: an inner-map template belongs to ARRAY_OF_MAPS / HASH_OF_MAPS maps only (and they need one: `__array(values, struct ...)`)")]
    MapInMap { name: String },
    #[error(transparent)]
    Map(#[from] MapError),
    #[error("program `{name}`: {reason}")]
    Program { name: String, reason: String },
}

/// Why no program could be picked from an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("no XDP program in this object; sections: {have} (name one with --section, or take the first with --prog-type xdp)")]
    NoXdp { have: String },
    #[error("no program or section `{want}` in this object; sections: {have}")]
    NotFound { want: String, have: String },
    #[error("program `{name}` in section `{section}` is a {kind} program, not XDP (--prog-type xdp loads it as XDP anyway)")]
    NotXdp { name: String, section: String, kind: &'static str },
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

thread_local! {
    /// Set while this thread runs third-party code under [`quiet_catch`].
    static QUIET_PANICS: Cell<bool> = const { Cell::new(false) };
}
static QUIET_HOOK: Once = Once::new();

/// Runs `f` (a third-party parser or code generator), turning a panic into an error message
/// without the default hook printing it: the hook is wrapped once, process-wide, and stays
/// silent only for the thread inside this call (other threads' panics print as before).
pub(crate) fn quiet_catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET_PANICS.with(|q| q.get()) {
                previous(info);
            }
        }));
    });
    let was = QUIET_PANICS.with(|q| q.replace(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    QUIET_PANICS.with(|q| q.set(was));
    r.map_err(panic_message)
}

/// Runs `f` (aya-obj code), turning a panic on malformed input into an error (a last
/// resort: `Elf::parse` checks what aya-obj trusts).
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, LoadError> {
    quiet_catch(f).map_err(LoadError::Malformed)
}

/// The neutral section name aya-obj gets for a program section (it refuses names it does
/// not know; the real name stays with the program).
fn neutral_section_name(real: &str) -> &'static str {
    match section_kind(real) {
        SectionKind::Xdp { frags: true } => "xdp.frags",
        SectionKind::Xdp { frags: false } => "xdp",
        _ => "socket",
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
        let elf = Elf::parse(bytes).map_err(LoadError::Invalid)?;
        let prog_sections = elf.program_sections();
        let real_names: HashMap<usize, String> = prog_sections.iter().map(|(i, n)| (*i, (*n).to_owned())).collect();
        let renames: Vec<(usize, &str)> =
            prog_sections.iter().filter(|(_, n)| neutral_section_name(n) != *n).map(|(i, n)| (*i, neutral_section_name(n))).collect();
        let renamed;
        let bytes = if renames.is_empty() {
            bytes
        } else {
            renamed = elf.with_section_names(&renames).map_err(LoadError::Invalid)?;
            &renamed[..]
        };
        // Program arrays filled in the object (renaming only appends, so offsets still hold).
        let (patched, prog_inits) = crate::map_init::prog_array_inits(&elf, bytes).map_err(LoadError::Invalid)?;
        let bytes = patched.as_deref().unwrap_or(bytes);
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
            // A map of maps: its inner-map template (BTF `__array(values, ...)` or legacy
            // `inner_map_idx`). libbpf gives the outer map 4-byte values (map fds).
            let inner = m.inner().map(|i| {
                Box::new(MapDef {
                    name: format!("{name}.inner"),
                    map_type: i.map_type(),
                    key_size: i.key_size(),
                    value_size: i.value_size(),
                    max_entries: i.max_entries(),
                    flags: i.map_flags(),
                    inner: None,
                })
            });
            let is_outer = matches!(m.map_type(), crate::program::map_type::ARRAY_OF_MAPS | crate::program::map_type::HASH_OF_MAPS);
            if is_outer != inner.is_some() {
                return Err(LoadError::MapInMap { name: name.clone() });
            }
            // libbpf sizes a perf event array left at 0 entries to the number of CPUs, and a
            // ring buffer to the next power-of-two multiple of the page size.
            let max_entries = match m.max_entries() {
                0 if m.map_type() == crate::program::map_type::PERF_EVENT_ARRAY => opts.ncpus.max(1),
                n if m.map_type() == crate::program::map_type::RINGBUF => ringbuf_size(n),
                n => n,
            };
            let mut value_size = m.value_size();
            if is_outer && value_size == 0 {
                value_size = 4;
            }
            if prog_inits.iter().any(|i| &i.map == name && !i.maps) {
                if m.map_type() != crate::program::map_type::PROG_ARRAY {
                    return Err(LoadError::Invalid(format!("map `{name}`: programs in `values` of a map that is not a PROG_ARRAY")));
                }
                // libbpf: a prog array declared with `values` holds 4-byte values.
                if value_size == 0 {
                    value_size = 4;
                }
            }
            defs.push(MapDef {
                name: name.clone(),
                map_type: m.map_type(),
                key_size: m.key_size(),
                value_size,
                max_entries,
                flags: m.map_flags(),
                inner,
            });
        }
        let mut maps = Maps::with_limit(&defs, opts.ncpus.max(1), opts.max_map_bytes)?;
        // Key and value types from BTF, for typed dumps and typed map setup.
        maps.set_types(
            named
                .iter()
                .map(|(_, m)| match m {
                    aya_obj::Map::Btf(b) => Some(crate::btf_types::MapTypes {
                        key: crate::btf_types::type_of(&elf, b.def.btf_key_type_id),
                        value: crate::btf_types::type_of(&elf, b.def.btf_value_type_id),
                    }),
                    aya_obj::Map::Legacy(_) => None,
                })
                .collect(),
        );
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
            let section = real_names.get(&p.section_index).cloned().unwrap_or_default();
            programs.push(Program { name, section, insns, maps: defs.clone() });
        }
        // Fill the statically initialised program arrays as libbpf does at load (a slot holds
        // the program's index in the object).
        for init in prog_inits.iter().filter(|i| i.maps) {
            let outer = maps.index_of(&init.map).ok_or_else(|| LoadError::Invalid(format!("map `{}` not found", init.map)))?;
            for (slot, inner) in &init.slots {
                let idx = maps.index_of(inner).ok_or_else(|| {
                    LoadError::Invalid(format!("map `{}`: slot {slot} names `{inner}`, which is not a map of this object", init.map))
                })?;
                maps.set_inner(outer, &slot.to_le_bytes(), idx, BPF_ANY)?;
            }
        }
        for init in prog_inits.iter().filter(|i| !i.maps) {
            let map = maps.by_name(&init.map).ok_or_else(|| LoadError::Invalid(format!("map `{}` not found", init.map)))?;
            for (slot, prog) in &init.slots {
                let idx = programs.iter().position(|p| &p.name == prog).ok_or_else(|| {
                    LoadError::Invalid(format!("map `{}`: slot {slot} names `{prog}`, which is not a program of this object", init.map))
                })?;
                map.update(&slot.to_le_bytes(), &(idx as u32).to_le_bytes(), BPF_ANY)?;
            }
        }
        Ok(Object { programs, maps: Arc::new(maps), license: obj.license.to_string_lossy().into_owned() })
    }

    /// Freezes the object's `.rodata` maps as libbpf does at load (internal maps of
    /// `.rodata*` sections, once user space has set them): user space can no longer write
    /// them, and programs never could. Returns their values by map index, for
    /// [`crate::verifier::verify_with_frozen`] to read as constants; `None` for other maps.
    pub fn freeze_rodata(&self) -> Vec<Option<Vec<u8>>> {
        for m in self.maps.iter() {
            let d = m.def();
            if d.name.starts_with(".rodata") && d.flags & crate::maps::BPF_F_RDONLY_PROG != 0 {
                m.freeze();
            }
        }
        self.maps.frozen_values()
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

    /// The XDP program to run, picked as libbpf / iproute2 / bpftool pick it:
    /// - `want` names a function, else a section (its first program). A section of another
    ///   program type (`tc`, `kprobe/...`) is refused unless `force_xdp`; a section libbpf
    ///   gives no type (`prog`, `xdp_sock`) is taken as XDP, as iproute2's `sec NAME` does.
    /// - no `want`: the first program of an XDP section (`xdp`, `xdp/...`, `xdp.frags...`);
    ///   with `force_xdp` (bpftool's `type xdp`) and no such section, the first program.
    pub fn select_xdp(&self, want: Option<&str>, force_xdp: bool) -> Result<&Program, SelectError> {
        match want.filter(|w| !w.is_empty()) {
            Some(w) => {
                let p = self
                    .programs
                    .iter()
                    .find(|p| p.name == w)
                    .or_else(|| self.programs.iter().find(|p| p.section == w))
                    .ok_or_else(|| SelectError::NotFound { want: w.to_owned(), have: self.describe_programs() })?;
                match section_kind(&p.section) {
                    SectionKind::Other(kind) if !force_xdp => {
                        Err(SelectError::NotXdp { name: p.name.clone(), section: p.section.clone(), kind })
                    }
                    _ => Ok(p),
                }
            }
            None => self
                .programs
                .iter()
                .find(|p| p.is_xdp())
                .or_else(|| self.programs.first().filter(|_| force_xdp))
                .ok_or_else(|| SelectError::NoXdp { have: self.describe_programs() }),
        }
    }

    /// `section (function, type)` for every program, for messages.
    pub fn describe_programs(&self) -> String {
        if self.programs.is_empty() {
            return "none".into();
        }
        let list: Vec<String> =
            self.programs.iter().map(|p| format!("{} ({}, {})", p.section, p.name, section_kind(&p.section).describe())).collect();
        list.join(", ")
    }

    /// Names of all programs, in ELF order.
    pub fn program_names(&self) -> Vec<&str> {
        self.programs.iter().map(|p| p.name.as_str()).collect()
    }
}

/// A program's name and the verifier's refusal, if any.
pub type ProgramVerdict = (String, Result<(), String>);

/// Loads an object from untrusted bytes and verifies every program in it, as XDP, with its
/// `.rodata` frozen as a loader does (the loader fuzz target's entry point: any input gives
/// `Err` or per-program results, never a panic). Each result is the program's name and the
/// verifier's refusal, if any.
pub fn load_and_verify(bytes: &[u8]) -> Result<Vec<ProgramVerdict>, LoadError> {
    let obj = Object::from_bytes(bytes)?;
    let frozen = obj.freeze_rodata();
    let opts = crate::verifier::VerifyOptions::default();
    Ok(obj
        .programs
        .iter()
        .map(|p| (p.name.clone(), crate::verifier::verify_with_frozen(p, &opts, &frozen).map(|_| ()).map_err(|e| e.to_string())))
        .collect())
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

/// libbpf's adjust_ringbuf_sz: the kernel wants a ring buffer of a power-of-two number of
/// 4 KiB pages; a size that is not one is rounded up to the smallest that is larger (0, and
/// a size nothing fits, are left for map creation to refuse).
fn ringbuf_size(n: u32) -> u32 {
    const PAGE: u64 = 4096;
    let sz = u64::from(n);
    if sz == 0 || (sz % PAGE == 0 && (sz / PAGE).is_power_of_two()) {
        return n;
    }
    let mut size = PAGE;
    while size <= sz {
        size <<= 1;
    }
    u32::try_from(size).unwrap_or(n)
}

#[cfg(test)]
mod ringbuf_size_tests {
    use super::ringbuf_size;

    #[test]
    fn ring_buffers_are_rounded_up_to_a_power_of_two_of_pages_as_libbpf_does() {
        assert_eq!(ringbuf_size(1000), 4096);
        assert_eq!(ringbuf_size(4096), 4096);
        assert_eq!(ringbuf_size(4097), 8192);
        assert_eq!(ringbuf_size(3 * 4096), 4 * 4096);
        assert_eq!(ringbuf_size(1 << 24), 1 << 24);
        assert_eq!(ringbuf_size(0), 0);
        assert_eq!(ringbuf_size(u32::MAX), u32::MAX, "nothing fits: left for creation to refuse");
    }
}
