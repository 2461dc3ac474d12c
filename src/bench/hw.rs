//! Hardware performance counters for the calling thread (`perf_event_open`): instructions,
//! CPU cycles and cache misses, user space only. Virtual machines often do not expose a
//! PMU; then [`HwCounters::open`] fails with the errno and the report says so.
//!
//! Also the thread's CPU time (`getrusage(RUSAGE_THREAD)`).

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const PERF_COUNT_HW_CACHE_MISSES: u64 = 3;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
// _IO('$', n)
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_EVENT_IOC_RESET: libc::c_ulong = 0x2403;

// Bits of perf_event_attr's flag word.
const ATTR_DISABLED: u64 = 1 << 0;
const ATTR_EXCLUDE_KERNEL: u64 = 1 << 5;
const ATTR_EXCLUDE_HV: u64 = 1 << 6;

/// `struct perf_event_attr` up to PERF_ATTR_SIZE_VER5 (112 bytes), which every kernel since
/// 4.1 accepts.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
}

const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == 112);

/// Why the counters are not available.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{event}: {errno_name}: {message}")]
pub struct HwError {
    pub event: &'static str,
    pub errno: i32,
    pub errno_name: &'static str,
    pub message: String,
}

fn errno_name(e: i32) -> &'static str {
    match e {
        libc::ENOENT => "ENOENT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::EINVAL => "EINVAL",
        libc::ENODEV => "ENODEV",
        libc::ENOSYS => "ENOSYS",
        libc::EBUSY => "EBUSY",
        libc::EMFILE => "EMFILE",
        _ => "errno",
    }
}

/// Counts read over one measured interval.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq)]
pub struct HwReading {
    pub instructions: u64,
    pub cycles: u64,
    pub cache_misses: u64,
}

/// Three counting events on the calling thread. Not `Send`: they count the thread that
/// opened them.
pub struct HwCounters {
    fds: [File; 3],
    _not_send: std::marker::PhantomData<*const ()>,
}

const EVENTS: [(&str, u64); 3] =
    [("cycles", PERF_COUNT_HW_CPU_CYCLES), ("instructions", PERF_COUNT_HW_INSTRUCTIONS), ("cache-misses", PERF_COUNT_HW_CACHE_MISSES)];

fn open_event(name: &'static str, config: u64, group: i32) -> Result<File, HwError> {
    let mut attr = PerfEventAttr {
        type_: PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config,
        flags: ATTR_DISABLED | ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV,
        ..Default::default()
    };
    // SAFETY: attr is a valid, fully initialised perf_event_attr of the size it declares;
    // pid 0 / cpu -1 = this thread on any CPU; the kernel only reads attr.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &mut attr as *mut PerfEventAttr,
            0 as libc::pid_t,
            -1 as libc::c_int,
            group,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        let errno = e.raw_os_error().unwrap_or(0);
        return Err(HwError { event: name, errno, errno_name: errno_name(errno), message: e.to_string() });
    }
    // SAFETY: fd is a new descriptor the kernel just returned and nothing else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
}

impl HwCounters {
    /// Opens cycles (group leader), instructions and cache misses for this thread, disabled.
    pub fn open() -> Result<HwCounters, HwError> {
        let leader = open_event(EVENTS[0].0, EVENTS[0].1, -1)?;
        let ins = open_event(EVENTS[1].0, EVENTS[1].1, leader.as_raw_fd())?;
        let miss = open_event(EVENTS[2].0, EVENTS[2].1, leader.as_raw_fd())?;
        Ok(HwCounters { fds: [leader, ins, miss], _not_send: std::marker::PhantomData })
    }

    fn ioctl_all(&self, req: libc::c_ulong) {
        for f in &self.fds {
            // SAFETY: a perf event fd we own; these requests take no argument.
            unsafe {
                libc::ioctl(f.as_raw_fd(), req as _, 0);
            }
        }
    }

    /// Zeroes and starts the counters.
    pub fn start(&self) {
        self.ioctl_all(PERF_EVENT_IOC_RESET);
        self.ioctl_all(PERF_EVENT_IOC_ENABLE);
    }

    /// Stops the counters and reads them.
    pub fn stop(&mut self) -> Option<HwReading> {
        self.ioctl_all(PERF_EVENT_IOC_DISABLE);
        let mut v = [0u64; 3];
        for (f, out) in self.fds.iter_mut().zip(v.iter_mut()) {
            let mut b = [0u8; 8];
            f.read_exact(&mut b).ok()?;
            *out = u64::from_ne_bytes(b);
        }
        Some(HwReading { cycles: v[0], instructions: v[1], cache_misses: v[2] })
    }
}

/// Whether counters open on this machine: Ok, or the reason (for the report).
pub fn probe() -> Result<(), HwError> {
    HwCounters::open().map(|_| ())
}

pub use crate::stats::cpu::thread_cpu_time;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_advances() {
        let (u0, s0) = thread_cpu_time().unwrap();
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed().as_millis() < 30 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let (u1, s1) = thread_cpu_time().unwrap();
        assert!(u1 + s1 > u0 + s0, "{x}");
    }

    #[test]
    fn counters_open_or_explain() {
        match HwCounters::open() {
            Ok(mut c) => {
                c.start();
                let mut x = 0u64;
                for i in 0..100_000u64 {
                    x = std::hint::black_box(x ^ i);
                }
                let r = c.stop().unwrap();
                assert!(r.instructions > 10_000, "{r:?} {x}");
            }
            Err(e) => assert!(e.errno != 0 && !e.to_string().is_empty()),
        }
    }
}
