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
        // Worker 1 polls no port: all it receives comes from its backlog, as lists exactly
        // when receive is listified.
        assert_eq!(w[1].rx_lists > 0, listified, "the backlog's packets go through the receive path chosen");
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
    // Every packet goes to worker 1; worker 0, which polls the port and queues them, applies
    // the flow limit (the bitmap names the enqueuing CPU, as skb_flow_limit reads this CPU's
    // table); one flow sends 9 in 10 packets. Past half a full backlog the elephant is dropped
    // and the mice pass (worker 0 polls far faster than the slowed worker 1 drains: once the
    // backlog is half full, only the mice get in, and it never fills). A full backlog drops
    // before the flow limit looks (enqueue_to_backlog tests qlen first).
    let mut setup = rps_setup("1");
    setup.tun.set("net.core.flow_limit_cpu_bitmap", "0x1").unwrap();
    setup.tun.netdev_max_backlog = 2000;
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
    // The target's bit alone limits nothing: worker 1 enqueues nothing on any backlog.
    setup.tun.set("net.core.flow_limit_cpu_bitmap", "1").unwrap();
    let (o, _) = run_rps(&frames, &setup);
    assert_eq!(o.dropped(DropReason::CpuBacklogFlowLimit), 0, "{:?}", o.drops());
    assert!(o.dropped(DropReason::CpuBacklog) > 0, "the full backlog still drops: {:?}", o.drops());
    // The default bitmap is empty: no CPU limits flows.
    let mut setup = rps_setup("1");
    setup.tun.netdev_max_backlog = 2000;
    setup.tun.extra_work = 5_000;
    assert_eq!(setup.tun.flow_limit_cpu_bitmap, 0, "the kernel's default");
    let (o, _) = run_rps(&frames, &setup);
    assert_eq!(o.dropped(DropReason::CpuBacklogFlowLimit), 0, "{:?}", o.drops());
    assert!(o.dropped(DropReason::CpuBacklog) > 0, "the full backlog drops: {:?}", o.drops());
}

/// After a run on two workers, reset_counters zeroes what the per-second lines read too
/// (the counters worker 1 published for them), not only each worker's own.
#[test]
fn reset_counters_zeroes_the_published_worker_counters() {
    let (c, tun) = rss_lab(64, 2, &[]);
    let mut dp = run_checked(&c, tun, 2_000);
    assert!(dp.net.rps.snapshot_sum().rx > 0, "worker 1 published its counters");
    dp.reset_counters();
    assert_eq!(dp.counters().rx, 0);
    assert_eq!(dp.net.rps.snapshot_sum().rx, 0);
}

/// Every worker's thread CPU time is read over a run, a lone worker's too (it was left
/// unset: the CLI's worker line showed none and `cpu_seconds` was None with one worker).
#[test]
fn a_run_reads_every_workers_cpu_time_one_worker_too() {
    for queues in [1, 2] {
        let (c, tun) = rss_lab(64, queues, &[]);
        let dp = run_checked(&c, tun, 2_000);
        assert_eq!(dp.workers.len(), queues as usize);
        assert!(dp.workers.iter().all(|w| w.cpu_time.is_some()) && dp.cpu_seconds().is_some(), "{queues} queue(s)");
    }
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
    // What `cat /sys/class/net/*/queues/rx-*/rps_cpus` prints reads back as that mask.
    t.set("rps_cpus", "00000001").unwrap();
    assert_eq!(t.rps_cpus, 1, "sysfs's 00000001 is CPU 0, not CPU 1");
    t.set("rps_cpus", "00000000,00000000").unwrap();
    assert_eq!(t.rps_cpus, 0);
    t.set("rps_cpus", "1").unwrap();
    assert_eq!(t.rps_cpus, 0b10, "a short number is still a CPU list");
    // flow_limit_table_len_sysctl: a power of two or EINVAL.
    let e = t.set("net.core.flow_limit_table_len", "1000").unwrap_err().to_string();
    assert!(e.contains("power of two"), "{e}");
    t.set("net.core.flow_limit_table_len", "1024").unwrap();
    assert_eq!(t.flow_limit_table_len, 1024);
}

// ---------------------------------------------------------------------------------------
// RSS: multi-queue ports, a worker per queue, XDP on every worker
// ---------------------------------------------------------------------------------------

