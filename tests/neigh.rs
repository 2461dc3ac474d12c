//! Neighbour resolution on a link (ARP and NDP): packets for an unknown on-link neighbour
//! wait while requests go out and leave, in order, once it answers; unanswered requests
//! fail the packets after `mcast_solicit` probes; learned entries age out after unanswered
//! unicast probes; `arp_notify` / `ndisc_notify` announce our addresses at start. The router
//! of tests/common (in0 on 192.0.2.0/24 and 2001:db8:1::/64), driven round by round.

mod common;

use common::*;
use sluice::buf::Pool;
use sluice::datapath::Datapath;
use sluice::napi::softirq_round;
use sluice::stats::DropReason;
use sluice::wire::{ArpPacket, EthernetFrame, Ipv4Packet, Ipv6Packet};
use std::time::{Duration, Instant};

/// On in0's link, unknown to the router.
const PEER_V4: [u8; 4] = [192, 0, 2, 77];
const PEER_V6: [u8; 16] = v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x77]);
const MAC_PEER: [u8; 6] = MAC_OTHER;

/// Runs rounds until `done` says so (or 5 s pass: the assertions after it then fail with
/// what happened), checks the ledger, then drains and checks it again.
fn rounds_until(dp: &mut Datapath, expected_rx: usize, mut done: impl FnMut(&Datapath) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done(dp) && Instant::now() < deadline {
        let Datapath { net, workers } = dp;
        if softirq_round(net, &mut workers[0]) == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    // Before the shutdown drops what still waits (and resets the count of waiting packets),
    // the ledger must hold with them in flight.
    assert_eq!(dp.conservation(), Ok(()), "{:?}", dp.counters());
    finish(dp, expected_rx);
}

fn out(dp: &Datapath, port: usize) -> Vec<Vec<u8>> {
    dp.ports().nth(port).and_then(|p| p.captured()).expect("test ports capture").to_vec()
}

fn is_arp(f: &[u8]) -> bool {
    f[12..14] == [8, 6]
}

/// (operation, destination MAC, sender IP, target IP) of an ARP frame.
fn arp_fields(f: &[u8]) -> (u16, [u8; 6], [u8; 4], [u8; 4]) {
    let eth = EthernetFrame::new_checked(f).unwrap();
    let a = ArpPacket::new_checked(eth.payload()).unwrap();
    (a.operation(), eth.dst(), a.sender_ip(), a.target_ip())
}

fn icmp6_type(f: &[u8]) -> Option<u8> {
    (f[12..14] == [0x86, 0xdd] && f[20] == 58).then(|| f[54])
}

/// An advertisement from the peer for itself (solicited, override), to our address.
fn peer_advertisement() -> Vec<u8> {
    let mut body = vec![0x60, 0, 0, 0];
    body.extend_from_slice(&PEER_V6);
    body.extend_from_slice(&[2, 1]);
    body.extend_from_slice(&MAC_PEER);
    icmp6(MAC_PEER, MAC_IN, PEER_V6, IN_V6, 255, 136, 0, &body)
}

/// ip_forward / ip6_forward decide TTL before the neighbour is looked at: a TTL-1 packet to a
/// neighbour not resolved yet is answered with time exceeded at once, not held for an ARP or
/// NDP answer that would end it as neigh_failed (and no probe goes out for it).
#[test]
fn ttl_is_checked_before_an_unresolved_neighbour_holds_the_packet() {
    let frames = vec![udp4(SRC_V4, PEER_V4, 5, 9).ttl(1).build(), udp6(SRC_V6, PEER_V6, 5, 9).ttl(1).build()];
    for listified in [false, true] {
        let pool = Pool::new(256).unwrap();
        let mut dp = build_router(frames.clone(), &Setup::default().listified(listified), &pool);
        rounds_until(&mut dp, frames.len(), |dp| dp.counters().tx >= 2);
        let c = dp.counters();
        assert_eq!(c.nonzero_drops(), vec![("ip_ttl_expired", 2)], "listified {listified}");
        assert_eq!(c.neigh_probes, 0, "nothing to resolve for a packet that cannot be forwarded");
        let sent = out(&dp, P_IN);
        assert_icmp4_error(&sent[0], 11, 0, IN_V4, &frames[0]);
        assert_icmp6_error(&sent[1], 3, 0, IN_V6, &frames[1]);
    }
}

/// RFC 4861 §7.1.2 (ndisc_rcv / ndisc_recv_na): an advertisement that was not sent on the link
/// (hop limit below 255), has a code, names a multicast target or is "solicited" to a
/// multicast address teaches nothing and is ignored, even while the router is asking for
/// that neighbour; a valid one answers the question (the held packet leaves to its MAC).
#[test]
fn only_a_valid_neighbour_advertisement_teaches_a_mac() {
    let body = |target: [u8; 16], flags: u8| [[flags, 0, 0, 0].as_slice(), &target, &[2, 1], &MAC_PEER].concat();
    const ALL_NODES: [u8; 16] = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let waiting = udp6(SRC_V6, PEER_V6, 5, 9).build();
    let invalid = vec![
        waiting.clone(),
        icmp6(MAC_PEER, MAC_IN, PEER_V6, IN_V6, 64, 136, 0, &body(PEER_V6, 0x60)), // routed to us
        icmp6(MAC_PEER, MAC_IN, PEER_V6, IN_V6, 255, 136, 1, &body(PEER_V6, 0x60)), // a code
        icmp6(MAC_PEER, MAC_IN, PEER_V6, IN_V6, 255, 136, 0, &body(ALL_NODES, 0x20)), // multicast target
        icmp6(MAC_PEER, MAC_IN, PEER_V6, ALL_NODES, 255, 136, 0, &body(PEER_V6, 0x60)), // solicited, multicast
    ];
    for listified in [false, true] {
        let pool = Pool::new(256).unwrap();
        let mut dp = build_router(invalid.clone(), &Setup::default().listified(listified), &pool);
        rounds_until(&mut dp, invalid.len(), |dp| dp.counters().rx >= 5);
        let c = dp.counters();
        // The held packet, never answered, dies when the run ends.
        assert_eq!(c.nonzero_drops(), vec![("neigh_dead", 1), ("icmp_ignored", 4)], "listified {listified}");
        assert_eq!(dp.workers[0].neigh.v6.get(&(P_IN as u16, PEER_V6)), None, "nothing learned");
        let valid = vec![waiting.clone(), icmp6(MAC_PEER, MAC_IN, PEER_V6, ALL_NODES, 255, 136, 0, &body(PEER_V6, 0x20))];
        let mut dp = build_router(valid, &Setup::default().listified(listified), &pool);
        rounds_until(&mut dp, 2, |dp| dp.counters().tx >= 2);
        assert_eq!(dp.workers[0].neigh.v6.get(&(P_IN as u16, PEER_V6)), Some(&MAC_PEER), "an unsolicited override answers");
        let sent = out(&dp, P_IN);
        assert_eq!(&sent.last().expect("the held packet")[0..6], &MAC_PEER, "the held packet left to the MAC it taught");
    }
}

/// arp_process and ndisc_recv_na look a reply's or advertisement's sender up without
/// creating it (`arp_accept` = 0, `accept_untracked_na` = 0): answers nobody asked for make
/// no entry (a host on the link cannot fill the table, or redirect traffic for an address
/// the router never talked to), and are consumed. A neighbour the router knows (it asked
/// us first, which made its entry) is updated by them: its new MAC is used from then on.
#[test]
fn answers_nobody_asked_for_make_no_entry_but_update_known_neighbours() {
    const MAC_NEW: [u8; 6] = [2, 0, 0, 0, 0x77, 0x77];
    let na =
        |mac: [u8; 6]| icmp6(mac, MAC_IN, PEER_V6, IN_V6, 255, 136, 0, &[[0x20u8, 0, 0, 0].as_slice(), &PEER_V6, &[2, 1], &mac].concat());
    let unsolicited = vec![arp(2, MAC_IN, MAC_PEER, PEER_V4, MAC_IN, IN_V4), na(MAC_PEER)];
    for listified in [false, true] {
        let pool = Pool::new(256).unwrap();
        let setup = Setup::default().listified(listified);
        let mut dp = build_router(unsolicited.clone(), &setup, &pool);
        rounds_until(&mut dp, 2, |dp| dp.counters().rx >= 2);
        let c = dp.counters();
        assert!(c.nonzero_drops().is_empty(), "{:?}", c.nonzero_drops());
        assert_eq!((c.local, c.tx), (2, 0), "consumed, unanswered");
        let w = &dp.workers[0];
        assert_eq!(w.neigh.v4.get(&(P_IN as u16, PEER_V4)), None, "no entry from an unasked ARP reply");
        assert_eq!(w.neigh.v6.get(&(P_IN as u16, PEER_V6)), None, "no entry from an unasked advertisement");
        let ages = dp.net.neigh_ages.lock().unwrap();
        assert_eq!((ages.learned(false), ages.learned(true)), (0, 0), "nothing in the shared table");
        drop(ages);

        // The peer asks first (an ARP request, a solicitation): its entries exist. Then it
        // answers with a new MAC, and a packet to it goes there.
        let ns = icmp6(MAC_PEER, MAC_IN, PEER_V6, IN_V6, 255, 135, 0, &[[0u8, 0, 0, 0].as_slice(), &IN_V6, &[1, 1], &MAC_PEER].concat());
        let frames = vec![
            arp_request(MAC_PEER, PEER_V4, IN_V4),
            ns,
            arp(2, MAC_IN, MAC_NEW, PEER_V4, MAC_IN, IN_V4),
            na(MAC_NEW),
            udp4(SRC_V4, PEER_V4, 5, 9).build(),
            udp6(SRC_V6, PEER_V6, 5, 9).build(),
        ];
        let mut dp = build_router(frames, &setup, &pool);
        rounds_until(&mut dp, 6, |dp| dp.counters().tx >= 4);
        let c = dp.counters();
        assert!(c.nonzero_drops().is_empty(), "{:?}", c.nonzero_drops());
        let w = &dp.workers[0];
        assert_eq!(w.neigh.v4.get(&(P_IN as u16, PEER_V4)), Some(&MAC_NEW), "listified {listified}");
        assert_eq!(w.neigh.v6.get(&(P_IN as u16, PEER_V6)), Some(&MAC_NEW));
        let forwarded: Vec<_> = out(&dp, P_IN).into_iter().filter(|f| !is_arp(f) && icmp6_type(f) != Some(136)).collect();
        assert_eq!(forwarded.len(), 2, "both packets forwarded");
        assert!(forwarded.iter().all(|f| f[0..6] == MAC_NEW), "to the updated MAC");
    }
}

/// arp_process looks the sender of every ARP packet up, whatever its target: a gratuitous
/// ARP (request or reply, sender = target = the announced address, broadcast) from a
/// neighbour we know moves its entry to the new MAC at once (an address taken over by
/// another host: VRRP, a failover), and is consumed; one from a host we do not know, or
/// a request between two other hosts, teaches nothing and is ignored.
#[test]
fn a_gratuitous_arp_moves_a_known_neighbour_to_its_new_mac() {
    const MAC_NEW: [u8; 6] = [2, 0, 0, 0, 0x77, 0x78];
    const STRANGER: [u8; 4] = [192, 0, 2, 99];
    for op in [1u16, 2] {
        let frames = vec![
            arp_request(MAC_PEER, PEER_V4, IN_V4),
            arp(op, MAC_BCAST, MAC_NEW, PEER_V4, [0; 6], PEER_V4),
            arp(op, MAC_BCAST, MAC_NEW, STRANGER, [0; 6], STRANGER),
            arp_request(MAC_NEW, STRANGER, PEER_V4),
            udp4(SRC_V4, PEER_V4, 5, 9).build(),
        ];
        let pool = Pool::new(256).unwrap();
        let mut dp = build_router(frames, &Setup::default(), &pool);
        rounds_until(&mut dp, 5, |dp| dp.counters().tx >= 2);
        let c = dp.counters();
        assert_eq!(c.nonzero_drops(), vec![("arp_ignored", 2)], "op {op}: the stranger's announcement and request");
        assert_eq!(c.local, 2, "the request for us and the announcement");
        let w = &dp.workers[0];
        assert_eq!(w.neigh.v4.get(&(P_IN as u16, PEER_V4)), Some(&MAC_NEW), "op {op}");
        assert_eq!(w.neigh.v4.get(&(P_IN as u16, STRANGER)), None);
        let sent = out(&dp, P_IN);
        let fwd: Vec<_> = sent.iter().filter(|f| !is_arp(f)).collect();
        assert_eq!(fwd.len(), 1);
        assert_eq!(&fwd[0][0..6], &MAC_NEW, "op {op}: forwarded to the announced MAC");
    }
}

/// An advertisement from the peer for itself with `flags` (0x40 solicited, 0x20 override),
/// carrying `mac` in the target link-layer option, or no option.
fn peer_na(flags: u8, mac: Option<[u8; 6]>) -> Vec<u8> {
    let mut body = [[flags, 0, 0, 0].as_slice(), &PEER_V6].concat();
    if let Some(m) = mac {
        body.extend_from_slice(&[2, 1]);
        body.extend_from_slice(&m);
    }
    icmp6(mac.unwrap_or(MAC_PEER), MAC_IN, PEER_V6, IN_V6, 255, 136, 0, &body)
}

fn peer_ns() -> Vec<u8> {
    icmp6(MAC_PEER, MAC_IN, PEER_V6, IN_V6, 255, 135, 0, &[[0u8, 0, 0, 0].as_slice(), &IN_V6, &[1, 1], &MAC_PEER].concat())
}

/// ndisc_recv_na → neigh_update with WEAK_OVERRIDE, plus OVERRIDE when the O flag is set: an
/// advertisement without O does not move a known neighbour to another MAC (traffic keeps
/// going to the MAC it had); with O it does.
#[test]
fn an_advertisement_without_override_keeps_a_known_neighbours_mac() {
    const MAC_NEW: [u8; 6] = [2, 0, 0, 0, 0x77, 0x79];
    for (flags, expect) in [(0x40u8, MAC_PEER), (0x60, MAC_NEW), (0x00, MAC_PEER), (0x20, MAC_NEW)] {
        let frames = vec![peer_ns(), peer_na(flags, Some(MAC_NEW)), udp6(SRC_V6, PEER_V6, 5, 9).build()];
        let pool = Pool::new(256).unwrap();
        let mut dp = build_router(frames, &Setup::default(), &pool);
        rounds_until(&mut dp, 3, |dp| dp.counters().tx >= 2);
        let c = dp.counters();
        assert!(c.nonzero_drops().is_empty(), "{:?}", c.nonzero_drops());
        assert_eq!(dp.workers[0].neigh.v6.get(&(P_IN as u16, PEER_V6)), Some(&expect), "flags {flags:#x}");
        let fwd: Vec<_> = out(&dp, P_IN).into_iter().filter(|f| icmp6_type(f) != Some(136)).collect();
        assert_eq!(fwd.len(), 1);
        assert_eq!(&fwd[0][0..6], &expect, "flags {flags:#x}");
    }
    // An entry being resolved has no MAC to keep: a solicited answer without O resolves it
    // (the kernel's NUD_INCOMPLETE entry takes the address whatever the flag).
    let frames = vec![udp6(SRC_V6, PEER_V6, 5, 9).build(), peer_na(0x40, Some(MAC_NEW))];
    let pool = Pool::new(256).unwrap();
    let mut dp = build_router(frames, &Setup::default(), &pool);
    rounds_until(&mut dp, 2, |dp| dp.counters().tx >= 2);
    assert!(dp.counters().nonzero_drops().is_empty(), "{:?}", dp.counters().nonzero_drops());
    let fwd: Vec<_> = out(&dp, P_IN).into_iter().filter(|f| icmp6_type(f) != Some(135)).collect();
    assert_eq!(fwd.len(), 1, "the held packet left");
    assert_eq!(&fwd[0][0..6], &MAC_NEW);
}

/// RFC 4861 §7.2.5 / ndisc_recv_na: a solicited advertisement without the target link-layer
/// option (allowed in answer to a unicast probe) confirms the entry with the MAC it has; an
/// unsolicited one without it confirms nothing.
#[test]
fn a_solicited_advertisement_without_its_option_confirms_the_entry() {
    use sluice::rx::route::NeighAddr;
    for (flags, confirms) in [(0x40u8, true), (0x00, false)] {
        let frames = vec![peer_ns(), peer_na(flags, None)];
        let pool = Pool::new(256).unwrap();
        let mut dp = build_router(frames, &Setup::default(), &pool);
        freeze_clock(&mut dp);
        receive(&mut dp, 1);
        let confirmed = |dp: &Datapath| dp.net.neigh_ages.lock().unwrap().confirmed_ns(P_IN as u16, NeighAddr::V6(PEER_V6));
        assert_eq!(confirmed(&dp), Some(FROZEN_NS), "learned from the solicitation");
        dp.workers[0].now_ns += 1_000_000_000;
        receive(&mut dp, 1);
        let want = if confirms { FROZEN_NS + 1_000_000_000 } else { FROZEN_NS };
        assert_eq!(confirmed(&dp), Some(want), "flags {flags:#x}");
        assert_eq!(dp.workers[0].neigh.v6.get(&(P_IN as u16, PEER_V6)), Some(&MAC_PEER), "the MAC stays");
        finish(&mut dp, 2);
    }
}

/// __neigh_update: only a unicast ARP reply or a solicited advertisement (NUD_REACHABLE)
/// counts as a confirmation; a request, a broadcast reply or an unsolicited advertisement
/// (NUD_STALE) with the MAC the entry has changes nothing. So a neighbour that only
/// broadcasts is still probed once its reachable time is over. One with another MAC moves
/// the entry to it and restarts its clock (sluice's one clock also stands for the kernel's
/// `updated`, which keeps a changed entry from forced gc for 5 s).
#[test]
fn only_unicast_replies_and_solicited_advertisements_confirm_a_neighbour() {
    use sluice::rx::route::NeighAddr;
    const MAC_NEW: [u8; 6] = [2, 0, 0, 0, 0x77, 0x79];
    let v4 = NeighAddr::V4(PEER_V4);
    let v6 = NeighAddr::V6(PEER_V6);
    // (what, the second packet, whose entry, restarts its clock, the MAC after it)
    let cases = [
        ("request again", arp_request(MAC_PEER, PEER_V4, IN_V4), v4, false, MAC_PEER),
        ("broadcast reply", arp(2, MAC_BCAST, MAC_PEER, PEER_V4, MAC_IN, IN_V4), v4, false, MAC_PEER),
        ("request with a new MAC", arp_request(MAC_NEW, PEER_V4, IN_V4), v4, true, MAC_NEW),
        ("unicast reply", peer_arp_reply(), v4, true, MAC_PEER),
        ("solicitation again", peer_ns(), v6, false, MAC_PEER),
        ("unsolicited advertisement", peer_na(0x20, Some(MAC_PEER)), v6, false, MAC_PEER),
        ("unsolicited advertisement, new MAC", peer_na(0x20, Some(MAC_NEW)), v6, true, MAC_NEW),
        ("solicited advertisement", peer_na(0x60, Some(MAC_PEER)), v6, true, MAC_PEER),
    ];
    for (what, second, addr, confirms, mac) in cases {
        let first = if matches!(addr, NeighAddr::V4(_)) { arp_request(MAC_PEER, PEER_V4, IN_V4) } else { peer_ns() };
        let pool = Pool::new(256).unwrap();
        let mut dp = build_router(vec![first, second], &Setup::default(), &pool);
        freeze_clock(&mut dp);
        receive(&mut dp, 1);
        let confirmed = |dp: &Datapath| dp.net.neigh_ages.lock().unwrap().confirmed_ns(P_IN as u16, addr);
        assert_eq!(confirmed(&dp), Some(FROZEN_NS), "{what}: learned from the first request");
        dp.workers[0].now_ns += 1_000_000_000;
        receive(&mut dp, 1);
        let want = if confirms { FROZEN_NS + 1_000_000_000 } else { FROZEN_NS };
        assert_eq!(confirmed(&dp), Some(want), "{what}");
        let learned = match addr {
            NeighAddr::V4(a) => dp.workers[0].neigh.v4.get(&(P_IN as u16, a)).copied(),
            NeighAddr::V6(a) => dp.workers[0].neigh.v6.get(&(P_IN as u16, a)).copied(),
        };
        assert_eq!(learned, Some(mac), "{what}");
        finish(&mut dp, 2);
    }
}

fn peer_arp_reply() -> Vec<u8> {
    arp(2, MAC_IN, MAC_PEER, PEER_V4, MAC_IN, IN_V4)
}

#[test]
fn held_packets_leave_in_order_once_the_neighbour_answers() {
    for listified in [false, true] {
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for seq in 0..3 {
            frames.push(udp4(SRC_V4, PEER_V4, 5, 9).seq(seq).build());
            frames.push(udp6(SRC_V6, PEER_V6, 5, 9).seq(seq).build());
        }
        frames.push(peer_arp_reply());
        frames.push(peer_advertisement());
        let pool = Pool::new(1024).unwrap();
        let setup = Setup::default().listified(listified);
        let mut dp = build_router(frames.clone(), &setup, &pool);
        rounds_until(&mut dp, frames.len(), |dp| dp.counters().tx >= 8);
        let c = dp.counters();
        assert!(c.nonzero_drops().is_empty(), "nothing dropped: {:?}", c.nonzero_drops());
        assert_eq!((c.neigh_probes, c.local), (2, 2), "one request per neighbour; the answers are consumed");
        let sent = out(&dp, P_IN);
        assert_eq!(sent.len(), 8, "2 requests + 6 forwarded");
        let arp_req: Vec<_> = sent.iter().filter(|f| is_arp(f)).collect();
        assert_eq!(arp_req.len(), 1);
        assert_eq!(arp_fields(arp_req[0]), (1, MAC_BCAST, IN_V4, PEER_V4));
        let ns: Vec<_> = sent.iter().filter(|f| icmp6_type(f) == Some(135)).collect();
        assert_eq!(ns.len(), 1);
        assert_eq!(&ns[0][54 + 8..54 + 24], &PEER_V6, "solicitation target");
        // The held packets: forwarded to the learned MAC, TTL / hop limit one less, each
        // family's packets in the order they came.
        let (mut v4, mut v6s) = (Vec::new(), Vec::new());
        for f in sent.iter().filter(|f| !is_arp(f) && icmp6_type(f) != Some(135)) {
            assert_eq!(&f[0..6], &MAC_PEER, "to the answered MAC");
            assert_eq!(&f[6..12], &MAC_IN);
            match f[12..14] {
                [8, 0] => v4.push(f.clone()),
                _ => v6s.push(f.clone()),
            }
        }
        for (fam, got, step) in [("v4", &v4, 0), ("v6", &v6s, 1)] {
            assert_eq!(got.len(), 3, "{fam}");
            for (i, f) in got.iter().enumerate() {
                let orig = &frames[2 * i + step];
                assert_forwarded(f, orig, MAC_IN, MAC_PEER);
            }
        }
        assert_eq!(dp.workers[0].neigh.v4.get(&(P_IN as u16, PEER_V4)), Some(&MAC_PEER));
        assert_eq!(dp.workers[0].neigh.v6.get(&(P_IN as u16, PEER_V6)), Some(&MAC_PEER));
    }
}

/// The answer releases the held packets before anything received after it, in the same
/// poll too (neigh_update sends the queue from within the answer's receive): a packet that
/// follows the answer never overtakes the ones that waited. The IPv6 answer shares its run
/// with the packet after it in list mode.
#[test]
fn held_packets_leave_before_packets_that_follow_the_answer() {
    for listified in [false, true] {
        let frames = vec![
            udp4(SRC_V4, PEER_V4, 5, 9).seq(0).build(),
            udp6(SRC_V6, PEER_V6, 5, 9).seq(0).build(),
            peer_arp_reply(),
            udp4(SRC_V4, PEER_V4, 5, 9).seq(1).build(),
            peer_advertisement(),
            udp6(SRC_V6, PEER_V6, 5, 9).seq(1).build(),
        ];
        let pool = Pool::new(256).unwrap();
        let setup = Setup::default().listified(listified);
        let mut dp = build_router(frames.clone(), &setup, &pool);
        rounds_until(&mut dp, frames.len(), |dp| dp.counters().tx >= 6);
        let c = dp.counters();
        assert!(c.nonzero_drops().is_empty(), "nothing dropped: {:?}", c.nonzero_drops());
        let sent = out(&dp, P_IN);
        let fwd: Vec<_> = sent.iter().filter(|f| !is_arp(f) && icmp6_type(f) != Some(135)).collect();
        assert_eq!(fwd.len(), 4, "listified {listified}");
        for (fam, ethertype, seqs) in [("v4", [8, 0], [0, 3]), ("v6", [0x86, 0xdd], [1, 5])] {
            let got: Vec<_> = fwd.iter().filter(|f| f[12..14] == ethertype).collect();
            assert_eq!(got.len(), 2, "{fam}");
            for (f, i) in got.iter().zip(seqs) {
                assert_forwarded(f, &frames[i], MAC_IN, MAC_PEER);
            }
        }
    }
}

/// `unres_qlen = 0` still asks and holds the newest packet: __neigh_event_send evicts older
/// packets while the byte limit is exceeded and then queues the new one regardless.
#[test]
fn unres_qlen_zero_holds_only_the_newest_packet_and_still_asks() {
    for listified in [false, true] {
        let mut frames: Vec<Vec<u8>> = (0..3).map(|seq| udp4(SRC_V4, PEER_V4, 5, 9).seq(seq).build()).collect();
        frames.push(peer_arp_reply());
        let pool = Pool::new(256).unwrap();
        let mut setup = Setup::default().listified(listified);
        setup.tun.unres_qlen = 0;
        let mut dp = build_router(frames.clone(), &setup, &pool);
        rounds_until(&mut dp, frames.len(), |dp| dp.counters().tx >= 2);
        let c = dp.counters();
        assert_eq!(c.nonzero_drops(), vec![(DropReason::NeighQueuefull.name(), 2)]);
        assert_eq!(c.neigh_probes, 1);
        let sent = out(&dp, P_IN);
        assert_eq!(sent.len(), 2, "the request, then the newest packet");
        assert_eq!(arp_fields(&sent[0]), (1, MAC_BCAST, IN_V4, PEER_V4));
        assert_forwarded(&sent[1], &frames[2], MAC_IN, MAC_PEER);
    }
}

/// An ICMP error the router originates for a sender on the link whose MAC it does not know
/// yet waits for the neighbour like a forwarded packet (neigh_output queues it), and leaves to
/// the answered MAC: the time-exceeded answers to the peer's TTL-1 packets.
#[test]
fn an_error_to_an_unresolved_sender_waits_for_its_neighbour_then_leaves() {
    let frames = vec![
        udp4(PEER_V4, DST1_V4, 5, 9).src_mac(MAC_PEER).ttl(1).build(),
        udp6(PEER_V6, DST1_V6, 5, 9).src_mac(MAC_PEER).ttl(1).build(),
        peer_arp_reply(),
        peer_advertisement(),
    ];
    for listified in [false, true] {
        let pool = Pool::new(256).unwrap();
        let mut dp = build_router(frames.clone(), &Setup::default().listified(listified), &pool);
        rounds_until(&mut dp, frames.len(), |dp| dp.counters().tx >= 4);
        let c = dp.counters();
        assert_eq!(c.nonzero_drops(), vec![("ip_ttl_expired", 2)], "listified {listified}");
        assert_eq!((c.neigh_probes, c.originated), (2, 4), "a request per family, and the two errors");
        let sent = out(&dp, P_IN);
        let errors: Vec<_> = sent.iter().filter(|f| !is_arp(f) && icmp6_type(f) != Some(135)).collect();
        assert_eq!(errors.len(), 2, "{sent:?}");
        for (e, (orig, src_v4)) in errors.iter().zip([(&frames[0], true), (&frames[1], false)]) {
            assert_eq!((&e[0..6], &e[6..12]), (&MAC_PEER[..], &MAC_IN[..]), "to the answered MAC");
            let mut as_if_from_host = e.to_vec();
            as_if_from_host[0..6].copy_from_slice(&MAC_HOST);
            if src_v4 {
                assert_icmp4_error(&as_if_from_host, 11, 0, IN_V4, orig);
            } else {
                assert_icmp6_error(&as_if_from_host, 3, 0, IN_V6, orig);
            }
        }
    }
}

/// After `mcast_solicit` unanswered requests the queue fails (neigh_invalidate): each
/// forwarded packet is dropped as neigh_failed, and its sender is told host unreachable
/// (IPv6: address unreachable, code 3), quoting the packet with the TTL ip_forward had
/// already taken off (arp_error_report / ndisc_error_report → link failure).
#[test]
fn an_unanswered_neighbour_fails_its_packets_after_mcast_solicit_requests() {
    let frames = vec![udp4(SRC_V4, PEER_V4, 5, 9).build(), udp4(SRC_V4, PEER_V4, 5, 9).seq(1).build(), udp6(SRC_V6, PEER_V6, 5, 9).build()];
    let pool = Pool::new(1024).unwrap();
    let mut setup = Setup::default();
    setup.tun.retrans_time_ms = 2;
    setup.tun.mcast_solicit = 3;
    let mut dp = build_router(frames.clone(), &setup, &pool);
    rounds_until(&mut dp, frames.len(), |dp| dp.counters().dropped(DropReason::NeighFailed) == 3);
    let c = dp.counters();
    assert_eq!(c.nonzero_drops(), vec![("neigh_failed", 3)]);
    assert_eq!(c.neigh_probes, 6, "3 requests per neighbour");
    assert_eq!(c.originated, 6 + 3, "the requests and one error per packet");
    let sent = out(&dp, P_IN);
    let requests = sent.iter().filter(|f| is_arp(f)).inspect(|f| assert_eq!(arp_fields(f), (1, MAC_BCAST, IN_V4, PEER_V4))).count();
    assert_eq!(requests, 3, "mcast_solicit broadcast requests");
    assert_eq!(sent.iter().filter(|f| icmp6_type(f) == Some(135)).count(), 3, "and solicitations");
    let errors: Vec<_> = sent.iter().filter(|f| !is_arp(f) && icmp6_type(f) != Some(135)).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    let as_forwarded = |f: &Vec<u8>| {
        let mut f = f.clone();
        if f[12..14] == [8, 0] {
            Ipv4Packet::new_unchecked(&mut f[14..]).decrement_ttl();
        } else {
            Ipv6Packet::new_unchecked(&mut f[14..]).decrement_hop_limit();
        }
        f
    };
    assert_icmp4_error(errors[0], 3, 1, IN_V4, &as_forwarded(&frames[0]));
    assert_icmp4_error(errors[1], 3, 1, IN_V4, &as_forwarded(&frames[1]));
    assert_icmp6_error(errors[2], 1, 3, IN_V6, &as_forwarded(&frames[2]));
}

#[test]
fn a_learned_neighbour_that_stops_answering_is_probed_by_unicast_then_forgotten() {
    // The peer asks for our address: we answer and learn it. So does a configured neighbour,
    // whose entry stays permanent however long it is silent.
    let frames = vec![arp_request(MAC_PEER, PEER_V4, IN_V4), arp_request(MAC_HOST, HOST_V4, IN_V4)];
    let pool = Pool::new(1024).unwrap();
    let mut setup = Setup::default();
    setup.tun.base_reachable_time_ms = 1;
    setup.tun.delay_first_probe_time = 0;
    setup.tun.retrans_time_ms = 1;
    setup.tun.ucast_solicit = 2;
    let mut dp = build_router(frames.clone(), &setup, &pool);
    rounds_until(&mut dp, frames.len(), |dp| dp.counters().neigh_forgotten == 1);
    let c = dp.counters();
    assert_eq!(c.neigh_forgotten, 1);
    assert!(!dp.workers[0].neigh.v4.contains_key(&(P_IN as u16, PEER_V4)), "forgotten");
    assert!(dp.workers[0].neigh.v4.contains_key(&(P_IN as u16, HOST_V4)), "configured entries never age");
    let sent = out(&dp, P_IN);
    assert_eq!(arp_fields(&sent[0]), (2, MAC_PEER, IN_V4, PEER_V4), "the reply");
    assert_eq!(arp_fields(&sent[1]), (2, MAC_HOST, IN_V4, HOST_V4), "the reply");
    let probes: Vec<_> = sent[2..].iter().map(|f| arp_fields(f)).collect();
    assert_eq!(probes, vec![(1, MAC_PEER, IN_V4, PEER_V4); 2], "ucast_solicit unicast probes to the known MAC");
}

#[test]
fn arp_notify_and_ndisc_notify_announce_every_address_at_start() {
    let pool = Pool::new(1024).unwrap();
    let mut setup = Setup::default();
    setup.tun.arp_notify = 1;
    setup.tun.ndisc_notify = 1;
    let mut dp = build_router(Vec::new(), &setup, &pool);
    rounds_until(&mut dp, 0, |dp| dp.counters().tx >= 6);
    for (port, mac, a4, a6) in [(P_IN, MAC_IN, IN_V4, IN_V6), (P_OUT1, MAC_OUT1, OUT1_V4, OUT1_V6), (P_OUT2, MAC_OUT2, OUT2_V4, OUT2_V6)] {
        let sent = out(&dp, port);
        assert_eq!(sent.len(), 2, "port {port}");
        assert_eq!(arp_fields(&sent[0]), (1, MAC_BCAST, a4, a4), "gratuitous ARP: sender = target");
        assert_eq!(&sent[0][6..12], &mac);
        let na = &sent[1];
        assert_eq!(icmp6_type(na), Some(136));
        assert_eq!(&na[0..6], &[0x33, 0x33, 0, 0, 0, 1], "to all-nodes");
        let ip = ipv6_of(na);
        assert_eq!((ip.src_addr(), ip.hop_limit()), (a6, 255));
        let icmp = sluice::wire::Icmpv6Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
        let body = ip.payload();
        assert_eq!(body[4], 0xa0, "router (forwarding is on), override, not solicited");
        assert_eq!(&body[8..24], &a6);
        assert_eq!(&body[24..32], &[2, 1, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]]);
    }
    assert_eq!(dp.counters().originated, 6);
}

