//! Qdisc behaviour: bands, limits, fq_codel's CoDel and flow isolation, and qdisc_run with
//! the NIC model (bulks bounded by BQL, requeues and stops, order and conservation).

use super::*;
use crate::buf::{BufCache, Pool};
use crate::net::{Net, Pipeline};
use crate::port::sim::{SimClock, SimConfig, SimNic};
use crate::port::{Port, PortStats};
use crate::stats::{Counters, DropReason};
use crate::tunables::Tunables;
use crate::tx::bql::TxqState;
use crate::tx::queue::TxQueue;
use crate::wire::build::{build, L3Spec, L4Spec, PacketSpec};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A UDP/IPv4 frame of `len` bytes with `tos`, source port `flow` and `seq` in the payload.
pub(super) fn frame(bufs: &mut BufCache, tos: u8, flow: u16, seq: u32, len: usize) -> Pkt {
    let spec = PacketSpec {
        l3: L3Spec::V4 { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], tos, ident: 0, dont_frag: true },
        l4: L4Spec::Udp { src_port: flow, dst_port: 9 },
        frame_len: len,
        ..PacketSpec::default()
    };
    let mut b = vec![0u8; len];
    let n = build(&spec, &mut b).unwrap();
    b[42..46].copy_from_slice(&seq.to_be_bytes());
    bufs.alloc_copy(&b[..n]).unwrap()
}

/// (flow, seq) of a frame built by [`frame`].
fn flow_seq(bufs: &BufCache, p: Pkt) -> (u16, u32) {
    let d = bufs.data(p);
    (u16::from_be_bytes([d[34], d[35]]), u32::from_be_bytes([d[42], d[43], d[44], d[45]]))
}

pub(super) fn tos_of(bufs: &BufCache, p: Pkt) -> u8 {
    bufs.data(p)[15]
}

#[test]
fn kinds_are_named_as_tc_and_numbered_as_the_tunable() {
    let names: Vec<&str> = QdiscKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names, crate::tunables::QDISC_NAMES);
    assert_eq!("fq_codel".parse::<QdiscKind>(), Ok(QdiscKind::FqCodel));
    let e = "fq_codle".parse::<QdiscKind>().unwrap_err();
    assert!(e.contains("unknown qdisc `fq_codle`") && e.contains("pfifo_fast"), "{e}");
    for k in QdiscKind::ALL {
        assert_eq!(QdiscKind::from_index(k.index()), k);
    }
    let mut t = Tunables::default();
    t.set("net.core.default_qdisc", "fq_codel").unwrap();
    assert_eq!(QdiscKind::from_index(t.default_qdisc as u64), QdiscKind::FqCodel);
    assert!(t.set("net.core.default_qdisc", "sfq").unwrap_err().to_string().contains("net.core.default_qdisc"));
}

#[test]
fn pfifo_fast_bands_follow_the_tos_priority_map() {
    // Low delay -> interactive -> band 0; best effort and reliability -> band 1;
    // throughput (bulk) -> band 2.
    assert_eq!(pfifo_fast_band(0x10), 0);
    assert_eq!(pfifo_fast_band(0x00), 1);
    assert_eq!(pfifo_fast_band(0x04), 1);
    assert_eq!(pfifo_fast_band(0x08), 2);
    // ECT(0) and CE (the old "minimum cost" bit) keep their class: best effort, band 1
    // (ip_tos2prio's ECN_OR_COST(BESTEFFORT)), not filler in band 2.
    assert_eq!(pfifo_fast_band(0x02), 1);
    assert_eq!(pfifo_fast_band(0x03), 1);
    assert_eq!(pfifo_fast_band(0x0a), 2);
    assert_eq!(pfifo_fast_band(0x12), 0);
    // Low delay + throughput: interactive bulk (priority 4), band 1.
    assert_eq!(pfifo_fast_band(0x18), 1);
    // The ECN bits and precedence do not count.
    assert_eq!(pfifo_fast_band(0xe1 | 0x10), 0);
}

/// pfifo_fast's band comes from `skb->priority`: ip_forward derives it from an IPv4 TOS,
/// ip6_forward leaves it 0, so IPv6 of any traffic class is best effort (band 1).
#[test]
fn pfifo_fast_bands_ipv6_by_priority_zero_whatever_its_traffic_class() {
    let pool = Pool::new(8).unwrap();
    let mut bufs = pool.cache();
    let p6 = frame6(&mut bufs, 0x10, 1);
    let p4 = frame(&mut bufs, 0x10, 1, 0, 60);
    assert_eq!((priority_tos(&bufs, p6), priority_tos(&bufs, p4)), (0, 0x10));
    let mut dropped = Vec::new();
    let mut q = PfifoFast::new(4);
    let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut dropped };
    q.enqueue(p6, &mut cx);
    q.enqueue(p4, &mut cx);
    assert_eq!(q.band_lens(), [1, 1, 0]);
    while let Some(p) = q.dequeue(&mut cx) {
        cx.bufs.free(p);
    }
    assert_eq!(bufs.in_use(), 0);
}

