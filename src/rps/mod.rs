//! rps: flow hashing and steering of received packets to workers (Receive Packet
//! Steering), the kernel's `get_rps_cpu`, `enqueue_to_backlog` and `process_backlog`.
//!
//! The worker that polls a port hashes each packet's flow after metadata and generic XDP and
//! appends it to its target worker's backlog (its own included, as the kernel's), a run per
//! target per poll; a target is woken once per round when its backlog goes from idle to
//! scheduled.
//! Each worker polls its backlog as one more NAPI instance (quota dev_rx_weight: dev_weight ×
//! dev_weight_rx_bias).

pub mod backlog;
pub mod hash;
pub mod rfs;

use crate::buf::skb::Skb;
use crate::buf::BufCache;
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::worker::Worker;
use backlog::FlowLimit;

pub use hash::reciprocal_scale;

/// The packet's flow hash: the port's (skb.hash) or a software one over the addresses and,
/// for TCP/UDP/SCTP not fragmented, the ports — for IPv6 with a flow label, the label
/// instead (`skb_get_hash`). Set in `skb.hash`.
#[inline]
pub fn skb_hash(bufs: &BufCache, skb: &mut Skb) -> u32 {
    if skb.hash != 0 {
        return skb.hash;
    }
    let (h, l4) = hash::software_flow_hash(bufs.data(skb.pkt), skb.protocol, skb.network_off as usize);
    skb.hash = h;
    skb.l4_hash = l4;
    h
}

/// get_rps_cpu + enqueue_to_backlog for one poll's list: each packet's flow picks a target
/// worker; this worker's packets stay in `skbs` (in order), the others go to their
/// target's backlog, a run per target at once. Wake-ups are collected for the end of the
/// round ([`send_wakeups`]). A queue steers with a CPU map, with RFS, or both (RFS alone
/// moves the flows whose readers it knows and leaves the others here).
pub fn steer(net: &Net, w: &mut Worker, skbs: &mut Vec<Skb>) {
    let st = &net.rps;
    // One poll's list comes from one receive queue: one map for all of it.
    let Some(first) = skbs.first() else { return };
    let map = st.map_for(first.rx_port, first.rx_queue);
    let rfs = st.sock_flow.enabled() && !w.rps_flows.is_empty();
    if map.is_empty() && !rfs {
        return;
    }
    let t0 = w.clock();
    let total = skbs.len();
    if w.rps_out.len() < st.workers() {
        w.rps_out.resize_with(st.workers(), Vec::new);
    }
    let mut n = 0;
    let multi = st.workers() > 1;
    for i in 0..skbs.len() {
        let hash = skb_hash(&w.bufs, &mut skbs[i]);
        let mut target = (!map.is_empty()).then(|| map[reciprocal_scale(hash, map.len() as u32) as usize] as usize);
        if rfs {
            target = rfs_target(net, w, hash, target);
        }
        match target {
            // The local worker's packets too go through its backlog (enqueue_to_backlog for
            // any cpu >= 0): its limit, its flow limit and its quota apply to them, and they
            // queue behind what other workers sent it. With one worker there is no backlog.
            // Copied slice to slice: a by-value copy went through a stack temporary written
            // in pieces and read back whole (perf showed those loads as steer's hottest).
            Some(t) if multi => w.rps_out[t].extend_from_slice(std::slice::from_ref(&skbs[i])),
            _ => {
                if n != i {
                    skbs.copy_within(i..i + 1, n);
                }
                n += 1;
            }
        }
    }
    skbs.truncate(n);
    for target in 0..w.rps_out.len() {
        if !w.rps_out[target].is_empty() {
            enqueue_to_backlog(net, w, target);
        }
    }
    w.stage_done(Stage::Rps, total, t0);
}

