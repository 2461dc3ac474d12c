//! `sluice run --pcap-in trains.pcap --pcap-out merged.pcap --pcap-out-tso --set gro=1` (issue
//! 12): the binary reads TCP (and, with `rx-gro-list`, UDP) trains from a capture, forwards
//! them through the lab router with GRO on, and the pcap writer, told it segments in
//! "hardware", records the GRO packets whole: fewer, larger frames, with the IPv4 total
//! lengths the kernel's GRO gives (`tcpdump` on a receiving veth shows the same).

use sluice::port::pcap::{read_frames, write_frames};
use sluice::wire::build::{build, L3Spec, L4Spec, PacketSpec};
use sluice::wire::tcp::flags;
use std::process::Command;

const LAB_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MSS: usize = 1000;

/// Segment `i` of flow `sport`: TCP with in-order seq or UDP, incrementing IP ID, DF.
fn segment(udp: bool, sport: u16, i: usize, len: usize) -> Vec<u8> {
    let hdr = 14 + 20 + if udp { 8 } else { 20 };
    let l4 = if udp {
        L4Spec::Udp { src_port: sport, dst_port: 5001 }
    } else {
        L4Spec::Tcp { src_port: sport, dst_port: 80, seq: 1000 + (i * MSS) as u32, ack: 1, flags: flags::ACK, window: 512, timestamp: None }
    };
    let spec = PacketSpec {
        src_mac: [2, 0, 0, 0, 0, 0xaa],
        dst_mac: LAB_MAC,
        vlan: None,
        l3: L3Spec::V4 { src: [198, 18, 0, 1], dst: [10, 0, 0, 1], tos: 0, ident: 100 + i as u16, dont_frag: true },
        l4,
        ttl: 64,
        frame_len: hdr + len,
    };
    let mut out = vec![0u8; hdr + len];
    let n = build(&spec, &mut out).expect("build");
    out.truncate(n);
    out
}

/// Runs the binary and returns its JSON report (the ledger must balance).
fn sluice_run(args: &[&str]) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().expect("sluice runs");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{args:?}\n{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(v["conservation"].get("Ok").is_some(), "ledger: {}", v["conservation"]);
    v
}

/// IPv4 total length, TTL and header checksum validity of a frame.
fn ip_of(f: &[u8]) -> (usize, u8, bool) {
    let ip = sluice::wire::ipv4::Ipv4Packet::new_checked(&f[14..]).expect("IPv4");
    (ip.total_len() as usize, ip.ttl(), ip.verify_checksum())
}

/// Two interleaved flows of `n` segments each (the last of each `last` bytes long).
fn trains(udp: bool, n: usize, last: usize) -> Vec<Vec<u8>> {
    let len = |i: usize| if i + 1 == n { last } else { MSS };
    (0..n).flat_map(|i| [segment(udp, 3000, i, len(i)), segment(udp, 3001, i, len(i))]).collect()
}

fn run_gro(frames: &[Vec<u8>], extra: &[&str]) -> (serde_json::Value, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (inp, out) = (dir.path().join("trains.pcap"), dir.path().join("merged.pcap"));
    write_frames(&inp, frames).expect("write trains.pcap");
    let mut args = vec!["run", "--pcap-in", inp.to_str().unwrap(), "--pcap-out", out.to_str().unwrap(), "--pcap-out-tso", "--set", "gro=1"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", "-q"]);
    let v = sluice_run(&args);
    (v, read_frames(&out).expect("read merged.pcap"))
}

#[test]
fn pcap_in_to_a_tso_pcap_out_writes_the_merged_tcp_packets_whole() {
    let frames = trains(false, 12, 400);
    let (v, merged) = run_gro(&frames, &[]);
    assert_eq!(v["counters"]["rx"], 24);
    assert_eq!(v["counters"]["gro"]["merged"], 22, "each flow's 12 segments in one packet");
    // What the kernel gives for 12 segments (11 × 1000 + 400 bytes after 40 header bytes).
    let want = 20 + 20 + 11 * MSS + 400;
    assert_eq!(merged.len(), 2, "one packet per flow");
    for f in &merged {
        assert_eq!(ip_of(f), (want, 63, true), "forwarded whole: total length, TTL, header checksum");
        assert_eq!(f.len(), 14 + want);
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 0xbb], "to the next hop");
    }
    // Without --pcap-out-tso the writer gets the segments back, as they came in but forwarded.
    let dir = tempfile::tempdir().expect("tempdir");
    let (inp, out) = (dir.path().join("t.pcap"), dir.path().join("s.pcap"));
    write_frames(&inp, &frames).expect("write");
    sluice_run(&["run", "--pcap-in", inp.to_str().unwrap(), "--pcap-out", out.to_str().unwrap(), "--set", "gro=1", "--json", "-q"]);
    let split = read_frames(&out).expect("read");
    assert_eq!(split.len(), 24);
    assert!(split.iter().all(|f| ip_of(f).0 <= 20 + 20 + MSS && ip_of(f).1 == 63 && ip_of(f).2));
}

#[test]
fn pcap_in_with_rx_gro_list_writes_the_udp_fraglist_packets_whole() {
    let frames = trains(true, 10, 300);
    let (v, merged) = run_gro(&frames, &["--set", "rx-gro-list=1"]);
    assert_eq!(v["counters"]["gro"]["merged"], 18);
    // 10 datagrams: 28 header bytes, 9 × 1000 + 300 payload (udp4_gro_complete's lengths).
    let want = 20 + 8 + 9 * MSS + 300;
    assert_eq!(merged.len(), 2);
    for f in &merged {
        assert_eq!(ip_of(f), (want, 63, true));
        assert_eq!(u16::from_be_bytes([f[38], f[39]]) as usize, want - 20, "UDP length over the list");
    }
    // UDP GRO is off without rx-gro-list, as in the kernel.
    let (v, out) = run_gro(&frames, &[]);
    assert_eq!((v["counters"]["gro"]["merged"].as_u64(), out.len()), (Some(0), 20));
}