use sluice::config::{self, Config, PortKind};
use sluice::datapath::{Datapath, Pipeline};

/// The lab router with a generator of `flows` TCP trains (per-flow sequence numbers), its
/// port split into `queues` RSS queues, into a capturing sink with as many transmit queues
/// (each worker sends on its own), with `sets` applied.
fn rss_lab(flows: u32, queues: u16, sets: &[&str]) -> (Config, sluice::config::Tunables) {
    let mut c = config::lab(Pipeline::L3fwd);
    c.ports[0].rss_queues = Some(queues);
    let g = c.ports[0].gen.as_mut().expect("lab generator");
    g.flows = flows;
    g.proto = sluice::port::gen::L4Proto::Tcp;
    g.tcp_train = 1;
    g.ip = sluice::port::gen::IpVersion::Mix;
    g.size = sluice::port::gen::FrameSize::Fixed(200);
    c.ports[1].kind = PortKind::Capture;
    c.ports[1].check = None;
    c.ports[1].rss_queues = Some(queues);
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let tun = c.tunables(&sets).expect("tunables");
    (c, tun)
}

/// Runs `packets` packets and checks what every multi-worker run must hold: the ledger over
/// all workers, no buffer left out, nothing in flight.
fn run_checked(c: &Config, tun: sluice::config::Tunables, packets: u64) -> Datapath {
    let pool = Pool::new(c.pool_frames).expect("pool");
    let mut dp = c.build(tun, &pool).expect("build");
    dp.run_until(&RunLimit { packets: Some(packets), ..Default::default() }, Duration::ZERO, |_, _| {});
    assert_eq!(dp.conservation(), Ok(()), "{:?}", dp.counters());
    assert_eq!(dp.in_flight(), 0);
    assert_eq!(dp.buffers_in_use(), 0, "leaked buffers");
    assert_eq!(dp.counters().rx, packets, "exactly the packet count, over all workers");
    dp
}

/// (flow key, TCP sequence) of every captured segment: source address bytes + ports.
fn tcp_flow_seqs(frames: &[Vec<u8>]) -> Vec<(Vec<u8>, u32)> {
    frames
        .iter()
        .map(|f| {
            let (l3, src_len, l4) = if f[12..14] == [0x08, 0x00] { (14, 4, 34) } else { (14, 16, 54) };
            let src = if src_len == 4 { &f[l3 + 12..l3 + 16] } else { &f[l3 + 8..l3 + 24] };
            let key = [src, &f[l4..l4 + 4]].concat();
            (key, u32::from_be_bytes([f[l4 + 4], f[l4 + 5], f[l4 + 6], f[l4 + 7]]))
        })
        .collect()
}

/// What port `i` sent, queue after queue (a flow leaves through one queue, so each flow's
/// frames stay in their order).
fn captured(dp: &Datapath, i: usize) -> Vec<Vec<u8>> {
    dp.port_queues(i).flat_map(|q| q.captured().expect("capture").to_vec()).collect()
}

fn assert_per_flow_order(frames: &[Vec<u8>]) -> usize {
    let mut last: HashMap<Vec<u8>, u32> = HashMap::new();
    for (key, seq) in tcp_flow_seqs(frames) {
        if let Some(prev) = last.insert(key.clone(), seq) {
            assert!(seq > prev, "flow {key:02x?}: segment {seq} after {prev}");
        }
    }
    last.len()
}

#[test]
fn rss_spreads_flows_over_two_queues_and_keeps_each_flows_order() {
    for listified in ["rx.listified=1", "rx.listified=0"] {
        let (c, tun) = rss_lab(3000, 2, &[listified]);
        let dp = run_checked(&c, tun, 30_000);
        assert_eq!(dp.workers.len(), 2, "a worker per queue");
        let rx: Vec<u64> = dp.workers.iter().map(|w| w.c.rx).collect();
        assert!(rx.iter().all(|&n| n > 5_000), "both queues received: {rx:?}");
        assert_eq!(dp.counters().tx, 30_000, "{:?}", dp.counters().nonzero_drops());
        let out = captured(&dp, 1);
        assert_eq!(out.len(), 30_000);
        assert!(assert_per_flow_order(&out) > 2_500, "thousands of flows came through");
        // The generator's queues split its flows by the Toeplitz hash: no flow on both.
        let stats = dp.port_stats(0);
        assert_eq!(stats.rx_packets, 30_000);
    }
}

