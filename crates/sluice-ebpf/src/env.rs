//! Host callbacks used by helpers: time, CPU id, randomness, trace output, FIB lookups,
//! and a multi-buffer packet's fragments.

use crate::xdp::XdpFrags;

/// `BPF_FIB_LKUP_RET_*` codes returned by `bpf_fib_lookup`.
pub mod fib_ret {
    pub const SUCCESS: i64 = 0;
    pub const BLACKHOLE: i64 = 1;
    pub const UNREACHABLE: i64 = 2;
    pub const PROHIBIT: i64 = 3;
    pub const NOT_FWDED: i64 = 4;
    pub const FWD_DISABLED: i64 = 5;
    pub const UNSUPP_LWT: i64 = 6;
    pub const NO_NEIGH: i64 = 7;
    pub const FRAG_NEEDED: i64 = 8;
    pub const NO_SRC_ADDR: i64 = 9;
}

/// `bpf_fib_lookup` flags (`BPF_FIB_LOOKUP_*`).
pub mod fib_flag {
    pub const DIRECT: u32 = 1 << 0;
    pub const OUTPUT: u32 = 1 << 1;
    pub const SKIP_NEIGH: u32 = 1 << 2;
    pub const TBID: u32 = 1 << 3;
    pub const SRC: u32 = 1 << 4;
    pub const MARK: u32 = 1 << 5;
}

/// What the host provides to helpers during a run. One `Env` is passed to each run
/// (`&mut dyn Env`); it is never shared between concurrent runs.
pub trait Env {
    /// `bpf_ktime_get_ns`: monotonic nanoseconds.
    fn ktime_ns(&mut self) -> u64;
    /// `bpf_ktime_get_boot_ns`: like `ktime_ns` but counting suspend; defaults to `ktime_ns`.
    fn ktime_boot_ns(&mut self) -> u64 {
        self.ktime_ns()
    }
    /// `bpf_ktime_get_coarse_ns`; defaults to `ktime_ns`.
    fn ktime_coarse_ns(&mut self) -> u64 {
        self.ktime_ns()
    }
    /// The runtime CPU (sluice worker) running this program: `bpf_get_smp_processor_id` and the
    /// copy of per-CPU maps the program sees. Read once at the start of each run; must be
    /// smaller than the `ncpus` the maps were created with.
    fn cpu_id(&mut self) -> u32;
    /// `bpf_get_prandom_u32`.
    fn prandom_u32(&mut self) -> u32;
    /// One formatted `bpf_trace_printk` / `bpf_trace_vprintk` message (without the kernel's
    /// trace_pipe prefix).
    fn trace(&mut self, msg: &str);
    /// `bpf_fib_lookup`: `params` is the program's 64-byte `struct bpf_fib_lookup`, to be
    /// updated in place like the kernel does; returns a `BPF_FIB_LKUP_RET_*` code (or a
    /// negative errno). The default answers `NOT_FWDED` (no routing table).
    fn fib_lookup(&mut self, params: &mut [u8; 64], flags: u32) -> i64 {
        let _ = (params, flags);
        fib_ret::NOT_FWDED
    }
    /// The fragments of the multi-buffer packet being run on (none for one buffer). The
    /// engines provide them from [`crate::XdpBuff::frags`] through [`WithFrags`].
    fn xdp_frags(&mut self) -> Option<&mut dyn XdpFrags> {
        None
    }
}

/// A run's environment plus the packet's fragments: what the engines hand the helpers when
/// the buffer has fragments, so `bpf_xdp_get_buff_len`, `bpf_xdp_load_bytes/store_bytes`
/// and `bpf_xdp_adjust_tail` reach them. Everything else goes to the wrapped `Env`.
pub struct WithFrags<'e, 'f> {
    pub env: &'e mut dyn Env,
    pub frags: &'f mut dyn XdpFrags,
}

