//! UDP GRO in the fraglist form (`rx-gro-list`): one test per rule of `udp_gro_receive_segment`
//! / `skb_gro_receive_list` / `udp4_gro_complete`, segment-list GSO (`__udp_gso_segment_list`),
//! and properties: GRO then GSO gives the datagrams back byte for byte; hostile trains never
//! merge wrongly and never panic.

use super::*;

/// One UDP datagram to build.
#[derive(Debug, Clone)]
struct U {
    v6: bool,
    id: u16,
    df: bool,
    ttl: u8,
    tos: u8,
    flow_label: u32,
    sport: u16,
    payload: Vec<u8>,
}

impl U {
    fn new(i: usize, len: usize) -> U {
        U {
            v6: false,
            id: 100 + i as u16,
            df: true,
            ttl: 64,
            tos: 0,
            flow_label: 0,
            sport: 4000,
            payload: (0..len).map(|j| (j as u32).wrapping_mul(i as u32 * 2 + 1) as u8).collect(),
        }
    }

    fn frame(&self) -> Vec<u8> {
        let l3 = if self.v6 { 40 } else { 20 };
        let ulen = 8 + self.payload.len();
        let mut f = vec![0u8; 14 + l3 + ulen];
        write_eth_ip(
            &mut f,
            Hdr { v6: self.v6, tos: self.tos, flow_label: self.flow_label, ttl: self.ttl, id: self.id, df: self.df },
            IPPROTO_UDP,
            ulen,
        );
        let l4 = 14 + l3;
        {
            let mut u = UdpPacket::new_unchecked(&mut f[l4..]);
            u.set_src_port(self.sport);
            u.set_dst_port(5001);
            u.set_len(ulen as u16);
        }
        f[l4 + 8..].copy_from_slice(&self.payload);
        let pseudo = if self.v6 {
            pseudo_header_v6(&SRC6, &DST6, IPPROTO_UDP, ulen as u32)
        } else {
            pseudo_header_v4(&SRC4, &DST4, IPPROTO_UDP, ulen as u16)
        };
        let c = match !fold(pseudo + sum_be16(&f[l4..])) {
            0 => 0xffff,
            c => c,
        };
        f[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
        f
    }
}

/// A train of `n` datagrams of `len` payload bytes, IP IDs incrementing.
fn utrain(n: usize, len: usize) -> Vec<U> {
    (0..n).map(|i| U::new(i, len)).collect()
}

fn urig() -> Rig {
    let mut r = Rig::new();
    r.cfg.udp_fraglist = true;
    r
}

fn urx(r: &mut Rig, u: &U) -> GroResult {
    r.rx_frame(&u.frame(), 0)
}

/// A UDP datagram's frame is valid: IP lengths and checksum, UDP length and checksum.
fn assert_udp_valid(bytes: &[u8]) {
    let v6 = u16::from_be_bytes([bytes[12], bytes[13]]) == EtherType::IPV6;
    let l4 = if v6 { 54 } else { 34 };
    let udp = UdpPacket::new_checked(&bytes[l4..]).unwrap();
    assert_eq!(udp.len() as usize, bytes.len() - l4);
    if v6 {
        let ip = Ipv6Packet::new_checked(&bytes[14..]).unwrap();
        assert!(udp.verify_checksum_v6(&ip.src_addr(), &ip.dst_addr()));
    } else {
        let ip = Ipv4Packet::new_checked(&bytes[14..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.total_len() as usize, bytes.len() - 14);
        assert!(udp.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()));
    }
}

#[test]
fn udp_is_normal_without_rx_gro_list_udp_gro_receive() {
    let mut r = Rig::new();
    for u in &utrain(3, 500) {
        assert_eq!(urx(&mut r, u), GroResult::Normal, "NETIF_F_GRO_FRAGLIST off: no UDP GRO");
    }
    assert_eq!(r.st.merged, 0);
}

#[test]
fn udp_train_is_chained_as_a_fraglist_udp4_gro_complete() {
    let mut r = urig();
    let tr = utrain(5, 1000);
    assert_eq!(urx(&mut r, &tr[0]), GroResult::Held);
    for u in &tr[1..] {
        assert_eq!(urx(&mut r, u), GroResult::Merged);
    }
    let out = r.out();
    assert_eq!(out.len(), 1);
    let s = out[0];
    assert_eq!((s.gso_size, s.gso_segs, s.gso_type), (1000, 5, gso_type::UDP_L4 | gso_type::FRAGLIST));
    let b = r.bytes(&s);
    let ip = Ipv4Packet::new_checked(&b[14..]).unwrap();
    assert_eq!(ip.total_len(), 20 + 8 + 5000, "inet_gro_complete: tot_len over the chain");
    assert!(ip.verify_checksum());
    let udp = UdpPacket::new_checked(&b[34..]).unwrap();
    assert_eq!(udp.len(), 8 + 5000, "udp4_gro_complete: uh->len over the chain");
    assert_eq!(udp.checksum(), UdpPacket::new_checked(&tr[0].frame()[34..]).unwrap().checksum(), "the head's own checksum");
    let payload: Vec<u8> = tr.iter().flat_map(|u| u.payload.clone()).collect();
    assert_eq!(&b[42..], &payload[..], "payloads in order, no headers between them");
    assert_eq!(r.st.merged, 4);
    let want: Vec<Vec<u8>> = tr.iter().map(|u| u.frame()).collect();
    assert_eq!(r.segments(&s), want);
    assert_eq!(r.bufs.in_use(), 0);
}

#[test]
fn shorter_datagram_is_merged_and_completes_udp_gro_receive_segment() {
    let mut r = urig();
    let mut tr = utrain(5, 1000);
    tr[3].payload.truncate(300);
    for u in &tr[..4] {
        urx(&mut r, u);
    }
    assert_eq!(r.t.held(), 0, "a shorter datagram ends the train");
    assert_eq!(r.st.flushed[FlushCause::Short as usize], 1);
    assert_eq!(urx(&mut r, &tr[4]), GroResult::Held, "the next one starts a new flow");
    let d = r.out();
    assert_eq!(d.iter().map(|s| s.gso_segs.max(1)).collect::<Vec<_>>(), vec![4, 1]);
}

#[test]
fn longer_datagram_completes_and_is_held_udp_gro_receive_segment() {
    let mut r = urig();
    let mut tr = utrain(3, 1000);
    tr[2].payload.resize(1200, 7);
    urx(&mut r, &tr[0]);
    urx(&mut r, &tr[1]);
    assert_eq!(urx(&mut r, &tr[2]), GroResult::Held, "ulen > the head's: complete p, hold skb");
    assert_eq!(r.st.flushed[FlushCause::Mismatch as usize], 1);
    assert_eq!(r.out().iter().map(|s| s.gso_segs.max(1)).collect::<Vec<_>>(), vec![2, 1]);
}

#[test]
fn zero_or_bad_checksum_and_lying_lengths_are_normal_udp4_gro_receive() {
    let tr = utrain(2, 600);
    let base = tr[1].frame();
    let mut zero = base.clone();
    zero[40..42].copy_from_slice(&[0, 0]); // "no checksum": valid over IPv4, never merged
    let mut bad = base.clone();
    bad[100] ^= 1;
    let mut short_len = base.clone();
    short_len[38..40].copy_from_slice(&(8 + 500u16).to_be_bytes()); // uh->len != the IP payload
    let empty = U::new(1, 0).frame(); // ulen <= sizeof(udphdr)
    let mut padded = base.clone();
    padded.extend_from_slice(&[0; 4]);
    // The IPv4 reserved flag: flushed by inet_gro_receive; left NORMAL here (the kernel's
    // fraglist would chain it, see README), not merged for GSO to lose the flag.
    let mut evil = base.clone();
    evil[20] |= 0x80;
    Ipv4Packet::new_unchecked(&mut evil[14..34]).fill_checksum();
    for f in [zero, bad, short_len, empty, padded, evil] {
        let mut r = urig();
        urx(&mut r, &tr[0]);
        assert_eq!(r.rx_frame(&f, 0), GroResult::Normal);
        assert_eq!(r.t.held(), 1, "the held flow is untouched");
        assert_eq!(r.st.merged, 0);
    }
}

#[test]
fn sixty_four_datagrams_complete_the_packet_udp_gro_cnt_max() {
    let mut r = urig();
    for u in &utrain(70, 100) {
        urx(&mut r, u);
    }
    let out = r.out();
    assert_eq!(out.iter().map(|s| s.gso_segs.max(1)).collect::<Vec<_>>(), vec![64, 6]);
    assert_eq!(r.st.flushed[FlushCause::Full as usize], 1);
}

#[test]
fn a_train_past_64k_completes_skb_gro_receive_list() {
    let mut r = urig();
    let tr = utrain(50, 1400);
    for u in &tr {
        urx(&mut r, u);
    }
    let out = r.out();
    // p->len + skb->len >= 65536: 28 + 46 × 1400 + 1428 = 65856.
    assert_eq!(out.iter().map(|s| s.gso_segs.max(1)).collect::<Vec<_>>(), vec![46, 4]);
    assert_eq!(out[0].pkt.total_len() - 14, 28 + 46 * 1400);
    let mut got = Vec::new();
    for s in &out {
        got.extend(r.segments(s));
    }
    assert_eq!(got, tr.iter().map(|u| u.frame()).collect::<Vec<_>>());
}

/// The bound counts the new datagram from its IP header (`skb->len` past the MAC header):
/// a sum of 65535 still merges, 65536 completes.
#[test]
fn the_list_bound_counts_ip_lengths_skb_gro_receive_list() {
    // 28 + 40 × 1598 (held) + 28 + 1559 (a shorter 41st, which ends the train) = 65535.
    let mut r = urig();
    let mut tr = utrain(42, 1598);
    tr[40] = U::new(40, 1559);
    for u in &tr {
        urx(&mut r, u);
    }
    let segs: Vec<u16> = r.out().iter().map(|s| s.gso_segs.max(1)).collect();
    assert_eq!(segs, vec![41, 1], "65535: merged");
    assert_eq!(r.st.flushed[FlushCause::Full as usize], 0);
    // 28 + 39 × 1637 + 28 + 1637 = 65536.
    let mut r = urig();
    for u in &utrain(40, 1637) {
        urx(&mut r, u);
    }
    let segs: Vec<u16> = r.out().iter().map(|s| s.gso_segs.max(1)).collect();
    assert_eq!(segs, vec![39, 1], "65536: complete");
    assert_eq!(r.st.flushed[FlushCause::Full as usize], 1);
}

/// The fraglist's bound is a fixed 64 KB (`p->len + skb->len >= 65536`), not the device's
/// `gro_max_size`, which bounds `skb_gro_receive` (TCP) only.
#[test]
fn gro_max_size_does_not_bound_the_list_skb_gro_receive_list() {
    let mut r = urig();
    r.cfg.max_size = 4000;
    for u in &utrain(5, 1000) {
        urx(&mut r, u);
    }
    assert_eq!(r.out().iter().map(|s| s.gso_segs.max(1)).collect::<Vec<_>>(), vec![5]);
}

#[test]
fn ttl_tos_df_and_ip_id_complete_inet_gro_flush() {
    let cases: [fn(&mut U); 4] = [|u| u.ttl -= 1, |u| u.tos = 4, |u| u.df = false, |u| u.id += 9];
    for change in cases {
        let mut r = urig();
        let mut tr = utrain(3, 500);
        change(&mut tr[2]);
        urx(&mut r, &tr[0]);
        assert_eq!(urx(&mut r, &tr[1]), GroResult::Merged);
        assert_eq!(urx(&mut r, &tr[2]), GroResult::Held);
        assert_eq!(r.out().iter().map(|s| s.gso_segs.max(1)).collect::<Vec<_>>(), vec![2, 1]);
    }
    // A fixed ID (DF set) merges, as the second datagram decides.
    let mut r = urig();
    let mut tr = utrain(3, 500);
    for u in &mut tr {
        u.id = 5;
    }
    for u in &tr {
        urx(&mut r, u);
    }
    let out = r.out();
    assert_eq!(out[0].gso_segs, 3);
    assert_eq!(r.segments(&out[0]), tr.iter().map(|u| u.frame()).collect::<Vec<_>>(), "each keeps its own ID");
}

#[test]
fn ipv6_train_and_flow_label_udp6_gro_receive() {
    let mut r = urig();
    let mut tr = utrain(4, 800);
    for u in &mut tr {
        u.v6 = true;
        u.flow_label = 3;
    }
    let mut other = tr[3].clone();
    other.flow_label = 4;
    for u in &tr[..3] {
        urx(&mut r, u);
    }
    assert_eq!(urx(&mut r, &other), GroResult::Held, "another flow label is another flow");
    let out = r.out();
    assert_eq!(out[0].gso_segs, 3);
    let b = r.bytes(&out[0]);
    assert_eq!(Ipv6Packet::new_checked(&b[14..]).unwrap().payload_len(), 8 + 2400);
    assert_eq!(UdpPacket::new_checked(&b[54..]).unwrap().len(), 8 + 2400);
    assert_eq!(r.segments(&out[0]), tr[..3].iter().map(|u| u.frame()).collect::<Vec<_>>());
}

#[test]
fn tcp_and_udp_of_the_same_ports_are_different_flows_inet_gro_receive_protocol() {
    let mut r = urig();
    let u = utrain(2, 500);
    let mut t = T::new(1, 500);
    t.sport = 4000;
    urx(&mut r, &u[0]);
    r.rx(&t);
    assert_eq!(urx(&mut r, &u[1]), GroResult::Merged);
    assert_eq!(r.t.held(), 2);
}

#[test]
fn another_checksum_state_is_normal_udp_gro_receive_segment_ip_summed() {
    let mut r = urig();
    let tr = utrain(2, 500);
    r.verified = true;
    urx(&mut r, &tr[0]);
    r.verified = false;
    assert_eq!(urx(&mut r, &tr[1]), GroResult::Normal);
    assert_eq!(r.t.held(), 1, "the held packet stays held");
}

/// Forwarding rewrites only the head (MACs, TTL): segment-list GSO gives every datagram the
/// head's Ethernet and IP headers, each keeping its own ID, length and UDP checksum.
#[test]
fn segments_take_the_forwarded_head_headers_skb_segment_list() {
    for v6 in [false, true] {
        let mut r = urig();
        let mut tr = utrain(4, 900);
        tr[3].payload.truncate(123);
        for u in &mut tr {
            u.v6 = v6;
        }
        for u in &tr {
            urx(&mut r, u);
        }
        let s = r.out()[0];
        let d = r.bufs.data_mut(s.pkt);
        d[0..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 2]);
        if v6 {
            d[14 + 7] -= 1;
        } else {
            let mut ip = Ipv4Packet::new_unchecked(&mut d[14..34]);
            ip.set_ttl(63);
            ip.fill_checksum();
        }
        let got = r.segments(&s);
        for (g, u) in got.iter().zip(&tr) {
            let mut want = u.clone();
            want.ttl = 63;
            let mut w = want.frame();
            w[0..12].copy_from_slice(&[2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 2]);
            assert_eq!(g, &w, "v6 = {v6}");
            assert_udp_valid(g);
        }
        assert_eq!(got.len(), 4);
        assert_eq!(r.bufs.in_use(), 0);
    }
}

