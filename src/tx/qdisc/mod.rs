//! Queueing disciplines (the kernel's net/sched, semantics only): where a port's backlog waits
//! when the driver's ring is full or BQL says enough is in flight, so it can be ordered
//! (`pfifo_fast` bands), shared fairly and kept short (`fq_codel`), or just bounded
//! (`pfifo`/`bfifo`). `noqueue` has none: what the driver refuses is dropped.
//!
//! A qdisc holds packet handles only; storage is allocated when the qdisc is built, never
//! per packet. Packets it drops are handed back in [`QCtx::dropped`] for the caller to free
//! and count (`qdisc_drop`).

mod fifo;
mod fq_codel;

pub use fifo::{Fifo, PfifoFast};
pub use fq_codel::FqCodel;

use crate::buf::{BufCache, Pkt};
use crate::wire::ethernet::{EtherType, EthernetFrame, HEADER_LEN as ETH_HEADER_LEN};
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::Ipv6Packet;
use crate::wire::vlan::VlanHeader;

/// The qdisc kinds, by their `tc` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QdiscKind {
    PfifoFast,
    Noqueue,
    Pfifo,
    Bfifo,
    FqCodel,
}

impl QdiscKind {
    /// In the order `net.core.default_qdisc` numbers them.
    pub const ALL: [QdiscKind; 5] = [QdiscKind::PfifoFast, QdiscKind::Noqueue, QdiscKind::Pfifo, QdiscKind::Bfifo, QdiscKind::FqCodel];

    pub fn name(self) -> &'static str {
        match self {
            QdiscKind::PfifoFast => "pfifo_fast",
            QdiscKind::Noqueue => "noqueue",
            QdiscKind::Pfifo => "pfifo",
            QdiscKind::Bfifo => "bfifo",
            QdiscKind::FqCodel => "fq_codel",
        }
    }

    /// The tunable's number for this kind.
    pub fn index(self) -> u64 {
        Self::ALL.iter().position(|k| *k == self).unwrap_or(0) as u64
    }

    pub fn from_index(i: u64) -> QdiscKind {
        Self::ALL.get(i as usize).copied().unwrap_or(QdiscKind::PfifoFast)
    }
}

impl std::str::FromStr for QdiscKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| format!("unknown qdisc `{s}` ({})", Self::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")))
    }
}

/// A qdisc and its parameters, as `tc qdisc add ... KIND PARAMS` would give them.
#[derive(Debug, Clone, PartialEq)]
pub struct QdiscSpec {
    pub kind: QdiscKind,
    /// pfifo/pfifo_fast/fq_codel: packets; bfifo: bytes. None: the kind's default
    /// (txqueuelen packets; bfifo txqueuelen × MTU bytes; fq_codel 10240).
    pub limit: Option<u32>,
    /// fq_codel: flow queues (1024), DRR quantum in bytes (1514), CoDel target and interval,
    /// ECN marking instead of dropping ECN-capable packets, packets dropped at once from
    /// the fattest flow when over the limit (64).
    pub flows: u32,
    pub quantum: u32,
    pub target_ns: u64,
    pub interval_ns: u64,
    pub ecn: bool,
    pub drop_batch: u32,
    /// fq_codel: bytes of buffer memory the queued packets may hold (the kernel's
    /// `memory_limit`, 32 MiB; capped at 2^31 as fq_codel_change caps it).
    pub memory_limit: u32,
}

impl QdiscSpec {
    pub fn new(kind: QdiscKind) -> QdiscSpec {
        QdiscSpec {
            kind,
            limit: None,
            flows: 1024,
            quantum: 1514,
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            ecn: true,
            drop_batch: 64,
            memory_limit: FQ_CODEL_MEMORY_LIMIT,
        }
    }

