//! Local delivery: ARP and neighbour discovery, ICMP/ICMPv6 echo, a UDP echo service (port
//! 7), and in-process UDP sockets that receive in batches.

use super::forward::{icmp4_error, icmp6_error, send_v4, send_v6};
use super::neigh::{Learnt, NeighAddr, Teach};
use super::route::{NeighEntry, NH_BROADCAST};
pub use super::socket::{SocketError, SocketId, Sockets, UdpSocket, UDP_ECHO_PORT};
use crate::buf::skb::{PktType, Skb};
use crate::buf::{BufCache, Pkt, FRAME_SIZE};
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::wire::arp::{self, ArpPacket};
use crate::wire::ethernet::{EthernetFrame, HEADER_LEN as ETH_HEADER_LEN};
use crate::wire::icmp::{self, icmpv4, icmpv6, Icmpv4Packet, Icmpv6Packet};
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::Ipv6Packet;
use crate::wire::udp::{self, UdpPacket};
use crate::wire::vlan::{VlanHeader, HEADER_LEN as VLAN_TAG_LEN};
use crate::wire::EtherType;
use crate::wire::{checksum, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP};
use crate::worker::Worker;

/// A neighbour learned from ARP/NDP (`neigh::learn`: requests and solicitations create,
/// answers only update; unicast replies and solicited advertisements confirm). The packets
/// this worker held for it leave at once, ahead of every packet received after this one.
fn learn(net: &Net, w: &mut Worker, e: NeighEntry, teach: Teach, confirms: bool) -> Learnt {
    let (port, addr, mac) = match e {
        NeighEntry::V4(port, a, mac) => (port, NeighAddr::V4(a), mac),
        NeighEntry::V6(port, a, mac) => (port, NeighAddr::V6(a), mac),
        NeighEntry::Forget4(..) | NeighEntry::Forget6(..) => return Learnt::Known,
    };
    let learnt = super::neigh::learn(net, w, port, addr, mac, teach, confirms);
    if learnt == Learnt::Known && super::neigh::release_answered(net, w, port, addr) {
        super::forward::forward_released(net, w);
    }
    learnt
}

/// What UDP demux decided for one datagram.
enum UdpFate {
    Socket(u32, Pkt),
    Echo,
    Drop(DropReason),
    PortUnreachable,
}

#[inline]
fn udp_classify(net: &Net, w: &Worker, s: &Skb, v6: bool) -> UdpFate {
    let data = w.bufs.data(s.pkt);
    let l3 = s.network_off as usize;
    let l4 = s.transport_off as usize;
    let Some(bytes) = data.get(l4..).filter(|b| b.len() >= udp::HEADER_LEN) else {
        return UdpFate::Drop(DropReason::PktTooSmall);
    };
    let udp = UdpPacket::new_unchecked(bytes);
    let ulen = udp.len() as usize;
    if ulen < udp::HEADER_LEN || ulen > bytes.len() + s.pkt.frag_len as usize {
        return UdpFate::Drop(DropReason::PktTooSmall);
    }
    let csum = udp.checksum();
    // Over the whole datagram: a chain's fragments too.
    let payload_sum = || w.bufs.sum_be16_range(s.pkt, l4, ulen);
    let ok = if v6 {
        let ip = Ipv6Packet::new_unchecked(&data[l3..]);
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        csum != 0 && checksum::fold(checksum::pseudo_header_v6(&src, &dst, IPPROTO_UDP, ulen as u32) + payload_sum()) == 0xffff
    } else {
        let ip = Ipv4Packet::new_unchecked(&data[l3..]);
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        csum == 0 || checksum::fold(checksum::pseudo_header_v4(&src, &dst, IPPROTO_UDP, ulen as u16) + payload_sum()) == 0xffff
    };
    if !ok {
        return UdpFate::Drop(DropReason::L4Csum);
    }
    let dport = udp.dst_port();
    if dport == UDP_ECHO_PORT {
        return UdpFate::Echo;
    }
    let sock = w.sockets.lookup(dport);
    if sock.is_some() {
        // RFS: the flow is consumed where the socket's reader runs (sock_rps_record_flow).
        net.rps.sock_flow.record(s.hash, w.sockets.reader_cpu.unwrap_or(w.id));
    }
    match sock {
        // A chain's payload keeps its fragments (the socket reader frees them with the head).
        Some(i) if s.pkt.is_chained() => UdpFate::Socket(i, Pkt { off: s.pkt.off + l4 as u16 + 8, len: (bytes.len() - 8) as u16, ..s.pkt }),
        Some(i) => UdpFate::Socket(i, Pkt { off: s.pkt.off + l4 as u16 + 8, len: ulen as u16 - 8, frag_len: 0, ..s.pkt }),
        None => UdpFate::PortUnreachable,
    }
}

/// ICMP timestamp request and reply (RFC 792; `wire::icmp` names only the types it builds).
const ICMP_TIMESTAMP: u8 = 13;
const ICMP_TIMESTAMP_REPLY: u8 = 14;

/// Swaps a UDP header's source and destination ports (an echo's answer).
fn swap_udp_ports(l4: &mut [u8]) {
    let mut udp = UdpPacket::new_unchecked(l4);
    let (sp, dp) = (udp.src_port(), udp.dst_port());
    udp.set_src_port(dp);
    udp.set_dst_port(sp);
}

fn addr16(b: &[u8]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    a
}

/// Appends datagrams to a socket queue; what does not fit is dropped.
fn socket_enqueue(w: &mut Worker, sock: u32, pkts: &[Pkt]) {
    let Some(s) = w.sockets.udp.get_mut(sock as usize) else {
        return;
    };
    let room = s.capacity.saturating_sub(s.queue.len()).min(pkts.len());
    s.queue.extend(pkts[..room].iter().copied());
    s.received += room as u64;
    w.c.local += room as u64;
    for p in &pkts[room..] {
        w.c.drop(DropReason::SocketRcvbuff);
        w.bufs.free(*p);
    }
}

