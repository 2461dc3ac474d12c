//! rps.txt: 500 netperf TCP_RR instances through one receive queue; RPS spreads protocol
//! processing over the CPUs: e1000e, 8 cores, 108K → 311K transactions/s (×2.9).
//! sluice: one port polled by worker 0, l3fwd over 1024 flows; one worker vs RPS over two
//! (`rps_cpus=0-1`) vs RSS with two queues (`rss_queues=2`), with a heavy per-packet cost
//! (the case RPS is for) and with the plain router (the seed's caveat: steering costs
//! something per packet).

use crate::bench::experiment::{Arm, Comparison, Experiment, SeedFigure};
use crate::bench::BenchError;
use crate::config::{self, Config, PortKind};
use crate::datapath::Pipeline;
use crate::port::gen::IpVersion;

/// Busy-loop iterations per packet for the heavy workload: about 250 ns of work, enough to
/// make one worker the bottleneck (like protocol processing of TCP_RR on the seed's CPUs).
const HEAVY_WORK: u32 = 150;

fn router() -> Result<Config, BenchError> {
    let mut c = config::lab(Pipeline::L3fwd);
    let gen = c.ports.get_mut(0).and_then(|p| p.gen.as_mut()).ok_or_else(|| BenchError::Experiment("lab has no generator".into()))?;
    gen.ip = IpVersion::V4;
    gen.flows = 1024;
    gen.burst = 1;
    gen.size = crate::port::gen::FrameSize::Fixed(60);
    let sink = c.ports.get_mut(1).ok_or_else(|| BenchError::Experiment("lab has no sink".into()))?;
    sink.kind = PortKind::Null;
    sink.check = None;
    Ok(c)
}

/// The router for RPS: one receive queue whose NIC supplies the RSS hash (as most do, even
/// with one queue), and a sink with a transmit queue per worker (XPS), so the RPS target
/// sends what it processed itself instead of handing it back to worker 0.
fn router_rps() -> Result<Config, BenchError> {
    let mut c = router()?;
    c.ports[0].rx_hash = Some(true);
    c.ports[1].rss_queues = Some(2);
    Ok(c)
}

/// Request/response clients (netperf TCP_RR-like over UDP): the generator is 500 clients,
/// each with one 1-byte request outstanding to the router's UDP echo service (port 7),
/// sending its next when the answer comes back out of the generator's port. One receive
/// queue whose NIC supplies the hash.
pub const RR_FLOWS: u32 = 500;

pub fn request_response() -> Result<Config, BenchError> {
    let mut c = config::lab(Pipeline::Local);
    c.ports[0].rx_hash = Some(true);
    let gen = c.ports.get_mut(0).and_then(|p| p.gen.as_mut()).ok_or_else(|| BenchError::Experiment("lab has no generator".into()))?;
    gen.ip = IpVersion::V4;
    gen.flows = RR_FLOWS;
    gen.burst = 1;
    // Ethernet + IPv4 + UDP + 1 byte of request.
    gen.size = crate::port::gen::FrameSize::Fixed(14 + 20 + 8 + 1);
    gen.dst_port = 7;
    gen.request_response = true;
    Ok(c)
}

