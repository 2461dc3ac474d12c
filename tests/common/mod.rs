//! Shared integration-test harness: a three-port router datapath fed from in-memory frames,
//! frame builders on top of `wire::build`, and comparison helpers for the two receive modes.
//!
//! Topology (addresses are documentation ranges):
//!
//! ```text
//!   hosts 198.18.0.0/15, 2001:db8:ff::/48          10.1.0.0/16, 2001:db8:a1::/48
//!   via gw 192.0.2.2 / 2001:db8:1::2 (MAC ..:aa)    via 198.51.100.2 / 2001:db8:2::2 (..:bb)
//!            |                                              |
//!     port 0 "in0" 192.0.2.1/24 2001:db8:1::1/64 ---- port 1 "out1" 198.51.100.1/24 2001:db8:2::1/64
//!     (replays the test's frames, captures what       port 2 "out2" 203.0.113.1/24 2001:db8:3::1/64, MTU 1000
//!      the router sends back: ICMP, ARP, echo)         10.2.0.0/16, 2001:db8:a2::/48 via 203.0.113.2 / 2001:db8:3::2 (..:cc)
//! ```
//!
//! plus blackhole 10.66.0.0/16 + 2001:db8:66::/48 and unreachable 10.77.0.0/16 +
//! 2001:db8:77::/48. The connected subnets of every port are routes too; only the gateways
//! above are in the neighbour table (so e.g. 203.0.113.9 cannot be resolved).
#![allow(dead_code)]

use sluice::buf::{BufCache, Pkt, Pool};
use sluice::config::Tunables;
use sluice::datapath::{Datapath, Pipeline};
use sluice::napi::{self, RunLimit};
use sluice::port::pcap::PcapIn;
use sluice::port::sink::{CheckSpec, Sink, SinkKind};
use sluice::port::{Port, PortStats};
use sluice::rx::route::{Iface, NextHop};
use sluice::stats::{Counters, DropReason};
use sluice::wire::build::{build_with_offsets, L3Spec, L4Spec, PacketSpec};
use sluice::wire::ipv6::skip_extension_headers;
use sluice::wire::{checksum, EthernetFrame, Icmpv4Packet, Icmpv6Packet, Ipv4Packet, Ipv6Packet, TcpPacket, UdpPacket};
use sluice::xdp::env::SluiceEnv;
use sluice::xdp::{RunOutcome, XdpBuff, XdpMode, XdpProgram};
use std::collections::BTreeMap;
use std::time::Duration;

// ---------------------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------------------

pub const fn v6(w: [u16; 8]) -> [u8; 16] {
    let mut o = [0u8; 16];
    let mut i = 0;
    while i < 8 {
        o[2 * i] = (w[i] >> 8) as u8;
        o[2 * i + 1] = w[i] as u8;
        i += 1;
    }
    o
}

pub const MAC_IN: [u8; 6] = [2, 0, 0, 0, 0, 0x01];
pub const MAC_OUT1: [u8; 6] = [2, 0, 0, 0, 0, 0x02];
pub const MAC_OUT2: [u8; 6] = [2, 0, 0, 0, 0, 0x03];
/// The gateway behind in0 (where every test frame comes from).
pub const MAC_HOST: [u8; 6] = [2, 0, 0, 0, 0, 0xaa];
pub const MAC_NH1: [u8; 6] = [2, 0, 0, 0, 0, 0xbb];
pub const MAC_NH2: [u8; 6] = [2, 0, 0, 0, 0, 0xcc];
/// Some other station's MAC (frames to it are `otherhost`).
pub const MAC_OTHER: [u8; 6] = [2, 0, 0, 0, 0, 0xee];
pub const MAC_BCAST: [u8; 6] = [0xff; 6];

pub const IN_V4: [u8; 4] = [192, 0, 2, 1];
pub const HOST_V4: [u8; 4] = [192, 0, 2, 2];
pub const OUT1_V4: [u8; 4] = [198, 51, 100, 1];
pub const NH1_V4: [u8; 4] = [198, 51, 100, 2];
pub const OUT2_V4: [u8; 4] = [203, 0, 113, 1];
pub const NH2_V4: [u8; 4] = [203, 0, 113, 2];
/// A source behind in0's gateway.
pub const SRC_V4: [u8; 4] = [198, 18, 0, 1];
/// Destinations via out1 / out2.
pub const DST1_V4: [u8; 4] = [10, 1, 0, 5];
pub const DST2_V4: [u8; 4] = [10, 2, 0, 5];
pub const NOROUTE_V4: [u8; 4] = [100, 64, 0, 1];
pub const BLACKHOLE_V4: [u8; 4] = [10, 66, 0, 1];
pub const UNREACH_V4: [u8; 4] = [10, 77, 0, 1];
/// On out2's connected subnet, no neighbour entry.
pub const UNRESOLVED_V4: [u8; 4] = [203, 0, 113, 9];

pub const IN_V6: [u8; 16] = v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 1]);
/// in0's link-local address when [`Setup::v6_default_and_link_local`] is set.
pub const IN_LL_V6: [u8; 16] = v6([0xfe80, 0, 0, 0, 0, 0, 0, 1]);
pub const HOST_V6: [u8; 16] = v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 2]);
pub const OUT1_V6: [u8; 16] = v6([0x2001, 0xdb8, 2, 0, 0, 0, 0, 1]);
pub const NH1_V6: [u8; 16] = v6([0x2001, 0xdb8, 2, 0, 0, 0, 0, 2]);
pub const OUT2_V6: [u8; 16] = v6([0x2001, 0xdb8, 3, 0, 0, 0, 0, 1]);
pub const NH2_V6: [u8; 16] = v6([0x2001, 0xdb8, 3, 0, 0, 0, 0, 2]);
pub const SRC_V6: [u8; 16] = v6([0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 1]);
pub const DST1_V6: [u8; 16] = v6([0x2001, 0xdb8, 0xa1, 0, 0, 0, 0, 5]);
pub const DST2_V6: [u8; 16] = v6([0x2001, 0xdb8, 0xa2, 0, 0, 0, 0, 5]);
pub const NOROUTE_V6: [u8; 16] = v6([0x2001, 0xdb8, 0xdead, 0, 0, 0, 0, 1]);
pub const BLACKHOLE_V6: [u8; 16] = v6([0x2001, 0xdb8, 0x66, 0, 0, 0, 0, 1]);
pub const UNREACH_V6: [u8; 16] = v6([0x2001, 0xdb8, 0x77, 0, 0, 0, 0, 1]);
pub const UNRESOLVED_V6: [u8; 16] = v6([0x2001, 0xdb8, 3, 0, 0, 0, 0, 9]);

/// The VLAN in0 serves (tagged frames for any other VLAN are `vlan_filtered`).
pub const IN_VLAN: u16 = 100;
/// out2's MTU (smaller, for `pkt_too_big`).
pub const OUT2_MTU: u16 = 1000;

pub const P_IN: usize = 0;
pub const P_OUT1: usize = 1;
pub const P_OUT2: usize = 2;

// ---------------------------------------------------------------------------------------
// Ports
// ---------------------------------------------------------------------------------------

/// A test port: optionally replays frames on receive (through `PcapIn::from_frames`) and
/// keeps a copy of every frame it accepts for transmission. It can misbehave on purpose:
/// accept at most `accept_per_burst` packets of each burst (the datapath must drop the rest
/// as `tx_error`) or record each burst in reverse (a deliberate reordering).
pub struct TestPort {
    name: String,
    rx: Option<PcapIn>,
    pub accept_per_burst: Option<usize>,
    pub reverse_bursts: bool,
    frames: Vec<Vec<u8>>,
    stats: PortStats,
}

