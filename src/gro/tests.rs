//! GRO flush rules (one test per rule, named after the kernel function it mirrors), the
//! normal list, GSO, and properties: GRO then GSO gives back the segments byte for byte;
//! hostile trains are never merged wrongly and never panic.

use super::*;
use crate::buf::skb::Csum;
use crate::buf::{BufCache, Pool};
use crate::tx::gso;
use crate::wire::checksum::{checksum, fold, pseudo_header_v4, pseudo_header_v6, sum_be16};
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::Ipv6Packet;
use crate::wire::tcp::{flags, TcpPacket};
use crate::wire::udp::UdpPacket;
use crate::wire::{EtherType, IPPROTO_TCP, IPPROTO_UDP};
use proptest::prelude::*;

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

const SRC4: [u8; 4] = [198, 18, 0, 1];
const DST4: [u8; 4] = [10, 0, 0, 1];
const SRC6: [u8; 16] = [0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const DST6: [u8; 16] = [0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// What the test builders vary in the Ethernet and IP headers.
#[derive(Debug, Clone, Copy)]
struct Hdr {
    v6: bool,
    tos: u8,
    flow_label: u32,
    ttl: u8,
    id: u16,
    df: bool,
}

/// The Ethernet and IP headers (fixed addresses, `proto` over `l4_len` bytes) at the front of `f`.
fn write_eth_ip(f: &mut [u8], h: Hdr, proto: u8, l4_len: usize) {
    f[0..6].copy_from_slice(&MAC);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xaa]);
    f[12..14].copy_from_slice(&if h.v6 { EtherType::IPV6 } else { EtherType::IPV4 }.to_be_bytes());
    if h.v6 {
        let mut ip = Ipv6Packet::new_unchecked(&mut f[14..54]);
        ip.set_version();
        ip.set_traffic_class(h.tos);
        ip.set_flow_label(h.flow_label);
        ip.set_payload_len(l4_len as u16);
        ip.set_next_header(proto);
        ip.set_hop_limit(h.ttl);
        ip.set_src_addr(&SRC6);
        ip.set_dst_addr(&DST6);
    } else {
        let mut ip = Ipv4Packet::new_unchecked(&mut f[14..34]);
        ip.set_version_and_header_len(20);
        ip.set_tos(h.tos);
        ip.set_total_len((20 + l4_len) as u16);
        ip.set_ident(h.id);
        ip.set_dont_frag(h.df);
        ip.set_ttl(h.ttl);
        ip.set_protocol(proto);
        ip.set_src_addr(&SRC4);
        ip.set_dst_addr(&DST4);
        ip.fill_checksum();
    }
}

/// One TCP segment to build.
#[derive(Debug, Clone)]
struct T {
    v6: bool,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    id: u16,
    df: bool,
    ttl: u8,
    tos: u8,
    flow_label: u32,
    opts: Vec<u8>,
    payload: Vec<u8>,
    sport: u16,
}

impl T {
    fn new(seq: u32, len: usize) -> T {
        T {
            v6: false,
            seq,
            ack: 7,
            flags: flags::ACK,
            window: 512,
            id: 0,
            df: true,
            ttl: 64,
            tos: 0,
            flow_label: 0,
            opts: vec![],
            payload: (0..len).map(|i| (i as u32).wrapping_mul(seq | 1) as u8).collect(),
            sport: 1000,
        }
    }

    fn frame(&self) -> Vec<u8> {
        let l3 = if self.v6 { 40 } else { 20 };
        let tcp_len = 20 + self.opts.len() + self.payload.len();
        let mut f = vec![0u8; 14 + l3 + tcp_len];
        write_eth_ip(
            &mut f,
            Hdr { v6: self.v6, tos: self.tos, flow_label: self.flow_label, ttl: self.ttl, id: self.id, df: self.df },
            IPPROTO_TCP,
            tcp_len,
        );
        let mut t = TcpPacket::new_unchecked(&mut f[14 + l3..]);
        t.set_src_port(self.sport);
        t.set_dst_port(80);
        t.set_seq(self.seq);
        t.set_ack(self.ack);
        t.set_header_len(20 + self.opts.len());
        t.set_flags(self.flags);
        t.set_window(self.window);
        t.options_mut().copy_from_slice(&self.opts);
        t.payload_mut().copy_from_slice(&self.payload);
        if self.v6 {
            t.fill_checksum_v6(&SRC6, &DST6);
        } else {
            t.fill_checksum_v4(&SRC4, &DST4);
        }
        f
    }
}

/// A train of `n` in-order segments of `mss` bytes, IP IDs incrementing.
fn train(n: usize, mss: usize) -> Vec<T> {
    (0..n)
        .map(|i| {
            let mut t = T::new(1000 + (i * mss) as u32, mss);
            t.id = 100 + i as u16;
            t
        })
        .collect()
}

struct Rig {
    _pool: Pool,
    bufs: BufCache,
    t: GroTable,
    st: GroStats,
    cfg: GroConfig,
    /// Packets arrive with checksums the port verified (rx checksum offload).
    verified: bool,
}

impl Rig {
    fn new() -> Rig {
        let pool = Pool::new(4096).unwrap();
        let bufs = pool.cache();
        Rig {
            _pool: pool,
            bufs,
            t: GroTable::default(),
            st: GroStats::default(),
            cfg: GroConfig { max_size: 65536, udp_fraglist: false },
            verified: false,
        }
    }

    fn rx_frame(&mut self, f: &[u8], hash: u32) -> GroResult {
        let mut p = self.bufs.alloc_copy(f).unwrap();
        p.rss_hash = hash;
        let mut skb = Skb::build(p, self.bufs.data(p), 0, 0, &MAC);
        if self.verified {
            skb.ip_summed = Csum::Unnecessary;
        }
        self.t.receive(&mut self.bufs, &mut self.st, self.cfg, 0, skb)
    }

    fn rx(&mut self, t: &T) -> GroResult {
        self.rx_frame(&t.frame(), 0)
    }

    /// Completes everything and returns the delivered packets.
    fn out(&mut self) -> Vec<Skb> {
        self.t.flush(&mut self.bufs, &mut self.st, None, FlushCause::PollDone);
        let mut v = Vec::new();
        self.t.take_normal(&mut self.st, &mut v);
        v
    }