pub fn build() -> Result<Experiment, BenchError> {
    let r = router()?;
    let r_rps = router_rps()?;
    let r_rps_busy = r_rps.clone();
    let rr = request_response()?;
    let heavy = format!("rx.extra_work={HEAVY_WORK}");
    // A backlog deep enough that worker 0 rarely outruns worker 1 between wake-ups.
    let backlog = "net.core.netdev_max_backlog=8192";
    Ok(Experiment {
        name: "rps",
        title: "Receive Packet Steering (rps.txt)".into(),
        description: format!(
            "One port (the in-memory generator, 1024 UDP/IPv4 flows of 64-byte frames) polled by worker 0 through \
             the l3fwd pipeline into a null sink. **1 worker**: everything on one thread. **RPS 0-1**: worker 0 \
             polls, builds metadata, hashes each flow and keeps its flows or appends them to worker 1's backlog \
             (a second pinned thread, woken at most once per round); worker 1 runs the receive path on its share \
             and sends it on its own transmit queue of the sink (XPS); the port supplies the RSS hash. **RSS 2 queues**: the generator's port has two receive \
             queues (Toeplitz hash, 128-entry indirection table) and the sink two transmit queues, a worker per \
             queue, each running the whole path on its share (no steering, no handoff). The **heavy** arms add `rx.extra_work={HEAVY_WORK}` per \
             packet (a dependent busy loop in the receive path: protocol work that RPS can spread); the **light** \
             arms are the plain router. Mpps counts packets that entered processing (received minus backlog \
             drops). **Request/response** (the seed's workload, netperf TCP_RR-like): the generator is {RR_FLOWS} \
             clients with one 1-byte UDP request outstanding each to the router's UDP echo service through one \
             receive queue; a client sends its next request when the answer leaves through the generator's port \
             (closed loop), so Mpps = requests/s ≈ transactions/s; latency is send to answer (one clock read per \
             burst each way), CPU per transaction sums every worker's thread time."
        ),
        arms: vec![
            Arm::sluice("heavy-1", "heavy, 1 worker", r.clone(), &[&heavy]),
            Arm::sluice("heavy-rps", "heavy, RPS 0-1", r_rps.clone(), &[&heavy, "rps_cpus=0-1", backlog]),
            Arm::sluice("heavy-rss", "heavy, RSS 2 queues", r.clone(), &[&heavy, "rss_queues=2"]),
            Arm::sluice("light-1", "light, 1 worker", r.clone(), &[]),
            Arm::sluice("light-rps", "light, RPS 0-1", r_rps, &["rps_cpus=0-1", backlog]),
            Arm::sluice("rr-1", "request/response, 1 worker", rr.clone(), &[]),
            Arm::sluice("rr-rps", "request/response, RPS 0-1", rr.clone(), &["rps_cpus=0-1"]),
            Arm::sluice("rr-rps-busy", "request/response, RPS 0-1, busy_poll 50 µs", rr, &["rps_cpus=0-1", "net.core.busy_poll=50"]),
            // The idle target spins instead of sleeping, so the polling worker pays no
            // wake-ups (a futex wake of a halted vCPU costs it ≈ 10 µs in a VM).
            Arm::sluice(
                "heavy-rps-busy",
                "heavy, RPS 0-1, busy_poll 50 µs",
                r_rps_busy,
                &[&heavy, "rps_cpus=0-1", backlog, "net.core.busy_poll=50"],
            ),
        ],
        comparisons: vec![
            Comparison { a: 0, b: 1, title: "heavy per-packet work: RPS over 2 workers vs 1 worker".into(), ratio: true },
            Comparison { a: 0, b: 2, title: "heavy per-packet work: RSS over 2 queues (2 workers) vs 1 worker".into(), ratio: true },
            Comparison { a: 3, b: 4, title: "plain router: RPS over 2 workers vs 1 worker".into(), ratio: true },
            Comparison { a: 5, b: 6, title: "request/response (500 clients, 1-byte UDP echo): RPS over 2 workers vs 1 worker".into(), ratio: true },
            Comparison { a: 6, b: 7, title: "request/response on RPS 0-1: busy polling 50 µs vs sleeping idle workers".into(), ratio: true },
            Comparison { a: 0, b: 8, title: "heavy per-packet work: RPS over 2 workers with busy polling 50 µs vs 1 worker".into(), ratio: true },
            Comparison { a: 1, b: 8, title: "heavy per-packet work on RPS 0-1: busy polling 50 µs vs sleeping idle workers".into(), ratio: true },
        ],
        seed: Some(SeedFigure {
            file: "rps.txt",
            setup: "500 netperf TCP_RR, 1-byte request and response, e1000e (one queue), 8-core Intel",
            baseline_label: "without RPS",
            baseline: 108.0,
            result_label: "with RPS",
            result: 311.0,
            stated_change_pct: None,
            unit: "K transactions/s",
            comparison: 3,
        }),
        cap: None,
        default_runs: 6,
        quick_runs: None,
        sweep: None,
        notes: vec![
            "This machine has 2 cores: the seed's 8 cores scale further. The light arms show the seed's caveat: with \
             little work per packet, hashing, queueing across cores and the wake-ups cost more than the second core \
             gains."
                .into(),
            "The generator runs on worker 0's thread: its cost is part of worker 0's share (as a NIC's interrupt and \
             DMA work lands on the CPU that polls the queue)."
                .into(),
        ],
    })
}
