//! IPv6 fixed header (RFC 8200) and a bounded walk over extension headers.
//!
//! Getter contract: after a plain `buffer.len() >= HEADER_LEN` check every getter and the
//! clamped `payload` never panic; `new_checked` also checks version and payload length.

use super::{read_array, read_u16, read_u32, write_u16, write_u32, Result, WireError};

pub const HEADER_LEN: usize = 40;

/// Next-header values of the extension headers [`skip_extension_headers`] walks.
pub const NEXT_HEADER_HOP_BY_HOP: u8 = 0;
pub const NEXT_HEADER_ROUTING: u8 = 43;
pub const NEXT_HEADER_FRAGMENT: u8 = 44;
pub const NEXT_HEADER_AUTH: u8 = 51;
pub const NEXT_HEADER_NONE: u8 = 59;
pub const NEXT_HEADER_DEST_OPTS: u8 = 60;

/// More extension headers than this is treated as an attack on the walker, not traffic.
pub const MAX_EXT_HEADERS: usize = 8;

const VER_TC_FLOW: usize = 0;
const PAYLOAD_LEN: usize = 4;
const NEXT_HEADER: usize = 6;
const HOP_LIMIT: usize = 7;
const SRC: usize = 8;
const DST: usize = 24;

const FLOW_LABEL_MASK: u32 = 0x000f_ffff;
const FRAGMENT_HEADER_LEN: usize = 8;
/// Offset of the 13-bit fragment offset (plus 2 reserved bits and M) in a Fragment header.
const FRAGMENT_OFFSET_FIELD: usize = 2;

/// View of an IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// len >= 40 (Truncated), version 6 (Malformed), 40 + payload_len <= len (Truncated).
    /// Jumbograms (payload length 0 + Hop-by-Hop option) are not supported: their
    /// payload reads as empty.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if self.version() != 6 {
            return Err(WireError::Malformed);
        }
        if HEADER_LEN + usize::from(self.payload_len()) > len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole buffer the view covers (header, payload and anything after).
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    #[inline]
    fn ver_tc_flow(&self) -> u32 {
        read_u32(self.bytes(), VER_TC_FLOW)
    }

    #[inline]
    pub fn version(&self) -> u8 {
        (self.ver_tc_flow() >> 28) as u8
    }

    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    /// 20-bit flow label.
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & FLOW_LABEL_MASK
    }

    /// Length of everything after the fixed header, extension headers included.
    #[inline]
    pub fn payload_len(&self) -> u16 {
        read_u16(self.bytes(), PAYLOAD_LEN)
    }

    #[inline]
    pub fn next_header(&self) -> u8 {
        self.bytes()[NEXT_HEADER]
    }

    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.bytes()[HOP_LIMIT]
    }

    #[inline]
    pub fn src_addr(&self) -> [u8; 16] {
        read_array(self.bytes(), SRC)
    }

    #[inline]
    pub fn dst_addr(&self) -> [u8; 16] {
        read_array(self.bytes(), DST)
    }

    #[inline]
    fn payload_range(&self) -> core::ops::Range<usize> {
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(self.bytes().len());
        HEADER_LEN.min(end)..end
    }

    /// Bytes 40..40 + payload_len, clamped to the buffer.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.bytes()[self.payload_range()]
    }

    /// [`skip_extension_headers`] over this packet's payload; the offset is relative to
    /// the payload.
    #[inline]
    pub fn ext_headers(&self) -> Result<ExtHeaders> {
        skip_extension_headers(self.next_header(), self.payload())
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6Packet<&'a T> {
    /// [`Ipv6Packet::payload`] with the lifetime of the underlying buffer rather than of the
    /// view, so a parser can return it after the view goes out of scope.
    #[inline]
    pub fn into_payload(self) -> &'a [u8] {
        let range = self.payload_range();
        let buffer: &'a T = self.buffer;
        &buffer.as_ref()[range]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    #[inline]
    fn set_ver_tc_flow(&mut self, value: u32) {
        write_u32(self.bytes_mut(), VER_TC_FLOW, value);
    }

    /// Writes a whole fixed header afresh (a packet we originate): version 6, traffic class
    /// and flow label 0, then the given fields.
    #[inline]
    pub fn emit(&mut self, payload_len: u16, next_header: u8, hop_limit: u8, src: &[u8; 16], dst: &[u8; 16]) {
        self.set_ver_tc_flow(6 << 28);
        self.set_payload_len(payload_len);
        self.set_next_header(next_header);
        self.set_hop_limit(hop_limit);
        self.set_src_addr(src);
        self.set_dst_addr(dst);
    }

    /// Writes version 6, keeping traffic class and flow label.
    #[inline]
    pub fn set_version(&mut self) {
        let v = (self.ver_tc_flow() & 0x0fff_ffff) | (6 << 28);
        self.set_ver_tc_flow(v);
    }

    #[inline]
    pub fn set_traffic_class(&mut self, tc: u8) {
        let v = (self.ver_tc_flow() & !0x0ff0_0000) | (u32::from(tc) << 20);
        self.set_ver_tc_flow(v);
    }

    /// Only the low 20 bits of `label` are used.
    #[inline]
    pub fn set_flow_label(&mut self, label: u32) {
        let v = (self.ver_tc_flow() & !FLOW_LABEL_MASK) | (label & FLOW_LABEL_MASK);
        self.set_ver_tc_flow(v);
    }

    #[inline]
    pub fn set_payload_len(&mut self, len: u16) {
        write_u16(self.bytes_mut(), PAYLOAD_LEN, len);
    }

    #[inline]
    pub fn set_next_header(&mut self, next_header: u8) {
        self.bytes_mut()[NEXT_HEADER] = next_header;
    }

    #[inline]
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.bytes_mut()[HOP_LIMIT] = hop_limit;
    }

    /// Decrements the hop limit, returning the new value; 0 stays 0 (no wrap to 255).
    #[inline]
    pub fn decrement_hop_limit(&mut self) -> u8 {
        let hop_limit = self.hop_limit().saturating_sub(1);
        self.set_hop_limit(hop_limit);
        hop_limit
    }

    #[inline]
    pub fn set_src_addr(&mut self, addr: &[u8; 16]) {
        self.bytes_mut()[SRC..SRC + 16].copy_from_slice(addr);
    }

    #[inline]
    pub fn set_dst_addr(&mut self, addr: &[u8; 16]) {
        self.bytes_mut()[DST..DST + 16].copy_from_slice(addr);
    }

    /// Mutable counterpart of [`Ipv6Packet::payload`], with the same clamping.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.payload_range();
        &mut self.bytes_mut()[range]
    }
}