#[test]
fn pfifo_fast_serves_band_0_first_and_tail_drops_at_its_limit() {
    let pool = Pool::new(64).unwrap();
    let mut bufs = pool.cache();
    let mut dropped = Vec::new();
    let mut q = PfifoFast::new(2);
    let pkts = [(0x08, 1), (0x00, 2), (0x10, 3), (0x00, 4), (0x00, 5), (0x10, 6)].map(|(tos, s)| frame(&mut bufs, tos, 1, s, 60));
    let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut dropped };
    for p in pkts {
        q.enqueue(p, &mut cx);
    }
    // Each band is a ring of `limit` (pfifo_fast_init): the third best-effort packet is
    // tail-dropped, the second interactive one is not, though 4 are queued by then.
    assert_eq!((q.stats().drops, q.stats().overlimits), (1, 0), "band 1 full at 2; a tail drop is no overlimit");
    assert_eq!(cx.dropped.len(), 1);
    assert_eq!(flow_seq(cx.bufs, cx.dropped[0]).1, 5);
    assert_eq!(q.band_lens(), [2, 2, 1]);
    let mut order = Vec::new();
    while let Some(p) = q.dequeue(&mut cx) {
        order.push(p);
    }
    let seqs: Vec<u32> = order.iter().map(|p| flow_seq(&bufs, *p).1).collect();
    assert_eq!(seqs, [3, 6, 2, 4, 1], "band 0, then band 1 in order, then band 2");
    assert_eq!((q.stats().backlog_pkts, q.stats().backlog_bytes), (0, 0));
    bufs.free_pkts(&order);
    bufs.free_pkts(&dropped);
    assert_eq!(bufs.in_use(), 0);
}

#[test]
fn pfifo_counts_packets_and_bfifo_bytes() {
    let pool = Pool::new(64).unwrap();
    let mut bufs = pool.cache();
    let mut dropped = Vec::new();
    let mut pf = Fifo::packets(QdiscKind::Pfifo, 3);
    let mut bf = Fifo::bytes(250);
    let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut dropped };
    for s in 0..5 {
        let p = frame(cx.bufs, 0, 1, s, 100);
        pf.enqueue(p, &mut cx);
        let p = frame(cx.bufs, 0, 1, s, 100);
        bf.enqueue(p, &mut cx);
    }
    assert_eq!((pf.len(), pf.stats().drops, pf.stats().overlimits), (3, 2, 0));
    assert_eq!((bf.len(), bf.stats().drops, bf.stats().backlog_bytes, bf.stats().overlimits), (2, 3, 200, 0));
    let mut all = std::mem::take(cx.dropped);
    while let Some(p) = pf.dequeue(&mut cx).or_else(|| bf.dequeue(&mut cx)) {
        all.push(p);
    }
    bufs.free_pkts(&all);
    assert_eq!(all.len(), 10);
    assert_eq!(bufs.in_use(), 0);
}

/// One flow with a standing queue: packets wait ~20 ms while one leaves and one arrives
/// every ms for 400 ms. Returns (qdisc, packets dequeued, packets dropped).
fn standing_queue(tos: u8, ecn: bool) -> (FqCodel, u64, u64) {
    let pool = Pool::new(256).unwrap();
    let mut bufs = pool.cache();
    let mut dropped = Vec::new();
    let mut q = FqCodel::new(&QdiscSpec { ecn, ..QdiscSpec::new(QdiscKind::FqCodel) }, 1514);
    let ms = 1_000_000u64;
    let mut seq = 0;
    let mut out = 0u64;
    let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut dropped };
    for _ in 0..20 {
        let p = frame(cx.bufs, tos, 7, seq, 1000);
        seq += 1;
        q.enqueue(p, &mut cx);
    }
    for t in 1..=400u64 {
        cx.now_ns = t * ms;
        let p = frame(cx.bufs, tos, 7, seq, 1000);
        seq += 1;
        q.enqueue(p, &mut cx);
        if let Some(p) = q.dequeue(&mut cx) {
            if ecn && tos & 3 != 0 {
                assert!(t > 100 || tos_of(cx.bufs, p) & 3 != 3, "no mark within the first interval");
            }
            cx.bufs.free(p);
            out += 1;
        }
        let d: Vec<Pkt> = cx.dropped.drain(..).collect();
        cx.bufs.free_pkts(&d);
    }
    let drops = q.stats().drops;
    let mut rest = 0;
    while let Some(p) = q.dequeue(&mut cx) {
        cx.bufs.free(p);
        rest += 1;
    }
    let d = std::mem::take(cx.dropped);
    cx.bufs.free_pkts(&d);
    let total = seq as u64;
    assert_eq!(out + rest + q.stats().drops, total, "every packet dequeued or dropped");
    assert_eq!(bufs.in_use(), 0);
    (q, out, drops)
}

#[test]
fn fq_codel_drops_under_a_standing_queue() {
    // Not ECN-capable: CoDel drops once the sojourn time stayed above 5 ms for 100 ms.
    let (q, _, drops) = standing_queue(0, true);
    assert!(drops > 0, "CoDel dropped nothing");
    assert_eq!(q.codel_drops, drops);
    assert_eq!(q.stats().ecn_mark, 0);
    assert_eq!(q.stats().drop_overlimit, 0, "far below the limit");
}