impl TestPort {
    pub fn new(name: &str, rx_frames: Option<Vec<Vec<u8>>>) -> TestPort {
        TestPort {
            name: name.to_string(),
            rx: rx_frames.map(|f| PcapIn::from_frames(name, f, 1)),
            accept_per_burst: None,
            reverse_bursts: false,
            frames: Vec::new(),
            stats: PortStats::default(),
        }
    }
}

impl Port for TestPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, bufs: &mut BufCache, out: &mut Vec<Pkt>, max: usize) -> usize {
        match self.rx.as_mut() {
            Some(p) => {
                let n = p.rx_burst(bufs, out, max);
                self.stats.rx_packets += n as u64;
                self.stats.rx_bytes += out[out.len() - n..].iter().map(|p| p.total_len() as u64).sum::<u64>();
                n
            }
            None => 0,
        }
    }

    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        let n = self.accept_per_burst.map_or(pkts.len(), |k| k.min(pkts.len()));
        let mut got: Vec<Vec<u8>> = pkts[..n].iter().map(|p| bufs.to_vec(*p)).collect();
        if self.reverse_bursts {
            got.reverse();
        }
        self.frames.extend(got);
        for p in &pkts[..n] {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += p.total_len() as u64;
            bufs.free(*p);
        }
        if !more {
            self.stats.doorbells += 1;
        }
        n
    }

    fn rx_done(&self) -> bool {
        self.rx.as_ref().is_none_or(|p| p.rx_done())
    }

    fn take_rx_dropped(&mut self) -> u64 {
        self.rx.as_mut().map_or(0, |p| p.take_rx_dropped())
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn captured(&self) -> Option<&[Vec<u8>]> {
        Some(&self.frames)
    }
}

/// An XDP program whose verdict is a plain function of the packet bytes.
pub struct FnXdp(pub fn(&[u8]) -> RunOutcome);

impl XdpProgram for FnXdp {
    fn name(&self) -> String {
        "test:fn".into()
    }
    fn run(&mut self, xdp: &mut XdpBuff<'_>, _env: &mut SluiceEnv<'_>) -> RunOutcome {
        (self.0)(xdp.frame.get(xdp.data..xdp.data_end).unwrap_or(&[]))
    }
}

/// An XDP program that may rewrite the packet in place before its verdict.
pub struct FnXdpMut(pub fn(&mut [u8]) -> RunOutcome);

impl XdpProgram for FnXdpMut {
    fn name(&self) -> String {
        "test:fn-mut".into()
    }
    fn run(&mut self, xdp: &mut XdpBuff<'_>, _env: &mut SluiceEnv<'_>) -> RunOutcome {
        (self.0)(xdp.frame.get_mut(xdp.data..xdp.data_end).unwrap_or(&mut []))
    }
}

/// [`FnXdp`] for a program not declared frags-aware (a plain `SEC("xdp")` object).
pub struct FnXdpLinear(pub fn(&[u8]) -> RunOutcome);

impl XdpProgram for FnXdpLinear {
    fn name(&self) -> String {
        "test:fn-linear".into()
    }
    fn run(&mut self, xdp: &mut XdpBuff<'_>, _env: &mut SluiceEnv<'_>) -> RunOutcome {
        assert!(xdp.frags.is_none(), "a program that is not frags-aware was shown fragments");
        (self.0)(xdp.frame.get(xdp.data..xdp.data_end).unwrap_or(&[]))
    }
    fn frags_aware(&self) -> bool {
        false
    }
}

/// XDP actions (as in linux/bpf.h).
pub const XDP_ABORTED: u32 = 0;
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_TX: u32 = 3;
pub const XDP_REDIRECT: u32 = 4;

/// The UDP destination port of an untagged IPv4 frame without options (0 otherwise).
pub fn udp4_dport(f: &[u8]) -> u16 {
    if f.len() >= 38 && f[12..14] == [8, 0] && f[14] == 0x45 && f[23] == 17 {
        u16::from_be_bytes([f[36], f[37]])
    } else {
        0
    }
}

/// How an output port (out1, out2) behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutKind {
    /// `sluice::port::sink::Sink` of kind Capture.
    Capture,
    /// A [`TestPort`] accepting at most this many packets per burst.
    AcceptAtMost(usize),
    /// A [`TestPort`] that records every burst reversed.
    ReverseBursts,
}

// ---------------------------------------------------------------------------------------
// The router
// ---------------------------------------------------------------------------------------

/// Makes the XDP program a test attaches (each run gets a fresh one).
pub type MakeXdp = fn() -> Box<dyn XdpProgram>;

#[derive(Debug, Clone)]
pub struct Setup {
    pub tun: Tunables,
    pub pipeline: Pipeline,
    pub pool_frames: usize,
    /// UDP sockets to bind: (port, queue capacity). Their datagrams are read with
    /// `Sockets::recv_batch` while the datapath runs.
    pub sockets: Vec<(u16, usize)>,
    /// Behaviour of out1 and out2.
    pub out: [OutKind; 2],
    /// Behaviour of in0's transmit side (what the router sends back).
    pub in_tx: OutKind,
    /// XDP programs to attach: (port, hook, program factory).
    pub xdp: Vec<(u16, XdpMode, MakeXdp)>,
    /// out1's MTU (default 1500).
    pub out1_mtu: u16,
    /// out2's MTU (default OUT2_MTU).
    pub out2_mtu: u16,
    /// The expected outcome depends on the order of packets across flows (one flow's packet
    /// teaches a neighbour another flow uses): the `SLUICE_TEST_RPS` pass keeps one worker.
    pub order_across_flows: bool,
    /// A default IPv6 route (`::/0` via out1's gateway) and the link-local address
    /// [`IN_LL_V6`] on in0 (with its connected fe80::/64): every IPv6 destination then has
    /// a route, so only the link-local rule keeps fe80::/10 from leaving.
    pub v6_default_and_link_local: bool,
    /// Configured `local` IPv4 routes (`ip route add local …`), added after the rest: with
    /// one, sources are validated by a FIB lookup (the kernel's fib_has_custom_local_routes).
    pub local_routes_v4: Vec<([u8; 4], u8)>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            tun: Tunables::default(),
            pipeline: Pipeline::L3fwd,
            pool_frames: 4096,
            sockets: Vec::new(),
            out: [OutKind::Capture, OutKind::Capture],
            in_tx: OutKind::Capture,
            xdp: Vec::new(),
            out1_mtu: 1500,
            out2_mtu: OUT2_MTU,
            order_across_flows: false,
            v6_default_and_link_local: false,
            local_routes_v4: Vec::new(),
        }
    }
}

impl Setup {
    pub fn listified(mut self, on: bool) -> Self {
        self.tun.listified = on as u8;
        self
    }
    /// See [`Setup::order_across_flows`].
    pub fn across_flows_in_order(mut self) -> Self {
        self.order_across_flows = true;
        self
    }
    pub fn socket(mut self, port: u16, capacity: usize) -> Self {
        self.sockets.push((port, capacity));
        self
    }
}

fn out_port(name: &str, kind: OutKind) -> Box<dyn Port> {
    match kind {
        OutKind::Capture => Box::new(Sink::new(name, SinkKind::Capture, CheckSpec::default())),
        OutKind::AcceptAtMost(k) => {
            let mut p = TestPort::new(name, None);
            p.accept_per_burst = Some(k);
            Box::new(p)
        }
        OutKind::ReverseBursts => {
            let mut p = TestPort::new(name, None);
            p.reverse_bursts = true;
            Box::new(p)
        }
    }
}