#[test]
fn nothing_is_announced_by_default() {
    let pool = Pool::new(1024).unwrap();
    let mut dp = build_router(Vec::new(), &Setup::default(), &pool);
    let Datapath { net, workers } = &mut dp;
    for _ in 0..10 {
        softirq_round(net, &mut workers[0]);
    }
    finish(&mut dp, 0);
    assert_eq!(dp.counters().tx, 0);
}

#[test]
fn waiting_packets_are_in_flight_until_they_leave_or_die() {
    let frames: Vec<Vec<u8>> = (0..3).map(|i| udp4(SRC_V4, PEER_V4, 5, 9).seq(i).build()).collect();
    let pool = Pool::new(1024).unwrap();
    let mut dp = build_router(frames.clone(), &Setup::default(), &pool);
    {
        let Datapath { net, workers } = &mut dp;
        for _ in 0..5 {
            softirq_round(net, &mut workers[0]);
        }
    }
    assert_eq!(dp.workers[0].resolver.held(), 3);
    assert_eq!(dp.in_flight(), 3, "held packets count as in flight");
    dp.conservation().expect("the ledger balances while packets wait");
    finish(&mut dp, frames.len());
    assert_eq!(dp.counters().nonzero_drops(), vec![("neigh_dead", 3)]);
}

