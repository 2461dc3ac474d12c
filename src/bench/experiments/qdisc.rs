//! qdisc-bulk-dequeue.txt: trafgen through the qdisc into a 10G ixgbe: 12.8 Mpps without
//! bulk dequeue (a doorbell per packet), 14.8 Mpps (wire speed) with it.
//! sluice: 64-byte frames from the generator, forwarded (io) through `pfifo_fast` into the NIC
//! model at 10 Gbit/s with a 100 ns doorbell, `qdisc.bulk` 0 vs 1.

use crate::bench::experiment::{Arm, Comparison, Experiment, SeedFigure};
use crate::bench::BenchError;
use crate::config::Config;

/// 10 Gbit/s line rate for 60-byte frames (64 with FCS): 10e9 / ((64 + 20) × 8) packets/s.
pub const LINE_RATE_10G_64B_MPPS: f64 = 10_000.0 / (84.0 * 8.0);

/// examples/qdisc.toml, compiled in: the generator (64 flows of 64-byte frames) forwarded
/// into the NIC model through pfifo_fast. Its pool (512 frames) is the sender's socket
/// buffer: a buffer comes back only when the NIC completes it, so the sender waits for the
/// wire as trafgen does and the received rate is the transmitted rate.
const QDISC_TOML: &str = include_str!("../../../examples/qdisc.toml");

pub fn config() -> Result<Config, BenchError> {
    Config::from_toml(QDISC_TOML, "examples/qdisc.toml").map_err(|e| BenchError::Experiment(e.to_string()))
}

/// The lab sent from two workers: the generator with two receive queues (RSS), each worker
/// forwarding its own, into the NIC model with `nic_queues` transmit queues: one (the other
/// worker hands its packets to the queue's owner, which alone runs the qdisc) or one per
/// worker (`mq` with an XPS-like map: no contention). The pool no longer paces the sender
/// (per-worker buffer caches would let one worker hoard a 512-frame pool): the generators
/// offer the line rate between them, what the qdisc cannot take is dropped there, and the
/// arm is rated by what it transmitted.
pub fn config_two_workers(nic_queues: u16) -> Result<Config, BenchError> {
    let mut cfg = config()?;
    cfg.pool_frames = 8192;
    for p in cfg.ports.iter_mut() {
        p.rss_queues = Some(if p.name == "gen0" { 2 } else { nic_queues });
        if let Some(g) = p.gen.as_mut() {
            g.rate_pps = Some(LINE_RATE_10G_64B_MPPS * 1e6);
        }
    }
    Ok(cfg)
}

pub fn build() -> Result<Experiment, BenchError> {
    let cfg = config()?;
    Ok(Experiment {
        name: "qdisc",
        title: "Qdisc bulk dequeue into a 10G NIC model (qdisc-bulk-dequeue.txt)".into(),
        description: "The generator's 64-byte UDP/IPv4 frames (64 flows) forwarded untouched (`io`) through the port's \
             `pfifo_fast` into the NIC model (`kind = \"sim\"`): a 512-descriptor ring sent at 10 Gbit/s (84 bytes \
             on the wire per frame: 14.88 Mpps), completions reaped 32 at a time or after 8 µs, BQL in the driver, \
             a doorbell busy-waiting 100 ns (an uncached MMIO write). `qdisc.bulk=0`: every dequeue hands the \
             driver one packet, so every packet rings the doorbell (the seed's 12.8 Mpps). `qdisc.bulk=1`: each \
             dequeue takes as many packets as `dql_avail()` allows and hands them over in one call with \
             `xmit_more`, one doorbell per bulk. The pool (512 frames) plays the sender's socket buffer, so \
             the generator waits for completions and the received rate is the transmitted one; runs at line \
             rate are censored at 14.88 Mpps."
            .into(),
        arms: vec![
            Arm::sluice("bulk-off", "pfifo_fast, no bulking", cfg.clone(), &["qdisc.bulk=0"]),
            Arm::sluice("bulk-on", "pfifo_fast, bulk dequeue (BQL)", cfg, &["qdisc.bulk=1"]),
            Arm::sluice("2w-1q-off", "2 workers, 1 tx queue, no bulking", config_two_workers(1)?, &["qdisc.bulk=0"]).rated_by_tx(),
            Arm::sluice("2w-1q-on", "2 workers, 1 tx queue, bulk dequeue", config_two_workers(1)?, &["qdisc.bulk=1"]).rated_by_tx(),
            Arm::sluice("2w-mq-on", "2 workers, mq (a tx queue each), bulk", config_two_workers(2)?, &["qdisc.bulk=1"]).rated_by_tx(),
        ],
        comparisons: vec![
            Comparison { a: 0, b: 1, title: "bulk dequeue vs one packet per dequeue".into(), ratio: true },
            Comparison { a: 2, b: 3, title: "from all workers: bulk dequeue vs one packet per dequeue".into(), ratio: true },
            Comparison { a: 3, b: 4, title: "from all workers: mq + XPS vs one contended queue".into(), ratio: true },
        ],
        seed: Some(SeedFigure {
            file: "qdisc-bulk-dequeue.txt",
            setup: "trafgen --qdisc-path, 12 CPUs, ixgbe 10G, 64-byte frames",
            baseline_label: "no bulking",
            baseline: 12.8,
            result_label: "bulking (wire speed)",
            result: 14.8,
            stated_change_pct: None,
            unit: "Mpps",
            comparison: 0,
        }),
        cap: Some(LINE_RATE_10G_64B_MPPS),
        default_runs: 6,
        quick_runs: None,
        sweep: None,
        notes: vec![
            "The first two arms send from one worker; the `2w` arms from two (the seed used 12 CPUs contending \
             for one qdisc): with one transmit queue the second worker hands its packets to the queue's owner, \
             which alone runs the qdisc (`tx handoffs` per worker count the contention); with `mq` each worker \
             has its own queue, ring and BQL on the one 10G wire."
                .into(),
            "The doorbell cost is a busy wait in the NIC model, so it is CPU time: without bulking it bounds the \
             rate at about 1 / (100 ns + the per-packet work)."
                .into(),
            "Doorbells per packet are in each run's `doorbells` / `tx_packets` (results.json) and in the arms' \
             doorbell line below the table."
                .into(),
        ],
    })
}
