//! The harness's self-test: A against an identical A' (must show no significant
//! difference), A against A + `rx.extra_work` (a real per-packet cost: must show B slower),
//! and an `rx.extra_work` sweep (ns/packet must grow linearly with it).

use crate::bench::experiment::{Arm, Comparison, Experiment, Sweep};
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
        sweep: Some(Sweep { x_label: "rx.extra_work (LCG iterations per packet)".into(), metric: "cpu_ns_per_packet" }),
        notes: vec![],
    })
}