#[test]
fn rss_and_rps_together_keep_order_and_balance_the_ledger() {
    let (c, tun) = rss_lab(2000, 2, &["rps_cpus=0-1", "net.core.netdev_max_backlog=100000"]);
    let dp = run_checked(&c, tun, 40_000);
    let c = dp.counters();
    assert_eq!(c.tx, 40_000, "{:?}", c.nonzero_drops());
    assert!(c.rps_steered > 0, "each worker steers the other's flows to it");
    assert!(dp.workers.iter().all(|w| w.c.backlog_processed > 0), "both backlogs were served");
    assert_per_flow_order(&captured(&dp, 1));
}

#[test]
fn xdp_runs_on_every_queue_with_shared_maps_and_per_worker_cpu() {
    let obj = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bpf/obj/xdp_drop_count.o");
    let (mut c, tun) = rss_lab(1000, 2, &[]);
    c.xdp = Some(toml::from_str(&format!("program = {:?}\nmode = \"native\"", obj.display().to_string())).expect("xdp table"));
    let dp = run_checked(&c, tun, 20_000);
    let counts: Vec<u64> = dp.workers.iter().map(|w| w.c.drops[DropReason::XdpDrop as usize]).collect();
    assert!(counts.iter().all(|&n| n > 0), "both workers ran the program: {counts:?}");
    // One map, written by both workers with locked atomics: the exact total.
    let maps_of = |w: usize| dp.workers[w].xdp.native[0].as_ref().and_then(|p| p.maps()).expect("an eBPF program on port 0");
    let maps = maps_of(0);
    assert!(std::sync::Arc::ptr_eq(&maps, &maps_of(1)), "the instances share their maps");
    // struct { u64 packets; u64 bytes; } at key 0.
    let rec = maps.by_name("drop_stats").expect("drop_stats").lookup(&0u32.to_ne_bytes(), 0).expect("key 0");
    let packets = u64::from_ne_bytes(rec[..8].try_into().unwrap());
    assert_eq!(packets, 20_000, "every packet counted once, none lost to a race");
}

/// XDP on both queues of the receiving port redirects every frame to the sink, a port of
/// one queue that worker 0 owns: worker 1's redirected frames reach it through the transmit
/// handoff (they were left in worker 1's XDP queue for good).
#[test]
fn xdp_redirects_to_a_port_another_worker_owns_are_handed_over() {
    let (mut c, tun) = rss_lab(1000, 2, &[]);
    c.ports[1].rss_queues = None;
    c.xdp = Some(toml::from_str("program = \"builtin:redirect=2\"\nmode = \"native\"").expect("xdp table"));
    let dp = run_checked(&c, tun, 20_000);
    let counts = dp.counters();
    // The generator outruns one sink: a full handoff queue drops by its name, nothing else.
    let handoff_full = counts.drops[DropReason::QdiscDrop as usize];
    assert_eq!(counts.tx + handoff_full, 20_000, "sent or dropped by name: {:?}", counts.nonzero_drops());
    assert!(dp.workers[1].c.rx > 0 && dp.workers[1].c.tx_handoffs > 0, "worker 1 received and handed frames over");
    // The handoff's owner, worker 0, has a queue of every port (pull_handoff relies on it).
    assert!((0..dp.net.ifaces.len() as u16).all(|i| dp.workers[0].port_queue(i).is_some()));
    assert!(dp.workers[1].port_queue(1).is_none(), "worker 1 has no queue of the one-queue port");
    assert_eq!(captured(&dp, 1).len() as u64, counts.tx);
    assert!(counts.tx > 10_000, "most frames went out: {}", counts.tx);
}

