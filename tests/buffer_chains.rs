//! Buffer chains (issue: frames of every size): a packet longer than one buffer crosses every
//! stage whole — receive, forwarding, local delivery, both XDP hooks, transmit and the pcap
//! writer — or is dropped with a named reason; no byte is ever lost or cut, and the ledger
//! balances. Each test runs both receive modes (single and listified) where it uses the
//! test router.

mod common;

use common::*;
use sluice::buf::{FRAME_SIZE, MAX_DATA};
use sluice::port::sink::{check_frame, CheckSpec};
use sluice::stats::DropReason;
use sluice::wire::{Icmpv4Packet, Icmpv6Packet};
use sluice::xdp::env::SluiceEnv;
use sluice::xdp::{RunOutcome, XdpBuff, XdpMode, XdpProgram};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Sizes around every boundary a chain has: one buffer's linear part, whole fragments,
/// jumbo frames and the largest IP datagram.
const SIZES: [usize; 9] = [MAX_DATA - 1, MAX_DATA, MAX_DATA + 1, MAX_DATA + FRAME_SIZE, MAX_DATA + FRAME_SIZE + 1, 3000, 4096, 9000, 9014];

#[test]
fn jumbo_frames_are_forwarded_whole_when_the_mtu_allows() {
    let mut frames = Vec::new();
    for (i, &n) in SIZES.iter().enumerate() {
        frames.push(udp4(SRC_V4, DST1_V4, 1, 9).seq(i as u32).len(n).build());
        frames.push(udp6(SRC_V6, DST1_V6, 1, 9).seq(i as u32).len(n).build());
    }
    let setup = Setup { out1_mtu: 9000, ..Setup::default() };
    let o = run_both(&frames, &setup);
    assert_eq!(o.drops(), Default::default(), "nothing dropped");
    assert_eq!(o.port(P_OUT1).len(), frames.len());
    let spec = CheckSpec { src_mac: Some(MAC_OUT1), dst_macs: vec![MAC_NH1], ttl: Some(63) };
    for (out, orig) in o.port(P_OUT1).iter().zip(&frames) {
        assert_eq!(out.len(), orig.len(), "every byte forwarded");
        assert_forwarded(out, orig, MAC_OUT1, MAC_NH1);
        check_frame(&spec, out).unwrap_or_else(|e| panic!("{} bytes: {e}", orig.len()));
    }
    let bytes: usize = frames.iter().map(Vec::len).sum();
    assert_eq!(o.c.tx_bytes, bytes as u64, "transmitted bytes count the fragments");
}

#[test]
fn jumbo_frames_over_the_egress_mtu_get_the_icmp_error() {
    // out1 keeps MTU 1500: a 9000-byte datagram with DF gets "fragmentation needed" (IPv4)
    // or "packet too big" (IPv6) carrying the MTU, and is counted as pkt_too_big.
    let v4 = udp4(SRC_V4, DST1_V4, 1, 9).len(9000).build();
    let v6 = udp6(SRC_V6, DST1_V6, 1, 9).len(9000).build();
    let o = run_both(&[v4.clone(), v6.clone()], &Setup::default());
    assert_eq!(o.drops(), [(DropReason::PktTooBig.name(), 2)].into_iter().collect());
    assert!(o.port(P_OUT1).is_empty());
    let errs = o.port(P_IN);
    assert_eq!(errs.len(), 2);
    assert_eq!(assert_icmp4_error(&errs[0], 3, 4, IN_V4, &v4) & 0xffff, 1500);
    assert_eq!(assert_icmp6_error(&errs[1], 2, 0, IN_V6, &v6), 1500);
}

