//! GRO in the datapath (issue 12): TCP trains from the generator through `l3fwd` with GRO on
//! come out of a port without TSO (GSO splits them again) exactly as with GRO off, the
//! ledger balancing with merged segments counted, nothing left held or leaked.

mod common;

use sluice::buf::Pool;
use sluice::config::{self, Config, PortKind, XdpConfig};
use sluice::datapath::{Datapath, Pipeline};
use sluice::napi::RunLimit;
use sluice::port::gen::{FrameSize, IpVersion, L4Proto};
use sluice::xdp::ebpf::EngineKind;
use sluice::xdp::XdpMode;
use std::time::Duration;

fn tcp_lab(flows: u32, burst: u32, ip: IpVersion, sets: &[&str]) -> (Config, sluice::config::Tunables) {
    let mut c = config::lab(Pipeline::L3fwd);
    let g = c.ports[0].gen.as_mut().expect("lab generator");
    g.flows = flows;
    g.burst = burst;
    g.ip = ip;
    g.proto = L4Proto::Tcp;
    g.tcp_train = 1;
    g.size = FrameSize::Fixed(1514);
    c.ports[1].kind = PortKind::Capture;
    c.ports[1].check = None;
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let tun = c.tunables(&sets).expect("tunables");
    (c, tun)
}

fn run(c: &Config, tun: sluice::config::Tunables, packets: u64) -> (Datapath, Vec<Vec<u8>>) {
    let pool = Pool::new(c.pool_frames).expect("pool");
    let mut dp = c.build(tun, &pool).expect("build");
    dp.run_until(&RunLimit { packets: Some(packets), ..Default::default() }, Duration::ZERO, |_, _| {});
    assert_eq!(dp.conservation(), Ok(()), "{:?}", dp.counters());
    assert_eq!(dp.in_flight(), 0, "nothing left held");
    assert_eq!(dp.buffers_in_use(), 0, "leaked buffers");
    let out: Vec<Vec<u8>> = dp.port_queues(1).flat_map(|q| q.captured().expect("capture").to_vec()).collect();
    (dp, out)
}

/// Frames grouped by flow (source address + ports), each flow's frames in their order.
fn per_flow(frames: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
    let mut flows: std::collections::BTreeMap<Vec<u8>, Vec<Vec<u8>>> = Default::default();
    for f in frames {
        let (src, l4) = if f[12..14] == [0x08, 0x00] { (&f[26..30], 34) } else { (&f[22..38], 54) };
        flows.entry([src, &f[l4..l4 + 4]].concat()).or_default().push(f.clone());
    }
    flows.into_values().collect()
}

#[test]
fn gro_then_gso_forwards_the_same_segments_as_gro_off() {
    for ip in [IpVersion::V4, IpVersion::V6, IpVersion::Mix] {
        let (c, off) = tcp_lab(4, 16, ip, &["gro=0"]);
        let (_, want) = run(&c, off, 4_000);
        let (c, on) = tcp_lab(4, 16, ip, &["gro=1"]);
        let (dp, got) = run(&c, on, 4_000);
        let k = dp.counters();
        assert!(k.gro.merged > 3_000, "trains of 16 merge: {:?}", k.gro);
        assert_eq!(k.gro.gso_segs, k.gro.gso_packets + k.gro.merged, "every merged segment left again");
        assert_eq!(k.tx, 4_000);
        assert_eq!(got.len(), want.len());
        assert_eq!(per_flow(&got), per_flow(&want), "{ip:?}: byte for byte, each flow in order");
    }
}

