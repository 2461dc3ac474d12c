//! Forwarding: TTL / hop limit, checksum patch (RFC 1624), neighbour MAC rewrite, MTU, and
//! the ICMP errors a router originates (time exceeded, unreachable, too big).

pub(crate) use super::family::FwdError;
use super::family::{IpFamily, V4, V6};
use super::icmp_rate::IcmpKind;
use super::ipv4_hdr::daddr as daddr_v4;
use super::ipv4_hdr::RcvError;
use super::ipv6_hdr::daddr as daddr_v6;
use super::neigh::{self, NeighAddr};
use super::resolver::Held;
use super::route::NextHop;
use crate::buf::skb::{PktType, Skb};
use crate::buf::{BufCache, Pkt, HEADROOM};
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::wire::ethernet::EthernetFrame;
use crate::wire::icmp::{Icmpv4Packet, Icmpv6Packet};
use crate::wire::ipv4::{self, Ipv4Packet};
use crate::wire::ipv6::{self, Ipv6Packet};
use crate::wire::{EtherType, IPPROTO_ICMP, IPPROTO_ICMPV6};
use crate::worker::Worker;

/// ip_forward / ip6_forward: only a frame addressed to our MAC is forwarded; a unicast IP
/// packet that arrived in an L2 broadcast or multicast frame is dropped (RFC 1812 5.3.4).
#[inline(always)]
fn l2_unicast(skb: &Skb) -> Result<(), FwdError> {
    if skb.pkt_type == PktType::Host {
        Ok(())
    } else {
        Err(FwdError::Drop(DropReason::UnicastInL2Multicast))
    }
}

/// ip6_forward's source check (after the hop limit, before the MTU): `::` is dropped; a
/// link-local source cannot leave its link.
#[inline(always)]
fn forwardable_source_v6(saddr: &[u8]) -> Result<(), FwdError> {
    if saddr[0] == 0xfe && saddr[1] & 0xc0 == 0x80 {
        return Err(FwdError::SourceBeyondScope);
    }
    if saddr[0] == 0 && saddr.iter().all(|b| *b == 0) {
        return Err(FwdError::Drop(DropReason::IpInaddrerrors));
    }
    Ok(())
}

/// The Ethernet addresses of an output frame, destination then source, as they sit in the
/// header (one 12-byte copy per packet).
#[inline(always)]
fn eth_addrs(dst: &[u8; 6], src: &[u8; 6]) -> [u8; 12] {
    let mut a = [0u8; 12];
    a[..6].copy_from_slice(dst);
    a[6..].copy_from_slice(src);
    a
}

/// Rewrites one IPv4 packet in place for output: TTL, header checksum, MACs (`macs`:
/// destination then source).
/// `out_addr`: the egress port's address, for a Record Route option.
#[inline(always)]
pub(crate) fn rewrite_v4(bufs: &mut BufCache, skb: &Skb, mtu: u16, macs: &[u8; 12], out_addr: [u8; 4]) -> Result<(), FwdError> {
    let l3 = skb.network_off as usize;
    let data = bufs.data_mut(skb.pkt);
    if data.len() < l3 + ipv4::MIN_HEADER_LEN {
        return Err(FwdError::Drop(DropReason::PktTooSmall));
    }
    let mut ip = Ipv4Packet::new_unchecked(&mut data[l3..]);
    checks_v4(&ip, skb, mtu, macs)?;
    ip.decrement_ttl();
    if ip.header_len() != ipv4::MIN_HEADER_LEN {
        super::ipv4_hdr::record_route(ip.into_inner(), out_addr);
    }
    set_macs(data, macs);
    Ok(())
}

/// ip_forward's checks, before anything is written: TTL, then the MTU (with DF an error;
/// without, `NeedsFragment`: the datagram leaves in fragments).
#[inline(always)]
fn checks_v4<T: AsRef<[u8]>>(ip: &Ipv4Packet<T>, skb: &Skb, mtu: u16, macs: &[u8; 12]) -> Result<(), FwdError> {
    if ip.ttl() <= 1 {
        return Err(FwdError::TtlExceeded);
    }
    let tot_len = crate::tx::gso::network_len(ip.as_bytes(), skb).unwrap_or(ip.total_len() as usize);
    if tot_len > mtu as usize {
        return Err(if ip.dont_frag() { FwdError::TooBig { mtu } } else { FwdError::NeedsFragment { mtu, macs: *macs } });
    }
    Ok(())
}

/// ip6_forward's checks, before anything is written: hop limit, the source's scope, the MTU.
#[inline(always)]
fn checks_v6<T: AsRef<[u8]>>(ip: &Ipv6Packet<T>, skb: &Skb, mtu: u16) -> Result<(), FwdError> {
    if ip.hop_limit() <= 1 {
        return Err(FwdError::TtlExceeded);
    }
    forwardable_source_v6(&ip.src_addr())?;
    // The whole datagram counts, fragments of a chain included (a GSO packet: each segment).
    let linear = ip.as_bytes().len();
    if crate::tx::gso::network_len(ip.as_bytes(), skb).unwrap_or(linear + skb.pkt.frag_len as usize) > mtu as usize {
        return Err(FwdError::TooBig { mtu });
    }
    Ok(())
}