/// Builds the router of the module docs with `frames` queued on in0.
pub fn build_router(frames: Vec<Vec<u8>>, setup: &Setup, pool: &Pool) -> Datapath {
    let mut dp = Datapath::new(setup.tun.clone(), setup.pipeline, pool);

    let mut in0 = Iface::new("in0", MAC_IN);
    in0.v4.push((IN_V4, 24));
    in0.v6.push((IN_V6, 64));
    in0.vlans = vec![IN_VLAN];
    if setup.v6_default_and_link_local {
        in0.v6.push((IN_LL_V6, 64));
    }
    let mut out1 = Iface::new("out1", MAC_OUT1);
    out1.v4.push((OUT1_V4, 24));
    out1.v6.push((OUT1_V6, 64));
    out1.mtu = setup.out1_mtu;
    let mut out2 = Iface::new("out2", MAC_OUT2);
    out2.v4.push((OUT2_V4, 24));
    out2.v6.push((OUT2_V6, 64));
    out2.mtu = setup.out2_mtu;

    let mut inp = TestPort::new("in0", Some(frames));
    match setup.in_tx {
        OutKind::Capture => {}
        OutKind::AcceptAtMost(k) => inp.accept_per_burst = Some(k),
        OutKind::ReverseBursts => inp.reverse_bursts = true,
    }
    let ifaces = [in0, out1, out2];
    let ports: [Box<dyn Port>; 3] = [Box::new(inp), out_port("out1", setup.out[0]), out_port("out2", setup.out[1])];
    for (port, iface) in ports.into_iter().zip(ifaces) {
        let i = dp.add_port(port, iface.clone());
        dp.net.routes.add_iface(i, &iface, setup.tun.ipv6_forwarding != 0).expect("interface routes");
    }
    let (pi, p1, p2) = (P_IN as u16, P_OUT1 as u16, P_OUT2 as u16);
    dp.add_neigh_v4(pi, HOST_V4, MAC_HOST);
    dp.add_neigh_v4(p1, NH1_V4, MAC_NH1);
    dp.add_neigh_v4(p2, NH2_V4, MAC_NH2);
    dp.add_neigh_v6(pi, HOST_V6, MAC_HOST);
    dp.add_neigh_v6(p1, NH1_V6, MAC_NH1);
    dp.add_neigh_v6(p2, NH2_V6, MAC_NH2);
    for (port, mode, prog) in &setup.xdp {
        dp.w().xdp.attach(*port, *mode, prog());
    }
    let r = &mut dp.net.routes;
    r.add_v4([198, 18, 0, 0], 15, NextHop::Gateway { port: pi, mac: MAC_HOST }).unwrap();
    r.add_v4([10, 1, 0, 0], 16, NextHop::Gateway { port: p1, mac: MAC_NH1 }).unwrap();
    r.add_v4([10, 2, 0, 0], 16, NextHop::Gateway { port: p2, mac: MAC_NH2 }).unwrap();
    r.add_v4([10, 66, 0, 0], 16, NextHop::Blackhole).unwrap();
    r.add_v4([10, 77, 0, 0], 16, NextHop::Unreachable).unwrap();
    r.add_v6(v6([0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 0]), 48, NextHop::Gateway { port: pi, mac: MAC_HOST }).unwrap();
    r.add_v6(v6([0x2001, 0xdb8, 0xa1, 0, 0, 0, 0, 0]), 48, NextHop::Gateway { port: p1, mac: MAC_NH1 }).unwrap();
    r.add_v6(v6([0x2001, 0xdb8, 0xa2, 0, 0, 0, 0, 0]), 48, NextHop::Gateway { port: p2, mac: MAC_NH2 }).unwrap();
    r.add_v6(v6([0x2001, 0xdb8, 0x66, 0, 0, 0, 0, 0]), 48, NextHop::Blackhole).unwrap();
    r.add_v6(v6([0x2001, 0xdb8, 0x77, 0, 0, 0, 0, 0]), 48, NextHop::Unreachable).unwrap();
    if setup.v6_default_and_link_local {
        r.add_v6([0; 16], 0, NextHop::Gateway { port: p1, mac: MAC_NH1 }).unwrap();
    }
    for &(a, len) in &setup.local_routes_v4 {
        r.add_configured_v4(a, len, NextHop::Local).unwrap();
    }
    dp
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Frames transmitted per port (in0, out1, out2), in transmit order.
    pub out: Vec<Vec<Vec<u8>>>,
    /// Datagram payloads read from each bound socket (same order as `Setup::sockets`).
    pub sockets: Vec<Vec<Vec<u8>>>,
    pub c: Counters,
    pub neigh4: BTreeMap<(u16, [u8; 4]), [u8; 6]>,
    pub neigh6: BTreeMap<(u16, [u8; 16]), [u8; 6]>,
}

impl Outcome {
    pub fn dropped(&self, r: DropReason) -> u64 {
        self.c.dropped(r)
    }
    /// Non-zero drop counters.
    pub fn drops(&self) -> BTreeMap<&'static str, u64> {
        self.c.nonzero_drops().into_iter().collect()
    }
    pub fn port(&self, p: usize) -> &[Vec<u8>] {
        &self.out[p]
    }
}

/// Runs `frames` through the router until in0 has replayed them all (`napi::run` with
/// `RunLimit::default()`), reading the sockets on every tick. Checks, for every run: every
/// frame was received, the conservation law holds, and no buffer leaked.
///
/// With `SLUICE_TEST_RPS=<cpu list>` (scripts/test's second pass) the same frames also run
/// on several workers with RPS, and [`assert_rps_equivalent`] checks what two workers
/// define: the same fates and, per port and per flow, the same frames in the same order
/// (the order across flows is not defined once flows are steered to different CPUs). The
/// one-worker outcome is returned, so a test's own assertions about the n-th frame across
/// flows hold in both passes. Setups that read sockets (a socket is read by its worker's
/// thread) or say [`Setup::order_across_flows`] keep one worker.
pub fn run(frames: &[Vec<u8>], setup: &Setup) -> Outcome {
    let one = run_one_worker(frames, setup);
    if let Ok(cpus) = std::env::var("SLUICE_TEST_RPS") {
        if setup.sockets.is_empty() && setup.tun.rps_cpus == 0 && !setup.order_across_flows {
            let mut rps = setup.clone();
            rps.tun.set("rps_cpus", &cpus).expect("SLUICE_TEST_RPS is a CPU list");
            let pool = Pool::new(rps.pool_frames).expect("pool");
            let many = run_workers(frames, &rps, &pool);
            assert_rps_equivalent(&one, &many);
        }
    }
    one
}

/// `--set` arguments for config-built datapaths: `rps_cpus=<list>` under `SLUICE_TEST_RPS`
/// (scripts/test's second pass), nothing otherwise. The backlogs hold a whole test run: a
/// generator outrunning its target worker would drop `cpu_backlog`, which is tests/rps.rs's
/// subject, not these suites'.
pub fn rps_sets() -> Vec<String> {
    match std::env::var("SLUICE_TEST_RPS") {
        Ok(cpus) => vec![format!("rps_cpus={cpus}"), "net.core.netdev_max_backlog=100000".into()],
        Err(_) => Vec::new(),
    }
}

/// What RPS keeps: the packets' fates (received, transmitted, delivered, originated, each
/// drop reason, bytes), and per port and per flow the same frames in the same order. How
/// they were processed (polls, doorbells, lists, route hints) legitimately differs.
pub fn assert_rps_equivalent(one: &Outcome, many: &Outcome) {
    let what = |c: &Counters| {
        let drops: Vec<_> = DropReason::ALL.iter().map(|r| (r.name(), c.dropped(*r))).collect();
        (c.rx, c.tx, c.local, c.originated, c.rx_bytes, c.tx_bytes, drops)
    };
    assert_eq!(what(&many.c), what(&one.c), "two workers (RPS) change the packets' fates");
    if let Err(e) = compare_frames_per_input_flow(&one.out, &many.out) {
        panic!("two workers (RPS) change a flow's frames: {e}");
    }
    assert_eq!((&many.neigh4, &many.neigh6), (&one.neigh4, &one.neigh6), "two workers learn other neighbours");
}

