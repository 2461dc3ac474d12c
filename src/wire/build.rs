//! Frame construction for the traffic generator and tests.
//!
//! `build` writes a complete Ethernet frame into a caller buffer (no allocation) with
//! every checksum valid, a zero-filled payload sized to reach `frame_len`, and Ethernet
//! padding to 60 bytes beyond the IP datagram, as a NIC would add on transmit.

use super::ethernet::{self, EtherType, EthernetFrame};
use super::icmp::{icmpv4, icmpv6, Icmpv4Packet, Icmpv6Packet};
use super::ipv4::{self, Ipv4Packet};
use super::ipv6::{self, Ipv6Packet};
use super::tcp::{self, TcpOption, TcpPacket};
use super::udp::{self, UdpPacket};
use super::vlan::{self, VlanHeader};
use super::{Result, WireError, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP};

/// What to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketSpec {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// 802.1Q tag control information: the VLAN ID in the low 12 bits (a plain VID gives
    /// priority 0); PCP/DEI bits above it are written as given.
    pub vlan: Option<u16>,
    pub l3: L3Spec,
    pub l4: L4Spec,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// Wanted Ethernet frame length without FCS (60 for a "64-byte packet"). The payload
    /// grows to reach it; if the headers alone are longer, the frame is just the headers.
    pub frame_len: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L3Spec {
    V4 {
        src: [u8; 4],
        dst: [u8; 4],
        tos: u8,
        ident: u16,
        dont_frag: bool,
    },
    V6 {
        src: [u8; 16],
        dst: [u8; 16],
        traffic_class: u8,
        /// Must fit in 20 bits, else Malformed.
        flow_label: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4Spec {
    Udp {
        src_port: u16,
        dst_port: u16,
    },
    /// With `timestamp`, the header carries NOP, NOP, Timestamp (12 bytes, as Linux sends).
    Tcp {
        src_port: u16,
        dst_port: u16,
        seq: u32,
        ack: u32,
        flags: u8,
        window: u16,
        timestamp: Option<(u32, u32)>,
    },
    /// Echo request: ICMPv4 type 8 over IPv4, ICMPv6 type 128 over IPv6.
    IcmpEcho {
        ident: u16,
        seq: u16,
    },
    /// No L4 header: the IP payload is the zero-filled payload with this protocol number.
    Raw {
        protocol: u8,
    },
}

/// Where things landed in the frame, so a generator can patch fields (e.g. TCP seq) and
/// fix checksums incrementally. For `L4Spec::Raw`, `l4 == payload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltOffsets {
    pub l3: usize,
    pub l4: usize,
    pub payload: usize,
    pub payload_len: usize,
}

impl Default for PacketSpec {
    /// A 64-byte (60 without FCS) UDP/IPv4 frame between locally administered MACs.
    fn default() -> Self {
        Self {
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            vlan: None,
            l3: L3Spec::V4 { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], tos: 0, ident: 0, dont_frag: true },
            l4: L4Spec::Udp { src_port: 9, dst_port: 9 },
            ttl: 64,
            frame_len: ethernet::MIN_FRAME_LEN,
        }
    }
}

/// Length of the TCP timestamp option block (NOP, NOP, kind 8 len 10).
const TCP_TIMESTAMP_BLOCK: usize = 12;

/// Lengths derived from a spec, validated before anything is written.
struct Layout {
    l3: usize,
    l4: usize,
    payload: usize,
    payload_len: usize,
    /// End of the IP datagram.
    ip_end: usize,
    /// Frame length including Ethernet padding.
    frame_len: usize,
}

