//! NAPI-style polling: each rx port is a NAPI instance polled with a weight
//! (`net.core.dev_weight`); a softirq round (net_rx_action) ends when `netdev_budget`
//! packets or `netdev_budget_usecs` have been spent. `poll_end` is the hook at the end of
//! every poll: XDP redirect flush and transmit flush hang there; GRO's flush and list
//! delivery run just before it (`gro::poll_done`).

use crate::buf::skb::Skb;
use crate::net::{Net, Pipeline};
use crate::stats::{DropReason, Stage};
use crate::worker::Worker;
use std::time::{Duration, Instant};

/// One softirq round over every port (net_rx_action). Returns packets processed. Each poll
/// gets its full weight (`dev_weight`) whatever is left of `netdev_budget`, as
/// `__napi_poll` passes `n->weight`: the budget is checked after each poll and may go below
/// zero; the round ends (a time squeeze) once it has, or once `netdev_budget_usecs` passed.
pub fn softirq_round(net: &Net, w: &mut Worker) -> usize {
    let mut budget = net.tun.netdev_budget as i64;
    w.tick_tsc();
    if net.neigh_log.published() != w.neigh_seen {
        net.neigh_log.sync_into(w.id, &mut w.neigh_seen, &mut w.neigh);
    }
    if crate::rx::neigh_timers(net, w) {
        poll_end(net, w);
    }
    // The time limit on the TSC: a read costs less than the monotonic clock's.
    let deadline = w.tsc_deadline(net.tun.netdev_budget_usecs as u64);
    let weight = net.tun.dev_weight as usize;
    let mut done = 0;
    // The NAPI instances in poll order: the backlog RPS fills (process_backlog) when several
    // workers run, then the ports. A round starts at the instance after the one the
    // previous round stopped at: net_rx_action puts the instances it did
    // not reach first in the next round and one that used its whole weight behind them, so
    // while the first instances keep the budget busy (a backlog other workers keep full, a
    // busy port) the later ones still get their turns.
    let backlog = net.rps.workers() > 1;
    let ninst = net.nports() as u16 + backlog as u16;
    let first = w.next_napi % ninst.max(1);
    for inst in (first..ninst).chain(0..first) {
        let work = if backlog && inst == 0 {
            poll_backlog(net, w)
        } else {
            // (A packet-count limit on the run is the only other bound on a poll.)
            let weight = weight.min(w.rx_quota.min(usize::MAX as u64) as usize);
            if weight == 0 {
                continue;
            }
            let work = napi_poll(net, w, inst - backlog as u16, weight);
            if work >= weight {
                w.c.napi_budget_exhausted += 1;
            }
            work
        };
        done += work;
        budget -= work as i64;
        // The budget may go below zero (each poll gets its full weight); net_rx_action
        // checks it, and the time, after every poll.
        if budget <= 0 || (work > 0 && crate::stats::tsc::reached(deadline)) {
            w.c.time_squeeze += 1;
            w.next_napi = inst + 1;
            break;
        }
    }
    finish_round(net, w, done)
}

/// One poll of this worker's backlog (process_backlog): up to the kernel's dev_rx_weight
/// (`dev_weight` × `dev_weight_rx_bias`) packets other workers steered here, then the poll's
/// end and the room given back to the senders.
fn poll_backlog(net: &Net, w: &mut Worker) -> usize {
    let work = crate::rps::process_backlog(net, w, net.tun.dev_rx_weight() as usize);
    if work > 0 {
        poll_end(net, w);
        crate::rps::publish_processed(net, w);
    }
    work
}

/// The end of a softirq round: the RPS wake-ups it collected (net_rps_action), then the
/// transmit softirq's work.
fn finish_round(net: &Net, w: &mut Worker, done: usize) -> usize {
    if w.wake_pending != 0 {
        crate::rps::send_wakeups(net, w);
    }
    crate::tx::tx_action(net, w);
    done
}

/// Polls one port's rx queue for up to `weight` packets and runs them through the pipeline.
pub fn napi_poll(net: &Net, w: &mut Worker, port: u16, weight: usize) -> usize {
    w.clock.next_poll(net.tun.clock_sample);
    let t0 = w.clock();
    let mut rx = std::mem::take(&mut w.rx_scratch);
    rx.clear();
    let (n, too_long) = match w.ports.get_mut(port as usize).and_then(Option::as_mut) {
        Some(dev) => (dev.rx_burst(&mut w.bufs, &mut rx, weight), dev.take_rx_dropped()),
        None => (0, 0),
    };
    if too_long > 0 {
        // Frames the port saw but could not take entered and were dropped: counted, not lost.
        w.c.rx += too_long;
        w.c.drop_n(DropReason::RxLengthError, too_long);
    }
    w.rx_quota = w.rx_quota.saturating_sub(n as u64 + too_long);
    if n == 0 {
        w.rx_scratch = rx;
        // An empty poll completes (napi_complete_done): GRO delivers what it holds.
        if crate::gro::poll_done(net, w, port, crate::gro::PollEnd::Empty) > 0 {
            poll_end(net, w);
        }
        return too_long as usize;
    }
    w.c.napi_polls += 1;
    w.c.rx += n as u64;
    w.c.rx_bytes += rx.iter().map(|p| p.total_len() as u64).sum::<u64>();
    w.stage_done(Stage::PortRx, n, t0);

    match net.pipeline {
        Pipeline::Io | Pipeline::Macswap => forward_untouched(net, w, port, &rx),
        Pipeline::L3fwd | Pipeline::Local => {
            crate::xdp::run_native(net, w, port, &mut rx);
            let mut skbs = std::mem::take(&mut w.skb_scratch);
            build_meta(net, w, port, &rx, &mut skbs);
            crate::xdp::run_generic(net, w, &mut skbs);
            if crate::gro::enabled(net, w, port) {
                crate::gro::receive_burst(net, w, port, &mut skbs);
                let end = if n == weight { crate::gro::PollEnd::BudgetUsed } else { crate::gro::PollEnd::Work };
                crate::gro::poll_done(net, w, port, end);
            }
            crate::rps::steer(net, w, &mut skbs);
            if skbs.is_empty() {
                // Everything was consumed by XDP.
            } else if net.tun.listified != 0 {
                crate::rx::receive_list(net, w, &mut skbs);
            } else {
                crate::rx::receive_single(net, w, &skbs);
            }
            skbs.clear();
            w.skb_scratch = skbs;
        }
    }
    w.rx_scratch = rx;
    poll_end(net, w);
    n + too_long as usize
}

