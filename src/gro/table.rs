//! The GRO table of one NAPI instance and the rules it merges by (`dev_gro_receive`,
//! `inet_gro_receive` / `ipv6_gro_receive`, `tcp_gro_receive`, `udp_gro_receive` with
//! fraglist): per-worker state that knows no worker, so the worker can hold it.
use crate::buf::chain::{SegMeta, NO_SEG};
use crate::buf::skb::{Csum, Skb};
use crate::buf::{BufCache, BufId};
use crate::wire::checksum::{fold, pseudo_header, sum_be16, sum_fixed, verifies};
use crate::wire::ethernet::{EthernetFrame, HEADER_LEN as ETH_LEN};
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::{Ipv6Packet, HEADER_LEN as IPV6_LEN};
use crate::wire::tcp::{flags, TcpPacket};
use crate::wire::udp::{UdpPacket, HEADER_LEN as UDP_LEN};
use crate::wire::{EtherType, IPPROTO_TCP, IPPROTO_UDP};

/// Hash buckets of a table (`GRO_HASH_BUCKETS`); a packet's bucket is its rx hash & 7.
pub const GRO_HASH_BUCKETS: usize = 8;
/// Packets held per bucket (`MAX_GRO_SKBS`): holding a ninth completes the oldest.
pub const MAX_GRO_SKBS: usize = 8;
/// Segments one GRO packet may carry. The kernel bounds TCP GRO by `gro_max_size` only
/// (64 segments is its fraglist limit); a sluice chain holds at most `MAX_FRAGS` frames, so
/// past 128 segments (an MSS under 512 bytes) a packet completes early.
pub const MAX_GRO_SEGS: u16 = (crate::buf::chain::MAX_FRAGS - 1) as u16;
/// A coarse clock tick (one jiffy at HZ=1000): a poll that used its whole budget completes
/// packets held longer than this (`napi_gro_flush(napi, true)`).
pub const TICK_NS: u64 = 1_000_000;

pub use crate::buf::skb::gso_type;

/// Datagrams one UDP fraglist packet may carry (`UDP_GRO_CNT_MAX`).
pub const UDP_GRO_CNT_MAX: u16 = 64;
/// Bytes a UDP fraglist packet stays under: fixed in `skb_gro_receive_list`, whatever the
/// device's `gro_max_size` (which bounds TCP's `skb_gro_receive`).
pub const GRO_LIST_MAX_SIZE: u32 = 65536;

/// What GRO did with a packet (`enum gro_result`). Merging always keeps the segment's frame
/// as a fragment, so there is no MERGED_FREE here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroResult {
    /// Its payload joined a held packet.
    Merged,
    /// It is held as the head of a new flow.
    Held,
    /// Delivered as it is (not TCP, not mergeable, or flagged).
    Normal,
}

pub use crate::stats::gro::{FlushCause, GroStats};

/// The headers of one TCP segment (or UDP datagram) GRO may merge, read through the checked
/// views once per segment, into a value small enough to compare field by field.
#[derive(Debug, Clone, Copy)]
struct Seg {
    v4: bool,
    /// A UDP datagram (fraglist GRO) rather than a TCP segment.
    udp: bool,
    /// Offset of the TCP header and of the payload in the frame.
    l4: usize,
    hdr_len: usize,
    payload_len: usize,
    seq: u32,
    ack: u32,
    /// Bytes 12..16 of the TCP header: data offset, flags, window.
    flag_word: u32,
    flags: u8,
    ip_id: u16,
    df: bool,
    ttl: u8,
    /// TOS (IPv4) or traffic class (IPv6).
    tos: u8,
    flow_label: u32,
    ports: u32,
    /// Partial sum of the addresses, the pseudo-header's part that is the same for every
    /// segment of the flow.
    addr_sum: u64,
    /// Folded sum of the payload bytes (for the merged packet's checksum).
    payload_sum: u16,
    /// The IP layer flushes it (`NAPI_GRO_CB(skb)->flush`): it completes its flow's held
    /// packet and goes NORMAL (`skb_gro_receive` returns -E2BIG).
    flush: bool,
}