/// Where a walk over the extension headers ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtHeaders {
    /// The first next-header value that is not a walked extension header (e.g. TCP,
    /// UDP, ICMPv6, ESP, No Next Header) — or [`NEXT_HEADER_FRAGMENT`] for a non-first
    /// fragment, whose bytes after the Fragment header are not an upper-layer header.
    pub protocol: u8,
    /// Offset into the walked bytes of that header (for a non-first fragment: of the
    /// Fragment header itself). Past the end only under [`WalkRules::whole_headers`] false.
    pub offset: usize,
    /// The offset-and-flags field of the last Fragment header walked (0 if none).
    pub fragment_field: u16,
}

impl ExtHeaders {
    /// The packet is part of a fragmented datagram (offset != 0 or M set). An atomic
    /// fragment (offset 0, M clear) is a whole datagram (RFC 6946) and does not count.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.fragment_field & 0xfff9 != 0
    }
}

/// What a Hop-by-Hop header past the first place is to a walk (RFC 8200 4.1 allows it
/// only first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaterHopByHop {
    /// A malformed chain.
    Malformed,
    /// The end of the walk: protocol 0, which local delivery has no handler for (ip6_input).
    Ends,
    /// An extension header like the others (ipv6_skip_exthdr).
    Walked,
}

/// The rules of one walk. The kernel walks extension headers in several places and they
/// differ in exactly these; one walker with the rules as data keeps them from drifting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkRules {
    pub later_hop_by_hop: LaterHopByHop,
    /// Authentication is walked past by its length (false: it ends the walk, as in the
    /// flow dissector, where its SPI names the flow).
    pub past_auth: bool,
    /// Every header must lie wholly in the bytes (Truncated otherwise). False: only the
    /// bytes the walk reads must (next header, length, a Fragment header's field), as in
    /// ipv6_skip_exthdr, so the offset returned may lie past the end.
    pub whole_headers: bool,
    /// More extension headers than this is Malformed.
    pub max_headers: usize,
}

