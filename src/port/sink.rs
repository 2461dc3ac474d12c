//! Sinks: `null` frees without looking, `count` reads every frame, `check` validates what the
//! router should have produced, `capture` keeps copies (for tests).

use super::{Port, PortStats};
use crate::buf::{BufCache, Pkt};
use crate::wire::{self, EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    Null,
    Count,
    Check,
    Capture,
}

/// What the `check` sink expects of every frame.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckSpec {
    /// Source MAC every frame must carry (the router's egress MAC).
    pub src_mac: Option<[u8; 6]>,
    /// Allowed destination MACs (next-hop neighbours); empty = any.
    pub dst_macs: Vec<[u8; 6]>,
    /// TTL / hop limit every frame must carry (sent TTL minus one: decremented exactly once).
    pub ttl: Option<u8>,
}

pub struct Sink {
    name: String,
    kind: SinkKind,
    check: CheckSpec,
    stats: PortStats,
    failures: Vec<String>,
    captured: Vec<Vec<u8>>,
    /// A chained frame's bytes, copied for `check`.
    linear: Vec<u8>,
    /// Frames per ethertype seen by `count`: IPv4, IPv6, ARP, other.
    pub per_type: [u64; 4],
    /// Takes GRO packets whole (TSO) instead of having them split by GSO.
    pub tso: bool,
}

impl Sink {
    pub fn new(name: &str, kind: SinkKind, check: CheckSpec) -> Sink {
        Sink {
            name: name.to_string(),
            kind,
            check,
            stats: PortStats::default(),
            failures: Vec::new(),
            captured: Vec::new(),
            linear: Vec::new(),
            per_type: [0; 4],
            tso: false,
        }
    }

    fn fail(&mut self, msg: String) {
        self.stats.check_failures += 1;
        if self.failures.len() < 16 {
            self.failures.push(msg);
        }
    }

    fn count(&mut self, data: &[u8]) {
        let t = if data.len() >= 14 { u16::from_be_bytes([data[12], data[13]]) } else { 0 };
        let i = match t {
            EtherType::IPV4 => 0,
            EtherType::IPV6 => 1,
            EtherType::ARP => 2,
            _ => 3,
        };
        self.per_type[i] += 1;
    }

    fn validate(&mut self, data: &[u8]) {
        if let Err(e) = check_frame(&self.check, data) {
            let n = self.stats.tx_packets;
            self.fail(format!("frame {n}: {e}"));
        }
    }
}

/// Validates one forwarded frame against `spec`; the error says what is wrong.
pub fn check_frame(spec: &CheckSpec, data: &[u8]) -> Result<(), String> {
    let eth = EthernetFrame::new_checked(data).map_err(|e| format!("ethernet: {e}"))?;
    if let Some(src) = spec.src_mac {
        if eth.src() != src {
            return Err(format!("source MAC {} is not the router's {}", super::fmt_mac(&eth.src()), super::fmt_mac(&src)));
        }
    }
    if !spec.dst_macs.is_empty() && !spec.dst_macs.contains(&eth.dst()) {
        return Err(format!("destination MAC {} is no next hop", super::fmt_mac(&eth.dst())));
    }
    match eth.ethertype() {
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).map_err(|e| format!("ipv4: {e}"))?;
            if !ip.verify_checksum() {
                return Err("ipv4 header checksum wrong".into());
            }
            if let Some(ttl) = spec.ttl {
                if ip.ttl() != ttl {
                    return Err(format!("ttl {} (expected {ttl})", ip.ttl()));
                }
            }
            if ip.is_fragment() {
                return Ok(());
            }
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let ok = match ip.protocol() {
                wire::IPPROTO_UDP => wire::UdpPacket::new_checked(ip.payload()).map(|u| u.verify_checksum_v4(&src, &dst)).unwrap_or(false),
                wire::IPPROTO_TCP => wire::TcpPacket::new_checked(ip.payload()).map(|t| t.verify_checksum_v4(&src, &dst)).unwrap_or(false),
                wire::IPPROTO_ICMP => wire::Icmpv4Packet::new_checked(ip.payload()).map(|i| i.verify_checksum()).unwrap_or(false),
                _ => true,
            };
            if !ok {
                return Err(format!("ipv4 protocol {} checksum wrong", ip.protocol()));
            }
            Ok(())
        }
        EtherType::IPV6 => {
            let ip = Ipv6Packet::new_checked(eth.payload()).map_err(|e| format!("ipv6: {e}"))?;
            if let Some(ttl) = spec.ttl {
                if ip.hop_limit() != ttl {
                    return Err(format!("hop limit {} (expected {ttl})", ip.hop_limit()));
                }
            }
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let ok = match ip.next_header() {
                wire::IPPROTO_UDP => wire::UdpPacket::new_checked(ip.payload()).map(|u| u.verify_checksum_v6(&src, &dst)).unwrap_or(false),
                wire::IPPROTO_TCP => wire::TcpPacket::new_checked(ip.payload()).map(|t| t.verify_checksum_v6(&src, &dst)).unwrap_or(false),
                wire::IPPROTO_ICMPV6 => {
                    wire::Icmpv6Packet::new_checked(ip.payload()).map(|i| i.verify_checksum(&src, &dst)).unwrap_or(false)
                }
                _ => true,
            };
            if !ok {
                return Err(format!("ipv6 next header {} checksum wrong", ip.next_header()));
            }
            Ok(())
        }
        t => Err(format!("unexpected ethertype {t:#06x}")),
    }
}

