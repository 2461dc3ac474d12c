//! IPv4 receive: validation as ip_rcv_core, route lookup (with the list path's route hint),
//! then dst_input: forward or local delivery.

use super::family::{FwdError, IpFamily, V4};
use super::ipv4_hdr::{compile_options, daddr, is_loopback, is_multicast, route_key, trim_to, RcvError, LIMITED_BROADCAST};
use super::route::NeighAddr;
use super::route::Neighbours;
use super::route::{NextHop, RouteTable};
use super::{forward, local};
use crate::buf::skb::{PktType, Skb};
use crate::buf::BufCache;
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::tunables::Tunables;
use crate::wire::ipv4::{self, Ipv4Packet};
use crate::worker::Worker;

/// ip_list_rcv's loop: validates each packet of the run with `rcv`; the accepted ones move
/// to the front and go on to `finish` (routing and dst_input) as lists. A refused packet is
/// dropped where it stands; one refused with an ICMP error first lets the packets accepted
/// before it finish, so the error leaves in the order single mode sends it.
#[inline(always)]
pub(crate) fn rcv_list(
    net: &Net,
    w: &mut Worker,
    run: &mut [Skb],
    mut rcv: impl FnMut(&mut BufCache, &mut Skb) -> Result<(), RcvError>,
    refuse: fn(&Net, &mut Worker, Skb, RcvError),
    finish: fn(&Net, &mut Worker, &mut [Skb]),
) {
    let t0 = w.clock();
    let (mut start, mut n) = (0, 0);
    for i in 0..run.len() {
        match rcv(&mut w.bufs, &mut run[i]) {
            Ok(()) => {
                if n != i {
                    run[n] = run[i];
                }
                n += 1;
            }
            Err(RcvError::Drop(r)) => w.drop_pkt(run[i].pkt, r),
            Err(e) => {
                if n > start {
                    finish(net, w, &mut run[start..n]);
                    start = n;
                }
                refuse(net, w, run[i], e);
            }
        }
    }
    w.stage_done(Stage::Ip, run.len(), t0);
    finish(net, w, &mut run[start..n]);
}

/// A packet receive refused: the parameter problem if one is due, then the drop.
pub(crate) fn refuse(net: &Net, w: &mut Worker, skb: Skb, e: RcvError) {
    match e {
        RcvError::Drop(r) => w.drop_pkt(skb.pkt, r),
        RcvError::ParamProblem { code, pointer, reason } => {
            forward::icmp4_error(net, w, &skb, 12, code, pointer << 24);
            w.drop_pkt(skb.pkt, reason);
        }
    }
}

/// ip_rcv_core's checks, in its order, each with its drop reason, then ip_rcv_options for a
/// header with options. On success the packet is trimmed to the IP total length (Ethernet
/// padding goes) and the transport header is set.
#[inline(always)]
pub(crate) fn rcv_core(bufs: &mut BufCache, routes: &RouteTable, skb: &mut Skb) -> Result<(), RcvError> {
    if skb.pkt_type == PktType::OtherHost {
        return Err(DropReason::OtherHost.into());
    }
    let data = bufs.data(skb.pkt);
    let l3 = skb.network_off as usize;
    let bytes = data.get(l3..).ok_or(DropReason::PktTooSmall)?;
    // The view's getters are safe on any input once 20 bytes are there (its contract);
    // each further check names its own drop, in ip_rcv_core's order.
    if bytes.len() < ipv4::MIN_HEADER_LEN {
        return Err(DropReason::PktTooSmall.into());
    }
    let ip = Ipv4Packet::new_unchecked(bytes);
    let ihl = ip.header_len();
    if ip.version() != 4 || ihl < ipv4::MIN_HEADER_LEN {
        return Err(DropReason::IpInhdr.into());
    }
    if bytes.len() < ihl {
        return Err(DropReason::IpInhdr.into());
    }
    if !ip.verify_checksum() {
        return Err(DropReason::IpCsum.into());
    }
    let tot_len = ip.total_len() as usize;
    // The datagram may continue in fragments (a chain): its bytes are the linear rest plus them.
    if bytes.len() + (skb.pkt.frag_len as usize) < tot_len {
        return Err(DropReason::PktTooSmall.into());
    }
    if tot_len < ihl {
        return Err(DropReason::IpInhdr.into());
    }
    martian(routes, ip.src_addr(), ip.dst_addr())?;
    skb.ip_proto = ip.protocol();
    skb.transport_off = (l3 + ihl) as u16;
    // Trimmed before the options (pskb_trim_rcsum in ip_rcv_core): a parameter problem
    // about them quotes the datagram, not the Ethernet padding.
    trim_to(bufs, skb, l3 + tot_len);
    if ihl > 20 {
        options_rcv(bufs, skb, ihl)?;
    }
    Ok(())
}

