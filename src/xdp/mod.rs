//! XDP hooks, as the kernel has them:
//! - native: runs on the raw receive burst before packet metadata exists. DROP recycles the
//!   buffer straight to the pool; TX and REDIRECT queue the frame on its target port's XDP
//!   transmit queue (one per port), sent in bulk when it holds 16 frames or more after a burst
//!   (the kernel's bq_enqueue sends at exactly 16) and at the end of the poll (xdp_do_flush);
//!   PASS continues to metadata build with the (possibly moved) data bounds.
//! - generic: runs after metadata exists, inside the receive core. A moved `data` resets the
//!   network header and the protocol is re-derived; TX bypasses the transmit queues (qdisc).
//!
//! Ports map to ifindexes as `ifindex = port + 1` (ifindex 0 means "none" in the kernel).

pub mod builtin;
pub mod ebpf;
pub mod env;
pub mod hooks;
pub mod map_setup;

use crate::buf::skb::{mac_number, Skb};
use crate::buf::{Pkt, FRAME_SIZE, HEADROOM};
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::worker::Worker;
use sluice_ebpf::insn::{XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_REDIRECT, XDP_TX};
pub use sluice_ebpf::xdp::{RedirectTarget, RunOutcome, XdpBuff};
use sluice_ebpf::BurstCtx;

/// Frames a redirect bulk queue holds before it is flushed early (the kernel's DEV_MAP_BULK_SIZE).
pub const REDIRECT_BULK: usize = 16;

pub use hooks::{run_each, XdpHooks, XdpMode, XdpProgram};

/// Runs `prog` on a chain: the head frame's linear part plus the fragments through the
/// helpers; the chain and `p`'s bounds reflect what the program did.
fn run_on_chain(
    prog: &mut dyn XdpProgram,
    bufs: &mut crate::buf::BufCache,
    p: &mut Pkt,
    ctx: BurstCtx,
    env: &mut env::SluiceEnv<'_>,
) -> RunOutcome {
    let (off, len) = (p.off as usize, p.len as usize);
    let (out, data, data_end) = bufs.with_xdp_frags(p, |frame, frags| {
        let mut xb = XdpBuff::new(frame, off, len);
        xb.frags = Some(frags);
        xb.ingress_ifindex = ctx.ingress_ifindex;
        xb.rx_queue_index = ctx.rx_queue_index;
        let out = prog.run(&mut xb, env);
        (out, xb.data, xb.data_end)
    });
    p.off = data as u16;
    p.len = data_end.saturating_sub(data) as u16;
    out
}

/// Room the linear copy of a chain gets after its data, for `bpf_xdp_adjust_tail` to grow
/// into (the kernel's linearize leaves tailroom, then the skb_shared_info reserve).
const LINEAR_TAILROOM: usize = 128 + sluice_ebpf::xdp::XDP_TAILROOM_DEFAULT;

/// Generic XDP with a program that is not frags-aware on a chain: the kernel linearizes the
/// skb (`skb_linearize`) and runs the program on one buffer. Here the chain is copied into a
/// per-worker buffer below 4 GiB (mapped once, on first need), the program runs there, and
/// the result becomes a new chain. `p` is the new packet (the old one is freed), or stays
/// as it was when its fate is a drop or there was no buffer: then the caller drops it as
/// `nobuf` (the kernel's failed linearize drops the skb before the program runs).
fn run_linearized(
    prog: &mut dyn XdpProgram,
    bufs: &mut crate::buf::BufCache,
    linear: &mut Option<sluice_ebpf::LowMem>,
    p: &mut Pkt,
    ctx: BurstCtx,
    env: &mut env::SluiceEnv<'_>,
) -> Result<RunOutcome, NoLinearBuffer> {
    if linear.is_none() {
        *linear = sluice_ebpf::LowMem::new(HEADROOM + crate::buf::chain::MAX_CHAIN_BYTES + LINEAR_TAILROOM).ok();
    }
    let Some(mem) = linear.as_mut() else { return Err(NoLinearBuffer { ran: None }) };
    let total = p.total_len();
    let frame = &mut mem.as_mut_slice()[..HEADROOM + total + LINEAR_TAILROOM];
    bufs.copy_out(*p, 0, &mut frame[HEADROOM..HEADROOM + total]);
    let mut xb = XdpBuff::new(frame, HEADROOM, total);
    xb.ingress_ifindex = ctx.ingress_ifindex;
    xb.rx_queue_index = ctx.rx_queue_index;
    let out = prog.run(&mut xb, env);
    if out.action == XDP_DROP || out.action == XDP_ABORTED {
        return Ok(out);
    }
    match bufs.alloc_copy(xb.packet()) {
        Some(np) => {
            bufs.free(*p);
            *p = np;
            Ok(out)
        }
        None => Err(NoLinearBuffer { ran: Some(out) }),
    }
}

