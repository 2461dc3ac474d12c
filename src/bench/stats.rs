//! Small-sample statistics for `sluice bench`.
//!
//! Kernel patch notes typically report n = 5..10 runs per side and compare
//! them with a Welch t-test; throughput runs that hit line rate are
//! *censored* at the cap and need Cohen's (1959) maximum-likelihood
//! estimator instead of the plain mean (see the GRO_NORMAL batching seed).
//!
//! Conventions shared by every function here:
//! * Inputs are plain `&[f64]` samples. Any non-finite value (NaN, ±inf)
//!   makes the function return `None`: a NaN almost always means a broken
//!   measurement, and silently dropping it would change `n` behind the
//!   caller's back.
//! * Nothing panics. Where a quantity is undefined (too few samples, or
//!   intermediate overflow on absurd magnitudes) the function returns
//!   `None`. Zero variance (n too small, or quantised data) is returned as
//!   `Some` with the undefined parts NaN: no zero-width interval, no p of 0
//!   or 1, since zero spread in a few runs is no certainty. NaN prints "-"
//!   in the reports and null in results.json.
//! * `diff = b - a` ("B relative to A"), but `t` follows the
//!   `scipy.stats.ttest_ind(a, b)` sign convention, `(mean_a - mean_b) / se`,
//!   so reference values can be compared directly.

use serde::Serialize;
use statrs::function::beta::checked_beta_reg;
use statrs::function::erf::erfc;

/// Descriptive summary of one sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (divisor n - 1); 0 when n = 1.
    pub sd: f64,
    /// Standard error of the mean, sd / sqrt(n).
    pub sem: f64,
    /// Two-sided 95% confidence interval for the mean from Student's t with
    /// n - 1 degrees of freedom; NaN when n = 1 or sd = 0 (no interval).
    pub ci95: (f64, f64),
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

/// Result of a two-sample comparison of means (Welch, or the censored
/// variant from [`censored_compare`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Welch {
    /// `(mean_a - mean_b) / se` (scipy's sign convention).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    pub p_two_sided: f64,
    pub mean_a: f64,
    pub mean_b: f64,
    /// `mean_b - mean_a`.
    pub diff: f64,
    /// `100 * (mean_b - mean_a) / mean_a`; NaN when `mean_a == 0`.
    pub diff_pct: f64,
}

/// Mann–Whitney U test (Wilcoxon rank-sum) result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MannWhitney {
    /// U statistic of sample `a` (number of pairs with a > b, ties count
    /// 1/2), as returned by `scipy.stats.mannwhitneyu(a, b)`.
    pub u: f64,
    /// Normal-approximation z (tie- and continuity-corrected), positive when
    /// `a` tends to be larger. Reported even when `p_two_sided` is exact.
    pub z: f64,
    pub p_two_sided: f64,
    /// True when `p_two_sided` comes from the exact null distribution of U
    /// (no ties and both samples of size <= [`MWU_EXACT_MAX_N`]).
    pub exact: bool,
}

/// Normal mean/sd estimate of a sample right-censored at a known cap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Censored {
    pub n: usize,
    pub n_censored: usize,
    pub mean: f64,
    /// Estimated sd: the MLE when censored, else the sample sd (n - 1).
    pub sd: f64,
    /// Standard error of `mean`: from the observed Fisher information when
    /// censored, else sd / sqrt(n).
    pub se_mean: f64,
    /// [`CENSORED_METHOD_MLE`] or [`CENSORED_METHOD_NONE`].
    pub method: &'static str,
}

/// Human-readable outcome of [`compare`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub text: String,
    pub significant: bool,
    pub p: f64,
    pub diff_pct: f64,
    pub method: &'static str,
}

/// Largest per-sample size for which [`mann_whitney_u`] enumerates the exact
/// null distribution.
pub const MWU_EXACT_MAX_N: usize = 10;
/// Relative distance below the cap at which [`compare`] treats a sample as
/// having hit the cap.
pub const CAP_REL_TOL: f64 = 0.005;
pub const CENSORED_METHOD_MLE: &str = "cohen1959-mle";
pub const CENSORED_METHOD_NONE: &str = "uncensored";
pub const METHOD_WELCH: &str = "Welch t-test";
/// `compare` used [`censored_compare`] (p is approximate, see there).
pub const METHOD_CENSORED: &str = "Cohen-1959 censored MLE t-test, approx. df";
/// `compare` wanted the censored test but it was undefined (typically one
/// side entirely at the cap), so it ran Welch on the capped values.
pub const METHOD_WELCH_CAPPED: &str = "Welch t-test on capped values, censored MLE undefined";
/// Why [`compare`] has no p: every value of each arm is the same.
pub const NO_VARIANCE: &str = "no variance in either arm (n too small or quantised data)";

// ---------------------------------------------------------------------------
// Basic helpers
// ---------------------------------------------------------------------------

fn all_finite(x: &[f64]) -> bool {
    x.iter().all(|v| v.is_finite())
}

/// Mean of `x`; exactly the value when every value is the same, as the summed mean can be an
/// ulp off (three 0.1s) and would turn zero spread into a tiny variance and a "certain" test.
fn mean_of(x: &[f64]) -> f64 {
    match x.first() {
        Some(&v) if x.iter().all(|&y| y == v) => v,
        _ => x.iter().sum::<f64>() / x.len() as f64,
    }
}

/// Sum of squared deviations from `m` (two-pass, to avoid the cancellation
/// of the sum-of-squares formula on tightly clustered benchmark numbers).
fn ss_about(x: &[f64], m: f64) -> f64 {
    x.iter().map(|v| (v - m) * (v - m)).sum()
}

/// Two-sided p-value of Student's t: P(|T_df| >= |t|).
///
/// Uses the identity p = I_{df/(df+t^2)}(df/2, 1/2) through statrs'
/// *checked* incomplete beta so bad arguments give `None`, not a panic.
/// `df = +inf` falls back to the normal distribution.
pub fn t_two_sided_p(t: f64, df: f64) -> Option<f64> {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return None;
    }
    if t == 0.0 {
        return Some(1.0);
    }
    if t.is_infinite() {
        return Some(0.0);
    }
    if df.is_infinite() {
        return Some(erfc(t.abs() / std::f64::consts::SQRT_2).clamp(0.0, 1.0));
    }
    if df > T_LARGE_DF {
        // statrs' continued fraction loses ~df*1e-16 relative accuracy, so
        // use the normal tail plus the first two 1/df terms of the t-tail
        // expansion (Abramowitz & Stegun 26.7.5); the truncation error is
        // < 1e-13 for df > 1e6, below erfc's own ~1e-11 relative accuracy.
        let t = t.abs();
        if t > 40.0 {
            return Some(0.0); // < 1e-300 for any df > 1e6; avoids t^7 overflow
        }
        let (t2, phi) = (t * t, norm_pdf(t));
        let c1 = (t2 * t + t) / 4.0;
        let c2 = t * (((3.0 * t2 - 7.0) * t2 - 5.0) * t2 - 3.0) / 96.0;
        let p = erfc(t / std::f64::consts::SQRT_2) + 2.0 * phi * (c1 / df + c2 / (df * df));
        return Some(p.clamp(0.0, 1.0));
    }
    let h = df / (df + t * t);
    checked_beta_reg(df / 2.0, 0.5, h.clamp(0.0, 1.0)).ok().filter(|p| p.is_finite()).map(|p| p.clamp(0.0, 1.0))
}

