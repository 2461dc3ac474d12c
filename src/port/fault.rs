//! Fault injection: a port wrapper that makes the "wire" misbehave — drop, duplicate,
//! corrupt, truncate, reorder, delay, rate-limit, and a transmit ring that fills up — seeded,
//! so a run is reproducible. smoltcp's `FaultInjector` is the model; this one is written for
//! sluice's `Port` trait and its conservation ledger.
//!
//! Where each fault sits, and why the ledger stays exact:
//! - Receive side: faults happen on the wire, before sluice takes the packet. A dropped frame
//!   never entered (its buffer goes straight back to the pool); a duplicate is one more
//!   received frame (it needs a buffer: with the pool empty it is not made, counted in
//!   `dup_nobuf`); a held frame (reorder, delay) has not arrived yet, so `rx_done` stays false
//!   while any is held, and at shutdown the held ones are freed (`discarded`).
//! - Transmit side: faults happen after the port accepted the packet (the datapath counted it
//!   transmitted), except the ring-full refusal (`tx_full`, and a `rate_pps`/`rate_per_poll`
//!   limit on transmit) which returns fewer accepted packets: the datapath requeues those in
//!   the port's qdisc when the wrapped port has a transmit queue, else drops them as
//!   `tx_error`. Held packets are passed on later, at the latest by [`Port::flush_held`].
//! - The wrapped port's refusals are never successes: a burst that crossed untouched (no
//!   fault struck any of its packets) gets the wrapped port's answer, so a NIC model's qdisc
//!   requeues what its ring refused; otherwise (a frame delayed, dropped, damaged or
//!   duplicated, so the caller's slice is no longer what the wrapped port saw) the refused
//!   frames are freed and reported by [`Port::take_tx_failed`] with the bytes the datapath
//!   counted for them (a refused duplicate was never counted: only `inner_refused`).
//!
//! Clocks: the receive side counts `rx_burst` calls, the transmit side `tx_completions` calls
//! (one per port at the end of every poll), so "hold N polls" is deterministic.

use super::{Port, PortStats};
use crate::buf::{BufCache, Pkt};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Which direction the faults apply to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultSide {
    Rx,
    Tx,
    Both,
}

impl FaultSide {
    fn rx(self) -> bool {
        matches!(self, FaultSide::Rx | FaultSide::Both)
    }
    fn tx(self) -> bool {
        matches!(self, FaultSide::Tx | FaultSide::Both)
    }
}

/// `fault = { seed = 1, drop = 0.01, ... }` on a port. Probabilities are per packet, except
/// `tx_full`, which is per transmit burst.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultConfig {
    pub seed: u64,
    pub drop: f64,
    pub duplicate: f64,
    /// Flip 1 to 3 random bits of the frame.
    pub corrupt: f64,
    /// Cut the frame to a random shorter length (possibly 0).
    pub truncate: f64,
    /// Hold the frame one poll longer, so frames behind it overtake it.
    pub reorder: f64,
    /// Hold every frame this many polls (a wire with latency); 0 = none.
    pub delay_polls: u32,
    /// Token bucket, packets per second; 0 = unlimited. Receive: fewer frames are taken from
    /// the wrapped port (it is slowed, nothing lost). Transmit: the excess is refused.
    pub rate_pps: f64,
    /// At most this many packets per receive or transmit burst; 0 = unlimited (the
    /// deterministic form of a rate limit).
    pub rate_per_poll: u32,
    /// Per transmit burst: the ring is "full" and only a random prefix is accepted.
    pub tx_full: f64,
    pub side: FaultSide,
    /// Faults only during each side's first N polls, then a clean wire (pressure, then
    /// recovery); 0 = always.
    pub stop_after_polls: u64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            seed: 1,
            drop: 0.0,
            duplicate: 0.0,
            corrupt: 0.0,
            truncate: 0.0,
            reorder: 0.0,
            delay_polls: 0,
            rate_pps: 0.0,
            rate_per_poll: 0,
            tx_full: 0.0,
            side: FaultSide::Both,
            stop_after_polls: 0,
        }
    }
}

/// Longest delay accepted: held frames own buffers, so a longer one only starves the pool.
pub const MAX_DELAY_POLLS: u32 = 1_000_000;

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("fault.{field}: {msg}")]
pub struct FaultConfigError {
    pub field: &'static str,
    pub msg: String,
}

