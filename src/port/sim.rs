//! A NIC model (`kind = "sim"`): a transmit ring of `ring` descriptors that the "hardware"
//! sends at a line rate, so a ring fills, BQL has something to limit and doorbells cost
//! what an uncached MMIO write costs. With it, qdisc backlogs, bulking and head-of-line
//! delay behave as on hardware and can be measured without one.
//!
//! - Descriptors are posted with `tx_burst`; the hardware sees them only when the doorbell
//!   rings (tail pointer write), which the driver does when `more` is false or the queue
//!   stopped (`xmit_more`). Each doorbell busy-waits `doorbell_ns`.
//! - Seen descriptors go on the wire back to back at `rate_gbps`, each taking its frame
//!   (padded to 60 bytes) + 4 bytes FCS + 20 bytes preamble and inter-frame gap. With `tso`,
//!   a frame longer than the MTU goes out as MSS-sized segments, each with its own headers.
//! - Completions are reaped in batches, as interrupt moderation gives them: when
//!   `coalesce_frames` are done or the oldest done one waited `coalesce_usecs`.
//! - BQL (`bql`, on by default) is the driver's: every posted packet is `dql_queued`, every
//!   reaped batch `dql_completed`; the queue stops (STACK_XOFF) when over the limit and the
//!   driver stops it (DRV_XOFF) when the ring is full; completions wake it.
//!
//! - Several transmit queues (`rss_queues = N`: the `mq` layout, queue q owned by worker q
//!   as XPS maps it) each have their own ring, BQL and qdisc and share one wire: a doorbell
//!   reserves wire time for its descriptors with one atomic update of the wire's free time.
//!
//! - Receive (a `gen` table on the port): the generator's frames arrive from the wire at the
//!   line rate (or `gen.rate_pps`; each of N receive queues gets its RSS share) into an rx
//!   ring of `rx_ring` descriptors; arrivals that find the ring full are lost as on a NIC
//!   whose driver polls too slowly: counted as `rx_missed` (ethtool's rx_missed_errors,
//!   DPDK's imissed), never entering the datapath. Without a `gen` table nothing arrives.

use super::{Port, PortStats};
use crate::buf::{BufCache, Pkt};
use crate::stats::tsc::{rdtsc, tsc_hz};
use crate::tx::bql::TxqState;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Ethernet framing on the wire besides the frame: FCS 4, preamble + SFD 8, gap 12.
pub const WIRE_OVERHEAD: u64 = 24;
/// Shortest frame without FCS: shorter ones are padded.
pub const MIN_FRAME: u64 = 60;

/// `[ports.sim]`: the NIC's line rate, ring, doorbell cost, interrupt moderation, BQL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Line rate in Gbit/s (10, 25, 100, ...).
    pub rate_gbps: f64,
    /// Transmit descriptors.
    pub ring: u32,
    /// Cost of one doorbell (uncached MMIO write), busy-waited.
    pub doorbell_ns: u64,
    /// Completions are reaped when this many are done ...
    pub coalesce_frames: u32,
    /// ... or the oldest done one waited this long.
    pub coalesce_usecs: u32,
    /// Segment frames longer than the MTU on the "hardware".
    pub tso: bool,
    /// Byte Queue Limits in the driver.
    pub bql: bool,
    /// BQL knobs (sysfs byte_queue_limits): limit_min, limit_max (bytes), hold_time (ms).
    pub bql_limit_min: u32,
    pub bql_limit_max: u32,
    pub bql_hold_time_ms: u64,
    /// Receive descriptors (the ring arrivals wait in until the driver polls them).
    pub rx_ring: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            rate_gbps: 10.0,
            ring: 512,
            doorbell_ns: 100,
            coalesce_frames: 32,
            coalesce_usecs: 8,
            tso: false,
            bql: true,
            bql_limit_min: 0,
            bql_limit_max: crate::tx::bql::DQL_MAX_LIMIT,
            bql_hold_time_ms: 1000,
            rx_ring: 512,
        }
    }
}

