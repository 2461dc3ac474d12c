//! Static initialisation of program arrays and maps of maps in BTF-defined maps, as libbpf
//! does it:
//!
//! ```c
//! struct {
//!     __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
//!     __uint(max_entries, 4);
//!     __type(key, __u32);
//!     __array(values, int (struct xdp_md *));
//! } jmp SEC(".maps") = { .values = { [0] = &prog_a, [2] = &prog_b } };
//! ```
//!
//! The `values` member is a flexible array of pointers to a function prototype; each
//! initialised slot is a relocation in `.rel.maps` against the program's symbol, at
//! `map symbol + values offset + 8 × slot`. aya-obj reads `values` only as map-in-map (a
//! pointer to a struct) and refuses a function prototype, so the member's name is hidden
//! from it (its name offset moved one byte on, to "alues") and the slots are read here.
//!
//! A map of maps (`__array(values, struct inner_def)` with `.values = { [1] = &inner_a }`)
//! is initialised the same way, each relocation naming an inner map of the object; aya-obj
//! keeps reading its `values` member as the inner-map template. libbpf's key for slot `i`
//! is the u32 `i`, for HASH_OF_MAPS too.

use crate::elf::Elf;

/// Slots of one program array (or map of maps) filled by the object itself: (slot,
/// program or inner map name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProgArrayInit {
    pub map: String,
    pub slots: Vec<(u32, String)>,
    /// The slots name maps (a map of maps), not programs.
    pub maps: bool,
}

/// BTF kinds used here.
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_TYPE_TAG: u32 = 18;

/// One BTF type record: kind, name, vlen, the size/type word, and where its trailing data
/// starts (offset in the type area).
#[derive(Clone, Copy)]
pub(crate) struct BtfType {
    pub kind: u32,
    pub name_off: u32,
    pub vlen: usize,
    pub size_or_type: u32,
    pub extra: usize,
    /// The info word's kind_flag (struct members with bitfield sizes, signed enums).
    pub kflag: bool,
}

pub(crate) struct Btf<'a> {
    elf: &'a Elf<'a>,
    types: &'a [u8],
    strings: &'a [u8],
    /// File offset of the type area (to patch member names).
    types_file_off: usize,
    /// Index 0 is `void`.
    list: Vec<BtfType>,
}

impl<'a> Btf<'a> {
    /// Reads `.BTF` (already checked by `Elf::parse`: header, areas and records in bounds).
    pub(crate) fn parse(elf: &'a Elf<'a>) -> Option<Btf<'a>> {
        let sec = elf.section_named(".BTF")?;
        let (b, file_off) = elf.section_bytes(sec);
        let hdr_len = elf.u32_at(b, 4)? as usize;
        let (type_off, type_len) = (elf.u32_at(b, 8)? as usize, elf.u32_at(b, 12)? as usize);
        let (str_off, str_len) = (elf.u32_at(b, 16)? as usize, elf.u32_at(b, 20)? as usize);
        let types = b.get(hdr_len + type_off..hdr_len + type_off + type_len)?;
        let strings = b.get(hdr_len + str_off..hdr_len + str_off + str_len)?;
        let mut list = vec![BtfType { kind: 0, name_off: 0, vlen: 0, size_or_type: 0, extra: 0, kflag: false }];
        let mut at = 0usize;
        while at + 12 <= types.len() {
            let info = elf.u32_at(types, at + 4)?;
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            let extra_len = match kind {
                1 | 14 | 17 => 4,
                3 => 12,
                4 | 5 | 15 | 19 => vlen * 12,
                6 | 13 => vlen * 8,
                _ => 0,
            };
            list.push(BtfType {
                kind,
                name_off: elf.u32_at(types, at)?,
                vlen,
                size_or_type: elf.u32_at(types, at + 8)?,
                extra: at + 12,
                kflag: info >> 31 != 0,
            });
            at += 12 + extra_len;
        }
        Some(Btf { elf, types, strings, types_file_off: file_off + hdr_len + type_off, list })
    }

    pub(crate) fn get(&self, id: u32) -> Option<BtfType> {
        self.list.get(id as usize).copied()
    }

    pub(crate) fn name(&self, off: u32) -> &'a str {
        let s = self.strings.get(off as usize..).unwrap_or(&[]);
        std::str::from_utf8(&s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]).unwrap_or("")
    }

    /// Follows typedefs and qualifiers (bounded: a cycle in bad BTF ends the walk).
    pub(crate) fn resolve(&self, mut id: u32) -> Option<BtfType> {
        for _ in 0..32 {
            let t = self.get(id)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => id = t.size_or_type,
                _ => return Some(t),
            }
        }
        None
    }

    pub(crate) fn u32_in(&self, off: usize) -> u32 {
        self.elf.u32_at(self.types, off).unwrap_or(0)
    }

    /// For a struct with a `values` member that is an array of pointers to a function
    /// prototype (a program array) or to a struct (a map of maps): the member's byte offset,
    /// the file offset of its name field and whether it holds maps.
    fn values_member(&self, st: BtfType) -> Option<(u64, usize, bool)> {
        if st.kind != KIND_STRUCT {
            return None;
        }
        (0..st.vlen).find_map(|m| {
            let at = st.extra + m * 12;
            if self.name(self.u32_in(at)) != "values" {
                return None;
            }
            let arr = self.resolve(self.u32_in(at + 4)).filter(|t| t.kind == KIND_ARRAY)?;
            let ptr = self.resolve(self.u32_in(arr.extra)).filter(|t| t.kind == KIND_PTR)?;
            let target = self.resolve(ptr.size_or_type).filter(|t| t.kind == KIND_FUNC_PROTO || t.kind == KIND_STRUCT)?;
            let bit_off = self.u32_in(at + 8) as u64;
            Some((bit_off / 8, self.types_file_off + at, target.kind == KIND_STRUCT))
        })
    }
}

