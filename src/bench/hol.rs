//! `sluice bench hol`: head-of-line delay behind a bulk backlog — the second test of
//! qdisc-bulk-dequeue.txt and the reason BQL exists. A bulk flow keeps `pfifo_fast` busy into
//! the 10G NIC model while a small high-priority probe (TOS low delay: band 0) arrives now
//! and then (Poisson, mean gap 200 µs). The probe jumps the qdisc's backlog, but not the
//! driver's ring: its delay is the bytes already posted there, which BQL bounds. Arms: BQL
//! on, off, and fixed limits of 25 and 100 MTU packets (the seed's "25–100 packets at 10G"),
//! with MTU-sized bulk packets and with 64 KB GSO packets into a TSO NIC (one descriptor
//! carries 44 segments: without BQL a 512-descriptor ring is 26 ms of wire).
//!
//! It runs the real transmit stage (`enqueue_staged`, `qdisc_run` with bulk dequeue) and the
//! NIC model on the model's simulated clock, stepped 1 µs per qdisc run, so the figures are
//! the mechanism's, not this machine's; each run draws other probe arrivals (its seed).

use super::stats::{summarize, welch_t_test, Summary, Welch};
use super::{BenchArgs, BenchError};
use crate::buf::{BufCache, Pkt, Pool};
use crate::net::{Net, Pipeline};
use crate::port::fault::Rng;
use crate::port::sim::{SimClock, SimConfig, SimNic};
use crate::port::Port;
use crate::stats::Counters;
use crate::tunables::Tunables;
use crate::tx::queue::TxQueue;
use crate::wire::build::{build, L3Spec, L4Spec, PacketSpec};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An MTU-sized bulk packet.
pub const MTU_FRAME: usize = 1514;
/// A GSO packet as TCP builds for 64 KB: 44 segments of MSS 1448 behind one set of headers.
pub const GSO_FRAME: usize = 14 + 20 + 20 + 44 * 1448;
const PROBE_FRAME: usize = 100;
/// IPTOS_LOWDELAY: pfifo_fast's band 0.
const PROBE_TOS: u8 = 0x10;
/// A probe every 200 µs on average: rare next to the bulk (a GSO packet is 52 µs of wire),
/// so probes do not crowd the ring's descriptors themselves.
const PROBE_MEAN_GAP_NS: f64 = 200_000.0;
/// The sender runs its qdisc every microsecond of simulated time.
const STEP_NS: u64 = 1_000;
/// Bulk packets the sender keeps queued in the qdisc.
const BACKLOG: usize = 200;
/// Simulated time per run, and the start-up excluded from the figures.
pub const RUN_NS: u64 = 200_000_000;
const WARMUP_NS: u64 = 50_000_000;
/// The BQL limit and ring bytes are sampled this often for the plot.
const TRACE_PERIOD_NS: u64 = 100_000;
/// Frames the pool needs: the ring and the backlog full of GSO chains.
const POOL_FRAMES: usize = 32_768;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Bulk {
    /// 1514-byte frames.
    Mtu,
    /// 64 KB GSO packets into a TSO NIC.
    Gso,
}

/// One configuration: the bulk packets and the NIC model (BQL on/off/fixed).
#[derive(Debug, Clone)]
pub struct HolArm {
    pub name: &'static str,
    pub label: &'static str,
    pub bulk: Bulk,
    pub sim: SimConfig,
}

/// A fixed BQL limit of `n` MTU packets (limit_min = limit_max).
fn fixed(n: u32, sim: SimConfig) -> SimConfig {
    let bytes = n * MTU_FRAME as u32;
    SimConfig { bql_limit_min: bytes, bql_limit_max: bytes, ..sim }
}

pub fn arms() -> Vec<HolArm> {
    let mtu = SimConfig::default();
    let tso = SimConfig { tso: true, ..SimConfig::default() };
    vec![
        HolArm { name: "mtu-bql", label: "MTU bulk, BQL", bulk: Bulk::Mtu, sim: mtu.clone() },
        HolArm { name: "mtu-fixed25", label: "MTU bulk, fixed 25 packets", bulk: Bulk::Mtu, sim: fixed(25, mtu.clone()) },
        HolArm { name: "mtu-fixed100", label: "MTU bulk, fixed 100 packets", bulk: Bulk::Mtu, sim: fixed(100, mtu.clone()) },
        HolArm { name: "mtu-nobql", label: "MTU bulk, no BQL", bulk: Bulk::Mtu, sim: SimConfig { bql: false, ..mtu } },
        HolArm { name: "gso-bql", label: "64 KB GSO bulk (TSO), BQL", bulk: Bulk::Gso, sim: tso.clone() },
        HolArm { name: "gso-fixed25", label: "64 KB GSO bulk (TSO), fixed 25 MTU", bulk: Bulk::Gso, sim: fixed(25, tso.clone()) },
        HolArm { name: "gso-nobql", label: "64 KB GSO bulk (TSO), no BQL", bulk: Bulk::Gso, sim: SimConfig { bql: false, ..tso } },
    ]
}

