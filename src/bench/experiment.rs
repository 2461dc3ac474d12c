//! What an experiment is: a named set of arms (configurations of the same lab) that are run
//! interleaved and compared. Experiments are registered by name in
//! [`crate::bench::experiments::registry`].

use crate::config::Config;
use crate::datapath::Pipeline;

/// How an arm's samples are produced.
#[derive(Debug, Clone)]
pub enum ArmKind {
    /// A sluice datapath built in-process from `config`, with `set` tunable overrides
    /// (`name=value`, applied after the command line's `--set`).
    Sluice { config: Box<Config>, set: Vec<String> },
    /// `dpdk-testpmd` run as an external process (io forwarding between two null vdevs);
    /// `args` are its arguments (the harness adds nothing but stdin from /dev/null).
    Testpmd { program: String, args: Vec<String> },
}

/// One configuration of an experiment.
#[derive(Debug, Clone)]
pub struct Arm {
    /// Short identifier (file names, JSON): `[a-z0-9-]`.
    pub name: String,
    /// Human label for tables.
    pub label: String,
    pub kind: ArmKind,
    /// Sweeps: this arm's position on the x axis (e.g. a tunable's value) ...
    pub x: Option<f64>,
    /// ... and the line it belongs to.
    pub series: Option<String>,
    /// The arm's rate is what it transmitted, not what it received (a sender that may
    /// receive more than its port can send, the excess dropped in the qdisc).
    pub rate_is_tx: bool,
}

impl Arm {
    pub fn sluice(name: &str, label: &str, config: Config, set: &[&str]) -> Arm {
        Arm {
            name: name.to_string(),
            label: label.to_string(),
            kind: ArmKind::Sluice { config: Box::new(config), set: set.iter().map(|s| s.to_string()).collect() },
            x: None,
            series: None,
            rate_is_tx: false,
        }
    }

    /// Rates this arm by what it transmitted.
    pub fn rated_by_tx(mut self) -> Arm {
        self.rate_is_tx = true;
        self
    }

    /// Places the arm on a sweep line.
    pub fn at(mut self, series: &str, x: f64) -> Arm {
        self.series = Some(series.to_string());
        self.x = Some(x);
        self
    }

    pub fn pipeline(&self) -> Option<Pipeline> {
        match &self.kind {
            ArmKind::Sluice { config, .. } => Some(config.pipeline),
            ArmKind::Testpmd { .. } => None,
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            ArmKind::Sluice { .. } => "sluice",
            ArmKind::Testpmd { .. } => "testpmd",
        }
    }
}

/// A comparison of two arms on packet rate: B relative to A.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub a: usize,
    pub b: usize,
    pub title: String,
    /// Also report the ratio B/A of the means with a 95% interval (io: sluice / testpmd).
    pub ratio: bool,
}

/// The kernel patch note's own figure, shown beside sluice's.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SeedFigure {
    /// File in seeds/.
    pub file: &'static str,
    /// The seed's setup, in a few words.
    pub setup: &'static str,
    pub baseline_label: &'static str,
    pub baseline: f64,
    pub result_label: &'static str,
    pub result: f64,
    /// The change as the seed states it, when that differs from result/baseline.
    pub stated_change_pct: Option<f64>,
    pub unit: &'static str,
    /// Index into `Experiment::comparisons` of the comparison that reproduces it.
    pub comparison: usize,
}

impl SeedFigure {
    pub fn change_pct(&self) -> f64 {
        100.0 * (self.result - self.baseline) / self.baseline
    }
}

/// A sweep: arms with `x` set are points of lines (one per `series`), plotted as
/// `metric` against `x_label`.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub x_label: String,
    /// "mpps", "ns_per_packet" (wall) or "cpu_ns_per_packet" (thread CPU time).
    pub metric: &'static str,
}

#[derive(Debug, Clone)]
pub struct Experiment {
    pub name: &'static str,
    pub title: String,
    /// What is measured and why, for the report (markdown).
    pub description: String,
    pub arms: Vec<Arm>,
    pub comparisons: Vec<Comparison>,
    pub seed: Option<SeedFigure>,
    /// Known upper bound of the packet rate in Mpps (a rate-limited generator): samples
    /// at the cap are censored and compared with the censored-normal estimate. `None`:
    /// derived from the arms' generator rates when every arm has one.
    pub cap: Option<f64>,
    /// Runs per arm unless `--runs` says otherwise.
    pub default_runs: usize,
    /// Runs per arm under `--quick` when the experiment must reach a verdict even then
    /// (the self-check: two runs cannot tell noise from a difference).
    pub quick_runs: Option<usize>,
    pub sweep: Option<Sweep>,
    /// Extra remarks for the report (caveats, like-with-like notes).
    pub notes: Vec<String>,
}

impl Experiment {
    /// The cap to use: explicit, else the sum of every generator's `rate_pps` (in Mpps)
    /// when every sluice arm is rate limited the same way.
    pub fn effective_cap(&self) -> Option<f64> {
        if self.cap.is_some() {
            return self.cap;
        }
        let mut caps = self.arms.iter().map(|a| match &a.kind {
            ArmKind::Sluice { config, .. } => {
                let gens: Vec<Option<f64>> = config.ports.iter().filter_map(|p| p.gen.as_ref().map(|g| g.rate_pps)).collect();
                if gens.is_empty() || gens.iter().any(|r| r.is_none()) {
                    None
                } else {
                    Some(gens.iter().flatten().sum::<f64>() / 1e6)
                }
            }
            ArmKind::Testpmd { .. } => None,
        });
        let first = caps.next()??;
        caps.all(|c| c.is_some_and(|c| (c - first).abs() <= 1e-9 * first.max(1.0))).then_some(first)
    }
}

/// Builds an experiment (arms are fresh configs each time).
pub type Builder = fn() -> Result<Experiment, crate::bench::BenchError>;
