//! The built-in lab (`config::lab`) end to end, for every pipeline in both receive modes,
//! and the `sluice` binary: a run that succeeds, configs that fail with the field named.

mod common;

use sluice::buf::Pool;
use sluice::cli::run::report;
use sluice::config::{self, Config, PortKind};
use sluice::datapath::{Datapath, Pipeline};
use sluice::napi::RunLimit;
use sluice::rx::local::SocketId;
use std::process::Command;
use std::time::Duration;

/// `--packets`-style limit: the run stops once this many packets were received (it may
/// overshoot by what one batch of rounds takes in).
const PACKETS: u64 = 20_000;

struct LabRun {
    dp: Datapath,
    report: sluice::cli::run::RunReport,
}

fn run_lab(cfg: &Config, listified: bool) -> LabRun {
    // The local lab's application reads its socket once a tick: a worker fed faster than
    // that by RPS overflows it (socket_rcvbuff), which is timing, not the datapath; RPS
    // into sockets is tests/rps.rs's (RFS) subject.
    let mut sets = if cfg.pipeline == Pipeline::Local { Vec::new() } else { common::rps_sets() };
    sets.push(format!("rx.listified={}", listified as u8));
    let tun = cfg.tunables(&sets).unwrap();
    assert_eq!(tun.listified, listified as u8);
    let cfg = &with_a_tx_queue_per_worker(cfg, &tun);
    let pool = Pool::new(cfg.pool_frames).unwrap();
    let mut dp = cfg.build(tun, &pool).unwrap();
    let el = dp.run(RunLimit { packets: Some(PACKETS), ..Default::default() }, Duration::from_secs(1), |_, _| {});
    let report = report(&dp, el);
    // `napi::run` ends with a drain: nothing may be held any more.
    assert_eq!(report.conservation, Ok(()), "{:?}", report.counters);
    assert_eq!(report.buffers_leaked, 0, "buffer leak");
    assert_eq!(dp.in_flight(), 0);
    assert_eq!(report.check_failures, 0, "check sink: {:?}", report.check_report);
    assert!(report.check_report.is_empty());
    let c = &report.counters;
    assert!(c.rx >= PACKETS, "ran until the packet limit: {}", c.rx);
    assert_eq!(report.ports[0].1.rx_packets, c.rx, "every packet came from the generator");
    LabRun { dp, report }
}

/// On several workers (SLUICE_TEST_RPS) the sink takes a transmit queue per worker (XPS),
/// as `sluice bench rps` does: each worker sends what it processed instead of handing it to
/// the queue's one owner through a bounded queue a fast generator can overrun.
fn with_a_tx_queue_per_worker(cfg: &Config, tun: &sluice::config::Tunables) -> Config {
    let mut cfg = cfg.clone();
    let workers = (64 - tun.rps_cpus.leading_zeros()) as u16;
    if workers > 1 {
        cfg.ports[1].rss_queues = Some(workers);
    }
    cfg
}

fn modes() -> [bool; 2] {
    [false, true]
}

#[test]
fn lab_l3fwd_forwards_everything() {
    for listified in modes() {
        let r = run_lab(&config::lab(Pipeline::L3fwd), listified);
        let c = &r.report.counters;
        assert_eq!(c.total_drops(), 0, "{:?}", c.nonzero_drops());
        assert_eq!((c.tx, c.local, c.originated), (c.rx, 0, 0), "all forwarded");
        assert_eq!(c.tx_bytes, c.rx_bytes);
        let sink = &r.report.ports[1].1;
        assert_eq!(sink.tx_packets, c.rx, "everything reached the check sink");
        assert_eq!(r.report.ports[0].1.tx_packets, 0);
        // The lab mixes IPv4 and IPv6 flows; the check sink (TTL 63, router MAC, next-hop
        // MAC, checksums) passed every frame.
        if listified {
            assert!(c.rx_lists > 0 && c.rx_runs >= c.rx_lists);
            assert_eq!(c.route_lookups + c.route_hint_hits, c.rx);
        } else {
            assert_eq!((c.rx_lists, c.route_hint_hits), (0, 0));
            assert_eq!(c.route_lookups, c.rx);
        }
    }
}