/// A linearized run found no buffer: none below 4 GiB to copy the chain into (the program
/// did not run), or none in the pool for its result (`ran`: its verdict, counted as such).
#[derive(Debug)]
struct NoLinearBuffer {
    ran: Option<RunOutcome>,
}

/// What to do with one packet after its program ran.
enum Fate {
    Pass,
    Drop(DropReason),
    /// XDP_TX: back out of the receiving port.
    Xmit(u16),
    /// A redirect to a port (bpf_redirect, DEVMAP).
    Redirect(u16),
    Xsk(u32),
}

/// The packet's fate after its program returned `out`; the action is counted in `actions`
/// (slot 5: no XDP action). Every arm counts with a constant index, so a local `actions`
/// stays in registers over a burst instead of a memory add per packet.
#[inline(always)]
fn fate_of(out: &RunOutcome, port: u16, (nports, workers): (usize, usize), actions: &mut [u64; 6]) -> Fate {
    match out.action {
        XDP_PASS => {
            actions[XDP_PASS as usize] += 1;
            Fate::Pass
        }
        XDP_DROP => {
            actions[XDP_DROP as usize] += 1;
            Fate::Drop(DropReason::XdpDrop)
        }
        XDP_TX => {
            actions[XDP_TX as usize] += 1;
            Fate::Xmit(port)
        }
        XDP_REDIRECT => {
            actions[XDP_REDIRECT as usize] += 1;
            match out.redirect {
                Some(RedirectTarget::Ifindex(i)) if i >= 1 && (i as usize) <= nports => Fate::Redirect((i - 1) as u16),
                // A CPUMAP redirect to a worker that exists continues into this worker's stack
                // (not handed to that worker's backlog yet: README "Not there yet").
                Some(RedirectTarget::Cpu(k)) if (k as usize) < workers => Fate::Pass,
                // An XSKMAP value names a local consumer (a queue-sized id, at most
                // MAX_XSK_CONSUMERS): a larger one would size its counters from the map.
                Some(RedirectTarget::Xsk(k)) if (k as usize) < MAX_XSK_CONSUMERS => Fate::Xsk(k),
                _ => Fate::Drop(DropReason::XdpRedirectFailed),
            }
        }
        XDP_ABORTED => {
            actions[XDP_ABORTED as usize] += 1;
            Fate::Drop(DropReason::XdpAborted)
        }
        _ => {
            actions[5] += 1;
            Fate::Drop(DropReason::XdpAborted)
        }
    }
}