impl WalkRules {
    /// The checked walk of [`skip_extension_headers`].
    pub const CHECKED: WalkRules =
        WalkRules { later_hop_by_hop: LaterHopByHop::Malformed, past_auth: true, whole_headers: true, max_headers: MAX_EXT_HEADERS };
    /// The flow hash's: [`WalkRules::CHECKED`] ending at Authentication, whose SPI names the
    /// flow as in the kernel's flow dissector. (The dissector itself allows 15 headers,
    /// Hop-by-Hop anywhere, and stops at any Fragment header; a hash only has to give a
    /// flow's packets one value, which this does.)
    pub const CHECKED_TO_AUTH: WalkRules = WalkRules { past_auth: false, ..WalkRules::CHECKED };
    /// ip6_input's, on receive: whole headers, no count limit (the bytes bound it), a
    /// Hop-by-Hop header past the first place ends it.
    pub const RECEIVE: WalkRules =
        WalkRules { later_hop_by_hop: LaterHopByHop::Ends, past_auth: true, whole_headers: true, max_headers: usize::MAX };
    /// ipv6_skip_exthdr's, to the letter (ICMPv6 error eligibility, a first fragment's
    /// upper-layer header): headers followed by their length fields alone.
    pub const SKIP_EXTHDR: WalkRules =
        WalkRules { later_hop_by_hop: LaterHopByHop::Walked, past_auth: true, whole_headers: false, max_headers: usize::MAX };
}

/// Walks the extension headers in `bytes` (the IPv6 payload), starting with the type
/// named by the fixed header's next-header field, under [`WalkRules::CHECKED`].
///
/// Walked: Hop-by-Hop (0, only as the first header, RFC 8200 §4.1), Routing (43),
/// Fragment (44, fixed 8 bytes), Destination Options (60): length (n + 1) * 8;
/// Authentication (51): length (n + 2) * 4. Anything else ends the walk.
/// Errors: a 9th extension header or a misplaced Hop-by-Hop is Malformed; a header
/// running past `bytes` is Truncated. Never panics.
pub fn skip_extension_headers(first_next_header: u8, bytes: &[u8]) -> Result<ExtHeaders> {
    walk_extension_headers(first_next_header, bytes, WalkRules::CHECKED)
}

/// [`skip_extension_headers`] ending at Authentication ([`WalkRules::CHECKED_TO_AUTH`]): AH
/// is the flow's protocol, its SPI standing in for the ports (`proto_ports_offset`).
pub fn skip_extension_headers_to_auth(first_next_header: u8, bytes: &[u8]) -> Result<ExtHeaders> {
    walk_extension_headers(first_next_header, bytes, WalkRules::CHECKED_TO_AUTH)
}