#[test]
fn lab_local_delivers_everything_to_the_socket() {
    for listified in modes() {
        let r = run_lab(&config::lab(Pipeline::Local), listified);
        let c = &r.report.counters;
        assert_eq!(c.total_drops(), 0, "{:?}", c.nonzero_drops());
        assert_eq!((c.local, c.tx, c.originated), (c.rx, 0, 0), "all delivered locally");
        // Each worker has its instance of the socket (one worker unless SLUICE_TEST_RPS).
        let socks: Vec<_> = r.dp.workers.iter().map(|w| w.sockets.socket(SocketId(0)).expect("the lab's socket")).collect();
        assert!(socks.iter().all(|s| s.port == 5001));
        assert_eq!(socks.iter().map(|s| s.received).sum::<u64>(), c.rx, "every datagram reached the UDP socket on 5001");
        assert!(r.dp.workers.iter().all(|w| w.sockets.queued() == 0), "the lab application drained it");
    }
}

fn captured(r: &LabRun) -> Vec<Vec<u8>> {
    r.dp.ports().nth(1).unwrap().captured().expect("capture sink").to_vec()
}

fn io_lab(p: Pipeline) -> Config {
    let mut cfg = config::lab(p);
    cfg.ports[1].kind = PortKind::Capture;
    cfg
}

#[test]
fn lab_io_transmits_everything_untouched() {
    for listified in modes() {
        let r = run_lab(&io_lab(Pipeline::Io), listified);
        let c = &r.report.counters;
        assert_eq!(c.total_drops(), 0);
        assert_eq!((c.tx, c.local), (c.rx, 0));
        let frames = captured(&r);
        assert_eq!(frames.len() as u64, c.rx);
        for f in &frames {
            assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 1], "destination MAC as generated");
            assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 0xaa], "source MAC as generated");
            assert_eq!(common::ipv4_of(f).ttl(), 64, "io does not touch the packet");
        }
        assert_eq!(c.rx_lists, 0, "io bypasses the receive path");
    }
}

#[test]
fn lab_macswap_swaps_macs() {
    for listified in modes() {
        let r = run_lab(&io_lab(Pipeline::Macswap), listified);
        let c = &r.report.counters;
        assert_eq!(c.total_drops(), 0);
        assert_eq!((c.tx, c.local), (c.rx, 0));
        let frames = captured(&r);
        assert_eq!(frames.len() as u64, c.rx);
        for f in &frames {
            assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 0xaa], "destination = the generator's source MAC");
            assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 1], "source = the generator's destination MAC");
            assert_eq!(common::ipv4_of(f).ttl(), 64, "only the MACs change");
        }
    }
}

#[test]
fn lab_modes_agree_on_a_fixed_packet_count() {
    // A generator packet limit (not a run limit) makes both runs see exactly the same
    // packets: the fates must then be identical.
    for p in [Pipeline::L3fwd, Pipeline::Local] {
        let mut cfg = config::lab(p);
        cfg.ports[0].gen.as_mut().unwrap().packets = Some(10_000);
        let fates: Vec<_> = modes()
            .iter()
            .map(|&l| {
                let mut sets = if p == Pipeline::Local { Vec::new() } else { common::rps_sets() };
                sets.push(format!("rx.listified={}", l as u8));
                let tun = cfg.tunables(&sets).unwrap();
                let cfg = with_a_tx_queue_per_worker(&cfg, &tun);
                let pool = Pool::new(cfg.pool_frames).unwrap();
                let mut dp = cfg.build(tun, &pool).unwrap();
                dp.run(RunLimit::default(), Duration::from_secs(1), |_, _| {});
                common::finish(&mut dp, 10_000);
                let mut f = common::fates(&dp.counters());
                if dp.workers.len() > 1 {
                    // How many polls and doorbells it took depends on the threads' timing.
                    (f.napi_polls, f.doorbells) = (0, 0);
                }
                f
            })
            .collect();
        assert_eq!(fates[0], fates[1], "{p:?}");
    }
}

// ---------------------------------------------------------------------------------------
// The binary
// ---------------------------------------------------------------------------------------