/// [`checks_v4`] alone (a packet waiting for its neighbour is checked before it waits).
pub(crate) fn check_v4(bufs: &BufCache, skb: &Skb, mtu: u16) -> Result<(), FwdError> {
    let l3 = skb.network_off as usize;
    match bufs.data(skb.pkt).get(l3..) {
        Some(b) if b.len() >= ipv4::MIN_HEADER_LEN => checks_v4(&Ipv4Packet::new_unchecked(b), skb, mtu, &[0; 12]),
        _ => Err(FwdError::Drop(DropReason::PktTooSmall)),
    }
}

/// [`checks_v6`] alone.
pub(crate) fn check_v6(bufs: &BufCache, skb: &Skb, mtu: u16) -> Result<(), FwdError> {
    let l3 = skb.network_off as usize;
    match bufs.data(skb.pkt).get(l3..) {
        Some(b) if b.len() >= ipv6::HEADER_LEN => checks_v6(&Ipv6Packet::new_unchecked(b), skb, mtu),
        _ => Err(FwdError::Drop(DropReason::PktTooSmall)),
    }
}

#[inline]
pub(crate) fn rewrite_v6(bufs: &mut BufCache, skb: &Skb, mtu: u16, macs: &[u8; 12], _out_addr: [u8; 4]) -> Result<(), FwdError> {
    let l3 = skb.network_off as usize;
    let data = bufs.data_mut(skb.pkt);
    if data.len() < l3 + ipv6::HEADER_LEN {
        return Err(FwdError::Drop(DropReason::PktTooSmall));
    }
    let mut ip = Ipv6Packet::new_unchecked(&mut data[l3..]);
    checks_v6(&ip, skb, mtu)?;
    ip.decrement_hop_limit();
    set_macs(data, macs);
    Ok(())
}

/// Writes the next hop's destination MAC and the egress port's source MAC (`macs`: the
/// two, as `eth_addrs` made them) into the Ethernet header of `frame`.
#[inline(always)]
fn set_macs(frame: &mut [u8], macs: &[u8; 12]) {
    let (dst, src) = macs.split_at(6);
    let mut eth = EthernetFrame::new_unchecked(frame);
    // Two 6-byte halves, as `eth_addrs` wrote them: a 12-byte copy of a fresh array would
    // read it back wider than it was stored (a store-forwarding stall per packet).
    eth.set_dst(dst.try_into().unwrap_or(&[0; 6]));
    eth.set_src(src.try_into().unwrap_or(&[0; 6]));
}

pub(crate) fn fail_v4(net: &Net, w: &mut Worker, skb: Skb, e: FwdError) {
    match e {
        FwdError::Drop(r) => w.drop_pkt(skb.pkt, r),
        FwdError::TtlExceeded => {
            icmp4_error(net, w, &skb, 11, 0, 0);
            w.drop_pkt(skb.pkt, DropReason::TtlExpired);
        }
        FwdError::TooBig { mtu } => {
            icmp4_error(net, w, &skb, 3, 4, mtu as u32);
            w.drop_pkt(skb.pkt, DropReason::PktTooBig);
        }
        // IPv6 only.
        FwdError::SourceBeyondScope => w.drop_pkt(skb.pkt, DropReason::IpInaddrerrors),
        // Handled where the output port is known (forward_one, forward_list); never here.
        FwdError::NeedsFragment { .. } => w.drop_pkt(skb.pkt, DropReason::PktTooBig),
    }
}

pub(crate) fn fail_v6(net: &Net, w: &mut Worker, skb: Skb, e: FwdError) {
    match e {
        FwdError::Drop(r) => w.drop_pkt(skb.pkt, r),
        FwdError::TtlExceeded => {
            icmp6_error(net, w, &skb, 3, 0, 0);
            w.drop_pkt(skb.pkt, DropReason::TtlExpired);
        }
        FwdError::TooBig { mtu } => {
            icmp6_error(net, w, &skb, 2, 0, mtu as u32);
            w.drop_pkt(skb.pkt, DropReason::PktTooBig);
        }
        // IPv6 routers never fragment (RFC 8200 5); rewrite_v6 never asks for it.
        FwdError::NeedsFragment { .. } => w.drop_pkt(skb.pkt, DropReason::PktTooBig),
        FwdError::SourceBeyondScope => {
            icmp6_error(net, w, &skb, 1, 2, 0);
            w.drop_pkt(skb.pkt, DropReason::IpInaddrerrors);
        }
    }
}

fn out_params(net: &Net, port: u16) -> (u16, [u8; 6]) {
    net.ifaces.get(port as usize).map(|i| (i.mtu, i.mac)).unwrap_or((0, [0; 6]))
}

/// The egress port's IPv4 address (what a Record Route option records).
fn out_addr_v4(net: &Net, port: u16) -> [u8; 4] {
    net.ifaces.get(port as usize).and_then(|i| i.primary_v4()).unwrap_or([0; 4])
}

