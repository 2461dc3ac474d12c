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
    /// qdisc runs that ended on the dev_tx_weight quota (dev_weight × dev_weight_tx_bias;
    /// rescheduled to the next poll).
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

/// One sample of a transmit queue's BQL state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BqlSample {
    /// When (the worker's clock, ns).
    pub t_ns: u64,
    pub limit: u32,
    pub inflight: u32,
}

/// Most samples a trace keeps; when full it keeps every other one and samples half as often,
/// so a run of any length is covered with bounded memory.
pub const BQL_TRACE_MAX: usize = 1024;
/// First sampling period: 1 ms.
pub const BQL_TRACE_PERIOD_NS: u64 = 1_000_000;

/// BQL limit and bytes in flight sampled over time (at qdisc runs, at most once a period).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BqlTrace {
    pub period_ns: u64,
    pub samples: Vec<BqlSample>,
}

impl BqlTrace {
    pub fn sample(&mut self, t_ns: u64, limit: u32, inflight: u32) {
        if self.samples.capacity() == 0 {
            self.samples.reserve_exact(BQL_TRACE_MAX);
            self.period_ns = BQL_TRACE_PERIOD_NS;
        }
        if self.samples.last().is_some_and(|s| t_ns < s.t_ns.saturating_add(self.period_ns)) {
            return;
        }
        if self.samples.len() == BQL_TRACE_MAX {
            let mut k = 0;
            self.samples.retain(|_| {
                k += 1;
                k % 2 == 1
            });
            self.period_ns *= 2;
        }
        self.samples.push(BqlSample { t_ns, limit, inflight });
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
    /// The driver queue's BQL over time (ports with a transmit queue model).
    pub bql_trace: BqlTrace,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bql_trace_halves_its_samples_and_doubles_its_period() {
        let mut t = BqlTrace::default();
        t.sample(0, 1, 0);
        t.sample(BQL_TRACE_PERIOD_NS - 1, 2, 0);
        assert_eq!(t.samples.len(), 1, "within one period: not sampled");
        for k in 1..BQL_TRACE_MAX as u64 {
            t.sample(k * BQL_TRACE_PERIOD_NS, k as u32, 0);
        }
        assert_eq!(t.samples.len(), BQL_TRACE_MAX);
        t.sample(BQL_TRACE_MAX as u64 * BQL_TRACE_PERIOD_NS, 7, 3);
        assert_eq!(t.samples.len(), BQL_TRACE_MAX / 2 + 1);
        assert_eq!(t.period_ns, 2 * BQL_TRACE_PERIOD_NS);
        assert!(t.samples.windows(2).all(|w| w[1].t_ns - w[0].t_ns >= 2 * BQL_TRACE_PERIOD_NS), "evenly thinned");
        assert_eq!(*t.samples.last().unwrap(), BqlSample { t_ns: BQL_TRACE_MAX as u64 * BQL_TRACE_PERIOD_NS, limit: 7, inflight: 3 });
        assert_eq!(t.samples.capacity(), BQL_TRACE_MAX, "no growth past the reserve");
    }
}