    /// Delivered so far (without completing held packets).
    fn delivered(&mut self) -> Vec<Skb> {
        let mut v = Vec::new();
        self.t.take_normal(&mut self.st, &mut v);
        v
    }

    fn bytes(&self, s: &Skb) -> Vec<u8> {
        self.bufs.to_vec(s.pkt)
    }

    /// The segments each delivered packet stands for (GSO of a merged one).
    fn segments(&mut self, s: &Skb) -> Vec<Vec<u8>> {
        if s.gso_segs <= 1 {
            let b = self.bytes(s);
            self.bufs.free(s.pkt);
            return vec![b];
        }
        let mut out = Vec::new();
        gso::segment(&mut self.bufs, s, &mut out).unwrap();
        let v = out.iter().map(|p| self.bufs.to_vec(*p)).collect();
        self.bufs.free_pkts(&out);
        v
    }
}

/// Checks a delivered packet is valid IP + TCP (lengths, IP and TCP checksums over the chain).
fn assert_valid(bytes: &[u8]) {
    let v6 = u16::from_be_bytes([bytes[12], bytes[13]]) == EtherType::IPV6;
    let l4 = if v6 { 54 } else { 34 };
    let tcp_len = bytes.len() - l4;
    let pseudo = if v6 {
        let ip = Ipv6Packet::new_checked(&bytes[14..]).unwrap();
        assert_eq!(ip.payload_len() as usize, tcp_len);
        pseudo_header_v6(&ip.src_addr(), &ip.dst_addr(), IPPROTO_TCP, tcp_len as u32)
    } else {
        let ip = Ipv4Packet::new_checked(&bytes[14..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.total_len() as usize, bytes.len() - 14);
        pseudo_header_v4(&ip.src_addr(), &ip.dst_addr(), IPPROTO_TCP, tcp_len as u16)
    };
    assert_eq!(fold(pseudo + sum_be16(&bytes[l4..])), 0xffff, "TCP checksum");
}

fn payload_of(bytes: &[u8]) -> &[u8] {
    let v6 = u16::from_be_bytes([bytes[12], bytes[13]]) == EtherType::IPV6;
    let l4 = if v6 { 54 } else { 34 };
    &bytes[l4 + TcpPacket::new_checked(&bytes[l4..]).unwrap().header_len()..]
}

#[test]
fn in_order_train_merges_into_one_chain_inet_gro_complete_tcp_gro_complete() {
    let mut r = Rig::new();
    let tr = train(10, 1400);
    assert_eq!(r.rx(&tr[0]), GroResult::Held);
    for t in &tr[1..] {
        assert_eq!(r.rx(t), GroResult::Merged);
    }
    assert!(r.delivered().is_empty(), "a full-sized train stays held");
    let out = r.out();
    assert_eq!(out.len(), 1);
    let s = out[0];
    assert_eq!((s.gso_size, s.gso_segs, s.gso_type), (1400, 10, gso_type::TCPV4));
    assert_eq!(s.ip_summed, Csum::Unnecessary);
    assert!(s.pkt.is_chained(), "later payloads are fragments of the head's chain");
    let b = r.bytes(&s);
    assert_eq!(b.len(), 14 + 20 + 20 + 14_000);
    assert_valid(&b);
    let all: Vec<u8> = tr.iter().flat_map(|t| t.payload.clone()).collect();
    assert_eq!(payload_of(&b), &all[..]);
    assert_eq!((r.st.merged, r.st.held, r.st.flushed[FlushCause::PollDone as usize]), (9, 1, 1));
    r.bufs.free(s.pkt);
    assert_eq!(r.bufs.in_use(), 0, "the chain owned every segment's frame");
}

#[test]
fn psh_is_merged_then_completes_tcp_gro_receive_out_check_final() {
    let mut r = Rig::new();
    let mut tr = train(4, 1000);
    tr[2].flags |= flags::PSH;
    r.rx(&tr[0]);
    r.rx(&tr[1]);
    assert_eq!(r.rx(&tr[2]), GroResult::Merged);
    let d = r.delivered();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].gso_segs, 3);
    let b = r.bytes(&d[0]);
    assert_ne!(b[34 + 13] & flags::PSH, 0, "the merged packet carries PSH");
    assert_eq!(r.rx(&tr[3]), GroResult::Held, "the next segment starts a new packet");
    assert_eq!(r.st.flushed[FlushCause::Flags as usize], 1);
}

#[test]
fn fin_is_merged_then_completes_tcp_gro_receive_out_check_final() {
    let mut r = Rig::new();
    let mut tr = train(2, 1000);
    tr[1].flags |= flags::FIN;
    r.rx(&tr[0]);
    assert_eq!(r.rx(&tr[1]), GroResult::Merged);
    let d = r.delivered();
    assert_eq!((d.len(), d[0].gso_segs), (1, 2));
}

#[test]
fn a_control_flag_without_a_flow_is_normal_tcp_gro_receive() {
    for f in [flags::PSH, flags::FIN, flags::SYN, flags::RST, flags::URG] {
        let mut r = Rig::new();
        let mut t = T::new(1, 100);
        t.flags |= f;
        assert_eq!(r.rx(&t), GroResult::Normal, "flag {f:#x}");
        assert_eq!(r.t.held(), 0);
    }
}

#[test]
fn short_segment_is_merged_then_completes_tcp_gro_receive_len_below_mss() {
    let mut r = Rig::new();
    let mut tr = train(3, 1000);
    tr[2].payload.truncate(300);
    let tr2 = tr[2].clone();
    r.rx(&tr[0]);
    r.rx(&tr[1]);
    assert_eq!(r.rx(&tr2), GroResult::Merged);
    let d = r.delivered();
    assert_eq!((d[0].gso_segs, d[0].gso_size), (3, 1000));
    assert_eq!(r.st.flushed[FlushCause::Short as usize], 1);
    assert_valid(&r.bytes(&d[0]));
}

#[test]
fn longer_than_mss_completes_and_starts_anew_tcp_gro_receive_len_above_mss() {
    let mut r = Rig::new();
    r.rx(&T::new(1000, 500));
    let mut t = T::new(1500, 600);
    t.id = 1;
    assert_eq!(r.rx(&t), GroResult::Held, "a longer segment completes p and is held itself");
    assert_eq!(r.delivered().len(), 1);
    assert_eq!(r.st.flushed[FlushCause::Mismatch as usize], 1);
}