/// Turns an IPv4 packet around in place (echo replies): swap addresses, fresh TTL, the
/// flags of the stack that answers (`dont_frag`: the ICMP socket sends without DF, a UDP
/// socket with it) and header checksum. The request is delivered; the reply is a packet we
/// originate.
fn reply_v4(net: &Net, w: &mut Worker, s: &Skb, dont_frag: bool) -> [u8; 4] {
    let ttl = net.tun.ip_default_ttl;
    let l3 = s.network_off as usize;
    let mut ip = Ipv4Packet::new_unchecked(&mut w.bufs.data_mut(s.pkt)[l3..]);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    ip.set_src_addr(&dst);
    ip.set_dst_addr(&src);
    // The answering stack's flags: DF or nothing (a reply is whole).
    ip.set_unfragmented(dont_frag);
    ip.set_ttl(ttl);
    ip.fill_checksum();
    w.c.local += 1;
    w.c.originated += 1;
    src
}

/// `udp_unexpected_gso` / `udp_rcv_segment`: a UDP fraglist packet GRO built is split back
/// into its datagrams before local delivery (the kernel segments it in `udp_queue_rcv_skb`),
/// each then delivered on its own. The datagrams past the first are originated (as GSO on
/// transmit counts them), so the ledger balances with the merged count.
#[cold]
#[inline(never)]
fn udp_rcv_segment(net: &Net, w: &mut Worker, s: Skb, v6: bool) {
    let mut segs = std::mem::take(&mut w.gso_scratch);
    segs.clear();
    match crate::tx::gso::segment(&mut w.bufs, &s, &mut segs) {
        Ok(n) => {
            w.c.originated += n as u64 - 1;
            for &p in &segs {
                let one = Skb { pkt: p, gso_size: 0, gso_segs: 0, gso_type: 0, ..s };
                if v6 {
                    deliver_one_v6(net, w, one);
                } else {
                    deliver_one_v4(net, w, one);
                }
            }
        }
        Err(crate::tx::gso::GsoError::NoBuffer) => w.drop_pkt(s.pkt, DropReason::NoBuffer),
        Err(crate::tx::gso::GsoError::Malformed) => w.drop_pkt(s.pkt, DropReason::PktTooSmall),
    }
    segs.clear();
    w.gso_scratch = segs;
}

fn deliver_one_v4(net: &Net, w: &mut Worker, s: Skb) {
    if s.gso_type & crate::buf::skb::gso_type::UDP_L4 != 0 {
        return udp_rcv_segment(net, w, s, false);
    }
    if is_frag_v4(&w.bufs, &s) {
        return w.drop_pkt(s.pkt, DropReason::IpFragLocal);
    }
    match s.ip_proto {
        IPPROTO_ICMP => icmp_rcv(net, w, s),
        IPPROTO_UDP => match udp_classify(net, w, &s, false) {
            UdpFate::Socket(i, p) => socket_enqueue(w, i, &[p]),
            UdpFate::Echo => udp_echo_v4(net, w, s),
            UdpFate::Drop(r) => w.drop_pkt(s.pkt, r),
            UdpFate::PortUnreachable => {
                icmp4_error(net, w, &s, 3, 3, 0);
                w.drop_pkt(s.pkt, DropReason::NoSocket);
            }
        },
        // No TCP stack: like a closed port (the kernel would answer with a RST).
        IPPROTO_TCP => w.drop_pkt(s.pkt, DropReason::NoSocket),
        _ => {
            icmp4_error(net, w, &s, 3, 2, 0);
            w.drop_pkt(s.pkt, DropReason::UnhandledL4);
        }
    }
}

/// Replaces the options of a packet about to be answered in place with `opts` (a multiple of
/// 4 bytes, no longer than the options it had): the transport part moves up, lengths follow.
/// A chain keeps its options (it is not reshaped in place).
#[cold]
#[inline(never)]
fn set_reply_options_v4(bufs: &mut BufCache, s: &mut Skb, opts: &[u8]) {
    let l3 = s.network_off as usize;
    let (old_l4, new_l4) = (s.transport_off as usize, l3 + 20 + opts.len());
    if s.pkt.is_chained() || new_l4 > old_l4 {
        return;
    }
    let d = bufs.data_mut(s.pkt);
    let end = d.len();
    d.copy_within(old_l4..end, new_l4);
    d[l3 + 20..new_l4].copy_from_slice(opts);
    let shrink = old_l4 - new_l4;
    let mut ip = Ipv4Packet::new_unchecked(&mut d[l3..]);
    ip.set_version_and_header_len(20 + opts.len());
    ip.set_total_len((end - shrink - l3) as u16);
    s.pkt.len -= shrink as u16;
    s.transport_off = new_l4 as u16;
}

/// ip_options_echo for an echo reply: the request's Record Route, with the address it was
/// sent to recorded as the kernel records it on receive and again on output if room is left;
/// no other option comes back.
#[cold]
#[inline(never)]
fn echo_reply_options_v4(bufs: &mut BufCache, s: &mut Skb) {
    let l3 = s.network_off as usize;
    let (opts, n) = {
        let ip = &mut bufs.data_mut(s.pkt)[l3..];
        let ours = Ipv4Packet::new_unchecked(&*ip).dst_addr();
        if super::ipv4_hdr::record_route(ip, ours) {
            super::ipv4_hdr::record_route(ip, ours);
        }
        super::ipv4_hdr::echo_options(ip)
    };
    set_reply_options_v4(bufs, s, &opts[..n]);
}

fn icmp_rcv(net: &Net, w: &mut Worker, mut s: Skb) {
    let l4 = s.transport_off as usize;
    let (typ, ok) = {
        let d = w.bufs.data(s.pkt);
        match d.get(l4..) {
            Some(icmp) if icmp.len() >= icmp::HEADER_LEN => {
                (Icmpv4Packet::new_unchecked(icmp).msg_type(), checksum::fold(w.bufs.sum_be16_from(s.pkt, l4)) == 0xffff)
            }
            _ => return w.drop_pkt(s.pkt, DropReason::PktTooSmall),
        }
    };
    if !ok {
        return w.drop_pkt(s.pkt, DropReason::L4Csum);
    }
    // icmp_echo_ignore_broadcasts (the kernel's default, 1, fixed here): a request to a
    // subnet's broadcast address is not answered (no smurf amplifier); no other type is.
    if typ != icmpv4::ECHO_REQUEST && typ != ICMP_TIMESTAMP || s.nh == NH_BROADCAST {
        return w.drop_pkt(s.pkt, DropReason::IcmpIgnored);
    }
    if typ == ICMP_TIMESTAMP {
        return icmp_timestamp(net, w, s);
    }
    if s.transport_off - s.network_off > 20 {
        echo_reply_options_v4(&mut w.bufs, &mut s);
    }
    let l4 = s.transport_off as usize;
    let dst = reply_v4(net, w, &s, false);
    let mut icmp = Icmpv4Packet::new_unchecked(&mut w.bufs.data_mut(s.pkt)[l4..]);
    icmp.set_msg_type(icmpv4::ECHO_REPLY);
    // Only the type changed: patch the checksum for the (type, code) word's difference.
    let c = checksum::update16(icmp.checksum(), u16::from(icmpv4::ECHO_REQUEST) << 8, u16::from(icmpv4::ECHO_REPLY) << 8);
    icmp.set_checksum(c);
    send_v4(net, w, s.pkt, dst);
}

