//! From samples to results: per-arm summaries, the zoom-in (cost per stage), comparisons
//! with their statistics, sweep fits. Everything here is plain data that serialises into
//! results.json; the terminal table, REPORT.md and the plots are drawn from it.

use super::experiment::{Arm, ArmKind, Experiment};
use super::hw::HwReading;
use super::runner::Sample;
use super::stats::{self, MannWhitney, Summary, Verdict, Welch};
use crate::config::{Config, Tunables};
use crate::stats::tsc::cycles_to_ns;
use serde::Serialize;

/// Significance level of the verdicts.
pub const ALPHA: f64 = 0.05;

/// The zoom-in: one stage's cost per received packet.
#[derive(Debug, Clone, Serialize)]
pub struct ZoomRow {
    pub stage: String,
    /// ns of this stage per received packet.
    pub self_ns: f64,
    /// ns of this and every earlier stage per received packet.
    pub cum_ns: f64,
    /// Share of `ArmResult::zoom_total_ns` (wall ns per packet).
    pub pct: f64,
    /// Packets per call of the stage (vector size).
    pub vec_per_call: f64,
}

/// Hardware counters per received packet, pooled over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct HwPerPacket {
    pub instructions: f64,
    pub cycles: f64,
    pub ipc: f64,
    pub cache_misses: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ArmResult {
    pub name: String,
    pub label: String,
    /// "sluice" or "testpmd".
    pub kind: &'static str,
    pub pipeline: Option<crate::datapath::Pipeline>,
    /// The arm's own tunable overrides (after the command line's `--set`).
    pub overrides: Vec<String>,
    /// Every tunable's effective value.
    pub tunables: Option<Tunables>,
    pub config: Option<Config>,
    /// External arms: the command line.
    pub command: Option<Vec<String>>,
    pub x: Option<f64>,
    pub series: Option<String>,
    /// Why the arm could not run (testpmd missing or failing); then `samples` is empty.
    pub unavailable: Option<String>,
    /// Runs that failed after some succeeded (the arm keeps the samples it has).
    pub warning: Option<String>,
    pub samples: Vec<Sample>,
    pub mpps: Option<Summary>,
    pub ns_per_packet: Option<Summary>,
    pub gbps: Option<Summary>,
    pub cpu_util: Option<Summary>,
    pub cpu_ns_per_packet: Option<Summary>,
    /// Per-stage cost, pooled over the runs (stage cycles / received packets).
    pub zoom: Vec<ZoomRow>,
    /// What the zoom-in's percentages are of: wall ns per received packet.
    pub zoom_total_ns: Option<f64>,
    pub zoom_total_kind: &'static str,
    pub hw: Option<HwPerPacket>,
    pub total_drops: u64,
    pub conservation_errors: Vec<String>,
}

