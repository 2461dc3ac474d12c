//! GSO for TCP and UDP (the kernel's `tcp_gso_segment` / `__udp_gso_segment` /
//! `inet_gso_segment` / `ipv6_gso_segment`, reached from `validate_xmit_skb` when the egress
//! device cannot segment): a GRO packet back into segments of `gso_size` payload bytes, each a
//! one-frame packet.
//!
//! TCP, per segment: the headers of the merged packet copied; TCP seq advanced by the payload
//! before it; PSH and FIN only on the last segment, CWR only on the first; IPv4 ID
//! incrementing (or fixed with `TCP_FIXEDID`), total length and header checksum; IPv6
//! payload length; a full TCP checksum. UDP fraglist (`skb_segment_list`): each datagram's
//! own frame again, with the head's Ethernet and IP headers (as forwarding rewrote them) but
//! its own IPv4 ID and UDP header. For a train GRO merged this gives back the original
//! segments byte for byte.

use crate::buf::skb::gso_type;
use crate::buf::skb::Skb;
use crate::buf::{BufCache, Pkt, MAX_DATA};
use crate::net::Net;
use crate::stats::DropReason;
use crate::wire::checksum::{fold, pseudo_header, sum_be16, sum_fixed};
use crate::wire::ethernet::HEADER_LEN as ETH_LEN;
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::{Ipv6Packet, HEADER_LEN as IPV6_LEN};
use crate::wire::tcp::{flags, TcpPacket};
use crate::wire::udp::{UdpPacket, HEADER_LEN as UDP_LEN};
use crate::wire::{IPPROTO_TCP, IPPROTO_UDP};
use crate::worker::Worker;

/// Why a packet could not be segmented (the caller drops it with the matching reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GsoError {
    #[error("not a TCP or UDP GSO packet GSO can split")]
    Malformed,
    #[error("buffer pool exhausted")]
    NoBuffer,
}

/// Splits the GRO packet `skb` into segments appended to `out`; `skb`'s buffers become the
/// segments' (or are freed). On error nothing is appended and `skb` is left to the caller.
///
/// A packet GRO built keeps every segment's headers in its frame in front of its payload
/// (the chain's fragments cover only the payloads): those frames become the segments again,
/// as segment-list GSO does (`skb_segment_list`): the head's Ethernet and IP headers
/// (rewritten by forwarding) are copied in front, the IP length, ID and checksum set, and
/// the segment's own TCP header kept when it is the one the head implies (so is its
/// checksum); otherwise it is rewritten and checksummed. Other packets are copied out.
pub fn segment(bufs: &mut BufCache, skb: &Skb, out: &mut Vec<Pkt>) -> Result<usize, GsoError> {
    let in_place = if skb.gso_type & gso_type::UDP_L4 != 0 { segment_list_udp(bufs, skb, out) } else { segment_in_place(bufs, skb, out) };
    match in_place {
        Some(n) => Ok(n),
        None => segment_copy(bufs, skb, out),
    }
}

/// The headers of a GSO packet's head segment.
struct Head {
    v4: bool,
    /// IPPROTO_TCP or IPPROTO_UDP.
    proto: u8,
    l4: usize,
    hdr_len: usize,
    mss: usize,
    seq0: u32,
    flags0: u8,
    id0: u16,
    fixed_id: bool,
    /// IPv4: the head's IP header summed without its total length, ID and checksum, which
    /// differ per segment (so a segment's checksum is arithmetic, not a read-back of the
    /// header just written: that load would wait for the stores it overlaps).
    ip_sum: u64,
    /// The partial sum of the source and destination addresses (the pseudo-header's part
    /// every segment shares).
    addr_sum: u64,
    hdr: [u8; ETH_LEN + IPV6_LEN + 60],
}