impl SimConfig {
    /// Checks the values; the error names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(self.rate_gbps > 0.0 && self.rate_gbps <= 1000.0) {
            return Err(("rate_gbps", format!("{} outside (0, 1000]", self.rate_gbps)));
        }
        if !(2..=1 << 16).contains(&self.ring) {
            return Err(("ring", format!("{} outside 2..=65536", self.ring)));
        }
        if self.doorbell_ns > 1_000_000 {
            return Err(("doorbell_ns", format!("{} is above 1 ms", self.doorbell_ns)));
        }
        if !(1..=1 << 16).contains(&self.rx_ring) {
            return Err(("rx_ring", format!("{} outside 1..=65536", self.rx_ring)));
        }
        if self.coalesce_frames == 0 {
            return Err(("coalesce_frames", "0: completions would never be reaped by count".into()));
        }
        if self.bql_limit_min > self.bql_limit_max {
            return Err(("bql_limit_min", format!("{} is above bql_limit_max {}", self.bql_limit_min, self.bql_limit_max)));
        }
        Ok(())
    }
}

/// What the model counts besides [`PortStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SimStats {
    /// Reaped completion batches (interrupts).
    pub completion_batches: u64,
    /// Packets refused because the ring was full or the queue stopped (NETDEV_TX_BUSY).
    pub tx_busy: u64,
    /// Bytes the wire carried, framing included.
    pub wire_bytes: u64,
}

/// The clock the model reads: the TSC (a read costs ~10 ns, a quarter of `Instant::now`'s,
/// which matters when every packet rings a doorbell), or a test's hand-set nanoseconds.
#[derive(Debug, Clone)]
pub enum SimClock {
    Real { tsc0: u64, ns_per_tick: f64 },
    Manual(Arc<AtomicU64>),
}

impl SimClock {
    pub fn real() -> SimClock {
        SimClock::Real { tsc0: rdtsc(), ns_per_tick: 1e9 / tsc_hz() }
    }

    fn ticks_to_ns(&self, ticks: u64) -> u64 {
        match self {
            SimClock::Real { tsc0, ns_per_tick } => (ticks.wrapping_sub(*tsc0) as f64 * ns_per_tick) as u64,
            SimClock::Manual(_) => 0,
        }
    }

    fn now_ns(&self) -> u64 {
        match self {
            SimClock::Real { .. } => self.ticks_to_ns(rdtsc()),
            SimClock::Manual(ns) => ns.load(Ordering::Relaxed),
        }
    }
}

/// The receive side: frames of `gen` arriving at `pps` into a ring of `ring` descriptors.
/// Only the ring's fill level is tracked: a frame is built when the driver takes it, with
/// the same bytes it would have had on arrival.
struct SimRx {
    gen: super::gen::Generator,
    pps: f64,
    ring: u64,
    /// Arrivals so far (since the first poll), and how many of them wait in the ring.
    arrived: u64,
    pending: u64,
    start_ns: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct Desc {
    pkt: Pkt,
    /// When the wire finishes it; u64::MAX until the doorbell shows it to the hardware.
    done_ns: u64,
}

pub struct SimNic {
    name: String,
    cfg: SimConfig,
    mtu: u32,
    clock: SimClock,
    ring: VecDeque<Desc>,
    /// Descriptors at the front of `ring` the hardware has seen (doorbell rung).
    posted: usize,
    /// When the wire is free again (shared by the port's queues).
    wire_free_ns: Arc<AtomicU64>,
    txq: TxqState,
    stats: PortStats,
    pub sim: SimStats,
    /// When set, every reaped descriptor's (buffer, wire-done time), for delay measurements.
    pub completion_log: Option<Vec<(crate::buf::BufId, u64)>>,
    rx: Option<Box<SimRx>>,
}

impl SimNic {
    pub fn new(name: &str, cfg: SimConfig, mtu: u16) -> SimNic {
        Self::with_clock(name, cfg, mtu, SimClock::real())
    }

