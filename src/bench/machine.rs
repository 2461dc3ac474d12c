//! A description of the machine a benchmark ran on, for results.json and REPORT.md.

use serde::Serialize;
use std::process::{Command, Stdio};

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu_model: String,
    pub logical_cpus: usize,
    pub kernel: String,
    pub tsc_ghz: f64,
    pub hostname: Option<String>,
    /// 1-, 5- and 15-minute load averages when the benchmark started: a busy machine makes
    /// noisy samples.
    pub loadavg_at_start: Option<[f64; 3]>,
    pub sluice_version: &'static str,
    /// `rustc --version` of the rustc on PATH (the binary may have been built by another).
    pub rustc: Option<String>,
    pub git_commit: Option<String>,
    pub git_dirty: Option<bool>,
    /// "available", or why hardware counters cannot be used.
    pub hw_counters: String,
}

fn cmd_output(prog: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(prog).args(args).stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name") || l.starts_with("Model") || l.starts_with("cpu model"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

fn loadavg() -> Option<[f64; 3]> {
    let s = read_trim("/proc/loadavg")?;
    let mut it = s.split_whitespace().map(|x| x.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// Describes this machine (runs `rustc --version` and `git` if present: a few ms each).
pub fn describe() -> Machine {
    let hw = match super::hw::probe() {
        Ok(()) => "available".to_string(),
        Err(e) => format!("unavailable: {e}"),
    };
    Machine {
        cpu_model: cpu_model(),
        logical_cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        kernel: read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
        tsc_ghz: crate::stats::tsc::tsc_hz() / 1e9,
        hostname: read_trim("/proc/sys/kernel/hostname"),
        loadavg_at_start: loadavg(),
        sluice_version: env!("CARGO_PKG_VERSION"),
        rustc: cmd_output("rustc", &["--version"]),
        git_commit: cmd_output("git", &["rev-parse", "HEAD"]),
        git_dirty: cmd_output("git", &["rev-parse", "HEAD"])
            .and_then(|_| Command::new("git").args(["diff", "--quiet", "HEAD"]).stdin(Stdio::null()).stderr(Stdio::null()).status().ok())
            .map(|s| !s.success()),
        hw_counters: hw,
    }
}