/// UDP trains (16 datagrams per flow, fixed ID with DF as the generator sends them) with
/// `rx-gro-list` on: kept as fraglist packets, split back by segment-list GSO before the
/// capture port (no TSO), byte for byte the frames GRO off forwards; without `rx-gro-list`
/// UDP is not merged at all.
#[test]
fn udp_trains_with_rx_gro_list_forward_the_same_datagrams_as_gro_off() {
    for ip in [IpVersion::V4, IpVersion::V6, IpVersion::Mix] {
        let udp = |sets: &[&str]| {
            let (mut c, tun) = tcp_lab(4, 16, ip, sets);
            let g = c.ports[0].gen.as_mut().expect("lab generator");
            g.proto = L4Proto::Udp;
            g.tcp_train = 0;
            (c, tun)
        };
        let (c, off) = udp(&["gro=0"]);
        let (_, want) = run(&c, off, 4_000);
        let (c, on) = udp(&["gro=1", "rx-gro-list=1"]);
        let (dp, got) = run(&c, on, 4_000);
        let k = dp.counters();
        assert!(k.gro.merged > 3_000, "{ip:?}: trains of 16 merge: {:?}", k.gro);
        assert_eq!(k.gro.gso_segs, k.gro.gso_packets + k.gro.merged, "every merged datagram left again");
        assert_eq!(got.len(), want.len());
        assert_eq!(per_flow(&got), per_flow(&want), "{ip:?}: byte for byte, each flow in order");
        // A sink with TSO still gets them split: TSO does not cover fraglist packets.
        let (mut c, on) = udp(&["gro=1", "rx-gro-list=1"]);
        c.ports[1].tso = true;
        let (dp, tso_sink) = run(&c, on, 4_000);
        assert_eq!(dp.counters().gro.gso_segs, dp.counters().gro.gso_packets + dp.counters().gro.merged);
        assert_eq!(per_flow(&tso_sink), per_flow(&want), "{ip:?}: split for a TSO sink too");
        let (c, no_list) = udp(&["gro=1"]);
        assert_eq!(run(&c, no_list, 1_000).0.counters().gro.merged, 0, "UDP GRO needs rx-gro-list");
    }
}

/// The MTU check of a GRO packet is its segments' (`skb_gso_validate_network_len`): UDP
/// trains of 1500-byte datagrams (DF set) towards a 1490-byte egress are refused as with
/// GRO off, none forwarded; as in the kernel, a refused GRO packet is one drop (and one
/// ICMP error), its other datagrams counted as merged into it.
#[test]
fn udp_gro_packets_over_the_egress_mtu_are_refused_like_their_datagrams() {
    use sluice::stats::DropReason;
    for sets in [&["gro=0"][..], &["gro=1", "rx-gro-list=1"][..]] {
        let (mut c, tun) = tcp_lab(4, 16, IpVersion::V4, sets);
        let g = c.ports[0].gen.as_mut().expect("lab generator");
        g.proto = L4Proto::Udp;
        g.tcp_train = 0;
        c.ports[1].mtu = Some(1490);
        let (dp, out) = run(&c, tun, 1_000);
        let k = dp.counters();
        assert!(out.is_empty(), "{sets:?}: {} datagrams over the MTU left", out.len());
        assert_eq!(k.dropped(DropReason::PktTooBig) + k.gro.merged, 1_000, "{sets:?}: {:?}", k.nonzero_drops());
        if sets.len() > 1 {
            assert!(k.gro.merged > 800, "trains merged before the check: {:?}", k.gro);
        }
    }
}

/// Without DF the same trains are fragmented, and a GRO packet is split into its datagrams
/// before each is fragmented (ip_finish_output_gso): the fragments leaving are the very
/// fragments GRO off sends, datagram by datagram; cutting the GRO packet as one datagram
/// would send fragments no receiver can rebuild the datagrams from.
#[test]
fn udp_gro_packets_needing_fragmentation_are_split_into_datagrams_first() {
    let mut outs = Vec::new();
    for sets in [&["gro=0"][..], &["gro=1", "rx-gro-list=1"][..]] {
        let (mut c, tun) = tcp_lab(4, 16, IpVersion::V4, sets);
        let g = c.ports[0].gen.as_mut().expect("lab generator");
        g.proto = L4Proto::Udp;
        g.tcp_train = 0;
        g.dont_frag = false;
        c.ports[1].mtu = Some(1490);
        let (dp, out) = run(&c, tun, 1_000);
        let k = dp.counters();
        assert!(k.nonzero_drops().is_empty(), "{sets:?}: {:?}", k.nonzero_drops());
        assert_eq!(out.len(), 2_000, "{sets:?}: two fragments per datagram");
        assert!(out.iter().all(|f| f.len() - 14 <= 1490), "{sets:?}: every fragment fits the MTU");
        if sets.len() > 1 {
            assert!(k.gro.merged > 800 && k.gro.gso_packets > 0, "trains merged, then split: {:?}", k.gro);
        }
        outs.push(per_flow(&out));
    }
    assert_eq!(outs[0], outs[1], "GRO on sends the fragments GRO off sends, in each flow's order");
}