#[test]
fn fq_codel_marks_ecn_capable_packets_instead_of_dropping() {
    let (q, _, drops) = standing_queue(0x02, true);
    assert!(q.stats().ecn_mark > 0, "ECT(0) packets are marked CE");
    assert_eq!(drops, 0);
    // With ECN off the same packets are dropped.
    let (q, _, drops) = standing_queue(0x02, false);
    assert_eq!(q.stats().ecn_mark, 0);
    assert!(drops > 0);
}

#[test]
fn fq_codel_keeps_its_limit_by_dropping_from_the_fattest_flow() {
    let pool = Pool::new(256).unwrap();
    let mut bufs = pool.cache();
    let mut dropped = Vec::new();
    let mut q = FqCodel::new(&QdiscSpec { limit: Some(100), drop_batch: 8, ..QdiscSpec::new(QdiscKind::FqCodel) }, 1514);
    let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut dropped };
    for s in 0..100 {
        let p = frame(cx.bufs, 0, 1, s, 100);
        q.enqueue(p, &mut cx);
    }
    let small = frame(cx.bufs, 0, 2, 0, 100);
    q.enqueue(small, &mut cx);
    assert_eq!(q.stats().drop_overlimit, 8, "a batch from the fat flow");
    assert!(cx.dropped.iter().all(|p| flow_seq(cx.bufs, *p).0 == 1), "the small flow keeps its packet");
    let heads: Vec<u32> = cx.dropped.iter().map(|p| flow_seq(cx.bufs, *p).1).collect();
    assert_eq!(heads, (0..8).collect::<Vec<_>>(), "from the head");
    let mut all = std::mem::take(cx.dropped);
    while let Some(p) = q.dequeue(&mut cx) {
        all.push(p);
    }
    assert_eq!(all.len(), 101);
    bufs.free_pkts(&all);
}

#[test]
fn fq_codel_keeps_its_memory_limit_by_dropping_from_the_fattest_flow() {
    // memory_limit of 10 frames: 10 one-frame packets fit (at the limit is not over it);
    // the 11th puts the qdisc over, and the fattest flow loses half its bytes from its head,
    // well below the packet limit of 10240 (fq_codel_enqueue's memory_limited).
    let pool = Pool::new(64).unwrap();
    let mut bufs = pool.cache();
    let mut dropped = Vec::new();
    let spec = QdiscSpec { memory_limit: 10 * crate::buf::FRAME_SIZE as u32, ..QdiscSpec::new(QdiscKind::FqCodel) };
    let mut q = FqCodel::new(&spec, 1514);
    let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut dropped };
    for s in 0..10 {
        let p = frame(cx.bufs, 0, 1, s, 100);
        q.enqueue(p, &mut cx);
    }
    assert_eq!(q.stats().memory_used, 10 * 2048);
    assert!(cx.dropped.is_empty(), "at the memory limit, not over it");
    let small = frame(cx.bufs, 0, 2, 0, 100);
    q.enqueue(small, &mut cx);
    let heads: Vec<(u16, u32)> = cx.dropped.iter().map(|p| flow_seq(cx.bufs, *p)).collect();
    assert_eq!(heads, (0..5).map(|s| (1, s)).collect::<Vec<_>>(), "half the fat flow's bytes, from its head");
    let st = *q.stats();
    assert_eq!((st.drop_overlimit, st.drop_overmemory, st.drops), (5, 5, 5));
    assert_eq!(st.memory_used, 6 * 2048);
    let mut all = std::mem::take(cx.dropped);
    while let Some(p) = q.dequeue(&mut cx) {
        all.push(p);
    }
    assert_eq!(all.len(), 11);
    assert_eq!(q.stats().memory_used, 0, "dequeue gives the memory back");
    bufs.free_pkts(&all);
    assert_eq!(bufs.in_use(), 0);
}

#[test]
fn fq_codel_counts_the_memory_of_every_frame_of_a_chain() {
    // A 5000-byte packet is a chain of 3 frames: 6 KiB of memory, as a GRO packet bound for
    // a TSO port counts its pages in the kernel's truesize.
    let pool = Pool::new(64).unwrap();
    let mut bufs = pool.cache();
    let mut dropped = Vec::new();
    let mut q = FqCodel::new(&QdiscSpec::new(QdiscKind::FqCodel), 1514);
    let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut dropped };
    let spec = PacketSpec {
        l3: L3Spec::V4 { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], tos: 0, ident: 0, dont_frag: true },
        l4: L4Spec::Udp { src_port: 1, dst_port: 9 },
        frame_len: 5000,
        ..PacketSpec::default()
    };
    let mut b = vec![0u8; 5000];
    let n = build(&spec, &mut b).unwrap();
    let big = cx.bufs.alloc_chain_copy(&b[..n]).unwrap();
    assert_eq!(cx.bufs.frags(big).count(), 2);
    q.enqueue(big, &mut cx);
    q.enqueue(frame(cx.bufs, 0, 2, 0, 100), &mut cx);
    assert_eq!(q.stats().memory_used, 4 * 2048);
    let first = q.dequeue(&mut cx).unwrap();
    let second = q.dequeue(&mut cx).unwrap();
    assert_eq!(q.stats().memory_used, 0);
    cx.bufs.free(first);
    cx.bufs.free(second);
    assert_eq!(bufs.in_use(), 0);
}