/// icmp_timestamp: a timestamp reply (type 14) carrying the request's originate time and
/// our receive and transmit times, milliseconds since midnight UTC (RFC 792). The reply is
/// 20 bytes of ICMP whatever the request carried after them; options come back as for an
/// echo. (A request shorter than 20 bytes, or a chain, is not answered.)
#[cold]
#[inline(never)]
fn icmp_timestamp(net: &Net, w: &mut Worker, mut s: Skb) {
    const REPLY_LEN: usize = 20;
    if s.pkt.is_chained() || w.bufs.data(s.pkt).len() < s.transport_off as usize + REPLY_LEN {
        return w.drop_pkt(s.pkt, DropReason::PktTooSmall);
    }
    if s.transport_off - s.network_off > 20 {
        echo_reply_options_v4(&mut w.bufs, &mut s);
    }
    let (l3, l4) = (s.network_off as usize, s.transport_off as usize);
    s.pkt.len = (l4 + REPLY_LEN) as u16;
    Ipv4Packet::new_unchecked(&mut w.bufs.data_mut(s.pkt)[l3..]).set_total_len((l4 + REPLY_LEN - l3) as u16);
    let dst = reply_v4(net, w, &s, false);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let ms = ((now.as_secs() % 86_400) * 1000 + u64::from(now.subsec_millis())) as u32;
    let mut icmp = Icmpv4Packet::new_unchecked(&mut w.bufs.data_mut(s.pkt)[l4..l4 + REPLY_LEN]);
    icmp.set_msg_type(ICMP_TIMESTAMP_REPLY);
    icmp.set_code(0);
    // After the identifier and sequence: originate (kept), receive and transmit times.
    let times = icmp.data_mut();
    times[4..8].copy_from_slice(&ms.to_be_bytes());
    times[8..12].copy_from_slice(&ms.to_be_bytes());
    icmp.fill_checksum();
    send_v4(net, w, s.pkt, dst);
}

/// A datagram from port 0 reaches the echo service but gets no answer: a socket cannot send
/// to port 0 (udp_sendmsg: EINVAL). It counts as delivered. True when so.
fn echo_to_port_zero(w: &mut Worker, s: &Skb) -> bool {
    let l4 = s.transport_off as usize;
    if UdpPacket::new_unchecked(&w.bufs.data(s.pkt)[l4..]).src_port() != 0 {
        return false;
    }
    w.c.local += 1;
    w.bufs.free(s.pkt);
    true
}

fn udp_echo_v4(net: &Net, w: &mut Worker, mut s: Skb) {
    if echo_to_port_zero(w, &s) {
        return;
    }
    // A socket's answer carries no IP options.
    if s.transport_off - s.network_off > 20 {
        set_reply_options_v4(&mut w.bufs, &mut s, &[]);
    }
    // A socket's TOS (0), not the request's: reply_v4 keeps the byte for ICMP's replies.
    let (l3, l4) = (s.network_off as usize, s.transport_off as usize);
    let mut ip = Ipv4Packet::new_unchecked(&mut w.bufs.data_mut(s.pkt)[l3..]);
    ip.set_tos(0);
    // A datagram to a subnet's broadcast address is answered from the port's own address
    // (a socket's source for the sender's route: one on the sender's link if any); a port
    // without one cannot answer it.
    let to_broadcast = s.nh == NH_BROADCAST;
    if to_broadcast {
        let from = ip.src_addr();
        let Some(own) = net.ifaces.get(s.rx_port as usize).and_then(|i| i.v4_on_link(from).or(i.primary_v4())) else {
            w.c.local += 1;
            return w.bufs.free(s.pkt);
        };
        ip.set_dst_addr(&own);
    }
    let dst = reply_v4(net, w, &s, true);
    swap_udp_ports(&mut w.bufs.data_mut(s.pkt)[l4..]);
    // Swapping ports and addresses leaves the UDP checksum's sum unchanged; a new source,
    // or a request without a checksum (a socket always sends one), needs it computed.
    if to_broadcast || UdpPacket::new_unchecked(&w.bufs.data(s.pkt)[l4..]).checksum() == 0 {
        refill_udp_checksum(&mut w.bufs, s.pkt, l3, l4, false);
    }
    send_v4(net, w, s.pkt, dst);
}

/// Computes the UDP checksum of the datagram at `l4` afresh (IPv4 or IPv6 header at `l3`;
/// a sum of 0 is sent as 0xffff, RFC 768).
fn refill_udp_checksum(bufs: &mut BufCache, p: Pkt, l3: usize, l4: usize, v6: bool) {
    let d = bufs.data_mut(p);
    let mut udp = UdpPacket::new_unchecked(&mut d[l4..]);
    let ulen = udp.len();
    udp.set_checksum(0);
    let pseudo = if v6 {
        let ip = Ipv6Packet::new_unchecked(&d[l3..]);
        checksum::pseudo_header_v6(&ip.src_addr(), &ip.dst_addr(), IPPROTO_UDP, u32::from(ulen))
    } else {
        let ip = Ipv4Packet::new_unchecked(&d[l3..]);
        checksum::pseudo_header_v4(&ip.src_addr(), &ip.dst_addr(), IPPROTO_UDP, ulen)
    };
    let c = match !checksum::fold(pseudo + bufs.sum_be16_range(p, l4, ulen as usize)) {
        0 => 0xffff,
        c => c,
    };
    UdpPacket::new_unchecked(&mut bufs.data_mut(p)[l4..]).set_checksum(c);
}

