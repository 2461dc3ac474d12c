//! A checked view of an eBPF ELF relocatable object, used before aya-obj sees the bytes.
//!
//! aya-obj trusts offsets and sizes it reads from the object (a symbol running past its
//! section, a BTF length past the end of `.BTF`, ...) and panics on them. Every offset and
//! size it will follow is checked here first, so bad input becomes an error naming what is
//! wrong. The view also classifies program sections and can rewrite section names (aya-obj
//! refuses section names it does not know, libbpf and iproute2 take any).

/// Section types and flags (ELF gABI).
const SHT_NULL: u32 = 0;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHT_RELA: u32 = 4;
const SHT_NOBITS: u32 = 8;
const SHT_REL: u32 = 9;
const SHF_EXECINSTR: u64 = 0x4;
const SHN_LORESERVE: u16 = 0xff00;
const STT_FUNC: u8 = 2;
const STT_SECTION: u8 = 3;
/// The relocation types clang emits in BPF code: `lddw` (64-bit immediate) and `call`.
const R_BPF_64_64: u32 = 1;
const R_BPF_64_32: u32 = 10;
const STT_FILE: u8 = 4;

const ET_REL: u16 = 1;
const EM_BPF: u16 = 247;
const EHDR_LEN: usize = 64;
const SHDR_LEN: usize = 64;
const SYM_LEN: usize = 24;
const BPF_INSN_LEN: u64 = 8;
const BTF_MAGIC: u16 = 0xeb9f;
/// The largest zero-filled (NOBITS, `.bss`) section taken: aya-obj allocates it whole, and
/// it becomes one map value, which the kernel caps at KMALLOC_MAX_SIZE (4 MiB on x86-64).
const MAX_NOBITS_BYTES: u64 = 4 << 20;

/// One section header (the fields the checks need).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shdr {
    name: u32,
    ty: u32,
    flags: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
}

/// One ELF symbol (checked: inside its section when it has one).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ElfSymbol<'a> {
    pub name: &'a str,
    pub shndx: usize,
    pub value: u64,
    pub size: u64,
}

/// A structurally checked ELF64 object.
pub(crate) struct Elf<'a> {
    bytes: &'a [u8],
    le: bool,
    sections: Vec<Shdr>,
    shstrndx: usize,
}

fn read<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..off.checked_add(N)?)?.try_into().ok()
}

/// Little- or big-endian field reads, `None` when out of bounds.
#[derive(Clone, Copy)]
struct Endian(bool);

impl Endian {
    fn u16(self, b: &[u8], off: usize) -> Option<u16> {
        read::<2>(b, off).map(|a| if self.0 { u16::from_le_bytes(a) } else { u16::from_be_bytes(a) })
    }
    fn u32(self, b: &[u8], off: usize) -> Option<u32> {
        read::<4>(b, off).map(|a| if self.0 { u32::from_le_bytes(a) } else { u32::from_be_bytes(a) })
    }
    fn u64(self, b: &[u8], off: usize) -> Option<u64> {
        read::<8>(b, off).map(|a| if self.0 { u64::from_le_bytes(a) } else { u64::from_be_bytes(a) })
    }
}