/// Reads a frame as an untagged IPv4/IPv6 TCP segment (or, with `udp`, UDP datagram) GRO can
/// take: IPv4 with IHL 5, a valid header checksum, no fragment; IPv6 with TCP/UDP as the next
/// header; a valid L4 checksum (`skb_gro_checksum_validate`), summed here unless the port
/// verified it (`verified`). None = NORMAL, held packets untouched.
/// An IP length that is not the frame's (padding or a lie), or the IPv4 reserved flag, marks
/// a TCP segment `flush` (`NAPI_GRO_CB(skb)->flush`): its flow's held packet is completed and
/// it goes NORMAL; its checksum is not checked (`tcp4_gro_receive` skips it when it will
/// flush anyway). A UDP datagram so marked is None.
///
/// `data` is the linear part and `whole_len` the packet's length. A packet in a buffer
/// chain (a frame longer than one buffer: jumbo MTUs) is marked `flush` too, its headers
/// read from the linear part and its checksum taken as verified: it merges nothing here
/// (the kernel would merge a paged skb), but it completes its flow's held packet first, as
/// the kernel's length rules do (`len > mss` or `skb_gro_receive`'s -E2BIG), so it never
/// overtakes it.
fn parse(data: &[u8], whole_len: usize, verified: bool, udp: bool) -> Option<Seg> {
    let chained = whole_len != data.len();
    let eth = EthernetFrame::new_checked(data).ok()?;
    let l3 = &data[ETH_LEN..];
    // The IP layer's fields: (v4, UDP, L4 offset, ID, DF, TTL, TOS, flow label, address sum,
    // flush). The IP length is not checked against the frame here (it only flushes).
    let ip = match eth.ethertype() {
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_unchecked(l3);
            if l3.len() < 20
                || ip.version() != 4
                || ip.header_len() != 20
                || ip.is_fragment()
                || !ip.verify_checksum()
                || !(ip.protocol() == IPPROTO_TCP || udp && ip.protocol() == IPPROTO_UDP)
            {
                return None;
            }
            // inet_gro_receive: `(u16)((word0 ^ gro_len) | (id|frag_off & ~IP_DF))`, the
            // fragment bits refused above: the IP length, or the reserved flag, which a merged
            // packet could not carry for each segment.
            let flush = ETH_LEN + ip.total_len() as usize != whole_len || ip.reserved_flag();
            let addr_sum = sum_fixed(&ip.src_addr()) + sum_fixed(&ip.dst_addr());
            (true, ip.protocol() == IPPROTO_UDP, ETH_LEN + 20, ip.ident(), ip.dont_frag(), ip.ttl(), ip.tos(), 0, addr_sum, flush)
        }
        EtherType::IPV6 => {
            let ip = Ipv6Packet::new_unchecked(l3);
            if l3.len() < IPV6_LEN || ip.version() != 6 {
                return None;
            }
            let nh = ip.next_header();
            if !(nh == IPPROTO_TCP || udp && nh == IPPROTO_UDP) {
                return None;
            }
            let flush = ETH_LEN + IPV6_LEN + ip.payload_len() as usize != whole_len;
            let addr_sum = sum_fixed(&ip.src_addr()) + sum_fixed(&ip.dst_addr());
            (false, nh == IPPROTO_UDP, ETH_LEN + IPV6_LEN, 0, false, ip.hop_limit(), ip.traffic_class(), ip.flow_label(), addr_sum, flush)
        }
        _ => return None,
    };
    let (v4, is_udp, l4, ip_id, df, ttl, tos, flow_label, addr_sum, flush) = ip;
    let l4_part = match (is_udp, flush) {
        // udp_gro_receive_segment refuses a length not the frame's before any lookup; the
        // other flushed cases (the kernel may still chain them) are left NORMAL here.
        (true, true) => None,
        (true, false) => parse_udp(data, whole_len, verified || chained, l4, addr_sum),
        // A flushed segment's checksum is not checked (taken as verified): it merges nothing.
        (false, _) => parse_tcp(data, verified || flush || chained, l4, addr_sum),
    }?;
    let flush = flush || chained;
    // One struct built once, in place (a copy of one just written would wait on store
    // forwarding).
    Some(Seg {
        v4,
        udp: is_udp,
        l4,
        hdr_len: l4_part.hdr_len,
        payload_len: data.len() - l4_part.hdr_len,
        seq: l4_part.seq,
        ack: l4_part.ack,
        flag_word: l4_part.flag_word,
        flags: l4_part.flags,
        ip_id,
        df,
        ttl,
        tos,
        flow_label,
        ports: l4_part.ports,
        addr_sum,
        payload_sum: l4_part.payload_sum,
        flush,
    })
}