/// A router that learns PEER_V4 from its ARP request (the one frame it receives; the reply
/// is frame 0 out of in0), with the neighbour timers given: reachable for 1 ms, then
/// `delay_s` of delay_first_probe_time, then `ucast_solicit` unicast probes `retrans_ms` apart.
fn learned_neighbour_going_stale(pool: &Pool, delay_s: u32, retrans_ms: u32, ucast_solicit: u32) -> Datapath {
    let mut setup = Setup::default();
    setup.tun.base_reachable_time_ms = 1;
    setup.tun.delay_first_probe_time = delay_s;
    setup.tun.retrans_time_ms = retrans_ms;
    setup.tun.ucast_solicit = ucast_solicit;
    build_router(vec![arp_request(MAC_PEER, PEER_V4, IN_V4)], &setup, pool)
}

#[test]
fn a_stale_neighbour_is_probed_after_reachable_time_plus_delay_first_probe_time() {
    // The unicast probes start once base_reachable_time + delay_first_probe_time have passed
    // since the last confirmation (NUD_STALE -> NUD_DELAY -> NUD_PROBE): a delay longer than
    // the reachable time postpones the probes, it does not cancel them.
    let pool = Pool::new(1024).unwrap();
    let mut dp = learned_neighbour_going_stale(&pool, 1, 1, 1);
    rounds_until(&mut dp, 1, |dp| dp.counters().neigh_forgotten == 1);
    assert_eq!(dp.counters().neigh_forgotten, 1, "probed once, unanswered, forgotten");
    let sent = out(&dp, P_IN);
    assert_eq!(arp_fields(&sent[0]), (2, MAC_PEER, IN_V4, PEER_V4), "the reply");
    let probes: Vec<_> = sent[1..].iter().map(|f| arp_fields(f)).collect();
    assert_eq!(probes, vec![(1, MAC_PEER, IN_V4, PEER_V4)], "one unicast probe to the known MAC");
}

