//! In-memory traffic generator (like pktgen / trafgen): N flows, IPv4/IPv6, UDP/TCP/ICMP,
//! fixed or IMIX sizes, optional VLAN, TCP segment trains, rate-limited or flat out.
//!
//! Packets are built once as templates; per packet the generator copies the template into a
//! fresh buffer and patches only what the configuration asks for (TCP seq and IP ID for
//! trains), fixing checksums incrementally.

use super::{Port, PortStats};
use crate::buf::{BufCache, BufId, Pkt, HEADROOM, MAX_DATA};
use crate::wire::build::{build_with_offsets, L3Spec, L4Spec, PacketSpec};
use crate::wire::checksum;
use serde::{Deserialize, Serialize};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IpVersion {
    V4,
    V6,
    /// First half of the flows IPv4, second half IPv6 (so round robin gives runs of each).
    Mix,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum L4Proto {
    Udp,
    Tcp,
    Icmp,
}

/// Frame sizes: a fixed size (frame bytes without FCS: 60 = a 64-byte packet on the wire)
/// or the simple IMIX (7 × 60, 4 × 590, 1 × 1514). A size below what the flow's headers
/// need is raised to them, and any frame to Ethernet's 60-byte minimum, as a NIC pads a
/// runt; the frames' real mean length is [`Generator::mean_frame_len`] (rates use it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameSize {
    Fixed(u16),
    Imix,
}

const IMIX_PATTERN: [u16; 12] = [60, 590, 60, 60, 1514, 60, 590, 60, 60, 590, 60, 590];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenConfig {
    pub flows: u32,
    /// Consecutive packets of one flow before moving to the next (1 = round robin).
    pub burst: u32,
    pub ip: IpVersion,
    pub proto: L4Proto,
    pub size: FrameSize,
    pub vlan: Option<u16>,
    /// TCP only: consecutive segments of a flow form a train (seq advances by the payload
    /// length, IP ID by one, same flags), so GRO can merge them. 0 = no patching.
    pub tcp_train: u32,
    /// Trains: PSH on every k-th segment of a flow (0 = never); each PSH ends a GRO packet.
    pub tcp_psh_every: u32,
    /// Trains: carry the timestamp option (NOP, NOP, TS as Linux sends), TSval advancing
    /// every k segments of a flow (0 = no option; 1 = every segment's differs, so GRO
    /// merges nothing: the uncoalescable case).
    pub tcp_ts_every: u32,
    /// Trains: every k segments of a flow, the last two are sent swapped (0 = in order).
    pub tcp_reorder_every: u32,
    /// Packets per second, or None for flat out.
    pub rate_pps: Option<f64>,
    /// Stop after this many packets.
    pub packets: Option<u64>,
    pub src_mac: String,
    pub dst_mac: String,
    pub src_v4: Ipv4Addr,
    pub dst_v4: Ipv4Addr,
    /// Added to dst_v4 (as an integer) per flow: 256 puts each flow in its own /24.
    pub dst_v4_step: u32,
    pub src_v6: Ipv6Addr,
    pub dst_v6: Ipv6Addr,
    /// Added to the upper 64 bits of dst_v6 per flow: 1 puts each flow in its own /64.
    pub dst_v6_step: u64,
    pub src_port: u16,
    pub dst_port: u16,
    pub ttl: u8,
    /// IPv4: the Don't Fragment bit (set by default, as Linux sends with path MTU
    /// discovery); without it a router fragments datagrams longer than its egress MTU.
    pub dont_frag: bool,
    /// Closed loop (netperf TCP_RR-like, UDP only): each flow is a client with one request
    /// outstanding; it sends its next only once the answer came back out of this port.
    /// Each transaction's latency, send to answer, goes into a histogram.
    pub request_response: bool,
    /// Closed loop: a request unanswered this long is given up (counted in
    /// `RequestResponse::timeouts`) and the client sends its next one, so a lost request or
    /// answer cannot stall its flow for good (netperf's UDP_RR would wait for ever).
    pub request_timeout_ms: u64,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            flows: 1024,
            burst: 1,
            ip: IpVersion::Mix,
            proto: L4Proto::Udp,
            size: FrameSize::Fixed(60),
            vlan: None,
            tcp_train: 0,
            tcp_psh_every: 0,
            tcp_ts_every: 0,
            tcp_reorder_every: 0,
            rate_pps: None,
            packets: None,
            src_mac: "02:00:00:00:00:aa".into(),
            dst_mac: "02:00:00:00:00:01".into(),
            src_v4: Ipv4Addr::new(198, 18, 0, 1),
            dst_v4: Ipv4Addr::new(10, 0, 0, 1),
            dst_v4_step: 256,
            src_v6: "2001:db8::100".parse().expect("literal"),
            dst_v6: "2001:db8:1000::1".parse().expect("literal"),
            dst_v6_step: 1,
            src_port: 1024,
            dst_port: 9,
            ttl: 64,
            dont_frag: true,
            request_response: false,
            request_timeout_ms: 1000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("generator: {0}")]
    Config(String),
    #[error("generator: cannot build a template: {0}")]
    Build(#[from] crate::wire::WireError),
}

/// Most flows a generator builds templates for (the Toeplitz/RSS tests use far fewer).
pub const MAX_FLOWS: u32 = 1 << 22;
/// Memory all of a generator's templates may take.
pub const MAX_TEMPLATE_BYTES: u64 = 1 << 30;
/// Bytes a template costs besides its frame (the struct and the allocation).
const TEMPLATE_OVERHEAD: u64 = 64;