#[test]
fn fq_codel_isolates_a_sparse_flow_from_a_bulk_one() {
    let pool = Pool::new(1024).unwrap();
    let mut bufs = pool.cache();
    let mut dropped = Vec::new();
    let mut q = FqCodel::new(&QdiscSpec::new(QdiscKind::FqCodel), 1514);
    let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut dropped };
    let bulk: Vec<Pkt> = (0..500).map(|s| frame(cx.bufs, 0, 1000, s, 1000)).collect();
    let sparse = frame(cx.bufs, 0, 2000, 0, 100);
    let (fb, fs) = (q.flow_of(classify(cx.bufs, bulk[0]).hash), q.flow_of(classify(cx.bufs, sparse).hash));
    assert_ne!(fb, fs, "precondition: the two flows hash to different queues");
    for p in bulk {
        q.enqueue(p, &mut cx);
    }
    let mut out = Vec::new();
    for _ in 0..3 {
        out.push(q.dequeue(&mut cx).unwrap());
    }
    q.enqueue(sparse, &mut cx);
    assert_eq!(q.flow_len(fs), 1);
    let next = q.dequeue(&mut cx).unwrap();
    assert_eq!(flow_seq(cx.bufs, next), (2000, 0), "the sparse flow's packet goes next, not after 497 bulk ones");
    out.push(next);
    while let Some(p) = q.dequeue(&mut cx) {
        out.push(p);
    }
    let bulk_seqs: Vec<u32> = out.iter().map(|p| flow_seq(&bufs, *p)).filter(|(f, _)| *f == 1000).map(|(_, s)| s).collect();
    assert_eq!(bulk_seqs, (0..500).collect::<Vec<_>>(), "the bulk flow in order");
    assert_eq!(q.stats().new_flow_count, 2);
    bufs.free_pkts(&out);
    assert_eq!(bufs.in_use(), 0);
}

#[test]
fn fq_codel_shares_bytes_not_packets_between_backlogged_flows() {
    // Deficit round robin: each turn a flow sends while its deficit (a quantum, 1514 bytes,
    // per round) lasts, so a flow of 1500-byte packets and one of 100-byte packets get the
    // same bytes per round: 1 packet against about 15.
    let pool = Pool::new(1024).unwrap();
    let mut bufs = pool.cache();
    let mut dropped = Vec::new();
    let mut q = FqCodel::new(&QdiscSpec::new(QdiscKind::FqCodel), 1514);
    let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut dropped };
    let big: Vec<Pkt> = (0..100).map(|s| frame(cx.bufs, 0, 1000, s, 1500)).collect();
    let small: Vec<Pkt> = (0..400).map(|s| frame(cx.bufs, 0, 2000, s, 100)).collect();
    assert_ne!(q.flow_of(classify(cx.bufs, big[0]).hash), q.flow_of(classify(cx.bufs, small[0]).hash), "precondition");
    for p in big.into_iter().chain(small) {
        q.enqueue(p, &mut cx);
    }
    let mut bytes = [0usize; 2];
    let mut out = Vec::new();
    while bytes[0] + bytes[1] < 30 * 1514 {
        let p = q.dequeue(&mut cx).expect("backlogged");
        bytes[usize::from(flow_seq(cx.bufs, p).0 == 2000)] += p.total_len();
        out.push(p);
    }
    let (big_bytes, small_bytes) = (bytes[0] as i64, bytes[1] as i64);
    assert!((big_bytes - small_bytes).abs() <= 2 * 1514, "bytes per flow: {big_bytes} vs {small_bytes}");
    while let Some(p) = q.dequeue(&mut cx) {
        out.push(p);
    }
    bufs.free_pkts(&out);
    assert_eq!(bufs.in_use(), 0);
}

/// The NIC model, recording every driver call: BQL avail before it, the packets offered,
/// and the (flow, seq) of those it accepted.
struct Recorder {
    nic: SimNic,
    calls: Vec<(i32, Vec<usize>, usize)>,
    accepted: Vec<(u16, u32)>,
}

impl Port for Recorder {
    fn name(&self) -> &str {
        "rec"
    }
    fn rx_burst(&mut self, _: &mut BufCache, _: &mut Vec<Pkt>, _: usize) -> usize {
        0
    }
    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        let avail = self.nic.txq().dql.avail();
        let seqs: Vec<(u16, u32)> = pkts.iter().map(|p| flow_seq(bufs, *p)).collect();
        let n = self.nic.tx_burst(bufs, pkts, more);
        self.calls.push((avail, pkts.iter().map(|p| p.total_len()).collect(), n));
        self.accepted.extend_from_slice(&seqs[..n]);
        n
    }
    fn tx_completions(&mut self, bufs: &mut BufCache) -> usize {
        self.nic.tx_completions(bufs)
    }
    fn tx_queue(&self) -> Option<&TxqState> {
        self.nic.tx_queue()
    }
    fn flush_held(&mut self, bufs: &mut BufCache) -> usize {
        self.nic.flush_held(bufs)
    }
    fn stats(&self) -> PortStats {
        self.nic.stats()
    }
}

fn recorder(cfg: SimConfig) -> (Recorder, Arc<AtomicU64>) {
    let t = Arc::new(AtomicU64::new(0));
    (Recorder { nic: SimNic::with_clock("nic", cfg, 1500, SimClock::Manual(t.clone())), calls: Vec::new(), accepted: Vec::new() }, t)
}