fn sluice(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().expect("run sluice");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn cli_lab_run_succeeds_with_conservation_ok() {
    let (ok, out, err) = sluice(&["run", "--seconds", "1", "--quiet"]);
    assert!(ok, "exit status; stderr: {err}\nstdout: {out}");
    assert!(out.contains("conservation: ok"), "{out}");
    assert!(!out.contains("check:"), "no check failures: {out}");
    assert!(!out.contains("buffers still held"), "no buffer leak: {out}");
}

#[test]
fn cli_packet_limit_json_in_both_modes() {
    for mode in ["0", "1"] {
        let set = format!("rx.listified={mode}");
        let (ok, out, err) = sluice(&["run", "--pipeline", "local", "--packets", "5000", "--json", "--set", &set]);
        assert!(ok, "stderr: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
        let c = &v["counters"];
        let rx = c["rx"].as_u64().unwrap();
        assert!(rx >= 5000);
        assert_eq!(c["local"].as_u64(), Some(rx), "local pipeline: all delivered");
        assert_eq!(v["conservation"], serde_json::json!({"Ok": null}));
        assert_eq!(v["buffers_leaked"], 0);
        assert_eq!(v["check_failures"], 0);
        assert_eq!(c["rx_lists"].as_u64().unwrap() > 0, mode == "1");
    }
}

const MINIMAL: &str = r#"
pipeline = "l3fwd"
pool_frames = 2048

[[ports]]
name = "in0"
kind = "gen"
mac = "02:00:00:00:00:01"
ipv4 = ["192.0.2.1/24"]

[[ports]]
name = "out0"
kind = "null"
mac = "02:00:00:00:00:02"
"#;

fn config_file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
    f
}

#[test]
fn cli_config_file_runs() {
    // No routes: every packet is dropped as ip_noroute (the ICMP errors find no route
    // back either), and the ledger still balances.
    let f = config_file(MINIMAL);
    let (ok, out, err) = sluice(&["run", "--config", f.path().to_str().unwrap(), "--packets", "2000", "--quiet"]);
    assert!(ok, "stderr: {err}");
    assert!(out.contains("conservation: ok"), "{out}");
    assert!(out.contains("ip_noroute"), "{out}");
}

#[test]
fn cli_bad_config_names_the_field() {
    let cases: &[(String, &str)] = &[
        (MINIMAL.replace("\"02:00:00:00:00:01\"", "\"nope\""), "ports[0] (in0).mac"),
        (MINIMAL.replace("[\"192.0.2.1/24\"]", "[\"192.0.2.1/33\"]"), "ports[0] (in0).ipv4"),
        (format!("{MINIMAL}\n[[routes]]\nprefix = \"10.0.0.0/8\"\nport = \"nowhere\"\n"), "routes[0].port"),
        (format!("{MINIMAL}\n[[routes]]\nprefix = \"10.0.0.0/8\"\nvia = \"203.0.113.9\"\nport = \"in0\"\n"), "routes[0].via"),
        (format!("{MINIMAL}\n[[neighbours]]\nport = \"in0\"\nip = \"192.0.2.9\"\nmac = \"zz\"\n"), "neighbours[0].mac"),
        (MINIMAL.replace("pool_frames = 2048", "pool_frames = 2048\nbogus = 1"), "bogus"),
        (MINIMAL.replace("pool_frames = 2048", "pool_frames = 2048\n[tunables]\n\"net.core.dev_weight\" = 0"), "net.core.dev_weight"),
        (MINIMAL.replace("pool_frames = 2048", "pool_frames = 2048\n[tunables]\n\"net.core.nope\" = 1"), "net.core.nope"),
    ];
    for (text, field) in cases {
        let f = config_file(text);
        let (ok, out, err) = sluice(&["run", "--config", f.path().to_str().unwrap(), "--packets", "100", "--quiet"]);
        assert!(!ok, "must fail for {field}; stdout: {out}");
        assert!(err.contains(field), "error must name `{field}`: {err}");
    }
    let (ok, _, err) = sluice(&["run", "--config", "/nonexistent/sluice.toml", "--quiet"]);
    assert!(!ok);
    assert!(err.contains("/nonexistent/sluice.toml"), "{err}");
    let (ok, _, err) = sluice(&["run", "--pipeline", "warp", "--quiet"]);
    assert!(!ok);
    assert!(err.contains("warp"), "{err}");
    let (ok, _, err) = sluice(&["run", "--set", "rx.listified=2", "--quiet"]);
    assert!(!ok);
    assert!(err.contains("rx.listified"), "{err}");
}
