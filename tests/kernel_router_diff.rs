//! The forwarding differential test (issue 15): the Linux kernel, configured as the router of
//! `tests/common` (same MACs, addresses, routes, static neighbours, MTUs, `ip_forward`, ICMP
//! rate limits off, quiet IPv6), and sluice route the same frames; their fates must agree.
//!
//! The kernel side lives in two network namespaces made for this run (names carry the pid):
//! `R` holds the router's three veths `in0`, `out1`, `out2`; `H` holds their peers, where the
//! test injects each frame (an AF_PACKET socket on `in0`'s peer) and captures what the router
//! sends on all three (AF_PACKET, bounded waits). The sluice side runs the same frame through
//! an in-process datapath (`common::run_both`, which also checks that single and list receive
//! agree byte for byte). A fate is the list of frames each port sends, normalized only where
//! the two legitimately differ in ways that say nothing about routing: Ethernet padding (veth
//! does not pad), and the IP identification and header checksum of IPv4 packets the router
//! originates (the kernel's are hashed from a secret).
//!
//! A case is one line in [`corpus`]. A case whose fates differ fails the test unless it is in
//! [`EXPLAINED`] with its reason (each also has a sentence in src/rx/README.md); an explained
//! case that agrees again fails too, so the list stays short and true.
//!
//! Root is needed (namespaces, veths, packet sockets). Without it the test says so and passes,
//! except with `CI=true`, where a missing precondition fails it.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Cases whose fates differ on purpose, and why. Keep short: each has a sentence in
/// src/rx/README.md ("Deliberate differences from the kernel").
const EXPLAINED: &[(&str, &str)] = &[
    ("tcp4_to_us", "no TCP stack: the kernel answers with a RST, sluice drops as no_socket"),
    ("tcp6_to_us", "no TCP stack: the kernel answers with a RST, sluice drops as no_socket"),
    ("opt4_timestamp", "the Timestamp option is checked but sluice writes no time into it"),
    (
        "ping4_from_subnet_broadcast",
        "no answer to a broadcast source (RFC 1812 4.3.2.7): the kernel answers a subnet broadcast source with a broadcast frame",
    ),
    (
        "udp4_closed_from_subnet_broadcast",
        "no ICMP error to a broadcast source (RFC 1812 4.3.2.7): the kernel sends port unreachable to the subnet broadcast",
    ),
    (
        "opt4_record_route_ttl1",
        "ICMP errors carry no IP options: the kernel echoes Record Route into them and its quote shows the receive-time slot",
    ),
    ("src6_link_local", "no link-local addresses: the kernel answers from its own link-local address, sluice cannot"),
    (
        "dst6_link_local_other",
        "no link-local routes: the kernel forwards to a link-local neighbour on the incoming link, sluice answers no route",
    ),
];

// ---------------------------------------------------------------------------------------
// The corpus: one line per case
// ---------------------------------------------------------------------------------------

/// The second phase's known differences, as `EXPLAINED`.
const EXPLAINED_LOCAL: &[(&str, &str)] = &[(
    "udp4_src_in0_subnet_broadcast_no_route",
    "sluice checks the source before the route lookup (src/rx/README.md): the kernel finds no route first and sends net unreachable to the subnet broadcast source, sluice drops it as ip_local_source",
)];

/// Cases sent after both routers got the configured route `local 10.88.0.0/16`: sources the
/// FIB routes as local or broadcast are refused; sources without a route, blackholed or
/// unreachable pass; the range answers as the router's own.
fn custom_local_corpus() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("udp4_through", udp4(SRC_V4, DST1_V4, 1000, 53).build()),
        ("udp4_src_in_local_route", udp4([10, 88, 0, 5], DST1_V4, 1000, 53).build()),
        ("udp4_src_ours", udp4(OUT1_V4, DST1_V4, 1000, 53).build()),
        ("udp4_src_in0_subnet_broadcast", udp4([192, 0, 2, 255], DST1_V4, 1000, 53).build()),
        ("udp4_src_out1_subnet_broadcast", udp4([198, 51, 100, 255], DST2_V4, 1000, 53).build()),
        ("udp4_src_no_route", udp4(NOROUTE_V4, DST1_V4, 1000, 53).build()),
        // The subnet's network address has no broadcast route (fib_add_ifaddr adds none
        // since 5.x): an ordinary source.
        ("udp4_src_in0_network_address", udp4([192, 0, 2, 0], DST1_V4, 1000, 53).build()),
        // No route to the destination: the kernel validates no source then, but its
        // error goes to a local address (sluice drops first): nothing on the wire.
        ("udp4_src_in_local_route_no_route", udp4([10, 88, 0, 5], NOROUTE_V4, 1000, 53).build()),
        ("udp4_src_in0_subnet_broadcast_no_route", udp4([192, 0, 2, 255], NOROUTE_V4, 1000, 53).build()),
        ("udp4_src_blackholed", udp4(BLACKHOLE_V4, DST1_V4, 1000, 53).build()),
        ("udp4_src_unreachable", udp4(UNREACH_V4, DST1_V4, 1000, 53).build()),
        ("ping4_to_local_route", ping4(SRC_V4, [10, 88, 0, 5], 9, 1).build()),
        ("ping4_from_subnet_broadcast_to_us", ping4([192, 0, 2, 255], IN_V4, 9, 1).build()),
        ("arp_sender_subnet_broadcast", arp_request(MAC_HOST, [192, 0, 2, 255], IN_V4)),
        ("arp_sender_in_local_route", arp_request(MAC_HOST, [10, 88, 0, 5], IN_V4)),
    ]
}

