//! Every pipeline (io, macswap, l3fwd, local; listified on and off) on the built-in lab
//! with a misbehaving wire (`port::fault`): each fault kind alone and all at once, on the
//! receive side (generator) and the transmit side (sink). Whatever the wire does, the ledger
//! balances, no buffer is left out of the pool, frames that fail the router's checks are only
//! ever damaged ones, and a seed replays exactly.

mod common;

use sluice::buf::Pool;
use sluice::config::{self, Config, PortKind, XdpConfig};
use sluice::datapath::{Datapath, Pipeline};
use sluice::napi::RunLimit;
use sluice::port::fault::{FaultConfig, FaultSide, FaultStats};
use sluice::port::parse_mac;
use sluice::port::sink::{check_frame, CheckSpec};
use sluice::stats::DropReason;
use sluice::xdp::ebpf::EngineKind;
use sluice::xdp::XdpMode;
use std::time::Duration;

/// Packets the generator sends per run (a generator limit, so runs are reproducible).
const PACKETS: u64 = 3000;
const PORT_GEN: usize = 0;
const PORT_SINK: usize = 1;

const PIPELINES: [Pipeline; 4] = [Pipeline::Io, Pipeline::Macswap, Pipeline::L3fwd, Pipeline::Local];

/// One fault kind, as the config form sets it.
fn kinds() -> Vec<(&'static str, FaultConfig)> {
    let f = FaultConfig::default;
    vec![
        ("drop", FaultConfig { drop: 0.05, ..f() }),
        ("duplicate", FaultConfig { duplicate: 0.05, ..f() }),
        ("corrupt", FaultConfig { corrupt: 0.05, ..f() }),
        ("truncate", FaultConfig { truncate: 0.05, ..f() }),
        ("reorder", FaultConfig { reorder: 0.1, ..f() }),
        ("delay", FaultConfig { delay_polls: 3, ..f() }),
        ("rate_per_poll", FaultConfig { rate_per_poll: 5, ..f() }),
        ("tx_full", FaultConfig { tx_full: 0.3, ..f() }),
    ]
}

fn all_at_once(seed: u64) -> FaultConfig {
    FaultConfig {
        seed,
        drop: 0.02,
        duplicate: 0.02,
        corrupt: 0.02,
        truncate: 0.02,
        reorder: 0.05,
        delay_polls: 1,
        rate_per_poll: 40,
        tx_full: 0.1,
        side: FaultSide::Both,
        ..FaultConfig::default()
    }
}

/// The lab for `p` with a capture sink (so the test sees every frame that reached the wire's
/// far end) and a generator packet limit.
fn lab(p: Pipeline) -> Config {
    let mut c = config::lab(p);
    c.ports[PORT_SINK].kind = PortKind::Capture;
    c.ports[PORT_SINK].check = None;
    c.ports[PORT_GEN].gen.as_mut().unwrap().packets = Some(PACKETS);
    c
}

/// What a clean frame on the sink's wire must look like for this pipeline.
fn expected(p: Pipeline) -> CheckSpec {
    let mac = |s: &str| parse_mac(s).unwrap();
    match p {
        Pipeline::L3fwd => CheckSpec { src_mac: Some(mac("02:00:00:00:00:02")), dst_macs: vec![mac("02:00:00:00:00:bb")], ttl: Some(63) },
        Pipeline::Io => CheckSpec { src_mac: Some(mac("02:00:00:00:00:aa")), dst_macs: vec![mac("02:00:00:00:00:01")], ttl: Some(64) },
        Pipeline::Macswap => CheckSpec { src_mac: Some(mac("02:00:00:00:00:01")), dst_macs: vec![mac("02:00:00:00:00:aa")], ttl: Some(64) },
        // Nothing is forwarded: anything on the sink's wire fails.
        Pipeline::Local => CheckSpec { ttl: Some(0), ..CheckSpec::default() },
    }
}

struct Faulted {
    dp: Datapath,
    faults: FaultStats,
    /// Frames that reached the sink's wire.
    wire: Vec<Vec<u8>>,
    /// Of those, the ones that fail the pipeline's expectations.
    bad: usize,
}