impl FaultConfig {
    /// Checks every field: probabilities finite and in [0, 1], rates finite and >= 0.
    pub fn validate(&self) -> Result<(), FaultConfigError> {
        let probabilities = [
            ("drop", self.drop),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
            ("truncate", self.truncate),
            ("reorder", self.reorder),
            ("tx_full", self.tx_full),
        ];
        for (field, p) in probabilities {
            if !(p.is_finite() && (0.0..=1.0).contains(&p)) {
                return Err(FaultConfigError { field, msg: format!("{p} is not a probability (0 to 1)") });
            }
        }
        if !(self.rate_pps.is_finite() && self.rate_pps >= 0.0) {
            return Err(FaultConfigError { field: "rate_pps", msg: format!("{} is not a rate (>= 0, 0 = unlimited)", self.rate_pps) });
        }
        if self.delay_polls > MAX_DELAY_POLLS {
            return Err(FaultConfigError { field: "delay_polls", msg: format!("{} > {MAX_DELAY_POLLS}", self.delay_polls) });
        }
        Ok(())
    }
}

/// Faults injected on one side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FaultCounts {
    pub dropped: u64,
    pub duplicated: u64,
    /// Duplicates not made because the pool was empty.
    pub dup_nobuf: u64,
    pub corrupted: u64,
    pub truncated: u64,
    pub reordered: u64,
    pub delayed: u64,
    /// Packets the rate limit held back (receive) or refused (transmit).
    pub rate_limited: u64,
    /// Transmit: packets refused by a "full ring" (requeued by a qdisc, else dropped as
    /// tx_error).
    pub tx_refused: u64,
    /// Receive: held frames freed at shutdown (they never arrived).
    pub discarded: u64,
    /// Transmit: frames the wrapped port refused after this port had accepted them (freed;
    /// those the datapath counted sent are reported by `take_tx_failed`, duplicates are not).
    pub inner_refused: u64,
}

impl FaultCounts {
    /// Adds another port's counts into these.
    pub fn merge(&mut self, o: &FaultCounts) {
        self.dropped += o.dropped;
        self.duplicated += o.duplicated;
        self.dup_nobuf += o.dup_nobuf;
        self.corrupted += o.corrupted;
        self.truncated += o.truncated;
        self.reordered += o.reordered;
        self.delayed += o.delayed;
        self.rate_limited += o.rate_limited;
        self.tx_refused += o.tx_refused;
        self.discarded += o.discarded;
        self.inner_refused += o.inner_refused;
    }

    /// Every fault injected (a frame can take several).
    pub fn injected(&self) -> u64 {
        self.dropped
            + self.duplicated
            + self.corrupted
            + self.truncated
            + self.reordered
            + self.delayed
            + self.rate_limited
            + self.tx_refused
            + self.discarded
            + self.inner_refused
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FaultStats {
    pub rx: FaultCounts,
    pub tx: FaultCounts,
}

impl FaultStats {
    /// The sum over every fault-injection port of a datapath.
    pub fn of_ports<'a>(ports: impl IntoIterator<Item = &'a dyn Port>) -> FaultStats {
        let mut sum = FaultStats::default();
        for f in ports.into_iter().filter_map(|p| p.fault_stats()) {
            sum.rx.merge(&f.rx);
            sum.tx.merge(&f.tx);
        }
        sum
    }

    pub fn injected(&self) -> u64 {
        self.rx.injected() + self.tx.injected()
    }

    /// Frames whose bytes were damaged (corrupted or truncated), either side.
    pub fn damaged(&self) -> u64 {
        self.rx.corrupted + self.rx.truncated + self.tx.corrupted + self.tx.truncated
    }
}

/// xorshift64* seeded through splitmix64: small, fast, and the same on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, n); 0 when n is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `p` (draws nothing when `p` is 0, so a fault that is off does not
    /// shift the others' stream).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)) < p
    }
}

/// A token bucket in packets per second (depth: 10 ms worth, at least 64 packets).
#[derive(Debug)]
struct TokenBucket {
    rate: f64,
    depth: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    fn new(rate: f64) -> TokenBucket {
        let depth = (rate / 100.0).max(64.0);
        TokenBucket { rate, depth, tokens: depth, last: None }
    }

    /// How many of `want` packets the bucket lets through now (and takes their tokens).
    fn take(&mut self, want: usize) -> usize {
        let now = Instant::now();
        if let Some(last) = self.last {
            self.tokens = (self.tokens + now.duration_since(last).as_secs_f64() * self.rate).min(self.depth);
        }
        self.last = Some(now);
        let n = (self.tokens.floor() as usize).min(want);
        self.tokens -= n as f64;
        n
    }
}

/// A frame on the wire that has not arrived yet: released on the side's poll `due`.
#[derive(Debug, Clone, Copy)]
struct Held {
    due: u64,
    pkt: Pkt,
    /// Transmit: the bytes the datapath counted sent for it; None for a duplicate (never
    /// counted) and on the receive side.
    counted: Option<u64>,
}