/// ip_rcv_options: the options are checked as ip_options_compile checks them (a malformed
/// one is answered with a parameter problem pointing at it), bytes after an End of Options
/// become End (the checksum follows), and a source-routed packet is dropped silently
/// (`accept_source_route` = 0, the kernel's default: sluice never source-routes). Record
/// Route is filled in when the packet leaves (`record_route`) or is answered; timestamps are
/// checked, and a full one counts its overflow, but sluice writes no time into them.
#[cold]
#[inline(never)]
fn options_rcv(bufs: &mut BufCache, skb: &Skb, ihl: usize) -> Result<(), RcvError> {
    let l3 = skb.network_off as usize;
    let mut ip = Ipv4Packet::new_unchecked(&mut bufs.data_mut(skb.pkt)[l3..l3 + ihl]);
    let (changed, source_route) = compile_options(ip.options_mut()).map_err(|at| RcvError::ParamProblem {
        code: 0,
        pointer: (ipv4::MIN_HEADER_LEN + at) as u32,
        reason: DropReason::IpInhdr,
    })?;
    if changed {
        ip.fill_checksum();
    }
    if source_route {
        return Err(RcvError::Drop(DropReason::IpInhdr));
    }
    Ok(())
}

/// ip_route_input's address checks, in its order: a multicast destination (sluice joins no
/// group), martian sources and destinations (RFC 1812 5.3.7 / 4.2.2.11), then
/// fib_validate_source's "not from this host" (`is_local_source_v4`). Class E (240/4) is an
/// ordinary source, as in the kernel; only 255.255.255.255 is martian.
#[inline(always)]
fn martian(routes: &RouteTable, src: [u8; 4], dst: [u8; 4]) -> Result<(), DropReason> {
    // Fast path: every special range sits in first octets 0, 127 and 224–255.
    let special = |first: u8| first == 0 || first == 127 || first >= 224;
    if special(src[0]) || special(dst[0]) {
        special_addresses(src, dst)?;
    }
    if routes.is_local_source_v4(src) {
        return Err(DropReason::IpLocalSource);
    }
    Ok(())
}

/// The martian ranges, in ip_route_input's order (`martian`'s slow path).
#[cold]
fn special_addresses(src: [u8; 4], dst: [u8; 4]) -> Result<(), DropReason> {
    if is_multicast(dst) {
        return Err(DropReason::IpInvalidDest);
    }
    if is_multicast(src) || src == LIMITED_BROADCAST {
        return Err(DropReason::IpInvalidSource);
    }
    // The kernel delivers the limited broadcast to local broadcast listeners; sluice has none.
    if dst == LIMITED_BROADCAST || (src == [0; 4] && dst == [0; 4]) {
        return Err(DropReason::IpInvalidDest);
    }
    // Likewise only 0.0.0.0 is refused as a source (the rest of 0/8 is forwarded).
    if src == [0; 4] {
        return Err(DropReason::IpInvalidSource);
    }
    // 0.0.0.0 only: the rest of 0/8 is routed like any unicast destination (no route: an
    // ICMP error), as the kernel does.
    if dst == [0; 4] {
        return Err(DropReason::IpInvalidDest);
    }
    if is_loopback(dst) || is_loopback(src) {
        return Err(DropReason::IpLocalnet);
    }
    Ok(())
}