fn corpus() -> Vec<(&'static str, Vec<u8>)> {
    let bmac = MAC_BCAST;
    let mmac = [0x01, 0x00, 0x5e, 0, 0, 1];
    let m6mac = [0x33, 0x33, 0, 0, 0, 1];
    let ip_opt = |opts: &[u8]| with_ipv4_options(udp4(SRC_V4, DST1_V4, 1000, 53).len(100).build(), opts);
    let ip_opt_us = |opts: &[u8]| with_ipv4_options(ping4(SRC_V4, IN_V4, 7, 1).build(), opts);
    let ext6 = |kind: u8, body: &[u8]| with_ipv6_ext(udp6(SRC_V6, DST1_V6, 1000, 53).len(120).build(), kind, body);
    let ext6_us = |kind: u8, body: &[u8]| with_ipv6_ext(ping6(SRC_V6, IN_V6, 7, 1).build(), kind, body);
    let mut c: Vec<(&'static str, Vec<u8>)> = vec![
        // Ordinary forwarding, both families, every transport, both egress ports.
        ("udp4_out1", udp4(SRC_V4, DST1_V4, 1000, 53).len(200).build()),
        ("udp4_out2", udp4(SRC_V4, DST2_V4, 1000, 53).len(200).build()),
        ("tcp4_out1", tcp4(SRC_V4, DST1_V4, 1000, 80).build()),
        ("ping4_through", ping4(SRC_V4, DST1_V4, 9, 1).build()),
        ("raw4_gre_through", raw4(SRC_V4, DST1_V4, 47).len(120).build()),
        ("udp4_df_clear_through", udp4(SRC_V4, DST1_V4, 1000, 53).df(false).len(300).build()),
        ("udp4_tos_through", udp4(SRC_V4, DST1_V4, 1000, 53).tos(0xb8).build()),
        ("udp4_padded_through", pad_to(udp4(SRC_V4, DST1_V4, 1000, 53).build(), 100)),
        ("udp4_back_out_in0", udp4(SRC_V4, [198, 19, 0, 1], 1000, 53).build()),
        ("udp4_connected_host", udp4(SRC_V4, NH1_V4, 1000, 53).build()),
        ("udp6_out1", udp6(SRC_V6, DST1_V6, 1000, 53).len(200).build()),
        ("udp6_out2", udp6(SRC_V6, DST2_V6, 1000, 53).len(200).build()),
        ("tcp6_out1", tcp6(SRC_V6, DST1_V6, 1000, 80).build()),
        ("ping6_through", ping6(SRC_V6, DST1_V6, 9, 1).build()),
        ("udp6_connected_host", udp6(SRC_V6, NH2_V6, 1000, 53).build()),
        // TTL / hop limit.
        ("udp4_ttl0", udp4(SRC_V4, DST1_V4, 1000, 53).ttl(0).build()),
        ("udp4_ttl1", udp4(SRC_V4, DST1_V4, 1000, 53).ttl(1).len(300).build()),
        ("udp4_ttl2", udp4(SRC_V4, DST1_V4, 1000, 53).ttl(2).build()),
        ("udp4_ttl1_large_quote", udp4(SRC_V4, DST1_V4, 1000, 53).ttl(1).len(1400).build()),
        ("ping4_ttl1_to_us", ping4(SRC_V4, IN_V4, 9, 1).ttl(1).build()),
        ("udp6_hl0", udp6(SRC_V6, DST1_V6, 1000, 53).ttl(0).build()),
        ("udp6_hl1", udp6(SRC_V6, DST1_V6, 1000, 53).ttl(1).len(300).build()),
        ("udp6_hl2", udp6(SRC_V6, DST1_V6, 1000, 53).ttl(2).build()),
        ("udp6_hl1_large_quote", udp6(SRC_V6, DST1_V6, 1000, 53).ttl(1).len(1514).build()),
        ("icmp6_error_hl1", icmp6(MAC_HOST, MAC_IN, SRC_V6, DST1_V6, 1, 1, 0, &[0; 52])),
        ("icmp6_echo_hl1", icmp6(MAC_HOST, MAC_IN, SRC_V6, DST1_V6, 1, 128, 0, &[0, 1, 0, 1])),
        ("icmp6_type_127_hl1", icmp6(MAC_HOST, MAC_IN, SRC_V6, DST1_V6, 1, 127, 0, &[0; 4])),
        ("ping6_hl1_to_us", ping6(SRC_V6, IN_V6, 9, 1).ttl(1).build()),
        // MTU (out2: 1280).
        ("udp4_over_mtu_df", udp4(SRC_V4, DST2_V4, 1000, 53).len(1400).build()),
        ("udp4_over_mtu_no_df", udp4(SRC_V4, DST2_V4, 1000, 53).df(false).len(1400).build()),
        ("udp4_over_mtu_no_df_max", udp4(SRC_V4, DST2_V4, 1000, 53).df(false).len(1514).build()),
        (
            "udp4_over_mtu_no_df_options",
            with_ipv4_options(udp4(SRC_V4, DST2_V4, 1000, 53).df(false).len(1400).build(), &[0x94, 4, 0, 0, 7, 7, 4, 0]),
        ),
        (
            "udp4_over_mtu_no_df_record_route",
            with_ipv4_options(udp4(SRC_V4, DST2_V4, 1000, 53).df(false).len(1400).build(), &[0x94, 4, 0, 0, 1, 7, 7, 4, 0, 0, 0, 0]),
        ),
        ("udp4_exactly_mtu", udp4(SRC_V4, DST2_V4, 1000, 53).len(1294).build()),
        ("udp6_over_mtu", udp6(SRC_V6, DST2_V6, 1000, 53).len(1400).build()),
        ("udp6_exactly_mtu", udp6(SRC_V6, DST2_V6, 1000, 53).len(1294).build()),
        ("v4_fragment_through", as_ipv4_fragment(udp4(SRC_V4, DST1_V4, 1, 53).df(false).len(200).build(), 0, true)),
        ("v4_fragment_over_mtu", as_ipv4_fragment(udp4(SRC_V4, DST2_V4, 1, 53).df(false).len(1400).build(), 10, true)),
        ("v6_fragment_through", with_ipv6_fragment(udp6(SRC_V6, DST1_V6, 1, 53).len(200).build(), 0, true, 7)),
        // No route, blackhole, unreachable.
        ("udp4_no_route", udp4(SRC_V4, NOROUTE_V4, 1000, 53).build()),
        ("udp4_blackhole", udp4(SRC_V4, BLACKHOLE_V4, 1000, 53).build()),
        ("udp4_unreachable", udp4(SRC_V4, UNREACH_V4, 1000, 53).build()),
        ("udp6_no_route", udp6(SRC_V6, NOROUTE_V6, 1000, 53).build()),
        ("udp6_blackhole", udp6(SRC_V6, BLACKHOLE_V6, 1000, 53).build()),
        ("udp6_unreachable", udp6(SRC_V6, UNREACH_V6, 1000, 53).build()),
        // L2: pkt_type, VLAN priority tag, other hosts, unknown ethertypes.
        ("udp4_l2_broadcast", udp4(SRC_V4, DST1_V4, 1000, 53).dst_mac(bmac).build()),
        ("udp4_l2_multicast", udp4(SRC_V4, DST1_V4, 1000, 53).dst_mac(mmac).build()),
        ("udp6_l2_multicast", udp6(SRC_V6, DST1_V6, 1000, 53).dst_mac(m6mac).build()),
        ("ping4_l2_broadcast_to_us", ping4(SRC_V4, IN_V4, 9, 1).dst_mac(bmac).build()),
        ("udp4_other_host", udp4(SRC_V4, DST1_V4, 1000, 53).dst_mac(MAC_OTHER).build()),
        ("udp4_vlan_priority_tag", udp4(SRC_V4, DST1_V4, 1000, 53).vlan(0x6000).build()),
        ("ping4_vlan_priority_tag_to_us", ping4(SRC_V4, IN_V4, 9, 1).vlan(0x6000).build()),
        ("udp6_vlan_priority_tag", udp6(SRC_V6, DST1_V6, 1000, 53).vlan(0x6000).build()),
        ("udp4_vlan_other", udp4(SRC_V4, DST1_V4, 1000, 53).vlan(200).build()),
        ("ethertype_unknown", ether(MAC_IN, MAC_HOST, 0x88b5, &[1, 2, 3, 4])),
        // Martian destinations and sources.
        ("dst4_multicast", udp4(SRC_V4, [224, 1, 2, 3], 1000, 53).build()),
        ("dst4_limited_broadcast", udp4(SRC_V4, [255; 4], 1000, 53).build()),
        ("dst4_zero", udp4(SRC_V4, [0; 4], 1000, 53).build()),
        ("dst4_zeronet", udp4(SRC_V4, [0, 1, 2, 3], 1000, 53).build()),
        ("dst4_loopback", udp4(SRC_V4, [127, 0, 0, 1], 1000, 53).build()),
        ("dst4_class_e", udp4(SRC_V4, [240, 0, 0, 1], 1000, 53).build()),
        ("src4_loopback", udp4([127, 0, 0, 1], DST1_V4, 1000, 53).build()),
        ("src4_multicast", udp4([224, 0, 0, 5], DST1_V4, 1000, 53).build()),
        ("src4_broadcast", udp4([255; 4], DST1_V4, 1000, 53).build()),
        ("src4_zero", udp4([0; 4], DST1_V4, 1000, 53).build()),
        ("src4_zeronet", udp4([0, 1, 2, 3], DST1_V4, 1000, 53).build()),
        ("src4_class_e", udp4([240, 0, 0, 1], DST1_V4, 1000, 53).build()),
        ("src4_ours_in0", udp4(IN_V4, DST1_V4, 1000, 53).build()),
        ("src4_ours_out1", udp4(OUT1_V4, DST1_V4, 1000, 53).build()),
        ("src4_ours_to_us", ping4(OUT2_V4, IN_V4, 9, 1).build()),
        ("dst6_unspecified", udp6(SRC_V6, [0; 16], 1000, 53).build()),
        ("dst6_loopback", udp6(SRC_V6, v6([0, 0, 0, 0, 0, 0, 0, 1]), 1000, 53).build()),
        ("dst6_v4_mapped", udp6(SRC_V6, v6([0, 0, 0, 0, 0, 0xffff, 0x0a01, 5]), 1000, 53).build()),
        ("dst6_multicast_global", udp6(SRC_V6, v6([0xff0e, 0, 0, 0, 0, 0, 0, 0x101]), 1000, 53).dst_mac([0x33, 0x33, 0, 0, 1, 1]).build()),
        ("dst6_link_local_other", udp6(SRC_V6, LL_OTHER_V6, 1000, 53).build()),
        ("src6_unspecified", udp6([0; 16], DST1_V6, 1000, 53).build()),
        ("src6_loopback", udp6(v6([0, 0, 0, 0, 0, 0, 0, 1]), DST1_V6, 1000, 53).build()),
        ("src6_multicast", udp6(v6([0xff02, 0, 0, 0, 0, 0, 0, 1]), DST1_V6, 1000, 53).build()),
        ("src6_v4_mapped", udp6(v6([0, 0, 0, 0, 0, 0xffff, 0xc612, 1]), DST1_V6, 1000, 53).build()),
        ("src6_link_local", udp6(LL_HOST_V6, DST1_V6, 1000, 53).build()),
        // IPv4 options.
        ("opt4_nop_end", ip_opt(&[1, 1, 1, 0])),
        ("opt4_lsrr", ip_opt(&[1, 0x83, 7, 4, 10, 1, 0, 9])),
        ("opt4_ssrr", ip_opt(&[1, 0x89, 7, 4, 10, 1, 0, 9])),
        ("opt4_record_route", ip_opt(&[1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0])),
        ("opt4_record_route_full", ip_opt(&[1, 7, 7, 8, 1, 2, 3, 4])),
        ("opt4_router_alert", ip_opt(&[0x94, 4, 0, 0])),
        ("opt4_timestamp", ip_opt(&[0x44, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0])),
        ("opt4_bad_length", ip_opt(&[7, 40, 4, 0])),
        ("opt4_length_one", ip_opt(&[0x82, 1, 0, 0])),
        ("opt4_rr_bad_pointer", ip_opt(&[1, 7, 7, 2, 0, 0, 0, 0])),
        ("opt4_to_us_record_route", ip_opt_us(&[1, 7, 7, 4, 0, 0, 0, 0])),
        ("opt4_to_us_lsrr", ip_opt_us(&[1, 0x83, 7, 4, 10, 1, 0, 9])),
        ("opt4_to_us_bad_length", ip_opt_us(&[7, 40, 4, 0])),
        ("opt4_to_us_record_route_2_slots", ip_opt_us(&[1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0])),
        ("opt4_to_us_router_alert", ip_opt_us(&[0x94, 4, 0, 0])),
        ("opt4_udp_echo_record_route", with_ipv4_options(udp4(SRC_V4, IN_V4, 1000, 7).build(), &[1, 7, 7, 4, 0, 0, 0, 0])),
        ("opt4_end_then_garbage", ip_opt(&[0, 1, 7, 9])),
        // IPv6 extension headers.
        ("ext6_hbh_pad", ext6(0, &[1, 4, 0, 0, 0, 0])),
        ("ext6_dest_opts", ext6(60, &[1, 4, 0, 0, 0, 0])),
        ("ext6_routing_type0_segleft0", ext6(43, &[0, 0, 0, 0, 0, 0])),
        ("ext6_routing_type0_segleft1", with_ipv6_ext(udp6(SRC_V6, DST1_V6, 1, 53).build(), 43, &rh0(1, DST2_V6))),
        ("ext6_routing_type0_to_us", with_ipv6_ext(ping6(SRC_V6, IN_V6, 7, 1).build(), 43, &rh0(1, DST1_V6))),
        ("ext6_nine_dest_opts", (0..9).fold(udp6(SRC_V6, DST1_V6, 1, 53).build(), |f, _| with_ipv6_ext(f, 60, &[1, 4, 0, 0, 0, 0]))),
        (
            "ext6_late_hbh",
            with_ipv6_ext(with_ipv6_ext(udp6(SRC_V6, DST1_V6, 1, 53).build(), 0, &[1, 4, 0, 0, 0, 0]), 60, &[1, 4, 0, 0, 0, 0]),
        ),
        ("ext6_truncated", truncated_ext6(udp6(SRC_V6, DST1_V6, 1, 53).build())),
        ("ext6_no_next_header", with_ipv6_ext(raw6(SRC_V6, DST1_V6, 59).build(), 60, &[1, 4, 0, 0, 0, 0])),
        ("ext6_hbh_unknown_option_skip", ext6(0, &[0x3e, 4, 0, 0, 0, 0])),
        ("ext6_hbh_unknown_option_discard", ext6(0, &[0x7e, 4, 0, 0, 0, 0])),
        ("ext6_hbh_unknown_option_icmp", ext6(0, &[0xbe, 4, 0, 0, 0, 0])),
        // ipv6_hop_jumbo: a real jumbo length with a payload length set, one under 65536,
        // one misplaced (a silent drop).
        ("ext6_hbh_jumbo_with_payload_length", ext6(0, &[0xc2, 4, 0, 1, 0, 0])),
        ("ext6_hbh_jumbo_too_small", ext6(0, &[0xc2, 4, 0, 0, 1, 0])),
        ("ext6_hbh_jumbo_misplaced", ext6(0, &[0, 0xc2, 4, 0, 1, 0, 0, 1, 5, 0, 0, 0, 0, 0])),
        ("ext6_to_us_dest_opts", ext6_us(60, &[1, 4, 0, 0, 0, 0])),
        ("ext6_to_us_hbh", ext6_us(0, &[1, 4, 0, 0, 0, 0])),
        ("ext6_to_us_unknown_next", raw6(SRC_V6, IN_V6, 253).build()),
        ("ext6_to_us_unknown_next_after_dest_opts", with_ipv6_ext(raw6(SRC_V6, IN_V6, 253).build(), 60, &[1, 4, 0, 0, 0, 0])),
        ("ext6_to_us_no_next_header", raw6(SRC_V6, IN_V6, 59).build()),
        (
            "ext6_to_us_late_hbh",
            with_ipv6_ext(with_ipv6_ext(ping6(SRC_V6, IN_V6, 7, 1).build(), 0, &[1, 4, 0, 0, 0, 0]), 60, &[1, 4, 0, 0, 0, 0]),
        ),
        ("ext6_to_us_dest_opts_unknown_icmp", ext6_us(60, &[0xbe, 4, 0, 0, 0, 0])),
        ("ext6_to_us_dest_opts_unknown_skip", ext6_us(60, &[0x3e, 4, 0, 0, 0, 0])),
        ("ext6_to_us_routing_segleft0", ext6_us(43, &[0, 0, 0, 0, 0, 0])),
        // IPsec AH (SPI 256, sequence 1, no ICV): forwarded as it is; to us, no AH handler.
        ("ext6_ah", ext6(51, &AH_BODY)),
        ("ext6_to_us_ah", ext6_us(51, &AH_BODY)),
        ("ext6_to_us_dest_opts_then_ah", with_ipv6_ext(ext6_us(51, &AH_BODY), 60, &[1, 4, 0, 0, 0, 0])),
        ("raw4_to_us_ah", raw4(SRC_V4, IN_V4, 51).build()),
        // The ICMPv6 error found past the AH is never answered (icmpv6_send's is_ineligible).
        ("ext6_to_us_ah_icmp6_error", with_ipv6_ext(icmp6(MAC_HOST, MAC_IN, SRC_V6, IN_V6, 64, 1, 0, &[0; 44]), 51, &AH_BODY)),
        ("ext6_hbh_router_alert", ext6(0, &[5, 2, 0, 0, 1, 0])),
        ("ext6_hbh_bad_padn", ext6(0, &[1, 4, 0, 1, 0, 0])),
        ("udp6_echo_dest_opts", with_ipv6_ext(udp6(SRC_V6, IN_V6, 1000, 7).build(), 60, &[1, 4, 0, 0, 0, 0])),
        ("udp4_echo", udp4(SRC_V4, IN_V4, 1000, 7).build()),
        ("udp6_echo", udp6(SRC_V6, IN_V6, 1000, 7).build()),
        ("ping6_all_nodes", ping6(SRC_V6, v6([0xff02, 0, 0, 0, 0, 0, 0, 1]), 41, 1).dst_mac(m6mac).build()),
        // An unknown destination option to a group: 10 answers even so, 11 only to unicast.
        (
            "ping6_all_nodes_dest_opts_unknown_icmp",
            with_ipv6_ext(ping6(SRC_V6, v6([0xff02, 0, 0, 0, 0, 0, 0, 1]), 9, 1).dst_mac(m6mac).build(), 60, &[0xbe, 4, 0, 0, 0, 0]),
        ),
        (
            "ping6_l2_multicast_dest_opts_unknown_icmp_unicast_only",
            with_ipv6_ext(ping6(SRC_V6, IN_V6, 9, 1).dst_mac(m6mac).build(), 60, &[0xfe, 4, 0, 0, 0, 0]),
        ),
        (
            "ping6_all_nodes_dest_opts_unknown_icmp_unicast_only",
            with_ipv6_ext(ping6(SRC_V6, v6([0xff02, 0, 0, 0, 0, 0, 0, 1]), 9, 1).dst_mac(m6mac).build(), 60, &[0xfe, 4, 0, 0, 0, 0]),
        ),
        ("ping6_all_routers", ping6(SRC_V6, v6([0xff02, 0, 0, 0, 0, 0, 0, 2]), 42, 1).dst_mac([0x33, 0x33, 0, 0, 0, 2]).build()),
        (
            "ping6_solicited_node_in0",
            ping6(SRC_V6, v6([0xff02, 0, 0, 0, 0, 1, 0xff00, 1]), 43, 1).dst_mac([0x33, 0x33, 0xff, 0, 0, 1]).build(),
        ),
        ("ping6_group_not_joined", ping6(SRC_V6, v6([0xff02, 0, 0, 0, 0, 0, 0, 0x77]), 9, 1).dst_mac([0x33, 0x33, 0, 0, 0, 0x77]).build()),
        ("raw4_to_us_unknown_proto", raw4(SRC_V4, IN_V4, 253).build()),
        // Local delivery: echo, UDP, ICMP errors about ICMP.
        ("ping4_to_in0", ping4(SRC_V4, IN_V4, 9, 1).build()),
        ("ping4_to_out1_addr", ping4(SRC_V4, OUT1_V4, 9, 1).build()),
        ("ping4_to_out1_bad_csum", bad_l4_checksum(ping4(SRC_V4, IN_V4, 9, 1).build())),
        ("ping6_to_in0", ping6(SRC_V6, IN_V6, 9, 1).build()),
        ("ping6_to_out1_addr", ping6(SRC_V6, OUT1_V6, 9, 1).build()),
        ("udp4_to_us_closed", udp4(SRC_V4, IN_V4, 1000, 9999).build()),
        ("udp6_to_us_closed", udp6(SRC_V6, IN_V6, 1000, 9999).build()),
        ("udp4_to_us_bad_csum", bad_l4_checksum(udp4(SRC_V4, IN_V4, 1000, 9999).build())),
        ("tcp4_to_us", tcp4(SRC_V4, IN_V4, 1000, 80).build()),
        ("tcp6_to_us", tcp6(SRC_V6, IN_V6, 1000, 80).build()),
        ("icmp4_timestamp_to_us", icmp4(SRC_V4, IN_V4, 13, 0, [0, 1, 0, 1], &[0; 12])),
        ("icmp4_timestamp_long_to_us", icmp4(SRC_V4, IN_V4, 13, 0, [0, 1, 0, 2], &[7; 40])),
        ("icmp4_timestamp_record_route", with_ipv4_options(icmp4(SRC_V4, IN_V4, 13, 0, [0, 1, 0, 3], &[0; 12]), &[1, 7, 7, 4, 0, 0, 0, 0])),
        ("icmp4_unreach_ttl1", with_ttl(icmp4(SRC_V4, DST1_V4, 3, 1, [0; 4], &[0x45; 28]), 1)),
        ("icmp4_echo_ttl1", with_ttl(icmp4(SRC_V4, DST1_V4, 8, 0, [0, 1, 0, 1], &[0; 8]), 1)),
        ("icmp4_type14_ttl1", with_ttl(icmp4(SRC_V4, DST1_V4, 14, 0, [0; 4], &[0; 12]), 1)),
        ("icmp4_type42_ttl1", with_ttl(icmp4(SRC_V4, DST1_V4, 42, 0, [0; 4], &[0; 8]), 1)),
        ("v4_first_fragment_to_us", as_ipv4_fragment(ping4(SRC_V4, IN_V4, 9, 1).df(false).build(), 0, true)),
        // ARP and NDP to each address.
        ("arp_in0", arp_request(MAC_HOST, HOST_V4, IN_V4)),
        ("arp_out1_addr_on_in0", arp_request(MAC_HOST, HOST_V4, OUT1_V4)),
        ("arp_out2_addr_on_in0", arp_request(MAC_HOST, HOST_V4, OUT2_V4)),
        ("arp_other", arp_request(MAC_HOST, HOST_V4, [192, 0, 2, 77])),
        ("arp_gratuitous", arp_request(MAC_HOST, HOST_V4, HOST_V4)),
        ("arp_from_new_host", arp_request([2, 0, 0, 0, 0, 0x42], [192, 0, 2, 42], IN_V4)),
        ("ns_out2_addr_on_in0", neighbour_solicit(MAC_HOST, HOST_V6, OUT2_V6)),
        ("ns_from_new_host", neighbour_solicit([2, 0, 0, 0, 0, 0x42], v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x42]), IN_V6)),
        ("na_unsolicited", neighbour_advert(MAC_HOST, HOST_V6, IN_V6)),
        ("arp_unicast_in0", arp(1, MAC_IN, MAC_HOST, HOST_V4, [0; 6], IN_V4)),
        ("arp_reply_unsolicited", arp(2, MAC_IN, MAC_HOST, HOST_V4, MAC_IN, IN_V4)),
        ("ns_in0", neighbour_solicit(MAC_HOST, HOST_V6, IN_V6)),
        ("ns_out1_addr_on_in0", neighbour_solicit(MAC_HOST, HOST_V6, OUT1_V6)),
        ("ns_other", neighbour_solicit(MAC_HOST, HOST_V6, v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x77]))),
        ("ns_hl254", with_hop_limit6(neighbour_solicit(MAC_HOST, HOST_V6, IN_V6), 254)),
        // Runts and lies in length fields.
        // (The kernel refuses to send a frame shorter than the Ethernet header.)
        ("runt_ethernet_header_only", udp4(SRC_V4, DST1_V4, 1000, 53).build()[..14].to_vec()),
        ("runt_vlan_tag_cut", udp4(SRC_V4, DST1_V4, 1000, 53).vlan(0).build()[..16].to_vec()),
        ("runt_ip4_header", udp4(SRC_V4, DST1_V4, 1000, 53).build()[..30].to_vec()),
        ("runt_ip6_header", udp6(SRC_V6, DST1_V6, 1000, 53).build()[..50].to_vec()),
        ("ip4_total_len_too_long", set_u16(udp4(SRC_V4, DST1_V4, 1000, 53).build(), 16, 200, true)),
        ("ip4_total_len_short_of_ihl", set_u16(udp4(SRC_V4, DST1_V4, 1000, 53).build(), 16, 19, true)),
        ("ip4_total_len_short_forwarded", set_u16(udp4(SRC_V4, DST1_V4, 1000, 53).len(200).build(), 16, 100, true)),
        ("ip4_ihl_4", set_byte(udp4(SRC_V4, DST1_V4, 1000, 53).build(), 14, 0x44, true)),
        ("ip4_version_6", set_byte(udp4(SRC_V4, DST1_V4, 1000, 53).build(), 14, 0x65, true)),
        ("ip4_bad_checksum", bad_ip_checksum(udp4(SRC_V4, DST1_V4, 1000, 53).build())),
        ("ip6_payload_len_too_long", set_u16(udp6(SRC_V6, DST1_V6, 1000, 53).build(), 18, 300, false)),
        ("ip6_payload_len_short_forwarded", set_u16(udp6(SRC_V6, DST1_V6, 1000, 53).len(200).build(), 18, 50, false)),
        ("ip6_version_4", set_byte(udp6(SRC_V6, DST1_V6, 1000, 53).build(), 14, 0x40, false)),
        ("udp4_len_lie_to_us", set_u16(udp4(SRC_V4, IN_V4, 1000, 9999).build(), 38, 200, false)),
        ("udp4_len_below_header_to_us", set_u16(udp4(SRC_V4, IN_V4, 1000, 9999).build(), 38, 4, false)),
        ("udp6_len_lie_to_us", set_u16(udp6(SRC_V6, IN_V6, 1000, 9999).build(), 58, 200, false)),
        // Checksums of datagrams to us: IPv4 may leave it out (0), IPv6 may not.
        ("udp4_to_us_zero_csum", set_u16(udp4(SRC_V4, IN_V4, 1000, 9999).build(), 40, 0, false)),
        ("udp6_to_us_zero_csum", set_u16(udp6(SRC_V6, IN_V6, 1000, 9999).build(), 60, 0, false)),
        ("udp6_to_us_bad_csum", bad_l4_checksum(udp6(SRC_V6, IN_V6, 1000, 9999).build())),
        ("ping6_to_in0_bad_csum", bad_l4_checksum(ping6(SRC_V6, IN_V6, 9, 1).build())),
        // Messages to us that ask for no answer.
        ("icmp4_echo_reply_to_us", icmp4(SRC_V4, IN_V4, 0, 0, [0, 1, 0, 1], &[0; 12])),
        ("icmp4_unknown_type_to_us", icmp4(SRC_V4, IN_V4, 42, 0, [0, 1, 0, 1], &[0; 12])),
        ("icmp6_echo_reply_to_us", icmp6(MAC_HOST, MAC_IN, SRC_V6, IN_V6, 64, 129, 0, &[0, 1, 0, 1, 0, 0, 0, 0])),
        ("icmp6_unknown_info_to_us", icmp6(MAC_HOST, MAC_IN, SRC_V6, IN_V6, 64, 200, 0, &[0, 1, 0, 1, 0, 0, 0, 0])),
        // The subnet's broadcast address: no echo (icmp_echo_ignore_broadcasts), no error.
        ("ping4_subnet_broadcast", ping4(SRC_V4, [192, 0, 2, 255], 9, 1).dst_mac(MAC_BCAST).build()),
        ("udp4_subnet_broadcast_closed", udp4(SRC_V4, [192, 0, 2, 255], 1000, 9999).dst_mac(MAC_BCAST).build()),
        ("ping4_ttl0_to_us", with_ttl(ping4(SRC_V4, IN_V4, 9, 1).build(), 0)),
        // The IP header's class bits: echoed in replies, a control class in errors, kept when
        // forwarded. (A flow label makes another flow for RPS: its own identifier or port.)
        ("ping4_tos_to_us", ping4(SRC_V4, IN_V4, 9, 1).tos(0xb8).build()),
        ("udp4_ttl1_tos_ecn", udp4(SRC_V4, DST1_V4, 1000, 53).ttl(1).tos(0xb9).build()),
        ("udp4_ecn_ce_through", udp4(SRC_V4, DST1_V4, 1000, 53).tos(0x03).build()),
        ("ping6_tclass_to_us", ping6(SRC_V6, IN_V6, 9, 1).tos(0xb8).build()),
        ("ping6_flow_label_to_us", set_u16(ping6(SRC_V6, IN_V6, 33, 1).build(), 16, 0x2345, false)),
        ("udp6_hl1_tclass", udp6(SRC_V6, DST1_V6, 1000, 53).ttl(1).tos(0xb8).build()),
        ("udp6_flow_label_through", set_u16(udp6(SRC_V6, DST1_V6, 1034, 53).build(), 16, 0x2345, false)),
        // Large echoes: the reply is as long as the request.
        ("ping4_large_to_us", ping4(SRC_V4, IN_V4, 9, 1).len(1514).build()),
        ("ping6_large_to_us", ping6(SRC_V6, IN_V6, 9, 1).len(1514).build()),
        // The subnet-router anycast address of a forwarding interface (RFC 4291 2.6.1). Its
        // answers come from in0's address: an identifier (or port) of their own keeps them
        // out of another case's answer flow, whose order across RPS workers is not defined.
        ("ping6_subnet_anycast_in0", ping6(SRC_V6, v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0]), 31, 1).build()),
        ("udp6_subnet_anycast_in0_closed", udp6(SRC_V6, v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0]), 1000, 9999).build()),
        ("udp6_subnet_anycast_out1_closed", udp6(SRC_V6, v6([0x2001, 0xdb8, 2, 0, 0, 0, 0, 0]), 1000, 9999).build()),
        ("ns_unicast_subnet_anycast_in0", unicast_solicit(v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0]))),
        ("ns_unicast_in0", unicast_solicit(IN_V6)),
        ("ping4_tos_ecn_to_us", ping4(SRC_V4, IN_V4, 9, 1).tos(0xb9).build()),
        ("udp4_echo_tos", udp4(SRC_V4, IN_V4, 1000, 7).tos(0xb8).build()),
        ("udp4_echo_zero_csum", set_u16(udp4(SRC_V4, IN_V4, 1000, 7).build(), 40, 0, false)),
        // Broadcasts with our MAC: the subnet's own and another port's subnet's (directed).
        ("ping4_subnet_broadcast_unicast_mac", ping4(SRC_V4, [192, 0, 2, 255], 9, 1).build()),
        ("udp4_subnet_broadcast_unicast_mac_closed", udp4(SRC_V4, [192, 0, 2, 255], 1000, 9999).build()),
        ("udp4_directed_broadcast_out1", udp4(SRC_V4, [198, 51, 100, 255], 1000, 53).build()),
        ("udp4_echo_subnet_broadcast", udp4(SRC_V4, [192, 0, 2, 255], 1031, 7).build()),
        ("udp4_echo_directed_broadcast_out1", udp4(SRC_V4, [198, 51, 100, 255], 1032, 7).build()),
        ("icmp4_timestamp_subnet_broadcast", icmp4(SRC_V4, [192, 0, 2, 255], 13, 0, [0, 1, 0, 1], &[0; 12])),
        ("raw4_subnet_broadcast_unknown_proto", raw4(SRC_V4, [192, 0, 2, 255], 253).build()),
        ("udp4_subnet_broadcast_bad_option", with_ipv4_options(udp4(SRC_V4, [192, 0, 2, 255], 1000, 9999).build(), &[7, 40, 4, 0])),
        ("arp_subnet_broadcast", arp_request(MAC_HOST, HOST_V4, [192, 0, 2, 255])),
        ("ping4_directed_broadcast_out1", ping4(SRC_V4, [198, 51, 100, 255], 9, 1).build()),
        // ICMP requests sluice may or may not answer, and short ones.
        ("icmp4_address_mask_request_to_us", icmp4(SRC_V4, IN_V4, 17, 0, [0, 1, 0, 1], &[0; 4])),
        ("icmp4_info_request_to_us", icmp4(SRC_V4, IN_V4, 15, 0, [0, 1, 0, 1], &[])),
        ("icmp4_echo_code5_to_us", icmp4(SRC_V4, IN_V4, 8, 5, [0, 1, 0, 1], &[1, 2, 3, 4])),
        ("icmp6_echo_code5_to_us", icmp6(MAC_HOST, MAC_IN, SRC_V6, IN_V6, 64, 128, 5, &[0, 1, 0, 1, 9, 9])),
        ("icmp4_echo_no_id_to_us", icmp4_short(SRC_V4, IN_V4, &[8, 0, 0xf7, 0xff])),
        ("icmp6_echo_no_id_to_us", icmp6(MAC_HOST, MAC_IN, SRC_V6, IN_V6, 64, 128, 0, &[])),
        // ARP senders and hardware types.
        ("arp_sender_offlink", arp_request(MAC_HOST, SRC_V4, IN_V4)),
        ("arp_sender_ours_out1", arp_request(MAC_HOST, OUT1_V4, IN_V4)),
        ("arp_sender_subnet_broadcast", arp_request(MAC_HOST, [192, 0, 2, 255], IN_V4)),
        ("arp_sender_loopback", arp_request(MAC_HOST, [127, 0, 0, 1], IN_V4)),
        ("arp_probe_in0", arp_request(MAC_HOST, [0; 4], IN_V4)),
        ("arp_other_host_mac", arp(1, MAC_OTHER, MAC_HOST, HOST_V4, [0; 6], IN_V4)),
        ("arp_hw_ieee802", set_u16(arp_request(MAC_HOST, HOST_V4, IN_V4), 14, 6, false)),
        ("arp_hw_unknown", set_u16(arp_request(MAC_HOST, HOST_V4, IN_V4), 14, 7, false)),
        ("arp_op_rarp", set_u16(arp_request(MAC_HOST, HOST_V4, IN_V4), 20, 3, false)),
        // Which check comes first: TTL / hop limit before the MTU.
        ("udp4_over_mtu_df_ttl1", udp4(SRC_V4, DST2_V4, 1000, 53).ttl(1).len(1400).build()),
        ("udp6_over_mtu_hl1", udp6(SRC_V6, DST2_V6, 1000, 53).ttl(1).len(1400).build()),
        ("opt4_record_route_ttl1", with_ttl(ip_opt(&[1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0]), 1)),
        ("opt4_to_us_nops", ip_opt_us(&[1, 1, 1, 1])),
        ("v4_df_and_mf_through", as_ipv4_fragment(udp4(SRC_V4, DST1_V4, 1, 53).len(200).build(), 0, true)),
        ("udp4_echo_src_port0", udp4(SRC_V4, IN_V4, 0, 7).build()),
        ("udp6_echo_src_port0", udp6(SRC_V6, IN_V6, 0, 7).build()),
        ("udp4_to_us_dst_port0", udp4(SRC_V4, IN_V4, 1000, 0).build()),
        ("ping4_from_subnet_broadcast", ping4([192, 0, 2, 255], IN_V4, 9, 1).build()),
        ("udp4_closed_from_subnet_broadcast", udp4([192, 0, 2, 255], IN_V4, 1000, 9999).build()),
        ("src6_ours_in0", udp6(IN_V6, DST1_V6, 1000, 53).build()),
        ("ping6_from_subnet_anycast", ping6(v6([0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 0]), IN_V6, 9, 1).build()),
        (
            "icmp6_router_advert_to_all_nodes",
            icmp6(MAC_HOST, m6mac, LL_HOST_V6, v6([0xff02, 0, 0, 0, 0, 0, 0, 1]), 255, 134, 0, &[64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        ),
        ("icmp6_dest_unreach_to_us", icmp6(MAC_HOST, MAC_IN, SRC_V6, IN_V6, 64, 1, 0, &[0; 52])),
        ("icmp4_dest_unreach_to_us", icmp4(SRC_V4, IN_V4, 3, 1, [0; 4], &[0x45; 28])),
        ("tcp4_rst_to_us", set_byte(tcp4(SRC_V4, IN_V4, 1000, 80).build(), 47, 0x04, false)),
        ("udp6_echo_tclass_flow_label", set_u16(udp6(SRC_V6, IN_V6, 1033, 7).tos(0xb8).build(), 16, 0x2345, false)),
        ("ping6_subnet_anycast_out1", ping6(SRC_V6, v6([0x2001, 0xdb8, 2, 0, 0, 0, 0, 0]), 32, 1).build()),
        // A subnet's broadcast address as a source is no address of ours: forwarded.
        ("src4_subnet_broadcast_in0", udp4([192, 0, 2, 255], DST1_V4, 1000, 53).build()),
        ("src4_subnet_broadcast_out1", udp4([198, 51, 100, 255], DST1_V4, 1000, 53).build()),
        // No error answers a frame that was not sent to our MAC alone.
        ("udp4_to_us_closed_l2_broadcast", udp4(SRC_V4, IN_V4, 1000, 9999).dst_mac(MAC_BCAST).build()),
        ("udp6_to_us_closed_l2_multicast", udp6(SRC_V6, IN_V6, 1000, 9999).dst_mac(m6mac).build()),
        // Fragments to us: held for reassembly (no answer); an atomic IPv6 fragment is whole.
        ("v4_later_fragment_to_us", as_ipv4_fragment(ping4(SRC_V4, IN_V4, 9, 1).df(false).build(), 10, false)),
        ("v6_first_fragment_to_us", with_ipv6_fragment(ping6(SRC_V6, IN_V6, 9, 1).build(), 0, true, 9)),
        ("v6_atomic_fragment_ping_to_us", with_ipv6_fragment(ping6(SRC_V6, IN_V6, 9, 1).build(), 0, false, 9)),
        // No route, and an error about it only if the packet is no ICMPv6 error as far as the
        // kernel's walk of the extension headers by their lengths can tell (is_ineligible).
        ("ext6_icmp6_past_end_no_route", ext6_past_end(ping6(SRC_V6, NOROUTE_V6, 21, 1).build())),
        ("ext6_udp_past_end_no_route", ext6_past_end(udp6(SRC_V6, NOROUTE_V6, 1021, 53).build())),
        ("ext6_no_next_header_no_route", with_ipv6_ext(raw6(SRC_V6, NOROUTE_V6, 59).build(), 60, &[1, 4, 0, 0, 0, 0])),
        ("v6_first_fragment_icmp6_cut_no_route", fragment6_cut(ping6(SRC_V6, NOROUTE_V6, 22, 1).build(), true)),
        ("v6_atomic_fragment_icmp6_cut_no_route", fragment6_cut(ping6(SRC_V6, NOROUTE_V6, 23, 1).build(), false)),
        // An atomic fragment is whole (ipv6_frag_rcv): what follows its header is processed.
        ("v6_atomic_fragment_unknown_proto_to_us", with_ipv6_fragment(raw6(SRC_V6, IN_V6, 108).build(), 0, false, 11)),
        (
            "v6_atomic_fragment_dest_opts_unknown_icmp_to_us",
            with_ipv6_fragment(with_ipv6_ext(ping6(SRC_V6, IN_V6, 13, 1).build(), 60, &[0xbe, 4, 0, 0, 0, 0]), 0, false, 13),
        ),
        ("v6_first_fragment_cut_to_us", fragment6_cut(ping6(SRC_V6, IN_V6, 12, 1).build(), true)),
        // A first fragment whose UDP header, after destination options, is missing.
        ("v6_first_fragment_udp_cut_after_dest_opts_to_us", {
            let mut f = with_ipv6_fragment(with_ipv6_ext(udp6(SRC_V6, IN_V6, 1014, 7).build(), 60, &[1, 4, 0, 0, 0, 0]), 0, true, 17);
            f.truncate(14 + 40 + 16);
            f[18..20].copy_from_slice(&16u16.to_be_bytes());
            f
        }),
        // A fragment header after an atomic one (ipv6_frag_rcv: IP6SKB_FRAGMENTED is set).
        (
            "v6_two_atomic_fragments_to_us",
            with_ipv6_fragment(with_ipv6_fragment(ping6(SRC_V6, IN_V6, 24, 1).build(), 0, false, 24), 0, false, 25),
        ),
        (
            "v6_atomic_then_first_fragment_to_us",
            with_ipv6_fragment(with_ipv6_fragment(ping6(SRC_V6, IN_V6, 26, 1).build(), 0, true, 26), 0, false, 27),
        ),
        (
            "v6_atomic_then_later_fragment_to_us",
            with_ipv6_fragment(with_ipv6_fragment(ping6(SRC_V6, IN_V6, 28, 1).build(), 3, false, 28), 0, false, 29),
        ),
        ("v6_fragment_header_cut_to_us", {
            let mut f = raw6(SRC_V6, IN_V6, 44).build();
            f.truncate(14 + 44);
            f[18..20].copy_from_slice(&4u16.to_be_bytes());
            pad(f)
        }),
        ("v6_fragment_not_multiple_of_8_to_us", {
            let mut f = with_ipv6_fragment(raw6(SRC_V6, IN_V6, 253).build(), 0, true, 15);
            f.truncate(14 + 49);
            f[18..20].copy_from_slice(&9u16.to_be_bytes());
            pad(f)
        }),
        ("v6_fragment_ending_at_65535_to_us", {
            let mut f = with_ipv6_fragment(ping6(SRC_V6, IN_V6, 30, 1).build(), 8191, false, 30);
            f.truncate(14 + 55);
            f[18..20].copy_from_slice(&15u16.to_be_bytes());
            pad(f)
        }),
        ("v6_fragment_past_65535_to_us", {
            let mut f = with_ipv6_fragment(ping6(SRC_V6, IN_V6, 20, 1).build(), 8191, false, 20);
            f.truncate(14 + 56);
            f[18..20].copy_from_slice(&16u16.to_be_bytes());
            f
        }),
        ("v6_fragment_header_cut_after_dest_opts_to_us", {
            let mut f = raw6(SRC_V6, IN_V6, 44).build();
            f.truncate(14 + 44);
            f[18..20].copy_from_slice(&4u16.to_be_bytes());
            with_ipv6_ext(f, 60, &[1, 4, 0, 0, 0, 0])
        }),
        ("v6_later_fragment_icmp6_no_route", {
            let mut f = with_ipv6_fragment(ping6(SRC_V6, NOROUTE_V6, 24, 1).build(), 10, false, 24);
            f[62] = 1;
            f
        }),
    ];
    c.sort_by_key(|(n, _)| *n);
    c
}

