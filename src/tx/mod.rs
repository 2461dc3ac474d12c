//! Transmit: per-port queues filled during a poll and handed to the port at its end.
//!
//! Ports that take every packet at once (in-memory sinks, captures) get the staged vector
//! directly, in bursts of `tx.burst` with `xmit_more` semantics: every burst but the last
//! says "more follows", so the port rings its doorbell once per flush. That is the kernel's
//! qdisc bypass (TCQ_F_CAN_BYPASS): a qdisc that is empty and never pushed back adds nothing.
//!
//! Ports with a ring that can fill (`port::sim`, AF_PACKET, AF_XDP; BQL) go through the
//! port's qdisc: the staged packets are enqueued, then `qdisc_run` dequeues in bulks as large as `dql_avail()`
//! allows (`qdisc.bulk`), for at most dev_tx_weight (`net.core.dev_weight` ×
//! `net.core.dev_weight_tx_bias`, as the kernel derives it) packets per run, and hands
//! each bulk to the driver in one call (`xmit_more` on all but the last: one doorbell). What
//! the driver refuses is requeued and sent first next time; a stopped queue (BQL STACK_XOFF,
//! ring full) is not dequeued into until a completion wakes it.

use crate::buf::{BufCache, Pkt};
use crate::net::Net;
use crate::port::Port;
use crate::stats::{Counters, DropReason, Stage};
use crate::worker::Worker;

pub mod bql;
pub mod gso;
pub mod qdisc;
pub mod queue;
use qdisc::{QCtx, QdiscKind, QdiscSpec};
pub use queue::{TxQueue, QUEUE_SOFT_LIMIT};

/// The qdisc a port gets when its config names none: `net.core.default_qdisc` with
/// `txqueuelen`.
pub fn default_spec(net: &Net) -> QdiscSpec {
    QdiscSpec::new(QdiscKind::from_index(net.tun.default_qdisc as u64))
}

/// Hands one port's queue to the port: directly (no backpressure possible, or `noqueue`),
/// or through its qdisc.
pub fn xmit_queue(net: &Net, w: &mut Worker, port: u16) {
    let i = port as usize;
    if w.txq.get(i).is_none_or(|q| q.pkts.is_empty() && q.held() == 0) {
        return;
    }
    if w.port_mut(port).is_none() {
        hand_off(net, w, port);
        return;
    }
    let (Some(q), Some(dev)) = (w.txq.get_mut(i), w.ports.get_mut(i).and_then(Option::as_mut)) else {
        return;
    };
    let t0 = w.clock.start();
    let n = q.pkts.len();
    if q.qdisc.is_none() {
        let spec = q.spec.clone().unwrap_or_else(|| default_spec(net));
        let mtu = net.ifaces.get(i).map_or(1500, |f| f.mtu as u32) + 14;
        q.qdisc = Some(spec.build(net.tun.txqueuelen, mtu));
    }
    let noqueue = q.qdisc.as_ref().is_some_and(|qd| qd.kind() == QdiscKind::Noqueue);
    if dev.tx_queue().is_none() || noqueue {
        xmit_direct(net, q, dev.as_mut(), &mut w.bufs, &mut w.c);
    } else {
        enqueue_staged(q, &mut w.bufs, &mut w.c, w.now_ns);
        qdisc_run(net, q, dev.as_mut(), &mut w.bufs, &mut w.c, w.now_ns);
    }
    w.stage_done(Stage::PortTx, n, t0);
}

/// The bypass: the staged vector straight to the port in bursts; only the last burst says
/// no more follows (one doorbell). Refused packets are dropped (`tx_error`).
fn xmit_direct(net: &Net, q: &mut TxQueue, dev: &mut dyn Port, bufs: &mut BufCache, c: &mut Counters) {
    let burst = net.tun.tx_burst.max(1) as usize;
    let n = q.pkts.len();
    let mut sent_total = 0;
    let mut bytes = 0u64;
    for (k, chunk) in q.pkts.chunks(burst).enumerate() {
        let more = (k + 1) * burst < n;
        let sent = dev.tx_burst(bufs, chunk, more).min(chunk.len());
        if !more {
            c.doorbells += 1;
            q.stats.doorbells += 1;
        }
        bytes += chunk[..sent].iter().map(|p| p.total_len() as u64).sum::<u64>();
        for p in &chunk[sent..] {
            c.drop(DropReason::TxError);
            bufs.free(*p);
        }
        sent_total += sent;
    }
    q.pkts.clear();
    count_sent(q, c, sent_total, bytes);
    let (failed, failed_bytes) = dev.take_tx_failed();
    uncount_failed(q, c, failed, failed_bytes);
}