/// Stages `n` packets round-robin over `flows` flows (sizes varying), continuing `seqs`.
fn stage(q: &mut TxQueue, bufs: &mut BufCache, n: usize, flows: u16, seqs: &mut [u32]) {
    for k in 0..n {
        let f = (k % flows as usize) as u16;
        let len = 60 + (seqs[f as usize] as usize * 37) % 400;
        q.pkts.push(frame(bufs, 0, 100 + f, seqs[f as usize], len));
        seqs[f as usize] += 1;
    }
}

fn tx_queue(net: &Net) -> TxQueue {
    TxQueue { qdisc: Some(crate::tx::default_spec(net).build(net.tun.txqueuelen, 1514)), ..TxQueue::default() }
}

/// Sends 4000 packets of 8 flows through pfifo_fast into the NIC model, completing in
/// steps of `step_ns`. Checks conservation, per-flow order, and every bulk against BQL.
fn through_the_nic(tun: Tunables, cfg: SimConfig, step_ns: u64) -> (Counters, TxQueue, Recorder) {
    let net = Net::new(tun, Pipeline::Io);
    let pool = Pool::new(8192).unwrap();
    let mut bufs = pool.cache();
    let (mut dev, t) = recorder(cfg);
    let mut q = tx_queue(&net);
    let mut c = Counters::default();
    let mut seqs = [0u32; 8];
    let mut now = 0;
    let mut runs = 0u64;
    for _ in 0..100 {
        stage(&mut q, &mut bufs, 40, 8, &mut seqs);
        crate::tx::enqueue_staged(&mut q, &mut bufs, &mut c, now);
        crate::tx::qdisc_run(&net, &mut q, &mut dev, &mut bufs, &mut c, now);
        runs += 1;
        now += step_ns;
        t.store(now, Ordering::Relaxed);
        dev.tx_completions(&mut bufs);
    }
    while q.held() > 0 {
        crate::tx::qdisc_run(&net, &mut q, &mut dev, &mut bufs, &mut c, now);
        runs += 1;
        now += step_ns;
        t.store(now, Ordering::Relaxed);
        dev.tx_completions(&mut bufs);
    }
    let staged: u64 = seqs.iter().map(|s| *s as u64).sum();
    assert_eq!(staged, 4000);
    assert_eq!(c.tx + c.total_drops(), staged, "every packet sent or dropped");
    // Per flow, the accepted sequence numbers only go up (drops may leave gaps).
    for f in 0..8u16 {
        let s: Vec<u32> = dev.accepted.iter().filter(|(fl, _)| *fl == 100 + f).map(|(_, s)| *s).collect();
        assert!(s.windows(2).all(|w| w[0] < w[1]), "flow {f} reordered");
    }
    // Bulk: the first packet always; another only while bytes before it stay under avail.
    for (avail, lens, _) in &dev.calls {
        if lens.len() > 1 {
            let before_last: usize = lens[..lens.len() - 1].iter().sum();
            assert!((before_last as i64) < *avail as i64, "bulk {lens:?} past dql_avail {avail}");
        }
    }
    // A run finds the queue stopped at most once (it ends there).
    assert!(q.stats.found_stopped <= runs, "found stopped {} times in {runs} runs", q.stats.found_stopped);
    // The bulk histogram: one entry per driver call that sent, in its power-of-two bucket.
    let mut hist = [0u64; crate::tx::queue::BULK_BUCKETS];
    for &(_, _, sent) in dev.calls.iter().filter(|c| c.2 > 0) {
        hist[(sent.ilog2() as usize).min(hist.len() - 1)] += 1;
    }
    assert_eq!(q.stats.bulk_hist, hist);
    assert_eq!(q.stats.doorbells, hist.iter().sum::<u64>());
    dev.nic.flush_held(&mut bufs);
    assert_eq!(bufs.in_use(), 0);
    (c, q, dev)
}

#[test]
fn bulks_are_bounded_by_dql_avail_and_order_is_kept() {
    let (c, q, dev) = through_the_nic(Tunables::default(), SimConfig { ring: 256, ..SimConfig::default() }, 12_000);
    assert!(dev.calls.iter().any(|(_, l, _)| l.len() > 1), "bulking happened");
    assert_eq!(c.tx, 4000);
    assert!(c.doorbells < c.tx / 2, "doorbells {} for {} packets", c.doorbells, c.tx);
    assert!(q.stats.found_stopped > 0, "BQL stopped the queue");
    assert!(dev.nic.txq().stops > 0 && dev.nic.txq().wakes > 0);
    assert!(q.stats.bql_limit_max > 0);
}

#[test]
fn without_bulking_every_packet_rings_the_doorbell() {
    let tun = Tunables { qdisc_bulk: 0, ..Tunables::default() };
    let (c, _, dev) = through_the_nic(tun, SimConfig { ring: 256, ..SimConfig::default() }, 2_000);
    assert!(dev.calls.iter().all(|(_, l, _)| l.len() == 1));
    assert_eq!(c.doorbells, c.tx);
    assert_eq!(dev.nic.stats().doorbells, c.tx);
}

