//! GSO for TCP (the kernel's `tcp_gso_segment` / `inet_gso_segment` / `ipv6_gso_segment`,
//! reached from `validate_xmit_skb` when the egress device cannot segment): a GRO packet
//! back into segments of `gso_size` payload bytes, each a one-frame packet.
//!
//! Per segment: the headers of the merged packet copied; TCP seq advanced by the payload
//! before it; PSH and FIN only on the last segment, CWR only on the first; IPv4 ID
//! incrementing (or fixed with `TCP_FIXEDID`), total length and header checksum; IPv6
//! payload length; a full TCP checksum. For a train GRO merged this gives back the original
//! segments byte for byte.

use super::gso_type;
use crate::buf::skb::Skb;
use crate::buf::{BufCache, Pkt, MAX_DATA};
use crate::net::Net;
use crate::stats::DropReason;
use crate::wire::checksum::{fold, pseudo_header_v4, pseudo_header_v6, sum_be16};
use crate::wire::ethernet::HEADER_LEN as ETH_LEN;
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::{Ipv6Packet, HEADER_LEN as IPV6_LEN};
use crate::wire::tcp::{flags, TcpPacket};
use crate::wire::IPPROTO_TCP;
use crate::worker::Worker;

/// Why a packet could not be segmented (the caller drops it with the matching reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GsoError {
    #[error("not a TCP GSO packet GSO can split")]
    Malformed,
    #[error("buffer pool exhausted")]
    NoBuffer,
}

