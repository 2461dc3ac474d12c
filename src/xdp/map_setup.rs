//! Map setup from user space, as bpftool and libbpf loaders do it before attaching: one
//! entry (`--map NAME:KEY=VALUE`) or a whole JSON file of entries (`--maps FILE`, the `maps`
//! of a config's `[xdp]` table), keys and values as hex, numbers, byte lists or BTF-typed
//! fields, inner maps and programs by name. `xdp run --json` output is valid input.

use super::ebpf::{EbpfProgram, OpenedXdp};
use serde_json::Value;
use sluice_ebpf::btf_types::TypeDesc;
use sluice_ebpf::Maps;
use std::path::Path;

/// What map setup writes into: an opened object before its load (`.rodata` settable) or a
/// loaded program (`.rodata` frozen, program-array slots checked against verified programs).
pub trait MapSetup {
    fn setup_maps(&self) -> &Maps;
    /// The index of program `name` in the object (what a PROG_ARRAY slot holds).
    fn program_index(&self, name: &str) -> Option<u32>;
    /// Whether program `index` may go in a PROG_ARRAY slot (`Err`: why not).
    fn tail_target_allowed(&self, index: u32) -> Result<(), String>;
}

impl MapSetup for OpenedXdp {
    fn setup_maps(&self) -> &Maps {
        self.maps()
    }
    fn program_index(&self, name: &str) -> Option<u32> {
        OpenedXdp::program_index(self, name)
    }
    fn tail_target_allowed(&self, index: u32) -> Result<(), String> {
        OpenedXdp::tail_target_allowed(self, index)
    }
}

impl MapSetup for EbpfProgram {
    fn setup_maps(&self) -> &Maps {
        &self.maps
    }
    fn program_index(&self, name: &str) -> Option<u32> {
        EbpfProgram::program_index(self, name)
    }
    fn tail_target_allowed(&self, index: u32) -> Result<(), String> {
        EbpfProgram::tail_target_allowed(self, index)
    }
}

/// A DEVMAP / DEVMAP_HASH value starts with an ifindex: the kernel refuses an update naming no
/// device (ifindexes are positive ints), except that ifindex 0 empties a DEVMAP slot
/// (__dev_map_update_elem). The test run has no device list to check against beyond that, as
/// the redirect itself is not carried out.
fn check_devmap_value(map_type: u32, value: &[u8]) -> Result<(), String> {
    use sluice_ebpf::program::map_type::{DEVMAP, DEVMAP_HASH};
    if map_type != DEVMAP && map_type != DEVMAP_HASH {
        return Ok(());
    }
    let ifindex = value.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0);
    if (ifindex == 0 && map_type == DEVMAP) || value.len() < 4 {
        return Ok(());
    }
    if ifindex == 0 || ifindex > i32::MAX as u32 {
        return Err(format!("ifindex {ifindex:#x} names no device (ifindexes are 1..=2147483647)"));
    }
    Ok(())
}

/// Every DEVMAP / DEVMAP_HASH entry names a port of the datapath (ifindex = port + 1, ports
/// `1..=nports`): the kernel's update finds the device then (`dev_get_by_index`, else
/// -EINVAL), so a configuration naming another is refused at set-up instead of showing up as
/// per-packet redirect failures.
pub fn check_devmap_ports(prog: &impl MapSetup, nports: usize) -> Result<(), String> {
    use sluice_ebpf::program::map_type::{DEVMAP, DEVMAP_HASH};
    let mut bad = None;
    for m in prog.setup_maps().iter().filter(|m| matches!(m.map_type(), DEVMAP | DEVMAP_HASH)) {
        m.for_each_entry(sluice_ebpf::maps::DumpScope::All, |e| {
            let ifindex = e.value.as_deref().and_then(|v| v.first_chunk::<4>()).map_or(0, |b| u32::from_le_bytes(*b));
            if bad.is_none() && (ifindex == 0 || ifindex as usize > nports) {
                bad = Some(format!(
                    "map {}: key {} names ifindex {ifindex}, not a port of this datapath (ifindexes 1..={nports})",
                    m.name(),
                    e.key.iter().map(|b| format!("{b:02x}")).collect::<String>()
                ));
            }
        });
    }
    bad.map_or(Ok(()), Err)
}

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_start_matches("0x");
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// A value to put in a map, as user space gives it.
enum SetValue {
    Bytes(Vec<u8>),
    /// Per-CPU values (CPU i gets element i; missing CPUs get zero).
    PerCpu(Vec<Vec<u8>>),
    /// A program of the object (PROG_ARRAY) or an inner map (map of maps), by name.
    Named(String),
}

