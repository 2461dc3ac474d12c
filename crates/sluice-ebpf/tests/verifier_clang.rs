//! Real clang output must verify: typical XDP programs (packet parsing with VLAN loops,
//! map lookups and atomics, redirects, adjust_head encapsulation, fib_lookup, csum_diff,
//! global data, bpf-to-bpf calls, bounded loops) compiled at -O2 for every BPF CPU
//! version clang supports. Skipped when clang is not installed.

#[path = "verifier_corpus.rs"]
mod corpus;

use corpus::*;
use sluice_ebpf::verifier::{verify, verify_with_frozen, VerifyError, VerifyOptions};

fn check(name: &str, src: &str) -> Vec<Result<usize, VerifyError>> {
    let mut results = Vec::new();
    for cpu in ["v1", "v2", "v3"] {
        let Some(progs) = compile(name, src, cpu) else { return results };
        assert!(!progs.is_empty(), "{name}: no program");
        for p in progs {
            let r = verify(&p, &VerifyOptions::default());
            match &r {
                Ok(v) => eprintln!(
                    "{name}/{} {cpu}: ok, {} insns, processed {}, states {}, pruned {}, stack {:?}",
                    p.name,
                    p.insns.len(),
                    v.stats().processed_insns,
                    v.stats().states_stored,
                    v.stats().states_pruned,
                    v.stats().subprog_stack_depth
                ),
                Err(e) => eprintln!("{name}/{} {cpu}: {e}", p.name),
            }
            results.push(r.map(|v| v.stats().processed_insns));
        }
    }
    results
}

#[track_caller]
fn verifies(name: &str, src: &str) {
    for r in check(name, src) {
        if let Err(e) = r {
            panic!("{name} refused: {e}");
        }
    }
}

#[test]
fn firewall_with_maps_and_atomics() {
    verifies("firewall", FIREWALL);
}

#[test]
fn redirects_devmap_xskmap_cpumap() {
    verifies("redirect", REDIRECT);
}

#[test]
fn adjust_head_tail_meta() {
    verifies("encap", ENCAP);
}

#[test]
fn fib_lookup_router() {
    verifies("router", ROUTER);
}

#[test]
fn global_data_and_subprograms() {
    verifies("globals", GLOBALS);
}

#[test]
fn loops_checksums_and_printk() {
    verifies("loops", LOOPS);
}

// ---------------------------------------------------------------- committed objects

/// The repository root (for `bpf/`), when the tests run inside it.
fn repo_dir() -> Option<std::path::PathBuf> {
    let d = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if d.join("bpf/obj").is_dir() {
        return Some(d);
    }
    None
}

fn objects_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "o")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn committed_objects_verify() {
    let Some(root) = repo_dir() else { return };
    let mut dirs = vec![root.join("bpf/obj")];
    dirs.push(root.join("crates/sluice-ebpf/tests/progs"));
    let mut n = 0;
    for dir in dirs {
        for obj in objects_in(&dir) {
            // sluice's loader: it takes any section name (aya-obj alone refuses `prog`, `tc`, ...).
            // `.rodata` frozen as a loader freezes it, so the verifier reads its settings.
            let (progs, frozen) = match sluice_ebpf::Object::from_file(&obj) {
                Ok(o) => {
                    let frozen = o.freeze_rodata();
                    (o.programs, frozen)
                }
                // A ring buffer map: sluice's runtime has no such map type.
                Err(e) if e.to_string().contains("unsupported map type") => continue,
                Err(e) => panic!("{}: {e}", obj.display()),
            };
            for p in progs {
                let r = verify_with_frozen(&p, &VerifyOptions::default(), &frozen);
                eprintln!("{} {}: {:?}", obj.display(), p.name, r.as_ref().map(|v| v.stats().processed_insns));
                match r {
                    Ok(_) => n += 1,
                    // bpf_ringbuf_reserve/submit (reference-tracked memory) are not implemented.
                    Err(e) if e.msg.contains("bpf_ringbuf_reserve") => {}
                    Err(e) => panic!("{} {} refused: {e}", obj.display(), p.name),
                }
            }
        }
    }
    assert!(n >= 20, "only {n} programs verified");
}

/// bpf/negative: every object is refused at the instruction the kernel names, with the
/// kernel's message as a substring (from EXPECTED.md, generated on a real kernel).
#[test]
fn committed_negative_objects_refused_like_the_kernel() {
    let Some(root) = repo_dir() else { return };
    let Ok(md) = std::fs::read_to_string(root.join("bpf/negative/EXPECTED.md")) else { return };
    let mut checked = 0;
    for sec in md.split("\n## ").skip(1) {
        let name = sec.lines().next().unwrap_or("").trim().trim_end_matches(".c").to_string();
        let Some(exp) = sec.split("EXPECT: `").nth(1).and_then(|s| s.split('`').next()) else { continue };
        let exp = exp.split(" (only").next().unwrap_or(exp);
        let kernel_insn: Option<usize> = sec.split("```\n").nth(1).and_then(|b| b.split(':').next()).and_then(|n| n.trim().parse().ok());
        let obj = root.join(format!("bpf/negative/obj/{name}.o"));
        let Ok(data) = std::fs::read(&obj) else { continue };
        // "(only without CAP_PERFMON...)": the kernel loads it as root, as sluice's default
        // (privileged) rules must; the unprivileged rules refuse it.
        let unprivileged_only = sec.contains("(only without");
        for p in load_elf(&data).unwrap_or_else(|e| panic!("{name}: {e}")) {
            let opts = if unprivileged_only {
                if let Err(e) = verify(&p, &VerifyOptions::default()) {
                    panic!("{name}: the kernel loads it as root, sluice's privileged rules refuse it: {e}");
                }
                VerifyOptions::unprivileged()
            } else {
                VerifyOptions::default()
            };
            let e = verify(&p, &opts).expect_err(&name);
            eprintln!("{name}: {e}");
            assert!(e.msg.contains(exp), "{name}: expected {exp:?} in {e}");
            // Where a complexity budget runs out differs; everything else matches the kernel.
            if !exp.contains("too large") {
                assert_eq!(Some(e.insn), kernel_insn, "{name}: {e}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} negative objects checked");
}