#[test]
fn a_rewritten_segment_header_is_checksummed_again_udpv4_gso_segment_list_csum() {
    let mut r = urig();
    let tr = utrain(3, 700);
    for u in &tr {
        urx(&mut r, u);
    }
    let s = r.out()[0];
    // Scribble on the second datagram's old source port (in its frame, before its payload).
    let (id, m) = r.bufs.frags(s.pkt).next().unwrap();
    r.bufs.frame_mut(id)[m.off as usize - 8] ^= 0x55;
    assert_eq!(r.segments(&s), tr.iter().map(|u| u.frame()).collect::<Vec<_>>());
}

#[test]
fn any_chain_layout_is_copied_out_udp_gso_segment() {
    let mut r = urig();
    let tr = utrain(5, 1300);
    for u in &tr {
        urx(&mut r, u);
    }
    let merged = r.out()[0];
    let bytes = r.bytes(&merged);
    let mut copy = merged;
    copy.pkt = r.bufs.alloc_chain_copy(&bytes).unwrap();
    let want: Vec<Vec<u8>> = tr.iter().map(|u| u.frame()).collect();
    assert_eq!(r.segments(&copy), want, "IDs incrementing from the head's, checksums computed");
    assert_eq!(r.segments(&merged), want);
    assert_eq!(r.bufs.in_use(), 0);
}

