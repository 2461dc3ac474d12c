//! Every drop reason, each from a scenario that produces it, with its side effects (ICMP
//! errors, replies, XDP verdicts), run in both receive modes (`rx.listified` = 0 and 1) with identical
//! counters and output. Also the local services that do not drop: ARP and NDP answers,
//! ICMP/ICMPv6 echo, UDP echo (port 7), UDP sockets, and plain forwarding.
//!
//! Every run (see `common::run`) also checks: all frames received, the conservation law,
//! nothing in flight, no buffer leaked, port tx == counted tx.

mod common;

use common::*;
use sluice::buf::Pool;
use sluice::config::Tunables;
use sluice::datapath::{Datapath, Pipeline};
use sluice::napi::RunLimit;
use sluice::port::pcap::PcapIn;
use sluice::port::sink::{CheckSpec, Sink, SinkKind};
use sluice::rx::route::Iface;
use sluice::stats::DropReason;
use sluice::wire::ipv6::skip_extension_headers;
use sluice::wire::{ArpPacket, EthernetFrame, Icmpv4Packet, Icmpv6Packet, UdpPacket};
use sluice::xdp::{builtin, RedirectTarget, RunOutcome, XdpMode};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Reasons no scenario can produce in the current datapath, and why. Keep this minimal:
/// when a hook starts producing one, move it to a scenario.
const UNREACHABLE: &[(DropReason, &str)] = &[];

/// Reasons produced by a dedicated test outside the scenario table (named with the test).
const COVERED_ELSEWHERE: &[(DropReason, &str)] = &[
    (DropReason::NoTxPort, "produced by the `no_tx_port` test: an io pipeline, not the router harness the scenarios use"),
    (DropReason::CpuBacklog, "two workers (threads): tests/rps.rs `a_full_backlog_drops_with_its_name`"),
    (DropReason::CpuBacklogFlowLimit, "two workers (threads): tests/rps.rs `the_flow_limit_drops_the_elephant_not_the_mice`"),
    (DropReason::QdiscDrop, "a full handoff queue between workers: `tx::tests::a_full_handoff_queue_drops_as_qdisc_drop`"),
];

struct Scenario {
    frames: Vec<Vec<u8>>,
    setup: Setup,
    /// The exact non-zero drop counters the scenario must produce (all others stay 0).
    drops: &'static [(DropReason, u64)],
    check: fn(&Outcome, &[Vec<u8>]),
}

fn sc(frames: Vec<Vec<u8>>, drops: &'static [(DropReason, u64)], check: fn(&Outcome, &[Vec<u8>])) -> Scenario {
    Scenario { frames, setup: Setup::default(), drops, check }
}

fn exercise(s: Scenario) -> Outcome {
    let o = run_both(&s.frames, &s.setup);
    let want: BTreeMap<&str, u64> = s.drops.iter().map(|(r, n)| (r.name(), *n)).collect();
    assert_eq!(o.drops(), want, "drop counters (and nothing else dropped)");
    (s.check)(&o, &s.frames);
    o
}

/// A broadcast ARP request of ours: from `mac` / `spa`, for `tpa`.
fn assert_arp_request(f: &[u8], mac: [u8; 6], spa: [u8; 4], tpa: [u8; 4]) {
    let eth = EthernetFrame::new_checked(f).unwrap();
    assert_eq!((eth.dst(), eth.src(), eth.ethertype()), (MAC_BCAST, mac, 0x0806));
    let a = ArpPacket::new_checked(eth.payload()).unwrap();
    assert_eq!((a.operation(), a.sender_hw(), a.sender_ip(), a.target_hw(), a.target_ip()), (1, mac, spa, [0; 6], tpa));
}

/// A neighbour solicitation of ours for `target`: to its solicited-node address, hop limit
/// 255, our link-layer address in the option, checksum right.
fn assert_solicitation(f: &[u8], mac: [u8; 6], target: [u8; 16]) {
    let (group, group_mac) = solicited_node(&target);
    let eth = EthernetFrame::new_checked(f).unwrap();
    assert_eq!((eth.dst(), eth.src()), (group_mac, mac));
    let ip = ipv6_of(f);
    assert_eq!((ip.dst_addr(), ip.hop_limit(), ip.next_header()), (group, 255, 58));
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()), "ICMPv6 checksum");
    let body = ip.payload();
    assert_eq!((body[0], body[1]), (135, 0));
    assert_eq!(&body[8..24], &target);
    assert_eq!(&body[24..32], &[1, 1, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]]);
}

fn no_output(o: &Outcome) {
    for p in 0..3 {
        assert!(o.port(p).is_empty(), "port {p} sent {} frames", o.port(p).len());
    }
    assert_eq!((o.c.tx, o.c.local, o.c.originated), (0, 0, 0));
}

mod scenarios {
    use super::*;

    /// One frame in the pool: it holds the received packet, so the ICMP time exceeded
    /// cannot be built. The error counts as originated and dropped for lack of buffer.
    fn nobuf_for(frame: Vec<u8>) -> Scenario {
        let mut s = sc(vec![frame], &[(DropReason::NoBuffer, 1), (DropReason::TtlExpired, 1)], |o, _| {
            assert_eq!(o.c.originated, 1);
            assert_eq!(o.c.tx, 0);
            assert!(o.out.iter().all(|p| p.is_empty()));
        });
        s.setup.pool_frames = 1;
        s
    }

    pub fn nobuf() -> Scenario {
        nobuf_for(udp4(SRC_V4, DST1_V4, 1000, 9).ttl(1).build())
    }

    /// The ICMPv6 error path without a buffer.
    pub fn nobuf_v6() -> Scenario {
        nobuf_for(udp6(SRC_V6, DST1_V6, 1000, 9).ttl(1).build())
    }

    /// ip_fragment running out of buffers part-way: the fragments made so far leave (they
    /// count as originated), the datagram is dropped for lack of buffer, nothing is lost.
    /// Two frames in the pool: the datagram's and the first fragment's.
    pub fn nobuf_mid_fragmentation() -> Scenario {
        let frame = udp4(SRC_V4, DST2_V4, 2, 9).len(14 + 1200).df(false).build();
        let mut s = sc(vec![frame], &[(DropReason::NoBuffer, 1)], |o, f| {
            let out = o.port(P_OUT2);
            assert_eq!(out.len(), 1, "the first fragment left");
            assert_eq!(out[0].len(), 14 + 20 + 976);
            let ip = ipv4_of(&out[0]);
            assert!(ip.verify_checksum() && ip.more_frags() && ip.frag_offset() == 0, "a first fragment");
            assert_eq!(ip.payload(), &ip_datagram(&f[0])[20..20 + 976]);
            assert_eq!((o.c.originated, o.c.ip_frag_creates, o.c.ip_frag_oks), (1, 1, 0));
            assert_eq!(o.c.tx, 1);
        });
        s.setup.pool_frames = 2;
        s
    }

    /// Generic XDP on a jumbo chain for a program that is not frags-aware: the chain is
    /// linearized and the program runs and passes it, but the pool has no frames left for
    /// the result (the chain holds them all): dropped as `nobuf`, its verdict still counted.
    pub fn nobuf_for_a_linearized_result() -> Scenario {
        let jumbo = udp4(SRC_V4, DST1_V4, 2, 9).len(9000).build();
        let mut s = sc(vec![jumbo], &[(DropReason::NoBuffer, 1)], |o, _| {
            assert_eq!((o.c.rx, o.c.tx), (1, 0));
            assert_eq!(o.c.xdp_actions, [0, 0, 1, 0, 0, 0], "the program ran and passed it");
        });
        s.setup.pool_frames = 5;
        s.setup.out1_mtu = 9000;
        s.setup.xdp.push((0, XdpMode::Generic, || Box::new(FnXdpLinear(|_| RunOutcome { action: XDP_PASS, redirect: None }))));
        s
    }

    pub fn rx_length_error() -> Scenario {
        // A native XDP program that is not frags-aware: the driver receives into single
        // buffers, so a jumbo frame (a buffer chain here) is a receive length error — counted
        // and dropped, never cut, never shown to the program; the frames around it pass.
        let jumbo = udp4(SRC_V4, DST1_V4, 2, 9).len(9000).build();
        let ok = udp4(SRC_V4, DST1_V4, 2, 9).build();
        let mut s = sc(vec![ok.clone(), jumbo, ok], &[(DropReason::RxLengthError, 1)], |o, _| {
            assert_eq!(o.c.rx, 3);
            assert_eq!(o.c.tx, 2);
            assert_eq!(o.c.xdp_actions, [0, 0, 2, 0, 0, 0], "the program ran on the two frames it can take");
        });
        s.setup.xdp.push((0, XdpMode::Native, || Box::new(FnXdpLinear(|_| RunOutcome { action: XDP_PASS, redirect: None }))));
        s
    }

    pub fn pkt_too_small() -> Scenario {
        let mut runt = MAC_IN.to_vec();
        runt.extend_from_slice(&MAC_HOST[..4]);
        let mut short_v4 = udp4(SRC_V4, DST1_V4, 1, 9).build();
        short_v4.truncate(30); // 16 bytes of IPv4 header
        let mut cut_v4 = udp4(SRC_V4, DST1_V4, 1, 9).len(200).build();
        cut_v4.truncate(100); // total length 186 > 86 bytes present
        let mut short_v6 = udp6(SRC_V6, DST1_V6, 1, 9).build();
        short_v6.truncate(50);
        let mut cut_v6 = udp6(SRC_V6, DST1_V6, 1, 9).len(200).build();
        cut_v6.truncate(120);
        // Total length 1 and 14 bytes past what arrived: the check is against the IP bytes,
        // not the frame (which has 14 more).
        let mut cut1_v4 = udp4(SRC_V4, DST1_V4, 1, 9).len(200).build();
        cut1_v4.truncate(199);
        let mut cut14_v4 = udp4(SRC_V4, DST1_V4, 1, 9).len(200).build();
        cut14_v4.truncate(186);
        let mut cut1_v6 = udp6(SRC_V6, DST1_V6, 1, 9).len(200).build();
        cut1_v6.truncate(199);
        let mut cut14_v6 = udp6(SRC_V6, DST1_V6, 1, 9).len(200).build();
        cut14_v6.truncate(186);
        let mut cut_vlan = MAC_IN.to_vec();
        cut_vlan.extend_from_slice(&MAC_HOST);
        cut_vlan.extend_from_slice(&[0x81, 0x00, 0x00]);
        // Local delivery: transport headers shorter than they must be.
        let short_udp = raw4(SRC_V4, IN_V4, 17).len(14 + 20 + 4).build();
        let mut long_udp_len = udp4(SRC_V4, IN_V4, 1, 5001).build();
        long_udp_len[38..40].copy_from_slice(&200u16.to_be_bytes());
        let short_icmp = raw4(SRC_V4, IN_V4, 1).len(14 + 20 + 4).build();
        let short_icmp6 = raw6(SRC_V6, IN_V6, 58).len(14 + 40 + 4).build();
        sc(
            vec![
                runt,
                short_v4,
                cut_v4,
                cut1_v4,
                cut14_v4,
                short_v6,
                cut_v6,
                cut1_v6,
                cut14_v6,
                cut_vlan,
                short_udp,
                long_udp_len,
                short_icmp,
                short_icmp6,
            ],
            &[(DropReason::PktTooSmall, 14)],
            |o, _| no_output(o),
        )
    }

    pub fn unhandled_proto() -> Scenario {
        let lldp = ether(MAC_IN, MAC_HOST, 0x88cc, &[0; 46]);
        let qinq = ether(MAC_IN, MAC_HOST, 0x88a8, &[0; 46]);
        // Double tag: the inner ethertype after untagging is 802.1Q again.
        let mut double = udp4(SRC_V4, DST1_V4, 1, 9).vlan(IN_VLAN).build();
        double[16..18].copy_from_slice(&0x8100u16.to_be_bytes());
        sc(vec![lldp, qinq, double], &[(DropReason::UnhandledProto, 3)], |o, _| no_output(o))
    }