#[test]
fn unicast_probes_of_a_stale_neighbour_are_spaced_by_retrans_time() {
    // NUD_PROBE sends one unicast probe per retrans_time until ucast_solicit are out. Here
    // retrans_time (1 s) is ten times the aging period (100 ms): a probe due by the aging
    // tick instead of by retrans_time would go out 100 ms after the one before. A probe is
    // noted when it reaches the capture (at the end of the round that sent it), so two
    // probes can look closer than they were sent only by a stall between send and round
    // end: half a retrans_time of margin covers that.
    let pool = Pool::new(1024).unwrap();
    let mut dp = learned_neighbour_going_stale(&pool, 0, 1000, 2);
    let mut seen: Vec<Instant> = Vec::new();
    rounds_until(&mut dp, 1, |dp| {
        // Frame 0 is the ARP reply; every ARP request after it is a probe.
        let probes = out(dp, P_IN).iter().skip(1).filter(|f| is_arp(f) && arp_fields(f).0 == 1).count();
        while seen.len() < probes {
            seen.push(Instant::now());
        }
        dp.counters().neigh_forgotten == 1
    });
    assert_eq!(dp.counters().neigh_forgotten, 1, "probed ucast_solicit times, unanswered, forgotten");
    assert_eq!(seen.len(), 2, "ucast_solicit probes");
    let gap = seen[1] - seen[0];
    assert!(gap >= Duration::from_millis(500), "probes {gap:?} apart, retrans_time is 1 s");
}