/// Single mode: one locally addressed IPv4 packet.
pub(crate) fn deliver_v4(net: &Net, w: &mut Worker, s: Skb) {
    deliver_one_v4(net, w, s);
}

/// List mode: a run addressed to us. Consecutive datagrams for the same socket are
/// appended to its queue at once.
pub(crate) fn deliver_list_v4(net: &Net, w: &mut Worker, run: &mut [Skb]) {
    deliver_list(net, w, run, false);
}

pub(crate) fn deliver_list_v6(net: &Net, w: &mut Worker, run: &mut [Skb]) {
    deliver_list(net, w, run, true);
}

fn deliver_list(net: &Net, w: &mut Worker, run: &mut [Skb], v6: bool) {
    let t0 = w.clock();
    let mut batch: [Pkt; 64] = [Pkt::default(); 64];
    let mut nb = 0usize;
    let mut batch_sock = u32::MAX;
    for &s in run.iter() {
        // (IPv6 extension headers take the one-packet path, which processes them first.)
        let plain = if v6 { s.transport_off - s.network_off == 40 } else { !is_frag_v4(&w.bufs, &s) };
        // (A UDP GRO packet takes it too: it is split into its datagrams first.)
        let fate = (s.ip_proto == IPPROTO_UDP && plain && s.gso_segs <= 1).then(|| udp_classify(net, w, &s, v6));
        match fate {
            Some(UdpFate::Socket(i, p)) => {
                if (i != batch_sock || nb == batch.len()) && nb > 0 {
                    socket_enqueue(w, batch_sock, &batch[..nb]);
                    nb = 0;
                }
                batch_sock = i;
                batch[nb] = p;
                nb += 1;
            }
            _ => {
                // Anything else keeps its place in order relative to the socket batch.
                if nb > 0 {
                    socket_enqueue(w, batch_sock, &batch[..nb]);
                    nb = 0;
                }
                if v6 {
                    deliver_one_v6(net, w, s);
                } else {
                    deliver_one_v4(net, w, s);
                }
            }
        }
    }
    if nb > 0 {
        socket_enqueue(w, batch_sock, &batch[..nb]);
    }
    w.stage_done(Stage::Local, run.len(), t0);
}

/// Any fragment, the first included (MF or an offset): sluice does not reassemble.
fn is_frag_v4(bufs: &BufCache, s: &Skb) -> bool {
    Ipv4Packet::new_unchecked(&bufs.data(s.pkt)[s.network_off as usize..]).is_fragment()
}

pub(crate) fn deliver_v6(net: &Net, w: &mut Worker, s: Skb) {
    deliver_one_v6(net, w, s);
}

fn deliver_one_v6(net: &Net, w: &mut Worker, s: Skb) {
    if s.gso_type & crate::buf::skb::gso_type::UDP_L4 != 0 {
        return udp_rcv_segment(net, w, s, true);
    }
    if s.transport_off - s.network_off > 40 || !matches!(s.ip_proto, IPPROTO_ICMPV6 | IPPROTO_UDP | IPPROTO_TCP) {
        return deliver_v6_slow(net, w, s);
    }
    deliver_upper_v6(net, w, s);
}

/// Local IPv6 delivery past the fixed header: extension headers processed in order, an
/// unknown upper-layer protocol answered with a parameter problem (unrecognized next header,
/// ip6_protocol_deliver_rcu), "no next header" (59) dropped silently.
#[cold]
#[inline(never)]
fn deliver_v6_slow(net: &Net, w: &mut Worker, s: Skb) {
    let nhoff = match super::ipv6_hdr::local_headers(&w.bufs, &s) {
        Ok(n) => n,
        Err(e) => return super::forward::refuse_v6(net, w, s, e),
    };
    match s.ip_proto {
        IPPROTO_ICMPV6 | IPPROTO_UDP | IPPROTO_TCP | 44 => deliver_upper_v6(net, w, s),
        59 => w.drop_pkt(s.pkt, DropReason::UnhandledL4),
        _ => {
            icmp6_error(net, w, &s, 4, 1, nhoff as u32);
            w.drop_pkt(s.pkt, DropReason::UnhandledL4);
        }
    }
}

/// Moves the upper-layer header of a packet about to be answered in place right after the
/// fixed header: replies are built fresh, as icmpv6_echo_reply builds them, without the
/// request's extension headers. A chain keeps them (it is not reshaped in place).
#[cold]
#[inline(never)]
fn strip_ext_headers_v6(bufs: &mut BufCache, s: &mut Skb) {
    let l3 = s.network_off as usize;
    let (old_l4, new_l4) = (s.transport_off as usize, l3 + 40);
    if s.pkt.is_chained() || old_l4 <= new_l4 {
        return;
    }
    let d = bufs.data_mut(s.pkt);
    let end = d.len();
    d.copy_within(old_l4..end, new_l4);
    let mut ip = Ipv6Packet::new_unchecked(&mut d[l3..]);
    ip.set_next_header(s.ip_proto);
    ip.set_payload_len((end - old_l4) as u16);
    s.pkt.len -= (old_l4 - new_l4) as u16;
    s.transport_off = new_l4 as u16;
}

fn deliver_upper_v6(net: &Net, w: &mut Worker, s: Skb) {
    match s.ip_proto {
        IPPROTO_ICMPV6 => icmp6_rcv(net, w, s),
        IPPROTO_UDP => match udp_classify(net, w, &s, true) {
            UdpFate::Socket(i, p) => socket_enqueue(w, i, &[p]),
            UdpFate::Echo => udp_echo_v6(net, w, s),
            UdpFate::Drop(r) => w.drop_pkt(s.pkt, r),
            UdpFate::PortUnreachable => {
                icmp6_error(net, w, &s, 1, 4, 0);
                w.drop_pkt(s.pkt, DropReason::NoSocket);
            }
        },
        IPPROTO_TCP => w.drop_pkt(s.pkt, DropReason::NoSocket),
        44 => w.drop_pkt(s.pkt, DropReason::IpFragLocal),
        _ => w.drop_pkt(s.pkt, DropReason::UnhandledL4),
    }
}

