//! The kernel rules the forwarding differential test (tests/kernel_router_diff.rs) found
//! sluice not following, one test each, named after the kernel function whose rule it
//! mirrors. Every run is in both receive modes (`run_both`: same output, byte for byte).

mod common;

use common::*;
use std::collections::BTreeMap;

fn drops(o: &Outcome) -> BTreeMap<&'static str, u64> {
    o.drops()
}

/// The ICMPv4 message of an IPv4 frame: (type, code, rest of header, data).
fn icmp4_of(f: &[u8]) -> (u8, u8, [u8; 4], Vec<u8>) {
    let ip = ipv4_of(f);
    let p = ip.payload();
    (p[0], p[1], [p[4], p[5], p[6], p[7]], p[8..].to_vec())
}

/// The ICMPv6 message of an IPv6 frame (no extension headers): (type, code, rest, data).
fn icmp6_of(f: &[u8]) -> (u8, u8, u32, Vec<u8>) {
    let ip = ipv6_of(f);
    assert_eq!(ip.next_header(), 58, "ICMPv6 right after the fixed header");
    let p = ip.payload();
    (p[0], p[1], u32::from_be_bytes([p[4], p[5], p[6], p[7]]), p[8..].to_vec())
}

fn opts_udp(opts: &[u8]) -> Vec<u8> {
    with_ipv4_options(udp4(SRC_V4, DST1_V4, 1000, 53).len(100).build(), opts)
}

#[test]
fn ip_options_compile_answers_malformed_options_with_a_parameter_problem() {
    let frames = vec![
        opts_udp(&[7, 40, 4, 0]),                  // length past the options: points at the option
        opts_udp(&[1, 7, 7, 2, 0, 0, 0, 0]),       // Record Route pointer < 4: points at the pointer
        opts_udp(&[0x94, 4, 0, 0, 0x44, 2, 0, 0]), // Timestamp shorter than 4: points at its length
        with_ipv4_options(ping4(SRC_V4, IN_V4, 1, 1).build(), &[7, 40, 4, 0]), // to us alike
        // A short datagram in a padded frame: the quote is the datagram, not the padding.
        pad(with_ipv4_options(udp4(SRC_V4, DST1_V4, 1000, 53).len(42).build(), &[7, 40, 4, 0])),
    ];
    assert!(ip_datagram(&frames[4]).len() < frames[4].len() - 14, "the last frame is padded");
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ip_inhdr", 5)]));
    let e = o.port(P_IN);
    assert_eq!(e.len(), 5);
    for (err, (frame, pointer)) in e.iter().zip(frames.iter().zip([20u8, 23, 25, 20, 20])) {
        let (t, c, rest, quote) = icmp4_of(err);
        assert_eq!((t, c, rest[0]), (12, 0, pointer));
        assert_eq!(quote, ip_datagram(frame), "the whole datagram is quoted (it fits in 576 bytes)");
    }
    assert!(o.port(P_OUT1).is_empty());
}