/// Puts `value` at `key` of map `name` (None deletes), as user space does with
/// bpf_map_update_elem / bpf_map_delete_elem.
fn set_entry(prog: &impl MapSetup, name: &str, key: &[u8], value: Option<SetValue>) -> Result<(), String> {
    use sluice_ebpf::program::map_type;
    let maps = prog.setup_maps();
    let idx = maps.index_of(name).ok_or_else(|| format!("no map named `{name}`"))?;
    let map = maps.get(idx).ok_or_else(|| format!("no map named `{name}`"))?;
    let d = map.def();
    let Some(value) = value else {
        return map.delete(key).map_err(|e| e.to_string());
    };
    let bytes = match value {
        SetValue::Named(n) if d.is_map_of_maps() => {
            let inner = maps.index_of(&n).ok_or_else(|| format!("no map named `{n}` to put in `{name}`"))?;
            return maps.set_inner(idx, key, inner, 0).map_err(|e| e.to_string());
        }
        SetValue::Named(n) if d.map_type == map_type::PROG_ARRAY => {
            prog.program_index(&n).ok_or_else(|| format!("no program named `{n}`"))?.to_le_bytes().to_vec()
        }
        SetValue::Named(n) => parse_hex(&n).ok_or_else(|| format!("`{n}` is not hex bytes"))?,
        SetValue::Bytes(b) => b,
        SetValue::PerCpu(vs) => {
            let stride = (d.value_size as usize).div_ceil(8) * 8;
            let copies = map.copies() as usize;
            if !map.is_percpu() || vs.len() > copies {
                return Err(format!("{} per-CPU values for a map with {copies} CPU copies", vs.len()));
            }
            let mut all = vec![0u8; stride * copies];
            for (c, v) in vs.iter().enumerate() {
                if v.len() != d.value_size as usize {
                    return Err(format!("CPU {c}: value of {} bytes, the map's are {}", v.len(), d.value_size));
                }
                all[c * stride..c * stride + v.len()].copy_from_slice(v);
            }
            all
        }
    };
    if d.map_type == map_type::PROG_ARRAY {
        let index = bytes.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        prog.tail_target_allowed(index.ok_or("a PROG_ARRAY value is a 4-byte program index")?)?;
    }
    check_devmap_value(d.map_type, &bytes)?;
    map.update(key, &bytes, 0).map_err(|e| e.to_string())
}

/// `--map NAME:KEYHEX=VALUE`: VALUE is hex bytes, a program (PROG_ARRAY) or inner map (map of
/// maps) by name; empty deletes the entry.
pub fn apply_map_flag(prog: &impl MapSetup, u: &str) -> Result<(), String> {
    let bad = || "expected NAME:KEYHEX=VALUE".to_owned();
    let (name, kv) = u.split_once(':').ok_or_else(bad)?;
    let (k, v) = kv.split_once('=').ok_or_else(bad)?;
    let key = parse_hex(k).ok_or_else(bad)?;
    let value = (!v.is_empty()).then(|| SetValue::Named(v.to_owned()));
    set_entry(prog, name, &key, value)
}

/// Bytes from JSON: a hex string ("0a000001", "0x0a000001" is taken as the same bytes), a list
/// of bytes (numbers or "0x.." strings, bpftool's form), or an unsigned number (`size` bytes,
/// little-endian).
fn json_bytes(v: &Value, size: usize) -> Result<Vec<u8>, String> {
    match v {
        Value::String(s) => parse_hex(s.trim_start_matches("0x")).ok_or_else(|| format!("`{s}` is not hex bytes")),
        Value::Array(items) => items
            .iter()
            .map(|x| match x {
                Value::Number(n) => n.as_u64().and_then(|n| u8::try_from(n).ok()).ok_or_else(|| format!("{n} is not a byte")),
                Value::String(s) => u8::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|_| format!("`{s}` is not a byte")),
                other => Err(format!("{other} is not a byte")),
            })
            .collect(),
        Value::Number(n) => {
            let n = n.as_u64().ok_or_else(|| format!("{n} is not an unsigned number"))?;
            if size < 8 && n >> (8 * size) != 0 {
                return Err(format!("{n} does not fit in {size} bytes"));
            }
            let mut b = n.to_le_bytes().to_vec();
            b.resize(size, 0);
            Ok(b)
        }
        other => Err(format!("{other}: expected hex bytes, a byte list or a number")),
    }
}