/// The one walk over extension headers, under `rules`. A later fragment ends it at its
/// Fragment header. Never panics.
pub fn walk_extension_headers(first_next_header: u8, bytes: &[u8], rules: WalkRules) -> Result<ExtHeaders> {
    let mut next_header = first_next_header;
    let mut offset = 0usize;
    let mut fragment_field = 0u16;
    let mut walked = 0usize;
    loop {
        let units = |at: usize| bytes.get(offset + at).map(|b| usize::from(*b)).ok_or(WireError::Truncated);
        let (header_len, read) = match next_header {
            NEXT_HEADER_HOP_BY_HOP if walked > 0 && rules.later_hop_by_hop != LaterHopByHop::Walked => {
                if rules.later_hop_by_hop == LaterHopByHop::Malformed {
                    return Err(WireError::Malformed);
                }
                return Ok(ExtHeaders { protocol: next_header, offset, fragment_field });
            }
            NEXT_HEADER_HOP_BY_HOP | NEXT_HEADER_ROUTING | NEXT_HEADER_DEST_OPTS => ((units(1)? + 1) * 8, 2),
            NEXT_HEADER_AUTH if rules.past_auth => ((units(1)? + 2) * 4, 2),
            NEXT_HEADER_FRAGMENT => (FRAGMENT_HEADER_LEN, FRAGMENT_OFFSET_FIELD + 2),
            _ => return Ok(ExtHeaders { protocol: next_header, offset, fragment_field }),
        };
        walked += 1;
        if walked > rules.max_headers {
            return Err(WireError::Malformed);
        }
        let need = if rules.whole_headers { header_len } else { read };
        let header = bytes.get(offset..offset + need).ok_or(WireError::Truncated)?;
        if next_header == NEXT_HEADER_FRAGMENT {
            fragment_field = read_u16(header, FRAGMENT_OFFSET_FIELD);
            // Later fragments carry payload continuation, not the next header.
            if fragment_field & 0xfff8 != 0 {
                return Ok(ExtHeaders { protocol: NEXT_HEADER_FRAGMENT, offset, fragment_field });
            }
        }
        next_header = header[0];
        offset += header_len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP};
    use proptest::prelude::*;

    fn packet(payload: &[u8], next_header: u8) -> Vec<u8> {
        let mut bytes = vec![0u8; HEADER_LEN + payload.len()];
        let mut p = Ipv6Packet::new_unchecked(&mut bytes[..]);
        p.set_version();
        p.set_traffic_class(0xb8);
        p.set_flow_label(0x12345);
        p.set_payload_len(payload.len() as u16);
        p.set_next_header(next_header);
        p.set_hop_limit(64);
        p.set_src_addr(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.set_dst_addr(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        p.payload_mut().copy_from_slice(payload);
        bytes
    }

    #[test]
    fn fields_round_trip() {
        let bytes = packet(&[1, 2, 3], IPPROTO_UDP);
        assert_eq!(&bytes[..4], &[0x6b, 0x81, 0x23, 0x45]);
        let p = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 3);
        assert_eq!(p.next_header(), IPPROTO_UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr()[15], 1);
        assert_eq!(p.dst_addr()[15], 2);
        assert_eq!(p.payload(), &[1, 2, 3]);
    }

    #[test]
    fn check_len_errors() {
        let bytes = packet(&[0; 8], IPPROTO_UDP);
        let check = |b: &[u8]| Ipv6Packet::new_checked(b).map(|_| ());
        assert_eq!(check(&bytes[..39]), Err(WireError::Truncated));
        assert_eq!(check(&bytes[..47]), Err(WireError::Truncated));
        let mut b = bytes.clone();
        b[0] = 0x45;
        assert_eq!(check(&b), Err(WireError::Malformed));
        // Trailing bytes past payload_len are fine and not part of the payload.
        let mut b = bytes.clone();
        b.extend_from_slice(&[9; 4]);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload().len(), 8);
    }

    #[test]
    fn hop_limit_does_not_wrap() {
        let mut bytes = packet(&[], IPPROTO_UDP);
        let mut p = Ipv6Packet::new_checked(&mut bytes[..]).unwrap();
        p.set_hop_limit(1);
        assert_eq!(p.decrement_hop_limit(), 0);
        assert_eq!(p.decrement_hop_limit(), 0);
    }

    #[test]
    fn no_extension_headers() {
        let e = skip_extension_headers(IPPROTO_TCP, &[]).unwrap();
        assert_eq!(e, ExtHeaders { protocol: IPPROTO_TCP, offset: 0, fragment_field: 0 });
    }

    #[test]
    fn walks_hbh_routing_dest_ah_fragment() {
        let mut b = Vec::new();
        // Hop-by-Hop, 8 bytes, next = Routing.
        b.extend_from_slice(&[NEXT_HEADER_ROUTING, 0, 1, 4, 0, 0, 0, 0]);
        // Routing, 24 bytes (len 2), next = Destination options.
        b.extend_from_slice(&[NEXT_HEADER_DEST_OPTS, 2]);
        b.extend_from_slice(&[0; 22]);
        // Destination options, 8 bytes, next = AH.
        b.extend_from_slice(&[NEXT_HEADER_AUTH, 0, 1, 4, 0, 0, 0, 0]);
        // AH, payload len 4 -> (4 + 2) * 4 = 24 bytes, next = Fragment.
        b.extend_from_slice(&[NEXT_HEADER_FRAGMENT, 4]);
        b.extend_from_slice(&[0; 22]);
        // Fragment, first fragment (offset 0, M=1), next = UDP.
        b.extend_from_slice(&[IPPROTO_UDP, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef]);
        b.extend_from_slice(&[0xaa; 8]);
        let e = skip_extension_headers(NEXT_HEADER_HOP_BY_HOP, &b).unwrap();
        assert_eq!(e.protocol, IPPROTO_UDP);
        assert_eq!(e.offset, 8 + 24 + 8 + 24 + 8);
        assert!(e.is_fragment());
        assert_eq!(&b[e.offset..], &[0xaa; 8]);

        let p = packet(&b, NEXT_HEADER_HOP_BY_HOP);
        assert_eq!(Ipv6Packet::new_checked(&p[..]).unwrap().ext_headers(), Ok(e));
    }

    #[test]
    fn later_fragment_stops_at_fragment_header() {
        // Dest opts then a fragment at offset 1480 (0x05c8 = 185 << 3).
        let mut b = vec![NEXT_HEADER_FRAGMENT, 0, 1, 4, 0, 0, 0, 0];
        b.extend_from_slice(&[IPPROTO_TCP, 0, 0x05, 0xc8, 0, 0, 0, 1]);
        b.extend_from_slice(&[0x55; 16]);
        let e = skip_extension_headers(NEXT_HEADER_DEST_OPTS, &b).unwrap();
        assert_eq!(e, ExtHeaders { protocol: NEXT_HEADER_FRAGMENT, offset: 8, fragment_field: 0x05c8 });
    }

    #[test]
    fn atomic_fragment_reaches_upper_layer() {
        let b = [IPPROTO_ICMPV6, 0, 0, 0, 0, 0, 0, 7, 128, 0];
        let e = skip_extension_headers(NEXT_HEADER_FRAGMENT, &b).unwrap();
        assert_eq!((e.protocol, e.offset, e.is_fragment()), (IPPROTO_ICMPV6, 8, false));
    }

    #[test]
    fn truncated_and_malformed_chains() {
        // Length byte missing.
        assert_eq!(skip_extension_headers(NEXT_HEADER_ROUTING, &[IPPROTO_TCP]), Err(WireError::Truncated));
        // Declared 16 bytes, 8 present.
        assert_eq!(skip_extension_headers(NEXT_HEADER_DEST_OPTS, &[IPPROTO_TCP, 1, 0, 0, 0, 0, 0, 0]), Err(WireError::Truncated));
        // Fragment header needs 8 bytes.
        assert_eq!(skip_extension_headers(NEXT_HEADER_FRAGMENT, &[IPPROTO_TCP, 0, 0, 0]), Err(WireError::Truncated));
        // Hop-by-Hop after another header.
        let b = [NEXT_HEADER_HOP_BY_HOP, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(skip_extension_headers(NEXT_HEADER_DEST_OPTS, &b), Err(WireError::Malformed));
        // Eight destination-option headers are fine, nine are not.
        let mut chain = Vec::new();
        for _ in 0..8 {
            chain.extend_from_slice(&[NEXT_HEADER_DEST_OPTS, 0, 0, 0, 0, 0, 0, 0]);
        }
        let mut eight = chain.clone();
        eight[56] = IPPROTO_UDP;
        let e = skip_extension_headers(NEXT_HEADER_DEST_OPTS, &eight).unwrap();
        assert_eq!((e.protocol, e.offset), (IPPROTO_UDP, 64));
        chain.extend_from_slice(&[IPPROTO_UDP, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(skip_extension_headers(NEXT_HEADER_DEST_OPTS, &chain), Err(WireError::Malformed));
    }

    /// The rules differ only where they say: a Hop-by-Hop header past the first place,
    /// Authentication, headers cut after their length field, the count.
    #[test]
    fn each_walk_rule_changes_only_its_case() {
        let later_hbh = [NEXT_HEADER_HOP_BY_HOP, 0, 0, 0, 0, 0, 0, 0, IPPROTO_UDP, 0, 0, 0, 0, 0, 0, 0];
        let walk = |b: &[u8], r| walk_extension_headers(NEXT_HEADER_DEST_OPTS, b, r);
        assert_eq!(walk(&later_hbh, WalkRules::CHECKED), Err(WireError::Malformed));
        assert_eq!(walk(&later_hbh, WalkRules::RECEIVE).map(|e| (e.protocol, e.offset)), Ok((NEXT_HEADER_HOP_BY_HOP, 8)));
        assert_eq!(walk(&later_hbh, WalkRules::SKIP_EXTHDR).map(|e| (e.protocol, e.offset)), Ok((IPPROTO_UDP, 16)));
        // A destination options header of 16 bytes with only its first 8 present.
        let cut = [IPPROTO_UDP, 1, 0, 0, 0, 0, 0, 0];
        assert_eq!(walk(&cut, WalkRules::RECEIVE), Err(WireError::Truncated));
        assert_eq!(walk(&cut, WalkRules::SKIP_EXTHDR).map(|e| (e.protocol, e.offset)), Ok((IPPROTO_UDP, 16)));
        assert_eq!(walk(&cut[..1], WalkRules::SKIP_EXTHDR), Err(WireError::Truncated));
        // A later fragment's field is read from its first four bytes.
        let frag = [IPPROTO_UDP, 0, 0, 9];
        let e = walk_extension_headers(NEXT_HEADER_FRAGMENT, &frag, WalkRules::SKIP_EXTHDR).unwrap();
        assert_eq!((e.protocol, e.offset, e.fragment_field, e.is_fragment()), (NEXT_HEADER_FRAGMENT, 0, 9, true));
        assert_eq!(walk_extension_headers(NEXT_HEADER_FRAGMENT, &frag[..3], WalkRules::SKIP_EXTHDR), Err(WireError::Truncated));
        assert_eq!(walk_extension_headers(NEXT_HEADER_FRAGMENT, &frag, WalkRules::RECEIVE), Err(WireError::Truncated));
        // Authentication: walked past or the end.
        let ah = [IPPROTO_TCP, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(skip_extension_headers(NEXT_HEADER_AUTH, &ah).map(|e| (e.protocol, e.offset)), Ok((IPPROTO_TCP, 12)));
        assert_eq!(skip_extension_headers_to_auth(NEXT_HEADER_AUTH, &ah).map(|e| (e.protocol, e.offset)), Ok((NEXT_HEADER_AUTH, 0)));
        // The count: nine headers are too many only for the checked walks.
        let nine: Vec<u8> = (0..9).flat_map(|i| [if i == 8 { IPPROTO_UDP } else { NEXT_HEADER_DEST_OPTS }, 0, 0, 0, 0, 0, 0, 0]).collect();
        assert_eq!(walk(&nine, WalkRules::CHECKED), Err(WireError::Malformed));
        assert_eq!(walk(&nine, WalkRules::RECEIVE).map(|e| e.offset), Ok(72));
    }

    #[test]
    fn set_version_keeps_class_and_label() {
        let mut h = [0u8; HEADER_LEN];
        h[..4].copy_from_slice(&[0x4b, 0x81, 0x23, 0x45]);
        let mut p = Ipv6Packet::new_unchecked(&mut h[..]);
        p.set_version();
        assert_eq!((p.version(), p.traffic_class(), p.flow_label()), (6, 0xb8, 0x12345));
    }

    proptest! {
        #[test]
        fn checked_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200),
                                plausible in any::<bool>()) {
            let mut bytes = bytes;
            if plausible && bytes.len() >= HEADER_LEN {
                bytes[0] = 0x60 | (bytes[0] & 0x0f);
                let len = ((bytes.len() - HEADER_LEN) as u16).saturating_sub(u16::from(bytes[5] % 4));
                bytes[4..6].copy_from_slice(&len.to_be_bytes());
                // Steer the walk into extension headers most of the time.
                bytes[6] = [0, 43, 44, 51, 60, 6, 17, 58][usize::from(bytes[6] % 8)];
            }
            if bytes.len() >= HEADER_LEN {
                let p = Ipv6Packet::new_unchecked(&bytes[..]);
                let _ = (p.version(), p.traffic_class(), p.flow_label(), p.payload_len());
                let _ = (p.next_header(), p.hop_limit(), p.src_addr(), p.dst_addr());
                let _ = (p.payload(), p.ext_headers());
            }
            if let Ok(p) = Ipv6Packet::new_checked(&bytes[..]) {
                prop_assert_eq!(p.payload().len(), usize::from(p.payload_len()));
                prop_assert_eq!(p.into_payload(), p.payload());
                if let Ok(e) = p.ext_headers() {
                    prop_assert!(e.offset <= p.payload().len());
                }
            }
        }

        #[test]
        fn walk_never_panics(first in any::<u8>(), bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let checked = skip_extension_headers(first, &bytes);
            if let Ok(e) = checked {
                prop_assert!(e.offset <= bytes.len());
            }
            // Where the checked walk succeeds, the lenient ones agree with it.
            for rules in [WalkRules::RECEIVE, WalkRules::SKIP_EXTHDR] {
                let other = walk_extension_headers(first, &bytes, rules);
                if checked.is_ok() {
                    prop_assert_eq!(other, checked);
                }
            }
        }
    }
}
