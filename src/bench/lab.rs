//! `sluice bench lab` (root): the namespace lab (`sluice lab`) routed by (1) the kernel (a
//! router namespace), (2) sluice over AF_PACKET, (3) sluice over AF_XDP, and (4) where it is
//! installed `dpdk-testpmd` in io forwarding between `net_af_packet` vdevs on the same veths.
//! Per arm and run: 64-byte UDP from `sluice gen` on host a flat out, the rate host b's
//! interface receives (its rx_packets counter over the measured seconds), and an iperf3 TCP
//! run a → b (testpmd's io forwarding does not rewrite MACs, so it has no TCP figure). Arms
//! run interleaved round by round; every figure is also a ratio to the kernel's of the same
//! run set, with Welch's t-test.
//!
//! veth always builds an skb per frame, whichever side reads it (AF_XDP on veth is copy mode,
//! its XDP runs on the skb's data), so these figures measure the veth path as much as the
//! router: see BENCHMARKS.md for what moves on a NIC with zero-copy AF_XDP.

use super::stats::{summarize, welch_t_test, Summary, Welch};
use super::{BenchArgs, BenchError};
use crate::cli::lab;
use serde::Serialize;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const KERNEL_PREFIX: &str = "bnk";
const ROUTER_PREFIX: &str = "bnr";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabArm {
    Kernel,
    AfPacket,
    AfXdp,
    Testpmd,
}

impl LabArm {
    fn label(self) -> &'static str {
        match self {
            LabArm::Kernel => "kernel router (netns)",
            LabArm::AfPacket => "sluice over AF_PACKET",
            LabArm::AfXdp => "sluice over AF_XDP",
            LabArm::Testpmd => "dpdk-testpmd io, net_af_packet",
        }
    }
    fn prefix(self) -> &'static str {
        match self {
            LabArm::Kernel => KERNEL_PREFIX,
            _ => ROUTER_PREFIX,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LabArmResult {
    pub arm: LabArm,
    pub label: String,
    /// Forwarded packets per second at host b, one per run.
    pub pps: Vec<f64>,
    /// The rate host a's generator offered.
    pub offered_pps: Vec<f64>,
    /// iperf3 TCP a → b, Gbit/s (empty for testpmd).
    pub tcp_gbps: Vec<f64>,
    pub pps_summary: Option<Summary>,
    pub tcp_summary: Option<Summary>,
    /// Against the kernel arm: pps and TCP.
    pub pps_vs_kernel: Option<Welch>,
    pub tcp_vs_kernel: Option<Welch>,
    /// Why the arm did not run or stopped.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LabResults {
    pub command: String,
    pub machine: super::machine::Machine,
    pub runs: usize,
    pub seconds: f64,
    pub warmup: f64,
    pub arms: Vec<LabArmResult>,
}

/// A command in namespace `ns` (the lab's own runner), its error as text.
fn in_ns(ns: &str, args: &[&str]) -> Result<String, String> {
    lab::in_ns(ns, args).map_err(|e| e.to_string())
}

fn spawn_in_ns(ns: &str, args: &[&str]) -> Result<Child, String> {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", args[0]))
}

fn rx_packets(ns: &str) -> Result<u64, String> {
    in_ns(ns, &["cat", "/sys/class/net/eth0/statistics/rx_packets"])?.trim().parse().map_err(|e| format!("rx_packets: {e}"))
}

/// The router of one arm, stopped (SIGTERM, then kill) on drop.
struct RouterProc(Option<Child>);

impl Drop for RouterProc {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn start_router(arm: LabArm, testpmd: Option<&std::path::Path>) -> Result<RouterProc, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let child = match arm {
        LabArm::Kernel => return Ok(RouterProc(None)),
        LabArm::AfPacket | LabArm::AfXdp => {
            let kind = if arm == LabArm::AfPacket { "afpacket" } else { "afxdp" };
            let cfg = std::env::temp_dir().join(format!("sluice-bench-lab-{kind}.toml"));
            std::fs::write(&cfg, lab::config_toml(ROUTER_PREFIX, kind)).map_err(|e| e.to_string())?;
            Command::new(exe)
                .args(["run", "--quiet", "--seconds", "3600", "--config"])
                .arg(&cfg)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| e.to_string())?
        }
        LabArm::Testpmd => {
            let [a, b] = lab::SIDES;
            let p = testpmd.ok_or("dpdk-testpmd not found")?;
            Command::new(p)
                .args(["--no-huge", "-m", "512", "--no-shconf", "--no-pci", "-l", "0-1"])
                .arg(format!("--vdev=net_af_packet0,iface={}", a.router_if(ROUTER_PREFIX)))
                .arg(format!("--vdev=net_af_packet1,iface={}", b.router_if(ROUTER_PREFIX)))
                .args(["--", "--forward-mode=io", "--total-num-mbufs=16384", "--stats-period", "1"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())?
        }
    };
    Ok(RouterProc(Some(child)))
}

/// Waits until a ping a → b passes (the router up, ARP resolved); testpmd does not route, so
/// its arm only waits a moment.
fn wait_routed(arm: LabArm, r: &mut RouterProc) -> Result<(), String> {
    let ns = lab::SIDES[0].netns(arm.prefix());
    let deadline = Instant::now() + Duration::from_secs(15);
    if arm == LabArm::Testpmd {
        std::thread::sleep(Duration::from_secs(3));
        return Ok(());
    }
    loop {
        if let Some(c) = r.0.as_mut() {
            if let Ok(Some(s)) = c.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = c.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                return Err(format!("router exited ({s}): {}", err.trim()));
            }
        }
        if in_ns(&ns, &["ping", "-c", "1", "-W", "1", &lab::SIDES[1].host_v4()]).is_ok() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err("a cannot reach b through the router within 15 s".into());
        }
    }
}

