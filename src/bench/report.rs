//! The terminal table and REPORT.md, both drawn from the serialisable results.

use super::analysis::{ArmResult, ComparisonResult, ExperimentResult};
use super::stats::{Welch, METHOD_CENSORED};
use super::Results;
use std::fmt::Write;
use std::path::Path;

fn f(x: f64, prec: usize) -> String {
    if x.is_finite() {
        format!("{x:.prec$}")
    } else {
        "-".into()
    }
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{x:+.1}%")
    } else {
        "-".into()
    }
}

fn p_text(p: f64) -> String {
    if !p.is_finite() {
        "-".into()
    } else if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

fn arm<'a>(e: &'a ExperimentResult, name: &str) -> Option<&'a ArmResult> {
    e.arms.iter().find(|a| a.name == name)
}

/// "A = x, B = y: <verdict>" or why there is none.
pub fn verdict_line(e: &ExperimentResult, c: &ComparisonResult) -> String {
    let la = arm(e, &c.a).map(|a| a.label.as_str()).unwrap_or(&c.a);
    let lb = arm(e, &c.b).map(|a| a.label.as_str()).unwrap_or(&c.b);
    let v = match (&c.verdict, &c.note) {
        (Some(v), _) => v.text.clone(),
        (None, Some(n)) => n.clone(),
        (None, None) => "no verdict".into(),
    };
    format!("{} [A: {la} | B: {lb}]: {v}", c.title)
}

/// The CPU-time check of a comparison, one line.
pub fn cpu_line(c: &ComparisonResult) -> Option<String> {
    let v = c.cpu_ns_per_packet.as_ref()?;
    let w = c.cpu_welch.as_ref()?;
    Some(format!("CPU ns/packet {} → {}: {}", f(w.mean_a, 1), f(w.mean_b, 1), v.text))
}

/// The seed's change: as stated, and as its numbers give when that differs.
fn seed_change(s: &super::analysis::SeedJson) -> String {
    match s.stated_change_pct {
        Some(st) if (st - s.change_pct).abs() >= 0.05 => {
            format!("{} as stated; {}/{} is {}", pct(st), s.result, s.baseline, pct(s.change_pct))
        }
        _ => pct(s.change_pct),
    }
}

/// The test behind a comparison's verdict: the censored-normal one when the runs hit the cap,
/// else Welch's. Its means, change and p are the verdict's.
fn verdict_test(c: &ComparisonResult) -> Option<&Welch> {
    match &c.verdict {
        Some(v) if v.method == METHOD_CENSORED => c.censored.as_ref(),
        _ => c.welch.as_ref(),
    }
}

/// Mean Mpps of A and B as the verdict compared them, and what they are.
fn verdict_means(c: &ComparisonResult, a: &ArmResult, b: &ArmResult) -> (String, String, &'static str) {
    if let Some(w) = c.censored.as_ref().filter(|_| c.verdict.as_ref().is_some_and(|v| v.method == METHOD_CENSORED)) {
        return (f(w.mean_a, 3), f(w.mean_b, 3), " (censored-normal estimates)");
    }
    let mean = |x: &ArmResult| x.mpps.as_ref().map(|m| f(m.mean, 3)).unwrap_or_else(|| "-".into());
    (mean(a), mean(b), "")
}

/// The seed's figure and sluice's, one line.
pub fn seed_line(e: &ExperimentResult) -> Option<String> {
    let s = e.seed.as_ref()?;
    let c = e.comparisons.get(s.comparison)?;
    let (a, b) = (arm(e, &c.a)?, arm(e, &c.b)?);
    let (ma, mb, what) = verdict_means(c, a, b);
    let mut line = format!(
        "seed ({}): {} {} → {} {} ({}); sluice: {ma} → {mb} Mpps{what}",
        s.file,
        s.baseline,
        s.unit,
        s.result,
        s.unit,
        seed_change(s),
    );
    if let Some(w) = verdict_test(c) {
        let _ = write!(line, " ({}, p = {}, n = {}+{})", pct(w.diff_pct), p_text(w.p_two_sided), a.samples.len(), b.samples.len());
    }
    Some(line)
}