/// Another link-local station on in0's link (in the kernel's neighbour table only: sluice
/// never forwards to a link-local destination, and the kernel would resolve it otherwise).
const LL_OTHER_V6: [u8; 16] = v6([0xfe80, 0, 0, 0, 0, 0, 0, 9]);

/// out2's MTU on both sides: IPv6's minimum (the kernel turns IPv6 off on a smaller link).
const KERNEL_OUT2_MTU: u16 = 1280;

/// A link-local address of the host behind in0 (both routers know its MAC).
const LL_HOST_V6: [u8; 16] = v6([0xfe80, 0, 0, 0, 0, 0, 0, 0xaa]);

/// An unsolicited neighbour advertisement (override) from (mac, addr) to `dst`, with its
/// target link-layer address option.
fn neighbour_advert(mac: [u8; 6], addr: [u8; 16], dst: [u8; 16]) -> Vec<u8> {
    icmp6(mac, MAC_IN, addr, dst, 255, 136, 0, &[[0x20u8, 0, 0, 0].as_slice(), &addr, &[2, 1], &mac].concat())
}

/// A neighbour solicitation from the host for `target`, sent to `target` itself (a
/// reachability probe, not to the solicited-node group).
fn unicast_solicit(target: [u8; 16]) -> Vec<u8> {
    let body = [[0u8, 0, 0, 0].as_slice(), &target, &[1, 1], &MAC_HOST].concat();
    icmp6(MAC_HOST, MAC_IN, HOST_V6, target, 255, 135, 0, &body)
}

