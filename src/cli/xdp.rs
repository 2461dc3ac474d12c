//! `sluice xdp run|maps`: run an XDP object on frames the way BPF_PROG_TEST_RUN does (a
//! zeroed 4 KiB buffer, the frame at XDP_PACKET_HEADROOM, ingress ifindex 1, queue 0, output
//! from data_meta to data_end), count verdicts, write what the program produced, dump maps.

use super::{XdpCommand, XdpRunArgs};
use crate::rx::route::RouteTable;
use crate::xdp::ebpf::{EbpfProgram, EngineKind};
use crate::xdp::env::SluiceEnv;
use crate::xdp::{XdpBuff, XdpMode, XdpProgram};
use serde_json::{json, Value};
use sluice_ebpf::maps::MapDump;
use sluice_ebpf::xdp::LowMem;
use sluice_ebpf::PageFrags;
use std::path::Path;

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

/// A DEVMAP / DEVMAP_HASH value starts with an ifindex: the kernel refuses an update naming no
/// device (ifindexes are positive ints). The test run has no device list to check against
/// beyond that, as the redirect itself is not carried out.
fn check_devmap_value(map_type: u32, value: &[u8]) -> Result<(), String> {
    use sluice_ebpf::program::map_type::{DEVMAP, DEVMAP_HASH};
    if map_type != DEVMAP && map_type != DEVMAP_HASH {
        return Ok(());
    }
    let ifindex = value.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0);
    if ifindex == 0 || ifindex > i32::MAX as u32 {
        return Err(format!("ifindex {ifindex:#x} names no device (ifindexes are 1..=2147483647)"));
    }
    Ok(())
}

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
    pub maps: Vec<MapDump>,
    pub faults: u64,
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
        print_maps(&run.maps);
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

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_start_matches("0x");
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
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
    let mut prog = EbpfProgram::load_selected(&args.object, args.section.as_deref(), force_xdp, &verify_opts, kind, false)?;
    for u in &args.map_updates {
        let bad = || XdpToolError::Usage(format!("--map `{u}`: expected NAME:KEYHEX=VALUEHEX"));
        let (name, kv) = u.split_once(':').ok_or_else(bad)?;
        let (k, v) = kv.split_once('=').ok_or_else(bad)?;
        let map = prog.maps.by_name(name).ok_or_else(|| XdpToolError::Usage(format!("--map: no map named `{name}`")))?;
        // A PROG_ARRAY slot may name a program of the object (as libbpf fills it with the fd).
        let by_name = (map.map_type() == sluice_ebpf::program::map_type::PROG_ARRAY)
            .then(|| prog.program_index(v))
            .flatten()
            .map(|i| i.to_le_bytes().to_vec());
        let (k, v) = (parse_hex(k).ok_or_else(bad)?, by_name.or_else(|| parse_hex(v)).ok_or_else(bad)?);
        check_devmap_value(map.map_type(), &v).map_err(|e| XdpToolError::Usage(format!("--map `{u}`: {e}")))?;
        map.update(&k, &v, 0).map_err(|e| XdpToolError::Usage(format!("--map `{u}`: {e}")))?;
    }
    if args.events.is_some() {
        for m in prog.maps.iter() {
            m.attach_consumer();
        }
    }
    let mut mem = LowMem::new(TEST_RUN_BUF).map_err(|source| XdpToolError::Io { path: "buffer below 4 GiB".into(), source })?;
    let routes = RouteTable::new();
    let neigh = crate::rx::route::Neighbours::default();
    let mut trace = Vec::new();
    let mut out_frames = Vec::new();
    let mut counts = [0u64; 5];
    let mut unknown = std::collections::BTreeMap::new();
    let mut results = Vec::with_capacity(frames.len());
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
        let mut env = SluiceEnv::new(&routes, &neigh, &[], &mut trace);
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
    }
    if let Some(p) = &args.pcap_out {
        crate::port::pcap::write_frames(p, &out_frames)?;
    }
    if let Some(p) = &args.events {
        write_events(p, &prog.maps)?;
    }
    let run = ToolRun { program: prog.name(), results, counts, unknown, maps: prog.maps.dump(), faults: prog.faults };
    if let Some(j) = &args.json {
        write_json(j, &args.object, &run)?;
    }
    Ok(run)
}