/// The table printed after each experiment.
/// The self-check's verdict in one line (and one per failed condition).
fn health_text(e: &ExperimentResult) -> String {
    let Some(h) = &e.health else { return String::new() };
    let res = h.resolution_pct.map(|w| format!("identical arms resolved to ±{w:.1}%")).unwrap_or_default();
    let mut s = format!("selfcheck: {} {res}\n", if h.pass { "PASS" } else { "FAIL" });
    for f in &h.failures {
        s.push_str(&format!("  - {f}\n"));
    }
    s
}

pub fn terminal(e: &ExperimentResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\n== {}: {} — {} runs × {:.2} s per arm (warm-up {:.2} s) ==", e.name, e.title, e.runs, e.seconds, e.warmup);
    s.push_str(&health_text(e));
    let _ = writeln!(
        s,
        "{:<26}{:>3} {:>9} {:>8} {:>19} {:>9} {:>9} {:>8} {:>6} {:>7}",
        "arm", "n", "Mpps", "±sd", "95% CI", "ns/pkt", "CPUns/pk", "Gbit/s", "CPU%", "drops"
    );
    for a in &e.arms {
        if let Some(u) = &a.unavailable {
            let _ = writeln!(s, "{:<26}  unavailable: {u}", a.label);
            continue;
        }
        let m = a.mpps.as_ref();
        let _ = writeln!(
            s,
            "{:<26}{:>3} {:>9} {:>8} {:>19} {:>9} {:>9} {:>8} {:>6} {:>7}",
            a.label,
            a.samples.len(),
            m.map(|m| f(m.mean, 3)).unwrap_or_default(),
            m.map(|m| f(m.sd, 3)).unwrap_or_default(),
            m.map(|m| format!("[{}, {}]", f(m.ci95.0, 3), f(m.ci95.1, 3))).unwrap_or_default(),
            a.ns_per_packet.as_ref().map(|m| f(m.mean, 1)).unwrap_or_else(|| "-".into()),
            a.cpu_ns_per_packet.as_ref().map(|m| f(m.mean, 1)).unwrap_or_else(|| "-".into()),
            a.gbps.as_ref().map(|m| f(m.mean, 3)).unwrap_or_else(|| "-".into()),
            a.cpu_util.as_ref().map(|m| f(100.0 * m.mean, 1)).unwrap_or_else(|| "-".into()),
            a.total_drops,
        );
        if let Some(w) = &a.warning {
            let _ = writeln!(s, "  warning: {w}");
        }
    }
    for c in &e.comparisons {
        let _ = writeln!(s, "{}", verdict_line(e, c));
        let mut extra = Vec::new();
        if let Some(m) = &c.mann_whitney {
            extra.push(format!("Mann–Whitney U = {}, p = {}{}", f(m.u, 1), p_text(m.p_two_sided), if m.exact { " (exact)" } else { "" }));
        }
        if let Some(cw) = &c.censored {
            extra.push(format!("censored estimate: {} → {} Mpps, p = {}", f(cw.mean_a, 3), f(cw.mean_b, 3), p_text(cw.p_two_sided)));
        }
        if let Some(r) = &c.ratio {
            extra.push(format!("ratio B/A = {} [95% CI {}, {}] ({})", f(r.ratio, 3), f(r.ci95.0, 3), f(r.ci95.1, 3), r.method));
        }
        if !extra.is_empty() {
            let _ = writeln!(s, "    {}", extra.join("; "));
        }
        if let Some(l) = cpu_line(c) {
            let _ = writeln!(s, "    {l}");
        }
        if !c.zoom_delta.is_empty() {
            let parts: Vec<String> = c
                .zoom_delta
                .iter()
                .filter(|(_, a, b)| (b - a).abs() >= 0.05)
                .map(|(st, a, b)| format!("{st} {}→{}", f(*a, 1), f(*b, 1)))
                .collect();
            let _ = writeln!(s, "    ns/pkt by stage (A→B): {}", parts.join(", "));
        }
    }
    if let Some(l) = seed_line(e) {
        let _ = writeln!(s, "{l}");
    }
    for sw in &e.sweeps {
        let _ = writeln!(
            s,
            "sweep {}: {} = {} + {} × x (r² = {})",
            sw.series,
            super::plot::metric_desc(sw.metric),
            f(sw.intercept, 2),
            f(sw.slope, 3),
            f(sw.r2, 3)
        );
    }
    s
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

fn settings_of(a: &ArmResult) -> String {
    if let Some(cmd) = &a.command {
        return format!("`{}`", cmd.join(" "));
    }
    let mut parts = vec![];
    if let Some(p) = a.pipeline {
        parts.push(format!("{p:?}").to_lowercase());
    }
    if let Some(c) = &a.config {
        if let Some(g) = c.ports.first().and_then(|p| p.gen.as_ref()) {
            parts.push(format!("{} flows × burst {}", g.flows, g.burst));
        }
    }
    parts.extend(a.overrides.iter().map(|o| format!("`{o}`")));
    parts.join(", ")
}

/// The command that reproduces one experiment with the same settings.
fn experiment_command(r: &Results, e: &ExperimentResult) -> String {
    let mut c = format!("sluice bench {} --runs {} --seconds {} --warmup {}", e.name, e.runs, e.seconds, e.warmup);
    for s in &r.settings.set {
        let _ = write!(c, " --set {s}");
    }
    c
}

/// REPORT.md.
pub fn markdown(r: &Results, out: &Path) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let _ = writeln!(s, "# sluice bench report\n");
    let _ = writeln!(s, "Command: `{}`\n", r.command);
    let _ = writeln!(s, "| machine | |\n|---|---|");
    let _ = writeln!(s, "| CPU | {} ({} logical CPUs) |", md_escape(&m.cpu_model), m.logical_cpus);
    if let Some(id) = &m.cpu_id {
        let mhz = m.cpu_mhz.map(|f| format!(", {f:.0} MHz")).unwrap_or_default();
        let _ = writeln!(s, "| CPU id | {} family {} model {} stepping {}{mhz} |", md_escape(&id.vendor), id.family, id.model, id.stepping);
    }
    if !m.caches.is_empty() {
        let _ = writeln!(s, "| caches (CPU 0) | {} |", m.caches.join(", "));
    }
    let _ = writeln!(s, "| kernel | {} |", m.kernel);
    let _ = writeln!(s, "| TSC | {:.3} GHz |", m.tsc_ghz);
    if let Some(l) = m.loadavg_at_start {
        let _ = writeln!(s, "| load average at start | {:.2} {:.2} {:.2} |", l[0], l[1], l[2]);
    }
    if let Some(b) = m.others_busy_cpus_at_start {
        let _ = writeln!(s, "| other processes' CPU use just before (CPUs) | {b:.2} |");
    }
    let _ = writeln!(s, "| sluice | {} |", m.sluice_version);
    if let Some(c) = &m.git_commit {
        let _ = writeln!(s, "| git commit | {}{} |", c, if m.git_dirty == Some(true) { " (with uncommitted changes)" } else { "" });
    }
    if let Some(v) = &m.rustc {
        let _ = writeln!(s, "| rustc on PATH | {v} |");
    }
    let _ = writeln!(s, "| hardware counters | {} |", md_escape(&m.hw_counters));
    let _ = writeln!(
        s,
        "\nEach run builds a fresh datapath, warms up for {} s, zeroes its counters and measures for {} s. Arms are \
         interleaved: round r runs every arm once starting from arm r mod k (A B, B A, A B, ...), so drift of the \
         machine hits all arms alike. Verdicts: Welch's t-test (two-sided, α = {}), Mann–Whitney U as a check; \
         samples at a known rate cap use the censored-normal estimate (Cohen 1959).",
        r.settings.warmup,
        r.settings.seconds,
        super::analysis::ALPHA
    );
    if !r.settings.set.is_empty() {
        let _ = writeln!(
            s,
            "\nCommand-line tunables in every sluice arm: {}",
            r.settings.set.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ")
        );
    }
    if !r.not_implemented.is_empty() {
        let _ = writeln!(s, "\n**Not implemented yet:** {}", r.not_implemented.join(", "));
    }
    for e in &r.experiments {
        experiment_md(&mut s, r, e, out);
    }
    s
}

