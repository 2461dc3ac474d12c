//! IPv6 receive: validation as ipv6_rcv, extension headers skipped safely, route lookup
//! (with the route hint in list mode), then forward or local delivery.

use super::route::{NextHop, NO_ROUTE};
use super::{forward, local, retain_run};
use crate::buf::skb::{PktType, Skb};
use crate::buf::BufCache;
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::wire::ipv6::skip_extension_headers;
use crate::worker::Worker;

#[inline]
pub(crate) fn rcv_core(bufs: &mut BufCache, skb: &mut Skb) -> Result<(), DropReason> {
    if skb.pkt_type == PktType::OtherHost {
        return Err(DropReason::OtherHost);
    }
    let data = bufs.data(skb.pkt);
    let l3 = skb.network_off as usize;
    let ip = data.get(l3..).ok_or(DropReason::PktTooSmall)?;
    if ip.len() < 40 {
        return Err(DropReason::PktTooSmall);
    }
    if ip[0] >> 4 != 6 {
        return Err(DropReason::Ipv6Inhdr);
    }
    martian(&ip[8..24], &ip[24..40])?;
    let plen = u16::from_be_bytes([ip[4], ip[5]]) as usize;
    if 40 + plen > ip.len() + skb.pkt.frag_len as usize {
        return Err(DropReason::PktTooSmall);
    }
    // Extension headers are read in the linear part (a chain's head holds 1792 bytes).
    let ext = skip_extension_headers(ip[6], &ip[40..(40 + plen).min(ip.len())]).map_err(|_| DropReason::Ipv6Inhdr)?;
    // sluice does not reassemble: any fragment (first or later) is protocol 44 to local
    // delivery, which drops it; forwarding does not look at it.
    skb.ip_proto = if ext.fragment { 44 } else { ext.protocol };
    skb.transport_off = (l3 + 40 + ext.offset) as u16;
    super::ipv4::trim_to(bufs, skb, l3 + 40 + plen);
    Ok(())
}

/// Addresses never valid on the wire (ipv6_rcv, RFC 4291): a multicast, loopback or
/// IPv4-mapped source (2.5.5.2); a loopback, unspecified or IPv4-mapped destination.
#[inline]
fn martian(src: &[u8], dst: &[u8]) -> Result<(), DropReason> {
    let zero_prefix = |a: &[u8], n: usize| a[..n].iter().all(|b| *b == 0);
    let loopback = |a: &[u8]| zero_prefix(a, 15) && a[15] == 1;
    let v4_mapped = |a: &[u8]| zero_prefix(a, 10) && a[10] == 0xff && a[11] == 0xff;
    if src[0] == 0xff || loopback(src) || v4_mapped(src) {
        return Err(DropReason::IpInvalidSource);
    }
    if zero_prefix(dst, 10) && (loopback(dst) || v4_mapped(dst) || zero_prefix(dst, 16)) {
        return Err(DropReason::IpInvalidDest);
    }
    Ok(())
}

/// (daddr, traffic class), the route hint's key, read through one bounds check.
#[inline(always)]
pub(crate) fn route_key(bufs: &BufCache, skb: &Skb) -> ([u8; 16], u8) {
    let o = skb.network_off as usize;
    match bufs.data(skb.pkt).get(o..o + 40) {
        Some(h) => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&h[24..40]);
            (a, (h[0] << 4) | (h[1] >> 4))
        }
        None => ([0; 16], 0),
    }
}

#[inline]
pub(crate) fn daddr(bufs: &BufCache, skb: &Skb) -> [u8; 16] {
    let d = bufs.data(skb.pkt);
    let o = skb.network_off as usize + 24;
    let mut a = [0u8; 16];
    if let Some(s) = d.get(o..o + 16) {
        a.copy_from_slice(s);
    }
    a
}

/// Multicast destinations are delivered here; link-local unicast is ours only if the FIB
/// says so (our addresses are /128 local routes) and is never forwarded (RFC 4291 §2.5.6).
#[inline]
pub(crate) fn route(net: &Net, w: &mut Worker, d: [u8; 16]) -> u32 {
    w.c.route_lookups += 1;
    if d[0] == 0xff {
        return super::route::NH_LOCAL;
    }
    let nh = net.routes.lookup_v6(d);
    if d[0] == 0xfe && d[1] & 0xc0 == 0x80 && nh != super::route::NH_LOCAL {
        return NO_ROUTE;
    }
    nh
}

pub(crate) fn rcv_one(net: &Net, w: &mut Worker, mut skb: Skb) {
    if let Err(r) = rcv_core(&mut w.bufs, &mut skb) {
        w.drop_pkt(skb.pkt, r);
        return;
    }
    skb.nh = route(net, w, daddr(&w.bufs, &skb));
    match net.routes.get(skb.nh).copied() {
        Some(NextHop::Local) => local::deliver_v6(net, w, skb),
        Some(NextHop::Blackhole) => w.drop_pkt(skb.pkt, DropReason::IpNoroute),
        None | Some(NextHop::Unreachable) => forward::no_route_v6(net, w, skb),
        Some(nh) => forward::forward_v6(net, w, skb, &nh),
    }
}

pub(crate) fn list_rcv(net: &Net, w: &mut Worker, run: &mut [Skb]) {
    let t0 = w.clock();
    let n = retain_run(w, run, rcv_core);
    w.stage_done(Stage::Ip, run.len(), t0);
    super::list_rcv_finish::<super::family::V6>(net, w, &mut run[..n]);
}