#[test]
fn broadcast_requests_of_an_unresolved_neighbour_are_spaced_by_retrans_time() {
    // NUD_INCOMPLETE sends one broadcast request per retrans_time until mcast_solicit are
    // out, then fails the queue (the first when the packet arrives, each later one by the
    // timer: three, so two are the timer's). Noted as the unicast probes above (half a
    // retrans_time of margin for a stall between send and round end).
    let frames = vec![udp4(SRC_V4, PEER_V4, 5, 9).build()];
    let pool = Pool::new(1024).unwrap();
    let mut setup = Setup::default();
    setup.tun.retrans_time_ms = 500;
    setup.tun.mcast_solicit = 3;
    let mut dp = build_router(frames.clone(), &setup, &pool);
    let mut seen: Vec<Instant> = Vec::new();
    rounds_until(&mut dp, frames.len(), |dp| {
        let requests = out(dp, P_IN).iter().filter(|f| is_arp(f) && arp_fields(f).0 == 1).count();
        while seen.len() < requests {
            seen.push(Instant::now());
        }
        dp.counters().dropped(DropReason::NeighFailed) == 1
    });
    assert_eq!(dp.counters().dropped(DropReason::NeighFailed), 1, "mcast_solicit requests, unanswered: failed");
    assert_eq!(seen.len(), 3, "mcast_solicit requests");
    for pair in seen.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= Duration::from_millis(250), "requests {gap:?} apart, retrans_time is 500 ms");
    }
}