/// What one run measured (simulated time; probes after the warm-up).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HolRun {
    pub probes: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    /// Bytes posted to the driver's ring and not yet on the wire, sampled every 100 µs.
    pub ring_bytes_mean: f64,
    pub ring_bytes_max: u64,
    /// The BQL limit at the end (0 without BQL).
    pub bql_limit_last: u32,
    /// Bulk payload rate on the wire (the backlog never runs dry: ~line rate).
    pub wire_gbps: f64,
}

/// (time µs, BQL limit bytes, ring bytes) every 100 µs of one run.
pub type Trace = Vec<(f64, u32, u64)>;

/// A UDP/IPv4 frame of `len` bytes with `tos` (the bulk's GSO packets: the NIC model
/// segments by length; pfifo_fast reads only the TOS).
fn template(tos: u8, src_port: u16, len: usize) -> Result<Vec<u8>, BenchError> {
    let spec = PacketSpec {
        l3: L3Spec::V4 { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], tos, ident: 0, dont_frag: true },
        l4: L4Spec::Udp { src_port, dst_port: 9 },
        frame_len: len,
        ..PacketSpec::default()
    };
    let mut b = vec![0u8; len];
    let n = build(&spec, &mut b).map_err(|e| BenchError::Experiment(format!("hol: building a {len}-byte frame: {e:?}")))?;
    b.truncate(n);
    Ok(b)
}

fn copy(bufs: &mut BufCache, bytes: &[u8]) -> Result<Pkt, BenchError> {
    bufs.alloc_copy(bytes).ok_or_else(|| BenchError::Experiment("hol: the buffer pool ran out".into()))
}

/// One run of `arm` over `run_ns` of simulated time, probes drawn from `seed`.
pub fn run(arm: &HolArm, pool: &Pool, seed: u64, run_ns: u64) -> Result<(HolRun, Trace), BenchError> {
    let net = Net::new(Tunables::default(), Pipeline::Io);
    let mut bufs = pool.cache();
    let clock = Arc::new(AtomicU64::new(0));
    let mut nic = SimNic::with_clock("nic", arm.sim.clone(), 1500, SimClock::Manual(clock.clone()));
    nic.completion_log = Some(Vec::new());
    let mut q = TxQueue { qdisc: Some(crate::tx::default_spec(&net).build(net.tun.txqueuelen, MTU_FRAME as u32)), ..TxQueue::default() };
    let mut c = Counters::default();
    let bulk = template(0, 1, if arm.bulk == Bulk::Gso { GSO_FRAME } else { MTU_FRAME })?;
    let probe = template(PROBE_TOS, 2, PROBE_FRAME)?;
    let mut rng = Rng::new(seed);
    let mut gap = || -(1.0 - rng.next_u64() as f64 / u64::MAX as f64).max(1e-12).ln() * PROBE_MEAN_GAP_NS;
    let warm = WARMUP_NS.min(run_ns / 4);
    let mut next_probe = warm as f64 / 2.0 + gap();
    let mut probes: Vec<(crate::buf::BufId, u64)> = Vec::new();
    let mut delays = Vec::new();
    let mut trace = Trace::new();
    let (mut ring_sum, mut ring_n, mut ring_max) = (0f64, 0u64, 0u64);
    let wire0 = nic.sim.wire_bytes;
    let mut wire_at_warm = wire0;
    let mut now = 0;
    while now < run_ns {
        clock.store(now, Ordering::Relaxed);
        nic.tx_completions(&mut bufs);
        for (buf, done) in nic.completion_log.as_mut().map(std::mem::take).unwrap_or_default() {
            if let Some(k) = probes.iter().position(|(b, _)| *b == buf) {
                let (_, sent) = probes.swap_remove(k);
                if sent >= warm {
                    delays.push((done - sent) as f64 / 1e3);
                }
            }
        }
        while q.held() + q.pkts.len() < BACKLOG {
            let p = copy(&mut bufs, &bulk)?;
            q.pkts.push(p);
        }
        while next_probe <= now as f64 {
            let p = copy(&mut bufs, &probe)?;
            probes.push((p.buf, now));
            q.pkts.push(p);
            next_probe += gap();
        }
        crate::tx::enqueue_staged(&mut q, &mut bufs, &mut c, now);
        crate::tx::qdisc_run(&net, &mut q, &mut nic, &mut bufs, &mut c, now);
        if now % TRACE_PERIOD_NS == 0 {
            let ring = nic.ring_bytes();
            trace.push((now as f64 / 1e3, nic.txq().dql.limit(), ring));
            if now >= warm {
                ring_sum += ring as f64;
                ring_n += 1;
                ring_max = ring_max.max(ring);
            }
        }
        if now == warm {
            wire_at_warm = nic.sim.wire_bytes;
        }
        now += STEP_NS;
    }
    if c.total_drops() > 0 {
        return Err(BenchError::Experiment(format!(
            "hol {}: {} packets dropped (the backlog is kept below the qdisc's limit)",
            arm.name,
            c.total_drops()
        )));
    }
    let bql_limit_last = if arm.sim.bql { nic.txq().dql.limit() } else { 0 };
    nic.flush_held(&mut bufs);
    let mut rest = Vec::new();
    let mut cx = crate::tx::qdisc::QCtx { bufs: &mut bufs, now_ns: now, dropped: &mut Vec::new() };
    let requeued: Vec<Pkt> = q.requeued.drain(..).collect();
    if let Some(qd) = q.qdisc.as_mut() {
        while let Some(p) = qd.dequeue(&mut cx) {
            rest.push(p);
        }
    }
    bufs.free_pkts(&rest);
    bufs.free_pkts(&requeued);
    bufs.flush();
    if delays.is_empty() {
        return Err(BenchError::Experiment(format!("hol {}: no probe completed after the warm-up", arm.name)));
    }
    delays.sort_by(f64::total_cmp);
    let pct = |p: f64| delays[((delays.len() - 1) as f64 * p).round() as usize];
    let r = HolRun {
        probes: delays.len(),
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        mean_us: delays.iter().sum::<f64>() / delays.len() as f64,
        ring_bytes_mean: ring_sum / ring_n.max(1) as f64,
        ring_bytes_max: ring_max,
        bql_limit_last,
        wire_gbps: (nic.sim.wire_bytes - wire_at_warm) as f64 * 8.0 / (run_ns - warm) as f64,
    };
    Ok((r, trace))
}