/// Turns an IPv6 packet around in place. A multicast destination (e.g. ff02::1) or a
/// subnet-router anycast one is answered from the interface's own address (the kernel
/// picks a unicast source then: anycast_src_echo_reply is 0). The reply's flow label is
/// `flow_label` (the kernel reflects none unless net.ipv6.flowlabel_reflect asks);
/// `keep_class` keeps the request's traffic class (icmpv6_echo_reply), otherwise it is 0
/// (a socket's or neighbour discovery's own). Returns the reply's destination and whether
/// the source changed (checksum must then be recomputed, not just kept).
fn reply_v6(net: &Net, w: &mut Worker, s: &Skb, hop_limit: u8, keep_class: bool, flow_label: u32) -> ([u8; 16], bool) {
    let own = net.ifaces.get(s.rx_port as usize).and_then(|i| i.primary_v6());
    let l3 = s.network_off as usize;
    let mut ip = Ipv6Packet::new_unchecked(&mut w.bufs.data_mut(s.pkt)[l3..]);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let unicast = dst[0] != 0xff && !net.routes.is_anycast_v6(dst);
    let (new_src, changed) = if unicast { (dst, false) } else { (own.unwrap_or(dst), true) };
    ip.set_src_addr(&new_src);
    ip.set_dst_addr(&src);
    ip.set_hop_limit(hop_limit);
    if !keep_class {
        ip.set_traffic_class(0);
    }
    ip.set_flow_label(flow_label);
    w.c.local += 1;
    w.c.originated += 1;
    (src, changed)
}

