//! A description of the machine a benchmark ran on, for results.json and REPORT.md.

use serde::Serialize;
use std::process::{Command, Stdio};

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu_model: String,
    /// `/proc/cpuinfo`'s vendor, family, model and stepping (x86): the same model name can
    /// hide different cores (Zen 1 and Zen 5 both say "AMD EPYC" in some VMs).
    pub cpu_id: Option<CpuId>,
    /// `/proc/cpuinfo`'s "cpu MHz" of the first CPU (what the hypervisor reports).
    pub cpu_mhz: Option<f64>,
    /// Cache sizes by level and type as sysfs gives them for CPU 0 (e.g. "L1d 48K").
    pub caches: Vec<String>,
    pub logical_cpus: usize,
    pub kernel: String,
    pub tsc_ghz: f64,
    pub hostname: Option<String>,
    /// 1-, 5- and 15-minute load averages when the benchmark started: a busy machine makes
    /// noisy samples.
    pub loadavg_at_start: Option<[f64; 3]>,
    /// CPUs' worth of time other processes (and the hypervisor's steal) took in the quarter
    /// second before the benchmark, from `/proc/stat`: the load average lags by minutes,
    /// this says whether someone else is running now.
    pub others_busy_cpus_at_start: Option<f64>,
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

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CpuId {
    pub vendor: String,
    pub family: u32,
    pub model: u32,
    pub stepping: u32,
}

/// The value of the first `/proc/cpuinfo` line starting with `key`.
fn cpuinfo_field(cpuinfo: &str, key: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

fn cpu_id(cpuinfo: &str) -> Option<CpuId> {
    let num = |k: &str| cpuinfo_field(cpuinfo, k)?.parse::<u32>().ok();
    Some(CpuId {
        vendor: cpuinfo_field(cpuinfo, "vendor_id")?,
        family: num("cpu family")?,
        model: num("model")?,
        stepping: num("stepping")?,
    })
}

/// CPU 0's caches from sysfs: "L1d 48K", "L2 1024K", ...
fn caches() -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let (Some(level), Some(kind), Some(size)) =
            (read_trim(&format!("{dir}/level")), read_trim(&format!("{dir}/type")), read_trim(&format!("{dir}/size")))
        else {
            continue;
        };
        let kind = match kind.as_str() {
            "Data" => "d",
            "Instruction" => "i",
            _ => "",
        };
        out.push(format!("L{level}{kind} {size}"));
    }
    out
}

fn loadavg() -> Option<[f64; 3]> {
    let s = read_trim("/proc/loadavg")?;
    let mut it = s.split_whitespace().map(|x| x.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// Busy and total jiffies of the aggregate `cpu` line of `/proc/stat` (busy: user, nice,
/// system, irq, softirq, steal; idle and iowait are not busy).
fn cpu_jiffies(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if f.len() < 8 {
        return None;
    }
    // user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    let busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    Some((busy, busy + f[3] + f[4]))
}

/// CPUs' worth of busy time between two `/proc/stat` samples, on a machine of `cpus` CPUs.
fn busy_cpus(before: (u64, u64), after: (u64, u64), cpus: usize) -> Option<f64> {
    let total = after.1.checked_sub(before.1)?;
    let busy = after.0.checked_sub(before.0)?;
    (total > 0).then(|| busy as f64 / total as f64 * cpus as f64)
}

/// Samples how busy the machine is while this process sleeps for 250 ms.
fn others_busy_cpus() -> Option<f64> {
    let before = cpu_jiffies(&std::fs::read_to_string("/proc/stat").ok()?)?;
    std::thread::sleep(std::time::Duration::from_millis(250));
    let after = cpu_jiffies(&std::fs::read_to_string("/proc/stat").ok()?)?;
    busy_cpus(before, after, std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

/// A warning line when other processes held more than a quarter of a CPU as the benchmark
/// started: their time slices land in the samples as noise (and on few CPUs, as a bias).
pub fn busy_warning(m: &Machine) -> Option<String> {
    let b = m.others_busy_cpus_at_start?;
    (b > 0.25).then(|| {
        format!(
            "warning: other processes (or the hypervisor's steal) used {b:.2} of {} CPUs just before this benchmark; \
             expect noisy samples (quiet the machine, or run under `nice -n -20` with kernel.sched_autogroup_enabled=0)",
            m.logical_cpus
        )
    })
}

/// Describes this machine (runs `rustc --version` and `git` if present: a few ms each).
pub fn describe() -> Machine {
    let hw = match super::hw::probe() {
        Ok(()) => "available".to_string(),
        Err(e) => format!("unavailable: {e}"),
    };
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Machine {
        cpu_model: cpu_model(),
        cpu_id: cpu_id(&cpuinfo),
        cpu_mhz: cpuinfo_field(&cpuinfo, "cpu MHz").and_then(|v| v.parse().ok()),
        caches: caches(),
        logical_cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        kernel: read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
        tsc_ghz: crate::stats::tsc::tsc_hz() / 1e9,
        hostname: read_trim("/proc/sys/kernel/hostname"),
        loadavg_at_start: loadavg(),
        others_busy_cpus_at_start: others_busy_cpus(),
        sluice_version: env!("CARGO_PKG_VERSION"),
        rustc: cmd_output("rustc", &["--version"]),
        git_commit: cmd_output("git", &["rev-parse", "HEAD"]),
        git_dirty: cmd_output("git", &["rev-parse", "HEAD"])
            .and_then(|_| Command::new("git").args(["diff", "--quiet", "HEAD"]).stdin(Stdio::null()).stderr(Stdio::null()).status().ok())
            .map(|s| !s.success()),
        hw_counters: hw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_identity_is_read_from_cpuinfo() {
        let info = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nstepping\t: 2\ncpu MHz\t\t: 1996.2\n";
        assert_eq!(cpu_id(info), Some(CpuId { vendor: "AuthenticAMD".into(), family: 23, model: 1, stepping: 2 }));
        assert_eq!(cpuinfo_field(info, "cpu MHz").as_deref(), Some("1996.2"));
        assert_eq!(cpu_id("model name: x\n"), None);
    }

    #[test]
    fn busy_time_counts_steal_but_not_idle_or_iowait() {
        let a = cpu_jiffies("cpu  100 0 50 1000 10 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8\n").unwrap();
        // 250 more busy jiffies (user 100, system 50, steal 100) and 250 idle/iowait ones.
        let b = cpu_jiffies("cpu  200 0 100 1200 60 0 0 100 0 0\n").unwrap();
        assert_eq!(a, (150, 1160));
        assert_eq!(b, (400, 1660));
        assert_eq!(busy_cpus(a, b, 2), Some(1.0), "half of 2 CPUs");
        assert_eq!(busy_cpus(a, a, 2), None, "no time passed");
        assert_eq!(cpu_jiffies("cpu  1 2 3\n"), None);
        let mut m = describe();
        m.others_busy_cpus_at_start = Some(1.0);
        assert!(busy_warning(&m).is_some_and(|w| w.contains("1.00 of")));
        m.others_busy_cpus_at_start = Some(0.1);
        assert_eq!(busy_warning(&m), None);
    }
}