/// Bytes of a key or value from JSON: bpftool's raw forms (a hex string, a list of "0x.."
/// bytes) as they are, anything else (objects by field name, numbers, addresses) through
/// the map's BTF type when it has one.
fn entry_bytes(v: &Value, size: usize, ty: Option<&TypeDesc>) -> Result<Vec<u8>, String> {
    let raw_list = v.as_array().is_some_and(|a| a.iter().all(|x| x.as_str().is_some_and(|s| s.starts_with("0x"))));
    let hex_str = v.as_str().is_some_and(|s| parse_hex(s.trim_start_matches("0x")).is_some_and(|b| b.len() == size));
    match ty {
        Some(t) if !raw_list && !hex_str => {
            let mut out = vec![0u8; size.max(t.size())];
            match t.encode(v, &mut out) {
                Ok(()) => {
                    out.truncate(size);
                    Ok(out)
                }
                // A plain byte list (numbers and "0x.." strings mixed) is still raw bytes.
                Err(e) => json_bytes(v, size).ok().filter(|b| b.len() == size).ok_or(e),
            }
        }
        _ => json_bytes(v, size),
    }
}

/// `--maps FILE` (and `maps` in a config's `[xdp]` table): entries for several maps at once;
/// `xdp run --json` output is valid input.
/// A `bpftool batch file` of map commands, one a line (`#` comments):
/// `map update name NAME key [hex] BYTES… value [hex] BYTES…`, `value name INNER_OR_PROG`
/// for maps of maps and program arrays, and `map delete name NAME key [hex] BYTES…`. Bytes
/// are decimal or `0x` hex, or hex without prefix after `hex`, as bpftool takes them.
fn apply_batch(prog: &impl MapSetup, text: &str) -> Result<(), String> {
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |m: String| format!("line {}: {m}", n + 1);
        let words: Vec<&str> = line.split_whitespace().collect();
        let (update, rest) = match words.as_slice() {
            ["map", "update", "name", rest @ ..] => (true, rest),
            ["map", "delete", "name", rest @ ..] => (false, rest),
            _ => return Err(at(format!("`{line}`: expected `map update name ...` or `map delete name ...`"))),
        };
        let (name, rest) = rest.split_first().ok_or_else(|| at("no map name".into()))?;
        let rest = rest.strip_prefix(&["key"]).ok_or_else(|| at("expected `key`".into()))?;
        let split = rest.iter().position(|w| *w == "value").unwrap_or(rest.len());
        let key = batch_bytes(&rest[..split]).map_err(at)?;
        let value = match (&rest[split..], update) {
            ([], false) => None,
            (["value", "name", inner], true) => Some(SetValue::Named((*inner).to_owned())),
            (["value", data @ ..], true) => Some(SetValue::Bytes(batch_bytes(data).map_err(at)?)),
            (_, true) => return Err(at("expected `value`".into())),
            (_, false) => return Err(at("`map delete` takes no value".into())),
        };
        set_entry(prog, name, &key, value).map_err(|e| at(format!("`{name}`: {e}")))?;
    }
    Ok(())
}

/// bpftool's byte list: `hex` then bytes in hex, or each byte decimal or `0x` hex.
fn batch_bytes(words: &[&str]) -> Result<Vec<u8>, String> {
    let (hex, words) = match words.split_first() {
        Some((&"hex", rest)) => (true, rest),
        _ => (false, words),
    };
    words
        .iter()
        .map(|w| {
            let parsed = match w.strip_prefix("0x") {
                Some(h) => u8::from_str_radix(h, 16),
                None if hex => u8::from_str_radix(w, 16),
                None => w.parse::<u8>(),
            };
            parsed.map_err(|_| format!("`{w}` is not a byte"))
        })
        .collect()
}