/// A configured neighbour is permanent (NUD_PERMANENT): ARP and NDP from its address with
/// another MAC do not replace it, as the kernel's neigh_update refuses to change a permanent
/// entry without NEIGH_UPDATE_F_ADMIN. The request is still answered, to the MAC that asked.
#[test]
fn a_configured_neighbour_is_never_replaced_by_a_learned_one() {
    let solicitation = [[0u8, 0, 0, 0].as_slice(), &IN_V6, &[1, 1], &MAC_PEER].concat();
    let advertisement = [[0x20u8, 0, 0, 0].as_slice(), &HOST_V6, &[2, 1], &MAC_PEER].concat();
    let frames = vec![
        arp_request(MAC_PEER, HOST_V4, IN_V4),
        arp(2, MAC_IN, MAC_PEER, HOST_V4, MAC_IN, IN_V4),
        icmp6(MAC_PEER, MAC_IN, HOST_V6, IN_V6, 255, 135, 0, &solicitation),
        icmp6(MAC_PEER, MAC_IN, HOST_V6, IN_V6, 255, 136, 0, &advertisement),
    ];
    let pool = Pool::new(1024).unwrap();
    let mut dp = build_router(frames.clone(), &Setup::default(), &pool);
    rounds_until(&mut dp, frames.len(), |dp| dp.counters().rx >= 4);
    let port = P_IN as u16;
    assert_eq!(dp.workers[0].neigh.v4.get(&(port, HOST_V4)), Some(&MAC_HOST), "the configured IPv4 neighbour stays");
    assert_eq!(dp.workers[0].neigh.v6.get(&(port, HOST_V6)), Some(&MAC_HOST), "the configured IPv6 neighbour stays");
    let sent = out(&dp, P_IN);
    assert_eq!(arp_fields(&sent[0]), (2, MAC_PEER, IN_V4, HOST_V4), "the request is answered to the MAC that asked");
    assert_eq!(icmp6_type(&sent[1]), Some(136), "so is the solicitation");
}

