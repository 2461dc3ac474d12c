//! IPv4 receive: validation as ip_rcv_core, route lookup (with the list path's route hint),
//! then dst_input: forward or local delivery.

use super::route::{NextHop, RouteTable};
use super::{forward, local};
use crate::buf::skb::{PktType, Skb};
use crate::buf::BufCache;
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::wire::checksum;
use crate::worker::Worker;

/// Why receive refused a packet: a plain drop, or a drop answered with an ICMP parameter
/// problem (`code`, and `pointer`: the offending byte's offset from the IP header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RcvError {
    Drop(DropReason),
    ParamProblem { code: u8, pointer: u32, reason: DropReason },
}

impl From<DropReason> for RcvError {
    #[inline(always)]
    fn from(r: DropReason) -> Self {
        RcvError::Drop(r)
    }
}

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
#[inline]
pub(crate) fn rcv_core(bufs: &mut BufCache, routes: &RouteTable, skb: &mut Skb) -> Result<(), RcvError> {
    if skb.pkt_type == PktType::OtherHost {
        return Err(DropReason::OtherHost.into());
    }
    let data = bufs.data(skb.pkt);
    let l3 = skb.network_off as usize;
    let ip = data.get(l3..).ok_or(DropReason::PktTooSmall)?;
    if ip.len() < 20 {
        return Err(DropReason::PktTooSmall.into());
    }
    let ihl = (ip[0] & 0x0f) as usize * 4;
    if ip[0] >> 4 != 4 || ihl < 20 {
        return Err(DropReason::IpInhdr.into());
    }
    if ip.len() < ihl {
        return Err(DropReason::IpInhdr.into());
    }
    if !checksum::ipv4_header_ok(&ip[..ihl]) {
        return Err(DropReason::IpCsum.into());
    }
    let tot_len = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    // The datagram may continue in fragments (a chain): its bytes are the linear rest plus them.
    if ip.len() + (skb.pkt.frag_len as usize) < tot_len {
        return Err(DropReason::PktTooSmall.into());
    }
    if tot_len < ihl {
        return Err(DropReason::IpInhdr.into());
    }
    let src = [ip[12], ip[13], ip[14], ip[15]];
    let dst = [ip[16], ip[17], ip[18], ip[19]];
    martian(routes, src, dst)?;
    skb.ip_proto = ip[9];
    skb.transport_off = (l3 + ihl) as u16;
    if ihl > 20 {
        options_rcv(bufs, skb, ihl)?;
    }
    trim_to(bufs, skb, l3 + tot_len);
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
    let ip = &mut bufs.data_mut(skb.pkt)[l3..l3 + ihl];
    let (changed, source_route) = compile_options(&mut ip[20..]).map_err(|at| RcvError::ParamProblem {
        code: 0,
        pointer: (20 + at) as u32,
        reason: DropReason::IpInhdr,
    })?;
    if changed {
        ip[10..12].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }
    if source_route {
        return Err(RcvError::Drop(DropReason::IpInhdr));
    }
    Ok(())
}

const IPOPT_END: u8 = 0;
const IPOPT_NOOP: u8 = 1;
const IPOPT_RR: u8 = 7;
const IPOPT_TIMESTAMP: u8 = 0x44;
const IPOPT_LSRR: u8 = 0x83;
const IPOPT_SSRR: u8 = 0x89;
const IPOPT_RA: u8 = 0x94;
/// Timestamp flags: addresses are prespecified (the only kind that counts no overflow).
const IPOPT_TS_PRESPEC: u8 = 3;

/// ip_options_compile's rules over the option bytes (after the fixed header): `Ok((changed,
/// source_route))`, or `Err(offset)` of the byte a parameter problem points at.
fn compile_options(opts: &mut [u8]) -> Result<(bool, bool), usize> {
    let (mut changed, mut srr, mut rr, mut ts) = (false, false, false, false);
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            IPOPT_END => {
                for b in &mut opts[i + 1..] {
                    changed |= *b != IPOPT_END;
                    *b = IPOPT_END;
                }
                break;
            }
            IPOPT_NOOP => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let room = opts.len() - i;
        if room < 2 {
            return Err(i);
        }
        let len = opts[i + 1] as usize;
        if len < 2 || len > room {
            return Err(i);
        }
        let ptr = opts.get(i + 2).map_or(0, |p| *p as usize);
        match opts[i] {
            IPOPT_LSRR | IPOPT_SSRR => {
                if len < 3 {
                    return Err(i + 1);
                }
                if ptr < 4 {
                    return Err(i + 2);
                }
                if srr {
                    return Err(i);
                }
                srr = true;
            }
            IPOPT_RR => {
                if rr {
                    return Err(i);
                }
                if len < 3 {
                    return Err(i + 1);
                }
                if ptr < 4 || (ptr <= len && ptr + 3 > len) {
                    return Err(i + 2);
                }
                rr = true;
            }
            IPOPT_TIMESTAMP => {
                if ts {
                    return Err(i);
                }
                if len < 4 {
                    return Err(i + 1);
                }
                if ptr < 5 {
                    return Err(i + 2);
                }
                let flags = opts[i + 3] & 0x0f;
                if ptr <= len {
                    let slot = if flags == 0 { 4 } else { 8 };
                    if ptr + 3 > len || (flags != 0 && flags != 2 && ptr + slot - 1 > len) {
                        return Err(i + 2);
                    }
                } else if flags != IPOPT_TS_PRESPEC {
                    if opts[i + 3] >> 4 == 15 {
                        return Err(i + 3);
                    }
                    opts[i + 3] += 0x10;
                    changed = true;
                }
                ts = true;
            }
            IPOPT_RA if len < 4 => return Err(i + 1),
            _ => {}
        }
        i += len;
    }
    Ok((changed, srr))
}

