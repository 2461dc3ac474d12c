//! sluice's `io` forward (examples/io.toml: two generator ports, each forwarding what it
//! receives to the other, untouched) against DPDK's `dpdk-testpmd` io forward between two
//! `net_null` virtual devices on one forwarding core.

use crate::bench::experiment::{Arm, ArmKind, Comparison, Experiment};
use crate::bench::BenchError;
use crate::config::Config;

/// examples/io.toml, compiled in so the benchmark does not depend on the working directory.
const IO_TOML: &str = include_str!("../../../examples/io.toml");

/// The testpmd command line (stdin comes from /dev/null).
pub const TESTPMD_ARGS: &[&str] = &[
    "--no-huge",
    "-m",
    "512",
    "--no-shconf",
    "--no-pci",
    "--vdev",
    "net_null0",
    "--vdev",
    "net_null1",
    "-l",
    "0-1",
    "--",
    "--total-num-mbufs=16384",
    "--stats-period",
    "1",
];

pub fn build() -> Result<Experiment, BenchError> {
    let cfg = Config::from_toml(IO_TOML, "examples/io.toml").map_err(|e| BenchError::Experiment(e.to_string()))?;
    Ok(Experiment {
        name: "io",
        title: "io forward: sluice vs dpdk-testpmd".into(),
        description: "Both forward every packet received on one port out of the other, untouched, on one core. \
             **sluice**: the `io` pipeline with examples/io.toml's two generator ports peered to each other \
             (64-byte frames). **testpmd**: `dpdk-testpmd` io forwarding between two `net_null` vdevs, one \
             forwarding lcore; its rate is read from the `Rx-pps:` lines of `--stats-period 1` after the warm-up \
             and the process is stopped with SIGINT."
            .into(),
        arms: vec![
            Arm {
                name: "testpmd".into(),
                label: "dpdk-testpmd io".into(),
                kind: ArmKind::Testpmd { program: "dpdk-testpmd".into(), args: TESTPMD_ARGS.iter().map(|s| s.to_string()).collect() },
                x: None,
                series: None,
                rate_is_tx: false,
            },
            Arm::sluice("sluice-io", "sluice io", cfg, &[]),
        ],
        comparisons: vec![Comparison { a: 0, b: 1, title: "sluice io vs testpmd io".into(), ratio: true }],
        seed: None,
        cap: None,
        default_runs: 5,
        quick_runs: None,
        sweep: None,
        notes: vec![
            "Like with like: testpmd prints `Rx-pps` per port; with two ports forwarding to each other on one core \
             its total forwarding rate is the sum of both ports (≈ 2 × the per-port figure). sluice's figure is \
             likewise the sum over its two ports (all packets received by the worker)."
                .into(),
            "testpmd's `net_null` rx hands out mbufs without writing packet data and its tx frees them; sluice's \
             generator copies a 60-byte template into every buffer, so sluice does strictly more memory work per \
             packet."
                .into(),
            "testpmd reports once a second, so each testpmd run measures whole seconds (at least one period); its \
             EAL start-up is not measured. Its CPU time is that of its forwarding thread (`*worker*` in \
             /proc/PID/task, 10 ms clock ticks) over the measured periods."
                .into(),
            "testpmd runs with `--no-huge` (mbufs on 4 KiB pages, so more TLB misses than with hugepages) and its \
             forwarding thread is pinned to lcore 1, so on a busy machine it cannot move away from other load \
             while sluice's thread can: compare the CPU ns/packet columns as well as the rates."
                .into(),
        ],
    })
}
