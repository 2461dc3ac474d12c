//! `sluice xdp run|maps`: run an XDP object on frames the way BPF_PROG_TEST_RUN does (a
//! zeroed 4 KiB buffer, the frame at XDP_PACKET_HEADROOM, ingress ifindex 1, queue 0, output
//! from data_meta to data_end), count verdicts, write what the program produced, dump maps.

use super::{XdpCommand, XdpRunArgs};
use crate::rx::route::RouteTable;
use crate::xdp::ebpf::{EngineKind, OpenedXdp};
use crate::xdp::env::SluiceEnv;
use crate::xdp::map_setup::{apply_map_flag, apply_maps_file};
use crate::xdp::{XdpBuff, XdpMode, XdpProgram};
use serde_json::{json, Value};
use sluice_ebpf::btf_types::MapTypes;
use sluice_ebpf::maps::{DumpScope, MapDump, MapDumpEntry};
use sluice_ebpf::xdp::LowMem;
use sluice_ebpf::{Maps, PageFrags};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum XdpToolError {
    #[error(transparent)]
    Load(#[from] crate::xdp::ebpf::XdpLoadError),
    #[error(transparent)]
    Pcap(#[from] crate::port::pcap::PcapError),
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// BPF_PROG_TEST_RUN's buffer: 4 KiB, frame at 256, 320 bytes of tailroom at the end.
const TEST_RUN_BUF: usize = 4096;
const TEST_RUN_HEADROOM: usize = 256;
/// The kernel's PAGE_SIZE and MAX_SKB_FRAGS: the test run's fragments.
const TEST_RUN_PAGE: usize = 4096;
const MAX_SKB_FRAGS: usize = 17;

pub const ACTION_NAMES: [&str; 5] = ["ABORTED", "DROP", "PASS", "TX", "REDIRECT"];

/// One frame's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FrameResult {
    pub packet: String,
    pub retval: Option<u32>,
    pub data_out: Option<Vec<u8>>,
    pub error: Option<String>,
}

pub struct ToolRun {
    pub program: String,
    pub results: Vec<FrameResult>,
    /// Frames per action 0..=4 (ABORTED..REDIRECT).
    pub counts: [u64; 5],
    /// Frames per return value outside 0..=4, by value (the kernel's test run reports the
    /// raw value; the datapath drops them as aborted).
    pub unknown: std::collections::BTreeMap<u32, u64>,
    /// The object's maps after the run (dumped lazily, entry by entry, with `scope`).
    pub maps: Arc<Maps>,
    pub scope: DumpScope,
    pub faults: u64,
}

impl ToolRun {
    /// Every map's dump with the run's scope (in memory: for tests and small maps).
    pub fn dumps(&self) -> Vec<MapDump> {
        self.maps.dump_with(self.scope)
    }
}

pub fn main(cmd: XdpCommand) -> Result<(), XdpToolError> {
    let (args, dump) = match cmd {
        XdpCommand::Run(a) => (a, false),
        XdpCommand::Maps(a) => (a, true),
        XdpCommand::List { object } => {
            crate::out!("{}", list(&object)?);
            return Ok(());
        }
    };
    let run = execute(&args)?;
    print_counts(&run);
    if dump {
        print_maps(&run.maps, run.scope);
    }
    Ok(())
}

/// Loads frames from a pcap or a directory of raw frames (name order).
pub fn load_frames(args: &XdpRunArgs) -> Result<Vec<(String, Vec<u8>)>, XdpToolError> {
    match (&args.pcap_in, &args.packets_dir) {
        (Some(p), None) => {
            Ok(crate::port::pcap::read_frames(p)?.into_iter().enumerate().map(|(i, f)| (format!("frame{i:04}"), f)).collect())
        }
        (None, Some(d)) => {
            let io = |source| XdpToolError::Io { path: d.display().to_string(), source };
            let mut names: Vec<_> = std::fs::read_dir(d)
                .map_err(io)?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "bin"))
                .collect();
            names.sort();
            names
                .into_iter()
                .map(|p| {
                    let b = std::fs::read(&p).map_err(|source| XdpToolError::Io { path: p.display().to_string(), source })?;
                    Ok((p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(), b))
                })
                .collect()
        }
        _ => Err(XdpToolError::Usage("give exactly one of --pcap-in or --packets-dir".into())),
    }
}