/// One direction's state: its clock, the frames it holds and its rate limiter.
#[derive(Debug)]
struct Lane {
    polls: u64,
    held: Vec<Held>,
    bucket: Option<TokenBucket>,
    counts: FaultCounts,
}

impl Lane {
    fn new(cfg: &FaultConfig) -> Lane {
        Lane {
            polls: 0,
            held: Vec::new(),
            bucket: (cfg.rate_pps > 0.0).then(|| TokenBucket::new(cfg.rate_pps)),
            counts: FaultCounts::default(),
        }
    }

    /// Hands frames due by now to `out` in the order they were held, at most `max` of them.
    fn release_due(&mut self, max: usize, mut out: impl FnMut(&Held)) {
        let now = self.polls;
        let mut taken = 0;
        self.held.retain(|h| {
            if taken < max && h.due <= now {
                out(h);
                taken += 1;
                false
            } else {
                true
            }
        });
    }

    /// How many of `want` packets the rate limits let through this burst (the caller counts
    /// what was held back).
    fn allowance(&mut self, cfg: &FaultConfig, want: usize) -> usize {
        let mut n = want;
        if cfg.rate_per_poll > 0 {
            n = n.min(cfg.rate_per_poll as usize);
        }
        if let Some(b) = self.bucket.as_mut() {
            n = b.take(n);
        }
        n
    }
}

/// What the per-packet faults decided.
#[derive(Clone, Copy)]
enum Fate {
    /// Goes on now.
    Pass(Pkt),
    /// Held until the side's poll `due`.
    Hold(Pkt, u64),
    /// Lost on the wire (its buffer is already freed).
    Lost,
}

impl Fate {
    /// The same fate for another packet (a duplicate travels with its original).
    fn for_copy(self, q: Pkt) -> Fate {
        match self {
            Fate::Pass(_) => Fate::Pass(q),
            Fate::Hold(_, due) => Fate::Hold(q, due),
            Fate::Lost => Fate::Lost,
        }
    }
}

pub struct FaultPort {
    inner: Box<dyn Port>,
    cfg: FaultConfig,
    rng: Rng,
    rx: Lane,
    tx: Lane,
    /// What crossed between this port and the datapath (the inner port's own counters see
    /// the wire side).
    stats: PortStats,
    scratch: Vec<Pkt>,
    /// Frames for the wrapped port on the transmit side, and what the datapath counted for
    /// each (`Held::counted`).
    tx_out: Vec<Pkt>,
    tx_counted: Vec<Option<u64>>,
    /// Accepted packets the wrapped port then refused, and their bytes (`take_tx_failed`).
    tx_failed: (u64, u64),
    /// All of them so far: `stats` leaves them out of the sent figures, as the ledger does.
    tx_failed_total: (u64, u64),
    copy: Vec<u8>,
}

impl FaultPort {
    pub fn new(inner: Box<dyn Port>, cfg: FaultConfig) -> Result<FaultPort, FaultConfigError> {
        cfg.validate()?;
        Ok(FaultPort {
            inner,
            rng: Rng::new(cfg.seed),
            rx: Lane::new(&cfg),
            tx: Lane::new(&cfg),
            cfg,
            stats: PortStats::default(),
            scratch: Vec::new(),
            tx_out: Vec::new(),
            tx_counted: Vec::new(),
            tx_failed: (0, 0),
            tx_failed_total: (0, 0),
            copy: Vec::new(),
        })
    }

    pub fn config(&self) -> &FaultConfig {
        &self.cfg
    }

    /// Frames held on either side right now.
    pub fn held(&self) -> usize {
        self.rx.held.len() + self.tx.held.len()
    }

    fn active(&self, lane: &Lane) -> bool {
        self.cfg.stop_after_polls == 0 || lane.polls <= self.cfg.stop_after_polls
    }