/// Native hook: runs on the raw burst; PASS survivors stay in `rx` (bounds updated).
pub fn run_native(net: &Net, w: &mut Worker, port: u16, rx: &mut Vec<Pkt>) {
    let Some(Some(prog)) = w.xdp.native.get_mut(port as usize) else { return };
    let t0 = w.clock.start();
    let nports = net.nports();
    let sizes = (nports, net.rps.workers());
    if w.xdp.xmit.len() < nports {
        w.xdp.xmit.resize_with(nports, Vec::new);
    }
    // The outcomes buffer lives in the hooks (no allocation per burst once it has grown).
    let mut outs = std::mem::take(&mut w.xdp.outcomes);
    if outs.len() < rx.len() {
        outs.resize(rx.len(), RunOutcome { action: XDP_ABORTED, redirect: None });
    }
    let mut env = env::SluiceEnv::new(&net.routes, &w.neigh, &net.ifaces, &mut w.xdp.host).on_cpu(w.id as u32);
    // Queue q of a port belongs to worker q.
    let ctx = BurstCtx { ingress_ifindex: port as u32 + 1, rx_queue_index: w.id as u32 };
    if rx.iter().any(Pkt::is_chained) {
        if !prog.frags_aware() {
            // A driver with a program that is not frags-aware receives into single buffers
            // (the kernel refuses to attach one when the MTU needs more): a longer frame is a
            // receive length error, never a truncated packet.
            let (c, bufs) = (&mut w.c, &mut w.bufs);
            rx.retain(|p| {
                if p.is_chained() {
                    c.drop(DropReason::RxLengthError);
                    bufs.free(*p);
                }
                !p.is_chained()
            });
        }
        // Rare (jumbo frames): packet by packet, in order, chains with their fragments.
        for (p, o) in rx.iter_mut().zip(outs.iter_mut()) {
            *o = if !p.is_chained() {
                let mut one = [*p];
                let mut out = [RunOutcome { action: XDP_ABORTED, redirect: None }];
                prog.run_burst(&mut w.bufs.region_mut(), &mut one, ctx, &mut env, &mut out);
                *p = one[0];
                out[0]
            } else {
                run_on_chain(prog.as_mut(), &mut w.bufs, p, ctx, &mut env)
            };
        }
    } else {
        prog.run_burst(&mut w.bufs.region_mut(), rx, ctx, &mut env, &mut outs);
    }
    // Verdicts counted in registers and applied once per burst; dropped buffers are freed
    // after the verdicts, as their own measurable step (the kernel's page_pool direct
    // recycling), in one bulk return.
    let n = rx.len();
    let mut actions = [0u64; 6];
    let mut reasons = DropTally::default();
    let mut free_list = std::mem::take(&mut w.xdp.free_scratch);
    free_list.clear();
    let uniform = uniform_pass_or_drop(&outs[..n]);
    // The common bursts (a filter passing everything, a flood dropped whole) skip the
    // verdict loop: the packets stay or go as one list.
    let keep = match uniform {
        Some(XDP_PASS) => {
            actions[XDP_PASS as usize] = n as u64;
            n
        }
        Some(_) => {
            // XDP_DROP, the only other verdict a burst can share here.
            actions[XDP_DROP as usize] = n as u64;
            reasons.xdp_drop = n as u64;
            0
        }
        None => {
            let mut keep = 0;
            for i in 0..n {
                let p = rx[i];
                match fate_of(&outs[i], port, sizes, &mut actions) {
                    Fate::Pass => {
                        rx[keep] = p;
                        keep += 1;
                    }
                    Fate::Drop(r) => {
                        reasons.add(r);
                        free_list.push(p);
                    }
                    Fate::Xmit(to) => queue_xmit(&mut w.xdp.xmit, to, p),
                    Fate::Redirect(to) if !fits_redirect_target(net, to, p) => {
                        reasons.add(DropReason::XdpRedirectFailed);
                        free_list.push(p);
                    }
                    Fate::Redirect(to) => queue_xmit(&mut w.xdp.xmit, to, p),
                    Fate::Xsk(k) => {
                        w.xdp.xsk_deliver(k, &mut w.c);
                        free_list.push(p);
                    }
                }
            }
            keep
        }
    };
    for (c, a) in w.c.xdp_actions.iter_mut().zip(actions) {
        *c += a;
    }
    reasons.apply(&mut w.c);
    w.xdp.outcomes = outs;
    let t1 = w.stage_done(Stage::XdpNative, n, t0);
    // A burst dropped whole is freed from where it is.
    let freed = if uniform == Some(XDP_DROP) { &rx[..] } else { &free_list[..] };
    w.bufs.free_pkts(freed);
    if !freed.is_empty() {
        w.stage_done(Stage::Free, freed.len(), t1);
    }
    rx.truncate(keep);
    w.xdp.free_scratch = free_list;
    flush_full_queues(w);
}