/// Runs the program over the frames.
pub fn execute(args: &XdpRunArgs) -> Result<ToolRun, XdpToolError> {
    let _mode: XdpMode = args.mode.parse().map_err(XdpToolError::Usage)?;
    let kind: EngineKind = args.engine.parse().map_err(XdpToolError::Usage)?;
    let frames = load_frames(args)?;
    let force_xdp = match args.prog_type.as_deref() {
        None => false,
        Some("xdp") => true,
        Some(t) => return Err(XdpToolError::Usage(format!("--prog-type `{t}`: sluice runs XDP programs only (xdp)"))),
    };
    let verify_opts = if args.unprivileged {
        sluice_ebpf::verifier::VerifyOptions::unprivileged()
    } else {
        sluice_ebpf::verifier::VerifyOptions::default()
    };
    // As libbpf: open, set the maps (and `.rodata`), then load (freeze `.rodata`, verify).
    let opened = OpenedXdp::open(&args.object, args.section.as_deref(), force_xdp, 1)?;
    if let Some(path) = &args.maps_file {
        apply_maps_file(&opened, path).map_err(|e| XdpToolError::Usage(format!("--maps {e}")))?;
    }
    for u in &args.map_updates {
        apply_map_flag(&opened, u).map_err(|e| XdpToolError::Usage(format!("--map `{u}`: {e}")))?;
    }
    let mut prog = opened.load(&verify_opts, kind, false)?;
    if args.events.is_some() {
        for m in prog.maps.iter() {
            m.attach_consumer();
        }
    }
    let mut mem = LowMem::new(TEST_RUN_BUF).map_err(|source| XdpToolError::Io { path: "buffer below 4 GiB".into(), source })?;
    let routes = RouteTable::new();
    let neigh = crate::rx::route::Neighbours::default();
    // BPF_PROG_TEST_RUN runs on the loopback device, ifindex 1: it exists (bpf_fib_lookup
    // finds it), with no routes.
    let lo = [crate::rx::route::Iface::new("lo", [0; 6])];
    // One helper state for the whole run, as the kernel's per-CPU one across test runs.
    let mut host = crate::xdp::env::HostState::default();
    let mut out_frames = Vec::new();
    let mut counts = [0u64; 5];
    let mut unknown = std::collections::BTreeMap::new();
    let mut results = Vec::with_capacity(frames.len());
    // With --events a reader takes the records after every frame, as a user-space reader
    // polling between test runs (so a ring buffer does not fill up over many frames).
    let mut events: Vec<(String, sluice_ebpf::EventRecord)> = Vec::new();
    let max_len = TEST_RUN_BUF - TEST_RUN_HEADROOM - sluice_ebpf::xdp::XDP_TAILROOM_DEFAULT;
    for (name, f) in &frames {
        if f.len() < 14 {
            // The kernel refuses frames shorter than an Ethernet header (EINVAL).
            results.push(FrameResult { packet: name.clone(), retval: None, data_out: None, error: Some("Invalid argument".into()) });
            continue;
        }
        // As BPF_PROG_TEST_RUN: the linear part holds what fits, the rest goes into 4 KiB
        // fragments (at most MAX_SKB_FRAGS, else the kernel's -ENOMEM); the output is whole.
        let len = f.len().min(max_len);
        let mut frags = None;
        if f.len() > max_len {
            match PageFrags::split(&f[max_len..], TEST_RUN_PAGE, MAX_SKB_FRAGS) {
                Some(p) => frags = Some(p),
                None => {
                    let msg =
                        format!("{} bytes: more than the linear part and {MAX_SKB_FRAGS} fragments hold (Cannot allocate memory)", f.len());
                    results.push(FrameResult { packet: name.clone(), retval: None, data_out: None, error: Some(msg) });
                    continue;
                }
            }
        }
        let buf = mem.as_mut_slice();
        buf.fill(0);
        buf[TEST_RUN_HEADROOM..TEST_RUN_HEADROOM + len].copy_from_slice(&f[..len]);
        let mut xb = XdpBuff::new(buf, TEST_RUN_HEADROOM, len);
        xb.ingress_ifindex = 1;
        xb.frags = frags.as_mut().map(|p| p as &mut dyn sluice_ebpf::XdpFrags);
        let mut env = SluiceEnv::new(&routes, &neigh, &lo, &mut host);
        let out = prog.run(&mut xb, &mut env);
        let a = out.action;
        match counts.get_mut(a as usize) {
            Some(n) => *n += 1,
            None => *unknown.entry(a).or_insert(0u64) += 1,
        }
        let mut data_out = xb.frame[xb.data_meta..xb.data_end].to_vec();
        let mut packet = xb.frame[xb.data..xb.data_end].to_vec();
        for part in frags.iter().flat_map(PageFrags::bytes) {
            data_out.extend_from_slice(part);
            packet.extend_from_slice(part);
        }
        if matches!(a, 2..=4) {
            out_frames.push(packet);
        }
        results.push(FrameResult { packet: name.clone(), retval: Some(a), data_out: Some(data_out), error: None });
        if args.events.is_some() {
            for m in prog.maps.iter() {
                events.extend(m.take_events().into_iter().map(|r| (m.name().to_string(), r)));
            }
        }
    }
    if let Some(p) = &args.pcap_out {
        crate::port::pcap::write_frames(p, &out_frames)?;
    }
    if let Some(p) = &args.events {
        write_events(p, &events)?;
    }
    let scope = if args.all_entries { DumpScope::All } else { DumpScope::NonZero };
    let run = ToolRun { program: prog.name(), results, counts, unknown, maps: prog.maps.clone(), scope, faults: prog.faults };
    if let Some(j) = &args.json {
        write_json(j, &args.object, &run)?;
    }
    Ok(run)
}

