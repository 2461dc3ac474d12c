//! Human-readable output: the per-second line and the summary table (VPP-style per-stage
//! runtime: vectors per call, clocks and nanoseconds per packet).

use super::run::RunReport;
use crate::stats::tsc::{cycles_to_ns, tsc_hz};
use crate::stats::{Counters, Stage};
use std::fmt::Write;

/// Per-stage cost for the packets in `c`: (stage name, calls, packets, vectors/call,
/// cycles/packet, ns/packet), only stages that ran.
pub fn stage_rows(c: &Counters) -> Vec<(&'static str, u64, u64, f64, f64, f64)> {
    Stage::ALL
        .iter()
        .filter_map(|s| {
            let st = c.stage(*s);
            if st.packets == 0 {
                return None;
            }
            let cpp = st.cycles as f64 / st.packets as f64;
            Some((s.name(), st.calls, st.packets, st.packets as f64 / st.calls.max(1) as f64, cpp, cycles_to_ns(cpp)))
        })
        .collect()
}

/// Total measured ns per received packet across stages.
pub fn total_ns_per_packet(c: &Counters) -> f64 {
    let cycles: u64 = c.stages.iter().map(|s| s.cycles).sum();
    cycles_to_ns(cycles as f64 / c.rx.max(1) as f64)
}

/// One line a second: rates over the last interval, drops so far, ns/packet by stage.
pub fn tick_line(now: &Counters, prev: &Counters, dt: f64, t: f64) -> String {
    let rx = (now.rx - prev.rx) as f64 / dt / 1e6;
    let tx = (now.tx - prev.tx) as f64 / dt / 1e6;
    let mut delta = now.clone();
    for (d, p) in delta.stages.iter_mut().zip(prev.stages.iter()) {
        d.calls -= p.calls;
        d.packets -= p.packets;
        d.cycles -= p.cycles;
    }
    delta.rx = now.rx - prev.rx;
    let mut s = format!(
        "{t:5.1}s  rx {rx:7.3} Mpps  tx {tx:7.3} Mpps  drops {:>9}  ns/pkt {:6.1} |",
        now.total_drops(),
        total_ns_per_packet(&delta)
    );
    for (name, _, _, _, _, ns) in stage_rows(&delta) {
        let _ = write!(s, " {name} {ns:.1}");
    }
    s
}

