//! Receive Packet Steering on two workers (threads): thousands of flows from one port are
//! spread over the workers by flow hash, each flow's packets keep their order, a full
//! backlog and the flow limit drop with their names, the ledger balances over all workers
//! and no buffer leaks.

mod common;

use common::*;
use sluice::buf::Pool;
use sluice::napi::RunLimit;
use sluice::stats::DropReason;
use std::collections::HashMap;
use std::time::Duration;

/// `flows` UDP flows (source port = flow) to DST1, `per_flow` packets each, interleaved
/// round-robin; the payload carries the packet's number within its flow.
fn flows(flows: u16, per_flow: u32) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for seq in 0..per_flow {
        for f in 0..flows {
            out.push(udp4(SRC_V4, DST1_V4, 10_000 + f, 9).seq(seq).build());
        }
    }
    out
}

/// (flow, seq) of a forwarded frame.
fn flow_seq(f: &[u8]) -> (u16, u32) {
    let sport = u16::from_be_bytes([f[34], f[35]]);
    (sport, u32::from_be_bytes([f[42], f[43], f[44], f[45]]))
}

fn rps_setup(cpus: &str) -> Setup {
    let mut s = Setup { pool_frames: 16384, ..Setup::default() };
    s.tun.set("rps_cpus", cpus).expect("two CPUs");
    s
}

/// Runs on the router with several workers and returns the outcome plus each worker's counters.
fn run_rps(frames: &[Vec<u8>], setup: &Setup) -> (Outcome, Vec<sluice::stats::Counters>) {
    let pool = Pool::new(setup.pool_frames).expect("pool");
    let mut dp = build_router(frames.to_vec(), setup, &pool);
    assert_eq!(dp.workers.len(), 2);
    dp.run_until(&RunLimit::default(), Duration::ZERO, |_, _| {});
    finish(&mut dp, frames.len());
    let per_worker = dp.workers.iter().map(|w| w.c.clone()).collect();
    let out = Outcome {
        out: dp.ports().map(|p| p.captured().expect("capture").to_vec()).collect(),
        sockets: Vec::new(),
        c: dp.counters(),
        neigh4: Default::default(),
        neigh6: Default::default(),
    };
    (out, per_worker)
}

#[test]
fn rps_spreads_flows_over_workers_and_keeps_each_flows_order() {
    for listified in [true, false] {
        let frames = flows(2000, 4);
        // A backlog that holds everything: this test is about order, not overflow.
        let mut setup = rps_setup("0-1").listified(listified);
        setup.tun.netdev_max_backlog = 100_000;
        let (o, w) = run_rps(&frames, &setup);
        assert_eq!(o.c.tx, frames.len() as u64, "every packet forwarded: {:?}", o.drops());
        assert!(w[0].rps_steered > 1000 && w[1].backlog_processed == w[0].rps_steered, "{} {}", w[0].rps_steered, w[1].backlog_processed);
        assert!(w[1].backlog_processed < frames.len() as u64, "worker 0 keeps its own flows");
        assert!(w[0].rps_wakeups > 0 && w[0].rps_wakeups <= w[0].napi_polls, "at most one wake-up per round");
        // Per flow, the packets leave in order.
        let mut next: HashMap<u16, u32> = HashMap::new();
        for f in o.port(P_OUT1) {
            let (flow, seq) = flow_seq(f);
            let want = next.entry(flow).or_insert(0);
            assert_eq!(seq, *want, "flow {flow} out of order");
            *want += 1;
        }
        assert_eq!(next.len(), 2000);
    }
}

#[test]
fn a_full_backlog_drops_with_its_name() {
    // A tiny backlog and a slow target: worker 1 cannot keep up with what worker 0 steers.
    let mut setup = rps_setup("1");
    setup.tun.netdev_max_backlog = 4;
    setup.tun.extra_work = 20_000;
    let frames = flows(64, 40);
    let (o, w) = run_rps(&frames, &setup);
    let dropped = o.dropped(DropReason::CpuBacklog);
    assert!(dropped > 0, "{:?}", o.drops());
    assert_eq!(o.c.tx + dropped, frames.len() as u64, "the rest forwarded: {:?}", o.drops());
    assert_eq!(w[0].dropped(DropReason::CpuBacklog), dropped, "the producer counts the drop");
}

#[test]
fn the_flow_limit_drops_the_elephant_not_the_mice() {
    // Every packet goes to worker 1, whose backlog applies the flow limit; one flow sends 9 in 10
    // packets. Past half a full backlog the elephant is dropped and the mice pass.
    let mut setup = rps_setup("1");
    setup.tun.set("net.core.flow_limit_cpu_bitmap", "1").unwrap();
    setup.tun.netdev_max_backlog = 64;
    setup.tun.extra_work = 5_000;
    let mut frames = Vec::new();
    for i in 0..4000u32 {
        let sport = if i % 10 == 9 { 20_000 + (i % 200) as u16 } else { 7 };
        frames.push(udp4(SRC_V4, DST1_V4, sport, 9).seq(i).build());
    }
    let (o, _) = run_rps(&frames, &setup);
    let limited = o.dropped(DropReason::CpuBacklogFlowLimit);
    assert!(limited > 0, "{:?}", o.drops());
    let mice_out = o.port(P_OUT1).iter().filter(|f| flow_seq(f).0 != 7).count();
    let mice_in = frames.iter().filter(|f| flow_seq(f).0 != 7).count();
    let mice_backlog_drops = mice_in - mice_out;
    assert!(
        (mice_backlog_drops as u64) < limited / 4,
        "the flow limit hits the elephant: {mice_backlog_drops} mice lost, {limited} limited"
    );
}

#[test]
fn bad_rps_settings_are_refused_by_name() {
    let mut t = sluice::tunables::Tunables::default();
    let e = t.set("rps_cpus", "0-4096").unwrap_err().to_string();
    assert!(e.contains("rps_cpus") && e.contains("not present"), "{e}");
    assert!(t.set("rps_cpus", "1-0").unwrap_err().to_string().contains("backwards"));
    assert!(t.set("rps_cpus", "x").is_err());
    t.set("rps_cpus", "none").unwrap();
    assert_eq!(t.rps_cpus, 0);
    t.set("rps_cpus", "0x1").unwrap();
    assert_eq!(t.rps_cpus, 1);
}
