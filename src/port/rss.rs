//! Receive Side Scaling as a NIC does it: a Toeplitz hash over each frame's flow (addresses,
//! and ports for TCP/UDP), looked up in a 128-entry indirection table that names the receive
//! queue (`ethtool -X`: key and table). A port with N queues is N queue handles, each a
//! [`super::Port`] owned by one worker, as DPDK's (port, queue) pairs are each polled by one
//! lcore.

use crate::rps::hash::{toeplitz, MS_RSS_KEY};
use crate::wire::{EthernetFrame, Ipv4Packet, Ipv6Packet};

/// Entries of the indirection table (`ethtool -x` shows 128 on most NICs).
pub const INDIR_LEN: usize = 128;
/// Most queues a port may have (one worker per queue, and workers are CPUs).
pub const MAX_QUEUES: u16 = 64;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RssError {
    #[error("{0} queues: a port has 1 to {MAX_QUEUES} queues")]
    Queues(u32),
    #[error("a Toeplitz key has 40 or 52 bytes (80 or 104 hex digits), not {0}")]
    KeyLength(usize),
    #[error("`{0}` is not a hex key (pairs of hex digits, `:` between them allowed)")]
    KeySyntax(String),
    #[error("the indirection table has {INDIR_LEN} entries, not {0}")]
    IndirLength(usize),
    #[error("indirection entry {index} names queue {queue}, but the port has {queues} (0-{last})", last = queues - 1)]
    IndirQueue { index: usize, queue: u16, queues: u16 },
}

/// A port's RSS configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rss {
    queues: u16,
    key: Vec<u8>,
    indir: [u16; INDIR_LEN],
}

impl Rss {
    /// `queues` queues, the Microsoft key and queues spread round robin over the table (the
    /// default of `ethtool -X equal N`).
    pub fn new(queues: u16) -> Result<Rss, RssError> {
        if queues == 0 || queues > MAX_QUEUES {
            return Err(RssError::Queues(queues as u32));
        }
        let mut indir = [0u16; INDIR_LEN];
        for (i, e) in indir.iter_mut().enumerate() {
            *e = (i % queues as usize) as u16;
        }
        Ok(Rss { queues, key: MS_RSS_KEY.to_vec(), indir })
    }

    /// Sets the hash key (40 or 52 bytes, as NICs take).
    pub fn with_key(mut self, key: &[u8]) -> Result<Rss, RssError> {
        if key.len() != 40 && key.len() != 52 {
            return Err(RssError::KeyLength(key.len()));
        }
        self.key = key.to_vec();
        Ok(self)
    }

    /// Sets the indirection table: 128 queue numbers.
    pub fn with_indir(mut self, table: &[u16]) -> Result<Rss, RssError> {
        if table.len() != INDIR_LEN {
            return Err(RssError::IndirLength(table.len()));
        }
        for (index, &queue) in table.iter().enumerate() {
            if queue >= self.queues {
                return Err(RssError::IndirQueue { index, queue, queues: self.queues });
            }
        }
        self.indir.copy_from_slice(table);
        Ok(self)
    }

    pub fn queues(&self) -> u16 {
        self.queues
    }

    /// The queue a hash lands on: the table entry of its low 7 bits.
    #[inline]
    pub fn queue_of(&self, hash: u32) -> u16 {
        self.indir[hash as usize % INDIR_LEN]
    }

    /// The hash a NIC computes for `frame`: Toeplitz over (source, destination) addresses,
    /// plus (source, destination) ports for TCP and UDP that are not fragments; 0 for frames
    /// that are not IP (they all land on the table's first entry, as on NICs).
    pub fn hash_frame(&self, frame: &[u8]) -> u32 {
        let mut input = [0u8; 36];
        match flow_input(frame, &mut input) {
            0 => 0,
            n => toeplitz(&self.key, &input[..n]),
        }
    }
}

/// Parses a key as `ethtool -X hkey` takes it (`6d:5a:...`) or as plain hex.
pub fn parse_key(s: &str) -> Result<Vec<u8>, RssError> {
    let hex: String = s.chars().filter(|&c| c != ':').collect();
    if !hex.len().is_multiple_of(2) || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(RssError::KeySyntax(s.to_string()));
    }
    let key: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| RssError::KeySyntax(s.to_string()))?;
    if key.len() != 40 && key.len() != 52 {
        return Err(RssError::KeyLength(key.len()));
    }
    Ok(key)
}