/// An IPv4 packet to `dst` whose ICMP message is just `icmp` (shorter than a header, say),
/// in a frame padded to the Ethernet minimum.
fn icmp4_short(src: [u8; 4], dst: [u8; 4], icmp: &[u8]) -> Vec<u8> {
    let mut f = raw4(src, dst, 1).build();
    f[34..].fill(0);
    f[34..34 + icmp.len()].copy_from_slice(icmp);
    set_u16(f, 16, (20 + icmp.len()) as u16, true)
}

fn pad_to(mut f: Vec<u8>, n: usize) -> Vec<u8> {
    f.resize(n, 0);
    f
}

fn set_byte(mut f: Vec<u8>, at: usize, v: u8, ip_csum: bool) -> Vec<u8> {
    f[at] = v;
    if ip_csum {
        fix_ip_checksum(&mut f);
    }
    f
}

fn set_u16(mut f: Vec<u8>, at: usize, v: u16, ip_csum: bool) -> Vec<u8> {
    f[at..at + 2].copy_from_slice(&v.to_be_bytes());
    if ip_csum {
        fix_ip_checksum(&mut f);
    }
    f
}

fn with_ttl(f: Vec<u8>, ttl: u8) -> Vec<u8> {
    set_byte(f, 22, ttl, true)
}

