//! A datapath as the control plane holds it: the shared [`Net`] and its [`Worker`]s, built by
//! `config` (or a test), run by [`Datapath::run_until`] (one thread per worker), and summed for
//! reports and the conservation law. Stages never see this type: they take `&Net` and
//! `&mut Worker`.

use crate::buf::Pool;
use crate::napi::{self, RunLimit, StopReason};
pub use crate::net::{Net, Pipeline};
use crate::port::Port;
use crate::rx::route::Iface;
use crate::stats::Counters;
use crate::tunables::Tunables;
pub use crate::worker::Worker;
use std::time::Duration;

pub struct Datapath {
    pub net: Net,
    pub workers: Vec<Worker>,
}

impl Datapath {
    /// A datapath with one worker.
    pub fn new(tun: Tunables, pipeline: Pipeline, pool: &Pool) -> Datapath {
        Datapath { net: Net::new(tun, pipeline), workers: vec![Worker::new(0, pool)] }
    }

    /// Adds a port with its interface, owned (polled) by worker 0; returns its index.
    pub fn add_port(&mut self, port: Box<dyn Port>, iface: Iface) -> u16 {
        let i = self.net.ifaces.len() as u16;
        self.net.ifaces.push(iface);
        self.net.peer.push(None);
        let mut port = Some(port);
        for w in &mut self.workers {
            w.add_port(i, if w.id == 0 { port.take() } else { None });
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
    }

    pub fn add_neigh_v6(&mut self, port: u16, addr: [u8; 16], mac: [u8; 6]) {
        for w in &mut self.workers {
            w.neigh.v6.insert((port, addr), mac);
        }
    }

    /// Every worker's counters, summed.
    pub fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for w in &self.workers {
            c.merge(&w.c);
        }
        c
    }

    /// Packets held by any worker that have not met their fate yet.
    pub fn in_flight(&self) -> u64 {
        self.workers.iter().map(Worker::in_flight).sum()
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

    /// Every port, wherever it is owned, in port order.
    pub fn ports(&self) -> impl Iterator<Item = &dyn Port> + '_ {
        (0..self.net.nports()).filter_map(move |i| self.workers.iter().find_map(|w| w.ports.get(i).and_then(|p| p.as_deref())))
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
        napi::run_until(net, &mut workers[0], limit, tick_every, |_, w, el| tick(&w.c, el))
    }

    /// Sets every worker's counters back to zero (after a warm-up: everything was flushed,
    /// so the ledger still balances).
    pub fn reset_counters(&mut self) {
        for w in &mut self.workers {
            w.c = Counters::default();
        }
    }

    /// One softirq round on every worker in turn, on this thread (tests step with it).
    pub fn round(&mut self) -> usize {
        let Datapath { net, workers } = self;
        workers.iter_mut().map(|w| napi::softirq_round(net, w)).sum()
    }

    /// Flushes everything every worker holds (see [`napi::drain`]).
    pub fn drain(&mut self) -> Vec<(String, std::io::Error)> {
        let Datapath { net, workers } = self;
        workers.iter_mut().flat_map(|w| napi::drain(net, w)).collect()
    }
}