/// RFS: the worker for flow `hash`. A flow the socket flow table does not know yet goes
/// where the CPU map sends it (`map_target`; without a map it is processed here, None); once a
/// reader on another worker has consumed it, it moves there, but only after everything it
/// queued on its current worker has been processed. Stricter than the kernel, the flow table
/// also notes flows placed by the map (the kernel leaves their bucket alone), so that every
/// flow of a bucket is where the bucket says: the first move keeps the order too, and so does
/// a flow sharing its bucket with one that moved. The price: flows no reader claims follow
/// their bucket's worker, not the map (with few buckets, few workers get them).
fn rfs_target(net: &Net, w: &mut Worker, hash: u32, map_target: Option<usize>) -> Option<usize> {
    let desired = net.rps.sock_flow.desired(hash).filter(|&c| c < net.rps.workers());
    if desired.is_none() && map_target.is_none() {
        // Neither a reader nor a map: processed here at once, not queued (get_rps_cpu
        // returns -1), and not noted. A flow whose reader's bucket another flow took over
        // lands here too, and can overtake its packets still queued on the old reader's
        // worker, as in the kernel (README: deliberate differences).
        return None;
    }
    let slot = hash as usize & (w.rps_flows.len() - 1);
    let f = w.rps_flows[slot];
    let cpu = match (f.cpu, desired) {
        (rfs::NO_CPU, d) => d.or(map_target).unwrap_or(w.id),
        (cur, Some(next)) if cur as usize != next && drained(net, w, cur as usize, f.last_qtail) => {
            w.c.rfs_moves += 1;
            next
        }
        (cur, _) => cur as usize,
    };
    // Where this packet will stand in that worker's backlog.
    w.rps_flows[slot] = rfs::DevFlow { cpu: cpu as u16, last_qtail: queue_tail(w, cpu) + 1 };
    Some(cpu)
}

/// The tail of what this worker has sent to worker `cpu` so far: the packets queued on its
/// ring and those staged for it in this poll.
fn queue_tail(w: &Worker, cpu: usize) -> u64 {
    w.ring_queued.get(cpu).copied().unwrap_or(0) + w.rps_out.get(cpu).map_or(0, Vec::len) as u64
}

/// True when worker `cpu` (this one included) has processed every packet this worker queued
/// for it up to `qtail`.
fn drained(net: &Net, w: &Worker, cpu: usize, qtail: u64) -> bool {
    let queued = w.ring_queued.get(cpu).copied().unwrap_or(0);
    let staged = w.rps_out.get(cpu).map_or(0, Vec::len) as u64;
    if qtail > queued && qtail <= queued + staged {
        // Still staged in this poll, not in the ring yet: whatever the ring shows, the flow
        // has a packet on its way there.
        return false;
    }
    let done = net.rps.ring_done.get(cpu).and_then(|r| r.get(w.id)).map_or(u64::MAX, |d| d.load(std::sync::atomic::Ordering::Acquire));
    // Packets a full ring refused never went in: the tail is at most what was queued.
    done >= qtail.min(queued)
}

/// enqueue_to_backlog for this worker's staged packets for `target`, a run at once: the
/// target's backlog (all its rings) takes a packet while it holds at most
/// `netdev_max_backlog` (else `cpu_backlog`), and from half of that, when this worker applies
/// the flow limit, a flow with more than half of its recent packets is dropped
/// (`cpu_backlog_flow_limit`). Room is reserved in the target's length for the whole run
/// first and what was not taken is given back: two atomic operations per run, and two
/// producers racing near the limit each see the other's whole run (one may drop a packet the
/// kernel's lock would have let in, never the other way round).
fn enqueue_to_backlog(net: &Net, w: &mut Worker, target: usize) {
    use std::sync::atomic::Ordering;
    let st = &net.rps;
    let mut staged = std::mem::take(&mut w.rps_out[target]);
    let len = st.backlog_len.get(target);
    let (Some(len), Some(mut ring)) = (len, len.and_then(|_| w.rps_tx.get_mut(target).and_then(Option::take))) else {
        // No ring to that worker (cannot happen with rings from `backlog_rings`).
        for s in staged.drain(..) {
            w.drop_pkt(s.pkt, DropReason::CpuBacklog);
        }
        w.rps_out[target] = staged;
        return;
    };
    let max = st.max_backlog as i64;
    let run = staged.len() as i64;
    let before = len.0.fetch_add(run, Ordering::AcqRel).max(0);
    // The flow limit is the enqueuing CPU's (skb_flow_limit reads this CPU's softnet_data):
    // its bit in the bitmap, one history for every target.
    let limit_flows = st.flow_limit_cpus >> w.id & 1 == 1 && before + run > max / 2;
    let mut queued = 0u64;
    if limit_flows {
        let mut fl = w.flow_limit.take().unwrap_or_else(|| FlowLimit::new(net.tun.flow_limit_table_len as usize));
        for s in staged.drain(..) {
            let qlen = before + queued as i64;
            if qlen > max {
                w.drop_pkt(s.pkt, DropReason::CpuBacklog);
            } else if qlen >= max / 2 && fl.over_limit(s.hash) {
                w.drop_pkt(s.pkt, DropReason::CpuBacklogFlowLimit);
            } else {
                match ring.push(s) {
                    Ok(()) => queued += 1,
                    Err(rtrb::PushError::Full(s)) => w.drop_pkt(s.pkt, DropReason::CpuBacklog),
                }
            }
        }
        w.flow_limit = Some(fl);
    } else {
        let room = (max + 1 - before).clamp(0, run) as usize;
        let (sent, refused) = ring.push_partial_slice(&staged[..room]);
        queued = sent.len() as u64;
        for s in refused.iter().chain(&staged[room..]) {
            w.drop_pkt(s.pkt, DropReason::CpuBacklog);
        }
        staged.clear();
    }
    if queued < run as u64 {
        len.0.fetch_sub(run - queued as i64, Ordering::AcqRel);
    }
    w.rps_tx[target] = Some(ring);
    w.rps_out[target] = staged;
    w.ring_queued[target] += queued;
    if target == w.id {
        // This worker serves its own backlog in its next round: no wake-up.
        return;
    }
    w.c.rps_steered += queued;
    if queued > 0 && st.backlogs[target].schedule() {
        w.wake_pending |= 1 << target;
    }
}

