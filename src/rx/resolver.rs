//! One worker's neighbour-resolution state: the packets waiting for each unresolved
//! neighbour (the resolution itself is `neigh.rs`). State only, so the worker can hold it
//! without importing the stage.

use super::route::{NeighAddr, NextHop};
use crate::buf::skb::Skb;
use crate::buf::Pkt;
use std::collections::VecDeque;

/// A packet waiting for its neighbour.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Held {
    /// A packet being forwarded, not yet rewritten: once resolved it walks the forward step
    /// again (TTL is decremented once, by that walk).
    Forward(Skb, NextHop),
    /// A packet sluice originated: only its Ethernet addresses are missing.
    Originated(Pkt),
}

impl Held {
    pub(crate) fn pkt(&self) -> Pkt {
        match *self {
            Held::Forward(s, _) => s.pkt,
            Held::Originated(p) => p,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Unresolved {
    pub(crate) port: u16,
    pub(crate) addr: NeighAddr,
    pub(crate) held: VecDeque<Held>,
    pub(crate) probes: u32,
    pub(crate) next_probe_ns: u64,
}

/// One worker's unresolved neighbours and their waiting packets.
#[derive(Debug, Default)]
pub struct Resolver {
    pub(crate) pending: Vec<Unresolved>,
    /// Emptied queues of resolved or failed neighbours, kept for the next ones: after the
    /// first few, resolution allocates nothing (no heap churn under a stream of unknown
    /// destinations).
    pub(crate) spare: Vec<VecDeque<Held>>,
    pub(crate) held: usize,
    pub(crate) next_aging_ns: u64,
    pub(crate) announced: bool,
    /// Forwarded packets whose neighbour answered, in order, for the forward step to take
    /// after the timers or right after the answer (the storage is kept: no allocation once
    /// warm).
    pub(crate) released: Vec<Held>,
    /// Forwarded packets whose neighbour never answered, for the forward step to report to
    /// their senders and drop (taken right after the timers, like `released`).
    pub(crate) failed: Vec<Skb>,
}

impl Resolver {
    /// Packets waiting for a neighbour (in flight for the ledger).
    pub fn held(&self) -> usize {
        self.held + self.released.len() + self.failed.len()
    }

    /// True when nothing waits and no timer is due at `now_ns`.
    #[inline]
    pub(crate) fn idle(&self, now_ns: u64) -> bool {
        self.pending.is_empty() && now_ns < self.next_aging_ns && self.announced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets are in flight for the ledger in every state of resolution: waiting, released
    /// to the forward step, failed and not yet reported.
    #[test]
    fn held_counts_waiting_released_and_failed_packets() {
        let mut r = Resolver { held: 3, ..Resolver::default() };
        r.released.push(Held::Forward(Skb::default(), NextHop::Blackhole));
        r.failed.extend([Skb::default(); 2]);
        assert_eq!(r.held(), 3 + 1 + 2);
    }
}