/// `XDP_PASS` or `XDP_DROP` when every outcome of the burst is that action, else None.
#[inline]
fn uniform_pass_or_drop(outs: &[RunOutcome]) -> Option<u32> {
    let first = outs.first()?.action;
    if first != XDP_PASS && first != XDP_DROP {
        return None;
    }
    // One pass without an early exit (the compiler can vectorize it).
    let same = outs.iter().fold(true, |all, o| all & (o.action == first));
    same.then_some(first)
}

/// Drops of a burst by reason, counted locally and added to the worker's counters once.
#[derive(Default)]
struct DropTally {
    xdp_drop: u64,
    aborted: u64,
    redirect_failed: u64,
}

impl DropTally {
    #[inline(always)]
    fn add(&mut self, r: DropReason) {
        match r {
            DropReason::XdpDrop => self.xdp_drop += 1,
            DropReason::XdpRedirectFailed => self.redirect_failed += 1,
            _ => self.aborted += 1,
        }
    }

    fn apply(&self, c: &mut crate::stats::Counters) {
        c.drop_n(DropReason::XdpDrop, self.xdp_drop);
        c.drop_n(DropReason::XdpAborted, self.aborted);
        c.drop_n(DropReason::XdpRedirectFailed, self.redirect_failed);
    }
}

/// Whether a frame redirected to port `to` fits it: xdp_ok_fwd_dev refuses (-EMSGSIZE) a frame
/// longer than the port's MTU plus its Ethernet header and one VLAN tag, in native and
/// generic mode. (XDP_TX has no such check: the frame leaves by the link it came in on.)
#[inline]
fn fits_redirect_target(net: &Net, to: u16, p: Pkt) -> bool {
    net.ifaces.get(to as usize).is_none_or(|i| p.total_len() <= i.mtu as usize + 14 + 4)
}

#[inline]
fn queue_xmit(xmit: &mut [Vec<Pkt>], to: u16, p: Pkt) {
    if let Some(q) = xmit.get_mut(to as usize) {
        q.push(p);
    }
}

/// Redirect bulk queues that reached REDIRECT_BULK go out now, as the kernel's bq_enqueue does.
fn flush_full_queues(w: &mut Worker) {
    for port in 0..w.xdp.xmit.len() {
        if w.xdp.xmit[port].len() >= REDIRECT_BULK {
            xmit_port(w, port as u16);
        }
    }
}