    pub fn vlan_filtered() -> Scenario {
        // An ARP request for our address, but on VLAN 200.
        let arp = arp_request(MAC_HOST, HOST_V4, IN_V4);
        let mut tagged_arp = arp[..12].to_vec();
        tagged_arp.extend_from_slice(&[0x81, 0x00, 0x00, 200]);
        tagged_arp.extend_from_slice(&arp[12..]);
        let frames = vec![
            udp4(SRC_V4, DST1_V4, 1, 9).vlan(200).build(),
            udp4(SRC_V4, DST1_V4, 1, 9).vlan(IN_VLAN).build(),
            // PCP 5 + DEI: the VID still decides.
            udp4(SRC_V4, DST1_V4, 2, 9).vlan(0xb000 | IN_VLAN).build(),
            tagged_arp,
        ];
        sc(frames, &[(DropReason::VlanFiltered, 2)], |o, f| {
            assert_eq!(o.port(P_OUT1).len(), 2);
            assert_forwarded(&o.port(P_OUT1)[0], &f[1], MAC_OUT1, MAC_NH1);
            assert_forwarded(&o.port(P_OUT1)[1], &f[2], MAC_OUT1, MAC_NH1);
            assert!(o.port(P_IN).is_empty() && o.port(P_OUT2).is_empty());
        })
    }

    pub fn otherhost() -> Scenario {
        let frames = vec![
            udp4(SRC_V4, DST1_V4, 1, 9).dst_mac(MAC_OTHER).build(),
            udp6(SRC_V6, DST1_V6, 1, 9).dst_mac(MAC_OTHER).build(),
            ping4(SRC_V4, IN_V4, 1, 1).dst_mac(MAC_OTHER).build(),
            ping6(SRC_V6, IN_V6, 1, 1).dst_mac(MAC_OTHER).build(),
        ];
        sc(frames, &[(DropReason::OtherHost, 4)], |o, _| no_output(o))
    }

    pub fn ip_inhdr() -> Scenario {
        let base = || udp4(SRC_V4, DST1_V4, 1, 9).build();
        let mut version5 = base();
        version5[14] = 0x55;
        fix_ip_checksum(&mut version5);
        let mut ihl4 = base();
        ihl4[14] = 0x44;
        let mut totlen_below_ihl = base();
        totlen_below_ihl[16..18].copy_from_slice(&16u16.to_be_bytes());
        fix_ip_checksum(&mut totlen_below_ihl);
        let mut ihl_beyond_frame = base();
        ihl_beyond_frame[14] = 0x4f; // 60-byte header in a 46-byte packet
        sc(vec![version5, ihl4, totlen_below_ihl, ihl_beyond_frame], &[(DropReason::IpInhdr, 4)], |o, _| no_output(o))
    }

    pub fn ip_csum() -> Scenario {
        let frames = vec![bad_ip_checksum(udp4(SRC_V4, DST1_V4, 1, 9).build()), bad_ip_checksum(ping4(SRC_V4, IN_V4, 1, 1).build())];
        sc(frames, &[(DropReason::IpCsum, 2)], |o, _| no_output(o))
    }

    pub fn ipv6_inhdr() -> Scenario {
        let mut version4 = udp6(SRC_V6, DST1_V6, 1, 9).build();
        version4[14] = 0x40;
        // Hop-by-hop options (read when forwarding too, ip6_parse_tlv): PadN with data, a
        // header claiming 201 * 8 bytes, an unknown option whose type says "discard" (01).
        let bad_padn = with_ipv6_ext(udp6(SRC_V6, DST1_V6, 1, 9).build(), 0, &[1, 4, 0, 9, 0, 0]);
        let mut truncated_hbh = with_ipv6_ext(udp6(SRC_V6, DST1_V6, 1, 9).build(), 0, &[1, 4, 0, 0, 0, 0]);
        truncated_hbh[14 + 40 + 1] = 200;
        let discard = with_ipv6_ext(udp6(SRC_V6, DST1_V6, 1, 9).build(), 0, &[0x7e, 4, 0, 0, 0, 0]);
        sc(vec![version4, bad_padn, truncated_hbh, discard], &[(DropReason::Ipv6Inhdr, 4)], |o, _| no_output(o))
    }

    /// ip_route_input_slow's martian sources (multicast, limited broadcast, 0.0.0.0) and
    /// ipv6_rcv's (multicast, loopback). Class E (240/4), the rest of 0/8 and IPv4-mapped
    /// IPv6 sources are not among them (the kernel forwards them).
    pub fn ip_invalid_source() -> Scenario {
        let frames = vec![
            udp4([0, 0, 0, 0], DST1_V4, 1, 9).build(),
            udp4([224, 0, 0, 5], DST1_V4, 1, 9).build(),
            udp4([255, 255, 255, 255], IN_V4, 1, 5001).build(),
            udp6(v6([0xff02, 0, 0, 0, 0, 0, 0, 1]), DST1_V6, 1, 9).build(),
            udp6(v6([0, 0, 0, 0, 0, 0, 0, 1]), DST1_V6, 1, 9).build(),
        ];
        sc(frames, &[(DropReason::IpInvalidSource, 5)], |o, _| no_output(o))
    }

    /// Martian destinations are dropped silently, never answered with ICMP net unreachable
    /// (RFC 1812 4.3.2.7): a multicast group sluice has not joined, the limited broadcast,
    /// 0.0.0.0; IPv6 `::1` and a group the interface has not joined (ip6_mc_input). (The
    /// rest of 0/8, IPv6 `::` and IPv4-mapped destinations are routed, as by the kernel.)
    pub fn ip_invalid_dest() -> Scenario {
        let frames = vec![
            udp4(SRC_V4, [224, 0, 0, 5], 1, 9).build(),
            udp4(SRC_V4, [239, 1, 2, 3], 1, 9).build(),
            udp4(SRC_V4, [255, 255, 255, 255], 1, 9).dst_mac(MAC_BCAST).build(),
            udp4(SRC_V4, [255, 255, 255, 255], 1, 9).build(),
            udp4([0, 0, 0, 0], [0, 0, 0, 0], 68, 67).build(),
            ping4(SRC_V4, [224, 0, 0, 1], 1, 1).build(),
            udp6(SRC_V6, v6([0, 0, 0, 0, 0, 0, 0, 1]), 1, 9).build(),
            ping6(SRC_V6, v6([0xff02, 0, 0, 0, 0, 0, 0, 0x77]), 1, 1).dst_mac([0x33, 0x33, 0, 0, 0, 0x77]).build(),
            // Interface-local all-nodes and a reserved-scope group: never from another node.
            ping6(SRC_V6, v6([0xff01, 0, 0, 0, 0, 0, 0, 1]), 1, 1).dst_mac([0x33, 0x33, 0, 0, 0, 1]).build(),
            ping6(SRC_V6, v6([0xff00, 0, 0, 0, 0, 0, 0, 1]), 1, 1).dst_mac([0x33, 0x33, 0, 0, 0, 1]).build(),
        ];
        sc(frames, &[(DropReason::IpInvalidDest, 10)], |o, _| no_output(o))
    }

    /// 127/8 on the wire, as source or destination (route_localnet off).
    pub fn ip_localnet() -> Scenario {
        let frames = vec![
            udp4([127, 0, 0, 1], DST1_V4, 1, 9).build(),
            udp4(SRC_V4, [127, 0, 0, 1], 1, 9).build(),
            ping4(SRC_V4, [127, 1, 2, 3], 1, 1).build(),
            udp4([127, 0, 0, 1], [127, 0, 0, 2], 1, 9).build(), // both: no other address to check first
        ];
        sc(frames, &[(DropReason::IpLocalnet, 4)], |o, _| no_output(o))
    }

    /// fib_validate_source: a packet whose source is one of the router's own addresses (of
    /// any port) is neither forwarded nor delivered.
    pub fn ip_local_source() -> Scenario {
        let frames = vec![
            udp4(IN_V4, DST1_V4, 1, 9).build(),
            udp4(OUT2_V4, DST1_V4, 1, 9).build(),
            ping4(OUT1_V4, IN_V4, 1, 1).build(),
            udp4(SRC_V4, DST1_V4, 1, 9).build(), // forwarded
        ];
        sc(frames, &[(DropReason::IpLocalSource, 3)], |o, f| {
            assert_eq!(o.port(P_OUT1).len(), 1);
            assert_forwarded(&o.port(P_OUT1)[0], &f[3], MAC_OUT1, MAC_NH1);
            assert!(o.port(P_IN).is_empty() && o.port(P_OUT2).is_empty());
            assert_eq!((o.c.local, o.c.originated), (0, 0));
        })
    }

    /// ip_forward / ip6_forward: pkt_type != PACKET_HOST is never forwarded, silently (not
    /// even a time exceeded, not a neighbour miss); delivered locally all the same.
    pub fn unicast_in_l2_multicast() -> Scenario {
        let mcast_mac = [0x01, 0x00, 0x5e, 0, 0, 1];
        let frames = vec![
            udp4(SRC_V4, DST1_V4, 1, 9).dst_mac(MAC_BCAST).build(),
            udp4(SRC_V4, DST1_V4, 2, 9).dst_mac(mcast_mac).build(),
            udp4(SRC_V4, DST1_V4, 3, 9).dst_mac(MAC_BCAST).ttl(1).build(),
            udp4(SRC_V4, UNRESOLVED_V4, 4, 9).dst_mac(MAC_BCAST).build(),
            udp6(SRC_V6, DST1_V6, 1, 9).dst_mac([0x33, 0x33, 0, 0, 0, 1]).build(),
            udp6(SRC_V6, DST2_V6, 1, 9).dst_mac(MAC_BCAST).build(),
            ping4(SRC_V4, IN_V4, 1, 1).dst_mac(MAC_BCAST).build(), // to us: answered
            udp4(SRC_V4, DST1_V4, 5, 9).build(),                   // to our MAC: forwarded
        ];
        sc(frames, &[(DropReason::UnicastInL2Multicast, 6)], |o, f| {
            assert_eq!(o.port(P_OUT1).len(), 1);
            assert_forwarded(&o.port(P_OUT1)[0], &f[7], MAC_OUT1, MAC_NH1);
            assert!(o.port(P_OUT2).is_empty());
            assert_eq!(o.port(P_IN).len(), 1, "the echo reply only");
            assert_eq!(Icmpv4Packet::new_checked(ipv4_of(&o.port(P_IN)[0]).payload()).unwrap().msg_type(), 0);
            assert_eq!((o.c.local, o.c.originated), (1, 1));
        })
    }

    /// ip6_forward: a source of `::` is dropped; a link-local source cannot leave its link
    /// and is answered with destination unreachable, beyond scope of source address (1/2),
    /// sent back on the link it came from (the neighbour learned from its solicitation).
    pub fn ip_inaddrerrors() -> Scenario {
        const LL: [u8; 16] = v6([0xfe80, 0, 0, 0, 0, 0, 0, 0xaa]);
        let ll = LL;
        let frames = vec![
            neighbour_solicit(MAC_HOST, ll, IN_V6),
            udp6([0; 16], DST1_V6, 1, 9).build(),
            udp6(ll, DST1_V6, 1, 9).build(),
            udp6(ll, DST1_V6, 1, 9).ttl(1).build(),             // the hop limit is checked first
            udp6(ll, DST1_V6, 1, 9).dst_mac(MAC_BCAST).build(), // then pkt_type: silent
            ping6(ll, IN_V6, 1, 1).build(),                     // to us: answered on the link
        ];
        let mut s =
            sc(frames, &[(DropReason::IpInaddrerrors, 2), (DropReason::TtlExpired, 1), (DropReason::UnicastInL2Multicast, 1)], |o, f| {
                assert!(o.port(P_OUT1).is_empty() && o.port(P_OUT2).is_empty());
                let e = o.port(P_IN);
                assert_eq!(e.len(), 4, "NA, beyond-scope error, time exceeded, echo reply");
                assert_eq!(Icmpv6Packet::new_checked(ipv6_of(&e[0]).payload()).unwrap().msg_type(), 136);
                assert_icmp6_error(&e[1], 1, 2, IN_V6, &f[2]);
                assert_icmp6_error(&e[2], 3, 0, IN_V6, &f[3]);
                assert_eq!(Icmpv6Packet::new_checked(ipv6_of(&e[3]).payload()).unwrap().msg_type(), 129);
                assert_eq!(&ipv6_of(&e[3]).dst_addr()[..], &LL[..]);
            });
        // The solicitation teaches the neighbour the other flows are answered through.
        s.setup = s.setup.across_flows_in_order();
        s
    }