/// What [`parse_tcp`] / [`parse_udp`] read from the transport header.
#[derive(Debug, Clone, Copy, Default)]
struct L4Part {
    hdr_len: usize,
    seq: u32,
    ack: u32,
    flag_word: u32,
    flags: u8,
    ports: u32,
    payload_sum: u16,
}

/// The TCP half of [`parse`]: the header within the segment and a checksum that verifies.
#[inline]
fn parse_tcp(data: &[u8], verified: bool, l4: usize, addr_sum: u64) -> Option<L4Part> {
    let tcp = TcpPacket::new_checked(&data[l4..]).ok()?;
    let hdr_len = l4 + tcp.header_len();
    let pseudo = pseudo_header(addr_sum, IPPROTO_TCP, data.len() - l4);
    // The header is a whole number of 32-bit words, so the payload's sum starts aligned.
    // Its fixed part is summed inline; options (when there are any) by the general loop.
    let base: &[u8; 20] = data[l4..l4 + 20].try_into().ok()?;
    let options = &data[l4 + 20..hdr_len];
    let hdr_sum = sum_fixed(base) + if options.is_empty() { 0 } else { sum_be16(options) };
    let payload_sum = if verified {
        // A valid checksum makes pseudo + header + payload sum to 0xffff: the payload's sum
        // is what the other two lack, with no pass over the payload.
        !fold(pseudo + hdr_sum)
    } else {
        let s = fold(sum_be16(&data[hdr_len..]));
        if fold(pseudo + hdr_sum + s as u64) != 0xffff {
            return None;
        }
        s
    };
    Some(L4Part {
        hdr_len,
        seq: tcp.seq(),
        ack: tcp.ack(),
        flag_word: u32::from_be_bytes([base[12], base[13], base[14], base[15]]),
        flags: tcp.flags(),
        ports: u32::from_be_bytes([base[0], base[1], base[2], base[3]]),
        payload_sum,
    })
}

/// The UDP half of [`parse`] (`udp4_gro_receive` / `udp6_gro_receive` and the checks of
/// `udp_gro_receive_segment`): a non-zero checksum that verifies, and a length field that is
/// the IP payload exactly and longer than the header.
#[inline]
fn parse_udp(data: &[u8], whole_len: usize, verified: bool, l4: usize, addr_sum: u64) -> Option<L4Part> {
    // The header's 8 bytes, its length field checked against the whole packet below (a
    // chained datagram's runs past the linear part, which the checked view would refuse).
    let udp = UdpPacket::new_unchecked(data.get(l4..l4 + UDP_LEN)?);
    let ulen = udp.len() as usize;
    if udp.checksum() == 0 || ulen <= UDP_LEN || l4 + ulen != whole_len {
        return None;
    }
    if !verified && !verifies(pseudo_header(addr_sum, IPPROTO_UDP, ulen) + sum_be16(&data[l4..])) {
        return None;
    }
    Some(L4Part { hdr_len: l4 + UDP_LEN, ports: (udp.src_port() as u32) << 16 | udp.dst_port() as u32, ..L4Part::default() })
}