/// Single mode: forward one packet (the single-packet walk of [`forward_list`]).
pub(crate) fn forward_one<F: IpFamily>(net: &Net, w: &mut Worker, skb: Skb, nh: &NextHop) {
    if !F::forwarding(&net.tun) {
        return w.drop_pkt(skb.pkt, DropReason::ForwardingDisabled);
    }
    if let Err(e) = l2_unicast(&skb) {
        return F::fail(net, w, skb, e);
    }
    let daddr = F::daddr(&w.bufs, &skb);
    let Some((port, mac)) = F::resolve(&w.neigh, nh, daddr) else {
        if let Err(e) = check_before_hold::<F>(net, &w.bufs, nh, &skb) {
            return F::fail(net, w, skb, e);
        }
        return unresolved(net, w, nh, F::neigh_addr(daddr), Held::Forward(skb, *nh));
    };
    let (mtu, src) = out_params(net, port);
    match F::rewrite(&mut w.bufs, &skb, mtu, &eth_addrs(&mac, &src), out_addr_v4(net, port)) {
        Ok(()) => crate::tx::gso::xmit(net, w, port, &skb),
        Err(e) => fail_or_fragment::<F>(net, w, skb, port, e),
    }
}

/// List mode: a run with one route. A gateway is resolved once for the whole run; the
/// rewritten run goes to the transmit queue as one list.
pub(crate) fn forward_list<F: IpFamily>(net: &Net, w: &mut Worker, run: &mut [Skb], nh: &NextHop) {
    let t0 = w.clock();
    if !F::forwarding(&net.tun) {
        for s in run.iter() {
            w.drop_pkt(s.pkt, DropReason::ForwardingDisabled);
        }
        return;
    }
    let fixed = match *nh {
        NextHop::Gateway { port, mac } => Some((port, mac)),
        // A resolved gateway: one lookup for the whole run.
        NextHop::Via { port, gw } => w.neigh.lookup(port, gw).map(|mac| (port, mac)),
        _ => None,
    };
    let mut n = 0;
    if let Some((port, mac)) = fixed {
        // One gateway for the whole run: resolve the output once, rewrite in a tight loop.
        let (mtu, src) = out_params(net, port);
        let macs = eth_addrs(&mac, &src);
        let out_addr = out_addr_v4(net, port);
        // ICMP errors go out as they happen: what the run forwarded before them goes first,
        // so the output order is the single path's.
        let mut flushed = 0;
        for i in 0..run.len() {
            let rewritten = match l2_unicast(&run[i]) {
                Ok(()) => F::rewrite(&mut w.bufs, &run[i], mtu, &macs, out_addr),
                Err(e) => Err(e),
            };
            match rewritten {
                Ok(()) => {
                    // Moved only once something before it failed.
                    if n != i {
                        run[n] = run[i];
                    }
                    n += 1;
                }
                Err(e) => {
                    transmit_run_to(net, w, port, &run[flushed..n]);
                    flushed = n;
                    fail_or_fragment::<F>(net, w, run[i], port, e);
                }
            }
        }
        w.stage_done(Stage::Forward, run.len(), t0);
        transmit_run_to(net, w, port, &run[flushed..n]);
        return;
    }
    let mut flushed = 0;
    for i in 0..run.len() {
        let s = run[i];
        if let Err(e) = l2_unicast(&s) {
            F::fail(net, w, s, e); // a silent drop: nothing to flush before it
            continue;
        }
        let daddr = F::daddr(&w.bufs, &s);
        let Some((port, mac)) = F::resolve(&w.neigh, nh, daddr) else {
            if let Err(e) = check_before_hold::<F>(net, &w.bufs, nh, &s) {
                transmit_run(net, w, &run[flushed..n]);
                flushed = n;
                F::fail(net, w, s, e);
            } else {
                unresolved(net, w, nh, F::neigh_addr(daddr), Held::Forward(s, *nh));
            }
            continue;
        };
        let (mtu, src) = out_params(net, port);
        match F::rewrite(&mut w.bufs, &s, mtu, &eth_addrs(&mac, &src), out_addr_v4(net, port)) {
            Ok(()) => {
                run[n] = s;
                run[n].out_port = port;
                n += 1;
            }
            Err(e) => {
                transmit_run(net, w, &run[flushed..n]);
                flushed = n;
                fail_or_fragment::<F>(net, w, s, port, e);
            }
        }
    }
    w.stage_done(Stage::Forward, run.len(), t0);
    transmit_run(net, w, &run[flushed..n]);
}

/// A packet the list path could not rewrite: fragmented when that is the remedy (IPv4
/// without DF over the MTU), else the family's error path.
fn fail_or_fragment<F: IpFamily>(net: &Net, w: &mut Worker, s: Skb, port: u16, e: FwdError) {
    match e {
        FwdError::NeedsFragment { mtu, macs } if s.gso_segs > 1 => fragment_gso_v4(net, w, s, port, mtu, &macs),
        FwdError::NeedsFragment { mtu, macs } => fragment_v4(net, w, s, port, mtu, &macs),
        e => F::fail(net, w, s, e),
    }
}

/// ip_finish_output_gso: a GRO packet whose datagrams are each longer than the egress MTU
/// (no DF) is split into its datagrams first, and each is fragmented on its own (cutting
/// the GRO packet as one datagram would send fragments no receiver can put back into the
/// datagrams that came in).
fn fragment_gso_v4(net: &Net, w: &mut Worker, skb: Skb, port: u16, mtu: u16, macs: &[u8; 12]) {
    crate::tx::gso::for_each_segment(w, &skb, |w, p| {
        let datagram = Skb { pkt: p, gso_size: 0, gso_segs: 1, gso_type: 0, ..skb };
        fragment_v4(net, w, datagram, port, mtu, macs);
    });
}