/// Generic hook: runs on packets with metadata; PASS survivors stay in `skbs`. Each packet
/// gets its own run, in order; consecutive packets from one port run as one burst.
pub fn run_generic(net: &Net, w: &mut Worker, skbs: &mut Vec<Skb>) {
    if !w.xdp.any_generic() {
        return;
    }
    let t0 = w.clock.start();
    let nports = net.nports();
    let sizes = (nports, net.rps.workers());
    if w.xdp.xmit.len() < nports {
        w.xdp.xmit.resize_with(nports, Vec::new);
    }
    let n = skbs.len();
    // Generic XDP needs XDP_PACKET_HEADROOM and a linear buffer: copy when short.
    let mut kept = 0;
    for i in 0..n {
        let mut s = skbs[i];
        let attached = w.xdp.generic_on(s.rx_port);
        let (off, end) = (s.pkt.off as usize, s.pkt.off as usize + s.pkt.len as usize);
        if attached && (off < HEADROOM || end > FRAME_SIZE) {
            // Rare: the headroom went to a header (or the bounds are off): a copy has it back.
            match w.bufs.clone_pkt(s.pkt) {
                Some(np) => {
                    w.bufs.free(s.pkt);
                    s.pkt = np;
                }
                None => {
                    w.drop_pkt(s.pkt, DropReason::NoBuffer);
                    continue;
                }
            }
        }
        skbs[kept] = s;
        kept += 1;
    }
    skbs.truncate(kept);
    let mut pkts = std::mem::take(&mut w.xdp.burst_pkts);
    let mut outs = std::mem::take(&mut w.xdp.outcomes);
    let mut keep = 0;
    let mut start = 0;
    while start < skbs.len() {
        let port = skbs[start].rx_port;
        // A burst: consecutive one-buffer packets of one port; a chain runs alone.
        let mut end = start + 1;
        if !skbs[start].pkt.is_chained() {
            while end < skbs.len() && skbs[end].rx_port == port && !skbs[end].pkt.is_chained() {
                end += 1;
            }
        }
        let Some(Some(prog)) = w.xdp.generic.get_mut(port as usize) else {
            skbs.copy_within(start..end, keep);
            keep += end - start;
            start = end;
            continue;
        };
        pkts.clear();
        pkts.extend(skbs[start..end].iter().map(|s| s.pkt));
        if outs.len() < pkts.len() {
            outs.resize(pkts.len(), RunOutcome { action: XDP_ABORTED, redirect: None });
        }
        let mut env = env::SluiceEnv::new(&net.routes, &w.neigh, &net.ifaces, &mut w.xdp.host).on_cpu(w.id as u32);
        let ctx = BurstCtx { ingress_ifindex: port as u32 + 1, rx_queue_index: skbs[start].rx_queue as u32 };
        if pkts[0].is_chained() {
            outs[0] = if prog.frags_aware() {
                run_on_chain(prog.as_mut(), &mut w.bufs, &mut pkts[0], ctx, &mut env)
            } else {
                match run_linearized(prog.as_mut(), &mut w.bufs, &mut w.xdp.linear, &mut pkts[0], ctx, &mut env) {
                    Ok(out) => out,
                    Err(NoLinearBuffer { ran }) => {
                        if let Some(out) = ran {
                            let _ = fate_of(&out, port, sizes, &mut w.c.xdp_actions);
                        }
                        w.drop_pkt(pkts[0], DropReason::NoBuffer);
                        start = end;
                        continue;
                    }
                }
            };
        } else {
            prog.run_burst(&mut w.bufs.region_mut(), &mut pkts, ctx, &mut env, &mut outs);
        }
        let port_mac = mac_number(&net.ifaces.get(port as usize).map(|i| i.mac).unwrap_or([0; 6]));
        for (j, i) in (start..end).enumerate() {
            let mut s = skbs[i];
            let np = pkts[j];
            match fate_of(&outs[j], port, sizes, &mut w.c.xdp_actions) {
                Fate::Pass => {
                    // As bpf_prog_run_generic_xdp: data moved (adjust_head / adjust_tail), or the
                    // Ethernet header rewritten in place so that the EtherType or whether the
                    // frame is for this host, multicast or broadcast changed: the network
                    // header, protocol and packet type are derived again (eth_type_trans).
                    let rebuilt = Skb::build_for(np, w.bufs.data(np), port, s.rx_queue, port_mac);
                    if np != s.pkt || rebuilt.protocol != s.protocol || rebuilt.pkt_type != s.pkt_type {
                        s = Skb { hash: s.hash, l4_hash: s.l4_hash, ..rebuilt };
                    }
                    skbs[keep] = s;
                    keep += 1;
                }
                Fate::Drop(r) => w.drop_pkt(np, r),
                Fate::Xmit(to) => queue_xmit(&mut w.xdp.xmit, to, np),
                Fate::Redirect(to) if !fits_redirect_target(net, to, np) => w.drop_pkt(np, DropReason::XdpRedirectFailed),
                Fate::Redirect(to) => queue_xmit(&mut w.xdp.xmit, to, np),
                Fate::Xsk(k) => {
                    w.xdp.xsk_deliver(k, &mut w.c);
                    w.bufs.free(np);
                }
            }
        }
        start = end;
    }
    w.xdp.burst_pkts = pkts;
    w.xdp.outcomes = outs;
    skbs.truncate(keep);
    w.stage_done(Stage::XdpGeneric, n, t0);
    flush_full_queues(w);
}