/// Above this df [`t_two_sided_p`] switches to an asymptotic expansion.
const T_LARGE_DF: f64 = 1e6;

/// Quantile of Student's t with `df` degrees of freedom, `p` in (0, 1).
///
/// Solved by bisection on [`t_two_sided_p`] rather than statrs'
/// `inverse_cdf`, whose inverse-beta iteration has unbounded loops and was
/// seen to spin forever for df ~ 1e15.
pub fn t_quantile(p: f64, df: f64) -> Option<f64> {
    if !(p > 0.0 && p < 1.0) || df.is_nan() || df <= 0.0 {
        return None;
    }
    if p == 0.5 {
        return Some(0.0);
    }
    // Symmetry: solve for the upper-tail point with two-sided level 2*tail.
    let tail = p.min(1.0 - p);
    let target = 2.0 * tail;
    let excess = |t: f64| t_two_sided_p(t, df).map_or(f64::NAN, |q| q - target);
    let mut hi = 1.0;
    while excess(hi) > 0.0 {
        hi *= 2.0;
        if !hi.is_finite() {
            return None;
        }
    }
    if excess(hi).is_nan() {
        return None;
    }
    let q = bisect(0.0, hi, excess);
    let q = if p > 0.5 { q } else { -q };
    q.is_finite().then_some(q)
}

/// Standard normal upper tail 1 - Phi(z).
fn norm_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

fn norm_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// Beyond this z the hazard uses its asymptotic series: phi and 1 - Phi
/// both head towards underflow (~1e-196 at 30) and their ratio loses digits.
const HAZARD_ASYMPTOTIC_Z: f64 = 30.0;

/// Normal hazard (inverse Mills ratio) Q(z) = phi(z) / (1 - Phi(z)).
fn norm_hazard(z: f64) -> f64 {
    if z > HAZARD_ASYMPTOTIC_Z {
        // Q(z) = z + 1/z - 2/z^3 + 10/z^5 - 74/z^7 + ..., from inverting the
        // Mills-ratio series; relative truncation error at z = 30 ~ 1e-12.
        let y = 1.0 / (z * z);
        z * (1.0 + y * (1.0 + y * (-2.0 + y * (10.0 - 74.0 * y))))
    } else {
        norm_pdf(z) / norm_sf(z)
    }
}

/// ln(1 - Phi(z)), finite for every finite z. Only the likelihood cross-check
/// in the tests needs the likelihood value itself.
#[cfg(test)]
fn norm_log_sf(z: f64) -> f64 {
    if z > HAZARD_ASYMPTOTIC_Z {
        -0.5 * z * z - 0.5 * (2.0 * std::f64::consts::PI).ln() - norm_hazard(z).ln()
    } else {
        norm_sf(z).ln()
    }
}

// ---------------------------------------------------------------------------
// Descriptive summary
// ---------------------------------------------------------------------------

/// Mean, sd, t-based 95% CI and order statistics of `x`.
///
/// `None` for an empty or non-finite sample. n = 1 gives sd = sem = 0 and a `ci95` of NaN:
/// one run has no interval (a zero-width one would claim certainty); tables print "-",
/// JSON null, plots draw no whisker. The same for n >= 2 equal values (sd = 0): a few
/// identical runs mean too few runs or quantised data, not a mean known exactly.
pub fn summarize(x: &[f64]) -> Option<Summary> {
    if x.is_empty() || !all_finite(x) {
        return None;
    }
    let n = x.len();
    let mean = mean_of(x);
    let mut sorted = x.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 { sorted[n / 2] } else { 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]) };
    let (sd, sem, ci95) = if n == 1 {
        (0.0, 0.0, (f64::NAN, f64::NAN))
    } else {
        let sd = (ss_about(x, mean) / (n - 1) as f64).sqrt();
        let sem = sd / (n as f64).sqrt();
        let q = t_quantile(0.975, (n - 1) as f64)?;
        let ci95 = if sd > 0.0 { (mean - q * sem, mean + q * sem) } else { (f64::NAN, f64::NAN) };
        (sd, sem, ci95)
    };
    if !(mean.is_finite() && sd.is_finite()) {
        return None; // overflow on extreme magnitudes
    }
    Some(Summary { n, mean, sd, sem, ci95, min: sorted[0], median, max: sorted[n - 1] })
}

// ---------------------------------------------------------------------------
// Welch t-test
// ---------------------------------------------------------------------------

fn pct_change(from: f64, to: f64) -> f64 {
    if from == 0.0 {
        f64::NAN
    } else {
        100.0 * (to - from) / from
    }
}

/// Welch-type comparison from per-side means, squared standard errors and
/// degrees of freedom. Shared by the plain and the censored test.
///
/// Degenerate rule: when both standard errors are zero the t statistic is
/// 0/0 or ±x/0 and there is no test: t and p are NaN (see [`compare`]), and df
/// falls back to `df_if_degenerate` because Satterthwaite's formula is 0/0.
fn welch_from_parts(mean_a: f64, se2_a: f64, nu_a: f64, mean_b: f64, se2_b: f64, nu_b: f64, df_if_degenerate: f64) -> Option<Welch> {
    let se2 = se2_a + se2_b;
    let diff = mean_b - mean_a;
    if !(se2.is_finite() && diff.is_finite()) || se2 < 0.0 {
        return None;
    }
    let (t, df, p) = if se2 == 0.0 {
        (f64::NAN, df_if_degenerate, f64::NAN)
    } else {
        let t = (mean_a - mean_b) / se2.sqrt();
        // Satterthwaite df written with weights se2_i/se2 so tiny
        // variances do not underflow when squared.
        let (wa, wb) = (se2_a / se2, se2_b / se2);
        let df = 1.0 / (wa * wa / nu_a + wb * wb / nu_b);
        (t, df, t_two_sided_p(t, df)?)
    };
    Some(Welch { t, df, p_two_sided: p, mean_a, mean_b, diff, diff_pct: pct_change(mean_a, mean_b) })
}

/// Welch's unequal-variance t-test of `a` against `b`.
///
/// Matches `scipy.stats.ttest_ind(a, b, equal_var=False)`. `None` unless
/// both samples have at least 2 finite values (a variance is needed on each
/// side). If both variances are zero there is no test: t = p = NaN,
/// df = n_a + n_b - 2 (means and diff are still given).
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 || !all_finite(a) || !all_finite(b) {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (ma, mb) = (mean_of(a), mean_of(b));
    let va = ss_about(a, ma) / (na - 1.0);
    let vb = ss_about(b, mb) / (nb - 1.0);
    welch_from_parts(ma, va / na, na - 1.0, mb, vb / nb, nb - 1.0, na + nb - 2.0)
}

// ---------------------------------------------------------------------------
// Mann–Whitney U
// ---------------------------------------------------------------------------