    pub fn ip_noroute() -> Scenario {
        let frames = vec![
            udp4(SRC_V4, NOROUTE_V4, 1, 9).build(),                          // 0: ICMP net unreachable
            udp4(SRC_V4, BLACKHOLE_V4, 1, 9).build(),                        // 1: silent
            udp4(SRC_V4, UNREACH_V4, 1, 9).build(),                          // 2: ICMP host unreachable
            icmp4(SRC_V4, NOROUTE_V4, 3, 1, [0; 4], &[0; 28]),               // 3: an ICMP error: never answered
            ping4(SRC_V4, NOROUTE_V4, 7, 1).build(),                         // 4: echo request: answered with an error
            udp4(SRC_V4, NOROUTE_V4, 1, 9).dst_mac(MAC_BCAST).build(),       // 5: not unicast to us: no error
            udp6(SRC_V6, NOROUTE_V6, 1, 9).build(),                          // 6: ICMPv6 no route
            udp6(SRC_V6, BLACKHOLE_V6, 1, 9).build(),                        // 7: silent
            udp6(SRC_V6, UNREACH_V6, 1, 9).build(),                          // 8: ICMPv6 unreachable
            icmp6(MAC_HOST, MAC_IN, SRC_V6, NOROUTE_V6, 64, 1, 0, &[0; 44]), // 9: an ICMPv6 error
            udp6([0; 16], NOROUTE_V6, 1, 9).build(),                         // 10: from ::, no one to tell
        ];
        sc(frames, &[(DropReason::IpNoroute, 11)], |o, f| {
            let e = o.port(P_IN);
            assert_eq!(e.len(), 5, "five ICMP errors");
            assert_icmp4_error(&e[0], 3, 0, IN_V4, &f[0]);
            assert_icmp4_error(&e[1], 3, 1, IN_V4, &f[2]);
            assert_icmp4_error(&e[2], 3, 0, IN_V4, &f[4]);
            assert_icmp6_error(&e[3], 1, 0, IN_V6, &f[6]);
            assert_icmp6_error(&e[4], 1, 0, IN_V6, &f[8]);
            assert_eq!((o.c.originated, o.c.tx, o.c.local), (5, 5, 0));
        })
    }

    pub fn forwarding_disabled() -> Scenario {
        let frames = vec![
            udp4(SRC_V4, DST1_V4, 1, 9).build(),
            udp4(SRC_V4, DST1_V4, 1, 9).ttl(1).build(),
            udp6(SRC_V6, DST1_V6, 1, 9).build(),
            ping4(SRC_V4, IN_V4, 1, 1).build(),
            ping6(SRC_V6, IN_V6, 1, 1).build(),
            // No route, forwarding off: ip_error answers nothing (EHOSTUNREACH, inaddrerrors).
            udp4(SRC_V4, NOROUTE_V4, 1, 9).build(),
        ];
        let mut s = sc(frames, &[(DropReason::ForwardingDisabled, 3), (DropReason::IpInaddrerrors, 1)], |o, _| {
            // Local delivery still answers; nothing is forwarded, no ICMP for the rest.
            assert_eq!(o.port(P_IN).len(), 2);
            assert!(o.port(P_OUT1).is_empty());
            assert_eq!((o.c.local, o.c.originated), (2, 2));
        });
        s.setup.tun.ip_forward = 0;
        s.setup.tun.ipv6_forwarding = 0;
        s
    }

    pub fn ip_ttl_expired() -> Scenario {
        let frames = vec![
            udp4(SRC_V4, DST1_V4, 1, 9).ttl(1).build(), // 0
            udp4(SRC_V4, DST1_V4, 2, 9).ttl(0).build(), // 1
            ping4(SRC_V4, IN_V4, 1, 1).ttl(1).build(),  // 2: to us: delivered, not expired
            udp4(SRC_V4, DST1_V4, 3, 9).ttl(2).build(), // 3: forwarded with TTL 1
            udp6(SRC_V6, DST1_V6, 1, 9).ttl(1).build(), // 4
            ping6(SRC_V6, IN_V6, 1, 1).ttl(1).build(),  // 5: to us
        ];
        sc(frames, &[(DropReason::TtlExpired, 3)], |o, f| {
            let e = o.port(P_IN);
            assert_eq!(e.len(), 5);
            assert_icmp4_error(&e[0], 11, 0, IN_V4, &f[0]);
            assert_icmp4_error(&e[1], 11, 0, IN_V4, &f[1]);
            assert_eq!(Icmpv4Packet::new_checked(ipv4_of(&e[2]).payload()).unwrap().msg_type(), 0, "echo reply");
            assert_icmp6_error(&e[3], 3, 0, IN_V6, &f[4]);
            assert_eq!(Icmpv6Packet::new_checked(ipv6_of(&e[4]).payload()).unwrap().msg_type(), 129, "echo reply");
            assert_eq!(o.port(P_OUT1).len(), 1);
            assert_forwarded(&o.port(P_OUT1)[0], &f[3], MAC_OUT1, MAC_NH1);
        })
    }

    pub fn ip_frag_local() -> Scenario {
        let frames = vec![
            as_ipv4_fragment(udp4(SRC_V4, IN_V4, 1, 5001).build(), 0, true), // first fragment
            as_ipv4_fragment(udp4(SRC_V4, IN_V4, 1, 5001).build(), 10, false), // last fragment
            as_ipv4_fragment(ping4(SRC_V4, IN_V4, 1, 1).build(), 0, true),
            with_ipv6_fragment(udp6(SRC_V6, IN_V6, 1, 5001).build(), 10, false, 7), // non-first
            as_ipv4_fragment(udp4(SRC_V4, DST1_V4, 1, 9).build(), 10, true),        // forwarded as is
            with_ipv6_fragment(udp6(SRC_V6, DST1_V6, 1, 9).build(), 10, true, 8),
        ];
        let mut s = sc(frames, &[(DropReason::IpFragLocal, 4)], |o, f| {
            assert_eq!(o.port(P_OUT1).len(), 2, "fragments are forwarded");
            assert_forwarded(&o.port(P_OUT1)[0], &f[4], MAC_OUT1, MAC_NH1);
            assert_forwarded(&o.port(P_OUT1)[1], &f[5], MAC_OUT1, MAC_NH1);
            assert!(o.port(P_IN).is_empty(), "no ICMP about fragments");
            assert!(o.sockets[0].is_empty());
        });
        s.setup.sockets.push((5001, 16));
        s
    }

    /// Frames for destinations without a neighbour entry (on-link, v4 and v6), two with one,
    /// and an ICMP error whose own destination is unresolved.
    fn unresolved_frames() -> Vec<Vec<u8>> {
        vec![
            udp4(SRC_V4, UNRESOLVED_V4, 1, 9).build(),
            udp6(SRC_V6, UNRESOLVED_V6, 1, 9).build(),
            udp4(SRC_V4, NH2_V4, 1, 9).build(), // connected, neighbour known
            udp6(SRC_V6, NH2_V6, 1, 9).build(),
            // TTL expires, but the source is on in0's link with no neighbour entry: the
            // ICMP error itself waits for resolution.
            udp4([192, 0, 2, 77], DST1_V4, 1, 9).ttl(1).build(),
        ]
    }

    /// With `mcast_solicit = 0` nothing is asked: resolution fails at once.
    pub fn neigh_failed() -> Scenario {
        let mut s = sc(unresolved_frames(), &[(DropReason::NeighFailed, 3), (DropReason::TtlExpired, 1)], |o, f| {
            assert_eq!(o.port(P_OUT2).len(), 2);
            assert_forwarded(&o.port(P_OUT2)[0], &f[2], MAC_OUT2, MAC_NH2);
            assert_forwarded(&o.port(P_OUT2)[1], &f[3], MAC_OUT2, MAC_NH2);
            assert!(o.port(P_IN).is_empty());
            assert_eq!(o.c.originated, 1);
            assert_eq!(o.c.neigh_probes, 0);
        });
        s.setup.tun.mcast_solicit = 0;
        s
    }

    /// By default the unresolved packets wait while ARP requests and neighbour solicitations
    /// go out; the run ends before any answer, so they die with the datapath (`neigh_dead`).
    pub fn neigh_dead() -> Scenario {
        sc(unresolved_frames(), &[(DropReason::NeighDead, 3), (DropReason::TtlExpired, 1)], |o, f| {
            let out2 = o.port(P_OUT2);
            assert_eq!(out2.len(), 4, "two forwarded, one ARP request, one solicitation");
            let fwd: Vec<_> = out2.iter().filter(|p| p[12..14] != [8, 6] && p.get(54) != Some(&135)).collect();
            assert_eq!(fwd.len(), 2);
            assert_forwarded(fwd[0], &f[2], MAC_OUT2, MAC_NH2);
            assert_forwarded(fwd[1], &f[3], MAC_OUT2, MAC_NH2);
            let req = out2.iter().find(|p| p[12..14] == [8, 6]).expect("an ARP request on out2");
            assert_arp_request(req, MAC_OUT2, OUT2_V4, UNRESOLVED_V4);
            let ns = out2.iter().find(|p| p.get(54) == Some(&135)).expect("a solicitation on out2");
            assert_solicitation(ns, MAC_OUT2, UNRESOLVED_V6);
            let back = o.port(P_IN);
            assert_eq!(back.len(), 1, "the time exceeded error waits; its ARP request goes");
            assert_arp_request(&back[0], MAC_IN, IN_V4, [192, 0, 2, 77]);
            assert_eq!(o.c.originated, 1 + 3);
            assert_eq!(o.c.neigh_probes, 3);
        })
    }