/// Finds the statically initialised program arrays and maps of maps of `elf`. Returns the
/// object bytes with the program arrays' `values` members hidden from aya-obj (None when
/// there are none) and the slots.
pub(crate) fn prog_array_inits(elf: &Elf<'_>, bytes: &[u8]) -> Result<(Option<Vec<u8>>, Vec<ProgArrayInit>), String> {
    let (Some(btf), Some(maps_sec)) = (Btf::parse(elf), elf.section_named(".maps")) else { return Ok((None, Vec::new())) };
    // Map variables of `.maps` whose struct has a `values` member.
    let mut wanted: Vec<(&str, u64, usize, bool)> = Vec::new();
    for ds in btf.list.iter().filter(|t| t.kind == KIND_DATASEC && btf.name(t.name_off) == ".maps") {
        for v in 0..ds.vlen {
            let Some(var) = btf.get(btf.u32_in(ds.extra + v * 12)).filter(|t| t.kind == KIND_VAR) else { continue };
            let Some(st) = btf.resolve(var.size_or_type) else { continue };
            if let Some((values_off, name_field, maps)) = btf.values_member(st) {
                wanted.push((btf.name(var.name_off), values_off, name_field, maps));
            }
        }
    }
    if wanted.is_empty() {
        return Ok((None, Vec::new()));
    }
    let syms = elf.symbols();
    let mut inits: Vec<ProgArrayInit> = Vec::new();
    for (off, si) in elf.relocations_of(maps_sec) {
        let target = syms.get(si).ok_or_else(|| format!("`.maps` relocation at {off}: symbol {si} does not exist"))?;
        let Some(map) = syms.iter().find(|s| s.shndx == maps_sec && s.value <= off && off < s.value + s.size) else {
            return Err(format!("`.maps` relocation at {off} (to `{}`) is not inside a map definition", target.name));
        };
        let Some(&(_, values_off, _, maps)) = wanted.iter().find(|w| w.0 == map.name) else {
            return Err(format!("map `{}`: relocation to `{}` outside a `values` array", map.name, target.name));
        };
        let rel = off - map.value;
        if rel < values_off || !(rel - values_off).is_multiple_of(8) {
            return Err(format!("map `{}`: relocation to `{}` at offset {rel} is not a `values` slot", map.name, target.name));
        }
        let slot = u32::try_from((rel - values_off) / 8).map_err(|_| format!("map `{}`: slot out of range", map.name))?;
        match inits.iter_mut().find(|i| i.map == map.name) {
            Some(i) => i.slots.push((slot, target.name.to_owned())),
            None => inits.push(ProgArrayInit { map: map.name.to_owned(), slots: vec![(slot, target.name.to_owned())], maps }),
        }
    }
    if wanted.iter().all(|w| w.3) {
        return Ok((None, inits));
    }
    let mut out = bytes.to_vec();
    for (_, _, name_field, _) in wanted.iter().filter(|w| !w.3) {
        let name = elf.u32_at(&out, *name_field).unwrap_or(0);
        elf.put_u32(&mut out, *name_field, name.saturating_add(1));
    }
    Ok((Some(out), inits))
}