/// Runs the lab with `gen_fault` on the generator port and `sink_fault` on the sink port,
/// then checks everything that must hold whatever the faults.
fn run(p: Pipeline, listified: bool, gen_fault: Option<FaultConfig>, sink_fault: Option<FaultConfig>) -> Faulted {
    // Under SLUICE_TEST_RPS the lab runs on two workers (the local pipeline's socket is
    // read by worker 0's application: it keeps one).
    let sets = if p == Pipeline::Local { Vec::new() } else { common::rps_sets() };
    run_with(p, listified, gen_fault, sink_fault, sets)
}

fn run_with(
    p: Pipeline,
    listified: bool,
    gen_fault: Option<FaultConfig>,
    sink_fault: Option<FaultConfig>,
    mut sets: Vec<String>,
) -> Faulted {
    let mut cfg = lab(p);
    cfg.ports[PORT_GEN].fault = gen_fault;
    cfg.ports[PORT_SINK].fault = sink_fault;
    sets.push(format!("rx.listified={}", listified as u8));
    let tun = cfg.tunables(&sets).unwrap();
    let pool = Pool::new(cfg.pool_frames).unwrap();
    let mut dp = cfg.build(tun, &pool).unwrap();
    dp.run(RunLimit::default(), Duration::from_secs(3600), |_, _| {});
    let what = format!("{p:?} listified={listified}");

    // The ledger and the pool.
    assert_eq!(dp.conservation(), Ok(()), "{what}");
    assert_eq!(dp.in_flight(), 0, "{what}");
    assert_eq!(dp.buffers_in_use(), 0, "{what}: buffer leak");
    assert_eq!(dp.w().sockets.queued(), 0, "{what}");

    let faults = FaultStats::of_ports(dp.ports());
    let c = &dp.counters();
    let gen = dp.ports().nth(PORT_GEN).unwrap().stats();
    // Receive side: what the datapath got is what the wire delivered, nothing held back at
    // the end (a generator limit ends the run only once the wire is empty).
    assert_eq!(gen.rx_packets, c.rx, "{what}");
    assert_eq!(faults.rx.discarded, 0, "{what}");
    assert_eq!(c.rx, PACKETS - faults.rx.dropped + faults.rx.duplicated, "{what}: {faults:?}");
    // Transmit side: every refusal is a tx_error drop, and the sink's wire carries what the
    // port accepted, less losses, plus duplicates.
    assert_eq!(c.dropped(DropReason::TxError), faults.tx.tx_refused + faults.tx.rate_limited, "{what}: {faults:?}");
    let port_tx: u64 = dp.ports().map(|p| p.stats().tx_packets).sum();
    assert_eq!(port_tx, c.tx, "{what}");
    let wire = dp.ports().nth(PORT_SINK).unwrap().captured().unwrap().to_vec();
    let sink_f = dp.ports().nth(PORT_SINK).unwrap().fault_stats().unwrap_or_default().tx;
    assert_eq!(
        wire.len() as u64,
        dp.ports().nth(PORT_SINK).unwrap().stats().tx_packets - sink_f.dropped + sink_f.duplicated - sink_f.inner_refused,
        "{what}"
    );

    // Only damaged frames fail: on the wire, or as drops / ICMP errors in the datapath.
    let spec = expected(p);
    let bad = wire.iter().filter(|f| check_frame(&spec, f).is_err()).count();
    let damaged = faults.damaged();
    assert!(bad as u64 <= damaged, "{what}: {bad} bad frames, {damaged} damaged: {faults:?}");
    let other_drops = c.total_drops() - c.dropped(DropReason::TxError);
    assert!(other_drops <= faults.rx.corrupted + faults.rx.truncated, "{what}: {:?} {faults:?}", c.nonzero_drops());
    assert!(c.originated <= faults.rx.corrupted + faults.rx.truncated, "{what}");
    if damaged == 0 {
        assert_eq!((bad, other_drops, c.originated), (0, 0, 0), "{what}: {:?}", c.nonzero_drops());
        // Clean frames all reach their destination.
        match p {
            Pipeline::Local => assert_eq!(c.local, c.rx, "{what}"),
            _ => assert_eq!(c.tx + c.dropped(DropReason::TxError), c.rx, "{what}"),
        }
    }
    Faulted { dp, faults, wire, bad }
}