/// ip_do_fragment (its slow path: fresh buffers): an IPv4 datagram without DF, longer than
/// the egress MTU, leaves as fragments of at most `mtu` bytes. Each carries the header (TTL
/// one less, its own length, offset, MF and checksum), payloads are multiples of 8 bytes
/// but the last, offsets add to the datagram's own (a fragment is fragmented again), and
/// after the first fragment the options without the copy flag become NOPs
/// (ip_options_fragment), so every fragment has the same header length. The datagram is
/// consumed: a cut into k fragments counts k - 1 in `originated`. Each fragment carries
/// the datagram's flow hash (the port's, or the one RPS computed). Out of buffers midway,
/// the fragments made go out and the datagram is dropped as `nobuf` (the kernel's FRAGFAILS).
#[cold]
#[inline(never)]
pub(crate) fn fragment_v4(net: &Net, w: &mut Worker, skb: Skb, port: u16, mtu: u16, macs: &[u8; 12]) {
    let l3 = skb.network_off as usize;
    let mut hdr = [0u8; 60];
    let (ihl, tot_len, ethertype) = {
        let data = w.bufs.data(skb.pkt);
        // ip_rcv_core checked the header: ihl in 20..=60 within the linear part, tot_len >= ihl.
        let ihl = Ipv4Packet::new_unchecked(&data[l3..]).header_len().clamp(20, 60);
        hdr[..ihl].copy_from_slice(&data[l3..l3 + ihl]);
        (ihl, Ipv4Packet::new_unchecked(&hdr[..]).total_len() as usize, EthernetFrame::new_unchecked(data).ethertype())
    };
    let room = (mtu as usize).saturating_sub(ihl) & !7;
    if room == 0 || tot_len <= ihl {
        return w.drop_pkt(skb.pkt, DropReason::PktTooBig);
    }
    // The TTL goes down once, before the cut (the checksum is recomputed per fragment).
    let mut ip = Ipv4Packet::new_unchecked(&mut hdr[..]);
    ip.set_ttl(ip.ttl().saturating_sub(1));
    if ihl > 20 {
        // ip_forward_options runs before ip_fragment: every fragment's header starts from it.
        super::ipv4_hdr::record_route(&mut hdr[..ihl], out_addr_v4(net, port));
    }
    let ip = Ipv4Packet::new_unchecked(&hdr[..]);
    let (base_off, more_after) = (ip.frag_offset() as usize, ip.more_frags());
    let payload = tot_len - ihl;
    let mut frame = std::mem::take(&mut w.frag_scratch);
    let (mut off, mut made) = (0usize, 0u64);
    while off < payload {
        let len = room.min(payload - off);
        let last = off + len == payload;
        let mut ip = Ipv4Packet::new_unchecked(&mut hdr[..ihl]);
        ip.set_total_len((ihl + len) as u16);
        ip.set_fragment((base_off + off) as u16, !last || more_after);
        ip.fill_checksum();
        frame.clear();
        frame.extend_from_slice(macs);
        frame.extend_from_slice(&ethertype.to_be_bytes());
        frame.extend_from_slice(&hdr[..ihl]);
        let at = frame.len();
        frame.resize(at + len, 0);
        w.bufs.copy_out(skb.pkt, l3 + ihl + off, &mut frame[at..]);
        let Some(mut p) = w.bufs.alloc_copy(&frame) else {
            w.frag_scratch = frame;
            w.c.originated += made;
            w.c.ip_frag_creates += made;
            return w.drop_pkt(skb.pkt, DropReason::NoBuffer);
        };
        // ip_copy_metadata copies the flow hash: every fragment of the datagram, and the
        // flow's whole datagrams, land in one fq_codel queue.
        p.rss_hash = skb.hash;
        crate::tx::enqueue(net, w, port, p);
        made += 1;
        if made == 1 {
            nop_uncopied_options(&mut hdr[20..ihl]);
        }
        off += len;
    }
    w.frag_scratch = frame;
    w.bufs.free(skb.pkt);
    w.c.originated += made - 1;
    w.c.ip_frag_creates += made;
    w.c.ip_frag_oks += 1;
}

/// ip_options_fragment: options whose copy flag (bit 7 of the type) is clear appear only in
/// the first fragment; later fragments carry NOPs in their place.
fn nop_uncopied_options(opts: &mut [u8]) {
    const EOL: u8 = 0;
    const NOP: u8 = 1;
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            EOL => return,
            NOP => i += 1,
            t => {
                let len = opts.get(i + 1).map_or(0, |l| *l as usize);
                if len < 2 || i + len > opts.len() {
                    return;
                }
                if t & 0x80 == 0 {
                    opts[i..i + len].fill(NOP);
                }
                i += len;
            }
        }
    }
}

/// Hands a rewritten run to one port's transmit queue as one list.
fn transmit_run_to(net: &Net, w: &mut Worker, port: u16, run: &[Skb]) {
    let t0 = w.clock();
    match w.txq.get_mut(port as usize) {
        Some(q) if q.pkts.len() + run.len() < crate::tx::QUEUE_SOFT_LIMIT && !crate::tx::gso::any_gso(net, run) => {
            q.pkts.extend(run.iter().map(|s| s.pkt))
        }
        _ => {
            for s in run {
                crate::tx::gso::xmit(net, w, port, s);
            }
        }
    }
    w.stage_done(Stage::Tx, run.len(), t0);
}