/// The records the event maps received (frame by frame, then map by map, each map's in the
/// order sent), as JSON lines.
fn write_events(path: &Path, events: &[(String, sluice_ebpf::EventRecord)]) -> Result<(), XdpToolError> {
    let mut text = String::new();
    for (map, r) in events {
        let data: String = r.data.iter().map(|b| format!("{b:02x}")).collect();
        text.push_str(&json!({ "map": map, "cpu": r.cpu, "data": data }).to_string());
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|source| XdpToolError::Io { path: path.display().to_string(), source })
}

fn hex_list(b: &[u8]) -> Value {
    Value::Array(b.iter().map(|x| Value::String(format!("0x{x:02x}"))).collect())
}

/// One map entry in `bpftool -j map dump` form (maps of maps: `inner_map` by name); with
/// BTF types, also bpftool's `formatted` key and value (struct fields by name).
fn entry_json(e: &MapDumpEntry, types: Option<&MapTypes>) -> Value {
    let mut v = match (&e.value, &e.values, &e.inner_map) {
        (_, _, Some(inner)) => return json!({ "key": hex_list(&e.key), "inner_map": inner }),
        (Some(v), _, _) => json!({ "key": hex_list(&e.key), "value": hex_list(v) }),
        (None, Some(vs), _) => {
            json!({ "key": hex_list(&e.key), "values": vs.iter().enumerate().map(|(cpu, v)| json!({"cpu": cpu, "value": hex_list(v)})).collect::<Vec<_>>() })
        }
        _ => json!({ "key": hex_list(&e.key) }),
    };
    if let Some(f) = formatted(e, types) {
        v["formatted"] = f;
    }
    v
}

/// An entry's key and value decoded by their BTF types (None without types).
fn formatted(e: &MapDumpEntry, types: Option<&MapTypes>) -> Option<Value> {
    let t = types?;
    let (kt, vt) = (t.key.as_ref()?, t.value.as_ref()?);
    let key = kt.format(&e.key);
    Some(match (&e.value, &e.values) {
        (Some(v), _) => json!({ "key": key, "value": vt.format(v) }),
        (None, Some(vs)) => {
            json!({ "key": key, "values": vs.iter().enumerate().map(|(cpu, v)| json!({"cpu": cpu, "value": vt.format(v)})).collect::<Vec<_>>() })
        }
        _ => json!({ "key": key }),
    })
}