#[test]
fn sequence_gap_completes_tcp_gro_receive_seq_check() {
    let mut r = Rig::new();
    let tr = train(3, 1000);
    r.rx(&tr[0]);
    r.rx(&tr[2]); // skips tr[1]
    assert_eq!(r.delivered().len(), 1);
    assert_eq!(r.t.held(), 1);
    let out = r.out();
    assert!(out.iter().all(|s| s.gso_segs <= 1), "nothing merged across the gap");
    // napi_gro_complete: a packet held alone leaves as it came, no GSO packet.
    assert!(out.iter().all(|s| s.gso_size == 0 && s.gso_type == 0), "{out:?}");
}

#[test]
fn overlapping_sequence_is_not_merged_tcp_gro_receive_seq_check() {
    let mut r = Rig::new();
    let mut tr = train(2, 1000);
    tr[1].seq -= 10;
    r.rx(&tr[0]);
    assert_eq!(r.rx(&tr[1]), GroResult::Held);
    assert_eq!(r.st.merged, 0);
}

#[test]
fn option_change_completes_tcp_gro_receive_option_words() {
    let mut r = Rig::new();
    let mut tr = train(3, 1000);
    for (i, t) in tr.iter_mut().enumerate() {
        t.opts = vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, if i < 2 { 5 } else { 6 }];
    }
    r.rx(&tr[0]);
    assert_eq!(r.rx(&tr[1]), GroResult::Merged, "equal timestamps merge");
    assert_eq!(r.rx(&tr[2]), GroResult::Held, "a changed timestamp completes the packet");
    assert_eq!(r.delivered()[0].gso_segs, 2);
}

#[test]
fn ack_window_doff_change_completes_tcp_gro_receive_flag_word_and_ack() {
    let cases: [fn(&mut T); 3] = [|t| t.ack += 1, |t| t.window += 1, |t| t.opts = vec![1, 1, 1, 1]];
    for change in cases {
        let mut r = Rig::new();
        let mut tr = train(2, 1000);
        change(&mut tr[1]);
        r.rx(&tr[0]);
        assert_ne!(r.rx(&tr[1]), GroResult::Merged);
        assert_eq!(r.st.merged, 0);
    }
}

#[test]
fn cwr_after_the_first_segment_completes_tcp_gro_receive_cwr() {
    let mut r = Rig::new();
    let mut tr = train(3, 1000);
    tr[0].flags |= flags::CWR;
    r.rx(&tr[0]);
    assert_eq!(r.rx(&tr[1]), GroResult::Merged, "CWR on the head is allowed");
    tr[2].flags |= flags::CWR;
    assert_ne!(r.rx(&tr[2]), GroResult::Merged);
    let d = r.delivered();
    assert_eq!(d[0].gso_type, gso_type::TCPV4 | gso_type::TCP_ECN);
}

#[test]
fn zero_length_segment_is_normal_and_never_merged_tcp_gro_receive_len_zero() {
    let mut r = Rig::new();
    let tr = train(1, 1000);
    r.rx(&tr[0]);
    let mut ack = T::new(2000, 0);
    ack.id = 101;
    assert_eq!(r.rx(&ack), GroResult::Normal);
    assert_eq!(r.st.merged, 0);
}

#[test]
fn ip_id_jump_completes_inet_gro_flush_id() {
    let mut r = Rig::new();
    let mut tr = train(3, 1000);
    tr[2].id += 5;
    r.rx(&tr[0]);
    r.rx(&tr[1]);
    assert_eq!(r.rx(&tr[2]), GroResult::Held);
    assert_eq!(r.delivered()[0].gso_segs, 2);
}

#[test]
fn fixed_ip_id_with_df_merges_inet_gro_flush_id_atomic() {
    let mut r = Rig::new();
    let mut tr = train(3, 1000);
    for t in &mut tr {
        t.id = 42;
    }
    for t in &tr {
        r.rx(t);
    }
    let out = r.out();
    assert_eq!((out.len(), out[0].gso_type), (1, gso_type::TCPV4 | gso_type::TCP_FIXEDID));
    // Without DF a fixed ID is a jump.
    let mut r = Rig::new();
    for t in &mut tr {
        t.df = false;
    }
    r.rx(&tr[0]);
    assert_ne!(r.rx(&tr[1]), GroResult::Merged);
}

#[test]
fn ttl_tos_df_change_completes_inet_gro_receive_network_flush() {
    let cases: [fn(&mut T); 3] = [|t| t.ttl -= 1, |t| t.tos = 4, |t| t.df = false];
    for change in cases {
        let mut r = Rig::new();
        let mut tr = train(2, 1000);
        change(&mut tr[1]);
        r.rx(&tr[0]);
        assert_ne!(r.rx(&tr[1]), GroResult::Merged);
    }
}

#[test]
fn bad_checksums_ihl_and_fragments_are_normal_inet_gro_receive() {
    const IPOPT_NOOP: u8 = 1;
    let tr = train(2, 1000);
    let base = tr[1].frame();
    let mut bad_ip = base.clone();
    bad_ip[24] ^= 1; // IPv4 header checksum
    let mut bad_tcp = base.clone();
    bad_tcp[60] ^= 1; // payload byte: TCP checksum no longer holds
                      // A fragment and a header with options, each with every checksum right, so that only
                      // the rule itself can refuse them.
    let mut frag = base.clone();
    frag[20] |= 0x20; // MF
    Ipv4Packet::new_unchecked(&mut frag[14..34]).fill_checksum();
    let mut ihl = [&base[..34], &[IPOPT_NOOP; 4][..], &base[34..]].concat();
    ihl[14] = 0x46;
    let total = u16::from_be_bytes([ihl[16], ihl[17]]) + 4;
    ihl[16..18].copy_from_slice(&total.to_be_bytes());
    Ipv4Packet::new_unchecked(&mut ihl[14..38]).fill_checksum();
    let (src, dst) = (Ipv4Packet::new_unchecked(&ihl[14..38]).src_addr(), Ipv4Packet::new_unchecked(&ihl[14..38]).dst_addr());
    TcpPacket::new_unchecked(&mut ihl[38..]).fill_checksum_v4(&src, &dst);
    for f in [bad_ip, bad_tcp, frag, ihl] {
        let mut r = Rig::new();
        r.rx(&tr[0]);
        assert_eq!(r.rx_frame(&f, 0), GroResult::Normal);
        assert_eq!(r.t.held(), 1, "the held flow is untouched");
        assert_eq!(r.st.merged, 0);
    }
}