/// XSKMAP consumers a frame may be delivered to (ids 0..this).
pub const MAX_XSK_CONSUMERS: usize = 4096;

/// Hands one port's XDP transmit queue to the port (no qdisc); refusals are drops.
fn xmit_port(w: &mut Worker, port: u16) {
    let i = port as usize;
    let Some(q) = w.xdp.xmit.get_mut(i).filter(|q| !q.is_empty()) else { return };
    let Some(dev) = w.ports.get_mut(i).and_then(Option::as_mut) else {
        // A port another worker owns: the frames join this worker's output for it, which the
        // round's transmit work hands to the owner (as the stack's output does).
        match w.txq.get_mut(i) {
            Some(t) => t.pkts.append(q),
            None => {
                for p in q.drain(..) {
                    w.c.drop(DropReason::XdpRedirectFailed);
                    w.bufs.free(p);
                }
            }
        }
        return;
    };
    let t0 = w.clock.start();
    let n = q.len();
    let sent = dev.tx_burst(&mut w.bufs, q, false).min(n);
    w.c.doorbells += 1;
    // What the port took but its kernel ring then refused is a drop, not a transmission.
    w.c.tx += sent as u64;
    w.c.tx_bytes += q[..sent].iter().map(|p| p.total_len() as u64).sum::<u64>();
    let (failed, failed_bytes) = dev.take_tx_failed();
    w.c.tx_failed(failed, failed_bytes);
    for p in &q[sent..] {
        w.c.drop(DropReason::XdpRedirectFailed);
        w.bufs.free(*p);
    }
    q.clear();
    w.stage_done(Stage::PortTx, n, t0);
}