#[test]
fn bad_queue_settings_are_refused_by_name() {
    let mut t = sluice::config::Tunables::default();
    let e = t.set("rss_queues", "0").unwrap_err().to_string();
    assert!(e.contains("rss_queues"), "{e}");
    let mut c = config::lab(Pipeline::L3fwd);
    c.ports[0].rss_queues = Some(0);
    let pool = Pool::new(1024).unwrap();
    let e = c.build(Default::default(), &pool).err().expect("refused").to_string();
    assert!(e.contains("ports[0] (gen0).rss_queues") && e.contains("1 to 64"), "{e}");
    let mut c = config::lab(Pipeline::L3fwd);
    c.ports[0].rss_key = Some("6d:5a:56".into());
    let e = c.build(Default::default(), &pool).err().expect("refused").to_string();
    assert!(e.contains("rss_key") && e.contains("40 or 52 bytes"), "{e}");
    let mut c = config::lab(Pipeline::L3fwd);
    c.ports[0].rss_queues = Some(2);
    c.ports[0].rss_indir = Some(vec![3; 128]);
    let e = c.build(Default::default(), &pool).err().expect("refused").to_string();
    assert!(e.contains("rss_indir") && e.contains("queue 3"), "{e}");
    let mut c = config::lab(Pipeline::L3fwd);
    c.ports[1].kind = PortKind::PcapOut;
    c.ports[1].check = None;
    c.ports[1].pcap = Some(std::env::temp_dir().join(format!("sluice-rss-{}.pcap", std::process::id())));
    c.ports[1].rss_queues = Some(2);
    let e = c.build(Default::default(), &pool).err().expect("refused").to_string();
    assert!(e.contains("ports[1] (sink0).rss_queues") && e.contains("one queue"), "{e}");
}

/// `rps_cpus` per receive queue (sysfs `queues/rx-N/rps_cpus`): each of a port's two queues
/// steers by its own map, overriding the global `rps_cpus`.
#[test]
fn each_receive_queue_steers_by_its_own_rps_cpus() {
    let sets = ["rps_cpus=0-1", "net.core.netdev_max_backlog=100000"];
    // Queue 0 (worker 0) keeps everything, queue 1 (worker 1) sends everything to worker 0:
    // the global map would have spread both. Every packet goes through worker 0's backlog,
    // its own too (enqueue_to_backlog takes the local CPU's packets like the others').
    let (mut c, tun) = rss_lab(2000, 2, &sets);
    c.ports[0].rps_cpus = Some(vec!["0".into(), "0".into()]);
    let dp = run_checked(&c, tun, 30_000);
    let w = |i: usize| &dp.workers[i].c;
    assert!(w(0).rx > 5_000 && w(1).rx > 5_000, "both queues received");
    assert_eq!(w(0).rps_steered, 0, "queue 0's map is its own worker");
    assert_eq!(w(1).rps_steered, w(1).rx, "queue 1's map sends every flow to worker 0");
    assert_eq!((w(0).backlog_processed, w(1).backlog_processed), (w(0).rx + w(1).rx, 0));
    assert_eq!(dp.counters().tx, 30_000, "{:?}", dp.counters().nonzero_drops());
    assert_per_flow_order(&captured(&dp, 1));

    // Queue 0 to worker 1 only, queue 1 over both (by flow hash); no global map at all.
    let (mut c, tun) = rss_lab(2000, 2, &["net.core.netdev_max_backlog=100000"]);
    c.ports[0].rps_cpus = Some(vec!["1".into(), "0-1".into()]);
    let dp = run_checked(&c, tun, 30_000);
    let w = |i: usize| &dp.workers[i].c;
    assert_eq!(w(0).rps_steered, w(0).rx, "queue 0's map is worker 1 alone");
    assert!(w(1).rps_steered > 1_000 && w(1).rps_steered < w(1).rx - 1_000, "queue 1 spreads by hash: {} of {}", w(1).rps_steered, w(1).rx);
    assert_eq!(w(1).backlog_processed, w(0).rx + w(1).rx - w(1).rps_steered, "all of queue 0, and what queue 1 kept");
    assert_eq!(w(0).backlog_processed, w(1).rps_steered);
    assert_eq!(dp.counters().tx, 30_000, "{:?}", dp.counters().nonzero_drops());
    assert_per_flow_order(&captured(&dp, 1));

    // Queue 0 with RPS off ("none") under a global map of both workers: it keeps its
    // packets and processes them in its poll, no backlog; queue 1 spreads by the global map.
    let (mut c, tun) = rss_lab(2000, 2, &sets);
    c.ports[0].rps_cpus = Some(vec!["none".into(), "0-1".into()]);
    let dp = run_checked(&c, tun, 30_000);
    let w = |i: usize| &dp.workers[i].c;
    assert_eq!(w(0).rps_steered, 0, "queue 0 steers nothing");
    assert!(w(1).rps_steered > 1_000, "queue 1 spreads by the global map: {}", w(1).rps_steered);
    assert_eq!(w(0).backlog_processed, w(1).rps_steered, "worker 0's backlog held only what queue 1 sent it");
    assert_eq!(dp.counters().tx, 30_000, "{:?}", dp.counters().nonzero_drops());
    assert_per_flow_order(&captured(&dp, 1));
}