/// ip_options_compile: a Timestamp option of exactly 4 bytes (no slot; its pointer, 5, past
/// it) is well formed, and full: it is forwarded with its overflow count raised (the high
/// nibble of its fourth byte), the header checksum redone; a full one whose count is at
/// 15 already points at that byte.
#[test]
fn ip_options_compile_counts_the_overflow_of_a_four_byte_timestamp() {
    let frames = vec![opts_udp(&[0x44, 4, 5, 0x20]), opts_udp(&[0x44, 4, 5, 0xf0])];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ip_inhdr", 1)]));
    let fwd = o.port(P_OUT1);
    assert_eq!(fwd.len(), 1, "the first is forwarded");
    let ip = sluice::wire::ipv4::Ipv4Packet::new_checked(&fwd[0][14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(&fwd[0][34..38], &[0x44, 4, 5, 0x30], "overflow 2 → 3");
    let e = o.port(P_IN);
    assert_eq!(e.len(), 1);
    let (t, c, rest, _) = icmp4_of(&e[0]);
    assert_eq!((t, c, rest[0]), (12, 0, 23), "the overflow byte");
}

#[test]
fn ip_rcv_options_drops_source_routes_as_accept_source_route_0() {
    let lsrr = [1, 0x83, 7, 4, 10, 1, 0, 9];
    let ssrr = [1, 0x89, 7, 4, 10, 1, 0, 9];
    let frames = vec![opts_udp(&lsrr), opts_udp(&ssrr), with_ipv4_options(ping4(SRC_V4, IN_V4, 1, 1).build(), &lsrr)];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ip_inhdr", 3)]));
    assert!(o.out.iter().all(|p| p.is_empty()), "silently: no ICMP, not forwarded, not answered");
}

#[test]
fn ip_forward_options_records_the_egress_address_in_record_route() {
    let frames = vec![opts_udp(&[1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0]), opts_udp(&[1, 7, 7, 8, 1, 2, 3, 4])];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::new());
    let out = o.port(P_OUT1);
    let ip = ipv4_of(&out[0]);
    assert!(ip.verify_checksum());
    assert_eq!(&out[0][34..46], &[1, 7, 11, 8, 198, 51, 100, 1, 0, 0, 0, 0], "out1's address in the first slot");
    assert_eq!(&out[1][34..42], &[1, 7, 7, 8, 1, 2, 3, 4], "a full option is left alone");
}

#[test]
fn ip_options_echo_returns_record_route_in_echo_replies() {
    // NOP + Record Route with two slots: the reply records our address on receive and on
    // output, the NOP does not come back (only RR is echoed, padded with End).
    let req = with_ipv4_options(ping4(SRC_V4, IN_V4, 1, 1).build(), &[1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
    let o = run_both(std::slice::from_ref(&req), &Setup::default());
    let r = &o.port(P_IN)[0];
    let ip = ipv4_of(r);
    assert_eq!(ip.header_len(), 32);
    assert_eq!(&r[34..46], &[7, 11, 12, 192, 0, 2, 1, 192, 0, 2, 1, 0]);
    assert_eq!(ip.payload()[0], 0, "echo reply");
    assert_eq!(&ip.payload()[4..], &ip_datagram(&req)[36..], "the echo body");
    assert_eq!(u16::from_be_bytes([r[20], r[21]]), 0, "no DF on an ICMP socket's reply");
    assert!(Icmpv4Packet::new_checked(ip.payload()).unwrap().verify_checksum());
}

#[test]
fn icmp_send_quotes_as_much_as_fits_in_576_bytes() {
    let big = udp4(SRC_V4, DST1_V4, 1000, 53).ttl(1).len(1400).build();
    let small = udp4(SRC_V4, DST1_V4, 1000, 53).ttl(1).len(200).build();
    let o = run_both(&[big.clone(), small.clone()], &Setup::default());
    let e = o.port(P_IN);
    assert_eq!(ipv4_of(&e[0]).total_len(), 576);
    assert_eq!(icmp4_of(&e[0]).3, ip_datagram(&big)[..548]);
    assert_eq!(icmp4_of(&e[1]).3, ip_datagram(&small));
}

#[test]
fn ip_route_input_routes_0_8_destinations_other_than_0_0_0_0() {
    let f = udp4(SRC_V4, [0, 1, 2, 3], 1000, 53).build();
    let o = run_both(std::slice::from_ref(&f), &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ip_noroute", 1)]));
    assert_icmp4_error(&o.port(P_IN)[0], 3, 0, IN_V4, &f);
}

fn hbh(opt: &[u8]) -> Vec<u8> {
    with_ipv6_ext(udp6(SRC_V6, DST1_V6, 1000, 53).len(120).build(), 0, opt)
}

#[test]
fn ip6_parse_tlv_acts_on_unknown_hop_by_hop_options_by_their_type() {
    let skip = hbh(&[0x3e, 4, 0, 0, 0, 0]);
    let discard = hbh(&[0x7e, 4, 0, 0, 0, 0]);
    let param = hbh(&[0xbe, 4, 0, 0, 0, 0]);
    let param_unless_mcast = hbh(&[0xfe, 4, 0, 0, 0, 0]);
    let router_alert = hbh(&[5, 2, 0, 0, 1, 0]);
    let frames = vec![skip.clone(), discard, param.clone(), param_unless_mcast.clone(), router_alert.clone()];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ipv6_inhdr", 3)]));
    let out = o.port(P_OUT1);
    assert_eq!(out.len(), 2, "the skipped option and router alert are forwarded");
    assert_forwarded(&out[0], &skip, MAC_OUT1, MAC_NH1);
    assert_forwarded(&out[1], &router_alert, MAC_OUT1, MAC_NH1);
    let e = o.port(P_IN);
    assert_eq!(e.len(), 2);
    assert_eq!(assert_icmp6_error(&e[0], 4, 2, IN_V6, &param), 42, "points at the option");
    assert_eq!(assert_icmp6_error(&e[1], 4, 2, IN_V6, &param_unless_mcast), 42);
}

#[test]
fn ip6_forward_leaves_the_other_extension_headers_untouched() {
    let d = |f| with_ipv6_ext(f, 60, &[1, 4, 0, 0, 0, 0]);
    let late_hbh = d(with_ipv6_ext(udp6(SRC_V6, DST1_V6, 1, 53).build(), 0, &[1, 4, 0, 0, 0, 0]));
    let nine = (0..9).fold(udp6(SRC_V6, DST1_V6, 1, 53).build(), |f, _| d(f));
    let mut truncated = d(udp6(SRC_V6, DST1_V6, 1, 53).build());
    truncated[55] = 200;
    let rh0 = with_ipv6_ext(
        udp6(SRC_V6, DST1_V6, 1, 53).build(),
        43,
        &[0, 1, 0, 0, 0, 0, 0x20, 1, 0xd, 0xb8, 0, 0xa2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5],
    );
    let frames = vec![late_hbh, nine, truncated, rh0];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::new());
    for (out, f) in o.port(P_OUT1).iter().zip(&frames) {
        assert_forwarded(out, f, MAC_OUT1, MAC_NH1);
    }
    assert_eq!(o.port(P_OUT1).len(), 4);
}

#[test]
fn ip6_mc_input_answers_joined_groups_only() {
    let group = |last: u16| v6([0xff02, 0, 0, 0, 0, 0, 0, last]);
    let mac = |last: u8| [0x33, 0x33, 0, 0, 0, last];
    let solicited = v6([0xff02, 0, 0, 0, 0, 1, 0xff00, 1]);
    // One echo identifier per request: the requests go to different groups, so with RPS
    // they are different flows on different workers, and replies sharing an identifier would
    // share an output flow whose order across workers is not defined (as in the kernel).
    let frames = vec![
        ping6(SRC_V6, group(1), 1, 1).dst_mac(mac(1)).build(),
        ping6(SRC_V6, group(2), 2, 2).dst_mac(mac(2)).build(),
        ping6(SRC_V6, solicited, 3, 3).dst_mac([0x33, 0x33, 0xff, 0, 0, 1]).build(),
        ping6(SRC_V6, group(0x77), 4, 4).dst_mac(mac(0x77)).build(),
        ping6(SRC_V6, v6([0xff02, 0, 0, 0, 0, 1, 0xff00, 0x99]), 5, 5).dst_mac([0x33, 0x33, 0xff, 0, 0, 0x99]).build(),
    ];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ip_invalid_dest", 2)]));
    let r = o.port(P_IN);
    assert_eq!(r.len(), 3, "all-nodes, all-routers and our solicited-node group answer");
    for (i, f) in r.iter().enumerate() {
        let ip = ipv6_of(f);
        assert_eq!(ip.src_addr(), IN_V6, "from the interface's address");
        assert_eq!(icmp6_of(f).0, 129);
        assert_eq!(u16::from_be_bytes([f[60], f[61]]), i as u16 + 1, "sequence");
    }
}

#[test]
fn ip6_protocol_deliver_rcu_answers_an_unknown_next_header() {
    let direct = raw6(SRC_V6, IN_V6, 253).build();
    let after_opts = with_ipv6_ext(raw6(SRC_V6, IN_V6, 253).build(), 60, &[1, 4, 0, 0, 0, 0]);
    let late_hbh = with_ipv6_ext(with_ipv6_ext(ping6(SRC_V6, IN_V6, 1, 1).build(), 0, &[1, 4, 0, 0, 0, 0]), 60, &[1, 4, 0, 0, 0, 0]);
    let frames = vec![direct.clone(), after_opts.clone(), late_hbh.clone()];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("unhandled_l4", 3)]), "each an unknown protocol (IP_NOPROTO)");
    let e = o.port(P_IN);
    assert_eq!(assert_icmp6_error(&e[0], 4, 1, IN_V6, &direct), 6, "the fixed header's next header");
    assert_eq!(assert_icmp6_error(&e[1], 4, 1, IN_V6, &after_opts), 40, "the options header's next header");
    assert_eq!(assert_icmp6_error(&e[2], 4, 1, IN_V6, &late_hbh), 40, "a hop-by-hop header past the first place");
}