fn head_of(bufs: &BufCache, skb: &Skb) -> Result<Head, GsoError> {
    let head = bufs.data(skb.pkt);
    let udp = skb.gso_type & gso_type::UDP_L4 != 0;
    let v4 = if udp { head.get(12..14) == Some(&[0x08, 0x00]) } else { skb.gso_type & gso_type::TCPV4 != 0 };
    if skb.gso_size == 0 || skb.gso_type & (gso_type::TCPV4 | gso_type::TCPV6 | gso_type::UDP_L4) == 0 {
        return Err(GsoError::Malformed);
    }
    let l4 = ETH_LEN + if v4 { 20 } else { IPV6_LEN };
    let l4_bytes = head.get(l4..).ok_or(GsoError::Malformed)?;
    let (hdr_len, seq0, flags0) = if udp {
        // (Its length field covers the whole chain: only the header must be there.)
        if l4_bytes.len() < UDP_LEN {
            return Err(GsoError::Malformed);
        }
        (l4 + UDP_LEN, 0, 0)
    } else {
        let tcp = TcpPacket::new_checked(l4_bytes).map_err(|_| GsoError::Malformed)?;
        (l4 + tcp.header_len(), tcp.seq(), tcp.flags())
    };
    let mss = skb.gso_size as usize;
    if hdr_len + mss > MAX_DATA || head.len() < hdr_len {
        return Err(GsoError::Malformed);
    }
    let mut hdr = [0u8; ETH_LEN + IPV6_LEN + 60];
    hdr[..hdr_len].copy_from_slice(&head[..hdr_len]);
    let proto = if udp { IPPROTO_UDP } else { IPPROTO_TCP };
    // The addresses sit together at the end of either fixed header.
    let (ip_sum, addr_sum) = if v4 {
        let mut ip: [u8; 20] = hdr[ETH_LEN..ETH_LEN + 20].try_into().map_err(|_| GsoError::Malformed)?;
        let addr_sum = sum_fixed::<8>(ip[12..20].try_into().map_err(|_| GsoError::Malformed)?);
        ip[2..6].fill(0);
        ip[10..12].fill(0);
        (sum_fixed(&ip), addr_sum)
    } else {
        (0, sum_fixed::<32>(hdr[ETH_LEN + 8..ETH_LEN + IPV6_LEN].try_into().map_err(|_| GsoError::Malformed)?))
    };
    Ok(Head {
        v4,
        proto,
        l4,
        hdr_len,
        mss,
        seq0,
        flags0,
        id0: u16::from_be_bytes([hdr[ETH_LEN + 4], hdr[ETH_LEN + 5]]),
        fixed_id: skb.gso_type & gso_type::TCP_FIXEDID != 0,
        ip_sum,
        addr_sum,
        hdr,
    })
}

/// Segment `i` of `n`'s TCP flags: PSH and FIN only on the last, CWR only on the first.
fn seg_flags(flags0: u8, i: usize, n: usize) -> u8 {
    let mut f = flags0;
    if i + 1 != n {
        f &= !(flags::PSH | flags::FIN);
    }
    if i > 0 {
        f &= !flags::CWR;
    }
    f
}

/// Segment `i`'s IPv4 ID: the head's plus `i`, or the head's with `TCP_FIXEDID`.
fn seg_id(h: &Head, i: usize) -> u16 {
    if h.fixed_id {
        h.id0
    } else {
        h.id0.wrapping_add(i as u16)
    }
}

/// Sets a segment's IP header (in `d`, the segment from its Ethernet header) for `len`
/// payload bytes and IPv4 ID `id`; returns the L4 pseudo-header sum.
fn fix_ip(h: &Head, d: &mut [u8], id: u16, len: usize) -> u64 {
    let l4_len = h.hdr_len - h.l4 + len;
    if h.v4 {
        let total = (20 + l4_len) as u16;
        let mut ip = Ipv4Packet::new_unchecked(&mut d[ETH_LEN..h.l4]);
        ip.set_total_len(total);
        ip.set_ident(id);
        ip.set_header_checksum(!fold(h.ip_sum + u64::from(total) + u64::from(id)));
    } else {
        Ipv6Packet::new_unchecked(&mut d[ETH_LEN..h.l4]).set_payload_len(l4_len as u16);
    }
    pseudo_header(h.addr_sum, h.proto, l4_len)
}