impl Layout {
    fn of(spec: &PacketSpec) -> Result<Self> {
        let l3 = ethernet::HEADER_LEN + spec.vlan.map_or(0, |_| vlan::HEADER_LEN);
        let l3_header = match spec.l3 {
            L3Spec::V4 { .. } => ipv4::MIN_HEADER_LEN,
            L3Spec::V6 { flow_label, .. } => {
                if flow_label > 0x000f_ffff {
                    return Err(WireError::Malformed);
                }
                ipv6::HEADER_LEN
            }
        };
        let l4_header = match spec.l4 {
            L4Spec::Udp { .. } => udp::HEADER_LEN,
            L4Spec::Tcp { timestamp, .. } => tcp::MIN_HEADER_LEN + timestamp.map_or(0, |_| TCP_TIMESTAMP_BLOCK),
            L4Spec::IcmpEcho { .. } => super::icmp::HEADER_LEN,
            L4Spec::Raw { .. } => 0,
        };
        let l4 = l3 + l3_header;
        let payload = l4 + l4_header;
        let payload_len = spec.frame_len.saturating_sub(payload);
        let ip_end = payload + payload_len;
        // IPv4 total length covers its header; the IPv6 payload length does not.
        let ip_len_field = match spec.l3 {
            L3Spec::V4 { .. } => ip_end - l3,
            L3Spec::V6 { .. } => ip_end - l4,
        };
        if ip_len_field > usize::from(u16::MAX) {
            return Err(WireError::Malformed);
        }
        Ok(Self { l3, l4, payload, payload_len, ip_end, frame_len: ip_end.max(ethernet::MIN_FRAME_LEN) })
    }
}

/// The frame length `build` would produce for `spec` (including padding to 60).
pub fn built_len(spec: &PacketSpec) -> Result<usize> {
    Layout::of(spec).map(|layout| layout.frame_len)
}

/// Writes the frame for `spec` into `out`, returning its length.
/// Truncated if `out` is shorter than that; Malformed if the spec cannot be encoded
/// (IP length over 65535, flow label over 20 bits).
pub fn build(spec: &PacketSpec, out: &mut [u8]) -> Result<usize> {
    build_with_offsets(spec, out).map(|(len, _)| len)
}

/// [`build`], also reporting where each layer starts.
pub fn build_with_offsets(spec: &PacketSpec, out: &mut [u8]) -> Result<(usize, BuiltOffsets)> {
    let layout = Layout::of(spec)?;
    let frame = out.get_mut(..layout.frame_len).ok_or(WireError::Truncated)?;
    // Payload and padding are zero; so are all header fields not set below.
    frame.fill(0);

    let l3_ethertype = match spec.l3 {
        L3Spec::V4 { .. } => EtherType::IPV4,
        L3Spec::V6 { .. } => EtherType::IPV6,
    };
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    eth.set_dst(&spec.dst_mac);
    eth.set_src(&spec.src_mac);
    match spec.vlan {
        Some(tci) => {
            eth.set_ethertype(EtherType::VLAN);
            let mut tag = VlanHeader::new_unchecked(&mut frame[ethernet::HEADER_LEN..]);
            tag.set_tci(tci);
            tag.set_inner_ethertype(l3_ethertype);
        }
        None => eth.set_ethertype(l3_ethertype),
    }

    let protocol = match (spec.l4, spec.l3) {
        (L4Spec::Udp { .. }, _) => IPPROTO_UDP,
        (L4Spec::Tcp { .. }, _) => IPPROTO_TCP,
        (L4Spec::IcmpEcho { .. }, L3Spec::V4 { .. }) => IPPROTO_ICMP,
        (L4Spec::IcmpEcho { .. }, L3Spec::V6 { .. }) => IPPROTO_ICMPV6,
        (L4Spec::Raw { protocol }, _) => protocol,
    };

    // L4 before the IPv4 header checksum; only the addresses are needed from L3.
    let segment = &mut frame[layout.l4..layout.ip_end];
    write_l4(&spec.l4, &spec.l3, segment);

    let datagram = &mut frame[layout.l3..layout.ip_end];
    // Layout::of bounds IPv4's total length and IPv6's payload length (the 40-byte header
    // comes on top of it) by 65535.
    let datagram_len = datagram.len();
    let payload_len = layout.ip_end - layout.l4;
    match spec.l3 {
        L3Spec::V4 { src, dst, tos, ident, dont_frag } => {
            let mut ip = Ipv4Packet::new_unchecked(datagram);
            ip.set_version_and_header_len(ipv4::MIN_HEADER_LEN);
            ip.set_tos(tos);
            ip.set_total_len(datagram_len as u16);
            ip.set_ident(ident);
            ip.set_dont_frag(dont_frag);
            ip.set_ttl(spec.ttl);
            ip.set_protocol(protocol);
            ip.set_src_addr(&src);
            ip.set_dst_addr(&dst);
            ip.fill_checksum();
        }
        L3Spec::V6 { src, dst, traffic_class, flow_label } => {
            let mut ip = Ipv6Packet::new_unchecked(datagram);
            ip.set_version();
            ip.set_traffic_class(traffic_class);
            ip.set_flow_label(flow_label);
            ip.set_payload_len(payload_len as u16);
            ip.set_next_header(protocol);
            ip.set_hop_limit(spec.ttl);
            ip.set_src_addr(&src);
            ip.set_dst_addr(&dst);
        }
    }

    Ok((layout.frame_len, BuiltOffsets { l3: layout.l3, l4: layout.l4, payload: layout.payload, payload_len: layout.payload_len }))
}