/// The fault's own counter went up: the test did inject what it names.
fn injected(kind: &str, f: &sluice::port::fault::FaultCounts) -> u64 {
    match kind {
        "drop" => f.dropped,
        "duplicate" => f.duplicated,
        "corrupt" => f.corrupted,
        "truncate" => f.truncated,
        "reorder" => f.reordered,
        "delay" => f.delayed,
        "rate_per_poll" => f.rate_limited,
        "tx_full" => f.tx_refused,
        _ => unreachable!("{kind}"),
    }
}

#[test]
fn every_pipeline_under_each_receive_fault() {
    for p in PIPELINES {
        for listified in [false, true] {
            for (kind, f) in kinds() {
                if kind == "tx_full" {
                    continue; // transmit only
                }
                let r = run(p, listified, Some(FaultConfig { side: FaultSide::Rx, ..f }), None);
                assert!(injected(kind, &r.faults.rx) > 0, "{p:?} {kind}: nothing injected");
                assert_eq!(r.faults.tx, Default::default());
                if kind == "corrupt" && p != Pipeline::Local {
                    // Some damage gets through the router (it does not check L4 checksums
                    // when forwarding) and the check catches it.
                    assert!(r.bad > 0 || r.dp.counters().total_drops() > 0, "{p:?}: corruption left no trace");
                }
            }
        }
    }
}

#[test]
fn every_pipeline_under_each_transmit_fault() {
    for p in [Pipeline::Io, Pipeline::Macswap, Pipeline::L3fwd] {
        for listified in [false, true] {
            for (kind, f) in kinds() {
                let r = run(p, listified, None, Some(FaultConfig { side: FaultSide::Tx, ..f }));
                assert!(injected(kind, &r.faults.tx) > 0, "{p:?} {kind}: nothing injected");
                if kind == "corrupt" || kind == "truncate" {
                    assert!(r.bad > 0, "{p:?} {kind}: the check sees damage done after the router");
                }
                if kind == "reorder" {
                    assert!(!is_sorted_by_flow_sequence(&r.wire), "{p:?}: reordered frames arrive out of order");
                }
            }
        }
    }
}

/// The generator sends flows round robin: on a clean wire, the source ports (IPv4 UDP) of
/// consecutive frames go up by one modulo the flow count.
fn is_sorted_by_flow_sequence(frames: &[Vec<u8>]) -> bool {
    let sport = |f: &Vec<u8>| (f.len() >= 36 && f[12..14] == [8, 0]).then(|| u16::from_be_bytes([f[34], f[35]]));
    let ports: Vec<u16> = frames.iter().filter_map(sport).collect();
    ports.windows(2).all(|w| w[1] == w[0].wrapping_add(1) || w[1] < w[0])
}

#[test]
fn every_pipeline_under_all_faults_at_once() {
    for p in PIPELINES {
        for listified in [false, true] {
            let r = run(p, listified, Some(all_at_once(11)), Some(all_at_once(12)));
            let f = &r.faults;
            assert!(f.rx.dropped > 0 && f.rx.duplicated > 0 && f.rx.corrupted > 0 && f.rx.truncated > 0, "{p:?}: {f:?}");
            assert!(f.rx.reordered > 0 && f.rx.delayed > 0 && f.rx.rate_limited > 0, "{p:?}: {f:?}");
            if p != Pipeline::Local {
                assert!(f.tx.tx_refused > 0 && f.tx.dropped > 0 && f.tx.duplicated > 0, "{p:?}: {f:?}");
            }
        }
    }
}

