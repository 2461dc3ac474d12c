//! IPv6 header reads that the receive, forward and local steps share: the route key and
//! destination, the extension-header walk, options (ip6_parse_tlv) and the headers before
//! a locally delivered packet's upper layer. Reads only: no step of the stage, so every
//! step can import it.

use super::ipv4_hdr::RcvError;
use crate::buf::skb::Skb;
use crate::buf::BufCache;
use crate::stats::DropReason;
use crate::wire::ipv6::{
    walk_extension_headers, ExtHeaders, Ipv6Packet, WalkRules, HEADER_LEN, NEXT_HEADER_AUTH, NEXT_HEADER_DEST_OPTS, NEXT_HEADER_FRAGMENT,
    NEXT_HEADER_HOP_BY_HOP, NEXT_HEADER_NONE, NEXT_HEADER_ROUTING,
};
use crate::wire::{IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP};

/// `ip_proto` of a packet whose extension headers the walk could not follow.
pub(crate) const PROTO_UNPARSED: u8 = 255;

/// ipv6_skip_exthdr ([`WalkRules::SKIP_EXTHDR`]), for the checks that the kernel makes with
/// it (ICMPv6 error eligibility, a first fragment's upper-layer header): the first header
/// that is no extension header, or a later fragment's header (44). `None` where a header's
/// first bytes are missing or No Next Header is named (its -1).
pub(crate) fn skip_exthdr(first: u8, ext: &[u8]) -> Option<ExtHeaders> {
    walk_extension_headers(first, ext, WalkRules::SKIP_EXTHDR).ok().filter(|e| e.protocol != NEXT_HEADER_NONE)
}

/// ipv6frag_thdr_truncated: whether a first fragment ends before the first bytes of its
/// upper-layer header (a whole TCP, UDP or ICMPv6 header; one byte of anything else), the
/// headers after its fragment header (at `at`, naming `next`) followed as the kernel does.
/// `ext` is the linear part, as for every header local delivery reads: in a chain, headers
/// reaching past the first buffer (1792 bytes) count as missing, where the kernel would
/// pull them (only extension headers of more than 1.7 KB can tell the difference).
fn upper_layer_cut(ext: &[u8], next: u8, at: usize) -> bool {
    match skip_exthdr(next, ext.get(at..).unwrap_or(&[])) {
        Some(e) if e.fragment_field & 0xfff8 == 0 => {
            let need = match e.protocol {
                IPPROTO_TCP => 20,
                IPPROTO_UDP | IPPROTO_ICMPV6 => 8,
                _ => 1,
            };
            at + e.offset + need > ext.len()
        }
        _ => false,
    }
}

/// ip6_parse_tlv over one options header (`hdr` starts at it; `at`: its offset from the IPv6
/// header). Padding must be zeros and at most 7 bytes in a row, at most 8 options; router
/// alert must be 2 bytes long; any other option is unknown, and its type's top two bits
/// say what to do (ip6_tlvopt_unknown): skip it, drop, or drop with a parameter problem
/// (unless the destination is multicast, for 11).
pub(crate) fn parse_options(hdr: &[u8], at: usize, hop_by_hop: bool, dst_multicast: bool) -> Result<(), RcvError> {
    const PAD1: u8 = 0;
    const PADN: u8 = 1;
    const ROUTER_ALERT: u8 = 5;
    const CALIPSO: u8 = 7;
    const IOAM: u8 = 0x31;
    const JUMBO: u8 = 0xc2;
    const MAX_OPTIONS: usize = 8;
    let bad = RcvError::Drop(DropReason::Ipv6Inhdr);
    let len = (*hdr.get(1).ok_or(bad)? as usize + 1) * 8;
    let hdr = hdr.get(..len).ok_or(bad)?;
    let (mut off, mut padlen, mut count) = (2usize, 0usize, 0usize);
    while off < len {
        let t = hdr[off];
        if t == PAD1 {
            padlen += 1;
            if padlen > 7 {
                return Err(bad);
            }
            off += 1;
            continue;
        }
        let optlen = *hdr.get(off + 1).ok_or(bad)? as usize + 2;
        if off + optlen > len {
            return Err(bad);
        }
        if t == PADN {
            padlen += optlen;
            if padlen > 7 || hdr[off + 2..off + optlen].iter().any(|b| *b != 0) {
                return Err(bad);
            }
        } else {
            count += 1;
            if count > MAX_OPTIONS {
                return Err(bad);
            }
            let pp = |code: u8, p: usize| RcvError::ParamProblem { code, pointer: (at + p) as u32, reason: DropReason::Ipv6Inhdr };
            match t {
                ROUTER_ALERT if hop_by_hop && optlen != 4 => return Err(bad),
                CALIPSO | IOAM | ROUTER_ALERT if hop_by_hop => {}
                // ipv6_hop_jumbo: a wrong length or place is a silent drop; a jumbo length
                // that is not one (≤ 65535) is pointed at; otherwise, with a payload length
                // set (always here: a zero one trims away the options, and sluice takes no
                // jumbograms), the option is.
                JUMBO if hop_by_hop => {
                    if optlen != 6 || (at + off) & 3 != 2 {
                        return Err(bad);
                    }
                    let jumbo = u32::from_be_bytes([hdr[off + 2], hdr[off + 3], hdr[off + 4], hdr[off + 5]]);
                    return Err(pp(0, if jumbo <= 65535 { off + 2 } else { off }));
                }
                _ => match t >> 6 {
                    0 => {}
                    1 => return Err(bad),
                    3 if dst_multicast => return Err(bad),
                    _ => return Err(pp(2, off)),
                },
            }
            padlen = 0;
        }
        off += optlen;
    }
    Ok(())
}