#[test]
fn a_full_ring_requeues_and_nothing_is_lost_or_reordered() {
    // BQL held high (limit_min) so bulks outgrow the 16-descriptor ring: the driver takes
    // what fits, stops, and the rest is requeued and sent first after completions.
    let cfg = SimConfig { ring: 16, bql_limit_min: 1 << 20, coalesce_frames: 4, ..SimConfig::default() };
    let (c, q, dev) = through_the_nic(Tunables::default(), cfg, 3_000);
    assert!(q.stats.requeues > 0, "requeues");
    assert_eq!(q.qdisc.as_ref().unwrap().stats().requeues, q.stats.requeues);
    assert!(dev.nic.sim.tx_busy > 0);
    assert!(dev.nic.txq().stops > 0);
    assert!(c.dropped(DropReason::QdiscDrop) > 0, "40 packets per 3 us, ~13 leave: the qdisc (with the requeued) overflows");
    assert_eq!(c.tx + c.dropped(DropReason::QdiscDrop), 4000);
}

#[test]
fn qdisc_overflow_drops_are_named() {
    let tun = Tunables { txqueuelen: 10, ..Tunables::default() };
    let net = Net::new(tun, Pipeline::Io);
    let pool = Pool::new(64).unwrap();
    let mut bufs = pool.cache();
    let (mut dev, _) = recorder(SimConfig::default());
    let mut q = tx_queue(&net);
    let mut c = Counters::default();
    let mut seqs = [0u32; 1];
    stage(&mut q, &mut bufs, 30, 1, &mut seqs);
    crate::tx::enqueue_staged(&mut q, &mut bufs, &mut c, 0);
    assert_eq!(c.dropped(DropReason::QdiscDrop), 20, "txqueuelen 10");
    crate::tx::qdisc_run(&net, &mut q, &mut dev, &mut bufs, &mut c, 0);
    assert_eq!(c.tx, 1, "BQL starts at 0: one packet, then the queue stops");
    assert_eq!(q.len(), 9);
    dev.nic.flush_held(&mut bufs);
    let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut Vec::new() };
    let mut rest = Vec::new();
    while let Some(p) = q.qdisc.as_mut().unwrap().dequeue(&mut cx) {
        rest.push(p);
    }
    bufs.free_pkts(&rest);
    assert_eq!(bufs.in_use(), 0);
}

/// The whole datapath: a capture of 3000 frames forwarded (io) into the NIC model at 1 Gbit/s
/// through fq_codel; the run drains the qdisc at line rate and the ledger balances.
#[test]
fn a_datapath_run_drains_the_qdisc_into_the_nic_and_balances() {
    use crate::datapath::Datapath;
    use crate::port::pcap::PcapIn;
    use crate::rx::route::Iface;
    let pool = Pool::new(4096).unwrap();
    let tun = Tunables { default_qdisc: QdiscKind::FqCodel.index() as u8, ..Tunables::default() };
    let mut dp = Datapath::new(tun, Pipeline::Io, &pool);
    let mut scratch = pool.cache();
    let frames: Vec<Vec<u8>> = (0..3000u32)
        .map(|s| {
            let p = frame(&mut scratch, 0, 100 + (s % 16) as u16, s, 60 + (s as usize % 5) * 100);
            let v = scratch.to_vec(p);
            scratch.free(p);
            v
        })
        .collect();
    dp.add_port(Box::new(PcapIn::from_frames("in", frames, 1)), Iface::new("in", [2, 0, 0, 0, 0, 1]));
    let nic = SimNic::new("nic", SimConfig { rate_gbps: 1.0, ring: 64, ..SimConfig::default() }, 1500);
    dp.add_port(Box::new(nic), Iface::new("nic", [2, 0, 0, 0, 0, 2]));
    dp.net.peer = vec![Some(1), None];
    dp.run(crate::napi::RunLimit::default(), std::time::Duration::from_secs(1), |_, _| {});
    let c = dp.counters();
    assert_eq!(c.rx, 3000);
    assert_eq!(c.tx + c.total_drops(), 3000);
    assert!(c.tx > 0);
    assert_eq!(dp.in_flight(), 0, "the drain emptied the qdisc");
    dp.conservation().unwrap();
    let q = &dp.workers[0].txq[1];
    assert_eq!(q.qdisc.as_ref().unwrap().kind(), QdiscKind::FqCodel);
    assert!(q.stats.found_stopped > 0, "1 Gbit/s is slower than the capture: BQL pushed back");
    for w in &mut dp.workers {
        w.bufs.flush();
    }
    scratch.flush();
    assert_eq!(dp.buffers_in_use() + scratch.in_use(), 0);
}

// Head-of-line delay behind a bulk backlog (BQL's purpose) is `sluice bench hol`, with its
// tests in src/bench/hol.rs.

/// fq_codel allocates its packet slots when it is built: a limit beyond any pool is refused
/// up front, naming the setting, instead of allocating gigabytes at the first transmit.
#[test]
fn an_fq_codel_limit_beyond_any_pool_is_refused() {
    let spec = |limit| QdiscSpec { limit: Some(limit), ..QdiscSpec::new(QdiscKind::FqCodel) };
    assert!(spec(MAX_FQ_CODEL_LIMIT).validate().is_ok());
    let (what, why) = spec(MAX_FQ_CODEL_LIMIT + 1).validate().unwrap_err();
    assert_eq!(what, "limit");
    assert!(why.contains("1048577"), "{why}");
    assert!(spec(u32::MAX).validate().is_err());
    // The fifos keep their own rule (no preallocation beyond a bound).
    assert!(QdiscSpec { limit: Some(u32::MAX), ..QdiscSpec::new(QdiscKind::Pfifo) }.validate().is_ok());
}