fn run_one_worker(frames: &[Vec<u8>], setup: &Setup) -> Outcome {
    let pool = Pool::new(setup.pool_frames).expect("pool");
    if setup.tun.rps_cpus != 0 {
        return run_workers(frames, setup, &pool);
    }
    let mut dp = build_router(frames.to_vec(), setup, &pool);
    let ids: Vec<_> = setup.sockets.iter().map(|&(p, cap)| dp.w().sockets.bind_udp(p, cap).expect("bind")).collect();
    let mut payloads: Vec<Vec<Vec<u8>>> = vec![Vec::new(); ids.len()];
    // A zero tick period: the tick runs after every batch of rounds, before the loop may
    // stop, so every datagram is read before `drain` frees what is left.
    let Datapath { net, workers } = &mut dp;
    napi::run(net, &mut workers[0], RunLimit::default(), Duration::ZERO, |_, w, _| {
        for (i, id) in ids.iter().enumerate() {
            w.sockets.recv_batch(&mut w.bufs, *id, usize::MAX, |b| payloads[i].push(b.to_vec()));
        }
    });
    finish(&mut dp, frames.len());
    let w = &dp.workers[0];
    for (id, read) in ids.iter().zip(&payloads) {
        // Every datagram queued was read here: the socket's own count says the same.
        assert_eq!(w.sockets.socket(*id).expect("bound").received, read.len() as u64, "socket received");
    }
    Outcome {
        out: dp.ports().map(|p| p.captured().expect("test ports capture").to_vec()).collect(),
        sockets: payloads,
        c: dp.counters(),
        neigh4: w.neigh.v4.iter().map(|(k, v)| (*k, *v)).collect(),
        neigh6: w.neigh.v6.iter().map(|(k, v)| (*k, *v)).collect(),
    }
}

/// [`run`] on several workers (RPS): one thread per worker, until in0 has replayed every
/// frame; the same end-of-run checks. Sockets are not read (each worker has its own).
pub fn run_workers(frames: &[Vec<u8>], setup: &Setup, pool: &Pool) -> Outcome {
    let mut dp = build_router(frames.to_vec(), setup, pool);
    assert!(dp.workers.len() > 1, "rps_cpus names more than worker 0");
    for &(p, cap) in &setup.sockets {
        for w in &mut dp.workers {
            w.sockets.bind_udp(p, cap).expect("bind");
        }
    }
    dp.run_until(&RunLimit::default(), Duration::ZERO, |_, _| {});
    finish(&mut dp, frames.len());
    let w = &dp.workers[0];
    Outcome {
        out: dp.ports().map(|p| p.captured().expect("test ports capture").to_vec()).collect(),
        sockets: vec![Vec::new(); setup.sockets.len()],
        c: dp.counters(),
        neigh4: w.neigh.v4.iter().map(|(k, v)| (*k, *v)).collect(),
        neigh6: w.neigh.v6.iter().map(|(k, v)| (*k, *v)).collect(),
    }
}

/// The checks every run ends with: all input received, ledger balanced, no buffer held.
pub fn finish(dp: &mut Datapath, expected_rx: usize) {
    dp.drain();
    let c = dp.counters();
    assert_eq!(c.rx, expected_rx as u64, "every frame was received");
    if let Err(e) = dp.conservation() {
        panic!("{e}");
    }
    assert_eq!(dp.in_flight(), 0, "nothing in flight after drain");
    assert!(dp.workers.iter().all(|w| w.sockets.queued() == 0), "sockets drained");
    assert_eq!(dp.buffers_in_use(), 0, "buffer leak");
    every_buffer_back_once(dp);
    // Cross-check the ledger's tx against what the ports saw.
    let port_tx: u64 = dp.all_queues().map(|p| p.stats().tx_packets).sum();
    assert_eq!(port_tx, c.tx, "ports accepted exactly what the datapath counted as transmitted");
    let port_rx_bytes: u64 = dp.all_queues().map(|p| p.stats().rx_bytes).sum();
    assert_eq!(port_rx_bytes, c.rx_bytes, "received bytes as the ports delivered them");
}

/// Counting is not enough (a buffer freed twice and another never freed balance): every
/// frame of the pool must be free exactly once. Takes them all through the workers' caches,
/// checks they are distinct and complete, and gives them back.
pub fn every_buffer_back_once(dp: &mut Datapath) {
    let capacity = dp.workers[0].bufs.pool().capacity();
    let mut seen = vec![false; capacity];
    let mut taken = Vec::new();
    for w in dp.workers.iter_mut() {
        while let Some(id) = w.bufs.alloc() {
            assert!(!std::mem::replace(&mut seen[id.0 as usize], true), "buffer {} was free twice", id.0);
            taken.push(id);
        }
    }
    assert_eq!(taken.len(), capacity, "every frame of the pool is free after the run");
    let w = &mut dp.workers[0];
    for id in taken {
        w.bufs.free(sluice::buf::Pkt::new(id, 0));
    }
    w.bufs.flush();
}

/// The counters that say what happened to packets (not how: route lookups, stage cycles
/// and list statistics legitimately differ between modes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fates {
    pub rx: u64,
    pub tx: u64,
    pub local: u64,
    pub originated: u64,
    pub drops: Vec<(&'static str, u64)>,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub doorbells: u64,
    pub napi_polls: u64,
    /// Packets that reached the route step (lookups + hint hits).
    pub routed: u64,
}

pub fn fates(c: &Counters) -> Fates {
    Fates {
        rx: c.rx,
        tx: c.tx,
        local: c.local,
        originated: c.originated,
        drops: DropReason::ALL.iter().map(|r| (r.name(), c.dropped(*r))).collect(),
        rx_bytes: c.rx_bytes,
        tx_bytes: c.tx_bytes,
        doorbells: c.doorbells,
        napi_polls: c.napi_polls,
        routed: c.route_lookups + c.route_hint_hits,
    }
}

/// Compares two outcomes: identical fates, identical socket payloads, and byte-for-byte
/// identical frames per port in the same order. `Err` says what differs first.
pub fn compare(a: &Outcome, b: &Outcome) -> Result<(), String> {
    let (fa, fb) = (fates(&a.c), fates(&b.c));
    if fa != fb {
        return Err(format!("fates differ:\n  {fa:?}\n  {fb:?}"));
    }
    compare_frames(&a.out, &b.out)?;
    if a.sockets != b.sockets {
        return Err("socket payloads differ".into());
    }
    if a.neigh4 != b.neigh4 || a.neigh6 != b.neigh6 {
        return Err("learned neighbours differ".into());
    }
    Ok(())
}

/// Per port: same frames, same order.
pub fn compare_frames(a: &[Vec<Vec<u8>>], b: &[Vec<Vec<u8>>]) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("{} ports vs {}", a.len(), b.len()));
    }
    for (p, (x, y)) in a.iter().zip(b).enumerate() {
        if let Some(i) = (0..x.len().min(y.len())).find(|&i| without_clock(&x[i]) != without_clock(&y[i])) {
            return Err(format!("port {p}: frame {i} differs:\n  {}\n  {}", hex(&x[i]), hex(&y[i])));
        }
        if x.len() != y.len() {
            return Err(format!("port {p}: {} frames vs {}", x.len(), y.len()));
        }
    }
    Ok(())
}