/// ip6_input_finish's walk over the extension headers of a packet addressed to us (the
/// hop-by-hop header was read on receive): destination options are parsed as options are
/// (unknown ones act by their type), a routing header with segments left is refused with a
/// parameter problem at its type (sluice routes no source route: RFC 5095 for type 0), one
/// without is skipped; a hop-by-hop header past the first place, or an authentication
/// header, is an unknown next header.
/// `Ok(nhoff)`: the offset of the byte naming the upper-layer protocol.
pub(crate) fn local_headers(bufs: &BufCache, skb: &Skb) -> Result<usize, RcvError> {
    local_headers_of(&bufs.data(skb.pkt)[skb.network_off as usize..])
}

/// [`local_headers`] over an IPv6 packet's bytes (at least its fixed header). It refuses
/// every chain the receive walk ([`WalkRules::RECEIVE`]) cannot follow, so local delivery
/// never meets an unparsed one (a proptest below holds it to that).
fn local_headers_of(packet: &[u8]) -> Result<usize, RcvError> {
    let bad = RcvError::Drop(DropReason::Ipv6Inhdr);
    let ip = Ipv6Packet::new_unchecked(packet);
    let ext = ip.into_payload();
    let multicast = ip.dst_addr()[0] == 0xff;
    let pp = |code: u8, p: usize| RcvError::ParamProblem { code, pointer: p as u32, reason: DropReason::Ipv6Inhdr };
    // No handler for it (ip6_protocol_deliver_rcu: IP_NOPROTO), pointing at the byte naming it.
    let unknown = |p: usize| RcvError::ParamProblem { code: 1, pointer: p as u32, reason: DropReason::UnhandledL4 };
    let (mut nh, mut off, mut nhoff) = (ip.next_header(), 0usize, 6usize);
    let mut atomic_passed = false;
    loop {
        let len = match nh {
            NEXT_HEADER_HOP_BY_HOP if off == 0 => (*ext.get(1).ok_or(bad)? as usize + 1) * 8,
            NEXT_HEADER_HOP_BY_HOP => return Err(unknown(nhoff)),
            NEXT_HEADER_DEST_OPTS => {
                parse_options(&ext[off..], 40 + off, false, multicast)?;
                (ext[off + 1] as usize + 1) * 8
            }
            NEXT_HEADER_ROUTING => {
                let h = ext.get(off..off + 8).ok_or(bad)?;
                if h[3] != 0 {
                    return Err(pp(0, 40 + off + 2));
                }
                (h[1] as usize + 1) * 8
            }
            // No IPsec here: as a kernel without the ah6 handler, an unknown protocol (never
            // skipped, or what it protects would be delivered unauthenticated).
            NEXT_HEADER_AUTH => return Err(unknown(nhoff)),
            // ipv6_frag_rcv: an atomic fragment (offset 0, no more) is whole, its header
            // passed over, so what follows is named by it; a fragment header cut short is
            // pointed at; a first fragment without its upper-layer header is refused (RFC
            // 8200 4.5, pointer 0). ip6_frag_queue: a fragment ending past 65535 bytes is
            // pointed at by its offset, one with more to come whose length is no multiple
            // of 8 by the payload length. A real fragment that passes ends the walk and is
            // dropped unanswered as ip_frag_local (no reassembly). A fragment header after
            // an atomic one is pointed at (the packet is marked IP6SKB_FRAGMENTED by then).
            NEXT_HEADER_FRAGMENT => {
                if atomic_passed {
                    return Err(pp(0, 40 + off));
                }
                let h = ext.get(off..off + 8).ok_or(pp(0, 40 + off))?;
                let field = u16::from_be_bytes([h[2], h[3]]);
                if field & 0xfff9 != 0 {
                    if field & 0xfff8 == 0 && upper_layer_cut(ext, h[0], off + 8) {
                        return Err(pp(3, 0));
                    }
                    let end = (field & 0xfff8) as usize + ext.len() - (off + 8);
                    if end > 65535 {
                        return Err(pp(0, 40 + off + 2));
                    }
                    if field & 1 != 0 && end & 7 != 0 {
                        return Err(pp(0, 4));
                    }
                    // Whatever follows a real fragment is the reassembly's to read, not
                    // this walk's: dropped here, unanswered (ip_proto may name the upper
                    // layer of a first fragment, or nothing the receive walk could follow).
                    return Err(RcvError::Drop(DropReason::IpFragLocal));
                }
                atomic_passed = true;
                8
            }
            _ => return Ok(nhoff),
        };
        ext.get(off..off + len).ok_or(bad)?;
        nhoff = 40 + off;
        nh = ext[off];
        off += len;
    }
}