/// The records every event map received, map by map (each in the order sent), as JSON lines.
fn write_events(path: &Path, maps: &sluice_ebpf::Maps) -> Result<(), XdpToolError> {
    let mut text = String::new();
    for m in maps.iter() {
        for r in m.take_events() {
            let data: String = r.data.iter().map(|b| format!("{b:02x}")).collect();
            text.push_str(&json!({ "map": m.name(), "cpu": r.cpu, "data": data }).to_string());
            text.push('\n');
        }
    }
    std::fs::write(path, text).map_err(|source| XdpToolError::Io { path: path.display().to_string(), source })
}

fn hex_list(b: &[u8]) -> Value {
    Value::Array(b.iter().map(|x| Value::String(format!("0x{x:02x}"))).collect())
}

/// The oracle's JSON: runs plus maps in `bpftool -j map dump` form.
pub fn to_json(object: &Path, run: &ToolRun) -> Value {
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
    let mut maps = serde_json::Map::new();
    for m in &run.maps {
        let entries: Vec<Value> = m
            .entries
            .iter()
            .map(|e| match (&e.value, &e.values) {
                (Some(v), _) => json!({ "key": hex_list(&e.key), "value": hex_list(v) }),
                (None, Some(vs)) => json!({ "key": hex_list(&e.key), "values": vs.iter().enumerate().map(|(cpu, v)| json!({"cpu": cpu, "value": hex_list(v)})).collect::<Vec<_>>() }),
                _ => json!({ "key": hex_list(&e.key) }),
            })
            .collect();
        maps.insert(m.name.clone(), Value::Array(entries));
    }
    json!({ "program": object.file_name().map(|f| f.to_string_lossy().into_owned()), "engine": run.program, "runs": runs, "maps": maps })
}

fn write_json(path: &Path, object: &Path, run: &ToolRun) -> Result<(), XdpToolError> {
    let text = serde_json::to_string_pretty(&to_json(object, run)).unwrap_or_default();
    std::fs::write(path, text).map_err(|source| XdpToolError::Io { path: path.display().to_string(), source })
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

fn print_maps(maps: &[MapDump]) {
    for m in maps {
        crate::outln!(
            "map {} ({}, key {} B, value {} B, max {}): {} entries",
            m.name,
            m.type_name,
            m.key_size,
            m.value_size,
            m.max_entries,
            m.entries.len()
        );
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        for e in &m.entries {
            match (&e.value, &e.values) {
                (Some(v), _) => crate::outln!("  {} => {}", hex(&e.key), hex(v)),
                (None, Some(vs)) => crate::outln!("  {} => [{}]", hex(&e.key), vs.iter().map(|v| hex(v)).collect::<Vec<_>>().join(", ")),
                _ => crate::outln!("  {}", hex(&e.key)),
            }
        }
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
            json: None,
        }
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
    /// with --events every record reaches the file and both helpers succeed.
    #[test]
    fn event_output_with_and_without_a_consumer() {
        let results = |run: &ToolRun| -> Vec<i64> {
            let m = run.maps.iter().find(|m| m.name == "results").unwrap();
            m.entries.iter().map(|e| i64::from_le_bytes(e.value.clone().unwrap()[..8].try_into().unwrap())).collect()
        };
        let run = execute(&args("obj/xdp_events.o", None, None)).unwrap();
        assert_eq!(results(&run), [-2, -11, 4000, 7]);
        let dir = tempfile::tempdir().unwrap();
        let mut a = args("obj/xdp_events.o", None, None);
        a.events = Some(dir.path().join("events.jsonl"));
        let run = execute(&a).unwrap();
        assert_eq!(results(&run), [0, 0, 0, 0]);
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
