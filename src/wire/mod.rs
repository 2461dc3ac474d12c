//! Zero-copy views over protocol headers, checksums and a packet builder.
//!
//! Every header has one view type `Xxx<T: AsRef<[u8]>>` wrapping a byte buffer:
//! - `new_unchecked(buffer)` wraps without looking at the bytes; getters may then panic
//!   if the buffer is shorter than the fixed header, so use it only on buffers already
//!   length-checked (each type documents what its getters need);
//! - `new_checked(buffer)` validates once so that every getter, setter and payload
//!   accessor is then panic-free;
//! - setters exist when `T: AsMut<[u8]>`; multi-byte fields are big-endian.
//!
//! Nothing here allocates: views borrow (or own) the caller's buffer.

pub mod arp;
pub mod build;
pub mod checksum;
pub mod ethernet;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use arp::ArpPacket;
pub use ethernet::{EtherType, EthernetFrame};
pub use icmp::{icmpv4, icmpv6, Icmpv4Packet, Icmpv6Packet};
pub use ipv4::Ipv4Packet;
pub use ipv6::Ipv6Packet;
pub use tcp::TcpPacket;
pub use udp::UdpPacket;
pub use vlan::VlanHeader;

/// Why a buffer cannot be viewed as (or built into) a given header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The buffer ends before the header (or a length it declares) does.
    #[error("truncated")]
    Truncated,
    /// A field holds a value the view cannot accept (bad version, length, type ...).
    #[error("malformed")]
    Malformed,
}

pub type Result<T> = core::result::Result<T, WireError>;

/// IP protocol numbers (IANA "Assigned Internet Protocol Numbers").
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_IPIP: u8 = 4;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_DCCP: u8 = 33;
pub const IPPROTO_IPV6: u8 = 41;
pub const IPPROTO_ESP: u8 = 50;
pub const IPPROTO_AH: u8 = 51;
pub const IPPROTO_ICMPV6: u8 = 58;
pub const IPPROTO_SCTP: u8 = 132;
pub const IPPROTO_UDPLITE: u8 = 136;

/// Big-endian field access on slices whose length the caller has already established
/// (each view documents its own length contract). Crate-internal helpers.
#[inline]
pub(crate) fn read_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

#[inline]
pub(crate) fn read_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

#[inline]
pub(crate) fn write_u16(buf: &mut [u8], at: usize, value: u16) {
    buf[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

#[inline]
pub(crate) fn write_u32(buf: &mut [u8], at: usize, value: u32) {
    buf[at..at + 4].copy_from_slice(&value.to_be_bytes());
}

#[inline]
pub(crate) fn read_array<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}