    /// Checks the parameters; the error names the parameter (the caller adds where it is set).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.limit == Some(0) {
            return Err(("limit", "0: the qdisc could hold nothing".into()));
        }
        if self.kind == QdiscKind::FqCodel {
            // Its packet slots are allocated with it: a bound keeps a typo from asking for
            // gigabytes mid-run (no buffer pool holds this many packets anyway).
            if let Some(l) = self.limit.filter(|&l| l > MAX_FQ_CODEL_LIMIT) {
                return Err(("limit", format!("{l} is above {MAX_FQ_CODEL_LIMIT} packets")));
            }
            if !(1..=65536).contains(&self.flows) {
                return Err(("flows", format!("{} outside 1..=65536", self.flows)));
            }
            if self.quantum < 256 {
                return Err(("quantum", format!("{} is below 256 bytes", self.quantum)));
            }
            // fq_codel_change refuses a quantum above 1 MiB (EINVAL); a larger one would also
            // overflow the signed deficit, and dequeue would never find a flow with credit.
            if self.quantum > 1 << 20 {
                return Err(("quantum", format!("{} is above 1048576 bytes", self.quantum)));
            }
            if self.target_ns == 0 || self.interval_ns == 0 {
                return Err(("target/interval", "must be above 0".into()));
            }
            // The kernel's netlink fields are u32 microseconds (and now + interval must not
            // overflow the clock).
            if self.target_ns.max(self.interval_ns) > u32::MAX as u64 * 1000 {
                return Err(("target/interval", format!("above {} µs (the kernel's u32)", u32::MAX)));
            }
            if self.drop_batch == 0 {
                return Err(("drop_batch", "0: an overlimit drop must drop something".into()));
            }
        }
        Ok(())
    }

    /// Builds the qdisc with `txqueuelen` for the default limits and `mtu` (with the link
    /// header) for bfifo's default and CoDel's "one packet is not a queue".
    pub fn build(&self, txqueuelen: u32, mtu: u32) -> Box<dyn Qdisc> {
        let txqueuelen = txqueuelen.max(1);
        match self.kind {
            QdiscKind::PfifoFast => Box::new(PfifoFast::new(self.limit.unwrap_or(txqueuelen))),
            QdiscKind::Noqueue => Box::new(Fifo::packets(QdiscKind::Noqueue, 0)),
            QdiscKind::Pfifo => Box::new(Fifo::packets(QdiscKind::Pfifo, self.limit.unwrap_or(txqueuelen))),
            QdiscKind::Bfifo => Box::new(Fifo::bytes(self.limit.unwrap_or(txqueuelen.saturating_mul(mtu)))),
            QdiscKind::FqCodel => Box::new(FqCodel::new(self, mtu)),
        }
    }
}

/// fq_codel's default `memory_limit`: 32 MiB.
pub const FQ_CODEL_MEMORY_LIMIT: u32 = 32 << 20;

/// The largest fq_codel `limit` (packets).
pub const MAX_FQ_CODEL_LIMIT: u32 = 1 << 20;

/// Counters of one qdisc (`tc -s qdisc`): sent packets/bytes, drops, requeues, backlog,
/// overlimits, and fq_codel's marks, new flows and limit drops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct QdiscStats {
    pub packets: u64,
    pub bytes: u64,
    pub drops: u64,
    pub requeues: u64,
    /// Shaping throttles (`tc -s`'s overlimits): 0 for the qdiscs here, none of which
    /// shapes (a FIFO's full queue and fq_codel's limit drops count as drops, as in the
    /// kernel); kept so the report reads as `tc -s` does.
    pub overlimits: u64,
    pub backlog_pkts: u64,
    pub backlog_bytes: u64,
    pub ecn_mark: u64,
    pub new_flow_count: u64,
    /// fq_codel: packets dropped from the fattest flow because the qdisc was over its packet
    /// limit or its memory limit, and of those, the ones dropped for memory; buffer memory
    /// held now (`tc -s`'s drop_overlimit, drop_overmemory, memory_used).
    pub drop_overlimit: u64,
    pub drop_overmemory: u64,
    pub memory_used: u64,
}

/// What a qdisc operation may need besides the packet: buffers (to read headers and mark
/// ECN), the time, and where dropped packets go.
pub struct QCtx<'a> {
    pub bufs: &'a mut BufCache,
    pub now_ns: u64,
    pub dropped: &'a mut Vec<Pkt>,
}

pub trait Qdisc: Send {
    fn kind(&self) -> QdiscKind;