#[test]
fn a_seed_replays_exactly() {
    for p in PIPELINES {
        for listified in [false, true] {
            // One worker: on two, which packets meet the sink's faults depends on how the
            // threads interleave their transmissions.
            let run = |p, l, g, s| run_with(p, l, g, s, Vec::new());
            let a = run(p, listified, Some(all_at_once(5)), Some(all_at_once(6)));
            let b = run(p, listified, Some(all_at_once(5)), Some(all_at_once(6)));
            assert_eq!(common::fates(&a.dp.counters()), common::fates(&b.dp.counters()), "{p:?}");
            assert_eq!(a.faults, b.faults, "{p:?}");
            assert_eq!(a.wire, b.wire, "{p:?}: same frames in the same order");
            let c = run(p, listified, Some(all_at_once(7)), Some(all_at_once(6)));
            assert_ne!(a.faults, c.faults, "{p:?}: another seed, other faults");
        }
    }
}

#[test]
fn a_token_bucket_slows_the_wire_without_loss() {
    // 50,000 packets/s with a 500-packet bucket: 3,000 packets cannot all pass at once.
    let f = FaultConfig { rate_pps: 50_000.0, side: FaultSide::Rx, ..FaultConfig::default() };
    let r = run(Pipeline::L3fwd, true, Some(f), None);
    assert!(r.faults.rx.rate_limited > 0);
    assert_eq!(r.dp.counters().rx, PACKETS, "a slower wire loses nothing");
    assert_eq!(r.wire.len() as u64, PACKETS);
}

#[test]
fn a_run_cut_short_frees_what_the_wire_held() {
    // A duration limit ends the run with frames still on the wire (delayed on receive and on
    // transmit): drain returns them, the ledger still balances, nothing leaks.
    let mut cfg = lab(Pipeline::L3fwd);
    cfg.ports[PORT_GEN].gen.as_mut().unwrap().packets = None;
    cfg.ports[PORT_GEN].fault = Some(FaultConfig { delay_polls: 50, side: FaultSide::Rx, ..FaultConfig::default() });
    cfg.ports[PORT_SINK].fault = Some(FaultConfig { delay_polls: 50, side: FaultSide::Tx, ..FaultConfig::default() });
    let tun = cfg.tunables(&[]).unwrap();
    let pool = Pool::new(cfg.pool_frames).unwrap();
    let mut dp = cfg.build(tun, &pool).unwrap();
    dp.run(RunLimit { packets: Some(20_000), ..RunLimit::default() }, Duration::from_secs(3600), |_, _| {});
    let f = dp.ports().nth(PORT_GEN).unwrap().fault_stats().unwrap();
    assert!(f.rx.discarded > 0, "frames were still held on receive: {f:?}");
    assert_eq!(dp.conservation(), Ok(()));
    assert_eq!(dp.buffers_in_use(), 0, "held frames went back to the pool");
    let sink = &dp.ports().nth(PORT_SINK).unwrap();
    assert_eq!(sink.captured().unwrap().len() as u64, sink.stats().tx_packets, "held transmit frames were delivered at drain");
}

#[test]
fn config_form_parses_and_is_validated() {
    let text = |fault: &str| {
        format!(
            "pipeline = \"io\"\n[[ports]]\nname = \"g\"\nkind = \"gen\"\nmac = \"02:00:00:00:00:01\"\npeer = \"s\"\nfault = {fault}\n\
             [ports.gen]\npackets = 100\n[[ports]]\nname = \"s\"\nkind = \"null\"\nmac = \"02:00:00:00:00:02\"\n"
        )
    };
    let ok = "{ seed = 1, drop = 0.01, duplicate = 0.01, corrupt = 0.01, truncate = 0.01, reorder = 0.01, delay_polls = 0, rate_pps = 0, tx_full = 0.0, side = \"both\" }";
    let cfg = Config::from_toml(&text(ok), "t.toml").unwrap();
    let pool = Pool::new(1024).unwrap();
    let dp = cfg.build(cfg.tunables(&[]).unwrap(), &pool).unwrap();
    assert!(dp.ports().next().unwrap().fault_stats().is_some(), "the port is wrapped");
    assert!(dp.ports().nth(1).unwrap().fault_stats().is_none());
    for (bad, field) in [
        ("{ drop = 1.5 }", "ports[0] (g).fault.drop"),
        ("{ corrupt = -0.5 }", "ports[0] (g).fault.corrupt"),
        ("{ rate_pps = -5 }", "ports[0] (g).fault.rate_pps"),
        ("{ reorder = nan }", "ports[0] (g).fault.reorder"),
        ("{ tx_full = inf }", "ports[0] (g).fault.tx_full"),
    ] {
        let cfg = Config::from_toml(&text(bad), "t.toml").unwrap();
        let e = cfg.build(cfg.tunables(&[]).unwrap(), &pool).err().expect(bad).to_string();
        assert!(e.contains(field), "`{bad}`: {e}");
    }
    for bad in ["{ side = \"up\" }", "{ dorp = 0.1 }"] {
        assert!(Config::from_toml(&text(bad), "t.toml").is_err(), "{bad}");
    }
}