impl Env for WithFrags<'_, '_> {
    fn ktime_ns(&mut self) -> u64 {
        self.env.ktime_ns()
    }
    fn ktime_boot_ns(&mut self) -> u64 {
        self.env.ktime_boot_ns()
    }
    fn ktime_coarse_ns(&mut self) -> u64 {
        self.env.ktime_coarse_ns()
    }
    fn cpu_id(&mut self) -> u32 {
        self.env.cpu_id()
    }
    fn prandom_u32(&mut self) -> u32 {
        self.env.prandom_u32()
    }
    fn trace(&mut self, msg: &str) {
        self.env.trace(msg)
    }
    fn fib_lookup(&mut self, params: &mut [u8; 64], flags: u32) -> i64 {
        self.env.fib_lookup(params, flags)
    }
    fn xdp_frags(&mut self) -> Option<&mut dyn XdpFrags> {
        Some(&mut *self.frags)
    }
}

/// Runs `run` with `env`, or with `env` plus `xdp`'s fragments when it has some (taken out
/// of the buffer for the run and put back after).
pub(crate) fn with_frags_of<R>(
    xdp: &mut crate::XdpBuff<'_>,
    env: &mut dyn Env,
    run: impl FnOnce(&mut crate::XdpBuff<'_>, &mut dyn Env) -> R,
) -> R {
    match xdp.frags.take() {
        None => run(xdp, env),
        Some(frags) => {
            let mut both = WithFrags { env, frags };
            let r = run(xdp, &mut both);
            xdp.frags = Some(both.frags);
            r
        }
    }
}

/// A deterministic environment for tools and tests: time advances by `time_step_ns` on every
/// read, random numbers come from a seeded xorshift, traces are collected in `traces`.
#[derive(Debug, Clone)]
pub struct NullEnv {
    pub now_ns: u64,
    pub time_step_ns: u64,
    pub cpu: u32,
    pub rng: u64,
    pub traces: Vec<String>,
    /// When true, `trace` messages are kept in `traces` (default); otherwise discarded.
    pub keep_traces: bool,
}

impl Default for NullEnv {
    fn default() -> Self {
        NullEnv { now_ns: 1_000_000_000, time_step_ns: 1000, cpu: 0, rng: 0x2545_f491_4f6c_dd1d, traces: Vec::new(), keep_traces: true }
    }
}

impl NullEnv {
    pub fn new() -> NullEnv {
        NullEnv::default()
    }

    /// A NullEnv that reports `cpu` as the current CPU.
    pub fn on_cpu(cpu: u32) -> NullEnv {
        NullEnv { cpu, ..NullEnv::default() }
    }
}

fn xorshift64(state: &mut u64) -> u64 {
    let mut x = *state;
    if x == 0 {
        x = 0x9e37_79b9_7f4a_7c15;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

impl Env for NullEnv {
    fn ktime_ns(&mut self) -> u64 {
        let t = self.now_ns;
        self.now_ns = self.now_ns.wrapping_add(self.time_step_ns);
        t
    }

    fn cpu_id(&mut self) -> u32 {
        self.cpu
    }

    fn prandom_u32(&mut self) -> u32 {
        (xorshift64(&mut self.rng) >> 32) as u32
    }

    fn trace(&mut self, msg: &str) {
        if self.keep_traces {
            self.traces.push(msg.to_owned());
        }
    }
}

/// An environment backed by the host: `CLOCK_MONOTONIC` / `CLOCK_BOOTTIME` /
/// `CLOCK_MONOTONIC_COARSE`, a xorshift generator seeded from the clock, traces written to
/// stderr. `cpu` is whatever the caller sets (the sluice worker index).
#[derive(Debug, Clone)]
pub struct SystemEnv {
    pub cpu: u32,
    rng: u64,
}

impl SystemEnv {
    pub fn new(cpu: u32) -> SystemEnv {
        let seed = clock_ns(libc::CLOCK_MONOTONIC) ^ ((cpu as u64) << 48) ^ 0x5851_f42d_4c95_7f2d;
        SystemEnv { cpu, rng: seed | 1 }
    }
}

/// `clock`'s time in nanoseconds (clock_gettime), as the kernel's ktime helpers read their
/// clocks: the same values user space sees. 0 if the clock cannot be read.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

impl Env for SystemEnv {
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
        (xorshift64(&mut self.rng) >> 32) as u32
    }

    fn trace(&mut self, msg: &str) {
        eprintln!("bpf_trace_printk: {msg}");
    }
}