    /// `n` transmit queues of one NIC: one clock, one wire.
    pub fn queues(name: &str, cfg: SimConfig, mtu: u16, n: usize) -> Vec<SimNic> {
        let clock = SimClock::real();
        let wire = Arc::new(AtomicU64::new(0));
        (0..n).map(|_| Self::on_wire(name, cfg.clone(), mtu, clock.clone(), Arc::clone(&wire))).collect()
    }

    pub fn with_clock(name: &str, cfg: SimConfig, mtu: u16, clock: SimClock) -> SimNic {
        Self::on_wire(name, cfg, mtu, clock, Arc::new(AtomicU64::new(0)))
    }

    /// A queue on `wire` (its free time, shared with the port's other queues).
    pub fn on_wire(name: &str, cfg: SimConfig, mtu: u16, clock: SimClock, wire: Arc<AtomicU64>) -> SimNic {
        let mut txq = TxqState::default();
        let now = clock.now_ns();
        txq.dql = crate::tx::bql::Dql::new(cfg.bql_hold_time_ms.saturating_mul(1_000_000), now);
        txq.dql.set_limit_max(cfg.bql_limit_max);
        txq.dql.set_limit_min(cfg.bql_limit_min);
        txq.dql.reset(now);
        SimNic {
            name: name.to_string(),
            ring: VecDeque::with_capacity(cfg.ring as usize),
            cfg,
            mtu: mtu as u32,
            clock,
            posted: 0,
            wire_free_ns: wire,
            txq,
            stats: PortStats::default(),
            sim: SimStats::default(),
            completion_log: None,
            rx: None,
        }
    }

    /// Gives the queue a receive side: `gen`'s frames arrive at `share` of the line rate
    /// (its frames' mean length with framing), or at `gen.rate_pps` when set: that is already
    /// this queue's own (`Generator::rss_queues` gave each queue its flows' share of it).
    pub fn receiving(mut self, gen: super::gen::Generator, share: f64) -> SimNic {
        let line_pps = self.cfg.rate_gbps * 1e9 / 8.0 / (gen.mean_frame_len().max(MIN_FRAME as f64) + WIRE_OVERHEAD as f64);
        let pps = gen.config().rate_pps.unwrap_or(line_pps * share);
        let ring = self.cfg.rx_ring as u64;
        self.rx = Some(Box::new(SimRx { gen: gen.unpaced(), pps, ring, arrived: 0, pending: 0, start_ns: None }));
        self
    }

    /// A NIC's receive queues: `gen`'s flows spread over `nics` by `rss`, each queue its
    /// flows' share of the wire (all of `gen.rate_pps` over the queues, or of the line rate).
    pub fn receive_queues(
        name: &str,
        nics: Vec<SimNic>,
        gen: super::gen::GenConfig,
        rss: &super::rss::Rss,
        supply_hash: bool,
    ) -> Result<Vec<SimNic>, super::gen::GenError> {
        let flows = gen.flows.max(1) as f64;
        let gens = super::gen::Generator::rss_queues(name, gen, rss, supply_hash)?;
        Ok(nics
            .into_iter()
            .zip(gens)
            .map(|(n, g)| {
                let share = g.flows() as f64 / flows;
                n.receiving(g, share)
            })
            .collect())
    }

    /// Frames per second arriving at the receive ring (0 without a receive side).
    pub fn rx_pps(&self) -> f64 {
        self.rx.as_ref().map_or(0.0, |rx| rx.pps)
    }

    /// Frames that arrived since the last look go into the rx ring; what does not fit is missed.
    fn rx_arrivals(&mut self) {
        let now = self.clock.now_ns();
        let Some(rx) = self.rx.as_mut() else { return };
        let start = *rx.start_ns.get_or_insert(now);
        let due = (now.saturating_sub(start) as f64 * rx.pps / 1e9) as u64;
        let mut new = due.saturating_sub(rx.arrived);
        rx.arrived = rx.arrived.max(due);
        if let Some(left) = rx.gen.remaining() {
            // A counted generator's frames stop arriving once all of them have: those in the
            // ring are still to be made, missed ones were used up.
            new = new.min(left.saturating_sub(rx.pending));
        }
        let room = rx.ring - rx.pending;
        rx.pending += new.min(room);
        let missed = new.saturating_sub(room);
        rx.gen.skip(missed);
        self.stats.rx_missed += missed;
    }