/// Number of arrangements giving each value of U for sample sizes (m, n)
/// under H0, indexed by U = 0..=m*n (coefficients of the Gaussian binomial
/// [m+n choose m]_q).
///
/// Recurrence on whether the overall largest value belongs to `a` (then it
/// beats all n b's: U shifts by n) or to `b` (U unchanged):
/// c(m, n, u) = c(m-1, n, u-n) + c(m, n-1, u). Counts stay exact in f64 for
/// the sizes we allow (C(20, 10) = 184756).
fn mwu_null_counts(m: usize, n: usize) -> Vec<f64> {
    // row[j] holds c(i, j, .) for the current i.
    let mut row: Vec<Vec<f64>> = (0..=n).map(|_| vec![1.0]).collect();
    for i in 1..=m {
        let mut next: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        next.push(vec![1.0]); // c(i, 0, .) = [1]
        for j in 1..=n {
            let mut c = vec![0.0; i * j + 1];
            for (u, v) in row[j].iter().enumerate() {
                c[u + j] += v; // largest is from a: c(i-1, j, u-j)
            }
            for (u, v) in next[j - 1].iter().enumerate() {
                c[u] += v; // largest is from b: c(i, j-1, u)
            }
            next.push(c);
        }
        row = next;
    }
    row.pop().unwrap_or_default()
}

/// Mann–Whitney U test (two-sided).
///
/// Exact p (enumerated null distribution, as scipy's `method='exact'`) when
/// there are no ties and both n <= [`MWU_EXACT_MAX_N`]; otherwise the normal
/// approximation with tie and continuity correction (scipy's
/// `method='asymptotic'`). `None` if either sample is empty or non-finite.
/// If every value is tied the variance is zero: z = 0, p = 1.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    if a.is_empty() || b.is_empty() || !all_finite(a) || !all_finite(b) {
        return None;
    }
    let (na, nb) = (a.len(), b.len());
    let n = na + nb;
    let mut pooled: Vec<(f64, bool)> = a.iter().map(|&v| (v, true)).chain(b.iter().map(|&v| (v, false))).collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));

    // Mid-ranks for ties; tie_term = sum(t^3 - t) over tie groups.
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        let mid_rank = (i + 1 + j) as f64 / 2.0; // ranks i+1..=j
        let in_a = pooled[i..j].iter().filter(|p| p.1).count();
        rank_sum_a += mid_rank * in_a as f64;
        let t = (j - i) as f64;
        tie_term += t * t * t - t;
        i = j;
    }
    let (fa, fb, fnn) = (na as f64, nb as f64, n as f64);
    let u = rank_sum_a - fa * (fa + 1.0) / 2.0;

    let mu = fa * fb / 2.0;
    let var = fa * fb / 12.0 * ((fnn + 1.0) - tie_term / (fnn * (fnn - 1.0)));
    let d = u - mu;
    let (z, p_asym) = if var > 0.0 {
        // Continuity correction moves |d| half a step towards the mean but
        // never past it.
        let z = d.signum() * (d.abs() - 0.5).max(0.0) / var.sqrt();
        (z, erfc(z.abs() / std::f64::consts::SQRT_2).clamp(0.0, 1.0))
    } else {
        (0.0, 1.0)
    };

    if tie_term == 0.0 && na <= MWU_EXACT_MAX_N && nb <= MWU_EXACT_MAX_N {
        let counts = mwu_null_counts(na, nb);
        let total: f64 = counts.iter().sum();
        // Without ties U is an integer; the null is symmetric, so the
        // two-sided p is twice the tail below min(U, n_a n_b - U).
        let u_small = u.min(fa * fb - u).round().max(0.0) as usize;
        let tail: f64 = counts.iter().take(u_small + 1).sum();
        let p = (2.0 * tail / total).min(1.0);
        if p.is_finite() {
            return Some(MannWhitney { u, z, p_two_sided: p, exact: true });
        }
    }
    Some(MannWhitney { u, z, p_two_sided: p_asym, exact: false })
}

// ---------------------------------------------------------------------------
// Censored normal samples (Cohen 1959)
// ---------------------------------------------------------------------------

/// Value at or above which a sample counts as censored at `cap`:
/// `cap - |cap| * rel_tol`. `None` unless `cap` is finite and
/// `0 <= rel_tol < 1`.
pub fn censor_threshold(cap: f64, rel_tol: f64) -> Option<f64> {
    // `contains` is false for NaN, so NaN tolerances are rejected too.
    if !(cap.is_finite() && (0.0..1.0).contains(&rel_tol)) {
        return None;
    }
    Some(cap - cap.abs() * rel_tol)
}

/// Log-likelihood (up to a constant) of N(mu, sigma^2) for `uncensored`
/// observations plus `m` observations right-censored at `cap`.
#[cfg(test)]
fn censored_loglik(uncensored: &[f64], m: usize, cap: f64, mu: f64, sigma: f64) -> f64 {
    let k = uncensored.len() as f64;
    -k * sigma.ln() - ss_about(uncensored, mu) / (2.0 * sigma * sigma) + m as f64 * norm_log_sf((cap - mu) / sigma)
}

/// Observed Fisher information of (mu, sigma): minus the analytic Hessian of
/// the censored log-likelihood
///   l = -k ln s - S2/(2 s^2) + m ln(1 - Phi(xi)).
/// With xi = (cap - mu)/sigma, Q the hazard and
/// D = Q(Q - xi) its derivative:
///   l_mm = -k/s^2 - m D/s^2
///   l_ms = -2 S1/s^3 - m (D xi + Q)/s^2
///   l_ss = k/s^2 - 3 S2/s^4 - m (D xi^2 + 2 Q xi)/s^2
/// where S1 = sum(x - mu), S2 = sum((x - mu)^2) over uncensored x.
fn censored_info(uncensored: &[f64], m: usize, cap: f64, mu: f64, sigma: f64) -> [[f64; 2]; 2] {
    let k = uncensored.len() as f64;
    let m = m as f64;
    let s2 = sigma * sigma;
    let xi = (cap - mu) / sigma;
    let q = norm_hazard(xi);
    let d = q * (q - xi);
    let s1: f64 = uncensored.iter().map(|x| x - mu).sum();
    let ss = ss_about(uncensored, mu);
    let l_mm = -k / s2 - m * d / s2;
    let l_ms = -2.0 * s1 / (s2 * sigma) - m * (d * xi + q) / s2;
    let l_ss = k / s2 - 3.0 * ss / (s2 * s2) - m * (d * xi * xi + 2.0 * q * xi) / s2;
    [[-l_mm, -l_ms], [-l_ms, -l_ss]]
}

