//! The host side of helpers for programs running in sluice: time, CPU id, randomness,
//! trace output, and `bpf_fib_lookup` answered from sluice's own FIB and neighbours.

use crate::rx::route::{Iface, Neighbours, NextHop, RouteTable, NO_ROUTE};
use sluice_ebpf::env::fib_ret;
use sluice_ebpf::Env;
use std::time::Instant;

/// Trace lines kept (bpf_trace_printk output is a debugging aid, not a log to grow).
const TRACE_KEEP: usize = 256;

pub struct SluiceEnv<'a> {
    routes: &'a RouteTable,
    neigh: &'a Neighbours,
    ifaces: &'a [Iface],
    trace: &'a mut Vec<String>,
    rng: u64,
    /// The worker running the program: `bpf_get_smp_processor_id`, and the per-CPU map copy.
    cpu: u32,
}

impl<'a> SluiceEnv<'a> {
    pub fn new(routes: &'a RouteTable, neigh: &'a Neighbours, ifaces: &'a [Iface], trace: &'a mut Vec<String>) -> SluiceEnv<'a> {
        SluiceEnv { routes, neigh, ifaces, trace, rng: 0x9e37_79b9_7f4a_7c15, cpu: 0 }
    }

    /// Runs programs as worker `cpu` (its per-CPU map copies, its processor id).
    pub fn on_cpu(mut self, cpu: u32) -> Self {
        self.cpu = cpu;
        self
    }
}

fn epoch() -> Instant {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *START.get_or_init(Instant::now)
}

impl Env for SluiceEnv<'_> {
    fn ktime_ns(&mut self) -> u64 {
        epoch().elapsed().as_nanos() as u64
    }

    fn cpu_id(&mut self) -> u32 {
        self.cpu
    }

    fn prandom_u32(&mut self) -> u32 {
        // xorshift64*: cheap and good enough for sampling decisions.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }

    fn trace(&mut self, msg: &str) {
        if self.trace.len() >= TRACE_KEEP {
            self.trace.remove(0);
        }
        self.trace.push(msg.to_string());
    }

    /// struct bpf_fib_lookup: family@0, l4_protocol@1, sport@2, dport@4, tot_len@6,
    /// ifindex@8, tos/flowinfo@12, src@16 (16 bytes), dst@32 (16 bytes), vlan@48, smac@52,
    /// dmac@58. On success ifindex, smac and dmac are filled in.
    fn fib_lookup(&mut self, p: &mut [u8; 64], _flags: u32) -> i64 {
        const AF_INET: u8 = 2;
        const AF_INET6: u8 = 10;
        let (nh_idx, out) = match p[0] {
            AF_INET => {
                let d = [p[32], p[33], p[34], p[35]];
                let nh = self.routes.lookup_v4(d);
                (nh, self.routes.get(nh).and_then(|n| self.neigh.resolve_v4(n, d)))
            }
            AF_INET6 => {
                let mut d = [0u8; 16];
                d.copy_from_slice(&p[32..48]);
                let nh = self.routes.lookup_v6(d);
                (nh, self.routes.get(nh).and_then(|n| self.neigh.resolve_v6(n, d)))
            }
            _ => return -97, // -EAFNOSUPPORT
        };
        if nh_idx == NO_ROUTE {
            return fib_ret::NOT_FWDED;
        }
        match self.routes.get(nh_idx) {
            Some(NextHop::Blackhole) => return fib_ret::BLACKHOLE,
            Some(NextHop::Unreachable) => return fib_ret::UNREACHABLE,
            Some(NextHop::Local) | None => return fib_ret::NOT_FWDED,
            _ => {}
        }
        let Some((port, dmac)) = out else { return fib_ret::NO_NEIGH };
        let smac = self.ifaces.get(port as usize).map(|i| i.mac).unwrap_or([0; 6]);
        p[8..12].copy_from_slice(&(port as u32 + 1).to_ne_bytes());
        p[52..58].copy_from_slice(&smac);
        p[58..64].copy_from_slice(&dmac);
        fib_ret::SUCCESS
    }
}
