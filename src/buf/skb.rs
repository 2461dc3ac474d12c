//! Packet metadata: the "skb". Built from a received buffer as its own measurable step
//! (native XDP runs before it exists; generic XDP after).

use super::Pkt;
use crate::stats::DropReason;

/// Who the frame is addressed to, from its destination MAC (the kernel's pkt_type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum PktType {
    #[default]
    Host,
    Broadcast,
    Multicast,
    OtherHost,
}

/// Checksum state (the kernel's ip_summed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Csum {
    #[default]
    None,
    Unnecessary,
    /// L4 checksum holds only the pseudo-header sum; finish on transmit (after GRO).
    Partial,
}

/// Per-packet metadata. `Copy` and small: lists of these move through the receive path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Skb {
    pub pkt: Pkt,
    /// Ethertype of the network header (host order), after VLAN untagging.
    pub protocol: u16,
    /// Offset of the network header from the start of data.
    pub network_off: u16,
    /// Offset of the transport header from the start of data (0 until the IP layer sets it).
    pub transport_off: u16,
    pub ip_proto: u8,
    pub pkt_type: PktType,
    pub vlan_present: bool,
    pub vlan_tci: u16,
    pub rx_port: u16,
    pub rx_queue: u16,
    /// Flow hash (RSS/RPS) and whether it covers L4 ports.
    pub hash: u32,
    pub l4_hash: bool,
    pub ip_summed: Csum,
    pub gso_size: u16,
    pub gso_segs: u16,
    pub gso_type: u8,
    /// Route result: next-hop index in the route table.
    pub nh: u32,
    /// Output port chosen by forwarding.
    pub out_port: u16,
    /// Set when a stage drops the packet inside a list; the list step removes it.
    pub drop: Option<DropReason>,
}

/// The low 48 bits: a MAC address read as a little-endian number.
const MAC_BITS: u64 = (1 << 48) - 1;

/// A MAC address as the 48-bit little-endian number [`Skb::build_for`] compares.
#[inline]
pub fn mac_number(mac: &[u8; 6]) -> u64 {
    let mut b = [0u8; 8];
    b[..6].copy_from_slice(mac);
    u64::from_le_bytes(b)
}

impl Skb {
    /// Builds metadata for a frame received on (port, queue), like eth_type_trans: reads the
    /// Ethernet header only. `port_mac` decides pkt_type.
    #[inline]
    pub fn build(pkt: Pkt, data: &[u8], rx_port: u16, rx_queue: u16, port_mac: &[u8; 6]) -> Skb {
        Skb::build_for(pkt, data, rx_port, rx_queue, mac_number(port_mac))
    }

    /// [`Skb::build`] with the port's MAC already as [`mac_number`] (once per burst, not per
    /// packet).
    #[inline]
    pub fn build_for(pkt: Pkt, data: &[u8], rx_port: u16, rx_queue: u16, port_mac: u64) -> Skb {
        // A hash from the port (RSS) covers the ports of TCP/UDP flows, as a NIC's 4-tuple hash.
        let mut skb = Skb { pkt, rx_port, rx_queue, network_off: 14, hash: pkt.rss_hash, l4_hash: pkt.rss_hash != 0, ..Skb::default() };
        if data.len() < 14 {
            skb.drop = Some(DropReason::PktTooSmall);
            return skb;
        }
        skb.protocol = u16::from_be_bytes([data[12], data[13]]);
        // The destination as one 48-bit number (one load and compare, not byte slices);
        // little-endian, so the group bit (first byte's bit 0) is bit 0.
        let dst = data.first_chunk::<8>().map_or(0, |b| u64::from_le_bytes(*b)) & MAC_BITS;
        skb.pkt_type = if dst & 1 != 0 {
            if dst == MAC_BITS {
                PktType::Broadcast
            } else {
                PktType::Multicast
            }
        } else if dst != port_mac {
            PktType::OtherHost
        } else {
            PktType::Host
        };
        skb
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BufId;

    #[test]
    fn pkt_type_and_protocol() {
        let mac = [2, 0, 0, 0, 0, 1];
        let mut f = [0u8; 60];
        f[0..6].copy_from_slice(&mac);
        f[12] = 0x08;
        let p = Pkt { buf: BufId(0), off: 256, len: 60, frag_len: 0, rss_hash: 0 };
        let s = Skb::build(p, &f, 3, 1, &mac);
        assert_eq!((s.protocol, s.pkt_type, s.rx_port, s.rx_queue), (0x0800, PktType::Host, 3, 1));
        f[0..6].copy_from_slice(&[0xff; 6]);
        assert_eq!(Skb::build(p, &f, 0, 0, &mac).pkt_type, PktType::Broadcast);
        f[0] = 0x33;
        assert_eq!(Skb::build(p, &f, 0, 0, &mac).pkt_type, PktType::Multicast);
        f[0] = 0x02;
        assert_eq!(Skb::build(p, &f, 0, 0, &mac).pkt_type, PktType::OtherHost);
        // Every byte of the address counts, and the source address after it does not.
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        assert_eq!(Skb::build(p, &f, 0, 0, &mac).pkt_type, PktType::OtherHost);
        f[0..6].copy_from_slice(&mac);
        f[6..8].copy_from_slice(&[0xff, 0xff]);
        assert_eq!(Skb::build(p, &f, 0, 0, &mac).pkt_type, PktType::Host);
        f[0..6].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(Skb::build(p, &f, 0, 0, &mac).pkt_type, PktType::Multicast);
        assert_eq!(Skb::build(p, &f[..10], 0, 0, &mac).drop, Some(DropReason::PktTooSmall));
    }
}

/// `skb_shinfo(skb)->gso_type` bits (the kernel's values).
pub mod gso_type {
    pub const TCPV4: u8 = 1 << 0;
    pub const TCP_ECN: u8 = 1 << 2;
    pub const TCP_FIXEDID: u8 = 1 << 3;
    pub const TCPV6: u8 = 1 << 4;
    /// `SKB_GSO_UDP_L4` and `SKB_GSO_FRAGLIST` (the kernel's bits 16 and 18, renumbered to
    /// fit a byte): a UDP train GRO kept as the chain of its datagrams.
    pub const UDP_L4: u8 = 1 << 5;
    pub const FRAGLIST: u8 = 1 << 6;
}