/// Hands a rewritten run to the transmit queues, each packet to its `out_port`.
fn transmit_run(net: &Net, w: &mut Worker, run: &[Skb]) {
    let t0 = w.clock();
    for s in run {
        crate::tx::gso::xmit(net, w, s.out_port, s);
    }
    w.stage_done(Stage::Tx, run.len(), t0);
}

/// No route: ICMP network unreachable (code 0), as the kernel's ip_error for ENETUNREACH.
pub(crate) fn no_route_v4(net: &Net, w: &mut Worker, skb: Skb) {
    route_error_v4(net, w, skb, 0);
}

/// An `unreachable` route: ICMP host unreachable (code 1), as ip_error for EHOSTUNREACH.
/// (IPv6 answers both with "no route to destination", as ip6_pkt_discard does.)
pub(crate) fn unreachable_v4(net: &Net, w: &mut Worker, skb: Skb) {
    route_error_v4(net, w, skb, 1);
}

/// ip_error: with forwarding off the kernel turns every route error into EHOSTUNREACH and
/// answers nothing (a host does not report other hosts' unreachability); otherwise the
/// destination-unreachable `code`.
fn route_error_v4(net: &Net, w: &mut Worker, skb: Skb, code: u8) {
    if net.tun.ip_forward == 0 {
        return w.drop_pkt(skb.pkt, DropReason::IpInaddrerrors);
    }
    icmp4_error(net, w, &skb, 3, code, 0);
    w.drop_pkt(skb.pkt, DropReason::IpNoroute);
}

pub(crate) fn no_route_v6(net: &Net, w: &mut Worker, skb: Skb) {
    icmp6_error(net, w, &skb, 1, 0, 0);
    w.drop_pkt(skb.pkt, DropReason::IpNoroute);
}

/// Originates an ICMPv4 error about `orig` (RFC 1812 rules: never about an ICMP error, a
/// non-first fragment, or a packet not unicast to us at L2).
/// `info` is the second word of the ICMP header (the next-hop MTU of "fragmentation needed",
/// the pointer of a parameter problem in its top byte).
pub(crate) fn icmp4_error(net: &Net, w: &mut Worker, orig: &Skb, typ: u8, code: u8, info: u32) {
    let l3 = orig.network_off as usize;
    // About a packet addressed to us, the error comes from the address it was sent to (as
    // icmp_send does); about a forwarded one, from the interface it arrived on.
    let orig_dst = daddr_v4(&w.bufs, orig);
    let orig_route = net.routes.lookup_v4(orig_dst);
    // Never about a packet to a subnet's broadcast address (icmp_send: RTCF_BROADCAST).
    if orig_route == super::route::NH_BROADCAST {
        return;
    }
    let src = if orig_route == super::route::NH_LOCAL {
        orig_dst
    } else {
        match net.ifaces.get(orig.rx_port as usize).and_then(|i| i.primary_v4()) {
            Some(a) => a,
            None => return,
        }
    };
    // The quote is copied out to the stack (no allocation): the buffer is borrowed from the pool.
    let (quote_buf, q, dst) = {
        let data = w.bufs.data(orig.pkt);
        let Some(bytes) = data.get(l3..) else { return };
        if bytes.len() < ipv4::MIN_HEADER_LEN || orig.pkt_type != PktType::Host {
            return;
        }
        let ip = Ipv4Packet::new_unchecked(bytes);
        // Only the first fragment is answered.
        if ip.frag_offset() != 0 {
            return;
        }
        let ihl = ip.header_len().max(ipv4::MIN_HEADER_LEN);
        if ip.protocol() == IPPROTO_ICMP && !icmp4_may_answer(bytes.get(ihl).copied()) {
            return;
        }
        // As much as fits in 576 bytes (RFC 1812 4.3.2.3, icmp_send's room).
        let q = bytes.len().min(ICMP4_QUOTE_MAX);
        let mut quote = [0u8; ICMP4_QUOTE_MAX];
        quote[..q].copy_from_slice(&bytes[..q]);
        (quote, q, ip.src_addr())
    };
    let quote = &quote_buf[..q];
    let mut dst16 = [0u8; 16];
    dst16[10..12].copy_from_slice(&[0xff, 0xff]); // IPv4-mapped: one key space for both families
    dst16[12..].copy_from_slice(&dst);
    if !net.icmp_rate.lock().unwrap_or_else(|e| e.into_inner()).allow(&net.tun, IcmpKind::v4(typ, code), dst16, w.now_ns) {
        w.c.icmp_ratelimited += 1;
        return;
    }
    let Some(id) = w.bufs.alloc() else {
        w.c.originated += 1;
        w.c.drop(DropReason::NoBuffer);
        return;
    };
    let len = 14 + 20 + 8 + quote.len();
    let ttl = net.tun.ip_default_ttl;
    let f = &mut w.bufs.frame_mut(id)[HEADROOM..HEADROOM + len];
    // Every header byte is written: the frame is a recycled buffer.
    f[..14 + 20 + 8].fill(0);
    EthernetFrame::new_unchecked(&mut f[..]).set_ethertype(EtherType::IPV4);
    let (ip_bytes, icmp_bytes) = f[14..].split_at_mut(20);
    let mut ip = Ipv4Packet::new_unchecked(ip_bytes);
    ip.set_version_and_header_len(20);
    // Internetwork control with the offending packet's TOS bits (icmp_send: RT_TOS of the
    // header | IPTOS_PREC_INTERNETCONTROL; its precedence and ECN bits are not kept).
    ip.set_tos(quote[1] & IPTOS_TOS_MASK | IPTOS_PREC_INTERNETCONTROL);
    ip.set_total_len((20 + 8 + quote.len()) as u16);
    ip.set_ttl(ttl);
    ip.set_protocol(IPPROTO_ICMP);
    ip.set_src_addr(&src);
    ip.set_dst_addr(&dst);
    ip.fill_checksum();
    let mut icmp = Icmpv4Packet::new_unchecked(icmp_bytes);
    icmp.set_msg_type(typ);
    icmp.set_code(code);
    icmp.set_rest_of_header(info);
    icmp.data_mut().copy_from_slice(quote);
    icmp.fill_checksum();
    w.c.originated += 1;
    send_v4(net, w, Pkt::new(id, len), dst);
}