    /// Bytes a packet of `len` bytes takes on the wire, framing included (TSO: segmented).
    pub fn wire_bytes(&self, len: usize) -> u64 {
        let len = len as u64;
        let mtu_frame = self.mtu as u64 + 14;
        if self.cfg.tso && len > mtu_frame {
            // Ethernet + IPv4 + TCP headers repeated per segment of MSS bytes.
            const HDRS: u64 = 14 + 20 + 20;
            let mss = mtu_frame - HDRS;
            let segs = (len - HDRS).div_ceil(mss);
            return len + (segs - 1) * HDRS + segs * WIRE_OVERHEAD;
        }
        len.max(MIN_FRAME) + WIRE_OVERHEAD
    }

    fn wire_ns(&self, len: usize) -> u64 {
        ((self.wire_bytes(len) * 8) as f64 / self.cfg.rate_gbps).ceil() as u64
    }

    /// Tail pointer write: the hardware sees every posted descriptor and schedules it.
    fn doorbell(&mut self) {
        let now = match &self.clock {
            SimClock::Real { ns_per_tick, .. } => {
                // An uncached MMIO write stalls the CPU about this long.
                let ticks = (self.cfg.doorbell_ns as f64 / ns_per_tick) as u64;
                let start = rdtsc();
                let mut t = start;
                while t.wrapping_sub(start) < ticks {
                    std::hint::spin_loop();
                    t = rdtsc();
                }
                self.clock.ticks_to_ns(t)
            }
            SimClock::Manual(_) => self.clock.now_ns(),
        };
        let total: u64 = (self.posted..self.ring.len()).map(|k| self.wire_ns(self.ring[k].pkt.total_len())).sum();
        // Reserve the wire for the whole batch at once: other queues' batches go before or
        // after it, never between its frames.
        let mut free = self.wire_free_ns.load(Ordering::Acquire);
        let mut t = loop {
            let start = free.max(now);
            match self.wire_free_ns.compare_exchange_weak(free, start + total, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break start,
                Err(cur) => free = cur,
            }
        };
        for k in self.posted..self.ring.len() {
            let len = self.ring[k].pkt.total_len();
            t += self.wire_ns(len);
            self.sim.wire_bytes += self.wire_bytes(len);
            self.ring[k].done_ns = t;
        }
        self.posted = self.ring.len();
        self.stats.doorbells += 1;
    }

    /// Bytes posted to the ring and not yet completed (what a packet queued now waits behind).
    pub fn ring_bytes(&self) -> u64 {
        self.ring.iter().map(|d| d.pkt.total_len() as u64).sum()
    }

    /// Descriptors free in the ring.
    pub fn ring_free(&self) -> usize {
        self.cfg.ring as usize - self.ring.len()
    }

    /// The transmit queue's state (BQL, stopped).
    pub fn txq(&self) -> &TxqState {
        &self.txq
    }
}

impl Port for SimNic {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, bufs: &mut BufCache, out: &mut Vec<Pkt>, max: usize) -> usize {
        self.rx_arrivals();
        let Some(rx) = self.rx.as_mut() else { return 0 };
        let want = rx.pending.min(max as u64) as usize;
        if want == 0 {
            return 0;
        }
        let got = rx.gen.rx_burst(bufs, out, want);
        rx.pending -= got as u64;
        let g = rx.gen.stats();
        // The generator's figures are the NIC's receive counters. A frame without a buffer
        // stays in the ring (no descriptor refilled): later arrivals are missed, as on a NIC.
        (self.stats.rx_packets, self.stats.rx_bytes) = (g.rx_packets, g.rx_bytes);
        got
    }

