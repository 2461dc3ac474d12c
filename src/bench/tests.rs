//! Harness unit tests: registry, settings, a tiny in-process experiment end to end (with a
//! missing external tool), reports and plots on it.

use super::experiment::{Arm, ArmKind, Comparison, Experiment, Sweep};
use super::*;
use crate::config;
use crate::datapath::Pipeline;

fn tiny_settings(runs: usize) -> Settings {
    Settings { runs: Some(runs), seconds: 0.02, warmup: 0.0, quick: true, runs_given: true, set: vec![] }
}

#[test]
fn resolve_names() {
    let (run, missing) = resolve(&[]).unwrap();
    assert!(run.contains(&"listify") && run.contains(&"selfcheck") && run.contains(&"io"));
    for s in experiments::SEED_EXPERIMENTS {
        assert!(run.contains(s) ^ missing.contains(s), "{s}");
    }
    let (run2, _) = resolve(&["all".to_string()]).unwrap();
    assert_eq!(run, run2);
    let (run, missing) = resolve(&["selfcheck".into(), "selfcheck".into()]).unwrap();
    assert_eq!(run, vec!["selfcheck"]);
    assert!(missing.is_empty());
    assert!(matches!(resolve(&["bogus".into()]), Err(BenchError::UnknownExperiment(..))));
    assert!(matches!(resolve(&["all".into(), "bogus".into()]), Err(BenchError::UnknownExperiment(..))));
}

#[test]
fn settings_validate() {
    let ok = |a: BenchArgs| Settings::from_args(&a);
    let s = ok(BenchArgs { quick: true, ..Default::default() }).unwrap();
    assert_eq!((s.runs, s.seconds, s.warmup), (Some(2), 0.3, 0.1));
    let s = ok(BenchArgs { quick: true, runs: Some(4), ..Default::default() }).unwrap();
    assert_eq!(s.runs, Some(4));
    let s = ok(BenchArgs::default()).unwrap();
    assert_eq!((s.runs, s.seconds, s.warmup), (None, 5.0, 1.0));
    assert!(ok(BenchArgs { seconds: Some(f64::NAN), ..Default::default() }).is_err());
    assert!(ok(BenchArgs { seconds: Some(0.0), ..Default::default() }).is_err());
    assert!(ok(BenchArgs { warmup: Some(-1.0), ..Default::default() }).is_err());
    assert!(ok(BenchArgs { runs: Some(0), ..Default::default() }).is_err());
    assert!(ok(BenchArgs { set: vec!["nope=1".into()], ..Default::default() }).is_err());
    assert!(ok(BenchArgs { set: vec!["rx.listified".into()], ..Default::default() }).is_err());
}

#[test]
fn every_registered_experiment_builds_its_arms() {
    let pool = crate::buf::Pool::new(256).unwrap();
    for (name, _, build) in experiments::registry() {
        let e = build().unwrap();
        assert_eq!(e.name, name);
        assert!(!e.arms.is_empty() && e.default_runs >= 5, "{name}");
        for c in &e.comparisons {
            assert!(c.a < e.arms.len() && c.b < e.arms.len() && c.a != c.b, "{name}");
        }
        if let Some(s) = &e.seed {
            assert!(s.comparison < e.comparisons.len());
        }
        let mut names: Vec<&str> = e.arms.iter().map(|a| a.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), e.arms.len(), "{name}: arm names must be unique");
        for a in &e.arms {
            if let ArmKind::Sluice { config, set } = &a.kind {
                let t = config.tunables(set).unwrap_or_else(|err| panic!("{name}/{}: {err}", a.name));
                config.build(t, &pool).unwrap_or_else(|err| panic!("{name}/{}: {err}", a.name));
            }
        }
    }
}

#[test]
fn cap_comes_from_rate_limited_generators() {
    let mut c = config::lab(Pipeline::L3fwd);
    let e = |c: &crate::config::Config| Experiment {
        name: "t",
        title: String::new(),
        description: String::new(),
        arms: vec![Arm::sluice("x", "x", c.clone(), &[]), Arm::sluice("y", "y", c.clone(), &["rx.listified=0"])],
        comparisons: vec![],
        seed: None,
        cap: None,
        default_runs: 5,
        quick_runs: None,
        sweep: None,
        notes: vec![],
    };
    assert_eq!(e(&c).effective_cap(), None);
    c.ports[0].gen.as_mut().unwrap().rate_pps = Some(2_500_000.0);
    assert_eq!(e(&c).effective_cap(), Some(2.5));
    let mut x = e(&c);
    x.cap = Some(1.0);
    assert_eq!(x.effective_cap(), Some(1.0));
    let mut mixed = e(&c);
    mixed.arms.push(Arm::sluice("z", "z", config::lab(Pipeline::L3fwd), &[]));
    assert_eq!(mixed.effective_cap(), None);
}