/// Splits the GRO packet `skb` into segments appended to `out`; frees `skb`'s buffers when
/// it succeeds. On error nothing is appended and `skb` is left to the caller.
pub fn segment(bufs: &mut BufCache, skb: &Skb, out: &mut Vec<Pkt>) -> Result<usize, GsoError> {
    let v4 = skb.gso_type & gso_type::TCPV4 != 0;
    if skb.gso_size == 0 || skb.gso_type & (gso_type::TCPV4 | gso_type::TCPV6) == 0 {
        return Err(GsoError::Malformed);
    }
    let head = bufs.data(skb.pkt);
    let l4 = ETH_LEN + if v4 { 20 } else { IPV6_LEN };
    let tcp = TcpPacket::new_checked(head.get(l4..).ok_or(GsoError::Malformed)?).map_err(|_| GsoError::Malformed)?;
    let hdr_len = l4 + tcp.header_len();
    let mss = skb.gso_size as usize;
    if hdr_len + mss > MAX_DATA || head.len() < hdr_len {
        return Err(GsoError::Malformed);
    }
    let mut hdr = [0u8; ETH_LEN + IPV6_LEN + 60];
    hdr[..hdr_len].copy_from_slice(&head[..hdr_len]);
    let total = skb.pkt.total_len();
    let payload = total - hdr_len;
    if payload == 0 {
        return Err(GsoError::Malformed);
    }
    let nsegs = payload.div_ceil(mss);
    let seq0 = tcp.seq();
    let flags0 = tcp.flags();
    let id0 = u16::from_be_bytes([hdr[ETH_LEN + 4], hdr[ETH_LEN + 5]]);
    let fixed_id = skb.gso_type & gso_type::TCP_FIXEDID != 0;
    let first = out.len();
    for i in 0..nsegs {
        let len = mss.min(payload - i * mss);
        let Some(mut p) = bufs.alloc_copy(&hdr[..hdr_len]) else {
            for p in out.drain(first..) {
                bufs.free(p);
            }
            return Err(GsoError::NoBuffer);
        };
        p.len = (hdr_len + len) as u16;
        let mut tmp = [0u8; MAX_DATA];
        let got = bufs.copy_out(skb.pkt, hdr_len + i * mss, &mut tmp[..len]);
        let d = bufs.data_mut(p);
        d[hdr_len..hdr_len + got].copy_from_slice(&tmp[..got]);
        let last = i + 1 == nsegs;
        let mut f = flags0;
        if !last {
            f &= !(flags::PSH | flags::FIN);
        }
        if i > 0 {
            f &= !flags::CWR;
        }
        let l4_len = hdr_len - l4 + len;
        let (src, dst);
        if v4 {
            let mut ip = Ipv4Packet::new_unchecked(&mut d[ETH_LEN..l4]);
            ip.set_total_len((20 + l4_len) as u16);
            ip.set_ident(if fixed_id { id0 } else { id0.wrapping_add(i as u16) });
            ip.fill_checksum();
            let mut s = [0u8; 16];
            let mut t = [0u8; 16];
            s[..4].copy_from_slice(&ip.src_addr());
            t[..4].copy_from_slice(&ip.dst_addr());
            (src, dst) = (s, t);
        } else {
            let mut ip = Ipv6Packet::new_unchecked(&mut d[ETH_LEN..l4]);
            ip.set_payload_len(l4_len as u16);
            (src, dst) = (ip.src_addr(), ip.dst_addr());
        }
        let mut t = TcpPacket::new_unchecked(&mut d[l4..hdr_len + len]);
        t.set_seq(seq0.wrapping_add((i * mss) as u32));
        t.set_flags(f);
        t.set_checksum(0);
        let pseudo = if v4 {
            pseudo_header_v4(&[src[0], src[1], src[2], src[3]], &[dst[0], dst[1], dst[2], dst[3]], IPPROTO_TCP, l4_len as u16)
        } else {
            pseudo_header_v6(&src, &dst, IPPROTO_TCP, l4_len as u32)
        };
        let c = !fold(pseudo + sum_be16(&d[l4..hdr_len + len]));
        d[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
        out.push(p);
    }
    bufs.free(skb.pkt);
    Ok(nsegs)
}

/// Length of each segment's IP datagram for a GSO packet (`skb_gso_validate_network_len`),
/// from its IP header `ip`; None for a packet that is not one.
pub fn network_len(ip: &[u8], skb: &Skb) -> Option<usize> {
    if skb.gso_segs <= 1 || skb.gso_size == 0 {
        return None;
    }
    let l3 = if skb.gso_type & gso_type::TCPV4 != 0 { 20 } else { IPV6_LEN };
    let doff = *ip.get(l3 + 12)? as usize >> 4;
    Some(l3 + doff * 4 + skb.gso_size as usize)
}

/// True when GRO may have built a packet of `run` (the fast path's check).
#[inline]
pub fn any_gso(net: &Net, run: &[Skb]) -> bool {
    super::enabled(net) && run.iter().any(|s| s.gso_segs > 1)
}

/// `validate_xmit_skb`: queues `skb` on `port`, split by GSO first when it is a GRO packet
/// and the port cannot segment (no TSO). The ledger sees the segments past the first as
/// originated, as IPv4 fragmentation counts its fragments.
pub fn xmit(net: &Net, w: &mut Worker, port: u16, skb: &Skb) {
    if skb.gso_segs <= 1 || w.port_queue(port).is_some_and(|p| p.tso()) {
        return crate::tx::enqueue(net, w, port, skb.pkt);
    }
    let mut segs = std::mem::take(&mut w.gso_scratch);
    segs.clear();
    match segment(&mut w.bufs, skb, &mut segs) {
        Ok(n) => {
            w.c.originated += n as u64 - 1;
            w.c.gro.gso_packets += 1;
            w.c.gro.gso_segs += n as u64;
            for &p in &segs {
                crate::tx::enqueue(net, w, port, p);
            }
        }
        Err(GsoError::NoBuffer) => w.drop_pkt(skb.pkt, DropReason::NoBuffer),
        Err(GsoError::Malformed) => w.drop_pkt(skb.pkt, DropReason::PktTooSmall),
    }
    segs.clear();
    w.gso_scratch = segs;
}