/// Counts `sent` packets of `bytes` the port took: the worker's ledger and the qdisc's
/// `tc -s` figures.
fn count_sent(q: &mut TxQueue, c: &mut Counters, sent: usize, bytes: u64) {
    c.tx += sent as u64;
    c.tx_bytes += bytes;
    if let Some(qd) = q.qdisc.as_mut() {
        let st = qd.stats_mut();
        st.packets += sent as u64;
        st.bytes += bytes;
    }
}

/// Moves what the port reports failed (now or from an earlier burst) from sent to
/// `tx_error`, in the ledger and the qdisc's figures. Linux differs here: its qdisc counts
/// at dequeue and never gives a figure back; sluice keeps `tc -s`'s Sent equal to what the
/// ledger calls transmitted.
fn uncount_failed(q: &mut TxQueue, c: &mut Counters, failed: u64, failed_bytes: u64) {
    if failed == 0 {
        return;
    }
    let n = c.tx_failed(failed, failed_bytes);
    if let Some(qd) = q.qdisc.as_mut() {
        let st = qd.stats_mut();
        st.packets = st.packets.saturating_sub(n);
        st.bytes = st.bytes.saturating_sub(failed_bytes);
    }
}

/// Frees what a qdisc dropped, each counted as `qdisc_drop`.
fn free_dropped(q: &mut TxQueue, bufs: &mut BufCache, c: &mut Counters) {
    for p in q.dropped.drain(..) {
        c.drop(DropReason::QdiscDrop);
        bufs.free(p);
    }
}

/// The staged packets into the qdisc (dev_queue_xmit's enqueue; a full qdisc drops).
pub(crate) fn enqueue_staged(q: &mut TxQueue, bufs: &mut BufCache, c: &mut Counters, now_ns: u64) {
    let Some(qd) = q.qdisc.as_mut() else { return };
    let mut cx = QCtx { bufs, now_ns, dropped: &mut q.dropped };
    let limit = qd.limit_pkts();
    for p in q.pkts.drain(..) {
        // Requeued packets count against the limit (the kernel keeps them in qlen).
        if !q.requeued.is_empty() && q.requeued.len() + qd.len() >= limit {
            qd.stats_mut().drops += 1;
            cx.dropped.push(p);
            continue;
        }
        qd.enqueue(p, &mut cx);
    }
    free_dropped(q, bufs, c);
}

/// The next packet to send: a requeued one first, else the qdisc's.
fn next_packet(q: &mut TxQueue, cx: &mut QCtx<'_>) -> Option<Pkt> {
    if let Some(p) = q.requeued.pop_front() {
        return Some(p);
    }
    q.qdisc.as_mut()?.dequeue(cx)
}

