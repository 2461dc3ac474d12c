//! A datapath as the control plane holds it: the shared [`Net`] and its [`Worker`]s, built by
//! `config` (or a test), run by [`Datapath::run_until`] (one thread per worker), and summed for
//! reports and the conservation law. Stages never see this type: they take `&Net` and
//! `&mut Worker`.

use crate::buf::Pool;
use crate::napi::{self, RunLimit, StopReason};
pub use crate::net::{Net, Pipeline};
use crate::port::Port;
use crate::rx::route::Iface;
use crate::stats::cpu::thread_cpu_time;
use crate::stats::Counters;
use crate::tunables::Tunables;
pub use crate::worker::Worker;
use std::time::Duration;

/// Pins the calling thread to CPU `cpu` when the machine has it (a worker per CPU, as
/// softirq processing runs on its CPU); otherwise leaves it to the scheduler.
fn pin_to_cpu(cpu: usize) {
    if let Some(ids) = core_affinity::get_core_ids() {
        if let Some(id) = ids.into_iter().find(|c| c.id == cpu) {
            core_affinity::set_for_current(id);
        }
    }
}

/// Runs `f` and the CPU time (user, system seconds) the calling thread spent in it.
fn with_cpu_time<R>(f: impl FnOnce() -> R) -> (R, Option<(f64, f64)>) {
    let t0 = thread_cpu_time();
    let r = f();
    let spent = t0.zip(thread_cpu_time()).map(|((u0, s0), (u1, s1))| ((u1 - u0).max(0.0), (s1 - s0).max(0.0)));
    (r, spent)
}

/// Splits a run's packet count over the workers that receive (own a queue that is not done),
/// equally, the remainder to the first ones; the others get none.
fn share_packet_count(w0: &mut Worker, others: &mut [Worker], packets: Option<u64>) {
    let Some(n) = packets else {
        w0.rx_quota = u64::MAX;
        others.iter_mut().for_each(|w| w.rx_quota = u64::MAX);
        return;
    };
    let mut all: Vec<&mut Worker> = std::iter::once(w0).chain(others.iter_mut()).collect();
    let mut receiving: Vec<bool> = all.iter().map(|w| w.owned_ports().any(|p| !p.rx_done())).collect();
    if !receiving.contains(&true) {
        receiving[0] = true;
    }
    let k = receiving.iter().filter(|&&r| r).count() as u64;
    let mut i = 0;
    for (w, r) in all.iter_mut().zip(receiving) {
        w.rx_quota = if r {
            i += 1;
            n / k + u64::from(i - 1 < n % k)
        } else {
            0
        };
    }
}

pub struct Datapath {
    pub net: Net,
    pub workers: Vec<Worker>,
}

/// Passes of [`Datapath::drain`] over the workers: a packet crosses between workers at most
/// twice (steered, then handed to its port's owner), so a few passes always settle.
const MAX_SETTLE_PASSES: usize = 8;

impl Datapath {
    /// A datapath with one worker, or with one per CPU up to the highest of `rps_cpus`.
    pub fn new(tun: Tunables, pipeline: Pipeline, pool: &Pool) -> Datapath {
        let workers = crate::rps::backlog::workers_for(tun.rps_cpus);
        Datapath::with_workers(tun, pipeline, pool, workers)
    }

    /// A datapath with `workers` workers (at least those `rps_cpus` needs): one per queue of
    /// a multi-queue port, say.
    pub fn with_workers(tun: Tunables, pipeline: Pipeline, pool: &Pool, workers: usize) -> Datapath {
        let net = Net::with_workers(tun, pipeline, workers);
        let (tx, rx) = crate::rps::backlog::backlog_rings(net.rps.workers(), net.rps.max_backlog + 1);
        let workers = tx
            .into_iter()
            .zip(rx)
            .enumerate()
            .map(|(id, (tx, rx))| {
                let mut w = Worker::new(id, pool);
                w.set_epoch(net.epoch);
                let n = net.rps.workers();
                if n > 1 {
                    w.rps_tx = tx;
                    w.backlog_rx = rx;
                    w.backlog_src = (0..n).collect();
                    w.ring_queued = vec![0; n];
                    if net.rps.sock_flow.enabled() && net.tun.rps_flow_cnt > 0 {
                        w.rps_flows = vec![Default::default(); net.tun.rps_flow_cnt.next_power_of_two() as usize];
                    }
                }
                w
            })
            .collect();
        Datapath { net, workers }
    }

