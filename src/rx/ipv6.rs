//! IPv6 receive: validation as ipv6_rcv, extension headers skipped safely, route lookup
//! (with the route hint in list mode), then forward or local delivery.

use super::family::{FwdError, IpFamily, V6};
use super::forward::refuse_v6 as refuse;
use super::ipv4_hdr::RcvError;
use super::ipv6_hdr::{daddr, parse_options, route_key, PROTO_UNPARSED};
use super::route::NeighAddr;
use super::route::Neighbours;
use super::route::{NextHop, NO_ROUTE};
use super::{forward, local};
use crate::buf::skb::{PktType, Skb};
use crate::buf::BufCache;
use crate::net::Net;
use crate::stats::DropReason;
use crate::tunables::Tunables;
use crate::wire::ipv6::{self, walk_extension_headers, Ipv6Packet, WalkRules, NEXT_HEADER_HOP_BY_HOP};
use crate::worker::Worker;

/// ipv6_rcv: the fixed header's checks, the hop-by-hop options (the only extension header
/// a router reads; an unknown option acts as its type's top bits say), then multicast groups
/// sluice has not joined are dropped (ip6_mc_input). The other extension headers are walked
/// for local delivery's sake ([`WalkRules::RECEIVE`]): forwarding never looks at them, so a
/// chain the walk cannot follow (`PROTO_UNPARSED`: a header cut short) is forwarded
/// untouched and only local delivery refuses it; a later hop-by-hop ends the walk as
/// protocol 0, which local delivery answers as an unknown next header.
#[inline]
pub(crate) fn rcv_core(net: &Net, bufs: &mut BufCache, skb: &mut Skb) -> Result<(), RcvError> {
    if skb.pkt_type == PktType::OtherHost {
        return Err(DropReason::OtherHost.into());
    }
    let data = bufs.data(skb.pkt);
    let l3 = skb.network_off as usize;
    let bytes = data.get(l3..).ok_or(DropReason::PktTooSmall)?;
    // The view's getters are safe on any input once the fixed header is there.
    if bytes.len() < ipv6::HEADER_LEN {
        return Err(DropReason::PktTooSmall.into());
    }
    let ip = Ipv6Packet::new_unchecked(bytes);
    if ip.version() != 6 {
        return Err(DropReason::Ipv6Inhdr.into());
    }
    let dst = ip.dst_addr();
    martian(&ip.src_addr(), &dst)?;
    let plen = ip.payload_len() as usize;
    if ipv6::HEADER_LEN + plen > bytes.len() + skb.pkt.frag_len as usize {
        return Err(DropReason::PktTooSmall.into());
    }
    let next_header = ip.next_header();
    // Trimmed first (Ethernet padding goes), as ipv6_rcv does before the options: an error
    // about them quotes the datagram, not the padding.
    super::ipv4_hdr::trim_to(bufs, skb, l3 + 40 + plen);
    // Extension headers are read in the linear part (a chain's head holds 1792 bytes).
    let ext = Ipv6Packet::new_unchecked(&bufs.data(skb.pkt)[l3..]).into_payload();
    let multicast = dst[0] == 0xff;
    if next_header == NEXT_HEADER_HOP_BY_HOP {
        parse_options(ext, ipv6::HEADER_LEN, true, multicast)?;
    }
    if multicast && !joined(net, skb.rx_port, &dst) {
        return Err(DropReason::IpInvalidDest.into());
    }
    match walk_extension_headers(next_header, ext, WalkRules::RECEIVE) {
        // sluice does not reassemble: any fragment (first or later) is protocol 44 to local
        // delivery, which drops it; forwarding does not look at it.
        Ok(w) => {
            skb.ip_proto = if w.is_fragment() { 44 } else { w.protocol };
            skb.transport_off = (l3 + 40 + w.offset) as u16;
        }
        Err(_) => {
            skb.ip_proto = PROTO_UNPARSED;
            skb.transport_off = (l3 + 40) as u16;
        }
    }
    Ok(())
}