/// Builds packet metadata for a burst: its own stage, so its cost shows.
fn build_meta(net: &Net, w: &mut Worker, port: u16, rx: &[crate::buf::Pkt], skbs: &mut Vec<Skb>) {
    let t0 = w.clock();
    let mac = crate::buf::skb::mac_number(&net.ifaces.get(port as usize).map(|i| i.mac).unwrap_or([0; 6]));
    skbs.clear();
    let queue = w.id as u16; // queue q of a port belongs to worker q
    skbs.extend(rx.iter().map(|&p| Skb::build_for(p, w.bufs.data(p), port, queue, mac)));
    if w.port_queue(port).is_some_and(|p| p.rx_csum_verified()) {
        skbs.iter_mut().for_each(|s| s.ip_summed = crate::buf::skb::Csum::Unnecessary);
    }
    w.stage_done(Stage::Meta, rx.len(), t0);
}

/// `io` and `macswap`: straight to the peer port, no metadata.
fn forward_untouched(net: &Net, w: &mut Worker, port: u16, rx: &[crate::buf::Pkt]) {
    let t0 = w.clock();
    let Some(peer) = net.peer.get(port as usize).copied().flatten() else {
        for p in rx {
            w.drop_pkt(*p, DropReason::NoTxPort);
        }
        return;
    };
    if net.pipeline == Pipeline::Macswap {
        for p in rx {
            let d = w.bufs.data_mut(*p);
            if d.len() >= 12 {
                let mut dst = [0u8; 6];
                dst.copy_from_slice(&d[0..6]);
                d.copy_within(6..12, 0);
                d[6..12].copy_from_slice(&dst);
            }
        }
    }
    let q = &mut w.txq[peer as usize];
    q.pkts.extend_from_slice(rx);
    w.stage_done(Stage::Tx, rx.len(), t0);
}

/// End of a poll: flush XDP redirect queues, then every transmit queue (doorbell).
pub fn poll_end(net: &Net, w: &mut Worker) {
    crate::xdp::flush_redirects(w);
    crate::tx::flush_all(net, w);
    crate::tx::reap_completions(w);
}

/// True when every port of this worker has finished receiving.
pub fn all_rx_done(w: &Worker) -> bool {
    w.owned_ports().all(|p| p.rx_done())
}

/// True when the datapath has bounded inputs (captures, counted generators) and every one of
/// them is done: what ends a run that has no time limit.
pub fn bounded_rx_done(w: &Worker) -> bool {
    w.owned_ports().any(|p| p.rx_bounded()) && w.owned_ports().filter(|p| p.rx_bounded()).all(|p| p.rx_done())
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The time limit passed.
    Time,
    /// The packet count was reached.
    Packets,
    /// Every bounded input was read (or every port is done).
    InputDone,
    /// The stop flag was raised (a signal, or the output went away).
    Stopped,
}

/// Runs rounds until every port is done or `limit` says stop; then flushes. `tick` is called
/// about every `tick_every` with the datapath (for per-second lines).
///
/// Stops only at a poll boundary, then drains: every queue and capture is flushed and the
/// ledger balances whatever ended the run.
pub fn run(net: &Net, w: &mut Worker, limit: RunLimit, tick_every: Duration, tick: impl FnMut(&Net, &mut Worker, Duration)) -> Duration {
    run_until(net, w, &limit, tick_every, tick).0
}