/// The TOS bits proper of an IPv4 TOS byte (RFC 1349), between precedence and ECN.
const IPTOS_TOS_MASK: u8 = 0x1e;
/// The "internetwork control" precedence of ICMP errors.
const IPTOS_PREC_INTERNETCONTROL: u8 = 0xc0;

/// Bytes of the offending datagram an ICMPv4 error quotes at most: what fits in 576 bytes
/// after the error's IPv4 and ICMP headers.
const ICMP4_QUOTE_MAX: usize = 576 - 20 - 8;

/// Whether an ICMP message of type `t` may be answered with an ICMP error, as icmp_send
/// decides: only the informational types (echo and echo reply, 13–18: timestamp,
/// information and address mask, requests and replies). Errors (3, 4, 5, 11, 12), the
/// unassigned types and anything past 18 are taken for errors; a packet too short to carry
/// the type byte gets nothing.
#[inline]
fn icmp4_may_answer(t: Option<u8>) -> bool {
    matches!(t, Some(0 | 8 | 13..=18))
}

/// Whether the contents of `ip` (an IPv6 packet trimmed to its length) allow an ICMPv6
/// error about it (icmp6_send's is_ineligible): not if it is an ICMPv6 error, as far as the
/// kernel's walk of the extension headers tells. A chain naming ICMPv6 that ends before the
/// type byte counts as an error, unless the last fragment header passed has a non-zero
/// field (a first fragment: the ICMPv6 header may be in a later one; an atomic fragment
/// counts as an error); one the walk cannot follow, or that reaches a later fragment, is
/// answered. Headers past the first buffer of a chain are not read (a chain's head holds
/// 1792 bytes).
fn icmp6_may_answer(ip: &[u8]) -> bool {
    let ip = Ipv6Packet::new_unchecked(ip);
    let payload = ip.into_payload();
    match super::ipv6_hdr::skip_exthdr(ip.next_header(), payload) {
        Some(e) if e.protocol == IPPROTO_ICMPV6 => match payload.get(e.offset) {
            Some(&t) => t & 0x80 != 0,
            None => e.fragment_field != 0,
        },
        _ => true,
    }
}

/// The ICMPv6 errors sent about a packet addressed to a group (icmp6_send's exception):
/// packet too big, and a parameter problem for an unrecognized option (code 2) whose type's
/// top two bits are 10, "discard and answer even if multicast"; `pointer` is the option's
/// offset from the IPv6 header.
#[inline]
fn icmp6_answers_a_group(typ: u8, code: u8, ip: &[u8], pointer: u32) -> bool {
    typ == 2 || (typ == 4 && code == 2 && ip.get(pointer as usize).is_some_and(|t| t >> 6 == 2))
}

/// Bytes of the offending packet an ICMPv6 error quotes at most: what fits in the IPv6
/// minimum MTU after the IPv6 and ICMPv6 headers.
const ICMP6_QUOTE_MAX: usize = 1280 - 48;