/// The oracle's JSON: runs, maps in `bpftool -j map dump` form and `map_info` (type, sizes),
/// written as it is produced: a map's entries go out one by one, never a whole dump in memory.
pub fn write_json_to(w: &mut dyn Write, object: &Path, run: &ToolRun) -> std::io::Result<()> {
    let runs: Vec<Value> = run
        .results
        .iter()
        .map(|r| {
            let mut v = json!({ "packet": r.packet, "retval": r.retval, "data_out": r.data_out.as_ref().map(|d| d.iter().map(|b| format!("{b:02x}")).collect::<String>()) });
            if let Some(e) = &r.error {
                v["error"] = json!(e);
            }
            v
        })
        .collect();
    let program = object.file_name().map(|f| f.to_string_lossy().into_owned());
    writeln!(w, "{{\"program\": {}, \"engine\": {},", json!(program), json!(run.program))?;
    writeln!(w, "\"runs\": {},", Value::Array(runs))?;
    write!(w, "\"maps\": {{")?;
    let mut failed = None;
    for (i, m) in run.maps.iter().enumerate() {
        write!(w, "{}\n {}: [", if i == 0 { "" } else { "," }, json!(m.name()))?;
        let mut first = true;
        run.maps.for_each_entry(i, run.scope, |e| {
            if failed.is_none() {
                let sep = if first { "\n  " } else { ",\n  " };
                first = false;
                if let Err(err) = write!(w, "{sep}{}", entry_json(&e, run.maps.types(i))) {
                    failed = Some(err);
                }
            }
        });
        if let Some(e) = failed.take() {
            return Err(e);
        }
        write!(w, "]")?;
    }
    write!(w, "}},\n\"map_info\": {{")?;
    for (i, m) in run.maps.iter().enumerate() {
        let d = m.def();
        let info = json!({ "type": sluice_ebpf::maps::map_type_name(d.map_type), "bytes_key": d.key_size, "bytes_value": d.value_size, "max_entries": d.max_entries, "flags": d.flags });
        write!(w, "{}\n {}: {}", if i == 0 { "" } else { "," }, json!(m.name()), info)?;
    }
    writeln!(w, "}}}}")
}

/// [`write_json_to`] as a `Value` (tests).
pub fn to_json(object: &Path, run: &ToolRun) -> Value {
    let mut buf = Vec::new();
    write_json_to(&mut buf, object, run).expect("writing to memory");
    serde_json::from_slice(&buf).expect("valid JSON")
}

fn write_json(path: &Path, object: &Path, run: &ToolRun) -> Result<(), XdpToolError> {
    let io = |source| XdpToolError::Io { path: path.display().to_string(), source };
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    write_json_to(&mut w, object, run).map_err(io)?;
    w.flush().map_err(io)
}

fn print_counts(run: &ToolRun) {
    crate::outln!("{}: {} frames", run.program, run.results.len());
    for (i, n) in run.counts.iter().enumerate() {
        if *n > 0 {
            crate::outln!("  {:<10}{n:>8}", ACTION_NAMES[i]);
        }
    }
    for (value, n) in &run.unknown {
        crate::outln!("  {:<10}{n:>8}  (not an XDP action: the datapath drops these as aborted)", format!("value {value}"));
    }
    let refused: Vec<&FrameResult> = run.results.iter().filter(|r| r.error.is_some()).collect();
    if !refused.is_empty() {
        crate::outln!("  {:<10}{:>8}  (not run; first: {})", "refused", refused.len(), refused[0].error.as_deref().unwrap_or(""));
    }
    if run.faults > 0 {
        crate::outln!("  faults    {:>8}  (runtime errors, counted as ABORTED)", run.faults);
    }
}