/// A packet held in a bucket: the head segment and what later segments must match.
#[derive(Debug, Clone, Copy)]
struct Held {
    skb: Skb,
    /// The head's MAC header and addresses ([`FlowWords`]), compared with each segment's.
    words: FlowWords,
    /// Last frame of the chain (where the next payload is linked).
    tail: BufId,
    first: Seg,
    /// Payload of the first segment: the MSS (`gso_size`).
    mss: u16,
    count: u16,
    /// Payload bytes so far, and the sequence number the next segment must carry.
    payload: u32,
    next_seq: u32,
    /// IPv4: the IDs stay fixed (decided by the second segment, with DF set).
    fixed_id: bool,
    /// FIN/PSH of merged segments (folded into the head's flags on completion).
    extra_flags: u8,
    /// Sum of the merged payload (each segment's sum byte-swapped when it starts at an odd
    /// offset of the whole).
    payload_sum: u64,
    age_ns: u64,
}

/// One NAPI instance's GRO state: held flows by bucket, and the normal list.
#[derive(Debug, Default)]
pub struct GroTable {
    /// Oldest first in each bucket.
    buckets: [Vec<Held>; GRO_HASH_BUCKETS],
    pub(crate) held: usize,
    pub(crate) normal: Vec<Skb>,
    pub(crate) normal_segs: u32,
    /// The list being delivered (swapped with `normal`, so neither allocates per poll).
    pub(crate) spare: Vec<Skb>,
    /// A part of the list being delivered (when a flush completed more than a batch).
    pub(crate) chunk: Vec<Skb>,
    /// When the `gro_flush_timeout` timer a completed poll armed fires (ns, the worker's
    /// clock); 0 = not armed.
    pub(crate) flush_timer: u64,
}

/// Settings GRO reads (from the tunables; a struct so tests can run GRO without a `Net`).
#[derive(Debug, Clone, Copy)]
pub struct GroConfig {
    /// `gro_max_size`: bounds TCP GRO packets (`skb_gro_receive`), not UDP fraglists.
    pub max_size: u32,
    /// UDP GRO for forwarding in the fraglist form (`ethtool -K <dev> rx-gro-list on`,
    /// `NETIF_F_GRO_FRAGLIST`); off: UDP is NORMAL.
    pub udp_fraglist: bool,
}

impl GroTable {
    /// Packets held (each a packet in flight for the ledger).
    pub fn held(&self) -> usize {
        self.held
    }

    /// Packets on the normal list (delivered before the poll ends).
    pub fn pending(&self) -> usize {
        self.normal.len()
    }

    /// `dev_gro_receive` for one packet. NORMAL packets and completed packets go on the
    /// normal list (see [`GroTable::take_normal`]).
    pub fn receive(&mut self, bufs: &mut BufCache, st: &mut GroStats, cfg: GroConfig, now_ns: u64, skb: Skb) -> GroResult {
        let verified = skb.ip_summed == Csum::Unnecessary;
        let seg = if skb.drop.is_none() { parse(bufs.data(skb.pkt), skb.pkt.total_len(), verified, cfg.udp_fraglist) } else { None };
        let Some(seg) = seg else {
            return self.normal_one(st, skb, 1);
        };
        let bucket = (skb.hash as usize) & (GRO_HASH_BUCKETS - 1);
        let words = FlowWords::of(bufs.data(skb.pkt), seg.v4);
        let found = self.buckets[bucket].iter().rposition(|p| p.skb.hash == skb.hash && same_flow(&p.first, &seg) && p.words.same(&words));
        if seg.flush {
            if let Some(i) = found {
                let p = self.buckets[bucket].remove(i);
                self.held -= 1;
                self.complete(bufs, st, p, FlushCause::Mismatch);
            }
            return self.normal_one(st, skb, 1);
        }
        if seg.udp {
            return self.receive_udp(bufs, st, now_ns, skb, seg, (bucket, words), found);
        }
        let control = seg.flags & (flags::URG | flags::PSH | flags::RST | flags::SYN | flags::FIN) != 0;
        if let Some(i) = found {
            match can_merge(bufs, &self.buckets[bucket][i], &skb, &seg, cfg) {
                Ok(()) => {
                    let p = &mut self.buckets[bucket][i];
                    merge(bufs, p, &skb, &seg);
                    st.merged += 1;
                    let short = seg.payload_len < p.mss as usize;
                    if control || short {
                        let p = self.buckets[bucket].remove(i);
                        self.held -= 1;
                        self.complete(bufs, st, p, if control { FlushCause::Flags } else { FlushCause::Short });
                    }
                    return GroResult::Merged;
                }
                Err(cause) => {
                    let p = self.buckets[bucket].remove(i);
                    self.held -= 1;
                    self.complete(bufs, st, p, cause);
                }
            }
        }
        // No flow to join: hold it unless it carries no data or a control flag (mss = 1 in
        // tcp_gro_receive's out_check_final).
        if seg.payload_len == 0 || control {
            return self.normal_one(st, skb, 1);
        }
        self.hold(bufs, st, now_ns, skb, seg, bucket, words)
    }