/// A UDP fraglist packet addressed to the router itself is split into its datagrams before
/// the socket sees them (`udp_rcv_segment`): each datagram queued, the ledger balanced.
#[test]
fn udp_gro_packets_delivered_locally_reach_the_socket_as_datagrams() {
    let mut c = config::lab(Pipeline::Local);
    let g = c.ports[0].gen.as_mut().expect("lab generator");
    g.flows = 2;
    g.burst = 16;
    g.ip = IpVersion::V4;
    g.size = FrameSize::Fixed(1000);
    let tun = c.tunables(&["gro=1".to_string(), "rx-gro-list=1".to_string()]).expect("tunables");
    let pool = Pool::new(c.pool_frames).expect("pool");
    let mut dp = c.build(tun, &pool).expect("build");
    dp.run_until(&RunLimit { packets: Some(640), ..Default::default() }, Duration::ZERO, |_, _| {});
    let k = dp.counters();
    assert!(k.gro.merged > 500, "{:?}", k.gro);
    assert_eq!(k.local, 640, "every datagram delivered on its own: {k:?}");
    assert_eq!(dp.conservation(), Ok(()));
    assert_eq!(dp.in_flight(), 0);
}

/// A generic XDP program on the receiving port turns GRO off there (`netif_elide_gro`:
/// `dev->xdp_prog`): nothing merges, the frames forwarded are those of GRO off. A native
/// program leaves GRO on.
#[test]
fn a_generic_xdp_program_elides_gro_on_its_port_netif_elide_gro() {
    let (c, off) = tcp_lab(4, 16, IpVersion::V4, &["gro=0"]);
    let (_, want) = run(&c, off, 2_000);
    for mode in [XdpMode::Generic, XdpMode::Native] {
        let (mut c, on) = tcp_lab(4, 16, IpVersion::V4, &["gro=1"]);
        c.xdp =
            Some(XdpConfig { program: "builtin:pass".into(), mode, engine: EngineKind::Jit, section: None, maps: None, map: Vec::new() });
        let (dp, got) = run(&c, on, 2_000);
        let k = dp.counters();
        assert_eq!(k.xdp_actions.iter().sum::<u64>(), 2_000, "{mode:?}: the program ran on every frame");
        if mode == XdpMode::Generic {
            assert_eq!((k.gro.merged, k.gro.held, k.gro.normal), (0, 0, 0), "{mode:?}: GRO skipped: {:?}", k.gro);
        } else {
            assert!(k.gro.merged > 1_000, "{mode:?}: GRO on: {:?}", k.gro);
        }
        // (GRO on interleaves flows differently: compare each flow's frames.)
        assert!(per_flow(&got) == per_flow(&want), "{mode:?}: each flow's frames as with GRO off");
        if mode == XdpMode::Generic {
            assert!(got == want, "{mode:?}: and in the same order");
        }
    }
}

#[test]
fn gro_normal_batch_and_single_receive_keep_the_ledger() {
    for sets in [["net.core.gro_normal_batch=1", "rx.listified=1"], ["net.core.gro_normal_batch=16", "rx.listified=0"]] {
        let mut all = vec!["gro=1"];
        all.extend(sets);
        let (c, tun) = tcp_lab(64, 1, IpVersion::Mix, &all);
        let (dp, got) = run(&c, tun, 3_000);
        let k = dp.counters();
        assert_eq!(got.len(), 3_000);
        assert!(k.gro.lists > 0);
        if sets[0].ends_with("=1") {
            let completed: u64 = k.gro.flushed.iter().sum();
            assert_eq!(k.gro.lists, k.gro.normal + completed, "batch 1: a delivery per packet");
        } else {
            // Batches of 16 segments; each poll's end delivers what is left (one short list).
            assert!(k.gro.lists <= k.gro.list_segs / 16 + k.napi_polls, "{:?} polls {}", k.gro, k.napi_polls);
            assert!(k.gro.lists * 8 < k.gro.list_segs, "{:?}", k.gro);
        }
    }
}