/// One prebuilt frame.
struct Template {
    bytes: Vec<u8>,
    /// The first `SMALL` bytes of `bytes`, zero-padded: a frame that fits is copied as one
    /// fixed-size block (a few vector stores inline, not a `memcpy` call per packet).
    small: [u8; SMALL],
    /// TCP trains: offsets of the IPv4 header (for ID), TCP header, and payload length.
    l3: usize,
    l4: usize,
    payload_len: u32,
    v4: bool,
}

/// Frames up to this many bytes (64-byte minimum frames and their VLAN-tagged form) are
/// copied from a template as one fixed-size block.
const SMALL: usize = 64;

/// Extra headroom, in whole cache lines (0–7), at which the generator writes a small frame
/// into buffer `id`, as a NIC may DMA at a per-descriptor offset. Pool buffers are 2 KiB
/// apart, so at one fixed offset every frame's first line falls in the same 2 of a 32 KiB
/// 8-way L1's 64 sets: a burst of 64 evicts itself between stages (l3fwd +5% with the
/// colors). Bit 0 of `id` already picks the set's upper half, so the color comes from bits
/// 1–3: 16 sets in all. Programs still see at least XDP_PACKET_HEADROOM.
#[inline(always)]
fn dma_color(id: BufId) -> usize {
    ((id.0 as usize >> 1) & 7) * 64
}

#[derive(Clone)]
pub struct Generator {
    name: String,
    cfg: GenConfig,
    /// Templates indexed by flow * sizes + size class (shared by a port's queue handles).
    templates: Arc<Vec<Template>>,
    /// The flows this queue sends, in order (all of them for a port of one queue).
    order: Vec<u32>,
    /// Each flow's RSS hash, handed over with its packets (empty: the port gives none).
    hashes: Arc<Vec<u32>>,
    /// This queue's share of `cfg.packets`.
    packets: Option<u64>,
    sizes: usize,
    /// One frame size, every template within [`SMALL`] bytes: the block-copy fast path.
    fixed_small: bool,
    /// Per-flow TCP sequence / IP ID state for trains.
    seq: Vec<u32>,
    ident: Vec<u16>,
    /// Per-flow segment number (PSH, timestamp and reordering patterns).
    segno: Vec<u32>,
    flow: u32,
    in_burst: u32,
    size_idx: usize,
    /// Packets made or lost for want of a buffer (`rx_nobuf`): what the count and the pace
    /// have used up.
    sent: u64,
    /// The caller keeps what finds no buffer (a NIC model's ring holds the frame until a
    /// buffer frees): nothing is lost, so a shortfall is neither `rx_nobuf` nor used up.
    keep_unmade: bool,
    /// When the pace of this run started, and `sent` then: a run's pace starts with the
    /// run (a later run does not catch up on the time between runs).
    started: Option<(Instant, u64)>,
    stats: PortStats,
    /// Closed-loop state (`request_response`).
    rr: Option<Box<ClosedLoop>>,
}

/// Marks a flow with no request outstanding.
const IDLE: u64 = u64::MAX;

/// The clients of a closed-loop generator: which flows wait for an answer (since when) and
/// which may send.
#[derive(Clone)]
struct ClosedLoop {
    epoch: Instant,
    /// `request_timeout_ms` in ns, and when the outstanding requests are next looked at.
    timeout_ns: u64,
    next_expiry_scan: u64,
    /// Per flow: when its outstanding request left (ns since `epoch`), or [`IDLE`].
    sent_at: Vec<u64>,
    /// Flows that may send their next request, oldest answer first.
    idle: std::collections::VecDeque<u32>,
    figures: RequestResponse,
}

/// What a closed-loop generator measured.
#[derive(Clone, Debug)]
pub struct RequestResponse {
    /// Requests answered.
    pub transactions: u64,
    /// Requests sent and not (yet) answered.
    pub outstanding: u64,
    /// Frames sent to the port that answer no outstanding request (not UDP, another port,
    /// or a second answer).
    pub unmatched: u64,
    /// Requests given up after `request_timeout_ms` without an answer (lost on the way
    /// there or back); their clients went on with the next request.
    pub timeouts: u64,
    /// Send-to-answer latency of each transaction, in ns.
    pub latency_ns: hdrhistogram::Histogram<u64>,
}

impl RequestResponse {
    fn new() -> RequestResponse {
        RequestResponse {
            transactions: 0,
            outstanding: 0,
            unmatched: 0,
            timeouts: 0,
            // 1 ns to 100 s at 3 significant digits.
            latency_ns: hdrhistogram::Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds"),
        }
    }

    /// Sums the figures of several ports.
    pub fn merge(&mut self, o: &RequestResponse) {
        self.transactions += o.transactions;
        self.outstanding += o.outstanding;
        self.unmatched += o.unmatched;
        self.timeouts += o.timeouts;
        self.latency_ns.add(&o.latency_ns).expect("same histogram bounds");
    }

    /// The figures since `earlier` (a snapshot of the same port).
    pub fn since(&self, earlier: &RequestResponse) -> RequestResponse {
        let mut latency_ns = self.latency_ns.clone();
        latency_ns.subtract(&earlier.latency_ns).expect("a later snapshot holds every earlier count");
        RequestResponse {
            transactions: self.transactions - earlier.transactions,
            outstanding: self.outstanding,
            unmatched: self.unmatched - earlier.unmatched,
            timeouts: self.timeouts - earlier.timeouts,
            latency_ns,
        }
    }
}

