//! Generic receive offload (the kernel's `dev_gro_receive` / `inet_gro_receive` /
//! `tcp_gro_receive`) and the GRO_NORMAL list (`gro_normal_one` / `gro_normal_list`).
//!
//! Each worker keeps one [`GroTable`] per receive port it polls (a NAPI instance). TCP
//! segments of one flow that arrive in order are merged into one packet: the first
//! segment's frame stays the head (headers and its payload), every later segment's frame
//! becomes a fragment of the chain whose bounds cover only its payload, so a merge copies
//! nothing and allocates nothing. Packets GRO does not merge (NORMAL) and completed merged
//! packets go on the table's normal list, delivered to the receive path (RPS, then the
//! listified or single receive) when it holds `net.core.gro_normal_batch` segments and at
//! the end of each poll.
//!
//! Ledger: a segment merged into another packet is counted once in `GroStats::merged` (it
//! ended inside the packet that carries its payload), so `rx = tx + local + drops + merged`;
//! a held packet counts one packet in flight. See README.md.

pub mod table;

pub use table::*;

use crate::buf::skb::Skb;
use crate::net::Net;
use crate::worker::Worker;

// ---- the NAPI side: per-port tables on the worker, list delivery ----

/// True when GRO runs on receive from `port` (not `netif_elide_gro`): the `gro` tunable is on
/// (`ethtool -K gro on` for every port) and no generic XDP program is attached to the port
/// (`dev->xdp_prog`, set by `generic_xdp_install`; a native program is the driver's own and
/// leaves GRO on).
#[inline]
pub fn enabled(net: &Net, w: &Worker, port: u16) -> bool {
    net.tun.gro != 0 && !w.xdp.generic_on(port)
}

fn config(net: &Net) -> GroConfig {
    GroConfig { max_size: net.tun.gro_max_size, udp_fraglist: net.tun.rx_gro_list != 0 }
}

/// The table of rx port `port` on this worker (made on first use).
fn table(w: &mut Worker, port: u16) -> GroTable {
    let i = port as usize;
    if w.gro.len() <= i {
        w.gro.resize_with(i + 1, GroTable::default);
    }
    std::mem::take(&mut w.gro[i])
}

/// `napi_gro_receive` for a poll's burst: every packet through GRO; the normal list goes to
/// the receive path each time it holds `gro_normal_batch` segments.
/// The stage clock counts GRO's own time: the receive path a full list is handed to mid-burst
/// has its own clocks.
pub fn receive_burst(net: &Net, w: &mut Worker, port: u16, skbs: &mut Vec<Skb>) {
    let mut t0 = w.clock();
    let mut own = 0;
    let n = skbs.len();
    let mut t = table(w, port);
    let cfg = config(net);
    let batch = net.tun.gro_normal_batch;
    for &skb in skbs.iter() {
        t.receive(&mut w.bufs, &mut w.c.gro, cfg, w.now_ns, skb);
        if t.list_full(batch) {
            own += w.stage_lap(t0);
            normal_list(net, w, &mut t, true);
            t0 = w.clock();
        }
    }
    w.gro[port as usize] = t;
    own += w.stage_lap(t0);
    w.stage_add(crate::stats::Stage::Gro, n, own);
    skbs.clear();
}

/// `gro_normal_list`: hands the normal list to the receive path, cut where it reached
/// `gro_normal_batch` segments (one packet can push two at once, a flush many; the kernel's
/// `gro_normal_one` would have delivered at each of those points). Mid-poll (`keep_rest`)
/// what follows the last cut stays on the list, as what `gro_normal_one` pushed after its
/// delivery; at the end of a poll it goes too. Returns packets delivered.
fn normal_list(net: &Net, w: &mut Worker, t: &mut GroTable, keep_rest: bool) -> usize {
    let mut list = std::mem::take(&mut t.spare);
    let segs = t.normal_segs;
    t.take_normal(&mut w.c.gro, &mut list);
    let mut n = list.len();
    let batch = net.tun.gro_normal_batch;
    if segs <= batch || n == 1 {
        deliver(net, w, &mut list);
    } else {
        let mut chunk = std::mem::take(&mut t.chunk);
        let mut in_chunk = 0u32;
        let mut cuts = 0u64;
        for &skb in &list {
            chunk.push(skb);
            in_chunk += skb.gso_segs.max(1) as u32;
            if in_chunk >= batch {
                deliver(net, w, &mut chunk);
                chunk.clear();
                in_chunk = 0;
                cuts += 1;
            }
        }
        if !chunk.is_empty() && keep_rest {
            // Back on the (emptied) list, not yet delivered.
            n -= chunk.len();
            w.c.gro.list_segs -= in_chunk as u64;
            t.normal.extend_from_slice(&chunk);
            t.normal_segs = in_chunk;
            chunk.clear();
        } else if !chunk.is_empty() {
            deliver(net, w, &mut chunk);
            chunk.clear();
            cuts += 1;
        }
        t.chunk = chunk;
        // take_normal counted one delivery; each cut is one.
        w.c.gro.lists += cuts.saturating_sub(1);
    }
    list.clear();
    t.spare = list;
    n
}