#[test]
fn xdp_programs_on_a_damaged_wire() {
    // Built-in programs and clang-compiled objects (JIT), native and generic, see frames that
    // were corrupted, truncated (down to 0 bytes), duplicated and reordered: whatever their
    // verdicts, the ledger balances and no buffer is lost.
    let obj = |name: &str| format!("{}/bpf/obj/{name}", env!("CARGO_MANIFEST_DIR"));
    let programs = [
        "builtin:firewall=9,10.0.0.0/16".to_string(),
        "builtin:tx".to_string(),
        obj("xdp_proto_count.o"),
        obj("xdp_ipip_encap.o"),
        obj("xdp_macswap_tx.o"),
        obj("xdp_lru_ratelimit.o"),
    ];
    let damage = FaultConfig {
        seed: 21,
        corrupt: 0.1,
        truncate: 0.1,
        duplicate: 0.05,
        reorder: 0.05,
        side: FaultSide::Rx,
        ..FaultConfig::default()
    };
    for program in &programs {
        for mode in [XdpMode::Native, XdpMode::Generic] {
            let mut cfg = lab(Pipeline::L3fwd);
            cfg.ports[PORT_GEN].fault = Some(damage.clone());
            cfg.xdp =
                Some(XdpConfig { program: program.clone(), mode, engine: EngineKind::Jit, section: None, maps: None, map: Vec::new() });
            let pool = Pool::new(cfg.pool_frames).unwrap();
            let mut dp = cfg.build(cfg.tunables(&[]).unwrap(), &pool).unwrap();
            dp.run(RunLimit::default(), Duration::from_secs(3600), |_, _| {});
            let what = format!("{program} {mode:?}");
            let f = dp.ports().nth(PORT_GEN).unwrap().fault_stats().unwrap().rx;
            assert!(f.corrupted > 0 && f.truncated > 0, "{what}");
            assert_eq!(dp.counters().rx, PACKETS + f.duplicated, "{what}");
            assert_eq!(dp.counters().xdp_actions.iter().sum::<u64>(), dp.counters().rx, "{what}: the program ran on every frame");
            assert_eq!(dp.conservation(), Ok(()), "{what}");
            assert_eq!(dp.buffers_in_use(), 0, "{what}: buffer leak");
        }
    }
}

#[test]
fn cli_runs_a_config_with_faults() {
    // The config form end to end through `sluice run`: a lossy, reordering wire and a ring
    // that fills up, without damage (so the check sink passes): the summary's ledger balances.
    let router = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/router.toml")).unwrap();
    let rx_fault = "fault = { seed = 3, drop = 0.01, duplicate = 0.01, reorder = 0.05, delay_polls = 2, side = \"rx\" }";
    let tx_fault = "fault = { seed = 4, drop = 0.01, duplicate = 0.01, tx_full = 0.05, side = \"tx\" }";
    let text = router.replacen("kind = \"gen\"\n", &format!("kind = \"gen\"\n{rx_fault}\n"), 1).replacen(
        "kind = \"check\"\n",
        &format!("kind = \"check\"\n{tx_fault}\n"),
        1,
    );
    assert_eq!(text.matches("fault = {").count(), 2, "the generator and the sink got a fault table");
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "--config", f.path().to_str().unwrap(), "--packets", "50000", "--quiet"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("conservation: ok"), "{stdout}");
    assert!(stdout.contains("tx_error"), "the full ring shows as tx_error drops: {stdout}");
}