/// [`run`], also saying why the run ended and which ports failed to finish their output.
pub fn run_until(
    net: &Net,
    w: &mut Worker,
    limit: &RunLimit,
    tick_every: Duration,
    mut tick: impl FnMut(&Net, &mut Worker, Duration),
) -> (Duration, StopReason, Vec<(String, std::io::Error)>) {
    let start = Instant::now();
    let mut next_tick = tick_every;
    let mut idle_rounds = 0u32;
    let others = net.rps.workers() - 1;
    if others == 0 {
        w.rx_quota = limit.packets.unwrap_or(u64::MAX);
    }
    // Other workers may steer to this one's backlog: they wake this thread when it idles.
    let backlog = if others > 0 { net.rps.backlogs.get(w.id) } else { None };
    if let Some(b) = backlog {
        b.register();
    }
    // With several workers the caller has given each its share of the packet count, and the
    // run's input ends when every worker's has.
    let others_done = || net.rps.rx_finished.load(std::sync::atomic::Ordering::Acquire) >= others;
    let stopped = || limit.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
    let why = loop {
        let mut did = 0;
        // Check the clock every few rounds only: Instant::now costs ~20 ns.
        for _ in 0..16 {
            did += softirq_round(net, w);
            if net.pipeline == Pipeline::Local {
                w.sockets.drain_all(&mut w.bufs);
            }
        }
        let el = start.elapsed();
        if el >= next_tick {
            tick(net, w, el);
            next_tick += tick_every;
        }
        if stopped() {
            break StopReason::Stopped;
        }
        if limit.packets.is_some() && w.rx_quota == 0 && others_done() {
            break StopReason::Packets;
        }
        if limit.duration.is_some_and(|d| el >= d) {
            break StopReason::Time;
        }
        // Bounded inputs end the run even while unbounded ones (a generator) still send.
        if limit.until_bounded_inputs_done && bounded_rx_done(w) && others_done() {
            break StopReason::InputDone;
        }
        if did == 0 {
            idle_rounds += 1;
            if all_rx_done(w) && idle_rounds > 2 && others_done() {
                break StopReason::InputDone;
            }
            // Idle only once producers know to wake it (and nothing came in meanwhile).
            if backlog.is_some_and(|b| b.idle(|| work_pending(net, w))) {
                continue;
            }
            idle_wait(net, w);
        } else {
            idle_rounds = 0;
        }
    };
    if others > 0 {
        // What GRO holds may be steered to another worker: deliver it while they serve.
        crate::gro::flush_all(net, w);
        wait_for_other_workers(net, w);
    }
    let failed = drain(net, w);
    (start.elapsed(), why, failed)
}

/// Worker 0 at the end of a run with several workers: tells the others to finish their
/// backlogs and stop, and keeps transmitting what they hand over until they have.
fn wait_for_other_workers(net: &Net, w: &mut Worker) {
    use std::sync::atomic::Ordering;
    // SeqCst: against a worker declaring its poll() sleep (store, fence, load of this flag),
    // so either it sees the stop or this sees it polling and writes its eventfd.
    net.rps.stop.store(true, Ordering::SeqCst);
    for b in &net.rps.backlogs {
        b.wake();
    }
    let others = net.rps.workers() - 1;
    loop {
        // Read before the backlog: once every other worker has finished, nothing more comes.
        let all_finished = net.rps.finished.load(Ordering::Acquire) >= others;
        let work = crate::rps::process_backlog(net, w, net.tun.dev_rx_weight() as usize);
        poll_end(net, w);
        crate::rps::publish_processed(net, w);
        if all_finished && work == 0 {
            break;
        }
        if work == 0 {
            std::thread::yield_now();
        }
    }
}

/// True when a worker other than 0 has received all it will for this run: its share of the
/// packet count, its bounded inputs (when those end the run), or everything its queues had.
/// A worker that owns no receive queue (an RPS target) has nothing to wait for.
fn rx_finished(w: &Worker, limit: &RunLimit) -> bool {
    if limit.packets.is_some() {
        return w.rx_quota == 0 || all_rx_done(w);
    }
    if limit.until_bounded_inputs_done {
        // Unbounded inputs (a generator) do not hold the run; bounded ones must be read.
        return bounded_rx_done(w) || !w.owned_ports().any(|p| p.rx_bounded());
    }
    all_rx_done(w)
}

/// A worker other than 0: polls the receive queues it owns (RSS) and serves its backlog
/// (RPS) until worker 0 says stop and the backlog is empty. A worker with nothing left to
/// receive sleeps when idle until a producer wakes it. Publishes its counters for the
/// per-second lines, and says when its input is done (worker 0 ends the run only when
/// every worker's is). Then flushes (output for ports it does not own goes to their owners).
pub fn run_worker(net: &Net, w: &mut Worker, limit: &RunLimit) {
    use std::sync::atomic::Ordering;
    let Some(backlog) = net.rps.backlogs.get(w.id) else { return };
    backlog.register();
    let publish = |w: &Worker| {
        if let Some(s) = net.rps.snapshots.get(w.id) {
            *s.lock().unwrap_or_else(|e| e.into_inner()) = w.c.clone();
        }
    };
    let mut rounds = 0u32;
    let mut input_done = false;
    let mut rx_stopped = false;
    let others = net.rps.workers() - 1;
    loop {
        if net.rps.stop.load(Ordering::Acquire) {
            // Stopping: no more receiving; serve the backlog until every worker has stopped
            // receiving (so nobody steers here any more) and it is empty.
            if !rx_stopped {
                // No more receiving: GRO delivers what it holds while the others still serve.
                crate::gro::flush_all(net, w);
                rx_stopped = true;
                net.rps.rx_stopped.fetch_add(1, Ordering::AcqRel);
            }
            let all_stopped = net.rps.rx_stopped.load(Ordering::Acquire) >= others;
            let work = crate::rps::process_backlog(net, w, net.tun.dev_rx_weight() as usize);
            poll_end(net, w);
            crate::rps::publish_processed(net, w);
            if all_stopped && work == 0 {
                break;
            }
            if work == 0 {
                std::thread::yield_now();
            }
            continue;
        }
        let did = softirq_round(net, w);
        if net.pipeline == Pipeline::Local {
            w.sockets.drain_all(&mut w.bufs);
        }
        rounds = rounds.wrapping_add(1);
        if rounds.is_multiple_of(256) {
            publish(w);
        }
        if !input_done && rx_finished(w, limit) {
            input_done = true;
            net.rps.rx_finished.fetch_add(1, Ordering::AcqRel);
        }
        if did > 0 || backlog.idle(|| work_pending(net, w)) {
            continue;
        }
        if !input_done {
            idle_wait(net, w);
        } else if net.tun.busy_poll == 0 || !busy_wait(net, w) {
            std::thread::park_timeout(Duration::from_millis(1));
        }
    }
    drain(net, w);
    publish(w);
    net.rps.finished.fetch_add(1, Ordering::Release);
}