/// Fills the ICMPv6 checksum of `p` (IPv6 header at `l3`, ICMPv6 `l4` bytes after it) over
/// the message to the packet's end, fragments included.
fn icmp6_checksum(bufs: &mut BufCache, p: Pkt, l3: usize, l4: usize) {
    let at = l3 + l4;
    let (src, dst) = {
        let ip = &mut bufs.data_mut(p)[l3..];
        Icmpv6Packet::new_unchecked(&mut ip[l4..]).set_checksum(0);
        let ip = Ipv6Packet::new_unchecked(&*ip);
        (ip.src_addr(), ip.dst_addr())
    };
    let len = p.total_len().saturating_sub(at);
    let sum = checksum::pseudo_header_v6(&src, &dst, IPPROTO_ICMPV6, len as u32) + bufs.sum_be16_from(p, at);
    let c = !checksum::fold(sum);
    bufs.data_mut(p)[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
}

/// net.ipv6.flowlabel_reflect's bit for ICMPv6 echo replies (the kernel's
/// FLOWLABEL_REFLECT_ICMPV6_ECHO_REPLIES).
const FLOWLABEL_REFLECT_ICMPV6_ECHO_REPLIES: u8 = 4;

fn icmp6_rcv(net: &Net, w: &mut Worker, s: Skb) {
    let l3 = s.network_off as usize;
    let l4 = s.transport_off as usize - l3;
    let (typ, ok, target) = {
        let ip = &w.bufs.data(s.pkt)[l3..];
        let Some(icmp) = ip.get(l4..).filter(|i| i.len() >= 8) else {
            return w.drop_pkt(s.pkt, DropReason::PktTooSmall);
        };
        let ip6 = Ipv6Packet::new_unchecked(ip);
        let (src, dst) = (ip6.src_addr(), ip6.dst_addr());
        let icmp = Icmpv6Packet::new_unchecked(icmp);
        let len = s.pkt.total_len() - l3 - l4;
        let ok = checksum::fold(checksum::pseudo_header_v6(&src, &dst, IPPROTO_ICMPV6, len as u32) + w.bufs.sum_be16_from(s.pkt, l3 + l4))
            == 0xffff;
        // Neighbour discovery's target address, right after the 8-byte header.
        let target = icmp.data().get(..16).map(addr16);
        (icmp.msg_type(), ok, target)
    };
    if !ok {
        return w.drop_pkt(s.pkt, DropReason::L4Csum);
    }
    match typ {
        icmpv6::ECHO_REQUEST => {
            let mut s = s;
            if l4 > 40 {
                strip_ext_headers_v6(&mut w.bufs, &mut s);
            }
            let l4 = s.transport_off as usize - l3;
            let reflect = net.tun.flowlabel_reflect & FLOWLABEL_REFLECT_ICMPV6_ECHO_REPLIES != 0;
            let label = if reflect { Ipv6Packet::new_unchecked(&w.bufs.data(s.pkt)[l3..]).flow_label() } else { 0 };
            let (dst, _) = reply_v6(net, w, &s, 64, true, label);
            Icmpv6Packet::new_unchecked(&mut w.bufs.data_mut(s.pkt)[l3 + l4..]).set_msg_type(icmpv6::ECHO_REPLY);
            icmp6_checksum(&mut w.bufs, s.pkt, l3, l4);
            send_v6(net, w, s.pkt, dst, s.rx_port);
        }
        // Answered in place in one buffer (a solicitation is small; a chained one is not answered).
        icmpv6::NEIGHBOR_SOLICIT if !s.pkt.is_chained() => neighbour_solicit(net, w, s, l4, target),
        icmpv6::NEIGHBOR_ADVERT => neighbour_advert(net, w, s, l4, target),
        _ => w.drop_pkt(s.pkt, DropReason::IcmpIgnored),
    }
}

/// The link-layer address in the first option of an NS or NA, when it is option `opt`
/// (1 = source, 2 = target) of one 8-byte unit.
fn lladdr_option(w: &Worker, s: &Skb, l4: usize, opt: u8) -> Option<[u8; 6]> {
    let o = s.network_off as usize + l4 + 24;
    match w.bufs.data(s.pkt).get(o..o + 8) {
        Some(op) if op[0] == opt && op[1] == 1 => Some([op[2], op[3], op[4], op[5], op[6], op[7]]),
        _ => None,
    }
}

/// A solicitation's source link-layer address makes (or updates) the sender's entry. False
/// when the neighbour table had no room for it (nothing to learn is no failure).
fn learn_from_solicit(net: &Net, w: &mut Worker, s: &Skb, l4: usize) -> bool {
    let Some(mac) = lladdr_option(w, s, l4, 1) else { return true };
    let who = Ipv6Packet::new_unchecked(&w.bufs.data(s.pkt)[s.network_off as usize..]).src_addr();
    learn(net, w, NeighEntry::V6(s.rx_port, who, mac), Teach::Create, false) != Learnt::NoRoom
}

/// ndisc_recv_na: an advertisement updates the target's entry, if there is one, with its
/// MAC (option 2; `accept_untracked_na` = 0: no entry is made) once it passes RFC
/// 4861 §7.1.2's checks, as ndisc_rcv and ndisc_recv_na make them: hop limit 255 (it was
/// sent on this link: no router forwarded it, so no off-link host can rewrite a neighbour),
/// code 0, at least 24 bytes, a target that is not multicast, and not "solicited" when sent
/// to a multicast address. Anything else is ignored.
fn neighbour_advert(net: &Net, w: &mut Worker, s: Skb, l4: usize, target: Option<[u8; 16]>) {
    let l3 = s.network_off as usize;
    let valid = {
        let bytes = &w.bufs.data(s.pkt)[l3..];
        let ip = Ipv6Packet::new_unchecked(bytes);
        let icmp = bytes.get(l4..).unwrap_or(&[]);
        let solicited = icmp.get(4).is_some_and(|f| f & 0x40 != 0);
        ip.hop_limit() == 255
            && icmp.len() >= 24
            && Icmpv6Packet::new_unchecked(icmp).code() == 0
            && target.is_some_and(|t| t[0] != 0xff)
            && !(ip.dst_addr()[0] == 0xff && solicited)
    };
    if !valid {
        return w.drop_pkt(s.pkt, DropReason::IcmpIgnored);
    }
    // Updates a neighbour we know or are resolving, never makes one (so it cannot run out of
    // room); as neigh_update with ndisc_recv_na's flags: without the Override flag a MAC
    // other than a known entry's is not taken (WEAK_OVERRIDE: the kernel only marks the
    // entry stale), an entry being resolved takes it whatever the flag; a solicited
    // advertisement without the option (RFC 4861 allows it in answer to a unicast probe)
    // confirms the entry as it is.
    let flags = w.bufs.data(s.pkt).get(l3 + l4 + 4).copied().unwrap_or(0);
    let (solicited, override_) = (flags & 0x40 != 0, flags & 0x20 != 0);
    let target = target.unwrap_or([0; 16]);
    match lladdr_option(w, &s, l4, 2) {
        Some(mac) => {
            let teach = if override_ { Teach::Update } else { Teach::UpdateSameMac };
            learn(net, w, NeighEntry::V6(s.rx_port, target, mac), teach, solicited);
        }
        None if solicited => super::neigh::confirm(net, w, s.rx_port, NeighAddr::V6(target)),
        None => {}
    }
    w.c.local += 1;
    w.bufs.free(s.pkt);
}

/// ndisc_recv_ns: a solicitation for one of our addresses on this link is answered with an
/// advertisement carrying our MAC. RFC 4861 §7.1.1 validity first (hop limit 255, code 0, at
/// least 24 bytes; a DAD probe — unspecified source — goes to a solicited-node address and
/// carries no source link-layer option). A DAD probe for an address we hold is defended with
/// an advertisement to all-nodes (ff02::1), not solicited; otherwise it goes back to the
/// sender, solicited. Router flag when forwarding; override and our link-layer address
/// option as below (ndisc_send_na's `override` and `inc_opt`).
fn neighbour_solicit(net: &Net, w: &mut Worker, s: Skb, l4: usize, target: Option<[u8; 16]>) {
    let l3 = s.network_off as usize;
    let iface = net.ifaces.get(s.rx_port as usize);
    let unicast = target.is_some_and(|t| iface.is_some_and(|i| i.v6.iter().any(|a| a.0 == t)));
    // An anycast target is answered without the override flag (ndisc_recv_ns: override
    // only for an address of ours), so a unicast owner's advertisement wins.
    let anycast = !unicast && target.is_some_and(|t| net.routes.anycast_v6_of(s.rx_port).any(|a| a == t));
    let mine = unicast || anycast;
    let (valid, dad, to_group) = {
        let bytes = &w.bufs.data(s.pkt)[l3..];
        let ip = Ipv6Packet::new_unchecked(bytes);
        let icmp = bytes.get(l4..).unwrap_or(&[]);
        let dad = ip.src_addr() == [0; 16];
        let slla = icmp.get(24..26).is_some_and(|o| o[0] == 1 && o[1] == 1);
        let dst = ip.dst_addr();
        let solicited_node = dst[..13] == [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff];
        let valid = ip.hop_limit() == 255
            && icmp.len() >= 24
            && Icmpv6Packet::new_unchecked(icmp).code() == 0
            && !(dad && (slla || !solicited_node));
        (valid, dad, dst[0] == 0xff)
    };
    if !mine || !valid {
        return w.drop_pkt(s.pkt, DropReason::IcmpIgnored);
    }
    if !dad && !learn_from_solicit(net, w, &s, l4) {
        // ndisc_recv_ns answers only once the sender's entry exists.
        return w.drop_pkt(s.pkt, DropReason::NeighCreatefail);
    }
    let mac = net.ifaces[s.rx_port as usize].mac;
    let tgt = target.unwrap_or([0; 16]);
    // From the target when it is our unicast address; an anycast one is answered from the
    // port's own address (ndisc_send_na: "for anycast, solicited_addr != src_addr").
    reply_v6(net, w, &s, 255, false, 0);
    // ndisc_send_na's inc_opt: the target link-layer address option only in answer to a
    // solicitation sent to a group (RFC 4861 7.2.4: a unicast one, a reachability probe,
    // comes from a node that knows it). The advertisement (24 or 32 bytes of ICMPv6) may be
    // longer than the solicitation: grow the packet within its frame first.
    let plen = if to_group { 32usize } else { 24 };
    let total = l3 + l4 + plen;
    let mut p = s.pkt;
    p.len = total as u16;
    let (ip_bytes, icmp_bytes) = w.bufs.data_mut(p)[l3..].split_at_mut(l4);
    let mut ip = Ipv6Packet::new_unchecked(ip_bytes);
    if unicast {
        ip.set_src_addr(&tgt);
    }
    const ALL_NODES: [u8; 16] = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    if dad {
        ip.set_dst_addr(&ALL_NODES);
    }
    ip.set_payload_len((l4 - 40 + plen) as u16);
    let router: u8 = if net.tun.ipv6_forwarding != 0 { 0x80 } else { 0 };
    let solicited: u8 = if dad { 0 } else { 0x40 };
    let mut icmp = Icmpv6Packet::new_unchecked(&mut icmp_bytes[..plen]);
    icmp.set_msg_type(icmpv6::NEIGHBOR_ADVERT);
    icmp.set_code(0);
    // Router, solicited and override flags (override for our unicast address asked by a
    // group solicitation only, as ndisc_recv_ns passes it), then the target (already in
    // place: the solicitation's) and its link-layer address option.
    let overrides: u8 = if unicast && to_group { 0x20 } else { 0 };
    icmp.set_rest_of_header(u32::from(router | solicited | overrides) << 24);
    if to_group {
        icmp.data_mut()[16..24].copy_from_slice(&[2, 1, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]]);
    }
    icmp6_checksum(&mut w.bufs, p, l3, l4);
    // The neighbour is on the link the solicitation came from: answer there directly (to
    // the all-nodes group's MAC for a DAD defence).
    let mut eth = EthernetFrame::new_unchecked(w.bufs.data_mut(p));
    let dst_mac = if dad { [0x33, 0x33, 0, 0, 0, 1] } else { eth.src() };
    eth.set_dst(&dst_mac);
    eth.set_src(&mac);
    if let Some(p) = retag(w, &s, p) {
        crate::tx::enqueue(net, w, s.rx_port, p);
    }
}