/// Originates an ICMPv6 error about `orig` (RFC 4443: not about errors or multicast).
pub(crate) fn icmp6_error(net: &Net, w: &mut Worker, orig: &Skb, typ: u8, code: u8, info: u32) {
    let l3 = orig.network_off as usize;
    // As for IPv4: a unicast address of ours the packet was sent to is the error's source.
    let orig_dst = daddr_v6(&w.bufs, orig);
    // (Not for a frame sent to a group: icmp6_send clears the source then.)
    // (A subnet-router anycast address of any port is such an address too: icmp6_send's
    // ipv6_chk_acast_addr_src.)
    let src = if orig_dst[0] != 0xff && orig.pkt_type == PktType::Host && net.routes.lookup_v6(orig_dst) == super::route::NH_LOCAL {
        orig_dst
    } else {
        match net.ifaces.get(orig.rx_port as usize).and_then(|i| i.primary_v6()) {
            Some(a) => a,
            None => return,
        }
    };
    let (quote_buf, q, dst) = {
        let data = w.bufs.data(orig.pkt);
        let Some(bytes) = data.get(l3..) else { return };
        if bytes.len() < ipv6::HEADER_LEN {
            return;
        }
        let ip = Ipv6Packet::new_unchecked(bytes);
        // Not to a source that names no single node (the unspecified address), and about a
        // packet sent to a group only packet too big or an unrecognized option whose type
        // asks for an answer even then (icmp6_send, RFC 4443 2.4 e).
        let to_group = ip.dst_addr()[0] == 0xff || orig.pkt_type != PktType::Host;
        if ip.src_addr() == [0; 16] || (to_group && !icmp6_answers_a_group(typ, code, bytes, info)) {
            return;
        }
        if !icmp6_may_answer(bytes) {
            return;
        }
        // Quote as much as fits in the IPv6 minimum MTU.
        let q = bytes.len().min(ICMP6_QUOTE_MAX);
        let mut quote = [0u8; ICMP6_QUOTE_MAX];
        quote[..q].copy_from_slice(&bytes[..q]);
        (quote, q, ip.src_addr())
    };
    let quote = &quote_buf[..q];
    if !net.icmp_rate.lock().unwrap_or_else(|e| e.into_inner()).allow(&net.tun, IcmpKind::V6(typ), dst, w.now_ns) {
        w.c.icmp_ratelimited += 1;
        return;
    }
    let Some(id) = w.bufs.alloc() else {
        w.c.originated += 1;
        w.c.drop(DropReason::NoBuffer);
        return;
    };
    let plen = 8 + quote.len();
    let len = 14 + 40 + plen;
    let f = &mut w.bufs.frame_mut(id)[HEADROOM..HEADROOM + len];
    // Every header byte is written: the frame is a recycled buffer.
    f[..14 + 40 + 8].fill(0);
    EthernetFrame::new_unchecked(&mut f[..]).set_ethertype(EtherType::IPV6);
    let (ip_bytes, icmp_bytes) = f[14..].split_at_mut(40);
    Ipv6Packet::new_unchecked(ip_bytes).emit(plen as u16, IPPROTO_ICMPV6, 64, &src, &dst);
    let mut icmp = Icmpv6Packet::new_unchecked(icmp_bytes);
    icmp.set_msg_type(typ);
    icmp.set_code(code);
    icmp.set_rest_of_header(info);
    icmp.data_mut().copy_from_slice(quote);
    icmp.fill_checksum(&src, &dst);
    w.c.originated += 1;
    send_v6(net, w, Pkt::new(id, len), dst, orig.rx_port);
}

#[inline]
fn is_link_local_v6(a: &[u8; 16]) -> bool {
    a[0] == 0xfe && a[1] & 0xc0 == 0x80
}

/// Routes and transmits a packet sluice originated (already counted in `originated`).
pub(crate) fn send_v4(net: &Net, w: &mut Worker, p: Pkt, dst: [u8; 4]) {
    let route = net.routes.get(net.routes.lookup_v4(dst)).copied();
    match route.and_then(|n| w.neigh.resolve_v4(&n, dst)) {
        None if matches!(route, Some(NextHop::Connected { .. } | NextHop::Via { .. })) => {
            unresolved(net, w, &route.unwrap_or(NextHop::Blackhole), NeighAddr::V4(dst), Held::Originated(p))
        }
        out => send_resolved(net, w, p, out),
    }
}

/// A next hop whose neighbour is unknown: the packet waits for the resolution of the
/// on-link destination `addr` or of the route's gateway; anything else is dropped.
/// A packet whose next hop is not resolved yet gets ip_forward's TTL and MTU verdicts now, as
/// the kernel decides them before the neighbour is looked at (a TTL-1 packet is answered with
/// time exceeded, not held for an ARP answer). One that may go in fragments passes.
fn check_before_hold<F: IpFamily>(net: &Net, bufs: &BufCache, nh: &NextHop, skb: &Skb) -> Result<(), FwdError> {
    let (NextHop::Connected { port } | NextHop::Via { port, .. }) = *nh else { return Ok(()) };
    match F::check(bufs, skb, out_params(net, port).0) {
        Err(FwdError::NeedsFragment { .. }) => Ok(()),
        r => r,
    }
}

fn unresolved(net: &Net, w: &mut Worker, nh: &NextHop, addr: NeighAddr, h: Held) {
    match *nh {
        NextHop::Connected { port } => neigh::hold(net, w, port, addr, h),
        NextHop::Via { port, gw } => neigh::hold(net, w, port, gw, h),
        _ => w.drop_pkt(h.pkt(), DropReason::NeighFailed),
    }
}

/// `in_port`: where the packet this answers came in; a link-local destination is only
/// reachable on that link (its neighbour entry there, no route).
pub(crate) fn send_v6(net: &Net, w: &mut Worker, p: Pkt, dst: [u8; 16], in_port: u16) {
    if is_link_local_v6(&dst) {
        return match w.neigh.v6.get(&(in_port, dst)).map(|m| (in_port, *m)) {
            None => neigh::hold(net, w, in_port, NeighAddr::V6(dst), Held::Originated(p)),
            out => send_resolved(net, w, p, out),
        };
    }
    let route = net.routes.get(net.routes.lookup_v6(dst)).copied();
    match route.and_then(|n| w.neigh.resolve_v6(&n, dst)) {
        None if matches!(route, Some(NextHop::Connected { .. } | NextHop::Via { .. })) => {
            unresolved(net, w, &route.unwrap_or(NextHop::Blackhole), NeighAddr::V6(dst), Held::Originated(p))
        }
        out => send_resolved(net, w, p, out),
    }
}

