//! Differential test against the kernel: runs the objects of the repository's `bpf/` corpus on
//! its packet set and compares verdicts, output frames (metadata + packet, as
//! BPF_PROG_TEST_RUN returns them) and final map contents with the committed kernel outputs in
//! `bpf/oracle/*.json` (see bpf/README.md; same normalisation as `bpf/oracle-compare.py`).
//! Skipped when the corpus is not there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use sluice_ebpf::maps::BPF_ANY;
use sluice_ebpf::program::map_type;
use sluice_ebpf::{Interpreter, LowMem, Maps, NullEnv, Object, XdpBuff};

const HEADROOM: usize = 256;
const FRAME: usize = 4096;

fn bpf_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bpf")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect()
}

fn byte_list(v: &Value) -> Vec<u8> {
    v.as_array().unwrap().iter().map(|b| u8::from_str_radix(b.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()).collect()
}

/// `xdp_glob.bss` / `.bss` → `.bss`; other names unchanged.
fn norm_name(name: &str) -> String {
    for sec in [".bss", ".data", ".rodata", ".kconfig"] {
        if let Some(i) = name.find(sec) {
            if i <= 8 {
                return name[i..].to_owned();
            }
        }
    }
    name.to_owned()
}

/// Value normalisation of oracle-compare.py: time-dependent bytes masked, per-CPU values summed
/// as little-endian u64 lanes.
fn norm_value(map: &str, raw: &[u8]) -> Vec<u8> {
    let mut v = raw.to_vec();
    if map == "src_budget" && v.len() >= 8 {
        let nz = v[..8].iter().any(|&b| b != 0);
        v[..8].copy_from_slice(&[nz as u8; 8]);
    }
    v
}

fn sum_lanes(vals: &[Vec<u8>]) -> Vec<u8> {
    let size = vals.first().map_or(0, |v| v.len());
    let mut lanes = vec![0u64; size / 8];
    for v in vals {
        for (i, l) in lanes.iter_mut().enumerate() {
            *l = l.wrapping_add(u64::from_le_bytes(v[8 * i..8 * i + 8].try_into().unwrap()));
        }
    }
    lanes.iter().flat_map(|l| l.to_le_bytes()).collect()
}

type MapContents = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

fn oracle_maps(doc: &Value) -> MapContents {
    let mut out = MapContents::new();
    for (name, dump) in doc["maps"].as_object().unwrap() {
        let mut entries = BTreeMap::new();
        for e in dump.as_array().unwrap() {
            let key = byte_list(&e["key"]);
            if let Some(values) = e.get("values") {
                let vals: Vec<Vec<u8>> =
                    values.as_array().unwrap().iter().filter(|v| v["value"].is_array()).map(|v| byte_list(&v["value"])).collect();
                entries.insert(key, norm_value(name, &sum_lanes(&vals)));
            } else if let Some(inner) = e["inner_map"].as_str() {
                // A map of maps: the inner map by name (kernel-oracle.sh names the ids).
                entries.insert(key, format!("map:{inner}").into_bytes());
            } else if e["value"].is_array() {
                entries.insert(key, norm_value(name, &byte_list(&e["value"])));
            }
        }
        out.insert(norm_name(name), entries);
    }
    out
}

fn our_maps(maps: &Maps) -> MapContents {
    let mut out = MapContents::new();
    for (i, m) in maps.iter().enumerate() {
        let name = m.name().to_owned();
        let mut entries = BTreeMap::new();
        if m.def().is_map_of_maps() {
            for k in m.keys() {
                let inner = maps.inner_map_name(i, &k).unwrap();
                entries.insert(k, format!("map:{inner}").into_bytes());
            }
            out.insert(name, entries);
            continue;
        }
        for k in m.keys() {
            let v = if m.is_percpu() { sum_lanes(&m.lookup_percpu(&k).unwrap()) } else { m.lookup(&k, 0).unwrap() };
            entries.insert(k, norm_value(&name, &v));
        }
        out.insert(norm_name(&name), entries);
    }
    out
}

fn name_of(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

fn check(obj_path: &Path, oracle_path: &Path) -> Vec<String> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(oracle_path).unwrap()).unwrap();
    let obj = Object::from_file(obj_path).unwrap_or_else(|e| panic!("{}: {e}", obj_path.display()));
    for m in obj.maps.iter() {
        // As bpf/kernel-oracle.sh: a DEVMAP's key 0 holds ifindex 1, a CPUMAP's key 0 a
        // queue size of 192.
        let first = match m.map_type() {
            map_type::DEVMAP => Some(1u32),
            map_type::CPUMAP => Some(192u32),
            _ => None,
        };
        if let Some(first) = first {
            let mut v = vec![0u8; m.def().value_size as usize];
            v[..4].copy_from_slice(&first.to_le_bytes());
            m.update(&0u32.to_le_bytes(), &v, BPF_ANY).unwrap();
        }
    }
    // Inner maps inserted from user space, as bpf/oracle-all.sh's ORACLE_MAP_IN_MAP.
    if name_of(obj_path) == "xdp_map_in_map.o" {
        for (outer, key, inner) in [("by_class", 2u32, "class_arp"), ("flows_by_cpu", 1, "flows_cpu1"), ("by_l4", 6, "l4_tcp")] {
            let (o, i) = (obj.maps.index_of(outer).unwrap(), obj.maps.index_of(inner).unwrap());
            obj.maps.set_inner(o, &key.to_le_bytes(), i, BPF_ANY).unwrap();
        }
    }
    // The program the oracle ran (bpf/oracle-all.sh): by section for legacy section names.
    let want = match name_of(obj_path).as_str() {
        "xdp_legacy_sections.o" => Some("xdp_icmp_echo"),
        _ => None,
    };
    let prog = Arc::new(obj.select_xdp(want, false).expect("an XDP program").clone());
    let interp = Interpreter::new(prog, obj.maps.clone()).unwrap();
    let mut env = NullEnv::new();
    let mut mem = LowMem::new(FRAME).unwrap();
    let mut diffs = Vec::new();
    let name = obj_path.file_name().unwrap().to_string_lossy().into_owned();
    for run in doc["runs"].as_array().unwrap() {
        let pkt_name = run["packet"].as_str().unwrap();
        let pkt = std::fs::read(bpf_dir().join("packets").join(pkt_name)).unwrap();
        let frame = mem.as_mut_slice();
        frame.fill(0);
        frame[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(&pkt);
        let mut xdp = XdpBuff::new(frame, HEADROOM, pkt.len());
        xdp.ingress_ifindex = 1;
        let (retval, out) = match interp.run(&mut xdp, &mut env) {
            Ok(o) => (Some(o.action as u64), Some(xdp.frame[xdp.data_meta..xdp.data_end].to_vec())),
            Err(e) => {
                diffs.push(format!("{name} {pkt_name}: run error {e}"));
                continue;
            }
        };
        let want_ret = run["retval"].as_u64();
        let want_out = run["data_out"].as_str().map(hex);
        if want_ret.is_none() {
            // The kernel refused the frame (e.g. shorter than 14 bytes); nothing to compare.
            continue;
        }
        if retval != want_ret {
            diffs.push(format!("{name} {pkt_name}: retval {retval:?}, kernel {want_ret:?}"));
        }
        if out != want_out {
            diffs.push(format!(
                "{name} {pkt_name}: data_out differs\n  ours   {}\n  kernel {}",
                out.map(|o| o.iter().map(|b| format!("{b:02x}")).collect::<String>()).unwrap_or_default(),
                run["data_out"].as_str().unwrap_or("")
            ));
        }
    }
    let want = oracle_maps(&doc);
    let got = our_maps(&obj.maps);
    for (map, entries) in &want {
        match got.get(map) {
            None => diffs.push(format!("{name}: map {map} missing")),
            Some(ours) if ours != entries => {
                diffs.push(format!("{name}: map {map} differs\n  ours   {ours:02x?}\n  kernel {entries:02x?}"))
            }
            _ => {}
        }
    }
    diffs
}

#[test]
fn interpreter_matches_kernel_oracle() {
    let dir = bpf_dir();
    let oracle = dir.join("oracle");
    let Ok(entries) = std::fs::read_dir(&oracle) else {
        eprintln!("no bpf/oracle corpus: skipped");
        return;
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    let mut diffs = Vec::new();
    let mut checked = 0;
    for json in &files {
        let stem = json.file_stem().unwrap().to_string_lossy().into_owned();
        let obj = dir.join("obj").join(format!("{stem}.o"));
        // Tail calls chain programs: the runner that follows them is sluice's
        // (`xdp::ebpf::EbpfProgram`), compared with this oracle in tests/xdp_tail_calls.rs.
        if !obj.exists() || stem.starts_with("xdp_tail_call") {
            continue;
        }
        diffs.extend(check(&obj, json));
        checked += 1;
        // The legacy-map twin of xdp_globals must behave identically.
        if stem == "xdp_globals" {
            let legacy = dir.join("obj/xdp_legacy_globals.o");
            if legacy.exists() {
                diffs.extend(check(&legacy, json));
                checked += 1;
            }
        }
    }
    eprintln!("checked {checked} objects against the kernel oracle");
    assert!(diffs.is_empty(), "{} differences:\n{}", diffs.len(), diffs.join("\n"));
}

/// The corpus' negative programs (which the verifier must refuse) still load, and the checked
/// interpreter runs them on every packet without harming the host: each run ends with a
/// verdict or an error.
#[test]
fn negative_corpus_is_contained_by_the_interpreter() {
    let dir = bpf_dir().join("negative/obj");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("no bpf/negative corpus: skipped");
        return;
    };
    let mut objs: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "o")).collect();
    objs.sort();
    let mut packets: Vec<PathBuf> = std::fs::read_dir(bpf_dir().join("packets"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    packets.sort();
    let mut mem = LowMem::new(FRAME).unwrap();
    let mut errors = 0;
    for obj_path in &objs {
        let obj = Object::from_file(obj_path).unwrap_or_else(|e| panic!("{}: {e}", obj_path.display()));
        for p in obj.programs.iter().filter(|p| p.is_xdp()) {
            let config = sluice_ebpf::RunConfig { insn_budget: 200_000, ..Default::default() };
            let interp = Interpreter::with_config(Arc::new(p.clone()), obj.maps.clone(), config).unwrap();
            let mut errors_here = 0;
            for pkt_path in &packets {
                let pkt = std::fs::read(pkt_path).unwrap();
                let frame = mem.as_mut_slice();
                frame[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(&pkt);
                let mut xdp = XdpBuff::new(frame, HEADROOM, pkt.len());
                if let Err(e) = interp.run(&mut xdp, &mut NullEnv::new()) {
                    if errors_here == 0 {
                        eprintln!(
                            "{}: {} ({})",
                            obj_path.file_name().unwrap().to_string_lossy(),
                            e,
                            pkt_path.file_name().unwrap().to_string_lossy()
                        );
                    }
                    errors_here += 1;
                }
            }
            errors += errors_here;
        }
    }
    assert!(errors > 0, "some negative programs fault at run time");
}