fn with_hop_limit6(mut f: Vec<u8>, hl: u8) -> Vec<u8> {
    f[21] = hl;
    f
}

/// A type 0 routing header body (after next header / length): type 0, segments left, 4
/// reserved bytes, one address.
fn rh0(segments_left: u8, addr: [u8; 16]) -> Vec<u8> {
    let mut b = vec![0, segments_left, 0, 0, 0, 0];
    b.extend_from_slice(&addr);
    b
}

/// A destination-options header whose length runs past the packet's end.
fn truncated_ext6(f: Vec<u8>) -> Vec<u8> {
    let mut f = with_ipv6_ext(f, 60, &[1, 4, 0, 0, 0, 0]);
    f[55] = 200;
    f
}

// ---------------------------------------------------------------------------------------
// Fates
// ---------------------------------------------------------------------------------------

/// What the router sent in answer to one frame: per port (in0, out1, out2), the frames in
/// order, normalized.
type Fate = [Vec<Vec<u8>>; 3];

const OUR_V4: [[u8; 4]; 3] = [IN_V4, OUT1_V4, OUT2_V4];

/// Trims Ethernet padding (to the ARP / IP length) and blanks the IPv4 identification and
/// header checksum of packets the router originated.
fn normalize(mut f: Vec<u8>) -> Vec<u8> {
    let Some(l3) = l3_offset(&f) else { return f };
    let len = match ethertype(&f) {
        0x0800 if f.len() >= l3 + 20 => {
            if OUR_V4.iter().any(|a| f[l3 + 12..l3 + 16] == a[..]) {
                f[l3 + 4..l3 + 6].fill(0);
                f[l3 + 10..l3 + 12].fill(0);
                normalize_timestamp_reply(&mut f[l3..]);
            }
            l3 + u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]) as usize
        }
        0x86dd if f.len() >= l3 + 40 => l3 + 40 + u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]) as usize,
        0x0806 => l3 + 28,
        _ => f.len(),
    };
    f.truncate(len.max(14));
    f
}