/// `gro_normal_list`'s delivery: RPS, then the listified or single receive path.
fn deliver(net: &Net, w: &mut Worker, list: &mut Vec<Skb>) {
    crate::rps::steer(net, w, list);
    if list.is_empty() {
        return;
    }
    if net.tun.listified != 0 {
        crate::rx::receive_list(net, w, list);
    } else {
        crate::rx::receive_single(net, w, list);
    }
    list.clear();
}

/// How a poll ended, for [`flush_rule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollEnd {
    /// It took its whole weight: not complete, polled again.
    BudgetUsed,
    /// It took packets, fewer than its weight: complete (napi_complete_done with work).
    Work,
    /// It found nothing: complete with no work, as the poll the flush timer schedules.
    Empty,
}

/// End of a poll of `port`: what [`flush_rule`] says is completed, then `gro_normal_list`.
/// Returns packets delivered.
pub fn poll_done(net: &Net, w: &mut Worker, port: u16, end: PollEnd) -> usize {
    let Some(t) = w.gro.get(port as usize) else { return 0 };
    if t.held == 0 && t.normal.is_empty() {
        return 0;
    }
    let mut t = table(w, port);
    let (older_than, cause, timer) = flush_rule(end, net.tun.gro_flush_timeout, t.flush_timer, w.now_ns);
    t.flush_timer = timer;
    t.flush(&mut w.bufs, &mut w.c.gro, older_than, cause);
    let n = normal_list(net, w, &mut t, false);
    w.gro[port as usize] = t;
    n
}

/// Which held packets a poll ending at `now` completes (None = every one), and the flush
/// timer after it (0 = not armed), as napi_complete_done and its `gro_flush_timeout` timer:
/// - a poll that used its whole budget: only those held over a tick (`napi_gro_flush(n,
///   true)`);
/// - a completed poll that took packets, with the timeout set: only those held over a tick
///   too, and the timer is armed to poll again `gro_flush_timeout` ns later;
/// - a completed poll that found nothing (what the timer's poll finds when traffic paused):
///   every one; but while an armed timer is not yet due, only those over a tick — sluice
///   polls every round, where the kernel would not poll before the timer fires;
/// - without the timeout, a completed poll: every one.
fn flush_rule(end: PollEnd, flush_timeout_ns: u64, timer: u64, now: u64) -> (Option<u64>, FlushCause, u64) {
    let aged = Some(now.saturating_sub(TICK_NS));
    match end {
        PollEnd::BudgetUsed => (aged, FlushCause::Aged, timer),
        PollEnd::Work if flush_timeout_ns > 0 => (aged, FlushCause::Aged, now.saturating_add(flush_timeout_ns)),
        PollEnd::Empty if timer != 0 && now < timer => (aged, FlushCause::Aged, timer),
        PollEnd::Work | PollEnd::Empty => (None, FlushCause::PollDone, 0),
    }
}

/// Completes everything held on every port (the end of a run).
pub fn flush_all(net: &Net, w: &mut Worker) {
    for port in 0..w.gro.len() {
        if let Some(t) = w.gro.get_mut(port) {
            if t.held == 0 && t.normal.is_empty() {
                continue;
            }
        }
        let mut t = table(w, port as u16);
        t.flush(&mut w.bufs, &mut w.c.gro, None, FlushCause::PollDone);
        normal_list(net, w, &mut t, false);
        w.gro[port] = t;
    }
}

#[cfg(test)]
mod tests;