impl Port for Sink {
    fn name(&self) -> &str {
        &self.name
    }

    fn tso(&self) -> bool {
        self.tso
    }

    fn rx_burst(&mut self, _bufs: &mut BufCache, _out: &mut Vec<Pkt>, _max: usize) -> usize {
        0
    }

    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        if self.kind == SinkKind::Null {
            // Nothing to look at: count the burst and return its buffers in one go.
            self.stats.tx_packets += pkts.len() as u64;
            self.stats.tx_bytes += pkts.iter().map(|p| p.total_len() as u64).sum::<u64>();
            bufs.free_pkts(pkts);
            if !more {
                self.stats.doorbells += 1;
            }
            return pkts.len();
        }
        for p in pkts {
            match self.kind {
                SinkKind::Null => {}
                SinkKind::Count => self.count(bufs.data(*p)),
                SinkKind::Check if p.is_chained() => {
                    // Checksums cover the whole packet: check a linear copy (reused buffer).
                    let mut whole = std::mem::take(&mut self.linear);
                    whole.clear();
                    bufs.extend_vec(*p, &mut whole);
                    self.validate(&whole);
                    self.linear = whole;
                }
                SinkKind::Check => self.validate(bufs.data(*p)),
                SinkKind::Capture => self.captured.push(bufs.to_vec(*p)),
            }
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += p.total_len() as u64;
            bufs.free(*p);
        }
        if !more {
            self.stats.doorbells += 1;
        }
        pkts.len()
    }

    fn rx_done(&self) -> bool {
        true
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn check_report(&self) -> Vec<String> {
        self.failures.clone()
    }

    fn captured(&self) -> Option<&[Vec<u8>]> {
        (self.kind == SinkKind::Capture).then_some(&self.captured[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::Pool;

    /// The null sink takes a burst whole: packets and bytes (fragments included) counted,
    /// one doorbell per burst without `more`, and every buffer of every chain back in the pool.
    #[test]
    fn null_sink_counts_a_burst_and_frees_every_buffer() {
        let pool = Pool::new(64).expect("pool");
        let mut bufs = pool.cache();
        let mut pkts = Vec::new();
        assert_eq!(bufs.alloc_bulk(&mut pkts, 3, 60), 3);
        assert!(bufs.append_frags(&mut pkts[2], &[7u8; 3000]), "a chain");
        let mut sink = Sink::new("null", SinkKind::Null, CheckSpec::default());
        assert_eq!(sink.tx_burst(&mut bufs, &pkts[..2], true), 2);
        assert_eq!(sink.tx_burst(&mut bufs, &pkts[2..], false), 1);
        let st = sink.stats();
        assert_eq!((st.tx_packets, st.tx_bytes, st.doorbells), (3, 60 * 3 + 3000, 1));
        assert_eq!(bufs.in_use(), 0, "every frame of the chain freed");
    }
}
