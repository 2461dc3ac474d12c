//! `sluice run` with qdiscs and the NIC model from the command line: `--set qdisc.bulk=0|1`
//! on examples/qdisc.toml changes doorbells per packet, and bad qdisc names or parameters
//! (in `--set` or a `[ports.qdisc]` / `[ports.sim]` table) get one clear error naming the
//! setting.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).stdin(Stdio::null()).output().expect("sluice runs")
}

fn example() -> String {
    format!("{}/examples/qdisc.toml", env!("CARGO_MANIFEST_DIR"))
}

/// A clean refusal: non-zero exit, stderr names `needle`, one error line, no panic.
#[track_caller]
fn refused(args: &[&str], needle: &str) {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} succeeded:\n{err}");
    assert!(err.contains(needle), "{args:?}: expected `{needle}` in:\n{err}");
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("error")).count(), 1, "{args:?}: one error line expected:\n{err}");
}

/// (transmitted packets, doorbells) from the run report's "transmitted" line.
fn tx_and_doorbells(o: &Output) -> (u64, u64) {
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().find(|l| l.trim_start().starts_with("transmitted")).unwrap_or_else(|| panic!("no transmitted line in:\n{out}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let tx = words[1].parse().unwrap();
    let db = words.iter().position(|w| *w == "doorbells").map(|i| words[i + 1].parse().unwrap()).unwrap();
    (tx, db)
}

#[test]
fn qdisc_bulk_set_from_the_command_line_changes_doorbells_per_packet() {
    let cfg = example();
    let off = run(&["run", "--config", &cfg, "--seconds", "0.3", "--set", "qdisc.bulk=0"]);
    assert!(off.status.success(), "{}", String::from_utf8_lossy(&off.stderr));
    let (tx, db) = tx_and_doorbells(&off);
    assert!(tx > 1000);
    assert_eq!(db, tx, "no bulking: a doorbell per packet");
    let on = run(&["run", "--config", &cfg, "--seconds", "0.3", "--set", "qdisc.bulk=1"]);
    assert!(on.status.success(), "{}", String::from_utf8_lossy(&on.stderr));
    let (tx, db) = tx_and_doorbells(&on);
    assert!(tx > 1000);
    assert!(db * 4 < tx, "bulks: {db} doorbells for {tx} packets");
}

#[test]
fn the_ports_qdisc_table_picks_the_qdisc_and_the_summary_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(example()).unwrap();
    let fq = write(
        dir.path(),
        "fq",
        &base.replacen("kind = \"pfifo_fast\"", "kind = \"fq_codel\"\nflows = 256\ntarget_us = 2000\nmemory_limit = 1048576", 1),
    );
    let o = run(&["run", "--config", &fq, "--seconds", "0.3"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("qdisc fq_codel on nic0: sent "), "{out}");
    assert!(out.contains(", drop_overmemory "), "{out}");
    assert!(out.contains("packets per driver call: "), "{out}");
    assert!(out.contains("conservation: ok"), "{out}");
    // Without the table, net.core.default_qdisc decides.
    let plain = write(dir.path(), "plain", &base.replacen("[ports.qdisc]\nkind = \"pfifo_fast\"\n", "", 1));
    let o = run(&["run", "--config", &plain, "--seconds", "0.2", "--set", "net.core.default_qdisc=bfifo"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("qdisc bfifo on nic0: sent "), "{out}");
}

/// (tx, tx handoffs) per worker from the summary's worker table.
fn worker_tx_and_handoffs(o: &Output) -> Vec<(u64, u64)> {
    let out = String::from_utf8_lossy(&o.stdout);
    let mut lines = out.lines().skip_while(|l| !l.starts_with("worker ")).skip(1);
    let mut v = Vec::new();
    while let Some(l) = lines.next().filter(|l| l.split_whitespace().next().is_some_and(|w| w.parse::<usize>().is_ok())) {
        let w: Vec<u64> = l.split_whitespace().take(6).map(|x| x.parse().unwrap()).collect();
        v.push((w[4], w[5]));
    }
    v
}

#[test]
fn two_workers_share_one_tx_queue_by_handoff_or_get_one_each_with_mq() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(example()).unwrap().replacen("pool_frames = 512", "pool_frames = 8192", 1);
    let two_gen_queues = base.replacen("kind = \"gen\"", "kind = \"gen\"\nrss_queues = 2", 1);
    // One NIC queue: worker 1 hands what it forwards to worker 0, which runs the one qdisc.
    let one = write(dir.path(), "one", &two_gen_queues.replacen("kind = \"sim\"", "kind = \"sim\"\nrss_queues = 1", 1));
    let o = run(&["run", "--config", &one, "--seconds", "0.5"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("conservation: ok"), "{out}");
    assert!(out.contains(" rfs moves  squeeze    cpu s"), "softnet_stat-like columns per worker: {out}");
    let w = worker_tx_and_handoffs(&o);
    assert_eq!(w.len(), 2, "{out}");
    assert!(w[1].1 > 0 && w[1].0 == 0, "worker 1 only hands off: {w:?}\n{out}");
    assert_eq!(w[0].1, 0);
    assert_eq!(out.matches("qdisc pfifo_fast on nic0: sent").count(), 1, "{out}");
    // mq: a queue (and qdisc) per worker, nothing handed over.
    let mq = write(dir.path(), "mq", &two_gen_queues.replacen("kind = \"sim\"", "kind = \"sim\"\nrss_queues = 2", 1));
    let o = run(&["run", "--config", &mq, "--seconds", "0.5"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("conservation: ok"), "{out}");
    let w = worker_tx_and_handoffs(&o);
    assert!(w.iter().all(|&(tx, h)| tx > 0 && h == 0), "each worker sends on its own queue: {w:?}\n{out}");
    for q in 0..2 {
        assert!(out.contains(&format!("qdisc pfifo_fast on nic0 tx queue {q}: sent")), "{out}");
    }
}

#[test]
fn bad_qdisc_settings_are_refused_by_name() {
    let cfg = example();
    refused(&["run", "--config", &cfg, "--set", "net.core.default_qdisc=sfq"], "net.core.default_qdisc");
    refused(&["run", "--config", &cfg, "--set", "qdisc.bulk=2"], "qdisc.bulk");
    refused(&["run", "--config", &cfg, "--set", "txqueuelen=0"], "txqueuelen");

    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(&cfg).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("kind", "kind = \"pfifo_fast\"", "kind = \"fq_codle\""),
        ("flows", "kind = \"pfifo_fast\"", "kind = \"fq_codel\"\nflows = 0"),
        ("only", "kind = \"pfifo_fast\"", "kind = \"pfifo\"\necn = true"),
        ("memory", "kind = \"pfifo_fast\"", "kind = \"bfifo\"\nmemory_limit = 4096"),
        ("limit", "kind = \"pfifo_fast\"", "kind = \"bfifo\"\nlimit = 0"),
        ("unknown", "kind = \"pfifo_fast\"", "kind = \"pfifo\"\nburst = 3"),
        ("rate", "rate_gbps = 10.0", "rate_gbps = 0.0"),
        ("ring", "ring = 512", "ring = 1"),
    ];
    let expect = [
        "ports[1] (nic0).qdisc.kind: unknown qdisc `fq_codle`",
        "ports[1] (nic0).qdisc.flows",
        "ports[1] (nic0).qdisc.ecn: only fq_codel",
        "ports[1] (nic0).qdisc.memory_limit: only fq_codel",
        "ports[1] (nic0).qdisc.limit",
        "burst",
        "ports[1] (nic0).sim.rate_gbps",
        "ports[1] (nic0).sim.ring",
    ];
    for ((name, from, to), needle) in cases.iter().zip(expect) {
        assert!(base.contains(from));
        let p = write(dir.path(), name, &base.replacen(from, to, 1));
        refused(&["run", "--config", &p, "--seconds", "0.1"], needle);
    }
}

#[test]
fn a_nic_models_wire_fills_its_rx_ring_and_arrivals_past_it_are_missed_outside_the_ledger() {
    // examples/nic.toml at 100 Gbit/s: 148.8 Mpps of 64-byte frames arrive, far more than
    // one core forwards, so the 512-descriptor rx ring overflows.
    let cfg = format!("{}/examples/nic.toml", env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let fast = write(dir.path(), "fast", &std::fs::read_to_string(&cfg).unwrap().replacen("rate_gbps = 10.0", "rate_gbps = 100.0", 1));
    let o = run(&["run", "--config", &fast, "--seconds", "0.3", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["conservation"], serde_json::json!({"Ok": null}), "{}", r["conservation"]);
    let nic0 = &r["ports"][0][1];
    let (rx, missed) = (nic0["rx_packets"].as_u64().unwrap(), nic0["rx_missed"].as_u64().unwrap());
    assert!(rx > 1000 && missed > rx, "rx {rx}, missed {missed}");
    assert_eq!(r["counters"]["rx"].as_u64().unwrap(), rx, "missed frames never entered the datapath");
    assert!(r["ports"][1][1]["tx_packets"].as_u64().unwrap() > 0, "forwarded out of nic1");
    // nic1's BQL sampled over the run.
    let samples = r["qdiscs"][0]["bql_trace"]["samples"].as_array().unwrap();
    assert!(samples.len() > 10, "{} BQL samples", samples.len());
    assert!(samples.windows(2).all(|w| w[0]["t_ns"].as_u64() < w[1]["t_ns"].as_u64()));
    assert!(samples.iter().any(|s| s["limit"].as_u64().unwrap() > 0), "the limit grew from 0");
    // The text summary names the column and the trace.
    let o = run(&["run", "--config", &cfg, "--seconds", "0.2"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("rx-missed") && out.contains("BQL over time:"), "{out}");
    let base = std::fs::read_to_string(&cfg).unwrap();
    let bad = write(dir.path(), "ring", &base.replacen("rx_ring = 512", "rx_ring = 0", 1));
    refused(&["run", "--config", &bad, "--seconds", "0.1"], "ports[0] (nic0).sim.rx_ring");
    let rr = write(dir.path(), "rr", &base.replacen("flows = 64", "flows = 64\nrequest_response = true", 1));
    refused(&["run", "--config", &rr, "--seconds", "0.1"], "ports[0] (nic0).gen.request_response");
}

fn write(dir: &Path, name: &str, toml: &str) -> String {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, toml).unwrap();
    p.display().to_string()
}