#[test]
fn bad_per_queue_rps_cpus_are_refused_by_name() {
    let pool = Pool::new(1024).unwrap();
    let refused = |maps: &[&str]| {
        let mut c = config::lab(Pipeline::L3fwd);
        c.ports[0].rss_queues = Some(2);
        c.ports[0].rps_cpus = Some(maps.iter().map(|m| m.to_string()).collect());
        c.build(Default::default(), &pool).err().expect("refused").to_string()
    };
    let e = refused(&["0-1"]);
    assert!(e.contains("ports[0] (gen0).rps_cpus") && e.contains("one per queue"), "{e}");
    let e = refused(&["0", "0-4096"]);
    assert!(e.contains("ports[0] (gen0).rps_cpus[1]") && e.contains("not present"), "{e}");
    let e = refused(&["", "0"]);
    assert!(e.contains("ports[0] (gen0).rps_cpus[0]"), "{e}");
    let e = refused(&["1-0", "0"]);
    assert!(e.contains("rps_cpus[0]") && e.contains("backwards"), "{e}");
}

// ---------------------------------------------------------------------------------------
// RFS: flows follow the worker that reads their socket, in order
// ---------------------------------------------------------------------------------------

/// The router on two workers delivering to a UDP socket on port 5001 of every worker, with
/// RFS on and the socket's reader on worker `reader`; `flows` flows × `rounds` datagrams
/// whose payload says (round << 16 | flow).
fn rfs_router(listified: &str, reader: usize, flows: u16, rounds: u32) -> (Datapath, usize) {
    let mut setup = rps_setup("0-1");
    setup.pipeline = sluice::datapath::Pipeline::Local;
    let sets = [
        ("net.core.rps_sock_flow_entries", "32768"),
        ("rps_flow_cnt", "4096"),
        ("rx.listified", listified),
        ("net.core.netdev_max_backlog", "100000"),
    ];
    for (k, v) in sets {
        setup.tun.set(k, v).expect("tunable");
    }
    let mut frames = Vec::new();
    for round in 0..rounds {
        for f in 0..flows {
            frames.push(udp4(SRC_V4, IN_V4, 20_000 + f, 5001).seq(round << 16 | f as u32).build());
        }
    }
    let pool = Pool::new(setup.pool_frames).expect("pool");
    let mut dp = build_router(frames.clone(), &setup, &pool);
    for w in &mut dp.workers {
        w.sockets.bind_udp(5001, 1 << 16).expect("bind");
        w.sockets.reader_cpu = Some(reader);
    }
    (dp, frames.len())
}