/// qdisc_run: bulks to the driver until the qdisc is empty, the queue stops, the driver
/// refuses, or dev_tx_weight (dev_weight × dev_weight_tx_bias) packets went (then the next
/// poll's flush continues: the kernel's reschedule). Returns packets sent.
pub fn qdisc_run(net: &Net, q: &mut TxQueue, dev: &mut dyn Port, bufs: &mut BufCache, c: &mut Counters, now_ns: u64) -> usize {
    let bulk = net.tun.qdisc_bulk != 0;
    let mut quota = net.tun.dev_tx_weight().max(1) as usize;
    let mut sent_total = 0;
    if let Some(t) = dev.tx_queue() {
        let s = &mut q.stats;
        s.bql_limit_last = t.dql.limit();
        s.bql_limit_max = s.bql_limit_max.max(s.bql_limit_last);
        s.bql_inflight_max = s.bql_inflight_max.max(t.dql.inflight());
        q.bql_trace.sample(now_ns, t.dql.limit(), t.dql.inflight());
    }
    loop {
        // A stopped queue is not dequeued into (the requeued packet waits too).
        let avail = match dev.tx_queue() {
            Some(t) if t.stopped() => {
                q.stats.found_stopped += 1;
                break;
            }
            Some(t) => Some(t.dql.avail() as i64),
            None => None,
        };
        let mut chain = std::mem::take(&mut q.chain);
        chain.clear();
        {
            let mut dropped = std::mem::take(&mut q.dropped);
            let mut cx = QCtx { bufs, now_ns, dropped: &mut dropped };
            // A requeued packet goes alone (dequeue_skb: one from gso_skb, no bulk), so the
            // requeued rest of a bulk drains before the qdisc is dequeued into again.
            let requeued = !q.requeued.is_empty();
            if let Some(first) = next_packet(q, &mut cx) {
                // Bulk: more while BQL's byte budget lasts (no BQL, no bulking).
                let mut budget = if bulk && !requeued { avail.unwrap_or(0) - first.total_len() as i64 } else { 0 };
                chain.push(first);
                while budget > 0 {
                    let Some(p) = next_packet(q, &mut cx) else { break };
                    budget -= p.total_len() as i64;
                    chain.push(p);
                }
            }
            q.dropped = dropped;
        }
        free_dropped(q, bufs, c);
        if chain.is_empty() {
            q.chain = chain;
            break;
        }
        // One driver call: xmit_more on all but the last packet, one doorbell.
        let sent = dev.tx_burst(bufs, &chain, false).min(chain.len());
        if sent > 0 {
            c.doorbells += 1;
            q.stats.doorbells += 1;
            q.stats.add_bulk(sent);
        }
        let bytes = chain[..sent].iter().map(|p| p.total_len() as u64).sum::<u64>();
        count_sent(q, c, sent, bytes);
        let (failed, failed_bytes) = dev.take_tx_failed();
        uncount_failed(q, c, failed, failed_bytes);
        sent_total += sent;
        let refused = chain.len() - sent;
        if refused > 0 {
            // NETDEV_TX_BUSY (or the queue stopped mid-bulk): back to the front, in order.
            for p in chain[sent..].iter().rev() {
                q.requeued.push_front(*p);
            }
            q.stats.requeues += refused as u64;
            if let Some(qd) = q.qdisc.as_mut() {
                qd.stats_mut().requeues += refused as u64;
            }
        }
        chain.clear();
        q.chain = chain;
        if refused > 0 {
            break;
        }
        quota = quota.saturating_sub(sent);
        if quota == 0 {
            q.stats.resched += 1;
            break;
        }
    }
    sent_total
}

/// Queues a packet for transmission on `port`; it goes out at the end of the poll.
#[inline]
pub fn enqueue(net: &Net, w: &mut Worker, port: u16, p: Pkt) {
    match w.txq.get_mut(port as usize) {
        Some(q) => {
            q.pkts.push(p);
            // Normally a queue goes out at the end of the poll; a huge poll (io from many
            // ports, ICMP storms) goes out early rather than grow without bound.
            if q.pkts.len() >= QUEUE_SOFT_LIMIT {
                xmit_queue(net, w, port);
            }
        }
        None => w.drop_pkt(p, DropReason::TxError),
    }
}

/// The worker that transmits what the others hand over: every port's queue 0 is worker 0's
/// (`Datapath::add_port_queues`), and only workers without a queue of a port hand off.
const HANDOFF_OWNER: usize = 0;

/// A queue for a port another worker owns goes to that port's handoff queue; what does not
/// fit is dropped (`qdisc_drop`). The owner is woken at the end of this round, as for a
/// backlog (it may be idle: nothing else would make it look before its next packet).
#[cold]
fn hand_off(net: &Net, w: &mut Worker, port: u16) {
    let Some(q) = w.txq.get_mut(port as usize) else { return };
    let mut pkts = std::mem::take(&mut q.pkts);
    match net.rps.tx_handoff.get(port as usize) {
        Some(h) => {
            let mut handed = 0;
            for p in pkts.drain(..) {
                match h.push(p) {
                    Ok(()) => handed += 1,
                    Err(p) => w.drop_pkt(p, DropReason::QdiscDrop),
                }
            }
            w.c.tx_handoffs += handed;
            if handed > 0 && net.rps.backlogs.get(HANDOFF_OWNER).is_some_and(|b| b.schedule()) {
                w.wake_pending |= 1 << HANDOFF_OWNER;
            }
        }
        None => {
            for p in pkts.drain(..) {
                w.drop_pkt(p, DropReason::TxError);
            }
        }
    }
    w.txq[port as usize].pkts = pkts;
}