/// The `i`-th sender of a flood: its own MAC, an IPv4 address off every subnet, an IPv6
/// address on in0's.
fn flood_mac(i: u32) -> [u8; 6] {
    [2, 0x10, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8]
}
fn flood_v4(i: u32) -> [u8; 4] {
    [100, 64, (i >> 8) as u8, i as u8]
}
fn flood_v6(i: u32) -> [u8; 16] {
    v6([0x2001, 0xdb8, 1, 0, 0, 0, 0x1000, i as u16])
}
/// An ARP request for our address from flood sender `i`.
fn flood_arp(i: u32) -> Vec<u8> {
    arp_request(flood_mac(i), flood_v4(i), IN_V4)
}
/// A neighbour solicitation for our address from flood sender `i`, its MAC in the option.
fn flood_ns(i: u32) -> Vec<u8> {
    let body = [[0u8, 0, 0, 0].as_slice(), &IN_V6, &[1, 1], &flood_mac(i)].concat();
    icmp6(flood_mac(i), MAC_IN, flood_v6(i), IN_V6, 255, 135, 0, &body)
}

/// The configured neighbours of tests/common's router, per family.
const CONFIGURED_V4: [(usize, [u8; 4], [u8; 6]); 3] = [(P_IN, HOST_V4, MAC_HOST), (P_OUT1, NH1_V4, MAC_NH1), (P_OUT2, NH2_V4, MAC_NH2)];
const CONFIGURED_V6: [(usize, [u8; 16], [u8; 6]); 3] = [(P_IN, HOST_V6, MAC_HOST), (P_OUT1, NH1_V6, MAC_NH1), (P_OUT2, NH2_V6, MAC_NH2)];

fn assert_configured_entries_stay(dp: &Datapath) {
    for w in &dp.workers {
        for (p, a, m) in CONFIGURED_V4 {
            assert_eq!(w.neigh.v4.get(&(p as u16, a)), Some(&m), "configured {a:?}");
        }
        for (p, a, m) in CONFIGURED_V6 {
            assert_eq!(w.neigh.v6.get(&(p as u16, a)), Some(&m), "configured {a:?}");
        }
    }
}

/// gc_thresh3 (`net.ipv4.neigh.default.gc_thresh3`, `net.ipv6.neigh.default.gc_thresh3`:
/// 1024 each, separate tables): ARP requests and neighbour solicitations from 5000 new
/// senders each fill each table to the bound and no further. Nothing in it is 5 s old, so
/// forced gc frees nothing and the rest are refused (`neigh_createfail`), unanswered, as the
/// kernel's arp_process / ndisc_recv_ns answer only once the sender's entry exists. The
/// configured entries stay and do not count; every frame is in the ledger.
#[test]
fn a_neighbour_flood_stops_at_gc_thresh3() {
    const FLOOD: u32 = 5000;
    const BOUND: usize = 1024;
    let mut frames: Vec<Vec<u8>> = (0..FLOOD).map(flood_arp).collect();
    frames.extend((0..FLOOD).map(flood_ns));
    let pool = Pool::new(4096).unwrap();
    let mut dp = build_router(frames.clone(), &Setup::default(), &pool);
    // Frozen: every entry stays fresh however long the flood takes to receive.
    freeze_clock(&mut dp);
    receive(&mut dp, 2 * FLOOD as u64);
    assert_eq!(dp.conservation(), Ok(()), "{:?}", dp.counters());
    finish(&mut dp, frames.len());
    let c = dp.counters();
    let refused = 2 * (FLOOD as u64 - BOUND as u64);
    assert_eq!(c.nonzero_drops(), vec![("neigh_createfail", refused)]);
    assert_eq!((c.rx, c.local, c.tx), (2 * FLOOD as u64, 2 * BOUND as u64, 2 * BOUND as u64), "each admitted sender answered once");
    let w = &dp.workers[0];
    assert_eq!((w.neigh.v4.len(), w.neigh.v6.len()), (BOUND + 3, BOUND + 3), "learned up to the bound, plus the configured");
    assert_configured_entries_stay(&dp);
    let port = P_IN as u16;
    assert!(w.neigh.v4.contains_key(&(port, flood_v4(BOUND as u32 - 1))) && !w.neigh.v4.contains_key(&(port, flood_v4(BOUND as u32))));
    assert!(w.neigh.v6.contains_key(&(port, flood_v6(BOUND as u32 - 1))) && !w.neigh.v6.contains_key(&(port, flood_v6(BOUND as u32))));
    let answered_v4: Vec<[u8; 4]> = out(&dp, P_IN).iter().filter(|f| is_arp(f)).map(|f| arp_fields(f).3).collect();
    assert_eq!(answered_v4, (0..BOUND as u32).map(flood_v4).collect::<Vec<_>>(), "the refused senders get no reply");
}

/// Far past any reading of the TSC clock: `Worker::tick_tsc` keeps the larger of `now_ns`
/// and the TSC's time, so a worker set to it stays there (and moves only when a test adds
/// to it). Tests whose counts depend on entries' ages run on it, not on how long the
/// machine takes.
const FROZEN_NS: u64 = 1 << 60;

fn freeze_clock(dp: &mut Datapath) {
    for w in &mut dp.workers {
        w.now_ns = FROZEN_NS;
    }
}

