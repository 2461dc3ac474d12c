//! Time-stamp counter: read once per batch, converted to nanoseconds with a frequency
//! calibrated at start against the monotonic clock.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Reads the CPU's time-stamp counter (invariant TSC on modern x86-64).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no memory effects and is available on every x86-64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Whether the TSC has reached `deadline` (a reading from [`rdtsc`] plus ticks; compared
/// as a signed distance, so a wrap of the counter does not matter).
#[inline(always)]
pub fn reached(deadline: u64) -> bool {
    rdtsc().wrapping_sub(deadline) as i64 >= 0
}

static TSC_HZ: OnceLock<f64> = OnceLock::new();

/// TSC ticks per second, measured once (about 20 ms) and cached.
pub fn tsc_hz() -> f64 {
    *TSC_HZ.get_or_init(|| {
        let t0 = Instant::now();
        let c0 = rdtsc();
        std::thread::sleep(Duration::from_millis(20));
        let c1 = rdtsc();
        let dt = t0.elapsed().as_secs_f64();
        let hz = (c1.wrapping_sub(c0)) as f64 / dt;
        if hz.is_finite() && hz > 1e6 {
            hz
        } else {
            1e9
        }
    })
}

/// Converts TSC ticks to nanoseconds.
pub fn cycles_to_ns(cycles: f64) -> f64 {
    cycles * 1e9 / tsc_hz()
}

/// Which polls the per-stage clocks time. A TSC read costs 25–40 cycles (about 10 ns in
/// this VM), several per poll in listified mode; so the clocks run on a random 1 in `every`
/// polls and scale what they measure by `every`: the per-stage table stays an unbiased
/// estimate while the reads cost 1/`every` of their full price. `every` = 1 times every
/// poll (VPP's way); 0 turns the clocks off.
#[derive(Debug, Clone)]
pub struct StageClock {
    on: bool,
    scale: u64,
    rng: u64,
}

impl Default for StageClock {
    fn default() -> Self {
        StageClock { on: true, scale: 1, rng: 0x2545_f491_4f6c_dd1d }
    }
}

impl StageClock {
    /// Decides whether the poll starting now is timed. Random rather than every n-th poll:
    /// polls alternate between ports, and a fixed stride would time only some of them.
    #[inline]
    pub fn next_poll(&mut self, every: u32) {
        if every <= 1 {
            self.on = every == 1;
            self.scale = 1;
            return;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.on = (self.rng >> 32).is_multiple_of(every as u64);
        self.scale = every as u64;
    }

    /// Whether the current poll is timed.
    #[inline(always)]
    pub fn on(&self) -> bool {
        self.on
    }

    /// The start of a timed section: the TSC when this poll is timed, else 0.
    #[inline(always)]
    pub fn start(&self) -> u64 {
        if self.on {
            rdtsc()
        } else {
            0
        }
    }

    /// Ends a section started at `t0`: (TSC now, cycles to count, scaled), or zeros when the
    /// poll is not timed.
    #[inline(always)]
    pub fn lap(&self, t0: u64) -> (u64, u64) {
        if self.on && t0 != 0 {
            let now = rdtsc();
            (now, now.wrapping_sub(t0).wrapping_mul(self.scale))
        } else {
            (0, 0)
        }
    }
}
