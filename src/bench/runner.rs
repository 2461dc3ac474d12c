//! One run of one sluice arm: a fresh datapath built in-process, a warm-up, then a measured
//! interval with counters started from zero.

use super::hw::{self, HwCounters, HwReading};
use super::BenchError;
use crate::cli::run as clirun;
use crate::config::Config;
use crate::napi::RunLimit;
use crate::port::gen::RequestResponse;
use crate::stats::{Counters, DropReason, Stage};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Cycles spent in one stage during a run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StageSample {
    pub stage: &'static str,
    pub calls: u64,
    pub packets: u64,
    pub cycles: u64,
}

/// Everything measured in one run.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Sample {
    /// Round of the interleaved schedule this run belongs to (0-based).
    pub round: usize,
    /// Position in the experiment's overall run order (0-based).
    pub order: usize,
    /// Measured wall-clock seconds (after the warm-up).
    pub seconds: f64,
    /// Worker threads that ran (their stage clocks run side by side: the zoom-in's total is
    /// seconds × workers).
    pub workers: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    /// Packets that entered processing (received minus what a full backlog refused) per
    /// second / 1e6; transmitted packets for an arm rated by what it sends (`rate_by_tx`).
    pub mpps: f64,
    /// Received frame bytes (without FCS) per second × 8 / 1e9.
    pub gbps: Option<f64>,
    /// Wall time / the packets `mpps` counts.
    pub ns_per_packet: f64,
    pub cpu_user_s: Option<f64>,
    pub cpu_sys_s: Option<f64>,
    /// (user + sys) / wall summed over the worker threads: below the worker count when
    /// they were preempted or idle.
    pub cpu_util: Option<f64>,
    /// (user + sys) CPU time of every worker thread / the packets `mpps` counts.
    pub cpu_ns_per_packet: Option<f64>,
    pub drops: u64,
    /// Doorbells rung (driver calls that posted packets) over the measured interval.
    pub doorbells: u64,
    pub drop_reasons: BTreeMap<String, u64>,
    /// Per-stage cycle counters (stages that ran).
    pub stages: Vec<StageSample>,
    /// Hardware counters over the measured interval (user space), when available.
    pub hw: Option<HwReading>,
    /// The conservation ledger after the run: `None` = balanced.
    pub conservation_error: Option<String>,
    /// Closed-loop (request/response) figures, when a generator runs in that mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rr: Option<RrSample>,
    /// testpmd runs: (port 0, port 1) Rx-pps of every measured stats period.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub testpmd_periods: Vec<[f64; 2]>,
}

impl Sample {
    /// Rates the sample by what it transmitted (a sender whose qdisc drops what its port
    /// cannot take): the rate and both per-packet costs count transmitted packets.
    pub fn rate_by_tx(&mut self) {
        let tx = self.tx_packets.max(1) as f64;
        self.mpps = self.tx_packets as f64 / self.seconds.max(1e-9) / 1e6;
        self.ns_per_packet = self.seconds * 1e9 / tx;
        self.cpu_ns_per_packet = self.cpu_user_s.zip(self.cpu_sys_s).map(|(u, s)| (u + s) * 1e9 / tx);
    }
}

/// A request/response run (netperf TCP_RR-like): transactions and their latency. With no
/// transaction the latencies and per-transaction figures are NaN (null in results.json).
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct RrSample {
    pub transactions: u64,
    pub transactions_per_s: f64,
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    pub latency_mean_us: f64,
    /// (user + sys) CPU time of every worker, ns / transactions.
    pub cpu_ns_per_transaction: Option<f64>,
    /// RPS wake-ups sent / transactions.
    pub wakeups_per_transaction: f64,
    /// Answers that matched no outstanding request (0 in a sound run).
    pub unmatched: u64,
}

/// One run's request/response figures from the generator's figures over the measured
/// `secs`, the workers' CPU seconds and the RPS wake-ups sent. Without a transaction the
/// latencies and per-transaction figures are NaN (None for the CPU time): an empty
/// histogram reads 0, which is no measured latency, and the statistics refuse NaN.
pub fn rr_sample(r: &RequestResponse, secs: f64, cpu_s: Option<f64>, wakeups: u64) -> RrSample {
    let any = r.transactions > 0;
    let n = r.transactions as f64;
    let us = |q: f64| if any { r.latency_ns.value_at_quantile(q) as f64 / 1e3 } else { f64::NAN };
    RrSample {
        transactions: r.transactions,
        transactions_per_s: n / secs,
        latency_p50_us: us(0.5),
        latency_p99_us: us(0.99),
        latency_mean_us: if any { r.latency_ns.mean() / 1e3 } else { f64::NAN },
        cpu_ns_per_transaction: cpu_s.filter(|_| any).map(|t| t * 1e9 / n),
        wakeups_per_transaction: if any { wakeups as f64 / n } else { f64::NAN },
        unmatched: r.unmatched,
    }
}

/// Every closed-loop generator's figures of the datapath, summed (None: no such port).
pub fn request_response(dp: &crate::datapath::Datapath) -> Option<RequestResponse> {
    dp.all_queues().filter_map(|p| p.request_response()).reduce(|mut a, b| {
        a.merge(&b);
        a
    })
}

/// Stage counters of a run, in pipeline order.
pub fn stage_samples(c: &Counters) -> Vec<StageSample> {
    Stage::ALL
        .iter()
        .filter_map(|s| {
            let st = c.stage(*s);
            (st.packets > 0 || st.cycles > 0).then(|| StageSample {
                stage: s.name(),
                calls: st.calls,
                packets: st.packets,
                cycles: st.cycles,
            })
        })
        .collect()
}

