//! IEEE 802.1Q tag: the 4 bytes that follow an outer EtherType of 0x8100 (or 0x88a8 for
//! an 802.1ad service tag), i.e. the TCI and the encapsulated EtherType.

use super::{read_u16, write_u16, Result, WireError};

pub const HEADER_LEN: usize = 4;

const TCI: usize = 0;
const INNER_ETHERTYPE: usize = 2;

const PCP_SHIFT: u16 = 13;
const DEI_BIT: u16 = 0x1000;
const VID_MASK: u16 = 0x0fff;

/// View of one VLAN tag. Getters need `len >= HEADER_LEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanHeader<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let tag = Self::new_unchecked(buffer);
        tag.check_len()?;
        Ok(tag)
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

    /// Tag control information: PCP (3 bits), DEI (1 bit), VID (12 bits).
    #[inline]
    pub fn tci(&self) -> u16 {
        read_u16(self.buffer.as_ref(), TCI)
    }

    /// Priority code point (802.1p class), 0..=7.
    #[inline]
    pub fn pcp(&self) -> u8 {
        (self.tci() >> PCP_SHIFT) as u8
    }

    /// Drop eligible indicator.
    #[inline]
    pub fn dei(&self) -> bool {
        self.tci() & DEI_BIT != 0
    }

    /// VLAN identifier, 0..=4095 (0 = priority tag only, 4095 reserved).
    #[inline]
    pub fn vid(&self) -> u16 {
        self.tci() & VID_MASK
    }

    #[inline]
    pub fn inner_ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), INNER_ETHERTYPE)
    }

    #[inline]
    fn payload_range(&self) -> core::ops::Range<usize> {
        HEADER_LEN..self.buffer.as_ref().len()
    }

    /// Everything after the tag.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.payload_range()]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> VlanHeader<&'a T> {
    /// [`VlanHeader::payload`] with the lifetime of the underlying buffer rather than of the
    /// view, so a parser can return it after the view goes out of scope.
    #[inline]
    pub fn into_payload(self) -> &'a [u8] {
        let range = self.payload_range();
        let buffer: &'a T = self.buffer;
        &buffer.as_ref()[range]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanHeader<T> {
    #[inline]
    pub fn set_tci(&mut self, tci: u16) {
        write_u16(self.buffer.as_mut(), TCI, tci);
    }

    /// Only the low 3 bits of `pcp` are used.
    #[inline]
    pub fn set_pcp(&mut self, pcp: u8) {
        let tci = (self.tci() & !(0x7 << PCP_SHIFT)) | (u16::from(pcp & 0x7) << PCP_SHIFT);
        self.set_tci(tci);
    }

    #[inline]
    pub fn set_dei(&mut self, dei: bool) {
        let tci = if dei { self.tci() | DEI_BIT } else { self.tci() & !DEI_BIT };
        self.set_tci(tci);
    }

    /// Only the low 12 bits of `vid` are used.
    #[inline]
    pub fn set_vid(&mut self, vid: u16) {
        let tci = (self.tci() & !VID_MASK) | (vid & VID_MASK);
        self.set_tci(tci);
    }

    #[inline]
    pub fn set_inner_ethertype(&mut self, ethertype: u16) {
        write_u16(self.buffer.as_mut(), INNER_ETHERTYPE, ethertype);
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
    use crate::wire::EtherType;
    use proptest::prelude::*;

    #[test]
    fn fields() {
        // PCP 5, DEI 1, VID 0x123; inner IPv4.
        let mut bytes = [0xb1, 0x23, 0x08, 0x00, 0x45];
        let mut tag = VlanHeader::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(tag.tci(), 0xb123);
        assert_eq!(tag.pcp(), 5);
        assert!(tag.dei());
        assert_eq!(tag.vid(), 0x123);
        assert_eq!(tag.inner_ethertype(), EtherType::IPV4);
        assert_eq!(tag.payload(), &[0x45]);

        tag.set_vid(0xfff);
        assert_eq!((tag.pcp(), tag.dei(), tag.vid()), (5, true, 0xfff));
        tag.set_dei(false);
        assert_eq!((tag.pcp(), tag.dei(), tag.vid()), (5, false, 0xfff));
        tag.set_pcp(2);
        assert_eq!((tag.pcp(), tag.dei(), tag.vid()), (2, false, 0xfff));
        tag.set_inner_ethertype(EtherType::IPV6);
        tag.payload_mut()[0] = 0x60;
        assert_eq!(bytes, [0x4f, 0xff, 0x86, 0xdd, 0x60]);
    }

    #[test]
    fn truncated() {
        assert_eq!(VlanHeader::new_checked(&[0u8; 3][..]).unwrap_err(), WireError::Truncated);
    }

    proptest! {
        #[test]
        fn checked_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(tag) = VlanHeader::new_checked(&bytes[..]) {
                prop_assert!(tag.pcp() <= 7);
                prop_assert!(tag.vid() <= 0xfff);
                let _ = (tag.dei(), tag.inner_ethertype());
                prop_assert_eq!(tag.payload().len(), bytes.len() - HEADER_LEN);
            } else {
                prop_assert!(bytes.len() < HEADER_LEN);
            }
        }
    }
}