/// Bisection for a sign change of `f` on `[lo, hi]`; `f(lo)` and `f(hi)`
/// must differ in sign. Runs to floating-point resolution (bounded loop).
fn bisect(mut lo: f64, mut hi: f64, f: impl Fn(f64) -> f64) -> f64 {
    let lo_positive = f(lo) > 0.0;
    for _ in 0..300 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if (f(mid) > 0.0) == lo_positive {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Cohen's (1959) MLE for a singly right-censored normal sample: `u` are
/// the k uncensored values, `m >= 1` values are censored at `cap`.
/// Returns (mu, sigma).
///
/// Writing xi = (cap - mu)/sigma, r = m/k and w = r Q(xi), the likelihood
/// equations reduce to
///   mu = xbar + lambda (cap - xbar),  sigma^2 = s^2 + lambda (cap - xbar)^2,
///   lambda = w / (xi + w),
///   alpha := s^2/(cap - xbar)^2 = (1 - w xi - w^2) / (xi + w)^2,
/// with xbar, s^2 (divisor k) the uncensored mean and variance; this is
/// Cohen's auxiliary-function form, mean = xbar - lambda (xbar - cap).
/// The right-hand side of the alpha equation falls from +inf (where
/// xi + w = 0) to below zero, and the censored-normal likelihood has a
/// unique maximum (it is concave in Olsen's 1978 Tobit reparametrisation),
/// so bisection on xi finds the single root.
fn cohen_mle(u: &[f64], m: usize, cap: f64) -> Option<(f64, f64)> {
    let k = u.len();
    if k == 0 || m == 0 {
        return None;
    }
    let xbar = mean_of(u);
    let s2 = ss_about(u, xbar) / k as f64;
    let gap = cap - xbar;
    if !(gap > 0.0 && gap.is_finite() && s2.is_finite()) {
        return None;
    }
    let r = m as f64 / k as f64;
    let alpha = s2 / (gap * gap);

    // xi + w(xi) is increasing and positive at 0; find where it crosses 0.
    let g1 = |xi: f64| xi + r * norm_hazard(xi);
    let mut lo = -1.0;
    while g1(lo) >= 0.0 {
        lo *= 2.0;
        if lo < -1e6 {
            return None;
        }
    }
    let xi0 = bisect(lo, 0.0, g1);

    // f > 0 just above xi0 (alpha(xi) -> +inf) and < 0 for large xi.
    let f = |xi: f64| {
        let w = r * norm_hazard(xi);
        let g = xi + w;
        (1.0 - w * xi - w * w) - alpha * g * g
    };
    let mut hi = xi0.max(0.0) + 1.0;
    while f(hi) >= 0.0 {
        hi = 2.0 * hi + 1.0;
        if hi > 1e12 {
            return None;
        }
    }
    // Start just right of xi0 where xi + w > 0 for sure.
    // (g1 has slope >= 1, so a few tiny steps always suffice.)
    let mut start = xi0;
    for _ in 0..64 {
        if g1(start) > 0.0 {
            break;
        }
        start += 1e-12_f64.max(start.abs() * 1e-12);
    }
    let xi = bisect(start, hi, f);

    let w = r * norm_hazard(xi);
    let lambda = w / (xi + w);
    let mu = xbar + lambda * gap;
    let sigma = (s2 + lambda * gap * gap).sqrt();
    (mu.is_finite() && sigma.is_finite() && sigma > 0.0).then_some((mu, sigma))
}

/// Normal mean/sd of a sample right-censored at `cap`.
///
/// Samples with `x >= cap - |cap| * rel_tol` count as censored at `cap`
/// (values above the cap are treated the same way). With at least one
/// censored and one uncensored sample, returns Cohen's (1959) maximum-
/// likelihood estimate with `se_mean` from the observed Fisher information
/// (method [`CENSORED_METHOD_MLE`]). With no censored sample, returns the
/// plain mean, sample sd (n - 1; 0 for n = 1) and sd/sqrt(n) (method
/// [`CENSORED_METHOD_NONE`]).
///
/// `None` when: `x` is empty or non-finite, `cap`/`rel_tol` are invalid
/// (see [`censor_threshold`]), or *every* sample is censored — then the data
/// only say "mean is somewhere at or above the cap" and no finite estimate
/// exists; callers should report "all at cap" instead.
pub fn censored_normal_mle(x: &[f64], cap: f64, rel_tol: f64) -> Option<Censored> {
    if x.is_empty() || !all_finite(x) {
        return None;
    }
    let threshold = censor_threshold(cap, rel_tol)?;
    let uncensored: Vec<f64> = x.iter().copied().filter(|&v| v < threshold).collect();
    let n = x.len();
    let m = n - uncensored.len();
    if m == 0 {
        let mean = mean_of(x);
        let sd = if n > 1 { (ss_about(x, mean) / (n - 1) as f64).sqrt() } else { 0.0 };
        return (mean.is_finite() && sd.is_finite()).then(|| Censored {
            n,
            n_censored: 0,
            mean,
            sd,
            se_mean: sd / (n as f64).sqrt(),
            method: CENSORED_METHOD_NONE,
        });
    }
    if uncensored.is_empty() {
        return None;
    }
    let (mu, sigma) = cohen_mle(&uncensored, m, cap)?;
    let info = censored_info(&uncensored, m, cap, mu, sigma);
    let det = info[0][0] * info[1][1] - info[0][1] * info[1][0];
    // At a genuine maximum the information is positive definite.
    if !(det > 0.0 && info[0][0] > 0.0 && det.is_finite()) {
        return None;
    }
    let var_mu = info[1][1] / det;
    if !(var_mu > 0.0 && var_mu.is_finite()) {
        return None;
    }
    Some(Censored { n, n_censored: m, mean: mu, sd: sigma, se_mean: var_mu.sqrt(), method: CENSORED_METHOD_MLE })
}

/// Welch-style comparison of two samples censored at the same `cap`.
///
/// Uses [`censored_normal_mle`] means and standard errors:
/// t = (mean_a - mean_b) / sqrt(se_a^2 + se_b^2), referred to Student's t
/// with Welch–Satterthwaite df computed from se^2 with
/// nu = max(n_uncensored - 1, 1) per side. This df rule is a heuristic (the
/// seed's author says the same of his), so treat p as approximate; with no
/// censoring on either side it reproduces [`welch_t_test`] exactly.
///
/// `None` when either side has fewer than 2 samples or its estimate is
/// `None` (notably: every sample at the cap). Zero-se degenerate rule as in
/// [`welch_t_test`] (t = p = NaN), with df = n_a + n_b - 2.
pub fn censored_compare(a: &[f64], b: &[f64], cap: f64, rel_tol: f64) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let ea = censored_normal_mle(a, cap, rel_tol)?;
    let eb = censored_normal_mle(b, cap, rel_tol)?;
    let nu = |e: &Censored| ((e.n - e.n_censored) as f64 - 1.0).max(1.0);
    welch_from_parts(ea.mean, ea.se_mean * ea.se_mean, nu(&ea), eb.mean, eb.se_mean * eb.se_mean, nu(&eb), (a.len() + b.len()) as f64 - 2.0)
}

// ---------------------------------------------------------------------------
// Verdict
// ---------------------------------------------------------------------------

fn format_p(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".to_string()
    } else {
        format!("p = {p:.3}")
    }
}