/// Receives `n` more frames (a quota on worker 0's polls). Bounded by rounds that receive
/// nothing, not by wall-clock time: a slow machine takes longer, not a different path.
fn receive(dp: &mut Datapath, n: u64) {
    let want = dp.counters().rx + n;
    dp.workers[0].rx_quota = n;
    let mut idle = 0;
    while dp.counters().rx < want && idle < 1000 {
        let before = dp.counters().rx;
        let Datapath { net, workers } = dp;
        softirq_round(net, &mut workers[0]);
        idle = if dp.counters().rx == before { idle + 1 } else { 0 };
    }
    dp.workers[0].rx_quota = u64::MAX;
    assert_eq!(dp.counters().rx, want);
}

/// neigh_forced_gc: at gc_thresh3 a new entry makes room by freeing learned entries not
/// confirmed in the last 5 s, oldest first, down to gc_thresh2 with the new entry; every
/// worker forgets them.
/// Fresh entries are never freed (a newcomer is refused instead), configured ones never.
#[test]
fn forced_gc_frees_stale_learned_entries_oldest_first_never_configured_ones() {
    let mut setup = Setup::default();
    setup.tun.gc_thresh3 = 8;
    setup.tun.gc_thresh2 = 4;
    // A0..A7, then B0..B8.
    let frames: Vec<Vec<u8>> = (0..17).map(flood_arp).collect();
    let known = |dp: &Datapath, i: u32| dp.workers[0].neigh.v4.contains_key(&(P_IN as u16, flood_v4(i)));
    let pool = Pool::new(1024).unwrap();
    let mut dp = build_router(frames.clone(), &setup, &pool);
    freeze_clock(&mut dp);
    // A0..A4 learned first, A5..A7 a millisecond later (entries learned at one time are
    // freed in no particular order).
    receive(&mut dp, 5);
    dp.workers[0].now_ns += 1_000_000;
    receive(&mut dp, 3);
    assert!((0..8).all(|i| known(&dp, i)));
    dp.workers[0].now_ns += 6_000_000_000;
    // B0 finds the table full: the five oldest (A0..A4) go, so that with B0 it is down to
    // gc_thresh2 (neigh_alloc counts the new entry before forced gc).
    receive(&mut dp, 1);
    assert_eq!(dp.counters().neigh_gc_evicted, 5);
    assert!((0..5).all(|i| !known(&dp, i)) && (5..9).all(|i| known(&dp, i)), "A0..A4 freed, A5..A7 and B0 known");
    // B1..B4 fill it again (no forced gc within 5 s at gc_thresh2); B5 frees A5..A7; B6 and
    // B7 fill it with fresh entries; B8 is refused.
    receive(&mut dp, 8);
    let c = dp.counters();
    assert_eq!(c.neigh_gc_evicted, 8);
    assert_eq!(c.nonzero_drops(), vec![("neigh_createfail", 1)]);
    assert!((0..8).all(|i| !known(&dp, i)) && (8..16).all(|i| known(&dp, i)) && !known(&dp, 16));
    assert_eq!(dp.workers[0].neigh.v4.len(), 8 + 3);
    assert_configured_entries_stay(&dp);
    assert_eq!(dp.net.neigh_ages.lock().unwrap().learned(false), 8);
    finish(&mut dp, frames.len());
    assert_eq!(dp.counters().tx, 16, "every admitted sender answered");
}

/// The log that carries learned entries between workers keeps only what some worker has
/// not applied yet: after a flood it does not hold the flood's history.
#[test]
fn the_neighbour_log_keeps_only_what_a_worker_has_not_applied() {
    let frames: Vec<Vec<u8>> = (0..3000).map(flood_arp).collect();
    let pool = Pool::new(4096).unwrap();
    let mut dp = build_router(frames.clone(), &Setup::default(), &pool);
    freeze_clock(&mut dp);
    receive(&mut dp, frames.len() as u64);
    assert!(dp.net.neigh_log.published() >= 1024, "{} entries published", dp.net.neigh_log.published());
    {
        let Datapath { net, workers } = &mut dp;
        softirq_round(net, &mut workers[0]);
    }
    assert_eq!(dp.net.neigh_log.retained(), 0, "every worker applied every entry");
    finish(&mut dp, frames.len());
}

/// arp_process: an ARP probe (RFC 5227: sender 0.0.0.0) for our address is answered, to the
/// prober's MAC with target 0.0.0.0, and makes no entry, also with the table full
/// (gc_thresh3 = 0); a reply from 0.0.0.0 teaches nothing; a multicast or broadcast sender
/// is a martian source: no entry, no answer. ndisc_recv_ns likewise: a DAD solicitation
/// (from ::) makes no entry and is defended with an advertisement to all-nodes, table full
/// or not.
#[test]
fn address_conflict_probes_are_answered_and_make_no_entry() {
    let (dad_dst, dad_mac) = solicited_node(&IN_V6);
    let frames = vec![
        arp_request(MAC_PEER, [0; 4], IN_V4),
        arp_request(MAC_PEER, [224, 0, 0, 1], IN_V4),
        arp_request(MAC_PEER, [255; 4], IN_V4),
        arp(2, MAC_IN, MAC_PEER, [0; 4], MAC_IN, IN_V4),
        icmp6(MAC_PEER, dad_mac, [0; 16], dad_dst, 255, 135, 0, &[[0u8; 4].as_slice(), &IN_V6].concat()),
    ];
    for thresh3 in [0, 1024] {
        let mut setup = Setup::default();
        setup.tun.gc_thresh3 = thresh3;
        setup.tun.ipv6_gc_thresh3 = thresh3;
        let pool = Pool::new(256).unwrap();
        let mut dp = build_router(frames.clone(), &setup, &pool);
        rounds_until(&mut dp, frames.len(), |dp| dp.counters().rx >= frames.len() as u64);
        let c = dp.counters();
        assert_eq!(c.nonzero_drops(), vec![("arp_ignored", 3)], "gc_thresh3 {thresh3}");
        assert_eq!((c.local, c.tx), (2, 2), "gc_thresh3 {thresh3}: the ARP probe and the DAD probe answered");
        let sent: Vec<Vec<u8>> = out(&dp, P_IN).into_iter().filter(|f| is_arp(f) || icmp6_type(f) == Some(136)).collect();
        let replies: Vec<_> = sent.iter().filter(|f| is_arp(f)).map(|f| arp_fields(f)).collect();
        assert_eq!(replies, vec![(2, MAC_PEER, IN_V4, [0; 4])], "gc_thresh3 {thresh3}");
        let na: Vec<_> = sent.iter().filter(|f| !is_arp(f)).map(|f| f[..6].to_vec()).collect();
        assert_eq!(na, vec![vec![0x33, 0x33, 0, 0, 0, 1]], "gc_thresh3 {thresh3}: DAD defended to all-nodes");
        let ages = dp.net.neigh_ages.lock().unwrap();
        assert_eq!((ages.learned(false), ages.learned(true)), (0, 0), "gc_thresh3 {thresh3}: no entry made");
        drop(ages);
        for w in &dp.workers {
            assert_eq!((w.neigh.v4.len(), w.neigh.v6.len()), (3, 3), "only the configured entries");
        }
    }
}