/// An authentication header to us is an unknown next header, as in a kernel without the
/// ah6 handler (tests/kernel_router_diff.rs checks it against one): what it protects is
/// never delivered unverified. Forwarded, it passes untouched.
#[test]
fn an_authentication_header_to_us_is_an_unknown_next_header() {
    let direct = with_ipv6_ext(ping6(SRC_V6, IN_V6, 1, 1).build(), 51, &AH_BODY);
    let after_opts = with_ipv6_ext(direct.clone(), 60, &[1, 4, 0, 0, 0, 0]);
    let through = with_ipv6_ext(udp6(SRC_V6, DST1_V6, 1, 9).build(), 51, &AH_BODY);
    let o = run_both(&[direct.clone(), after_opts.clone(), through.clone()], &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("unhandled_l4", 2)]));
    let e = o.port(P_IN);
    assert_eq!(e.len(), 2, "no echo reply");
    assert_eq!(assert_icmp6_error(&e[0], 4, 1, IN_V6, &direct), 6, "the fixed header's next header");
    assert_eq!(assert_icmp6_error(&e[1], 4, 1, IN_V6, &after_opts), 40, "the options header's next header");
    assert_forwarded(&o.port(P_OUT1)[0], &through, MAC_OUT1, MAC_NH1);
}