/// Writes a UDP datagram's header (the head's ports, length `8 + len`) and a full checksum
/// over it and the payload that follows in `d` (0 sent as 0xffff).
fn write_udp(h: &Head, d: &mut [u8], len: usize, pseudo: u64) {
    d[h.l4..h.hdr_len].copy_from_slice(&h.hdr[h.l4..h.hdr_len]);
    let mut u = UdpPacket::new_unchecked(&mut d[h.l4..h.hdr_len]);
    u.set_len((UDP_LEN + len) as u16);
    u.set_checksum(0);
    let c = match !fold(pseudo + sum_be16(&d[h.l4..])) {
        0 => 0xffff,
        c => c,
    };
    d[h.l4 + 6..h.l4 + 8].copy_from_slice(&c.to_be_bytes());
}

/// Writes segment `i`'s TCP header (from the head's, with its seq and flags) over `d` and
/// its checksum over the header and the payload that follows.
fn write_tcp(h: &Head, d: &mut [u8], i: usize, n: usize, pseudo: u64) {
    d[h.l4..h.hdr_len].copy_from_slice(&h.hdr[h.l4..h.hdr_len]);
    let mut t = TcpPacket::new_unchecked(&mut d[h.l4..]);
    t.set_seq(h.seq0.wrapping_add((i * h.mss) as u32));
    t.set_flags(seg_flags(h.flags0, i, n));
    t.set_checksum(0);
    let c = !fold(pseudo + sum_be16(&d[h.l4..]));
    d[h.l4 + 16..h.l4 + 18].copy_from_slice(&c.to_be_bytes());
}

/// True when `d`'s TCP header is the one segment `i` of `n` must carry (all but the checksum).
fn tcp_header_is(h: &Head, d: &[u8], i: usize, n: usize) -> bool {
    let t = &d[h.l4..h.hdr_len];
    let want = &h.hdr[h.l4..h.hdr_len];
    t[..4] == want[..4]
        && u32::from_be_bytes([t[4], t[5], t[6], t[7]]) == h.seq0.wrapping_add((i * h.mss) as u32)
        && t[8..13] == want[8..13]
        && t[13] == seg_flags(h.flags0, i, n)
        && t[14..16] == want[14..16]
        && t[18..] == want[18..]
}

/// The frames of a chain GRO built (at most `max` segments): each fragment's frame, where its
/// headers start in it, and its payload length, into `frags`; returns how many. None when the
/// chain is not one (fragments not MSS-sized payloads with room for the headers in front,
/// the count not `gso_segs`).
fn gro_frames(bufs: &BufCache, h: &Head, skb: &Skb, max: usize, frags: &mut [(crate::buf::BufId, usize, usize)]) -> Option<usize> {
    let p = skb.pkt;
    let n = skb.gso_segs as usize;
    if p.len as usize != h.hdr_len + h.mss || n < 2 || n > max || n > frags.len() + 1 {
        return None;
    }
    let mut k = 0;
    for (id, m) in bufs.frags(p) {
        if k + 1 >= n || (m.off as usize) < h.hdr_len || m.len == 0 || m.len as usize > h.mss {
            return None;
        }
        frags[k] = (id, m.off as usize - h.hdr_len, m.len as usize);
        k += 1;
    }
    if k + 1 != n || frags[..k - 1].iter().any(|f| f.2 != h.mss) {
        return None;
    }
    Some(k)
}

