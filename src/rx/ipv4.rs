//! IPv4 receive: validation as ip_rcv_core, route lookup (with the list path's route hint),
//! then dst_input: forward or local delivery.

use super::route::{NextHop, RouteTable};
use super::{forward, local, retain_run};
use crate::buf::skb::{PktType, Skb};
use crate::buf::BufCache;
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::wire::checksum;
use crate::worker::Worker;

/// ip_rcv_core's checks, in its order, each with its drop reason. On success the packet is
/// trimmed to the IP total length (Ethernet padding goes) and the transport header is set.
#[inline]
pub(crate) fn rcv_core(bufs: &mut BufCache, routes: &RouteTable, skb: &mut Skb) -> Result<(), DropReason> {
    if skb.pkt_type == PktType::OtherHost {
        return Err(DropReason::OtherHost);
    }
    let data = bufs.data(skb.pkt);
    let l3 = skb.network_off as usize;
    let ip = data.get(l3..).ok_or(DropReason::PktTooSmall)?;
    if ip.len() < 20 {
        return Err(DropReason::PktTooSmall);
    }
    let ihl = (ip[0] & 0x0f) as usize * 4;
    if ip[0] >> 4 != 4 || ihl < 20 {
        return Err(DropReason::IpInhdr);
    }
    if ip.len() < ihl {
        return Err(DropReason::IpInhdr);
    }
    if !checksum::ipv4_header_ok(&ip[..ihl]) {
        return Err(DropReason::IpCsum);
    }
    let tot_len = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    // The datagram may continue in fragments (a chain): its bytes are the linear rest plus them.
    if ip.len() + (skb.pkt.frag_len as usize) < tot_len {
        return Err(DropReason::PktTooSmall);
    }
    if tot_len < ihl {
        return Err(DropReason::IpInhdr);
    }
    let src = [ip[12], ip[13], ip[14], ip[15]];
    let dst = [ip[16], ip[17], ip[18], ip[19]];
    martian(routes, src, dst)?;
    skb.ip_proto = ip[9];
    skb.transport_off = (l3 + ihl) as u16;
    trim_to(bufs, skb, l3 + tot_len);
    Ok(())
}

/// pskb_trim_rcsum: the packet ends where the IP datagram does (Ethernet padding goes).
#[inline(always)]
pub(crate) fn trim_to(bufs: &mut BufCache, skb: &mut Skb, len: usize) {
    if skb.pkt.is_chained() {
        trim_chain(bufs, skb, len);
    } else {
        skb.pkt.len = len as u16;
    }
}

/// [`trim_to`] for a buffer chain: rare, kept out of the receive path's code.
#[cold]
#[inline(never)]
fn trim_chain(bufs: &mut BufCache, skb: &mut Skb, len: usize) {
    bufs.trim(&mut skb.pkt, len);
}

/// ip_route_input's address checks, in its order: a multicast destination (sluice joins no
/// group), martian sources and destinations (RFC 1812 5.3.7 / 4.2.2.11), then
/// fib_validate_source's "not one of ours". Class E (240/4) is an ordinary source, as in the
/// kernel; only 255.255.255.255 is martian.
#[inline(always)]
fn martian(routes: &RouteTable, src: [u8; 4], dst: [u8; 4]) -> Result<(), DropReason> {
    // Fast path: every special range sits in first octets 0, 127 and 224–255.
    let special = |first: u8| first == 0 || first == 127 || first >= 224;
    if special(src[0]) || special(dst[0]) {
        special_addresses(src, dst)?;
    }
    if routes.is_local_v4(src) {
        return Err(DropReason::IpLocalSource);
    }
    Ok(())
}

/// The martian ranges, in ip_route_input's order (`martian`'s slow path).
#[cold]
fn special_addresses(src: [u8; 4], dst: [u8; 4]) -> Result<(), DropReason> {
    const LIMITED_BROADCAST: [u8; 4] = [255; 4];
    let multicast = |a: [u8; 4]| a[0] & 0xf0 == 0xe0;
    if multicast(dst) {
        return Err(DropReason::IpInvalidDest);
    }
    if multicast(src) || src == LIMITED_BROADCAST {
        return Err(DropReason::IpInvalidSource);
    }
    // The kernel delivers the limited broadcast to local broadcast listeners; sluice has none.
    if dst == LIMITED_BROADCAST || (src == [0; 4] && dst == [0; 4]) {
        return Err(DropReason::IpInvalidDest);
    }
    if src[0] == 0 {
        return Err(DropReason::IpInvalidSource);
    }
    if dst[0] == 0 {
        return Err(DropReason::IpInvalidDest);
    }
    if dst[0] == 127 || src[0] == 127 {
        return Err(DropReason::IpLocalnet);
    }
    Ok(())
}

/// (daddr, tos), the route hint's key, read through one bounds check.
#[inline(always)]
pub(crate) fn route_key(bufs: &BufCache, skb: &Skb) -> ([u8; 4], u8) {
    let o = skb.network_off as usize;
    match bufs.data(skb.pkt).get(o..o + 20) {
        Some(h) => ([h[16], h[17], h[18], h[19]], h[1]),
        None => ([0; 4], 0),
    }
}

#[inline]
pub(crate) fn daddr(bufs: &BufCache, skb: &Skb) -> [u8; 4] {
    let d = bufs.data(skb.pkt);
    let o = skb.network_off as usize + 16;
    match d.get(o..o + 4) {
        Some(a) => [a[0], a[1], a[2], a[3]],
        None => [0; 4],
    }
}

/// Single mode: one packet, all the way.
pub(crate) fn rcv_one(net: &Net, w: &mut Worker, mut skb: Skb) {
    if let Err(r) = rcv_core(&mut w.bufs, &net.routes, &mut skb) {
        w.drop_pkt(skb.pkt, r);
        return;
    }
    w.c.route_lookups += 1;
    skb.nh = net.routes.lookup_v4(daddr(&w.bufs, &skb));
    dst_input_one(net, w, skb);
}

fn dst_input_one(net: &Net, w: &mut Worker, skb: Skb) {
    match net.routes.get(skb.nh).copied() {
        None => forward::no_route_v4(net, w, skb),
        Some(NextHop::Local) => local::deliver_v4(net, w, skb),
        Some(NextHop::Blackhole) => w.drop_pkt(skb.pkt, DropReason::IpNoroute),
        Some(NextHop::Unreachable) => forward::unreachable_v4(net, w, skb),
        Some(nh) => forward::forward_v4(net, w, skb, &nh),
    }
}

/// ip_list_rcv: validate each packet (drops leave the run), then the finish step.
/// The run already shares its input port (and sluice has one namespace), so no re-cut.
pub(crate) fn list_rcv(net: &Net, w: &mut Worker, run: &mut [Skb]) {
    let t0 = w.clock();
    let n = retain_run(w, run, |bufs, s| rcv_core(bufs, &net.routes, s));
    w.stage_done(Stage::Ip, run.len(), t0);
    super::list_rcv_finish::<super::family::V4>(net, w, &mut run[..n]);
}