/// A frame with the fields that read a clock blanked: an ICMP timestamp reply's receive and
/// transmit times (and so its checksum). Two runs cannot agree on them; all else must.
pub fn without_clock(f: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let Some(l3) = l3_offset(f) else { return f.into() };
    if ethertype(f) != 0x0800 || f.len() < l3 + 20 || f[l3 + 9] != 1 {
        return f.into();
    }
    let l4 = l3 + (f[l3] & 0xf) as usize * 4;
    if f.len() < l4 + 20 || f[l4] != 14 {
        return f.into();
    }
    let mut g = f.to_vec();
    g[l4 + 2..l4 + 4].fill(0);
    g[l4 + 12..l4 + 20].fill(0);
    g.into()
}

/// Per port and per flow: the same frames in the same order within each flow (flows may
/// interleave differently). Also checks each port carries the same multiset of frames.
pub fn compare_frames_per_flow(a: &[Vec<Vec<u8>>], b: &[Vec<Vec<u8>>]) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("{} ports vs {}", a.len(), b.len()));
    }
    for (p, (x, y)) in a.iter().zip(b).enumerate() {
        let (gx, gy) = (group_by_flow(x), group_by_flow(y));
        if gx.keys().ne(gy.keys()) {
            return Err(format!("port {p}: different flows"));
        }
        for (k, fx) in &gx {
            let fy = &gy[k];
            if fx != fy {
                return Err(format!("port {p}: flow {k:?} differs ({} vs {} frames, or order)", fx.len(), fy.len()));
            }
        }
    }
    Ok(())
}

/// Per port and per *input* flow (see [`input_flow_key`]): the same frames (clock fields
/// aside) in the same order; what RPS keeps. Each port carries the same multiset of frames.
pub fn compare_frames_per_input_flow(a: &[Vec<Vec<u8>>], b: &[Vec<Vec<u8>>]) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("{} ports vs {}", a.len(), b.len()));
    }
    let group = |frames: &[Vec<u8>]| {
        let mut m: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
        // A datagram's later IPv4 fragments carry no ports: they belong to the flow of the
        // datagram's first fragment (one worker cuts a datagram and sends its pieces together).
        let mut datagram_flow: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for f in frames {
            let mut key = input_flow_key(f);
            if let Some((datagram, first)) = ipv4_fragment_of(f) {
                if first {
                    datagram_flow.insert(datagram, key.clone());
                } else if let Some(k) = datagram_flow.get(&datagram) {
                    key = k.clone();
                }
            }
            m.entry(key).or_default().push(without_clock(f).into_owned());
        }
        m
    };
    for (p, (x, y)) in a.iter().zip(b).enumerate() {
        let (gx, gy) = (group(x), group(y));
        if gx.keys().ne(gy.keys()) {
            return Err(format!("port {p}: different flows"));
        }
        for (k, fx) in &gx {
            if fx != &gy[k] {
                return Err(format!("port {p}: flow {k:?} differs ({} vs {} frames, or order)", fx.len(), gy[k].len()));
            }
        }
    }
    Ok(())
}

/// For an IPv4 fragment: (addresses, protocol, identification) and whether it is the first.
fn ipv4_fragment_of(f: &[u8]) -> Option<(Vec<u8>, bool)> {
    let ip = f.get(l3_offset(f)?..).filter(|_| ethertype(f) == 0x0800)?;
    let frag = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]);
    if ip.len() < 20 || frag & 0x3fff == 0 {
        return None;
    }
    let mut k = ip[12..20].to_vec();
    k.push(ip[9]);
    k.extend_from_slice(&ip[4..6]);
    Some((k, frag & 0x1fff == 0))
}

/// The flow of the packet an output frame answers or carries: [`flow_key`], and for an
/// ICMP or ICMPv6 error also the flow of the datagram it quotes — errors about different
/// flows are made by whichever workers process those flows, so only their order per
/// quoted flow is defined.
pub fn input_flow_key(f: &[u8]) -> Vec<u8> {
    let mut k = flow_key(f);
    let (Some(l3), et) = (l3_offset(f), ethertype(f)) else {
        return k;
    };
    let ip = &f[l3..];
    // An answer to an echo (or timestamp) request: the request's identifier is part of its
    // flow (the kernel's flow dissector hashes it like a port).
    let echo_id = match et {
        0x0800 if ip.len() >= 20 && ip[9] == 1 => {
            ip.get(((ip[0] & 0xf) as usize * 4).max(20)..).filter(|m| m.len() >= 6 && matches!(m[0], 0 | 14)).map(|m| &m[4..6])
        }
        0x86dd if ip.len() >= 46 && ip[6] == 58 && ip[40] == 129 => Some(&ip[44..46]),
        _ => None,
    };
    k.extend_from_slice(echo_id.unwrap_or(&[]));
    let quoted = match et {
        0x0800 if ip.len() >= 20 && ip[9] == 1 => {
            let icmp = &ip[((ip[0] & 0xf) as usize * 4).max(20)..];
            icmp.first().filter(|t| matches!(t, 3 | 4 | 5 | 11 | 12)).and_then(|_| icmp.get(8..))
        }
        0x86dd if ip.len() >= 40 && ip[6] == 58 => ip.get(40).filter(|t| (1..=4).contains(*t)).and_then(|_| ip.get(48..)),
        _ => None,
    };
    if let Some(q) = quoted {
        let mut inner = f[..l3].to_vec();
        inner.extend_from_slice(q);
        k.extend(flow_key(&inner));
    }
    k
}

fn group_by_flow(frames: &[Vec<u8>]) -> BTreeMap<Vec<u8>, Vec<&Vec<u8>>> {
    let mut m: BTreeMap<Vec<u8>, Vec<&Vec<u8>>> = BTreeMap::new();
    for f in frames {
        m.entry(flow_key(f)).or_default().push(f);
    }
    m
}

/// A flow key for an output frame: ethertype, addresses, protocol and L4 ports (ICMP
/// messages and ARP are keyed by their addresses and type).
pub fn flow_key(f: &[u8]) -> Vec<u8> {
    let mut k = Vec::new();
    let Some(l3) = l3_offset(f) else {
        return f.to_vec();
    };
    let et = ethertype(f);
    k.extend_from_slice(&et.to_be_bytes());
    let ip = &f[l3..];
    match et {
        0x0800 if ip.len() >= 20 => {
            let ihl = ((ip[0] & 0xf) as usize * 4).max(20);
            k.extend_from_slice(&ip[12..20]);
            k.push(ip[9]);
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff != 0;
            if !frag {
                if let Some(l4) = ip.get(ihl..ihl + 4) {
                    if ip[9] == 1 {
                        k.push(l4[0]);
                    } else {
                        k.extend_from_slice(l4);
                    }
                }
            }
        }
        0x86dd if ip.len() >= 40 => {
            k.extend_from_slice(&ip[8..40]);
            k.push(ip[6]);
            if let Some(l4) = ip.get(40..44) {
                if ip[6] == 58 {
                    k.push(l4[0]);
                } else {
                    k.extend_from_slice(l4);
                }
            }
        }
        0x0806 if ip.len() >= 28 => {
            k.extend_from_slice(&ip[6..8]);
            k.extend_from_slice(&ip[14..18]);
            k.extend_from_slice(&ip[24..28]);
        }
        _ => k.extend_from_slice(f),
    }
    k
}

pub fn hex(b: &[u8]) -> String {
    b.iter().take(96).map(|x| format!("{x:02x}")).collect::<Vec<_>>().join("")
}

