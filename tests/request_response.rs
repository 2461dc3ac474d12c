//! The closed-loop generator (`gen.request_response`, netperf TCP_RR-like): 500 clients
//! with one 1-byte UDP request outstanding each to the router's echo service; a client sends
//! its next request only once its answer came back out of the generator's port.

use sluice::bench::runner::request_response;
use sluice::buf::Pool;
use sluice::config::{self, Config};
use sluice::datapath::{Datapath, Pipeline};
use sluice::napi::RunLimit;
use sluice::port::gen::{FrameSize, GenConfig, Generator, IpVersion, L4Proto};
use std::time::Duration;

fn rr_lab(flows: u32, ip: IpVersion) -> Config {
    let mut c = config::lab(Pipeline::Local);
    let g = c.ports[0].gen.as_mut().expect("lab generator");
    g.flows = flows;
    g.ip = ip;
    g.size = FrameSize::Fixed(14 + 20 + 8 + 1);
    g.dst_port = 7;
    g.request_response = true;
    c
}

/// Runs until the generator has sent `requests`, then drains; checks the ledger.
fn run(c: &Config, sets: &[&str], requests: u64) -> Datapath {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let tun = c.tunables(&sets).expect("tunables");
    let pool = Pool::new(c.pool_frames).expect("pool");
    let mut dp = c.build(tun, &pool).expect("build");
    dp.run_until(&RunLimit { packets: Some(requests), ..Default::default() }, Duration::ZERO, |_, _| {});
    assert_eq!(dp.conservation(), Ok(()), "{:?}", dp.counters());
    assert_eq!(dp.in_flight(), 0);
    assert_eq!(dp.buffers_in_use(), 0, "leaked buffers");
    dp
}

#[test]
fn every_request_is_answered_once_and_timed_on_one_and_two_workers() {
    for (ip, sets) in [
        (IpVersion::V4, vec![]),
        (IpVersion::Mix, vec!["rx.listified=0"]),
        (IpVersion::V4, vec!["rps_cpus=0-1"]),
        (IpVersion::Mix, vec!["rps_cpus=0-1", "net.core.busy_poll=20"]),
    ] {
        let requests = 20_000;
        let dp = run(&rr_lab(500, ip), &sets, requests);
        let c = dp.counters();
        let rr = request_response(&dp).expect("a closed-loop generator");
        assert_eq!(c.rx, requests, "{sets:?}: exactly the requests were received");
        assert_eq!(c.total_drops(), 0, "{sets:?}: {:?}", c.nonzero_drops());
        // Each request is answered by the echo service (originated) and sent back out of
        // the generator's port, where it ends its transaction.
        assert_eq!((c.tx, c.originated), (requests, requests), "{sets:?}");
        assert_eq!(rr.transactions, requests, "{sets:?}: every transaction answered");
        assert_eq!((rr.outstanding, rr.unmatched), (0, 0), "{sets:?}");
        assert_eq!(rr.latency_ns.len(), rr.transactions, "{sets:?}: one latency per transaction");
        assert!(rr.latency_ns.min() >= 1 && rr.latency_ns.max() < 10_000_000_000, "{sets:?}");
        assert_eq!(dp.port_stats(0).tx_packets, requests, "the answers left through the generator's port");
        if sets.iter().any(|s| s.starts_with("rps_cpus")) {
            assert!(dp.workers[1].c.backlog_processed > 0, "{sets:?}: worker 1 served requests");
        }
    }
}

/// Closed loop: a client never has two requests out. With 3 clients and a 64-packet poll,
/// each poll sends at most 3 requests, and the next only after the answers.
#[test]
fn a_client_sends_its_next_request_only_after_its_answer() {
    let cfg = GenConfig { flows: 3, ip: IpVersion::V4, dst_port: 7, request_response: true, ..GenConfig::default() };
    let mut g = Generator::new("rr", cfg).expect("generator");
    let pool = Pool::new(256).expect("pool");
    let mut bufs = pool.cache();
    let mut out = Vec::new();
    use sluice::port::Port;
    assert_eq!(g.rx_burst(&mut bufs, &mut out, 64), 3, "one request per client");
    assert_eq!(g.rx_burst(&mut bufs, &mut out, 64), 0, "no client may send before its answer");
    // Answer client 1 only: swap the request's ports (as the echo service does).
    let answer = |bufs: &mut sluice::buf::BufCache, p: sluice::buf::Pkt| {
        let d = bufs.data_mut(p);
        let (s, t) = ([d[34], d[35]], [d[36], d[37]]);
        d[34..36].copy_from_slice(&t);
        d[36..38].copy_from_slice(&s);
        p
    };
    let a1 = answer(&mut bufs, out[1]);
    assert_eq!(g.tx_burst(&mut bufs, &[a1], false), 1);
    let rr = g.request_response().expect("closed loop");
    assert_eq!((rr.transactions, rr.outstanding, rr.latency_ns.len()), (1, 2, 1));
    let again = bufs.alloc_copy(bufs.data(out[0]).to_vec().as_slice()).expect("buffer");
    let again = answer(&mut bufs, again);
    let mut next = Vec::new();
    assert_eq!(g.rx_burst(&mut bufs, &mut next, 64), 1, "only the answered client sends again");
    let sport = |bufs: &sluice::buf::BufCache, p: sluice::buf::Pkt| u16::from_be_bytes([bufs.data(p)[34], bufs.data(p)[35]]);
    assert_eq!(sport(&bufs, next[0]), 1024 + 1, "client 1's next request");
    assert_eq!(g.tx_burst(&mut bufs, &[again], false), 1);
    assert_eq!(g.request_response().unwrap().transactions, 2, "client 0 answered");
    // A second answer to client 0's request matches nothing.
    let dup = bufs.alloc_copy(bufs.data(out[0]).to_vec().as_slice()).expect("buffer");
    let dup = answer(&mut bufs, dup);
    g.tx_burst(&mut bufs, &[dup], false);
    assert_eq!(g.request_response().unwrap().unmatched, 1);
    for p in out.iter().chain(&next) {
        if *p != a1 {
            bufs.free(*p);
        }
    }
}

