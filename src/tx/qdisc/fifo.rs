//! First-in first-out qdiscs: `pfifo` (a packet limit), `bfifo` (a byte limit) and
//! `pfifo_fast` (three FIFO bands chosen by TOS, served in strict priority, one packet
//! limit over all of them: the device's `txqueuelen`). A full FIFO drops the arriving
//! packet (tail drop).

use super::{pfifo_fast_band, priority_tos, QCtx, Qdisc, QdiscKind, QdiscStats};
use crate::buf::Pkt;
use std::collections::VecDeque;

/// At most this many slots are reserved up front; a larger limit grows the ring on demand.
const MAX_PREALLOC: usize = 1 << 16;

/// Tail drop of `p`: counted and handed to the caller. A drop, not an overlimit: the
/// kernel's FIFOs drop through qdisc_drop, which counts `drops` only (`tc -s` overlimits
/// are a shaper's, e.g. tbf's).
fn tail_drop(stats: &mut QdiscStats, p: Pkt, cx: &mut QCtx<'_>) {
    stats.drops += 1;
    cx.dropped.push(p);
}

fn took(stats: &mut QdiscStats, p: &Pkt) {
    stats.backlog_pkts -= 1;
    stats.backlog_bytes -= p.total_len() as u64;
}

fn added(stats: &mut QdiscStats, p: &Pkt) {
    stats.backlog_pkts += 1;
    stats.backlog_bytes += p.total_len() as u64;
}

/// `pfifo limit N` (a packet limit), `bfifo limit BYTES` (a byte limit), and `noqueue` (a
/// FIFO of 0 that the transmit path never fills): one FIFO, two limits.
pub struct Fifo {
    kind: QdiscKind,
    q: VecDeque<Pkt>,
    limit_pkts: usize,
    limit_bytes: u64,
    stats: QdiscStats,
}

impl Fifo {
    /// `pfifo` (or `noqueue`) of `limit` packets.
    pub fn packets(kind: QdiscKind, limit: u32) -> Fifo {
        Fifo::new(kind, limit as usize, u64::MAX, limit as usize)
    }

    /// `bfifo` of `limit_bytes` bytes.
    pub fn bytes(limit_bytes: u32) -> Fifo {
        Fifo::new(QdiscKind::Bfifo, usize::MAX, limit_bytes as u64, limit_bytes as usize / 64)
    }

    fn new(kind: QdiscKind, limit_pkts: usize, limit_bytes: u64, prealloc: usize) -> Fifo {
        Fifo { kind, q: VecDeque::with_capacity(prealloc.min(MAX_PREALLOC)), limit_pkts, limit_bytes, stats: QdiscStats::default() }
    }
}

impl Qdisc for Fifo {
    fn limit_pkts(&self) -> usize {
        self.limit_pkts
    }

    fn kind(&self) -> QdiscKind {
        self.kind
    }

    fn enqueue(&mut self, p: Pkt, cx: &mut QCtx<'_>) {
        if self.q.len() >= self.limit_pkts || self.stats.backlog_bytes + p.total_len() as u64 > self.limit_bytes {
            return tail_drop(&mut self.stats, p, cx);
        }
        added(&mut self.stats, &p);
        self.q.push_back(p);
    }

    fn dequeue(&mut self, _cx: &mut QCtx<'_>) -> Option<Pkt> {
        let p = self.q.pop_front()?;
        took(&mut self.stats, &p);
        Some(p)
    }

    fn stats(&self) -> &QdiscStats {
        &self.stats
    }

    fn stats_mut(&mut self) -> &mut QdiscStats {
        &mut self.stats
    }
}

/// `pfifo_fast`: band 0 (interactive: TOS low delay) before band 1 (best effort) before
/// band 2 (bulk, filler); `limit` packets over the three bands.
pub struct PfifoFast {
    bands: [VecDeque<Pkt>; 3],
    limit: usize,
    stats: QdiscStats,
}

impl PfifoFast {
    pub fn new(limit: u32) -> PfifoFast {
        let cap = (limit as usize).min(MAX_PREALLOC);
        PfifoFast {
            bands: [VecDeque::with_capacity(cap), VecDeque::with_capacity(cap), VecDeque::with_capacity(cap)],
            limit: limit as usize,
            stats: QdiscStats::default(),
        }
    }

    /// Packets waiting in each band (for tests and reports).
    pub fn band_lens(&self) -> [usize; 3] {
        [self.bands[0].len(), self.bands[1].len(), self.bands[2].len()]
    }
}

impl Qdisc for PfifoFast {
    /// No packet limit over all bands, and a requeued packet waits outside the rings (the
    /// lockless qdisc's `gso_skb`), so it does not count against one: each band has its own.
    fn limit_pkts(&self) -> usize {
        usize::MAX
    }

    fn kind(&self) -> QdiscKind {
        QdiscKind::PfifoFast
    }

    /// Each band is its own ring of `limit` packets (pfifo_fast_init since the lockless
    /// pfifo_fast): a full bulk band does not refuse an interactive packet.
    fn enqueue(&mut self, p: Pkt, cx: &mut QCtx<'_>) {
        let band = pfifo_fast_band(priority_tos(cx.bufs, p));
        if self.bands[band].len() >= self.limit {
            return tail_drop(&mut self.stats, p, cx);
        }
        added(&mut self.stats, &p);
        self.bands[band].push_back(p);
    }

    fn dequeue(&mut self, _cx: &mut QCtx<'_>) -> Option<Pkt> {
        let p = self.bands.iter_mut().find_map(VecDeque::pop_front)?;
        took(&mut self.stats, &p);
        Some(p)
    }

    fn stats(&self) -> &QdiscStats {
        &self.stats
    }

    fn stats_mut(&mut self) -> &mut QdiscStats {
        &mut self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The FIFOs reserve their slots when built (up to `MAX_PREALLOC`), so filling one up
    /// to its limit allocates nothing on the transmit path; a larger limit grows on demand
    /// instead of reserving megabytes per queue up front.
    #[test]
    fn fifo_slots_are_reserved_when_the_qdisc_is_built() {
        assert!(Fifo::packets(QdiscKind::Pfifo, 1000).q.capacity() >= 1000);
        assert!(Fifo::bytes(64_000).q.capacity() >= 1000, "a byte limit reserves a slot per 64 bytes");
        let huge = Fifo::packets(QdiscKind::Pfifo, 1 << 24);
        assert!((MAX_PREALLOC..1 << 24).contains(&huge.q.capacity()), "{}", huge.q.capacity());
        assert!(PfifoFast::new(1000).bands.iter().all(|b| b.capacity() >= 1000));
    }
}
