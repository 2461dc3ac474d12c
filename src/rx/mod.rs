//! The receive path: l2 → IPv4/IPv6 → route → forward / local, in two modes.
//!
//! - single (`rx.listified = 0`): each packet walks every layer before the next starts,
//!   like `netif_receive_skb` per packet;
//! - listified (default): each poll's packets travel as a list, cut into maximal runs of
//!   consecutive packets that share a key (handler and input port at l2, route at the IP
//!   finish step); each run goes to the layer's list function, or packet by packet to a
//!   layer without one (ARP). Order never changes; a packet dropped in a stage leaves its run.

pub mod dst;
pub mod family;
pub mod fib;
pub mod forward;
pub mod icmp_rate;
pub mod ipv4;
pub mod ipv4_hdr;
pub mod ipv6;
pub mod ipv6_hdr;
pub mod local;
pub mod neigh;
pub mod resolver;
pub mod route;
pub mod socket;

use crate::buf::skb::Skb;
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::wire::ethernet::HEADER_LEN as ETH_HEADER_LEN;
use crate::wire::vlan::VlanHeader;
use crate::wire::EtherType;
use crate::worker::Worker;
use dst::for_each_run;

/// Protocol handlers (the kernel's packet_type entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Handler {
    Ipv4 = 1,
    Ipv6 = 2,
    /// No list function: the per-packet fall-back.
    Arp = 3,
}

/// An 802.1Q tag on receive: filtered by the port's VLANs, then removed (its own function,
/// so untagged traffic's core step stays small).
#[inline(never)]
fn vlan_untag(net: &Net, w: &mut Worker, skb: &mut Skb) -> Result<(), DropReason> {
    let data = w.bufs.data_mut(skb.pkt);
    let Ok(tag) = VlanHeader::new_checked(&data[ETH_HEADER_LEN.min(data.len())..]) else {
        return Err(DropReason::PktTooSmall);
    };
    let (tci, vid, inner) = (tag.tci(), tag.vid(), tag.inner_ethertype());
    // VID 0 is a priority tag (802.1Q): the frame belongs to the port itself and goes on
    // untagged, as __netif_receive_skb_core clears a tag no VLAN device claims.
    let priority_tag = vid == 0;
    let allowed = priority_tag || net.ifaces.get(skb.rx_port as usize).is_some_and(|i| i.vlans.contains(&vid));
    if !allowed {
        return Err(DropReason::VlanFiltered);
    }
    skb.protocol = inner;
    // Untag: move the MAC addresses up over the tag, as skb_vlan_untag does.
    data.copy_within(0..12, 4);
    skb.pkt.off += 4;
    skb.pkt.len -= 4;
    skb.vlan_present = !priority_tag;
    skb.vlan_tci = if priority_tag { 0 } else { tci };
    Ok(())
}

/// Core step, per packet in both modes: VLAN untag and filter, handler lookup.
#[inline]
pub(crate) fn core_step(net: &Net, w: &mut Worker, skb: &mut Skb) -> Result<Handler, DropReason> {
    if let Some(r) = skb.drop {
        return Err(r);
    }
    if net.tun.extra_work != 0 {
        extra_work(net.tun.extra_work);
    }
    if skb.protocol == EtherType::VLAN {
        vlan_untag(net, w, skb)?;
    }
    match skb.protocol {
        EtherType::IPV4 => Ok(Handler::Ipv4),
        EtherType::IPV6 => Ok(Handler::Ipv6),
        EtherType::ARP => Ok(Handler::Arp),
        _ => Err(DropReason::UnhandledProto),
    }
}

/// `rx.extra_work`: a dependent chain of `n` LCG steps the optimiser cannot remove, so a
/// benchmark can add a known, real per-packet cost (`sluice bench selfcheck`).
#[inline(never)]
pub fn extra_work(n: u32) -> u64 {
    let mut x = std::hint::black_box(0x9e37_79b9_7f4a_7c15u64);
    for _ in 0..n {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407));
    }
    x
}

/// Single mode: every packet through every layer, one at a time.
pub fn receive_single(net: &Net, w: &mut Worker, skbs: &[Skb]) {
    let t0 = w.clock();
    for &s in skbs {
        receive_one(net, w, s);
    }
    w.stage_done(Stage::RxSingle, skbs.len(), t0);
}

#[inline]
fn receive_one(net: &Net, w: &mut Worker, mut skb: Skb) {
    match core_step(net, w, &mut skb) {
        Err(r) => w.drop_pkt(skb.pkt, r),
        Ok(Handler::Ipv4) => ipv4::rcv_one(net, w, skb),
        Ok(Handler::Ipv6) => ipv6::rcv_one(net, w, skb),
        Ok(Handler::Arp) => local::arp_rcv(net, w, skb),
    }
}

/// Listified mode: `skbs` is one poll's list; it is consumed (left empty).
pub fn receive_list(net: &Net, w: &mut Worker, skbs: &mut Vec<Skb>) {
    w.c.rx_lists += 1;
    w.c.record_list_len(skbs.len());
    let t0 = w.clock();
    let total = skbs.len();
    // Core step per packet; survivors are compacted to the front, the handler is kept in
    // `nh` until the IP layer overwrites it with the route.
    let mut n = 0;
    for i in 0..skbs.len() {
        match core_step(net, w, &mut skbs[i]) {
            Ok(h) => {
                skbs[i].nh = h as u32;
                // Moved only once something before it was dropped.
                if n != i {
                    skbs[n] = skbs[i];
                }
                n += 1;
            }
            Err(r) => w.drop_pkt(skbs[i].pkt, r),
        }
    }
    skbs.truncate(n);
    w.stage_done(Stage::L2, total, t0);
    for_each_run(
        skbs,
        |s| (s.nh, s.rx_port),
        |run| {
            w.c.rx_runs += 1;
            match run[0].nh {
                1 => ipv4::list_rcv(net, w, run),
                2 => ipv6::list_rcv(net, w, run),
                _ => {
                    for &s in run.iter() {
                        local::arp_rcv(net, w, s);
                    }
                }
            }
        },
    );
    skbs.clear();
}

/// Once per round: the neighbour layer's timers (probes, failures, aging), then the forwarded
/// packets whose neighbour answered go on through the forward step, and those whose
/// neighbour failed are reported to their senders. True when it ran.
#[inline]
pub fn neigh_timers(net: &Net, w: &mut Worker) -> bool {
    if !neigh::timers(net, w) {
        return false;
    }
    forward::forward_released(net, w);
    forward::report_neigh_failed(net, w);
    true
}

#[cfg(test)]
mod tests {
    /// `extra_work(n)` runs exactly `n` steps of its chain (its value says so): a benchmark's
    /// added cost is what the setting asks for, never optimised or cut short.
    #[test]
    fn extra_work_runs_n_steps_of_its_chain() {
        let step = |x: u64| x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let seed = 0x9e37_79b9_7f4a_7c15u64;
        assert_eq!(super::extra_work(0), seed);
        assert_eq!(super::extra_work(3), step(step(step(seed))));
    }
}
