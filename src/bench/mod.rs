//! `sluice bench`: reproduces the experiments of the kernel patch notes (seeds/) with sound
//! statistics.
//!
//! An experiment ([`experiment::Experiment`]) is a set of arms — configurations of the same
//! lab — run *interleaved*: round r runs every arm once, starting from arm r mod k (A B, B A,
//! A B, ... for two arms), so slow drift of the machine hits every arm alike and no arm always
//! runs first. Each run builds a fresh datapath, warms it up, zeroes its counters, then
//! measures. Comparisons use Welch's t-test with Mann–Whitney U as a check, and the
//! censored-normal estimate when samples sit at a known cap ([`stats`]).
//!
//! Output: a terminal table per experiment, and in `--out`: results.json (every sample),
//! REPORT.md and SVG plots.

pub mod analysis;
pub mod experiment;
pub mod experiments;
pub mod hol;
pub mod hw;
pub mod lab;
pub mod machine;
pub mod plot;
pub mod report;
pub mod runner;
pub mod stats;
pub mod testpmd;

use analysis::{ArmResult, ExperimentResult, SeedJson};
use experiment::{ArmKind, Experiment};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use runner::Sample;
use serde::Serialize;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `sluice bench` arguments.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct BenchArgs {
    /// Experiments to run: listify, xdp, io, selfcheck, or all (the default). `--list` shows them.
    #[arg(value_name = "EXPERIMENT")]
    pub experiments: Vec<String>,
    /// Runs per arm (default: the experiment's, 5 or 6; --quick: 2, but 6 for the self-check,
    /// which must reach a verdict).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Measured seconds per run (default 5; --quick: 0.3).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Warm-up seconds per run before measuring (default 1; --quick: 0.1).
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Output directory for results.json, REPORT.md and the SVG plots.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// Set a tunable in every sluice arm (before the arm's own settings), e.g. --set rx.route_hint=0.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Smoke run: 2 runs per arm of 0.3 s after 0.1 s of warm-up (unless given explicitly).
    #[arg(long)]
    pub quick: bool,
    /// No progress bars or per-run lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// List the experiments and exit.
    #[arg(long)]
    pub list: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("unknown experiment `{0}` (known: {1})")]
    UnknownExperiment(String, String),
    #[error("{0}")]
    Settings(String),
    #[error("experiment definition: {0}")]
    Experiment(String),
    #[error(transparent)]
    Run(#[from] crate::cli::run::RunError),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("results.json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("plot {path}: {msg}")]
    Plot { path: String, msg: String },
    #[error("selfcheck FAILED, the figures of this machine cannot be trusted now: {0}")]
    Untrustworthy(String),
    #[error("experiment {experiment}, arm {arm}: conservation violated in {n} run(s): {first}")]
    Conservation { experiment: String, arm: String, n: usize, first: String },
}

impl BenchError {
    fn io(path: &Path, source: std::io::Error) -> BenchError {
        BenchError::Io { path: path.display().to_string(), source }
    }
}

/// The resolved run settings.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// `--runs`, overriding every experiment's default.
    pub runs: Option<usize>,
    pub seconds: f64,
    pub warmup: f64,
    pub quick: bool,
    /// `--runs` was given (else --quick's 2 may be raised by an experiment that must judge).
    pub runs_given: bool,
    pub set: Vec<String>,
}

impl Settings {
    pub fn from_args(a: &BenchArgs) -> Result<Settings, BenchError> {
        let (runs, seconds, warmup) = if a.quick { (Some(2), 0.3, 0.1) } else { (None, 5.0, 1.0) };
        let s = Settings {
            runs: a.runs.or(runs),
            seconds: a.seconds.unwrap_or(seconds),
            warmup: a.warmup.unwrap_or(warmup),
            quick: a.quick,
            runs_given: a.runs.is_some(),
            set: a.set.clone(),
        };
        if !(s.seconds.is_finite() && s.seconds > 0.0 && s.seconds <= 86_400.0) {
            return Err(BenchError::Settings(format!("--seconds {} must be in (0, 86400]", s.seconds)));
        }
        if !(s.warmup.is_finite() && (0.0..=3600.0).contains(&s.warmup)) {
            return Err(BenchError::Settings(format!("--warmup {} must be in [0, 3600]", s.warmup)));
        }
        if let Some(r) = s.runs {
            if r == 0 || r > 10_000 {
                return Err(BenchError::Settings(format!("--runs {r} must be in 1..=10000")));
            }
        }
        // Catch a bad --set before any run.
        let mut t = crate::config::Tunables::default();
        t.apply_all(&s.set).map_err(|e| BenchError::Settings(format!("--set: {e}")))?;
        Ok(s)
    }