/// One run of one arm: (forwarded pps at b, offered pps, TCP Gbit/s).
fn measure(arm: LabArm, seconds: f64, warmup: f64, testpmd: Option<&std::path::Path>) -> Result<(f64, f64, Option<f64>), String> {
    let mut r = start_router(arm, testpmd)?;
    wait_routed(arm, &mut r)?;
    let [a, b] = lab::SIDES;
    let (ns_a, ns_b) = (a.netns(arm.prefix()), b.netns(arm.prefix()));
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let exe = exe.to_str().ok_or("executable path is not UTF-8")?.to_string();
    let total = format!("{}", warmup + seconds + 0.5);
    let mac = crate::port::fmt_mac(&a.router_mac);
    let gen = spawn_in_ns(
        &ns_a,
        &[&exe, "gen", "--iface", "eth0", "--dst-mac", &mac, "--size", "60", "--flows", "64", "--seconds", &total, "--json"],
    )?;
    std::thread::sleep(Duration::from_secs_f64(warmup));
    let (c0, t0) = (rx_packets(&ns_b)?, Instant::now());
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let (c1, t1) = (rx_packets(&ns_b)?, Instant::now());
    let out = gen.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("sluice gen: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("sluice gen JSON: {e}"))?;
    let offered = rep["pps"].as_f64().unwrap_or(f64::NAN);
    let pps = (c1 - c0) as f64 / (t1 - t0).as_secs_f64();
    let tcp = if arm == LabArm::Testpmd {
        None
    } else {
        let mut server = spawn_in_ns(&ns_b, &["iperf3", "-s", "-1"])?;
        std::thread::sleep(Duration::from_millis(500));
        let secs = format!("{}", seconds.ceil().max(1.0));
        let res = in_ns(&ns_a, &["iperf3", "-c", &b.host_v4(), "-t", &secs, "-J"]);
        let _ = server.kill();
        let _ = server.wait();
        let j: serde_json::Value = serde_json::from_str(&res?).map_err(|e| format!("iperf3 JSON: {e}"))?;
        Some(j["end"]["sum_received"]["bits_per_second"].as_f64().unwrap_or(f64::NAN) / 1e9)
    };
    drop(r);
    Ok((pps, offered, tcp))
}

/// Runs the lab benchmark and writes `lab.json` into `--out`.
pub fn main(args: &BenchArgs) -> Result<LabResults, BenchError> {
    let settings = super::Settings::from_args(args)?;
    let runs = settings.runs.unwrap_or(6);
    let (seconds, warmup) = (settings.seconds, settings.warmup);
    let testpmd = super::testpmd::find_program("dpdk-testpmd");
    let mut arms = vec![LabArm::Kernel, LabArm::AfPacket, LabArm::AfXdp];
    if testpmd.is_some() {
        arms.push(LabArm::Testpmd);
    }
    let up = |prefix: &str, t: lab::Topology| {
        let _ = lab::down(prefix);
        lab::up(prefix, t).map_err(|e| BenchError::Settings(format!("lab up: {e}")))
    };
    up(KERNEL_PREFIX, lab::Topology::Kernel)?;
    let made = up(ROUTER_PREFIX, lab::Topology::Router);
    if let Err(e) = made {
        let _ = lab::down(KERNEL_PREFIX);
        return Err(e);
    }
    let mut results: Vec<LabArmResult> = arms
        .iter()
        .map(|&arm| LabArmResult {
            arm,
            label: arm.label().to_string(),
            pps: Vec::new(),
            offered_pps: Vec::new(),
            tcp_gbps: Vec::new(),
            pps_summary: None,
            tcp_summary: None,
            pps_vs_kernel: None,
            tcp_vs_kernel: None,
            error: None,
        })
        .collect();
    for round in 0..runs {
        for k in 0..arms.len() {
            let i = (round + k) % arms.len();
            if results[i].error.is_some() {
                continue;
            }
            if !args.quiet {
                eprintln!("lab run {}/{runs}: {}", round + 1, arms[i].label());
            }
            match measure(arms[i], seconds, warmup, testpmd.as_deref()) {
                Ok((pps, offered, tcp)) => {
                    results[i].pps.push(pps);
                    results[i].offered_pps.push(offered);
                    results[i].tcp_gbps.extend(tcp);
                }
                Err(e) => results[i].error = Some(format!("run {}: {e}", round + 1)),
            }
        }
    }
    let _ = lab::down(KERNEL_PREFIX);
    let _ = lab::down(ROUTER_PREFIX);
    let (kpps, ktcp) = (results[0].pps.clone(), results[0].tcp_gbps.clone());
    for r in results.iter_mut() {
        r.pps_summary = summarize(&r.pps);
        r.tcp_summary = summarize(&r.tcp_gbps);
        if r.arm != LabArm::Kernel {
            r.pps_vs_kernel = welch_t_test(&kpps, &r.pps);
            r.tcp_vs_kernel = welch_t_test(&ktcp, &r.tcp_gbps);
        }
    }
    let res = LabResults { command: super::command_line(), machine: super::machine::describe(), runs, seconds, warmup, arms: results };
    std::fs::create_dir_all(&args.out).map_err(|e| BenchError::io(&args.out, e))?;
    let path = args.out.join("lab.json");
    std::fs::write(&path, serde_json::to_string_pretty(&res)?).map_err(|e| BenchError::io(&path, e))?;
    crate::outln!("{}", table(&res));
    crate::outln!("wrote {}", path.display());
    Ok(res)
}

fn table(r: &LabResults) -> String {
    let mut s = format!("lab: {} runs of {} s (+{} s warm-up) per arm, {}\n", r.runs, r.seconds, r.warmup, r.machine.cpu_model);
    s += &format!("{:<34} {:>12} {:>16} {:>10} {:>16}\n", "arm", "Mpps at b", "vs kernel (p)", "TCP Gb/s", "vs kernel (p)");
    for a in &r.arms {
        let fmt = |x: &Option<Summary>| x.as_ref().map_or("-".to_string(), |s| format!("{:.3}±{:.3}", s.mean / 1e6, s.sd / 1e6));
        let fmt_tcp = |x: &Option<Summary>| x.as_ref().map_or("-".to_string(), |s| format!("{:.2}±{:.2}", s.mean, s.sd));
        let vs = |w: &Option<Welch>| {
            w.as_ref().map_or("-".to_string(), |w| {
                // No variance in either arm: no p (NaN), printed "-".
                let p = if w.p_two_sided.is_finite() { format!("{:.3}", w.p_two_sided) } else { "-".into() };
                format!("{:.2}× ({p})", w.mean_b / w.mean_a)
            })
        };
        s += &format!(
            "{:<34} {:>12} {:>16} {:>10} {:>16}\n",
            a.label,
            fmt(&a.pps_summary),
            vs(&a.pps_vs_kernel),
            fmt_tcp(&a.tcp_summary),
            vs(&a.tcp_vs_kernel)
        );
        if let Some(e) = &a.error {
            s += &format!("  {}: {e}\n", a.label);
        }
    }
    s
}
