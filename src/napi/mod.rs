//! NAPI-style polling: each rx port is a NAPI instance polled with a weight
//! (`net.core.dev_weight`); a softirq round (net_rx_action) ends when `netdev_budget`
//! packets or `netdev_budget_usecs` have been spent. `poll_end` is the hook at the end of
//! every poll: XDP redirect flush and transmit flush hang there (GRO flush and list
//! delivery will too).

use crate::buf::skb::Skb;
use crate::datapath::{Datapath, Pipeline};
use crate::stats::{DropReason, Stage};
use std::time::{Duration, Instant};

/// One softirq round over every port. Returns packets processed.
pub fn softirq_round(dp: &mut Datapath) -> usize {
    let mut budget = dp.tun.netdev_budget as usize;
    let now = Instant::now();
    dp.tick(now);
    let deadline = now + Duration::from_micros(dp.tun.netdev_budget_usecs as u64);
    let mut done = 0;
    for port in 0..dp.ports.len() as u16 {
        let weight = (dp.tun.dev_weight as usize).min(budget);
        let work = napi_poll(dp, port, weight);
        done += work;
        budget -= work;
        if work == weight {
            dp.c.napi_budget_exhausted += 1;
        }
        if budget == 0 || (work > 0 && Instant::now() >= deadline) {
            dp.c.time_squeeze += 1;
            break;
        }
    }
    done
}

/// Polls one port's rx queue for up to `weight` packets and runs them through the pipeline.
pub fn napi_poll(dp: &mut Datapath, port: u16, weight: usize) -> usize {
    dp.clock.next_poll(dp.tun.clock_sample);
    let t0 = dp.clock();
    let mut rx = std::mem::take(&mut dp.rx_scratch);
    rx.clear();
    let n = match dp.ports.get_mut(port as usize) {
        Some(dev) => dev.rx_burst(&mut dp.bufs, &mut rx, weight),
        None => 0,
    };
    if n == 0 {
        dp.rx_scratch = rx;
        return 0;
    }
    dp.c.napi_polls += 1;
    dp.c.rx += n as u64;
    dp.c.rx_bytes += rx.iter().map(|p| p.len as u64).sum::<u64>();
    dp.stage_done(Stage::PortRx, n, t0);

    match dp.pipeline {
        Pipeline::Io | Pipeline::Macswap => forward_untouched(dp, port, &rx),
        Pipeline::L3fwd | Pipeline::Local => {
            crate::xdp::run_native(dp, port, &mut rx);
            let mut skbs = std::mem::take(&mut dp.skb_scratch);
            build_meta(dp, port, &rx, &mut skbs);
            crate::xdp::run_generic(dp, &mut skbs);
            if skbs.is_empty() {
                // Everything was consumed by XDP.
            } else if dp.tun.listified != 0 {
                crate::rx::receive_list(dp, &mut skbs);
            } else {
                crate::rx::receive_single(dp, &skbs);
            }
            skbs.clear();
            dp.skb_scratch = skbs;
        }
    }
    dp.rx_scratch = rx;
    poll_end(dp);
    n
}

/// Builds packet metadata for a burst: its own stage, so its cost shows.
fn build_meta(dp: &mut Datapath, port: u16, rx: &[crate::buf::Pkt], skbs: &mut Vec<Skb>) {
    let t0 = dp.clock();
    let mac = dp.ifaces.get(port as usize).map(|i| i.mac).unwrap_or([0; 6]);
    skbs.clear();
    skbs.extend(rx.iter().map(|&p| Skb::build(p, dp.bufs.data(p), port, 0, &mac)));
    dp.stage_done(Stage::Meta, rx.len(), t0);
}

/// `io` and `macswap`: straight to the peer port, no metadata.
fn forward_untouched(dp: &mut Datapath, port: u16, rx: &[crate::buf::Pkt]) {
    let t0 = dp.clock();
    let Some(peer) = dp.peer.get(port as usize).copied().flatten() else {
        for p in rx {
            dp.drop_pkt(*p, DropReason::NoTxPort);
        }
        return;
    };
    if dp.pipeline == Pipeline::Macswap {
        for p in rx {
            let d = dp.bufs.data_mut(*p);
            if d.len() >= 12 {
                let mut dst = [0u8; 6];
                dst.copy_from_slice(&d[0..6]);
                d.copy_within(6..12, 0);
                d[6..12].copy_from_slice(&dst);
            }
        }
    }
    let q = &mut dp.txq[peer as usize];
    q.pkts.extend_from_slice(rx);
    dp.stage_done(Stage::Tx, rx.len(), t0);
}

/// End of a poll: flush XDP redirect queues, then every transmit queue (doorbell).
pub fn poll_end(dp: &mut Datapath) {
    crate::xdp::flush_redirects(dp);
    crate::tx::flush_all(dp);
    crate::tx::reap_completions(dp);
}

/// True when every port has finished receiving.
pub fn all_rx_done(dp: &Datapath) -> bool {
    dp.ports.iter().all(|p| p.rx_done())
}

/// Runs rounds until every port is done or `limit` says stop; then flushes. `tick` is called
/// about every `tick_every` with the datapath (for per-second lines).
pub fn run(dp: &mut Datapath, limit: RunLimit, tick_every: Duration, mut tick: impl FnMut(&mut Datapath, Duration)) -> Duration {
    let start = Instant::now();
    let mut next_tick = tick_every;
    let mut idle_rounds = 0u32;
    loop {
        let mut did = 0;
        // Check the clock every few rounds only: Instant::now costs ~20 ns.
        for _ in 0..16 {
            did += softirq_round(dp);
            if dp.pipeline == Pipeline::Local {
                dp.sockets.drain_all(&mut dp.bufs);
            }
        }
        let el = start.elapsed();
        if el >= next_tick {
            tick(dp, el);
            next_tick += tick_every;
        }
        if let Some(max) = limit.packets {
            if dp.c.rx >= max {
                break;
            }
        }
        if let Some(d) = limit.duration {
            if el >= d {
                break;
            }
        }
        if did == 0 {
            idle_rounds += 1;
            if all_rx_done(dp) && idle_rounds > 2 {
                break;
            }
            std::thread::yield_now();
        } else {
            idle_rounds = 0;
        }
    }
    drain(dp);
    start.elapsed()
}

/// Flushes everything still held (transmit queues, redirect queues) and returns socket
/// buffers: after it, nothing is in flight.
pub fn drain(dp: &mut Datapath) {
    poll_end(dp);
    dp.sockets.drain_all(&mut dp.bufs);
    for p in dp.ports.iter_mut() {
        // Frames a port still holds (fault injection's delayed ones) go back to the pool.
        p.flush_held(&mut dp.bufs);
        let _ = p.finish();
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct RunLimit {
    pub duration: Option<Duration>,
    pub packets: Option<u64>,
}