#[test]
fn bad_closed_loop_settings_are_refused() {
    let cfg = GenConfig { proto: L4Proto::Tcp, request_response: true, ..GenConfig::default() };
    let e = Generator::new("rr", cfg).err().expect("refused").to_string();
    assert!(e.contains("request_response"), "{e}");
    let mut c = rr_lab(500, IpVersion::V4);
    c.ports[0].rss_queues = Some(2);
    let pool = Pool::new(1024).unwrap();
    let e = c.build(Default::default(), &pool).err().expect("refused").to_string();
    assert!(e.contains("request_response") && e.contains("one queue"), "{e}");
}

/// A fault injector in front of the closed-loop generator (a wire with a poll of latency
/// both ways) still reports the generator's transactions: the wrapper passes them through.
#[test]
fn a_fault_wrapped_generator_still_reports_its_transactions() {
    let mut c = rr_lab(50, IpVersion::V4);
    c.ports[0].fault = Some(sluice::port::fault::FaultConfig { delay_polls: 1, ..Default::default() });
    let requests = 2_000;
    let dp = run(&c, &[], requests);
    let rr = request_response(&dp).expect("the wrapped generator's transactions");
    assert_eq!(rr.transactions, requests, "every request answered through the delaying wire");
    assert_eq!((rr.outstanding, rr.unmatched), (0, 0));
}

/// A tagged answer (a VLAN link answers tagged) ends its client's transaction: the tag is
/// skipped to find the client's port (it was not: every such answer was unmatched and each
/// client stopped after its first request).
#[test]
fn tagged_answers_end_their_transactions() {
    let cfg = GenConfig { flows: 2, ip: IpVersion::V4, dst_port: 7, request_response: true, vlan: Some(10), ..GenConfig::default() };
    let mut g = Generator::new("rr", cfg).expect("generator");
    let pool = Pool::new(64).expect("pool");
    let mut bufs = pool.cache();
    let mut out = Vec::new();
    use sluice::port::Port;
    assert_eq!(g.rx_burst(&mut bufs, &mut out, 64), 2);
    let d = bufs.data_mut(out[1]);
    assert_eq!(d[12..14], [0x81, 0x00], "tagged requests");
    // The echo: UDP ports swapped (4 bytes further in for the tag).
    let (s, t) = ([d[38], d[39]], [d[40], d[41]]);
    d[38..40].copy_from_slice(&t);
    d[40..42].copy_from_slice(&s);
    assert_eq!(g.tx_burst(&mut bufs, &[out[1]], false), 1);
    let rr = g.request_response().expect("closed loop");
    assert_eq!((rr.transactions, rr.unmatched, rr.outstanding), (1, 0, 1));
    bufs.free(out[0]);
}

/// A request nobody answers is given up after `request_timeout_ms` and its client sends the
/// next one: a lost packet cannot stall a flow (and a run counted in packets) for good.
#[test]
fn an_unanswered_request_times_out_and_its_client_goes_on() {
    let cfg = GenConfig { flows: 3, ip: IpVersion::V4, dst_port: 7, request_response: true, request_timeout_ms: 1, ..GenConfig::default() };
    let mut g = Generator::new("rr", cfg).expect("generator");
    let pool = Pool::new(256).expect("pool");
    let mut bufs = pool.cache();
    let mut out = Vec::new();
    use sluice::port::Port;
    assert_eq!(g.rx_burst(&mut bufs, &mut out, 64), 3, "one request per client");
    assert_eq!(g.rx_burst(&mut bufs, &mut out, 64), 0, "none before an answer or the timeout");
    std::thread::sleep(Duration::from_millis(3));
    assert_eq!(g.rx_burst(&mut bufs, &mut out, 64), 3, "after the timeout every client sends again");
    let rr = g.request_response().expect("closed loop");
    assert_eq!((rr.timeouts, rr.outstanding, rr.transactions), (3, 3, 0));
    bufs.free_pkts(&out);
    let zero = GenConfig { request_response: true, request_timeout_ms: 0, dst_port: 7, ..GenConfig::default() };
    assert!(Generator::new("rr", zero).err().expect("refused").to_string().contains("request_timeout_ms"));
    let jumbo = GenConfig { request_response: true, size: FrameSize::Fixed(9000), dst_port: 7, ..GenConfig::default() };
    assert!(Generator::new("rr", jumbo).err().expect("refused").to_string().contains("single-buffer"));
}
