//! `sluice bench --quick all`: exits 0 and writes results.json (every sample of every arm),
//! REPORT.md and SVG plots. No assertions about absolute speed.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

fn check_svg(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(text.trim_start().starts_with("<svg"), "{} does not start with <svg", path.display());
    assert!(text.trim_end().ends_with("</svg>"), "{} does not end with </svg>", path.display());
    assert!(text.contains("<rect") || text.contains("<path") || text.contains("<polyline"), "{} draws nothing", path.display());
    // Balanced enough to be XML: every opened <text> is closed.
    assert_eq!(text.matches("<text").count(), text.matches("</text>").count(), "{}", path.display());
}

#[test]
fn quick_all_writes_results_report_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = sluice().args(["bench", "--quick", "all", "--out"]).arg(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The only failure allowed is the self-check's verdict on a noisy machine (everything is
    // still measured and written); anything else is a broken bench.
    let verdict_only = stderr.contains("selfcheck FAILED") && stderr.lines().filter(|l| l.starts_with("error")).count() == 1;
    assert!(out.status.success() || verdict_only, "bench failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("selfcheck: PASS") || stdout.contains("selfcheck: FAIL"), "no self-check verdict:\n{stdout}");
    assert!(stdout.contains("== listify"), "{stdout}");

    let json: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap()).unwrap();
    assert_eq!(json["schema"], 1);
    assert!(json["machine"]["cpu_model"].is_string());
    assert!(json["machine"]["tsc_ghz"].as_f64().unwrap() > 0.0);
    assert!(json["machine"]["hw_counters"].is_string());
    assert_eq!(json["settings"]["quick"], true);
    let exps = json["experiments"].as_array().unwrap();
    let names: Vec<&str> = exps.iter().map(|e| e["name"].as_str().unwrap()).collect();
    for want in ["listify", "io", "selfcheck"] {
        assert!(names.contains(&want), "{names:?}");
    }
    // Every seed experiment is either run or listed as not implemented yet.
    let missing: Vec<&str> = json["not_implemented"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for seed in ["listify", "gro", "xdp", "qdisc", "rps"] {
        assert!(names.contains(&seed) ^ missing.contains(&seed), "{seed}: {names:?} / {missing:?}");
    }
    for e in exps {
        let arms = e["arms"].as_array().unwrap();
        assert!(!arms.is_empty(), "{}", e["name"]);
        for a in arms {
            let samples = a["samples"].as_array().unwrap();
            if a["unavailable"].is_string() {
                // Only an external tool (testpmd) may be unavailable.
                assert_eq!(a["kind"], "testpmd", "{a}");
                assert!(samples.is_empty());
                continue;
            }
            // The self-check must judge even under --quick, so it takes 6 runs per arm.
            let want = if e["name"] == "selfcheck" { 6 } else { 2 };
            assert_eq!(samples.len(), want, "{} {}: --quick runs {want} per arm", e["name"], a["name"]);
            for s in samples {
                assert!(s["mpps"].as_f64().unwrap() > 0.0, "{s}");
                assert!(s["rx_packets"].as_u64().unwrap() > 0, "{s}");
                assert!(s["seconds"].as_f64().unwrap() > 0.0, "{s}");
            }
            assert!(a["mpps"]["mean"].as_f64().unwrap() > 0.0);
            if a["kind"] == "sluice" {
                assert!(a["tunables"].is_object(), "{a}");
                assert!(a["config"]["ports"].is_array(), "{a}");
                assert!(!samples[0]["stages"].as_array().unwrap().is_empty(), "stage counters recorded");
                assert!(samples[0]["conservation_error"].is_null(), "{}", samples[0]);
                assert!(!a["zoom"].as_array().unwrap().is_empty());
            }
        }
        assert!(!e["comparisons"].as_array().unwrap().is_empty());
    }
    let listify = exps.iter().find(|e| e["name"] == "listify").unwrap();
    assert_eq!(listify["arms"].as_array().unwrap().len(), 4);
    assert!(listify["comparisons"][0]["verdict"]["text"].is_string());
    assert!(listify["comparisons"][0]["welch"]["p_two_sided"].is_number());
    assert!(listify["comparisons"][0]["mann_whitney"]["u"].is_number());
    assert_eq!(listify["seed"]["baseline"], 5.07);

    let report = std::fs::read_to_string(dir.path().join("REPORT.md")).unwrap();
    for needle in ["# sluice bench report", "## listify", "## io", "## selfcheck", "5.07", "Zoom-in", "Reproduce: `sluice bench listify"] {
        assert!(report.contains(needle), "REPORT.md lacks {needle:?}");
    }
    if !missing.is_empty() {
        assert!(report.contains("Not implemented yet"));
    }

    let svgs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "svg"))
        .collect();
    for want in ["listify-mpps.svg", "selfcheck-mpps.svg", "selfcheck-sweep.svg", "io-mpps.svg"] {
        assert!(svgs.iter().any(|p| p.ends_with(want)), "{want} missing: {svgs:?}");
    }
    for p in &svgs {
        check_svg(p);
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        assert!(report.contains(&name), "REPORT.md does not show {name}");
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["bench", "no-such-experiment"],
        vec!["bench", "selfcheck", "--seconds=-1"],
        vec!["bench", "selfcheck", "--runs", "0"],
        vec!["bench", "selfcheck", "--set", "no.such.tunable=1"],
        vec!["bench", "selfcheck", "--set", "rx.listified=7"],
    ] {
        let out = sluice().args(&args).arg("--out").arg(dir.path()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.to_lowercase().contains("error"), "{args:?}: {err}");
    }
    let out = sluice().args(["bench", "--list"]).output().unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("listify") && s.contains("selfcheck") && s.contains("io"), "{s}");
}
