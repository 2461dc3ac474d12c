//! Flow hashes: Toeplitz (what NICs compute for RSS, and what `ethtool -X hkey` configures)
//! and a software flow hash for packets without one from the port.

use crate::wire::ipv6::{skip_extension_headers_to_auth, NEXT_HEADER_FRAGMENT};
use crate::wire::{vlan, EtherType, VlanHeader};
use crate::wire::{IPPROTO_AH, IPPROTO_DCCP, IPPROTO_ESP, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_UDPLITE};
use std::net::IpAddr;

/// Maps a 32-bit hash onto `0..n` without a division: `(hash * n) >> 32`, the kernel's
/// `reciprocal_scale` (what `get_rps_cpu` indexes the CPU map with).
#[inline(always)]
pub fn reciprocal_scale(hash: u32, n: u32) -> u32 {
    ((hash as u64 * n as u64) >> 32) as u32
}

/// The key of Microsoft's RSS specification and verification suite; many NICs ship it.
pub const MS_RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b,
    0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The Toeplitz hash of `input` under `key`: for every set input bit (most significant
/// first), the 32 key bits starting at that bit position are XORed into the result. Key
/// bits past the key's end count as zero (a 40-byte key covers 36 bytes of input: IPv6
/// addresses and ports).
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let key_byte = |i: usize| key.get(i).copied().unwrap_or(0) as u64;
    // The 64-bit window holds key bits [bit, bit + 64): its top 32 are the current subkey.
    let mut window = (0..8).fold(0u64, |w, i| w << 8 | key_byte(i));
    let mut hash = 0u32;
    for (i, &byte) in input.iter().enumerate() {
        for b in (0..8).rev() {
            if byte >> b & 1 == 1 {
                hash ^= (window >> 32) as u32;
            }
            window <<= 1;
        }
        // The next key byte enters the window's low end once the previous one has moved up.
        window |= key_byte(i + 8);
    }
    hash
}

/// The RSS hash input of an IP flow: source then destination address, then (when `ports`
/// is given) source then destination port, all in network order.
pub fn rss_input(src: IpAddr, dst: IpAddr, ports: Option<(u16, u16)>, out: &mut [u8; 36]) -> usize {
    let mut n = 0;
    let mut put = |b: &[u8]| {
        out[n..n + b.len()].copy_from_slice(b);
        n += b.len();
    };
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            put(&s.octets());
            put(&d.octets());
        }
        (s, d) => {
            put(&v6_octets(s));
            put(&v6_octets(d));
        }
    }
    if let Some((sp, dp)) = ports {
        put(&sp.to_be_bytes());
        put(&dp.to_be_bytes());
    }
    n
}

fn v6_octets(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// A software flow hash for packets the port gave no hash: the same value for both
/// directions of a flow (the endpoints are ordered first, as the kernel's flow dissector
/// does before `skb_get_hash`), seeded so that a remote sender cannot aim flows at one
/// worker, and never 0 (0 means "no hash"). Not the kernel's jhash: the property is what
/// counts, not the bits.
pub fn flow_hash(a: &[u8], b: &[u8], ports: (u16, u16), proto: u8, seed: u32) -> u32 {
    let ((lo, lo_port), (hi, hi_port)) =
        if (a, ports.0) <= (b, ports.1) { ((a, ports.0), (b, ports.1)) } else { ((b, ports.1), (a, ports.0)) };
    let mut h = seed as u64 ^ 0x9e37_79b9_7f4a_7c15 ^ (proto as u64) << 40;
    for chunk in lo.chunks(4).chain(hi.chunks(4)) {
        let w = chunk.iter().fold(0u32, |w, &x| w << 8 | x as u32);
        h = mix(h ^ w as u64);
    }
    h = mix(h ^ ((lo_port as u64) << 16 | hi_port as u64));
    match (h ^ h >> 32) as u32 {
        0 => 1,
        v => v,
    }
}

/// A 64-bit finalizer (multiply, xor-shift): every input bit reaches every output bit.
#[inline(always)]
fn mix(mut x: u64) -> u64 {
    x = (x ^ x >> 30).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ x >> 27).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ x >> 31
}