/// End of a round: one wake-up per target that went from idle to scheduled (net_rps_action).
pub fn send_wakeups(net: &Net, w: &mut Worker) {
    let mut pending = std::mem::take(&mut w.wake_pending);
    while pending != 0 {
        let t = pending.trailing_zeros() as usize;
        pending &= pending - 1;
        if let Some(b) = net.rps.backlogs.get(t) {
            b.wake();
            w.c.rps_wakeups += 1;
        }
    }
}

/// process_backlog: this worker's backlog as a NAPI instance, up to `quota` packets through
/// the receive path. Returns how many.
pub fn process_backlog(net: &Net, w: &mut Worker, quota: usize) -> usize {
    if !w.backlog_pending() {
        return 0;
    }
    w.clock.next_poll(net.tun.clock_sample);
    let mut skbs = std::mem::take(&mut w.skb_scratch);
    skbs.clear();
    let taken = &mut w.backlog_taken;
    if taken.len() < w.backlog_rx.len() {
        taken.resize(w.backlog_rx.len(), 0);
    }
    // Each call starts at the ring after the last one it took from: one sender keeping its
    // ring full must not starve the others (the kernel's backlog is one FIFO for all senders).
    let rings = w.backlog_rx.len();
    let first = w.backlog_next % rings.max(1);
    for src in (first..rings).chain(0..first) {
        let ring = &mut w.backlog_rx[src];
        let want = quota.saturating_sub(skbs.len()).min(ring.slots());
        if want == 0 {
            continue;
        }
        let start = skbs.len();
        skbs.resize(start + want, Skb::default());
        let (got, _) = ring.pop_partial_slice(&mut skbs[start..]);
        let got = got.len();
        skbs.truncate(start + got);
        taken[src] += got as u32;
        w.backlog_next = src + 1;
    }
    let n = skbs.len();
    // Another worker wrote these packets: their headers are in its cache, not ours.
    for s in &skbs {
        w.bufs.prefetch_data(s.pkt);
    }
    if let Some(len) = net.rps.backlog_len.get(w.id) {
        len.0.fetch_sub(n as i64, std::sync::atomic::Ordering::AcqRel);
    }
    w.c.backlog_processed += n as u64;
    w.c.napi_polls += 1;
    if net.tun.listified != 0 {
        crate::rx::receive_list(net, w, &mut skbs);
    } else {
        crate::rx::receive_single(net, w, &skbs);
    }
    skbs.clear();
    w.skb_scratch = skbs;
    n
}