    /// Neighbour tables with no room (`gc_thresh3 = 0`, both families): a packet for an
    /// unresolved neighbour is not held and nothing is asked (__neigh_create fails), and an
    /// ARP request or solicitation from an unknown sender is not answered (arp_process and
    /// ndisc_recv_ns answer once the sender's entry exists). Configured neighbours need no
    /// room: they are still used, and a configured host's request is answered.
    pub fn neigh_createfail() -> Scenario {
        let ns = icmp6(MAC_OTHER, MAC_IN, v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x77]), IN_V6, 255, 135, 0, &{
            let mut b = vec![0, 0, 0, 0];
            b.extend_from_slice(&IN_V6);
            b.extend_from_slice(&[1, 1]);
            b.extend_from_slice(&MAC_OTHER);
            b
        });
        let mut frames = unresolved_frames();
        frames.extend([arp_request(MAC_OTHER, [192, 0, 2, 77], IN_V4), ns, arp_request(MAC_HOST, HOST_V4, IN_V4)]);
        let mut s = sc(frames, &[(DropReason::NeighCreatefail, 5), (DropReason::TtlExpired, 1)], |o, f| {
            assert_eq!(o.port(P_OUT2).len(), 2, "the two packets for a configured neighbour, no request");
            assert_forwarded(&o.port(P_OUT2)[0], &f[2], MAC_OUT2, MAC_NH2);
            assert_forwarded(&o.port(P_OUT2)[1], &f[3], MAC_OUT2, MAC_NH2);
            let back = o.port(P_IN);
            assert_eq!(back.len(), 1, "only the configured host's request is answered");
            let a = ArpPacket::new_checked(&back[0][14..]).unwrap();
            assert_eq!((a.operation(), a.target_ip()), (2, HOST_V4));
            assert_eq!(o.c.neigh_probes, 0);
            assert_eq!(o.c.originated, 2, "the time exceeded error (dropped) and the ARP reply");
            assert!(o.neigh4.keys().all(|k| k.1 != [192, 0, 2, 77]), "nothing learned");
        });
        s.setup.tun.gc_thresh3 = 0;
        s.setup.tun.ipv6_gc_thresh3 = 0;
        s
    }

    /// One packet may wait per neighbour (`unres_qlen = 1`): of three, the two oldest go.
    pub fn neigh_queuefull() -> Scenario {
        let frames = (0..3).map(|i| udp4(SRC_V4, UNRESOLVED_V4, 1, 9).seq(i).build()).collect();
        let mut s = sc(frames, &[(DropReason::NeighQueuefull, 2), (DropReason::NeighDead, 1)], |o, _| {
            assert_eq!(o.port(P_OUT2).len(), 1, "one ARP request, however many packets wait");
            assert_arp_request(&o.port(P_OUT2)[0], MAC_OUT2, OUT2_V4, UNRESOLVED_V4);
        });
        s.setup.tun.unres_qlen = 1;
        s
    }

    pub fn pkt_too_big() -> Scenario {
        let big = 14 + 1200;
        let fits = 14 + OUT2_MTU as usize;
        let frames = vec![
            udp4(SRC_V4, DST2_V4, 1, 9).len(big).build(),           // 0: DF: frag needed
            udp4(SRC_V4, DST2_V4, 2, 9).len(big).df(false).build(), // 1: no DF: fragmented (ip_fragment)
            udp6(SRC_V6, DST2_V6, 1, 9).len(big).build(),           // 2: packet too big
            udp4(SRC_V4, DST2_V4, 3, 9).len(fits).build(),          // 3: exactly the MTU: forwarded
            udp6(SRC_V6, DST2_V6, 3, 9).len(fits).build(),          // 4
            udp4(SRC_V4, DST1_V4, 4, 9).len(big).build(),           // 5: out1 has MTU 1500
        ];
        sc(frames, &[(DropReason::PktTooBig, 2)], |o, f| {
            let e = o.port(P_IN);
            assert_eq!(e.len(), 2);
            let rest = assert_icmp4_error(&e[0], 3, 4, IN_V4, &f[0]);
            assert_eq!(rest & 0xffff, OUT2_MTU as u32, "next-hop MTU");
            assert_eq!(Icmpv4Packet::new_checked(ipv4_of(&e[0]).payload()).unwrap().next_hop_mtu(), OUT2_MTU);
            let mtu = assert_icmp6_error(&e[1], 2, 0, IN_V6, &f[2]);
            assert_eq!(mtu, OUT2_MTU as u32);
            let out = o.port(P_OUT2);
            assert_eq!(out.len(), 4, "two fragments, then the two frames that fit");
            // A 1200-byte datagram: (1000 - 20) & !7 = 976 payload bytes, then the other 204.
            assert_eq!((out[0].len(), out[1].len()), (14 + 20 + 976, 14 + 20 + 204));
            assert_eq!(reassemble_v4(&out[..2]), ip_datagram(&f[1])[20..], "the fragments hold the datagram");
            assert_eq!((o.c.ip_frag_oks, o.c.ip_frag_creates, o.c.originated), (1, 2, 2 + 1), "one datagram, two fragments");
            assert_forwarded(&out[2], &f[3], MAC_OUT2, MAC_NH2);
            assert_forwarded(&out[3], &f[4], MAC_OUT2, MAC_NH2);
            assert_eq!(o.port(P_OUT1).len(), 1);
        })
    }

    pub fn unhandled_l4() -> Scenario {
        let frames = vec![raw4(SRC_V4, IN_V4, 253).build(), raw6(SRC_V6, IN_V6, 253).build(), raw6(SRC_V6, IN_V6, 59).build()];
        sc(frames, &[(DropReason::UnhandledL4, 3)], |o, f| {
            let e = o.port(P_IN);
            assert_eq!(e.len(), 2, "ICMP protocol unreachable, ICMPv6 unrecognized next header; nothing for 'no next header'");
            assert_icmp4_error(&e[0], 3, 2, IN_V4, &f[0]);
            assert_eq!(assert_icmp6_error(&e[1], 4, 1, IN_V6, &f[1]), 6, "points at the next header field");
        })
    }

    pub fn l4_csum() -> Scenario {
        let frames = vec![
            bad_l4_checksum(udp4(SRC_V4, IN_V4, 1, 5001).build()),
            bad_l4_checksum(ping4(SRC_V4, IN_V4, 1, 1).build()),
            bad_l4_checksum(udp6(SRC_V6, IN_V6, 1, 5001).build()),
            zero_udp_checksum(udp6(SRC_V6, IN_V6, 1, 5001).build()), // mandatory over IPv6
            bad_l4_checksum(ping6(SRC_V6, IN_V6, 1, 1).build()),
            bad_l4_checksum(udp4(SRC_V4, IN_V4, 1, 5002).build()), // closed port: checksum first
            zero_udp_checksum(udp4(SRC_V4, IN_V4, 1, 5001).seq(42).build()), // "none" over IPv4: fine
        ];
        let mut s = sc(frames, &[(DropReason::L4Csum, 6)], |o, f| {
            assert!(o.out.iter().all(|p| p.is_empty()), "no reply, no ICMP");
            assert_eq!(o.sockets[0], vec![udp_payload(&f[6])]);
            assert_eq!(o.c.local, 1);
        });
        s.setup.sockets.push((5001, 16));
        s
    }

    pub fn no_socket() -> Scenario {
        let frames = vec![
            udp4(SRC_V4, IN_V4, 1, 5002).build(),
            udp6(SRC_V6, IN_V6, 1, 5002).build(),
            tcp4(SRC_V4, IN_V4, 1, 80).build(),
            tcp6(SRC_V6, IN_V6, 1, 80).build(),
            // Sent to another interface's address: the error comes from that address.
            udp4(SRC_V4, OUT1_V4, 1, 5002).build(),
            udp6(SRC_V6, OUT1_V6, 1, 5002).build(),
        ];
        sc(frames, &[(DropReason::NoSocket, 6)], |o, f| {
            let e = o.port(P_IN);
            assert_eq!(e.len(), 4, "port unreachable for UDP only (no TCP stack, no RST)");
            assert_icmp4_error(&e[0], 3, 3, IN_V4, &f[0]);
            assert_icmp6_error(&e[1], 1, 4, IN_V6, &f[1]);
            assert_icmp4_error(&e[2], 3, 3, OUT1_V4, &f[4]);
            assert_icmp6_error(&e[3], 1, 4, OUT1_V6, &f[5]);
        })
    }

    pub fn socket_rcvbuff() -> Scenario {
        let frames: Vec<_> = (1..=3).map(|i| udp4(SRC_V4, IN_V4, 1, 5001).seq(i).build()).collect();
        let mut s = sc(frames, &[(DropReason::SocketRcvbuff, 1)], |o, f| {
            assert_eq!(o.sockets[0], vec![udp_payload(&f[0]), udp_payload(&f[1])], "the first two fit");
            assert_eq!(o.c.local, 2);
            assert!(o.out.iter().all(|p| p.is_empty()));
        });
        s.setup.sockets.push((5001, 2));
        s
    }

    pub fn icmp_ignored() -> Scenario {
        let not_ours = v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x99]);
        let dad = neighbour_solicit(MAC_HOST, [0; 16], IN_V6); // DAD probe with a source link-layer option
        let mut hop64 = neighbour_solicit(MAC_HOST, HOST_V6, IN_V6);
        hop64[14 + 7] = 64; // NDP needs hop limit 255 (off-link senders cannot forge it)
        let frames = vec![
            icmp4(SRC_V4, IN_V4, 0, 0, [0, 1, 0, 1], &[0; 16]),                // echo reply
            icmp4(SRC_V4, IN_V4, 3, 1, [0; 4], &[0; 28]),                      // destination unreachable
            icmp6(MAC_HOST, MAC_IN, SRC_V6, IN_V6, 64, 129, 0, &[0, 1, 0, 1]), // echo reply
            // (Unicast to us: the target's solicited-node group is not one sluice joined.)
            icmp6(MAC_HOST, MAC_IN, HOST_V6, IN_V6, 255, 135, 0, &[[0u8; 4].as_slice(), &not_ours, &[1, 1], &MAC_HOST].concat()),
            dad,
            icmp6(MAC_HOST, [0x33, 0x33, 0, 0, 0, 2], HOST_V6, v6([0xff02, 0, 0, 0, 0, 0, 0, 2]), 255, 133, 0, &[0; 4]), // RS
            hop64,
        ];
        sc(frames, &[(DropReason::IcmpIgnored, 7)], |o, _| no_output(o))
    }

    pub fn arp_ignored() -> Scenario {
        let mut bad_htype = arp_request(MAC_HOST, HOST_V4, IN_V4);
        bad_htype[14..16].copy_from_slice(&7u16.to_be_bytes()); // 6 (IEEE 802) is Ethernet too
        let mut bad_op = arp_request(MAC_HOST, HOST_V4, IN_V4);
        bad_op[20..22].copy_from_slice(&3u16.to_be_bytes());
        // From a host the router does not know: an ARP not for us from a known neighbour
        // updates it (arp_process) and is consumed, not ignored.
        let (stranger_mac, stranger) = ([2, 0, 0, 0, 0, 0x55], [192, 0, 2, 55]);
        let frames = vec![
            arp_request(stranger_mac, stranger, [192, 0, 2, 99]), // not our address
            bad_htype,
            arp(2, MAC_IN, stranger_mac, stranger, MAC_IN, [192, 0, 2, 99]), // reply not for us
            bad_op,
            arp_request(MAC_HOST, HOST_V4, IN_V4)[..40].to_vec(), // 26 bytes of ARP
        ];
        sc(frames, &[(DropReason::ArpIgnored, 4), (DropReason::PktTooSmall, 1)], |o, _| {
            no_output(o);
            assert_eq!(o.neigh4.len(), 3, "nothing learned");
        })
    }

    pub fn xdp_drop() -> Scenario {
        let frames = vec![
            udp4(SRC_V4, DST1_V4, 1, 666).seq(1).build(),
            udp4(SRC_V4, DST1_V4, 1, 9).seq(2).build(),
            udp4(SRC_V4, DST1_V4, 1, 666).seq(3).build(),
            ping4(SRC_V4, IN_V4, 1, 1).build(),
        ];
        let mut s = sc(frames, &[(DropReason::XdpDrop, 2)], |o, f| {
            assert_eq!(o.port(P_OUT1).len(), 1, "PASS continues to the stack");
            assert_forwarded(&o.port(P_OUT1)[0], &f[1], MAC_OUT1, MAC_NH1);
            assert_eq!(o.port(P_IN).len(), 1, "echo reply");
            assert_eq!(o.c.xdp_actions, [0, 2, 2, 0, 0, 0]);
        });
        s.setup.xdp.push((0, XdpMode::Native, || {
            Box::new(FnXdp(|p| RunOutcome { action: if udp4_dport(p) == 666 { XDP_DROP } else { XDP_PASS }, redirect: None }))
        }));
        s
    }

    pub fn xdp_aborted() -> Scenario {
        let frames = vec![udp4(SRC_V4, DST1_V4, 1, 1).build(), udp4(SRC_V4, DST1_V4, 1, 2).build(), udp4(SRC_V4, DST1_V4, 1, 9).build()];
        let mut s = sc(frames, &[(DropReason::XdpAborted, 2)], |o, f| {
            assert_eq!(o.port(P_OUT1).len(), 1);
            assert_forwarded(&o.port(P_OUT1)[0], &f[2], MAC_OUT1, MAC_NH1);
            // ABORTED, and an unknown action (counted apart, treated as ABORTED).
            assert_eq!(o.c.xdp_actions, [1, 0, 1, 0, 0, 1]);
        });
        s.setup.xdp.push((0, XdpMode::Generic, || {
            Box::new(FnXdp(|p| {
                let action = match udp4_dport(p) {
                    1 => XDP_ABORTED,
                    2 => 99,
                    _ => XDP_PASS,
                };
                RunOutcome { action, redirect: None }
            }))
        }));
        s
    }

    pub fn xdp_redirect_failed() -> Scenario {
        let frames = vec![
            udp4(SRC_V4, DST1_V4, 1, 10).build(),        // to ifindex 99: no such port
            udp4(SRC_V4, DST1_V4, 1, 11).build(),        // REDIRECT without a target (failed helper)
            udp4(SRC_V4, DST1_V4, 1, 12).build(),        // to CPU 3: one worker only
            udp4(SRC_V4, DST1_V4, 1, 13).seq(1).build(), // to out1 (ifindex 2), which takes
            udp4(SRC_V4, DST1_V4, 1, 13).seq(2).build(), // one frame per burst
            udp4(SRC_V4, DST1_V4, 1, 14).build(),        // XDP_TX: back out of in0
        ];
        let mut s = sc(frames, &[(DropReason::XdpRedirectFailed, 4)], |o, f| {
            assert_eq!(o.port(P_OUT1), &f[3..4], "redirected as is (no forwarding rewrite)");
            assert_eq!(o.port(P_IN), &f[5..6], "XDP_TX as is");
            assert_eq!(o.c.tx, 2);
        });
        s.setup.out[0] = OutKind::AcceptAtMost(1);
        s.setup.xdp.push((0, XdpMode::Native, || {
            Box::new(FnXdp(|p| {
                let (action, redirect) = match udp4_dport(p) {
                    10 => (XDP_REDIRECT, Some(RedirectTarget::Ifindex(99))),
                    11 => (XDP_REDIRECT, None),
                    12 => (XDP_REDIRECT, Some(RedirectTarget::Cpu(3))),
                    13 => (XDP_REDIRECT, Some(RedirectTarget::Ifindex(2))),
                    14 => (XDP_TX, None),
                    _ => (XDP_PASS, None),
                };
                RunOutcome { action, redirect }
            }))
        }));
        s
    }

    pub fn tx_error() -> Scenario {
        let frames: Vec<_> = (0..3).map(|i| udp4(SRC_V4, DST1_V4, 1, 9).seq(i).build()).collect();
        let mut s = sc(frames, &[(DropReason::TxError, 2)], |o, f| {
            assert_eq!(o.port(P_OUT1).len(), 1, "the port took one of the burst");
            assert_forwarded(&o.port(P_OUT1)[0], &f[0], MAC_OUT1, MAC_NH1);
            assert_eq!(o.c.tx, 1);
        });
        s.setup.out[0] = OutKind::AcceptAtMost(1);
        s
    }
}