#[test]
fn ipv6_rthdr_rcv_refuses_a_routing_header_with_segments_left() {
    let seg1 = with_ipv6_ext(
        ping6(SRC_V6, IN_V6, 1, 1).build(),
        43,
        &[0, 1, 0, 0, 0, 0, 0x20, 1, 0xd, 0xb8, 0, 0xa1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5],
    );
    let seg0 = with_ipv6_ext(ping6(SRC_V6, IN_V6, 1, 2).build(), 43, &[0, 0, 0, 0, 0, 0]);
    // A longer one (24 bytes: an address left over) before destination options: skipped
    // by its length, so the options are read where they are, not in its address bytes.
    let seg0_long = with_ipv6_ext(
        with_ipv6_ext(ping6(SRC_V6, IN_V6, 1, 3).build(), 60, &[1, 4, 0, 0, 0, 0]),
        43,
        &[0, 0, 0, 0, 0, 0, 0x20, 1, 0xd, 0xb8, 0, 0xa1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5],
    );
    let o = run_both(&[seg1.clone(), seg0, seg0_long], &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ipv6_inhdr", 1)]));
    let e = o.port(P_IN);
    assert_eq!(assert_icmp6_error(&e[0], 4, 0, IN_V6, &seg1), 42, "points at the routing type");
    assert_eq!(icmp6_of(&e[1]).0, 129, "no segments left: skipped, the echo is answered");
    assert_eq!((e.len(), icmp6_of(&e[2]).0), (3, 129), "a longer one too");
}

#[test]
fn icmpv6_echo_reply_is_built_without_the_requests_extension_headers() {
    let req = with_ipv6_ext(ping6(SRC_V6, IN_V6, 7, 9).build(), 60, &[1, 4, 0, 0, 0, 0]);
    let udp = with_ipv6_ext(udp6(SRC_V6, IN_V6, 1000, 7).build(), 60, &[1, 4, 0, 0, 0, 0]);
    let o = run_both(&[req.clone(), udp], &Setup::default());
    let r = o.port(P_IN);
    let ip = ipv6_of(&r[0]);
    assert_eq!(ip.payload_len() as usize, ip_datagram(&req).len() - 48, "echo body without the 8-byte header");
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
    assert_eq!(icmp.msg_type(), 129);
    let uip = ipv6_of(&r[1]);
    assert_eq!(uip.next_header(), 17);
    assert_eq!(&uip.payload()[..4], &[0, 7, 0x03, 0xe8], "ports swapped");
}

#[test]
fn ipv6_rcv_routes_unspecified_and_v4_mapped_destinations_and_forwards_v4_mapped_sources() {
    let unspec = udp6(SRC_V6, [0; 16], 1, 9).build();
    let mapped = udp6(SRC_V6, v6([0, 0, 0, 0, 0, 0xffff, 0x0a01, 5]), 1, 9).build();
    let mapped_src = udp6(v6([0, 0, 0, 0, 0, 0xffff, 0xc612, 1]), DST1_V6, 1, 9).build();
    let o = run_both(&[unspec.clone(), mapped.clone(), mapped_src.clone()], &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ip_noroute", 2)]));
    assert_icmp6_error(&o.port(P_IN)[0], 1, 0, IN_V6, &unspec);
    assert_icmp6_error(&o.port(P_IN)[1], 1, 0, IN_V6, &mapped);
    assert_forwarded(&o.port(P_OUT1)[0], &mapped_src, MAC_OUT1, MAC_NH1);
}

use sluice::wire::{Icmpv4Packet, Icmpv6Packet};

#[test]
fn icmp_timestamp_answers_with_originate_receive_and_transmit_times() {
    let req = icmp4(SRC_V4, IN_V4, 13, 0, [0, 9, 0, 4], &[0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 7, 7, 7, 7]);
    let short = icmp4(SRC_V4, IN_V4, 13, 0, [0, 9, 0, 5], &[0x11, 0x22, 0x33, 0x44]);
    let ms_of_day = || {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        (now.as_millis() % 86_400_000) as u32
    };
    let before = ms_of_day();
    let o = run_both(&[req, short], &Setup::default());
    let after = ms_of_day();
    assert_eq!(drops(&o), BTreeMap::from([("pkt_too_small", 1)]));
    let r = &o.port(P_IN)[0];
    let ip = ipv4_of(r);
    assert_eq!((ip.src_addr(), ip.dst_addr(), ip.total_len()), (IN_V4, SRC_V4, 40), "20 bytes of ICMP, whatever followed");
    let p = ip.payload();
    assert_eq!(checksum::checksum(p), 0, "checksum");
    assert_eq!(&p[..2], &[14, 0]);
    assert_eq!(&p[4..12], &[0, 9, 0, 4, 0x11, 0x22, 0x33, 0x44], "identifier, sequence, originate time");
    let (recv, xmit) = (u32::from_be_bytes([p[12], p[13], p[14], p[15]]), u32::from_be_bytes([p[16], p[17], p[18], p[19]]));
    assert_eq!(recv, xmit);
    assert!(recv < 86_400_000, "milliseconds since midnight UTC");
    // The clock read while the request was answered (a run across midnight wraps).
    let within = if before <= after { (before..=after).contains(&recv) } else { recv >= before || recv <= after };
    assert!(within, "{recv} ms is not the time of day between {before} and {after}");
}

use sluice::wire::checksum;

/// icmp6_send answers about a packet that is only its 40-byte header (next header 59, "no
/// next header", payload length 0): hop limit exceeded on forwarding is reported, quoting
/// those 40 bytes.
#[test]
fn icmp6_send_reports_a_packet_that_is_only_its_header() {
    let mut f = udp6(SRC_V6, DST1_V6, 1000, 53).ttl(1).build();
    f.truncate(14 + 40);
    f[14 + 4..14 + 6].copy_from_slice(&[0, 0]);
    f[14 + 6] = 59;
    let f = pad(f);
    let o = run_both(std::slice::from_ref(&f), &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ip_ttl_expired", 1)]), "hop limit exceeded");
    assert_icmp6_error(&o.port(P_IN)[0], 3, 0, IN_V6, &f);
}

/// icmp6_send about a packet sent to a group (RFC 4443 2.4 e): of the errors local
/// delivery can raise, only a parameter problem for an unrecognized option whose type's top
/// two bits are 10 ("answer even if multicast") is sent (Packet Too Big is the other
/// exception, raised only on forwarding), from a unicast address of ours (the receiving
/// interface's here); type 11 options (hop-by-hop or destination), unknown next headers and
/// the rest get no answer.
#[test]
fn icmp6_send_answers_a_group_only_for_an_option_that_asks_for_it() {
    let all_nodes = v6([0xff02, 0, 0, 0, 0, 0, 0, 1]);
    let to_group = |f: Vec<u8>| with_ipv6_ext(f, 0, &[0, 0, 0, 0, 0, 0]);
    let opt = |t: u8| with_ipv6_ext(ping6(SRC_V6, all_nodes, 1, 1).dst_mac([0x33, 0x33, 0, 0, 0, 1]).build(), 0, &[t, 4, 0, 0, 0, 0]);
    let answer_even_if_multicast = opt(0xbe);
    let unless_multicast = opt(0xfe);
    let unknown_proto = raw6(SRC_V6, all_nodes, 253).dst_mac([0x33, 0x33, 0, 0, 0, 1]).build();
    let plain = to_group(ping6(SRC_V6, all_nodes, 2, 2).dst_mac([0x33, 0x33, 0, 0, 0, 1]).build());
    // The same rule for destination options, read by local delivery.
    let dest_opts_unless_multicast =
        with_ipv6_ext(ping6(SRC_V6, all_nodes, 3, 3).dst_mac([0x33, 0x33, 0, 0, 0, 1]).build(), 60, &[0xfe, 4, 0, 0, 0, 0]);
    // ...which a unicast destination answers.
    let dest_opts_unicast = with_ipv6_ext(ping6(SRC_V6, IN_V6, 4, 4).build(), 60, &[0xfe, 4, 0, 0, 0, 0]);
    let frames = vec![
        answer_even_if_multicast.clone(),
        unless_multicast,
        dest_opts_unless_multicast,
        dest_opts_unicast.clone(),
        unknown_proto,
        plain,
    ];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ipv6_inhdr", 4), ("unhandled_l4", 1)]));
    let e = o.port(P_IN);
    assert_eq!(e.len(), 3, "two errors and the echo reply of the last, well-formed request");
    // (Answers to different flows: in no defined order when two workers run.)
    for f in [&answer_even_if_multicast, &dest_opts_unicast] {
        let quote = ip_datagram(f);
        let err = e.iter().find(|e| ipv6_of(e).payload().get(8..) == Some(quote)).expect("an error quoting it");
        assert_eq!(assert_icmp6_error(err, 4, 2, IN_V6, f), 42, "points at the option");
    }
    assert_eq!(e.iter().filter(|e| icmp6_of(e).0 == 129).count(), 1);
}

/// ip_options_echo for the other answers sluice makes to a packet with options: a timestamp
/// reply echoes Record Route as an echo reply does; the UDP echo service answers from a
/// socket, whose datagram carries no options (the request's are not copied).
#[test]
fn timestamp_replies_echo_record_route_and_socket_answers_carry_no_options() {
    let rr = [1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0];
    let body = [0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0, 0, 0, 0];
    let ts = with_ipv4_options(icmp4(SRC_V4, IN_V4, 13, 0, [0, 9, 0, 4], &body), &rr);
    let udp = with_ipv4_options(udp4(SRC_V4, IN_V4, 1000, 7).len(80).build(), &rr);
    let o = run_both(&[ts, udp.clone()], &Setup::default());
    assert_eq!(drops(&o), BTreeMap::new());
    let r = o.port(P_IN);
    let ip = ipv4_of(&r[0]);
    assert_eq!(ip.header_len(), 32);
    assert_eq!(&r[0][34..46], &[7, 11, 12, 192, 0, 2, 1, 192, 0, 2, 1, 0]);
    assert!(ip.verify_checksum());
    assert_eq!(&ip.payload()[..2], &[14, 0], "timestamp reply");
    assert_eq!(&ip.payload()[4..12], &[0, 9, 0, 4, 0x11, 0x22, 0x33, 0x44]);
    assert_eq!(checksum::checksum(&ip.payload()[..20]), 0);
    let uip = ipv4_of(&r[1]);
    assert_eq!((uip.header_len(), uip.protocol(), uip.dst_addr()), (20, 17, SRC_V4), "no options");
    assert!(uip.verify_checksum());
    let req = ipv4_of(&udp);
    assert_eq!(&uip.payload()[..4], &[0, 7, 0x03, 0xe8], "ports swapped");
    assert_eq!(&uip.payload()[8..], &req.payload()[8..], "the datagram's data");
    assert_eq!(uip.total_len(), req.total_len() - 12);
}

/// An ICMP error whose way back is a blackhole route is made and dropped there as no route
/// (ip_route_output's verdict), not held for a neighbour: the time-exceeded answer to a
/// TTL-1 packet from 10.66.0.5.
#[test]
fn an_error_with_no_way_back_is_dropped_as_no_route() {
    let f = udp4([10, 66, 0, 5], DST1_V4, 1000, 53).ttl(1).build();
    let o = run_both(std::slice::from_ref(&f), &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ip_ttl_expired", 1), ("ip_noroute", 1)]));
    assert_eq!((o.c.originated, o.c.tx, o.c.neigh_probes), (1, 0, 0));
}

/// The subnet-router anycast address of each IPv6 subnet (RFC 4291 2.6.1), which a
/// forwarding interface joins (addrconf_join_anycast): an echo to it is answered from the
/// port's unicast address (icmpv6_echo_reply with anycast_src_echo_reply 0), an error about
/// a datagram to it comes from the anycast address itself (icmp6_send's
/// ipv6_chk_acast_addr_src, any port's), and a host does not join it (a packet to it is
/// then one a host does not forward).
#[test]
fn addrconf_join_anycast_makes_the_subnet_router_anycast_address_ours() {
    let (any_in0, any_out1) = (v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0]), v6([0x2001, 0xdb8, 2, 0, 0, 0, 0, 0]));
    let closed = udp6(SRC_V6, any_in0, 1000, 9999).build();
    let closed_out1 = udp6(SRC_V6, any_out1, 1000, 9999).build();
    let frames = vec![ping6(SRC_V6, any_in0, 1, 1).build(), ping6(SRC_V6, any_out1, 2, 2).build(), closed.clone(), closed_out1.clone()];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("no_socket", 2)]));
    let r = o.port(P_IN);
    assert_eq!(r.len(), 4);
    for (f, seq) in r[..2].iter().zip([1u16, 2]) {
        assert_eq!((ipv6_of(f).src_addr(), ipv6_of(f).dst_addr()), (IN_V6, SRC_V6), "from in0's unicast address");
        assert_eq!((icmp6_of(f).0, u16::from_be_bytes([f[60], f[61]])), (129, seq));
    }
    assert_icmp6_error(&r[2], 1, 4, any_in0, &closed);
    assert_icmp6_error(&r[3], 1, 4, any_out1, &closed_out1);
    assert!(o.port(P_OUT1).is_empty());

    let mut host = Setup::default();
    host.tun.set("net.ipv6.conf.all.forwarding", "0").unwrap();
    let o = run_both(&frames[..2], &host);
    assert_eq!(drops(&o), BTreeMap::from([("forwarding_disabled", 2)]), "not ours: a host does not forward");
    assert!(o.port(P_IN).is_empty());
}