/// `__udp_gso_segment_list` / `skb_segment_list` over the frames of a UDP fraglist packet GRO
/// built: each frame becomes its datagram again, with the head's Ethernet and IP headers
/// (forwarding's MACs and TTL) copied in front but its own IPv4 ID; its own UDP header, and
/// so its checksum, is kept when its ports, addresses and length are what the head implies
/// (otherwise rewritten and checksummed, as the kernel's `__udpv4_gso_segment_list_csum`
/// patches a NATed head's). The head gets its own length back, which makes its checksum valid
/// again. None when the chain is not one GRO built.
fn segment_list_udp(bufs: &mut BufCache, skb: &Skb, out: &mut Vec<Pkt>) -> Option<usize> {
    let h = head_of(bufs, skb).ok()?;
    let p = skb.pkt;
    let n = skb.gso_segs as usize;
    let mut frags = [(crate::buf::BufId(0), 0usize, 0usize); crate::gro::table::UDP_GRO_CNT_MAX as usize];
    let k = gro_frames(bufs, &h, skb, crate::gro::table::UDP_GRO_CNT_MAX as usize, &mut frags)?;
    let mut head = Pkt { frag_len: 0, ..p };
    head.len = (h.hdr_len + h.mss) as u16;
    let d = bufs.data_mut(head);
    fix_ip(&h, d, h.id0, h.mss);
    UdpPacket::new_unchecked(&mut d[h.l4..h.hdr_len]).set_len((UDP_LEN + h.mss) as u16);
    out.push(head);
    // The addresses in the IP header (from byte 12 of IPv4's, 8 of IPv6's) and the ports.
    let addrs = ETH_LEN + if h.v4 { 12 } else { 8 }..h.l4;
    for &(id, off, len) in &frags[..k] {
        let seg = Pkt { buf: id, off: off as u16, len: (h.hdr_len + len) as u16, frag_len: 0, rss_hash: p.rss_hash };
        let d = bufs.data_mut(seg);
        let own_id = u16::from_be_bytes([d[ETH_LEN + 4], d[ETH_LEN + 5]]);
        let own_len = u16::from_be_bytes([d[h.l4 + 4], d[h.l4 + 5]]) as usize;
        let as_head = d[addrs.clone()] == h.hdr[addrs.clone()] && d[h.l4..h.l4 + 4] == h.hdr[h.l4..h.l4 + 4] && own_len == UDP_LEN + len;
        d[..h.l4].copy_from_slice(&h.hdr[..h.l4]);
        let pseudo = fix_ip(&h, d, if h.v4 { own_id } else { 0 }, len);
        if !as_head {
            write_udp(&h, d, len, pseudo);
        }
        out.push(seg);
    }
    Some(n)
}

/// Segment-list GSO over the frames of a packet GRO built: None when the chain is not one
/// (fragments not MSS-sized payloads with room for the headers in front).
fn segment_in_place(bufs: &mut BufCache, skb: &Skb, out: &mut Vec<Pkt>) -> Option<usize> {
    let h = head_of(bufs, skb).ok()?;
    let p = skb.pkt;
    let n = skb.gso_segs as usize;
    let mut frags = [(crate::buf::BufId(0), 0usize, 0usize); crate::gro::table::MAX_GRO_SEGS as usize];
    let k = gro_frames(bufs, &h, skb, crate::gro::table::MAX_GRO_SEGS as usize, &mut frags)?;
    // The head: its own payload, the merged flags taken back, its checksum again.
    let mut head = Pkt { frag_len: 0, ..p };
    head.len = (h.hdr_len + h.mss) as u16;
    let d = bufs.data_mut(head);
    let pseudo = fix_ip(&h, d, seg_id(&h, 0), h.mss);
    write_tcp(&h, d, 0, n, pseudo);
    out.push(head);
    for (i, &(id, off, len)) in frags[..k].iter().enumerate() {
        let i = i + 1;
        let seg = Pkt { buf: id, off: off as u16, len: (h.hdr_len + len) as u16, frag_len: 0, rss_hash: p.rss_hash };
        let d = bufs.data_mut(seg);
        d[..h.l4].copy_from_slice(&h.hdr[..h.l4]);
        let pseudo = fix_ip(&h, d, seg_id(&h, i), len);
        // Its own TCP header, untouched since it arrived, carries a valid checksum.
        if !tcp_header_is(&h, d, i, n) {
            write_tcp(&h, d, i, n, pseudo);
        }
        out.push(seg);
    }
    Some(n)
}