/// Runs `frames` in single mode and in list mode, asserts both runs agree (fates, frames
/// per port in order, socket payloads, learned neighbours; every routed packet was either
/// looked up or hinted), and returns the single-mode outcome.
pub fn run_both(frames: &[Vec<u8>], setup: &Setup) -> Outcome {
    let single = run(frames, &setup.clone().listified(false));
    let list = run(frames, &setup.clone().listified(true));
    if let Err(e) = compare(&single, &list) {
        panic!("single and listified receive disagree: {e}");
    }
    assert_eq!(single.c.route_hint_hits, 0, "single mode has no route hint");
    assert_eq!(single.c.rx_lists, 0, "single mode makes no lists");
    single
}

// ---------------------------------------------------------------------------------------
// Frame builders
// ---------------------------------------------------------------------------------------

/// A frame to build: a `PacketSpec` (Ethernet host → in0 by default) plus an optional
/// sequence number written into the payload (so packets of one flow differ).
#[derive(Debug, Clone)]
pub struct F {
    pub spec: PacketSpec,
    pub seq: Option<u32>,
}

fn base(l3: L3Spec, l4: L4Spec) -> F {
    F { spec: PacketSpec { src_mac: MAC_HOST, dst_mac: MAC_IN, vlan: None, l3, l4, ttl: 64, frame_len: 60 }, seq: None }
}

fn l3v4(src: [u8; 4], dst: [u8; 4]) -> L3Spec {
    L3Spec::V4 { src, dst, tos: 0, ident: 0x1234, dont_frag: true }
}

fn l3v6(src: [u8; 16], dst: [u8; 16]) -> L3Spec {
    L3Spec::V6 { src, dst, traffic_class: 0, flow_label: 0 }
}

pub fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> F {
    base(l3v4(src, dst), L4Spec::Udp { src_port: sport, dst_port: dport })
}
pub fn udp6(src: [u8; 16], dst: [u8; 16], sport: u16, dport: u16) -> F {
    base(l3v6(src, dst), L4Spec::Udp { src_port: sport, dst_port: dport }).len(66)
}
fn tcp(sport: u16, dport: u16) -> L4Spec {
    L4Spec::Tcp { src_port: sport, dst_port: dport, seq: 1, ack: 0, flags: 0x02, window: 65535, timestamp: None }
}
pub fn tcp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> F {
    base(l3v4(src, dst), tcp(sport, dport))
}
pub fn tcp6(src: [u8; 16], dst: [u8; 16], sport: u16, dport: u16) -> F {
    base(l3v6(src, dst), tcp(sport, dport))
}
pub fn ping4(src: [u8; 4], dst: [u8; 4], ident: u16, seq: u16) -> F {
    base(l3v4(src, dst), L4Spec::IcmpEcho { ident, seq }).len(74)
}
pub fn ping6(src: [u8; 16], dst: [u8; 16], ident: u16, seq: u16) -> F {
    base(l3v6(src, dst), L4Spec::IcmpEcho { ident, seq }).len(94)
}
pub fn raw4(src: [u8; 4], dst: [u8; 4], proto: u8) -> F {
    base(l3v4(src, dst), L4Spec::Raw { protocol: proto })
}
pub fn raw6(src: [u8; 16], dst: [u8; 16], proto: u8) -> F {
    base(l3v6(src, dst), L4Spec::Raw { protocol: proto }).len(70)
}

impl F {
    pub fn ttl(mut self, t: u8) -> F {
        self.spec.ttl = t;
        self
    }
    /// Ethernet frame length without FCS (the payload grows to reach it).
    pub fn len(mut self, frame_len: usize) -> F {
        self.spec.frame_len = frame_len;
        self
    }
    pub fn vlan(mut self, tci: u16) -> F {
        self.spec.vlan = Some(tci);
        self
    }
    pub fn df(mut self, df: bool) -> F {
        if let L3Spec::V4 { ref mut dont_frag, .. } = self.spec.l3 {
            *dont_frag = df;
        }
        self
    }
    pub fn tos(mut self, t: u8) -> F {
        match self.spec.l3 {
            L3Spec::V4 { ref mut tos, .. } => *tos = t,
            L3Spec::V6 { ref mut traffic_class, .. } => *traffic_class = t,
        }
        self
    }
    pub fn ident(mut self, id: u16) -> F {
        if let L3Spec::V4 { ref mut ident, .. } = self.spec.l3 {
            *ident = id;
        }
        self
    }
    pub fn dst_mac(mut self, m: [u8; 6]) -> F {
        self.spec.dst_mac = m;
        self
    }
    pub fn src_mac(mut self, m: [u8; 6]) -> F {
        self.spec.src_mac = m;
        self
    }
    /// Writes `seq` into the first payload bytes (L4 checksum kept valid).
    pub fn seq(mut self, s: u32) -> F {
        self.seq = Some(s);
        self
    }
    pub fn build(&self) -> Vec<u8> {
        // Room for any frame up to the largest IP datagram (jumbo frames are buffer chains).
        let mut buf = vec![0u8; 65_600];
        let (len, off) = build_with_offsets(&self.spec, &mut buf).expect("valid spec");
        buf.truncate(len);
        if let Some(s) = self.seq {
            let n = off.payload_len.min(4);
            buf[off.payload..off.payload + n].copy_from_slice(&s.to_be_bytes()[..n]);
            fix_l4_checksum(&mut buf);
        }
        buf
    }
}

// ---------------------------------------------------------------------------------------
// Frame surgery: options, extension headers, fragments, corruption
// ---------------------------------------------------------------------------------------

pub fn ethertype(f: &[u8]) -> u16 {
    if f.len() < 14 {
        return 0;
    }
    let t = u16::from_be_bytes([f[12], f[13]]);
    if t == 0x8100 && f.len() >= 18 {
        u16::from_be_bytes([f[16], f[17]])
    } else {
        t
    }
}

/// Offset of the network header (after one VLAN tag if present).
pub fn l3_offset(f: &[u8]) -> Option<usize> {
    if f.len() < 14 {
        return None;
    }
    if u16::from_be_bytes([f[12], f[13]]) == 0x8100 {
        (f.len() >= 18).then_some(18)
    } else {
        Some(14)
    }
}

/// Recomputes the IPv4 header checksum.
pub fn fix_ip_checksum(f: &mut [u8]) {
    let l3 = l3_offset(f).unwrap();
    let ihl = (f[l3] & 0xf) as usize * 4;
    f[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
    let c = checksum::checksum(&f[l3..l3 + ihl]);
    f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
}

/// Recomputes the UDP / TCP / ICMP / ICMPv6 checksum of an unfragmented IPv4 or IPv6
/// packet (walking IPv4 options and IPv6 extension headers).
pub fn fix_l4_checksum(f: &mut [u8]) {
    let l3 = l3_offset(f).unwrap();
    match ethertype(f) {
        0x0800 => {
            let ihl = (f[l3] & 0xf) as usize * 4;
            let tot = u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]) as usize;
            let proto = f[l3 + 9];
            let src: [u8; 4] = f[l3 + 12..l3 + 16].try_into().unwrap();
            let dst: [u8; 4] = f[l3 + 16..l3 + 20].try_into().unwrap();
            let seg = &mut f[l3 + ihl..l3 + tot];
            match proto {
                17 => UdpPacket::new_unchecked(seg).fill_checksum_v4(&src, &dst),
                6 => TcpPacket::new_unchecked(seg).fill_checksum_v4(&src, &dst),
                1 => Icmpv4Packet::new_unchecked(seg).fill_checksum(),
                _ => {}
            }
        }
        0x86dd => {
            let plen = u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]) as usize;
            let src: [u8; 16] = f[l3 + 8..l3 + 24].try_into().unwrap();
            let dst: [u8; 16] = f[l3 + 24..l3 + 40].try_into().unwrap();
            let ext = skip_extension_headers(f[l3 + 6], &f[l3 + 40..l3 + 40 + plen]).expect("extension headers");
            let seg = &mut f[l3 + 40 + ext.offset..l3 + 40 + plen];
            match ext.protocol {
                17 => UdpPacket::new_unchecked(seg).fill_checksum_v6(&src, &dst),
                6 => TcpPacket::new_unchecked(seg).fill_checksum_v6(&src, &dst),
                58 => Icmpv6Packet::new_unchecked(seg).fill_checksum(&src, &dst),
                _ => {}
            }
        }
        _ => {}
    }
}