/// The ratio B / A with its 95% interval: per round when the arms' runs pair up, else of the
/// means the verdict compared (Fieller's).
#[derive(Debug, Clone, Serialize)]
pub struct RatioCi {
    pub ratio: f64,
    pub ci95: (f64, f64),
    /// How ratio and interval were estimated, for the report.
    pub method: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ComparisonResult {
    pub title: String,
    pub a: String,
    pub b: String,
    pub metric: &'static str,
    pub higher_is_better: bool,
    pub alpha: f64,
    pub verdict: Option<Verdict>,
    pub welch: Option<Welch>,
    pub mann_whitney: Option<MannWhitney>,
    /// The same comparison on CPU time per packet (the thread's user+sys time / packets,
    /// lower is better): unlike the packet rate it does not move when the thread is
    /// preempted, so on a shared machine it is the sharper check.
    pub cpu_ns_per_packet: Option<Verdict>,
    pub cpu_welch: Option<Welch>,
    /// Censored-normal (Cohen 1959) comparison, when a cap applies.
    pub censored: Option<Welch>,
    pub ratio: Option<RatioCi>,
    /// Per-stage difference B − A in ns/packet (self), for the zoom-in.
    pub zoom_delta: Vec<(String, f64, f64)>,
    /// Why there is no verdict, when there is none.
    pub note: Option<String>,
}

/// A least-squares line through one sweep series: metric = intercept + slope · x.
#[derive(Debug, Clone, Serialize)]
pub struct SweepFit {
    pub series: String,
    pub metric: &'static str,
    pub x_label: String,
    pub intercept: f64,
    pub slope: f64,
    pub r2: f64,
    /// (x, mean, ci95 low, ci95 high) per point.
    pub points: Vec<(f64, f64, f64, f64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeedJson {
    #[serde(flatten)]
    pub figure: crate::bench::experiment::SeedFigure,
    /// result / baseline − 1, in %.
    pub change_pct: f64,
}

impl std::ops::Deref for SeedJson {
    type Target = crate::bench::experiment::SeedFigure;
    fn deref(&self) -> &Self::Target {
        &self.figure
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ExperimentResult {
    pub name: &'static str,
    pub title: String,
    pub description: String,
    pub notes: Vec<String>,
    pub seed: Option<SeedJson>,
    pub cap_mpps: Option<f64>,
    pub runs: usize,
    pub seconds: f64,
    pub warmup: f64,
    /// Arm names in the order they ran.
    pub order: Vec<String>,
    pub arms: Vec<ArmResult>,
    pub comparisons: Vec<ComparisonResult>,
    pub sweeps: Vec<SweepFit>,
    pub wall_seconds: f64,
    /// The self-check's verdict on the harness and the machine (selfcheck only).
    pub health: Option<Health>,
}

/// Whether the figures of this machine can be trusted: the self-check's PASS or FAIL.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    pub pass: bool,
    /// Half-width of the 95% CI of A' − A in CPU ns/packet, as % of A: the smallest
    /// difference this machine resolves now.
    pub resolution_pct: Option<f64>,
    /// One line per failed condition (empty when it passes).
    pub failures: Vec<String>,
}

fn summary_of(samples: &[Sample], f: impl Fn(&Sample) -> Option<f64>) -> Option<Summary> {
    let v: Option<Vec<f64>> = samples.iter().map(&f).collect();
    v.and_then(|v| stats::summarize(&v))
}

/// Builds an arm's result from its samples.
pub fn arm_result(
    arm: &Arm,
    global_set: &[String],
    samples: Vec<Sample>,
    unavailable: Option<String>,
    warning: Option<String>,
) -> ArmResult {
    let (config, overrides, tunables, command) = match &arm.kind {
        ArmKind::Sluice { config, set } => {
            let all: Vec<String> = global_set.iter().chain(set.iter()).cloned().collect();
            (Some((**config).clone()), set.clone(), config.tunables(&all).ok(), None)
        }
        ArmKind::Testpmd { program, args } => {
            (None, Vec::new(), None, Some(std::iter::once(program.clone()).chain(args.iter().cloned()).collect()))
        }
    };
    let mut r = ArmResult {
        name: arm.name.clone(),
        label: arm.label.clone(),
        kind: arm.kind_name(),
        pipeline: arm.pipeline(),
        overrides,
        tunables,
        config,
        command,
        x: arm.x,
        series: arm.series.clone(),
        unavailable,
        warning,
        mpps: summary_of(&samples, |s| Some(s.mpps)),
        ns_per_packet: summary_of(&samples, |s| Some(s.ns_per_packet)),
        gbps: summary_of(&samples, |s| s.gbps),
        cpu_util: summary_of(&samples, |s| s.cpu_util),
        cpu_ns_per_packet: summary_of(&samples, |s| s.cpu_ns_per_packet),
        zoom: Vec::new(),
        zoom_total_ns: None,
        zoom_total_kind: "wall",
        hw: None,
        total_drops: samples.iter().map(|s| s.drops).sum(),
        conservation_errors: samples.iter().filter_map(|s| s.conservation_error.clone()).collect(),
        samples,
    };
    zoom_in(&mut r);
    r.hw = hw_per_packet(&r.samples);
    r
}

/// Pools the runs' stage cycles into the zoom-in table.
fn zoom_in(r: &mut ArmResult) {
    if let Some((rows, total, kind)) = zoom_rows(&r.samples) {
        r.zoom = rows;
        r.zoom_total_ns = Some(total);
        r.zoom_total_kind = kind;
    }
}

/// The zoom-in rows of `samples` (ns per packet by stage, then `other`), their total and
/// what the total is; None without packets or stage readings.
fn zoom_rows(samples: &[Sample]) -> Option<(Vec<ZoomRow>, f64, &'static str)> {
    let pk: u64 = samples.iter().map(|s| s.rx_packets).sum();
    if pk == 0 || samples.iter().all(|s| s.stages.is_empty()) {
        return None;
    }
    // The stage counters are TSC (wall-clock) readings, so their total is wall time too:
    // a run preempted inside a stage charges that stage; preemption elsewhere is `other`.
    // Each worker's clocks run through the whole run, side by side: the total is the wall
    // time of every worker (with two workers, 100% is twice the run's time).
    let secs: f64 = samples.iter().map(|s| s.seconds * f64::from(s.workers.max(1))).sum();
    let many = samples.iter().any(|s| s.workers > 1);
    let (total, kind) = (secs * 1e9 / pk as f64, if many { "wall × workers" } else { "wall" });
    let mut names: Vec<&'static str> = Vec::new();
    for s in samples {
        for st in &s.stages {
            if !names.contains(&st.stage) {
                names.push(st.stage);
            }
        }
    }
    names.sort_by_key(|n| stage_order(n));
    let mut cum = 0.0;
    let mut rows = Vec::new();
    for n in names {
        let (mut cycles, mut calls, mut packets) = (0u64, 0u64, 0u64);
        for s in samples {
            for st in s.stages.iter().filter(|st| st.stage == n) {
                cycles += st.cycles;
                calls += st.calls;
                packets += st.packets;
            }
        }
        let self_ns = cycles_to_ns(cycles as f64 / pk as f64);
        cum += self_ns;
        rows.push(ZoomRow {
            stage: n.to_string(),
            self_ns,
            cum_ns: cum,
            pct: 100.0 * self_ns / total,
            vec_per_call: packets as f64 / calls.max(1) as f64,
        });
    }
    let other = total - cum;
    rows.push(ZoomRow {
        stage: "other (poll loop, timing)".into(),
        self_ns: other,
        cum_ns: total,
        pct: 100.0 * other / total,
        vec_per_call: f64::NAN,
    });
    Some((rows, total, kind))
}

/// Position of a stage in the order a packet meets it. `rx-single` (single mode: l2 to tx
/// for one packet at a time, timed as one stage) sits where the l2 stage starts.
pub fn stage_order(name: &str) -> usize {
    use crate::stats::Stage;
    let order = [
        Stage::PortRx,
        Stage::XdpNative,
        Stage::Meta,
        Stage::XdpGeneric,
        Stage::Gro,
        Stage::Rps,
        Stage::RxSingle,
        Stage::L2,
        Stage::Ip,
        Stage::Route,
        Stage::Forward,
        Stage::Local,
        Stage::Tx,
        Stage::PortTx,
        Stage::Free,
    ];
    order
        .iter()
        .position(|s| s.name() == name)
        .or_else(|| Stage::ALL.iter().position(|s| s.name() == name).map(|p| p + order.len()))
        .unwrap_or(usize::MAX)
}

fn hw_per_packet(samples: &[Sample]) -> Option<HwPerPacket> {
    let mut t = HwReading::default();
    let mut pk = 0u64;
    for s in samples {
        let h = s.hw?;
        t.instructions += h.instructions;
        t.cycles += h.cycles;
        t.cache_misses += h.cache_misses;
        pk += s.rx_packets;
    }
    if pk == 0 || samples.is_empty() {
        return None;
    }
    let p = pk as f64;
    Some(HwPerPacket {
        instructions: t.instructions as f64 / p,
        cycles: t.cycles as f64 / p,
        ipc: if t.cycles > 0 { t.instructions as f64 / t.cycles as f64 } else { f64::NAN },
        cache_misses: t.cache_misses as f64 / p,
    })
}

/// Compares arm `b` with arm `a` on packet rate.
pub fn compare(title: &str, a: &ArmResult, b: &ArmResult, cap: Option<f64>, want_ratio: bool) -> ComparisonResult {
    let xa: Vec<f64> = a.samples.iter().map(|s| s.mpps).collect();
    let xb: Vec<f64> = b.samples.iter().map(|s| s.mpps).collect();
    let mut c = ComparisonResult {
        title: title.to_string(),
        a: a.name.clone(),
        b: b.name.clone(),
        metric: "mpps",
        higher_is_better: true,
        alpha: ALPHA,
        verdict: None,
        welch: None,
        mann_whitney: None,
        cpu_ns_per_packet: None,
        cpu_welch: None,
        censored: None,
        ratio: None,
        zoom_delta: Vec::new(),
        note: None,
    };
    if let Some(why) = a.unavailable.as_ref().or(b.unavailable.as_ref()) {
        c.note = Some(format!("not compared: {why}"));
        return c;
    }
    c.verdict = stats::compare(&xa, &xb, cap, true, ALPHA);
    c.welch = stats::welch_t_test(&xa, &xb);
    c.mann_whitney = stats::mann_whitney_u(&xa, &xb);
    c.censored = cap.and_then(|cap| stats::censored_compare(&xa, &xb, cap, stats::CAP_REL_TOL));
    let cpu = |r: &ArmResult| -> Option<Vec<f64>> { r.samples.iter().map(|s| s.cpu_ns_per_packet).collect() };
    if let (Some(ca), Some(cb)) = (cpu(a), cpu(b)) {
        c.cpu_ns_per_packet = stats::compare(&ca, &cb, None, false, ALPHA);
        c.cpu_welch = stats::welch_t_test(&ca, &cb);
    }
    if c.verdict.is_none() {
        c.note = Some(format!("no verdict: needs at least 2 runs per arm (have {}+{})", xa.len(), xb.len()));
    }
    if want_ratio {
        // At the cap, the ratio of the censored means the verdict compared; else paired by
        // round (a geometric mean of per-round ratios) when the runs pair up, else of the means.
        let censored = c.verdict.as_ref().is_some_and(|v| v.method == stats::METHOD_CENSORED);
        c.ratio = match cap.filter(|_| censored) {
            Some(cap) => censored_ratio_ci(&xa, &xb, cap),
            None => paired_ratio_ci(&a.samples, &b.samples).or_else(|| ratio_ci(a.mpps.as_ref(), b.mpps.as_ref())),
        };
        if c.verdict.as_ref().is_some_and(|v| v.method == stats::METHOD_WELCH_CAPPED) {
            // An arm all at the cap has no estimate above it: its runs only say "at least".
            if let Some(r) = c.ratio.as_mut() {
                r.method.push_str("; of capped values: a bound, not an estimate (an arm at the cap may be faster)");
            }
        }
    }
    if a.zoom.is_empty() || b.zoom.is_empty() {
        return c;
    }
    for rb in &b.zoom {
        let sa = a.zoom.iter().find(|r| r.stage == rb.stage).map(|r| r.self_ns).unwrap_or(0.0);
        c.zoom_delta.push((rb.stage.clone(), sa, rb.self_ns));
    }
    for ra in &a.zoom {
        if !b.zoom.iter().any(|r| r.stage == ra.stage) {
            c.zoom_delta.push((ra.stage.clone(), ra.self_ns, 0.0));
        }
    }
    c.zoom_delta.sort_by_key(|d| stage_order(&d.0));
    c
}

/// One arm's mean for [`fieller`]: its standard error and the degrees of freedom behind it.
struct MeanSe {
    mean: f64,
    se: f64,
    df: f64,
}

/// Fieller's 95% interval for the ratio of two independent means, B / A: the ρ with
/// (b̄ − ρā)² ≤ t² (se_b² + ρ² se_a²), t on the Welch–Satterthwaite df of the relative
/// variances (se/mean)². Returns (ratio, interval). None only when a mean is ≤ 0; with df < 1
/// on a side (fewer than two runs), or no spread in either arm, the interval is NaN (none
/// exists: zero spread in a few runs is no certainty), and when A's mean is not clearly above
/// zero it is (−∞, ∞) (Fieller's set is unbounded then); both print as "-".
fn fieller(a: &MeanSe, b: &MeanSe) -> Option<(f64, (f64, f64))> {
    if a.mean <= 0.0 || b.mean <= 0.0 {
        return None;
    }
    let r = b.mean / a.mean;
    let none = (f64::NAN, f64::NAN);
    if a.df < 1.0 || b.df < 1.0 {
        return Some((r, none));
    }
    let (ra, rb) = ((a.se / a.mean).powi(2), (b.se / b.mean).powi(2));
    if ra + rb == 0.0 {
        return Some((r, none));
    }
    let df = (ra + rb).powi(2) / (ra * ra / a.df + rb * rb / b.df);
    let t = stats::t_quantile(0.975, df)?;
    let (t2, va, vb) = (t * t, a.se * a.se, b.se * b.se);
    let denom = a.mean * a.mean - t2 * va;
    let disc = a.mean * a.mean * vb + b.mean * b.mean * va - t2 * va * vb;
    if denom <= 0.0 || disc < 0.0 {
        return Some((r, (f64::NEG_INFINITY, f64::INFINITY)));
    }
    let half = t * disc.sqrt();
    Some((r, ((a.mean * b.mean - half) / denom, (a.mean * b.mean + half) / denom)))
}

/// B / A of the plain means with Fieller's interval (see [`fieller`]).
fn ratio_ci(a: Option<&Summary>, b: Option<&Summary>) -> Option<RatioCi> {
    let (a, b) = (a?, b?);
    let side = |s: &Summary| MeanSe { mean: s.mean, se: s.sem, df: s.n as f64 - 1.0 };
    let (ratio, ci95) = fieller(&side(a), &side(b))?;
    Some(RatioCi { ratio, ci95, method: format!("Fieller, means of {}+{} runs", a.n, b.n) })
}

/// B / A from runs paired by interleaved round: machine drift hits both runs of a round, so
/// the per-round ratios r_i = b_i / a_i vary less than the arms' means do. The ratio is
/// exp(mean ln r_i) (the geometric mean of the r_i) with the t interval on n − 1 df of
/// mean ln r_i, exponentiated. As everywhere, no spread in the ln r_i gives no interval
/// (NaN, printed "-"), not a zero-width one. None unless both arms ran exactly the same
/// rounds, once each, at least 2, with rates > 0: then the caller uses the unpaired means.
fn paired_ratio_ci(a: &[Sample], b: &[Sample]) -> Option<RatioCi> {
    let rounds = |x: &[Sample]| {
        let mut r: Vec<usize> = x.iter().map(|s| s.round).collect();
        r.sort_unstable();
        r
    };
    let ra = rounds(a);
    if ra.len() < 2 || ra != rounds(b) || ra.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    let log_ratios: Option<Vec<f64>> = a
        .iter()
        .map(|sa| {
            let sb = b.iter().find(|sb| sb.round == sa.round)?;
            (sa.mpps > 0.0 && sb.mpps > 0.0).then(|| (sb.mpps / sa.mpps).ln())
        })
        .collect();
    let s = stats::summarize(&log_ratios?)?;
    Some(RatioCi { ratio: s.mean.exp(), ci95: (s.ci95.0.exp(), s.ci95.1.exp()), method: format!("paired, {} rounds", s.n) })
}

/// B / A of the censored-normal (Cohen 1959) means, the ones a censored verdict compares,
/// with Fieller's interval on their standard errors from the observed information and the
/// df of [`stats::censored_compare`] (uncensored runs − 1 a side, at least 1).
fn censored_ratio_ci(a: &[f64], b: &[f64], cap: f64) -> Option<RatioCi> {
    let ea = stats::censored_normal_mle(a, cap, stats::CAP_REL_TOL)?;
    let eb = stats::censored_normal_mle(b, cap, stats::CAP_REL_TOL)?;
    let side = |e: &stats::Censored| MeanSe { mean: e.mean, se: e.se_mean, df: ((e.n - e.n_censored) as f64 - 1.0).max(1.0) };
    let (ratio, ci95) = fieller(&side(&ea), &side(&eb))?;
    let method = format!("Fieller on the censored-normal means, {}+{} runs, {}+{} at cap", ea.n, eb.n, ea.n_censored, eb.n_censored);
    Some(RatioCi { ratio, ci95, method })
}

/// Least-squares fits of the sweep lines (over every sample, not the means).
pub fn sweep_fits(exp: &Experiment, arms: &[ArmResult]) -> Vec<SweepFit> {
    let Some(sw) = &exp.sweep else { return Vec::new() };
    let mut series: Vec<String> = Vec::new();
    for a in arms {
        if let (Some(s), Some(_)) = (&a.series, a.x) {
            if !series.contains(s) {
                series.push(s.clone());
            }
        }
    }
    // CPU time per packet falls back to wall time per packet when getrusage failed.
    let has_cpu = arms.iter().all(|a| a.samples.iter().all(|s| s.cpu_ns_per_packet.is_some()));
    let metric_name: &'static str = match sw.metric {
        "cpu_ns_per_packet" if !has_cpu => "ns_per_packet",
        m => m,
    };
    let metric = |s: &Sample| match metric_name {
        "mpps" => s.mpps,
        "cpu_ns_per_packet" => s.cpu_ns_per_packet.unwrap_or(f64::NAN),
        _ => s.ns_per_packet,
    };
    let summary = |a: &ArmResult| match metric_name {
        "mpps" => a.mpps.clone(),
        "cpu_ns_per_packet" => a.cpu_ns_per_packet.clone(),
        _ => a.ns_per_packet.clone(),
    };
    series
        .into_iter()
        .filter_map(|name| {
            let members: Vec<&ArmResult> = arms.iter().filter(|a| a.series.as_deref() == Some(name.as_str()) && a.x.is_some()).collect();
            let pts: Vec<(f64, f64)> =
                members.iter().flat_map(|a| a.samples.iter().map(move |s| (a.x.unwrap_or(0.0), metric(s)))).collect();
            let (intercept, slope, r2) = least_squares(&pts)?;
            let mut points: Vec<(f64, f64, f64, f64)> =
                members.iter().filter_map(|a| summary(a).map(|s| (a.x.unwrap_or(0.0), s.mean, s.ci95.0, s.ci95.1))).collect();
            points.sort_by(|p, q| p.0.total_cmp(&q.0));
            Some(SweepFit { series: name, metric: metric_name, x_label: sw.x_label.clone(), intercept, slope, r2, points })
        })
        .collect()
}

/// (intercept, slope, r²); None with fewer than 2 distinct x. r² is NaN (printed "-") when
/// every y is the same: there is no variance for the line to explain.
pub fn least_squares(pts: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return None;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = pts.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 || !sxx.is_finite() {
        return None;
    }
    let slope = sxy / sxx;
    let r2 = if syy > 0.0 { (sxy * sxy) / (sxx * syy) } else { f64::NAN };
    Some((my - slope * mx, slope, r2))
}

/// An arm of the lab whose runs measured `mpps`, run `i` in round `i`.
#[cfg(test)]
pub(crate) fn arm_with_mpps(name: &str, mpps: &[f64]) -> ArmResult {
    let samples = mpps.iter().enumerate().map(|(i, &m)| Sample { round: i, order: i, mpps: m, ..Sample::default() }).collect();
    let arm = Arm::sluice(name, name, crate::config::lab(crate::datapath::Pipeline::L3fwd), &[]);
    arm_result(&arm, &[], samples, None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    // stats.rs' seed-like fixtures: runs capped at 9.415 (line rate), 2 and 3 at the cap.
    const CAP: f64 = 9.415;
    const RUNS_A: [f64; 6] = [7.21, 8.05, 9.415, 8.62, 9.415, 7.88];
    const RUNS_B: [f64; 6] = [9.415, 9.40, 8.91, 9.415, 8.33, 9.02];

    /// With runs at the cap the verdict compares censored-normal means; the ratio must be of
    /// the same means (+7.96%), not of the plain means the cap biases (+7.71%).
    #[test]
    fn censored_comparison_ratio_uses_censored_means() {
        let (a, b) = (arm_with_mpps("a", &RUNS_A), arm_with_mpps("b", &RUNS_B));
        let c = compare("t", &a, &b, Some(CAP), true);
        assert_eq!(c.verdict.as_ref().unwrap().method, stats::METHOD_CENSORED);
        let ea = stats::censored_normal_mle(&RUNS_A, CAP, stats::CAP_REL_TOL).unwrap();
        let eb = stats::censored_normal_mle(&RUNS_B, CAP, stats::CAP_REL_TOL).unwrap();
        let r = c.ratio.unwrap();
        assert!((r.ratio - eb.mean / ea.mean).abs() < 1e-4, "{r:?}");
        assert!((100.0 * (r.ratio - 1.0) - c.verdict.unwrap().diff_pct).abs() < 1e-9);
        assert!(r.ci95.0 < r.ratio && r.ratio < r.ci95.1, "{r:?}");
    }

    /// Interleaved rounds pair the runs: the per-round ratio removes the drift both arms
    /// share. No spread in the per-round ratios gives no interval (as for zero variance
    /// anywhere); a little gives one narrower than the unpaired Fieller interval.
    #[test]
    fn ratio_pairs_runs_by_round() {
        let a = arm_with_mpps("a", &[10.0, 12.0, 14.0]);
        let r = compare("t", &a, &arm_with_mpps("b", &[5.0, 6.0, 7.0]), None, true).ratio.unwrap();
        assert!((r.ratio - 0.5).abs() < 1e-12, "{r:?}");
        assert!(r.ci95.0.is_nan() && r.ci95.1.is_nan() && r.method == "paired, 3 rounds", "{r:?}");

        let b = arm_with_mpps("b", &[5.0, 6.1, 6.9]);
        let paired = compare("t", &a, &b, None, true).ratio.unwrap();
        let unpaired = ratio_ci(a.mpps.as_ref(), b.mpps.as_ref()).unwrap();
        assert!(paired.ci95.0 < paired.ratio && paired.ratio < paired.ci95.1, "{paired:?}");
        assert!(paired.ci95.1 - paired.ci95.0 < 0.5 * (unpaired.ci95.1 - unpaired.ci95.0), "{paired:?} {unpaired:?}");
        // Rounds that do not pair (B missed round 2): the unpaired Fieller interval.
        let mut b2 = arm_with_mpps("b", &[5.0, 6.1, 6.9]);
        b2.samples[2].round = 3;
        let r = compare("t", &a, &b2, None, true).ratio.unwrap();
        assert!(r.method.starts_with("Fieller") && r.ci95 == unpaired.ci95, "{r:?}");
    }

    #[test]
    fn least_squares_line() {
        let (a, b, r2) = least_squares(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]).unwrap();
        assert!((a - 1.0).abs() < 1e-12 && (b - 2.0).abs() < 1e-12 && (r2 - 1.0).abs() < 1e-12);
        assert!(least_squares(&[(1.0, 1.0), (1.0, 2.0)]).is_none());
        assert!(least_squares(&[]).is_none());
    }

    /// A flat sweep explains no variance because there is none: r² is undefined, not 1.
    #[test]
    fn flat_sweep_has_no_r2() {
        let (a, b, r2) = least_squares(&[(0.0, 5.0), (1.0, 5.0), (2.0, 5.0)]).unwrap();
        assert_eq!((a, b), (5.0, 0.0));
        assert!(r2.is_nan(), "{r2}");
    }

    #[test]
    fn ratio_interval_brackets_ratio() {
        let a = stats::summarize(&[10.0, 11.0, 9.0]).unwrap();
        let b = stats::summarize(&[5.0, 5.5, 4.5]).unwrap();
        let r = ratio_ci(Some(&a), Some(&b)).unwrap();
        assert!((r.ratio - 0.5).abs() < 1e-12);
        assert!(r.ci95.0 < 0.5 && r.ci95.1 > 0.5);
    }

    /// Two workers' stage clocks run side by side: the zoom-in's total is both workers'
    /// time, so stages taking 90% of two workers' time leave a positive `other`.
    #[test]
    fn zoom_in_total_counts_every_worker() {
        let cycles = (crate::stats::tsc::tsc_hz() * 1.8) as u64; // 1.8 s of stage time
        let stage = crate::bench::runner::StageSample { stage: "l2", calls: 1000, packets: 1_000_000, cycles };
        let s = Sample { seconds: 1.0, workers: 2, rx_packets: 1_000_000, stages: vec![stage], ..Sample::default() };
        let (rows, total, kind) = zoom_rows(&[s]).unwrap();
        assert_eq!(kind, "wall × workers");
        assert!((total - 2000.0).abs() < 1e-6, "{total}");
        let other = rows.last().unwrap();
        assert!((other.self_ns - 200.0).abs() < 1.0 && other.pct > 9.0 && other.pct < 11.0, "{other:?}");
    }

    /// Fieller's interval (checked by hand: ā = 10, b̄ = 5, se 0.5 and 0.25, n = 4 and 4, so
    /// equal relative variances, df = 6, t = 2.4469): ρ = (ab ± t·sqrt(a²v_b + b²v_a −
    /// t²v_a v_b)) / (a² − t²v_a) = [0.4201, 0.5951], longer above 0.5 as a ratio's
    /// interval is; one run on a side gives no interval, a vague A an unbounded one.
    #[test]
    fn ratio_interval_is_fiellers_and_needs_two_runs_a_side() {
        let a = Summary { n: 4, mean: 10.0, sd: 1.0, sem: 0.5, ci95: (0.0, 0.0), min: 0.0, median: 10.0, max: 0.0 };
        let b = Summary { n: 4, mean: 5.0, sd: 0.5, sem: 0.25, ..a.clone() };
        let r = ratio_ci(Some(&a), Some(&b)).unwrap();
        assert!((r.ci95.0 - 0.4201).abs() < 5e-4 && (r.ci95.1 - 0.5951).abs() < 5e-4, "{:?}", r.ci95);
        assert!(r.ci95.1 - 0.5 > 0.5 - r.ci95.0 + 0.01, "not the symmetric delta interval");
        let one = Summary { n: 1, sd: 0.0, sem: 0.0, ..b.clone() };
        let r = ratio_ci(Some(&a), Some(&one)).unwrap();
        assert!(r.ratio == 0.5 && r.ci95.0.is_nan() && r.ci95.1.is_nan(), "one run: a ratio, no interval");
        let flat = |s: &Summary| Summary { sd: 0.0, sem: 0.0, ..s.clone() };
        let r = ratio_ci(Some(&flat(&a)), Some(&flat(&b))).unwrap();
        assert!(r.ratio == 0.5 && r.ci95.0.is_nan() && r.ci95.1.is_nan(), "no spread: no zero-width interval");
        // A's mean within t·se of zero: Fieller's set is unbounded.
        let vague = Summary { n: 2, sem: 6.0, ..a.clone() };
        let r = ratio_ci(Some(&vague), Some(&b)).unwrap();
        assert_eq!(r.ci95, (f64::NEG_INFINITY, f64::INFINITY));
    }
}
