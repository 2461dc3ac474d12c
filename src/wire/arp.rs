//! ARP (RFC 826) for Ethernet hardware and IPv4 protocol addresses only: the only
//! combination a datapath forwarding IPv4 over Ethernet needs to answer. Hardware type 6
//! (IEEE 802) counts as Ethernet, as arp_process takes it on an Ethernet device.

use super::{read_array, read_u16, write_u16, EtherType, Result, WireError};

pub const HEADER_LEN: usize = 28;

pub const HTYPE_ETHERNET: u16 = 1;
/// IEEE 802 networks: the same 6-byte MACs (RFC 1700; Linux accepts it on Ethernet).
pub const HTYPE_IEEE802: u16 = 6;
pub const OP_REQUEST: u16 = 1;
pub const OP_REPLY: u16 = 2;

const HTYPE: usize = 0;
const PTYPE: usize = 2;
const HLEN: usize = 4;
const PLEN: usize = 5;
const OPER: usize = 6;
const SHA: usize = 8;
const SPA: usize = 14;
const THA: usize = 18;
const TPA: usize = 24;

/// View of an Ethernet/IPv4 ARP packet. Getters need `len >= HEADER_LEN`; only
/// `new_checked` verifies the hardware/protocol types and address lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Truncated below 28 bytes; Malformed unless htype = Ethernet or IEEE 802, ptype =
    /// IPv4, hlen = 6, plen = 4 (the fixed offsets below depend on those lengths).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        if !matches!(packet.hardware_type(), HTYPE_ETHERNET | HTYPE_IEEE802)
            || packet.protocol_type() != EtherType::IPV4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(WireError::Malformed);
        }
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn hardware_type(&self) -> u16 {
        read_u16(self.buffer.as_ref(), HTYPE)
    }

    pub fn protocol_type(&self) -> u16 {
        read_u16(self.buffer.as_ref(), PTYPE)
    }

    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[HLEN]
    }

    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[PLEN]
    }

    /// [`OP_REQUEST`] or [`OP_REPLY`] (other values are passed through).
    pub fn operation(&self) -> u16 {
        read_u16(self.buffer.as_ref(), OPER)
    }

    pub fn sender_hw(&self) -> [u8; 6] {
        read_array(self.buffer.as_ref(), SHA)
    }

    pub fn sender_ip(&self) -> [u8; 4] {
        read_array(self.buffer.as_ref(), SPA)
    }

    pub fn target_hw(&self) -> [u8; 6] {
        read_array(self.buffer.as_ref(), THA)
    }

    pub fn target_ip(&self) -> [u8; 4] {
        read_array(self.buffer.as_ref(), TPA)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Writes the fixed Ethernet/IPv4 type and length fields.
    pub fn init_ethernet_ipv4(&mut self) {
        let buf = self.buffer.as_mut();
        write_u16(buf, HTYPE, HTYPE_ETHERNET);
        write_u16(buf, PTYPE, EtherType::IPV4);
        buf[HLEN] = 6;
        buf[PLEN] = 4;
    }

    pub fn set_operation(&mut self, op: u16) {
        write_u16(self.buffer.as_mut(), OPER, op);
    }

    pub fn set_sender_hw(&mut self, mac: &[u8; 6]) {
        self.buffer.as_mut()[SHA..SHA + 6].copy_from_slice(mac);
    }

    pub fn set_sender_ip(&mut self, ip: &[u8; 4]) {
        self.buffer.as_mut()[SPA..SPA + 4].copy_from_slice(ip);
    }

    pub fn set_target_hw(&mut self, mac: &[u8; 6]) {
        self.buffer.as_mut()[THA..THA + 6].copy_from_slice(mac);
    }

    pub fn set_target_ip(&mut self, ip: &[u8; 4]) {
        self.buffer.as_mut()[TPA..TPA + 4].copy_from_slice(ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // who-has
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 10, 0, 0, 1, // sender
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 10, 0, 0, 2, // target
    ];

    #[test]
    fn parse_request() {
        let arp = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(arp.operation(), OP_REQUEST);
        assert_eq!(arp.sender_hw(), [0x02, 0, 0, 0, 0, 1]);
        assert_eq!(arp.sender_ip(), [10, 0, 0, 1]);
        assert_eq!(arp.target_hw(), [0; 6]);
        assert_eq!(arp.target_ip(), [10, 0, 0, 2]);
    }

    #[test]
    fn turn_into_reply() {
        let mut bytes = REQUEST;
        let mut arp = ArpPacket::new_checked(&mut bytes[..]).unwrap();
        let (sha, spa, tpa) = (arp.sender_hw(), arp.sender_ip(), arp.target_ip());
        arp.set_operation(OP_REPLY);
        arp.set_target_hw(&sha);
        arp.set_target_ip(&spa);
        arp.set_sender_hw(&[0x02, 0, 0, 0, 0, 2]);
        arp.set_sender_ip(&tpa);
        let arp = ArpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(arp.operation(), OP_REPLY);
        assert_eq!(arp.sender_hw(), [0x02, 0, 0, 0, 0, 2]);
        assert_eq!(arp.sender_ip(), [10, 0, 0, 2]);
        assert_eq!(arp.target_hw(), [0x02, 0, 0, 0, 0, 1]);
        assert_eq!(arp.target_ip(), [10, 0, 0, 1]);
    }

    #[test]
    fn ieee802_hardware_is_ethernet() {
        let mut bytes = REQUEST;
        bytes[1] = 6;
        assert_eq!(ArpPacket::new_checked(&bytes[..]).unwrap().hardware_type(), HTYPE_IEEE802);
    }

    #[test]
    fn init_writes_fixed_fields() {
        let mut bytes = [0u8; 28];
        ArpPacket::new_unchecked(&mut bytes[..]).init_ethernet_ipv4();
        assert_eq!(bytes[..6], REQUEST[..6]);
        assert!(ArpPacket::new_checked(&bytes[..]).is_ok());
    }

    #[test]
    fn rejects_other_types_and_short() {
        assert_eq!(ArpPacket::new_checked(&REQUEST[..27]).unwrap_err(), WireError::Truncated);
        for (at, value) in [(1, 7u8), (0, 1), (2, 0x86), (4, 8), (5, 16)] {
            let mut bytes = REQUEST;
            bytes[at] = value;
            assert_eq!(ArpPacket::new_checked(&bytes[..]).unwrap_err(), WireError::Malformed, "byte {at} = {value}");
        }
    }

    proptest! {
        #[test]
        fn checked_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200),
                                valid_prefix in any::<bool>()) {
            let mut bytes = bytes;
            // Give random tails a real chance to pass the type checks.
            if valid_prefix && bytes.len() >= 6 {
                bytes[..6].copy_from_slice(&REQUEST[..6]);
            }
            if let Ok(arp) = ArpPacket::new_checked(&bytes[..]) {
                let _ = (arp.operation(), arp.sender_hw(), arp.sender_ip());
                let _ = (arp.target_hw(), arp.target_ip());
            }
        }
    }
}