/// The software flow hash of the packet of ethertype `protocol` whose network header is at
/// `o` in `d` (the flow dissector's part of `skb_get_hash`), and whether it covers the
/// transport layer (`l4_hash`). One function for every user of `skb_get_hash`: RPS here,
/// fq_codel's flow queues on transmit. Never 0.
#[inline]
pub fn software_flow_hash(d: &[u8], mut protocol: u16, mut o: usize) -> (u32, bool) {
    // A tagged frame is untagged later (rx): its flow is the tagged packet's, as the flow
    // dissector reads through an 802.1Q tag.
    if protocol == EtherType::VLAN {
        if let Ok(tag) = VlanHeader::new_checked(d.get(o..).unwrap_or_default()) {
            protocol = tag.inner_ethertype();
            o += vlan::HEADER_LEN;
        }
    }
    match protocol {
        0x0800 => match d.get(o..o + 20) {
            Some(ip) => {
                let ihl = (ip[0] & 0x0f) as usize * 4;
                let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
                let ports = if frag { None } else { l4_ports(d, o + ihl, ip[9]) };
                (flow_hash(&ip[12..16], &ip[16..20], ports.unwrap_or((0, 0)), ip[9], HASH_SEED), ports.is_some())
            }
            None => (1, false),
        },
        0x86dd => match d.get(o..o + 40) {
            // A flow label names the flow: the dissector stops there (skb_get_hash's
            // FLOW_DISSECTOR_F_STOP_AT_FLOW_LABEL) and hashes the addresses, the first next
            // header and the label instead of the ports, and that hash counts as L4.
            Some(ip) if u32::from_be_bytes([0, ip[1] & 0x0f, ip[2], ip[3]]) != 0 => {
                let label = u32::from_be_bytes([0, ip[1] & 0x0f, ip[2], ip[3]]);
                let seed = HASH_SEED ^ label.wrapping_mul(0x9e37_79b9);
                (flow_hash(&ip[8..24], &ip[24..40], (0, 0), ip[6], seed), true)
            }
            Some(ip) => {
                // Past the extension headers, as the kernel's flow dissector: a flow with a
                // Hop-by-Hop or Destination Options header is the same flow (AH is not
                // walked: its SPI names the flow). Every piece of a fragmented datagram
                // hashes alike (addresses, no ports).
                let (proto, ports) = match skip_extension_headers_to_auth(ip[6], d.get(o + 40..).unwrap_or_default()) {
                    Ok(e) if e.is_fragment() => (NEXT_HEADER_FRAGMENT, None),
                    Ok(e) => (e.protocol, l4_ports(d, o + 40 + e.offset, e.protocol)),
                    Err(_) => (ip[6], None),
                };
                (flow_hash(&ip[8..24], &ip[24..40], ports.unwrap_or((0, 0)), proto, HASH_SEED), ports.is_some())
            }
            None => (1, false),
        },
        // Not IP: every such packet is one flow (ARP and the like are rare).
        _ => (1, false),
    }
}

/// Seed of the software flow hash (the kernel's is random per boot; fixed here so runs repeat).
const HASH_SEED: u32 = 0x5eed_1234;