/// Work other workers gave this one: steered packets in its backlog, or packets handed over
/// for a port it transmits on.
fn work_pending(net: &Net, w: &Worker) -> bool {
    w.backlog_pending() || crate::tx::handoff_pending(net, w)
}

/// Longest sleep of an idle worker waiting on its ports' descriptors: timers (neighbour
/// probes), the stop flag and other workers' backlogs are looked at this often.
const IDLE_POLL_MS: i32 = 1;

/// An idle worker whose receive queues are all real sockets sleeps in poll() until one has
/// frames (or `IDLE_POLL_MS`), after `net.core.busy_poll` microseconds of spinning; with any
/// in-memory port it only yields. With other workers it also watches its backlog's wake-up
/// eventfd, so packets steered to it end the sleep (the caller has marked the backlog idle,
/// so producers wake it).
fn idle_wait(net: &Net, w: &mut Worker) {
    const MAX_FDS: usize = 16;
    let mut fds = [libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 }; MAX_FDS];
    let mut n = 0;
    // More descriptors than slots: no sleep (a yield), as for a port that has none.
    for p in w.owned_ports() {
        match (p.rx_wait_fd(), fds.get_mut(n)) {
            (Some(fd), Some(slot)) => {
                slot.fd = fd;
                n += 1;
            }
            (None, _) if p.rx_done() => {}
            _ => return std::thread::yield_now(),
        }
    }
    let ports = n;
    let backlog = if net.rps.workers() > 1 { net.rps.backlogs.get(w.id) } else { None };
    if let Some(b) = backlog {
        match (b.wake_fd(), fds.get_mut(n)) {
            (Some(fd), Some(slot)) => {
                slot.fd = fd;
                n += 1;
            }
            _ => return std::thread::yield_now(),
        }
    }
    if n == 0 {
        return std::thread::yield_now();
    }
    let stopping = || net.rps.stop.load(std::sync::atomic::Ordering::Acquire);
    if backlog.is_some_and(|b| b.begin_poll_sleep(|| work_pending(net, w) || stopping())) {
        // Steered packets came in after the backlog went idle, before producers knew to
        // write the eventfd, or the run is stopping (its wake-up may have come before the
        // eventfd was watched): no sleep.
        if let Some(b) = backlog {
            b.end_poll_sleep();
        }
        return;
    }
    let mut ready = false;
    if net.tun.busy_poll > 0 {
        // Busy polling: look without sleeping for up to busy_poll microseconds first.
        let until = Instant::now() + Duration::from_micros(net.tun.busy_poll as u64);
        loop {
            if poll_fds(&mut fds[..n], 0) {
                w.c.busy_poll_hits += 1;
                ready = true;
                break;
            }
            if Instant::now() >= until {
                break;
            }
            std::hint::spin_loop();
        }
    }
    if !ready && poll_fds(&mut fds[..n], IDLE_POLL_MS) && fds[..ports].iter().any(|f| f.revents != 0) {
        w.c.idle_wakeups += 1;
    }
    if fds[..ports].iter().any(|f| f.revents & libc::POLLERR != 0) {
        // A socket error (a packet socket's ENETDOWN after a link flap) stays reported until
        // read: its port clears it, else each later poll() returns at once.
        let failed = &fds[..ports];
        for p in w.ports.iter_mut().flatten() {
            if p.rx_wait_fd().is_some_and(|fd| failed.iter().any(|f| f.fd == fd && f.revents & libc::POLLERR != 0)) {
                p.rx_wait_error();
            }
        }
    }
    if let Some(b) = backlog {
        b.end_poll_sleep();
        if fds[ports].revents != 0 {
            b.clear_wake();
        }
    }
}

/// poll() on `fds` for up to `timeout_ms`; true when one is ready (their `revents` say which).
fn poll_fds(fds: &mut [libc::pollfd], timeout_ms: i32) -> bool {
    // SAFETY: `fds` is a live, initialised slice of pollfd entries of the length passed.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) > 0 }
}

/// `net.core.busy_poll`: spins up to that many microseconds watching this worker's backlog
/// rings and the stop flag instead of sleeping; true when something arrived (then the
/// worker goes on without a wake-up).
fn busy_wait(net: &Net, w: &mut Worker) -> bool {
    let until = Instant::now() + Duration::from_micros(net.tun.busy_poll as u64);
    let backlog = &net.rps.backlogs[w.id];
    loop {
        if work_pending(net, w) {
            backlog.schedule();
            w.c.busy_poll_hits += 1;
            return true;
        }
        if net.rps.stop.load(std::sync::atomic::Ordering::Acquire) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::hint::spin_loop();
    }
}

/// Flushes everything still held (transmit queues, redirect queues) and returns socket
/// buffers: after it, nothing is in flight. Returns the ports whose output could not be
/// finished (a capture that could not be written), by name.
pub fn drain(net: &Net, w: &mut Worker) -> Vec<(String, std::io::Error)> {
    settle(net, w);
    finish_ports(net, w)
}

/// Delivers, sends or drops everything the worker holds: GRO, its backlog, neighbour
/// queues, qdiscs, socket queues. With several workers some of it may land in another
/// worker's backlog or handoff queue (see `Datapath::drain`).
pub fn settle(net: &Net, w: &mut Worker) {
    // GRO first: what it delivers may wait for a neighbour, and the neighbour queues are
    // emptied after it.
    crate::gro::flush_all(net, w);
    poll_end(net, w);
    if net.rps.workers() > 1 {
        // What GRO delivered just now, or other workers steered here, stands in this
        // worker's own backlog.
        while poll_backlog(net, w) > 0 {}
    }
    crate::rx::neigh::drain(net, w);
    crate::tx::drain_qdiscs(net, w);
    w.sockets.drain_all(&mut w.bufs);
}