#[test]
fn rfs_moves_a_flow_only_after_its_old_worker_processed_what_it_queued() {
    for listified in ["1", "0"] {
        // Stepped on this thread, in phases: worker 0 polls and steers ten rounds for each
        // round of worker 1 (worker 1 lags by more than a flow's spacing: a flow moving off it
        // must wait until it has processed what the flow queued there), then the other way
        // round (worker 1 catches up, and the waiting flows move). Each worker's socket is
        // read right after its round.
        let (mut dp, total) = rfs_router(listified, 0, 200, 40);
        let mut order: HashMap<u32, Vec<u32>> = HashMap::new();
        let id = sluice::rx::local::SocketId(0);
        let mut step = |dp: &mut Datapath, k: usize| {
            let Datapath { net, workers } = dp;
            let w = &mut workers[k];
            let did = sluice::napi::softirq_round(net, w);
            while w.sockets.recv_batch(&mut w.bufs, id, 256, |d| {
                let v = u32::from_be_bytes([d[0], d[1], d[2], d[3]]);
                order.entry(v & 0xffff).or_default().push(v >> 16);
            }) > 0
            {}
            did
        };
        for cycle in 0..100_000 {
            let (w0, w1) = if cycle / 4 % 2 == 0 { (10, 1) } else { (1, 10) };
            let did = (0..w0).map(|_| step(&mut dp, 0)).sum::<usize>() + (0..w1).map(|_| step(&mut dp, 1)).sum::<usize>();
            if did == 0 && dp.counters().rx == total as u64 && dp.in_flight() == 0 {
                break;
            }
        }
        finish(&mut dp, total);
        let c = dp.counters();
        assert_eq!(c.local, total as u64, "{:?}", c.nonzero_drops());
        assert!(c.rfs_moves > 50, "flows the map put on worker 1 moved to the reader's worker 0: {}", c.rfs_moves);
        for f in 0..200u32 {
            let rounds = &order[&f];
            assert_eq!(rounds, &(0..40).collect::<Vec<u32>>(), "flow {f} delivered out of order");
        }
    }
}

#[test]
fn rfs_on_two_threads_steers_flows_to_the_readers_worker() {
    let (mut dp, total) = rfs_router("1", 1, 1000, 8);
    dp.run_until(&RunLimit::default(), Duration::ZERO, |_, _| {});
    finish(&mut dp, total);
    let c = dp.counters();
    assert_eq!(c.local, total as u64, "{:?}", c.nonzero_drops());
    assert!(c.rfs_moves > 0);
    let on_reader = dp.workers[1].c.local;
    assert!(on_reader >= 7000, "after the first datagram of each flow, worker 1 takes them: {on_reader}");
}

#[test]
fn busy_polling_workers_pick_up_packets_without_being_woken() {
    // A paced generator (50 kpps: a packet every 20 µs): between packets worker 1 is idle,
    // and spinning (up to a second: long enough that a loaded machine descheduling worker 0
    // for a while cannot make every spell end empty; the stop flag ends the last one) it sees
    // the next ones arrive without sleeping.
    let (mut c, tun) = rss_lab(500, 1, &["rps_cpus=0-1", "net.core.busy_poll=1000000", "net.core.netdev_max_backlog=100000"]);
    c.ports[0].gen.as_mut().expect("generator").rate_pps = Some(50_000.0);
    let dp = run_checked(&c, tun, 5_000);
    assert_eq!(dp.counters().tx, 5_000, "{:?}", dp.counters().nonzero_drops());
    assert!(dp.workers[1].c.busy_poll_hits > 0, "worker 1 found packets while spinning instead of sleeping");
    assert_per_flow_order(&captured(&dp, 1));
}

#[test]
fn xdp_maps_set_up_from_the_config_are_shared_by_every_workers_instance() {
    let obj = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bpf/obj/xdp_drop_count.o");
    let (mut c, tun) = rss_lab(100, 2, &[]);
    let seed = "drop_stats:00000000=e803000000000000".to_string() + "0000000000000000";
    let xdp = format!("program = {:?}\nmode = \"native\"\nmap = [{seed:?}]", obj.display().to_string());
    c.xdp = Some(toml::from_str(&xdp).expect("xdp table"));
    let dp = run_checked(&c, tun.clone(), 1_000);
    let maps = dp.workers[1].xdp.native[0].as_ref().and_then(|p| p.maps()).expect("worker 1's instance");
    let rec = maps.by_name("drop_stats").expect("drop_stats").lookup(&0u32.to_ne_bytes(), 0).expect("key 0");
    assert_eq!(u64::from_ne_bytes(rec[..8].try_into().unwrap()), 1_000 + 1_000, "the preset 1000 plus every packet");
    // A bad entry is refused, naming the setting.
    c.xdp.as_mut().unwrap().map = vec!["no_such_map:00=00".into()];
    let pool = Pool::new(1024).unwrap();
    let e = c.build(tun, &pool).err().expect("refused").to_string();
    assert!(e.starts_with("xdp.map") && e.contains("no_such_map"), "{e}");
}