/// The NUL-terminated string at `off` in a string table.
fn c_str(table: &[u8], off: usize) -> Option<&str> {
    let rest = table.get(off..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// Whether aya-obj gives the section a meaning by its name (everything else that holds
/// code is a program section).
fn aya_named_kind(name: &str) -> bool {
    ["license", "version", "maps", ".maps", ".text", ".bss", ".data", ".rodata"].iter().any(|p| name.starts_with(p))
        || name == ".BTF"
        || name == ".BTF.ext"
}

impl<'a> Elf<'a> {
    /// Checks the ELF header, the section table and every section's bytes, names, symbols,
    /// relocations and BTF.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Elf<'a>, String> {
        if bytes.len() < EHDR_LEN {
            return Err(format!("truncated: {} bytes, shorter than an ELF header", bytes.len()));
        }
        if bytes[..4] != *b"\x7fELF" {
            return Err("not an ELF file (bad magic)".into());
        }
        if bytes[4] != 2 {
            return Err("not a 64-bit ELF object (eBPF objects are ELF64)".into());
        }
        let le = match bytes[5] {
            1 => true,
            2 => false,
            d => return Err(format!("unknown ELF data encoding {d}")),
        };
        let e = Endian(le);
        let (ty, machine) = (e.u16(bytes, 0x10).unwrap_or(0), e.u16(bytes, 0x12).unwrap_or(0));
        if ty != ET_REL || machine != EM_BPF {
            return Err(format!(
                "not an eBPF relocatable object (ELF type {ty}, machine {machine}; clang -target bpf -c gives type 1, machine 247)"
            ));
        }
        let shoff = e.u64(bytes, 0x28).unwrap_or(0);
        let shentsize = e.u16(bytes, 0x3a).unwrap_or(0) as usize;
        let shnum = e.u16(bytes, 0x3c).unwrap_or(0) as usize;
        let shstrndx = e.u16(bytes, 0x3e).unwrap_or(0) as usize;
        if shnum == 0 || shentsize != SHDR_LEN {
            return Err(format!("no usable section table ({shnum} sections of {shentsize} bytes)"));
        }
        let table_end = (shnum as u64).checked_mul(SHDR_LEN as u64).and_then(|n| n.checked_add(shoff));
        if table_end.is_none_or(|end| end > bytes.len() as u64) {
            return Err(format!("section table ({shnum} entries at offset {shoff}) runs past the end of the file ({} bytes)", bytes.len()));
        }
        let mut sections = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let at = shoff as usize + i * SHDR_LEN;
            let f32 = |o: usize| e.u32(bytes, at + o).unwrap_or(0);
            let f64 = |o: usize| e.u64(bytes, at + o).unwrap_or(0);
            let s = Shdr { name: f32(0), ty: f32(4), flags: f64(8), offset: f64(0x18), size: f64(0x20), link: f32(0x28), info: f32(0x2c) };
            if s.ty != SHT_NOBITS && s.ty != SHT_NULL && s.offset.checked_add(s.size).is_none_or(|end| end > bytes.len() as u64) {
                return Err(format!("section {i}: bytes {}..+{} run past the end of the file ({} bytes)", s.offset, s.size, bytes.len()));
            }
            if s.ty == SHT_NOBITS && s.size > MAX_NOBITS_BYTES {
                return Err(format!("section {i}: {} zero-filled bytes, above the largest map value ({MAX_NOBITS_BYTES})", s.size));
            }
            sections.push(s);
        }
        if shstrndx >= shnum || sections[shstrndx].ty != SHT_STRTAB {
            return Err(format!("section-name table index {shstrndx} is not a string table"));
        }
        let elf = Elf { bytes, le, sections, shstrndx };
        for i in 0..shnum {
            elf.name(i)?;
        }
        elf.check_symbols()?;
        elf.check_relocations()?;
        let mut btf_strings = None;
        for i in 0..shnum {
            if elf.name(i)? == ".BTF" {
                btf_strings = Some(check_btf(elf.data(i), e).map_err(|m| format!("section `.BTF`: {m}"))?);
            }
        }
        for i in 0..shnum {
            if elf.name(i)? == ".BTF.ext" {
                // aya-obj reads `.BTF.ext` only with a `.BTF`; its section names are `.BTF` strings.
                if let Some(strings) = btf_strings {
                    check_btf_ext(elf.data(i), strings, e).map_err(|m| format!("section `.BTF.ext`: {m}"))?;
                }
            }
        }
        Ok(elf)
    }

    fn endian(&self) -> Endian {
        Endian(self.le)
    }

    /// Reads a `u32` in the object's byte order.
    pub(crate) fn u32_at(&self, b: &[u8], off: usize) -> Option<u32> {
        self.endian().u32(b, off)
    }

    /// Writes a `u32` in the object's byte order.
    pub(crate) fn put_u32(&self, b: &mut [u8], off: usize, v: u32) {
        let bytes = if self.le { v.to_le_bytes() } else { v.to_be_bytes() };
        if let Some(d) = b.get_mut(off..off + 4) {
            d.copy_from_slice(&bytes);
        }
    }

    /// Index of the section named `name`.
    pub(crate) fn section_named(&self, name: &str) -> Option<usize> {
        (0..self.sections.len()).find(|&i| self.name(i).is_ok_and(|n| n == name))
    }

    /// A section's bytes and where they start in the file.
    pub(crate) fn section_bytes(&self, i: usize) -> (&'a [u8], usize) {
        (self.data(i), self.sections.get(i).map_or(0, |s| s.offset as usize))
    }

    /// The symbols of the (first) symbol table: name, section index, value, size.
    pub(crate) fn symbols(&self) -> Vec<ElfSymbol<'a>> {
        let e = self.endian();
        let Some(si) = self.sections.iter().position(|s| s.ty == SHT_SYMTAB) else { return Vec::new() };
        let strings = self.data(self.sections[si].link as usize);
        self.data(si)
            .chunks_exact(SYM_LEN)
            .map(|sym| ElfSymbol {
                name: c_str(strings, e.u32(sym, 0).unwrap_or(0) as usize).unwrap_or(""),
                shndx: e.u16(sym, 6).unwrap_or(0) as usize,
                value: e.u64(sym, 8).unwrap_or(0),
                size: e.u64(sym, 16).unwrap_or(0),
            })
            .collect()
    }

    /// The (offset, symbol index) of every REL entry applying to section `target`.
    pub(crate) fn relocations_of(&self, target: usize) -> Vec<(u64, usize)> {
        let e = self.endian();
        let mut out = Vec::new();
        for (ri, _) in self.sections.iter().enumerate().filter(|(_, s)| s.ty == SHT_REL && s.info as usize == target) {
            for r in self.data(ri).chunks_exact(16) {
                out.push((e.u64(r, 0).unwrap_or(0), (e.u64(r, 8).unwrap_or(0) >> 32) as usize));
            }
        }
        out
    }

    /// A section's file bytes (empty for NOBITS); in bounds by construction.
    fn data(&self, i: usize) -> &'a [u8] {
        let s = self.sections[i];
        if s.ty == SHT_NOBITS || s.ty == SHT_NULL {
            return &[];
        }
        &self.bytes[s.offset as usize..(s.offset + s.size) as usize]
    }

    pub(crate) fn name(&self, i: usize) -> Result<&'a str, String> {
        let table = self.data(self.shstrndx);
        c_str(table, self.sections[i].name as usize)
            .ok_or_else(|| format!("section {i}: name offset {} outside the name table", self.sections[i].name))
    }

    /// The sections aya-obj takes as program sections: code, non-empty, not a name it knows.
    pub(crate) fn program_sections(&self) -> Vec<(usize, &'a str)> {
        (0..self.sections.len())
            .filter(|&i| {
                let s = self.sections[i];
                s.ty != SHT_NOBITS && s.flags & SHF_EXECINSTR != 0 && s.size > 0
            })
            .filter_map(|i| self.name(i).ok().map(|n| (i, n)))
            .filter(|(_, n)| !aya_named_kind(n))
            .collect()
    }

    /// Symbols defined in a section must lie inside it (libbpf: "crosses section boundary").
    fn check_symbols(&self) -> Result<(), String> {
        let e = self.endian();
        for (si, sym_sec) in self.sections.iter().enumerate().filter(|(_, s)| s.ty == SHT_SYMTAB) {
            let link = sym_sec.link as usize;
            if link >= self.sections.len() || self.sections[link].ty != SHT_STRTAB {
                return Err(format!("symbol table (section {si}) links to {link}, not a string table"));
            }
            let strings = self.data(link);
            let syms = self.data(si);
            for (n, sym) in syms.chunks_exact(SYM_LEN).enumerate() {
                let name_off = e.u32(sym, 0).unwrap_or(0) as usize;
                let info = sym[4];
                let shndx = e.u16(sym, 6).unwrap_or(0);
                let value = e.u64(sym, 8).unwrap_or(0);
                let size = e.u64(sym, 16).unwrap_or(0);
                let name =
                    c_str(strings, name_off).ok_or_else(|| format!("symbol {n}: name offset {name_off} outside the string table"))?;
                if shndx == 0 || shndx >= SHN_LORESERVE {
                    continue;
                }
                let Some(target) = self.sections.get(shndx as usize) else {
                    return Err(format!("symbol `{name}` is in section {shndx}, which does not exist"));
                };
                if matches!(info & 0xf, STT_SECTION | STT_FILE) {
                    continue;
                }
                if value.checked_add(size).is_none_or(|end| end > target.size) {
                    let sec = self.name(shndx as usize)?;
                    return Err(format!("symbol `{name}` crosses the end of section `{sec}` ({value}+{size} > {})", target.size));
                }
            }
        }
        Ok(())
    }

    /// Relocation entries must point inside their target section and at an existing symbol;
    /// in code, at a whole instruction.
    fn check_relocations(&self) -> Result<(), String> {
        let e = self.endian();
        for (ri, rel) in self.sections.iter().enumerate().filter(|(_, s)| s.ty == SHT_REL || s.ty == SHT_RELA) {
            let rel_name = self.name(ri)?;
            let entry = if rel.ty == SHT_REL { 16 } else { 24 };
            let target = rel.info as usize;
            let symtab = rel.link as usize;
            let (Some(t), Some(st)) = (self.sections.get(target), self.sections.get(symtab)) else {
                return Err(format!("relocation section `{rel_name}`: target {target} or symbol table {symtab} does not exist"));
            };
            let nsyms = if st.ty == SHT_SYMTAB { st.size / SYM_LEN as u64 } else { 0 };
            let code = t.flags & SHF_EXECINSTR != 0;
            for (n, r) in self.data(ri).chunks_exact(entry).enumerate() {
                let offset = e.u64(r, 0).unwrap_or(0);
                let sym = e.u64(r, 8).unwrap_or(0) >> 32;
                let need = if code { BPF_INSN_LEN } else { 1 };
                if offset.checked_add(need).is_none_or(|end| end > t.size) || (code && !offset.is_multiple_of(BPF_INSN_LEN)) {
                    return Err(format!(
                        "relocation {n} of `{rel_name}`: offset {offset} is not inside section `{}` ({} bytes)",
                        self.name(target)?,
                        t.size
                    ));
                }
                if sym >= nsyms {
                    return Err(format!("relocation {n} of `{rel_name}`: symbol {sym} does not exist ({nsyms} symbols)"));
                }
                if code {
                    self.check_code_relocation(rel_name, n, (e.u64(r, 8).unwrap_or(0) & 0xffff_ffff) as u32, symtab, sym as usize)?;
                }
            }
        }
        Ok(())
    }

    /// A relocation in code (libbpf's rules): `lddw` or `call`, and a symbol in code must be
    /// a defined function or a section.
    fn check_code_relocation(&self, rel_name: &str, n: usize, ty: u32, symtab: usize, sym: usize) -> Result<(), String> {
        if ty != R_BPF_64_64 && ty != R_BPF_64_32 {
            return Err(format!("relocation {n} of `{rel_name}`: type {ty} is not one BPF code uses (lddw 1, call 10)"));
        }
        let e = self.endian();
        let at = sym * SYM_LEN;
        let entry = self.data(symtab);
        let kind = entry.get(at + 4).map_or(0, |i| i & 0xf);
        let shndx = e.u16(entry, at + 6).unwrap_or(0);
        let in_code = self.sections.get(shndx as usize).is_some_and(|s| shndx < SHN_LORESERVE && s.flags & SHF_EXECINSTR != 0);
        if (kind == STT_FUNC && !in_code) || (in_code && kind != STT_FUNC && kind != STT_SECTION) {
            return Err(format!(
                "relocation {n} of `{rel_name}`: symbol {sym} (type {kind}, section {shndx}) is not a function or a code section"
            ));
        }
        Ok(())
    }

    /// The object with the given sections renamed: a new section-name table and section
    /// table are appended (the old ones stay in place, unreferenced, so no offset moves).
    pub(crate) fn with_section_names(&self, renames: &[(usize, &str)]) -> Result<Vec<u8>, String> {
        let shnum = self.sections.len();
        if shnum + 1 >= SHN_LORESERVE as usize {
            return Err("too many sections to rename".into());
        }
        let mut out = self.bytes.to_vec();
        let strtab_off = out.len();
        let mut names = vec![0u8];
        let mut name_offs = Vec::with_capacity(shnum + 1);
        for i in 0..shnum {
            let name = renames.iter().find(|(s, _)| *s == i).map(|(_, n)| *n).map_or_else(|| self.name(i), Ok)?;
            name_offs.push(names.len() as u32);
            names.extend_from_slice(name.as_bytes());
            names.push(0);
        }
        let own_name = names.len() as u32;
        names.extend_from_slice(b".sluice.shstrtab\0");
        out.extend_from_slice(&names);
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let shoff = out.len();
        let e = self.endian();
        let shoff_old = e.u64(self.bytes, 0x28).unwrap_or(0) as usize;
        let put32 = |v: u32| if self.le { v.to_le_bytes() } else { v.to_be_bytes() };
        let put64 = |v: u64| if self.le { v.to_le_bytes() } else { v.to_be_bytes() };
        let put16 = |v: u16| if self.le { v.to_le_bytes() } else { v.to_be_bytes() };
        for (i, off) in name_offs.iter().enumerate() {
            let at = shoff_old + i * SHDR_LEN;
            let mut h: [u8; SHDR_LEN] = read(self.bytes, at).ok_or("section table moved")?;
            h[0..4].copy_from_slice(&put32(*off));
            out.extend_from_slice(&h);
        }
        let mut h = [0u8; SHDR_LEN];
        h[0..4].copy_from_slice(&put32(own_name));
        h[4..8].copy_from_slice(&put32(SHT_STRTAB));
        h[0x18..0x20].copy_from_slice(&put64(strtab_off as u64));
        h[0x20..0x28].copy_from_slice(&put64(names.len() as u64));
        h[0x30..0x38].copy_from_slice(&put64(1));
        out.extend_from_slice(&h);
        out[0x28..0x30].copy_from_slice(&put64(shoff as u64));
        out[0x3c..0x3e].copy_from_slice(&put16((shnum + 1) as u16));
        out[0x3e..0x40].copy_from_slice(&put16(shnum as u16));
        Ok(out)
    }
}