/// The generator's patterns that defeat GRO (the seed's uncoalescable case and its kin):
/// forwarded frames stay the same as with GRO off, and GRO merges what the kernel would.
#[test]
fn generator_patterns_defeat_gro_as_the_kernel_s_rules_say() {
    type Case = (&'static str, fn(&mut sluice::port::gen::GenConfig), fn(&sluice::gro::GroStats) -> bool);
    let cases: [Case; 3] = [
        // A changing timestamp on every segment: options differ, nothing merges.
        ("ts every 1", |g| g.tcp_ts_every = 1, |s| s.merged == 0),
        // PSH every 4th segment: GRO packets of at most 4 segments.
        ("psh every 4", |g| g.tcp_psh_every = 4, |s| s.merged > 0 && s.segs_log2[3..].iter().all(|&n| n == 0)),
        // The last two of every 8 swapped: the out-of-order one completes the packet.
        ("reorder every 8", |g| g.tcp_reorder_every = 8, |s| s.merged > 0 && s.flushed[sluice::gro::FlushCause::Mismatch as usize] > 0),
    ];
    for (name, pattern, check) in cases {
        let mut out = Vec::new();
        for gro in ["gro=0", "gro=1"] {
            let (mut c, tun) = tcp_lab(2, 16, IpVersion::Mix, &[gro]);
            pattern(c.ports[0].gen.as_mut().expect("generator"));
            let (dp, got) = run(&c, tun, 2_000);
            if gro == "gro=1" {
                assert!(check(&dp.counters().gro), "{name}: {:?}", dp.counters().gro);
            }
            out.push(per_flow(&got));
        }
        assert_eq!(out[0], out[1], "{name}: the same frames with GRO on and off");
    }
}

/// A pcap writer told it segments in "hardware" (`tso`) gets GRO packets whole (what tcpdump
/// on a receiving veth shows); without it they are split again and every frame is MSS-sized.
#[test]
fn a_tso_pcap_writer_records_gro_packets_whole() {
    for tso in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.pcap");
        let (mut c, tun) = tcp_lab(2, 16, IpVersion::V4, &["gro=1"]);
        c.ports[1].kind = PortKind::PcapOut;
        c.ports[1].pcap = Some(path.clone());
        c.ports[1].tso = tso;
        let pool = Pool::new(c.pool_frames).expect("pool");
        let mut dp = c.build(tun, &pool).expect("build");
        dp.run_until(&RunLimit { packets: Some(320), ..Default::default() }, Duration::ZERO, |_, _| {});
        assert_eq!(dp.conservation(), Ok(()));
        assert_eq!(dp.buffers_in_use(), 0);
        let mut r = pcap_file::pcap::PcapReader::new(std::fs::File::open(&path).expect("capture")).expect("pcap");
        let mut sizes = Vec::new();
        while let Some(p) = r.next_packet() {
            sizes.push(p.expect("record").data.len());
        }
        let payload: usize = sizes.iter().map(|s| s - 54).sum();
        assert_eq!(payload, 320 * 1460, "tso = {tso}: every payload byte written once");
        if tso {
            assert!(sizes.iter().all(|&s| s > 1514) && sizes.len() <= 320 / 2, "merged packets: {sizes:?}");
        } else {
            assert!(sizes.len() == 320 && sizes.iter().all(|&s| s == 1514), "segments: {sizes:?}");
        }
    }
}

