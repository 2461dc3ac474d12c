//! A port's transmit queue on one worker: the staging vector filled during a poll, and on the
//! port's owner the qdisc with what the driver refused (requeued, sent first next time).

use crate::buf::Pkt;
use crate::tx::qdisc::{Qdisc, QdiscSpec};
use std::collections::VecDeque;

/// Queue length that forces an early flush.
pub const QUEUE_SOFT_LIMIT: usize = 1024;

/// Bulk-size histogram buckets: 1, 2-3, 4-7, ..., 128 and more packets per driver call.
pub const BULK_BUCKETS: usize = 8;

/// Transmit-queue counters beyond the qdisc's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TxqStats {
    /// Driver calls that rang the doorbell (one per call that queued something).
    pub doorbells: u64,
    /// Packets handed to the driver per call, bucketed by powers of two.
    pub bulk_hist: [u64; BULK_BUCKETS],
    /// qdisc runs that ended on the `dev_tx_weight` quota (rescheduled to the next poll).
    pub resched: u64,
    /// qdisc runs that found the queue stopped (BQL or a full ring).
    pub found_stopped: u64,
    /// Packets the driver refused and were requeued.
    pub requeues: u64,
    /// Highest BQL limit seen and its last value, sampled at every qdisc run.
    pub bql_limit_max: u32,
    pub bql_limit_last: u32,
    pub bql_inflight_max: u32,
}

impl TxqStats {
    pub fn add_bulk(&mut self, n: usize) {
        if n > 0 {
            let b = (usize::BITS - 1 - n.leading_zeros()) as usize;
            self.bulk_hist[b.min(BULK_BUCKETS - 1)] += 1;
        }
    }
}

#[derive(Default)]
pub struct TxQueue {
    /// Staged during the poll.
    pub pkts: Vec<Pkt>,
    /// The port's qdisc, built at its first transmit from `spec` (or the default qdisc).
    pub qdisc: Option<Box<dyn Qdisc>>,
    /// The port's qdisc as configured (`[ports.qdisc]`); None: `net.core.default_qdisc`.
    pub spec: Option<QdiscSpec>,
    /// Packets the driver refused (NETDEV_TX_BUSY), in order: they go first next time.
    pub(crate) requeued: VecDeque<Pkt>,
    pub stats: TxqStats,
    /// Scratch: one bulk, and what the qdisc dropped.
    pub(crate) chain: Vec<Pkt>,
    pub(crate) dropped: Vec<Pkt>,
}

impl TxQueue {
    /// Packets held here and not yet given to the port: staged, queued, requeued.
    pub fn len(&self) -> usize {
        self.pkts.len() + self.held()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Packets in the qdisc and the requeue (not the staging vector).
    #[inline]
    pub fn held(&self) -> usize {
        self.requeued.len() + self.qdisc.as_ref().map_or(0, |q| q.len())
    }
}