/// A DEVMAP entry must name a port of the datapath (the kernel's update fails with -EINVAL
/// when no device has the ifindex): ifindex 2 (port 1) is taken, 9 is refused at set-up,
/// naming the map and the ifindex.
#[test]
fn devmap_entries_naming_no_port_are_refused_at_set_up() {
    let obj = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bpf/obj/xdp_devmap_redirect.o");
    let (mut c, tun) = rss_lab(100, 1, &[]);
    assert!(c.ports.len() >= 2, "the lab has an output port");
    let pool = Pool::new(1024).unwrap();
    let with_entry = |c: &mut Config, value: &str| {
        let xdp = format!("program = {:?}\nmode = \"native\"\nmap = [\"tx_port:00000000={value}\"]", obj.display().to_string());
        c.xdp = Some(toml::from_str(&xdp).expect("xdp table"));
    };
    with_entry(&mut c, "02000000");
    assert!(c.build(tun.clone(), &pool).is_ok(), "ifindex 2: port 1");
    with_entry(&mut c, "09000000");
    let e = c.build(tun.clone(), &pool).err().expect("ifindex 9 refused").to_string();
    assert!(e.starts_with("xdp.map") && e.contains("tx_port") && e.contains("ifindex 9"), "{e}");
}

/// `.rodata` settings from the config are set before the load (libbpf's open → set → load):
/// bpf/obj/xdp_rodata_config.o set to verdicts[0] (DROP) and to count byte 0 (the first
/// byte of the destination MAC) drops every packet on both workers' instances; the load
/// froze `.rodata`, which the verifier needed to accept the object at all.
#[test]
fn rodata_settings_in_the_config_are_set_before_the_load() {
    let obj = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bpf/obj/xdp_rodata_config.o");
    let (mut c, tun) = rss_lab(100, 2, &[]);
    let xdp = format!("program = {:?}\nmode = \"native\"\nmap = [\".rodata:00000000=0000000000000000\"]", obj.display().to_string());
    c.xdp = Some(toml::from_str(&xdp).expect("xdp table"));
    let dp = run_checked(&c, tun, 1_000);
    assert_eq!(dp.counters().dropped(DropReason::XdpDrop), 1_000, "{:?}", dp.counters().nonzero_drops());
    assert!(dp.workers.iter().all(|w| w.c.rx > 0), "both workers ran their instance");
    let maps = dp.workers[0].xdp.native[0].as_ref().and_then(|p| p.maps()).expect("worker 0's instance");
    assert!(maps.by_name(".rodata").expect(".rodata").is_frozen());
    let mac0 = sluice::port::parse_mac(&c.ports[0].gen.as_ref().unwrap().dst_mac).expect("dst_mac")[0] as u64;
    let peeked = maps.by_name("peeked").expect("peeked").lookup(&0u32.to_ne_bytes(), 0).expect("key 0");
    assert_eq!(u64::from_ne_bytes(peeked[..8].try_into().unwrap()), 1_000 * mac0, "byte 0 of every frame");
}

/// One CPU with RPS on (`rps_cpus=0x1`, one worker): the map's one target is the polling
/// worker itself, and its packets are processed in the poll, as with RPS off: nothing is
/// queued on a backlog (a lone worker has no ring to itself and polls none), so a small
/// `netdev_max_backlog` drops nothing and every packet is forwarded. (The kernel would
/// enqueue to the local CPU's backlog: a difference the rps README names.)
#[test]
fn one_worker_with_rps_on_processes_its_packets_in_the_poll() {
    let frames = flows(64, 8);
    for cpus in ["0x1", "0"] {
        let mut setup = Setup { pool_frames: 4096, ..Setup::default() };
        setup.tun.set("rps_cpus", cpus).expect("rps_cpus");
        setup.tun.netdev_max_backlog = 8;
        let pool = Pool::new(setup.pool_frames).expect("pool");
        let mut dp = build_router(frames.clone(), &setup, &pool);
        assert_eq!(dp.workers.len(), 1);
        dp.run_until(&RunLimit::default(), Duration::ZERO, |_, _| {});
        finish(&mut dp, frames.len());
        let c = dp.counters();
        assert_eq!(c.tx, frames.len() as u64, "rps_cpus={cpus}: every packet forwarded");
        assert_eq!((c.dropped(DropReason::CpuBacklog), c.backlog_processed), (0, 0), "rps_cpus={cpus}: no backlog");
    }
}