/// Whether other workers handed over packets for this worker to transmit.
pub fn handoff_pending(net: &Net, w: &Worker) -> bool {
    w.id == HANDOFF_OWNER && net.rps.tx_handoff.iter().any(|h| !h.is_empty())
}

/// Takes what other workers handed over into this worker's queues, if it is the one that
/// transmits handed-over packets: one consumer, so a flow's packets leave in order (another
/// worker owning a queue of the same port must not take some of them to its own queue).
fn pull_handoff(net: &Net, w: &mut Worker) {
    if w.id != HANDOFF_OWNER {
        return;
    }
    // The owner has a queue of every port (its first), so whatever was handed over has a
    // queue to go to.
    for (i, h) in net.rps.tx_handoff.iter().enumerate() {
        debug_assert!(h.is_empty() || w.port_queue(i as u16).is_some(), "the handoff owner lacks a queue of port {i}");
        while let Some(p) = h.pop() {
            w.txq[i].pkts.push(p);
            if w.txq[i].pkts.len() >= QUEUE_SOFT_LIMIT {
                xmit_queue(net, w, i as u16);
            }
        }
    }
}

/// End of a poll: every queue goes out (with what other workers handed over).
pub fn flush_all(net: &Net, w: &mut Worker) {
    if net.rps.workers() > 1 {
        pull_handoff(net, w);
    }
    for port in 0..w.txq.len() as u16 {
        xmit_queue(net, w, port);
    }
}

/// At the end of a run: keeps flushing and reaping until no qdisc holds anything (a NIC
/// model's ring drains at its line rate, so this waits for it), at most `DRAIN_WAIT`; what
/// is still held then is dropped (`tx_error`), so nothing stays in flight.
pub fn drain_qdiscs(net: &Net, w: &mut Worker) {
    let deadline = std::time::Instant::now() + DRAIN_WAIT;
    while w.ports.iter().zip(&w.txq).any(|(p, q)| p.is_some() && q.held() > 0) {
        flush_all(net, w);
        reap_completions(w);
        if std::time::Instant::now() >= deadline {
            for (p, q) in w.ports.iter().zip(w.txq.iter_mut()) {
                if p.is_none() {
                    continue;
                }
                let mut dropped = Vec::new();
                dropped.extend(q.requeued.drain(..));
                if let Some(qd) = q.qdisc.as_mut() {
                    let mut cx = QCtx { bufs: &mut w.bufs, now_ns: w.now_ns, dropped: &mut Vec::new() };
                    while let Some(p) = qd.dequeue(&mut cx) {
                        dropped.push(p);
                    }
                    dropped.append(cx.dropped);
                }
                for p in dropped {
                    w.c.drop(DropReason::TxError);
                    w.bufs.free(p);
                }
            }
            break;
        }
        std::hint::spin_loop();
    }
}

/// Longest [`drain_qdiscs`] waits for rings to drain.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// The transmit softirq (net_tx_action), once per softirq round: ports with a ring reap
/// their completions (which wakes stopped queues), a kernel ring with frames waiting for
/// room rings again (`Port::tx_waiting`), and qdiscs still holding packets run again, even
/// when no poll received anything (a sender waiting for buffers).
pub fn tx_action(net: &Net, w: &mut Worker) {
    if net.rps.workers() > 1 {
        // Handed-over packets go out now, not after this worker's next busy poll (its own
        // ports may have nothing to receive for a long time).
        pull_handoff(net, w);
    }
    for i in 0..w.ports.len() {
        let Some(dev) = w.ports[i].as_mut() else { continue };
        if dev.tx_queue().is_some() || dev.tx_waiting() {
            dev.tx_completions(&mut w.bufs);
        }
        if w.txq.get(i).is_some_and(|q| !q.is_empty()) {
            xmit_queue(net, w, i as u16);
        }
    }
}

