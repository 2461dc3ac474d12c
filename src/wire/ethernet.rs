//! Ethernet II header (IEEE 802.3 framing as used by IP), without FCS.

use super::{read_array, read_u16, write_u16, Result, WireError};

pub const HEADER_LEN: usize = 14;
/// Smallest frame a NIC sends, without the 4-byte FCS; shorter frames are padded.
pub const MIN_FRAME_LEN: usize = 60;

const DST: usize = 0;
const SRC: usize = 6;
const ETHERTYPE: usize = 12;

/// EtherType values (IEEE registry) as associated constants, so call sites read
/// `EtherType::IPV4` while the field itself stays a plain `u16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtherType;

impl EtherType {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const IPV6: u16 = 0x86dd;
}

pub const BROADCAST: [u8; 6] = [0xff; 6];

/// All-ones destination.
pub fn is_broadcast(mac: &[u8; 6]) -> bool {
    *mac == BROADCAST
}

/// Group bit (I/G, least significant bit of the first octet) set; includes broadcast.
pub fn is_multicast(mac: &[u8; 6]) -> bool {
    mac[0] & 0x01 != 0
}

/// Neither group bit nor all-zero: an address a station can own.
pub fn is_unicast(mac: &[u8; 6]) -> bool {
    !is_multicast(mac) && *mac != [0; 6]
}

/// View of an Ethernet II frame. Getters need `len >= HEADER_LEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
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
    pub fn dst(&self) -> [u8; 6] {
        read_array(self.buffer.as_ref(), DST)
    }

    #[inline]
    pub fn src(&self) -> [u8; 6] {
        read_array(self.buffer.as_ref(), SRC)
    }

    #[inline]
    pub fn ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), ETHERTYPE)
    }

    #[inline]
    fn payload_range(&self) -> core::ops::Range<usize> {
        HEADER_LEN..self.buffer.as_ref().len()
    }

    /// Everything after the 14-byte header (including any Ethernet padding).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.payload_range()]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> EthernetFrame<&'a T> {
    /// [`EthernetFrame::payload`] with the lifetime of the underlying buffer rather than of the
    /// view, so a parser can return it after the view goes out of scope.
    #[inline]
    pub fn into_payload(self) -> &'a [u8] {
        let range = self.payload_range();
        let buffer: &'a T = self.buffer;
        &buffer.as_ref()[range]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    #[inline]
    pub fn set_dst(&mut self, mac: &[u8; 6]) {
        self.buffer.as_mut()[DST..DST + 6].copy_from_slice(mac);
    }

    #[inline]
    pub fn set_src(&mut self, mac: &[u8; 6]) {
        self.buffer.as_mut()[SRC..SRC + 6].copy_from_slice(mac);
    }

    #[inline]
    pub fn set_ethertype(&mut self, ethertype: u16) {
        write_u16(self.buffer.as_mut(), ETHERTYPE, ethertype);
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.payload_range();
        &mut self.buffer.as_mut()[range]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_and_set() {
        let mut bytes = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0xaa];
        let mut frame = EthernetFrame::new_checked(&mut bytes[..]).unwrap();
        assert!(is_broadcast(&frame.dst()));
        assert_eq!(frame.src(), [0x02, 0, 0, 0, 0, 1]);
        assert_eq!(frame.ethertype(), EtherType::ARP);
        assert_eq!(frame.payload(), &[0xaa]);
        frame.set_dst(&[1, 2, 3, 4, 5, 6]);
        frame.set_src(&[7, 8, 9, 10, 11, 12]);
        frame.set_ethertype(EtherType::IPV6);
        frame.payload_mut()[0] = 0x55;
        assert_eq!(bytes, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x86, 0xdd, 0x55]);
    }

    #[test]
    fn truncated() {
        assert_eq!(EthernetFrame::new_checked(&[0u8; 13][..]).unwrap_err(), WireError::Truncated);
        assert!(EthernetFrame::new_checked(&[0u8; 14][..]).unwrap().payload().is_empty());
    }

    #[test]
    fn address_classes() {
        assert!(is_multicast(&[0x01, 0x00, 0x5e, 0, 0, 1]));
        assert!(is_multicast(&BROADCAST));
        assert!(!is_broadcast(&[0x01, 0x00, 0x5e, 0, 0, 1]));
        assert!(is_unicast(&[0x02, 0, 0, 0, 0, 1]));
        assert!(!is_unicast(&[0; 6]));
        assert!(!is_multicast(&[0x02, 0, 0, 0, 0, 1]));
    }

    proptest! {
        #[test]
        fn checked_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(frame) = EthernetFrame::new_checked(&bytes[..]) {
                let _ = (frame.dst(), frame.src(), frame.ethertype());
                prop_assert_eq!(frame.payload().len(), bytes.len() - HEADER_LEN);
            } else {
                prop_assert!(bytes.len() < HEADER_LEN);
            }
        }
    }
}