    /// Takes `p`; a packet the qdisc drops instead (this one or another) goes to `cx.dropped`.
    fn enqueue(&mut self, p: Pkt, cx: &mut QCtx<'_>);

    /// The next packet to send, if any (CoDel may drop some on the way, into `cx.dropped`).
    fn dequeue(&mut self, cx: &mut QCtx<'_>) -> Option<Pkt>;

    fn stats(&self) -> &QdiscStats;

    fn stats_mut(&mut self) -> &mut QdiscStats;

    /// Packets the qdisc holds at most (usize::MAX: limited otherwise, e.g. bfifo's bytes).
    /// Requeued packets count against it, as the kernel counts them in the qdisc's qlen.
    fn limit_pkts(&self) -> usize {
        usize::MAX
    }

    /// Packets held.
    fn len(&self) -> usize {
        self.stats().backlog_pkts as usize
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What classification reads from a packet: its IP TOS / traffic class and flow hash.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PktClass {
    pub tos: u8,
    pub hash: u32,
}

/// Reads the TOS (IPv4) or traffic class (IPv6) through the checked wire views, and the
/// packet's flow hash as fq_codel_hash takes it (`skb_get_hash`): the receiving port's hash
/// when it supplied one, else the software hash RPS computes (`rps::hash::software_flow_hash`:
/// through a VLAN tag and IPv6 extension headers, and without ports for every fragment, so
/// the pieces of one datagram share a flow queue and leave in order). Not IP: class 0.
pub fn classify(bufs: &BufCache, p: Pkt) -> PktClass {
    let d = bufs.data(p);
    let Ok(eth) = EthernetFrame::new_checked(d) else { return PktClass::default() };
    let (mut ethertype, mut l3) = (eth.ethertype(), eth.payload());
    if ethertype == EtherType::VLAN {
        let Ok(tag) = VlanHeader::new_checked(l3) else { return PktClass::default() };
        ethertype = tag.inner_ethertype();
        l3 = &l3[crate::wire::vlan::HEADER_LEN..];
    }
    let tos = match ethertype {
        EtherType::IPV4 => Ipv4Packet::new_checked(l3).map(|ip| ip.tos()),
        EtherType::IPV6 => Ipv6Packet::new_checked(l3).map(|ip| ip.traffic_class()),
        _ => return PktClass::default(),
    };
    let Ok(tos) = tos else { return PktClass::default() };
    let hash = match p.rss_hash {
        0 => crate::rps::hash::software_flow_hash(d, eth.ethertype(), ETH_HEADER_LEN).0,
        port_hash => port_hash,
    };
    PktClass { tos, hash }
}

/// The TOS pfifo_fast's band comes from (`skb->priority`): an IPv4 packet's TOS, as
/// ip_forward sets `rt_tos2priority(tos)`; 0 for everything else, IPv6 included
/// (ip6_forward leaves the priority at 0 whatever the traffic class). Reads nothing past
/// the IPv4 header: no flow hash is needed here.
pub fn priority_tos(bufs: &BufCache, p: Pkt) -> u8 {
    let Ok(eth) = EthernetFrame::new_checked(bufs.data(p)) else { return 0 };
    if eth.ethertype() != EtherType::IPV4 {
        return 0;
    }
    Ipv4Packet::new_checked(eth.payload()).map_or(0, |ip| ip.tos())
}

/// Sets ECN CE on an ECN-capable IP packet (INET_ECN_set_ce); false when it is not
/// ECN-capable (Not-ECT) or not IP, and then CoDel drops it instead.
pub fn set_ecn_ce(bufs: &mut BufCache, p: Pkt) -> bool {
    let data = bufs.data_mut(p);
    let Ok(mut eth) = EthernetFrame::new_checked(&mut data[..]) else { return false };
    match eth.ethertype() {
        EtherType::IPV4 => match Ipv4Packet::new_checked(eth.payload_mut()) {
            Ok(mut ip) => {
                let tos = ip.tos();
                if tos & 3 == 0 {
                    return false;
                }
                ip.set_tos(tos | 3);
                ip.fill_checksum();
                true
            }
            Err(_) => false,
        },
        EtherType::IPV6 => match Ipv6Packet::new_checked(eth.payload_mut()) {
            Ok(mut ip) => {
                let tc = ip.traffic_class();
                if tc & 3 == 0 {
                    return false;
                }
                ip.set_traffic_class(tc | 3);
                true
            }
            Err(_) => false,
        },
        _ => false,
    }
}

/// pfifo_fast's band for a TOS byte: the kernel's TOS → priority table (`ip_tos2prio`, as
/// `rt_tos2priority` reads it) then priority → band (`prio2band`). Band 0 is served first.
pub fn pfifo_fast_band(tos: u8) -> usize {
    // Priority per TOS nibble (IPTOS_TOS(tos) >> 1): best effort 0, bulk 2, interactive
    // bulk 4, interactive 6. The low bit of the nibble is ECT(0) now, not "minimum cost":
    // the kernel's table maps it as the same class without it (ECN_OR_COST), so ECN
    // traffic is not pushed behind everything else as filler.
    const TOS2PRIO: [u8; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];
    const PRIO2BAND: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    PRIO2BAND[TOS2PRIO[((tos & 0x1e) >> 1) as usize] as usize] as usize
}

#[cfg(test)]
mod tests;