/// As `normalize` does for the router's addresses, for packets the router sends from the
/// configured local route 10.88/16 (phase two only): the IP ID and checksum are each
/// router's own.
fn blank_local_route_ids(mut f: Vec<u8>) -> Vec<u8> {
    if let Some(l3) = l3_offset(&f).filter(|&l3| ethertype(&f) == 0x0800 && f.len() >= l3 + 20) {
        if f[l3 + 12..l3 + 14] == [10, 88] {
            f[l3 + 4..l3 + 6].fill(0);
            f[l3 + 10..l3 + 12].fill(0);
        }
    }
    f
}

/// A timestamp reply's receive and transmit times are clocks: checked to be equal, to lie
/// within the day and to be covered by a valid checksum, then blanked (checksum too).
fn normalize_timestamp_reply(ip: &mut [u8]) {
    let ihl = (ip[0] & 0xf) as usize * 4;
    if ip[9] != 1 {
        return;
    }
    let Some(icmp) = ip.get_mut(ihl..ihl + 20) else { return };
    if icmp[0] != 14 {
        return;
    }
    assert_eq!(sluice::wire::checksum::checksum(icmp), 0, "timestamp reply checksum");
    assert_eq!(icmp[12..16], icmp[16..20], "receive and transmit times");
    assert!(u32::from_be_bytes([icmp[12], icmp[13], icmp[14], icmp[15]]) < 86_400_000, "milliseconds since midnight");
    icmp[2..4].fill(0);
    icmp[12..20].fill(0);
}

/// One line per frame for the report: port, a short description, the bytes.
fn describe(fate: &Fate) -> String {
    let mut s = String::new();
    for (p, frames) in fate.iter().enumerate() {
        for f in frames {
            s.push_str(&format!("\n      {}: {} {}", ["in0", "out1", "out2"][p], summary(f), hexall(f)));
        }
    }
    if s.is_empty() {
        s.push_str(" dropped (nothing sent)");
    }
    s
}

fn summary(f: &[u8]) -> String {
    let Some(l3) = l3_offset(f) else { return "runt".into() };
    let ip = &f[l3..];
    match ethertype(f) {
        0x0800 if ip.len() >= 20 => {
            let ihl = (ip[0] & 0xf) as usize * 4;
            let own = OUR_V4.iter().any(|a| ip[12..16] == a[..]);
            if ip[9] == 1 && ip.len() > ihl + 1 && own {
                format!("ICMP {}/{} ({} bytes)", ip[ihl], ip[ihl + 1], ip.len())
            } else {
                format!("{} proto {} ({} bytes)", if own { "originated" } else { "forwarded" }, ip[9], ip.len())
            }
        }
        0x86dd if ip.len() >= 40 => {
            if ip[6] == 58 && ip.len() > 41 {
                format!("ICMPv6 {}/{} ({} bytes)", ip[40], ip[41], ip.len())
            } else {
                format!("IPv6 nh {} ({} bytes)", ip[6], ip.len())
            }
        }
        0x0806 => "ARP".into(),
        t => format!("ethertype {t:#06x}"),
    }
}

fn hexall(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Frames the kernel sends on its own that no test frame caused: MLD reports, router
/// solicitations, neighbour reachability probes, IGMP.
fn is_noise(f: &[u8]) -> bool {
    let Some(l3) = l3_offset(f) else { return false };
    let ip = &f[l3..];
    match ethertype(f) {
        0x86dd if ip.len() >= 48 => {
            let (mut nh, mut off) = (ip[6], 40);
            if nh == 0 {
                nh = ip[40];
                off += (ip[41] as usize + 1) * 8;
            }
            // Also a neighbour solicitation to a unicast address: the kernel's NUD probe of a
            // neighbour gone stale, whenever its timers say (resolution goes to multicast).
            let nud_probe = |t: &u8| *t == 135 && ip[24] != 0xff;
            nh == 58 && ip.get(off).is_some_and(|t| matches!(t, 130..=133 | 143) || nud_probe(t))
        }
        0x0800 if ip.len() >= 20 => ip[9] == 2,
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// sluice
// ---------------------------------------------------------------------------------------

fn sluice_setup() -> Setup {
    let mut s = Setup { out2_mtu: KERNEL_OUT2_MTU, ..Setup::default() };
    s.tun.icmp_ratelimit = 0;
    s.tun.icmpv6_ratelimit = 0;
    // As the kernel router's sysctls below (0 per second would send no error at all).
    s.tun.icmp_msgs_per_sec = 1_000_000;
    s.tun.icmp_msgs_burst = 1_000_000;
    s
}

/// Runs one frame through sluice (both receive modes, which must agree) and returns its fate.
fn sluice_fate(frame: &[u8]) -> Fate {
    sluice_fate_in(frame, &sluice_setup())
}

fn sluice_fate_in(frame: &[u8], setup: &Setup) -> Fate {
    let o = run_both(&[frame.to_vec()], setup);
    let port = |p: usize| o.port(p).iter().cloned().map(normalize).collect();
    [port(P_IN), port(P_OUT1), port(P_OUT2)]
}

// ---------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------

fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0]).args(&args[1..]).output().map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

fn mac_str(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn v4_str(a: [u8; 4]) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

fn v6_str(a: [u8; 16]) -> String {
    std::net::Ipv6Addr::from(a).to_string()
}

/// The two namespaces; removed (with their veths) when dropped, on every exit path that
/// unwinds.
struct Netns {
    router: String,
    hosts: String,
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.router]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.hosts]).status();
    }
}

/// Namespaces an earlier run of this test left behind when it was killed (no unwinding): their
/// names carry the pid of a process that is gone.
fn remove_stale_namespaces() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else { return };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.strip_prefix("sldiff-r").or_else(|| name.strip_prefix("sldiff-h"));
        if let Some(pid) = pid.filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let _ = Command::new("ip").args(["netns", "del", &name]).output();
            }
        }
    }
}

