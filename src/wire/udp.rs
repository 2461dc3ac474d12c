//! UDP header (RFC 768; IPv6 rules from RFC 8200 §8.1).
//!
//! Getters need `len >= HEADER_LEN`; `payload` and the checksum functions then clamp to
//! the buffer whatever the length field says.

use super::checksum;
use super::{read_u16, write_u16, Result, WireError, IPPROTO_UDP};

pub const HEADER_LEN: usize = 8;

const SRC_PORT: usize = 0;
const DST_PORT: usize = 2;
const LENGTH: usize = 4;
const CHECKSUM: usize = 6;

/// View of a UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
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

    /// len >= 8 (Truncated), length field >= 8 (Malformed), length field <= len
    /// (Truncated). A buffer longer than the length field is accepted (IP padding).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let declared = usize::from(self.len());
        if declared < HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if declared > len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), SRC_PORT)
    }

    #[inline]
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), DST_PORT)
    }

    /// The length field: header + payload, in bytes.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), LENGTH)
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), CHECKSUM)
    }

    /// The datagram as the length field bounds it, clamped to the buffer.
    #[inline]
    fn datagram(&self) -> &[u8] {
        let bytes = self.buffer.as_ref();
        let end = usize::from(self.len()).min(bytes.len());
        &bytes[..end]
    }

    #[inline]
    fn payload_range(&self) -> core::ops::Range<usize> {
        let end = self.datagram().len();
        HEADER_LEN.min(end)..end
    }

    /// Bytes 8..length, clamped to the buffer (empty when the length field is < 8).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.payload_range()]
    }

    /// The checksum can only be judged over a consistent datagram (8 <= length <= len).
    #[inline]
    fn checkable(&self) -> bool {
        let declared = usize::from(self.len());
        (HEADER_LEN..=self.buffer.as_ref().len()).contains(&declared)
    }

    /// A zero checksum means "none" and is valid over IPv4.
    #[inline]
    pub fn verify_checksum_v4(&self, src: &[u8; 4], dst: &[u8; 4]) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        self.checkable()
            && checksum::verifies(checksum::pseudo_header_v4(src, dst, IPPROTO_UDP, self.len()) + checksum::sum_be16(self.datagram()))
    }

    /// Over IPv6 the checksum is mandatory: zero is invalid.
    #[inline]
    pub fn verify_checksum_v6(&self, src: &[u8; 16], dst: &[u8; 16]) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        self.checkable()
            && checksum::verifies(
                checksum::pseudo_header_v6(src, dst, IPPROTO_UDP, u32::from(self.len())) + checksum::sum_be16(self.datagram()),
            )
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> UdpPacket<&'a T> {
    /// [`UdpPacket::payload`] with the lifetime of the underlying buffer rather than of the
    /// view, so a parser can return it after the view goes out of scope.
    #[inline]
    pub fn into_payload(self) -> &'a [u8] {
        let range = self.payload_range();
        let buffer: &'a T = self.buffer;
        &buffer.as_ref()[range]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    #[inline]
    pub fn set_src_port(&mut self, port: u16) {
        write_u16(self.buffer.as_mut(), SRC_PORT, port);
    }

    #[inline]
    pub fn set_dst_port(&mut self, port: u16) {
        write_u16(self.buffer.as_mut(), DST_PORT, port);
    }

    #[inline]
    pub fn set_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), LENGTH, len);
    }

    #[inline]
    pub fn set_checksum(&mut self, csum: u16) {
        write_u16(self.buffer.as_mut(), CHECKSUM, csum);
    }

    /// Mutable counterpart of [`UdpPacket::payload`], with the same clamping.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.payload_range();
        &mut self.buffer.as_mut()[range]
    }

    /// Computes the checksum over pseudo-header + datagram (as bounded by the length
    /// field, clamped to the buffer). A computed 0 is sent as 0xffff, since 0 means
    /// "no checksum" (RFC 768).
    #[inline]
    fn fill_with_pseudo(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let sum = pseudo + checksum::sum_be16(self.datagram());
        let csum = match !checksum::fold(sum) {
            0 => 0xffff,
            c => c,
        };
        self.set_checksum(csum);
    }

    #[inline]
    pub fn fill_checksum_v4(&mut self, src: &[u8; 4], dst: &[u8; 4]) {
        let pseudo = checksum::pseudo_header_v4(src, dst, IPPROTO_UDP, self.len());
        self.fill_with_pseudo(pseudo);
    }

    #[inline]
    pub fn fill_checksum_v6(&mut self, src: &[u8; 16], dst: &[u8; 16]) {
        let pseudo = checksum::pseudo_header_v6(src, dst, IPPROTO_UDP, u32::from(self.len()));
        self.fill_with_pseudo(pseudo);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: [u8; 4] = [192, 168, 1, 1];
    const DST: [u8; 4] = [192, 168, 1, 2];

    fn datagram(payload: &[u8]) -> Vec<u8> {
        let mut bytes = vec![0u8; HEADER_LEN + payload.len()];
        let mut p = UdpPacket::new_unchecked(&mut bytes[..]);
        p.set_src_port(1234);
        p.set_dst_port(53);
        p.set_len((HEADER_LEN + payload.len()) as u16);
        p.payload_mut().copy_from_slice(payload);
        bytes
    }

    #[test]
    fn known_v4_checksum() {
        // Pseudo: c0a8+0101+c0a8+0102+0011+000a = 0x1_836e -> 0x836f;
        // header: 04d2+0035+000a = 0x0511; data "hi" = 0x6869.
        // 0x836f + 0x0511 + 0x6869 = 0xf0e9 -> checksum 0x0f16.
        let mut bytes = datagram(b"hi");
        let mut p = UdpPacket::new_checked(&mut bytes[..]).unwrap();
        p.fill_checksum_v4(&SRC, &DST);
        assert_eq!(p.checksum(), 0x0f16);
        assert!(p.verify_checksum_v4(&SRC, &DST));
        assert!(!p.verify_checksum_v4(&SRC, &SRC));
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (1234, 53, 10));
        assert_eq!(p.payload(), b"hi");
    }

    #[test]
    fn zero_checksum_rules() {
        let mut bytes = datagram(b"x");
        let p = UdpPacket::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(p.checksum(), 0);
        assert!(p.verify_checksum_v4(&SRC, &DST), "0 = none over IPv4");
        assert!(!p.verify_checksum_v6(&[0; 16], &[0; 16]), "mandatory over IPv6");
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Choose the payload word so the checksum computes to 0: the sum must be 0xffff.
        let mut bytes = datagram(&[0, 0]);
        let mut p = UdpPacket::new_checked(&mut bytes[..]).unwrap();
        p.fill_checksum_v4(&SRC, &DST);
        let c = p.checksum();
        // Adding the old checksum as data makes the total sum 0xffff, i.e. checksum 0.
        p.payload_mut().copy_from_slice(&c.to_be_bytes());
        p.fill_checksum_v4(&SRC, &DST);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum_v4(&SRC, &DST));
    }

    #[test]
    fn v6_checksum() {
        let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let mut bytes = datagram(b"hello");
        let mut p = UdpPacket::new_checked(&mut bytes[..]).unwrap();
        p.fill_checksum_v6(&src, &dst);
        assert!(p.verify_checksum_v6(&src, &dst));
        let mut all = Vec::new();
        all.extend_from_slice(&src);
        all.extend_from_slice(&dst);
        all.extend_from_slice(&13u32.to_be_bytes());
        all.extend_from_slice(&[0, 0, 0, 17]);
        all.extend_from_slice(&bytes);
        assert!(checksum::verifies(checksum::sum_be16(&all)));
    }

    #[test]
    fn length_field_bounds_payload_and_checks() {
        let mut bytes = datagram(b"abcd");
        bytes.extend_from_slice(&[0xee; 6]); // trailing padding
        let mut p = UdpPacket::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(p.payload(), b"abcd");
        p.fill_checksum_v4(&SRC, &DST);
        assert!(p.verify_checksum_v4(&SRC, &DST));

        let check = |b: &[u8]| UdpPacket::new_checked(b).map(|_| ());
        assert_eq!(check(&bytes[..7]), Err(WireError::Truncated));
        assert_eq!(check(&bytes[..11]), Err(WireError::Truncated), "length 12 > 11");
        let mut bad = bytes.clone();
        bad[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(check(&bad), Err(WireError::Malformed));
        // Unchecked: inconsistent length never panics and never verifies.
        let p = UdpPacket::new_unchecked(&bad[..]);
        assert!(p.payload().is_empty());
        bad[6] = 1;
        assert!(!UdpPacket::new_unchecked(&bad[..]).verify_checksum_v4(&SRC, &DST));
    }

    proptest! {
        #[test]
        fn checked_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200),
                                plausible in any::<bool>()) {
            let mut bytes = bytes;
            if plausible && bytes.len() >= HEADER_LEN {
                let len = bytes.len() as u16 - u16::from(bytes[0] % 4).min(bytes.len() as u16 - 8);
                bytes[4..6].copy_from_slice(&len.to_be_bytes());
            }
            if bytes.len() >= HEADER_LEN {
                let p = UdpPacket::new_unchecked(&bytes[..]);
                let _ = (p.src_port(), p.dst_port(), p.len(), p.checksum(), p.payload());
                let _ = (p.verify_checksum_v4(&[1; 4], &[2; 4]), p.verify_checksum_v6(&[1; 16], &[2; 16]));
                let mut copy = bytes.clone();
                let mut m = UdpPacket::new_unchecked(&mut copy[..]);
                m.fill_checksum_v4(&[1; 4], &[2; 4]);
                m.fill_checksum_v6(&[1; 16], &[2; 16]);
                let _ = m.payload_mut();
            }
            if let Ok(p) = UdpPacket::new_checked(&bytes[..]) {
                prop_assert_eq!(p.payload().len(), usize::from(p.len()) - HEADER_LEN);
                prop_assert_eq!(p.into_payload(), p.payload());
                let mut copy = bytes.clone();
                let mut m = UdpPacket::new_checked(&mut copy[..]).unwrap();
                m.fill_checksum_v4(&[1; 4], &[2; 4]);
                prop_assert!(m.verify_checksum_v4(&[1; 4], &[2; 4]));
                prop_assert!(m.checksum() != 0);
                m.fill_checksum_v6(&[1; 16], &[2; 16]);
                prop_assert!(m.verify_checksum_v6(&[1; 16], &[2; 16]));
            }
        }
    }
}
