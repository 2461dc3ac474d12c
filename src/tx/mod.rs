//! Transmit: per-port queues filled during a poll and handed to the port at its end, in
//! bursts of `tx.burst` with `xmit_more` semantics — every burst but the last says "more
//! follows", so the port rings its doorbell once per flush. (Qdiscs and BQL slot in here.)

use crate::buf::Pkt;
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::worker::Worker;

pub mod bql;
pub mod queue;
pub use queue::{TxQueue, QUEUE_SOFT_LIMIT};

/// Hands one port's queue to the port in bursts; the last burst rings the doorbell.
/// Packets the port refuses are dropped (TxError).
pub fn xmit_queue(net: &Net, w: &mut Worker, port: u16) {
    let i = port as usize;
    let burst = net.tun.tx_burst.max(1) as usize;
    if w.txq.get(i).is_none_or(|q| q.pkts.is_empty()) {
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
    let mut sent_total = 0;
    let mut bytes = 0u64;
    for (k, chunk) in q.pkts.chunks(burst).enumerate() {
        let more = (k + 1) * burst < n;
        let sent = dev.tx_burst(&mut w.bufs, chunk, more).min(chunk.len());
        if !more {
            w.c.doorbells += 1;
        }
        bytes += chunk[..sent].iter().map(|p| p.total_len() as u64).sum::<u64>();
        for p in &chunk[sent..] {
            w.c.drop(DropReason::TxError);
            w.bufs.free(*p);
        }
        sent_total += sent;
    }
    q.pkts.clear();
    w.c.tx += sent_total as u64;
    w.c.tx_bytes += bytes;
    w.stage_done(Stage::PortTx, n, t0);
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

/// A queue for a port another worker owns goes to that port's handoff queue (the owner
/// transmits it at the end of its next poll); what does not fit is dropped (`qdisc_drop`).
#[cold]
fn hand_off(net: &Net, w: &mut Worker, port: u16) {
    let Some(q) = w.txq.get_mut(port as usize) else { return };
    let mut pkts = std::mem::take(&mut q.pkts);
    match net.rps.tx_handoff.get(port as usize) {
        Some(h) => {
            for p in pkts.drain(..) {
                if let Err(p) = h.push(p) {
                    w.drop_pkt(p, DropReason::QdiscDrop);
                }
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

/// Takes what other workers handed over for the ports this worker owns into their queues.
fn pull_handoff(net: &Net, w: &mut Worker) {
    for (i, h) in net.rps.tx_handoff.iter().enumerate() {
        if h.is_empty() || w.ports.get(i).is_none_or(Option::is_none) {
            continue;
        }
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