impl ClosedLoop {
    fn new(flows: u32, timeout_ms: u64) -> ClosedLoop {
        let timeout_ns = timeout_ms.saturating_mul(1_000_000);
        ClosedLoop {
            epoch: Instant::now(),
            timeout_ns,
            next_expiry_scan: timeout_ns,
            sent_at: vec![IDLE; flows as usize],
            idle: (0..flows).collect(),
            figures: RequestResponse::new(),
        }
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Gives up the requests outstanding for `timeout_ns` or longer: their clients become
    /// idle again. Looked at no more often than an eighth of the timeout (a walk over the
    /// flows, not per packet), so a request is given up within 1.125 timeouts.
    fn expire(&mut self, now: u64) {
        if now < self.next_expiry_scan {
            return;
        }
        self.next_expiry_scan = now.saturating_add((self.timeout_ns / 8).max(1));
        for (f, sent) in self.sent_at.iter_mut().enumerate() {
            if *sent != IDLE && now.saturating_sub(*sent) >= self.timeout_ns {
                *sent = IDLE;
                self.idle.push_back(f as u32);
                self.figures.outstanding -= 1;
                self.figures.timeouts += 1;
            }
        }
    }

    /// An answer: the flow is the client whose source port the answer is addressed to.
    fn answer(&mut self, frame: &[u8], src_port: u16, now: u64) {
        let flow = client_port(frame).map(|p| p.wrapping_sub(src_port) as usize);
        match flow.filter(|&f| self.sent_at.get(f).is_some_and(|&t| t != IDLE)) {
            Some(f) => {
                let sent = std::mem::replace(&mut self.sent_at[f], IDLE);
                self.idle.push_back(f as u32);
                let r = &mut self.figures;
                r.transactions += 1;
                r.outstanding -= 1;
                r.latency_ns.saturating_record(now.saturating_sub(sent).max(1));
            }
            None => self.figures.unmatched += 1,
        }
    }
}

/// The UDP destination port of an IPv4 or IPv6 frame, VLAN-tagged or not (an answer's
/// client port: the router answers a tagged request tagged).
fn client_port(frame: &[u8]) -> Option<u16> {
    use crate::wire::{EthernetFrame, Ipv4Packet, Ipv6Packet, UdpPacket, VlanHeader};
    let eth = EthernetFrame::new_checked(frame).ok()?;
    let dst_port = |l4: &[u8]| UdpPacket::new_checked(l4).ok().map(|u| u.dst_port());
    let (ethertype, l3) = match eth.ethertype() {
        0x8100 | 0x88a8 => {
            let tag = VlanHeader::new_checked(eth.payload()).ok()?;
            (tag.inner_ethertype(), tag.into_payload())
        }
        t => (t, eth.payload()),
    };
    match ethertype {
        0x0800 => {
            let ip = Ipv4Packet::new_checked(l3).ok()?;
            (ip.protocol() == crate::wire::IPPROTO_UDP).then(|| dst_port(ip.payload()))?
        }
        0x86dd => {
            let ip = Ipv6Packet::new_checked(l3).ok()?;
            (ip.next_header() == crate::wire::IPPROTO_UDP).then(|| dst_port(ip.payload()))?
        }
        _ => None,
    }
}

impl Generator {
    pub fn new(name: &str, cfg: GenConfig) -> Result<Generator, GenError> {
        if cfg.flows == 0 || cfg.burst == 0 {
            return Err(GenError::Config("flows and burst must be at least 1".into()));
        }
        if let Some(r) = cfg.rate_pps {
            if !r.is_finite() || r <= 0.0 {
                return Err(GenError::Config(format!("rate_pps = {r}: must be a positive packet rate (leave it out for flat out)")));
            }
        }
        if cfg.request_response && (cfg.proto != L4Proto::Udp || cfg.flows > 65536 || cfg.burst != 1) {
            return Err(GenError::Config(
                "request_response: UDP clients, one request each in turn (burst = 1), at most 65536 flows (one source port each)".into(),
            ));
        }
        if cfg.request_response && cfg.request_timeout_ms == 0 {
            return Err(GenError::Config("request_timeout_ms = 0: a request needs some time to be answered".into()));
        }
        if cfg.request_response && matches!(cfg.size, FrameSize::Fixed(n) if n as usize > MAX_DATA) {
            return Err(GenError::Config(format!("request_response: requests are single-buffer frames of at most {MAX_DATA} bytes")));
        }
        if cfg.vlan.is_some_and(|v| !(1..=4094).contains(&v)) {
            return Err(GenError::Config(format!("vlan = {}: VLAN ids are 1..=4094", cfg.vlan.unwrap_or(0))));
        }
        let src_mac = super::parse_mac(&cfg.src_mac).ok_or_else(|| GenError::Config(format!("bad src_mac `{}`", cfg.src_mac)))?;
        let dst_mac = super::parse_mac(&cfg.dst_mac).ok_or_else(|| GenError::Config(format!("bad dst_mac `{}`", cfg.dst_mac)))?;
        let sizes: Vec<u16> = match cfg.size {
            // Frames past one buffer (jumbo frames, 64 KiB) are buffer chains.
            FrameSize::Fixed(n) if n >= 14 => vec![n],
            FrameSize::Fixed(n) => return Err(GenError::Config(format!("frame size {n} outside 14..=65535"))),
            FrameSize::Imix => vec![60, 590, 1514],
        };
        // One template per flow and size, built up front: refuse what would not fit in memory
        // rather than abort allocating it.
        let template_bytes = cfg.flows as u64 * sizes.iter().map(|&n| n as u64 + TEMPLATE_OVERHEAD).sum::<u64>();
        if cfg.flows > MAX_FLOWS || template_bytes > MAX_TEMPLATE_BYTES {
            return Err(GenError::Config(format!(
                "flows = {}: needs {} MiB of packet templates (at most {MAX_FLOWS} flows and {} MiB)",
                cfg.flows,
                template_bytes >> 20,
                MAX_TEMPLATE_BYTES >> 20
            )));
        }
        let mut templates = Vec::with_capacity(cfg.flows as usize * sizes.len());
        let mut scratch = vec![0u8; (sizes.iter().copied().max().unwrap_or(0) as usize).max(MAX_DATA)];
        for f in 0..cfg.flows {
            let v4 = match cfg.ip {
                IpVersion::V4 => true,
                IpVersion::V6 => false,
                IpVersion::Mix => f < cfg.flows.div_ceil(2),
            };
            let l3 = if v4 {
                let dst = u32::from(cfg.dst_v4).wrapping_add(f.wrapping_mul(cfg.dst_v4_step));
                let src = u32::from(cfg.src_v4).wrapping_add(f);
                L3Spec::V4 { src: src.to_be_bytes(), dst: dst.to_be_bytes(), tos: 0, ident: 0, dont_frag: cfg.dont_frag }
            } else {
                let dst = u128::from(cfg.dst_v6).wrapping_add((f as u128 * cfg.dst_v6_step as u128) << 64);
                let src = u128::from(cfg.src_v6).wrapping_add(f as u128);
                L3Spec::V6 { src: src.to_be_bytes(), dst: dst.to_be_bytes(), traffic_class: 0, flow_label: 0 }
            };
            let sport = cfg.src_port.wrapping_add(f as u16);
            let l4 = match cfg.proto {
                L4Proto::Udp => L4Spec::Udp { src_port: sport, dst_port: cfg.dst_port },
                L4Proto::Tcp => L4Spec::Tcp {
                    src_port: sport,
                    dst_port: cfg.dst_port,
                    seq: 1,
                    ack: 1,
                    flags: crate::wire::tcp::flags::ACK,
                    window: 512,
                    timestamp: (cfg.tcp_ts_every > 0).then_some((1, 0)),
                },
                L4Proto::Icmp => L4Spec::IcmpEcho { ident: f as u16, seq: 0 },
            };
            for &size in &sizes {
                let spec = PacketSpec { src_mac, dst_mac, vlan: cfg.vlan, l3, l4, ttl: cfg.ttl, frame_len: size as usize };
                let (len, offs) = build_with_offsets(&spec, &mut scratch)?;
                let mut small = [0u8; SMALL];
                small[..len.min(SMALL)].copy_from_slice(&scratch[..len.min(SMALL)]);
                templates.push(Template {
                    bytes: scratch[..len].to_vec(),
                    small,
                    l3: offs.l3,
                    l4: offs.l4,
                    payload_len: offs.payload_len as u32,
                    v4,
                });
            }
        }
        let flows = cfg.flows as usize;
        let fixed_small = sizes.len() == 1 && templates.iter().all(|t| t.bytes.len() <= SMALL);
        let cfg_rr = cfg.request_response.then(|| Box::new(ClosedLoop::new(cfg.flows, cfg.request_timeout_ms)));
        Ok(Generator {
            name: name.to_string(),
            order: (0..cfg.flows).collect(),
            hashes: Arc::new(Vec::new()),
            packets: cfg.packets,
            cfg,
            sizes: sizes.len(),
            fixed_small,
            templates: Arc::new(templates),
            seq: vec![1; flows],
            ident: vec![0; flows],
            segno: vec![0; flows],
            flow: 0,
            in_burst: 0,
            size_idx: 0,
            sent: 0,
            keep_unmade: false,
            started: None,
            stats: PortStats::default(),
            rr: cfg_rr,
        })
    }