/// `sluice xdp list`: every program (section, function, type, instructions, frags-aware)
/// and every map of an object.
pub fn list(object: &Path) -> Result<String, XdpToolError> {
    use std::fmt::Write;
    let obj = sluice_ebpf::Object::from_file(object)
        .map_err(|e| XdpToolError::Load(crate::xdp::ebpf::XdpLoadError::Load { path: object.display().to_string(), msg: e.to_string() }))?;
    let mut out = String::new();
    let _ = writeln!(out, "{}: {} programs, {} maps", object.display(), obj.programs.len(), obj.maps.len());
    for p in &obj.programs {
        let kind = sluice_ebpf::section_kind(&p.section);
        let frags = if p.frags_aware() { "frags-aware" } else { "single-buffer" };
        let note = match kind {
            sluice_ebpf::SectionKind::Xdp { .. } => frags.to_string(),
            sluice_ebpf::SectionKind::Unknown => "runs as XDP when named (--section) or with --prog-type xdp".into(),
            sluice_ebpf::SectionKind::Other(_) => "skipped (not XDP)".into(),
        };
        let _ = writeln!(
            out,
            "  program {:<24} section {:<36} type {:<14} {:>6} insns  {note}",
            p.name,
            p.section,
            kind.describe(),
            p.insns.len()
        );
    }
    for d in &obj.maps.defs() {
        let _ = writeln!(
            out,
            "  map     {:<24} type {:<16} key {:>4} B  value {:>6} B  max_entries {}",
            d.name,
            sluice_ebpf::maps::map_type_name(d.map_type),
            d.key_size,
            d.value_size,
            d.max_entries
        );
    }
    Ok(out)
}