/// (daddr, traffic class), the route hint's key, read through one bounds check.
#[inline(always)]
pub(crate) fn route_key(bufs: &BufCache, skb: &Skb) -> ([u8; 16], u8) {
    let o = skb.network_off as usize;
    match bufs.data(skb.pkt).get(o..o + HEADER_LEN) {
        Some(h) => {
            let ip = Ipv6Packet::new_unchecked(h);
            (ip.dst_addr(), ip.traffic_class())
        }
        None => ([0; 16], 0),
    }
}

#[inline]
pub(crate) fn daddr(bufs: &BufCache, skb: &Skb) -> [u8; 16] {
    let o = skb.network_off as usize;
    bufs.data(skb.pkt).get(o..o + HEADER_LEN).map_or([0; 16], |h| Ipv6Packet::new_unchecked(h).dst_addr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A real fragment to us, first or later, is dropped unanswered as ip_frag_local (no
    /// reassembly), whatever the walk found after a first one: a UDP header, or a header
    /// cut short (which the receive walk cannot follow: the proptest below found it).
    #[test]
    fn a_real_fragment_to_us_is_dropped_as_ip_frag_local() {
        for (field, after) in [(1u16, vec![0u8; 8]), (0x0011, vec![0u8; 8]), (1, vec![])] {
            let next = if after.is_empty() { 44 } else { 17 };
            let mut packet = vec![0u8; 40];
            packet[0] = 0x60;
            packet[4..6].copy_from_slice(&((8 + after.len()) as u16).to_be_bytes());
            packet[6] = 44;
            packet.extend_from_slice(&[next, 0]);
            packet.extend_from_slice(&field.to_be_bytes());
            packet.extend_from_slice(&[0; 4]);
            packet.extend_from_slice(&after);
            let got = local_headers_of(&packet);
            assert!(matches!(got, Err(RcvError::Drop(DropReason::IpFragLocal))), "field {field:#x}, {} bytes after: {got:?}", after.len());
        }
    }

    proptest! {
        /// Local delivery refuses every chain the receive walk cannot follow (so a packet
        /// with `PROTO_UNPARSED` never reaches a protocol handler).
        #[test]
        fn local_headers_refuse_what_the_receive_walk_cannot_follow(
            first in prop_oneof![Just(0u8), Just(43), Just(44), Just(51), Just(60), any::<u8>()],
            ext in proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(44), Just(60), Just(17), any::<u8>()], 0..64),
        ) {
            let mut packet = vec![0u8; 40];
            packet[0] = 0x60;
            packet[4..6].copy_from_slice(&(ext.len() as u16).to_be_bytes());
            packet[6] = first;
            packet.extend_from_slice(&ext);
            if walk_extension_headers(first, &ext, WalkRules::RECEIVE).is_err() {
                prop_assert!(local_headers_of(&packet).is_err());
            }
        }
    }

    #[test]
    fn pad1_runs_of_up_to_seven_bytes_are_padding_not_errors() {
        // ip6_parse_tlv: Pad1 bytes are padding; more than 7 in a row is malformed.
        let mut hdr = [0u8; 8]; // next header, length 0 (8 bytes), six Pad1
        assert!(parse_options(&hdr, 40, true, false).is_ok());
        hdr[2..].copy_from_slice(&[5, 2, 0, 0, 0, 0]); // router alert, then two Pad1
        assert!(parse_options(&hdr, 40, true, false).is_ok());
        let mut long = [0u8; 16]; // length 1 (16 bytes), fourteen Pad1
        long[1] = 1;
        assert!(parse_options(&long, 40, true, false).is_err());
    }

    /// ipv6_hop_jumbo: a jumbo payload option must sit at 4n + 2 with length 4, else the
    /// packet is dropped without an error; a jumbo length of at most 65535 is pointed at, a
    /// real one in a packet with a payload length points at the option.
    #[test]
    fn a_jumbo_option_is_refused_as_ipv6_hop_jumbo_does() {
        let pointer = |r: Result<(), RcvError>| match r {
            Err(RcvError::ParamProblem { code: 0, pointer, .. }) => pointer,
            other => panic!("{other:?}"),
        };
        // At offset 2 of the header (40 + 2 = 42 from the IPv6 header: 4n + 2).
        let aligned = [0, 0, 0xc2, 4, 0, 1, 0, 0];
        assert_eq!(pointer(parse_options(&aligned, 40, true, false)), 42, "a real jumbo length: the option");
        let small = [0, 0, 0xc2, 4, 0, 0, 1, 0];
        assert_eq!(pointer(parse_options(&small, 40, true, false)), 44, "a jumbo length under 65536");
        let top_byte = [0, 0, 0xc2, 4, 1, 0, 0, 0];
        assert_eq!(pointer(parse_options(&top_byte, 40, true, false)), 42, "every byte of the length counts");
        // After a PadN, at offset 6 (46: 4n + 2): the pointer is the length field's, 48.
        let later = [0, 1, 1, 2, 0, 0, 0xc2, 4, 0, 0, 1, 0, 1, 2, 0, 0];
        assert_eq!(pointer(parse_options(&later, 40, true, false)), 48, "past other options");
        // One Pad1 first: offset 43, misaligned.
        let misaligned = [0, 1, 0, 0xc2, 4, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0];
        assert!(matches!(parse_options(&misaligned, 40, true, false), Err(RcvError::Drop(DropReason::Ipv6Inhdr))));
        let mut short = aligned;
        short[3] = 2;
        short[6..8].copy_from_slice(&[1, 0]);
        assert!(matches!(parse_options(&short, 40, true, false), Err(RcvError::Drop(DropReason::Ipv6Inhdr))));
    }

    /// ip6_frag_queue: a fragment ending past 65535 bytes is pointed at by its offset field,
    /// `&fhdr->frag_off - skb_network_header(skb)`: after an 8-byte destination options
    /// header that is byte 50 (40 + 8 + 2), wherever the fragment header sits.
    #[test]
    fn a_fragment_ending_past_65535_after_another_header_is_pointed_at_its_offset_field() {
        let mut packet = vec![0u8; 40];
        packet[0] = 0x60;
        packet[4..6].copy_from_slice(&32u16.to_be_bytes());
        packet[6] = 60; // destination options first
        packet.extend_from_slice(&[44, 0, 1, 4, 0, 0, 0, 0]); // next: fragment; one PadN
        packet.extend_from_slice(&[17, 0, 0xff, 0xf8, 0, 0, 0, 1]); // offset 65528, last
        packet.extend_from_slice(&[0u8; 16]); // ends at 65528 + 16 = 65544
        match local_headers_of(&packet) {
            Err(RcvError::ParamProblem { code: 0, pointer, .. }) => assert_eq!(pointer, 50),
            other => panic!("{other:?}"),
        }
    }
}