/// The NIC model with `tso` takes GRO packets whole (one descriptor each; its wire time is
/// that of every segment); without it GSO splits them first. Every payload byte reaches
/// the NIC once either way, in far fewer descriptors with TSO.
#[test]
fn a_tso_nic_model_takes_gro_packets_whole_and_puts_the_segments_on_the_wire() {
    let mut seen = Vec::new();
    for tso in [false, true] {
        let (mut c, tun) = tcp_lab(2, 16, IpVersion::V4, &["gro=1"]);
        c.ports[1].kind = PortKind::Sim;
        c.ports[1].sim = Some(sluice::port::sim::SimConfig { tso, rate_gbps: 100.0, ..Default::default() });
        let pool = Pool::new(c.pool_frames).expect("pool");
        let mut dp = c.build(tun, &pool).expect("build");
        dp.run_until(&RunLimit { packets: Some(320), ..Default::default() }, Duration::ZERO, |_, _| {});
        assert_eq!(dp.conservation(), Ok(()), "{:?}", dp.counters());
        assert_eq!(dp.in_flight(), 0);
        assert_eq!(dp.buffers_in_use(), 0);
        let nic = dp.port_stats(1);
        let payload = nic.tx_bytes - 54 * nic.tx_packets;
        assert_eq!(payload, 320 * 1460, "tso = {tso}: every payload byte sent once");
        seen.push(nic.tx_packets);
    }
    assert_eq!(seen[0], 320, "split by GSO: one descriptor per segment");
    assert!(seen[1] <= 320 / 2, "whole GRO packets: {} descriptors for 320 segments", seen[1]);
}

/// Two workers (RSS, two queues each side) and RPS with GRO on: every worker's GRO table
/// delivers what it holds before the run ends, the ledger balances over both, and each
/// flow's frames come out as with GRO off.
#[test]
fn gro_on_two_workers_with_rss_and_rps_keeps_flows_and_the_ledger() {
    let mut outs = Vec::new();
    for gro in ["gro=0", "gro=1"] {
        let (mut c, tun) = tcp_lab(8, 16, IpVersion::Mix, &[gro, "rps_cpus=0-1", "net.core.netdev_max_backlog=100000"]);
        c.ports[0].rss_queues = Some(2);
        c.ports[1].rss_queues = Some(2);
        let (dp, got) = run(&c, tun, 6_000);
        assert_eq!(dp.workers.len(), 2);
        assert_eq!(dp.counters().tx, 6_000, "{:?}", dp.counters().nonzero_drops());
        if gro == "gro=1" {
            assert!(dp.workers.iter().all(|w| w.c.gro.merged > 0), "both workers merged");
        }
        outs.push(per_flow(&got));
    }
    assert_eq!(outs[0], outs[1]);
}

/// At shutdown GRO delivers what it holds before the neighbour queues are emptied: packets
/// it flushes toward a next hop that never resolved are dropped (neigh_dead) like the ones
/// already waiting, not left queued with their buffers (one full-weight poll: GRO holds
/// every segment until the drain).
#[test]
fn the_drain_flushes_gro_before_the_neighbour_queues() {
    let (mut c, tun) = tcp_lab(4, 16, IpVersion::V4, &["gro=1"]);
    let sink = c.ports[1].name.clone();
    c.neighbours.retain(|n| n.port != sink);
    let (dp, out) = run(&c, tun, 64);
    assert!(out.iter().all(|f| f[12..14] == [0x08, 0x06]), "only ARP requests leave: the next hop never answers");
    assert!(dp.counters().dropped(sluice::stats::DropReason::NeighDead) > 0, "{:?}", dp.counters().nonzero_drops());
}

/// `gro_flush_timeout` (napi_complete_done's timer): after a poll that took packets, GRO
/// keeps what it holds through the empty polls before the timer fires (here 1 s away);
/// without the timeout the first completed poll delivers everything.
#[test]
fn gro_flush_timeout_holds_merged_segments_until_its_timer() {
    for (timeout, held_after) in [("0", 0), ("1000000000", 1)] {
        let (mut c, tun) = tcp_lab(1, 4, IpVersion::V4, &["gro=1", &format!("gro_flush_timeout={timeout}")]);
        c.ports[0].gen.as_mut().unwrap().packets = Some(4);
        let pool = Pool::new(c.pool_frames).expect("pool");
        let mut dp = c.build(tun, &pool).expect("build");
        for _ in 0..5 {
            sluice::napi::softirq_round(&dp.net, &mut dp.workers[0]);
        }
        assert_eq!(dp.in_flight(), held_after, "gro_flush_timeout={timeout}: four segments merged into one held packet");
        dp.drain();
        assert_eq!(dp.in_flight(), 0);
        assert_eq!(dp.conservation(), Ok(()));
    }
}

