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