fn udp_payload(f: &[u8]) -> Vec<u8> {
    let ip = ip_datagram(f);
    let l4 = if ip[0] >> 4 == 4 { (ip[0] & 0xf) as usize * 4 } else { 40 + skip_extension_headers(ip[6], &ip[40..]).unwrap().offset };
    UdpPacket::new_checked(&ip[l4..]).unwrap().payload().to_vec()
}

macro_rules! scenario_tests {
    ($($name:ident => $reason:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let o = exercise(scenarios::$name());
                assert!(o.dropped(DropReason::$reason) > 0);
            }
        )*
        const ALL_SCENARIOS: &[(DropReason, fn() -> Scenario)] = &[$((DropReason::$reason, scenarios::$name)),*];
    };
}

scenario_tests! {
    nobuf => NoBuffer,
    nobuf_v6 => NoBuffer,
    nobuf_mid_fragmentation => NoBuffer,
    nobuf_for_a_linearized_result => NoBuffer,
    rx_length_error => RxLengthError,
    pkt_too_small => PktTooSmall,
    unhandled_proto => UnhandledProto,
    vlan_filtered => VlanFiltered,
    otherhost => OtherHost,
    ip_inhdr => IpInhdr,
    ip_csum => IpCsum,
    ipv6_inhdr => Ipv6Inhdr,
    ip_invalid_source => IpInvalidSource,
    ip_invalid_dest => IpInvalidDest,
    ip_localnet => IpLocalnet,
    ip_local_source => IpLocalSource,
    unicast_in_l2_multicast => UnicastInL2Multicast,
    ip_inaddrerrors => IpInaddrerrors,
    ip_noroute => IpNoroute,
    forwarding_disabled => ForwardingDisabled,
    ip_ttl_expired => TtlExpired,
    ip_frag_local => IpFragLocal,
    neigh_failed => NeighFailed,
    neigh_dead => NeighDead,
    neigh_queuefull => NeighQueuefull,
    neigh_createfail => NeighCreatefail,
    pkt_too_big => PktTooBig,
    unhandled_l4 => UnhandledL4,
    l4_csum => L4Csum,
    no_socket => NoSocket,
    socket_rcvbuff => SocketRcvbuff,
    icmp_ignored => IcmpIgnored,
    arp_ignored => ArpIgnored,
    xdp_drop => XdpDrop,
    xdp_aborted => XdpAborted,
    xdp_redirect_failed => XdpRedirectFailed,
    tx_error => TxError,
}

#[test]
fn every_drop_reason_is_covered() {
    let unreachable: BTreeSet<&str> = UNREACHABLE.iter().map(|(r, _)| r.name()).collect();
    let elsewhere: BTreeSet<&str> = COVERED_ELSEWHERE.iter().map(|(r, _)| r.name()).collect();
    assert!(unreachable.is_disjoint(&elsewhere));
    let mut produced = BTreeSet::new();
    for (reason, scenario) in ALL_SCENARIOS {
        let o = exercise(scenario());
        assert!(o.dropped(*reason) > 0, "scenario for {} does not produce it", reason.name());
        produced.extend(o.drops().into_keys());
    }
    for r in produced.iter() {
        assert!(!unreachable.contains(r), "{r} is listed as unreachable but a scenario produced it: move it");
        assert!(!elsewhere.contains(r), "{r} is listed as covered elsewhere but a scenario produced it");
    }
    let all: BTreeSet<&str> = DropReason::ALL.iter().map(|r| r.name()).collect();
    let covered: BTreeSet<&str> = produced.union(&unreachable).chain(elsewhere.iter()).copied().collect();
    let missing: Vec<_> = all.difference(&covered).collect();
    assert!(missing.is_empty(), "drop reasons with no scenario: {missing:?}");
    assert_eq!(covered, all);
}

// ---------------------------------------------------------------------------------------
// Local services and forwarding (no drops)
// ---------------------------------------------------------------------------------------

fn assert_no_drops(o: &Outcome) {
    assert!(o.drops().is_empty(), "unexpected drops: {:?}", o.drops());
}

#[test]
fn arp_request_for_our_address_is_answered_and_learned() {
    let mac_x = [2, 0, 0, 0, 0, 0x77];
    let ip_x = [192, 0, 2, 7];
    let frames = vec![
        arp_request(mac_x, ip_x, IN_V4),
        udp4(SRC_V4, ip_x, 1, 9).build(), // to the host just learned (in0's connected subnet)
        // A reply to us that nobody asked for: consumed, no entry (arp_accept = 0).
        arp(2, MAC_IN, [2, 0, 0, 0, 0, 0x78], [192, 0, 2, 8], MAC_IN, IN_V4),
    ];
    let o = run_both(&frames, &Setup::default());
    assert_no_drops(&o);
    let out = o.port(P_IN);
    assert_eq!(out.len(), 2);
    let eth = EthernetFrame::new_checked(&out[0][..]).unwrap();
    assert_eq!((eth.dst(), eth.src(), eth.ethertype()), (mac_x, MAC_IN, 0x0806));
    let a = ArpPacket::new_checked(eth.payload()).unwrap();
    assert_eq!(a.operation(), 2);
    assert_eq!((a.sender_hw(), a.sender_ip()), (MAC_IN, IN_V4));
    assert_eq!((a.target_hw(), a.target_ip()), (mac_x, ip_x));
    assert_eq!(out[0].len(), frames[0].len());
    assert_forwarded(&out[1], &frames[1], MAC_IN, mac_x);
    assert_eq!(o.neigh4.get(&(0, ip_x)), Some(&mac_x));
    assert_eq!(o.neigh4.get(&(0, [192, 0, 2, 8])), None);
    assert_eq!((o.c.local, o.c.originated, o.c.tx), (2, 1, 2));
}

#[test]
fn neighbour_solicitation_is_answered_with_an_advertisement() {
    let mac_x = [2, 0, 0, 0, 0, 0x77];
    let ip_x = v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 7]);
    let frames = vec![neighbour_solicit(mac_x, ip_x, IN_V6), udp6(SRC_V6, ip_x, 1, 9).build()];
    // The solicitation teaches the neighbour the second flow is sent to: on two workers
    // the second packet may be routed first (as with RPS in the kernel).
    let o = run_both(&frames, &Setup::default().across_flows_in_order());
    assert_no_drops(&o);
    let out = o.port(P_IN);
    assert_eq!(out.len(), 2);
    let eth = EthernetFrame::new_checked(&out[0][..]).unwrap();
    assert_eq!((eth.dst(), eth.src()), (mac_x, MAC_IN));
    let ip = ipv6_of(&out[0]);
    assert_eq!((ip.src_addr(), ip.dst_addr(), ip.hop_limit(), ip.next_header()), (IN_V6, ip_x, 255, 58));
    assert_eq!(ip.payload_len(), 32);
    let na = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(na.verify_checksum(&IN_V6, &ip_x));
    assert_eq!((na.msg_type(), na.code()), (136, 0));
    assert_eq!(na.rest_of_header(), 0xe000_0000, "router (forwarding on) + solicited + override");
    assert_eq!(&na.data()[..16], &IN_V6, "target");
    assert_eq!(&na.data()[16..], &[2, 1, MAC_IN[0], MAC_IN[1], MAC_IN[2], MAC_IN[3], MAC_IN[4], MAC_IN[5]], "target link-layer address");
    assert_forwarded(&out[1], &frames[1], MAC_IN, mac_x);
    assert_eq!(o.neigh6.get(&(0, ip_x)), Some(&mac_x));
}

/// ICMP errors are rate-limited per destination (burst 6, then one a second: ICMPv6's
/// limit, 100 ms by default, is set to a second too) and host-wide; the packets themselves
/// are dropped and counted either way. The test runs well within a second, so no token
/// comes back.
#[test]
fn icmp_errors_are_rate_limited() {
    let mut frames: Vec<Vec<u8>> = (0..20).map(|i| udp4(SRC_V4, DST1_V4, 1, 9).seq(i).ttl(1).build()).collect();
    frames.extend((0..3).map(|i| udp4(HOST_V4, DST1_V4, 1, 9).seq(i).ttl(1).build()));
    frames.extend((0..10).map(|i| udp6(SRC_V6, DST1_V6, 1, 9).seq(i).ttl(1).build()));
    // The host-wide bucket is shared by all flows: which ones get the last tokens depends on
    // the order across flows.
    let mut setup = Setup::default().across_flows_in_order();
    setup.tun.icmpv6_ratelimit = 1000;
    let o = run_both(&frames, &setup);
    let e = o.port(P_IN);
    assert_eq!(e.len(), 6 + 3 + 6, "six to each busy source, all three to the quiet one");
    assert_eq!(o.c.icmp_ratelimited, 14 + 4);
    assert_eq!(o.c.drops[DropReason::TtlExpired as usize], 33);
    assert_eq!(o.c.originated, 15);

    // Host-wide: 40 sources, one error each, against a burst of 10.
    let frames: Vec<Vec<u8>> = (0..40u8).map(|i| udp4([198, 18, 7, i], DST1_V4, 1, 9).ttl(1).build()).collect();
    let mut setup = Setup::default().across_flows_in_order();
    setup.tun.icmp_msgs_burst = 10;
    // The first fill is a second's worth capped at the burst (icmp_global_allow): 10. The
    // next needs an empty bucket and 100 ms for one more credit: not within the test.
    setup.tun.icmp_msgs_per_sec = 10;
    let o = run_both(&frames, &setup);
    assert_eq!(o.port(P_IN).len(), 10);
    assert_eq!(o.c.icmp_ratelimited, 30);

    // Off: every packet gets its error.
    let frames: Vec<Vec<u8>> = (0..20).map(|i| udp4(SRC_V4, DST1_V4, 1, 9).seq(i).ttl(1).build()).collect();
    let mut setup = Setup::default();
    setup.tun.icmp_ratelimit = 0;
    let o = run_both(&frames, &setup);
    assert_eq!(o.port(P_IN).len(), 20);
    assert_eq!(o.c.icmp_ratelimited, 0);
}

