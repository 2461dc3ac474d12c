//! Per-thread state (Linux per-CPU `softnet_data`, VPP's `vlib_main_t`): the buffer cache, the
//! ports this worker polls, transmit staging, XDP programs and queues, sockets, neighbours it
//! learned, counters and clocks. Stages take `&Net` and `&mut Worker`.

use crate::buf::{BufCache, Pkt, Pool};
use crate::port::Port;
use crate::rps::backlog::FlowLimit;
use crate::rx::route::Neighbours;
use crate::rx::socket::Sockets;
use crate::stats::tsc::{self, StageClock};
use crate::stats::{Counters, DropReason, Stage};
use crate::tx::queue::TxQueue;
use crate::xdp::hooks::XdpHooks;

pub struct Worker {
    /// This worker's number (its CPU for per-CPU maps and `bpf_get_smp_processor_id`).
    pub id: usize,
    pub bufs: BufCache,
    /// The ports this worker owns (polls and transmits on), by port index; `None` for ports
    /// another worker owns.
    pub ports: Vec<Option<Box<dyn Port>>>,
    /// Transmit staging, one queue per port.
    pub txq: Vec<TxQueue>,
    pub xdp: XdpHooks,
    pub sockets: Sockets,
    pub neigh: Neighbours,
    /// Entries of `Net::neigh_log` already applied to `neigh`.
    pub neigh_seen: usize,
    /// Neighbours being resolved and the packets waiting for them.
    pub resolver: crate::rx::resolver::Resolver,
    pub c: Counters,
    /// A coarse clock, ns since the worker was made (or the epoch `set_epoch` gave): read once
    /// per softirq round, like jiffies.
    pub now_ns: u64,
    /// Which polls the per-stage clocks time (`stats.clock_sample`).
    pub clock: StageClock,
    /// TSC ticks per microsecond (the softirq round's time limit, [`Worker::tsc_deadline`]).
    tsc_per_us: u64,
    /// The TSC at the coarse clock's time zero, and nanoseconds per tick in 32.32 fixed point.
    tsc_epoch: u64,
    ns_per_tick_q32: u64,
    /// Packets the ports may still deliver (a run's packet count; u64::MAX = no limit).
    pub rx_quota: u64,
    /// The backlog ring `process_backlog` serves first next time (round robin).
    pub(crate) backlog_next: usize,
    /// The NAPI instance (backlog, then ports) the next softirq round polls first: the one
    /// after where a round ran out.
    pub(crate) next_napi: u16,
    /// Per-poll scratch (kept to avoid allocation per poll).
    pub(crate) rx_scratch: Vec<Pkt>,
    pub(crate) skb_scratch: Vec<crate::buf::skb::Skb>,
    /// One IPv4 fragment being built (the cold fragmentation path reuses it).
    pub(crate) frag_scratch: Vec<u8>,
    /// RPS: packets of this poll staged per target worker, and the targets to wake at the
    /// end of the round (bit per worker).
    pub(crate) rps_out: Vec<Vec<crate::buf::skb::Skb>>,
    pub(crate) wake_pending: u64,
    /// Backlog rings: producer ends to every worker's backlog (by target, this worker's own
    /// included: its steered packets queue behind what others sent it), and the consumer
    /// ends of this worker's backlog, one per sending worker.
    pub(crate) rps_tx: Vec<Option<crate::rps::backlog::BacklogTx>>,
    pub(crate) backlog_rx: Vec<crate::rps::backlog::BacklogRx>,
    /// The producing worker of each ring in `backlog_rx`.
    pub(crate) backlog_src: Vec<usize>,
    /// Packets taken from each ring of `backlog_rx` and not yet published as processed
    /// (`rps::publish_processed`, after the poll's end).
    pub(crate) backlog_taken: Vec<u32>,
    /// Packets this worker has queued on each target's ring (its backlog tail, for RFS).
    pub(crate) ring_queued: Vec<u64>,
    /// RFS: this worker's flow table (`rps_flow_cnt` entries, a power of two; empty = off).
    pub(crate) rps_flows: Vec<crate::rps::rfs::DevFlow>,
    /// The flow limit's history of what this worker queued on backlogs (when its bit is in
    /// `net.core.flow_limit_cpu_bitmap`), made at the first backlog past half full.
    pub(crate) flow_limit: Option<FlowLimit>,
    /// GRO tables, one per rx port this worker polls (each worker is that queue's NAPI instance).
    pub(crate) gro: Vec<crate::gro::table::GroTable>,
    pub(crate) gso_scratch: Vec<Pkt>,
    /// This worker's thread CPU time (user, system seconds) over its last run.
    pub cpu_time: Option<(f64, f64)>,
}