    fn tx_burst(&mut self, _bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        let mut accepted = 0;
        for p in pkts {
            if self.txq.stopped() || self.ring.len() >= self.cfg.ring as usize {
                break;
            }
            self.ring.push_back(Desc { pkt: *p, done_ns: u64::MAX });
            accepted += 1;
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += p.total_len() as u64;
            if self.cfg.bql {
                self.txq.sent(p.total_len() as u32);
            }
            if self.ring.len() >= self.cfg.ring as usize {
                self.txq.stop_drv();
            }
        }
        self.sim.tx_busy += (pkts.len() - accepted) as u64;
        // xmit_more: the doorbell waits while more follows, unless the queue stopped.
        if self.posted < self.ring.len() && (!more || self.txq.stopped()) {
            self.doorbell();
        }
        accepted
    }

    fn tx_completions(&mut self, bufs: &mut BufCache) -> usize {
        let now = self.clock.now_ns();
        let done = self.ring.iter().take(self.posted).take_while(|d| d.done_ns <= now).count();
        if done == 0 {
            return 0;
        }
        let oldest = self.ring[0].done_ns;
        let timer = oldest.saturating_add(self.cfg.coalesce_usecs as u64 * 1000);
        if done < self.cfg.coalesce_frames as usize && now < timer {
            return 0;
        }
        let mut bytes = 0u64;
        for d in self.ring.drain(..done) {
            if let Some(log) = self.completion_log.as_mut() {
                log.push((d.pkt.buf, d.done_ns));
            }
            bytes += d.pkt.total_len() as u64;
            bufs.free(d.pkt);
        }
        self.posted -= done;
        self.sim.completion_batches += 1;
        if self.cfg.bql {
            self.txq.completed(bytes.min(u32::MAX as u64) as u32, now);
        }
        // Wake once a quarter of the ring is free (the drivers' TX_WAKE_THRESHOLD idea).
        if self.ring_free() >= (self.cfg.ring as usize / 4).max(1) {
            self.txq.wake_drv();
        }
        done
    }

    /// With `tso`, TCP GSO packets come whole and the "hardware" segments them on the wire.
    fn tso(&self) -> bool {
        self.cfg.tso
    }

    fn tx_queue(&self) -> Option<&TxqState> {
        // Without BQL nothing is ever queued in the dql: avail stays 0, so no bulking, and
        // only a full ring stops the queue.
        Some(&self.txq)
    }

    fn flush_held(&mut self, bufs: &mut BufCache) -> usize {
        let n = self.ring.len();
        for d in self.ring.drain(..) {
            bufs.free(d.pkt);
        }
        self.posted = 0;
        self.txq.xoff_drv = false;
        self.txq.xoff_stack = false;
        self.txq.dql.reset(self.clock.now_ns());
        n
    }

    fn rx_done(&self) -> bool {
        self.rx.as_ref().is_none_or(|rx| rx.gen.rx_done())
    }

    fn rx_csum_verified(&self) -> bool {
        true
    }