/// After the poll's end (its transmit flush): says how far this worker has processed each
/// producer's packets, one store per ring, for RFS's in-order rule. Not before: a flow may
/// move only once its old packets have left this worker (the kernel counts a packet as
/// dequeued after `__netif_receive_skb`, which has queued it on its device).
pub fn publish_processed(net: &Net, w: &mut Worker) {
    for (i, t) in w.backlog_taken.iter_mut().enumerate() {
        if *t > 0 {
            if let Some(d) = w.backlog_src.get(i).and_then(|&src| net.rps.ring_done.get(w.id)?.get(src)) {
                d.store(d.load(std::sync::atomic::Ordering::Relaxed) + *t as u64, std::sync::atomic::Ordering::Release);
            }
            *t = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{IPPROTO_AH, IPPROTO_DCCP, IPPROTO_ESP, IPPROTO_SCTP, IPPROTO_UDPLITE};

    fn udp6_frame(vlan: Option<u16>, sport: u16) -> Vec<u8> {
        udp6_frame_labelled(vlan, sport, 0)
    }

    fn udp6_frame_labelled(vlan: Option<u16>, sport: u16, flow_label: u32) -> Vec<u8> {
        use crate::wire::build::{build, L3Spec, L4Spec, PacketSpec};
        let (src, dst) =
            ([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        let spec = PacketSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            vlan,
            l3: L3Spec::V6 { src, dst, traffic_class: 0, flow_label },
            l4: L4Spec::Udp { src_port: sport, dst_port: 53 },
            ttl: 64,
            frame_len: 80,
        };
        let mut f = vec![0u8; 128];
        let n = build(&spec, &mut f).unwrap();
        f.truncate(n);
        f
    }

    /// A flow's packet staged for a worker in this poll (not yet in its ring) holds the flow
    /// there: a flow sharing its table slot that a reader wants elsewhere must not move it,
    /// or its next packet would overtake the staged one (get_rps_cpu's in-order rule).
    #[test]
    fn a_flow_does_not_move_while_its_packet_waits_in_this_poll_get_rps_cpu() {
        use crate::net::Pipeline;
        use crate::tunables::Tunables;
        let pool = crate::buf::Pool::new(64).unwrap();
        let net = Net::with_workers(Tunables { rps_sock_flow_entries: 1024, ..Tunables::default() }, Pipeline::L3fwd, 3);
        let mut w = Worker::new(0, &pool);
        // Five earlier packets went to worker 1 and were processed there (so "staged"
        // must be told apart from "queued and done" by the tail, not by the counts alone).
        w.ring_queued = vec![0, 5, 0];
        net.rps.ring_done[1][0].store(5, std::sync::atomic::Ordering::Release);
        w.rps_out.resize_with(3, Vec::new);
        // One slot: flows F and G share it. G's reader runs on worker 2; F has none.
        w.rps_flows = vec![rfs::DevFlow::default(); 1];
        let (f, g) = (0x1234_0001, 0x5678_0001);
        net.rps.sock_flow.record(g, 2);
        assert_eq!(rfs_target(&net, &mut w, f, Some(1)), Some(1), "F1 where the map sends it");
        w.rps_out[1].push(Skb::default());
        assert_eq!(rfs_target(&net, &mut w, g, Some(1)), Some(1), "G1 may not move the slot while F1 is staged for worker 1");
        w.rps_out[1].push(Skb::default());
        assert_eq!(rfs_target(&net, &mut w, f, Some(1)), Some(1), "F2 follows F1");
        assert_eq!(w.c.rfs_moves, 0);
        // Once in the ring and processed there, the slot may move to G's reader.
        w.ring_queued[1] += 2;
        w.rps_out[1].clear();
        net.rps.ring_done[1][0].store(7, std::sync::atomic::Ordering::Release);
        assert_eq!(rfs_target(&net, &mut w, g, Some(1)), Some(2));
        assert_eq!(w.c.rfs_moves, 1);
    }

    /// RFS without an RPS map still steers (get_rps_cpu: `!flow_table && !map` is the only
    /// way out before the hash): known flows go to their readers, the rest stay here.
    #[test]
    fn rfs_steers_without_a_cpu_map() {
        use crate::net::Pipeline;
        use crate::tunables::Tunables;
        let pool = crate::buf::Pool::new(64).unwrap();
        let net = Net::with_workers(Tunables { rps_sock_flow_entries: 1024, ..Tunables::default() }, Pipeline::L3fwd, 2);
        assert!(net.rps.cpus.is_empty(), "no rps_cpus");
        let (mut tx, _rx) = backlog::backlog_rings(2, 16);
        let mut w = Worker::new(0, &pool);
        w.rps_tx = std::mem::take(&mut tx[0]);
        w.ring_queued = vec![0; 2];
        w.rps_flows = vec![rfs::DevFlow::default(); 64];
        let (known, unknown) = (0x5678_0001u32, 0x1234_0002u32);
        net.rps.sock_flow.record(known, 1);
        let poll = |w: &mut Worker, hashes: &[u32]| {
            let mut skbs: Vec<Skb> =
                hashes.iter().map(|&hash| Skb { pkt: w.bufs.alloc_copy(&[0u8; 60]).unwrap(), hash, ..Skb::default() }).collect();
            steer(&net, w, &mut skbs);
            let kept: Vec<u32> = skbs.iter().map(|s| s.hash).collect();
            for s in skbs {
                w.bufs.free(s.pkt);
            }
            kept
        };
        assert_eq!(poll(&mut w, &[known, unknown, known]), vec![unknown], "the unknown flow is processed here at once");
        assert_eq!(w.ring_queued[1], 2, "the known flow went to its reader's backlog");
        assert_eq!(w.ring_queued[0], 0, "nothing queued on this worker's own backlog (get_rps_cpu: -1)");
        assert_eq!(w.c.rps_steered, 2, "steered to another worker: the known flow");
    }

    /// Worker `id` of two, sending into the backlog rings `tx` (its row of `backlog_rings`).
    fn sender(id: usize, pool: &crate::buf::Pool, tx: Vec<Option<backlog::BacklogTx>>) -> Worker {
        let mut w = Worker::new(id, pool);
        w.rps_tx = tx;
        w.ring_queued = vec![0; 2];
        w.rps_out.resize_with(2, Vec::new);
        w
    }

    /// One CPU's backlog takes a packet while it holds at most netdev_max_backlog, all
    /// senders together, the CPU's own packets included (enqueue_to_backlog's qlen is the
    /// target's one input queue): with a limit of 4, runs of 3 from itself and from another
    /// worker leave 5 queued and drop 1; processing gives the room back.
    #[test]
    fn a_backlog_holds_max_backlog_plus_one_from_all_its_senders() {
        use crate::net::Pipeline;
        use crate::tunables::Tunables;
        let pool = crate::buf::Pool::new(1024).unwrap();
        let net = Net::with_workers(Tunables { netdev_max_backlog: 4, ..Tunables::default() }, Pipeline::L3fwd, 2);
        let (tx, mut rx) = backlog::backlog_rings(2, net.rps.max_backlog + 1);
        let mut ws: Vec<Worker> = tx.into_iter().enumerate().map(|(id, tx)| sender(id, &pool, tx)).collect();
        ws[1].backlog_rx = std::mem::take(&mut rx[1]);
        ws[1].backlog_src = vec![0, 1];
        for k in [1, 0] {
            for _ in 0..3 {
                let p = ws[k].bufs.alloc_copy(&[0u8; 60]).unwrap();
                ws[k].rps_out[1].push(Skb { pkt: p, hash: 7, ..Skb::default() });
            }
            enqueue_to_backlog(&net, &mut ws[k], 1);
        }
        assert_eq!((ws[1].ring_queued[1], ws[0].ring_queued[1]), (3, 2), "4 + 1 in all");
        assert_eq!(ws[0].c.dropped(DropReason::CpuBacklog), 1, "the sixth dropped by its sender");
        assert_eq!((ws[0].c.rps_steered, ws[1].c.rps_steered), (2, 0), "its own packets are not steered away");
        assert_eq!(ws[0].wake_pending, 1 << 1, "the other worker wakes it; it does not wake itself");
        assert_eq!(net.rps.backlog_len[1].0.load(std::sync::atomic::Ordering::Relaxed), 5);
        assert_eq!(process_backlog(&net, &mut ws[1], 64), 5);
        assert_eq!(net.rps.backlog_len[1].0.load(std::sync::atomic::Ordering::Relaxed), 0, "room given back");
    }

    /// With the flow limit on, the backlog's own limit still holds: past
    /// netdev_max_backlog, and when the sender's ring is full, packets of flows the limit
    /// lets through are dropped as `cpu_backlog`, not as the flow limit's.
    #[test]
    fn under_the_flow_limit_a_full_backlog_or_ring_drops_as_cpu_backlog() {
        use crate::net::Pipeline;
        use crate::tunables::Tunables;
        // (ring slots, packets queued): the backlog's limit (4 + 1) with room in the ring,
        // then a ring of 3.
        for (ring_cap, queued) in [(8, 5), (3, 3)] {
            let pool = crate::buf::Pool::new(64).unwrap();
            let tun = Tunables { netdev_max_backlog: 4, flow_limit_cpu_bitmap: 1, ..Tunables::default() };
            let net = Net::with_workers(tun, Pipeline::L3fwd, 2);
            let (tx, _rx) = backlog::backlog_rings(2, ring_cap);
            let mut w = sender(0, &pool, tx.into_iter().next().unwrap());
            // Seven flows, one packet each: none has half of the history.
            for h in 1..=7 {
                let p = w.bufs.alloc_copy(&[0u8; 60]).unwrap();
                w.rps_out[1].push(Skb { pkt: p, hash: h * 0x1000_0000, ..Skb::default() });
            }
            enqueue_to_backlog(&net, &mut w, 1);
            assert_eq!(w.ring_queued[1], queued, "ring of {ring_cap}");
            assert_eq!(w.c.dropped(DropReason::CpuBacklog), 7 - queued);
            assert_eq!(w.c.dropped(DropReason::CpuBacklogFlowLimit), 0);
            assert!(w.flow_limit.is_some(), "the flow limit was applied");
            assert_eq!(net.rps.backlog_len[1].0.load(std::sync::atomic::Ordering::Relaxed), queued as i64);
        }
    }

    /// One sender keeping its ring full does not starve another: each process_backlog
    /// starts at the next ring, so the second poll takes the small ring's packets.
    #[test]
    fn the_backlog_serves_each_senders_ring_in_turn() {
        use crate::net::Pipeline;
        use crate::tunables::Tunables;
        let pool = crate::buf::Pool::new(1024).unwrap();
        let net = Net::with_workers(Tunables::default(), Pipeline::L3fwd, 3);
        let (mut tx, mut rx) = backlog::backlog_rings(3, 512);
        let mut w = Worker::new(0, &pool);
        w.backlog_rx = std::mem::take(&mut rx[0]);
        w.backlog_src = vec![0, 1, 2];
        w.ring_queued = vec![0; 3];
        // Frames of no protocol the receive path knows: processed, then dropped and freed.
        // (Its own ring, the first, stays empty.)
        for (sender, n) in [(1, 300), (2, 10)] {
            let ring = tx[sender][0].as_mut().unwrap();
            for _ in 0..n {
                let p = w.bufs.alloc_copy(&[0u8; 60]).unwrap();
                ring.push(Skb { pkt: p, ..Skb::default() }).unwrap();
            }
        }
        assert_eq!(process_backlog(&net, &mut w, 64), 64);
        assert_eq!(process_backlog(&net, &mut w, 64), 64);
        assert_eq!(w.backlog_rx[2].slots(), 0, "the second sender's ring was served by the second poll");
        assert_eq!(w.backlog_rx[1].slots(), 300 - 64 - 54);
        assert_eq!(w.c.backlog_processed, 128);
    }

    fn hash_of(bufs: &mut BufCache, f: &[u8]) -> (u32, bool) {
        let p = bufs.alloc_copy(f).unwrap();
        let mut skb = Skb::build(p, bufs.data(p), 0, 0, &[2, 0, 0, 0, 0, 2]);
        let h = skb_hash(bufs, &mut skb);
        bufs.free(p);
        (h, skb.l4_hash)
    }

    /// As the kernel's flow dissector: a flow is the same flow with an 802.1Q tag (not yet
    /// removed when RPS steers) or a Hop-by-Hop header before its UDP header.
    #[test]
    fn the_software_hash_reads_through_a_vlan_tag_and_ipv6_extension_headers() {
        let pool = crate::buf::Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let plain = udp6_frame(None, 1000);
        let (h, l4) = hash_of(&mut bufs, &plain);
        assert!(l4, "UDP ports in the hash");
        assert_eq!(hash_of(&mut bufs, &udp6_frame(Some(0x6000), 1000)), (h, true), "priority-tagged");
        assert_eq!(hash_of(&mut bufs, &udp6_frame(Some(7), 1000)), (h, true), "VLAN 7");
        assert_ne!(hash_of(&mut bufs, &udp6_frame(None, 1001)).0, h, "another source port");
        // Insert a Hop-by-Hop header (PadN) between the IPv6 and UDP headers.
        let mut hbh = plain[..54].to_vec();
        hbh[20] = 0;
        let plen = u16::from_be_bytes([plain[18], plain[19]]) + 8;
        hbh[18..20].copy_from_slice(&plen.to_be_bytes());
        hbh.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        hbh.extend_from_slice(&plain[54..]);
        assert_eq!(hash_of(&mut bufs, &hbh), (h, true), "with a Hop-by-Hop header");
    }

    /// With a flow label the dissector stops at it: the label, not the ports, tells flows
    /// apart (a sender that changes the label moves the flow), and the hash counts as L4.
    #[test]
    fn an_ipv6_flow_label_stands_in_for_the_ports() {
        let pool = crate::buf::Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let (h, l4) = hash_of(&mut bufs, &udp6_frame_labelled(None, 1000, 0x12345));
        assert!(l4, "a labelled hash counts as L4");
        assert_eq!(hash_of(&mut bufs, &udp6_frame_labelled(None, 1001, 0x12345)).0, h, "other ports, same label: same flow");
        assert_ne!(hash_of(&mut bufs, &udp6_frame_labelled(None, 1000, 0x12346)).0, h, "a new label: another flow");
        assert_ne!(hash_of(&mut bufs, &udp6_frame(None, 1000)).0, h, "no label: the ports' hash");
        assert_eq!(hash_of(&mut bufs, &udp6_frame_labelled(Some(7), 1000, 0x12345)), (h, true), "through a VLAN tag");
    }

    fn udp4_frame(sport: u16) -> Vec<u8> {
        use crate::wire::build::{build, L3Spec, L4Spec, PacketSpec};
        let spec = PacketSpec {
            l3: L3Spec::V4 { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], tos: 0, ident: 0, dont_frag: true },
            l4: L4Spec::Udp { src_port: sport, dst_port: 53 },
            frame_len: 80,
            ..PacketSpec::default()
        };
        let mut f = vec![0u8; 128];
        let n = build(&spec, &mut f).unwrap();
        f.truncate(n);
        f
    }

    /// A UDP frame turned into `proto` (IPv4 or IPv6): the bytes after the IP header are
    /// `spi_at` bytes of zeros, the SPI, a sequence number.
    fn with_proto(mut f: Vec<u8>, v6: bool, proto: u8, spi_at: usize, spi: u32, seq: u32) -> Vec<u8> {
        let (proto_at, l4) = if v6 { (20, 54) } else { (23, 34) };
        f[proto_at] = proto;
        f[l4..l4 + spi_at].fill(0);
        f[l4 + spi_at..l4 + spi_at + 4].copy_from_slice(&spi.to_be_bytes());
        f[l4 + spi_at + 4..l4 + spi_at + 8].copy_from_slice(&seq.to_be_bytes());
        f
    }

    /// proto_ports_offset: the SPI of ESP (offset 0) and AH (offset 4) stands in for the
    /// ports, so the SAs between two gateways spread over workers; DCCP, UDP-Lite and SCTP
    /// hash their ports as TCP and UDP do.
    #[test]
    fn ipsec_spis_and_other_port_protocols_name_their_flows() {
        let pool = crate::buf::Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        for v6 in [false, true] {
            let base = || if v6 { udp6_frame(None, 1000) } else { udp4_frame(1000) };
            for (proto, spi_at) in [(IPPROTO_ESP, 0), (IPPROTO_AH, 4)] {
                let hashes: std::collections::HashSet<u32> = (1..=64u32)
                    .map(|spi| {
                        let (h, l4) = hash_of(&mut bufs, &with_proto(base(), v6, proto, spi_at, spi, 1));
                        assert!(l4, "v6 {v6} proto {proto}: the SPI is the flow's L4 part");
                        assert_eq!(hash_of(&mut bufs, &with_proto(base(), v6, proto, spi_at, spi, 99)).0, h, "the sequence number is not");
                        h
                    })
                    .collect();
                assert!(hashes.len() >= 60, "v6 {v6} proto {proto}: {} hashes for 64 SPIs", hashes.len());
            }
            for proto in [IPPROTO_DCCP, IPPROTO_UDPLITE, IPPROTO_SCTP] {
                let mut ports = |sport: u16| {
                    let mut f = if v6 { udp6_frame(None, sport) } else { udp4_frame(sport) };
                    f[if v6 { 20 } else { 23 }] = proto;
                    hash_of(&mut bufs, &f)
                };
                let (h, l4) = ports(1000);
                assert!(l4);
                assert_ne!(ports(1001).0, h, "v6 {v6} proto {proto}: the source port counts");
            }
        }
    }

    /// The dissector's IP rules: a fragment (MF or an offset; DF is no fragment) hashes
    /// without ports, so every piece of a datagram goes to one worker; IPv4 options move
    /// the ports, not the flow; a frame that is not IP is one flow, hash 1.
    #[test]
    fn fragments_hash_without_ports_options_are_skipped_and_non_ip_is_one_flow() {
        let pool = crate::buf::Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let (h, l4) = hash_of(&mut bufs, &udp4_frame(1000));
        assert!(l4);
        // udp4_frame sets DF: not a fragment, the ports count.
        assert_ne!(hash_of(&mut bufs, &udp4_frame(1001)).0, h);
        let frag = |sport: u16, field: u16| {
            let mut f = udp4_frame(sport);
            f[20..22].copy_from_slice(&field.to_be_bytes());
            f
        };
        let (first, l4) = hash_of(&mut bufs, &frag(1000, 0x2000));
        assert!(!l4, "a first fragment (MF) hashes no ports");
        assert_eq!(hash_of(&mut bufs, &frag(1001, 0x2000)).0, first);
        assert_eq!(hash_of(&mut bufs, &frag(1002, 0x0010)), (first, false), "a later piece: the same flow");
        assert_ne!(first, h);
        // Four bytes of options (ihl 6, a NOP and an End option): the ports after them.
        let plain = udp4_frame(1000);
        let mut opts = plain[..34].to_vec();
        opts[14] = 0x46;
        opts.extend_from_slice(&[1, 0, 0, 0]);
        opts.extend_from_slice(&plain[34..]);
        assert_eq!(hash_of(&mut bufs, &opts), (h, true), "with IPv4 options");
        // IPv6: a Fragment header (first piece, M set) and a later piece hash alike, no ports.
        let v6 = udp6_frame(None, 1000);
        let v6_frag = |sport: u16, field: u16| {
            let plain = udp6_frame(None, sport);
            let mut f = plain[..54].to_vec();
            f[20] = 44;
            let plen = u16::from_be_bytes([plain[18], plain[19]]) + 8;
            f[18..20].copy_from_slice(&plen.to_be_bytes());
            f.extend_from_slice(&[17, 0]);
            f.extend_from_slice(&field.to_be_bytes());
            f.extend_from_slice(&[0, 0, 0, 7]);
            f.extend_from_slice(&plain[54..]);
            f
        };
        let (f6, l4) = hash_of(&mut bufs, &v6_frag(1000, 0x0001));
        assert!(!l4);
        assert_eq!(hash_of(&mut bufs, &v6_frag(1001, 0x0001)).0, f6);
        assert_eq!(hash_of(&mut bufs, &v6_frag(1002, 0x0100)), (f6, false));
        assert_ne!(f6, hash_of(&mut bufs, &v6).0);
        // ARP.
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(hash_of(&mut bufs, &arp), (1, false));
    }

    #[test]
    fn reciprocal_scale_covers_every_target_evenly() {
        assert_eq!(reciprocal_scale(0, 3), 0);
        assert_eq!(reciprocal_scale(u32::MAX, 3), 2);
        let mut counts = [0u32; 3];
        for i in 0..3000u32 {
            counts[reciprocal_scale(i.wrapping_mul(0x9e37_79b9), 3) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (900..=1100).contains(&c)), "{counts:?}");
    }
}