/// An arm's runs and their summaries; comparisons against the same bulk's no-BQL arm.
#[derive(Debug, Clone, Serialize)]
pub struct HolArmResult {
    pub name: &'static str,
    pub label: &'static str,
    pub bulk: Bulk,
    pub runs: Vec<HolRun>,
    pub p50_us: Option<Summary>,
    pub p99_us: Option<Summary>,
    pub ring_bytes_mean: Option<Summary>,
    /// p99 probe delay against the no-BQL arm of the same bulk (b = this arm).
    pub p99_vs_no_bql: Option<Welch>,
    /// The first run's BQL limit and ring bytes over time.
    pub trace: Trace,
}

#[derive(Debug, Clone, Serialize)]
pub struct HolResults {
    pub command: String,
    pub machine: super::machine::Machine,
    pub runs: usize,
    pub simulated_ms: f64,
    pub arms: Vec<HolArmResult>,
}

/// Runs every arm `runs` times (different probe arrivals each run).
pub fn measure(runs: usize, run_ns: u64, mut progress: impl FnMut(&str, usize)) -> Result<Vec<HolArmResult>, BenchError> {
    let pool = Pool::new(POOL_FRAMES).map_err(|e| BenchError::Experiment(format!("hol: pool: {e}")))?;
    let mut out = Vec::new();
    for arm in arms() {
        let mut r = HolArmResult {
            name: arm.name,
            label: arm.label,
            bulk: arm.bulk,
            runs: Vec::new(),
            p50_us: None,
            p99_us: None,
            ring_bytes_mean: None,
            p99_vs_no_bql: None,
            trace: Vec::new(),
        };
        for k in 0..runs {
            progress(arm.name, k);
            let (run, trace) = run(&arm, &pool, 0x401 + k as u64, run_ns)?;
            if k == 0 {
                r.trace = trace;
            }
            r.runs.push(run);
        }
        let of = |f: fn(&HolRun) -> f64| summarize(&r.runs.iter().map(f).collect::<Vec<_>>());
        r.p50_us = of(|x| x.p50_us);
        r.p99_us = of(|x| x.p99_us);
        r.ring_bytes_mean = of(|x| x.ring_bytes_mean);
        out.push(r);
    }
    let p99 = |a: &HolArmResult| a.runs.iter().map(|x| x.p99_us).collect::<Vec<_>>();
    for i in 0..out.len() {
        let base = out.iter().find(|a| a.bulk == out[i].bulk && a.name.ends_with("nobql")).map(p99);
        if let (Some(b), false) = (base, out[i].name.ends_with("nobql")) {
            out[i].p99_vs_no_bql = welch_t_test(&b, &p99(&out[i]));
        }
    }
    Ok(out)
}