    /// Adds a port with its interface, owned (polled) by worker 0; returns its index.
    pub fn add_port(&mut self, port: Box<dyn Port>, iface: Iface) -> u16 {
        self.add_port_queues(vec![port], iface)
    }

    /// Adds a port of several queues: queue handle q is owned (polled, transmitted on) by
    /// worker q; workers without a queue of the port hand their output for it to worker 0.
    /// Returns the port's index.
    pub fn add_port_queues(&mut self, queues: Vec<Box<dyn Port>>, iface: Iface) -> u16 {
        assert!(!queues.is_empty() && queues.len() <= self.workers.len(), "a port has 1 queue per worker at most");
        let i = self.net.ifaces.len() as u16;
        self.net.ifaces.push(iface);
        self.net.peer.push(None);
        self.net.rps.tx_handoff.push(crossbeam_queue::ArrayQueue::new(crate::rps::backlog::HANDOFF_LEN));
        let mut queues = queues.into_iter();
        for w in &mut self.workers {
            w.add_port(i, queues.next());
        }
        i
    }

    /// Worker 0 (the only one of a single-worker datapath).
    pub fn w(&mut self) -> &mut Worker {
        &mut self.workers[0]
    }

    /// A configured neighbour (every worker knows it).
    pub fn add_neigh_v4(&mut self, port: u16, addr: [u8; 4], mac: [u8; 6]) {
        for w in &mut self.workers {
            w.neigh.v4.insert((port, addr), mac);
        }
        let mut ages = self.net.neigh_ages.lock().unwrap_or_else(|p| p.into_inner());
        ages.add_permanent(port, crate::rx::neigh::NeighAddr::V4(addr));
    }

    pub fn add_neigh_v6(&mut self, port: u16, addr: [u8; 16], mac: [u8; 6]) {
        for w in &mut self.workers {
            w.neigh.v6.insert((port, addr), mac);
        }
        let mut ages = self.net.neigh_ages.lock().unwrap_or_else(|p| p.into_inner());
        ages.add_permanent(port, crate::rx::neigh::NeighAddr::V6(addr));
    }