/// ndisc_recv_ns / ndisc_send_na: a solicitation sent to a group is answered with the
/// target's link-layer address option and, for our unicast address, the override flag; a
/// unicast one (a reachability probe) gets neither; an anycast target never overrides and
/// is answered from the port's unicast address.
#[test]
fn ndisc_send_na_sets_override_and_the_option_as_the_solicitation_asks() {
    let anycast = v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0]);
    let unicast_ns = |target: [u8; 16]| {
        let body = [[0u8, 0, 0, 0].as_slice(), &target, &[1, 1], &MAC_HOST].concat();
        icmp6(MAC_HOST, MAC_IN, HOST_V6, target, 255, 135, 0, &body)
    };
    let frames = vec![
        neighbour_solicit(MAC_HOST, HOST_V6, IN_V6),
        unicast_ns(IN_V6),
        neighbour_solicit(MAC_HOST, HOST_V6, anycast),
        unicast_ns(anycast),
    ];
    let o = run_both(&frames, &Setup::default());
    let r = o.port(P_IN);
    assert_eq!(r.len(), 4, "each solicitation answered");
    let option = [2, 1, MAC_IN[0], MAC_IN[1], MAC_IN[2], MAC_IN[3], MAC_IN[4], MAC_IN[5]];
    for (f, (target, flags, with_option)) in
        r.iter().zip([(IN_V6, 0xe0u8, true), (IN_V6, 0xc0, false), (anycast, 0xc0, true), (anycast, 0xc0, false)])
    {
        let ip = ipv6_of(f);
        assert_eq!((ip.src_addr(), ip.dst_addr(), ip.hop_limit()), (IN_V6, HOST_V6, 255));
        let (t, code, rest, data) = icmp6_of(f);
        assert_eq!((t, code, (rest >> 24) as u8), (136, 0, flags), "router, solicited, override");
        assert_eq!(&data[..16], &target);
        assert_eq!(&data[16..], if with_option { &option[..] } else { &[][..] }, "target link-layer address option");
        assert!(Icmpv6Packet::new_checked(ip.payload()).unwrap().verify_checksum(&IN_V6, &HOST_V6));
    }
}

/// icmp_send: an error goes out with precedence "internetwork control" and the offending
/// packet's TOS bits (RT_TOS: not its precedence, not its ECN field).
#[test]
fn icmp_send_keeps_the_tos_bits_under_internetwork_control() {
    let frames: Vec<_> = [0x00u8, 0xb9, 0xfe].iter().map(|&t| udp4(SRC_V4, DST1_V4, 1000, 53).ttl(1).tos(t).build()).collect();
    let o = run_both(&frames, &Setup::default());
    let r = o.port(P_IN);
    assert_eq!(r.iter().map(|f| (icmp4_of(f).0, ipv4_of(f).tos())).collect::<Vec<_>>(), [(11, 0xc0), (11, 0xd8), (11, 0xde)]);
    assert!(r.iter().all(|f| ipv4_of(f).verify_checksum()));
}