/// The `.BTF` header and type records: every length inside the section, every record
/// complete, every name inside the string area.
/// Returns the string area.
fn check_btf(b: &[u8], e: Endian) -> Result<&[u8], String> {
    let magic = e.u16(b, 0).ok_or("truncated header")?;
    if magic != BTF_MAGIC {
        return Err(format!("bad magic {magic:#x}"));
    }
    let hdr_len = e.u32(b, 4).ok_or("truncated header")? as u64;
    let field = |o: usize| e.u32(b, o).map(u64::from).ok_or("truncated header");
    let (type_off, type_len, str_off, str_len) = (field(8)?, field(12)?, field(16)?, field(20)?);
    if hdr_len < 24 || hdr_len > b.len() as u64 {
        return Err(format!("header length {hdr_len} outside the section ({} bytes)", b.len()));
    }
    let body = b.len() as u64 - hdr_len;
    for (what, off, len) in [("type", type_off, type_len), ("string", str_off, str_len)] {
        if off + len > body {
            return Err(format!("{what} area {off}..+{len} runs past the end of the section ({body} bytes after the header)"));
        }
    }
    let strings = &b[(hdr_len + str_off) as usize..(hdr_len + str_off + str_len) as usize];
    if strings.first().is_some_and(|&c| c != 0) || strings.last().is_some_and(|&c| c != 0) {
        return Err("string area does not start and end with NUL".into());
    }
    let types = &b[(hdr_len + type_off) as usize..(hdr_len + type_off + type_len) as usize];
    let mut at = 0usize;
    let mut id = 1u32;
    while at < types.len() {
        let name_off = e.u32(types, at).ok_or_else(|| format!("type {id}: truncated record"))? as usize;
        let info = e.u32(types, at + 4).ok_or_else(|| format!("type {id}: truncated record"))?;
        if name_off >= strings.len().max(1) {
            return Err(format!("type {id}: name offset {name_off} outside the string area"));
        }
        let vlen = (info & 0xffff) as usize;
        let extra = match (info >> 24) & 0x1f {
            2 | 7..=12 | 16 | 18 => 0,
            1 | 14 | 17 => 4,
            3 => 12,
            4 | 5 | 15 | 19 => vlen * 12,
            6 | 13 => vlen * 8,
            k => return Err(format!("type {id}: unknown kind {k}")),
        };
        let kind = (info >> 24) & 0x1f;
        let start = at + 12;
        at = start + extra;
        if at > types.len() {
            return Err(format!("type {id}: record runs past the end of the type area"));
        }
        // Members, enumerators and parameters are named too (DATASEC entries are not).
        let member = match kind {
            4 | 5 | 19 => 12,
            6 | 13 => 8,
            _ => 0,
        };
        if member > 0 {
            for m in (start..at).step_by(member) {
                let off = e.u32(types, m).unwrap_or(0) as usize;
                if off >= strings.len().max(1) {
                    return Err(format!("type {id}: member name offset {off} outside the string area"));
                }
            }
        }
        id += 1;
    }
    Ok(strings)
}