    pub fn config(&self) -> &GenConfig {
        &self.cfg
    }

    /// Mean length of the frames it sends (the IMIX pattern's mix, or the one size).
    pub fn mean_frame_len(&self) -> f64 {
        // Over every flow this handle sends, in turn (flows differ: IPv6 headers are longer).
        let flows: Vec<usize> = self.order.iter().map(|&f| f as usize).collect();
        let mean_of_class = |c: usize| {
            let lens: Vec<f64> =
                flows.iter().filter_map(|&f| self.templates.get(f * self.sizes + c)).map(|t| t.bytes.len() as f64).collect();
            if lens.is_empty() {
                0.0
            } else {
                lens.iter().sum::<f64>() / lens.len() as f64
            }
        };
        if self.sizes == 1 {
            return mean_of_class(0);
        }
        let class = |s: u16| match s {
            60 => 0,
            590 => 1,
            _ => 2,
        };
        IMIX_PATTERN.iter().map(|&s| mean_of_class(class(s))).sum::<f64>() / IMIX_PATTERN.len() as f64
    }

    /// Flows this queue handle sends (all of the config's for a port of one queue).
    pub fn flows(&self) -> usize {
        self.order.len()
    }

    /// Whether packets that find no buffer are lost (used up): only on a pace, which sets
    /// when each is due, and not when the caller keeps them.
    fn loses_unmade(&self) -> bool {
        !self.keep_unmade && self.cfg.rate_pps.is_some()
    }

