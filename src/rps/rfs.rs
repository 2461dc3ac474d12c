//! Receive Flow Steering: steer a flow to the worker where the application that consumes it
//! runs, as the kernel's `rps_sock_flow_table` (written where a socket is read) and the
//! per-queue `rps_dev_flow` tables (where each flow was last steered, and how far into that
//! backlog) do. A flow moves only once every packet it already queued on its old worker has
//! been processed, so its order holds (`get_rps_cpu`'s `input_queue_head - last_qtail`).

use std::sync::atomic::{AtomicU32, Ordering};

/// The global socket flow table: for each bucket of flow hashes, the worker that last
/// consumed that flow, tagged with the hash's upper bits so another flow in the same bucket
/// is told apart. Written by local delivery only when the value changes.
pub struct SockFlowTable {
    entries: Vec<AtomicU32>,
    mask: u32,
    /// Low bits that hold the worker (the kernel's `rps_cpu_mask`).
    cpu_mask: u32,
}

impl SockFlowTable {
    /// `entries` (`net.core.rps_sock_flow_entries`, rounded up to a power of two; 0 = RFS
    /// off) for `workers` workers.
    pub fn new(entries: u32, workers: usize) -> SockFlowTable {
        let n = if entries == 0 { 0 } else { entries.next_power_of_two() as usize };
        let cpu_mask = (workers.max(1).next_power_of_two() - 1) as u32;
        SockFlowTable { entries: (0..n).map(|_| AtomicU32::new(u32::MAX)).collect(), mask: n.saturating_sub(1) as u32, cpu_mask }
    }

    pub fn enabled(&self) -> bool {
        !self.entries.is_empty()
    }

    /// Records that `cpu` consumes flow `hash` (`sock_rps_record_flow`).
    #[inline]
    pub fn record(&self, hash: u32, cpu: usize) {
        if self.entries.is_empty() || hash == 0 {
            return;
        }
        let val = (hash & !self.cpu_mask) | cpu as u32;
        let e = &self.entries[(hash & self.mask) as usize];
        if e.load(Ordering::Relaxed) != val {
            e.store(val, Ordering::Relaxed);
        }
    }

    /// The worker that consumes flow `hash`, if the table knows it.
    #[inline]
    pub fn desired(&self, hash: u32) -> Option<usize> {
        let e = self.entries.get((hash & self.mask) as usize)?.load(Ordering::Relaxed);
        (e != u32::MAX && (e ^ hash) & !self.cpu_mask == 0).then_some((e & self.cpu_mask) as usize)
    }
}

/// One entry of a worker's flow table (`rps_dev_flow`): where the flows of this bucket go
/// now, and how far they had got into that worker's backlog when their last packet went
/// there (`last_qtail`, the kernel's).
#[derive(Debug, Clone, Copy)]
pub struct DevFlow {
    pub cpu: u16,
    pub last_qtail: u64,
}

/// No worker yet.
pub const NO_CPU: u16 = u16::MAX;

impl Default for DevFlow {
    fn default() -> Self {
        DevFlow { cpu: NO_CPU, last_qtail: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_tells_flows_in_one_bucket_apart_and_is_off_at_zero() {
        let t = SockFlowTable::new(100, 2);
        assert!(t.enabled());
        t.record(0x1234_5678, 1);
        assert_eq!(t.desired(0x1234_5678), Some(1));
        // Same bucket (low 7 bits of a 128-entry table), another flow: unknown.
        assert_eq!(t.desired(0x9234_5678), None);
        t.record(0x1234_5678, 0);
        assert_eq!(t.desired(0x1234_5678), Some(0));
        let off = SockFlowTable::new(0, 2);
        off.record(5, 1);
        assert_eq!(off.desired(5), None);
    }

    #[test]
    fn a_flow_with_hash_zero_is_not_recorded_and_a_new_table_knows_no_flow() {
        // Hash 0 means "no hash" (sock_rps_record_flow skips it).
        let t = SockFlowTable::new(128, 2);
        assert_eq!(t.desired(0x0000_0005), None, "a new table knows no flow");
        t.record(0, 1);
        assert_eq!(t.desired(0), None);
        // The worker is kept in the low bits: with four workers, worker 3 of a flow whose
        // hash has those bits clear or set comes back as 3.
        let t = SockFlowTable::new(128, 4);
        t.record(0x1234_5670, 3);
        t.record(0x1234_5683, 2);
        assert_eq!(t.desired(0x1234_5670), Some(3));
        assert_eq!(t.desired(0x1234_5683), Some(2));
        // The table is rounded up to a power of two: 100 entries are 128 buckets, so hashes
        // 128 apart share one and tell each other apart by the tag.
        let t = SockFlowTable::new(100, 2);
        t.record(0x0000_0002, 1);
        assert_eq!(t.desired(0x0000_0082), None);
        t.record(0x0000_0064, 1);
        assert_eq!(t.desired(0x0000_0064), Some(1));
        assert_eq!(DevFlow::default().cpu, NO_CPU);
    }

    #[test]
    fn a_table_of_zero_entries_is_rfs_off() {
        assert!(!SockFlowTable::new(0, 4).enabled());
        assert!(SockFlowTable::new(1, 4).enabled());
    }
}