/// End of poll (xdp_do_flush): every XDP transmit / redirect queue goes out.
pub fn flush_redirects(w: &mut Worker) {
    for port in 0..w.xdp.xmit.len() {
        xmit_port(w, port as u16);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a burst whose every verdict is PASS (or every one DROP) skips the verdict loop;
    /// one odd packet anywhere, TX/REDIRECT/ABORTED or an empty burst take the loop.
    #[test]
    fn only_all_pass_or_all_drop_bursts_are_uniform() {
        let o = |a: u32| RunOutcome { action: a, redirect: None };
        assert_eq!(uniform_pass_or_drop(&[o(XDP_PASS); 64]), Some(XDP_PASS));
        assert_eq!(uniform_pass_or_drop(&[o(XDP_DROP); 3]), Some(XDP_DROP));
        let mut mixed = [o(XDP_DROP); 64];
        mixed[63] = o(XDP_PASS);
        assert_eq!(uniform_pass_or_drop(&mixed), None);
        mixed[63] = o(XDP_DROP);
        mixed[0] = o(XDP_PASS);
        assert_eq!(uniform_pass_or_drop(&mixed), None);
        for a in [XDP_TX, XDP_REDIRECT, XDP_ABORTED, 7] {
            assert_eq!(uniform_pass_or_drop(&[o(a); 4]), None, "action {a}");
        }
        assert_eq!(uniform_pass_or_drop(&[]), None);
    }

    /// A return value that is no XDP action is an exception on the datapath: counted in the
    /// "unknown" action slot and as an unknown action, and dropped as aborted (the kernel's
    /// bpf_warn_invalid_xdp_action path), never passed or transmitted.
    #[test]
    fn unknown_action_is_dropped_as_aborted_and_counted() {
        let mut c = crate::stats::Counters::default();
        for (i, action) in [5u32, 7, 0x8000_0000, u32::MAX].into_iter().enumerate() {
            let fate = fate_of(&RunOutcome { action, redirect: None }, 0, (2, 1), &mut c.xdp_actions);
            assert!(matches!(fate, Fate::Drop(DropReason::XdpAborted)), "action {action}");
            assert_eq!(c.xdp_actions[5], i as u64 + 1);
        }
        assert_eq!(c.xdp_actions[..5], [0; 5]);
        // The five real actions are counted in their own slots, not as unknown.
        for action in 0..=4 {
            let _ = fate_of(&RunOutcome { action, redirect: None }, 0, (2, 1), &mut c.xdp_actions);
        }
        assert_eq!(c.xdp_actions, [1, 1, 1, 1, 1, 4]);
    }

    /// A program that is not frags-aware runs on a linear copy of a chain; with no pool
    /// buffer for its result the packet stays as it was and the failure is named (nobuf, by
    /// the caller), never turned into an abort of what the program said.
    #[test]
    fn a_linearized_run_without_a_buffer_for_its_result_says_so() {
        struct Pass;
        impl XdpProgram for Pass {
            fn name(&self) -> String {
                "test:pass".into()
            }
            fn run(&mut self, xdp: &mut XdpBuff<'_>, _env: &mut env::SluiceEnv<'_>) -> RunOutcome {
                assert_eq!(xdp.data_end - xdp.data, 9000, "the whole frame in one buffer");
                RunOutcome { action: XDP_PASS, redirect: None }
            }
        }
        let (r, n) = (crate::rx::route::RouteTable::new(), crate::rx::route::Neighbours::default());
        let mut host = env::HostState::seeded(1);
        let frame: Vec<u8> = (0..9000).map(|i| i as u8).collect();
        let ctx = BurstCtx { ingress_ifindex: 1, rx_queue_index: 0 };
        // 9000 bytes take 5 frames: with 8, the result finds 3; with 10, it finds 5.
        for (frames, fits) in [(8, false), (10, true)] {
            let pool = crate::buf::Pool::new(frames).unwrap();
            let mut bufs = pool.cache();
            let mut linear = None;
            let mut p = bufs.alloc_copy(&frame).expect("the chain");
            let before = p;
            let mut env = env::SluiceEnv::new(&r, &n, &[], &mut host);
            let got = run_linearized(&mut Pass, &mut bufs, &mut linear, &mut p, ctx, &mut env);
            match got {
                Ok(out) => {
                    assert!(fits, "{frames} frames");
                    assert_eq!(out.action, XDP_PASS);
                }
                Err(NoLinearBuffer { ran }) => {
                    assert!(!fits, "{frames} frames");
                    assert_eq!(ran.map(|o| o.action), Some(XDP_PASS), "the verdict is kept");
                    assert_eq!(p, before, "the packet is left as it was");
                }
            }
            let mut out = vec![0u8; 9000];
            bufs.copy_out(p, 0, &mut out);
            assert_eq!(out, frame, "{frames} frames: the bytes");
            bufs.free(p);
        }
    }

    /// Redirect targets that do not exist fail by name: a CPUMAP CPU past the workers, an
    /// XSKMAP consumer id past MAX_XSK_CONSUMERS (its counters would be sized from the map's
    /// value), an ifindex past the ports. Existing ones go where they name.
    #[test]
    fn redirects_to_targets_that_do_not_exist_fail() {
        let mut a = [0u64; 6];
        let fate = |to: RedirectTarget, workers: usize, a: &mut [u64; 6]| {
            fate_of(&RunOutcome { action: XDP_REDIRECT, redirect: Some(to) }, 0, (2, workers), a)
        };
        let failed = |f: Fate| matches!(f, Fate::Drop(DropReason::XdpRedirectFailed));
        assert!(matches!(fate(RedirectTarget::Cpu(1), 2, &mut a), Fate::Pass), "CPU 1 of two workers");
        assert!(failed(fate(RedirectTarget::Cpu(1), 1, &mut a)), "CPU 1 of one worker");
        assert!(matches!(fate(RedirectTarget::Xsk(7), 1, &mut a), Fate::Xsk(7)));
        assert!(failed(fate(RedirectTarget::Xsk(MAX_XSK_CONSUMERS as u32), 1, &mut a)));
        assert!(failed(fate(RedirectTarget::Xsk(u32::MAX), 1, &mut a)));
        assert!(matches!(fate(RedirectTarget::Ifindex(2), 1, &mut a), Fate::Redirect(1)));
        assert!(failed(fate(RedirectTarget::Ifindex(3), 1, &mut a)));
    }
}