/// The 32 bits that stand in for the ports of the header at `off` (proto_ports_offset):
/// source and destination port of TCP, UDP, UDP-Lite, DCCP and SCTP; the SPI of ESP (at
/// its start) and AH (4 bytes in), so IPsec SAs between two gateways spread too.
#[inline]
fn l4_ports(d: &[u8], off: usize, proto: u8) -> Option<(u16, u16)> {
    let at = match proto {
        IPPROTO_TCP | IPPROTO_UDP | IPPROTO_DCCP | IPPROTO_ESP | IPPROTO_SCTP | IPPROTO_UDPLITE => off,
        IPPROTO_AH => off + 4,
        _ => return None,
    };
    let p = d.get(at..at + 4)?;
    Some((u16::from_be_bytes([p[0], p[1]]), u16::from_be_bytes([p[2], p[3]])))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Microsoft's "Verifying the RSS hash calculation" vectors: (source, source port,
    /// destination, destination port, hash of the addresses, hash with the ports).
    const VECTORS: [(&str, u16, &str, u16, u32, u32); 8] = [
        ("66.9.149.187", 2794, "161.142.100.80", 1766, 0x323e8fc2, 0x51ccc178),
        ("199.92.111.2", 14230, "65.69.140.83", 4739, 0xd718262a, 0xc626b0ea),
        ("24.19.198.95", 12898, "12.22.207.184", 38024, 0xd2d0a5de, 0x5c2b394a),
        ("38.27.205.30", 48228, "209.142.163.6", 2217, 0x82989176, 0xafc7327f),
        ("153.39.163.191", 44251, "202.188.127.2", 1303, 0x5d1809c5, 0x10e828a2),
        ("3ffe:2501:200:1fff::7", 2794, "3ffe:2501:200:3::1", 1766, 0x2cc18cd5, 0x40207d3d),
        ("3ffe:501:8::260:97ff:fe40:efab", 14230, "ff02::1", 4739, 0x0f0c461c, 0xdde51bbf),
        ("3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, "fe80::200:f8ff:fe21:67cf", 38024, 0x4b61e985, 0x02d1feef),
    ];

    #[test]
    fn toeplitz_matches_the_microsoft_verification_vectors() {
        for (src, sp, dst, dp, addrs, with_ports) in VECTORS {
            let (s, d) = (src.parse().unwrap(), dst.parse().unwrap());
            let mut buf = [0u8; 36];
            let n = rss_input(s, d, None, &mut buf);
            assert_eq!(toeplitz(&MS_RSS_KEY, &buf[..n]), addrs, "{src} -> {dst}");
            let n = rss_input(s, d, Some((sp, dp)), &mut buf);
            assert_eq!(toeplitz(&MS_RSS_KEY, &buf[..n]), with_ports, "{src}:{sp} -> {dst}:{dp}");
        }
    }

    #[test]
    fn a_52_byte_key_extends_the_40_byte_one() {
        // Inputs of 36 bytes or less read only the key's first 40 bytes.
        let mut long = [0u8; 52];
        long[..40].copy_from_slice(&MS_RSS_KEY);
        long[40..].fill(0xa5);
        let input = [0x5au8; 36];
        assert_eq!(toeplitz(&long, &input), toeplitz(&MS_RSS_KEY, &input));
        assert_ne!(toeplitz(&long, &[0x5au8; 40]), toeplitz(&MS_RSS_KEY, &[0x5au8; 40]));
    }

    #[test]
    fn the_software_hash_is_direction_independent_and_seeded() {
        let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        let h = flow_hash(&a, &b, (1000, 53), 17, 7);
        assert_eq!(h, flow_hash(&b, &a, (53, 1000), 17, 7), "both directions of a flow");
        assert_ne!(h, flow_hash(&a, &b, (1001, 53), 17, 7));
        assert_ne!(h, flow_hash(&a, &b, (1000, 53), 6, 7), "the protocol counts");
        for bit in 0..8 {
            assert_ne!(h, flow_hash(&a, &b, (1000, 53), 17 ^ 1 << bit, 7), "protocol bit {bit} counts");
        }
        assert_ne!(h, flow_hash(&a, &b, (1000, 53), 17, 8), "the seed counts");
        // Spread: 4096 flows over 4 targets stay near 1024 each.
        let mut counts = [0u32; 4];
        for port in 0..4096u16 {
            counts[super::super::reciprocal_scale(flow_hash(&a, &b, (port, 53), 17, 1), 4) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (900..=1150).contains(&c)), "{counts:?}");
    }

    /// Every byte of either address counts: flows that differ in one byte, at any place
    /// (IPv4 and IPv6), hash apart, so hosts numbered alike in any octet still spread.
    #[test]
    fn every_address_byte_changes_the_software_hash() {
        for len in [4, 16] {
            let (a, b) = (vec![0x20u8; len], vec![0x30u8; len]);
            let h = flow_hash(&a, &b, (1000, 53), 17, 3);
            for i in 0..len {
                let (mut a2, mut b2) = (a.clone(), b.clone());
                a2[i] ^= 0x01;
                b2[i] ^= 0x01;
                assert_ne!(flow_hash(&a2, &b, (1000, 53), 17, 3), h, "byte {i} of {len}, first address");
                assert_ne!(flow_hash(&a, &b2, (1000, 53), 17, 3), h, "byte {i} of {len}, second address");
            }
        }
    }
}