/// Compare B against A and phrase the result.
///
/// When `cap` is given and any sample of `a` or `b` lies within
/// [`CAP_REL_TOL`] (0.5%) of it, uses [`censored_compare`]; if that is
/// impossible (a side entirely at the cap) it falls back to Welch on the
/// capped values and says so in `method`. Otherwise [`welch_t_test`].
/// `higher_is_better = false` is for costs (ns/packet, CPU%): there "lower"
/// is called better. `significant` is `p < alpha`. With no variance in either
/// arm the test is undefined: `p` is NaN, not significant, and the text says
/// "no test" and why ([`NO_VARIANCE`]).
///
/// `None` when the test itself is undefined (see [`welch_t_test`]) or
/// `alpha` is not in (0, 1).
pub fn compare(a: &[f64], b: &[f64], cap: Option<f64>, higher_is_better: bool, alpha: f64) -> Option<Verdict> {
    if !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    let threshold = cap.and_then(|c| censor_threshold(c, CAP_REL_TOL));
    let hits_cap = threshold.is_some_and(|t| a.iter().chain(b).any(|&v| v >= t));
    let (w, method) = match (cap, hits_cap) {
        (Some(c), true) => match censored_compare(a, b, c, CAP_REL_TOL) {
            Some(w) => (w, METHOD_CENSORED),
            None => (welch_t_test(a, b)?, METHOD_WELCH_CAPPED),
        },
        _ => (welch_t_test(a, b)?, METHOD_WELCH),
    };
    let p = w.p_two_sided;
    let significant = p < alpha;

    let p_part = if p.is_nan() { String::new() } else { format!("{}, ", format_p(p)) };
    let mut detail = format!("{p_part}{}, n = {}+{}", method, a.len(), b.len());
    if let Some(t) = threshold.filter(|_| hits_cap) {
        let at_cap = |x: &[f64]| x.iter().filter(|&&v| v >= t).count();
        detail.push_str(&format!(", {}+{} at cap", at_cap(a), at_cap(b)));
    }

    let size = if w.diff_pct.is_finite() {
        format!("{:.1}%", w.diff_pct.abs())
    } else {
        // A's mean is zero: a percentage is meaningless, give the absolute.
        format!("{} (absolute)", w.diff.abs())
    };
    let text = if p.is_nan() {
        let change = if w.diff == 0.0 {
            "equal means".to_string()
        } else {
            format!("B is {size} {} than A", if w.diff > 0.0 { "higher" } else { "lower" })
        };
        format!("no test, {NO_VARIANCE}: {change} ({detail})")
    } else if w.diff == 0.0 {
        format!("no significant difference: B and A have equal means ({detail})")
    } else {
        let higher = w.diff > 0.0;
        let direction = if higher { "higher" } else { "lower" };
        let quality = if higher == higher_is_better { "better" } else { "worse" };
        if significant {
            format!("B is {size} {direction} ({quality}) than A ({detail})")
        } else {
            format!("no significant difference: B is {size} {direction} than A ({detail})")
        }
    };
    Some(Verdict { text, significant, p, diff_pct: w.diff_pct, method })
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, tol: f64) {
        assert!((got - want).abs() <= tol, "got {got}, want {want} (tol {tol})");
    }

    // Reference values below were computed with Python 3 + scipy 1.17.1
    // (scripts reproduced in the comments) unless stated otherwise.

    #[test]
    fn summarize_reference() {
        // Textbook sample: mean 5, sd = sqrt(32/7); scipy:
        // np.std(x, ddof=1), stats.sem(x), stats.t.interval(0.95, 7, ...).
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        close(s.mean, 5.0, 1e-12);
        close(s.sd, 2.138089935299395, 1e-12);
        close(s.sem, 0.7559289460184544, 1e-12);
        close(s.ci95.0, 3.21251208176379, 1e-9);
        close(s.ci95.1, 6.787487918236209, 1e-9);
        assert_eq!((s.min, s.median, s.max), (2.0, 4.5, 9.0));

        let s = summarize(&[3.1, 1.7, 2.9]).unwrap();
        close(s.mean, 2.5666666666666664, 1e-12);
        close(s.sd, 0.7571877794400365, 1e-12);
        close(s.ci95.0, 0.6857079488831805, 1e-9);
        close(s.ci95.1, 4.447625384450152, 1e-9);
        assert_eq!((s.min, s.median, s.max), (1.7, 2.9, 3.1));
    }

    #[test]
    fn summarize_degenerate() {
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[1.0, f64::NAN]), None);
        let s = summarize(&[4.2]).unwrap();
        assert_eq!((s.sd, s.sem, s.mean), (0.0, 0.0, 4.2));
        assert!(s.ci95.0.is_nan() && s.ci95.1.is_nan(), "one run has no interval");
        let s = summarize(&[3.0, 3.0, 3.0]).unwrap();
        assert!(s.sd == 0.0 && s.ci95.0.is_nan() && s.ci95.1.is_nan(), "no spread, no interval");
    }

    #[test]
    fn t_distribution_helpers() {
        // scipy: 2*stats.t.sf(1.96, df) and stats.t.ppf(0.975, df).
        let refs = [
            (0.5, 0.4497229777383792, 164.55767348048818),
            (1.0, 0.3003428917760331, 12.706204736174694),
            (3.0, 0.14485220856485365, 3.1824463052837078),
            (10.0, 0.07843624024769971, 2.228138851986274),
            (1e3, 0.050273184955748736, 1.9623390808264083),
            (1e5, 0.04999856319430168, 1.9599877075346095),
            (1e7, 0.04999581802531423, 1.959964221767205),
            (1e10, 0.04999579032416977, 1.959963984777281),
            (1e15, 0.04999579029644117, 1.9599639845400563),
        ];
        for (df, p, q) in refs {
            close(t_two_sided_p(1.96, df).unwrap(), p, 1e-10);
            close(t_quantile(0.975, df).unwrap(), q, 1e-9 * q);
            close(t_quantile(0.025, df).unwrap(), -q, 1e-9 * q);
        }
        // Large-df expansion path, scipy 2*stats.t.sf(t, df). Tolerance
        // reflects statrs' erfc, which is good to ~5e-11 relative.
        let large = [
            (2e6, 0.5, 0.6170751324621768),
            (2e6, 1.96, 0.049995928940828764),
            (2e6, 4.0, 6.334475880911078e-05),
            (2e6, 8.0, 1.2448490695677534e-15),
            (2e6, 39.0, 0.0),
            (1e8, 0.5, 0.6170750785521784),
            (1e8, 1.96, 0.04999579306932808),
            (1e8, 4.0, 6.334252916852823e-05),
            (1e8, 8.0, 1.2442052508229478e-15),
        ];
        for (df, t, p) in large {
            close(t_two_sided_p(t, df).unwrap(), p, 1e-11);
            close(t_two_sided_p(-t, df).unwrap(), p, 1e-11);
        }
        // The second 1/df term (A&S 26.7.5: (3t^7 - 7t^5 - 5t^3 - 3t)/96) shows in the far
        // tail just above the switch; mpmath betainc(df/2, 1/2, 0, df/(df+t^2)).
        for (df, t, p) in [(1.1e6, 8.0, 1.2453868152650784e-15), (1.1e6, 6.0, 1.9737884839414584e-9)] {
            close(t_two_sided_p(t, df).unwrap(), p, p * 1e-9);
        }
        // mpmath: erfc(1.96/sqrt 2).
        close(t_two_sided_p(1.96, f64::INFINITY).unwrap(), 0.04999579029644087, 1e-11);
        assert_eq!(t_quantile(0.5, 4.0), Some(0.0));
        assert_eq!(t_two_sided_p(f64::NAN, 3.0), None);
        assert_eq!(t_two_sided_p(1.0, 0.0), None);
        assert_eq!(t_quantile(1.0, 3.0), None);
    }

    #[test]
    fn welch_wikipedia_examples() {
        // Wikipedia "Welch's t-test", example 1; scipy
        // ttest_ind(a, b, equal_var=False) -> t -2.455356398286006,
        // df 24.988529290231416, p 0.021378001462866992.
        let a = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4];
        let b = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4];
        let w = welch_t_test(&a, &b).unwrap();
        close(w.t, -2.455356398286006, 1e-9);
        close(w.df, 24.988529290231416, 1e-9);
        close(w.p_two_sided, 0.021378001462866992, 1e-9);
        close(w.diff, w.mean_b - w.mean_a, 0.0);
        close(w.diff_pct, 100.0 * (w.mean_b - w.mean_a) / w.mean_a, 1e-12);

        // Example 2 (unequal n): t -1.5654335235985037, df 9.904741248650831,
        // p 0.14884169660532817.
        let a2 = [17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8];
        let b2 = [21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8, 20.7, 21.7, 21.5, 22.5, 23.6, 21.5, 22.5, 23.5, 21.5, 21.8];
        let w = welch_t_test(&a2, &b2).unwrap();
        close(w.t, -1.5654335235985037, 1e-9);
        close(w.df, 9.904741248650831, 1e-9);
        close(w.p_two_sided, 0.14884169660532817, 1e-9);
    }

    #[test]
    fn welch_degenerate() {
        assert_eq!(welch_t_test(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(welch_t_test(&[1.0, f64::NAN], &[1.0, 2.0]), None);
        let w = welch_t_test(&[1.0, 1.0, 1.0], &[1.0, 1.0]).unwrap();
        assert!(w.t.is_nan() && w.p_two_sided.is_nan() && w.df == 3.0, "{w:?}");
        // One side constant: df collapses to the other side's n - 1.
        let w = welch_t_test(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        close(w.df, 3.0, 1e-12);
        let w = welch_t_test(&[0.0, 0.0], &[1.0, 2.0]).unwrap();
        assert!(w.diff_pct.is_nan());
    }

    /// Two constant samples: the t statistic is x/0, no test exists (n too small or the
    /// data quantised), so no p, no verdict and no zero-width interval.
    #[test]
    fn zero_variance_is_no_test() {
        let v = compare(&[5.0, 5.0], &[6.0, 6.0], None, true, 0.05).unwrap();
        assert!(!v.significant && v.p.is_nan(), "{v:?}");
        assert!(v.text.contains("no variance") && !v.text.contains("NaN"), "{}", v.text);
        assert_eq!(v.diff_pct, 20.0);
        let v = compare(&[5.0, 5.0], &[5.0, 5.0], None, true, 0.05).unwrap();
        assert!(!v.significant && v.p.is_nan() && v.text.contains("no variance"), "{v:?}");
        let w = welch_t_test(&[1.0, 1.0], &[2.0, 2.0]).unwrap();
        assert!(w.t.is_nan() && w.p_two_sided.is_nan(), "{w:?}");
        assert_eq!((w.mean_a, w.mean_b, w.diff_pct), (1.0, 2.0, 100.0));
        let s = summarize(&[10.0, 10.0]).unwrap();
        assert!(s.ci95.0.is_nan() && s.ci95.1.is_nan(), "{s:?}");
        // Summed, three 0.1s make a mean one ulp off 0.1: the spread must still be 0.
        let w = welch_t_test(&[0.1; 3], &[0.2; 3]).unwrap();
        assert!(w.p_two_sided.is_nan() && w.mean_a == 0.1, "{w:?}");
        let s = summarize(&[0.1; 3]).unwrap();
        assert!(s.sd == 0.0 && s.ci95.0.is_nan(), "{s:?}");
    }

    #[test]
    fn mwu_null_distribution_counts() {
        // Gaussian binomial [4 choose 2]_q = 1 + q + 2q^2 + q^3 + q^4.
        assert_eq!(mwu_null_counts(2, 2), vec![1.0, 1.0, 2.0, 1.0, 1.0]);
        let c = mwu_null_counts(10, 10);
        assert_eq!(c.len(), 101);
        assert_eq!(c.iter().sum::<f64>(), 184756.0); // C(20, 10)
    }

    #[test]
    fn mann_whitney_exact_and_asymptotic() {
        // scipy.stats.mannwhitneyu(a, b, method='exact') -> U 4, p 0.05194805194805195
        // (= 24/462); method='asymptotic' -> p 0.05523425371806383.
        let a = [1.1, 2.3, 3.5, 4.2, 5.9];
        let b = [2.0, 6.1, 7.4, 8.8, 9.5, 10.3];
        let r = mann_whitney_u(&a, &b).unwrap();
        assert!(r.exact);
        close(r.u, 4.0, 0.0);
        close(r.p_two_sided, 0.05194805194805195, 1e-12);
        let p_asym = erfc(r.z.abs() / std::f64::consts::SQRT_2);
        close(p_asym, 0.05523425371806383, 1e-9);
        assert!(r.z < 0.0);

        // 10 + 10, no ties: exact p 0.023230639329710537, U 20.
        let a = [0.8, 1.9, 2.4, 3.3, 4.1, 5.0, 5.2, 6.7, 7.3, 8.8];
        let b = [3.0, 4.4, 5.5, 6.0, 7.7, 8.1, 9.2, 9.9, 10.6, 11.4];
        let r = mann_whitney_u(&a, &b).unwrap();
        assert!(r.exact);
        close(r.u, 20.0, 0.0);
        close(r.p_two_sided, 0.023230639329710537, 1e-12);
        // Symmetry: swapping the samples gives U' = n_a n_b - U, same p.
        let r2 = mann_whitney_u(&b, &a).unwrap();
        close(r2.u, 80.0, 0.0);
        close(r2.p_two_sided, r.p_two_sided, 1e-15);
    }

    #[test]
    fn mann_whitney_ties_and_large() {
        // Ties force the asymptotic path; scipy asymptotic: U 6.5,
        // p 0.014107907274540636.
        let a = [1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 5.0];
        let b = [3.0, 4.0, 5.0, 5.0, 6.0, 7.0, 7.0, 8.0];
        let r = mann_whitney_u(&a, &b).unwrap();
        assert!(!r.exact);
        close(r.u, 6.5, 0.0);
        close(r.p_two_sided, 0.014107907274540636, 1e-9);

        // n = 12 + 14 (above the exact limit); scipy asymptotic: U 64,
        // p 0.31587447983048955.
        let a = [0.001, 0.299, -0.274, -0.891, -0.455, -0.992, 0.06, 1.34, -0.492, -0.62, 0.49, 0.357];
        let b = [0.905, -0.13, 0.771, 1.495, -0.544, 0.342, -1.101, -0.49, -1.042, 0.565, -0.467, 1.071, 0.957, 0.613];
        let r = mann_whitney_u(&a, &b).unwrap();
        assert!(!r.exact);
        close(r.u, 64.0, 0.0);
        close(r.p_two_sided, 0.31587447983048955, 1e-9);
    }

    #[test]
    fn mann_whitney_degenerate() {
        assert_eq!(mann_whitney_u(&[], &[1.0]), None);
        assert_eq!(mann_whitney_u(&[f64::NAN], &[1.0]), None);
        let r = mann_whitney_u(&[2.0, 2.0], &[2.0, 2.0, 2.0]).unwrap();
        assert_eq!((r.z, r.p_two_sided), (0.0, 1.0));
        let r = mann_whitney_u(&[1.0], &[2.0]).unwrap();
        assert!(r.exact);
        assert_eq!(r.p_two_sided, 1.0);
    }

    #[test]
    fn hazard_reference_values() {
        // mpmath (60 digits): npdf(z) / (erfc(z/sqrt 2)/2). z = 37 exercises
        // the asymptotic series, the others the erfc ratio.
        let refs = [
            (0.0, 0.7978845608028654), // sqrt(2/pi)
            (5.0, 5.186503967125842),
            (8.0, 8.121368112236113),
            (25.0, 25.039873012057563),
            (30.0, 30.033259667433677),
            (37.0, 37.02698768612699),
        ];
        for (z, q) in refs {
            close(norm_hazard(z), q, 1e-10 * q.max(1.0));
        }
        // ln(1 - Phi(z)) stays finite and continuous across the switch.
        close(norm_log_sf(30.0), norm_log_sf(30.0 + 1e-12), 1e-9);
        assert!(norm_log_sf(1e3).is_finite());
    }

    /// Derivative-free maximiser of the censored log-likelihood
    /// (Nelder–Mead on (mu, ln sigma)), independent of Cohen's equations.
    fn direct_mle(u: &[f64], m: usize, cap: f64, start: (f64, f64)) -> (f64, f64) {
        let f = |p: [f64; 2]| -censored_loglik(u, m, cap, p[0], p[1].exp());
        let (mu0, s0) = start;
        let mut simplex = [[mu0, s0.ln()], [mu0 + 0.5 * s0, s0.ln()], [mu0, s0.ln() + 0.5]];
        for _ in 0..5000 {
            simplex.sort_by(|a, b| f(*a).total_cmp(&f(*b)));
            let [best, mid, worst] = simplex;
            let spread = (f(worst) - f(best)).abs();
            let size = (worst[0] - best[0]).abs() + (worst[1] - best[1]).abs();
            if spread < 1e-15 && size < 1e-12 {
                break;
            }
            let c = [(best[0] + mid[0]) / 2.0, (best[1] + mid[1]) / 2.0];
            let at = |t: f64| [c[0] + t * (worst[0] - c[0]), c[1] + t * (worst[1] - c[1])];
            let refl = at(-1.0);
            if f(refl) < f(best) {
                let exp = at(-2.0);
                simplex[2] = if f(exp) < f(refl) { exp } else { refl };
            } else if f(refl) < f(mid) {
                simplex[2] = refl;
            } else {
                let contr = if f(refl) < f(worst) { at(-0.5) } else { at(0.5) };
                if f(contr) < f(worst).min(f(refl)) {
                    simplex[2] = contr;
                } else {
                    for v in simplex.iter_mut().skip(1) {
                        *v = [(v[0] + best[0]) / 2.0, (v[1] + best[1]) / 2.0];
                    }
                }
            }
        }
        simplex.sort_by(|a, b| f(*a).total_cmp(&f(*b)));
        (simplex[0][0], simplex[0][1].exp())
    }

    // Seed-like throughput runs capped at 9.415 Gbps line rate; 9.40 is
    // within 0.5% of the cap and so counts as censored too.
    const CAP: f64 = 9.415;
    const RUNS_A: [f64; 6] = [7.21, 8.05, 9.415, 8.62, 9.415, 7.88];
    const RUNS_B: [f64; 6] = [9.415, 9.40, 8.91, 9.415, 8.33, 9.02];

    #[test]
    fn censored_mle_matches_scipy() {
        // Reference: scipy.optimize.minimize (Nelder–Mead then BFGS) of the
        // censored log-likelihood sum(norm.logpdf(u, mu, s)) +
        // m * norm.logsf(cap, mu, s); se from the inverse of a central
        // finite-difference Hessian in (mu, sigma), step 1e-4.
        let a = censored_normal_mle(&RUNS_A, CAP, CAP_REL_TOL).unwrap();
        assert_eq!((a.n, a.n_censored, a.method), (6, 2, CENSORED_METHOD_MLE));
        close(a.mean, 8.661570844456298, 1e-7);
        close(a.sd, 1.147635394098528, 1e-7);
        close(a.se_mean, 0.5042295437247689, 1e-5);

        let b = censored_normal_mle(&RUNS_B, CAP, CAP_REL_TOL).unwrap();
        assert_eq!(b.n_censored, 3);
        close(b.mean, 9.35143655036633, 1e-7);
        close(b.sd, 0.6981168784569703, 1e-7);
        close(b.se_mean, 0.3499664242638561, 1e-5);

        // n = 20 draws of N(10, 2) (numpy seed 1959), capped at 11, 6 at cap:
        // mu 10.15963001446104, sigma 1.3398897217715728, se 0.31873568101272026.
        let x = [
            10.173, 10.782, 8.373, 9.867, 10.006, 10.822, 8.84, 11.0, 11.0, 9.589, 9.175, 11.0, 11.0, 9.305, 8.648, 11.0, 9.811, 11.0,
            9.04, 7.872,
        ];
        let e = censored_normal_mle(&x, 11.0, 0.0).unwrap();
        assert_eq!(e.n_censored, 6);
        close(e.mean, 10.15963001446104, 1e-7);
        close(e.sd, 1.3398897217715728, 1e-7);
        close(e.se_mean, 0.31873568101272026, 1e-5);

        // A single uncensored value (alpha = 0 branch):
        // mu 6.834157440990904, sigma 1.3543106861793235, se 1.3851366590678442.
        let e = censored_normal_mle(&[5.0, 6.0, 6.0, 6.0], 6.0, 0.0).unwrap();
        close(e.mean, 6.834157440990904, 1e-7);
        close(e.sd, 1.3543106861793235, 1e-7);
        close(e.se_mean, 1.3851366590678442, 1e-5);
    }

    #[test]
    fn cohen_agrees_with_direct_maximisation() {
        let cases: [(&[f64], f64); 3] = [(&RUNS_A, CAP), (&RUNS_B, CAP), (&[1.0, 2.5, 3.0, 3.2, 4.0, 4.0, 4.0, 4.0, 4.0], 4.0)];
        for (x, cap) in cases {
            let thr = censor_threshold(cap, CAP_REL_TOL).unwrap();
            let u: Vec<f64> = x.iter().copied().filter(|&v| v < thr).collect();
            let m = x.len() - u.len();
            let (mu_c, s_c) = cohen_mle(&u, m, cap).unwrap();
            let (mu_d, s_d) = direct_mle(&u, m, cap, (mean_of(x), 1.0));
            close(mu_c, mu_d, 1e-6);
            close(s_c, s_d, 1e-6);
            // Likelihood gradient vanishes at Cohen's solution (central diff).
            let h = 1e-6;
            let l = |mu: f64, s: f64| censored_loglik(&u, m, cap, mu, s);
            close((l(mu_c + h, s_c) - l(mu_c - h, s_c)) / (2.0 * h), 0.0, 1e-6);
            close((l(mu_c, s_c + h) - l(mu_c, s_c - h)) / (2.0 * h), 0.0, 1e-6);
            // Analytic information equals a numerical second derivative.
            let info = censored_info(&u, m, cap, mu_c, s_c);
            let h = 1e-4;
            let l0 = l(mu_c, s_c);
            let hmm = (l(mu_c + h, s_c) - 2.0 * l0 + l(mu_c - h, s_c)) / (h * h);
            let hss = (l(mu_c, s_c + h) - 2.0 * l0 + l(mu_c, s_c - h)) / (h * h);
            let hms = (l(mu_c + h, s_c + h) - l(mu_c + h, s_c - h) - l(mu_c - h, s_c + h) + l(mu_c - h, s_c - h)) / (4.0 * h * h);
            close(info[0][0], -hmm, 1e-4 * hmm.abs().max(1.0));
            close(info[1][1], -hss, 1e-4 * hss.abs().max(1.0));
            close(info[0][1], -hms, 1e-4 * hms.abs().max(1.0));
        }
    }

    #[test]
    fn censored_uncensored_and_degenerate() {
        let x = [7.0, 8.0, 9.0];
        let e = censored_normal_mle(&x, 10.0, CAP_REL_TOL).unwrap();
        assert_eq!(e.method, CENSORED_METHOD_NONE);
        assert_eq!((e.mean, e.sd), (8.0, 1.0));
        close(e.se_mean, 1.0 / 3f64.sqrt(), 1e-15);
        // All at the cap: no finite estimate.
        assert_eq!(censored_normal_mle(&[10.0, 10.0], 10.0, 0.0), None);
        assert_eq!(censored_normal_mle(&[], 10.0, 0.0), None);
        assert_eq!(censored_normal_mle(&[1.0], f64::NAN, 0.0), None);
        assert_eq!(censored_normal_mle(&[1.0], 2.0, -0.1), None);
        let e = censored_normal_mle(&[1.0], 2.0, 0.0).unwrap();
        assert_eq!((e.sd, e.se_mean), (0.0, 0.0));
        // Without censoring, censored_compare is exactly Welch.
        let (a, b) = ([1.0, 2.0, 3.5], [2.0, 3.0, 4.0, 6.0]);
        assert_eq!(censored_compare(&a, &b, 100.0, 0.0), welch_t_test(&a, &b));
    }

    #[test]
    fn censored_compare_reference() {
        // From the scipy estimates above: t = (mu_a - mu_b)/hypot(se_a, se_b),
        // df = se^4 / (se_a^4/3 + se_b^4/2) (uncensored 4 and 3),
        // p = 2 * stats.t.sf(|t|, df) -> t -1.1239654244824109,
        // df 4.885822418025961, p 0.31319689610794826, diff% 7.964671978080853.
        let w = censored_compare(&RUNS_A, &RUNS_B, CAP, CAP_REL_TOL).unwrap();
        close(w.t, -1.1239654244824109, 1e-4);
        close(w.df, 4.885822418025961, 1e-4);
        close(w.p_two_sided, 0.31319689610794826, 1e-4);
        close(w.diff_pct, 7.964671978080853, 1e-5);
    }

    #[test]
    fn compare_wording() {
        // CPU% (lower is better); Welch on these: B is lower, p well < 0.05.
        let a = [210.0, 212.5, 208.1, 211.9, 209.4, 210.3];
        let b = [181.0, 183.2, 180.4, 182.6, 179.9, 181.8];
        let v = compare(&a, &b, None, false, 0.05).unwrap();
        assert!(v.significant);
        assert_eq!(v.method, METHOD_WELCH);
        let pct = v.diff_pct.abs();
        assert_eq!(v.text, format!("B is {pct:.1}% lower (better) than A (p < 0.001, Welch t-test, n = 6+6)"));
        let v = compare(&a, &b, None, true, 0.05).unwrap();
        assert!(v.text.starts_with("B is") && v.text.contains("lower (worse)"));

        // Wikipedia example 2: p = 0.149, not significant.
        let a2 = [17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8];
        let b2 = [21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8];
        let w = welch_t_test(&a2, &b2).unwrap();
        let v = compare(&a2, &b2, None, true, 0.05).unwrap();
        assert!(!v.significant);
        assert_eq!(
            v.text,
            format!("no significant difference: B is {:.1}% higher than A (p = {:.3}, Welch t-test, n = 10+10)", w.diff_pct, w.p_two_sided)
        );

        // Capped throughput switches to the censored method automatically.
        let v = compare(&RUNS_A, &RUNS_B, Some(CAP), true, 0.05).unwrap();
        assert_eq!(v.method, METHOD_CENSORED);
        close(v.p, 0.31319689610794826, 1e-4);
        assert!(v.text.ends_with("n = 6+6, 2+3 at cap)"), "{}", v.text);
        // Cap given but never reached: plain Welch.
        let v = compare(&a2, &b2, Some(1000.0), true, 0.05).unwrap();
        assert_eq!(v.method, METHOD_WELCH);
        // One side entirely at line rate: censored fit impossible.
        let v = compare(&[9.415, 9.415, 9.415], &RUNS_B, Some(CAP), true, 0.05).unwrap();
        assert_eq!(v.method, METHOD_WELCH_CAPPED);
        assert_eq!(compare(&a, &b, None, true, f64::NAN), None);
        assert_eq!(compare(&a, &b, None, true, 1.0), None);
    }

    #[test]
    fn nothing_panics_on_edge_cases() {
        let big: Vec<f64> = (0..500).map(|i| (i as f64 * 0.37).sin()).collect();
        let edge: Vec<Vec<f64>> = vec![
            vec![],
            vec![1.0],
            vec![f64::NAN],
            vec![f64::INFINITY, 1.0],
            vec![1.0, 1.0],
            vec![0.0, 0.0, 0.0],
            vec![1e308, -1e308],
            vec![1e308, 1e308, 1e308],
            vec![-1.0, -2.0, -3.0],
            vec![1e-300, 2e-300],
            vec![5.0, 5.0, 5.0, 4.99999],
            big.clone(),
        ];
        let caps = [None, Some(0.0), Some(1.0), Some(-1.0), Some(5.0), Some(1e308), Some(f64::NAN), Some(f64::INFINITY)];
        for a in &edge {
            let _ = summarize(a);
            for b in &edge {
                let _ = welch_t_test(a, b);
                let _ = mann_whitney_u(a, b);
                for &cap in &caps {
                    for tol in [0.0, 0.005, 0.5, -1.0, f64::NAN] {
                        let c = cap.unwrap_or(1.0);
                        let _ = censored_normal_mle(a, c, tol);
                        let _ = censored_compare(a, b, c, tol);
                    }
                    for alpha in [0.05, 0.0, f64::NAN] {
                        let _ = compare(a, b, cap, true, alpha);
                        let _ = compare(a, b, cap, false, alpha);
                    }
                }
            }
        }
        for df in [1e-300, 0.5, 1e6, 1e15, f64::INFINITY] {
            let _ = t_quantile(0.975, df);
            let _ = t_two_sided_p(1e300, df);
        }
    }
}