    pub fn runs_for(&self, e: &Experiment) -> usize {
        match self.runs {
            Some(r) if self.quick && !self.runs_given => r.max(e.quick_runs.unwrap_or(r)),
            Some(r) => r,
            None => e.default_runs,
        }
    }
}

/// Everything `sluice bench` writes to results.json.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub schema: u32,
    /// The command line, as run.
    pub command: String,
    pub started_unix: u64,
    pub machine: machine::Machine,
    pub settings: Settings,
    pub experiments: Vec<ExperimentResult>,
    /// Seed experiments asked for (or part of `all`) that no issue has implemented yet.
    pub not_implemented: Vec<String>,
}

/// The command line as typed (program name shortened to `sluice`), shell-quoted.
pub fn command_line() -> String {
    let mut parts: Vec<String> = std::env::args().collect();
    if let Some(first) = parts.first_mut() {
        *first = "sluice".into();
    }
    parts
        .iter()
        .map(|p| {
            if !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+".contains(c)) {
                p.clone()
            } else {
                format!("'{}'", p.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Resolves experiment names: (to run, seed experiments not implemented yet).
pub fn resolve(names: &[String]) -> Result<(Vec<&'static str>, Vec<&'static str>), BenchError> {
    let known = || experiments::registry().iter().map(|r| r.0).collect::<Vec<_>>().join(", ") + ", all";
    if names.is_empty() || names.iter().any(|n| n == "all") {
        let (mut run, missing) = experiments::all();
        // Also honour explicit names next to `all` (no duplicates).
        for n in names.iter().filter(|n| *n != "all") {
            if experiments::find(n).is_none() && !experiments::SEED_EXPERIMENTS.contains(&n.as_str()) {
                return Err(BenchError::UnknownExperiment(n.clone(), known()));
            }
        }
        run.dedup();
        return Ok((run, missing));
    }
    let mut run = Vec::new();
    let mut missing = Vec::new();
    for n in names {
        let reg = experiments::registry();
        if let Some((name, _, _)) = reg.iter().find(|r| r.0 == n) {
            if !run.contains(name) {
                run.push(*name);
            }
        } else if let Some(s) = experiments::SEED_EXPERIMENTS.iter().find(|s| *s == n) {
            if !missing.contains(s) {
                missing.push(*s);
            }
        } else {
            return Err(BenchError::UnknownExperiment(n.clone(), known()));
        }
    }
    Ok((run, missing))
}

/// What `sluice bench` did.
#[derive(Debug)]
pub struct BenchOutcome {
    pub results: Results,
    pub out: PathBuf,
    pub files: Vec<PathBuf>,
}

/// Lists the experiments (for `--list`).
pub fn list_text() -> String {
    let mut s = String::from("experiments:\n");
    for (n, d, _) in experiments::registry() {
        s.push_str(&format!("  {n:<10} {d}\n"));
    }
    let (_, missing) = experiments::all();
    for m in missing {
        s.push_str(&format!("  {m:<10} not implemented yet\n"));
    }
    s.push_str("  all        every experiment above that exists\n");
    s.push_str(
        "  hol        (runs alone) head-of-line delay of a priority probe behind a bulk backlog: BQL on/off/fixed, MTU and GSO packets\n",
    );
    s.push_str("  lab        (root, runs alone) the namespace lab routed by the kernel, sluice over AF_PACKET and AF_XDP, testpmd\n");
    s
}

/// An outcome with no in-process experiment (`--list`, or `lab`, which writes its own file).
fn outcome_without_experiments(args: &BenchArgs, files: Vec<PathBuf>) -> Result<BenchOutcome, BenchError> {
    Ok(BenchOutcome {
        results: Results {
            schema: 1,
            command: command_line(),
            started_unix: 0,
            machine: machine::describe(),
            settings: Settings::from_args(args)?,
            experiments: Vec::new(),
            not_implemented: Vec::new(),
        },
        out: args.out.clone(),
        files,
    })
}

/// Runs `sluice bench`: every requested experiment, then writes the outputs.
pub fn main(args: &BenchArgs) -> Result<BenchOutcome, BenchError> {
    if args.list {
        crate::out!("{}", list_text());
        return outcome_without_experiments(args, Vec::new());
    }
    if args.experiments.iter().any(|e| e == "hol") {
        // Simulated time, its own table: hol.json and the BQL plot.
        if args.experiments.len() > 1 {
            return Err(BenchError::Settings("`hol` runs alone (simulated time: its own table and files)".into()));
        }
        hol::main(args)?;
        return outcome_without_experiments(args, vec![args.out.join("hol.json"), args.out.join("hol-bql.svg")]);
    }
    if args.experiments.iter().any(|e| e == "lab") {
        // Real interfaces and external routers (root): its own runner and lab.json.
        if args.experiments.len() > 1 {
            return Err(BenchError::Settings("`lab` runs alone (it needs root and brings up namespaces)".into()));
        }
        lab::main(args)?;
        return outcome_without_experiments(args, vec![args.out.join("lab.json")]);
    }
    let settings = Settings::from_args(args)?;
    let (names, missing) = resolve(&args.experiments)?;
    let mut exps = Vec::new();
    for n in &names {
        let b = experiments::find(n).ok_or_else(|| BenchError::UnknownExperiment(n.to_string(), String::new()))?;
        exps.push(b()?);
    }
    if args.out.exists() && !args.out.is_dir() {
        return Err(BenchError::Settings(format!(
            "--out {}: exists and is not a directory (results go into a directory)",
            args.out.display()
        )));
    }
    std::fs::create_dir_all(&args.out).map_err(|e| BenchError::io(&args.out, e))?;
    let machine = machine::describe();
    if let Some(w) = machine::busy_warning(&machine) {
        eprintln!("{w}");
    }
    let mut results = Results {
        schema: 1,
        command: command_line(),
        started_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        machine,
        settings: settings.clone(),
        experiments: Vec::new(),
        not_implemented: missing.iter().map(|s| s.to_string()).collect(),
    };
    if !args.quiet {
        eprint!("{}", plan(&exps, &settings, &missing));
    }
    let use_hw = hw::probe().is_ok();
    let mut files = Vec::new();
    for e in &exps {
        let r = run_experiment(e, &settings, use_hw, args.quiet)?;
        crate::outln!("{}", report::terminal(&r));
        results.experiments.push(r);
        // Written after every experiment, so an interrupted bench keeps what it measured.
        files = write_outputs(&results, &exps, &args.out)?;
    }
    if exps.is_empty() {
        files = write_outputs(&results, &exps, &args.out)?;
    }
    if !missing.is_empty() {
        crate::outln!("not implemented yet: {}", missing.join(", "));
    }
    crate::outln!("wrote {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "));
    for e in &results.experiments {
        if let Some(h) = e.health.as_ref().filter(|h| !h.pass) {
            return Err(BenchError::Untrustworthy(h.failures.join("; ")));
        }
        for a in &e.arms {
            if let Some(first) = a.conservation_errors.first() {
                return Err(BenchError::Conservation {
                    experiment: e.name.to_string(),
                    arm: a.name.clone(),
                    n: a.conservation_errors.len(),
                    first: first.clone(),
                });
            }
        }
    }
    Ok(BenchOutcome { results, out: args.out.clone(), files })
}

fn plan(exps: &[Experiment], s: &Settings, missing: &[&str]) -> String {
    let mut total = 0.0;
    let mut text = String::new();
    for e in exps {
        let runs = s.runs_for(e);
        let per_run: f64 = e
            .arms
            .iter()
            .map(|a| match a.kind {
                // testpmd: EAL start-up, a zero first period, whole seconds.
                ArmKind::Testpmd { .. } => 3.5 + s.warmup + s.seconds.round().max(1.0),
                ArmKind::Sluice { .. } => s.warmup + s.seconds + 0.05,
            })
            .sum();
        let t = per_run * runs as f64;
        total += t;
        text.push_str(&format!("  {:<10} {} arms x {} runs, ~{:.0} s\n", e.name, e.arms.len(), runs, t));
    }
    let mut head = format!(
        "sluice bench: {} experiment(s), {:.2} s measured after {:.2} s warm-up per run, about {:.0} s in all\n",
        exps.len(),
        s.seconds,
        s.warmup,
        total
    );
    head.push_str(&text);
    if !missing.is_empty() {
        head.push_str(&format!("  not implemented yet: {}\n", missing.join(", ")));
    }
    head
}

fn progress_bar(quiet: bool, len_ms: u64, msg: String) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::with_draw_target(Some(len_ms), ProgressDrawTarget::stderr());
    if let Ok(st) = ProgressStyle::with_template("{msg:40} {bar:30} {elapsed:>4}") {
        b.set_style(st);
    }
    b.set_message(msg);
    b
}

/// Runs every arm of `e` `runs` times, interleaved, and analyses the samples.
pub fn run_experiment(e: &Experiment, s: &Settings, use_hw: bool, quiet: bool) -> Result<ExperimentResult, BenchError> {
    let t0 = Instant::now();
    let runs = s.runs_for(e);
    let k = e.arms.len();
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); k];
    let mut unavailable: Vec<Option<String>> = vec![None; k];
    let mut programs: Vec<Option<PathBuf>> = vec![None; k];
    for (i, arm) in e.arms.iter().enumerate() {
        if let ArmKind::Testpmd { program, .. } = &arm.kind {
            match testpmd::find_program(program) {
                Some(p) => programs[i] = Some(p),
                None => unavailable[i] = Some(format!("{program} not found on PATH")),
            }
        }
    }
    let warm = Duration::from_secs_f64(s.warmup);
    let meas = Duration::from_secs_f64(s.seconds);
    let total = runs * k;
    let mut order = Vec::new();
    let mut done = 0;
    for round in 0..runs {
        for j in 0..k {
            let i = (round + j) % k;
            let arm = &e.arms[i];
            done += 1;
            if unavailable[i].is_some() {
                continue;
            }
            let msg = format!("{} [{done}/{total}] {}", e.name, arm.name);
            let len_ms = match arm.kind {
                ArmKind::Testpmd { .. } => ((s.warmup + s.seconds.round().max(1.0) + 1.0) * 1000.0) as u64,
                ArmKind::Sluice { .. } => ((s.warmup + s.seconds) * 1000.0) as u64,
            };
            let bar = progress_bar(quiet, len_ms, msg.clone());
            let set_pos = |secs: f64| bar.set_position((secs * 1000.0) as u64);
            let res = match &arm.kind {
                ArmKind::Sluice { config, set } => {
                    let all: Vec<String> = s.set.iter().chain(set.iter()).cloned().collect();
                    let mut x = runner::run_sluice(config, &all, warm, meas, use_hw, set_pos)?;
                    if arm.rate_is_tx {
                        x.rate_by_tx();
                    }
                    Some(x)
                }
                ArmKind::Testpmd { args, .. } => {
                    let prog = programs[i].clone().unwrap_or_default();
                    match testpmd::run(&prog, args, s.warmup, s.seconds, set_pos) {
                        Ok(x) => Some(x),
                        Err(err) => {
                            unavailable[i] = Some(err.to_string());
                            None
                        }
                    }
                }
            };
            bar.finish_and_clear();
            match res {
                Some(mut x) => {
                    x.round = round;
                    x.order = order.len();
                    order.push(arm.name.clone());
                    if !quiet {
                        eprintln!("  {msg:<44} {:8.3} Mpps  {:7.1} ns/pkt", x.mpps, x.ns_per_packet);
                    }
                    samples[i].push(x);
                }
                None => {
                    if !quiet {
                        eprintln!("  {msg:<44} unavailable: {}", unavailable[i].as_deref().unwrap_or("?"));
                    }
                }
            }
        }
    }
    let arms: Vec<ArmResult> = e
        .arms
        .iter()
        .zip(samples)
        .zip(unavailable)
        .map(|((arm, smp), un)| {
            // An arm that ran some runs then failed keeps its samples, with a warning.
            let (un, warn) = match un {
                Some(u) if smp.is_empty() => (Some(u), None),
                Some(u) => (None, Some(format!("stopped after {} run(s): {u}", smp.len()))),
                None => (None, None),
            };
            analysis::arm_result(arm, &s.set, smp, un, warn)
        })
        .collect();
    let cap = e.effective_cap();
    let comparisons =
        e.comparisons.iter().filter_map(|c| Some(analysis::compare(&c.title, arms.get(c.a)?, arms.get(c.b)?, cap, c.ratio))).collect();
    let sweeps = analysis::sweep_fits(e, &arms);
    Ok(ExperimentResult {
        name: e.name,
        title: e.title.clone(),
        description: e.description.clone(),
        notes: e.notes.clone(),
        seed: e.seed.as_ref().map(|f| SeedJson { figure: f.clone(), change_pct: f.change_pct() }),
        cap_mpps: cap,
        runs,
        seconds: s.seconds,
        warmup: s.warmup,
        order,
        arms,
        comparisons,
        sweeps,
        wall_seconds: t0.elapsed().as_secs_f64(),
        health: None,
    })
    .map(|mut r| {
        if r.name == "selfcheck" {
            r.health = Some(experiments::selfcheck_health(&r));
        }
        r
    })
}

/// Writes results.json, REPORT.md and the plots; returns the files written.
pub fn write_outputs(r: &Results, _exps: &[Experiment], out: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    for e in &r.experiments {
        files.extend(plot::plots(e, out)?);
    }
    let json = out.join("results.json");
    let text = serde_json::to_string_pretty(r)?;
    std::fs::write(&json, text).map_err(|e| BenchError::io(&json, e))?;
    let md = out.join("REPORT.md");
    std::fs::write(&md, report::markdown(r, out)).map_err(|e| BenchError::io(&md, e))?;
    let mut all = vec![json, md];
    all.extend(files);
    Ok(all)
}

#[cfg(test)]
mod tests;