/// `sluice bench hol`: measures, prints the table, writes hol.json and hol-bql.svg.
pub fn main(args: &BenchArgs) -> Result<HolResults, BenchError> {
    let settings = super::Settings::from_args(args)?;
    // Simulated time: options for measured runs would change nothing here, so they are
    // refused rather than ignored.
    for (given, opt) in [(args.seconds.is_some(), "--seconds"), (args.warmup.is_some(), "--warmup"), (!args.set.is_empty(), "--set")] {
        if given {
            return Err(BenchError::Settings(format!(
                "`hol` takes no {opt}: each run simulates {} ms (--runs, --quick, --out and --quiet apply)",
                RUN_NS as f64 / 1e6
            )));
        }
    }
    let runs = settings.runs.unwrap_or(6);
    if runs < 2 {
        return Err(BenchError::Settings(format!("--runs {runs}: `hol` compares arms with Welch's t-test, which needs 2 runs or more")));
    }
    let quiet = args.quiet;
    let arms = measure(runs, RUN_NS, |name, k| {
        if !quiet {
            eprintln!("hol run {}/{runs}: {name}", k + 1);
        }
    })?;
    let res =
        HolResults { command: super::command_line(), machine: super::machine::describe(), runs, simulated_ms: RUN_NS as f64 / 1e6, arms };
    std::fs::create_dir_all(&args.out).map_err(|e| BenchError::io(&args.out, e))?;
    let path = args.out.join("hol.json");
    std::fs::write(&path, serde_json::to_string_pretty(&res)?).map_err(|e| BenchError::io(&path, e))?;
    let svg = args.out.join("hol-bql.svg");
    plot(&res, &svg).map_err(|e| BenchError::Experiment(format!("hol plot: {e}")))?;
    crate::outln!("{}", table(&res));
    crate::outln!("wrote {} and {}", path.display(), svg.display());
    Ok(res)
}

pub fn table(r: &HolResults) -> String {
    let mut s = format!(
        "hol: probe delay behind a bulk backlog, pfifo_fast into the 10G NIC model (512 descriptors), {} runs of {} ms simulated each\n",
        r.runs, r.simulated_ms
    );
    s += &format!(
        "{:<38} {:>12} {:>14} {:>16} {:>10} {:>22}\n",
        "arm", "p50 µs", "p99 µs", "ring KB (mean)", "wire Gb/s", "p99 vs no BQL (p)"
    );
    for a in &r.arms {
        let f = |x: &Option<Summary>, d: f64| x.as_ref().map_or("-".into(), |s| format!("{:.1}±{:.1}", s.mean / d, s.sd / d));
        let vs = a.p99_vs_no_bql.as_ref().map_or("-".into(), |w| {
            // No variance in either arm: no p (NaN), printed "-".
            let p = if w.p_two_sided.is_finite() { format!("{:.1e}", w.p_two_sided) } else { "-".into() };
            format!("{:.3}× ({p})", w.mean_b / w.mean_a)
        });
        let wire = a.runs.iter().map(|x| x.wire_gbps).sum::<f64>() / a.runs.len().max(1) as f64;
        let (p50, p99, ring) = (f(&a.p50_us, 1.0), f(&a.p99_us, 1.0), f(&a.ring_bytes_mean, 1e3));
        s += &format!("{:<38} {p50:>12} {p99:>14} {ring:>16} {wire:>10.2} {vs:>22}\n", a.label);
    }
    s
}