    /// Every worker's counters, summed.
    pub fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for w in &self.workers {
            c.merge(&w.c);
        }
        c
    }

    /// Packets held by any worker, or between workers, that have not met their fate yet.
    pub fn in_flight(&self) -> u64 {
        self.workers.iter().map(Worker::in_flight).sum::<u64>() + self.net.rps.in_flight()
    }

    /// Checks the conservation law over all workers.
    pub fn conservation(&self) -> Result<(), crate::stats::ConservationError> {
        self.counters().conservation(self.in_flight())
    }

    /// Buffers not back in the pool once every port and socket released theirs: a leak check
    /// for tests (after a run, which drains).
    pub fn buffers_in_use(&self) -> i64 {
        self.workers.iter().map(Worker::buffers_in_use).sum()
    }

    /// Every port's first queue (the only one of most ports), in port order.
    pub fn ports(&self) -> impl Iterator<Item = &dyn Port> + '_ {
        (0..self.net.nports()).filter_map(move |i| self.workers.iter().find_map(|w| w.ports.get(i).and_then(|p| p.as_deref())))
    }

    /// Every queue handle of port `i`, queue 0 first.
    pub fn port_queues(&self, i: usize) -> impl Iterator<Item = &dyn Port> + '_ {
        self.workers.iter().filter_map(move |w| w.ports.get(i).and_then(|p| p.as_deref()))
    }

    /// Every queue handle of every port.
    pub fn all_queues(&self) -> impl Iterator<Item = &dyn Port> + '_ {
        (0..self.net.nports()).flat_map(move |i| self.port_queues(i))
    }

    /// Port `i`'s counters over all its queues.
    pub fn port_stats(&self, i: usize) -> crate::port::PortStats {
        self.port_queues(i).fold(crate::port::PortStats::default(), |mut s, q| {
            s.merge(&q.stats());
            s
        })
    }

    /// Runs until `limit` says stop or the inputs are done, then drains. `tick` sees the
    /// counters about every `tick_every` (for per-second lines).
    pub fn run(&mut self, limit: RunLimit, tick_every: Duration, tick: impl FnMut(&Counters, Duration)) -> Duration {
        self.run_until(&limit, tick_every, tick).0
    }

    /// [`Datapath::run`], also saying why the run ended and which ports failed to finish
    /// their output.
    pub fn run_until(
        &mut self,
        limit: &RunLimit,
        tick_every: Duration,
        mut tick: impl FnMut(&Counters, Duration),
    ) -> (Duration, StopReason, Vec<(String, std::io::Error)>) {
        let Datapath { net, workers } = self;
        let (first, others) = workers.split_at_mut(1);
        let w0 = &mut first[0];
        if others.is_empty() {
            let (r, cpu) = with_cpu_time(|| napi::run_until(net, w0, limit, tick_every, |_, w, el| tick(&w.c, el)));
            w0.cpu_time = cpu;
            return r;
        }
        // One thread per worker: worker 0 (the ports' owner) on this one, the others serve
        // their backlogs until it says stop, each pinned to its CPU when there is one (the
        // calling thread is left as it is: it is the caller's).
        net.rps.stop.store(false, std::sync::atomic::Ordering::Release);
        net.rps.finished.store(0, std::sync::atomic::Ordering::Release);
        net.rps.rx_finished.store(0, std::sync::atomic::Ordering::Release);
        net.rps.rx_stopped.store(0, std::sync::atomic::Ordering::Release);
        share_packet_count(w0, others, limit.packets);
        let net = &*net;
        std::thread::scope(|scope| {
            for w in others.iter_mut() {
                std::thread::Builder::new()
                    .name(format!("sluice-w{}", w.id))
                    .spawn_scoped(scope, move || {
                        pin_to_cpu(w.id);
                        w.cpu_time = with_cpu_time(|| napi::run_worker(net, w, limit)).1;
                    })
                    .expect("spawning a worker thread");
            }
            let (r, cpu) = with_cpu_time(|| {
                napi::run_until(net, w0, limit, tick_every, |net, w, el| {
                    let mut c = net.rps.snapshot_sum();
                    c.merge(&w.c);
                    tick(&c, el)
                })
            });
            w0.cpu_time = cpu;
            r
        })
    }

    /// Every worker's thread CPU time over the last run (user + system seconds), summed;
    /// None when a worker's could not be read.
    pub fn cpu_seconds(&self) -> Option<f64> {
        self.workers.iter().map(|w| w.cpu_time.map(|(u, s)| u + s)).sum()
    }

    /// Sets every worker's counters back to zero (after a warm-up: everything was flushed,
    /// so the ledger still balances), and the copies other workers published for the
    /// per-second lines (else the next run's first lines would count the warm-up).
    pub fn reset_counters(&mut self) {
        for w in &mut self.workers {
            w.c = Counters::default();
        }
        for s in &self.net.rps.snapshots {
            *s.lock().unwrap_or_else(|e| e.into_inner()) = Counters::default();
        }
    }

    /// One softirq round on every worker in turn, on this thread (tests step with it).
    pub fn round(&mut self) -> usize {
        let Datapath { net, workers } = self;
        workers.iter_mut().map(|w| napi::softirq_round(net, w)).sum()
    }

    /// Flushes everything every worker holds (see [`napi::drain`]). With several workers,
    /// on this one thread: packets cross between them (steered into another's backlog,
    /// handed to a port's owner), so every worker settles in turn until nothing is left
    /// between them, as the threaded shutdown keeps serving backlogs until all are quiet.
    pub fn drain(&mut self) -> Vec<(String, std::io::Error)> {
        if self.workers.len() > 1 {
            for _ in 0..MAX_SETTLE_PASSES {
                let Datapath { net, workers } = self;
                for w in workers.iter_mut() {
                    napi::settle(net, w);
                }
                if self.in_flight() == 0 {
                    break;
                }
            }
        }
        let Datapath { net, workers } = self;
        workers.iter_mut().flat_map(|w| napi::drain(net, w)).collect()
    }
}