/// Inserts IPv4 options (a multiple of 4 bytes) after the fixed header; lengths and the
/// header checksum follow.
pub fn with_ipv4_options(mut f: Vec<u8>, opts: &[u8]) -> Vec<u8> {
    assert!(opts.len().is_multiple_of(4) && opts.len() <= 40);
    let l3 = l3_offset(&f).unwrap();
    let tot = u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]) as usize;
    f.truncate(l3 + tot); // drop Ethernet padding; re-pad below
    let at = l3 + 20;
    f.splice(at..at, opts.iter().copied());
    f[l3] = 0x40 | ((20 + opts.len()) / 4) as u8;
    f[l3 + 2..l3 + 4].copy_from_slice(&((tot + opts.len()) as u16).to_be_bytes());
    fix_ip_checksum(&mut f);
    pad(f)
}

/// An IPsec authentication header's fields after its length (for [`with_ipv6_ext`] kind
/// 51): reserved, SPI 256, sequence number 1, no ICV.
pub const AH_BODY: [u8; 10] = [0, 0, 0, 0, 1, 0, 0, 0, 0, 1];

/// Inserts an IPv6 extension header of type `kind` carrying `body` (the bytes after the
/// next-header and length fields; padded to the header's unit) right after the fixed header.
pub fn with_ipv6_ext(mut f: Vec<u8>, kind: u8, body: &[u8]) -> Vec<u8> {
    let l3 = l3_offset(&f).unwrap();
    let plen = u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]) as usize;
    f.truncate(l3 + 40 + plen);
    let mut h = vec![f[l3 + 6], 0];
    h.extend_from_slice(body);
    match kind {
        51 => {
            while h.len() % 4 != 0 || h.len() < 8 {
                h.push(0);
            }
            h[1] = (h.len() / 4 - 2) as u8;
        }
        44 => {
            h.resize(8, 0);
        }
        _ => {
            while h.len() % 8 != 0 || h.len() < 8 {
                h.push(0);
            }
            h[1] = (h.len() / 8 - 1) as u8;
        }
    }
    let at = l3 + 40;
    f.splice(at..at, h.iter().copied());
    f[l3 + 6] = kind;
    f[l3 + 4..l3 + 6].copy_from_slice(&((plen + h.len()) as u16).to_be_bytes());
    pad(f)
}

/// An IPv6 Fragment header: offset in 8-byte units, M flag, identification.
pub fn with_ipv6_fragment(f: Vec<u8>, offset_units: u16, more: bool, id: u32) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&((offset_units << 3) | more as u16).to_be_bytes());
    body.extend_from_slice(&id.to_be_bytes());
    with_ipv6_ext(f, 44, &body)
}

/// A destination-options header (naming what `f` carried) whose length runs past the end.
pub fn ext6_past_end(f: Vec<u8>) -> Vec<u8> {
    let mut f = with_ipv6_ext(f, 60, &[1, 4, 0, 0, 0, 0]);
    f[55] = 200;
    f
}

/// The fragment (first, or atomic without `more`) of `f` that holds nothing after the
/// fragment header.
pub fn fragment6_cut(f: Vec<u8>, more: bool) -> Vec<u8> {
    let mut f = with_ipv6_fragment(f, 0, more, 7);
    f.truncate(14 + 48);
    f[18..20].copy_from_slice(&8u16.to_be_bytes());
    f
}

/// Marks an IPv4 packet as a fragment (offset in 8-byte units, MF flag).
pub fn as_ipv4_fragment(mut f: Vec<u8>, offset_units: u16, more: bool) -> Vec<u8> {
    let l3 = l3_offset(&f).unwrap();
    let v = (offset_units & 0x1fff) | if more { 0x2000 } else { 0 };
    f[l3 + 6..l3 + 8].copy_from_slice(&v.to_be_bytes());
    fix_ip_checksum(&mut f);
    f
}

/// Pads a frame with zeros to the Ethernet minimum (60 bytes without FCS).
pub fn pad(mut f: Vec<u8>) -> Vec<u8> {
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// Flips bits of the IPv4 header checksum.
pub fn bad_ip_checksum(mut f: Vec<u8>) -> Vec<u8> {
    let l3 = l3_offset(&f).unwrap();
    f[l3 + 10] ^= 0x5a;
    f
}

/// Flips bits of the L4 checksum (UDP, TCP, ICMP, ICMPv6; IPv4 without options or IPv6
/// without extension headers).
pub fn bad_l4_checksum(mut f: Vec<u8>) -> Vec<u8> {
    let l3 = l3_offset(&f).unwrap();
    let (l4, proto) = match ethertype(&f) {
        0x0800 => (l3 + (f[l3] & 0xf) as usize * 4, f[l3 + 9]),
        _ => (l3 + 40, f[l3 + 6]),
    };
    let at = match proto {
        17 => l4 + 6,
        6 => l4 + 16,
        _ => l4 + 2,
    };
    f[at] ^= 0x5a;
    f
}

/// Sets the UDP checksum field to zero ("none": legal over IPv4, invalid over IPv6).
pub fn zero_udp_checksum(mut f: Vec<u8>) -> Vec<u8> {
    let l3 = l3_offset(&f).unwrap();
    let l4 = match ethertype(&f) {
        0x0800 => l3 + (f[l3] & 0xf) as usize * 4,
        _ => l3 + 40,
    };
    f[l4 + 6] = 0;
    f[l4 + 7] = 0;
    f
}

/// An Ethernet frame with any ethertype and payload, padded.
pub fn ether(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    pad(f)
}

/// An ARP packet (Ethernet/IPv4) in an Ethernet frame.
pub fn arp(op: u16, eth_dst: [u8; 6], sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&sha);
    a.extend_from_slice(&spa);
    a.extend_from_slice(&tha);
    a.extend_from_slice(&tpa);
    ether(eth_dst, sha, 0x0806, &a)
}

/// A broadcast ARP request from (mac, ip) for `tpa`.
pub fn arp_request(sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4]) -> Vec<u8> {
    arp(1, MAC_BCAST, sha, spa, [0; 6], tpa)
}

/// Solicited-node multicast address of `a` and its multicast MAC.
pub fn solicited_node(a: &[u8; 16]) -> ([u8; 16], [u8; 6]) {
    let mut m = v6([0xff02, 0, 0, 0, 0, 1, 0xff00, 0]);
    m[13..16].copy_from_slice(&a[13..16]);
    (m, [0x33, 0x33, m[12], m[13], m[14], m[15]])
}

/// An ICMPv6 message (type, code, body after the 4-byte type/code/checksum) from src to
/// dst with hop limit `hl`, checksum filled.
#[allow(clippy::too_many_arguments)]
pub fn icmp6(eth_src: [u8; 6], eth_dst: [u8; 6], src: [u8; 16], dst: [u8; 16], hl: u8, typ: u8, code: u8, body: &[u8]) -> Vec<u8> {
    let mut icmp = vec![typ, code, 0, 0];
    icmp.extend_from_slice(body);
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[58, hl]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    Icmpv6Packet::new_unchecked(&mut icmp[..]).fill_checksum(&src, &dst);
    ip.extend_from_slice(&icmp);
    ether(eth_dst, eth_src, 0x86dd, &ip)
}