impl Worker {
    pub fn new(id: usize, pool: &Pool) -> Worker {
        let epoch = std::time::Instant::now();
        let tsc_per_us = ((tsc::tsc_hz() / 1e6) as u64).max(1);
        Worker {
            id,
            bufs: pool.cache(),
            ports: Vec::new(),
            txq: Vec::new(),
            xdp: XdpHooks::default(),
            sockets: Sockets::default(),
            neigh: Neighbours::default(),
            neigh_seen: 0,
            resolver: Default::default(),
            c: Counters::default(),
            now_ns: 0,
            clock: Default::default(),
            tsc_per_us,
            tsc_epoch: tsc_at(epoch, tsc_per_us),
            ns_per_tick_q32: ((1000u128 << 32) / tsc_per_us as u128) as u64,
            rx_quota: u64::MAX,
            next_napi: 0,
            backlog_next: 0,
            rx_scratch: Vec::with_capacity(1024),
            skb_scratch: Vec::with_capacity(1024),
            frag_scratch: Vec::new(),
            rps_out: Vec::new(),
            wake_pending: 0,
            rps_tx: Vec::new(),
            backlog_rx: Vec::new(),
            backlog_src: Vec::new(),
            backlog_taken: Vec::new(),
            ring_queued: Vec::new(),
            rps_flows: Vec::new(),
            flow_limit: None,
            gro: Vec::new(),
            gso_scratch: Vec::new(),
            cpu_time: None,
        }
    }

    /// Makes room for port `i`: a transmit queue, and the port itself when this worker owns it.
    pub fn add_port(&mut self, i: u16, port: Option<Box<dyn Port>>) {
        let n = i as usize + 1;
        if self.ports.len() < n {
            self.ports.resize_with(n, || None);
            self.txq.resize_with(n, TxQueue::default);
        }
        self.ports[i as usize] = port;
    }

    /// Port `i`, if this worker owns it.
    #[inline]
    pub fn port_mut(&mut self, i: u16) -> Option<&mut Box<dyn Port>> {
        self.ports.get_mut(i as usize).and_then(Option::as_mut)
    }

    /// Port `i`'s queue handle, if this worker owns one.
    #[inline]
    pub fn port_queue(&self, i: u16) -> Option<&dyn Port> {
        self.ports.get(i as usize).and_then(|p| p.as_deref())
    }

