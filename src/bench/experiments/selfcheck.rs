//! The harness's self-test: A against an identical A' (must show no significant
//! difference), A against A + `rx.extra_work` (a real per-packet cost: must show B slower),
//! and an `rx.extra_work` sweep (ns/packet must grow linearly with it).

use crate::bench::analysis::{ExperimentResult, Health};
use crate::bench::experiment::{Arm, Comparison, Experiment, Sweep};
use crate::bench::stats::{t_quantile, Summary};
use crate::bench::BenchError;
use crate::config;
use crate::datapath::Pipeline;

/// Iterations of the dependent LCG step per packet in arm B: on the development machine
/// (AMD EPYC VM) this roughly doubles the lab's per-packet cost.
pub const EXTRA_WORK: u32 = 64;

pub fn build() -> Result<Experiment, BenchError> {
    let lab = config::lab(Pipeline::L3fwd);
    let w = EXTRA_WORK;
    let b = format!("rx.extra_work={w}");
    let q = format!("rx.extra_work={}", w / 4);
    let h = format!("rx.extra_work={}", w / 2);
    Ok(Experiment {
        name: "selfcheck",
        title: "Harness self-check".into(),
        description: format!(
            "The built-in lab (l3fwd, IPv4+IPv6, 1024 flows, check sink) three ways: **A**, an identical **A'**, \
             and **B** = A with `rx.extra_work={w}` ({w} iterations of a dependent multiply-add chain per \
             received packet, a real and known cost). A valid harness finds B slower with a tiny p-value and \
             finds no significant difference between A and A'. Two more arms (extra_work {} and {}) make a \
             sweep: CPU ns/packet must grow linearly with extra_work (the slope is the cost of one iteration).",
            w / 4,
            w / 2
        ),
        arms: vec![
            Arm::sluice("a", "A (lab)", lab.clone(), &[]).at("extra_work", 0.0),
            Arm::sluice("a-prime", "A' (identical)", lab.clone(), &[]),
            Arm::sluice("b", &format!("B (extra_work {w})"), lab.clone(), &[b.as_str()]).at("extra_work", w as f64),
            Arm::sluice("w-quarter", &format!("extra_work {}", w / 4), lab.clone(), &[q.as_str()]).at("extra_work", (w / 4) as f64),
            Arm::sluice("w-half", &format!("extra_work {}", w / 2), lab, &[h.as_str()]).at("extra_work", (w / 2) as f64),
        ],
        comparisons: vec![
            Comparison { a: 0, b: 2, title: "A vs B (A + extra work)".into(), ratio: false },
            Comparison { a: 0, b: 1, title: "A vs A' (identical)".into(), ratio: false },
        ],
        seed: None,
        cap: None,
        default_runs: 6,
        quick_runs: Some(6),
        sweep: Some(Sweep { x_label: "rx.extra_work (LCG iterations per packet)".into(), metric: "cpu_ns_per_packet" }),
        notes: vec![],
    })
}

/// The smallest A' − A difference (in % of A) this machine must resolve for its figures to be
/// trusted: the seed experiments' effects are 10-40%.
pub const MAX_RESOLUTION_PCT: f64 = 10.0;
/// A significant A vs A' difference at least this large means the harness is biased.
pub const MAX_AA_BIAS_PCT: f64 = 3.0;

/// Half-width of the Welch 95% CI of mean(b) − mean(a), in % of mean(a). None without two
/// runs a side or without any spread (no interval: identical runs are quantised data, not
/// a perfect resolution).
fn ci_half_width_pct(a: &Summary, b: &Summary) -> Option<f64> {
    if a.n < 2 || b.n < 2 || a.mean <= 0.0 {
        return None;
    }
    let (va, vb) = (a.sd * a.sd / a.n as f64, b.sd * b.sd / b.n as f64);
    let se = (va + vb).sqrt();
    if se == 0.0 {
        return None;
    }
    let df = (va + vb).powi(2) / (va * va / (a.n - 1) as f64 + vb * vb / (b.n - 1) as f64);
    Some(100.0 * t_quantile(0.975, df)? * se / a.mean)
}