/// An IP length that is not the frame's (Ethernet padding, or a lie either way) flushes the
/// segment in the IP layer, which still runs the TCP layer: the held packet of its flow is
/// completed first (`skb_gro_receive` returns -E2BIG for a flushed segment) and the segment
/// follows it, NORMAL — a padded small segment is not delivered ahead of the data before it.
/// Its checksum is not checked (`tcp4_gro_receive` skips it when it will flush anyway).
#[test]
fn ip_length_not_the_frame_s_completes_the_held_flow_inet_gro_receive_flush() {
    for v6 in [false, true] {
        let l4 = if v6 { 54 } else { 34 };
        let mut tr = train(2, 1448);
        tr[1].payload.truncate(4);
        for t in &mut tr {
            t.v6 = v6;
        }
        let small = tr[1].frame();
        let mut padded = small.clone();
        padded.resize(small.len().max(60) + 2, 0);
        let mut longer = small.clone();
        longer[if v6 { 19 } else { 17 }] += 3; // IP length past the frame
        let mut shorter = small.clone();
        shorter[if v6 { 19 } else { 17 }] -= 2; // IP length short of it
        if !v6 {
            refill_checksums(&mut longer);
            refill_checksums(&mut shorter);
        }
        let mut bad_tcp = padded.clone();
        bad_tcp[l4 + 16] ^= 1;
        for (what, f) in [("padded", padded), ("longer", longer), ("shorter", shorter), ("padded, bad TCP checksum", bad_tcp)] {
            let mut r = Rig::new();
            assert_eq!(r.rx(&tr[0]), GroResult::Held);
            assert_eq!(r.rx_frame(&f, 0), GroResult::Normal, "{what} v6={v6}");
            assert_eq!(r.t.held(), 0, "{what} v6={v6}: the held packet was completed");
            let d = r.delivered();
            let got: Vec<Vec<u8>> = d.iter().map(|s| r.bytes(s)).collect();
            assert_eq!(got, [tr[0].frame(), f.clone()], "{what} v6={v6}: held packet first, then the segment");
            assert_eq!((r.st.merged, r.st.flushed[FlushCause::Mismatch as usize]), (0, 1));
            // Without a flow to complete it is NORMAL too, never held.
            let mut r = Rig::new();
            assert_eq!(r.rx_frame(&f, 0), GroResult::Normal, "{what} v6={v6}");
            assert_eq!(r.t.held(), 0);
        }
    }
}

/// A segment longer than one buffer (a jumbo MTU: a buffer chain) is not merged here, but
/// it completes its flow's held packet before it goes NORMAL, as the kernel's length rules
/// (`tcp_gro_receive`: longer than the MSS) complete it: the flow keeps its order. Without
/// a held packet it is NORMAL, and a segment of another flow leaves the held one alone.
#[test]
fn a_chained_segment_completes_its_held_flow_first_tcp_gro_receive_len_above_mss() {
    for v6 in [false, true] {
        let mut a = T::new(1000, 1000);
        let mut b = T::new(2000, 4000);
        a.v6 = v6;
        b.v6 = v6;
        b.id = 1;
        let mut r = Rig::new();
        assert_eq!(r.rx(&a), GroResult::Held);
        let mut other = b.clone();
        other.sport = 1001;
        let p = r.bufs.alloc_copy(&other.frame()).unwrap();
        assert!(p.is_chained(), "precondition: a buffer chain");
        r.bufs.free(p);
        assert_eq!(r.rx(&other), GroResult::Normal, "v6={v6}: another flow's");
        assert_eq!(r.t.held(), 1, "v6={v6}: another flow leaves the held packet alone");
        assert_eq!(r.rx(&b), GroResult::Normal, "v6={v6}");
        assert_eq!(r.t.held(), 0, "v6={v6}: the held packet was completed");
        let d = r.delivered();
        let got: Vec<Vec<u8>> = d.iter().map(|s| r.bytes(s)).collect();
        assert_eq!(got, [other.frame(), a.frame(), b.frame()], "v6={v6}: the held packet before the chained segment");
        assert_eq!((r.st.merged, r.st.flushed[FlushCause::Mismatch as usize]), (0, 1));
        for s in d {
            r.bufs.free(s.pkt);
        }
        let mut r = Rig::new();
        assert_eq!(r.rx(&b), GroResult::Normal, "v6={v6}: no flow, not held");
        assert_eq!(r.t.held(), 0);
    }
}

/// Any flag bit but DF (the fragment bits bail out earlier) flushes in `inet_gro_receive`:
/// a segment with the reserved flag completes the held packet and goes NORMAL, never merged
/// (GSO would give it the head's flags).
#[test]
fn reserved_flag_completes_the_held_flow_inet_gro_receive_flush() {
    let tr = train(3, 1000);
    let mut evil = tr[1].frame();
    evil[20] |= 0x80;
    refill_checksums(&mut evil);
    let mut r = Rig::new();
    r.rx(&tr[0]);
    assert_eq!(r.rx_frame(&evil, 0), GroResult::Normal);
    assert_eq!(r.t.held(), 0, "the held packet was completed");
    let got: Vec<Vec<u8>> = r.delivered().iter().map(|s| r.bytes(s)).collect();
    assert_eq!(got, [tr[0].frame(), evil.clone()]);
    // Without a flow it is NORMAL, never held (so nothing merges into it either).
    let mut r = Rig::new();
    assert_eq!(r.rx_frame(&evil, 0), GroResult::Normal);
    assert_eq!(r.t.held(), 0);
}