/// fq_codel's quantum and times are bounded as the kernel bounds them (fq_codel_change:
/// quantum <= 1 MiB, u32 µs): a quantum of 2^31 went negative in the signed deficit and
/// dequeue spun forever; an interval near u64::MAX overflowed now + interval.
#[test]
fn fq_codel_quantum_and_times_beyond_the_kernels_bounds_are_refused() {
    let fq = QdiscSpec::new(QdiscKind::FqCodel);
    assert!(QdiscSpec { quantum: 1 << 20, ..fq.clone() }.validate().is_ok());
    assert_eq!(QdiscSpec { quantum: (1 << 20) + 1, ..fq.clone() }.validate().unwrap_err().0, "quantum");
    assert_eq!(QdiscSpec { quantum: 1 << 31, ..fq.clone() }.validate().unwrap_err().0, "quantum");
    let max_ns = u32::MAX as u64 * 1000;
    assert!(QdiscSpec { interval_ns: max_ns, target_ns: max_ns, ..fq.clone() }.validate().is_ok());
    assert_eq!(QdiscSpec { interval_ns: max_ns + 1000, ..fq.clone() }.validate().unwrap_err().0, "target/interval");
    assert_eq!(QdiscSpec { target_ns: u64::MAX, ..fq }.validate().unwrap_err().0, "target/interval");
}

/// The qdisc run quota is the kernel's dev_tx_weight, which is no sysctl of its own:
/// proc_do_dev_weight sets it to net.core.dev_weight x net.core.dev_weight_tx_bias whenever
/// one of them is written, so dev_weight=16 ends a run after 16 packets.
#[test]
fn dev_tx_weight_is_dev_weight_times_the_tx_bias() {
    use crate::port::sink::{CheckSpec, Sink, SinkKind};
    let cases: [(&[&str], usize); 3] =
        [(&[], 64), (&["net.core.dev_weight=16"], 16), (&["net.core.dev_weight=16", "net.core.dev_weight_tx_bias=3"], 48)];
    for (sets, quota) in cases {
        let mut tun = Tunables::default();
        tun.apply_all(sets).unwrap_or_else(|e| panic!("{sets:?}: {e}"));
        let net = Net::new(tun, Pipeline::Io);
        let pool = Pool::new(256).unwrap();
        let mut bufs = pool.cache();
        let mut dev = Sink::new("null", SinkKind::Null, CheckSpec::default());
        let mut q = tx_queue(&net);
        let mut c = Counters::default();
        stage(&mut q, &mut bufs, 200, 1, &mut [0]);
        crate::tx::enqueue_staged(&mut q, &mut bufs, &mut c, 0);
        assert_eq!(crate::tx::qdisc_run(&net, &mut q, &mut dev, &mut bufs, &mut c, 0), quota, "{sets:?}");
        assert_eq!(q.stats.resched, 1, "{sets:?}: the run ended on the quota");
        while q.held() > 0 {
            crate::tx::qdisc_run(&net, &mut q, &mut dev, &mut bufs, &mut c, 0);
        }
        assert_eq!((c.tx, bufs.in_use()), (200, 0));
    }
    assert!(Tunables::default().set("net.core.dev_weight_tx_bias", "0").is_err(), "extra1 = SYSCTL_ONE");
    let e = Tunables::default().set("net.core.dev_tx_weight", "16").unwrap_err().to_string();
    assert!(e.contains("net.core.dev_tx_weight") && e.contains("net.core.dev_weight_tx_bias"), "{e}");
}

/// A UDP/IPv6 frame of 80 bytes with `traffic_class`, source port `flow`.
fn frame6(bufs: &mut BufCache, traffic_class: u8, flow: u16) -> Pkt {
    let spec = PacketSpec {
        l3: L3Spec::V6 { src: [0x20; 16], dst: [0x21; 16], traffic_class, flow_label: 0 },
        l4: L4Spec::Udp { src_port: flow, dst_port: 9 },
        frame_len: 80,
        ..PacketSpec::default()
    };
    let mut b = vec![0u8; 80];
    let n = build(&spec, &mut b).unwrap();
    bufs.alloc_copy(&b[..n]).unwrap()
}

/// A 60-byte frame of ethertype ARP (zeros past it): not IP.
fn arp_frame() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f
}

/// Classification reads an IPv6 packet's traffic class and hashes its addresses, next
/// header and ports (as an IPv4 packet's; fq_codel picks its flow queue by the hash);
/// anything not IP is class 0.
#[test]
fn ipv6_packets_are_classified_by_traffic_class_and_flow() {
    let pool = Pool::new(8).unwrap();
    let mut bufs = pool.cache();
    let (a, a2, b) = (frame6(&mut bufs, 0x28, 1), frame6(&mut bufs, 0x28, 1), frame6(&mut bufs, 0x28, 2));
    let (ca, cb) = (classify(&bufs, a), classify(&bufs, b));
    assert_eq!((ca.tos, cb.tos), (0x28, 0x28));
    assert_eq!(classify(&bufs, a2), ca, "one flow, one hash");
    assert_ne!(ca.hash, cb.hash, "the ports tell the flows apart");
    assert_ne!(ca.hash, 0);
    let v4 = frame(&mut bufs, 0x10, 1, 0, 60);
    assert_eq!(classify(&bufs, v4).tos, 0x10);
    let arp = bufs.alloc_copy(&arp_frame()).unwrap();
    assert_eq!(classify(&bufs, arp), PktClass::default());
}