/// The end of a worker's ports: what they still hold goes back, their output is finished
/// and what they wrote off leaves the sent count.
fn finish_ports(net: &Net, w: &mut Worker) -> Vec<(String, std::io::Error)> {
    let mut failed = Vec::new();
    for p in w.ports.iter_mut().flatten() {
        // Frames a port still holds (fault injection's delayed ones) go back to the pool.
        p.flush_held(&mut w.bufs);
        let finished = p.finish();
        // What the port wrote off at the end (never sent after all) leaves the sent count.
        let (unsent, unsent_bytes) = p.take_tx_failed();
        w.c.tx_failed(unsent, unsent_bytes);
        if let Err(e) = finished {
            failed.push((p.name().to_string(), e));
        }
    }
    // Wake-ups the flushes queued go now (net_rps_action), not in the next run's first round.
    if w.wake_pending != 0 {
        crate::rps::send_wakeups(net, w);
    }
    failed
}

#[derive(Debug, Clone, Default)]
pub struct RunLimit {
    pub duration: Option<Duration>,
    /// Stop after exactly this many received packets.
    pub packets: Option<u64>,
    /// End when every bounded input (capture, counted generator) is read, even if other
    /// ports would receive forever.
    pub until_bounded_inputs_done: bool,
    /// Raised by a signal handler (or a closed output): stop at the next poll boundary.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::Pool;
    use crate::port::pcap::PcapIn;
    use crate::port::sink::{CheckSpec, Sink, SinkKind};
    use crate::rx::route::Iface;
    use crate::tunables::Tunables;

    /// An io datapath: 100 frames waiting on port 0, peered to a null sink; one worker.
    fn io_with_100_frames(tun: Tunables) -> (Net, Worker) {
        let pool = Pool::new(256).unwrap();
        let mut net = Net::new(tun, Pipeline::Io);
        let mut w = Worker::new(0, &pool);
        let frames = vec![vec![0u8; 60]; 100];
        net.ifaces.push(Iface::new("in", [2, 0, 0, 0, 0, 1]));
        net.ifaces.push(Iface::new("out", [2, 0, 0, 0, 0, 2]));
        net.peer = vec![Some(1), None];
        w.add_port(0, Some(Box::new(PcapIn::from_frames("in", frames, 1))));
        w.add_port(1, Some(Box::new(Sink::new("out", SinkKind::Null, CheckSpec::default()))));
        (net, w)
    }

    /// An io datapath with two inputs of `frames` frames each (ports 0 and 1), both peered to
    /// a null sink (port 2); one worker.
    fn two_busy_inputs(tun: Tunables, frames: usize) -> (Net, Worker) {
        let pool = Pool::new(512).unwrap();
        let mut net = Net::new(tun, Pipeline::Io);
        let mut w = Worker::new(0, &pool);
        for (i, name) in ["a", "b"].iter().enumerate() {
            net.ifaces.push(Iface::new(name, [2, 0, 0, 0, 0, i as u8 + 1]));
            w.add_port(i as u16, Some(Box::new(PcapIn::from_frames(name, vec![vec![0u8; 60]; frames], 1))));
        }
        net.ifaces.push(Iface::new("out", [2, 0, 0, 0, 0, 9]));
        w.add_port(2, Some(Box::new(Sink::new("out", SinkKind::Null, CheckSpec::default()))));
        net.peer = vec![Some(2), Some(2), None];
        (net, w)
    }

    /// The budget bounds a round, not a poll (net_rx_action): a poll gets its whole weight
    /// (64) even with a budget of 10, and the round ends after it, a time squeeze, before
    /// the second port; the next round starts there.
    #[test]
    fn netdev_budget_bounds_one_softirq_round() {
        let (net, mut w) = two_busy_inputs(Tunables { netdev_budget: 10, dev_weight: 64, ..Tunables::default() }, 100);
        let rx = |w: &Worker, i: u16| w.port_queue(i).unwrap().stats().rx_packets;
        assert_eq!(softirq_round(&net, &mut w), 64);
        assert_eq!((rx(&w, 0), rx(&w, 1)), (64, 0), "the second port waits for the next round");
        assert_eq!(w.c.time_squeeze, 1, "a round cut by the budget is a time squeeze");
        assert_eq!(softirq_round(&net, &mut w), 64);
        assert_eq!((rx(&w, 0), rx(&w, 1)), (64, 64));
        assert_eq!(w.c.napi_budget_exhausted, 2);
    }

    /// A capture whose every receive call takes at least 20 µs (a slow driver).
    struct Slow(PcapIn);
    impl crate::port::Port for Slow {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn rx_burst(&mut self, bufs: &mut crate::buf::BufCache, out: &mut Vec<crate::buf::Pkt>, max: usize) -> usize {
            std::thread::sleep(Duration::from_micros(20));
            self.0.rx_burst(bufs, out, max)
        }
        fn tx_burst(&mut self, bufs: &mut crate::buf::BufCache, pkts: &[crate::buf::Pkt], more: bool) -> usize {
            self.0.tx_burst(bufs, pkts, more)
        }
        fn stats(&self) -> crate::port::PortStats {
            self.0.stats()
        }
    }