/// GSO by copying: each segment in a fresh frame.
fn segment_copy(bufs: &mut BufCache, skb: &Skb, out: &mut Vec<Pkt>) -> Result<usize, GsoError> {
    let h = head_of(bufs, skb)?;
    let payload = skb.pkt.total_len() - h.hdr_len;
    if payload == 0 {
        return Err(GsoError::Malformed);
    }
    let n = payload.div_ceil(h.mss);
    let first = out.len();
    let mut tmp = [0u8; MAX_DATA];
    for i in 0..n {
        let len = h.mss.min(payload - i * h.mss);
        let Some(mut p) = bufs.alloc_copy(&h.hdr[..h.hdr_len]) else {
            for p in out.drain(first..) {
                bufs.free(p);
            }
            return Err(GsoError::NoBuffer);
        };
        p.len = (h.hdr_len + len) as u16;
        let got = bufs.copy_out(skb.pkt, h.hdr_len + i * h.mss, &mut tmp[..len]);
        let d = bufs.data_mut(p);
        d[h.hdr_len..h.hdr_len + got].copy_from_slice(&tmp[..got]);
        let pseudo = fix_ip(&h, d, seg_id(&h, i), len);
        if h.proto == IPPROTO_UDP {
            write_udp(&h, d, len, pseudo);
        } else {
            write_tcp(&h, d, i, n, pseudo);
        }
        out.push(p);
    }
    bufs.free(skb.pkt);
    Ok(n)
}

/// Length of each segment's IP datagram for a GSO packet (`skb_gso_validate_network_len`),
/// from its IP header `ip`; None for a packet that is not one.
pub fn network_len(ip: &[u8], skb: &Skb) -> Option<usize> {
    if skb.gso_segs <= 1 || skb.gso_size == 0 {
        return None;
    }
    let l3 = if ip.first()? >> 4 == 4 { 20 } else { IPV6_LEN };
    if skb.gso_type & gso_type::UDP_L4 != 0 {
        return Some(l3 + UDP_LEN + skb.gso_size as usize);
    }
    let doff = *ip.get(l3 + 12)? as usize >> 4;
    Some(l3 + doff * 4 + skb.gso_size as usize)
}

/// True when GRO may have built a packet of `run` (the fast path's check).
#[inline]
pub fn any_gso(net: &Net, run: &[Skb]) -> bool {
    net.tun.gro != 0 && run.iter().any(|s| s.gso_segs > 1)
}

/// `validate_xmit_skb`: queues `skb` on `port`, split by GSO first when it is a GRO packet
/// and the port cannot segment it (no TSO for TCP, no fraglist offload for UDP). The ledger
/// sees the segments past the first as originated, as IPv4 fragmentation counts its fragments.
pub fn xmit(net: &Net, w: &mut Worker, port: u16, skb: &Skb) {
    let fraglist = skb.gso_type & gso_type::UDP_L4 != 0;
    let whole = |p: &dyn crate::port::Port| if fraglist { p.gso_fraglist() } else { p.tso() };
    if skb.gso_segs <= 1 || w.port_queue(port).is_some_and(whole) {
        return crate::tx::enqueue(net, w, port, skb.pkt);
    }
    for_each_segment(w, skb, |w, p| crate::tx::enqueue(net, w, port, p));
}

/// `skb_gso_segment`: splits the GRO packet `skb` and hands each segment to `each`, in
/// order; the segments past the first count as originated. A packet that cannot be split
/// is dropped (no buffer, or malformed).
pub fn for_each_segment(w: &mut Worker, skb: &Skb, mut each: impl FnMut(&mut Worker, Pkt)) {
    let mut segs = std::mem::take(&mut w.gso_scratch);
    segs.clear();
    match segment(&mut w.bufs, skb, &mut segs) {
        Ok(n) => {
            w.c.originated += n as u64 - 1;
            w.c.gro.gso_packets += 1;
            w.c.gro.gso_segs += n as u64;
            for &p in &segs {
                each(w, p);
            }
        }
        Err(GsoError::NoBuffer) => w.drop_pkt(skb.pkt, DropReason::NoBuffer),
        Err(GsoError::Malformed) => w.drop_pkt(skb.pkt, DropReason::PktTooSmall),
    }
    segs.clear();
    w.gso_scratch = segs;
}
