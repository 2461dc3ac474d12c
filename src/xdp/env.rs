//! The host side of helpers for programs running in sluice: time, CPU id, randomness,
//! trace output, and `bpf_fib_lookup` answered from sluice's own FIB and neighbours.

use crate::rx::route::{Iface, NeighAddr, Neighbours, NextHop, RouteTable, NO_ROUTE};
use sluice_ebpf::env::{clock_ns, fib_ret};
use sluice_ebpf::Env;

/// Trace lines kept (bpf_trace_printk output is a debugging aid, not a log to grow).
const TRACE_KEEP: usize = 256;

/// What the helpers keep between runs on one worker (the kernel's per-CPU helper state):
/// the `bpf_get_prandom_u32` generator (`bpf_user_rnd_state`, seeded once at random and
/// carried on, so a sampling program does not see the same numbers in every burst) and the
/// last trace lines.
#[derive(Debug, Clone)]
pub struct HostState {
    rng: u64,
    trace: std::collections::VecDeque<String>,
}

impl Default for HostState {
    /// Seeded at random (each worker's generator differs, as each CPU's does).
    fn default() -> HostState {
        use std::hash::{BuildHasher, Hasher};
        let seed = std::collections::hash_map::RandomState::new().build_hasher().finish();
        HostState::seeded(seed)
    }
}

impl HostState {
    /// A generator started from `seed` (0 is not a state xorshift leaves: it is replaced).
    pub fn seeded(seed: u64) -> HostState {
        HostState { rng: if seed == 0 { 0x9e37_79b9_7f4a_7c15 } else { seed }, trace: Default::default() }
    }

    /// The last `TRACE_KEEP` lines programs printed, oldest first.
    pub fn trace_lines(&self) -> impl Iterator<Item = &str> {
        self.trace.iter().map(String::as_str)
    }
}

pub struct SluiceEnv<'a> {
    routes: &'a RouteTable,
    neigh: &'a Neighbours,
    ifaces: &'a [Iface],
    host: &'a mut HostState,
    /// The worker running the program: `bpf_get_smp_processor_id`, and the per-CPU map copy.
    cpu: u32,
}

impl<'a> SluiceEnv<'a> {
    pub fn new(routes: &'a RouteTable, neigh: &'a Neighbours, ifaces: &'a [Iface], host: &'a mut HostState) -> SluiceEnv<'a> {
        SluiceEnv { routes, neigh, ifaces, host, cpu: 0 }
    }

    /// Runs programs as worker `cpu` (its per-CPU map copies, its processor id).
    pub fn on_cpu(mut self, cpu: u32) -> Self {
        self.cpu = cpu;
        self
    }
}