#[test]
fn udp_and_other_traffic_is_normal_dev_gro_receive() {
    let mut r = Rig::new();
    let mut f = T::new(1, 100).frame();
    f[14 + 9] = 17;
    assert_eq!(r.rx_frame(&f, 0), GroResult::Normal);
    assert_eq!(r.rx_frame(&[0u8; 60], 0), GroResult::Normal);
    assert_eq!((r.st.normal, r.st.held, r.st.merged), (2, 0, 0), "counted as passed through");
}

#[test]
fn ninth_flow_in_a_bucket_completes_the_oldest_gro_flush_oldest() {
    let mut r = Rig::new();
    for i in 0..9u16 {
        let mut t = T::new(1, 1000);
        t.sport = 2000 + i;
        assert_eq!(r.rx(&t), GroResult::Held);
    }
    assert_eq!(r.t.held(), 8);
    let d = r.delivered();
    assert_eq!(d.len(), 1);
    assert_eq!(TcpPacket::new_checked(&r.bytes(&d[0])[34..]).unwrap().src_port(), 2000, "the oldest went");
    assert_eq!(r.st.flushed[FlushCause::Evicted as usize], 1);
    // Other buckets are separate.
    let mut t = T::new(1, 1000);
    t.sport = 3000;
    r.rx_frame(&t.frame(), 1);
    assert_eq!(r.t.held(), 9);
}

/// Recomputes a TCP frame's IPv4 header checksum and TCP checksum after a test edited it.
fn refill_checksums(f: &mut [u8]) {
    let v6 = u16::from_be_bytes([f[12], f[13]]) == EtherType::IPV6;
    if v6 {
        let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        TcpPacket::new_unchecked(&mut f[54..]).fill_checksum_v6(&src, &dst);
    } else {
        let mut ip = Ipv4Packet::new_unchecked(&mut f[14..34]);
        ip.fill_checksum();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        TcpPacket::new_unchecked(&mut f[34..]).fill_checksum_v4(&src, &dst);
    }
}

/// Every byte word of the flow's identity counts: a next segment whose MAC header or source
/// or destination address differs in any one of them starts a flow of its own (IPv6's
/// addresses are compared in four 8-byte words: one byte changed in each).
#[test]
fn a_different_mac_or_address_is_another_flow_dev_gro_receive_same_flow() {
    let v4_bytes = [0, 11, 14 + 12, 14 + 15, 14 + 16, 14 + 19];
    let v6_bytes = [14 + 8, 14 + 16, 14 + 24, 14 + 32, 14 + 39];
    for (v6, at) in v4_bytes.iter().map(|&b| (false, b)).chain(v6_bytes.iter().map(|&b| (true, b))) {
        let mut r = Rig::new();
        let mut a = train(2, 1000);
        for t in &mut a {
            t.v6 = v6;
        }
        assert_eq!(r.rx(&a[0]), GroResult::Held);
        let mut f = a[1].frame();
        f[at] ^= 0x40;
        refill_checksums(&mut f);
        assert_eq!(r.rx_frame(&f, 0), GroResult::Held, "v6 {v6}, byte {at} changed: another flow");
        let out = r.out();
        assert_eq!(out.iter().map(|s| s.gso_segs.max(1)).collect::<Vec<_>>(), vec![1, 1], "v6 {v6}, byte {at}");
        // The same segment unchanged merges (so the edit is what kept them apart).
        let mut r = Rig::new();
        r.rx(&a[0]);
        assert_eq!(r.rx(&a[1]), GroResult::Merged);
    }
}

#[test]
fn interleaved_flows_both_merge_dev_gro_receive_same_flow() {
    let mut r = Rig::new();
    let a = train(4, 1000);
    let mut b = train(4, 1000);
    for t in &mut b {
        t.sport = 7;
    }
    for i in 0..4 {
        r.rx(&a[i]);
        r.rx(&b[i]);
    }
    let out = r.out();
    assert_eq!(out.iter().map(|s| s.gso_segs).collect::<Vec<_>>(), vec![4, 4]);
}

#[test]
fn gro_max_size_completes_a_train_past_64k_skb_gro_receive() {
    let mut r = Rig::new();
    let tr = train(50, 1400);
    for t in &tr {
        r.rx(t);
    }
    let out = r.out();
    let lens: Vec<usize> = out.iter().map(|s| s.pkt.total_len() - 14).collect();
    assert!(lens.iter().all(|&l| l < 65536), "{lens:?}");
    assert_eq!(out[0].gso_segs, 46, "40 + 46 × 1400 < 65536 <= 40 + 47 × 1400");
    assert_eq!(r.st.flushed[FlushCause::Full as usize], 1);
}

#[test]
fn at_most_a_chain_of_segments_skb_gro_receive() {
    let mut r = Rig::new();
    let tr = train(140, 100);
    for t in &tr {
        r.rx(t);
    }
    let out = r.out();
    assert_eq!(out.iter().map(|s| s.gso_segs).collect::<Vec<_>>(), vec![128, 12]);
}

#[test]
fn ipv6_train_merges_and_flow_label_tc_hop_limit_rules_ipv6_gro_receive() {
    let mut r = Rig::new();
    let mut tr = train(4, 1000);
    for t in &mut tr {
        t.v6 = true;
        t.flow_label = 9;
    }
    for t in &tr[..3] {
        r.rx(t);
    }
    let mut other = tr[3].clone();
    other.flow_label = 10;
    assert_eq!(r.rx(&other), GroResult::Held, "another flow label is another flow");
    let out = r.out();
    assert_eq!(out[0].gso_type, gso_type::TCPV6);
    assert_eq!(out[0].gso_segs, 3);
    assert_valid(&r.bytes(&out[0]));
    let mut r = Rig::new();
    let mut changed = tr[1].clone();
    changed.tos = 8;
    r.rx(&tr[0]);
    assert_ne!(r.rx(&changed), GroResult::Merged, "traffic class differs");
}

#[test]
fn normal_list_counts_segments_gro_normal_one() {
    let mut r = Rig::new();
    let tr = train(5, 1000);
    for t in &tr {
        r.rx(t);
    }
    r.t.flush(&mut r.bufs, &mut r.st, None, FlushCause::PollDone);
    assert!(r.t.list_full(5), "one packet of 5 segments fills a batch of 5");
    assert!(!r.t.list_full(6));
    let mut u = T::new(1, 10).frame();
    u[14 + 9] = 17;
    r.rx_frame(&u, 3);
    assert!(r.t.list_full(6));
    let d = r.delivered();
    assert_eq!(d.len(), 2);
    assert_eq!((r.st.lists, r.st.list_segs), (1, 6));
    assert_eq!((r.st.held, r.st.merged, r.st.normal), (1, 4, 1), "every packet GRO saw is held, merged or normal");
}