/// PASS when the harness finds B's known extra cost (significant, and B slower: more CPU
/// ns/packet, or fewer Mpps where the arms have no CPU time), finds no large
/// significant A vs A' difference, resolves differences of [`MAX_RESOLUTION_PCT`] between
/// identical arms, and the sweep rises. Judged on CPU ns/packet (immune to preemption, unlike
/// the packet rate) where the arms have it.
pub fn health(r: &ExperimentResult) -> Health {
    let mut failures = Vec::new();
    let arm = |name: &str| r.arms.iter().find(|a| a.name == name);
    let cmp = |b: &str| r.comparisons.iter().find(|c| c.a == "a" && c.b == b);
    // B's extra cost shows as more CPU ns/packet, or, without CPU times, as fewer Mpps: the
    // sign the change must have. A significant change the other way is no found cost.
    let ab = cmp("b").and_then(|c| c.cpu_ns_per_packet.as_ref().map(|v| (v, 1.0)).or(c.verdict.as_ref().map(|v| (v, -1.0))));
    match ab {
        Some((v, sign)) if v.significant && v.p < 0.01 && sign * v.diff_pct > 0.0 => {}
        Some((v, _)) if v.significant && v.p < 0.01 => failures.push(format!(
            "B came out faster than A despite its known extra cost (p = {:.3}, {:+.1}%): the harness mixes up or mismeasures arms",
            v.p, v.diff_pct
        )),
        Some((v, _)) => failures.push(format!("the known extra cost of B was not found (p = {:.3}, {:+.1}%)", v.p, v.diff_pct)),
        None => failures.push("no A vs B comparison".into()),
    }
    if let Some(v) = cmp("a-prime").and_then(|c| c.cpu_ns_per_packet.as_ref().or(c.verdict.as_ref())) {
        if v.p < 0.01 && v.diff_pct.abs() >= MAX_AA_BIAS_PCT {
            failures.push(format!("identical arms A and A' differ by {:+.1}% (p = {:.4})", v.diff_pct, v.p));
        }
    }
    let metric = |name: &str| arm(name).and_then(|a| a.cpu_ns_per_packet.as_ref().or(a.mpps.as_ref()));
    let resolution_pct = metric("a").zip(metric("a-prime")).and_then(|(a, b)| ci_half_width_pct(a, b));
    match resolution_pct {
        Some(w) if w <= MAX_RESOLUTION_PCT => {}
        Some(w) => failures.push(format!(
            "too noisy: A' − A is only known to ±{w:.1}% (95% CI), need ±{MAX_RESOLUTION_PCT}% (a quieter machine, or more --runs)"
        )),
        None => failures.push("cannot estimate the noise (need at least 2 runs per arm, not all identical)".into()),
    }
    if r.sweeps.first().is_some_and(|s| s.slope <= 0.0) {
        failures.push("the extra_work sweep does not rise".into());
    }
    Health { pass: failures.is_empty(), resolution_pct, failures }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::analysis::ComparisonResult;
    use crate::bench::stats::Verdict;

    fn summary(n: usize, mean: f64, sd: f64) -> Summary {
        Summary { n, mean, sd, sem: sd / (n as f64).sqrt(), ci95: (mean, mean), min: mean, median: mean, max: mean }
    }

    #[test]
    fn resolution_follows_the_noise() {
        let quiet = ci_half_width_pct(&summary(6, 100.0, 1.0), &summary(6, 100.0, 1.0)).unwrap();
        let noisy = ci_half_width_pct(&summary(6, 100.0, 20.0), &summary(6, 100.0, 20.0)).unwrap();
        assert!(quiet < 2.0 && noisy > MAX_RESOLUTION_PCT, "{quiet} {noisy}");
        assert!(ci_half_width_pct(&summary(1, 100.0, 0.0), &summary(6, 100.0, 1.0)).is_none());
        assert!(ci_half_width_pct(&summary(6, 100.0, 0.0), &summary(6, 100.0, 0.0)).is_none(), "no spread is no resolution");
    }

    /// A result with only the a → b comparison, judged on CPU ns/packet (`cpu`) or on the
    /// packet rate.
    fn result_with_ab(v: Verdict, cpu: bool) -> ExperimentResult {
        let c = ComparisonResult {
            title: "A vs B".into(),
            a: "a".into(),
            b: "b".into(),
            metric: "mpps",
            higher_is_better: true,
            alpha: 0.05,
            verdict: (!cpu).then(|| v.clone()),
            welch: None,
            mann_whitney: None,
            cpu_ns_per_packet: cpu.then_some(v),
            cpu_welch: None,
            censored: None,
            ratio: None,
            zoom_delta: vec![],
            note: None,
        };
        ExperimentResult {
            name: "selfcheck",
            title: String::new(),
            description: String::new(),
            notes: vec![],
            seed: None,
            cap_mpps: None,
            runs: 6,
            seconds: 1.0,
            warmup: 0.0,
            order: vec![],
            arms: vec![],
            comparisons: vec![c],
            sweeps: vec![],
            wall_seconds: 0.0,
            health: None,
        }
    }

    /// B carries a known extra cost: a significant difference the other way (B cheaper, or
    /// faster) is a broken harness, not a found cost.
    #[test]
    fn extra_cost_must_make_b_slower() {
        let verdict = |diff_pct: f64| Verdict { text: String::new(), significant: true, p: 1e-6, diff_pct, method: "Welch t-test" };
        let mentions_cost = |h: &Health| h.failures.iter().any(|f| f.contains("extra cost"));
        // CPU ns/packet: B must cost more.
        assert!(mentions_cost(&health(&result_with_ab(verdict(-20.0), true))));
        assert!(!mentions_cost(&health(&result_with_ab(verdict(20.0), true))));
        // Packet rate (no CPU time): B must be slower.
        assert!(mentions_cost(&health(&result_with_ab(verdict(20.0), false))));
        assert!(!mentions_cost(&health(&result_with_ab(verdict(-20.0), false))));
    }
}