/// Replies keep or reset the class and flow label as the kernel's answering code does:
/// icmpv6_echo_reply copies the traffic class and copies the flow label only with
/// net.ipv6.flowlabel_reflect's bit 4; icmp_reply copies the whole TOS byte; a UDP socket's
/// answer (the echo service) carries its own: TOS, class and label 0.
#[test]
fn icmpv6_echo_reply_reflects_the_flow_label_only_when_asked() {
    let label = |f: &[u8]| ipv6_of(f).flow_label();
    let with_label = |f: Vec<u8>| {
        let mut f = f;
        f[15] |= 0x01; // flow label 0x12345: its top nibble shares a byte with the class
        f[16..18].copy_from_slice(&0x2345u16.to_be_bytes());
        f
    };
    let frames = vec![
        with_label(ping6(SRC_V6, IN_V6, 1, 1).tos(0xb9).build()),
        with_label(udp6(SRC_V6, IN_V6, 1000, 7).tos(0xb9).build()),
        ping4(SRC_V4, IN_V4, 1, 1).tos(0xb9).build(),
        udp4(SRC_V4, IN_V4, 1000, 7).tos(0xb9).build(),
    ];
    assert_eq!(label(&frames[0]), 0x12345);
    let o = run_both(&frames, &Setup::default());
    let r = o.port(P_IN);
    assert_eq!(r.len(), 4);
    assert_eq!((ipv6_of(&r[0]).traffic_class(), label(&r[0])), (0xb9, 0), "echo reply: class kept, no label");
    assert_eq!((ipv6_of(&r[1]).traffic_class(), label(&r[1])), (0, 0), "UDP echo: the socket's own");
    assert_eq!((ipv4_of(&r[2]).tos(), ipv4_of(&r[3]).tos()), (0xb9, 0));
    assert!(ipv4_of(&r[3]).verify_checksum());

    let mut reflect = Setup::default();
    reflect.tun.set("net.ipv6.flowlabel_reflect", "4").unwrap();
    let o = run_both(&frames[..2], &reflect);
    let r = o.port(P_IN);
    assert_eq!((label(&r[0]), label(&r[1])), (0x12345, 0), "reflected into echo replies only");
    assert!(Icmpv6Packet::new_checked(ipv6_of(&r[0]).payload()).unwrap().verify_checksum(&IN_V6, &SRC_V6));
}

/// fib_add_ifaddr's broadcast routes: each IPv4 subnet's broadcast address, ours or another
/// port's (a directed broadcast, bc_forwarding 0), is delivered locally, never forwarded or
/// resolved. Nothing answers it but sockets (icmp_echo_ignore_broadcasts; icmp_send
/// refuses RTCF_BROADCAST, so no error either); the echo service answers from the port's
/// own address, with a checksum as a socket sends (one is also filled in for a request
/// that had none). As a source it is no address of ours: forwarded.
#[test]
fn ip_route_input_slow_delivers_subnet_broadcasts_to_sockets_only() {
    let (bc_in0, bc_out1) = ([192, 0, 2, 255], [198, 51, 100, 255]);
    let echo_no_csum = {
        let mut f = udp4(SRC_V4, IN_V4, 1000, 7).seq(9).build();
        f[40..42].copy_from_slice(&[0, 0]);
        f
    };
    let from_bc = udp4(bc_in0, DST1_V4, 1000, 53).build();
    let frames = vec![
        ping4(SRC_V4, bc_in0, 1, 1).build(),
        icmp4(SRC_V4, bc_out1, 13, 0, [0, 1, 0, 1], &[0; 12]),
        udp4(SRC_V4, bc_in0, 1000, 9999).build(),
        udp4(SRC_V4, bc_out1, 1000, 53).build(),
        raw4(SRC_V4, bc_in0, 253).build(),
        with_ipv4_options(udp4(SRC_V4, bc_in0, 1000, 9999).build(), &[7, 40, 4, 0]),
        // Source ports of their own: the answers come from one address, and answers of
        // different input flows in one output flow have no order across RPS workers.
        udp4(SRC_V4, bc_in0, 1001, 7).seq(7).build(),
        udp4(SRC_V4, bc_out1, 1002, 7).seq(8).build(),
        echo_no_csum,
        from_bc.clone(),
    ];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(
        drops(&o),
        BTreeMap::from([("icmp_ignored", 2), ("no_socket", 2), ("unhandled_l4", 1), ("ip_inhdr", 1)]),
        "nothing resolved, nothing forwarded"
    );
    let r = o.port(P_IN);
    assert_eq!(r.len(), 3, "three echo answers, no ICMP");
    for (f, (seq, port)) in r.iter().zip([(7u32, 1001), (8, 1002), (9, 1000)]) {
        let ip = ipv4_of(f);
        assert_eq!((ip.protocol(), ip.src_addr(), ip.dst_addr()), (17, IN_V4, SRC_V4));
        let udp = sluice::wire::UdpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!((udp.src_port(), udp.dst_port()), (7, port));
        assert_eq!(&udp.payload()[..4], &seq.to_be_bytes());
        assert_ne!(udp.checksum(), 0);
        assert!(udp.verify_checksum_v4(&IN_V4, &SRC_V4), "{seq}");
    }
    assert_eq!(o.port(P_OUT1).len(), 1, "a broadcast source is forwarded");
    assert_forwarded(&o.port(P_OUT1)[0], &from_bc, MAC_OUT1, MAC_NH1);
}

/// arp_process: an Ethernet device takes hardware type 6 (IEEE 802) as well as 1 and
/// answers with its own (1); a request from a martian sender (loopback, or one of our own
/// addresses: ip_route_input of the request fails) is not answered, nor is another
/// hardware type.
#[test]
fn arp_process_takes_ieee802_requests_and_refuses_martian_senders() {
    let with_htype = |t: u8| {
        let mut f = arp_request(MAC_HOST, HOST_V4, IN_V4);
        f[15] = t;
        f
    };
    let frames = vec![
        with_htype(6),
        with_htype(7),
        arp_request(MAC_HOST, [127, 0, 0, 1], IN_V4),
        arp_request(MAC_HOST, OUT1_V4, IN_V4),
        arp_request(MAC_HOST, IN_V4, IN_V4),
    ];
    let o = run_both(&frames, &Setup::default());
    let r = o.port(P_IN);
    assert_eq!(r.len(), 1, "only the IEEE 802 request is answered");
    assert_eq!(&r[0][..12], &[MAC_HOST, MAC_IN].concat()[..], "back to the asker");
    assert_eq!(&r[0][12..22], &[8, 6, 0, 1, 8, 0, 6, 4, 0, 2], "an Ethernet ARP reply");
    assert_eq!(&r[0][22..32], &[MAC_IN.as_slice(), &IN_V4].concat()[..]);
    assert_eq!(drops(&o).values().sum::<u64>(), 4, "{:?}", drops(&o));
}