/// Builds the kernel router of `tests/common` in namespace R, peers in H.
fn kernel_router() -> Result<Netns, String> {
    remove_stale_namespaces();
    let pid = std::process::id();
    let ns = Netns { router: format!("sldiff-r{pid}"), hosts: format!("sldiff-h{pid}") };
    let (r, h) = (ns.router.as_str(), ns.hosts.as_str());
    let _ = Command::new("ip").args(["netns", "del", r]).output();
    let _ = Command::new("ip").args(["netns", "del", h]).output();
    sh(&["ip", "netns", "add", r])?;
    sh(&["ip", "netns", "add", h])?;
    let sysctl = |ns: &str, kv: &str| sh(&["ip", "netns", "exec", ns, "sysctl", "-q", "-w", kv]);
    // The hosts' side: no IPv6 and no forwarding, so it sends nothing of its own.
    for kv in ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1", "net.ipv4.ip_forward=0"] {
        sysctl(h, kv)?;
    }
    // The router: forwarding on, ICMP limits off, quiet IPv6 (no DAD, RS, RA, flow labels),
    // no reverse-path filter (sluice has none), ARP answered for the receiving port's
    // addresses only (sluice's arp_ignore=1 behaviour).
    for kv in [
        "net.ipv4.ip_forward=1",
        "net.ipv4.icmp_ratelimit=0",
        "net.ipv4.icmp_ratemask=0",
        "net.ipv4.icmp_msgs_per_sec=1000000",
        "net.ipv4.icmp_msgs_burst=1000000",
        "net.ipv6.icmp.ratelimit=0",
        "net.ipv6.auto_flowlabels=0",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        "net.ipv4.conf.all.arp_ignore=1",
        "net.ipv4.conf.all.accept_source_route=0",
        "net.ipv4.conf.all.send_redirects=0",
        "net.ipv4.conf.default.send_redirects=0",
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv6.conf.default.forwarding=1",
        "net.ipv6.conf.all.accept_dad=0",
        "net.ipv6.conf.default.accept_dad=0",
        "net.ipv6.conf.default.dad_transmits=0",
        "net.ipv6.conf.default.accept_ra=0",
        "net.ipv6.conf.default.router_solicitations=0",
    ] {
        sysctl(r, kv)?;
    }
    // Locally made packets leave veth with their checksum unfinished (offload): a capture
    // would read a partial sum. A real NIC finishes it; here the kernel must.
    let ports = [("in0", MAC_IN, MAC_HOST, 1500u16), ("out1", MAC_OUT1, MAC_NH1, 1500), ("out2", MAC_OUT2, MAC_NH2, KERNEL_OUT2_MTU)];
    for (name, mac, peer_mac, mtu) in ports {
        let peer = format!("{name}p");
        let (mac, peer_mac, mtu) = (mac_str(mac), mac_str(peer_mac), mtu.to_string());
        sh(&[
            "ip", "link", "add", name, "netns", r, "address", &mac, "mtu", &mtu, "type", "veth", "peer", "name", &peer, "netns", h,
            "address", &peer_mac,
        ])?;
        // The peers take anything the router sends (veth drops frames over the receiver's MTU).
        sh(&["ip", "-n", h, "link", "set", &peer, "mtu", "9000", "up"])?;
        sh(&["ip", "netns", "exec", r, "ethtool", "-K", name, "tx", "off"])?;
    }
    let v4s = [("in0", IN_V4), ("out1", OUT1_V4), ("out2", OUT2_V4)];
    let v6s = [("in0", IN_V6), ("out1", OUT1_V6), ("out2", OUT2_V6)];
    for (dev, a) in v4s {
        sh(&["ip", "-n", r, "addr", "add", &format!("{}/24", v4_str(a)), "dev", dev])?;
    }
    for (dev, a) in v6s {
        sh(&["ip", "-n", r, "addr", "add", &format!("{}/64", v6_str(a)), "dev", dev, "nodad"])?;
    }
    for (dev, _) in v4s {
        sh(&["ip", "-n", r, "link", "set", dev, "up"])?;
    }
    let neigh4 = [("in0", HOST_V4, MAC_HOST), ("out1", NH1_V4, MAC_NH1), ("out2", NH2_V4, MAC_NH2)];
    let neigh6 = [
        ("in0", HOST_V6, MAC_HOST),
        ("out1", NH1_V6, MAC_NH1),
        ("out2", NH2_V6, MAC_NH2),
        ("in0", LL_HOST_V6, MAC_HOST),
        ("in0", LL_OTHER_V6, MAC_OTHER),
    ];
    for (dev, a, m) in neigh4 {
        sh(&["ip", "-n", r, "neigh", "replace", &v4_str(a), "lladdr", &mac_str(m), "dev", dev, "nud", "permanent"])?;
    }
    for (dev, a, m) in neigh6 {
        sh(&["ip", "-n", r, "-6", "neigh", "replace", &v6_str(a), "lladdr", &mac_str(m), "dev", dev, "nud", "permanent"])?;
    }
    let routes: [&[&str]; 10] = [
        &["198.18.0.0/15", "via", "192.0.2.2", "dev", "in0"],
        &["10.1.0.0/16", "via", "198.51.100.2", "dev", "out1"],
        &["10.2.0.0/16", "via", "203.0.113.2", "dev", "out2"],
        &["blackhole", "10.66.0.0/16"],
        &["unreachable", "10.77.0.0/16"],
        &["2001:db8:ff::/48", "via", "2001:db8:1::2", "dev", "in0"],
        &["2001:db8:a1::/48", "via", "2001:db8:2::2", "dev", "out1"],
        &["2001:db8:a2::/48", "via", "2001:db8:3::2", "dev", "out2"],
        &["blackhole", "2001:db8:66::/48"],
        &["unreachable", "2001:db8:77::/48"],
    ];
    for rt in routes {
        let mut args = vec!["ip", "-n", r, "route", "add"];
        args.extend_from_slice(rt);
        sh(&args)?;
    }
    Ok(ns)
}

/// Runs `f` on a thread that entered network namespace `ns` (sockets it makes stay there).
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        use std::os::fd::AsRawFd;
        // SAFETY: setns on this thread only, with a valid namespace file descriptor.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
        }
        Ok(f())
    })
    .join()
    .map_err(|_| "namespace thread panicked".to_string())?
}

/// An AF_PACKET socket bound to one interface (all protocols), non-blocking.
struct PacketSocket {
    fd: libc::c_int,
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this value owns.
        unsafe { libc::close(self.fd) };
    }
}

impl PacketSocket {
    fn open(ifname: &str) -> Result<PacketSocket, String> {
        let proto = (libc::ETH_P_ALL as u16).to_be() as libc::c_int;
        // Protocol 0 at socket(), ETH_P_ALL at bind(): opened with ETH_P_ALL a packet socket
        // receives from every interface of the namespace until bind() narrows it to one.
        // SAFETY: plain socket(2) call.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0) };
        if fd < 0 {
            return Err(format!("AF_PACKET socket: {}", std::io::Error::last_os_error()));
        }
        let s = PacketSocket { fd };
        let name = std::ffi::CString::new(ifname).unwrap();
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(format!("no interface {ifname}"));
        }
        // SAFETY: sockaddr_ll is plain data; zero is a valid value for every field.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto as u16;
        sll.sll_ifindex = ifindex as i32;
        let len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: sll is a valid sockaddr_ll of `len` bytes.
        if unsafe { libc::bind(fd, &sll as *const _ as *const libc::sockaddr, len) } != 0 {
            return Err(format!("bind {ifname}: {}", std::io::Error::last_os_error()));
        }
        Ok(s)
    }

    fn send(&self, frame: &[u8]) -> Result<(), String> {
        // SAFETY: frame is a valid buffer of frame.len() bytes.
        let n = unsafe { libc::send(self.fd, frame.as_ptr() as *const libc::c_void, frame.len(), 0) };
        if n as usize != frame.len() {
            return Err(format!("send: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// The next frame the interface received (not one it sent), if one is queued.
    fn recv(&self) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 65_536];
        loop {
            // SAFETY: sockaddr_ll is plain data.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: buf and sll are valid for the sizes given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd,
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    0,
                    &mut sll as *mut _ as *mut libc::sockaddr,
                    &mut len,
                )
            };
            if n < 0 {
                return None;
            }
            if sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Some(buf[..n as usize].to_vec());
        }
    }
}

struct Kernel {
    _ns: Netns,
    /// Packet sockets on the peers of in0, out1, out2.
    peers: Vec<PacketSocket>,
}

impl Kernel {
    fn new() -> Result<Kernel, String> {
        let ns = kernel_router()?;
        let peers =
            in_netns(&ns.hosts, || ["in0p", "out1p", "out2p"].iter().map(|n| PacketSocket::open(n)).collect::<Result<Vec<_>, _>>())??;
        let k = Kernel { _ns: ns, peers };
        // Let the interfaces settle (link-up MLD reports), then start from empty queues.
        std::thread::sleep(Duration::from_millis(300));
        k.drain();
        Ok(k)
    }

    fn drain(&self) -> Fate {
        let mut fate: Fate = Default::default();
        for (p, s) in self.peers.iter().enumerate() {
            while let Some(f) = s.recv() {
                if !is_noise(&f) {
                    fate[p].push(normalize(f));
                }
            }
        }
        fate
    }

    /// Injects `frame` on in0 and collects what comes out until 40 ms pass without a frame
    /// (at most 500 ms in all).
    fn fate(&self, frame: &[u8]) -> Result<Fate, String> {
        self.peers[P_IN].send(frame)?;
        Ok(self.collect())
    }

    fn collect(&self) -> Fate {
        let mut fate: Fate = Default::default();
        let (start, mut last) = (Instant::now(), Instant::now());
        while last.elapsed() < Duration::from_millis(40) && start.elapsed() < Duration::from_millis(500) {
            let got = self.drain();
            if got.iter().any(|p| !p.is_empty()) {
                last = Instant::now();
                for (p, g) in got.into_iter().enumerate() {
                    fate[p].extend(g);
                }
            } else {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        fate
    }
}

/// A UDP echo service on port 7 in the router namespace, as sluice has (both families).
fn udp_echo(ns: &str, stop: Arc<AtomicBool>) -> Result<std::thread::JoinHandle<()>, String> {
    let sock = in_netns(ns, || std::net::UdpSocket::bind("[::]:7"))?.map_err(|e| format!("bind udp 7: {e}"))?;
    sock.set_read_timeout(Some(Duration::from_millis(20))).map_err(|e| e.to_string())?;
    Ok(std::thread::spawn(move || {
        let mut buf = [0u8; 65_536];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = sock.recv_from(&mut buf) {
                let _ = sock.send_to(&buf[..n], from);
            }
        }
    }))
}

/// The tally of both phases: a case is equal, an explained difference, or a failure (a
/// difference nobody explained, or an explanation that no longer applies).
#[derive(Default)]
struct Verdicts {
    equal: usize,
    explained: usize,
    failures: Vec<String>,
}

impl Verdicts {
    fn judge(&mut self, name: &str, kernel: &Fate, sluice: &Fate, explained: Option<&str>) {
        match (kernel == sluice, explained) {
            (true, None) => self.equal += 1,
            (false, Some(_)) => self.explained += 1,
            (true, Some(why)) => self.failures.push(format!("{name}: listed as a difference ({why}) but the fates agree now: remove it")),
            (false, None) => {
                self.failures.push(format!("{name}: fates differ\n    kernel:{}\n    sluice:{}", describe(kernel), describe(sluice)))
            }
        }
    }
}

fn preconditions() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    sh(&["ip", "-V"]).map_err(|e| format!("iproute2 missing: {e}"))?;
    sh(&["sysctl", "-V"]).map_err(|e| format!("sysctl (procps) missing: {e}"))?;
    sh(&["ethtool", "--version"]).map_err(|e| format!("ethtool missing: {e}"))
}