/// Sends an originated packet to its resolved next hop. `None` is a route that leads
/// nowhere (none, a blackhole, unreachable or local: the callers pass a packet whose
/// neighbour is unknown to `unresolved` instead), dropped as `ip_noroute`, ip_route_output's
/// verdict.
fn send_resolved(net: &Net, w: &mut Worker, p: Pkt, out: Option<(u16, [u8; 6])>) {
    match out {
        Some((port, mac)) => {
            let src = out_params(net, port).1;
            let d = w.bufs.data_mut(p);
            d[0..6].copy_from_slice(&mac);
            d[6..12].copy_from_slice(&src);
            crate::tx::enqueue(net, w, port, p);
        }
        None => w.drop_pkt(p, DropReason::IpNoroute),
    }
}

/// Forwarded packets whose neighbour answered (collected by the neighbour timers) walk the
/// forward step again, in the order they came.
pub(crate) fn forward_released(net: &Net, w: &mut Worker) {
    let mut list = std::mem::take(&mut w.resolver.released);
    for h in list.drain(..) {
        if let Held::Forward(skb, nh) = h {
            if skb.protocol == crate::wire::EtherType::IPV6 {
                forward_one::<V6>(net, w, skb, &nh);
            } else {
                forward_one::<V4>(net, w, skb, &nh);
            }
        }
    }
    w.resolver.released = list;
}

/// Forwarded packets whose neighbour never answered (collected by the neighbour timers),
/// each reported to its sender and dropped, in the order they came.
pub(crate) fn report_neigh_failed(net: &Net, w: &mut Worker) {
    let mut list = std::mem::take(&mut w.resolver.failed);
    for skb in list.drain(..) {
        neigh_failed(net, w, skb);
    }
    w.resolver.failed = list;
}

/// A forwarded packet whose neighbour never answered, as neigh_invalidate reports each packet
/// on the failed neighbour's queue (arp_error_report / ndisc_error_report → link failure):
/// its sender gets host unreachable (IPv6: address unreachable), quoting the packet as it
/// would have left (ip_forward had decremented its TTL / hop limit); then it is dropped as
/// `neigh_failed`.
fn neigh_failed(net: &Net, w: &mut Worker, skb: Skb) {
    let v6 = skb.protocol == crate::wire::EtherType::IPV6;
    if let Some(b) = w.bufs.data_mut(skb.pkt).get_mut(skb.network_off as usize..) {
        if v6 && b.len() >= ipv6::HEADER_LEN {
            Ipv6Packet::new_unchecked(b).decrement_hop_limit();
        } else if !v6 && b.len() >= ipv4::MIN_HEADER_LEN {
            Ipv4Packet::new_unchecked(b).decrement_ttl();
        }
    }
    if v6 {
        icmp6_error(net, w, &skb, 1, 3, 0);
    } else {
        icmp4_error(net, w, &skb, 3, 1, 0);
    }
    w.drop_pkt(skb.pkt, DropReason::NeighFailed);
}

/// A packet receive refused: the parameter problem if one is due, then the drop.
pub(crate) fn refuse_v6(net: &Net, w: &mut Worker, skb: Skb, e: RcvError) {
    match e {
        RcvError::Drop(r) => w.drop_pkt(skb.pkt, r),
        RcvError::ParamProblem { code, pointer, reason } => {
            icmp6_error(net, w, &skb, 4, code, pointer);
            w.drop_pkt(skb.pkt, reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::Pool;
    use crate::net::Pipeline;
    use crate::tunables::Tunables;
    use crate::wire::build::{build, L3Spec, L4Spec, PacketSpec};

    /// ip_copy_metadata: every fragment carries the datagram's flow hash, so fq_codel puts
    /// the datagram's pieces in the queue of its flow (a fragment alone has no ports to hash).
    #[test]
    fn fragments_carry_the_datagrams_flow_hash() {
        let pool = Pool::new(16).unwrap();
        let net = Net::new(Tunables::default(), Pipeline::L3fwd);
        let mut w = Worker::new(0, &pool);
        w.add_port(0, None);
        let l3 = L3Spec::V4 { src: [10, 0, 0, 1], dst: [10, 0, 1, 1], tos: 0, ident: 9, dont_frag: false };
        let spec = PacketSpec { l3, l4: L4Spec::Udp { src_port: 1, dst_port: 9 }, frame_len: 3014, ..PacketSpec::default() };
        let mut frame = vec![0u8; 3014];
        let len = build(&spec, &mut frame).expect("frame");
        // (the port's hash, the flow hash): RPS computed one; the port gave one; none yet.
        for (port_hash, hash) in [(0, 0x5eed_0001u32), (0x1111_2222, 0x1111_2222), (0, 0)] {
            let pkt = Pkt { rss_hash: port_hash, ..w.bufs.alloc_copy(&frame[..len]).expect("datagram") };
            let skb = Skb { pkt, network_off: 14, hash, ..Skb::default() };
            fragment_v4(&net, &mut w, skb, 0, 1500, &[0; 12]);
            let frags = std::mem::take(&mut w.txq[0].pkts);
            assert_eq!(frags.len(), 3, "3000 bytes in 1480s");
            assert!(frags.iter().all(|p| p.rss_hash == hash), "hash {hash:#x}: every fragment carries it");
            for p in frags {
                w.bufs.free(p);
            }
        }
        assert_eq!(w.bufs.in_use(), 0);
    }
}