/// `gro_normal_one` delivers the list the moment it reaches `gro_normal_batch` segments;
/// a packet pushed after that (here the RST that completed the held packet, pushed after it)
/// waits on the list for later packets or the poll's end: it is not delivered as a list of
/// its own mid-poll.
#[test]
fn what_follows_a_batch_cut_stays_on_the_list_gro_normal_one() {
    let pool = Pool::new(64).unwrap();
    let tun = crate::tunables::Tunables { gro: 1, gro_normal_batch: 4, ..Default::default() };
    let mut net = crate::net::Net::new(tun, crate::datapath::Pipeline::L3fwd);
    net.ifaces.push(crate::rx::route::Iface::new("in", MAC));
    let mut w = crate::worker::Worker::new(0, &pool);
    let mut other = T::new(1, 10).frame();
    other[14 + 9] = 17; // not TCP: NORMAL
    let held = T::new(1000, 100);
    let mut rst = T::new(1100, 0);
    rst.flags |= flags::RST; // its flag word differs: completes `held`, then NORMAL
    let frames = [other.clone(), other.clone(), other, held.frame(), rst.frame()];
    let mut skbs: Vec<Skb> = frames
        .iter()
        .map(|f| {
            let p = w.bufs.alloc_copy(f).unwrap();
            Skb::build(p, w.bufs.data(p), 0, 0, &MAC)
        })
        .collect();
    receive_burst(&net, &mut w, 0, &mut skbs);
    assert_eq!((w.c.gro.lists, w.c.gro.list_segs), (1, 4), "three NORMAL and the completed packet");
    assert_eq!(w.gro[0].pending(), 1, "the RST waits on the list");
    poll_done(&net, &mut w, 0, PollEnd::Work);
    assert_eq!((w.c.gro.lists, w.c.gro.list_segs), (2, 5), "delivered at the poll's end");
    assert_eq!(w.gro[0].pending(), 0);
}

#[test]
fn gso_splits_a_gro_packet_into_the_original_segments_tcp_gso_segment() {
    for v6 in [false, true] {
        let mut r = Rig::new();
        let mut tr = train(7, 1200);
        tr[6].payload.truncate(77);
        tr[6].flags |= flags::PSH;
        for t in &mut tr {
            t.v6 = v6;
        }
        for t in &tr {
            r.rx(t);
        }
        let out = r.out();
        assert_eq!(out.len(), 1);
        let segs = r.segments(&out[0]);
        let want: Vec<Vec<u8>> = tr.iter().map(|t| t.frame()).collect();
        assert_eq!(segs, want, "v6 = {v6}");
        assert_eq!(r.bufs.in_use(), 0);
    }
}

fn hostile_frame(t: &T, lie: u8) -> Vec<u8> {
    let mut f = t.frame();
    let l4 = if t.v6 { 54 } else { 34 };
    match lie {
        // IP length says more or less than the frame.
        1 if !t.v6 => f[17] = f[17].wrapping_add(3),
        1 => f[19] = f[19].wrapping_add(3),
        2 if !t.v6 => f[17] = f[17].wrapping_sub(2),
        // Data offset past the segment (options run past the header).
        3 => f[l4 + 12] = 0xf0,
        // Ethernet padding.
        4 => f.extend_from_slice(&[0; 6]),
        // Truncated.
        5 => f.truncate(f.len() / 2),
        _ => {}
    }
    f
}