    /// `netdev_budget_usecs` bounds a round by time too (net_rx_action's time_limit): a poll
    /// that did work past it ends the round, a time squeeze, with budget left; the next
    /// round starts at the port it did not reach.
    #[test]
    fn netdev_budget_usecs_ends_a_round_that_ran_past_it() {
        let (net, mut w) = two_busy_inputs(Tunables { netdev_budget_usecs: 1, ..Tunables::default() }, 100);
        let slow = Slow(PcapIn::from_frames("a", vec![vec![0u8; 60]; 100], 1));
        w.add_port(0, Some(Box::new(slow)));
        let rx = |w: &Worker, i: u16| w.port_queue(i).unwrap().stats().rx_packets;
        let first = softirq_round(&net, &mut w);
        assert!(first > 0 && first < 300, "some of the budget of 300 left: {first}");
        assert_eq!((rx(&w, 0), rx(&w, 1)), (first as u64, 0), "the second port waits for the next round");
        assert_eq!(w.c.time_squeeze, 1);
        assert!(softirq_round(&net, &mut w) > 0);
        assert!(rx(&w, 1) > 0, "the next round starts there");
    }

    /// Two busy inputs and a budget one poll uses up: rounds take turns (net_rx_action
    /// polls first the instances the last round did not reach), so the second port is not
    /// starved by the first.
    #[test]
    fn a_round_starts_where_the_last_ran_out_of_budget() {
        let (net, mut w) = two_busy_inputs(Tunables { netdev_budget: 64, dev_weight: 64, ..Tunables::default() }, 200);
        let rx = |w: &Worker, i: u16| w.port_queue(i).unwrap().stats().rx_packets;
        for round in 1..=4u64 {
            assert_eq!(softirq_round(&net, &mut w), 64);
            let (a, b) = (rx(&w, 0), rx(&w, 1));
            assert_eq!((a, b), (64 * round.div_ceil(2), 64 * (round / 2)), "after round {round}");
        }
        assert_eq!(w.c.time_squeeze, 4);
    }

    /// Gives worker 0 (of two) a backlog holding `n` 60-byte frames worker 1 sent (no
    /// protocol the receive path knows: processed, then dropped), their room reserved as
    /// enqueue_to_backlog reserves it; rings of `cap`. Keep the returned sender ends alive.
    fn backlog_from_worker_1(net: &Net, w: &mut Worker, n: usize, cap: usize) -> Vec<Vec<Option<crate::rps::backlog::BacklogTx>>> {
        let (mut tx, mut rx) = crate::rps::backlog::backlog_rings(2, cap);
        w.backlog_rx = std::mem::take(&mut rx[0]);
        w.backlog_src = vec![0, 1];
        w.ring_queued = vec![0; 2];
        net.rps.backlog_len[0].0.fetch_add(n as i64, std::sync::atomic::Ordering::Relaxed);
        let ring = tx[1][0].as_mut().unwrap();
        for _ in 0..n {
            let p = w.bufs.alloc_copy(&[0u8; 60]).unwrap();
            ring.push(Skb { pkt: p, ..Skb::default() }).unwrap();
        }
        tx
    }

    /// The backlog is one more NAPI instance: when it uses the round's whole budget, the
    /// round ends there and counts a time squeeze (net_rx_action checks after every poll).
    #[test]
    fn a_backlog_that_uses_the_whole_budget_is_a_time_squeeze() {
        let pool = Pool::new(256).unwrap();
        // A time limit no preemption reaches: only the packet budget squeezes a round.
        let tun = Tunables { netdev_budget: 64, dev_weight: 64, netdev_budget_usecs: 10_000_000, ..Tunables::default() };
        let net = Net::with_workers(tun, Pipeline::L3fwd, 2);
        let mut w = Worker::new(0, &pool);
        let _senders = backlog_from_worker_1(&net, &mut w, 100, 256);
        assert_eq!(softirq_round(&net, &mut w), 64);
        assert_eq!(w.c.time_squeeze, 1);
        assert_eq!(softirq_round(&net, &mut w), 36);
        assert_eq!(w.c.time_squeeze, 1, "the rest fit in the budget");
    }

    /// A backlog other workers keep full does not starve the worker's own port: a round it
    /// squeezes ends there, and the next starts at the port (net_rx_action puts an instance
    /// that used its whole weight behind the ones it did not reach).
    #[test]
    fn a_full_backlog_and_a_busy_port_take_turns() {
        let pool = Pool::new(2048).unwrap();
        // A time limit no preemption reaches: only the packet budget ends a round.
        let tun = Tunables { netdev_budget: 64, dev_weight: 64, netdev_budget_usecs: 10_000_000, ..Tunables::default() };
        let mut net = Net::with_workers(tun, Pipeline::Io, 2);
        net.ifaces.push(Iface::new("in", [2, 0, 0, 0, 0, 1]));
        net.ifaces.push(Iface::new("out", [2, 0, 0, 0, 0, 2]));
        net.peer = vec![Some(1), None];
        let mut w = Worker::new(0, &pool);
        w.add_port(0, Some(Box::new(PcapIn::from_frames("in", vec![vec![0u8; 60]; 200], 1))));
        w.add_port(1, Some(Box::new(Sink::new("out", SinkKind::Null, CheckSpec::default()))));
        let _senders = backlog_from_worker_1(&net, &mut w, 1000, 1024);
        let rounds: Vec<usize> = (0..10).map(|_| softirq_round(&net, &mut w)).collect();
        // Backlog, port, backlog (after the idle sink), port, …; the port's last 8 frames
        // leave room in that round, and the backlog fills the rest of it.
        assert_eq!(rounds, [64, 64, 64, 64, 64, 64, 64, 72, 64, 64]);
        assert_eq!(w.c.time_squeeze, 10);
        assert_eq!(w.port_mut(0).unwrap().stats().rx_packets, 200, "the port had its turns");
        assert_eq!(w.c.tx, 200, "io forwards what the port received");
    }