/// Duplicate address detection (RFC 4862 §5.4.3): a probe for our address, from the
/// unspecified address to the solicited-node group and without a source link-layer option,
/// is defended with an unsolicited advertisement to all-nodes.
#[test]
fn dad_probe_for_our_address_is_defended() {
    let mut probe = neighbour_solicit(MAC_HOST, [0; 16], IN_V6);
    // Drop the source link-layer option (8 bytes) and fix the lengths and checksum.
    probe.truncate(probe.len() - 8);
    let plen = (probe.len() - 14 - 40) as u16;
    probe[18..20].copy_from_slice(&plen.to_be_bytes());
    let (src, dst) = (addr16_of(&probe[22..38]), addr16_of(&probe[38..54]));
    Icmpv6Packet::new_unchecked(&mut probe[54..]).fill_checksum(&src, &dst);
    let o = run_both(std::slice::from_ref(&probe), &Setup::default());
    assert_no_drops(&o);
    let out = o.port(P_IN);
    assert_eq!(out.len(), 1);
    let eth = EthernetFrame::new_checked(&out[0][..]).unwrap();
    assert_eq!((eth.dst(), eth.src()), ([0x33, 0x33, 0, 0, 0, 1], MAC_IN));
    let all_nodes = v6([0xff02, 0, 0, 0, 0, 0, 0, 1]);
    let ip = ipv6_of(&out[0]);
    assert_eq!((ip.src_addr(), ip.dst_addr(), ip.hop_limit(), ip.payload_len()), (IN_V6, all_nodes, 255, 32));
    let na = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(na.verify_checksum(&IN_V6, &all_nodes));
    assert_eq!((na.msg_type(), na.code()), (136, 0));
    assert_eq!(na.rest_of_header(), 0xa000_0000, "router + override, not solicited");
    assert_eq!(&na.data()[..16], &IN_V6, "target");
    assert_eq!(&na.data()[16..], &[2, 1, MAC_IN[0], MAC_IN[1], MAC_IN[2], MAC_IN[3], MAC_IN[4], MAC_IN[5]]);
    assert!(!o.neigh6.contains_key(&(0, [0; 16])), "nothing learned from a DAD probe");
}

fn addr16_of(b: &[u8]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    a
}

#[test]
fn icmp_echo_v4_is_answered() {
    let frames = vec![
        ping4(SRC_V4, IN_V4, 0x4242, 7).len(120).build(),
        ping4(SRC_V4, OUT1_V4, 0x4242, 8).build(), // another interface's address
        ping4(SRC_V4, IN_V4, 0x4242, 9).vlan(IN_VLAN).build(),
        with_ipv4_options(ping4(SRC_V4, IN_V4, 0x4242, 10).build(), &[1, 1, 1, 0]), // NOPs + EOL
    ];
    let o = run_both(&frames, &Setup::default());
    assert_no_drops(&o);
    let out = o.port(P_IN);
    assert_eq!(out.len(), 4);
    for (i, (reply, req)) in out.iter().zip(&frames).enumerate() {
        let eth = EthernetFrame::new_checked(&reply[..]).unwrap();
        assert_eq!((eth.dst(), eth.src()), (MAC_HOST, MAC_IN));
        let ip = ipv4_of(reply);
        let rq = ip_datagram(req);
        assert_eq!(ip.src_addr(), [rq[16], rq[17], rq[18], rq[19]], "from the address pinged ({i})");
        assert_eq!(ip.dst_addr(), SRC_V4);
        assert_eq!(ip.ttl(), 64);
        let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum(), "reply {i} checksum");
        assert_eq!((icmp.msg_type(), icmp.code(), icmp.echo_ident(), icmp.echo_seq()), (0, 0, 0x4242, 7 + i as u16));
        let ihl = (rq[0] & 0xf) as usize * 4;
        let rq_icmp = Icmpv4Packet::new_checked(&rq[ihl..]).unwrap();
        assert_eq!(icmp.data(), rq_icmp.data(), "data echoed");
    }
    assert_eq!((o.c.local, o.c.originated, o.c.tx), (4, 4, 4));
}

#[test]
fn icmp_echo_v6_is_answered() {
    let all_nodes = v6([0xff02, 0, 0, 0, 0, 0, 0, 1]);
    let frames = vec![
        ping6(SRC_V6, IN_V6, 0x4242, 1).len(150).build(),
        ping6(HOST_V6, all_nodes, 0x4242, 2).dst_mac([0x33, 0x33, 0, 0, 0, 1]).build(),
        with_ipv6_ext(ping6(SRC_V6, IN_V6, 0x4242, 3).build(), 60, &[1, 4, 0, 0, 0, 0]),
    ];
    let o = run_both(&frames, &Setup::default());
    assert_no_drops(&o);
    let out = o.port(P_IN);
    assert_eq!(out.len(), 3);
    for (i, (reply, req)) in out.iter().zip(&frames).enumerate() {
        let eth = EthernetFrame::new_checked(&reply[..]).unwrap();
        assert_eq!((eth.dst(), eth.src()), (MAC_HOST, MAC_IN));
        let ip = ipv6_of(reply);
        let rq = ip_datagram(req);
        assert_eq!(ip.src_addr(), IN_V6, "from our address, also for multicast ({i})");
        assert_eq!(&ip.dst_addr()[..], &rq[8..24]);
        assert_eq!(ip.hop_limit(), 64);
        let ext = ip.ext_headers().unwrap();
        let icmp = Icmpv6Packet::new_checked(&ip.payload()[ext.offset..]).unwrap();
        assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()), "reply {i} checksum");
        assert_eq!((icmp.msg_type(), icmp.code(), icmp.echo_ident(), icmp.echo_seq()), (129, 0, 0x4242, 1 + i as u16));
    }
}

#[test]
fn udp_echo_port_7() {
    let all_nodes = v6([0xff02, 0, 0, 0, 0, 0, 0, 1]);
    let frames = vec![
        udp4(SRC_V4, IN_V4, 40000, 7).seq(1).len(100).build(),
        udp6(SRC_V6, IN_V6, 40001, 7).seq(2).len(100).build(),
        udp6(HOST_V6, all_nodes, 40002, 7).seq(3).dst_mac([0x33, 0x33, 0, 0, 0, 1]).build(),
    ];
    let o = run_both(&frames, &Setup::default());
    assert_no_drops(&o);
    let out = o.port(P_IN);
    assert_eq!(out.len(), 3);
    let r4 = ipv4_of(&out[0]);
    assert_eq!((r4.src_addr(), r4.dst_addr()), (IN_V4, SRC_V4));
    let u = UdpPacket::new_checked(r4.payload()).unwrap();
    assert!(u.verify_checksum_v4(&IN_V4, &SRC_V4) && u.checksum() != 0);
    assert_eq!((u.src_port(), u.dst_port()), (7, 40000));
    assert_eq!(u.payload(), &udp_payload(&frames[0])[..]);
    for (i, src) in [(1, SRC_V6), (2, HOST_V6)] {
        let r = ipv6_of(&out[i]);
        assert_eq!((r.src_addr(), r.dst_addr()), (IN_V6, src));
        let u = UdpPacket::new_checked(r.payload()).unwrap();
        assert!(u.verify_checksum_v6(&IN_V6, &src), "reply {i} checksum");
        assert_eq!((u.src_port(), u.dst_port()), (7, 40000 + i as u16));
        assert_eq!(u.payload(), &udp_payload(&frames[i])[..]);
    }
    assert_eq!((o.c.local, o.c.originated, o.c.tx), (3, 3, 3));
}

#[test]
fn udp_sockets_receive_in_batches() {
    let frames = vec![
        udp4(SRC_V4, IN_V4, 1, 5001).seq(1).build(),
        udp6(SRC_V6, IN_V6, 1, 5001).seq(2).len(90).build(),
        udp4(SRC_V4, IN_V4, 1, 5001).seq(3).vlan(IN_VLAN).build(),
        with_ipv4_options(udp4(SRC_V4, IN_V4, 1, 5001).seq(4).build(), &[1, 1, 1, 1]),
        with_ipv6_ext(with_ipv6_ext(udp6(SRC_V6, IN_V6, 1, 5001).seq(5).build(), 60, &[1, 4, 0, 0, 0, 0]), 0, &[1, 4, 0, 0, 0, 0]),
        udp4(SRC_V4, IN_V4, 1, 5003).seq(6).build(), // the other socket
        udp4(SRC_V4, OUT2_V4, 1, 5001).seq(7).len(300).build(),
        // First fragment of an IPv6 datagram sent as an atomic fragment (offset 0, M = 0):
        // a whole datagram.
        with_ipv6_fragment(udp6(SRC_V6, IN_V6, 1, 5001).seq(8).build(), 0, false, 9),
    ];
    let setup = Setup::default().socket(5001, 64).socket(5003, 64);
    let o = run_both(&frames, &setup);
    assert_no_drops(&o);
    let want: Vec<_> = [0, 1, 2, 3, 4, 6, 7].iter().map(|&i| udp_payload(&frames[i])).collect();
    assert_eq!(o.sockets[0], want);
    assert_eq!(o.sockets[1], vec![udp_payload(&frames[5])]);
    for (i, p) in o.sockets[0].iter().enumerate() {
        assert_eq!(&p[..4], &[1u32, 2, 3, 4, 5, 7, 8][i].to_be_bytes(), "payload starts with the sequence number");
    }
    assert!(o.out.iter().all(|p| p.is_empty()));
    assert_eq!(o.c.local, 8);
}

#[test]
fn forwarding_rewrites_macs_ttl_and_checksum_only() {
    let frames = vec![
        udp4(SRC_V4, DST1_V4, 1, 9).build(),
        udp4(SRC_V4, DST2_V4, 1, 9).len(900).tos(0x10).build(),
        tcp4(SRC_V4, DST1_V4, 1000, 80).build(),
        with_ipv4_options(udp4(SRC_V4, DST1_V4, 1, 9).build(), &[0x94, 4, 0, 0]), // router alert
        udp4(SRC_V4, DST1_V4, 1, 9).vlan(IN_VLAN).ttl(255).build(),
        udp6(SRC_V6, DST1_V6, 1, 9).build(),
        udp6(SRC_V6, DST2_V6, 1, 9).len(999).build(),
        with_ipv6_ext(udp6(SRC_V6, DST1_V6, 1, 9).build(), 0, &[5, 2, 0, 0, 1, 0]), // HbH router alert
        tcp6(SRC_V6, DST2_V6, 1000, 80).vlan(IN_VLAN).build(),
        ping4(SRC_V4, DST1_V4, 1, 1).build(),
        udp4(SRC_V4, NH1_V4, 1, 9).build(), // connected route, known neighbour
    ];
    let o = run_both(&frames, &Setup::default());
    assert_no_drops(&o);
    let (o1, o2) = (o.port(P_OUT1), o.port(P_OUT2));
    let via1 = [0, 2, 3, 4, 5, 7, 9, 10];
    let via2 = [1, 6, 8];
    assert_eq!((o1.len(), o2.len()), (via1.len(), via2.len()));
    for (k, &i) in via1.iter().enumerate() {
        assert_forwarded(&o1[k], &frames[i], MAC_OUT1, MAC_NH1);
    }
    for (k, &i) in via2.iter().enumerate() {
        assert_forwarded(&o2[k], &frames[i], MAC_OUT2, MAC_NH2);
    }
    assert!(o.port(P_IN).is_empty());
    assert_eq!((o.c.tx, o.c.local, o.c.originated), (11, 0, 0));
}

