//! ICMPv4 (RFC 792) and ICMPv6 (RFC 4443) messages: the common 8-byte header
//! (type, code, checksum, 4 type-specific bytes) followed by data.
//!
//! A view covers exactly one message (the IP payload): the checksum is computed over
//! the whole view buffer. Getters need `len >= HEADER_LEN`.

use super::checksum;
use super::{read_u16, read_u32, write_u16, write_u32, Result, WireError, IPPROTO_ICMPV6};

pub const HEADER_LEN: usize = 8;

const TYPE: usize = 0;
const CODE: usize = 1;
const CHECKSUM: usize = 2;
/// Type-specific word: echo identifier + sequence, MTU, pointer or unused.
const REST: usize = 4;
const ECHO_IDENT: usize = 4;
const ECHO_SEQ: usize = 6;
/// ICMPv4 "fragmentation needed" carries the next-hop MTU in the low half (RFC 1191).
const V4_NEXT_HOP_MTU: usize = 6;

/// ICMPv4 types and codes.
pub mod icmpv4 {
    pub const ECHO_REPLY: u8 = 0;
    pub const DEST_UNREACHABLE: u8 = 3;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;

    /// Codes of DEST_UNREACHABLE.
    pub const NET_UNREACHABLE: u8 = 0;
    pub const HOST_UNREACHABLE: u8 = 1;
    pub const PROTO_UNREACHABLE: u8 = 2;
    pub const PORT_UNREACHABLE: u8 = 3;
    pub const FRAG_NEEDED: u8 = 4;
    /// Code of TIME_EXCEEDED.
    pub const TTL_EXCEEDED_IN_TRANSIT: u8 = 0;
}

/// ICMPv6 types and codes.
pub mod icmpv6 {
    pub const DEST_UNREACHABLE: u8 = 1;
    pub const PACKET_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    pub const NEIGHBOR_ADVERT: u8 = 136;

    /// Codes of DEST_UNREACHABLE.
    pub const NO_ROUTE: u8 = 0;
    pub const ADDR_UNREACHABLE: u8 = 3;
    pub const PORT_UNREACHABLE: u8 = 4;
    /// Code of TIME_EXCEEDED.
    pub const HOP_LIMIT_EXCEEDED: u8 = 0;
}

/// Both versions share the layout; only the checksum coverage differs, so the common
/// accessors are generated once for each type.
macro_rules! icmp_common {
    ($name:ident) => {
        impl<T: AsRef<[u8]>> $name<T> {
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

            #[inline]
            pub fn check_len(&self) -> Result<()> {
                if self.buffer.as_ref().len() < HEADER_LEN {
                    return Err(WireError::Truncated);
                }
                Ok(())
            }

            #[inline]
            pub fn into_inner(self) -> T {
                self.buffer
            }

            #[inline]
            pub fn msg_type(&self) -> u8 {
                self.buffer.as_ref()[TYPE]
            }

            #[inline]
            pub fn code(&self) -> u8 {
                self.buffer.as_ref()[CODE]
            }

            #[inline]
            pub fn checksum(&self) -> u16 {
                read_u16(self.buffer.as_ref(), CHECKSUM)
            }

            /// Meaningful for echo request/reply.
            #[inline]
            pub fn echo_ident(&self) -> u16 {
                read_u16(self.buffer.as_ref(), ECHO_IDENT)
            }

            /// Meaningful for echo request/reply.
            #[inline]
            pub fn echo_seq(&self) -> u16 {
                read_u16(self.buffer.as_ref(), ECHO_SEQ)
            }

            /// The raw type-specific word (bytes 4..8).
            #[inline]
            pub fn rest_of_header(&self) -> u32 {
                read_u32(self.buffer.as_ref(), REST)
            }

            /// Bytes after the 8-byte header (echo data, or the invoking packet of an
            /// error message).
            #[inline]
            pub fn data(&self) -> &[u8] {
                &self.buffer.as_ref()[self.data_range()]
            }

            #[inline]
            fn data_range(&self) -> core::ops::Range<usize> {
                HEADER_LEN..self.buffer.as_ref().len()
            }
        }

        impl<'a, T: AsRef<[u8]> + ?Sized> $name<&'a T> {
            /// `data` with the lifetime of the underlying buffer rather than of the view.
            #[inline]
            pub fn into_data(self) -> &'a [u8] {
                let range = self.data_range();
                let buffer: &'a T = self.buffer;
                &buffer.as_ref()[range]
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            #[inline]
            pub fn set_msg_type(&mut self, msg_type: u8) {
                self.buffer.as_mut()[TYPE] = msg_type;
            }

            #[inline]
            pub fn set_code(&mut self, code: u8) {
                self.buffer.as_mut()[CODE] = code;
            }

            #[inline]
            pub fn set_checksum(&mut self, csum: u16) {
                write_u16(self.buffer.as_mut(), CHECKSUM, csum);
            }

            #[inline]
            pub fn set_echo_ident(&mut self, ident: u16) {
                write_u16(self.buffer.as_mut(), ECHO_IDENT, ident);
            }

            #[inline]
            pub fn set_echo_seq(&mut self, seq: u16) {
                write_u16(self.buffer.as_mut(), ECHO_SEQ, seq);
            }

            #[inline]
            pub fn set_rest_of_header(&mut self, rest: u32) {
                write_u32(self.buffer.as_mut(), REST, rest);
            }

            #[inline]
            pub fn data_mut(&mut self) -> &mut [u8] {
                let range = self.data_range();
                &mut self.buffer.as_mut()[range]
            }
        }
    };
}