/// A neighbour solicitation from (mac, src) for `target`, to the target's solicited-node
/// address, with a source link-layer address option.
pub fn neighbour_solicit(mac: [u8; 6], src: [u8; 16], target: [u8; 16]) -> Vec<u8> {
    let (dst, dmac) = solicited_node(&target);
    let mut body = vec![0, 0, 0, 0];
    body.extend_from_slice(&target);
    body.extend_from_slice(&[1, 1]);
    body.extend_from_slice(&mac);
    icmp6(mac, dmac, src, dst, 255, 135, 0, &body)
}

/// An ICMPv4 message (type, code, 4-byte rest of header, data) from src to dst.
pub fn icmp4(src: [u8; 4], dst: [u8; 4], typ: u8, code: u8, rest: [u8; 4], data: &[u8]) -> Vec<u8> {
    let mut f = raw4(src, dst, 1).len(14 + 20 + 8 + data.len()).build();
    let l4 = 34;
    f[l4] = typ;
    f[l4 + 1] = code;
    f[l4 + 4..l4 + 8].copy_from_slice(&rest);
    f[l4 + 8..l4 + 8 + data.len()].copy_from_slice(data);
    fix_l4_checksum(&mut f);
    f
}

// ---------------------------------------------------------------------------------------
// Output checks
// ---------------------------------------------------------------------------------------

/// The IPv4 datagram of a frame (trimmed to its total length), header checksum verified.
pub fn ipv4_of(f: &[u8]) -> Ipv4Packet<&[u8]> {
    let eth = EthernetFrame::new_checked(f).expect("ethernet");
    assert_eq!(eth.ethertype(), 0x0800, "IPv4 frame expected: {}", hex(f));
    let ip = Ipv4Packet::new_checked(&f[14..]).expect("ipv4");
    let ip = Ipv4Packet::new_checked(&f[14..14 + ip.total_len() as usize]).expect("ipv4");
    assert!(ip.verify_checksum(), "IPv4 header checksum");
    ip
}

pub fn ipv6_of(f: &[u8]) -> Ipv6Packet<&[u8]> {
    let eth = EthernetFrame::new_checked(f).expect("ethernet");
    assert_eq!(eth.ethertype(), 0x86dd, "IPv6 frame expected: {}", hex(f));
    let ip = Ipv6Packet::new_checked(&f[14..]).expect("ipv6");
    Ipv6Packet::new_checked(&f[14..54 + ip.payload_len() as usize]).expect("ipv6")
}

/// The IP datagram a test frame carries (after Ethernet and any VLAN tag, trimmed to the
/// IP length): what ICMP errors quote.
pub fn ip_datagram(f: &[u8]) -> &[u8] {
    let l3 = l3_offset(f).unwrap();
    match ethertype(f) {
        0x0800 => &f[l3..l3 + u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]) as usize],
        _ => &f[l3..l3 + 40 + u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]) as usize],
    }
}

/// Asserts `frame` is an ICMPv4 error of (type, code) from the router's `from` address to
/// the source of `orig`, sent to the gateway MAC behind in0, with valid checksums, TTL 64
/// and quoting as much of the original datagram as fits in 576 bytes. Returns the rest-of-header word.
pub fn assert_icmp4_error(frame: &[u8], typ: u8, code: u8, from: [u8; 4], orig: &[u8]) -> u32 {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!((eth.dst(), eth.src()), (MAC_HOST, MAC_IN), "ICMP error goes back toward the source");
    let oip = ip_datagram(orig);
    let ip = ipv4_of(frame);
    assert_eq!(ip.protocol(), 1);
    assert_eq!(ip.src_addr(), from);
    assert_eq!(ip.dst_addr(), [oip[12], oip[13], oip[14], oip[15]]);
    assert_eq!(ip.ttl(), 64);
    assert!(!ip.is_fragment());
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(), "ICMP checksum");
    assert_eq!((icmp.msg_type(), icmp.code()), (typ, code));
    let q = oip.len().min(576 - 28);
    assert_eq!(icmp.data(), &oip[..q], "quotes the original datagram, up to 576 bytes in all");
    icmp.rest_of_header()
}

/// Same for ICMPv6: from the router's `from` to the source of `orig`, hop limit 64, quoting
/// as much of the original packet as fits in 1280 bytes.
pub fn assert_icmp6_error(frame: &[u8], typ: u8, code: u8, from: [u8; 16], orig: &[u8]) -> u32 {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!((eth.dst(), eth.src()), (MAC_HOST, MAC_IN), "ICMPv6 error goes back toward the source");
    let oip = ip_datagram(orig);
    let ip = ipv6_of(frame);
    assert_eq!(ip.next_header(), 58);
    assert_eq!(ip.src_addr(), from);
    assert_eq!(&ip.dst_addr()[..], &oip[8..24]);
    assert_eq!(ip.hop_limit(), 64);
    assert!(ip.payload().len() + 40 <= 1280);
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()), "ICMPv6 checksum");
    assert_eq!((icmp.msg_type(), icmp.code()), (typ, code));
    let q = oip.len().min(1280 - 48);
    assert_eq!(icmp.data(), &oip[..q], "quotes the original packet");
    icmp.rest_of_header()
}

/// The payload of IPv4 fragments put back together, after checking each one as the router
/// must send it: MACs of out2's next hop, TTL 63, valid header checksum, one identification,
/// payloads of multiples of 8 but the last, MF on all but the last, offsets contiguous.
pub fn reassemble_v4(frags: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    let id = ipv4_of(&frags[0]).ident();
    for (i, f) in frags.iter().enumerate() {
        let ip = ipv4_of(f);
        assert!(ip.verify_checksum(), "fragment {i}: header checksum");
        assert_eq!(ip.ttl(), 63, "fragment {i}: TTL decremented once");
        assert_eq!(ip.ident(), id, "fragment {i}: one identification");
        let last = i + 1 == frags.len();
        assert_eq!(ip.more_frags(), !last, "fragment {i}: MF");
        assert_eq!(ip.frag_offset() as usize, out.len(), "fragment {i}: offset (bytes)");
        let payload = ip.payload();
        assert!(last || payload.len().is_multiple_of(8), "fragment {i}: payload a multiple of 8");
        out.extend_from_slice(payload);
    }
    out
}

/// Asserts `frame` is `orig` forwarded out of a port with `src_mac` to `dst_mac`: TTL /
/// hop limit one less, IPv4 checksum valid, everything else unchanged.
pub fn assert_forwarded(frame: &[u8], orig: &[u8], src_mac: [u8; 6], dst_mac: [u8; 6]) {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!((eth.dst(), eth.src()), (dst_mac, src_mac), "MACs rewritten");
    let oip = ip_datagram(orig);
    let l3 = l3_offset(orig).unwrap();
    assert_eq!(u16::from_be_bytes([frame[12], frame[13]]), ethertype(orig), "untagged, same ethertype");
    let mut expect = oip.to_vec();
    match ethertype(orig) {
        0x0800 => {
            let ip = ipv4_of(frame);
            assert_eq!(ip.ttl(), oip[8] - 1);
            expect[8] -= 1;
            expect[10..12].copy_from_slice(&frame[24..26]);
        }
        _ => {
            ipv6_of(frame);
            expect[7] -= 1;
        }
    }
    assert_eq!(&frame[14..14 + expect.len()], &expect[..], "only TTL and checksum change");
    // The datagram is trimmed to its IP length (padding and any VLAN tag are gone).
    assert_eq!(frame.len(), 14 + oip.len(), "frame = Ethernet header + datagram");
    assert!(orig.len() >= l3 + oip.len());
}