/// With every poll timed (`stats.clock_sample=1`), each stage that handled packets has
/// clocks: GRO's own time included, summed around the list deliveries it makes (a batch of
/// 1: many) or with none (a batch no poll fills).
#[test]
fn every_stage_that_handled_packets_is_timed_gro_included() {
    use sluice::stats::Stage;
    for batch in ["net.core.gro_normal_batch=1", "net.core.gro_normal_batch=65536"] {
        let (c, tun) = tcp_lab(4, 16, IpVersion::V4, &["gro=1", "stats.clock_sample=1", batch]);
        let (dp, _) = run(&c, tun, 2_000);
        let k = dp.counters();
        assert!(k.stage(Stage::Gro).packets >= 2_000, "{batch}");
        for s in Stage::ALL {
            let st = k.stage(*s);
            assert!(st.packets == 0 || st.cycles > 0, "{batch}: {s:?} handled {} packets in no time", st.packets);
        }
    }
}

/// napi_complete_done after an empty poll: a poll that used its whole weight keeps what GRO
/// holds (flows younger than a tick); the next, empty poll completes, GRO delivers, and the
/// merged packet leaves in that same poll (poll_end), not at some later one.
#[test]
fn an_empty_poll_delivers_what_gro_held_and_sends_it() {
    let seg = |seq: u32, id: u16| {
        let mut f = common::tcp4(common::SRC_V4, common::DST1_V4, 1000, 80).ident(id).len(200).build();
        f[38..42].copy_from_slice(&seq.to_be_bytes());
        f[47] = 0x10; // ACK
        common::fix_l4_checksum(&mut f);
        f
    };
    let mut setup = common::Setup::default();
    setup.tun.set("gro", "1").unwrap();
    let pool = Pool::new(setup.pool_frames).expect("pool");
    let mut dp = common::build_router(vec![seg(1, 7), seg(147, 8)], &setup, &pool);
    let Datapath { net, workers } = &mut dp;
    let w = &mut workers[0];
    assert_eq!(sluice::napi::napi_poll(net, w, common::P_IN as u16, 2), 2, "the whole weight");
    assert_eq!((w.c.gro.merged, w.c.tx), (1, 0), "merged and held");
    assert_eq!(sluice::napi::napi_poll(net, w, common::P_IN as u16, 2), 0, "nothing left to receive");
    assert_eq!(w.c.tx, 2, "delivered, split again by GSO and sent in the empty poll");
}

/// With two workers, what GRO still holds when the datapath is drained (here after one
/// stepped round whose full-weight poll GRO holds whole) goes through RPS like any delivery,
/// into both workers' backlogs: each worker's drain processes its backlog after its GRO
/// flush, so every segment leaves and nothing stays queued between workers.
#[test]
fn a_drain_processes_what_gro_delivered_into_the_backlogs() {
    let (c, tun) = tcp_lab(4, 16, IpVersion::V4, &["gro=1", "rps_cpus=0-1"]);
    let pool = Pool::new(c.pool_frames).expect("pool");
    let mut dp = c.build(tun, &pool).expect("build");
    assert_eq!(dp.workers.len(), 2);
    assert!(dp.round() > 0);
    let rx = dp.counters().rx;
    assert!(rx > 0 && dp.counters().tx == 0, "GRO holds the whole poll: {:?}", dp.counters());
    dp.drain();
    assert_eq!(dp.conservation(), Ok(()), "{:?}", dp.counters());
    assert_eq!(dp.in_flight(), 0, "left in a backlog");
    assert_eq!(dp.counters().tx, rx, "{:?}", dp.counters().nonzero_drops());
    let through_backlogs: u64 = dp.workers.iter().map(|w| w.c.backlog_processed).sum();
    assert!(through_backlogs > 0, "GRO's packets crossed the backlogs");
}