#[test]
fn list_mode_makes_lists_runs_and_route_hints() {
    // A burst of one flow, then another: one list per poll, runs by protocol, hint hits.
    let mut frames: Vec<_> = (0..20).map(|i| udp4(SRC_V4, DST1_V4, 1, 9).seq(i).build()).collect();
    frames.extend((0..20).map(|i| udp6(SRC_V6, DST2_V6, 1, 9).seq(i).build()));
    let single = run(&frames, &Setup::default().listified(false));
    let list = run(&frames, &Setup::default().listified(true));
    compare(&single, &list).unwrap();
    assert_eq!(list.c.rx_lists, 1);
    assert_eq!(list.c.rx_runs, 2);
    assert_eq!(list.c.route_hint_hits, 38);
    assert_eq!(list.c.route_lookups, 2);
    assert_eq!(single.c.route_lookups, 40);
}

#[test]
fn xdp_native_and_generic_hooks_agree() {
    // The same verdicts from either hook give the same fates and output.
    let frames: Vec<_> = (0..20u16).map(|i| udp4(SRC_V4, DST1_V4, 1, 660 + i % 8).seq(i as u32).build()).collect();
    fn verdict(p: &[u8]) -> RunOutcome {
        match udp4_dport(p) % 4 {
            0 => RunOutcome { action: XDP_DROP, redirect: None },
            1 => RunOutcome { action: XDP_TX, redirect: None },
            2 => RunOutcome { action: XDP_REDIRECT, redirect: Some(RedirectTarget::Ifindex(3)) },
            _ => RunOutcome { action: XDP_PASS, redirect: None },
        }
    }
    let mut outcomes = Vec::new();
    for mode in [XdpMode::Native, XdpMode::Generic] {
        let mut setup = Setup::default();
        setup.xdp.push((0, mode, || Box::new(FnXdp(verdict))));
        outcomes.push(run_both(&frames, &setup));
    }
    compare(&outcomes[0], &outcomes[1]).unwrap();
    let o = &outcomes[0];
    assert_eq!(o.drops(), BTreeMap::from([("xdp_drop", 5)]));
    assert_eq!((o.port(P_IN).len(), o.port(P_OUT2).len(), o.port(P_OUT1).len()), (5, 5, 5));
    assert_eq!(o.c.xdp_actions, [0, 5, 5, 5, 5, 0]);
}

/// A program that rewrites the destination MAC in place to the port's own and passes the
/// frame: in either mode the stack sees a frame for this host and forwards it. Generic mode
/// had kept the packet type it found before the program (other host: dropped), where the
/// kernel (bpf_prog_run_generic_xdp) derives it again when the Ethernet header changed.
#[test]
fn xdp_pass_after_rewriting_the_mac_in_place_is_seen_as_rewritten() {
    // Two for another host's MAC, two with an unknown EtherType: the program puts the
    // port's MAC and IPv4's EtherType in.
    let mut frames: Vec<_> = (0..4).map(|i| udp4(SRC_V4, DST1_V4, 1, 9).dst_mac(MAC_OTHER).seq(i).build()).collect();
    for f in &mut frames[2..] {
        f[..6].copy_from_slice(&MAC_IN);
        f[12..14].copy_from_slice(&[0x88, 0xb5]);
    }
    for mode in [XdpMode::Native, XdpMode::Generic] {
        let mut setup = Setup::default();
        setup.xdp.push((0, mode, || {
            Box::new(FnXdpMut(|p| {
                p[..6].copy_from_slice(&MAC_IN);
                p[12..14].copy_from_slice(&[0x08, 0x00]);
                RunOutcome { action: XDP_PASS, redirect: None }
            }))
        }));
        let o = run_both(&frames, &setup);
        assert_no_drops(&o);
        assert_eq!(o.port(P_OUT1).len(), 4, "{mode:?}: forwarded, not dropped as otherhost / unknown protocol");
    }
    // Without the rewrite these frames are for another host, or of no protocol the stack has.
    let o = run_both(&frames, &Setup::default());
    assert_eq!(o.drops().values().sum::<u64>(), 4, "{:?}", o.drops());
    assert_eq!(o.drops().get("otherhost"), Some(&2));
}

/// A redirect checks the frame against the target port (xdp_ok_fwd_dev: MTU + Ethernet
/// header + one VLAN tag, else -EMSGSIZE, a failed redirect); XDP_TX does not. Frames of
/// OUT2_MTU + 18 and + 19 bytes redirected to out2, the same sizes sent back by XDP_TX.
#[test]
fn xdp_redirect_refuses_frames_longer_than_the_target_takes() {
    let frame = |len: usize, dport: u16| {
        let f = udp4(SRC_V4, DST1_V4, 1, dport).len(len).build();
        assert_eq!(f.len(), len);
        f
    };
    let fits = OUT2_MTU as usize + 18;
    let frames = vec![frame(fits, 1), frame(fits + 1, 1), frame(fits, 2), frame(fits + 1, 2)];
    for mode in [XdpMode::Native, XdpMode::Generic] {
        let mut setup = Setup::default();
        setup.xdp.push((0, mode, || {
            Box::new(FnXdp(|p| match udp4_dport(p) {
                1 => RunOutcome { action: XDP_REDIRECT, redirect: Some(RedirectTarget::Ifindex(P_OUT2 as u32 + 1)) },
                _ => RunOutcome { action: XDP_TX, redirect: None },
            }))
        }));
        let o = run_both(&frames, &setup);
        assert_eq!(o.drops(), BTreeMap::from([("xdp_redirect_failed", 1)]), "{mode:?}");
        assert_eq!(o.port(P_OUT2).iter().map(Vec::len).collect::<Vec<_>>(), [fits], "{mode:?}");
        assert_eq!(o.port(P_IN).iter().map(Vec::len).collect::<Vec<_>>(), [fits, fits + 1], "{mode:?}: XDP_TX has no MTU check");
    }
}

#[test]
fn xdp_builtin_tx_swaps_macs_and_drop_drops_everything() {
    let frames: Vec<_> = (0..5).map(|i| udp4(SRC_V4, DST1_V4, 1, 9).seq(i).build()).collect();
    let mut setup = Setup::default();
    setup.xdp.push((0, XdpMode::Native, || Box::new(builtin::TxMacswap)));
    let o = run_both(&frames, &setup);
    assert_no_drops(&o);
    assert_eq!(o.port(P_IN).len(), 5);
    for (out, inp) in o.port(P_IN).iter().zip(&frames) {
        assert_eq!((&out[0..6], &out[6..12]), (&inp[6..12], &inp[0..6]), "MACs swapped");
        assert_eq!(&out[12..], &inp[12..], "rest untouched");
    }
    assert_eq!((o.c.tx, o.c.local, o.c.originated), (5, 0, 0));

    let mut setup = Setup::default();
    setup.xdp.push((0, XdpMode::Generic, || Box::new(builtin::Drop { read: true })));
    let mut all = frames.clone();
    all.push(arp_request(MAC_HOST, HOST_V4, IN_V4));
    all.push(vec![1, 2, 3]); // a runt: XDP sees it first
    let o = run_both(&all, &setup);
    assert_eq!(o.drops(), BTreeMap::from([("xdp_drop", 7)]));
}

#[test]
fn xdp_redirect_to_cpu0_and_xsk() {
    // CPUMAP to this worker continues into the stack; XSK delivers locally.
    let frames = vec![udp4(SRC_V4, DST1_V4, 1, 20).build(), udp4(SRC_V4, DST1_V4, 1, 21).build()];
    let mut setup = Setup::default();
    setup.xdp.push((0, XdpMode::Native, || {
        Box::new(FnXdp(|p| match udp4_dport(p) {
            20 => RunOutcome { action: XDP_REDIRECT, redirect: Some(RedirectTarget::Cpu(0)) },
            _ => RunOutcome { action: XDP_REDIRECT, redirect: Some(RedirectTarget::Xsk(0)) },
        }))
    }));
    let o = run_both(&frames, &setup);
    assert_no_drops(&o);
    assert_eq!(o.port(P_OUT1).len(), 1);
    assert_forwarded(&o.port(P_OUT1)[0], &frames[0], MAC_OUT1, MAC_NH1);
    assert_eq!((o.c.tx, o.c.local), (1, 1));
}

// ---------------------------------------------------------------------------------------
// Known bugs: each test states the correct behaviour and is ignored until the fix lands.
// ---------------------------------------------------------------------------------------

/// `io` pipeline, a receiving port with no peer: the drop reason must be `no_tx_port`.
fn io_without_peer(listified: bool) -> sluice::stats::Counters {
    let pool = Pool::new(64).unwrap();
    let tun = Tunables { listified: listified as u8, ..Tunables::default() };
    let mut dp = Datapath::new(tun, Pipeline::Io, &pool);
    let frames: Vec<_> = (0..3).map(|i| udp4(SRC_V4, DST1_V4, 1, 9).seq(i).build()).collect();
    dp.add_port(Box::new(PcapIn::from_frames("in0", frames, 1)), Iface::new("in0", MAC_IN));
    dp.add_port(Box::new(Sink::new("out", SinkKind::Capture, CheckSpec::default())), Iface::new("out", MAC_OUT1));
    dp.run(RunLimit::default(), Duration::from_secs(1), |_, _| {});
    finish(&mut dp, 3);
    dp.counters()
}

#[test]
fn no_tx_port() {
    for listified in [false, true] {
        let c = io_without_peer(listified);
        assert_eq!(c.dropped(DropReason::NoTxPort), 3, "{:?}", c.nonzero_drops());
        assert_eq!(c.total_drops(), 3);
    }
}

#[test]
fn io_without_peer_is_dropped_and_accounted() {
    // What happens today (the reason is wrong, see `no_tx_port`): every packet is dropped
    // once, the ledger balances, nothing leaks.
    for listified in [false, true] {
        let c = io_without_peer(listified);
        assert_eq!(c.total_drops(), 3);
        assert_eq!(c.tx, 0);
    }
}

/// A datagram to a bound socket behind a Destination Options header goes through the
/// options first in both modes (list delivery hands only plain datagrams to the socket
/// batch): unknown options are obeyed (ip6_tlvopt_unknown: 01 discards, 10 answers with a
/// parameter problem pointing at the option), padding alone is delivered.
#[test]
fn destination_options_are_processed_before_a_datagram_reaches_its_socket() {
    let dstopt = |opt: u8, seq: u32| with_ipv6_ext(udp6(SRC_V6, IN_V6, 1, 5001).seq(seq).build(), 60, &[opt, 4, 0, 0, 0, 0]);
    let frames = vec![dstopt(0x41, 1), dstopt(0x81, 2), dstopt(1, 3), udp6(SRC_V6, IN_V6, 1, 5001).seq(4).build()];
    let o = run_both(&frames, &Setup::default().socket(5001, 16));
    assert_eq!(o.sockets[0].len(), 2, "the padded and the plain datagram");
    let errors = o.port(P_IN);
    assert_eq!(errors.len(), 1, "one parameter problem");
    assert_eq!(assert_icmp6_error(&errors[0], 4, 2, IN_V6, &frames[1]), 42, "pointing at the option");
    assert_eq!(o.drops().values().sum::<u64>(), 2, "{:?}", o.drops());
}