    /// Packets its count still allows (None: no count).
    pub fn remaining(&self) -> Option<u64> {
        self.packets.map(|n| n.saturating_sub(self.sent))
    }

    /// Uses up `n` packets of its count without making them (frames a NIC model's ring
    /// missed: they existed on the wire, so they end a counted run as made ones do).
    pub fn skip(&mut self, n: u64) {
        self.sent += n;
    }

    /// Sends at the pace its caller sets: drops its own `rate_pps` (the NIC model's receive
    /// side paces arrivals itself), and a frame that finds no buffer stays the caller's to
    /// ask for again.
    pub fn unpaced(mut self) -> Generator {
        self.cfg.rate_pps = None;
        self.keep_unmade = true;
        self
    }

    /// The generator as a NIC with RSS would deliver its traffic: one handle per receive
    /// queue, each sending the flows whose Toeplitz hash the indirection table maps to it
    /// (with the hash in every packet when `supply_hash`), and its share of a packet count.
    /// A queue that no flow maps to sends nothing.
    pub fn rss_queues(name: &str, cfg: GenConfig, rss: &super::rss::Rss, supply_hash: bool) -> Result<Vec<Generator>, GenError> {
        if cfg.request_response && rss.queues() > 1 {
            return Err(GenError::Config("request_response: the clients answer through one queue (rss_queues = 1)".into()));
        }
        let all = Generator::new(name, cfg)?;
        let hashes: Vec<u32> = (0..all.cfg.flows as usize).map(|f| rss.hash_frame(&all.templates[f * all.sizes].bytes)).collect();
        let hashes = Arc::new(hashes);
        let orders: Vec<Vec<u32>> =
            (0..rss.queues()).map(|q| (0..all.cfg.flows).filter(|&f| rss.queue_of(hashes[f as usize]) == q).collect()).collect();
        // A packet count and a rate are shared by the queues that have flows, by flows.
        let busy: Vec<usize> = (0..orders.len()).filter(|&q| !orders[q].is_empty()).collect();
        let share = |q: usize| -> Option<u64> {
            let n = all.cfg.packets?;
            let k = busy.iter().position(|&b| b == q)? as u64;
            let nb = busy.len() as u64;
            Some(n / nb + u64::from(k < n % nb))
        };
        let queues = orders
            .into_iter()
            .enumerate()
            .map(|(q, order)| {
                let mut g = all.clone();
                g.cfg.rate_pps = all.cfg.rate_pps.map(|r| r * order.len() as f64 / all.cfg.flows as f64);
                g.packets = all.cfg.packets.map(|_| share(q).unwrap_or(0));
                g.order = order;
                g.hashes = if supply_hash { hashes.clone() } else { Arc::new(Vec::new()) };
                g
            })
            .collect();
        Ok(queues)
    }

    /// How many packets the rate limit allows now.
    fn allowance(&mut self, max: usize) -> usize {
        let mut n = max;
        if self.order.is_empty() || self.cfg.rate_pps == Some(0.0) {
            return 0;
        }
        if let Some(limit) = self.packets {
            n = n.min(limit.saturating_sub(self.sent) as usize);
        }
        if let Some(rate) = self.cfg.rate_pps {
            let sent = self.sent;
            let (start, base) = *self.started.get_or_insert_with(|| (Instant::now(), sent));
            let due = base + (start.elapsed().as_secs_f64() * rate) as u64;
            n = n.min(due.saturating_sub(self.sent) as usize);
        }
        n
    }

    /// The common case, one fixed size of at most [`SMALL`] bytes and no train: each packet
    /// is one block copy of its flow's template (at the buffer's [`dma_color`] past the
    /// headroom), the flow walk kept in registers. Returns the bytes written.
    #[inline]
    fn fill_small(&mut self, bufs: &mut BufCache, pkts: &mut [Pkt]) -> u64 {
        let (templates, hashes, order) = (&*self.templates, &*self.hashes, &self.order);
        let (mut at, mut in_burst, burst) = (self.flow as usize, self.in_burst, self.cfg.burst.max(1));
        let mut bytes = 0u64;
        for p in pkts.iter_mut() {
            let flow = order[at] as usize;
            let tpl = &templates[flow];
            let off = HEADROOM + dma_color(p.buf);
            p.off = off as u16;
            bufs.frame_mut(p.buf)[off..off + SMALL].copy_from_slice(&tpl.small);
            p.len = tpl.bytes.len() as u16;
            p.rss_hash = hashes.get(flow).copied().unwrap_or(0);
            bytes += tpl.bytes.len() as u64;
            in_burst += 1;
            if in_burst >= burst {
                in_burst = 0;
                at += 1;
                if at == order.len() {
                    at = 0;
                }
            }
        }
        (self.flow, self.in_burst) = (at as u32, in_burst);
        bytes
    }

    #[inline]
    fn next_template(&mut self) -> (usize, usize) {
        let flow = self.order[self.flow as usize] as usize;
        let size_class = if self.sizes == 1 {
            0
        } else {
            let s = IMIX_PATTERN[self.size_idx % IMIX_PATTERN.len()];
            self.size_idx += 1;
            match s {
                60 => 0,
                590 => 1,
                _ => 2,
            }
        };
        self.in_burst += 1;
        if self.in_burst >= self.cfg.burst {
            self.in_burst = 0;
            self.flow += 1;
            if self.flow as usize >= self.order.len() {
                self.flow = 0;
            }
        }
        (flow, flow * self.sizes + size_class)
    }