#[test]
fn forwarding_matches_the_linux_kernel() {
    if let Err(why) = preconditions() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("the kernel differential test cannot run under CI: {why}");
        }
        eprintln!("kernel differential test skipped: {why} (it runs as root; CI=true makes this a failure)");
        return;
    }
    let kernel = Kernel::new().unwrap_or_else(|e| panic!("kernel router: {e}"));
    let stop = Arc::new(AtomicBool::new(false));
    let echo = udp_echo(&kernel._ns.router, stop.clone()).unwrap_or_else(|e| panic!("{e}"));
    let mut cases = corpus();
    // The kernel's protocol handlers are global, not per namespace: with IPsec's AH module
    // loaded on this host, AH goes to xfrm (a silent drop without an SA) instead of being
    // an unknown protocol, as it is on a host without IPsec, which is what sluice models.
    let ah_loaded: Vec<&str> = ["ah4", "ah6"].into_iter().filter(|m| std::path::Path::new(&format!("/sys/module/{m}")).exists()).collect();
    if !ah_loaded.is_empty() {
        eprintln!("kernel differential test: {ah_loaded:?} loaded on this host, the AH cases are left out");
        cases.retain(|(n, _)| !n.contains("_ah"));
    }
    let names: Vec<&str> = cases.iter().map(|(n, _)| *n).collect();
    for (n, _) in EXPLAINED {
        assert!(names.contains(n), "EXPLAINED names a case the corpus does not have: {n}");
    }
    let explained: BTreeMap<&str, &str> = EXPLAINED.iter().copied().collect();
    // The kernel's fates first. Anything it sends late (between cases) counts against the
    // case before, which makes that case differ.
    let mut kfates: Vec<Fate> = Vec::new();
    for (name, frame) in &cases {
        let late = kernel.drain();
        if let Some(prev) = kfates.last_mut() {
            for (p, l) in late.into_iter().enumerate() {
                prev[p].extend(l);
            }
        }
        kfates.push(kernel.fate(frame).unwrap_or_else(|e| panic!("{name}: {e}")));
    }
    std::thread::sleep(Duration::from_millis(100));
    for (p, l) in kernel.collect().into_iter().enumerate() {
        kfates.last_mut().unwrap()[p].extend(l);
    }
    let mut verdicts = Verdicts::default();
    for ((name, frame), k) in cases.iter().zip(kfates) {
        verdicts.judge(name, &k, &sluice_fate(frame), explained.get(name).copied());
    }
    // Then with a configured local route: the kernel validates every source by a FIB
    // lookup from then on (fib_has_custom_local_routes), so a source in that range or a
    // subnet's broadcast address is refused, where before only our own addresses were.
    let r = kernel._ns.router.as_str();
    sh(&["ip", "-n", r, "link", "set", "lo", "up"])
        .and_then(|_| sh(&["ip", "-n", r, "route", "add", "local", "10.88.0.0/16", "dev", "lo"]))
        .unwrap_or_else(|e| panic!("{e}"));
    let local_setup = Setup { local_routes_v4: vec![([10, 88, 0, 0], 16)], ..sluice_setup() };
    let local_cases = custom_local_corpus();
    kernel.drain();
    for (name, frame) in &local_cases {
        let k = kernel.fate(frame).unwrap_or_else(|e| panic!("{name}: {e}")).map(|p| p.into_iter().map(blank_local_route_ids).collect());
        let s = sluice_fate_in(frame, &local_setup).map(|p| p.into_iter().map(blank_local_route_ids).collect());
        let why = EXPLAINED_LOCAL.iter().find(|(n, _)| n == name).map(|(_, why)| *why);
        verdicts.judge(&format!("{name} (custom local route)"), &k, &s, why);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    let Verdicts { equal, explained, failures } = verdicts;
    let total = cases.len() + local_cases.len();
    eprintln!("kernel differential test: {total} cases, {equal} equal, {explained} explained differences, {} failures", failures.len());
    assert!(failures.is_empty(), "{} of {total} cases:\n{}", failures.len(), failures.join("\n"));
    // The whole corpus as one run: single and list receive agree byte for byte.
    let all: Vec<Vec<u8>> = cases.into_iter().map(|(_, f)| f).collect();
    run_both(&all, &sluice_setup());
}

/// Exploration, not run by the suite (random, and slower): one or two random bytes changed
/// in the IP part of a corpus frame (the IPv4 header checksum then fixed three times in
/// four), sent to both routers; every case whose fates differ is printed and fails the run.
/// Left out: ARP, neighbour discovery, TCP, AH, IP options and the explained cases as bases
/// (their known differences would drown the rest); ARP and neighbour solicitations the
/// router sends and the errors the kernel sends late (address unreachable after failed
/// resolution, reassembly timeouts) are taken out of both fates. A difference found becomes
/// a corpus case and a test in tests/router_kernel_rules.rs.
///
/// `SLUICE_DIFF_FUZZ=<count>[,<seed>] cargo test --release --test kernel_router_diff -- --ignored --nocapture`;
/// `SLUICE_DIFF_FRAMES=<hex>,<hex>…` sends the frames given instead and prints both fates
/// and the kernel's SNMP counters that moved.
#[test]
#[ignore = "exploration: random frames against the kernel, run by hand (see its comment)"]
fn random_frames_explore() {
    let spec = std::env::var("SLUICE_DIFF_FUZZ").unwrap_or_else(|_| "300".into());
    let mut it = spec.split(',');
    let count: usize = it.next().and_then(|s| s.parse().ok()).unwrap_or(300);
    // (xorshift stays at 0 from 0.)
    let mut seed: u64 = it.next().and_then(|s| s.parse().ok()).unwrap_or(1).max(1);
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    preconditions().unwrap();
    let kernel = Kernel::new().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let echo = udp_echo(&kernel._ns.router, stop.clone()).unwrap();
    let base: Vec<(&str, Vec<u8>)> = corpus()
        .into_iter()
        .filter(|(n, f)| {
            let t = ethertype(f);
            let options = n.starts_with("opt4") || n.contains("record_route");
            (t == 0x0800 || t == 0x86dd)
                && f.len() > 60
                && !EXPLAINED.iter().any(|e| e.0 == *n)
                && !options
                && !n.starts_with("ns_")
                && !n.starts_with("na_")
                && !n.contains("_ah")
                && !n.starts_with("tcp")
        })
        .collect();
    let strip = |mut fate: Fate| {
        for p in fate.iter_mut() {
            p.retain(|f| {
                let (t, l3) = (ethertype(f), l3_offset(f).unwrap_or(14));
                let at = |i: usize| f.get(l3 + i).copied();
                // Also the late "address unreachable" of a failed resolution (ICMP errors
                // carry no IPv4 options: the type is at 20).
                let icmp6 =
                    |ty: u8, code: u8| t == 0x86dd && at(6) == Some(58) && at(40) == Some(ty) && (code == 255 || at(41) == Some(code));
                let icmp4 = |ty: u8, code: u8| t == 0x0800 && at(9) == Some(1) && at(20) == Some(ty) && at(21) == Some(code);
                !(t == 0x0806 || icmp6(135, 255) || icmp6(1, 3) || icmp6(3, 1) || icmp4(3, 1) || icmp4(11, 1))
            });
        }
        fate
    };
    let given: Vec<Vec<u8>> = std::env::var("SLUICE_DIFF_FRAMES")
        .unwrap_or_default()
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| (0..h.len() / 2).map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap()).collect())
        .collect();
    let count = if given.is_empty() { count } else { given.len() };
    let mut diffs = 0;
    for i in 0..count {
        if let Some(f) = given.get(i) {
            let _ = kernel.drain();
            let snmp = || {
                let o = Command::new("ip")
                    .args(["netns", "exec", &kernel._ns.router, "cat", "/proc/net/snmp", "/proc/net/snmp6"])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&o.stdout).lines().map(|l| l.to_string()).collect::<Vec<_>>()
            };
            let before = snmp();
            let (k, s) = (kernel.fate(f).unwrap(), sluice_fate(f));
            let after = snmp();
            for (a, b) in before.iter().zip(&after) {
                if a != b {
                    eprintln!("  counter: {a} -> {b}");
                }
            }
            eprintln!("given #{i} {}\n  kernel:{}\n  sluice:{}", if k == s { "equal" } else { "DIFFER" }, describe(&k), describe(&s));
            diffs += usize::from(k != s);
            continue;
        }
        let (name, f) = &base[(rnd() % base.len() as u64) as usize];
        let mut f = f.clone();
        let l3 = l3_offset(&f).unwrap_or(14);
        let span = (f.len() - l3).min(72);
        let nmut = 1 + (rnd() % 2) as usize;
        let mut what = String::new();
        for _ in 0..nmut {
            let at = l3 + (rnd() % span as u64) as usize;
            let v = rnd() as u8;
            what.push_str(&format!(" [{at}]={v:#04x}"));
            f[at] = v;
        }
        let fixed = ethertype(&f) == 0x0800 && rnd() % 4 != 0;
        if fixed {
            fix_ip_checksum(&mut f);
        }
        let _ = kernel.drain();
        let k = strip(kernel.fate(&f).unwrap());
        let s = strip(sluice_fate(&f));
        if k != s {
            diffs += 1;
            eprintln!(
                "#{i} {name}{what}{}\n  frame {}\n  kernel:{}\n  sluice:{}",
                if fixed { " (ip csum fixed)" } else { "" },
                hexall(&f),
                describe(&k),
                describe(&s)
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    eprintln!("random frames: {count} sent, {diffs} differ");
    assert_eq!(diffs, 0, "fates differ (printed above)");
}