fn experiment_md(s: &mut String, r: &Results, e: &ExperimentResult, out: &Path) {
    let _ = writeln!(s, "\n## {} — {}\n", e.name, e.title);
    if e.health.is_some() {
        let _ = writeln!(s, "**{}**", health_text(e).trim_end().replace('\n', "  \n"));
    }
    let _ = writeln!(s, "{}\n", e.description);
    let _ = writeln!(s, "Reproduce: `{}`\n", experiment_command(r, e));

    if let Some(seed) = &e.seed {
        if let Some(c) = e.comparisons.get(seed.comparison) {
            let _ = writeln!(s, "### The seed's figure beside sluice's\n");
            let _ = writeln!(s, "| | baseline | result | change |\n|---|---|---|---|");
            let _ = writeln!(
                s,
                "| seed: {} ({}) | {} {} ({}) | {} {} ({}) | {} |",
                seed.file,
                seed.setup,
                seed.baseline,
                seed.unit,
                seed.baseline_label,
                seed.result,
                seed.unit,
                seed.result_label,
                seed_change(seed)
            );
            if let (Some(a), Some(b)) = (arm(e, &c.a), arm(e, &c.b)) {
                let cell = |x: &ArmResult, mean: String, what: &str| match (&x.mpps, what.is_empty()) {
                    (Some(m), true) => format!("{mean} ± {} Mpps ({})", f(m.sd, 3), x.label),
                    (Some(_), false) => format!("{mean} Mpps{what} ({})", x.label),
                    (None, _) => String::new(),
                };
                let (mean_a, mean_b, what) = verdict_means(c, a, b);
                let (ma, mb) = (cell(a, mean_a, what), cell(b, mean_b, what));
                let ch = verdict_test(c)
                    .map(|w| format!("{} (p = {}, n = {}+{})", pct(w.diff_pct), p_text(w.p_two_sided), a.samples.len(), b.samples.len()))
                    .unwrap_or_else(|| "-".into());
                let _ = writeln!(s, "| sluice: {} | {ma} | {mb} | {ch} |", c.title);
            }
            if let Some(l) = seed_line(e) {
                let _ = writeln!(s, "\nIn one line: {l}.");
            }
            let _ = writeln!(s);
        }
    }

    let _ = writeln!(s, "### Arms\n");
    let _ = writeln!(
        s,
        "| arm | settings | n | Mpps mean ± sd | 95% CI | ns/pkt (wall) | CPU ns/pkt | Gbit/s | CPU util | drops |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for a in &e.arms {
        if let Some(u) = &a.unavailable {
            let _ = writeln!(s, "| {} | {} | 0 | unavailable: {} | | | | | | |", a.label, settings_of(a), md_escape(u));
            continue;
        }
        let m = a.mpps.as_ref();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            a.label,
            settings_of(a),
            a.samples.len(),
            m.map(|m| format!("{} ± {}", f(m.mean, 3), f(m.sd, 3))).unwrap_or_default(),
            m.map(|m| format!("[{}, {}]", f(m.ci95.0, 3), f(m.ci95.1, 3))).unwrap_or_default(),
            a.ns_per_packet.as_ref().map(|m| f(m.mean, 1)).unwrap_or_else(|| "-".into()),
            a.cpu_ns_per_packet.as_ref().map(|m| f(m.mean, 1)).unwrap_or_else(|| "-".into()),
            a.gbps.as_ref().map(|m| f(m.mean, 3)).unwrap_or_else(|| "-".into()),
            a.cpu_util.as_ref().map(|m| format!("{}%", f(100.0 * m.mean, 1))).unwrap_or_else(|| "-".into()),
            a.total_drops,
        );
    }
    let warnings: Vec<String> = e.arms.iter().filter_map(|a| a.warning.as_ref().map(|w| format!("{}: {w}", a.label))).collect();
    for w in warnings {
        let _ = writeln!(s, "\n> warning: {}", md_escape(&w));
    }
    for a in e.arms.iter().filter(|a| a.samples.iter().any(|x| x.doorbells > 0)) {
        let (d, t): (u64, u64) = a.samples.iter().fold((0, 0), |(d, t), x| (d + x.doorbells, t + x.tx_packets));
        let _ = writeln!(s, "\nDoorbells per transmitted packet, {}: {} ({d} / {t}).", a.label, f(d as f64 / t.max(1) as f64, 4));
    }
    request_response_section(s, e);
    if let Some(cap) = e.cap_mpps {
        let _ = writeln!(s, "\nRate cap: {cap} Mpps (samples within 0.5% of it count as censored).");
    }
    let _ = writeln!(
        s,
        "\nGbit/s counts received frame bytes without FCS. Mpps, wall ns/pkt and CPU ns/pkt count the packets that entered processing (received minus backlog drops), or the transmitted ones for an arm rated by what it sends; CPU ns/pkt uses the user+sys time of every worker thread (getrusage RUSAGE_THREAD). Per-stage ns and hardware counters are per received packet, the counters of the first worker's thread only."
    );

    let _ = writeln!(s, "\n### Comparisons\n");
    for c in &e.comparisons {
        let _ = writeln!(s, "- **{}**", verdict_line(e, c));
        if let Some(w) = &c.welch {
            let _ = writeln!(
                s,
                "  - Welch: {} → {} Mpps, diff {} ({}), t = {}, df = {}, p = {}",
                f(w.mean_a, 3),
                f(w.mean_b, 3),
                f(w.diff, 3),
                pct(w.diff_pct),
                f(w.t, 2),
                f(w.df, 1),
                p_text(w.p_two_sided)
            );
        }
        if let Some(m) = &c.mann_whitney {
            let _ = writeln!(
                s,
                "  - Mann–Whitney: U = {}, z = {}, p = {}{}",
                f(m.u, 1),
                f(m.z, 2),
                p_text(m.p_two_sided),
                if m.exact { " (exact)" } else { "" }
            );
        }
        if let Some(l) = cpu_line(c) {
            let _ = writeln!(s, "  - CPU-time check (thread user+sys time per packet, unaffected by preemption): {l}");
        }
        if let Some(cw) = &c.censored {
            let _ = writeln!(
                s,
                "  - censored-normal (Cohen 1959): {} → {} Mpps ({}), p = {}",
                f(cw.mean_a, 3),
                f(cw.mean_b, 3),
                pct(cw.diff_pct),
                p_text(cw.p_two_sided)
            );
        }
        if let Some(rt) = &c.ratio {
            let (la, lb) = (arm(e, &c.a).map(|a| a.label.as_str()).unwrap_or("A"), arm(e, &c.b).map(|a| a.label.as_str()).unwrap_or("B"));
            let _ = writeln!(
                s,
                "  - ratio B/A ({lb} / {la}) of the rates: **{}** (95% CI {} – {}; {})",
                f(rt.ratio, 3),
                f(rt.ci95.0, 3),
                f(rt.ci95.1, 3),
                rt.method
            );
            if let Some(w) = &c.cpu_welch {
                if w.mean_b > 0.0 {
                    let _ = writeln!(
                        s,
                        "  - per CPU time: A's CPU ns/packet / B's = **{}** (packets per CPU-second, B over A)",
                        f(w.mean_a / w.mean_b, 3)
                    );
                }
            }
        }
    }

    let compared: Vec<&ComparisonResult> = e.comparisons.iter().filter(|c| !c.zoom_delta.is_empty()).collect();
    if !compared.is_empty() {
        let _ = writeln!(
            s,
            "\n### Zoom-in: cost per stage\n\nns per received packet from the per-stage TSC counters (pooled over the runs; \
             the clocks time a random 1 in `stats.clock_sample` polls, 16 by default, and scale, because a TSC read \
             costs about 10 ns here), cumulative in the order a packet meets the stages, and % of the wall time per packet; `other` is what no stage \
             timer covers (the poll loop, clock reads, and preemption between stages). In single mode `rx-single` times \
             l2 → tx for one packet at a time as one stage. The counters are wall-clock: a preempted run (CPU util well \
             below 100%) inflates them."
        );
    }
    for c in compared {
        let (Some(a), Some(b)) = (arm(e, &c.a), arm(e, &c.b)) else { continue };
        let _ = writeln!(s, "\n**{}** (A: {}; B: {})\n", c.title, a.label, b.label);
        let _ = writeln!(
            s,
            "| stage | A self ns | A cum ns | A % | B self ns | B cum ns | B % | Δ self (B−A) |\n|---|---|---|---|---|---|---|---|"
        );
        let mut names: Vec<&str> = b.zoom.iter().map(|z| z.stage.as_str()).collect();
        for z in &a.zoom {
            if !names.contains(&z.stage.as_str()) {
                names.push(z.stage.as_str());
            }
        }
        names.sort_by_key(|n| super::analysis::stage_order(n));
        for n in names {
            let za = a.zoom.iter().find(|z| z.stage == n);
            let zb = b.zoom.iter().find(|z| z.stage == n);
            let cell = |z: Option<&super::analysis::ZoomRow>| match z {
                Some(z) => format!("{} | {} | {}", f(z.self_ns, 1), f(z.cum_ns, 1), f(z.pct, 1)),
                None => "- | - | -".into(),
            };
            let d = zb.map(|z| z.self_ns).unwrap_or(0.0) - za.map(|z| z.self_ns).unwrap_or(0.0);
            let _ = writeln!(s, "| {n} | {} | {} | {:+.1} |", cell(za), cell(zb), d);
        }
        let tot = |x: &ArmResult| x.zoom_total_ns.map(|t| format!("{} ({})", f(t, 1), x.zoom_total_kind)).unwrap_or_else(|| "-".into());
        let _ = writeln!(s, "| **total** | {} | | | {} | | | |", tot(a), tot(b));
    }

    let hw_arms: Vec<&ArmResult> = e.arms.iter().filter(|a| a.hw.is_some()).collect();
    let _ = writeln!(s, "\n### Hardware counters\n");
    if hw_arms.is_empty() {
        if r.machine.hw_counters == "available" {
            let _ = writeln!(s, "No arm of this experiment measured hardware counters.");
        } else {
            let _ = writeln!(s, "hardware counters {} — no instructions/IPC/cache-miss figures.", r.machine.hw_counters);
        }
    } else {
        let _ = writeln!(s, "User-space counts of the datapath thread per received packet.\n");
        let _ = writeln!(s, "| arm | instructions/pkt | cycles/pkt | IPC | cache misses/pkt |\n|---|---|---|---|---|");
        for a in hw_arms {
            if let Some(h) = &a.hw {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} |",
                    a.label,
                    f(h.instructions, 1),
                    f(h.cycles, 1),
                    f(h.ipc, 2),
                    f(h.cache_misses, 3)
                );
            }
        }
    }

    for sw in &e.sweeps {
        let _ = writeln!(s, "\n### Sweep: {} vs {}\n", super::plot::metric_desc(sw.metric), sw.x_label);
        let _ = writeln!(
            s,
            "Least squares over every run: {} = {} + {} × x (r² = {}).\n",
            super::plot::metric_desc(sw.metric),
            f(sw.intercept, 2),
            f(sw.slope, 4),
            f(sw.r2, 4)
        );
        let _ = writeln!(s, "| x | mean | 95% CI |\n|---|---|---|");
        for (x, m, lo, hi) in &sw.points {
            let _ = writeln!(s, "| {x} | {} | [{}, {}] |", f(*m, 2), f(*lo, 2), f(*hi, 2));
        }
    }

    let _ = writeln!(s, "\n### Plots\n");
    for p in super::plot::plot_files(e) {
        if out.join(&p).exists() {
            let _ = writeln!(s, "![{p}]({p})");
        }
    }
    if !e.notes.is_empty() {
        let _ = writeln!(s, "\n### Notes\n");
        for n in &e.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    let ord: Vec<&str> = e.order.iter().map(String::as_str).collect();
    let _ = writeln!(s, "\nRun order: {} ({:.0} s in all).", ord.join(" "), e.wall_seconds);
}