/// Reaps transmit completions on every port.
pub fn reap_completions(w: &mut Worker) {
    for dev in w.ports.iter_mut().flatten() {
        dev.tx_completions(&mut w.bufs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::Pool;
    use crate::net::Pipeline;
    use crate::tunables::Tunables;

    /// A packet handed to the owner of a port goes out at the owner's next round even when
    /// the owner receives nothing (it had waited for the owner's next busy poll), and the
    /// owner is woken once at the end of the sender's round.
    #[test]
    fn handed_over_packets_wake_the_owner_and_leave_in_its_next_round() {
        use crate::port::sink::{CheckSpec, Sink, SinkKind};
        let pool = Pool::new(64).unwrap();
        let tun = Tunables { rps_cpus: 0b11, ..Tunables::default() };
        let mut net = Net::new(tun, Pipeline::L3fwd);
        net.ifaces.push(crate::rx::route::Iface::new("p0", [2, 0, 0, 0, 0, 1]));
        net.rps.tx_handoff.push(crossbeam_queue::ArrayQueue::new(8));
        let mut w0 = Worker::new(0, &pool);
        w0.add_port(0, Some(Box::new(Sink::new("p0", SinkKind::Null, CheckSpec::default()))));
        let mut w1 = Worker::new(1, &pool);
        w1.add_port(0, None);
        for _ in 0..3 {
            let p = w1.bufs.alloc_copy(&[0u8; 60]).unwrap();
            w1.txq[0].pkts.push(p);
        }
        assert!(!handoff_pending(&net, &w0));
        flush_all(&net, &mut w1);
        assert_eq!(w1.wake_pending, 1 << HANDOFF_OWNER, "the owner is to be woken");
        assert!(handoff_pending(&net, &w0), "the owner sees work (it must not go idle)");
        assert!(!handoff_pending(&net, &w1), "not the sender's to transmit");
        // A second hand-over while the owner is still scheduled wakes nobody again.
        w1.wake_pending = 0;
        let p = w1.bufs.alloc_copy(&[0u8; 60]).unwrap();
        w1.txq[0].pkts.push(p);
        flush_all(&net, &mut w1);
        assert_eq!(w1.wake_pending, 0);
        tx_action(&net, &mut w0);
        assert_eq!(w0.c.tx, 4, "sent without anything received");
        assert!(!handoff_pending(&net, &w0));
        assert_eq!(w0.buffers_in_use() + w1.buffers_in_use(), 0, "each buffer freed once");
    }

    /// A port whose frames wait for room in a kernel ring (`tx_waiting`) gets its doorbell
    /// rung again at every transmit round, even a round in which nothing is sent, until
    /// none wait: otherwise an idle worker would leave them in the ring until the next
    /// packet came.
    #[test]
    fn frames_waiting_in_a_port_are_rung_again_each_round_until_none_wait() {
        use crate::port::PortStats;
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        use std::sync::Arc;
        /// Two waiting frames leave per doorbell.
        struct Waiting {
            frames: usize,
            rung: Arc<AtomicUsize>,
        }
        impl Port for Waiting {
            fn name(&self) -> &str {
                "w0"
            }
            fn rx_burst(&mut self, _: &mut BufCache, _: &mut Vec<Pkt>, _: usize) -> usize {
                0
            }
            fn tx_burst(&mut self, _: &mut BufCache, _: &[Pkt], _: bool) -> usize {
                0
            }
            fn tx_completions(&mut self, _: &mut BufCache) -> usize {
                self.rung.fetch_add(1, Relaxed);
                self.frames = self.frames.saturating_sub(2);
                0
            }
            fn tx_waiting(&self) -> bool {
                self.frames > 0
            }
            fn stats(&self) -> PortStats {
                PortStats::default()
            }
        }
        let pool = Pool::new(8).unwrap();
        let net = Net::new(Tunables::default(), Pipeline::L3fwd);
        let mut w = Worker::new(0, &pool);
        let rung = Arc::new(AtomicUsize::new(0));
        w.add_port(0, Some(Box::new(Waiting { frames: 5, rung: rung.clone() })));
        for round in 1..=5 {
            tx_action(&net, &mut w);
            assert_eq!(w.ports[0].as_ref().unwrap().tx_waiting(), round < 3, "after round {round}");
        }
        assert_eq!(rung.load(Relaxed), 3, "rung at each round while frames waited, then no more");
    }

    /// Only the owner takes handed-over packets: another worker owning a queue of the same
    /// port does not take some of them to its own queue (a flow's packets would leave on two
    /// queues, out of order).
    #[test]
    fn only_the_owner_takes_handed_over_packets() {
        use crate::port::sink::{CheckSpec, Sink, SinkKind};
        let pool = Pool::new(64).unwrap();
        let mut net = Net::new(Tunables { rps_cpus: 0b11, ..Tunables::default() }, Pipeline::L3fwd);
        net.ifaces.push(crate::rx::route::Iface::new("p0", [2, 0, 0, 0, 0, 1]));
        net.rps.tx_handoff.push(crossbeam_queue::ArrayQueue::new(8));
        let mut w1 = Worker::new(1, &pool);
        w1.add_port(0, Some(Box::new(Sink::new("p0q1", SinkKind::Null, CheckSpec::default()))));
        let p = w1.bufs.alloc_copy(&[0u8; 60]).unwrap();
        net.rps.tx_handoff[0].push(p).unwrap();
        assert!(!handoff_pending(&net, &w1), "worker 1 owns queue 1, not the handoff");
        tx_action(&net, &mut w1);
        assert_eq!((w1.c.tx, net.rps.tx_handoff[0].len()), (0, 1), "left for worker 0");
        if let Some(p) = net.rps.tx_handoff[0].pop() {
            w1.bufs.free(p);
        }
    }

    /// Requeued packets count against the qdisc's limit (the kernel keeps them in qlen): a
    /// pfifo of 4 holding 3 with 1 requeued is full, so the next staged packet is dropped.
    #[test]
    fn requeued_packets_count_against_the_qdisc_limit() {
        let pool = Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let mut c = Counters::default();
        let mut q = TxQueue::default();
        let spec = QdiscSpec { limit: Some(4), ..QdiscSpec::new(QdiscKind::Pfifo) };
        q.qdisc = Some(spec.build(1000, 1500));
        let mut pkts = Vec::new();
        assert_eq!(bufs.alloc_bulk(&mut pkts, 5, 60), 5);
        q.requeued.push_back(pkts[0]);
        q.pkts.extend_from_slice(&pkts[1..4]);
        enqueue_staged(&mut q, &mut bufs, &mut c, 0);
        assert_eq!((q.qdisc.as_ref().unwrap().len(), c.dropped(DropReason::QdiscDrop)), (3, 0));
        q.pkts.push(pkts[4]);
        enqueue_staged(&mut q, &mut bufs, &mut c, 0);
        assert_eq!((q.qdisc.as_ref().unwrap().len(), c.dropped(DropReason::QdiscDrop)), (3, 1), "1 requeued + 3 queued = the limit");
        let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut q.dropped };
        while let Some(p) = q.qdisc.as_mut().unwrap().dequeue(&mut cx) {
            cx.bufs.free(p);
        }
        bufs.free(q.requeued.pop_front().unwrap());
        assert_eq!(bufs.in_use(), 0);
    }

    /// Sends the port reports failed afterwards move from sent to `tx_error` in the
    /// worker's ledger and in the qdisc's `tc -s` figures alike.
    #[test]
    fn failed_sends_leave_the_ledger_and_the_qdisc_figures() {
        let mut c = Counters::default();
        let mut q = TxQueue { qdisc: Some(QdiscSpec::new(QdiscKind::Pfifo).build(1000, 1500)), ..TxQueue::default() };
        count_sent(&mut q, &mut c, 5, 500);
        uncount_failed(&mut q, &mut c, 2, 200);
        assert_eq!((c.tx, c.tx_bytes, c.dropped(DropReason::TxError)), (3, 300, 2));
        let st = q.qdisc.as_ref().unwrap().stats();
        assert_eq!((st.packets, st.bytes), (3, 300));
    }

    /// A driver that takes nothing (NETDEV_TX_BUSY on the first packet).
    struct Busy;
    impl crate::port::Port for Busy {
        fn name(&self) -> &str {
            "busy"
        }
        fn rx_burst(&mut self, _: &mut BufCache, _: &mut Vec<Pkt>, _: usize) -> usize {
            0
        }
        fn tx_burst(&mut self, _: &mut BufCache, _: &[Pkt], _: bool) -> usize {
            0
        }
        fn stats(&self) -> crate::port::PortStats {
            crate::port::PortStats::default()
        }
    }

    /// A driver call that takes nothing rings no doorbell and makes no bulk: the packets
    /// go back to the front of the queue, in order, counted as requeues.
    #[test]
    fn a_driver_call_that_takes_nothing_rings_no_doorbell() {
        let net = Net::new(Tunables::default(), Pipeline::Io);
        let pool = Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let mut c = Counters::default();
        let mut q = TxQueue { qdisc: Some(QdiscSpec::new(QdiscKind::Pfifo).build(1000, 1500)), ..TxQueue::default() };
        let mut pkts = Vec::new();
        assert_eq!(bufs.alloc_bulk(&mut pkts, 3, 60), 3);
        q.pkts.extend_from_slice(&pkts);
        enqueue_staged(&mut q, &mut bufs, &mut c, 0);
        assert_eq!(qdisc_run(&net, &mut q, &mut Busy, &mut bufs, &mut c, 0), 0);
        assert_eq!((c.doorbells, q.stats.doorbells, c.tx), (0, 0, 0));
        assert!(q.requeued.iter().eq(pkts.iter().take(q.requeued.len())), "requeued in order");
        assert!(q.stats.requeues > 0);
        while let Some(p) = q.requeued.pop_front() {
            bufs.free(p);
        }
        let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut q.dropped };
        while let Some(p) = q.qdisc.as_mut().unwrap().dequeue(&mut cx) {
            cx.bufs.free(p);
        }
        assert_eq!(bufs.in_use(), 0);
    }

    /// drain_qdiscs at the end of a run: what a driver never takes (the packets it refused
    /// and those still in the qdisc) is dropped as tx_error once the wait is over, so
    /// nothing stays held and every buffer goes back.
    #[test]
    fn what_a_driver_never_takes_is_dropped_when_the_drain_gives_up() {
        let net = Net::new(Tunables::default(), Pipeline::Io);
        let pool = Pool::new(64).unwrap();
        let mut w = Worker::new(0, &pool);
        w.add_port(0, Some(Box::new(Busy)));
        let mut pkts = Vec::new();
        assert_eq!(w.bufs.alloc_bulk(&mut pkts, 5, 60), 5);
        let q = &mut w.txq[0];
        q.qdisc = Some(QdiscSpec::new(QdiscKind::Pfifo).build(1000, 1500));
        q.pkts.extend_from_slice(&pkts[..4]);
        enqueue_staged(q, &mut w.bufs, &mut w.c, 0);
        q.requeued.push_back(pkts[4]);
        assert_eq!(q.held(), 5);
        drain_qdiscs(&net, &mut w);
        assert_eq!((w.c.dropped(DropReason::TxError), w.c.tx), (5, 0));
        assert_eq!(w.txq[0].held(), 0);
        assert_eq!(w.buffers_in_use(), 0);
    }

    #[test]
    fn a_full_handoff_queue_drops_as_qdisc_drop() {
        // Two workers; port 0 belongs to worker 0 (not polled here), worker 1 transmits on it.
        let pool = Pool::new(crate::rps::backlog::HANDOFF_LEN + 64).unwrap();
        let tun = Tunables { rps_cpus: 0b11, ..Tunables::default() };
        let mut net = Net::new(tun, Pipeline::L3fwd);
        net.ifaces.push(crate::rx::route::Iface::new("p0", [2, 0, 0, 0, 0, 1]));
        net.rps.tx_handoff.push(crossbeam_queue::ArrayQueue::new(crate::rps::backlog::HANDOFF_LEN));
        let mut w1 = Worker::new(1, &pool);
        w1.add_port(0, None);
        let mut pkts = Vec::new();
        assert_eq!(w1.bufs.alloc_bulk(&mut pkts, crate::rps::backlog::HANDOFF_LEN + 10, 60), crate::rps::backlog::HANDOFF_LEN + 10);
        for p in pkts {
            w1.txq[0].pkts.push(p);
        }
        flush_all(&net, &mut w1);
        assert_eq!(net.rps.tx_handoff[0].len(), crate::rps::backlog::HANDOFF_LEN, "handed to the owner");
        assert_eq!(w1.c.dropped(DropReason::QdiscDrop), 10, "the rest dropped by name");
        assert_eq!(w1.c.tx, 0, "the owner counts what it transmits");
        while let Some(p) = net.rps.tx_handoff[0].pop() {
            w1.bufs.free(p);
        }
        assert_eq!(w1.buffers_in_use(), 0);
    }
}