pub fn apply_maps_file(prog: &impl MapSetup, path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bad = |m: String| format!("{}: {m}", path.display());
    if !text.trim_start().starts_with('{') {
        return apply_batch(prog, &text).map_err(bad);
    }
    let doc: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let maps = doc.get("maps").filter(|m| m.is_object()).unwrap_or(&doc);
    let maps = maps.as_object().ok_or_else(|| bad("expected an object of maps".into()))?;
    // Plain maps first: inner maps are filled before they are put in their outer maps
    // (the order does not matter for the result, only for messages).
    let mut names: Vec<&String> = maps.keys().collect();
    names.sort_by_key(|n| prog.setup_maps().by_name(n).is_some_and(|m| m.def().is_map_of_maps()));
    for name in names {
        let map = prog.setup_maps().by_name(name).ok_or_else(|| bad(format!("no map named `{name}`")))?;
        let (ks, vs) = (map.def().key_size as usize, map.def().value_size as usize);
        let types = prog.setup_maps().index_of(name).and_then(|i| prog.setup_maps().types(i));
        let (kt, vt) = (types.and_then(|t| t.key.as_ref()), types.and_then(|t| t.value.as_ref()));
        let entries = maps[name].as_array().ok_or_else(|| bad(format!("`{name}`: expected a list of entries")))?;
        for (n, e) in entries.iter().enumerate() {
            let at = |m: String| bad(format!("`{name}` entry {n}: {m}"));
            let key = entry_bytes(e.get("key").ok_or_else(|| at("no key".into()))?, ks, kt).map_err(at)?;
            let value = if let Some(inner) = e.get("inner_map").or_else(|| e.get("prog")) {
                Some(SetValue::Named(inner.as_str().ok_or_else(|| at("inner_map / prog: expected a name".into()))?.to_owned()))
            } else if let Some(v) = e.get("values") {
                let list = v.as_array().ok_or_else(|| at("values: expected a list".into()))?;
                let mut per = Vec::with_capacity(list.len());
                for x in list {
                    per.push(entry_bytes(x.get("value").unwrap_or(x), vs, vt).map_err(at)?);
                }
                Some(SetValue::PerCpu(per))
            } else if e.get("delete").and_then(Value::as_bool) == Some(true) {
                None
            } else {
                Some(SetValue::Bytes(entry_bytes(e.get("value").ok_or_else(|| at("no value".into()))?, vs, vt).map_err(at)?))
            };
            set_entry(prog, name, &key, value).map_err(at)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdp::ebpf::EngineKind;

    fn drop_count() -> EbpfProgram {
        let obj = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bpf/obj/xdp_drop_count.o");
        EbpfProgram::load(&obj, None, EngineKind::Interp).expect("object")
    }

    fn packets(prog: &EbpfProgram) -> u64 {
        let v = prog.maps.by_name("drop_stats").expect("map").lookup(&[0; 4], 0).expect("key 0");
        u64::from_ne_bytes(v[..8].try_into().unwrap())
    }

    #[test]
    fn a_bpftool_batch_file_sets_and_deletes_entries() {
        let prog = drop_count();
        let batch = "# as bpftool batch file takes it\n\
                     map update name drop_stats key hex 00 00 00 00 value hex 2a 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n";
        apply_batch(&prog, batch).expect("batch");
        assert_eq!(packets(&prog), 42);
        apply_batch(&prog, "map update name drop_stats key 0 0 0 0 value 7 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0x01").expect("decimal");
        assert_eq!(packets(&prog), 7);
        let e = apply_batch(&prog, "\n\nmap update name nope key 0 0 0 0 value 1").unwrap_err();
        assert!(e.starts_with("line 3: `nope`"), "{e}");
        let e = apply_batch(&prog, "prog load x.o").unwrap_err();
        assert!(e.contains("line 1") && e.contains("expected `map update"), "{e}");
        let e = apply_batch(&prog, "map update name drop_stats key hex zz value 1").unwrap_err();
        assert!(e.contains("`zz` is not a byte"), "{e}");
    }
}
