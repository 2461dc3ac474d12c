//! Map keys and values by their BTF types, as `bpftool map dump` prints them ("formatted")
//! and as map setup files may give them: integers as numbers (`__be16` / `__be32` /
//! `__be64` typedefs in network order), structs as objects by field name (bitfields
//! included), arrays as lists, enums as numbers (names accepted on input).
//!
//! The types are copied out of the object's `.BTF` at load into a self-contained
//! [`TypeDesc`] tree (bounded depth: a cycle in bad BTF ends as raw bytes), so nothing keeps
//! the object's bytes alive.

use serde_json::{Map as JsonMap, Value};

use crate::elf::Elf;
use crate::map_init::Btf;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// Nesting limit of a decoded type.
const MAX_DEPTH: u32 = 16;
/// Types one description may visit in all (members, elements, typedef links): a hostile
/// BTF with wide structs nesting each other, or a typedef chain that loops, would otherwise
/// take exponential time or forever.
const MAX_VISITS: u32 = 4096;

/// One BTF type, resolved (typedefs and qualifiers followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeDesc {
    /// An integer of `size` bytes (bool and char included); `be`: a `__be*` typedef.
    Int {
        size: u32,
        signed: bool,
        be: bool,
    },
    Struct {
        size: u32,
        fields: Vec<Field>,
    },
    Array {
        elem: Box<TypeDesc>,
        len: u32,
    },
    Enum {
        size: u32,
        signed: bool,
        values: Vec<(String, i64)>,
    },
    /// Anything else (pointers, unions, floats): bytes as a list.
    Raw {
        size: u32,
    },
}

/// A struct member: its name, bit offset, bitfield width (0: the whole type) and type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub bit_off: u32,
    pub bits: u32,
    pub ty: TypeDesc,
}

/// The BTF types of one map's key and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapTypes {
    pub key: Option<TypeDesc>,
    pub value: Option<TypeDesc>,
}

/// Reads BTF type `id` of `elf` (None: no BTF, id 0, or malformed).
pub(crate) fn type_of(elf: &Elf<'_>, id: u32) -> Option<TypeDesc> {
    if id == 0 {
        return None;
    }
    let btf = Btf::parse(elf)?;
    let mut visits = MAX_VISITS;
    decode(&btf, id, 0, false, &mut visits)
}

fn decode(btf: &Btf<'_>, mut id: u32, depth: u32, mut be: bool, visits: &mut u32) -> Option<TypeDesc> {
    if depth > MAX_DEPTH {
        return None;
    }
    let t = loop {
        *visits = visits.checked_sub(1)?;
        let t = btf.get(id)?;
        match t.kind {
            KIND_TYPEDEF => {
                be |= matches!(btf.name(t.name_off), "__be16" | "__be32" | "__be64");
                id = t.size_or_type;
            }
            KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => id = t.size_or_type,
            _ => break t,
        }
    };
    Some(match t.kind {
        KIND_INT => {
            let enc = btf.u32_in(t.extra);
            TypeDesc::Int { size: t.size_or_type, signed: (enc >> 24) & 1 != 0, be }
        }
        KIND_PTR => TypeDesc::Raw { size: 8 },
        KIND_ARRAY => {
            let elem = decode(btf, btf.u32_in(t.extra), depth + 1, false, visits)?;
            TypeDesc::Array { elem: Box::new(elem), len: btf.u32_in(t.extra + 8) }
        }
        KIND_STRUCT => {
            let mut fields = Vec::with_capacity(t.vlen);
            for m in 0..t.vlen {
                let at = t.extra + m * 12;
                let off = btf.u32_in(at + 8);
                let (bit_off, bits) = if t.kflag { (off & 0xff_ffff, off >> 24) } else { (off, 0) };
                let ty = decode(btf, btf.u32_in(at + 4), depth + 1, false, visits)?;
                fields.push(Field { name: btf.name(btf.u32_in(at)).to_owned(), bit_off, bits, ty });
            }
            TypeDesc::Struct { size: t.size_or_type, fields }
        }
        KIND_ENUM | KIND_ENUM64 => {
            let wide = t.kind == KIND_ENUM64;
            let step = if wide { 12 } else { 8 };
            let values = (0..t.vlen)
                .map(|v| {
                    let at = t.extra + v * step;
                    let lo = btf.u32_in(at + 4) as u64;
                    let val = if wide { lo | (btf.u32_in(at + 8) as u64) << 32 } else { lo as u32 as i32 as i64 as u64 };
                    (btf.name(btf.u32_in(at)).to_owned(), val as i64)
                })
                .collect();
            TypeDesc::Enum { size: t.size_or_type, signed: t.kflag, values }
        }
        _ => TypeDesc::Raw { size: t.size_or_type },
    })
}

