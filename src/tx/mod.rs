//! Transmit: per-port queues filled during a poll and handed to the port at its end, in
//! bursts of `tx.burst` with `xmit_more` semantics — every burst but the last says "more
//! follows", so the port rings its doorbell once per flush. (Qdiscs and BQL slot in here.)

use crate::buf::Pkt;
use crate::datapath::Datapath;
use crate::stats::{DropReason, Stage};

/// Queue length that forces an early flush.
pub const QUEUE_SOFT_LIMIT: usize = 1024;

#[derive(Debug, Default)]
pub struct TxQueue {
    pub pkts: Vec<Pkt>,
}

/// Hands one port's queue to the port in bursts; the last burst rings the doorbell.
/// Packets the port refuses are dropped (TxError).
pub fn xmit_queue(dp: &mut Datapath, port: u16) {
    let i = port as usize;
    let burst = dp.tun.tx_burst.max(1) as usize;
    let (Some(q), Some(dev)) = (dp.txq.get_mut(i), dp.ports.get_mut(i)) else {
        return;
    };
    if q.pkts.is_empty() {
        return;
    }
    let t0 = dp.clock.start();
    let n = q.pkts.len();
    let mut sent_total = 0;
    let mut bytes = 0u64;
    for (k, chunk) in q.pkts.chunks(burst).enumerate() {
        let more = (k + 1) * burst < n;
        let sent = dev.tx_burst(&mut dp.bufs, chunk, more).min(chunk.len());
        if !more {
            dp.c.doorbells += 1;
        }
        bytes += chunk[..sent].iter().map(|p| p.total_len() as u64).sum::<u64>();
        for p in &chunk[sent..] {
            dp.c.drop(DropReason::TxError);
            dp.bufs.free(*p);
        }
        sent_total += sent;
    }
    q.pkts.clear();
    dp.c.tx += sent_total as u64;
    dp.c.tx_bytes += bytes;
    dp.stage_done(Stage::PortTx, n, t0);
}

/// End of a poll: every queue goes out.
pub fn flush_all(dp: &mut Datapath) {
    for port in 0..dp.txq.len() as u16 {
        xmit_queue(dp, port);
    }
}

/// Reaps transmit completions on every port.
pub fn reap_completions(dp: &mut Datapath) {
    for dev in dp.ports.iter_mut() {
        dev.tx_completions(&mut dp.bufs);
    }
}