/// fq_codel hashes a packet as skb_get_hash does: the receiving port's hash when it gave
/// one, else the software flow hash of RPS, which leaves the ports out of every fragment
/// (the first one too), so the pieces of one datagram share a flow queue and stay in
/// order; and it reads through a VLAN tag.
#[test]
fn classification_hashes_as_skb_get_hash() {
    let pool = Pool::new(16).unwrap();
    let mut bufs = pool.cache();
    let whole = frame(&mut bufs, 0x10, 1, 7, 200);
    let bytes = bufs.data(whole).to_vec();
    // IPv4 flags and fragment offset (bytes 20-21): first fragment (MF), a later one
    // (offset 185 × 8, its payload not a UDP header), the last one.
    let fragment = |bufs: &mut BufCache, field: u16, payload: u8| {
        let mut f = bytes.clone();
        f[20..22].copy_from_slice(&field.to_be_bytes());
        if payload != 0 {
            f[34..].fill(payload);
        }
        bufs.alloc_copy(&f).unwrap()
    };
    let first = fragment(&mut bufs, 0x2000, 0);
    let later = fragment(&mut bufs, 0x2000 | 185, 0xab);
    let last = fragment(&mut bufs, 370, 0xcd);
    let hash = |bufs: &BufCache, p| classify(bufs, p).hash;
    assert_eq!(hash(&bufs, first), hash(&bufs, later), "a fragment's payload is not ports");
    assert_eq!(hash(&bufs, first), hash(&bufs, last));
    assert_ne!(hash(&bufs, first), hash(&bufs, whole), "the unfragmented datagram's hash has its ports");
    let other_port = frame(&mut bufs, 0x10, 2, 7, 200);
    assert_ne!(hash(&bufs, other_port), hash(&bufs, whole));
    // The same packet behind an 802.1Q tag: the same class and hash.
    let mut tagged = bytes[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
    tagged.extend_from_slice(&bytes[12..]);
    let tagged = bufs.alloc_copy(&tagged).unwrap();
    assert_eq!(classify(&bufs, tagged), classify(&bufs, whole));
    // The port's hash, when it computed one, is the packet's.
    let mut from_nic = frame(&mut bufs, 0x10, 1, 7, 200);
    from_nic.rss_hash = 0x1234_5678;
    assert_eq!(classify(&bufs, from_nic), PktClass { tos: 0x10, hash: 0x1234_5678 });
    bufs.free_pkts(&[whole, first, later, last, other_port, tagged, from_nic]);
    assert_eq!(bufs.in_use(), 0);
}

/// INET_ECN_set_ce: an ECN-capable packet gets CE (both ECN bits) in its IPv4 TOS (the
/// header checksum redone) or IPv6 traffic class, the DSCP kept; a Not-ECT or non-IP one is
/// left as it is and reported, so CoDel drops it instead.
#[test]
fn ecn_ce_is_set_on_ecn_capable_ipv4_and_ipv6_packets_only() {
    let pool = Pool::new(8).unwrap();
    let mut bufs = pool.cache();
    let tc = |bufs: &BufCache, p: Pkt| Ipv6Packet::new_checked(&bufs.data(p)[14..]).unwrap().traffic_class();
    let (ect6, not_ect6) = (frame6(&mut bufs, 0x2a, 1), frame6(&mut bufs, 0x28, 1));
    assert!(set_ecn_ce(&mut bufs, ect6));
    assert_eq!(tc(&bufs, ect6), 0x2b);
    // ECT(1) becomes CE too, and CE stays CE (both ECN-capable).
    for (tc_in, p) in [(0x29, frame6(&mut bufs, 0x29, 1)), (0x2b, frame6(&mut bufs, 0x2b, 1))] {
        assert!(set_ecn_ce(&mut bufs, p), "{tc_in:#x}");
        assert_eq!(tc(&bufs, p), 0x2b);
    }
    assert!(!set_ecn_ce(&mut bufs, not_ect6));
    assert_eq!(tc(&bufs, not_ect6), 0x28);
    let (ect4, not_ect4) = (frame(&mut bufs, 0x12, 1, 0, 60), frame(&mut bufs, 0x10, 1, 0, 60));
    assert!(set_ecn_ce(&mut bufs, ect4));
    assert_eq!(tos_of(&bufs, ect4), 0x13);
    assert!(Ipv4Packet::new_checked(&bufs.data(ect4)[14..]).unwrap().verify_checksum());
    assert!(!set_ecn_ce(&mut bufs, not_ect4));
    assert_eq!(tos_of(&bufs, not_ect4), 0x10);
    let mut arp = arp_frame();
    arp[15] = 0x03;
    let arp_pkt = bufs.alloc_copy(&arp).unwrap();
    assert!(!set_ecn_ce(&mut bufs, arp_pkt));
    assert_eq!(bufs.data(arp_pkt), &arp[..], "left as it was");
}