    /// Rolls every per-packet fault for `p` on one side: its fate, and a duplicate if one was
    /// made (a pristine copy, taken before any damage, that follows the original).
    fn roll(rng: &mut Rng, cfg: &FaultConfig, lane: &mut Lane, copy: &mut Vec<u8>, bufs: &mut BufCache, mut p: Pkt) -> (Fate, Option<Pkt>) {
        if rng.chance(cfg.drop) {
            lane.counts.dropped += 1;
            bufs.free(p);
            return (Fate::Lost, None);
        }
        let dup = if rng.chance(cfg.duplicate) {
            copy.clear();
            bufs.extend_vec(p, copy);
            match bufs.alloc_copy(copy) {
                Some(d) => {
                    lane.counts.duplicated += 1;
                    Some(d)
                }
                None => {
                    lane.counts.dup_nobuf += 1;
                    None
                }
            }
        } else {
            None
        };
        if rng.chance(cfg.truncate) && p.total_len() > 0 {
            let keep = rng.below(p.total_len() as u64) as usize;
            bufs.trim(&mut p, keep);
            lane.counts.truncated += 1;
        }
        if rng.chance(cfg.corrupt) && p.len > 0 {
            let data = bufs.data_mut(p);
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(data.len() as u64) as usize;
                data[at] ^= 1 << rng.below(8);
            }
            lane.counts.corrupted += 1;
        }
        let mut due = lane.polls;
        if cfg.delay_polls > 0 {
            due += cfg.delay_polls as u64;
            lane.counts.delayed += 1;
        }
        if rng.chance(cfg.reorder) {
            due += 1;
            lane.counts.reordered += 1;
        }
        let fate = if due > lane.polls { Fate::Hold(p, due) } else { Fate::Pass(p) };
        (fate, dup)
    }

    /// Hands frames to the wrapped port. What it refuses after we accepted is freed and
    /// reported failed (`take_tx_failed`): the datapath moves it from sent to `tx_error`.
    fn deliver(&mut self, bufs: &mut BufCache, more: bool) {
        if self.tx_out.is_empty() && more {
            return;
        }
        let n = self.inner.tx_burst(bufs, &self.tx_out, more).min(self.tx_out.len());
        for (p, counted) in self.tx_out[n..].iter().zip(&self.tx_counted[n..]) {
            bufs.free(*p);
            if let Some(bytes) = *counted {
                self.tx_failed.0 += 1;
                self.tx_failed.1 += bytes;
                self.tx_failed_total.0 += 1;
                self.tx_failed_total.1 += bytes;
            }
        }
        self.tx.counts.inner_refused += (self.tx_out.len() - n) as u64;
        self.tx_out.clear();
        self.tx_counted.clear();
    }
}