/// (daddr, tos), the route hint's key, read through one bounds check.
/// Single mode: one packet, all the way.
pub(crate) fn rcv_one(net: &Net, w: &mut Worker, mut skb: Skb) {
    if let Err(e) = rcv_core(&mut w.bufs, &net.routes, &mut skb) {
        return refuse(net, w, skb, e);
    }
    w.c.route_lookups += 1;
    skb.nh = net.routes.lookup_v4(daddr(&w.bufs, &skb));
    dst_input_one(net, w, skb);
}

fn dst_input_one(net: &Net, w: &mut Worker, skb: Skb) {
    match net.routes.get(skb.nh).copied() {
        None => forward::no_route_v4(net, w, skb),
        Some(NextHop::Local | NextHop::Broadcast) => local::deliver_v4(net, w, skb),
        Some(NextHop::Blackhole) => w.drop_pkt(skb.pkt, DropReason::IpNoroute),
        Some(NextHop::Unreachable) => forward::unreachable_v4(net, w, skb),
        Some(nh) => forward::forward_one::<V4>(net, w, skb, &nh),
    }
}

/// ip_list_rcv: validate each packet (drops leave the run), then the finish step.
/// The run already shares its input port (and sluice has one namespace), so no re-cut.
pub(crate) fn list_rcv(net: &Net, w: &mut Worker, run: &mut [Skb]) {
    rcv_list(net, w, run, |bufs, s| rcv_core(bufs, &net.routes, s), refuse, super::dst::list_rcv_finish::<V4>);
}

impl IpFamily for V4 {
    type Addr = [u8; 4];
    #[inline(always)]
    fn forwarding(t: &Tunables) -> bool {
        t.ip_forward != 0
    }
    #[inline(always)]
    fn daddr(bufs: &BufCache, skb: &Skb) -> [u8; 4] {
        daddr(bufs, skb)
    }
    #[inline(always)]
    fn route_key(bufs: &BufCache, skb: &Skb) -> ([u8; 4], u8) {
        route_key(bufs, skb)
    }
    #[inline(always)]
    fn route(net: &Net, w: &mut Worker, d: [u8; 4]) -> u32 {
        w.c.route_lookups += 1;
        net.routes.lookup_v4(d)
    }
    #[inline(always)]
    fn resolve(neigh: &Neighbours, nh: &NextHop, d: [u8; 4]) -> Option<(u16, [u8; 6])> {
        neigh.resolve_v4(nh, d)
    }
    fn neigh_addr(d: [u8; 4]) -> NeighAddr {
        NeighAddr::V4(d)
    }
    #[inline(always)]
    fn rewrite(bufs: &mut BufCache, skb: &Skb, mtu: u16, macs: &[u8; 12], out_addr: [u8; 4]) -> Result<(), FwdError> {
        forward::rewrite_v4(bufs, skb, mtu, macs, out_addr)
    }
    fn check(bufs: &BufCache, skb: &Skb, mtu: u16) -> Result<(), FwdError> {
        forward::check_v4(bufs, skb, mtu)
    }
    fn fail(net: &Net, w: &mut Worker, skb: Skb, e: FwdError) {
        forward::fail_v4(net, w, skb, e)
    }
    fn no_route(net: &Net, w: &mut Worker, skb: Skb) {
        forward::no_route_v4(net, w, skb)
    }
    fn unreachable(net: &Net, w: &mut Worker, skb: Skb) {
        forward::unreachable_v4(net, w, skb)
    }
    fn deliver_list(net: &Net, w: &mut Worker, run: &mut [Skb]) {
        local::deliver_list_v4(net, w, run)
    }
}