    /// The backlog's quota is the kernel's dev_rx_weight (process_backlog), no sysctl of its
    /// own: net.core.dev_weight x net.core.dev_weight_rx_bias (proc_do_dev_weight).
    #[test]
    fn the_backlog_quota_is_dev_weight_times_the_rx_bias() {
        for (sets, quota) in [(&["net.core.dev_weight=16"][..], 16), (&["net.core.dev_weight=16", "net.core.dev_weight_rx_bias=2"][..], 32)]
        {
            let mut tun = Tunables::default();
            tun.apply_all(sets).unwrap_or_else(|e| panic!("{sets:?}: {e}"));
            let pool = Pool::new(256).unwrap();
            let net = Net::with_workers(tun, Pipeline::L3fwd, 2);
            let mut w = Worker::new(0, &pool);
            let _senders = backlog_from_worker_1(&net, &mut w, 100, 256);
            assert_eq!(softirq_round(&net, &mut w), quota, "{sets:?}");
            while softirq_round(&net, &mut w) > 0 {}
            assert_eq!(w.buffers_in_use(), 0);
        }
    }

    /// A worker does not go idle (sleep until woken) while packets handed over for a port
    /// it transmits on wait: the wake-up for them may already have been spent.
    #[test]
    fn handed_over_packets_keep_their_owner_awake() {
        let pool = Pool::new(64).unwrap();
        let mut net = Net::with_workers(Tunables::default(), Pipeline::L3fwd, 2);
        net.ifaces.push(Iface::new("out", [2, 0, 0, 0, 0, 2]));
        net.rps.tx_handoff.push(crossbeam_queue::ArrayQueue::new(8));
        let mut w = Worker::new(0, &pool);
        w.add_port(0, Some(Box::new(Sink::new("out", SinkKind::Null, CheckSpec::default()))));
        let b = &net.rps.backlogs[0];
        assert!(!b.idle(|| work_pending(&net, &w)), "nothing waiting: idle");
        let p = w.bufs.alloc_copy(&[0u8; 60]).unwrap();
        net.rps.tx_handoff[0].push(p).unwrap();
        assert!(b.idle(|| work_pending(&net, &w)), "a handed-over packet waits: stay awake");
        assert_eq!(softirq_round(&net, &mut w), 0, "nothing received");
        assert_eq!(w.c.tx, 1, "but the handed-over packet left");
        assert!(!b.idle(|| work_pending(&net, &w)));
    }

    /// A wake-up the end-of-run flushes queued (a packet steered or handed over while
    /// draining) is sent at the end of that run, not left for the next one's first round.
    #[test]
    fn the_end_of_a_run_sends_the_wake_ups_it_queued() {
        let pool = crate::buf::Pool::new(64).unwrap();
        let net = Net::with_workers(Tunables::default(), Pipeline::L3fwd, 2);
        let mut w = Worker::new(0, &pool);
        w.wake_pending = 1 << 1;
        drain(&net, &mut w);
        assert_eq!((w.wake_pending, w.c.rps_wakeups), (0, 1));
    }

    /// `io` forwards frames untouched; `macswap` swaps their MAC addresses (testpmd's
    /// macswap forwarding mode) and nothing else; a frame shorter than two addresses passes as is.
    #[test]
    fn macswap_swaps_the_addresses_and_io_leaves_frames_untouched() {
        let mut frame: Vec<u8> = (1..=60).collect();
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        let mut swapped = frame.clone();
        swapped[..6].copy_from_slice(&frame[6..12]);
        swapped[6..12].copy_from_slice(&frame[..6]);
        let runt: Vec<u8> = (1..=11).collect();
        for (pipeline, want) in [(Pipeline::Io, &frame), (Pipeline::Macswap, &swapped)] {
            let (mut net, mut w) = io_with_100_frames(Tunables::default());
            net.pipeline = pipeline;
            w.add_port(0, Some(Box::new(PcapIn::from_frames("in", vec![frame.clone(), runt.clone()], 1))));
            w.add_port(1, Some(Box::new(Sink::new("out", SinkKind::Capture, CheckSpec::default()))));
            assert_eq!(softirq_round(&net, &mut w), 2);
            let out = w.port_queue(1).unwrap().captured().unwrap();
            assert_eq!(out, [want.clone(), runt.clone()], "{pipeline:?}");
        }
    }

    /// A frame longer than a buffer chain holds (the driver's rx_length_errors) enters and is
    /// dropped by name in the poll that met it, counted against the poll's quota; the
    /// frames around it pass.
    #[test]
    fn a_frame_too_long_for_a_chain_is_received_and_dropped_as_a_length_error() {
        let (mut net, mut w) = io_with_100_frames(Tunables::default());
        let frames = vec![vec![0u8; 60], vec![0u8; crate::buf::chain::MAX_CHAIN_BYTES + 1], vec![0u8; 60]];
        w.add_port(0, Some(Box::new(PcapIn::from_frames("in", frames, 1))));
        net.peer = vec![Some(1), None];
        assert_eq!(softirq_round(&net, &mut w), 3, "the dropped frame counts in the poll");
        assert_eq!((w.c.rx, w.c.tx), (3, 2));
        assert_eq!(w.c.dropped(DropReason::RxLengthError), 1);
        assert!(w.c.conservation(w.in_flight()).is_ok());
        // An input with only such frames: the poll returns them though it took no packet.
        let (net, mut w) = io_with_100_frames(Tunables::default());
        w.add_port(0, Some(Box::new(PcapIn::from_frames("in", vec![vec![0u8; crate::buf::chain::MAX_CHAIN_BYTES + 1]; 2], 1))));
        assert_eq!(napi_poll(&net, &mut w, 0, 64), 2);
        assert_eq!((w.c.rx, w.c.dropped(DropReason::RxLengthError)), (2, 2));
    }