/// Writes the RSS hash input of an untagged Ethernet frame (what `rps::hash::rss_input`
/// lays out) into `out`; returns its length, 0 when the frame is not IPv4/IPv6.
fn flow_input(frame: &[u8], out: &mut [u8; 36]) -> usize {
    let Ok(eth) = EthernetFrame::new_checked(frame) else { return 0 };
    let l3 = eth.payload();
    let (n, ports) = match eth.ethertype() {
        0x0800 => {
            let Ok(ip) = Ipv4Packet::new_checked(l3) else { return 0 };
            out[..4].copy_from_slice(&ip.src_addr());
            out[4..8].copy_from_slice(&ip.dst_addr());
            let fragment = ip.more_frags() || ip.frag_offset() != 0;
            (8, if fragment { None } else { l4_ports(ip.protocol(), ip.payload()) })
        }
        0x86dd => {
            let Ok(ip) = Ipv6Packet::new_checked(l3) else { return 0 };
            out[..16].copy_from_slice(&ip.src_addr());
            out[16..32].copy_from_slice(&ip.dst_addr());
            (32, l4_ports(ip.next_header(), ip.payload()))
        }
        _ => return 0,
    };
    match ports {
        Some(p) => {
            out[n..n + 4].copy_from_slice(&p);
            n + 4
        }
        None => n,
    }
}