impl Port for FaultPort {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn rx_burst(&mut self, bufs: &mut BufCache, out: &mut Vec<Pkt>, max: usize) -> usize {
        if !self.cfg.side.rx() {
            let n = self.inner.rx_burst(bufs, out, max);
            self.stats.rx_packets += n as u64;
            self.stats.rx_bytes += out[out.len() - n..].iter().map(|p| p.total_len() as u64).sum::<u64>();
            return n;
        }
        self.rx.polls += 1;
        let first = out.len();
        self.rx.release_due(max, |h| out.push(h.pkt));
        let room = max - (out.len() - first);
        let want = if self.active(&self.rx) { self.rx.allowance(&self.cfg, room) } else { room };
        if want > 0 {
            let mut fresh = std::mem::take(&mut self.scratch);
            fresh.clear();
            let got = self.inner.rx_burst(bufs, &mut fresh, want);
            if got == want {
                // The wire had at least this much: what the limit cut is held back.
                self.rx.counts.rate_limited += (room - want) as u64;
            } else if let Some(b) = self.rx.bucket.as_mut() {
                b.tokens += (want - got) as f64; // unused tokens stay in the bucket
            }
            let active = self.active(&self.rx);
            let now = self.rx.polls;
            for &p in &fresh {
                let (fate, dup) = if active {
                    Self::roll(&mut self.rng, &self.cfg, &mut self.rx, &mut self.copy, bufs, p)
                } else {
                    (Fate::Pass(p), None)
                };
                for f in std::iter::once(fate).chain(dup.map(|d| fate.for_copy(d))) {
                    match f {
                        // Never more than `max`: the rest waits for the next poll.
                        Fate::Pass(q) if out.len() - first < max => out.push(q),
                        Fate::Pass(q) => self.rx.held.push(Held { due: now, pkt: q, counted: None }),
                        Fate::Hold(q, due) => self.rx.held.push(Held { due, pkt: q, counted: None }),
                        Fate::Lost => {}
                    }
                }
            }
            self.scratch = fresh;
        }
        let n = out.len() - first;
        self.stats.rx_packets += n as u64;
        self.stats.rx_bytes += out[first..].iter().map(|p| p.total_len() as u64).sum::<u64>();
        n
    }

    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        let accepted = if !self.cfg.side.tx() || !self.active(&self.tx) {
            // A clean wire: the wrapped port's own answer stands.
            self.inner.tx_burst(bufs, pkts, more).min(pkts.len())
        } else {
            let mut accept = pkts.len();
            if !pkts.is_empty() && self.rng.chance(self.cfg.tx_full) {
                accept = self.rng.below(pkts.len() as u64) as usize;
                self.tx.counts.tx_refused += (pkts.len() - accept) as u64;
            }
            let allowed = self.tx.allowance(&self.cfg, accept);
            self.tx.counts.rate_limited += (accept - allowed) as u64;
            accept = allowed;
            // True while every packet goes on now, alone and as it came: then `tx_out` is
            // `pkts[..accept]` and the wrapped port's refusals can go back to the caller.
            let mut untouched = true;
            for &p in &pkts[..accept] {
                let counted = p.total_len() as u64;
                let damaged = self.tx.counts.corrupted + self.tx.counts.truncated;
                let (fate, dup) = Self::roll(&mut self.rng, &self.cfg, &mut self.tx, &mut self.copy, bufs, p);
                untouched &=
                    matches!(fate, Fate::Pass(_)) && dup.is_none() && self.tx.counts.corrupted + self.tx.counts.truncated == damaged;
                let copies = std::iter::once((fate, Some(counted))).chain(dup.map(|d| (fate.for_copy(d), None)));
                for (f, counted) in copies {
                    match f {
                        Fate::Pass(q) => {
                            self.tx_out.push(q);
                            self.tx_counted.push(counted);
                        }
                        Fate::Hold(q, due) => self.tx.held.push(Held { due, pkt: q, counted }),
                        Fate::Lost => {}
                    }
                }
            }
            if untouched {
                // The wrapped port's own answer stands: what it refused is still the caller's.
                let n = if self.tx_out.is_empty() && more { 0 } else { self.inner.tx_burst(bufs, &self.tx_out, more) };
                self.tx_out.clear();
                self.tx_counted.clear();
                n.min(accept)
            } else {
                self.deliver(bufs, more);
                accept
            }
        };
        self.stats.tx_packets += accepted as u64;
        self.stats.tx_bytes += pkts[..accepted].iter().map(|p| p.total_len() as u64).sum::<u64>();
        if !more {
            self.stats.doorbells += 1;
        }
        accepted
    }

    fn tx_completions(&mut self, bufs: &mut BufCache) -> usize {
        if self.cfg.side.tx() {
            self.tx.polls += 1;
            let (out, counted) = (&mut self.tx_out, &mut self.tx_counted);
            self.tx.release_due(usize::MAX, |h| {
                out.push(h.pkt);
                counted.push(h.counted);
            });
            if !self.tx_out.is_empty() {
                self.deliver(bufs, false);
            }
        }
        self.inner.tx_completions(bufs)
    }

    fn rx_done(&self) -> bool {
        self.rx.held.is_empty() && self.inner.rx_done()
    }

    /// The wrapped NIC model's ring state: the qdisc sizes bulks by it and requeues what is
    /// refused (a full ring the fault injects included), as in front of the NIC alone.
    fn tx_queue(&self) -> Option<&crate::tx::bql::TxqState> {
        self.inner.tx_queue()
    }

    fn tso(&self) -> bool {
        self.inner.tso()
    }

    fn gso_fraglist(&self) -> bool {
        self.inner.gso_fraglist()
    }

    fn rx_csum_verified(&self) -> bool {
        // Corruption on the wire happens after the NIC would have verified: never claim it.
        self.inner.rx_csum_verified() && !self.cfg.side.rx()
    }

    fn rx_bounded(&self) -> bool {
        self.inner.rx_bounded()
    }

    fn take_rx_dropped(&mut self) -> u64 {
        self.inner.take_rx_dropped()
    }

    /// The wrapped port's own failures and the frames it refused after this port had
    /// accepted them.
    fn take_tx_failed(&mut self) -> (u64, u64) {
        let (n, bytes) = self.inner.take_tx_failed();
        let (m, more) = std::mem::take(&mut self.tx_failed);
        (n + m, bytes + more)
    }

    fn flush_held(&mut self, bufs: &mut BufCache) -> usize {
        let rx = self.rx.held.len();
        for h in self.rx.held.drain(..) {
            bufs.free(h.pkt);
        }
        self.rx.counts.discarded += rx as u64;
        let tx = self.tx.held.len();
        for h in self.tx.held.drain(..) {
            self.tx_out.push(h.pkt);
            self.tx_counted.push(h.counted);
        }
        if !self.tx_out.is_empty() {
            self.deliver(bufs, false);
        }
        rx + tx + self.inner.flush_held(bufs)
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.inner.finish()
    }

    /// Packets and bytes as they crossed to and from the datapath (less what the wrapped port
    /// then refused); everything else (errors, check failures) as the wrapped port counted it.
    fn stats(&self) -> PortStats {
        let s = &self.stats;
        PortStats {
            rx_packets: s.rx_packets,
            rx_bytes: s.rx_bytes,
            tx_packets: s.tx_packets.saturating_sub(self.tx_failed_total.0),
            tx_bytes: s.tx_bytes.saturating_sub(self.tx_failed_total.1),
            doorbells: s.doorbells,
            ..self.inner.stats()
        }
    }

    fn check_report(&self) -> Vec<String> {
        self.inner.check_report()
    }

    fn captured(&self) -> Option<&[Vec<u8>]> {
        self.inner.captured()
    }

    fn fault_stats(&self) -> Option<FaultStats> {
        Some(FaultStats { rx: self.rx.counts, tx: self.tx.counts })
    }

    /// The wrapped port's descriptor, but only while no received frame is held back: a
    /// delayed frame is due by the clock, not by the descriptor, so the worker must not sleep
    /// in poll() on it.
    fn rx_wait_fd(&self) -> Option<std::os::fd::RawFd> {
        if self.rx.held.is_empty() {
            self.inner.rx_wait_fd()
        } else {
            None
        }
    }

    fn rx_wait_error(&mut self) {
        self.inner.rx_wait_error()
    }

    fn request_response(&self) -> Option<super::gen::RequestResponse> {
        self.inner.request_response()
    }
}