    #[test]
    fn dev_weight_bounds_one_poll() {
        // A time limit no preemption reaches (the test counts squeezes).
        let tun = Tunables { netdev_budget: 300, dev_weight: 16, netdev_budget_usecs: 10_000_000, ..Tunables::default() };
        let (net, mut w) = io_with_100_frames(tun);
        assert_eq!(softirq_round(&net, &mut w), 16);
        assert_eq!(w.c.napi_budget_exhausted, 1);
        assert_eq!(w.c.time_squeeze, 0);
    }

    #[test]
    fn a_packet_count_stops_exactly_and_drains() {
        let (net, mut w) = io_with_100_frames(Tunables::default());
        let limit = RunLimit { packets: Some(37), ..Default::default() };
        let (_, why, failed) = run_until(&net, &mut w, &limit, Duration::from_secs(1), |_, _, _| {});
        assert_eq!((w.c.rx, w.c.tx, why), (37, 37, StopReason::Packets));
        assert!(failed.is_empty());
        assert_eq!(w.buffers_in_use(), 0);
    }

    /// A port that never has frames to give but sleeps on `fd` (as a packet socket's).
    struct Waits(std::os::fd::RawFd);
    impl crate::port::Port for Waits {
        fn name(&self) -> &str {
            "waits"
        }
        fn rx_burst(&mut self, _: &mut crate::buf::BufCache, _: &mut Vec<crate::buf::Pkt>, _: usize) -> usize {
            0
        }
        fn tx_burst(&mut self, _: &mut crate::buf::BufCache, _: &[crate::buf::Pkt], _: bool) -> usize {
            0
        }
        fn stats(&self) -> crate::port::PortStats {
            crate::port::PortStats::default()
        }
        fn rx_wait_fd(&self) -> Option<std::os::fd::RawFd> {
            Some(self.0)
        }
    }

    /// An idle worker sleeps in poll() on its ports' descriptors: one that became readable
    /// is a wake-up (`idle_wakeups`); with `net.core.busy_poll` the spin sees it first
    /// (`busy_poll_hits`) and no sleep happens; a descriptor with nothing to read wakes no one.
    #[test]
    fn an_idle_worker_counts_what_woke_it() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let pool = Pool::new(8).unwrap();
        for (busy_poll, readable, hits, wakeups) in [(0, true, 0, 1), (50, true, 1, 0), (0, false, 0, 0)] {
            let (mut tx, rx) = std::os::unix::net::UnixStream::pair().unwrap();
            if readable {
                tx.write_all(b"x").unwrap();
            }
            let net = Net::new(Tunables { busy_poll, ..Tunables::default() }, Pipeline::Io);
            let mut w = Worker::new(0, &pool);
            w.add_port(0, Some(Box::new(Waits(rx.as_raw_fd()))));
            idle_wait(&net, &mut w);
            assert_eq!((w.c.busy_poll_hits, w.c.idle_wakeups), (hits, wakeups), "busy_poll {busy_poll}, readable {readable}");
        }
    }

    /// `until_bounded_inputs_done`: once the capture is read the run ends, while the
    /// unbounded generator beside it would send for ever (the time limit is only a guard).
    #[test]
    fn a_read_capture_ends_the_run_though_a_generator_still_sends() {
        // One frame per poll: the capture takes many more rounds than the first check.
        let (mut net, mut w) = io_with_100_frames(Tunables { dev_weight: 1, ..Tunables::default() });
        net.ifaces.push(Iface::new("gen", [2, 0, 0, 0, 0, 3]));
        net.peer.push(Some(1));
        let gen = crate::port::gen::Generator::new("gen", crate::port::gen::GenConfig::default()).unwrap();
        w.add_port(2, Some(Box::new(gen)));
        let limit = RunLimit { duration: Some(Duration::from_secs(5)), until_bounded_inputs_done: true, ..Default::default() };
        let (_, why, failed) = run_until(&net, &mut w, &limit, Duration::from_secs(1), |_, _, _| {});
        assert_eq!(why, StopReason::InputDone);
        assert!(failed.is_empty());
        assert_eq!(w.port_mut(0).unwrap().stats().rx_packets, 100, "the whole capture");
        assert!(w.c.rx > 100, "and the generator's packets");
        assert!(w.c.conservation(w.in_flight()).is_ok());
        assert_eq!(w.buffers_in_use(), 0);
    }

    #[test]
    fn a_raised_stop_flag_ends_the_run_with_everything_flushed() {
        let (net, mut w) = io_with_100_frames(Tunables { dev_weight: 1, netdev_budget: 1, ..Tunables::default() });
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let limit = RunLimit { stop: Some(stop), ..Default::default() };
        let (_, why, _) = run_until(&net, &mut w, &limit, Duration::from_secs(1), |_, _, _| {});
        assert_eq!(why, StopReason::Stopped);
        assert!(w.c.rx < 100, "stopped early");
        assert!(w.c.conservation(w.in_flight()).is_ok());
        assert_eq!(w.c.tx, w.c.rx);
    }
}