    /// The ports this worker owns.
    pub fn owned_ports(&self) -> impl Iterator<Item = &dyn Port> + '_ {
        self.ports.iter().flatten().map(|p| p.as_ref())
    }

    /// Uses `epoch` as time zero of the coarse clock (the datapath's, shared by its workers).
    pub fn set_epoch(&mut self, epoch: std::time::Instant) {
        self.tsc_epoch = tsc_at(epoch, self.tsc_per_us);
    }

    /// The TSC reading `us` microseconds from now (a time limit for [`tsc::reached`]).
    #[inline]
    pub fn tsc_deadline(&self, us: u64) -> u64 {
        tsc::rdtsc().wrapping_add(self.tsc_per_us.saturating_mul(us))
    }

    /// Advances the coarse clock to the TSC's now (once per softirq round: a TSC read costs
    /// about half a `clock_gettime` here). Never goes back, even if the thread moves to a CPU
    /// whose TSC lags a little.
    #[inline]
    pub fn tick_tsc(&mut self) {
        let ticks = tsc::rdtsc().saturating_sub(self.tsc_epoch);
        let ns = ((ticks as u128 * self.ns_per_tick_q32 as u128) >> 32) as u64;
        self.now_ns = self.now_ns.max(ns);
    }

    /// The start of a timed stage (0 when this poll is not timed).
    #[inline(always)]
    pub fn clock(&self) -> u64 {
        self.clock.start()
    }

    /// Cycles since `t0` (0 when not timed): a stage's own part before it hands packets to a
    /// nested stage, whose clocks count that time themselves (see [`Worker::stage_add`]).
    #[inline(always)]
    pub fn stage_lap(&self, t0: u64) -> u64 {
        self.clock.lap(t0).1
    }

    /// Ends stage `s` whose own time, summed from [`Worker::stage_lap`]s around its nested
    /// stages, is `cycles`.
    #[inline]
    pub fn stage_add(&mut self, s: Stage, packets: usize, cycles: u64) {
        self.c.stages[s as usize].add(packets, cycles);
    }

    /// Ends stage `s` started at `t0` (from [`Worker::clock`]) over `packets` packets;
    /// returns the TSC now (0 when not timed) to start the next stage with.
    #[inline(always)]
    pub fn stage_done(&mut self, s: Stage, packets: usize, t0: u64) -> u64 {
        let (now, cycles) = self.clock.lap(t0);
        self.c.stages[s as usize].add(packets, cycles);
        now
    }

    /// Drops a packet: counts the reason and frees its buffer.
    #[inline]
    pub fn drop_pkt(&mut self, p: Pkt, reason: DropReason) {
        self.c.drop(reason);
        self.bufs.free(p);
    }

    /// True when other workers have steered packets here that wait in the backlog rings.
    #[inline]
    pub fn backlog_pending(&self) -> bool {
        self.backlog_rx.iter().any(|r| !r.is_empty())
    }

    /// Packets the worker holds that have not met their fate yet.
    pub fn in_flight(&self) -> u64 {
        self.txq.iter().map(|q| q.len() as u64).sum::<u64>()
            + self.xdp.in_flight()
            + self.backlog_rx.iter().map(|r| r.slots() as u64).sum::<u64>()
            + self.gro.iter().map(|t| (t.held() + t.pending()) as u64).sum::<u64>()
            + self.resolver.held() as u64
    }

    /// Buffers taken from the pool through this worker's cache and not freed through it.
    pub fn buffers_in_use(&self) -> i64 {
        self.bufs.in_use()
    }
}

/// The TSC reading at `epoch` (a past instant): now's reading less the ticks since.
fn tsc_at(epoch: std::time::Instant, tsc_per_us: u64) -> u64 {
    let since_us = epoch.elapsed().as_micros() as u64;
    tsc::rdtsc().saturating_sub(since_us.saturating_mul(tsc_per_us))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coarse clock on the TSC follows real time from the epoch it was given (a sleep of
    /// 20 ms shows as at least 15 ms, never as an hour) and never goes back.
    #[test]
    fn the_coarse_clock_follows_real_time_and_never_goes_back() {
        let pool = Pool::new(16).unwrap();
        let mut w = Worker::new(0, &pool);
        w.set_epoch(std::time::Instant::now() - std::time::Duration::from_millis(500));
        w.tick_tsc();
        let t0 = w.now_ns;
        assert!((400_000_000..3_600_000_000_000).contains(&t0), "500 ms after the epoch: {t0} ns");
        std::thread::sleep(std::time::Duration::from_millis(20));
        w.tick_tsc();
        let dt = w.now_ns - t0;
        assert!((15_000_000..3_600_000_000_000).contains(&dt), "a 20 ms sleep: {dt} ns");
        w.now_ns = u64::MAX / 2;
        w.tick_tsc();
        assert_eq!(w.now_ns, u64::MAX / 2, "never back");
    }
}