/// The `.BTF.ext` header and its func/line/CO-RE info blocks.
fn check_btf_ext(b: &[u8], strings: &[u8], e: Endian) -> Result<(), String> {
    let magic = e.u16(b, 0).ok_or("truncated header")?;
    if magic != BTF_MAGIC {
        return Err(format!("bad magic {magic:#x}"));
    }
    let hdr_len = e.u32(b, 4).ok_or("truncated header")? as u64;
    if hdr_len < 24 || hdr_len > b.len() as u64 {
        return Err(format!("header length {hdr_len} outside the section ({} bytes)", b.len()));
    }
    let body = &b[hdr_len as usize..];
    let mut blocks = vec![("func info", 8u32, 8usize), ("line info", 16, 16)];
    if hdr_len >= 32 {
        blocks.push(("CO-RE relocation", 16, 24));
    }
    for (what, min_rec, hdr_field) in blocks {
        let off = e.u32(b, hdr_field).ok_or("truncated header")? as u64;
        let len = e.u32(b, hdr_field + 4).ok_or("truncated header")? as u64;
        if off + len > body.len() as u64 {
            return Err(format!("{what} {off}..+{len} runs past the end of the section"));
        }
        if len == 0 {
            continue;
        }
        let block = &body[off as usize..(off + len) as usize];
        let rec = e.u32(block, 0).ok_or_else(|| format!("{what}: truncated"))?;
        if rec < min_rec {
            return Err(format!("{what}: record size {rec} below {min_rec}"));
        }
        let mut at = 4usize;
        while at < block.len() {
            let name = e.u32(block, at).ok_or_else(|| format!("{what}: truncated section header"))? as usize;
            if c_str(strings, name).is_none() {
                return Err(format!("{what}: section name offset {name} outside the `.BTF` strings"));
            }
            let n = e.u32(block, at + 4).ok_or_else(|| format!("{what}: truncated section header"))? as u64;
            at += 8;
            let bytes = n * rec as u64;
            if at as u64 + bytes > block.len() as u64 {
                return Err(format!("{what}: {n} records of {rec} bytes run past the end of the block"));
            }
            at += bytes as usize;
        }
    }
    Ok(())
}