/// What GRO (then GSO) delivered, `got`, is exactly the frames that came in, `inputs`
/// (frame, flow, well-formed), nothing lost or invented; and within each of the six flows
/// (GRO's flows: ports and family) the well-formed frames leave in the order they came.
fn same_frames_in_flow_order(inputs: Vec<(Vec<u8>, usize, bool)>, mut got: Vec<Vec<u8>>) -> Result<(), TestCaseError> {
    for f in 0..6 {
        let ordered = |x: &(Vec<u8>, usize, bool)| x.1 == f && x.2;
        let want: Vec<&Vec<u8>> = inputs.iter().filter(|x| ordered(x)).map(|x| &x.0).collect();
        let out: Vec<&Vec<u8>> = got.iter().filter(|g| inputs.iter().any(|x| ordered(x) && x.0 == **g)).collect();
        prop_assert_eq!(out, want, "flow {}: well-formed frames in order", f);
    }
    let mut all: Vec<Vec<u8>> = inputs.into_iter().map(|x| x.0).collect();
    all.sort();
    got.sort();
    prop_assert_eq!(got, all);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// GRO then GSO returns the original segments byte for byte (IPv4 and IPv6), for trains
    /// with random MSS, counts, a short or PSH last segment, and fixed or incrementing IDs.
    #[test]
    fn gro_then_gso_round_trips(v6 in any::<bool>(), n in 1usize..140, mss in 1usize..1400, last in 0usize..1400,
                                psh in any::<bool>(), fixed in any::<bool>(), seed in any::<u32>(), verified in any::<bool>()) {
        let mut r = Rig::new();
        r.verified = verified;
        let mut tr = train(n, mss);
        for (i, t) in tr.iter_mut().enumerate() {
            t.v6 = v6;
            if fixed { t.id = 9; }
            t.payload.iter_mut().enumerate().for_each(|(j, b)| *b = (seed as usize ^ (i * 31 + j)) as u8);
        }
        let k = n - 1;
        tr[k].payload.truncate(last.max(1).min(mss));
        if psh { tr[k].flags |= flags::PSH; }
        let want: Vec<Vec<u8>> = tr.iter().map(|t| t.frame()).collect();
        let mut got = Vec::new();
        for t in &tr {
            r.rx(t);
            for s in r.delivered() {
                if s.gso_segs > 1 { assert_valid(&r.bytes(&s)); }
                got.extend(r.segments(&s));
            }
        }
        for s in r.out() {
            if s.gso_segs > 1 { assert_valid(&r.bytes(&s)); }
            got.extend(r.segments(&s));
        }
        prop_assert_eq!(got, want);
        prop_assert_eq!(r.bufs.in_use(), 0);
    }

    /// Hostile trains (lying lengths, overlapping or gapped sequence numbers, options past the
    /// header, zero-length, padded and chained (jumbo) segments, flows interleaved): nothing
    /// panics, every delivered packet that GRO built is valid, and splitting it again gives
    /// exactly frames that came in: nothing merged wrongly, nothing lost or invented. Within
    /// each flow the well-formed segments (a lying IPv6 length or padding included: the IP
    /// layer flushes them) leave in the order they came; a malformed one (bad IPv4 header
    /// checksum, TCP header past the frame) is NORMAL before any lookup and may pass held
    /// data, as in dev_gro_receive.
    #[test]
    fn hostile_trains_never_merge_wrongly(ops in proptest::collection::vec(
        (0u8..3, -3i32..3, 0usize..600, 0u8..8, 0u8..6, any::<bool>()), 1..60), mss in 1usize..600) {
        let mut r = Rig::new();
        let mut next = [1000u32; 3];
        // (frame, flow (a port and a family: GRO's flows), well-formed)
        let mut inputs: Vec<(Vec<u8>, usize, bool)> = Vec::new();
        let mut got = Vec::new();
        for (i, (flow, seq_skew, len, flag_pick, lie, v6)) in ops.into_iter().enumerate() {
            let f = flow as usize;
            let len = match len % 11 {
                0 => 2500,
                _ if len % 5 == 0 => mss,
                _ => len % (mss + 1),
            };
            let mut t = T::new(next[f].wrapping_add(seq_skew as u32 * 500), len);
            t.v6 = v6 && f == 2;
            t.sport = 100 + flow as u16;
            t.id = i as u16;
            t.flags |= [0, 0, 0, 0, flags::PSH, flags::FIN, flags::CWR, flags::URG][flag_pick as usize];
            if flag_pick == 7 { t.opts = vec![1, 1, 1, 1]; }
            next[f] = t.seq.wrapping_add(len as u32);
            let frame = hostile_frame(&t, lie);
            let well_formed = frame == t.frame() || lie == 4 || lie == 1 && t.v6;
            inputs.push((frame.clone(), f * 2 + t.v6 as usize, well_formed));
            r.rx_frame(&frame, flow as u32);
            for s in r.delivered() {
                if s.gso_segs > 1 { assert_valid(&r.bytes(&s)); }
                got.extend(r.segments(&s));
            }
        }
        for s in r.out() {
            if s.gso_segs > 1 { assert_valid(&r.bytes(&s)); }
            got.extend(r.segments(&s));
        }
        same_frames_in_flow_order(inputs, got)?;
        prop_assert_eq!(r.bufs.in_use(), 0);
    }
}

#[test]
fn checksum_helper_agrees() {
    // The test builder's checksums are the wire module's: a frame verifies as built.
    let f = T::new(5, 33).frame();
    assert_eq!(checksum(&f[14..34]), 0);
    assert_valid(&f);
}

/// skb_gso_validate_network_len: the IP length a GRO packet is held to against the egress
/// MTU is one segment's, its TCP options included; a lone packet has none (its own length).
#[test]
fn a_gro_packets_network_length_is_one_segments() {
    // None, and NOP NOP Timestamp (12 bytes: data offset 8).
    for opts in [vec![], vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]] {
        let mut r = Rig::new();
        let mut tr = train(3, 1000);
        for t in &mut tr {
            t.opts = opts.clone();
        }
        for t in &tr {
            r.rx(t);
        }
        let merged = r.out()[0];
        assert_eq!(merged.gso_segs, 3);
        let ip = &r.bufs.data(merged.pkt)[14..];
        assert_eq!(gso::network_len(ip, &merged), Some(20 + 20 + opts.len() + 1000), "options {opts:?}");
        let lone = Skb { gso_segs: 1, ..merged };
        assert_eq!(gso::network_len(ip, &lone), None);
        r.bufs.free(merged.pkt);
    }
}

#[test]
fn gso_of_any_chain_layout_copies_and_gives_the_same_segments_tcp_gso_segment() {
    let mut r = Rig::new();
    let tr = train(5, 1300);
    for t in &tr {
        r.rx(t);
    }
    let merged = r.out()[0];
    let bytes = r.bytes(&merged);
    // The same packet in a plain chain (head frame full, then whole frames): not the
    // frames GRO kept, so GSO copies.
    let mut copy = merged;
    copy.pkt = r.bufs.alloc_chain_copy(&bytes).unwrap();
    let want: Vec<Vec<u8>> = tr.iter().map(|t| t.frame()).collect();
    assert_eq!(r.segments(&copy), want);
    // Headers alone in the head frame, the whole payload in fragments (skb_segment's
    // header-only head: hdr_len == headlen).
    let mut bare = merged;
    bare.pkt = r.bufs.alloc_copy(&bytes[..14 + 20 + 20]).unwrap();
    assert!(r.bufs.append_frags(&mut bare.pkt, &bytes[54..]));
    assert_eq!(r.segments(&bare), want, "headers alone in the head");
    assert_eq!(r.segments(&merged), want);
    assert_eq!(r.bufs.in_use(), 0);
    // A short last segment (it ends the train) comes back short from the copy too.
    let mut tr = train(4, 1300);
    tr[3].payload.truncate(700);
    for t in &tr {
        r.rx(t);
    }
    let merged = r.out()[0];
    assert_eq!(merged.gso_segs, 4);
    let mut copy = merged;
    copy.pkt = r.bufs.alloc_chain_copy(&r.bytes(&merged)).unwrap();
    let want: Vec<Vec<u8>> = tr.iter().map(|t| t.frame()).collect();
    assert_eq!(r.segments(&copy), want);
    assert_eq!(r.segments(&merged), want);
    assert_eq!(r.bufs.in_use(), 0);
}