/// One figure of a request/response sample.
type RrMetric = fn(&crate::bench::runner::RrSample) -> f64;

/// Closed-loop arms: transactions/s, latency percentiles, CPU and wake-ups per transaction,
/// and Welch t-tests between the compared arms on each.
fn request_response_section(s: &mut String, e: &ExperimentResult) {
    fn rr_of(a: &ArmResult) -> Vec<&crate::bench::runner::RrSample> {
        a.samples.iter().filter_map(|x| x.rr.as_ref()).collect()
    }
    let arms: Vec<&ArmResult> = e.arms.iter().filter(|a| !rr_of(a).is_empty()).collect();
    if arms.is_empty() {
        return;
    }
    let ms = |v: &[f64], prec: usize| match crate::bench::stats::summarize(v) {
        Some(m) => format!("{} ± {}", f(m.mean, prec), f(m.sd, prec)),
        None => "-".into(),
    };
    let _ = writeln!(s, "\n#### Request/response (closed loop)\n");
    let _ = writeln!(
        s,
        "| arm | n | K transactions/s | p50 µs | p99 µs | mean µs | CPU ns/transaction | wake-ups per 1000 transactions | unmatched |\n|---|---|---|---|---|---|---|---|---|"
    );
    for a in &arms {
        let r = rr_of(a);
        let col = |g: fn(&crate::bench::runner::RrSample) -> f64| r.iter().map(|x| g(x)).collect::<Vec<f64>>();
        let cpu: Option<Vec<f64>> = r.iter().map(|x| x.cpu_ns_per_transaction).collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            a.label,
            r.len(),
            ms(&col(|x| x.transactions_per_s / 1e3), 1),
            ms(&col(|x| x.latency_p50_us), 2),
            ms(&col(|x| x.latency_p99_us), 2),
            ms(&col(|x| x.latency_mean_us), 2),
            cpu.map(|c| ms(&c, 1)).unwrap_or_else(|| "-".into()),
            ms(&col(|x| 1e3 * x.wakeups_per_transaction), 3),
            r.iter().map(|x| x.unmatched).sum::<u64>(),
        );
    }
    for c in &e.comparisons {
        let (Some(a), Some(b)) = (arms.iter().find(|x| x.name == c.a), arms.iter().find(|x| x.name == c.b)) else { continue };
        let (ra, rb) = (rr_of(a), rr_of(b));
        let _ = writeln!(s, "\n{} → {}:", a.label, b.label);
        let metrics: [(&str, RrMetric); 3] = [
            ("transactions/s", |x| x.transactions_per_s),
            ("p50 latency µs", |x| x.latency_p50_us),
            ("p99 latency µs", |x| x.latency_p99_us),
        ];
        for (name, g) in metrics {
            let (va, vb): (Vec<f64>, Vec<f64>) = (ra.iter().map(|x| g(x)).collect(), rb.iter().map(|x| g(x)).collect());
            match crate::bench::stats::welch_t_test(&va, &vb) {
                Some(w) => {
                    let _ = writeln!(
                        s,
                        "- {name}: {} → {} ({}), Welch t = {}, df = {}, p = {}",
                        f(w.mean_a, 2),
                        f(w.mean_b, 2),
                        pct(w.diff_pct),
                        f(w.t, 2),
                        f(w.df, 1),
                        p_text(w.p_two_sided)
                    );
                }
                None if va.iter().chain(&vb).any(|v| !v.is_finite()) => {
                    let _ = writeln!(s, "- {name}: no t-test, a run had no transactions (its latency is undefined)");
                }
                None => {
                    let _ = writeln!(s, "- {name}: too few runs for a t-test");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::analysis::{arm_with_mpps, compare, SeedJson};
    use crate::bench::experiment::SeedFigure;

    /// Runs at the cap: the seed line gives the censored verdict's change and p (+8.0%), not
    /// Welch's on the capped values (+7.7%).
    #[test]
    fn seed_line_gives_the_verdicts_effect() {
        let (a, b) =
            (arm_with_mpps("a", &[7.21, 8.05, 9.415, 8.62, 9.415, 7.88]), arm_with_mpps("b", &[9.415, 9.40, 8.91, 9.415, 8.33, 9.02]));
        let c = compare("t", &a, &b, Some(9.415), true);
        let v = c.verdict.clone().unwrap();
        let figure = SeedFigure {
            file: "seed.txt",
            setup: "",
            baseline_label: "",
            baseline: 1.0,
            result_label: "",
            result: 1.1,
            stated_change_pct: None,
            unit: "Gbps",
            comparison: 0,
        };
        let e = ExperimentResult {
            name: "t",
            title: String::new(),
            description: String::new(),
            notes: vec![],
            seed: Some(SeedJson { change_pct: figure.change_pct(), figure }),
            cap_mpps: Some(9.415),
            runs: 6,
            seconds: 1.0,
            warmup: 0.0,
            order: vec![],
            arms: vec![a, b],
            comparisons: vec![c],
            sweeps: vec![],
            wall_seconds: 0.0,
            health: None,
        };
        let line = seed_line(&e).unwrap();
        assert!(line.contains(&format!("({}, p = {}, n = 6+6)", pct(v.diff_pct), p_text(v.p))), "{line}");
        assert!(line.contains("+8.0%") && line.contains("8.662 → 9.351 Mpps (censored-normal estimates)"), "{line}");
    }
}