/// Prints every map entry by entry (`xdp maps`): array slots that hold zero are left out
/// unless `--all-entries`.
fn print_maps(maps: &Maps, scope: DumpScope) {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    for (i, m) in maps.iter().enumerate() {
        let d = m.def();
        crate::outln!(
            "map {} ({}, key {} B, value {} B, max {}):",
            d.name,
            sluice_ebpf::maps::map_type_name(d.map_type),
            d.key_size,
            d.value_size,
            d.max_entries
        );
        let mut n = 0u64;
        maps.for_each_entry(i, scope, |e| {
            n += 1;
            if let Some(f) = formatted(&e, maps.types(i)) {
                crate::outln!("  {f}");
                return;
            }
            match (&e.value, &e.values, &e.inner_map) {
                (_, _, Some(inner)) => crate::outln!("  {} => map {inner}", hex(&e.key)),
                (Some(v), _, _) => crate::outln!("  {} => {}", hex(&e.key), hex(v)),
                (None, Some(vs), _) => crate::outln!("  {} => [{}]", hex(&e.key), vs.iter().map(|v| hex(v)).collect::<Vec<_>>().join(", ")),
                _ => crate::outln!("  {}", hex(&e.key)),
            }
        });
        let what = if scope == DumpScope::NonZero && matches!(d.map_type, 2 | 6) { "non-zero entries" } else { "entries" };
        crate::outln!("  ({n} {what})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn bpf(p: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bpf").join(p)
    }

    fn args(obj: &str, section: Option<&str>, prog_type: Option<&str>) -> XdpRunArgs {
        XdpRunArgs {
            object: bpf(obj),
            section: section.map(String::from),
            prog_type: prog_type.map(String::from),
            unprivileged: false,
            events: None,
            pcap_in: None,
            packets_dir: Some(bpf("packets")),
            pcap_out: None,
            mode: "native".into(),
            engine: "interp".into(),
            map_updates: Vec::new(),
            maps_file: None,
            all_entries: false,
            json: None,
        }
    }

    /// bpf/xdp_map_in_map.o: inner maps inserted with --map, deleted with an empty value; the
    /// --json output, given back with --maps over no frames, recreates every map (round
    /// trip); --maps takes numbers, hex strings and byte lists and refuses misfit inner maps.
    #[test]
    fn map_in_map_setup_and_maps_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = args("obj/xdp_map_in_map.o", None, None);
        a.map_updates = vec!["by_class:02000000=class_arp".into(), "by_l4:06000000=l4_tcp".into()];
        a.json = Some(dir.path().join("a.json"));
        let run = execute(&a).unwrap();
        assert_eq!(run.counts[1], 4, "the 4 frames of class 'other' find no inner map");
        let by_class = run.dumps().into_iter().find(|m| m.name == "by_class").unwrap();
        let inner: Vec<&str> = by_class.entries.iter().filter_map(|e| e.inner_map.as_deref()).collect();
        assert_eq!(inner, ["class_v4", "class_v6", "class_arp"]);
        // An empty value deletes: ARP frames drop again.
        let mut d = args("obj/xdp_map_in_map.o", None, None);
        d.map_updates = vec!["by_class:02000000=class_arp".into(), "by_class:02000000=".into()];
        assert_eq!(execute(&d).unwrap().counts[1], 5);
        // Round trip over no frames.
        std::fs::create_dir(dir.path().join("none")).unwrap();
        let mut b = args("obj/xdp_map_in_map.o", None, None);
        b.packets_dir = Some(dir.path().join("none"));
        b.maps_file = a.json.clone();
        b.json = Some(dir.path().join("b.json"));
        execute(&b).unwrap();
        let read = |f: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(dir.path().join(f)).unwrap()).unwrap() };
        assert_eq!(read("a.json")["maps"], read("b.json")["maps"]);
        // Hand-written: numbers, hex, byte lists.
        let f = dir.path().join("setup.json");
        std::fs::write(
            &f,
            r#"{"misses": [{"key": 1, "value": 258}, {"key": "02000000", "value": ["0x05", 0, 0, 0, 0, 0, 0, 0]}],
                "by_l4": [{"key": 1, "inner_map": "l4_tcp"}]}"#,
        )
        .unwrap();
        b.maps_file = Some(f.clone());
        let run = execute(&b).unwrap();
        let misses = run.maps.by_name("misses").unwrap();
        assert_eq!(misses.lookup(&1u32.to_le_bytes(), 0), Some(258u64.to_le_bytes().to_vec()));
        assert_eq!(misses.lookup(&2u32.to_le_bytes(), 0), Some(5u64.to_le_bytes().to_vec()));
        assert_eq!(run.maps.inner_map_name(run.maps.index_of("by_l4").unwrap(), &1u32.to_le_bytes()), Some("l4_tcp"));
        std::fs::write(&f, r#"{"by_l4": [{"key": 1, "inner_map": "class_v4"}]}"#).unwrap();
        let e = execute(&b).err().unwrap().to_string();
        assert!(e.contains("does not match the template"), "{e}");
    }

    /// BTF-typed maps: `--json` carries bpftool's "formatted" key and value (struct fields by
    /// name; the `__be32` source address in network order), and `--maps` takes typed entries
    /// (an address string, an object by field name, fields left out are zero).
    #[test]
    fn typed_dumps_and_typed_map_setup() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("none")).unwrap();
        let f = dir.path().join("typed.json");
        std::fs::write(&f, r#"{"src_budget": [{"key": "10.0.0.9", "value": {"first_seen_ns": 5, "packets": 2}}]}"#).unwrap();
        let mut a = args("obj/xdp_lru_ratelimit.o", None, None);
        a.packets_dir = Some(dir.path().join("none"));
        a.maps_file = Some(f);
        a.json = Some(dir.path().join("out.json"));
        let run = execute(&a).unwrap();
        let mut want = 5u64.to_le_bytes().to_vec();
        want.extend(2u64.to_le_bytes());
        assert_eq!(run.maps.by_name("src_budget").unwrap().lookup(&[10, 0, 0, 9], 0), Some(want));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("out.json")).unwrap()).unwrap();
        let e = &v["maps"]["src_budget"][0];
        assert_eq!(e["formatted"]["key"], 0x0a00_0009u32);
        assert_eq!(e["formatted"]["value"]["packets"], 2);
        assert_eq!(e["formatted"]["value"]["first_seen_ns"], 5);
    }

    #[test]
    fn unknown_return_values_are_reported_by_number() {
        let run = execute(&args("obj/xdp_unknown_action.o", None, None)).unwrap();
        // Frame lengths & 7 over bpf/packets (the kernel oracle's retvals).
        assert_eq!(run.counts, [7, 1, 9, 1, 1]);
        assert_eq!(run.unknown.into_iter().collect::<Vec<_>>(), [(6, 6), (7, 2)]);
        assert_eq!(run.results[0].retval, Some(7));
    }

    #[test]
    fn programs_are_picked_by_section_or_type() {
        let e = execute(&args("obj/xdp_legacy_sections.o", None, None)).err().unwrap().to_string();
        assert!(e.contains("no XDP program in this object; sections: prog (xdp_prog_drop_arp, unknown)"), "{e}");
        let run = execute(&args("obj/xdp_legacy_sections.o", None, Some("xdp"))).unwrap();
        assert_eq!(run.program, "xdp_legacy_sections.o:xdp_prog_drop_arp");
        assert_eq!(run.counts[1], 1, "the ARP frame is dropped");
        let run = execute(&args("obj/xdp_legacy_sections.o", Some("xdp_icmp_echo"), None)).unwrap();
        assert_eq!(run.counts[3], 1, "the ICMP echo request is answered");
        let e = execute(&args("obj/xdp_mixed_types.o", None, Some("tc"))).err().unwrap().to_string();
        assert!(e.contains("--prog-type `tc`"), "{e}");
        let run = execute(&args("obj/xdp_mixed_types.o", None, None)).unwrap();
        assert_eq!(run.program, "xdp_mixed_types.o:xdp_pass_count");
    }

    /// bpf/xdp_vlan_push_stale.o uses a stale packet pointer as a number: root's rules (the
    /// default) accept it, the unprivileged ones refuse it where the kernel does.
    #[test]
    fn privileged_rules_by_default_unprivileged_on_request() {
        let run = execute(&args("obj/xdp_vlan_push_stale.o", None, None)).unwrap();
        assert_eq!(run.counts[2], 27);
        let mut a = args("obj/xdp_vlan_push_stale.o", None, None);
        a.unprivileged = true;
        let e = execute(&a).err().unwrap().to_string();
        assert!(e.contains("refused by the verifier: insn 56: R8 !read_ok"), "{e}");
    }

    /// bpf/xdp_events.o: with nobody listening the helpers return what the kernel's test run
    /// returned (oracle: perf -ENOENT, the 4 KiB ring full after 20 records of 200 bytes);
    /// with --events (a reader after every frame) every record reaches the file and both
    /// helpers succeed.
    #[test]
    fn event_output_with_and_without_a_consumer() {
        let results = |run: &ToolRun| -> Vec<i64> {
            // Every slot (zeros included), as --all-entries dumps them.
            let m = run.maps.dump().into_iter().find(|m| m.name == "results").unwrap();
            m.entries.iter().map(|e| i64::from_le_bytes(e.value.clone().unwrap()[..8].try_into().unwrap())).collect()
        };
        let run = execute(&args("obj/xdp_events.o", None, None)).unwrap();
        assert_eq!(results(&run), [-2, -11, 4000, 7]);
        let dir = tempfile::tempdir().unwrap();
        let mut a = args("obj/xdp_events.o", None, None);
        a.events = Some(dir.path().join("events.jsonl"));
        let run = execute(&a).unwrap();
        // The reader takes the records after each frame: the ring holds only the record the
        // program has just sent when it asks (200 bytes available), and never fills up.
        assert_eq!(results(&run), [0, 0, 200, 0]);
        let text = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2 * 27);
        let perf: Vec<&Value> = lines.iter().filter(|l| l["map"] == "perf_events").collect();
        assert_eq!(perf.len(), 27);
        // Frame 0 (55 bytes): 192-byte record (len 55, seq 7, zeros) + the whole frame.
        let d = perf[0]["data"].as_str().unwrap();
        assert_eq!(d.len(), 2 * (192 + 55));
        assert!(d.starts_with("3700000007000000"), "{d}");
        let frame0 = std::fs::read(bpf("packets/00_ipv4_udp.bin")).unwrap();
        assert!(d.ends_with(&frame0.iter().map(|b| format!("{b:02x}")).collect::<String>()));
        // The 1514-byte frame: only its first 64 bytes follow the record.
        assert_eq!(perf[26]["data"].as_str().unwrap().len(), 2 * (192 + 64));
        assert!(lines.iter().filter(|l| l["map"] == "ring").all(|l| l["data"].as_str().unwrap().len() == 2 * 192));
    }

    #[test]
    fn list_shows_programs_of_every_type_and_maps() {
        let out = list(&bpf("obj/xdp_mixed_types.o")).unwrap();
        assert!(out.contains("6 programs, 2 maps"), "{out}");
        for needle in [
            "program tc_count",
            "type sched_cls",
            "skipped (not XDP)",
            "section xdp.frags/devmap",
            "frags-aware",
            "type kprobe",
            "map     pkt_stats",
            "max_entries 2",
        ] {
            assert!(out.contains(needle), "missing {needle}:\n{out}");
        }
    }
}