    /// Holds `skb` as the head of a new flow (the bucket's oldest completed first when full).
    #[allow(clippy::too_many_arguments)]
    fn hold(
        &mut self,
        bufs: &mut BufCache,
        st: &mut GroStats,
        now_ns: u64,
        skb: Skb,
        seg: Seg,
        bucket: usize,
        words: FlowWords,
    ) -> GroResult {
        if self.buckets[bucket].len() >= MAX_GRO_SKBS {
            let oldest = self.buckets[bucket].remove(0);
            self.held -= 1;
            self.complete(bufs, st, oldest, FlushCause::Evicted);
        }
        if self.buckets[bucket].capacity() == 0 {
            self.buckets[bucket].reserve_exact(MAX_GRO_SKBS);
        }
        self.buckets[bucket].push(Held {
            skb,
            words,
            tail: skb.pkt.buf,
            first: seg,
            mss: seg.payload_len as u16,
            count: 1,
            payload: seg.payload_len as u32,
            next_seq: seg.seq.wrapping_add(seg.payload_len as u32),
            fixed_id: false,
            extra_flags: 0,
            payload_sum: seg.payload_sum as u64,
            age_ns: now_ns,
        });
        self.held += 1;
        st.held += 1;
        GroResult::Held
    }

    /// `udp_gro_receive_segment` in its fraglist form for a datagram of held flow `found`:
    /// the IP rules or a longer datagram complete the held packet (and this one starts a new
    /// flow); a different checksum state makes this one NORMAL; 64 KB complete the held packet;
    /// otherwise it is chained, and a shorter datagram or the 64th completes the packet.
    #[allow(clippy::too_many_arguments)]
    fn receive_udp(
        &mut self,
        bufs: &mut BufCache,
        st: &mut GroStats,
        now_ns: u64,
        skb: Skb,
        seg: Seg,
        (bucket, words): (usize, FlowWords),
        found: Option<usize>,
    ) -> GroResult {
        if let Some(i) = found {
            let p = &self.buckets[bucket][i];
            let cause = if ip_flush(p, &seg) || seg.payload_len > p.mss as usize {
                Some(FlushCause::Mismatch)
            } else if skb.ip_summed != p.skb.ip_summed {
                return self.normal_one(st, skb, 1);
            } else if udp_list_len(p) + (seg.payload_len + seg.hdr_len - ETH_LEN) as u32 >= GRO_LIST_MAX_SIZE {
                // skb_gro_receive_list: the held packet's length plus the whole datagram.
                Some(FlushCause::Full)
            } else {
                None
            };
            if let Some(cause) = cause {
                let p = self.buckets[bucket].remove(i);
                self.held -= 1;
                self.complete(bufs, st, p, cause);
            } else {
                let p = &mut self.buckets[bucket][i];
                merge(bufs, p, &skb, &seg);
                st.merged += 1;
                let short = seg.payload_len < p.mss as usize;
                if short || p.count >= UDP_GRO_CNT_MAX {
                    let p = self.buckets[bucket].remove(i);
                    self.held -= 1;
                    self.complete(bufs, st, p, if short { FlushCause::Short } else { FlushCause::Full });
                }
                return GroResult::Merged;
            }
        }
        self.hold(bufs, st, now_ns, skb, seg, bucket, words)
    }