#[test]
fn local_delivery_reads_the_whole_chain() {
    let ping = ping4(HOST_V4, IN_V4, 7, 1).len(9000).build();
    let ping6 = ping6(HOST_V6, IN_V6, 7, 1).len(9000).build();
    let dgram = udp4(HOST_V4, IN_V4, 40000, 5001).seq(99).len(5000).build();
    // The same datagram with one bit flipped deep in a fragment: the checksum covers it.
    let mut bad = dgram.clone();
    bad[4500] ^= 0x10;
    let setup = Setup { sockets: vec![(5001, 16)], ..Setup::default() };
    let o = run_both(&[ping.clone(), ping6.clone(), dgram.clone(), bad], &setup);
    assert_eq!(o.drops(), [(DropReason::L4Csum.name(), 1)].into_iter().collect());
    let replies = o.port(P_IN);
    assert_eq!(replies.len(), 2, "both echo requests answered");
    assert_eq!(replies[0].len(), ping.len(), "the whole echo payload comes back");
    let ip = ipv4_of(&replies[0]);
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(), "echo reply checksum over all fragments");
    assert_eq!(icmp.msg_type(), 0);
    assert_eq!(&replies[0][42..], &ping[42..], "payload unchanged");
    assert_eq!(replies[1].len(), ping6.len());
    let ip6 = ipv6_of(&replies[1]);
    let icmp6 = Icmpv6Packet::new_checked(ip6.payload()).unwrap();
    assert!(icmp6.verify_checksum(&ip6.src_addr(), &ip6.dst_addr()), "ICMPv6 echo reply checksum");
    assert_eq!(icmp6.msg_type(), 129);
    assert_eq!(o.sockets[0].len(), 1, "the good datagram reached the socket");
    assert_eq!(o.sockets[0][0], &dgram[42..], "whole payload, fragments included");
}

static LINEAR_SEEN: AtomicUsize = AtomicUsize::new(0);

#[test]
fn generic_xdp_linearizes_for_programs_that_are_not_frags_aware() {
    // As skb_linearize: the program sees the whole frame in one buffer; what it sends back
    // with XDP_TX is the whole frame, and what it passes is forwarded whole.
    let pass = udp4(SRC_V4, DST1_V4, 1, 9).len(9000).build();
    let tx = udp4(SRC_V4, DST1_V4, 1, 7).len(5000).build();
    let mut setup = Setup { out1_mtu: 9000, ..Setup::default() };
    setup.xdp.push((0, XdpMode::Generic, || {
        Box::new(FnXdpLinear(|p| {
            LINEAR_SEEN.fetch_max(p.len(), Ordering::Relaxed);
            let action = if udp4_dport(p) == 7 { XDP_TX } else { XDP_PASS };
            RunOutcome { action, redirect: None }
        }))
    }));
    let o = run_both(&[pass.clone(), tx.clone()], &setup);
    assert_eq!(LINEAR_SEEN.load(Ordering::Relaxed), 9000, "the program saw the 9000-byte frame in one buffer");
    assert_eq!(o.drops(), Default::default());
    assert_eq!(o.port(P_IN), &[tx], "XDP_TX sends the whole frame back");
    assert_eq!(o.port(P_OUT1).len(), 1);
    assert_forwarded(&o.port(P_OUT1)[0], &pass, MAC_OUT1, MAC_NH1);
}

/// A frags-aware program (`SEC("xdp.frags")`): records the linear and fragment lengths it
/// saw and passes everything.
struct FragsProbe;

static FRAGS_SEEN: AtomicUsize = AtomicUsize::new(0);
static LINEAR_PART: AtomicUsize = AtomicUsize::new(0);

impl XdpProgram for FragsProbe {
    fn name(&self) -> String {
        "test:frags-probe".into()
    }
    fn run(&mut self, xdp: &mut XdpBuff<'_>, _env: &mut SluiceEnv<'_>) -> RunOutcome {
        LINEAR_PART.fetch_max(xdp.data_end - xdp.data, Ordering::Relaxed);
        if let Some(f) = xdp.frags.as_deref_mut() {
            FRAGS_SEEN.fetch_max(f.frags_len(), Ordering::Relaxed);
            // Write through the fragment view: the change must reach the wire.
            let last = f.nr_frags() - 1;
            if let Some(b) = f.frag_mut(last).last_mut() {
                *b ^= 0xff;
            }
        }
        RunOutcome { action: XDP_PASS, redirect: None }
    }
}