/// Multicast groups an IPv6 router's interface is in: all-nodes and all-routers
/// (interface-, link- and, for routers, site-local scope) and the solicited-node group of each
/// of its addresses, the subnet-router anycast ones of a router included (__ipv6_dev_ac_inc
/// joins it).
fn joined(net: &Net, port: u16, dst: &[u8; 16]) -> bool {
    let zero_mid = dst[2..15].iter().all(|b| *b == 0);
    if zero_mid && matches!((dst[1], dst[15]), (0x02, 1) | (0x02 | 0x05, 2)) {
        return true;
    }
    net.routes.joined_solicited_v6(port, dst)
}

/// Addresses never valid on the wire (ipv6_rcv, RFC 4291): a multicast or loopback source,
/// a loopback or interface-local (or reserved-scope) multicast destination. (The unspecified
/// and IPv4-mapped destinations are routed like any other, as the kernel does: no route, an
/// ICMPv6 error.)
#[inline]
fn martian(src: &[u8], dst: &[u8]) -> Result<(), DropReason> {
    let loopback = |a: &[u8]| a[..15].iter().all(|b| *b == 0) && a[15] == 1;
    if src[0] == 0xff || loopback(src) {
        return Err(DropReason::IpInvalidSource);
    }
    // A loopback destination, or a multicast one of reserved (0) or interface-local (1)
    // scope: interface-local traffic never comes from another node (RFC 4291 2.7 and its
    // erratum 3480, as ipv6_rcv drops it).
    if loopback(dst) || dst[0] == 0xff && dst[1] & 0x0f <= 1 {
        return Err(DropReason::IpInvalidDest);
    }
    Ok(())
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
    if let Err(e) = rcv_core(net, &mut w.bufs, &mut skb) {
        return refuse(net, w, skb, e);
    }
    skb.nh = route(net, w, daddr(&w.bufs, &skb));
    match net.routes.get(skb.nh).copied() {
        Some(NextHop::Local) => local::deliver_v6(net, w, skb),
        Some(NextHop::Blackhole) => w.drop_pkt(skb.pkt, DropReason::IpNoroute),
        None | Some(NextHop::Unreachable) => forward::no_route_v6(net, w, skb),
        Some(nh) => forward::forward_one::<V6>(net, w, skb, &nh),
    }
}

pub(crate) fn list_rcv(net: &Net, w: &mut Worker, run: &mut [Skb]) {
    super::ipv4::rcv_list(net, w, run, |bufs, s| rcv_core(net, bufs, s), refuse, super::dst::list_rcv_finish::<V6>);
}

impl IpFamily for V6 {
    type Addr = [u8; 16];
    #[inline(always)]
    fn forwarding(t: &Tunables) -> bool {
        t.ipv6_forwarding != 0
    }
    #[inline(always)]
    fn daddr(bufs: &BufCache, skb: &Skb) -> [u8; 16] {
        daddr(bufs, skb)
    }
    #[inline(always)]
    fn route_key(bufs: &BufCache, skb: &Skb) -> ([u8; 16], u8) {
        route_key(bufs, skb)
    }
    #[inline(always)]
    fn route(net: &Net, w: &mut Worker, d: [u8; 16]) -> u32 {
        route(net, w, d)
    }
    #[inline(always)]
    fn resolve(neigh: &Neighbours, nh: &NextHop, d: [u8; 16]) -> Option<(u16, [u8; 6])> {
        neigh.resolve_v6(nh, d)
    }
    fn neigh_addr(d: [u8; 16]) -> NeighAddr {
        NeighAddr::V6(d)
    }
    #[inline(always)]
    fn rewrite(bufs: &mut BufCache, skb: &Skb, mtu: u16, macs: &[u8; 12], out_addr: [u8; 4]) -> Result<(), FwdError> {
        forward::rewrite_v6(bufs, skb, mtu, macs, out_addr)
    }
    fn check(bufs: &BufCache, skb: &Skb, mtu: u16) -> Result<(), FwdError> {
        forward::check_v6(bufs, skb, mtu)
    }
    fn fail(net: &Net, w: &mut Worker, skb: Skb, e: FwdError) {
        forward::fail_v6(net, w, skb, e)
    }
    fn no_route(net: &Net, w: &mut Worker, skb: Skb) {
        forward::no_route_v6(net, w, skb)
    }
    fn unreachable(net: &Net, w: &mut Worker, skb: Skb) {
        forward::no_route_v6(net, w, skb)
    }
    fn deliver_list(net: &Net, w: &mut Worker, run: &mut [Skb]) {
        local::deliver_list_v6(net, w, run)
    }
}