#[test]
fn ipv6_first_fragment_to_us_is_ip_frag_local() {
    let frames = vec![
        // (64 bytes after the fragment header: a fragment with more to come is a multiple of 8.)
        with_ipv6_fragment(udp6(SRC_V6, IN_V6, 1, 5001).len(14 + 40 + 64).build(), 0, true, 1),
        with_ipv6_fragment(ping6(SRC_V6, IN_V6, 1, 1).build(), 0, true, 2),
    ];
    let o = run_both(&frames, &Setup::default().socket(5001, 16));
    assert_eq!(o.drops(), BTreeMap::from([("ip_frag_local", 2)]));
    assert!(o.sockets[0].is_empty());
    assert!(o.port(P_IN).is_empty(), "no echo reply to a fragment");
}

#[test]
fn list_mode_keeps_icmp_errors_in_order_with_forwarded_packets() {
    // Hairpin: source and destination both behind in0, same route (so one run, with the
    // route hint). The middle packet's TTL expires; its ICMP error leaves through in0 too.
    let dst = [198, 18, 9, 9];
    let frames =
        vec![udp4(SRC_V4, dst, 1, 9).seq(1).build(), udp4(SRC_V4, dst, 1, 9).seq(2).ttl(1).build(), udp4(SRC_V4, dst, 1, 9).seq(3).build()];
    let single = run(&frames, &Setup::default().listified(false));
    assert_eq!(single.port(P_IN).len(), 3);
    assert_icmp4_error(&single.port(P_IN)[1], 11, 0, IN_V4, &frames[1]);
    let list = run(&frames, &Setup::default().listified(true));
    compare(&single, &list).unwrap();
}

#[test]
fn list_mode_hairpin_keeps_per_flow_order() {
    // The property that does hold in the case above: per flow, order is the same.
    let dst = [198, 18, 9, 9];
    let frames =
        vec![udp4(SRC_V4, dst, 1, 9).seq(1).build(), udp4(SRC_V4, dst, 1, 9).seq(2).ttl(1).build(), udp4(SRC_V4, dst, 1, 9).seq(3).build()];
    let single = run(&frames, &Setup::default().listified(false));
    let list = run(&frames, &Setup::default().listified(true));
    assert_eq!(fates(&single.c), fates(&list.c));
    compare_frames_per_flow(&single.out, &list.out).unwrap();
}

#[test]
fn link_local_destination_of_another_host_is_not_answered() {
    let other = v6([0xfe80, 0, 0, 0, 0, 0, 0, 0x99]);
    let frames = vec![ping6(SRC_V6, other, 1, 1).build(), udp6(SRC_V6, other, 1, 7).build()];
    let o = run_both(&frames, &Setup::default());
    for f in o.port(P_IN) {
        let ip = ipv6_of(f);
        assert_ne!(ip.src_addr(), other, "the router must not answer as fe80::99");
    }
    assert_eq!(o.c.local, 0);
}

/// RFC 4291 §2.5.6: sluice never forwards to a link-local destination: not one in in0's
/// connected fe80::/64 (the kernel would send it back out in0 to that neighbour: the
/// deliberate difference `dst6_link_local_other` of tests/kernel_router_diff.rs), nor one
/// outside it that only the default route covers; both are answered with no route. One of
/// ours is delivered by its /128 local route. The default route does carry a global
/// destination without a route of its own, so the setup is not what stops the others.
#[test]
fn link_local_destination_is_delivered_if_ours_and_never_forwarded() {
    let on_link = v6([0xfe80, 0, 0, 0, 0, 0, 0, 0x99]);
    let off_link = v6([0xfe80, 0, 0, 1, 0, 0, 0, 0x99]);
    let frames = vec![
        udp6(SRC_V6, on_link, 1, 7).build(),
        udp6(SRC_V6, off_link, 1, 7).build(),
        ping6(SRC_V6, IN_LL_V6, 2, 1).build(),
        udp6(SRC_V6, NOROUTE_V6, 3, 9).build(),
    ];
    let setup = Setup { v6_default_and_link_local: true, ..Setup::default() };
    let o = run_both(&frames, &setup);
    assert_eq!(o.drops(), BTreeMap::from([(DropReason::IpNoroute.name(), 2)]));
    assert_eq!(o.port(P_OUT1).len(), 1, "only the global destination leaves by the default route");
    assert_forwarded(&o.port(P_OUT1)[0], &frames[3], MAC_OUT1, MAC_NH1);
    let back = o.port(P_IN);
    assert_eq!(back.len(), 3, "two no-route errors and the echo reply");
    assert_icmp6_error(&back[0], 1, 0, IN_V6, &frames[0]);
    assert_icmp6_error(&back[1], 1, 0, IN_V6, &frames[1]);
    let reply = ipv6_of(&back[2]);
    assert_eq!((reply.src_addr(), reply.dst_addr()), (IN_LL_V6, SRC_V6));
    assert_eq!(Icmpv6Packet::new_checked(reply.payload()).unwrap().msg_type(), 129);
    assert_eq!((o.c.local, o.c.originated, o.c.tx), (1, 3, 4));
}

#[test]
fn arp_request_to_another_hosts_mac_is_not_answered() {
    let mut req = arp_request(MAC_HOST, HOST_V4, IN_V4);
    req[0..6].copy_from_slice(&MAC_OTHER);
    let o = run_both(&[req], &Setup::default());
    assert!(o.port(P_IN).is_empty(), "no ARP reply for a frame addressed to another station");
    assert_eq!(o.drops(), BTreeMap::from([("otherhost", 1)]));
}

#[test]
fn zero_source_is_a_martian_the_rest_of_0_8_is_not_as_ip_route_input_slow() {
    let frames = vec![udp4([0, 0, 0, 0], DST1_V4, 1, 9).build(), udp4([0, 1, 2, 3], DST1_V4, 1, 9).build()];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(o.drops(), BTreeMap::from([("ip_invalid_source", 1)]));
    assert_eq!(o.port(P_OUT1).len(), 1, "0.1.2.3 is forwarded");
    assert_forwarded(&o.port(P_OUT1)[0], &frames[1], MAC_OUT1, MAC_NH1);
}

#[test]
fn answers_to_tagged_requests_stay_on_the_vlan() {
    let tag = |f: Vec<u8>| {
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0x00, 0x00, IN_VLAN as u8]);
        t.extend_from_slice(&f[12..]);
        t
    };
    let frames = vec![tag(arp_request(MAC_HOST, HOST_V4, IN_V4)), tag(neighbour_solicit(MAC_HOST, HOST_V6, IN_V6))];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(o.port(P_IN).len(), 2);
    for f in o.port(P_IN) {
        assert_eq!(&f[12..16], &[0x81, 0x00, 0x00, IN_VLAN as u8], "reply tagged with the request's VLAN: {}", hex(f));
    }
}

// ---------------------------------------------------------------------------------------
// Kernel rules the router mirrors (issue 15), beyond the drop-reason scenarios above
// ---------------------------------------------------------------------------------------

/// ip_route_input_slow: class E (240/4) is not a martian source; only 255.255.255.255 is.
/// The packets are forwarded, in both receive modes.
#[test]
fn class_e_source_is_forwarded_as_ip_route_input_slow() {
    let frames = vec![udp4([240, 0, 0, 1], DST1_V4, 1, 9).build(), udp4([254, 255, 255, 255], DST1_V4, 2, 9).build()];
    let o = run_both(&frames, &Setup::default());
    assert_no_drops(&o);
    assert_eq!(o.port(P_OUT1).len(), 2);
    for (out, orig) in o.port(P_OUT1).iter().zip(&frames) {
        assert_forwarded(out, orig, MAC_OUT1, MAC_NH1);
    }
}

/// __netif_receive_skb_core / vlan_do_receive: an 802.1Q priority tag (VID 0) is not a
/// VLAN; the frame is handled as untagged (forwarded untagged, answered untagged), whatever
/// its priority bits, even though in0 lists no VLAN 0.
#[test]
fn vlan_priority_tag_is_untagged_as_netif_receive_skb_core() {
    let frames = vec![
        udp4(SRC_V4, DST1_V4, 1, 9).vlan(0).build(),
        udp6(SRC_V6, DST1_V6, 1, 9).vlan(0xa000).build(), // PCP 5, VID 0
        ping4(SRC_V4, IN_V4, 1, 1).vlan(0x6000).build(),
    ];
    let o = run_both(&frames, &Setup::default());
    assert_no_drops(&o);
    assert_eq!(o.port(P_OUT1).len(), 2);
    assert_forwarded(&o.port(P_OUT1)[0], &frames[0], MAC_OUT1, MAC_NH1);
    assert_forwarded(&o.port(P_OUT1)[1], &frames[1], MAC_OUT1, MAC_NH1);
    let reply = o.port(P_IN);
    assert_eq!(reply.len(), 1);
    assert_eq!(ethertype(&reply[0]), 0x0800, "the echo reply carries no tag");
    assert_eq!(Icmpv4Packet::new_checked(ipv4_of(&reply[0]).payload()).unwrap().msg_type(), 0);
}

/// icmp_send: an ICMP message is answered with an error only if its type is
/// informational (0, 8, 13–18); every other type, 19–255 included, is taken for an error.
/// A datagram too short to carry the type byte gets no error; one carrying just the type
/// byte is judged by it (the kernel reads no more).
#[test]
fn icmp_errors_only_about_informational_types_as_icmp_send() {
    let mut frames: Vec<Vec<u8>> = (0..=255u8).map(|t| icmp4(SRC_V4, NOROUTE_V4, t, 0, [0; 4], &[0; 28])).collect();
    let answered: Vec<u8> = (0..=255u8).filter(|t| matches!(t, 0 | 8 | 13..=18)).collect();
    let with_ip_len = |len: u16, typ: u8| {
        let mut f = raw4(SRC_V4, NOROUTE_V4, 1).build();
        f[16..18].copy_from_slice(&len.to_be_bytes());
        f[34] = typ;
        fix_ip_checksum(&mut f);
        f
    };
    frames.push(with_ip_len(20, 8)); // no ICMP header at all (the 8 is padding)
    frames.push(with_ip_len(21, 8)); // the type byte only: an echo request
    frames.push(with_ip_len(21, 3)); // the type byte only: an error
    let mut setup = Setup::default();
    setup.tun.icmp_ratelimit = 0; // every eligible packet gets its error
    let o = run_both(&frames, &setup);
    assert_eq!(o.drops(), BTreeMap::from([(DropReason::IpNoroute.name(), frames.len() as u64)]));
    let errors = o.port(P_IN);
    assert_eq!(errors.len(), answered.len() + 1);
    for (e, t) in errors.iter().zip(&answered) {
        assert_icmp4_error(e, 3, 0, IN_V4, &frames[*t as usize]);
    }
    assert_icmp4_error(&errors[answered.len()], 3, 0, IN_V4, &frames[257]);
}

/// A poll bigger than a transmit queue's soft limit (1024) goes out early rather than grow
/// the queue without bound (`tx::enqueue`), in both receive modes: a list run to one port
/// that would pass the limit is handed over packet by packet, so it rings the doorbell at
/// the limit and again at the end of the poll.
#[test]
fn a_poll_past_the_transmit_queue_soft_limit_goes_out_early_in_both_modes() {
    let frames: Vec<Vec<u8>> = (0..1500u16).map(|i| udp4(SRC_V4, DST1_V4, 1000, 53).ident(i).build()).collect();
    let mut setup = Setup { pool_frames: 8192, ..Setup::default() };
    setup.tun.dev_weight = 2048;
    setup.tun.netdev_budget = 4096;
    setup.tun.netdev_max_backlog = 4096; // (the second pass of scripts/test steers to a backlog)
    let o = run_both(&frames, &setup);
    assert_eq!((o.c.tx, o.port(P_OUT1).len()), (1500, 1500), "{:?}", o.drops());
    assert_eq!(o.c.doorbells, 2, "at the soft limit and at the end of the poll");
}