#[test]
fn native_xdp_frags_aware_programs_see_the_linear_part_and_fragments() {
    let frame = udp4(SRC_V4, DST1_V4, 1, 9).len(9000).build();
    let mut setup = Setup { out1_mtu: 9000, ..Setup::default() };
    // The program flips the last byte: the UDP checksum no longer matches, but forwarding
    // does not check it (the test compares bytes, not checksums).
    setup.xdp.push((0, XdpMode::Native, || Box::new(FragsProbe)));
    let o = run_both(std::slice::from_ref(&frame), &setup);
    assert_eq!(LINEAR_PART.load(Ordering::Relaxed), MAX_DATA, "the head buffer's linear part");
    assert_eq!(FRAGS_SEEN.load(Ordering::Relaxed), 9000 - MAX_DATA, "the rest in fragments");
    let out = &o.port(P_OUT1)[0];
    assert_eq!(out.len(), frame.len());
    let mut expect = frame.clone();
    let last = expect.len() - 1;
    // Flipped once per run; each run_both arm starts from the original frame.
    expect[last] ^= 0xff;
    assert_eq!(out[last], expect[last], "a write to a fragment reaches the wire");
    assert_eq!(&out[40..last], &frame[40..last], "everything else as sent");
}

// ---------------------------------------------------------------------------------------
// The command line: captures of every size through `sluice run`.

use sluice::port::pcap::{read_frames, write_frames};
use std::process::Command;

/// Every size from 14 bytes to 64 KiB that matters: each small size, the buffer
/// boundaries, then a stride through the rest, and the largest IP datagram in a frame.
fn every_size() -> Vec<usize> {
    let mut v: Vec<usize> = (14..=80).collect();
    for b in [MAX_DATA, MAX_DATA + FRAME_SIZE, MAX_DATA + 2 * FRAME_SIZE, 9000, 9014, 16384, 32768] {
        v.extend([b - 1, b, b + 1]);
    }
    v.extend((100..65_535).step_by(997));
    v.push(65_535 + 14);
    v.sort_unstable();
    v.dedup();
    v
}

fn sluice_run(args: &[&str]) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().expect("sluice runs");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{args:?}\n{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(v["conservation"].get("Ok").is_some(), "ledger: {}", v["conservation"]);
    v
}

fn drops(v: &serde_json::Value) -> u64 {
    v["counters"]["drops"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).sum()
}

#[test]
fn frames_of_every_size_cross_the_io_pipeline_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let frames: Vec<Vec<u8>> = every_size().into_iter().map(|n| (0..n).map(|i| (i * 13 + n) as u8).collect()).collect();
    let (inp, out) = (dir.path().join("in.pcap"), dir.path().join("out.pcap"));
    write_frames(&inp, &frames).unwrap();
    let io = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/io.toml");
    let v = sluice_run(&["run", "--config", io, "--pcap-in", inp.to_str().unwrap(), "--pcap-out", out.to_str().unwrap(), "--json", "-q"]);
    assert_eq!(v["counters"]["rx"], frames.len() as u64);
    assert_eq!(v["counters"]["tx"], frames.len() as u64, "nothing dropped in io");
    let got = read_frames(&out).unwrap();
    assert_eq!(got.len(), frames.len());
    for (g, f) in got.iter().zip(&frames) {
        assert!(g == f, "a {}-byte frame came out as {} bytes or changed", f.len(), g.len());
    }
}