/// A reply sent straight back on the link a tagged request came from keeps its VLAN tag
/// (core_step stripped it on receive): push the tag back in front of the ethertype.
///
/// The tag goes into the headroom. With less than 4 bytes of it (an XDP program may have
/// pulled the head to the front of the frame) the linear part first moves further into its
/// frame, as skb_cow_head makes room; when the frame has no 4 bytes to spare either, the
/// reply is dropped as `nobuf` (the kernel's failed head expansion), never sent untagged
/// onto the native VLAN.
fn retag(w: &mut Worker, s: &Skb, mut p: Pkt) -> Option<Pkt> {
    if !s.vlan_present {
        return Some(p);
    }
    if (p.off as usize) < VLAN_TAG_LEN {
        let shift = VLAN_TAG_LEN - p.off as usize;
        let (start, len) = (p.off as usize, p.len as usize);
        if start + len + shift > FRAME_SIZE {
            w.drop_pkt(p, DropReason::NoBuffer);
            return None;
        }
        w.bufs.frame_mut(p.buf).copy_within(start..start + len, start + shift);
        p.off += shift as u16;
    }
    p.off -= VLAN_TAG_LEN as u16;
    p.len += VLAN_TAG_LEN as u16;
    let d = w.bufs.data_mut(p);
    // The two MAC addresses move to the front; the tag goes between them and the ethertype.
    d.copy_within(VLAN_TAG_LEN..VLAN_TAG_LEN + 12, 0);
    EthernetFrame::new_unchecked(&mut d[..]).set_ethertype(EtherType::VLAN);
    VlanHeader::new_unchecked(&mut d[ETH_HEADER_LEN..]).set_tci(s.vlan_tci);
    Some(p)
}

fn udp_echo_v6(net: &Net, w: &mut Worker, mut s: Skb) {
    if echo_to_port_zero(w, &s) {
        return;
    }
    if s.transport_off - s.network_off > 40 {
        strip_ext_headers_v6(&mut w.bufs, &mut s);
    }
    let (dst, changed) = reply_v6(net, w, &s, 64, false, 0);
    let l3 = s.network_off as usize;
    let l4 = s.transport_off as usize;
    swap_udp_ports(&mut w.bufs.data_mut(s.pkt)[l4..]);
    if changed {
        refill_udp_checksum(&mut w.bufs, s.pkt, l3, l4, true);
    }
    send_v6(net, w, s.pkt, dst, s.rx_port);
}