/// fib_validate_source with a configured local route (fib_has_custom_local_routes): every
/// source is looked up in the FIB, and one routed as local (the route's range) or broadcast
/// (a subnet's broadcast address) is dropped as a local source, packets and ARP senders
/// alike; without such a route, a subnet's broadcast address is an ordinary source.
#[test]
fn with_a_configured_local_route_local_and_broadcast_sources_are_refused() {
    let frames = vec![
        udp4([10, 88, 0, 5], DST1_V4, 1000, 53).build(),
        udp4([192, 0, 2, 255], DST1_V4, 1000, 53).build(),
        udp4(NOROUTE_V4, DST1_V4, 1000, 53).build(),
        udp4(BLACKHOLE_V4, DST1_V4, 1000, 53).build(),
        arp_request(MAC_HOST, [10, 88, 0, 5], IN_V4),
    ];
    let plain = run_both(&frames, &Setup::default());
    assert_eq!((plain.port(P_OUT1).len(), plain.port(P_IN).len()), (4, 1), "{:?}", drops(&plain));
    let setup = Setup { local_routes_v4: vec![([10, 88, 0, 0], 16)], ..Setup::default() };
    let o = run_both(&frames, &setup);
    assert_eq!(o.port(P_OUT1).len(), 2, "the sources without a route and blackholed pass");
    assert!(o.port(P_IN).is_empty(), "the ARP request from a local source is not answered");
    assert_eq!(o.dropped(sluice::stats::DropReason::IpLocalSource), 2, "{:?}", drops(&o));
    assert_eq!(drops(&o).values().sum::<u64>(), 3, "and the ARP request, {:?}", drops(&o));
}

/// udp_sendmsg refuses port 0 (EINVAL): the echo service takes a datagram from port 0 and
/// cannot answer it. Delivered, nothing sent, nothing dropped.
#[test]
fn udp_sendmsg_cannot_answer_port_zero() {
    let frames = vec![udp4(SRC_V4, IN_V4, 0, 7).build(), udp6(SRC_V6, IN_V6, 0, 7).build(), udp4(SRC_V4, IN_V4, 1, 7).build()];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::new());
    assert_eq!((o.c.local, o.c.originated), (3, 1));
    let r = o.port(P_IN);
    assert_eq!(r.len(), 1, "only the datagram from port 1 is answered");
    assert_eq!(&ipv4_of(&r[0]).payload()[..4], &[0, 7, 0, 1]);
}

/// is_ineligible: no ICMPv6 error about an ICMPv6 error, as far as a walk of the extension
/// headers by their length fields alone can tell. A chain naming ICMPv6 that ends before the
/// type byte counts as an error (no answer) unless it is a first fragment; a chain ending
/// inside a header, naming No Next Header or reaching a later fragment is answered, whatever
/// the bytes after it are. (Each packet has no route: the error would be 1/0.)
#[test]
fn is_ineligible_follows_extension_headers_by_their_lengths() {
    let later_fragment = {
        let mut f = with_ipv6_fragment(ping6(SRC_V6, NOROUTE_V6, 24, 1).build(), 10, false, 24);
        f[62] = 1; // what an error's type would be, were it a header
        f
    };
    let error_through_dest_opts = with_ipv6_ext(ping6(SRC_V6, NOROUTE_V6, 25, 1).build(), 60, &[1, 4, 0, 0, 0, 0]);
    let mut error_through_dest_opts = error_through_dest_opts;
    error_through_dest_opts[62] = 1;
    // An authentication header counts its length in 4-byte words, less two (12 bytes here).
    let through_ah = |icmp_type: u8| {
        let mut f = with_ipv6_ext(ping6(SRC_V6, NOROUTE_V6, 27, icmp_type as u16).build(), 51, &[0; 10]);
        f[14 + 40 + 12] = icmp_type;
        f
    };
    let answered = vec![
        ext6_past_end(udp6(SRC_V6, NOROUTE_V6, 1021, 53).build()),
        with_ipv6_ext(raw6(SRC_V6, NOROUTE_V6, 59).build(), 60, &[1, 4, 0, 0, 0, 0]),
        fragment6_cut(ping6(SRC_V6, NOROUTE_V6, 22, 1).build(), true),
        later_fragment,
        with_ipv6_ext(ping6(SRC_V6, NOROUTE_V6, 26, 1).build(), 60, &[1, 4, 0, 0, 0, 0]),
        through_ah(128),
    ];
    let unanswered = vec![
        ext6_past_end(ping6(SRC_V6, NOROUTE_V6, 21, 1).build()),
        fragment6_cut(ping6(SRC_V6, NOROUTE_V6, 23, 1).build(), false),
        error_through_dest_opts,
        through_ah(1),
    ];
    let frames: Vec<Vec<u8>> = answered.iter().chain(&unanswered).cloned().collect();
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ip_noroute", frames.len() as u64)]));
    let errors = o.port(P_IN);
    assert_eq!(errors.len(), answered.len(), "one error per answered packet, none for the others");
    // (Errors about packets of different flows keep no order across RPS workers.)
    for f in &answered {
        let quote = ip_datagram(f);
        let e = errors.iter().find(|e| ipv6_of(e).payload().get(8..) == Some(quote)).unwrap_or_else(|| panic!("no error quotes {f:02x?}"));
        assert_icmp6_error(e, 1, 0, IN_V6, f);
    }
}