#[test]
fn frames_of_every_size_through_the_router_are_forwarded_or_answered_by_name() {
    // The lab with a 9000-byte MTU toward the sink: datagrams up to 9000 bytes are forwarded
    // whole; longer ones (DF set) get "fragmentation needed" and count as pkt_too_big.
    let dir = tempfile::tempdir().unwrap();
    let lab = include_str!("../src/config/lab.toml")
        .replace("name = \"sink0\"\nkind = \"check\"", "name = \"sink0\"\nkind = \"check\"\nmtu = 9000");
    assert!(lab.contains("mtu = 9000"), "the lab config changed shape");
    let cfg = dir.path().join("lab.toml");
    std::fs::write(&cfg, lab).unwrap();
    let lab_mac = [2, 0, 0, 0, 0, 1];
    let sizes: Vec<usize> = every_size().into_iter().filter(|&n| n >= 60).collect();
    let frames: Vec<Vec<u8>> = sizes.iter().map(|&n| udp4([198, 18, 0, 1], [10, 0, 0, 1], 1, 9).dst_mac(lab_mac).len(n).build()).collect();
    let (inp, out) = (dir.path().join("in.pcap"), dir.path().join("out.pcap"));
    write_frames(&inp, &frames).unwrap();
    let v = sluice_run(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--pcap-in",
        inp.to_str().unwrap(),
        "--pcap-out",
        out.to_str().unwrap(),
        "--json",
        "-q",
        // One ICMP error per datagram: the rate limits would hide some.
        "--set",
        "net.ipv4.icmp_ratelimit=0",
        "--set",
        "net.ipv4.icmp_msgs_per_sec=1000000000",
        "--set",
        "net.ipv4.icmp_msgs_burst=1000000000",
    ]);
    let fits = sizes.iter().filter(|&&n| n - 14 <= 9000).count() as u64;
    let too_big = frames.len() as u64 - fits;
    assert!(fits > 20 && too_big > 20, "both fates exercised");
    assert_eq!(v["counters"]["rx"], frames.len() as u64);
    assert_eq!(v["counters"]["tx"].as_u64().unwrap(), fits + too_big, "forwarded + one ICMP error each");
    assert_eq!(drops(&v), too_big, "every datagram over the MTU dropped as pkt_too_big");
    let got = read_frames(&out).unwrap();
    assert_eq!(got.len() as u64, fits);
    let spec = CheckSpec { src_mac: Some([2, 0, 0, 0, 0, 2]), dst_macs: vec![[2, 0, 0, 0, 0, 0xbb]], ttl: Some(63) };
    for (g, f) in got.iter().zip(frames.iter().filter(|f| f.len() - 14 <= 9000)) {
        assert_eq!(g.len(), f.len(), "forwarded whole");
        check_frame(&spec, g).unwrap_or_else(|e| panic!("{} bytes: {e}", f.len()));
        assert_eq!(&g[34..], &f[34..], "payload unchanged");
    }
}