/// Wraps `port` when the config asks for faults.
pub fn wrap(port: Box<dyn Port>, cfg: Option<&FaultConfig>) -> Result<Box<dyn Port>, FaultConfigError> {
    match cfg {
        Some(c) => Ok(Box::new(FaultPort::new(port, c.clone())?)),
        None => Ok(port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::Pool;
    use crate::port::pcap::PcapIn;
    use crate::port::sink::{CheckSpec, Sink, SinkKind};

    fn frames(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| vec![i as u8; 60]).collect()
    }

    /// Receives everything through `port`, returning the first byte of each frame in order.
    fn drain_rx(port: &mut FaultPort, bufs: &mut BufCache, max: usize) -> Vec<u8> {
        let mut got = Vec::new();
        let mut out = Vec::new();
        for _ in 0..10_000 {
            if port.rx_done() {
                break;
            }
            out.clear();
            let n = port.rx_burst(bufs, &mut out, max);
            assert!(n <= max, "burst of {n} > {max}");
            for p in &out {
                got.push(bufs.data(*p).first().copied().unwrap_or(0xff));
                bufs.free(*p);
            }
        }
        assert!(port.rx_done());
        got
    }

    fn rx_port(n: usize, cfg: FaultConfig) -> FaultPort {
        FaultPort::new(Box::new(PcapIn::from_frames("in", frames(n), 1)), cfg).unwrap()
    }

    #[test]
    fn validation_refuses_bad_probabilities_and_rates() {
        for (c, f) in [
            (FaultConfig { drop: 1.5, ..Default::default() }, "drop"),
            (FaultConfig { corrupt: f64::NAN, ..Default::default() }, "corrupt"),
            (FaultConfig { tx_full: -0.1, ..Default::default() }, "tx_full"),
            (FaultConfig { rate_pps: f64::INFINITY, ..Default::default() }, "rate_pps"),
            (FaultConfig { delay_polls: MAX_DELAY_POLLS + 1, ..Default::default() }, "delay_polls"),
        ] {
            assert_eq!(c.validate().unwrap_err().field, f);
        }
        assert!(FaultConfig { drop: 1.0, reorder: 0.0, ..Default::default() }.validate().is_ok());
    }

    #[test]
    fn clean_wire_passes_everything_in_order() {
        let pool = Pool::new(256).unwrap();
        let mut bufs = pool.cache();
        let mut port = rx_port(100, FaultConfig::default());
        assert_eq!(drain_rx(&mut port, &mut bufs, 7), (0..100).map(|i| i as u8).collect::<Vec<_>>());
        assert_eq!(port.fault_stats().unwrap().injected(), 0);
        assert_eq!(bufs.in_use(), 0);
    }

    #[test]
    fn rx_faults_are_counted_and_buffers_come_back() {
        let pool = Pool::new(512).unwrap();
        let mut bufs = pool.cache();
        let cfg = FaultConfig { seed: 7, drop: 0.1, duplicate: 0.1, reorder: 0.2, delay_polls: 2, ..Default::default() };
        let mut port = rx_port(200, cfg);
        let got = drain_rx(&mut port, &mut bufs, 16);
        let f = port.fault_stats().unwrap().rx;
        assert!(f.dropped > 0 && f.duplicated > 0 && f.reordered > 0 && f.delayed > 0, "{f:?}");
        assert_eq!(got.len() as u64, 200 - f.dropped + f.duplicated, "{f:?}");
        assert_eq!(port.stats().rx_packets, got.len() as u64);
        let mut sorted = got.clone();
        sorted.sort();
        assert_ne!(got, sorted, "reordered");
        assert_eq!(bufs.in_use(), 0, "held and dropped frames returned their buffers");
    }

    #[test]
    fn same_seed_same_faults() {
        let cfg = FaultConfig { seed: 42, drop: 0.2, corrupt: 0.2, truncate: 0.2, duplicate: 0.2, reorder: 0.2, ..Default::default() };
        let run = |cfg: &FaultConfig| {
            let pool = Pool::new(512).unwrap();
            let mut bufs = pool.cache();
            let mut port = rx_port(300, cfg.clone());
            (drain_rx(&mut port, &mut bufs, 32), port.fault_stats())
        };
        assert_eq!(run(&cfg), run(&cfg));
        assert_ne!(run(&cfg), run(&FaultConfig { seed: 43, ..cfg.clone() }));
    }

    #[test]
    fn duplicate_without_a_buffer_is_counted_not_made() {
        let pool = Pool::new(8).unwrap();
        let mut bufs = pool.cache();
        let mut port = rx_port(8, FaultConfig { duplicate: 1.0, ..Default::default() });
        let mut out = Vec::new();
        let n = port.rx_burst(&mut bufs, &mut out, 8);
        let f = port.fault_stats().unwrap().rx;
        assert_eq!(n, 8);
        assert_eq!(f.duplicated + f.dup_nobuf, 8);
        assert!(f.dup_nobuf > 0);
        bufs.free_pkts(&out);
        port.flush_held(&mut bufs);
        assert_eq!(bufs.in_use(), 0);
    }

    #[test]
    fn held_frames_are_freed_at_shutdown_and_rx_done_waits_for_them() {
        let pool = Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let mut port = rx_port(10, FaultConfig { delay_polls: 5, ..Default::default() });
        let mut out = Vec::new();
        assert_eq!(port.rx_burst(&mut bufs, &mut out, 64), 0);
        assert!(!port.rx_done(), "ten frames still on the wire");
        assert_eq!(port.flush_held(&mut bufs), 10);
        assert_eq!(port.fault_stats().unwrap().rx.discarded, 10);
        assert!(port.rx_done());
        assert_eq!(bufs.in_use(), 0);
    }

    #[test]
    fn tx_full_refuses_a_prefix_and_faults_after_accept_keep_ownership() {
        let pool = Pool::new(512).unwrap();
        let mut bufs = pool.cache();
        let sink = Sink::new("out", SinkKind::Capture, CheckSpec::default());
        let cfg = FaultConfig { side: FaultSide::Tx, tx_full: 0.5, drop: 0.1, duplicate: 0.1, delay_polls: 1, ..Default::default() };
        let mut port = FaultPort::new(Box::new(sink), cfg).unwrap();
        let mut accepted = 0u64;
        for round in 0..40u8 {
            let mut pkts = Vec::new();
            for i in 0..8u8 {
                pkts.push(bufs.alloc_copy(&[round, i, 0, 0]).unwrap());
            }
            let n = port.tx_burst(&mut bufs, &pkts, false);
            bufs.free_pkts(&pkts[n..]);
            accepted += n as u64;
            port.tx_completions(&mut bufs);
        }
        port.flush_held(&mut bufs);
        let f = port.fault_stats().unwrap().tx;
        assert!(f.tx_refused > 0);
        assert_eq!(accepted + f.tx_refused, 320);
        assert_eq!(port.stats().tx_packets, accepted);
        let on_wire = port.captured().unwrap().len() as u64;
        assert_eq!(on_wire, accepted - f.dropped + f.duplicated, "{f:?}");
        assert_eq!(bufs.in_use(), 0);
    }

    #[test]
    fn per_poll_rate_limit_slows_without_loss() {
        let pool = Pool::new(256).unwrap();
        let mut bufs = pool.cache();
        let mut port = rx_port(50, FaultConfig { rate_per_poll: 3, ..Default::default() });
        let mut out = Vec::new();
        assert_eq!(port.rx_burst(&mut bufs, &mut out, 64), 3);
        bufs.free_pkts(&out);
        assert_eq!(drain_rx(&mut port, &mut bufs, 64).len(), 47);
        assert!(port.fault_stats().unwrap().rx.rate_limited > 0);
    }

    #[test]
    fn the_wrapped_port_still_speaks_for_its_input() {
        // A capture is a bounded input, and its too-long frames are the datapath's to count.
        let pool = Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let frames = vec![vec![1u8; 60], vec![2u8; crate::buf::chain::MAX_CHAIN_BYTES + 1], vec![3u8; 60]];
        let mut port = FaultPort::new(Box::new(PcapIn::from_frames("in", frames, 1)), FaultConfig::default()).unwrap();
        assert!(port.rx_bounded());
        assert_eq!(drain_rx(&mut port, &mut bufs, 8), vec![1, 3]);
        assert_eq!(port.take_rx_dropped(), 1);
        assert_eq!(port.stats().rx_length_errors, 1);
        assert_eq!(port.stats().rx_packets, 2);
    }

    #[test]
    fn stop_after_polls_ends_the_pressure() {
        let pool = Pool::new(256).unwrap();
        let mut bufs = pool.cache();
        let mut port = rx_port(100, FaultConfig { drop: 1.0, stop_after_polls: 2, ..Default::default() });
        let got = drain_rx(&mut port, &mut bufs, 10);
        assert_eq!(port.fault_stats().unwrap().rx.dropped, 20, "two polls of ten lost");
        assert_eq!(got.len(), 80);
    }

    /// Six 60-byte packets through `port` in one burst, then every held frame passed on.
    /// Returns (accepted, what take_tx_failed reported).
    fn send_six(port: &mut FaultPort, bufs: &mut BufCache) -> (usize, (u64, u64)) {
        let pkts: Vec<Pkt> = (0..6u8).map(|i| bufs.alloc_copy(&[i; 60]).unwrap()).collect();
        let n = port.tx_burst(bufs, &pkts, false);
        bufs.free_pkts(&pkts[n..]);
        let mut failed = port.take_tx_failed();
        port.tx_completions(bufs);
        port.flush_held(bufs);
        let (m, b) = port.take_tx_failed();
        failed = (failed.0 + m, failed.1 + b);
        (n, failed)
    }

    /// The wrapped port's refusals reach the caller: at once when the burst crossed untouched
    /// (a NIC's full ring, a capture the disk refuses), through take_tx_failed when the frames
    /// had been held (delay) and the refusal came later. Never counted as sent.
    #[test]
    fn refusals_of_the_wrapped_port_are_never_successes() {
        use crate::port::sim::{SimClock, SimConfig, SimNic};
        use std::sync::atomic::AtomicU64;
        use std::sync::Arc;
        let pool = Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let nic = || {
            let cfg = SimConfig { ring: 4, bql: false, ..SimConfig::default() };
            Box::new(SimNic::with_clock("nic", cfg, 1500, SimClock::Manual(Arc::new(AtomicU64::new(0)))))
        };
        let mut port = FaultPort::new(nic(), FaultConfig::default()).unwrap();
        assert_eq!(send_six(&mut port, &mut bufs), (4, (0, 0)), "the ring's refusal, synchronous: the caller requeues");
        assert_eq!(port.stats().tx_packets, 4);
        port.inner.flush_held(&mut bufs);

        let mut port = FaultPort::new(nic(), FaultConfig { delay_polls: 1, ..FaultConfig::default() }).unwrap();
        assert_eq!(send_six(&mut port, &mut bufs), (6, (2, 120)), "refused later: reported failed with its bytes");
        assert_eq!(port.stats().tx_packets, 4);
        assert_eq!(port.fault_stats().unwrap().tx.inner_refused, 2);
        port.inner.flush_held(&mut bufs);

        for delay_polls in [0, 1] {
            let Ok(full) = crate::port::pcap::PcapOut::create("out", std::path::Path::new("/dev/full")) else { continue };
            let mut port = FaultPort::new(Box::new(full), FaultConfig { delay_polls, ..FaultConfig::default() }).unwrap();
            let (n, failed) = send_six(&mut port, &mut bufs);
            assert_eq!(n as u64 - failed.0, 0, "delay {delay_polls}: /dev/full took nothing, so nothing is sent");
            assert_eq!(failed.1, 60 * failed.0);
            assert_eq!(port.stats().tx_packets, 0);
        }
        assert_eq!(bufs.in_use(), 0);
    }

    #[test]
    fn a_wrapped_nic_model_keeps_its_ring_state_visible() {
        let sim = crate::port::sim::SimNic::new("sim0", crate::port::sim::SimConfig::default(), 1500);
        let port = FaultPort::new(Box::new(sim), FaultConfig::default()).unwrap();
        assert!(port.tx_queue().is_some(), "the qdisc in front must see the NIC's BQL and stop state");
        let sink = Sink::new("s", SinkKind::Null, CheckSpec::default());
        assert!(FaultPort::new(Box::new(sink), FaultConfig::default()).unwrap().tx_queue().is_none());
    }
}