/// ipv6_frag_rcv for fragments addressed to us: an atomic fragment (offset 0, no more) is
/// whole, so what follows its header is processed (an unknown protocol is pointed at in the
/// fragment header; an option asking for an answer is answered); a fragment header cut short
/// is pointed at (code 0); a first fragment that ends before its upper-layer header's first
/// bytes is refused with code 3, pointer 0 (RFC 8200 4.5); ip6_frag_queue's length checks
/// (past 65535 bytes; more to come but no multiple of 8) are code 0, as is a fragment header
/// after an atomic one; any other fragment is dropped unanswered (sluice does not reassemble).
#[test]
fn ipv6_frag_rcv_passes_atomic_fragments_and_refuses_cut_first_fragments() {
    let atomic_unknown = with_ipv6_fragment(raw6(SRC_V6, IN_V6, 108).build(), 0, false, 11);
    let atomic_option = with_ipv6_fragment(with_ipv6_ext(ping6(SRC_V6, IN_V6, 13, 1).build(), 60, &[0xbe, 4, 0, 0, 0, 0]), 0, false, 13);
    let cut_after = |f: Vec<u8>, payload: u16| {
        let mut f = f;
        f.truncate(14 + 40 + payload as usize);
        f[18..20].copy_from_slice(&payload.to_be_bytes());
        pad(f)
    };
    let header_cut = cut_after(raw6(SRC_V6, IN_V6, 44).build(), 4);
    let icmp_cut = fragment6_cut(ping6(SRC_V6, IN_V6, 12, 1).build(), true);
    // A UDP header needs 8 bytes: 4 are not enough.
    let udp_cut = cut_after(with_ipv6_fragment(udp6(SRC_V6, IN_V6, 1012, 7).build(), 0, true, 14), 12);
    // A TCP header needs 20.
    let tcp_cut = cut_after(with_ipv6_fragment(tcp6(SRC_V6, IN_V6, 1013, 80).build(), 0, true, 19), 8 + 19);
    // Destination options after the fragment header are walked over: the UDP header after
    // them is missing (the fragment's 8 bytes are a multiple of 8, only the cut is wrong).
    let udp_cut_after_options =
        cut_after(with_ipv6_fragment(with_ipv6_ext(udp6(SRC_V6, IN_V6, 1014, 7).build(), 60, &[1, 4, 0, 0, 0, 0]), 0, true, 17), 16);
    // One byte of an unknown protocol is its header, but a fragment with more to come must
    // be a multiple of 8 long (ip6_frag_queue): pointed at by the payload length.
    let one_byte = cut_after(with_ipv6_fragment(raw6(SRC_V6, IN_V6, 253).build(), 0, true, 15), 9);
    // Ending past 65535 bytes: pointed at by the fragment offset field.
    let past_max = cut_after(with_ipv6_fragment(ping6(SRC_V6, IN_V6, 20, 1).build(), 8191, false, 20), 16);
    // A fragment header after destination options: the pointer counts them.
    let header_cut_later = with_ipv6_ext(cut_after(raw6(SRC_V6, IN_V6, 44).build(), 4), 60, &[1, 4, 0, 0, 0, 0]);
    // A fragment header (atomic, first or later) after an atomic one: pointed at.
    let after_atomic = |offset_units: u16, more: bool, id: u32| {
        with_ipv6_fragment(with_ipv6_fragment(ping6(SRC_V6, IN_V6, id as u16, 1).build(), offset_units, more, id), 0, false, id + 100)
    };
    let (two_atomic, atomic_first, atomic_later) = (after_atomic(0, false, 24), after_atomic(0, true, 26), after_atomic(3, false, 28));
    let answered = [
        (&atomic_unknown, 1, 40),
        (&atomic_option, 2, 50),
        (&header_cut, 0, 40),
        (&header_cut_later, 0, 48),
        (&icmp_cut, 3, 0),
        (&udp_cut, 3, 0),
        (&tcp_cut, 3, 0),
        (&udp_cut_after_options, 3, 0),
        (&one_byte, 0, 4),
        (&past_max, 0, 42),
        (&two_atomic, 0, 48),
        (&atomic_first, 0, 48),
        (&atomic_later, 0, 48),
    ];
    // Whole enough: exactly a UDP header, a whole ICMPv6 header; a later fragment.
    let held = [
        cut_after(with_ipv6_fragment(udp6(SRC_V6, IN_V6, 1015, 7).build(), 0, true, 15), 16),
        with_ipv6_fragment(ping6(SRC_V6, IN_V6, 16, 1).build(), 0, true, 16),
        // (The last fragment may be any length.)
        cut_after(with_ipv6_fragment(ping6(SRC_V6, IN_V6, 18, 1).build(), 20, false, 18), 8 + 5),
        // Ending exactly at 65535 bytes (IPV6_MAXPLEN) is allowed.
        cut_after(with_ipv6_fragment(ping6(SRC_V6, IN_V6, 21, 1).build(), 8191, false, 21), 8 + 7),
    ];
    let frames: Vec<Vec<u8>> = answered.iter().map(|a| a.0.clone()).chain(held.iter().cloned()).collect();
    // More errors to one source than the ICMPv6 rate limit lets through in a burst.
    let mut setup = Setup::default();
    setup.tun.icmpv6_ratelimit = 0;
    setup.tun.icmp_msgs_per_sec = 1_000_000;
    setup.tun.icmp_msgs_burst = 1_000_000;
    let o = run_both(&frames, &setup);
    assert_eq!(drops(&o), BTreeMap::from([("ipv6_inhdr", 12), ("unhandled_l4", 1), ("ip_frag_local", 4)]));
    let errors = o.port(P_IN);
    assert_eq!(errors.len(), answered.len(), "an answer for each refused packet, none for the held fragments");
    for (f, code, pointer) in answered {
        let quote = ip_datagram(f);
        let e = errors.iter().find(|e| ipv6_of(e).payload().get(8..) == Some(quote)).unwrap_or_else(|| panic!("no error quotes {f:02x?}"));
        assert_eq!(assert_icmp6_error(e, 4, code, IN_V6, f), pointer, "code {code}");
    }
}

/// ip_route_input's address checks for the ranges in first octets 224–255 (the fast path
/// looks only there): a multicast or limited-broadcast source, a multicast or
/// limited-broadcast destination in a unicast frame; dropped by name, nothing sent.
#[test]
fn ip_route_input_refuses_multicast_and_limited_broadcast_addresses() {
    let frames = vec![
        udp4([224, 0, 0, 5], DST1_V4, 1001, 53).build(),
        udp4([255, 255, 255, 255], DST1_V4, 1002, 53).build(),
        udp4(SRC_V4, [239, 1, 2, 3], 1003, 53).build(),
        udp4(SRC_V4, [255, 255, 255, 255], 1004, 53).build(),
        // Both addresses special (first octets 224–255): the destination is judged first.
        udp4([224, 0, 0, 5], [239, 1, 2, 3], 1005, 53).build(),
        udp4([255, 255, 255, 255], [255, 255, 255, 255], 1006, 53).build(),
    ];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(drops(&o), BTreeMap::from([("ip_invalid_source", 3), ("ip_invalid_dest", 3)]));
    assert!((0..3).all(|p| o.port(p).is_empty()), "nothing sent");
}