/// ARP (no list function: the per-packet fall-back). Requests for our address are answered
/// in place and make the sender's entry; any other request or reply (gratuitous ARP
/// included) updates the sender's entry if we have one, and makes none.
pub(crate) fn arp_rcv(net: &Net, w: &mut Worker, s: Skb) {
    if s.pkt_type == crate::buf::skb::PktType::OtherHost {
        return w.drop_pkt(s.pkt, DropReason::OtherHost);
    }
    let port = s.rx_port;
    let (op, sha, spa, tpa) = {
        let d = w.bufs.data(s.pkt);
        let Some(bytes) = d.get(ETH_HEADER_LEN..ETH_HEADER_LEN + arp::HEADER_LEN) else {
            return w.drop_pkt(s.pkt, DropReason::PktTooSmall);
        };
        // Ethernet/IPv4 ARP only (hardware 1 or 6, protocol 0x0800, lengths 6 and 4).
        let Ok(a) = ArpPacket::new_checked(bytes) else {
            return w.drop_pkt(s.pkt, DropReason::ArpIgnored);
        };
        (a.operation(), a.sender_hw(), a.sender_ip(), a.target_ip())
    };
    let Some(iface) = net.ifaces.get(port as usize) else {
        return w.drop_pkt(s.pkt, DropReason::ArpIgnored);
    };
    let mac = iface.mac;
    let ours = iface.v4.iter().any(|a| a.0 == tpa);
    // arp_process: a sender of 0.0.0.0 is an address-conflict probe (RFC 5227 / RFC 2131
    // DAD): it makes no entry, and a request for our address is answered (to the prober's
    // MAC, target 0.0.0.0). A multicast, limited-broadcast or loopback sender, or one of our
    // own addresses, is a martian source (ip_route_input of the request fails, as for any
    // packet from it): no entry, no answer.
    let probe = spa == [0; 4];
    let martian = super::ipv4_hdr::is_martian_source(&net.routes, spa);
    match op {
        arp::OP_REQUEST if ours && !martian => {
            if !probe && learn(net, w, NeighEntry::V4(port, spa, sha), Teach::Create, false) == Learnt::NoRoom {
                // arp_process answers only once the sender's entry exists.
                return w.drop_pkt(s.pkt, DropReason::NeighCreatefail);
            }
            // Answered in place: the request turned into our reply.
            let d = w.bufs.data_mut(s.pkt);
            let mut eth = EthernetFrame::new_unchecked(&mut d[..]);
            eth.set_dst(&sha);
            eth.set_src(&mac);
            let mut a = ArpPacket::new_unchecked(&mut d[ETH_HEADER_LEN..ETH_HEADER_LEN + arp::HEADER_LEN]);
            // Our hardware type (arp_create writes the device's), whichever the request named.
            a.init_ethernet_ipv4();
            a.set_operation(arp::OP_REPLY);
            a.set_sender_hw(&mac);
            a.set_sender_ip(&tpa);
            a.set_target_hw(&sha);
            a.set_target_ip(&spa);
            w.c.local += 1;
            w.c.originated += 1;
            if let Some(p) = retag(w, &s, s.pkt) {
                crate::tx::enqueue(net, w, port, p);
            }
        }
        // A reply to us updates a neighbour we know or are resolving, never makes one (so it
        // cannot run out of room), and is consumed either way. arp_process looks every
        // sender up, whatever the target: a gratuitous ARP (a failover announcing an
        // address's new MAC) or a request or reply between other hosts updates a neighbour
        // we know and is consumed; from a sender we do not know it is ignored.
        arp::OP_REQUEST | arp::OP_REPLY if !probe && !martian => {
            // Only a reply to our MAC asserts reachability (arp_process: requests and
            // broadcast replies update the entry as NUD_STALE).
            let confirms = op == arp::OP_REPLY && s.pkt_type == PktType::Host;
            let known = learn(net, w, NeighEntry::V4(port, spa, sha), Teach::Update, confirms) == Learnt::Known;
            if known || (ours && op == arp::OP_REPLY) {
                w.c.local += 1;
                w.bufs.free(s.pkt);
            } else {
                w.drop_pkt(s.pkt, DropReason::ArpIgnored);
            }
        }
        _ => w.drop_pkt(s.pkt, DropReason::ArpIgnored),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::Pool;
    use crate::net::Pipeline;
    use crate::tunables::Tunables;
    use crate::wire::build::{build, L4Spec, PacketSpec};

    /// A reply to a tagged request gets the tag pushed back in front of the ethertype, in
    /// the headroom. Without 4 bytes of headroom (an XDP program may have pulled the head to
    /// the front) the frame's bytes move further into it first, as skb_cow_head makes room; when the
    /// frame cannot spare 4 bytes the reply is dropped by name, never sent untagged. An
    /// untagged request's reply is left alone.
    #[test]
    fn retag_makes_room_for_the_tag_or_drops_the_reply_by_name() {
        let pool = Pool::new(8).unwrap();
        let mut w = Worker::new(0, &pool);
        let tagged = Skb { vlan_present: true, vlan_tci: 0x2064, ..Skb::default() };
        let head = [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 0x08, 0x06];
        // (offset of the data in its frame, linear length, where the tagged reply starts)
        let cases = [
            (256u16, 60u16, Some(252u16)),
            (4, 60, Some(0)),
            (3, 60, Some(0)),
            (0, 60, Some(0)),
            (1, 2044, Some(0)),
            (1, 2045, None),
            (0, 2048, None),
        ];
        for (off, len, tagged_at) in cases {
            let id = w.bufs.alloc().unwrap();
            let p = Pkt { buf: id, off, len, ..Pkt::default() };
            let frame: Vec<u8> = head.iter().copied().chain((0..len as usize - head.len()).map(|i| i as u8)).collect();
            w.bufs.data_mut(p).copy_from_slice(&frame);
            let nobuf = w.c.drops[DropReason::NoBuffer as usize];
            let q = retag(&mut w, &tagged, p);
            let Some(at) = tagged_at else {
                assert!(q.is_none(), "offset {off}, length {len}: no room, dropped");
                assert_eq!(w.c.drops[DropReason::NoBuffer as usize], nobuf + 1, "counted as nobuf");
                continue;
            };
            let q = q.expect("tagged");
            assert_eq!((q.off, q.len), (at, len + 4), "offset {off}, length {len}");
            let d = w.bufs.data(q);
            assert_eq!(&d[..18], &[1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 0x81, 0, 0x20, 0x64, 0x08, 0x06]);
            assert_eq!(&d[18..], &frame[14..], "offset {off}, length {len}: the rest of the frame follows");
            w.bufs.free(q);
        }
        let id = w.bufs.alloc().unwrap();
        let p = Pkt { buf: id, off: 2, len: 60, ..Pkt::default() };
        assert_eq!(retag(&mut w, &Skb::default(), p), Some(p), "untagged: unchanged");
        w.bufs.free(p);
        assert_eq!(w.bufs.in_use(), 0);
    }

    /// A datagram in a buffer chain goes to its socket as the payload after the UDP header,
    /// its linear part the head frame's bytes past that header and its fragments kept: the
    /// packet's length is the datagram's, never the UDP length laid over the head frame.
    #[test]
    fn a_chained_datagram_reaches_its_socket_with_its_own_lengths() {
        let pool = Pool::new(64).unwrap();
        let net = Net::new(Tunables::default(), Pipeline::Local);
        let mut w = Worker::new(0, &pool);
        let sock = w.sockets.bind_udp(5001, 4).expect("bind");
        // Fragments longer than the head frame's part (4000) and shorter (2000).
        for frame_len in [4000, 2000] {
            let spec = PacketSpec { l4: L4Spec::Udp { src_port: 40000, dst_port: 5001 }, frame_len, ..PacketSpec::default() };
            let mut frame = vec![0u8; frame_len];
            let len = build(&spec, &mut frame).expect("frame");
            let p = w.bufs.alloc_copy(&frame[..len]).expect("chain");
            assert!(p.is_chained());
            let skb = Skb { pkt: p, network_off: 14, transport_off: 34, ..Skb::default() };
            match udp_classify(&net, &w, &skb, false) {
                UdpFate::Socket(id, d) => {
                    assert_eq!(id, sock.0);
                    assert_eq!(d.total_len(), len - 42, "{frame_len}: the datagram's payload");
                    assert_eq!(d.len as usize, p.len as usize - 42, "{frame_len}: the head frame's part of it");
                }
                _ => panic!("{frame_len}: not delivered to the socket"),
            }
            w.bufs.free(p);
        }
    }
}