impl TypeDesc {
    /// Bytes the type takes.
    pub fn size(&self) -> usize {
        match self {
            TypeDesc::Int { size, .. } | TypeDesc::Struct { size, .. } | TypeDesc::Enum { size, .. } | TypeDesc::Raw { size } => {
                *size as usize
            }
            TypeDesc::Array { elem, len } => elem.size().saturating_mul(*len as usize),
        }
    }

    /// `bytes` (at least [`TypeDesc::size`] long, else raw bytes) as JSON.
    pub fn format(&self, bytes: &[u8]) -> Value {
        if bytes.len() < self.size() {
            return raw(bytes);
        }
        match self {
            TypeDesc::Int { size, signed, be } => int_value(&bytes[..*size as usize], *signed, *be),
            TypeDesc::Enum { size, signed, .. } => int_value(&bytes[..*size as usize], *signed, false),
            TypeDesc::Raw { size } => raw(&bytes[..*size as usize]),
            TypeDesc::Array { elem, len } => {
                let n = elem.size();
                Value::Array((0..*len as usize).map(|i| elem.format(&bytes[i * n..])).collect())
            }
            TypeDesc::Struct { fields, .. } => {
                let mut obj = JsonMap::new();
                for f in fields {
                    let v = if f.bits != 0 {
                        Value::from(read_bits(bytes, f.bit_off, f.bits))
                    } else {
                        bytes.get(f.bit_off as usize / 8..).map_or(Value::Null, |b| f.ty.format(b))
                    };
                    obj.insert(f.name.clone(), v);
                }
                Value::Object(obj)
            }
        }
    }

    /// Encodes `v` into `out` (zeroed, [`TypeDesc::size`] bytes): numbers (or "0x…" strings)
    /// for integers, dotted IPv4 addresses for 4-byte integers (network order), enum names,
    /// objects by field name (fields left out stay zero), lists for arrays (an IPv6 address
    /// string for 16 bytes), byte lists for raw types.
    pub fn encode(&self, v: &Value, out: &mut [u8]) -> Result<(), String> {
        if out.len() < self.size() {
            return Err("value too short for its type".into());
        }
        match (self, v) {
            (TypeDesc::Int { size: 4, .. }, Value::String(s)) if s.parse::<std::net::Ipv4Addr>().is_ok() => {
                let a: std::net::Ipv4Addr = s.parse().map_err(|_| format!("`{s}`"))?;
                out[..4].copy_from_slice(&a.octets());
                Ok(())
            }
            (TypeDesc::Int { size, signed, be }, _) => put_int(&mut out[..*size as usize], number(v, *signed)?, *be),
            (TypeDesc::Enum { size, signed, values }, _) => {
                let n = match v.as_str().and_then(|s| values.iter().find(|(name, _)| name == s)) {
                    Some((_, n)) => *n as u64,
                    None => number(v, *signed)?,
                };
                put_int(&mut out[..*size as usize], n, false)
            }
            (TypeDesc::Array { elem, len }, Value::String(s)) if elem.size() == 1 && *len == 16 => {
                let a: std::net::Ipv6Addr = s.parse().map_err(|_| format!("`{s}` is not an IPv6 address"))?;
                out[..16].copy_from_slice(&a.octets());
                Ok(())
            }
            (TypeDesc::Array { elem, len }, Value::Array(items)) => {
                if items.len() > *len as usize {
                    return Err(format!("{} elements for an array of {len}", items.len()));
                }
                let n = elem.size();
                for (i, x) in items.iter().enumerate() {
                    elem.encode(x, &mut out[i * n..])?;
                }
                Ok(())
            }
            (TypeDesc::Struct { fields, .. }, Value::Object(obj)) => {
                for (name, x) in obj {
                    let f = fields.iter().find(|f| &f.name == name).ok_or_else(|| format!("no field `{name}`"))?;
                    if f.bits != 0 {
                        write_bits(out, f.bit_off, f.bits, number(x, false)?);
                    } else {
                        let at = f.bit_off as usize / 8;
                        f.ty.encode(x, &mut out[at..]).map_err(|e| format!("{name}: {e}"))?;
                    }
                }
                Ok(())
            }
            (TypeDesc::Raw { size }, Value::Array(items)) if items.len() == *size as usize => {
                for (o, x) in out.iter_mut().zip(items) {
                    *o = u8::try_from(number(x, false)?).map_err(|_| format!("{x} is not a byte"))?;
                }
                Ok(())
            }
            (t, v) => Err(format!("{v} does not fit {}", t.describe())),
        }
    }