    fn normal_one(&mut self, st: &mut GroStats, skb: Skb, segs: u16) -> GroResult {
        st.normal += 1;
        self.push_normal(skb, segs);
        GroResult::Normal
    }

    /// `gro_normal_one`: the list counts segments.
    fn push_normal(&mut self, skb: Skb, segs: u16) {
        if self.normal.capacity() == 0 {
            self.normal.reserve(256);
        }
        self.normal.push(skb);
        self.normal_segs += segs as u32;
    }

    /// True when the normal list holds `batch` segments (time for `gro_normal_list`).
    pub fn list_full(&self, batch: u32) -> bool {
        self.normal_segs >= batch
    }

    /// Moves the normal list into `out` (emptied first) and resets its segment count.
    pub fn take_normal(&mut self, st: &mut GroStats, out: &mut Vec<Skb>) {
        out.clear();
        if out.capacity() == 0 {
            out.reserve(256);
        }
        if self.normal.is_empty() {
            return;
        }
        st.lists += 1;
        st.list_segs += self.normal_segs as u64;
        std::mem::swap(&mut self.normal, out);
        self.normal_segs = 0;
    }

    /// Completes held packets: all of them, or (`older_than`) those held since before it.
    /// Buckets in order, oldest first in each (napi_gro_flush).
    pub fn flush(&mut self, bufs: &mut BufCache, st: &mut GroStats, older_than: Option<u64>, cause: FlushCause) {
        if self.held == 0 {
            return;
        }
        for b in 0..GRO_HASH_BUCKETS {
            let mut i = 0;
            while i < self.buckets[b].len() {
                if older_than.is_some_and(|t| self.buckets[b][i].age_ns >= t) {
                    i += 1;
                    continue;
                }
                let p = self.buckets[b].remove(i);
                self.held -= 1;
                self.complete(bufs, st, p, cause);
            }
        }
    }

    /// `napi_gro_complete`: fixes the headers of a merged packet and puts it on the list.
    fn complete(&mut self, bufs: &mut BufCache, st: &mut GroStats, p: Held, cause: FlushCause) {
        st.flushed[cause as usize] += 1;
        st.record_segs(p.count);
        let mut skb = p.skb;
        if p.count > 1 {
            finish_merged(bufs, &p, &mut skb);
        }
        self.push_normal(skb, p.count);
    }
}

/// A segment's MAC header and IP addresses as words read straight from its frame (the
/// kernel's `same_flow` compares them in the packets too). Not kept in [`Seg`]: comparing a
/// stack copy built from narrower stores would wait on store forwarding.
#[derive(Debug, Clone, Copy)]
struct FlowWords([u64; 6]);