/// Two sluice arms on a sweep, and a testpmd arm whose program does not exist.
fn tiny_experiment() -> Experiment {
    let mut lab = config::lab(Pipeline::L3fwd);
    lab.ports[1].kind = crate::config::PortKind::Null;
    lab.ports[1].check = None;
    Experiment {
        name: "tiny",
        title: "tiny".into(),
        description: "test".into(),
        arms: vec![
            Arm::sluice("a", "A", lab.clone(), &[]).at("w", 0.0),
            Arm::sluice("b", "B", lab, &["rx.extra_work=8"]).at("w", 8.0),
            Arm {
                name: "ext".into(),
                label: "external".into(),
                kind: ArmKind::Testpmd { program: "/nonexistent/dpdk-testpmd".into(), args: vec![] },
                x: None,
                series: None,
                rate_is_tx: false,
            },
        ],
        comparisons: vec![
            Comparison { a: 0, b: 1, title: "A vs B".into(), ratio: true },
            Comparison { a: 2, b: 0, title: "ext vs A".into(), ratio: true },
        ],
        seed: None,
        cap: None,
        default_runs: 5,
        quick_runs: None,
        sweep: Some(Sweep { x_label: "w".into(), metric: "cpu_ns_per_packet" }),
        notes: vec!["a note".into()],
    }
}

#[test]
fn tiny_experiment_end_to_end() {
    let e = tiny_experiment();
    let r = run_experiment(&e, &tiny_settings(2), false, true).unwrap();
    assert_eq!(r.arms.len(), 3);
    for a in &r.arms[..2] {
        assert_eq!(a.samples.len(), 2);
        assert!(a.samples.iter().all(|s| s.rx_packets > 0 && s.conservation_error.is_none() && s.mpps > 0.0));
        assert!(a.mpps.is_some() && !a.zoom.is_empty());
        let last = a.zoom.last().unwrap();
        assert!((last.cum_ns - a.zoom_total_ns.unwrap()).abs() < 1e-6);
    }
    // Interleaved: round 0 is a, b; round 1 starts one later (b, a).
    assert_eq!(r.order, vec!["a", "b", "b", "a"]);
    assert!(r.arms[2].unavailable.as_deref().unwrap().contains("not found"));
    assert!(r.comparisons[0].verdict.is_some() && r.comparisons[0].ratio.is_some());
    assert!(r.comparisons[1].verdict.is_none() && r.comparisons[1].note.as_deref().unwrap().starts_with("not compared"));
    assert_eq!(r.sweeps.len(), 1);

    let results = Results {
        schema: 1,
        command: "sluice bench tiny".into(),
        started_unix: 0,
        machine: machine::describe(),
        settings: tiny_settings(2),
        experiments: vec![r],
        not_implemented: vec!["gro".into()],
    };
    let dir = tempfile::tempdir().unwrap();
    let files = write_outputs(&results, &[], dir.path()).unwrap();
    assert!(files.iter().any(|f| f.ends_with("tiny-mpps.svg")) && files.iter().any(|f| f.ends_with("tiny-sweep.svg")));
    let md = std::fs::read_to_string(dir.path().join("REPORT.md")).unwrap();
    assert!(md.contains("## tiny") && md.contains("unavailable") && md.contains("Not implemented yet:** gro"), "{md}");
    assert!(md.contains("![tiny-mpps.svg](tiny-mpps.svg)"));
    let t = report::terminal(&results.experiments[0]);
    assert!(t.contains("A vs B") && t.contains("unavailable"), "{t}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap()).unwrap();
    assert_eq!(v["experiments"][0]["arms"][0]["samples"].as_array().unwrap().len(), 2);
}

#[test]
fn one_run_one_arm_gives_no_verdict_and_still_plots() {
    let mut e = tiny_experiment();
    e.arms.truncate(2);
    e.comparisons.truncate(1);
    e.sweep = None;
    let r = run_experiment(&e, &tiny_settings(1), false, true).unwrap();
    assert!(r.comparisons[0].verdict.is_none());
    assert!(r.comparisons[0].note.as_deref().unwrap().contains("at least 2 runs"));
    let mut one = r.clone();
    one.arms.truncate(1);
    let dir = tempfile::tempdir().unwrap();
    let files = plot::plots(&one, dir.path()).unwrap();
    assert_eq!(files.len(), 1);
    let svg = std::fs::read_to_string(&files[0]).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("</svg>"));
    // No arm with data: nothing to draw, no error.
    one.arms[0].mpps = None;
    assert!(plot::plots(&one, dir.path()).unwrap().is_empty());
}

#[test]
fn command_line_is_quoted() {
    let c = command_line();
    assert!(c.starts_with("sluice"));
}