/// The source and destination port bytes of a TCP or UDP header.
fn l4_ports(proto: u8, l4: &[u8]) -> Option<[u8; 4]> {
    match proto {
        6 | 17 => l4.get(..4).and_then(|p| p.try_into().ok()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::build::{build_with_offsets, L3Spec, L4Spec, PacketSpec};

    fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let spec = PacketSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            vlan: None,
            l3: L3Spec::V4 { src, dst, tos: 0, ident: 0, dont_frag: true },
            l4: L4Spec::Udp { src_port: sport, dst_port: dport },
            ttl: 64,
            frame_len: 60,
        };
        let mut buf = vec![0u8; 128];
        let (n, _) = build_with_offsets(&spec, &mut buf).expect("frame");
        buf.truncate(n);
        buf
    }

    #[test]
    fn a_frame_hashes_as_the_microsoft_verification_vector() {
        // 66.9.149.187:2794 -> 161.142.100.80:1766 is 0x51ccc178 with ports (the spec's vector).
        let rss = Rss::new(4).unwrap();
        let f = udp4([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1766);
        assert_eq!(rss.hash_frame(&f), 0x51cc_c178);
        assert_eq!(rss.queue_of(0x51cc_c178), (0x78 % 4) as u16);
    }

    #[test]
    fn the_indirection_table_spreads_queues_equally_by_default_and_can_be_set() {
        let rss = Rss::new(3).unwrap();
        let counts = (0..INDIR_LEN as u32).fold([0; 3], |mut c, h| {
            c[rss.queue_of(h) as usize] += 1;
            c
        });
        assert_eq!(counts, [43, 43, 42]);
        let all_to_1 = Rss::new(2).unwrap().with_indir(&[1; INDIR_LEN]).unwrap();
        assert_eq!(all_to_1.queue_of(0), 1);
    }

    #[test]
    fn bad_settings_name_what_is_wrong() {
        assert_eq!(Rss::new(0).unwrap_err(), RssError::Queues(0));
        assert_eq!(Rss::new(65).unwrap_err(), RssError::Queues(65));
        assert_eq!(parse_key("6d:5a").unwrap_err(), RssError::KeyLength(2));
        assert!(matches!(parse_key("zz"), Err(RssError::KeySyntax(_))));
        assert_eq!(parse_key(&"ab".repeat(52)).unwrap().len(), 52);
        assert_eq!(Rss::new(2).unwrap().with_indir(&[0; 10]).unwrap_err(), RssError::IndirLength(10));
        let e = Rss::new(2).unwrap().with_indir(&[2; INDIR_LEN]).unwrap_err();
        assert_eq!(e.to_string(), "indirection entry 0 names queue 2, but the port has 2 (0-1)");
        assert_eq!(Rss::new(2).unwrap().with_key(&[0; 20]).unwrap_err(), RssError::KeyLength(20));
    }

    #[test]
    fn non_ip_frames_hash_to_zero() {
        let rss = Rss::new(2).unwrap();
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(rss.hash_frame(&arp), 0);
        assert_eq!(rss.hash_frame(&[0u8; 5]), 0);
    }

    fn udp6(src: [u8; 16], dst: [u8; 16], sport: u16, dport: u16) -> Vec<u8> {
        let spec = PacketSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            vlan: None,
            l3: L3Spec::V6 { src, dst, traffic_class: 0, flow_label: 0 },
            l4: L4Spec::Udp { src_port: sport, dst_port: dport },
            ttl: 64,
            frame_len: 80,
        };
        let mut buf = vec![0u8; 128];
        let (n, _) = build_with_offsets(&spec, &mut buf).expect("frame");
        buf.truncate(n);
        buf
    }

    #[test]
    fn ipv6_frames_hash_as_the_microsoft_verification_vector() {
        // 3ffe:2501:200:1fff::7 port 2794 -> 3ffe:2501:200:3::1 port 1766: 0x40207d3d with ports.
        let mut src = [0u8; 16];
        src[..8].copy_from_slice(&[0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x1f, 0xff]);
        src[15] = 7;
        let mut dst = [0u8; 16];
        dst[..8].copy_from_slice(&[0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x00, 0x03]);
        dst[15] = 1;
        let rss = Rss::new(4).unwrap();
        assert_eq!(rss.hash_frame(&udp6(src, dst, 2794, 1766)), 0x4020_7d3d);
    }

    #[test]
    fn ipv4_fragments_hash_over_the_addresses_only() {
        // The spec's vector without ports is 0x323e8fc2: a first fragment (more fragments set)
        // and a later one (offset set) both hash so, as their ports are not in every fragment.
        let rss = Rss::new(4).unwrap();
        let whole = udp4([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1766);
        let mut first = whole.clone();
        first[14 + 6] = 0x20; // flags: MF, offset 0
        first[14 + 7] = 0;
        assert_eq!(rss.hash_frame(&first), 0x323e_8fc2);
        let mut later = whole.clone();
        later[14 + 6] = 0;
        later[14 + 7] = 1; // offset 8 bytes, no MF
        assert_eq!(rss.hash_frame(&later), 0x323e_8fc2);
        // Other protocols than TCP/UDP hash without ports too.
        let mut icmp = whole;
        icmp[14 + 9] = 1;
        assert_eq!(rss.hash_frame(&icmp), 0x323e_8fc2);
    }

    #[test]
    fn keys_and_queue_counts_at_the_limits_are_accepted() {
        assert_eq!(Rss::new(MAX_QUEUES).unwrap().queues(), MAX_QUEUES);
        assert_eq!(Rss::new(1).unwrap().queues(), 1);
        // The key as `ethtool -X hkey` prints it, with colons, 40 bytes; and a 52-byte one.
        let colons = vec!["6d"; 40].join(":");
        let key = parse_key(&colons).unwrap();
        assert_eq!(key, vec![0x6d; 40]);
        assert!(matches!(parse_key("abc"), Err(RssError::KeySyntax(_))), "odd digit count");
        let rss = Rss::new(2).unwrap().with_key(&key).unwrap();
        let f = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
        assert_ne!(rss.hash_frame(&f), Rss::new(2).unwrap().hash_frame(&f), "the key is used");
        assert!(Rss::new(2).unwrap().with_key(&[1; 52]).is_ok());
        // A table that names every queue is taken as given.
        let table: Vec<u16> = (0..INDIR_LEN as u16).map(|i| (i / 64) % 2).collect();
        let rss = Rss::new(2).unwrap().with_indir(&table).unwrap();
        assert_eq!((rss.queue_of(63), rss.queue_of(64), rss.queue_of(128 + 64)), (0, 1, 1));
    }
}