/// The BQL limit (and the ring's bytes) over the first 20 ms of the BQL arms' first runs.
fn plot(r: &HolResults, path: &std::path::Path) -> Result<(), String> {
    use plotters::prelude::*;
    const SHOWN_US: f64 = 20_000.0;
    let series: Vec<&HolArmResult> = r.arms.iter().filter(|a| a.name.ends_with("-bql")).collect();
    let pts = |a: &HolArmResult, f: fn(&(f64, u32, u64)) -> f64| -> Vec<(f64, f64)> {
        a.trace.iter().filter(|t| t.0 <= SHOWN_US).map(|t| (t.0 / 1e3, f(t) / 1e3)).collect()
    };
    let ymax = series.iter().flat_map(|a| a.trace.iter().filter(|t| t.0 <= SHOWN_US).map(|t| (t.1 as u64).max(t.2))).max().unwrap_or(1)
        as f64
        / 1e3
        * 1.1;
    let root = SVGBackend::new(path, (760, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption("BQL limit over time (10G NIC model, simulated)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..SHOWN_US / 1e3, 0.0..ymax.max(1.0))
        .map_err(|e| e.to_string())?;
    chart.configure_mesh().x_desc("ms").y_desc("KB").draw().map_err(|e| e.to_string())?;
    let colors = [RGBColor(31, 119, 180), RGBColor(214, 39, 40)];
    for (a, c) in series.iter().zip(colors) {
        chart
            .draw_series(LineSeries::new(pts(a, |t| t.1 as f64), c.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(format!("{}: BQL limit", a.label))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(LineSeries::new(pts(a, |t| t.2 as f64), c.mix(0.4)))
            .map_err(|e| e.to_string())?
            .label(format!("{}: bytes in the ring", a.label))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.mix(0.4)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(name: &str) -> HolArm {
        arms().into_iter().find(|a| a.name == name).unwrap()
    }

    /// The seed's point, in the model's time: without BQL a probe waits behind a full ring
    /// (512 × 1538 B at 10G = 630 µs); BQL keeps only its limit's bytes ahead of it; a fixed
    /// limit of 25 packets (37.9 KB, 30 µs) bounds it by that.
    #[test]
    fn bql_bounds_the_head_of_line_delay_of_a_priority_probe() {
        let pool = Pool::new(POOL_FRAMES).unwrap();
        let ms = 100_000_000;
        let (no_bql, _) = run(&arm("mtu-nobql"), &pool, 1, ms).unwrap();
        let (bql, trace) = run(&arm("mtu-bql"), &pool, 1, ms).unwrap();
        let (fixed, _) = run(&arm("mtu-fixed25"), &pool, 1, ms).unwrap();
        assert!(no_bql.p50_us > 500.0 && no_bql.ring_bytes_max > 500 * 1514, "{no_bql:?}");
        assert!(bql.p99_us < no_bql.p50_us / 4.0, "BQL {bql:?} vs none {no_bql:?}");
        assert!(bql.bql_limit_last > 0 && (bql.ring_bytes_max as f64) < no_bql.ring_bytes_mean / 4.0, "{bql:?}");
        // 25 packets + the one on the wire, + a 1 µs step.
        assert!(fixed.p99_us < 35.0 && fixed.ring_bytes_max <= 26 * 1514, "{fixed:?}");
        assert!(bql.probes > 300 && fixed.probes > 300);
        // The bulk kept the wire busy all along: the limit starved nothing.
        assert!(bql.wire_gbps > 9.5 && fixed.wire_gbps > 9.5, "{bql:?} {fixed:?}");
        assert!(trace.windows(2).all(|w| w[1].0 > w[0].0) && trace.iter().any(|t| t.1 > 0), "the limit grew from 0");
        assert_eq!(pool.cache().in_use(), 0, "every buffer back");
    }

    /// With 64 KB GSO packets a ring of descriptors holds far more bytes: BQL, counting bytes,
    /// still bounds what is ahead of the probe.
    #[test]
    fn bql_counts_gso_packets_by_their_bytes() {
        let pool = Pool::new(POOL_FRAMES).unwrap();
        let ms = 120_000_000;
        let (no_bql, _) = run(&arm("gso-nobql"), &pool, 2, ms).unwrap();
        let (bql, _) = run(&arm("gso-bql"), &pool, 2, ms).unwrap();
        // 512 descriptors × 44 segments × 1538 B at 10G ≈ 27.7 ms.
        assert!(no_bql.p50_us > 20_000.0, "{no_bql:?}");
        assert!(bql.p99_us < no_bql.p50_us / 10.0, "BQL {bql:?} vs none {no_bql:?}");
        assert!(bql.wire_gbps > 9.5, "{bql:?}");
    }

    #[test]
    fn runs_with_other_seeds_draw_other_probes() {
        let pool = Pool::new(POOL_FRAMES).unwrap();
        let a = run(&arm("mtu-bql"), &pool, 1, 20_000_000).unwrap().0;
        let b = run(&arm("mtu-bql"), &pool, 2, 20_000_000).unwrap().0;
        assert_eq!(a, run(&arm("mtu-bql"), &pool, 1, 20_000_000).unwrap().0, "a seed repeats its run");
        assert_ne!(a.mean_us, b.mean_us);
    }
}