/// The Record Route option of a header with options, if it has room for an address: its
/// offset from the IP header.
fn record_route_with_room(ip: &[u8]) -> Option<usize> {
    let ihl = ((ip.first()? & 0x0f) as usize * 4).min(ip.len());
    let mut i = 20;
    while i < ihl {
        match ip[i] {
            IPOPT_END => return None,
            IPOPT_NOOP => i += 1,
            t => {
                let len = *ip.get(i + 1)? as usize;
                if len < 2 {
                    return None;
                }
                if t == IPOPT_RR {
                    let ptr = *ip.get(i + 2)? as usize;
                    return (ptr >= 4 && ptr + 3 <= len && i + len <= ihl).then_some(i);
                }
                i += len;
            }
        }
    }
    None
}

/// Records `addr` in the packet's Record Route option if it has room, advancing its pointer
/// (ip_forward_options: the address of the interface the packet leaves by; an answer: the
/// address it was sent to). The header checksum is recomputed. `ip` starts at the IP header.
#[cold]
#[inline(never)]
pub(crate) fn record_route(ip: &mut [u8], addr: [u8; 4]) -> bool {
    let Some(opt) = record_route_with_room(ip) else { return false };
    let slot = opt + ip[opt + 2] as usize - 1;
    ip[slot..slot + 4].copy_from_slice(&addr);
    ip[opt + 2] += 4;
    let ihl = (ip[0] & 0x0f) as usize * 4;
    ip[10..12].copy_from_slice(&[0, 0]);
    let c = checksum::checksum(&ip[..ihl]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    true
}

/// ip_options_echo for an answer sent from the kernel's own stack (echo replies): of the
/// request's options only Record Route comes back (source routes were refused on receive;
/// timestamps are not echoed by sluice), padded with End to a multiple of 4 bytes. Returns
/// the reply's option bytes and their length.
pub(crate) fn echo_options(ip: &[u8]) -> ([u8; 40], usize) {
    let mut out = [0u8; 40];
    let ihl = ((ip[0] & 0x0f) as usize * 4).min(ip.len());
    let mut i = 20;
    while i < ihl {
        match ip[i] {
            IPOPT_END => break,
            IPOPT_NOOP => i += 1,
            t => {
                let len = ip.get(i + 1).map_or(0, |l| *l as usize);
                if len < 2 || i + len > ihl {
                    break;
                }
                if t == IPOPT_RR {
                    out[..len].copy_from_slice(&ip[i..i + len]);
                    return (out, len.div_ceil(4) * 4);
                }
                i += len;
            }
        }
    }
    (out, 0)
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
    // Likewise only 0.0.0.0 is refused as a source (the rest of 0/8 is forwarded).
    if src == [0; 4] {
        return Err(DropReason::IpInvalidSource);
    }
    // 0.0.0.0 only: the rest of 0/8 is routed like any unicast destination (no route: an
    // ICMP error), as the kernel does.
    if dst == [0; 4] {
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
        Some(NextHop::Local) => local::deliver_v4(net, w, skb),
        Some(NextHop::Blackhole) => w.drop_pkt(skb.pkt, DropReason::IpNoroute),
        Some(NextHop::Unreachable) => forward::unreachable_v4(net, w, skb),
        Some(nh) => forward::forward_v4(net, w, skb, &nh),
    }
}

/// ip_list_rcv: validate each packet (drops leave the run), then the finish step.
/// The run already shares its input port (and sluice has one namespace), so no re-cut.
pub(crate) fn list_rcv(net: &Net, w: &mut Worker, run: &mut [Skb]) {
    rcv_list(net, w, run, |bufs, s| rcv_core(bufs, &net.routes, s), refuse, super::list_rcv_finish::<super::family::V4>);
}
