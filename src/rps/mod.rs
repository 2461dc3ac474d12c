//! rps: flow hashing and steering of received packets to workers (Receive Packet
//! Steering), the kernel's `get_rps_cpu` and a NIC's RSS.
//!
//! What is here so far: the hashes (`hash`: Toeplitz as NICs compute it for RSS, with the
//! Microsoft verification vectors, and a direction-independent software flow hash like
//! `skb_get_hash`), the target choice (`reciprocal_scale`, as the kernel maps a hash onto a
//! CPU map) and `rps_cpus` CPU-list parsing. The workers, backlogs and wake-ups that use them
//! come with the Net/Worker split (issue 11).

pub mod hash;

use thiserror::Error;

/// Maps a 32-bit hash onto `0..n` without a division: `(hash * n) >> 32`, the kernel's
/// `reciprocal_scale` (what `get_rps_cpu` indexes the CPU map with).
#[inline(always)]
pub fn reciprocal_scale(hash: u32, n: u32) -> u32 {
    ((hash as u64 * n as u64) >> 32) as u32
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CpuListError {
    #[error("empty CPU list")]
    Empty,
    #[error("`{0}` is not a CPU number or a range like 0-3")]
    Syntax(String),
    #[error("range `{0}` runs backwards")]
    Backwards(String),
    #[error("CPU {cpu} is not present (this run has {present} worker(s): 0-{last})", last = present.saturating_sub(1))]
    NotPresent { cpu: u32, present: u32 },
}

/// Parses a CPU list in the kernel's syntax (`0-3,6`, as `rps_cpus` and `isolcpus` take it)
/// into sorted, distinct CPU ids below `present`.
pub fn parse_cpu_list(s: &str, present: u32) -> Result<Vec<u32>, CpuListError> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            if s.trim().is_empty() {
                return Err(CpuListError::Empty);
            }
            return Err(CpuListError::Syntax(s.to_string()));
        }
        let num = |t: &str| t.trim().parse::<u32>().map_err(|_| CpuListError::Syntax(part.to_string()));
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo > hi {
            return Err(CpuListError::Backwards(part.to_string()));
        }
        if hi >= present {
            return Err(CpuListError::NotPresent { cpu: hi, present });
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-3,6", 8), Ok(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("1", 2), Ok(vec![1]));
        assert_eq!(parse_cpu_list("1,0,1", 2), Ok(vec![0, 1]));
        assert_eq!(parse_cpu_list("", 2), Err(CpuListError::Empty));
        assert_eq!(parse_cpu_list("0,,1", 2), Err(CpuListError::Syntax("0,,1".into())));
        assert_eq!(parse_cpu_list("a", 2), Err(CpuListError::Syntax("a".into())));
        assert_eq!(parse_cpu_list("3-1", 4), Err(CpuListError::Backwards("3-1".into())));
        assert_eq!(parse_cpu_list("0-2", 2), Err(CpuListError::NotPresent { cpu: 2, present: 2 }));
        let e = parse_cpu_list("5", 2).unwrap_err().to_string();
        assert!(e.contains("CPU 5") && e.contains("0-1"), "{e}");
    }

    #[test]
    fn reciprocal_scale_covers_every_target_evenly() {
        assert_eq!(reciprocal_scale(0, 3), 0);
        assert_eq!(reciprocal_scale(u32::MAX, 3), 2);
        let mut counts = [0u32; 3];
        for i in 0..3000u32 {
            counts[reciprocal_scale(i.wrapping_mul(0x9e37_79b9), 3) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (900..=1100).contains(&c)), "{counts:?}");
    }
}