impl Env for SluiceEnv<'_> {
    /// CLOCK_MONOTONIC, as ktime_get_mono_fast_ns: a program compares it with times user
    /// space wrote into its maps.
    fn ktime_ns(&mut self) -> u64 {
        clock_ns(libc::CLOCK_MONOTONIC)
    }

    fn ktime_boot_ns(&mut self) -> u64 {
        clock_ns(libc::CLOCK_BOOTTIME)
    }

    fn ktime_coarse_ns(&mut self) -> u64 {
        clock_ns(libc::CLOCK_MONOTONIC_COARSE)
    }

    fn cpu_id(&mut self) -> u32 {
        self.cpu
    }

    fn prandom_u32(&mut self) -> u32 {
        // xorshift64*: cheap and good enough for sampling decisions.
        let r = &mut self.host.rng;
        *r ^= *r >> 12;
        *r ^= *r << 25;
        *r ^= *r >> 27;
        (r.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }

    fn trace(&mut self, msg: &str) {
        if self.host.trace.len() >= TRACE_KEEP {
            self.host.trace.pop_front();
        }
        self.host.trace.push_back(msg.to_string());
    }

    /// `bpf_fib_lookup` as the kernel answers an XDP program (bpf_ipv4_fib_lookup /
    /// bpf_ipv6_fib_lookup with the MTU check). struct bpf_fib_lookup: family@0,
    /// l4_protocol@1, sport@2, dport@4, tot_len / mtu_result@6, ifindex@8, tos / flowinfo /
    /// rt_metric@12, src@16 (16 bytes), dst@32 (16 bytes), vlan proto@48 and TCI@50 / tbid@48,
    /// smac@52, dmac@58.
    ///
    /// An `ifindex` that names no port answers -ENODEV. Routes other than unicast answer BLACKHOLE, UNREACHABLE or NOT_FWDED (no route, a local
    /// address); a `tot_len` over the egress MTU answers FRAG_NEEDED with the MTU in
    /// `mtu_result`. Otherwise the egress ifindex is set, a gateway's address replaces the
    /// destination, `SRC` fills the source with the egress port's address (for IPv6
    /// NO_SRC_ADDR without one; for IPv4 0.0.0.0), and `SKIP_NEIGH` ends there; else the
    /// neighbour must be known (NO_NEIGH, with the ifindex and a metric of 0 set) and the MACs
    /// are filled. Success also writes `mtu_result` and no VLAN. One table: `TBID` names the main one (254) or nothing (NOT_FWDED).
    /// Not modelled: per-interface forwarding (FWD_DISABLED), policy rules and marks.
    fn fib_lookup(&mut self, p: &mut [u8; 64], flags: u32) -> i64 {
        use sluice_ebpf::env::fib_flag;
        const AF_INET: u8 = 2;
        const AF_INET6: u8 = 10;
        const RT_TABLE_MAIN: u32 = 254;
        let v6 = match p[0] {
            AF_INET => false,
            AF_INET6 => true,
            _ => return -97, // -EAFNOSUPPORT
        };
        // The ingress device must exist (dev_get_by_index_rcu); ifindex = port + 1.
        let ifindex = u32::from_ne_bytes([p[8], p[9], p[10], p[11]]) as usize;
        if ifindex == 0 || ifindex > self.ifaces.len() {
            return -19; // -ENODEV
        }
        if flags & fib_flag::DIRECT != 0 && flags & fib_flag::TBID != 0 && u32::from_ne_bytes([p[48], p[49], p[50], p[51]]) != RT_TABLE_MAIN
        {
            return fib_ret::NOT_FWDED;
        }
        let mut dst = [0u8; 16];
        let nh_idx = if v6 {
            dst.copy_from_slice(&p[32..48]);
            self.routes.lookup_v6(dst)
        } else {
            dst[..4].copy_from_slice(&p[32..36]);
            self.routes.lookup_v4([dst[0], dst[1], dst[2], dst[3]])
        };
        if nh_idx == NO_ROUTE {
            return fib_ret::NOT_FWDED;
        }
        let nh = match self.routes.get(nh_idx) {
            Some(NextHop::Blackhole) => return fib_ret::BLACKHOLE,
            Some(NextHop::Unreachable) => return fib_ret::UNREACHABLE,
            Some(NextHop::Local | NextHop::Broadcast) | None => return fib_ret::NOT_FWDED,
            Some(nh) => *nh,
        };
        let (NextHop::Gateway { port, .. } | NextHop::Connected { port } | NextHop::Via { port, .. }) = nh else {
            return fib_ret::NOT_FWDED;
        };
        let iface = self.ifaces.get(port as usize);
        let mtu = iface.map_or(0, |i| i.mtu);
        if u16::from_ne_bytes([p[6], p[7]]) > mtu {
            p[6..8].copy_from_slice(&mtu.to_ne_bytes());
            return fib_ret::FRAG_NEEDED;
        }
        // The route's metric (sluice's routes have none) and the egress device, as
        // bpf_ipv4_fib_lookup writes them before it looks at the neighbour.
        p[12..16].fill(0);
        p[8..12].copy_from_slice(&(port as u32 + 1).to_ne_bytes());
        if let NextHop::Via { gw, .. } = nh {
            match gw {
                NeighAddr::V4(a) if !v6 => p[32..36].copy_from_slice(&a),
                NeighAddr::V6(a) if v6 => p[32..48].copy_from_slice(&a),
                _ => return fib_ret::NOT_FWDED,
            }
        }
        if flags & fib_flag::SRC != 0 {
            // IPv4 always has an answer (fib_result_prefsrc: 0.0.0.0 at worst); IPv6 source
            // selection can fail (NO_SRC_ADDR).
            match (v6, iface.and_then(|i| i.primary_v4()), iface.and_then(|i| i.primary_v6())) {
                (false, a, _) => p[16..20].copy_from_slice(&a.unwrap_or([0; 4])),
                (true, _, Some(a)) => p[16..32].copy_from_slice(&a),
                (true, _, None) => return fib_ret::NO_SRC_ADDR,
            }
        }
        if flags & fib_flag::SKIP_NEIGH == 0 {
            let out = if v6 { self.neigh.resolve_v6(&nh, dst) } else { self.neigh.resolve_v4(&nh, [dst[0], dst[1], dst[2], dst[3]]) };
            let Some((_, dmac)) = out else { return fib_ret::NO_NEIGH };
            p[52..58].copy_from_slice(&iface.map_or([0; 6], |i| i.mac));
            p[58..64].copy_from_slice(&dmac);
        }
        // bpf_fib_set_fwd_params: no VLAN, the MTU out.
        p[48..52].fill(0);
        p[6..8].copy_from_slice(&mtu.to_ne_bytes());
        fib_ret::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_ebpf::env::fib_flag;

    /// The ktime helpers read the clocks user space reads (ktime_get_mono_fast_ns and
    /// friends), not time since sluice started: a program compares them with timestamps
    /// user space put in its maps.
    #[test]
    fn ktime_is_the_system_clock() {
        let (r, n) = (RouteTable::new(), Neighbours::default());
        let mut host = HostState::seeded(1);
        let mut env = SluiceEnv::new(&r, &n, &[], &mut host);
        for clock in [libc::CLOCK_MONOTONIC, libc::CLOCK_BOOTTIME] {
            let before = clock_ns(clock);
            let t = if clock == libc::CLOCK_MONOTONIC { env.ktime_ns() } else { env.ktime_boot_ns() };
            assert!(before <= t && t <= clock_ns(clock), "clock {clock}: {before} <= {t}");
        }
        // The coarse clock ticks once a jiffy: within 100 ms of the fine one.
        let coarse = env.ktime_coarse_ns();
        assert!(clock_ns(libc::CLOCK_MONOTONIC).abs_diff(coarse) < 100_000_000);
    }

    /// `bpf_get_prandom_u32` continues its sequence across bursts (each burst builds a new
    /// `SluiceEnv` on the worker's `HostState`), like the kernel's per-CPU state: a fixed
    /// restart gave packet i of every burst the same number, so a program sampling 1 in N
    /// chose by position in the burst. And two workers' generators start apart.
    #[test]
    fn prandom_carries_on_across_bursts_and_workers_start_apart() {
        let (r, n) = (RouteTable::new(), Neighbours::default());
        let draw = |host: &mut HostState| -> Vec<u32> {
            let mut env = SluiceEnv::new(&r, &n, &[], host);
            (0..4).map(|_| env.prandom_u32()).collect()
        };
        let mut host = HostState::seeded(7);
        let (first, second) = (draw(&mut host), draw(&mut host));
        assert_ne!(first, second, "the second burst continues the sequence");
        assert_eq!(draw(&mut HostState::seeded(7))[..], first[..], "a seed fixes the sequence");
        assert_ne!(draw(&mut HostState::default()), draw(&mut HostState::default()), "random seeds per worker");
        assert_ne!(draw(&mut HostState::seeded(0)), vec![0; 4], "seed 0 is not xorshift's fixed point");
    }

    const MAC_OUT: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const MAC_GW: [u8; 6] = [2, 0, 0, 0, 0, 0xbb];
    const MAC_HOST: [u8; 6] = [2, 0, 0, 0, 0, 0xcc];

    /// Port 1 (ifindex 2, MTU 1400, 198.51.100.1/24, 2001:db8:2::1/64): 10.1.0.0/16 via the
    /// gateway 198.51.100.2 (known), 10.2.0.0/16 via 198.51.100.3 (unknown), the link
    /// itself (198.51.100.7 known), 10.66/16 blackhole, 10.77/16 unreachable, 2001:db8:a1::/48
    /// via 2001:db8:2::2 (known).
    fn lab() -> (RouteTable, Neighbours, Vec<Iface>) {
        let mut r = RouteTable::new();
        let gw = |a| NextHop::Via { port: 1, gw: NeighAddr::V4(a) };
        r.add_v4([10, 1, 0, 0], 16, gw([198, 51, 100, 2])).unwrap();
        r.add_v4([10, 2, 0, 0], 16, gw([198, 51, 100, 3])).unwrap();
        r.add_v4([198, 51, 100, 0], 24, NextHop::Connected { port: 1 }).unwrap();
        r.add_v4([10, 66, 0, 0], 16, NextHop::Blackhole).unwrap();
        r.add_v4([10, 77, 0, 0], 16, NextHop::Unreachable).unwrap();
        let gw6 = [0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        r.add_v6([0x20, 0x01, 0x0d, 0xb8, 0, 0xa1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 48, NextHop::Via { port: 1, gw: NeighAddr::V6(gw6) })
            .unwrap();
        let mut n = Neighbours::default();
        n.v4.insert((1, [198, 51, 100, 2]), MAC_GW);
        n.v4.insert((1, [198, 51, 100, 7]), MAC_HOST);
        n.v6.insert((1, gw6), MAC_GW);
        let mut out = Iface::new("out", MAC_OUT);
        out.mtu = 1400;
        out.v4.push(([198, 51, 100, 1], 24));
        out.v6.push(([0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 64));
        (r, n, vec![Iface::new("in", [2, 0, 0, 0, 0, 1]), out])
    }

    fn params_v4(dst: [u8; 4], tot_len: u16) -> [u8; 64] {
        let mut p = [0u8; 64];
        p[0] = 2;
        p[6..8].copy_from_slice(&tot_len.to_ne_bytes());
        p[8..12].copy_from_slice(&1u32.to_ne_bytes());
        p[12] = 0x10;
        p[32..36].copy_from_slice(&dst);
        p[48..52].copy_from_slice(&0x0064_8100u32.to_be_bytes());
        p
    }

    fn lookup(p: &mut [u8; 64], flags: u32) -> i64 {
        let (r, n, ifaces) = lab();
        let mut host = HostState::default();
        SluiceEnv::new(&r, &n, &ifaces, &mut host).fib_lookup(p, flags)
    }

    /// bpf_ipv4_fib_lookup for XDP: success fills the egress ifindex, the gateway as the
    /// destination, both MACs, the MTU in mtu_result, and clears the VLAN and metric words.
    #[test]
    fn a_routed_destination_gets_ifindex_gateway_macs_and_mtu() {
        let mut p = params_v4([10, 1, 0, 5], 1000);
        assert_eq!(lookup(&mut p, 0), fib_ret::SUCCESS);
        assert_eq!(u32::from_ne_bytes(p[8..12].try_into().unwrap()), 2, "ifindex of port 1");
        assert_eq!(&p[32..36], &[198, 51, 100, 2], "the gateway replaces the destination");
        assert_eq!((&p[52..58], &p[58..64]), (&MAC_OUT[..], &MAC_GW[..]));
        assert_eq!(u16::from_ne_bytes([p[6], p[7]]), 1400, "mtu_result");
        assert_eq!(&p[48..52], &[0; 4], "no VLAN");
        assert_eq!(&p[12..16], &[0; 4], "rt_metric");
        // On the link: the destination stays, its own MAC.
        let mut p = params_v4([198, 51, 100, 7], 60);
        assert_eq!(lookup(&mut p, 0), fib_ret::SUCCESS);
        assert_eq!((&p[32..36], &p[58..64]), (&[198, 51, 100, 7][..], &MAC_HOST[..]));
        // IPv6 through a gateway.
        let mut p = [0u8; 64];
        p[0] = 10;
        p[8] = 1;
        p[32..38].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0xa1]);
        assert_eq!(lookup(&mut p, 0), fib_ret::SUCCESS);
        assert_eq!(p[47], 2, "gateway 2001:db8:2::2");
        assert_eq!(&p[58..64], &MAC_GW);
    }

    /// A datagram longer than the egress MTU: FRAG_NEEDED with the MTU, nothing else told.
    #[test]
    fn a_datagram_over_the_egress_mtu_is_frag_needed_with_the_mtu() {
        let mut p = params_v4([10, 1, 0, 5], 1401);
        assert_eq!(lookup(&mut p, 0), fib_ret::FRAG_NEEDED);
        assert_eq!(u16::from_ne_bytes([p[6], p[7]]), 1400);
        assert_eq!(u32::from_ne_bytes(p[8..12].try_into().unwrap()), 1, "ifindex untouched");
        assert_eq!(lookup(&mut params_v4([10, 1, 0, 5], 1400), 0), fib_ret::SUCCESS, "exactly the MTU fits");
    }

    /// An unknown neighbour: NO_NEIGH, with the egress ifindex and the gateway already
    /// written; SKIP_NEIGH answers SUCCESS without MACs; SRC fills the egress address.
    #[test]
    fn no_neigh_skip_neigh_and_src() {
        let mut p = params_v4([10, 2, 0, 5], 100);
        assert_eq!(lookup(&mut p, 0), fib_ret::NO_NEIGH);
        assert_eq!(&p[12..16], &[0; 4], "the metric is written before the neighbour check");
        assert_eq!((u32::from_ne_bytes(p[8..12].try_into().unwrap()), &p[32..36]), (2, &[198, 51, 100, 3][..]));
        let mut p = params_v4([10, 2, 0, 5], 100);
        assert_eq!(lookup(&mut p, fib_flag::SKIP_NEIGH | fib_flag::SRC), fib_ret::SUCCESS);
        assert_eq!(&p[52..64], &[0; 12], "no MACs");
        assert_eq!(&p[16..20], &[198, 51, 100, 1], "the source the route would use");
    }

    /// bpf_ipv4_fib_lookup / bpf_ipv6_fib_lookup look the ingress device up first: an
    /// ifindex that names none (0, or past the ports) is -ENODEV, whatever the route.
    #[test]
    fn an_unknown_ingress_ifindex_is_enodev() {
        let (r, n, ifaces) = lab();
        for (ifindex, want) in [(0u32, -19), (3, -19), (u32::MAX, -19), (2, fib_ret::SUCCESS)] {
            for family in [2u8, 10] {
                let mut p = params_v4([10, 1, 0, 5], 100);
                p[0] = family;
                if family == 10 {
                    p[32..48].fill(0);
                    p[32..38].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0xa1]);
                }
                p[8..12].copy_from_slice(&ifindex.to_ne_bytes());
                let mut host = HostState::default();
                let got = SluiceEnv::new(&r, &n, &ifaces, &mut host).fib_lookup(&mut p, 0);
                assert_eq!(got, want, "ifindex {ifindex}, family {family}");
            }
        }
    }

    #[test]
    fn routes_that_do_not_forward() {
        for (dst, want) in
            [([10, 66, 0, 1], fib_ret::BLACKHOLE), ([10, 77, 0, 1], fib_ret::UNREACHABLE), ([100, 64, 0, 1], fib_ret::NOT_FWDED)]
        {
            assert_eq!(lookup(&mut params_v4(dst, 100), 0), want, "{dst:?}");
        }
        let mut p = params_v4([10, 1, 0, 5], 100);
        p[48..52].copy_from_slice(&100u32.to_ne_bytes());
        assert_eq!(lookup(&mut p, fib_flag::DIRECT | fib_flag::TBID), fib_ret::NOT_FWDED, "no table 100");
        p[48..52].copy_from_slice(&254u32.to_ne_bytes());
        assert_eq!(lookup(&mut p, fib_flag::DIRECT | fib_flag::TBID), fib_ret::SUCCESS, "the main table");
        let mut p = params_v4([10, 1, 0, 5], 100);
        p[0] = 7;
        assert_eq!(lookup(&mut p, 0), -97, "-EAFNOSUPPORT");
    }
}