/// Runs one sample of a sluice arm. `progress(seconds_done)` is called about every 100 ms.
pub fn run_sluice(
    config: &Config,
    set: &[String],
    warmup: Duration,
    measure: Duration,
    use_hw: bool,
    mut progress: impl FnMut(f64),
) -> Result<Sample, BenchError> {
    let mut dp = clirun::build(config, set)?;
    let tick = Duration::from_millis(100);
    if !warmup.is_zero() {
        dp.run(RunLimit { duration: Some(warmup), ..Default::default() }, tick, |_, el| progress(el.as_secs_f64()));
    }
    // After a run everything is flushed (nothing in flight), so starting the counters
    // from zero keeps the conservation ledger balanced.
    dp.reset_counters();
    let w = warmup.as_secs_f64();
    let rr0 = request_response(&dp);
    let mut hwc = if use_hw { HwCounters::open().ok() } else { None };
    let cpu0 = hw::thread_cpu_time();
    if let Some(h) = &hwc {
        h.start();
    }
    let el = dp.run(RunLimit { duration: Some(measure), ..Default::default() }, tick, |_, el| progress(w + el.as_secs_f64()));
    let hw_reading = hwc.as_mut().and_then(|h| h.stop());
    let cpu1 = hw::thread_cpu_time();
    let secs = el.as_secs_f64().max(1e-9);
    let c = &dp.counters();
    let (mut user, mut sys) = match (cpu0, cpu1) {
        (Some((u0, s0)), Some((u1, s1))) => (Some((u1 - u0).max(0.0)), Some((s1 - s0).max(0.0))),
        _ => (None, None),
    };
    // Workers on their own threads (RPS) add their thread time.
    for w in dp.workers.iter().skip(1) {
        match w.cpu_time {
            Some((u, s)) => {
                user = user.map(|x| x + u);
                sys = sys.map(|x| x + s);
            }
            None => (user, sys) = (None, None),
        }
    }
    let cpu = user.zip(sys).map(|(u, s)| u + s);
    let rr = request_response(&dp).zip(rr0).map(|(after, before)| rr_sample(&after.since(&before), secs, cpu, c.rps_wakeups));
    // Packets that entered processing: what a full backlog refused never did.
    let processed = c.rx - c.dropped(DropReason::CpuBacklog) - c.dropped(DropReason::CpuBacklogFlowLimit);
    let pk = processed.max(1) as f64;
    Ok(Sample {
        round: 0,
        order: 0,
        seconds: secs,
        workers: dp.workers.len() as u32,
        rx_packets: c.rx,
        tx_packets: c.tx,
        rx_bytes: c.rx_bytes,
        mpps: processed as f64 / secs / 1e6,
        gbps: Some(c.rx_bytes as f64 * 8.0 / secs / 1e9),
        ns_per_packet: secs * 1e9 / pk,
        cpu_user_s: user,
        cpu_sys_s: sys,
        cpu_util: cpu.map(|t| t / secs),
        cpu_ns_per_packet: cpu.map(|t| t * 1e9 / pk),
        drops: c.total_drops(),
        doorbells: c.doorbells,
        drop_reasons: c.nonzero_drops().into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        stages: stage_samples(c),
        hw: hw_reading,
        conservation_error: dp.conservation().err().map(|e| e.to_string()),
        rr,
        testpmd_periods: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(latencies_ns: &[u64]) -> RequestResponse {
        let mut latency_ns = hdrhistogram::Histogram::new_with_bounds(1, 100_000_000_000, 3).unwrap();
        for &l in latencies_ns {
            latency_ns.record(l).unwrap();
        }
        RequestResponse { transactions: latencies_ns.len() as u64, outstanding: 0, unmatched: 0, timeouts: 0, latency_ns }
    }

    /// No transaction, no latency: an empty histogram's 0 must not enter the t-tests as
    /// a measured 0 µs, nor a division by zero hide behind `max(1)`.
    #[test]
    fn no_transactions_no_latency() {
        let r = rr_sample(&figures(&[]), 1.0, Some(0.5), 10);
        assert_eq!((r.transactions, r.transactions_per_s), (0, 0.0));
        assert!(r.latency_p50_us.is_nan() && r.latency_p99_us.is_nan() && r.latency_mean_us.is_nan(), "{r:?}");
        assert!(r.wakeups_per_transaction.is_nan() && r.cpu_ns_per_transaction.is_none(), "{r:?}");
        assert!(crate::bench::stats::summarize(&[r.latency_p99_us, 3.0]).is_none());

        let r = rr_sample(&figures(&[2000, 4000]), 2.0, Some(1e-3), 4);
        assert_eq!((r.transactions, r.transactions_per_s, r.wakeups_per_transaction), (2, 1.0, 2.0));
        assert!((r.latency_mean_us - 3.0).abs() < 0.01 && (r.latency_p99_us - 4.0).abs() < 0.01, "{r:?}");
        assert!((r.cpu_ns_per_transaction.unwrap() - 5e5).abs() < 1e-6);
    }

    /// An arm rated by what it sends: the rate and both per-packet costs count transmitted
    /// packets (they had counted received ones, so a qdisc dropping more looked cheaper).
    #[test]
    fn a_sample_rated_by_tx_counts_transmitted_packets_throughout() {
        let mut x = Sample {
            seconds: 2.0,
            rx_packets: 30_000_000,
            tx_packets: 20_000_000,
            mpps: 15.0,
            ns_per_packet: 2e9 / 3e7,
            cpu_user_s: Some(1.5),
            cpu_sys_s: Some(0.5),
            ..Sample::default()
        };
        x.rate_by_tx();
        assert_eq!((x.mpps, x.ns_per_packet, x.cpu_ns_per_packet), (10.0, 100.0, Some(100.0)));
    }
}