/// View of an ICMPv4 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// View of an ICMPv6 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

icmp_common!(Icmpv4Packet);
icmp_common!(Icmpv6Packet);

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Next-hop MTU of a "fragmentation needed" message (RFC 1191).
    #[inline]
    pub fn next_hop_mtu(&self) -> u16 {
        read_u16(self.buffer.as_ref(), V4_NEXT_HOP_MTU)
    }

    /// The checksum covers the whole message; no pseudo-header in ICMPv4.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::verifies(checksum::sum_be16(self.buffer.as_ref()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    #[inline]
    pub fn set_next_hop_mtu(&mut self, mtu: u16) {
        write_u16(self.buffer.as_mut(), V4_NEXT_HOP_MTU, mtu);
    }

    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let csum = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(csum);
    }
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// MTU of a Packet Too Big message (the whole type-specific word).
    #[inline]
    pub fn mtu(&self) -> u32 {
        self.rest_of_header()
    }

    #[inline]
    fn pseudo_sum(&self, src: &[u8; 16], dst: &[u8; 16]) -> u64 {
        let len = self.buffer.as_ref().len();
        // A message longer than u32 cannot be an IPv6 payload; saturating keeps it defined.
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        checksum::pseudo_header_v6(src, dst, IPPROTO_ICMPV6, len)
    }

    /// ICMPv6 checksum includes the IPv6 pseudo-header (RFC 4443 §2.3).
    #[inline]
    pub fn verify_checksum(&self, src: &[u8; 16], dst: &[u8; 16]) -> bool {
        let sum = self.pseudo_sum(src, dst) + checksum::sum_be16(self.buffer.as_ref());
        checksum::verifies(sum)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    #[inline]
    pub fn set_mtu(&mut self, mtu: u32) {
        self.set_rest_of_header(mtu);
    }

    #[inline]
    pub fn fill_checksum(&mut self, src: &[u8; 16], dst: &[u8; 16]) {
        self.set_checksum(0);
        let sum = self.pseudo_sum(src, dst) + checksum::sum_be16(self.buffer.as_ref());
        self.set_checksum(!checksum::fold(sum));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn echo_request_v4_known_checksum() {
        // Type 8, ident 1, seq 1, data "abcd": sum = 0x0800 + 1 + 1 + 0x6162 + 0x6364
        // = 0xccc8, checksum = 0x3337.
        let mut bytes = [8, 0, 0, 0, 0, 1, 0, 1, b'a', b'b', b'c', b'd'];
        let mut p = Icmpv4Packet::new_checked(&mut bytes[..]).unwrap();
        p.fill_checksum();
        assert_eq!(p.checksum(), 0x3337);
        assert!(p.verify_checksum());
        assert_eq!(p.msg_type(), icmpv4::ECHO_REQUEST);
        assert_eq!((p.echo_ident(), p.echo_seq()), (1, 1));
        assert_eq!(p.data(), b"abcd");

        // Turning it into a reply: type word changes 0x0800 -> 0x0000.
        p.set_msg_type(icmpv4::ECHO_REPLY);
        let patched = checksum::update16(0x3337, 0x0800, 0x0000);
        p.fill_checksum();
        assert_eq!(p.checksum(), patched);
    }

    #[test]
    fn v4_errors_and_mtu() {
        let mut bytes = [0u8; 36];
        let mut p = Icmpv4Packet::new_checked(&mut bytes[..]).unwrap();
        p.set_msg_type(icmpv4::DEST_UNREACHABLE);
        p.set_code(icmpv4::FRAG_NEEDED);
        p.set_next_hop_mtu(1400);
        p.data_mut()[0] = 0x45;
        p.fill_checksum();
        let p = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.next_hop_mtu(), 1400);
        assert_eq!(p.rest_of_header(), 1400);
        assert_eq!(p.data().len(), 28);
        assert!(p.verify_checksum());
        let mut corrupted = bytes;
        corrupted[20] ^= 0x80;
        assert!(!Icmpv4Packet::new_checked(&corrupted[..]).unwrap().verify_checksum());
    }

    #[test]
    fn v6_checksum_uses_pseudo_header() {
        let src = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let mut bytes = [0u8; 16];
        let mut p = Icmpv6Packet::new_checked(&mut bytes[..]).unwrap();
        p.set_msg_type(icmpv6::ECHO_REQUEST);
        p.set_echo_ident(0x1234);
        p.set_echo_seq(7);
        p.data_mut().copy_from_slice(b"pingpong");
        p.fill_checksum(&src, &dst);
        assert!(p.verify_checksum(&src, &dst));
        // Independent computation: pseudo-header bytes + message.
        let mut all = Vec::new();
        all.extend_from_slice(&src);
        all.extend_from_slice(&dst);
        all.extend_from_slice(&16u32.to_be_bytes());
        all.extend_from_slice(&[0, 0, 0, 58]);
        all.extend_from_slice(&bytes);
        assert!(checksum::verifies(checksum::sum_be16(&all)));
        // Wrong address, wrong sum.
        let p = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        assert!(!p.verify_checksum(&dst, &dst));
    }

    #[test]
    fn v6_packet_too_big() {
        let mut bytes = [0u8; 8];
        let mut p = Icmpv6Packet::new_checked(&mut bytes[..]).unwrap();
        p.set_msg_type(icmpv6::PACKET_TOO_BIG);
        p.set_mtu(1280);
        assert_eq!(p.mtu(), 1280);
        assert!(p.data().is_empty());
    }

    #[test]
    fn truncated() {
        assert_eq!(Icmpv4Packet::new_checked(&[8u8, 0, 0, 0, 0, 0, 0][..]).unwrap_err(), WireError::Truncated);
        assert_eq!(Icmpv6Packet::new_checked(&[128u8][..]).unwrap_err(), WireError::Truncated);
    }

    proptest! {
        #[test]
        fn checked_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200),
                                src in any::<[u8; 16]>(), dst in any::<[u8; 16]>()) {
            if let Ok(p) = Icmpv4Packet::new_checked(&bytes[..]) {
                let _ = (p.msg_type(), p.code(), p.checksum(), p.echo_ident(), p.echo_seq());
                let _ = (p.rest_of_header(), p.next_hop_mtu(), p.verify_checksum());
                prop_assert_eq!(p.data().len(), bytes.len() - HEADER_LEN);
                prop_assert_eq!(p.into_data(), p.data());
                let mut copy = bytes.clone();
                let mut m = Icmpv4Packet::new_checked(&mut copy[..]).unwrap();
                m.fill_checksum();
                prop_assert!(m.verify_checksum());
            }
            if let Ok(p) = Icmpv6Packet::new_checked(&bytes[..]) {
                let _ = (p.msg_type(), p.code(), p.checksum(), p.echo_ident(), p.echo_seq());
                let _ = (p.mtu(), p.verify_checksum(&src, &dst));
                prop_assert_eq!(p.data().len(), bytes.len() - HEADER_LEN);
                prop_assert_eq!(p.into_data(), p.data());
                let mut copy = bytes.clone();
                let mut m = Icmpv6Packet::new_checked(&mut copy[..]).unwrap();
                m.fill_checksum(&src, &dst);
                prop_assert!(m.verify_checksum(&src, &dst));
            }
        }
    }
}