pub fn summary(r: &RunReport) -> String {
    let c = &r.counters;
    let mut s = String::new();
    let ended = match r.stop {
        crate::napi::StopReason::Time => "time limit",
        crate::napi::StopReason::Packets => "packet count reached",
        crate::napi::StopReason::InputDone => "input done",
        crate::napi::StopReason::Stopped => "stopped (signal or closed output)",
    };
    let _ = writeln!(s, "\n== sluice {:?} summary: {:.2} s ({ended}), TSC {:.3} GHz ==", r.pipeline, r.seconds, tsc_hz() / 1e9);
    let _ = writeln!(
        s,
        "received   {:>14} pkts  {:>8.3} Mpps  {:>8.3} Gbit/s",
        c.rx,
        r.rx_mpps(),
        c.rx_bytes as f64 * 8.0 / r.seconds.max(1e-9) / 1e9
    );
    let _ = writeln!(s, "transmitted{:>14} pkts  {:>8.3} Mpps  doorbells {}", c.tx, r.tx_mpps(), c.doorbells);
    let _ = writeln!(s, "local      {:>14} pkts   originated {}", c.local, c.originated);
    let _ = writeln!(s, "dropped    {:>14} pkts", c.total_drops());
    for (name, n) in c.nonzero_drops() {
        let _ = writeln!(s, "  {name:<22}{n:>14}");
    }
    if c.ip_frag_oks > 0 {
        let _ = writeln!(s, "IPv4 datagrams fragmented {:>14}  fragments made {}", c.ip_frag_oks, c.ip_frag_creates);
    }
    if c.icmp_ratelimited > 0 {
        let _ = writeln!(s, "ICMP errors not sent (rate limits) {:>14}", c.icmp_ratelimited);
    }
    if c.rx_lists > 0 {
        let _ = writeln!(
            s,
            "lists      {:>14}  runs {}  avg list {:.1}  route lookups {}  hint hits {}",
            c.rx_lists,
            c.rx_runs,
            c.stage(Stage::L2).packets as f64 / c.rx_lists as f64,
            c.route_lookups,
            c.route_hint_hits
        );
    }
    if c.gro.held + c.gro.normal > 0 {
        let g = &c.gro;
        let completed: u64 = g.flushed.iter().sum();
        let _ = writeln!(
            s,
            "gro        merged {}  held {}  normal {}  segs/packet {:.1}  normal lists {} (avg {:.1} segs)  gso packets {} -> {} segs",
            g.merged,
            g.held,
            g.normal,
            (g.held + g.merged) as f64 / completed.max(1) as f64,
            g.lists,
            g.list_segs as f64 / g.lists.max(1) as f64,
            g.gso_packets,
            g.gso_segs
        );
    }
    let _ = writeln!(s, "\n{:<12}{:>12}{:>14}{:>10}{:>12}{:>10}{:>8}", "stage", "calls", "packets", "vec/call", "clk/pkt", "ns/pkt", "%");
    let rows = stage_rows(c);
    let total: f64 = rows.iter().map(|r| r.5 * r.2 as f64).sum::<f64>().max(1e-9);
    for (name, calls, pk, vpc, cpp, ns) in &rows {
        let _ = writeln!(s, "{name:<12}{calls:>12}{pk:>14}{vpc:>10.1}{cpp:>12.1}{ns:>10.2}{:>8.1}", 100.0 * ns * *pk as f64 / total);
    }
    let _ = writeln!(s, "{:<12}{:>58.2}  (per received packet)", "total", total_ns_per_packet(c));
    let _ = writeln!(
        s,
        "\n{:<10} {:>14} {:>14} {:>11} {:>10} {:>10} {:>9} {:>12}",
        "port", "rx", "tx", "doorbells", "check-fail", "too-long", "snapped", "rx-missed"
    );
    for (name, p) in &r.ports {
        let _ = writeln!(
            s,
            "{name:<10} {:>14} {:>14} {:>11} {:>10} {:>10} {:>9} {:>12}",
            p.rx_packets, p.tx_packets, p.doorbells, p.check_failures, p.rx_length_errors, p.rx_truncated, p.rx_missed
        );
    }
    for q in &r.qdiscs {
        let (d, t) = (&q.qdisc, &q.txq);
        let _ = writeln!(
            s,
            "\nqdisc {} on {}: sent {} pkts {} bytes, dropped {}, overlimits {}, requeues {}, backlog {} pkts {} bytes{}",
            q.kind,
            q.queue.map_or(q.port.clone(), |n| format!("{} tx queue {n}", q.port)),
            d.packets,
            d.bytes,
            d.drops,
            d.overlimits,
            d.requeues,
            d.backlog_pkts,
            d.backlog_bytes,
            if q.kind == "fq_codel" {
                format!(
                    ", ecn marks {}, new flows {}, drop_overlimit {}, drop_overmemory {}, memory_used {}",
                    d.ecn_mark, d.new_flow_count, d.drop_overlimit, d.drop_overmemory, d.memory_used
                )
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            s,
            "  txq: doorbells {}, stops {}, wakes {}, found stopped {}, rescheduled {}, BQL limit {} (max {}), inflight max {}",
            t.doorbells, q.stops, q.wakes, t.found_stopped, t.resched, q.bql_limit, t.bql_limit_max, t.bql_inflight_max
        );
        let hist: Vec<String> = ["1", "2-3", "4-7", "8-15", "16-31", "32-63", "64-127", "128+"]
            .iter()
            .zip(t.bulk_hist)
            .filter(|(_, n)| *n > 0)
            .map(|(b, n)| format!("{b}: {n}"))
            .collect();
        let _ = writeln!(s, "  packets per driver call: {}", hist.join(", "));
        if let Some(line) = bql_trace_line(&q.bql_trace) {
            let _ = writeln!(s, "  {line}");
        }
    }
    if r.workers.len() > 1 {
        let _ = writeln!(
            s,
            "\n{:<8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>9} {:>9} {:>8} {:>8}",
            "worker", "polled rx", "steered", "backlog", "tx", "tx handoffs", "local", "drops", "wake-ups", "rfs moves", "squeeze", "cpu s"
        );
        for w in &r.workers {
            let c = &w.counters;
            let _ = writeln!(
                s,
                "{:<8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>9} {:>9} {:>8} {:>8}",
                w.id,
                c.rx,
                c.rps_steered,
                c.backlog_processed,
                c.tx,
                c.tx_handoffs,
                c.local,
                c.total_drops(),
                c.rps_wakeups,
                c.rfs_moves,
                c.time_squeeze,
                w.cpu_seconds.map_or("-".to_string(), |t| format!("{t:.2}"))
            );
        }
    }
    for e in &r.output_errors {
        let _ = writeln!(s, "  output FAILED: {e}");
    }
    for f in &r.check_report {
        let _ = writeln!(s, "  check: {f}");
    }
    if let Some(f) = &r.faults {
        let _ = writeln!(
            s,
            "faults injected {} (rx {}, tx {}); frames damaged {}, so up to {} check failures are expected",
            f.injected(),
            f.rx.injected(),
            f.tx.injected(),
            f.damaged(),
            f.damaged()
        );
    }
    match &r.conservation {
        Ok(()) => {
            let _ = writeln!(s, "conservation: ok (rx + originated = tx + local + drops + gro merged)");
        }
        Err(e) => {
            let _ = writeln!(s, "conservation: FAILED: {e}");
        }
    }
    if r.buffers_leaked != 0 {
        let _ = writeln!(s, "buffers still held: {}", r.buffers_leaked);
    }
    s
}

/// The BQL trace in one line: how it was sampled and where the limit went (the samples
/// themselves are in `--json`).
fn bql_trace_line(t: &crate::tx::queue::BqlTrace) -> Option<String> {
    let (first, last) = (t.samples.first()?, t.samples.last()?);
    let min = t.samples.iter().map(|x| x.limit).min()?;
    let max = t.samples.iter().map(|x| x.limit).max()?;
    let inflight = t.samples.iter().map(|x| x.inflight as u64).sum::<u64>() / t.samples.len() as u64;
    Some(format!(
        "BQL over time: {} samples every {} ms over {:.1} s: limit {} → {} (min {min}, max {max}), mean inflight {inflight} bytes",
        t.samples.len(),
        t.period_ns / 1_000_000,
        (last.t_ns - first.t_ns) as f64 / 1e9,
        first.limit,
        last.limit
    ))
}