    /// TCP trains: advance this flow's sequence number and IP ID, patching the copy (and
    /// the PSH, timestamp and reordering patterns the configuration asks for).
    fn patch_train(&mut self, flow: usize, t: usize, frame: &mut [u8]) {
        let tpl = &self.templates[t];
        let len = tpl.payload_len;
        let idx = self.segno[flow];
        self.segno[flow] = idx.wrapping_add(1);
        let mut seq = self.seq[flow];
        self.seq[flow] = seq.wrapping_add(len);
        let mut id = self.ident[flow];
        self.ident[flow] = id.wrapping_add(1);
        let k = self.cfg.tcp_reorder_every;
        if k >= 2 && idx % k == k - 2 {
            (seq, id) = (seq.wrapping_add(len), id.wrapping_add(1));
        } else if k >= 2 && idx % k == k - 1 {
            (seq, id) = (seq.wrapping_sub(len), id.wrapping_sub(1));
        }
        let (l3, l4) = (tpl.l3, tpl.l4);
        let mut csum = u16::from_be_bytes([frame[l4 + 16], frame[l4 + 17]]);
        let old_seq = u32::from_be_bytes([frame[l4 + 4], frame[l4 + 5], frame[l4 + 6], frame[l4 + 7]]);
        frame[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
        csum = checksum::update32(csum, old_seq, seq);
        let psh = self.cfg.tcp_psh_every;
        if psh > 0 && (idx + 1).is_multiple_of(psh) {
            let old = u16::from_be_bytes([frame[l4 + 12], frame[l4 + 13]]);
            frame[l4 + 13] |= crate::wire::tcp::flags::PSH;
            csum = checksum::update16(csum, old, u16::from_be_bytes([frame[l4 + 12], frame[l4 + 13]]));
        }
        if let Some(ticks) = idx.checked_div(self.cfg.tcp_ts_every) {
            // TSval after NOP, NOP, kind, length.
            let at = l4 + 24;
            let old = u32::from_be_bytes([frame[at], frame[at + 1], frame[at + 2], frame[at + 3]]);
            let tsval = 1 + ticks;
            frame[at..at + 4].copy_from_slice(&tsval.to_be_bytes());
            csum = checksum::update32(csum, old, tsval);
        }
        frame[l4 + 16..l4 + 18].copy_from_slice(&csum.to_be_bytes());
        if tpl.v4 {
            set_ident(&mut frame[l3..], id);
        }
    }

    /// IPv4 without DF: each datagram of a flow gets the next IP ID (RFC 6864: an ID must
    /// not repeat while fragments of the datagram may be about; DF datagrams keep 0).
    fn next_ident(&mut self, flow: usize, t: usize, frame: &mut [u8]) {
        if self.templates[t].v4 {
            let id = self.ident[flow];
            self.ident[flow] = id.wrapping_add(1);
            set_ident(&mut frame[self.templates[t].l3..], id);
        }
    }
}

/// Writes the IPv4 ID of the header at the start of `ip`, patching its checksum (RFC 1624).
fn set_ident(ip: &mut [u8], id: u16) {
    let old = u16::from_be_bytes([ip[4], ip[5]]);
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    let c = u16::from_be_bytes([ip[10], ip[11]]);
    ip[10..12].copy_from_slice(&checksum::update16(c, old, id).to_be_bytes());
}

impl Generator {
    /// Closed loop: one request from each flow whose answer came back (at most `max`, and
    /// what the packet count allows), stamped with one clock read for the burst.
    fn rx_requests(&mut self, bufs: &mut BufCache, out: &mut Vec<Pkt>, max: usize) -> usize {
        let Some(rr) = self.rr.as_mut() else { return 0 };
        // One clock read per burst: the timeouts and the send times.
        let now = rr.now_ns();
        rr.expire(now);
        let mut want = max.min(rr.idle.len());
        if let Some(limit) = self.packets {
            want = want.min(limit.saturating_sub(self.sent) as usize);
        }
        if want == 0 {
            return 0;
        }
        let first = out.len();
        // A client whose request finds no buffer sends it once one frees (it stays idle):
        // nothing is lost, so it is not `rx_nobuf`.
        let got = bufs.alloc_bulk(out, want, 0);
        let mut bytes = 0u64;
        for p in &mut out[first..first + got] {
            let flow = rr.idle.pop_front().expect("counted above") as usize;
            rr.sent_at[flow] = now;
            let t = &self.templates[flow * self.sizes].bytes;
            let len = t.len().min(MAX_DATA);
            bufs.frame_mut(p.buf)[HEADROOM..HEADROOM + len].copy_from_slice(&t[..len]);
            p.len = len as u16;
            p.rss_hash = self.hashes.get(flow).copied().unwrap_or(0);
            bytes += len as u64;
        }
        rr.figures.outstanding += got as u64;
        self.sent += got as u64;
        self.stats.rx_packets += got as u64;
        self.stats.rx_bytes += bytes;
        got
    }

    /// Frees and removes the packets of `out[first..]` marked short (offset 0); returns how many.
    #[cold]
    fn remove_short(bufs: &mut BufCache, out: &mut Vec<Pkt>, first: usize) -> usize {
        let before = out.len();
        let mut kept = first;
        for i in first..before {
            let p = out[i];
            if p.off == 0 {
                bufs.free(p);
            } else {
                out[kept] = p;
                kept += 1;
            }
        }
        out.truncate(kept);
        before - kept
    }
}

impl Port for Generator {
    fn name(&self) -> &str {
        &self.name
    }