/// `sluice xdp run` follows BPF_PROG_TEST_RUN for frames past the linear part: 3520 bytes in
/// the linear part, the rest in 4 KiB fragments (17 at most), the output returned whole. The
/// frags-aware object reads the last bytes through bpf_xdp_load_bytes, flips byte 4000 with
/// load/store_bytes and cuts 100 bytes off the end across fragments (the kernel cross-check
/// in scripts/acceptance/xdp-kernel.sh compares the same run with the kernel's, as root).
#[test]
fn xdp_run_passes_frames_past_the_linear_part_whole_through_fragments() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = tempfile::tempdir().unwrap();
    for engine in ["interp", "jit"] {
        let json = dir.path().join(format!("{engine}.json"));
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["xdp", "run", &format!("{root}/bpf/obj/xdp_frags_parse.o"), "--packets-dir", &format!("{root}/bpf/packets-big")])
            .args(["--engine", engine, "--json", json.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let runs = v["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 18);
        for r in runs {
            let name = r["packet"].as_str().unwrap();
            let input = std::fs::read(format!("{root}/bpf/packets-big/{name}")).unwrap();
            let n = input.len();
            if n > 3520 + 17 * 4096 {
                assert!(r["error"].as_str().unwrap().contains("Cannot allocate memory"), "{name}: {r}");
                continue;
            }
            let out = hex(r["data_out"].as_str().unwrap());
            if n > 0xffff {
                assert_eq!(r["retval"], 0, "{name}: the program aborts past 64 KiB");
                assert_eq!(out, input, "{name}: returned whole, untouched");
            } else if n > 4000 {
                assert_eq!(r["retval"], 2, "{name}");
                let mut expect = input.clone();
                expect[4000] ^= 0xff;
                expect.truncate(n - 100);
                assert_eq!(out.len(), expect.len(), "{name}: 100 bytes cut from the fragments");
                assert!(out == expect, "{name} ({engine}): bytes differ");
            } else {
                assert_eq!((r["retval"].as_u64(), out.len()), (Some(2), n), "{name}");
                assert!(out == input, "{name}: unchanged");
            }
        }
        // stats: frames, whole lengths, linear lengths (3520 at most per frame).
        let stat = |i: usize| -> u64 {
            let b: Vec<u8> = v["maps"]["stats"][i]["value"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| u8::from_str_radix(&x.as_str().unwrap()[2..], 16).unwrap())
                .collect();
            u64::from_le_bytes(b.try_into().unwrap())
        };
        let ran: Vec<usize> = runs
            .iter()
            .filter(|r| r["error"].is_null())
            .map(|r| std::fs::read(format!("{root}/bpf/packets-big/{}", r["packet"].as_str().unwrap())).unwrap().len())
            .collect();
        assert_eq!(stat(0), ran.len() as u64);
        assert_eq!(stat(1), ran.iter().sum::<usize>() as u64, "bpf_xdp_get_buff_len counts the fragments");
        assert_eq!(stat(2), ran.iter().map(|&n| n.min(3520)).sum::<usize>() as u64, "the linear part is 3520 bytes at most");
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

// ---------------------------------------------------------------------------------------
// IPv4 fragmentation on output (ip_fragment / ip_do_fragment), from chains of any size.

/// Inserts IPv4 options after the 20-byte header of an untagged frame (IHL, total length
/// and header checksum fixed; the UDP checksum does not cover them).
fn with_options(frame: &[u8], opts: &[u8]) -> Vec<u8> {
    assert_eq!(opts.len() % 4, 0);
    let mut f = frame[..34].to_vec();
    f.extend_from_slice(opts);
    f.extend_from_slice(&frame[34..]);
    f[14] = 0x40 | ((20 + opts.len()) / 4) as u8;
    let tot = u16::from_be_bytes([f[16], f[17]]) + opts.len() as u16;
    f[16..18].copy_from_slice(&tot.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = sluice::wire::checksum::checksum(&f[14..34 + opts.len()]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn datagrams_without_df_over_the_mtu_are_fragmented_as_the_kernel_does() {
    // A 9000-byte jumbo datagram (a buffer chain) to out1 (MTU 1500): 1480-byte payloads.
    let jumbo = udp4(SRC_V4, DST1_V4, 1, 9).seq(7).len(9014).df(false).build();
    // Options: Record Route (type 7, not copied) and Router Alert (type 148, copied).
    let rr_ra = [7, 7, 4, 0, 0, 0, 0, 148, 4, 0, 0, 1];
    let opts = with_options(&udp4(SRC_V4, DST1_V4, 2, 9).seq(8).len(3000).df(false).build(), &rr_ra);
    // Already a first fragment (MF set): every piece keeps MF.
    let mut first_frag = udp4(SRC_V4, DST1_V4, 3, 9).len(2000).df(false).build();
    first_frag[20] |= 0x20;
    first_frag[24..26].copy_from_slice(&[0, 0]);
    let c = sluice::wire::checksum::checksum(&first_frag[14..34]);
    first_frag[24..26].copy_from_slice(&c.to_be_bytes());
    let frames = vec![jumbo.clone(), opts.clone(), first_frag.clone()];
    let o = run_both(&frames, &Setup::default());
    assert_eq!(o.drops(), Default::default(), "nothing dropped");
    // Each datagram's fragments leave together, in order; different flows may be processed by
    // different workers (SLUICE_TEST_RPS), so the datagrams are put back in input order (by the
    // UDP source port in each first fragment) before the checks.
    let mut datagrams: Vec<Vec<Vec<u8>>> = Vec::new();
    for f in o.port(P_OUT1) {
        if ipv4_of(f).frag_offset() == 0 {
            datagrams.push(Vec::new());
        }
        datagrams.last_mut().expect("a datagram starts with its offset-0 fragment").push(f.clone());
    }
    datagrams.sort_by_key(|d| {
        let l4 = 14 + ipv4_of(&d[0]).header_len();
        u16::from_be_bytes([d[0][l4], d[0][l4 + 1]])
    });
    let out = &datagrams.concat();
    // 8980 payload bytes in 1480s: 7 fragments; 2966 bytes after a 32-byte header in 1464s:
    // 3; the first fragment's 1966 bytes: 2.
    assert_eq!(out.len(), 7 + 3 + 2);
    assert!(out.iter().all(|f| f.len() <= 14 + 1500), "no fragment over the MTU");
    assert_eq!(reassemble_frags(&out[..7]), ip_datagram(&jumbo)[20..], "the jumbo datagram, whole");
    assert_eq!(reassemble_frags(&out[7..10]), ip_datagram(&opts)[32..]);
    assert!(out[7..10].iter().all(|f| ipv4_of(f).header_len() == 32), "every fragment keeps the header length");
    // Record Route is filled in (out1's address) before the datagram is cut (ip_forward_options).
    assert_eq!(&out[7][34..46], &[7, 7, 8, 198, 51, 100, 1, 148, 4, 0, 0, 1], "the first fragment carries every option");
    for f in &out[8..10] {
        assert_eq!(&f[34..46], &[1, 1, 1, 1, 1, 1, 1, 148, 4, 0, 0, 1], "later ones only the copied (RR becomes NOPs)");
    }
    assert_eq!(reassemble_frags(&out[10..12]), ip_datagram(&first_frag)[20..]);
    assert!(ipv4_of(&out[10]).more_frags() && ipv4_of(&out[11]).more_frags(), "a first fragment's pieces all keep MF");
    assert_eq!((o.c.ip_frag_oks, o.c.ip_frag_creates), (3, 12));
    assert_eq!(o.c.originated, 12 - 3, "k fragments from one datagram: k - 1 originated");
}

/// Reassembles fragments whose last one may keep MF (a fragment fragmented again): checks
/// TTL, checksums, offsets and sizes as `reassemble_v4` without the MF rule.
fn reassemble_frags(frags: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, f) in frags.iter().enumerate() {
        let ip = ipv4_of(f);
        assert!(ip.verify_checksum() && ip.ttl() == 63, "fragment {i}");
        assert_eq!(ip.frag_offset() as usize, out.len(), "fragment {i}: offset");
        assert!(i + 1 == frags.len() || ip.more_frags(), "fragment {i}: MF");
        out.extend_from_slice(ip.payload());
    }
    out
}

#[test]
fn chained_frames_are_trimmed_to_the_ip_length() {
    // pskb_trim_rcsum: bytes past the IP datagram's length (link padding, trailing garbage)
    // are cut on receive, for a buffer chain as for one buffer; the forwarded frame is the
    // datagram alone.
    let mut frames = Vec::new();
    let mut padded = Vec::new();
    for (i, &n) in [3000usize, MAX_DATA + FRAME_SIZE + 1, 200].iter().enumerate() {
        for f in [udp4(SRC_V4, DST1_V4, 1, 9).seq(i as u32).len(n).build(), udp6(SRC_V6, DST1_V6, 1, 9).seq(i as u32).len(n).build()] {
            let mut p = f.clone();
            p.extend_from_slice(&[0xee; 24]);
            frames.push(f);
            padded.push(p);
        }
    }
    let setup = Setup { out1_mtu: 9000, ..Setup::default() };
    let o = run_both(&padded, &setup);
    assert_eq!(o.drops(), Default::default(), "nothing dropped");
    assert_eq!(o.port(P_OUT1).len(), frames.len());
    for (out, orig) in o.port(P_OUT1).iter().zip(&frames) {
        assert_eq!(out.len(), orig.len(), "the 24 trailing bytes are gone");
        assert_forwarded(out, orig, MAC_OUT1, MAC_NH1);
    }
}