/// Writes the L4 header into `segment` (header + zero payload, sized by `Layout`) and
/// fills its checksum.
fn write_l4(l4: &L4Spec, l3: &L3Spec, segment: &mut [u8]) {
    // Bounded by 65535 in Layout::of.
    let segment_len = segment.len() as u16;
    match *l4 {
        L4Spec::Udp { src_port, dst_port } => {
            let mut udp = UdpPacket::new_unchecked(segment);
            udp.set_src_port(src_port);
            udp.set_dst_port(dst_port);
            udp.set_len(segment_len);
            match l3 {
                L3Spec::V4 { src, dst, .. } => udp.fill_checksum_v4(src, dst),
                L3Spec::V6 { src, dst, .. } => udp.fill_checksum_v6(src, dst),
            }
        }
        L4Spec::Tcp { src_port, dst_port, seq, ack, flags, window, timestamp } => {
            let mut tcp = TcpPacket::new_unchecked(segment);
            tcp.set_src_port(src_port);
            tcp.set_dst_port(dst_port);
            tcp.set_seq(seq);
            tcp.set_ack(ack);
            tcp.set_flags(flags);
            tcp.set_window(window);
            match timestamp {
                Some((tsval, tsecr)) => {
                    tcp.set_header_len(tcp::MIN_HEADER_LEN + TCP_TIMESTAMP_BLOCK);
                    let options = tcp.options_mut();
                    options[0] = tcp::option_kind::NOP;
                    options[1] = tcp::option_kind::NOP;
                    // Layout reserved exactly these 12 bytes, so emit cannot fail.
                    let _ = TcpOption::Timestamp { tsval, tsecr }.emit(&mut options[2..]);
                }
                None => tcp.set_header_len(tcp::MIN_HEADER_LEN),
            }
            match l3 {
                L3Spec::V4 { src, dst, .. } => tcp.fill_checksum_v4(src, dst),
                L3Spec::V6 { src, dst, .. } => tcp.fill_checksum_v6(src, dst),
            }
        }
        L4Spec::IcmpEcho { ident, seq } => match l3 {
            L3Spec::V4 { .. } => {
                let mut icmp = Icmpv4Packet::new_unchecked(segment);
                icmp.set_msg_type(icmpv4::ECHO_REQUEST);
                icmp.set_echo_ident(ident);
                icmp.set_echo_seq(seq);
                icmp.fill_checksum();
            }
            L3Spec::V6 { src, dst, .. } => {
                let mut icmp = Icmpv6Packet::new_unchecked(segment);
                icmp.set_msg_type(icmpv6::ECHO_REQUEST);
                icmp.set_echo_ident(ident);
                icmp.set_echo_seq(seq);
                icmp.fill_checksum(src, dst);
            }
        },
        L4Spec::Raw { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::checksum;
    use crate::wire::tcp::{flags, TcpOptions};

    const V4: L3Spec = L3Spec::V4 { src: [10, 1, 2, 3], dst: [192, 168, 7, 9], tos: 0x10, ident: 0xbeef, dont_frag: true };
    const V6: L3Spec = L3Spec::V6 {
        src: [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11],
        dst: [0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0, 0x22],
        traffic_class: 0x28,
        flow_label: 0xabcde,
    };

    fn l4_cases() -> [L4Spec; 5] {
        [
            L4Spec::Udp { src_port: 5000, dst_port: 6000 },
            L4Spec::Tcp {
                src_port: 40000,
                dst_port: 443,
                seq: 0x1234_5678,
                ack: 0x9abc_def0,
                flags: flags::ACK | flags::PSH,
                window: 512,
                timestamp: None,
            },
            L4Spec::Tcp {
                src_port: 40001,
                dst_port: 80,
                seq: 1,
                ack: 2,
                flags: flags::SYN,
                window: 65535,
                timestamp: Some((0x0101_0101, 0xfefe_fefe)),
            },
            L4Spec::IcmpEcho { ident: 0x4242, seq: 7 },
            L4Spec::Raw { protocol: 253 },
        ]
    }

    /// Parses `frame` with the views and checks every field and checksum against `spec`.
    fn check_round_trip(spec: &PacketSpec, frame: &[u8], offsets: &BuiltOffsets) {
        let eth = EthernetFrame::new_checked(frame).unwrap();
        assert_eq!(eth.dst(), spec.dst_mac);
        assert_eq!(eth.src(), spec.src_mac);
        let (ethertype, l3_bytes) = match spec.vlan {
            Some(tci) => {
                assert_eq!(eth.ethertype(), EtherType::VLAN);
                let tag = VlanHeader::new_checked(eth.into_payload()).unwrap();
                assert_eq!(tag.tci(), tci);
                (tag.inner_ethertype(), tag.into_payload())
            }
            None => (eth.ethertype(), eth.payload()),
        };
        assert_eq!(offsets.l3, frame.len() - l3_bytes.len());

        let (protocol, l4_bytes): (u8, &[u8]) = match spec.l3 {
            L3Spec::V4 { src, dst, tos, ident, dont_frag } => {
                assert_eq!(ethertype, EtherType::IPV4);
                let ip = Ipv4Packet::new_checked(l3_bytes).unwrap();
                assert!(ip.verify_checksum());
                assert_eq!(ip.header_len(), 20);
                assert_eq!(offsets.l4 - offsets.l3, 20);
                assert_eq!((ip.src_addr(), ip.dst_addr(), ip.tos(), ip.ident()), (src, dst, tos, ident));
                assert_eq!(ip.dont_frag(), dont_frag);
                assert!(!ip.is_fragment());
                assert_eq!(ip.ttl(), spec.ttl);
                (ip.protocol(), ip.into_payload())
            }
            L3Spec::V6 { src, dst, traffic_class, flow_label } => {
                assert_eq!(ethertype, EtherType::IPV6);
                let ip = Ipv6Packet::new_checked(l3_bytes).unwrap();
                assert_eq!((ip.src_addr(), ip.dst_addr()), (src, dst));
                assert_eq!((ip.traffic_class(), ip.flow_label()), (traffic_class, flow_label));
                assert_eq!(ip.hop_limit(), spec.ttl);
                let ext = ip.ext_headers().unwrap();
                assert_eq!(ext.offset, 0);
                assert_eq!(offsets.l4 - offsets.l3, 40);
                (ip.next_header(), ip.into_payload())
            }
        };
        assert_eq!(&frame[offsets.l4..offsets.l4 + l4_bytes.len()], l4_bytes);
        let ip_end = offsets.payload + offsets.payload_len;
        assert_eq!(offsets.l4 + l4_bytes.len(), ip_end, "IP length ends at the payload end");
        assert!(frame[ip_end..].iter().all(|&b| b == 0), "padding is zero");
        assert!(frame[offsets.payload..ip_end].iter().all(|&b| b == 0), "payload is zero");

        match (spec.l4, spec.l3) {
            (L4Spec::Udp { src_port, dst_port }, l3) => {
                assert_eq!(protocol, IPPROTO_UDP);
                let udp = UdpPacket::new_checked(l4_bytes).unwrap();
                assert_eq!((udp.src_port(), udp.dst_port()), (src_port, dst_port));
                assert_eq!(usize::from(udp.len()), l4_bytes.len());
                assert_eq!(udp.payload().len(), offsets.payload_len);
                assert_ne!(udp.checksum(), 0);
                match l3 {
                    L3Spec::V4 { src, dst, .. } => assert!(udp.verify_checksum_v4(&src, &dst)),
                    L3Spec::V6 { src, dst, .. } => assert!(udp.verify_checksum_v6(&src, &dst)),
                }
            }
            (L4Spec::Tcp { src_port, dst_port, seq, ack, flags: tcp_flags, window, timestamp }, l3) => {
                assert_eq!(protocol, IPPROTO_TCP);
                let tcp = TcpPacket::new_checked(l4_bytes).unwrap();
                assert_eq!((tcp.src_port(), tcp.dst_port()), (src_port, dst_port));
                assert_eq!((tcp.seq(), tcp.ack()), (seq, ack));
                assert_eq!((tcp.flags(), tcp.window()), (tcp_flags, window));
                assert_eq!(tcp.payload().len(), offsets.payload_len);
                let options: Vec<_> = tcp.options_iter().collect();
                match timestamp {
                    Some((tsval, tsecr)) => {
                        assert_eq!(options, vec![Ok(TcpOption::Nop), Ok(TcpOption::Nop), Ok(TcpOption::Timestamp { tsval, tsecr })])
                    }
                    None => assert!(options.is_empty()),
                }
                match l3 {
                    L3Spec::V4 { src, dst, .. } => assert!(tcp.verify_checksum_v4(&src, &dst)),
                    L3Spec::V6 { src, dst, .. } => assert!(tcp.verify_checksum_v6(&src, &dst)),
                }
            }
            (L4Spec::IcmpEcho { ident, seq }, L3Spec::V4 { .. }) => {
                assert_eq!(protocol, IPPROTO_ICMP);
                let icmp = Icmpv4Packet::new_checked(l4_bytes).unwrap();
                assert_eq!(icmp.msg_type(), icmpv4::ECHO_REQUEST);
                assert_eq!((icmp.echo_ident(), icmp.echo_seq()), (ident, seq));
                assert_eq!(icmp.data().len(), offsets.payload_len);
                assert!(icmp.verify_checksum());
            }
            (L4Spec::IcmpEcho { ident, seq }, L3Spec::V6 { src, dst, .. }) => {
                assert_eq!(protocol, IPPROTO_ICMPV6);
                let icmp = Icmpv6Packet::new_checked(l4_bytes).unwrap();
                assert_eq!(icmp.msg_type(), icmpv6::ECHO_REQUEST);
                assert_eq!((icmp.echo_ident(), icmp.echo_seq()), (ident, seq));
                assert_eq!(icmp.data().len(), offsets.payload_len);
                assert!(icmp.verify_checksum(&src, &dst));
            }
            (L4Spec::Raw { protocol: p }, _) => {
                assert_eq!(protocol, p);
                assert_eq!(offsets.l4, offsets.payload);
                assert_eq!(l4_bytes.len(), offsets.payload_len);
            }
        }
    }

    #[test]
    fn round_trip_all_combinations() {
        let mut buf = [0xa5u8; 2048];
        for l3 in [V4, V6] {
            for vlan in [None, Some(0x0064), Some(0xa123)] {
                for l4 in l4_cases() {
                    for frame_len in [0, 60, 64, 78, 128, 1514] {
                        let spec = PacketSpec {
                            src_mac: [0x02, 0xaa, 0, 0, 0, 1],
                            dst_mac: [0x02, 0xbb, 0, 0, 0, 2],
                            vlan,
                            l3,
                            l4,
                            ttl: 17,
                            frame_len,
                        };
                        buf.fill(0xa5);
                        let (len, offsets) = build_with_offsets(&spec, &mut buf).unwrap();
                        assert_eq!(len, built_len(&spec).unwrap());
                        assert_eq!(build(&spec, &mut buf).unwrap(), len);
                        assert!(len >= 60, "{spec:?}");
                        let headers = offsets.payload;
                        assert_eq!(len, frame_len.max(headers).max(60), "{spec:?}");
                        assert_eq!(offsets.payload_len, frame_len.saturating_sub(headers));
                        assert_eq!(buf[len], 0xa5, "nothing written past the frame");
                        check_round_trip(&spec, &buf[..len], &offsets);
                    }
                }
            }
        }
    }

    #[test]
    fn short_frame_is_padded_beyond_ip_length() {
        // UDP/IPv4 headers are 42 bytes: a 50-byte request gets 8 payload bytes and
        // 10 bytes of Ethernet padding outside the IP datagram.
        let spec = PacketSpec { frame_len: 50, ..PacketSpec::default() };
        let mut buf = [0xffu8; 64];
        let (len, offsets) = build_with_offsets(&spec, &mut buf).unwrap();
        assert_eq!(len, 60);
        assert_eq!(offsets.payload_len, 8);
        let ip = Ipv4Packet::new_checked(&buf[offsets.l3..len]).unwrap();
        assert_eq!(ip.total_len(), 36);
        assert!(buf[50..60].iter().all(|&b| b == 0));
    }

    #[test]
    fn default_is_a_64_byte_udp_packet() {
        let mut buf = [0u8; 60];
        let (len, offsets) = build_with_offsets(&PacketSpec::default(), &mut buf).unwrap();
        assert_eq!(len, 60);
        assert_eq!(offsets, BuiltOffsets { l3: 14, l4: 34, payload: 42, payload_len: 18 });
    }

    #[test]
    fn errors() {
        let mut small = [0u8; 59];
        assert_eq!(build(&PacketSpec::default(), &mut small), Err(WireError::Truncated));
        let mut buf = vec![0u8; 70_000];
        let too_long = PacketSpec { frame_len: 14 + 65_536, ..PacketSpec::default() };
        assert_eq!(build(&too_long, &mut buf), Err(WireError::Malformed));
        let max_v4 = PacketSpec { frame_len: 14 + 65_535, ..PacketSpec::default() };
        assert_eq!(build(&max_v4, &mut buf), Ok(14 + 65_535));
        // IPv6's length field leaves out its 40-byte header: the largest frame is 40 longer
        // (the datagram's own length no longer fits 16 bits; the field must not wrap).
        let v6 = L3Spec::V6 { src: [0; 16], dst: [0; 16], traffic_class: 0, flow_label: 0 };
        let max_v6 = PacketSpec { l3: v6, frame_len: 14 + 40 + 65_535, ..PacketSpec::default() };
        assert_eq!(build(&max_v6, &mut buf), Ok(14 + 40 + 65_535));
        assert_eq!(u16::from_be_bytes([buf[14 + 4], buf[14 + 5]]), 65_535, "payload length");
        let too_long_v6 = PacketSpec { frame_len: 14 + 40 + 65_536, ..max_v6 };
        assert_eq!(build(&too_long_v6, &mut buf), Err(WireError::Malformed));
        let bad_label =
            PacketSpec { l3: L3Spec::V6 { src: [0; 16], dst: [0; 16], traffic_class: 0, flow_label: 0x10_0000 }, ..PacketSpec::default() };
        assert_eq!(build(&bad_label, &mut buf), Err(WireError::Malformed));
    }

    #[test]
    fn generator_patch_with_incremental_checksums() {
        // What the generator does per packet: bump TCP seq and IP ident in place.
        let spec = PacketSpec { l4: l4_cases()[2], frame_len: 200, ..PacketSpec::default() };
        let mut buf = [0u8; 256];
        let (len, offsets) = build_with_offsets(&spec, &mut buf).unwrap();
        let frame = &mut buf[..len];

        let mut tcp = TcpPacket::new_checked(&mut frame[offsets.l4..]).unwrap();
        let old_seq = tcp.seq();
        let new_seq = old_seq.wrapping_add(1448);
        tcp.set_seq(new_seq);
        let patched = checksum::update32(tcp.checksum(), old_seq, new_seq);
        tcp.set_checksum(patched);

        let mut ip = Ipv4Packet::new_checked(&mut frame[offsets.l3..]).unwrap();
        let old_ident = ip.ident();
        ip.set_ident(old_ident.wrapping_add(1));
        let patched_ip = checksum::update16(ip.header_checksum(), old_ident, old_ident.wrapping_add(1));
        ip.set_header_checksum(patched_ip);
        assert!(ip.verify_checksum());

        let tcp = TcpPacket::new_checked(&frame[offsets.l4..]).unwrap();
        assert_eq!(tcp.seq(), new_seq);
        assert!(tcp.verify_checksum_v4(&[10, 0, 0, 1], &[10, 0, 0, 2]));
        let options: Vec<_> = TcpOptions::new(tcp.options()).collect();
        assert_eq!(options.len(), 3);
    }
}