    /// End of a run: the next run's pace starts when it does.
    fn finish(&mut self) -> std::io::Result<()> {
        self.started = None;
        Ok(())
    }

    fn rx_burst(&mut self, bufs: &mut BufCache, out: &mut Vec<Pkt>, max: usize) -> usize {
        if self.rr.is_some() {
            return self.rx_requests(bufs, out, max);
        }
        let want = self.allowance(max);
        if want == 0 {
            return 0;
        }
        let first = out.len();
        let got = bufs.alloc_bulk(out, want, 0);
        // A paced generator's packets due with no buffer are lost, as a NIC drops a frame
        // with no descriptor: counted once in rx_nobuf and used up (a count ends with
        // rx_packets + rx_nobuf = N; the pace does not catch up on them). An unpaced one has
        // no schedule to miss: the pool holds it back, the shortfall is counted in rx_nobuf
        // as starvation and made later. A caller that keeps them (a NIC model) counts none.
        let lost = if self.loses_unmade() { want - got } else { 0 };
        if !self.keep_unmade {
            self.stats.rx_nobuf += (want - got) as u64;
        }
        let train = self.cfg.tcp_train > 0 && self.cfg.proto == L4Proto::Tcp;
        let idents = !train && !self.cfg.dont_frag;
        if !train && !idents && self.fixed_small {
            let bytes = self.fill_small(bufs, &mut out[first..first + got]);
            self.sent += (got + lost) as u64;
            self.stats.rx_packets += got as u64;
            self.stats.rx_bytes += bytes;
            return got;
        }
        let mut bytes = 0u64;
        let mut short = 0usize;
        for p in &mut out[first..first + got] {
            let (flow, t) = self.next_template();
            let len = self.templates[t].bytes.len();
            let head = len.min(MAX_DATA);
            let frame = bufs.frame_mut(p.buf);
            if head <= SMALL {
                // Bytes past `head` are outside the packet: copying the padding is harmless.
                frame[HEADROOM..HEADROOM + SMALL].copy_from_slice(&self.templates[t].small);
            } else {
                frame[HEADROOM..HEADROOM + head].copy_from_slice(&self.templates[t].bytes[..head]);
            }
            if train {
                self.patch_train(flow, t, &mut frame[HEADROOM..HEADROOM + head]);
            } else if idents {
                self.next_ident(flow, t, &mut frame[HEADROOM..HEADROOM + head]);
            }
            p.len = head as u16;
            p.rss_hash = self.hashes.get(flow).copied().unwrap_or(0);
            if len > head && !bufs.append_frags(p, &self.templates[t].bytes[head..]) {
                // A jumbo frame's fragments did not fit in the pool: marked (no packet
                // starts at offset 0) and taken out below.
                p.off = 0;
                short += 1;
                continue;
            }
            bytes += len as u64;
        }
        let got = if short > 0 { got - Self::remove_short(bufs, out, first) } else { got };
        if !self.keep_unmade {
            self.stats.rx_nobuf += short as u64;
        }
        let short = if self.loses_unmade() { short } else { 0 };
        self.sent += (got + lost + short) as u64;
        self.stats.rx_packets += got as u64;
        self.stats.rx_bytes += bytes;
        got
    }

    /// Packets sent back to the generator (ICMP errors, echo replies) are counted and freed;
    /// in closed loop each answers its flow's request.
    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        if let Some(rr) = self.rr.as_mut() {
            let now = rr.now_ns();
            for &p in pkts {
                rr.answer(bufs.data(p), self.cfg.src_port, now);
            }
        }
        self.stats.tx_bytes += pkts.iter().map(|p| p.total_len() as u64).sum::<u64>();
        bufs.free_pkts(pkts);
        self.stats.tx_packets += pkts.len() as u64;
        if !more {
            self.stats.doorbells += 1;
        }
        pkts.len()
    }

    fn rx_done(&self) -> bool {
        self.packets.is_some_and(|n| self.sent >= n) || self.order.is_empty()
    }

    /// Its checksums are right by construction, as a NIC with rx checksum offload reports.
    fn rx_csum_verified(&self) -> bool {
        true
    }

