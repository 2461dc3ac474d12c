//! The experiment registry: name → builder. New experiments are one file each and one line
//! in [`registry`]; `sluice bench all` picks them up.

mod gro;
mod io;
mod listify;
pub mod qdisc;
mod rps;
mod selfcheck;
pub use selfcheck::health as selfcheck_health;
mod xdp;

use super::experiment::Builder;

/// The experiments of the five seed documents, in the order `all` runs them.
pub const SEED_EXPERIMENTS: &[&str] = &["listify", "gro", "xdp", "qdisc", "rps"];

/// Every registered experiment: (name, one-line summary, builder).
pub fn registry() -> Vec<(&'static str, &'static str, Builder)> {
    vec![
        ("listify", "listified receive vs one packet at a time (listified-receive.txt), l3fwd, 2 traffic shapes", listify::build),
        ("io", "sluice's io forward vs dpdk-testpmd's io forward on two null ports", io::build),
        ("xdp", "native vs generic XDP, DROP/TX x no_touch/read, JIT vs interpreter (generic-xdp-eval.rst)", xdp::build),
        ("rps", "receive packet steering over 2 workers vs 1, heavy and light per-packet work (rps.txt)", rps::build),
        ("selfcheck", "harness self-test: A vs identical A', A vs A + rx.extra_work, and an extra_work sweep", selfcheck::build),
        ("gro", "GRO on/off for TCP streams (GSO on egress) and the gro_normal_batch sweep (gro-normal-batch.txt)", gro::build),
        ("qdisc", "qdisc bulk dequeue off vs on, pfifo_fast into a 10G NIC model (qdisc-bulk-dequeue.txt)", qdisc::build),
    ]
}

/// Looks an experiment up by name.
pub fn find(name: &str) -> Option<Builder> {
    registry().into_iter().find(|(n, _, _)| *n == name).map(|(_, _, b)| b)
}

/// What `all` runs: the seed experiments that exist, then the other registered ones; and
/// the seed experiments that do not exist yet.
pub fn all() -> (Vec<&'static str>, Vec<&'static str>) {
    let reg = registry();
    let has = |n: &str| reg.iter().any(|(r, _, _)| *r == n);
    let mut run: Vec<&'static str> = SEED_EXPERIMENTS.iter().copied().filter(|n| has(n)).collect();
    let missing: Vec<&'static str> = SEED_EXPERIMENTS.iter().copied().filter(|n| !has(n)).collect();
    for (n, _, _) in &reg {
        if !run.contains(n) {
            run.push(n);
        }
    }
    (run, missing)
}
