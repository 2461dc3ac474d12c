//! Transmit: per-port queues filled during a poll and handed to the port at its end, in
//! bursts of `tx.burst` with `xmit_more` semantics — every burst but the last says "more
//! follows", so the port rings its doorbell once per flush. (Qdiscs and BQL slot in here.)

use crate::buf::Pkt;
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::worker::Worker;

pub mod queue;
pub use queue::{TxQueue, QUEUE_SOFT_LIMIT};

/// Hands one port's queue to the port in bursts; the last burst rings the doorbell.
/// Packets the port refuses are dropped (TxError).
pub fn xmit_queue(net: &Net, w: &mut Worker, port: u16) {
    let i = port as usize;
    let burst = net.tun.tx_burst.max(1) as usize;
    let (Some(q), Some(dev)) = (w.txq.get_mut(i), w.ports.get_mut(i).and_then(Option::as_mut)) else {
        return;
    };
    if q.pkts.is_empty() {
        return;
    }
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

/// End of a poll: every queue goes out.
pub fn flush_all(net: &Net, w: &mut Worker) {
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