    fn rx_bounded(&self) -> bool {
        self.packets.is_some()
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn request_response(&self) -> Option<RequestResponse> {
        self.rr.as_ref().map(|r| r.figures.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::Pool;

    /// The mean frame length is over every flow sent in turn: with IPv4 and IPv6 TCP flows
    /// at `size = 60` the frames are 60 and 74 bytes (the IPv6 headers need 74), mean 67;
    /// IMIX weighs its sizes 7:4:1 on top.
    #[test]
    fn the_mean_frame_length_covers_every_flow() {
        let tcp = GenConfig { flows: 2, ip: IpVersion::Mix, proto: L4Proto::Tcp, ..GenConfig::default() };
        assert_eq!(Generator::new("g", tcp.clone()).unwrap().mean_frame_len(), 67.0);
        let imix = GenConfig { size: FrameSize::Imix, ip: IpVersion::V4, ..tcp };
        assert_eq!(Generator::new("g", imix).unwrap().mean_frame_len(), (7.0 * 60.0 + 4.0 * 590.0 + 1514.0) / 12.0);
    }

    /// Small fixed-size frames (the block-copy path): flows in order, `burst` consecutive
    /// packets each, the walk carried from one rx burst to the next; every frame is its
    /// flow's template, at least the XDP headroom in, and counted in bytes.
    #[test]
    fn small_frames_walk_the_flows_in_bursts_across_calls() {
        let cfg = GenConfig { flows: 3, burst: 2, ip: IpVersion::V4, dst_v4_step: 1, ..GenConfig::default() };
        let mut g = Generator::new("g", cfg).expect("generator");
        assert!(g.fixed_small);
        let pool = Pool::new(64).expect("pool");
        let mut bufs = pool.cache();
        let mut out = Vec::new();
        assert_eq!(g.rx_burst(&mut bufs, &mut out, 5), 5);
        assert_eq!(g.rx_burst(&mut bufs, &mut out, 4), 4);
        let flows: Vec<u8> = out.iter().map(|&p| bufs.data(p)[33]).collect();
        let first = flows[0];
        let want: Vec<u8> = [0, 0, 1, 1, 2, 2, 0, 0, 1].iter().map(|f| first + f).collect();
        assert_eq!(flows, want, "last octet of each packet's destination");
        for (&p, f) in out.iter().zip([0usize, 0, 1, 1, 2, 2, 0, 0, 1]) {
            assert!(p.off as usize >= HEADROOM && p.off as usize + p.len as usize <= crate::buf::FRAME_SIZE);
            assert_eq!(bufs.data(p), &g.templates[f].bytes[..], "packet of flow {f}");
        }
        assert_eq!(g.stats.rx_packets, 9);
        assert_eq!(g.stats.rx_bytes, 9 * g.templates[0].bytes.len() as u64);
        bufs.free_pkts(&out);
    }

    /// Each run's pace starts with the run: a datapath run again (a bench's warm-up, then
    /// its measurement) does not send the time between the runs' worth at once.
    #[test]
    fn a_paced_run_does_not_catch_up_on_the_time_before_it() {
        let pool = Pool::new(64).expect("pool");
        let mut bufs = pool.cache();
        // 1000 packets a second: 20 due 20 ms in; a preemption inside rx_burst would have to
        // last 10 ms to make 10 due at once.
        let cfg = GenConfig { rate_pps: Some(1000.0), ..GenConfig::default() };
        let mut g = Generator::new("g", cfg).expect("generator");
        let mut out = Vec::new();
        let mut burst = |g: &mut Generator| {
            let n = g.rx_burst(&mut bufs, &mut out, 64);
            bufs.free_pkts(&out);
            out.clear();
            n
        };
        burst(&mut g);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(burst(&mut g) > 0, "paced packets are due within a run");
        g.finish().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        // A new run: its pace starts at its first poll, so nothing is due yet (before, the
        // 20 ms between the runs were due at once: 20 packets).
        assert!(burst(&mut g) < 10);
    }

    /// A paced generator's packet that finds the pool empty is lost once (rx_nobuf), not
    /// made again later: a counted run ends with rx_packets + rx_nobuf = packets. An unpaced
    /// one is held back by the pool (the shortfall counted as starvation, every packet made
    /// in the end); a NIC model's generator (`unpaced`) keeps them without counting.
    #[test]
    fn a_packet_without_a_buffer_is_counted_once() {
        let pool = Pool::new(4).expect("pool");
        let mut bufs = pool.cache();
        for (paced, keep) in [(true, false), (false, false), (false, true)] {
            // Paced fast enough that all 10 are due at once.
            let rate_pps = paced.then_some(1e12);
            let cfg = GenConfig { packets: Some(10), rate_pps, ..GenConfig::default() };
            let mut g = Generator::new("g", cfg).expect("generator");
            if keep {
                g = g.unpaced();
            }
            let mut out = Vec::new();
            for _ in 0..1000 {
                if g.rx_done() {
                    break;
                }
                g.rx_burst(&mut bufs, &mut out, 64);
                bufs.free_pkts(&out);
                out.clear();
            }
            let s = g.stats();
            assert!(g.rx_done(), "paced={paced} keep={keep}: {s:?}");
            match (paced, keep) {
                (true, _) => assert_eq!((s.rx_packets, s.rx_nobuf), (4, 6), "10 due, 4 buffers: 6 lost once"),
                (false, false) => assert!(s.rx_packets == 10 && s.rx_nobuf > 0, "held back, all made: {s:?}"),
                (false, true) => assert_eq!((s.rx_packets, s.rx_nobuf), (10, 0), "kept: all made in the end"),
            }
        }
    }

    /// IPv4 without DF: each flow's datagrams carry IDs 0, 1, 2, ... (valid header
    /// checksums); with DF (the default) every ID is 0.
    #[test]
    fn datagrams_without_df_number_their_ip_ids_per_flow() {
        for dont_frag in [false, true] {
            let cfg = GenConfig { flows: 2, ip: IpVersion::V4, dont_frag, ..GenConfig::default() };
            let mut g = Generator::new("g", cfg).expect("generator");
            let pool = Pool::new(64).expect("pool");
            let mut bufs = pool.cache();
            let mut out = Vec::new();
            assert_eq!(g.rx_burst(&mut bufs, &mut out, 6), 6);
            for (i, &p) in out.iter().enumerate() {
                let ip = crate::wire::Ipv4Packet::new_checked(&bufs.data(p)[14..]).expect("IPv4");
                assert!(ip.verify_checksum(), "packet {i}");
                assert_eq!(ip.dont_frag(), dont_frag);
                let want = if dont_frag { 0 } else { i as u16 / 2 };
                assert_eq!(ip.ident(), want, "packet {i} (flows alternate)");
            }
            bufs.free_pkts(&out);
        }
    }
}