impl FlowWords {
    /// `d` is a frame [`parse`] accepted (so its IP header is all there).
    #[inline]
    fn of(d: &[u8], v4: bool) -> FlowWords {
        let word = |at: usize| d.get(at..at + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or_default()));
        let mac_tail = d.get(8..12).map_or(0, |b| u32::from_ne_bytes(b.try_into().unwrap_or_default()));
        if v4 {
            // Source and destination sit together at bytes 12..20 of the IP header.
            FlowWords([word(0), mac_tail.into(), word(ETH_LEN + 12), 0, 0, 0])
        } else {
            let a = ETH_LEN + 8;
            FlowWords([word(0), mac_tail.into(), word(a), word(a + 8), word(a + 16), word(a + 24)])
        }
    }

    /// Equal, as one or-reduction of differences (no early exit, no byte compare call).
    #[inline]
    fn same(&self, o: &FlowWords) -> bool {
        self.0.iter().zip(&o.0).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

/// Same flow at the IP and TCP/UDP layers: family, protocol, ports and the IPv6 flow label,
/// which `ipv6_gro_receive` treats as part of the flow (the addresses: [`FlowWords`]).
fn same_flow(a: &Seg, b: &Seg) -> bool {
    a.v4 == b.v4 && a.udp == b.udp && a.ports == b.ports && a.flow_label == b.flow_label
}

/// The IP layer's flush rules (`inet_gro_flush` / `ipv6_gro_flush`) for a segment of held
/// flow `p`: TTL / hop limit, TOS / traffic class or DF differ, or the IPv4 ID is neither
/// `first + count` nor fixed (DF set) as the second segment decided.
fn ip_flush(p: &Held, s: &Seg) -> bool {
    let f = &p.first;
    if f.ttl != s.ttl || f.tos != s.tos || f.df != s.df {
        return true;
    }
    if f.v4 {
        let inc = s.ip_id == f.ip_id.wrapping_add(p.count);
        let fixed = s.df && s.ip_id == f.ip_id && (p.count == 1 || p.fixed_id);
        return !(inc && !p.fixed_id || fixed);
    }
    false
}

/// A UDP fraglist packet's IP datagram length so far (`p->len` in `skb_gro_receive_list`).
fn udp_list_len(p: &Held) -> u32 {
    (p.first.hdr_len - ETH_LEN) as u32 + p.payload
}

/// The flush rules of `inet_gro_receive` / `ipv6_gro_receive` / `tcp_gro_receive` /
/// `skb_gro_receive` for a segment of held flow `p`; Err = complete `p` first.
fn can_merge(bufs: &BufCache, p: &Held, skb: &Skb, s: &Seg, cfg: GroConfig) -> Result<(), FlushCause> {
    let f = &p.first;
    let mismatch = Err(FlushCause::Mismatch);
    if ip_flush(p, s) {
        return mismatch;
    }
    // TCP: CWR; flags other than CWR/FIN/PSH, data offset, window; ack; options.
    const MASK: u32 = !(((flags::CWR | flags::FIN | flags::PSH) as u32) << 16);
    if s.flags & flags::CWR != 0 || (s.flag_word ^ f.flag_word) & MASK != 0 || s.ack != f.ack {
        return mismatch;
    }
    if !options_equal(bufs, p, skb, s) {
        return mismatch;
    }
    // Length: 1..=mss, continuing the sequence.
    if s.payload_len == 0 || s.payload_len > p.mss as usize || s.seq != p.next_seq {
        return mismatch;
    }
    let ip_len = (f.hdr_len - ETH_LEN) as u32 + p.payload;
    if ip_len + s.payload_len as u32 >= cfg.max_size || p.count >= MAX_GRO_SEGS {
        return Err(FlushCause::Full);
    }
    Ok(())
}

/// Links the segment's payload to `p`'s chain and advances `p`.
fn merge(bufs: &mut BufCache, p: &mut Held, skb: &Skb, s: &Seg) {
    let frag = skb.pkt.buf;
    bufs.set_seg_meta(frag, SegMeta { next: NO_SEG, off: skb.pkt.off + s.hdr_len as u16, len: s.payload_len as u16 });
    let m = bufs.seg_meta(p.tail);
    bufs.set_seg_meta(p.tail, SegMeta { next: frag.0, ..m });
    p.tail = frag;
    p.skb.pkt.frag_len += s.payload_len as u32;
    let sum = if p.payload & 1 == 1 { s.payload_sum.swap_bytes() } else { s.payload_sum };
    p.payload_sum += sum as u64;
    p.payload += s.payload_len as u32;
    p.next_seq = s.seq.wrapping_add(s.payload_len as u32);
    if p.count == 1 && p.first.v4 && s.ip_id == p.first.ip_id {
        p.fixed_id = true;
    }
    p.count += 1;
    p.extra_flags |= s.flags & (flags::FIN | flags::PSH);
}

/// Completion fix-ups: IP lengths (and the IPv4 header checksum), the TCP flags gathered,
/// a full TCP checksum over the merged packet, and the GSO fields.
fn finish_merged(bufs: &mut BufCache, p: &Held, skb: &mut Skb) {
    let f = &p.first;
    if f.udp {
        return finish_fraglist(bufs, p, skb);
    }
    let l4_len = f.hdr_len - f.l4 + p.payload as usize;
    let d = bufs.data_mut(skb.pkt);
    d[f.l4 + 13] |= p.extra_flags;
    if f.v4 {
        let mut ip = Ipv4Packet::new_unchecked(&mut d[ETH_LEN..f.l4]);
        ip.set_total_len((f.l4 - ETH_LEN + l4_len) as u16);
        ip.fill_checksum();
    } else {
        Ipv6Packet::new_unchecked(&mut d[ETH_LEN..f.l4]).set_payload_len(l4_len as u16);
    }
    let pseudo = pseudo_header(f.addr_sum, IPPROTO_TCP, l4_len);
    d[f.l4 + 16] = 0;
    d[f.l4 + 17] = 0;
    let csum = !fold(pseudo + sum_be16(&d[f.l4..f.hdr_len]) + p.payload_sum);
    d[f.l4 + 16..f.l4 + 18].copy_from_slice(&csum.to_be_bytes());
    skb.gso_size = p.mss;
    skb.gso_segs = p.count;
    let cwr = d[f.l4 + 13] & flags::CWR != 0;
    skb.gso_type = if f.v4 { gso_type::TCPV4 } else { gso_type::TCPV6 }
        | if p.fixed_id { gso_type::TCP_FIXEDID } else { 0 }
        | if cwr { gso_type::TCP_ECN } else { 0 };
    skb.ip_summed = Csum::Unnecessary;
}

/// `inet_gro_complete` + `udp4_gro_complete` / `udp6_gro_complete` for a fraglist packet: the
/// IP length (and IPv4 header checksum) and the UDP length cover the whole chain; the UDP
/// checksum stays the head datagram's own (valid again once segment-list GSO restores its
/// length); `gso_type` UDP_L4 | FRAGLIST.
fn finish_fraglist(bufs: &mut BufCache, p: &Held, skb: &mut Skb) {
    let f = &p.first;
    let l4_len = UDP_LEN + p.payload as usize;
    let d = bufs.data_mut(skb.pkt);
    if f.v4 {
        let mut ip = Ipv4Packet::new_unchecked(&mut d[ETH_LEN..f.l4]);
        ip.set_total_len((f.l4 - ETH_LEN + l4_len) as u16);
        ip.fill_checksum();
    } else {
        Ipv6Packet::new_unchecked(&mut d[ETH_LEN..f.l4]).set_payload_len(l4_len as u16);
    }
    UdpPacket::new_unchecked(&mut d[f.l4..f.hdr_len]).set_len(l4_len as u16);
    skb.gso_size = p.mss;
    skb.gso_segs = p.count;
    skb.gso_type = gso_type::UDP_L4 | gso_type::FRAGLIST;
    skb.ip_summed = Csum::Unnecessary;
}

/// TCP options of the held head and of a new segment, byte for byte.
fn options_equal(bufs: &BufCache, p: &Held, skb: &Skb, s: &Seg) -> bool {
    // Equal data offsets (checked before) and none: nothing to compare.
    if s.hdr_len == s.l4 + 20 && p.first.hdr_len == p.first.l4 + 20 {
        return true;
    }
    let a = bufs.data(p.skb.pkt).get(p.first.l4 + 20..p.first.hdr_len);
    let b = bufs.data(skb.pkt).get(s.l4 + 20..s.hdr_len);
    a.is_some() && a == b
}