fn hostile_udp(u: &U, lie: u8) -> Vec<u8> {
    let mut f = u.frame();
    let l4 = if u.v6 { 54 } else { 34 };
    match lie {
        // UDP length says more or less than the datagram.
        1 => f[l4 + 5] = f[l4 + 5].wrapping_add(3),
        2 => f[l4 + 5] = f[l4 + 5].wrapping_sub(1),
        // No checksum.
        3 => f[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]),
        // Ethernet padding, truncation, a flipped payload bit.
        4 => f.extend_from_slice(&[0; 6]),
        5 => f.truncate(f.len() / 2),
        6 if f.len() > l4 + 8 => *f.last_mut().unwrap() ^= 1,
        _ => {}
    }
    f
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// UDP GRO then GSO returns the original datagrams byte for byte (IPv4 and IPv6), for
    /// trains of any count and size, a shorter last one, fixed or incrementing IDs, checksums
    /// verified by the port or not.
    #[test]
    fn udp_gro_then_gso_round_trips(v6 in any::<bool>(), n in 1usize..140, len in 1usize..1400, last in 1usize..1400,
                                    fixed in any::<bool>(), seed in any::<u32>(), verified in any::<bool>()) {
        let mut r = urig();
        r.verified = verified;
        let mut tr = utrain(n, len);
        for (i, u) in tr.iter_mut().enumerate() {
            u.v6 = v6;
            if fixed { u.id = 9; }
            u.payload.iter_mut().enumerate().for_each(|(j, b)| *b = (seed as usize ^ (i * 31 + j)) as u8);
        }
        tr[n - 1].payload.truncate(last);
        let want: Vec<Vec<u8>> = tr.iter().map(|u| u.frame()).collect();
        let mut got = Vec::new();
        let mut packets = 0;
        for u in &tr {
            urx(&mut r, u);
            for s in r.delivered() {
                packets += 1;
                got.extend(r.segments(&s));
            }
        }
        for s in r.out() {
            packets += 1;
            got.extend(r.segments(&s));
        }
        prop_assert_eq!(&got, &want);
        for g in &got { assert_udp_valid(g); }
        // Every packet but a train's last is 64 datagrams or ends where the length changed or 64 KB were near.
        prop_assert!(packets >= n.div_ceil(64));
        prop_assert_eq!(r.st.merged as usize, n - packets);
        prop_assert_eq!(r.bufs.in_use(), 0);
    }

    /// Hostile UDP trains (lying lengths, no checksum, padding, truncation, bad checksums,
    /// random sizes, chained (jumbo) datagrams, flows interleaved with TCP): nothing panics,
    /// and splitting what GRO delivered gives exactly the frames that came in. Within each
    /// flow the well-formed datagrams leave in the order they came (a malformed one is
    /// NORMAL before any lookup and may pass held data, as in udp_gro_receive_segment).
    #[test]
    fn hostile_udp_trains_never_merge_wrongly(ops in proptest::collection::vec(
        (0u8..3, 0usize..1500, 0u8..10, any::<bool>(), 0u8..4), 1..80)) {
        let mut r = urig();
        // (frame, flow (ports and family), well-formed)
        let mut inputs: Vec<(Vec<u8>, usize, bool)> = Vec::new();
        let mut got = Vec::new();
        for (i, (flow, len, lie, v6, ip_change)) in ops.into_iter().enumerate() {
            let (frame, well_formed) = if flow == 2 && !v6 {
                let mut t = T::new(1000 + i as u32 * 100, len.min(100));
                t.sport = 4000;
                (t.frame(), true)
            } else {
                let len = match len {
                    _ if len % 3 == 0 => 1000,
                    _ if len % 13 == 1 => 3000,
                    _ => len,
                };
                let mut u = U::new(i, len);
                u.v6 = v6;
                u.sport = 4000 + flow as u16;
                u.id = i as u16;
                match ip_change { 1 => u.ttl = 1, 2 => u.tos = 8, _ => {} }
                let f = hostile_udp(&u, lie);
                let whole = f == u.frame();
                (f, whole)
            };
            inputs.push((frame.clone(), flow as usize * 2 + v6 as usize, well_formed));
            r.rx_frame(&frame, flow as u32);
            for s in r.delivered() {
                got.extend(r.segments(&s));
            }
        }
        for s in r.out() {
            got.extend(r.segments(&s));
        }
        same_frames_in_flow_order(inputs, got)?;
        prop_assert_eq!(r.bufs.in_use(), 0);
    }
}

/// A datagram longer than one buffer (a buffer chain) is not chained onto a fraglist here,
/// but it completes its flow's held packet first (`udp_gro_receive_segment`: longer than
/// the first datagram), so the flow keeps its order.
#[test]
fn a_chained_datagram_completes_its_held_flow_first_udp_gro_receive_segment() {
    for v6 in [false, true] {
        let mut tr = utrain(2, 1000);
        tr[1].payload = (0..4000).map(|i| i as u8).collect();
        for u in &mut tr {
            u.v6 = v6;
        }
        let mut r = urig();
        assert_eq!(urx(&mut r, &tr[0]), GroResult::Held);
        assert_eq!(urx(&mut r, &tr[1]), GroResult::Normal, "v6={v6}");
        assert_eq!(r.t.held(), 0, "v6={v6}: the held datagram was completed");
        let d = r.delivered();
        let got: Vec<Vec<u8>> = d.iter().map(|s| r.bytes(s)).collect();
        assert_eq!(got, [tr[0].frame(), tr[1].frame()], "v6={v6}: in order");
        for s in d {
            r.bufs.free(s.pkt);
        }
    }
}