/// GSO by copying that runs out of buffers part-way frees the segments it made and fails
/// whole (the caller drops the packet as no_buffer: never sent in part); a packet without
/// GSO size, or with headers and no payload, cannot be segmented (malformed).
#[test]
fn gso_out_of_buffers_frees_what_it_made_and_a_packet_without_payload_is_malformed() {
    let mut r = Rig::new();
    for t in &train(5, 1300) {
        r.rx(t);
    }
    let merged = r.out()[0];
    let bytes = r.bytes(&merged);
    let mut copy = merged;
    copy.pkt = r.bufs.alloc_chain_copy(&bytes).unwrap();
    let mut hog = Vec::new();
    while r.bufs.alloc_bulk(&mut hog, 64, 60) > 0 {}
    r.bufs.free_pkts(&hog.split_off(hog.len() - 2));
    let in_use = r.bufs.in_use();
    let mut segs = Vec::new();
    assert_eq!(gso::segment(&mut r.bufs, &copy, &mut segs), Err(gso::GsoError::NoBuffer), "two buffers for five segments");
    assert!(segs.is_empty());
    assert_eq!(r.bufs.in_use(), in_use, "the two segments made were freed");
    r.bufs.free_pkts(&hog);
    let no_size = Skb { gso_size: 0, ..copy };
    assert_eq!(gso::segment(&mut r.bufs, &no_size, &mut segs), Err(gso::GsoError::Malformed));
    let headers = Skb { pkt: r.bufs.alloc_copy(&bytes[..14 + 20 + 20]).unwrap(), ..copy };
    assert_eq!(gso::segment(&mut r.bufs, &headers, &mut segs), Err(gso::GsoError::Malformed), "no payload");
    assert!(segs.is_empty());
    r.bufs.free(headers.pkt);
    // Each segment must fit one buffer: a GSO size past MAX_DATA less the 54 bytes of
    // headers is malformed (nothing is written past a frame); exactly that fits.
    let max_mss = crate::buf::MAX_DATA - 54;
    let too_big = Skb { gso_size: (max_mss + 1) as u16, ..copy };
    assert_eq!(gso::segment(&mut r.bufs, &too_big, &mut segs), Err(gso::GsoError::Malformed));
    let fits = Skb { pkt: r.bufs.alloc_chain_copy(&bytes).unwrap(), gso_size: max_mss as u16, ..copy };
    assert_eq!(gso::segment(&mut r.bufs, &fits, &mut segs), Ok(6500usize.div_ceil(max_mss)));
    assert_eq!(segs.iter().map(|p| p.total_len()).max(), Some(crate::buf::MAX_DATA));
    r.bufs.free_pkts(&segs);
    r.bufs.free(copy.pkt);
    r.bufs.free(merged.pkt);
    assert_eq!(r.bufs.in_use(), 0);
}

#[test]
fn gso_rewrites_a_segment_header_that_is_not_the_one_the_head_implies_skb_segment_list() {
    let mut r = Rig::new();
    let tr = train(3, 1000);
    for t in &tr {
        r.rx(t);
    }
    let merged = r.out()[0];
    // Scribble on the second segment's old TCP header (in its frame, before its payload).
    let (id, m) = r.bufs.frags(merged.pkt).next().unwrap();
    let at = m.off as usize - 20 + 4;
    r.bufs.frame_mut(id)[at] ^= 0xff;
    let want: Vec<Vec<u8>> = tr.iter().map(|t| t.frame()).collect();
    assert_eq!(r.segments(&merged), want);
}

#[test]
fn flush_old_completes_only_packets_held_before_the_tick_napi_gro_flush() {
    let mut r = Rig::new();
    let mut a = T::new(1, 1000);
    a.sport = 1;
    let mut b = T::new(1, 1000);
    b.sport = 2;
    for (t, at) in [(&a, 0), (&b, 2 * TICK_NS)] {
        let p = r.bufs.alloc_copy(&t.frame()).unwrap();
        let skb = Skb::build(p, r.bufs.data(p), 0, 0, &MAC);
        assert_eq!(r.t.receive(&mut r.bufs, &mut r.st, r.cfg, at, skb), GroResult::Held);
    }
    // A poll that used its budget at 3 ticks: what is older than one tick goes.
    r.t.flush(&mut r.bufs, &mut r.st, Some(3 * TICK_NS - TICK_NS), FlushCause::Aged);
    let d = r.delivered();
    assert_eq!(d.len(), 1);
    assert_eq!(TcpPacket::new_checked(&r.bytes(&d[0])[34..]).unwrap().src_port(), 1);
    assert_eq!((r.t.held(), r.st.flushed[FlushCause::Aged as usize]), (1, 1));
    r.bufs.free(d[0].pkt);
    assert_eq!(r.out().len(), 1, "completion takes the rest");
}

mod udp;

/// napi_complete_done and the `gro_flush_timeout` timer: a completed poll with packets and
/// the timeout set flushes only what is held over a tick and arms the timer; empty polls
/// before it fires flush the same way; the first empty poll after it flushes everything
/// (its `work_done == 0` takes no timeout). Without the timeout a completed poll flushes
/// everything; a poll that used its budget only what is over a tick.
#[test]
fn flush_timeout_holds_packets_until_its_timer_fires_napi_complete_done() {
    use super::PollEnd::*;
    let now = 10 * TICK_NS;
    let aged = Some(now - TICK_NS);
    assert_eq!(super::flush_rule(Work, 0, 0, now), (None, FlushCause::PollDone, 0), "completed poll: everything");
    assert_eq!(super::flush_rule(Empty, 0, 0, now), (None, FlushCause::PollDone, 0));
    assert_eq!(super::flush_rule(BudgetUsed, 0, 0, now), (aged, FlushCause::Aged, 0), "budget used: over a tick");
    for timeout in [1, 20_000, 2_000_000, 1_000_000_000] {
        let armed = now + timeout;
        assert_eq!(super::flush_rule(Work, timeout, 0, now), (aged, FlushCause::Aged, armed), "timeout {timeout}: armed");
        assert_eq!(super::flush_rule(BudgetUsed, timeout, armed, now), (aged, FlushCause::Aged, armed), "not complete");
        if timeout > 1 {
            assert_eq!(
                super::flush_rule(Empty, timeout, armed, now + 1),
                (aged.map(|a| a + 1), FlushCause::Aged, armed),
                "before it fires"
            );
        }
        assert_eq!(super::flush_rule(Empty, timeout, armed, armed), (None, FlushCause::PollDone, 0), "the timer's poll");
    }
}