    fn describe(&self) -> &'static str {
        match self {
            TypeDesc::Int { .. } => "an integer",
            TypeDesc::Struct { .. } => "a struct (an object by field name)",
            TypeDesc::Array { .. } => "an array (a list)",
            TypeDesc::Enum { .. } => "an enum",
            TypeDesc::Raw { .. } => "raw bytes (a byte list)",
        }
    }
}

fn raw(b: &[u8]) -> Value {
    Value::Array(b.iter().map(|&x| Value::from(x)).collect())
}

fn int_value(b: &[u8], signed: bool, be: bool) -> Value {
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    if be {
        for (i, x) in b[..n].iter().rev().enumerate() {
            w[i] = *x;
        }
    } else {
        w[..n].copy_from_slice(&b[..n]);
    }
    let u = u64::from_le_bytes(w);
    if signed && n > 0 && n < 8 && u >> (8 * n - 1) & 1 != 0 {
        Value::from((u | !0u64 << (8 * n)) as i64)
    } else if signed && n == 8 {
        Value::from(u as i64)
    } else {
        Value::from(u)
    }
}

fn number(v: &Value, signed: bool) -> Result<u64, String> {
    match v {
        Value::Number(n) => {
            n.as_u64().or_else(|| n.as_i64().filter(|_| signed).map(|i| i as u64)).ok_or_else(|| format!("{n} is not an integer"))
        }
        Value::Bool(b) => Ok(*b as u64),
        Value::String(s) => {
            let r = match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => s.parse::<u64>().ok(),
            };
            r.ok_or_else(|| format!("`{s}` is not a number"))
        }
        other => Err(format!("{other} is not a number")),
    }
}

fn put_int(out: &mut [u8], n: u64, be: bool) -> Result<(), String> {
    let size = out.len().min(8);
    if size < 8 && n >> (8 * size) != 0 && (n as i64) >> (8 * size - 1) != -1 {
        return Err(format!("{n} does not fit in {size} bytes"));
    }
    let le = n.to_le_bytes();
    for i in 0..size {
        out[i] = if be { le[size - 1 - i] } else { le[i] };
    }
    Ok(())
}

fn read_bits(b: &[u8], off: u32, bits: u32) -> u64 {
    (0..bits.min(64)).fold(0u64, |acc, i| {
        let bit = off + i;
        let set = b.get(bit as usize / 8).is_some_and(|x| x >> (bit % 8) & 1 != 0);
        acc | (set as u64) << i
    })
}

fn write_bits(b: &mut [u8], off: u32, bits: u32, v: u64) {
    for i in 0..bits.min(64) {
        let bit = off + i;
        if let Some(x) = b.get_mut(bit as usize / 8) {
            if v >> i & 1 != 0 {
                *x |= 1 << (bit % 8);
            } else {
                *x &= !(1 << (bit % 8));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> TypeDesc {
        let u = |size| TypeDesc::Int { size, signed: false, be: false };
        TypeDesc::Struct {
            size: 12,
            fields: vec![
                Field { name: "vip".into(), bit_off: 0, bits: 0, ty: u(4) },
                Field { name: "port".into(), bit_off: 32, bits: 0, ty: TypeDesc::Int { size: 2, signed: false, be: true } },
                Field { name: "proto".into(), bit_off: 48, bits: 0, ty: u(1) },
                Field { name: "flags".into(), bit_off: 56, bits: 3, ty: u(1) },
                Field { name: "delta".into(), bit_off: 64, bits: 0, ty: TypeDesc::Int { size: 4, signed: true, be: false } },
            ],
        }
    }

    #[test]
    fn structs_round_trip_by_field_name() {
        let t = flow();
        let mut b = vec![0u8; 12];
        let v = serde_json::json!({"vip": "10.0.0.1", "port": 80, "proto": 6, "flags": 5, "delta": -2});
        t.encode(&v, &mut b).unwrap();
        assert_eq!(&b[..4], &[10, 0, 0, 1], "addresses in network order");
        assert_eq!(&b[4..6], &[0, 80], "__be16 in network order");
        assert_eq!(b[6], 6);
        assert_eq!(b[7], 5);
        assert_eq!(&b[8..], &(-2i32).to_le_bytes());
        let f = t.format(&b);
        assert_eq!(f["port"], 80);
        assert_eq!(f["delta"], -2);
        assert_eq!(f["vip"], u32::from_le_bytes([10, 0, 0, 1]));
        let mut again = vec![0u8; 12];
        t.encode(&f, &mut again).unwrap();
        assert_eq!(again, b, "formatted output is valid input");
        assert!(t.encode(&serde_json::json!({"nope": 1}), &mut again).is_err());
        assert!(t.encode(&serde_json::json!({"proto": 300}), &mut again).is_err());
    }
}
