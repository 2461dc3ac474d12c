//! IPv4 header (RFC 791).
//!
//! Getter contract, so the receive path can validate step by step and name each drop:
//! after a plain `buffer.len() >= MIN_HEADER_LEN` check, every fixed-field getter
//! (`version` .. `dst_addr`, `header_len`, `total_len`, flags, checksum) and the
//! clamped accessors `options`, `payload`, `verify_checksum` never panic, whatever the
//! IHL and total length say. `new_checked` performs the whole validation at once.

use super::checksum;
use super::{read_array, read_u16, write_u16, Result, WireError};

pub const MIN_HEADER_LEN: usize = 20;
/// IHL is 4 bits of 32-bit words.
pub const MAX_HEADER_LEN: usize = 60;

const VER_IHL: usize = 0;
const TOS: usize = 1;
const TOTAL_LEN: usize = 2;
const IDENT: usize = 4;
const FLAGS_FRAG: usize = 6;
const TTL: usize = 8;
const PROTOCOL: usize = 9;
const CHECKSUM: usize = 10;
const SRC: usize = 12;
const DST: usize = 16;

const FLAG_RESERVED: u16 = 0x8000;
const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// View of an IPv4 packet (header and, as far as the buffer holds it, payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
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

    /// In order: len >= 20 (Truncated), version 4 (Malformed), IHL >= 5 (Malformed),
    /// header_len <= len (Truncated), total_len >= header_len (Malformed),
    /// total_len <= len (Truncated). Bytes past total_len (e.g. Ethernet padding) are allowed.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if self.version() != 4 {
            return Err(WireError::Malformed);
        }
        let header_len = self.header_len();
        if header_len < MIN_HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if header_len > len {
            return Err(WireError::Truncated);
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(WireError::Malformed);
        }
        if total_len > len {
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
    pub fn version(&self) -> u8 {
        self.bytes()[VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4), as declared: may be < 20 or past the buffer
    /// on unchecked input.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.bytes()[VER_IHL] & 0x0f) * 4
    }

    #[inline]
    pub fn tos(&self) -> u8 {
        self.bytes()[TOS]
    }

    /// Differentiated services code point (upper 6 bits of TOS).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// Explicit congestion notification (lower 2 bits of TOS).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.tos() & 0x03
    }

    #[inline]
    pub fn total_len(&self) -> u16 {
        read_u16(self.bytes(), TOTAL_LEN)
    }

    #[inline]
    pub fn ident(&self) -> u16 {
        read_u16(self.bytes(), IDENT)
    }

    #[inline]
    fn flags_frag(&self) -> u16 {
        read_u16(self.bytes(), FLAGS_FRAG)
    }

    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & FLAG_DF != 0
    }

    /// The reserved flag bit (RFC 791: must be zero).
    #[inline]
    pub fn reserved_flag(&self) -> bool {
        self.flags_frag() & FLAG_RESERVED != 0
    }

    #[inline]
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & FRAG_OFFSET_MASK) << 3
    }

    /// Any fragment, first included: MF set or a non-zero offset.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.flags_frag() & (FLAG_MF | FRAG_OFFSET_MASK) != 0
    }

    #[inline]
    pub fn ttl(&self) -> u8 {
        self.bytes()[TTL]
    }

    #[inline]
    pub fn protocol(&self) -> u8 {
        self.bytes()[PROTOCOL]
    }

    #[inline]
    pub fn header_checksum(&self) -> u16 {
        read_u16(self.bytes(), CHECKSUM)
    }

    #[inline]
    pub fn src_addr(&self) -> [u8; 4] {
        read_array(self.bytes(), SRC)
    }

    #[inline]
    pub fn dst_addr(&self) -> [u8; 4] {
        read_array(self.bytes(), DST)
    }

    /// End of the header bytes that options and `fill_checksum` use: the declared header
    /// length clamped into [20, len] (callers guarantee len >= 20).
    #[inline]
    fn header_end(&self) -> usize {
        let len = self.bytes().len();
        self.header_len().max(MIN_HEADER_LEN).min(len)
    }

    /// Options (bytes 20..header_len), clamped to the buffer; empty when IHL <= 5.
    #[inline]
    pub fn options(&self) -> &[u8] {
        let end = self.header_end();
        self.bytes().get(MIN_HEADER_LEN..end).unwrap_or(&[])
    }

    /// header_len..total_len clamped to the buffer; never starts inside the fixed header
    /// (IHL < 5) and is empty when the fields are inconsistent.
    #[inline]
    fn payload_range(&self) -> core::ops::Range<usize> {
        let start = self.header_len().max(MIN_HEADER_LEN);
        let end = usize::from(self.total_len()).min(self.bytes().len());
        start.min(end)..end
    }

    /// Bytes header_len..total_len, clamped to the buffer (empty if inconsistent).
    /// Excludes Ethernet padding past total_len.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.bytes()[self.payload_range()]
    }

    /// Header checksum is valid. False when the declared header does not fit
    /// (IHL < 5 or header_len > len), since it cannot be checked then.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        let header_len = self.header_len();
        match self.bytes().get(..header_len) {
            Some(header) if header_len >= MIN_HEADER_LEN => checksum::ipv4_header_ok(header),
            _ => false,
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv4Packet<&'a T> {
    /// [`Ipv4Packet::payload`] with the lifetime of the underlying buffer rather than of the
    /// view, so a parser can return it after the view goes out of scope.
    #[inline]
    pub fn into_payload(self) -> &'a [u8] {
        let range = self.payload_range();
        let buffer: &'a T = self.buffer;
        &buffer.as_ref()[range]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Writes version 4 and IHL for `header_len` bytes (rounded down to 4-byte units,
    /// capped at 60).
    #[inline]
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        let ihl = (header_len.min(MAX_HEADER_LEN) / 4) as u8;
        self.bytes_mut()[VER_IHL] = (4 << 4) | ihl;
    }

    #[inline]
    pub fn set_tos(&mut self, tos: u8) {
        self.bytes_mut()[TOS] = tos;
    }

    #[inline]
    pub fn set_total_len(&mut self, total_len: u16) {
        write_u16(self.bytes_mut(), TOTAL_LEN, total_len);
    }

    #[inline]
    pub fn set_ident(&mut self, ident: u16) {
        write_u16(self.bytes_mut(), IDENT, ident);
    }

    #[inline]
    fn set_flags_frag(&mut self, value: u16) {
        write_u16(self.bytes_mut(), FLAGS_FRAG, value);
    }

    #[inline]
    pub fn set_dont_frag(&mut self, df: bool) {
        let v = self.flags_frag() & !FLAG_DF;
        self.set_flags_frag(if df { v | FLAG_DF } else { v });
    }

    #[inline]
    pub fn set_more_frags(&mut self, mf: bool) {
        let v = self.flags_frag() & !FLAG_MF;
        self.set_flags_frag(if mf { v | FLAG_MF } else { v });
    }

    /// The whole flags + offset word of a packet that is no fragment: DF as given, the
    /// reserved bit, MF and the offset 0 (a header written afresh, e.g. a reply's).
    #[inline]
    pub fn set_unfragmented(&mut self, df: bool) {
        self.set_flags_frag(if df { FLAG_DF } else { 0 });
    }

    /// The whole flags + offset word of a fragment at `offset` bytes (low 3 bits dropped):
    /// MF as given, DF and the reserved bit clear, as ip_fragment writes it.
    #[inline]
    pub fn set_fragment(&mut self, offset: u16, more: bool) {
        let mf = if more { FLAG_MF } else { 0 };
        self.set_flags_frag(((offset >> 3) & FRAG_OFFSET_MASK) | mf);
    }

    /// Offset in bytes; the low 3 bits are dropped since the field counts 8-byte units.
    #[inline]
    pub fn set_frag_offset(&mut self, offset: u16) {
        let v = (self.flags_frag() & !FRAG_OFFSET_MASK) | (offset >> 3);
        self.set_flags_frag(v);
    }

    #[inline]
    pub fn set_ttl(&mut self, ttl: u8) {
        self.bytes_mut()[TTL] = ttl;
    }

    #[inline]
    pub fn set_protocol(&mut self, protocol: u8) {
        self.bytes_mut()[PROTOCOL] = protocol;
    }

    #[inline]
    pub fn set_header_checksum(&mut self, csum: u16) {
        write_u16(self.bytes_mut(), CHECKSUM, csum);
    }

    #[inline]
    pub fn set_src_addr(&mut self, addr: &[u8; 4]) {
        self.bytes_mut()[SRC..SRC + 4].copy_from_slice(addr);
    }

    #[inline]
    pub fn set_dst_addr(&mut self, addr: &[u8; 4]) {
        self.bytes_mut()[DST..DST + 4].copy_from_slice(addr);
    }

    /// Recomputes the header checksum over the declared header (clamped into [20, len]).
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_header_checksum(0);
        let header = &self.bytes()[..self.header_end()];
        // The usual 20-byte header summed inline (GSO fills one per segment).
        let csum = match <&[u8; MIN_HEADER_LEN]>::try_from(header) {
            Ok(h) => !checksum::fold(checksum::sum_fixed(h)),
            Err(_) => checksum::checksum(header),
        };
        self.set_header_checksum(csum);
    }

    /// Decrements TTL and patches the checksum incrementally, returning the new TTL. A TTL
    /// of 0 is left alone (returns 0): forwarding must drop at TTL <= 1 before calling this,
    /// and wrapping to 255 would revive the packet.
    ///
    /// The TTL is the high byte of its 16-bit word, so the header's sum drops by exactly
    /// 0x0100 and its complement, the checksum, grows by 0x0100 (RFC 1141): one add with an
    /// end-around carry. A sum reaching 0xffff becomes 0x0000, as a full recompute writes it
    /// (a header's sum is never +0), so the result always equals the recomputed checksum.
    #[inline]
    pub fn decrement_ttl(&mut self) -> u8 {
        // One bounds check for the fixed header instead of one per field.
        let Some(h) = self.bytes_mut().first_chunk_mut::<MIN_HEADER_LEN>() else {
            return 0;
        };
        let ttl = h[TTL];
        if ttl == 0 {
            return 0;
        }
        let c = u32::from(u16::from_be_bytes([h[CHECKSUM], h[CHECKSUM + 1]])) + 0x0100;
        let csum = (c + u32::from(c >= 0xffff)) as u16;
        h[TTL] = ttl - 1;
        h[CHECKSUM..CHECKSUM + 2].copy_from_slice(&csum.to_be_bytes());
        ttl - 1
    }

    /// Sets total length and patches the checksum incrementally (e.g. after GRO merged
    /// segments into this packet).
    #[inline]
    pub fn set_total_len_and_patch_checksum(&mut self, total_len: u16) {
        let csum = checksum::update16(self.header_checksum(), self.total_len(), total_len);
        self.set_total_len(total_len);
        self.set_header_checksum(csum);
    }

    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_end();
        self.bytes_mut().get_mut(MIN_HEADER_LEN..end).unwrap_or(&mut [])
    }

    /// Mutable counterpart of [`Ipv4Packet::payload`], with the same clamping.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.payload_range();
        &mut self.bytes_mut()[range]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::IPPROTO_UDP;
    use proptest::prelude::*;

    /// 192.168.0.1 -> 192.168.0.199, UDP, TTL 64, DF, checksum 0xb861, total length 0x73.
    const HEADER: [u8; 20] =
        [0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7];

    fn packet(total_len: usize, extra: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; total_len + extra];
        bytes[..20].copy_from_slice(&HEADER);
        bytes[2..4].copy_from_slice(&(total_len as u16).to_be_bytes());
        let mut p = Ipv4Packet::new_unchecked(&mut bytes[..]);
        p.fill_checksum();
        bytes
    }

    /// A header written afresh is no fragment: DF as asked, and the reserved bit, MF and
    /// the offset of whatever the buffer held before all cleared.
    #[test]
    fn unfragmented_clears_the_whole_flags_word() {
        let mut b = [0u8; 20];
        b[6..8].copy_from_slice(&0xbfffu16.to_be_bytes()); // reserved, MF, offset all set
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.set_unfragmented(true);
        assert_eq!(u16::from_be_bytes([b[6], b[7]]), 0x4000);
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.set_unfragmented(false);
        assert_eq!(u16::from_be_bytes([b[6], b[7]]), 0);
    }

    /// A fragment's word: offset in 8-byte units and MF, DF and the reserved bit cleared
    /// whatever the datagram had (ip_fragment's).
    #[test]
    fn fragment_word_keeps_only_offset_and_mf() {
        let mut b = [0u8; 20];
        b[6..8].copy_from_slice(&0xffffu16.to_be_bytes());
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.set_fragment(1480, true);
        assert_eq!((p.frag_offset(), p.more_frags(), p.dont_frag()), (1480, true, false));
        assert_eq!(u16::from_be_bytes([b[6], b[7]]), 0x2000 | 185);
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.set_fragment(65528, false);
        assert_eq!(u16::from_be_bytes([b[6], b[7]]), 0x1fff);
    }

    #[test]
    fn parse_known_header() {
        let bytes = packet(0x73, 0);
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.header_checksum(), 0xb861);
        assert!(p.verify_checksum());
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 0x73);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert!(!p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), IPPROTO_UDP);
        assert_eq!(p.src_addr(), [192, 168, 0, 1]);
        assert_eq!(p.dst_addr(), [192, 168, 0, 199]);
        assert!(p.options().is_empty());
        assert_eq!(p.payload().len(), 0x73 - 20);
    }

    #[test]
    fn dscp_and_ecn_split_the_tos_byte() {
        // RFC 2474 / 3168: DSCP is the upper six bits of TOS, ECN the lower two.
        let mut bytes = packet(28, 0);
        bytes[1] = 0xb9; // DSCP 46 (EF), ECN 1 (ECT(1))
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.tos(), p.dscp(), p.ecn()), (0xb9, 46, 1));
    }

    #[test]
    fn payload_excludes_ethernet_padding() {
        let bytes = packet(28, 18);
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.payload().len(), 8);
    }

    #[test]
    fn check_len_errors_in_order() {
        let good = packet(40, 0);
        let check = |bytes: &[u8]| Ipv4Packet::new_checked(bytes).map(|_| ());
        assert_eq!(check(&good[..19]), Err(WireError::Truncated));
        let mut b = good.clone();
        b[0] = 0x65;
        assert_eq!(check(&b), Err(WireError::Malformed), "version 6");
        b[0] = 0x44;
        assert_eq!(check(&b), Err(WireError::Malformed), "IHL 4");
        b[0] = 0x4f;
        assert_eq!(check(&b), Err(WireError::Truncated), "header past buffer");
        let mut b = good.clone();
        b[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(check(&b), Err(WireError::Malformed), "total < header");
        assert_eq!(check(&good[..39]), Err(WireError::Truncated), "total > len");
        assert_eq!(check(&good), Ok(()));
    }

    #[test]
    fn getters_safe_after_min_len_only() {
        // IHL 15 and total length 65535 over a 20-byte buffer.
        let mut b = HEADER;
        b[0] = 0x4f;
        b[2] = 0xff;
        b[3] = 0xff;
        let p = Ipv4Packet::new_unchecked(&b[..]);
        assert_eq!(p.header_len(), 60);
        assert!(p.options().is_empty());
        assert!(p.payload().is_empty());
        assert!(!p.verify_checksum());
        // IHL 0.
        b[0] = 0x40;
        let p = Ipv4Packet::new_unchecked(&b[..]);
        assert_eq!(p.header_len(), 0);
        assert!(!p.verify_checksum());
        assert!(p.options().is_empty());
        assert!(p.payload().is_empty(), "never starts inside the fixed header");
    }

    #[test]
    fn options_and_fragments() {
        let mut bytes = [0u8; 32];
        let mut p = Ipv4Packet::new_unchecked(&mut bytes[..]);
        p.set_version_and_header_len(24);
        p.set_total_len(32);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        p.set_dont_frag(false);
        p.options_mut().copy_from_slice(&[1, 1, 1, 0]);
        p.payload_mut().fill(0xaa);
        p.fill_checksum();
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[0xaa; 8]);
        assert!(p.more_frags());
        assert_eq!(p.frag_offset(), 1480);
        assert!(p.is_fragment());
        assert!(p.verify_checksum());

        let mut p = Ipv4Packet::new_unchecked(&mut bytes[..]);
        p.set_more_frags(false);
        assert!(p.is_fragment(), "last fragment: offset only");
        p.set_frag_offset(0);
        assert!(!p.is_fragment());
    }

    /// The contract: a header whose IHL is below 5 is never "valid", even when the bytes
    /// it declares happen to sum right.
    #[test]
    fn a_header_shorter_than_twenty_bytes_never_verifies() {
        let mut bytes = packet(0x73, 0);
        bytes[0] = 0x44; // IHL 4: a 16-byte header
                         // Make the 16 declared bytes sum to 0xffff through the checksum field.
        bytes[10..12].fill(0);
        let c = !checksum::fold(checksum::sum_be16(&bytes[..16]));
        bytes[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(checksum::ipv4_header_ok(&bytes[..16]), "the 16 bytes alone sum right");
        assert!(!Ipv4Packet::new_unchecked(&bytes[..]).verify_checksum());
    }

    #[test]
    fn decrement_ttl_patches_checksum() {
        let mut bytes = packet(0x73, 0);
        let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(p.decrement_ttl(), 63);
        assert_eq!(p.ttl(), 63);
        assert!(p.verify_checksum());
        p.set_ttl(1);
        p.fill_checksum();
        assert_eq!(p.decrement_ttl(), 0);
        assert!(p.verify_checksum());
        let before = p.header_checksum();
        assert_eq!(p.decrement_ttl(), 0, "TTL 0 does not wrap");
        assert_eq!((p.ttl(), p.header_checksum()), (0, before));
    }

    /// Every checksum value the header can have (the ID word takes all 65536 values), the
    /// end-around carry and the 0xffff → 0x0000 case included: the incremental TTL patch
    /// writes what a full recompute writes.
    #[test]
    fn decrement_ttl_matches_recompute_for_every_checksum() {
        let mut bytes = packet(0x73, 0);
        for id in 0..=u16::MAX {
            let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
            p.set_ident(id);
            p.set_ttl(64);
            p.fill_checksum();
            assert_eq!(p.decrement_ttl(), 63);
            let incremental = p.header_checksum();
            p.fill_checksum();
            assert_eq!(incremental, p.header_checksum(), "id {id:#06x}");
        }
    }

    #[test]
    fn decrement_ttl_on_a_short_buffer_changes_nothing() {
        let mut bytes = [0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 17];
        assert_eq!(Ipv4Packet::new_unchecked(&mut bytes[..]).decrement_ttl(), 0);
        assert_eq!(bytes[8], 64);
    }

    #[test]
    fn verify_detects_corruption() {
        let mut bytes = packet(0x73, 0);
        bytes[15] ^= 0x01;
        assert!(!Ipv4Packet::new_checked(&bytes[..]).unwrap().verify_checksum());
    }

    fn header_strategy() -> impl Strategy<Value = Vec<u8>> {
        (proptest::collection::vec(any::<u8>(), 20..=60), 0usize..=10).prop_map(|(mut b, ihl_extra)| {
            let header_len = (20 + ihl_extra * 4).min(b.len() & !3);
            b.truncate(header_len);
            b[0] = 0x40 | (header_len / 4) as u8;
            let len = b.len() as u16;
            b[2..4].copy_from_slice(&len.to_be_bytes());
            Ipv4Packet::new_unchecked(&mut b[..]).fill_checksum();
            b
        })
    }

    proptest! {
        #[test]
        fn checked_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200),
                                plausible in any::<bool>()) {
            let mut bytes = bytes;
            // Half the cases get a version/IHL byte and total length that can pass.
            if plausible && bytes.len() >= 20 {
                bytes[0] = 0x45 + (bytes[0] % 3);
                let total = (bytes.len() - usize::from(bytes[1] % 8)) as u16;
                bytes[2..4].copy_from_slice(&total.to_be_bytes());
            }
            if bytes.len() >= MIN_HEADER_LEN {
                // The documented minimum for the getters, whatever check_len says.
                let p = Ipv4Packet::new_unchecked(&bytes[..]);
                let _ = (p.version(), p.header_len(), p.tos(), p.dscp(), p.ecn());
                let _ = (p.total_len(), p.ident(), p.dont_frag(), p.more_frags());
                let _ = (p.frag_offset(), p.is_fragment(), p.ttl(), p.protocol());
                let _ = (p.header_checksum(), p.src_addr(), p.dst_addr());
                let _ = (p.options(), p.payload(), p.verify_checksum());
                let mut copy = bytes.clone();
                let mut m = Ipv4Packet::new_unchecked(&mut copy[..]);
                let _ = (m.options_mut().len(), m.payload_mut().len());
                m.decrement_ttl();
                m.fill_checksum();
            }
            if let Ok(p) = Ipv4Packet::new_checked(&bytes[..]) {
                prop_assert_eq!(p.version(), 4);
                prop_assert_eq!(p.options().len(), p.header_len() - 20);
                prop_assert_eq!(p.payload().len(), usize::from(p.total_len()) - p.header_len());
                prop_assert_eq!(p.into_payload(), p.payload());
            }
        }

        #[test]
        fn decrement_ttl_matches_recompute(header in header_strategy(), ttl in 1u8..=255) {
            let mut bytes = header;
            let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
            p.set_ttl(ttl);
            p.fill_checksum();
            prop_assert_eq!(p.decrement_ttl(), ttl - 1);
            let incremental = p.header_checksum();
            p.fill_checksum();
            prop_assert_eq!(incremental, p.header_checksum());
            prop_assert!(p.verify_checksum());
        }

        #[test]
        fn total_len_patch_matches_recompute(header in header_strategy(), extra in 0u16..1000) {
            let mut bytes = header;
            let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
            let new_len = p.total_len() + extra;
            p.set_total_len_and_patch_checksum(new_len);
            let incremental = p.header_checksum();
            p.fill_checksum();
            prop_assert_eq!(incremental, p.header_checksum());
        }
    }
}