    fn rx_bounded(&self) -> bool {
        self.rx.as_ref().is_some_and(|rx| rx.gen.rx_bounded())
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::Pool;

    fn manual(cfg: SimConfig) -> (SimNic, Arc<AtomicU64>) {
        let t = Arc::new(AtomicU64::new(0));
        (SimNic::with_clock("nic", cfg, 1500, SimClock::Manual(t.clone())), t)
    }

    #[test]
    fn wire_time_is_line_rate_with_framing() {
        let (nic, _) = manual(SimConfig::default());
        // 60-byte frame + FCS + preamble + gap = 84 bytes = 672 bits = 67.2 ns at 10G.
        assert_eq!(nic.wire_bytes(60), 84);
        assert_eq!(nic.wire_bytes(20), 84, "padded to the minimum frame");
        assert_eq!(nic.wire_ns(60), 68);
        let (tso, _) = manual(SimConfig { tso: true, ..SimConfig::default() });
        // 3 full segments of 1460 bytes of payload: 3 × (54 + 1460 + 24).
        assert_eq!(tso.wire_bytes(54 + 3 * 1460), 3 * (1514 + 24));
    }

    #[test]
    fn arrivals_that_find_the_rx_ring_full_are_missed() {
        let pool = Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let (nic, t) = manual(SimConfig { rx_ring: 8, ..SimConfig::default() });
        // One frame per ns, so the clock counts arrivals.
        let gen = crate::port::gen::GenConfig { flows: 1, rate_pps: Some(1e9), ..Default::default() };
        let mut nic = nic.receiving(crate::port::gen::Generator::new("nic", gen).unwrap(), 1.0);
        let mut out = Vec::new();
        assert_eq!(nic.rx_burst(&mut bufs, &mut out, 32), 0, "the first look starts the wire");
        t.store(10, Ordering::Relaxed);
        assert_eq!(nic.rx_burst(&mut bufs, &mut out, 4), 4, "10 arrived, 8 fit the ring, 4 taken");
        assert_eq!(nic.stats().rx_missed, 2);
        t.store(13, Ordering::Relaxed);
        assert_eq!(nic.rx_burst(&mut bufs, &mut out, 32), 7, "4 left + 3 new, all fit");
        assert_eq!(nic.stats().rx_missed, 2);
        t.store(100, Ordering::Relaxed);
        assert_eq!(nic.rx_burst(&mut bufs, &mut out, 32), 8, "a full ring");
        assert_eq!(nic.stats().rx_missed, 2 + 87 - 8);
        assert_eq!(nic.stats().rx_packets, 19);
        assert!(out.iter().all(|p| p.total_len() == 60));
        assert!(!nic.rx_done(), "an endless generator");
        bufs.free_pkts(&out);
        assert_eq!(bufs.in_use(), 0);
        let (idle, _) = manual(SimConfig::default());
        assert!(idle.rx_done(), "no wire source: nothing ever arrives");
    }

    /// `gen.rate_pps` is the whole wire's: the queues' rates add up to it (and with no rate,
    /// to the line rate), however RSS spreads the flows.
    #[test]
    fn receive_queues_share_the_rate_once() {
        let rss = crate::port::rss::Rss::new(4).unwrap();
        let nics = || SimNic::queues("sim", SimConfig::default(), 1500, 4);
        let gen = crate::port::gen::GenConfig { flows: 64, rate_pps: Some(1e6), ..Default::default() };
        let queues = SimNic::receive_queues("sim", nics(), gen.clone(), &rss, true).unwrap();
        let total: f64 = queues.iter().map(SimNic::rx_pps).sum();
        assert!((total - 1e6).abs() < 1.0, "{total} pps over 4 queues, want 1e6");
        assert!(queues.iter().filter(|q| q.rx_pps() > 0.0).count() > 1, "RSS spread the flows");
        let line = crate::port::gen::GenConfig { rate_pps: None, ..gen };
        let queues = SimNic::receive_queues("sim", nics(), line.clone(), &rss, true).unwrap();
        let total: f64 = queues.iter().map(SimNic::rx_pps).sum();
        let mean = crate::port::gen::Generator::new("g", line.clone()).unwrap().mean_frame_len();
        let want = 10e9 / 8.0 / (mean + 24.0);
        assert!((total - want).abs() < want * 1e-6, "{total} pps, want the 10G line rate {want}");
    }

    /// A counted generator behind the wire: arrivals end with its count, so frames that never
    /// existed are not missed, and the missed ones end the run as received ones do.
    #[test]
    fn a_counted_wire_stops_arriving_at_its_count() {
        let pool = Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let (nic, t) = manual(SimConfig { rx_ring: 8, ..SimConfig::default() });
        let gen = crate::port::gen::GenConfig { flows: 1, rate_pps: Some(1e9), packets: Some(10), ..Default::default() };
        let mut nic = nic.receiving(crate::port::gen::Generator::new("nic", gen).unwrap(), 1.0);
        let mut out = Vec::new();
        assert_eq!(nic.rx_burst(&mut bufs, &mut out, 32), 0, "the first look starts the wire");
        t.store(1_000_000, Ordering::Relaxed);
        assert_eq!(nic.rx_burst(&mut bufs, &mut out, 32), 8, "a full ring");
        assert_eq!(nic.stats().rx_missed, 2, "10 frames existed, 8 fit");
        t.store(2_000_000, Ordering::Relaxed);
        assert_eq!(nic.rx_burst(&mut bufs, &mut out, 32), 0);
        assert_eq!(nic.stats().rx_missed, 2);
        assert!(nic.rx_done(), "every frame arrived or was missed");
        bufs.free_pkts(&out);
    }

    #[test]
    fn doorbell_only_when_no_more_follows_and_completions_in_batches() {
        let pool = Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let (mut nic, t) = manual(SimConfig { bql: false, coalesce_frames: 4, coalesce_usecs: 1, ..SimConfig::default() });
        let mut pkts = Vec::new();
        bufs.alloc_bulk(&mut pkts, 8, 60);
        assert_eq!(nic.tx_burst(&mut bufs, &pkts[..4], true), 4);
        assert_eq!(nic.stats().doorbells, 0, "more follows: no doorbell");
        assert_eq!(nic.tx_burst(&mut bufs, &pkts[4..5], false), 1);
        assert_eq!(nic.stats().doorbells, 1);
        // On the wire back to back from t=0: done at 68, 136, 204, 272, 340 ns.
        t.store(68 * 3, Ordering::Relaxed);
        assert_eq!(nic.tx_completions(&mut bufs), 0, "3 done: below the batch of 4, timer not expired");
        t.store(68 * 4, Ordering::Relaxed);
        assert_eq!(nic.tx_completions(&mut bufs), 4);
        t.store(68 * 5, Ordering::Relaxed);
        assert_eq!(nic.tx_completions(&mut bufs), 0);
        t.store(68 * 5 + 1000, Ordering::Relaxed);
        assert_eq!(nic.tx_completions(&mut bufs), 1, "the timer reaps a partial batch");
        bufs.free_pkts(&pkts[5..]);
        assert_eq!(bufs.in_use(), 0);
        assert_eq!(nic.sim.completion_batches, 2);
    }

    #[test]
    fn a_full_ring_stops_the_queue_and_refuses_and_completion_wakes_it() {
        let pool = Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let (mut nic, t) = manual(SimConfig { bql: false, ring: 4, coalesce_frames: 1, ..SimConfig::default() });
        let mut pkts = Vec::new();
        bufs.alloc_bulk(&mut pkts, 6, 60);
        assert_eq!(nic.tx_burst(&mut bufs, &pkts, false), 4, "4 descriptors");
        assert!(nic.txq().stopped());
        assert_eq!(nic.stats().doorbells, 1, "rung when the queue stopped");
        assert_eq!(nic.tx_burst(&mut bufs, &pkts[4..], false), 0, "busy");
        t.store(10_000, Ordering::Relaxed);
        assert_eq!(nic.tx_completions(&mut bufs), 4);
        assert!(!nic.txq().stopped());
        assert_eq!(nic.tx_burst(&mut bufs, &pkts[4..], false), 2);
        assert_eq!(nic.flush_held(&mut bufs), 2);
        assert_eq!(bufs.in_use(), 0);
    }

    #[test]
    fn bql_stops_the_queue_before_the_ring_is_full() {
        let pool = Pool::new(64).unwrap();
        let mut bufs = pool.cache();
        let (mut nic, t) = manual(SimConfig { ring: 64, coalesce_frames: 1, ..SimConfig::default() });
        let mut pkts = Vec::new();
        bufs.alloc_bulk(&mut pkts, 3, 60);
        // Limit 0: the first packet puts BQL over; the queue stops with 63 descriptors free.
        assert_eq!(nic.tx_burst(&mut bufs, &pkts, false), 1);
        assert!(nic.txq().xoff_stack && !nic.txq().xoff_drv);
        t.store(1000, Ordering::Relaxed);
        assert_eq!(nic.tx_completions(&mut bufs), 1);
        assert_eq!(nic.txq().dql.limit(), 60, "starved: grew by what completed");
        assert!(!nic.txq().stopped());
        assert_eq!(nic.tx_burst(&mut bufs, &pkts[1..], false), 2, "60 bytes of room: 2nd fits, 3rd goes over and stops");
        assert!(nic.txq().stopped());
        assert_eq!(nic.flush_held(&mut bufs), 2);
        assert_eq!(bufs.in_use(), 0);
    }
}
