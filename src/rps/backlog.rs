//! The steering state workers share: each worker's backlog wake-up state (the backlog itself,
//! the kernel's per-CPU `softnet_data.input_pkt_queue`, is a set of single-producer rings,
//! one from every worker, itself included, whose ends the two workers own: see
//! [`backlog_rings`]; and its length, all rings together: [`BacklogLen`]), the
//! per-port handoff queues through which a worker transmits on a port another worker owns,
//! and the run's stop signal. Lock-free bounded queues: producers and consumers never block
//! each other.

use crate::buf::skb::Skb;
use crate::buf::Pkt;
use crate::stats::Counters;
use crossbeam_queue::ArrayQueue;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::Thread;

/// Packets a port's handoff queue holds (like a transmit ring shared by the workers).
pub const HANDOFF_LEN: usize = 4096;

/// The backlog ring from one worker to another: the producer end stays with the steering
/// worker, the consumer end with the target. A run of packets goes in with one index store
/// (`push_partial_slice`), and the ends keep their indices on separate cache lines.
pub type BacklogTx = rtrb::Producer<Skb>;
pub type BacklogRx = rtrb::Consumer<Skb>;

/// Rings for `workers` workers, `len` packets each (`net.core.netdev_max_backlog` + 1, what
/// one CPU's backlog can hold): entry `[s][d]` is the producer from worker s to worker d, and
/// the consumers of worker d are `rx[d]`, in order of s. A worker has a ring to itself too:
/// with RPS on, the packets it keeps go through its own backlog, as enqueue_to_backlog takes
/// the local CPU's packets like the others'.
pub fn backlog_rings(workers: usize, len: usize) -> (Vec<Vec<Option<BacklogTx>>>, Vec<Vec<BacklogRx>>) {
    let mut tx: Vec<Vec<Option<BacklogTx>>> = (0..workers).map(|_| (0..workers).map(|_| None).collect()).collect();
    let mut rx: Vec<Vec<BacklogRx>> = (0..workers).map(|_| Vec::new()).collect();
    for row in tx.iter_mut() {
        for (d, slot) in row.iter_mut().enumerate() {
            let (p, c) = rtrb::RingBuffer::new(len.max(1));
            *slot = Some(p);
            rx[d].push(c);
        }
    }
    (tx, rx)
}

/// Packets in one worker's backlog, all rings together (`skb_queue_len` of the kernel's one
/// `input_pkt_queue`): producers reserve room in it before they push, the owner gives it back
/// as it processes. On a cache line of its own.
#[repr(align(128))]
#[derive(Default)]
pub struct BacklogLen(pub std::sync::atomic::AtomicI64);

/// One worker's backlog: whether it is scheduled, and who serves it.
pub struct Backlog {
    /// True while the worker is awake for this backlog or a wake-up is on its way: a
    /// producer wakes the worker only when it turns this from false to true (the kernel's
    /// NAPI_STATE_SCHED test before it raises an IPI).
    scheduled: AtomicBool,
    /// The thread serving the backlog in the current run: each run spawns its workers anew
    /// (a bench's warm-up and measurement are two runs), so the latest registration counts.
    thread: Mutex<Option<Thread>>,
    /// Readable after a wake-up: a worker asleep in poll() on its ports' sockets watches it
    /// too, since an unpark does not end a poll. None when no eventfd could be made (such a
    /// worker does not sleep in poll()).
    wake_fd: Option<OwnedFd>,
    /// True while the worker sleeps (or is about to) in poll() on `wake_fd`: only then does a
    /// wake-up write the eventfd — a parked or running worker needs no second syscall.
    polling: AtomicBool,
}

impl Backlog {
    fn new() -> Backlog {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor that
        // nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        // SAFETY: as above, `fd` is ours alone.
        let wake_fd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
        Backlog { scheduled: AtomicBool::new(false), thread: Mutex::new(None), wake_fd, polling: AtomicBool::new(false) }
    }

    /// Marks the backlog scheduled (after packets went in); true if it was not (the caller
    /// then wakes the worker).
    pub fn schedule(&self) -> bool {
        !self.scheduled.swap(true, Ordering::SeqCst)
    }

    /// The worker goes idle: a producer must wake it for the next packet. Returns whether
    /// packets arrived meanwhile (`pending`; then it stays scheduled and keeps working).
    pub fn idle(&self, pending: impl Fn() -> bool) -> bool {
        self.scheduled.store(false, Ordering::SeqCst);
        // The flag is cleared before the rings are read: a producer that pushed after this
        // read sees the flag clear and wakes the worker.
        std::sync::atomic::fence(Ordering::SeqCst);
        if !pending() {
            return false;
        }
        self.scheduled.store(true, Ordering::SeqCst);
        true
    }

    /// The thread that serves this backlog, from now on (each worker thread registers when
    /// it starts, replacing the last run's).
    pub fn register(&self) {
        *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current());
    }

    /// Wakes the worker (one "IPI"): parked, or asleep in poll() on its wake-up eventfd.
    pub fn wake(&self) {
        // A lock per wake-up, not per packet: at most one wake-up per target per round.
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            // No syscall unless the thread is parked.
            t.unpark();
        }
        if !self.polling.load(Ordering::SeqCst) {
            return;
        }
        if let Some(fd) = &self.wake_fd {
            let one = 1u64;
            // SAFETY: writes the 8 bytes of a live u64 to our eventfd. It cannot block
            // (EFD_NONBLOCK); a counter already at its maximum is awake anyway.
            unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }

    /// The descriptor [`Backlog::wake`] makes readable (for an idle worker's poll()).
    pub fn wake_fd(&self) -> Option<RawFd> {
        self.wake_fd.as_ref().map(|f| f.as_raw_fd())
    }

    /// The worker is about to sleep in poll() on [`Backlog::wake_fd`]: from now on wake-ups
    /// write the eventfd. Returns whether it must not sleep: work arrived before producers
    /// could know (`pending`), or a producer scheduled the backlog since the worker went
    /// idle — its wake-up may have found `polling` still clear (an unpark alone), and while
    /// the backlog stays scheduled no later packet wakes it. Store, fence, load here against
    /// push, swap, load in the producer (Dekker): either the producer sees `polling` or this
    /// sees its packet and its schedule.
    pub fn begin_poll_sleep(&self, pending: impl Fn() -> bool) -> bool {
        self.polling.store(true, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        self.scheduled.load(Ordering::SeqCst) || pending()
    }

    /// The poll() sleep is over: wake-ups go back to unpark alone.
    pub fn end_poll_sleep(&self) {
        self.polling.store(false, Ordering::SeqCst);
    }

    /// Consumes the wake-ups the eventfd holds (after a poll() found it readable).
    pub fn clear_wake(&self) {
        if let Some(fd) = &self.wake_fd {
            let mut n = 0u64;
            // SAFETY: reads at most 8 bytes into a live u64; non-blocking.
            unsafe { libc::read(fd.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
        }
    }
}

/// Shared steering state of a datapath.
pub struct Steering {
    /// Target workers of `rps_cpus`, in order (empty: RPS off).
    pub cpus: Vec<u16>,
    /// `[port][queue]`: a receive queue's own map (sysfs `queues/rx-N/rps_cpus`, a port's
    /// `rps_cpus` setting), overriding `cpus` for that queue (empty: RPS off there); absent
    /// (a port without the setting): `cpus`.
    pub queue_cpus: Vec<Vec<Vec<u16>>>,
    /// Workers that apply the flow limit to what they queue on backlogs
    /// (`net.core.flow_limit_cpu_bitmap`: the enqueuing CPUs, as the kernel's).
    pub flow_limit_cpus: u64,
    /// One per worker.
    pub backlogs: Vec<Backlog>,
    /// `net.core.netdev_max_backlog`: a backlog takes a packet while it holds at most this
    /// many (so it holds one more at most, as the kernel's).
    pub max_backlog: usize,
    /// One per worker: packets in its backlog.
    pub backlog_len: Vec<BacklogLen>,
    /// RFS: who consumes which flow (empty: RFS off).
    pub sock_flow: super::rfs::SockFlowTable,
    /// `[target][source]`: packets the target has processed from the source's ring.
    pub ring_done: Vec<Vec<std::sync::atomic::AtomicU64>>,
    /// One per port: packets for the port's owner to transmit.
    pub tx_handoff: Vec<ArrayQueue<Pkt>>,
    /// Raised by worker 0 when the run ends: the others finish their backlog and stop.
    pub stop: AtomicBool,
    /// Workers (other than 0) that finished.
    pub finished: AtomicUsize,
    /// Workers (other than 0) whose input for the run is done (see `napi::run_worker`).
    pub rx_finished: AtomicUsize,
    /// Workers (other than 0) that saw the stop flag and no longer receive or steer.
    pub rx_stopped: AtomicUsize,
    /// Each worker's counters as of its last report (for per-second lines while it runs).
    pub snapshots: Vec<Mutex<Counters>>,
}

impl Steering {
    /// `workers` workers, RPS over `cpus`, backlogs of `max_backlog` packets.
    pub fn new(workers: usize, cpus: Vec<u16>, max_backlog: usize, flow_limit_cpus: u64, sock_flow_entries: u32) -> Steering {
        Steering {
            cpus,
            queue_cpus: Vec::new(),
            flow_limit_cpus,
            backlogs: (0..workers).map(|_| Backlog::new()).collect(),
            max_backlog: max_backlog.max(1),
            backlog_len: (0..workers).map(|_| BacklogLen::default()).collect(),
            sock_flow: super::rfs::SockFlowTable::new(sock_flow_entries, workers),
            ring_done: (0..workers).map(|_| (0..workers).map(|_| Default::default()).collect()).collect(),
            tx_handoff: Vec::new(),
            stop: AtomicBool::new(false),
            finished: AtomicUsize::new(0),
            rx_finished: AtomicUsize::new(0),
            rx_stopped: AtomicUsize::new(0),
            snapshots: (0..workers).map(|_| Mutex::new(Counters::default())).collect(),
        }
    }

    pub fn workers(&self) -> usize {
        self.backlogs.len()
    }

    /// The CPU map of receive queue `queue` of `port`: its own (empty when the queue has
    /// RPS off), else the global one.
    #[inline]
    pub fn map_for(&self, port: u16, queue: u16) -> &[u16] {
        match self.queue_cpus.get(port as usize).and_then(|q| q.get(queue as usize)) {
            Some(m) => m,
            None => &self.cpus,
        }
    }

    /// Packets in handoff queues (in flight between workers; backlog rings are counted by
    /// the workers that own their consumer ends).
    pub fn in_flight(&self) -> u64 {
        self.tx_handoff.iter().map(ArrayQueue::len).sum::<usize>() as u64
    }

    /// Every worker's last reported counters, summed.
    pub fn snapshot_sum(&self) -> Counters {
        let mut c = Counters::default();
        for s in &self.snapshots {
            c.merge(&s.lock().unwrap_or_else(|e| e.into_inner()));
        }
        c
    }
}

/// The worker ids of an `rps_cpus` mask.
pub fn cpus_of_mask(mask: u64) -> Vec<u16> {
    (0..64u16).filter(|c| mask >> c & 1 == 1).collect()
}

/// Workers a datapath needs for `rps_cpus`: one per CPU up to the highest (at least one).
pub fn workers_for(mask: u64) -> usize {
    (64 - mask.leading_zeros() as usize).max(1)
}

/// Recent flows of the packets one worker queued on backlogs (the kernel's `sd_flow_limit`,
/// which belongs to the enqueuing CPU and serves every target): a ring of the last 128
/// packets' flow buckets and a count per bucket.
pub struct FlowLimit {
    history: [u32; FLOW_LIMIT_HISTORY],
    pos: usize,
    /// log2 of the table length (a power of two: the sysctl refuses others).
    log_buckets: u32,
    buckets: Vec<u8>,
}

/// Packets of history the flow limit looks at (FLOW_LIMIT_HISTORY).
const FLOW_LIMIT_HISTORY: usize = 128;

/// The kernel's `hash_32`: the top `bits` bits of `val` times the 32-bit golden ratio.
fn hash_32(val: u32, bits: u32) -> u32 {
    val.wrapping_mul(0x61c8_8647).checked_shr(32 - bits).unwrap_or(0)
}

impl FlowLimit {
    /// A table of `table_len` buckets (rounded down to a power of two), zeroed as the
    /// kernel's kzalloc'd one: the history's initial zeros count for no bucket.
    pub fn new(table_len: usize) -> FlowLimit {
        let log_buckets = table_len.max(1).ilog2();
        FlowLimit { history: [0; FLOW_LIMIT_HISTORY], pos: 0, log_buckets, buckets: vec![0; 1 << log_buckets] }
    }

    /// Records one packet of flow `hash`; true when the flow had more than half of the
    /// recent packets (the packet is then dropped).
    pub fn over_limit(&mut self, hash: u32) -> bool {
        let new = hash_32(hash, self.log_buckets) as usize;
        let old = self.history[self.pos] as usize;
        self.history[self.pos] = new as u32;
        self.pos = (self.pos + 1) % FLOW_LIMIT_HISTORY;
        if let Some(b) = self.buckets.get_mut(old) {
            *b = b.saturating_sub(1);
        }
        let Some(b) = self.buckets.get_mut(new) else { return false };
        *b = b.saturating_add(1);
        *b as usize > FLOW_LIMIT_HISTORY / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_is_over_the_limit_with_more_than_half_of_the_last_128_packets() {
        let mut fl = FlowLimit::new(4096);
        let (elephant, mouse) = (7u32, 9u32);
        // Packets 1-64 of one flow are at most half of the history; the 65th is more.
        for i in 1..=64 {
            assert!(!fl.over_limit(elephant), "packet {i}");
        }
        assert!(fl.over_limit(elephant), "packet 65");
        for _ in 66..=128 {
            assert!(fl.over_limit(elephant));
        }
        // 64 packets of another flow push 64 of the elephant's out of the history: it has
        // 64 of the last 128 again, and its next packet replaces one of its own.
        for _ in 0..64 {
            assert!(!fl.over_limit(mouse));
        }
        assert!(!fl.over_limit(elephant), "64 of 128 after the mouse's packets");
        // Flows in one bucket of the table count as one (the table is 4096 buckets, picked
        // by hash_32 of the flow hash).
        let twin = (6u32..).find(|&h| hash_32(h, 12) == hash_32(5, 12)).unwrap();
        let mut fl = FlowLimit::new(4096);
        for i in 0..65u32 {
            let over = fl.over_limit(if i % 2 == 0 { 5 } else { twin });
            assert_eq!(over, i == 64, "packet {i}");
        }
    }

    /// The table starts zeroed (kzalloc) while the history starts as 128 entries of bucket
    /// 0: each leaving entry takes one from its bucket only if that is not zero. So a flow of
    /// bucket 0 is never limited at the start (each of its packets takes out an initial zero
    /// as it comes in), while the flows of other buckets are limited from their 65th packet.
    #[test]
    fn a_flow_of_bucket_zero_is_not_limited_by_the_initial_history() {
        assert_eq!(hash_32(0, 12), 0);
        let mut fl = FlowLimit::new(4096);
        for i in 1..=200 {
            assert!(!fl.over_limit(0), "packet {i}");
        }
        // Another flow still fills the history and is limited past half of it.
        let other = (1u32..).find(|&h| hash_32(h, 12) != 0).unwrap();
        let over: Vec<bool> = (0..128).map(|_| fl.over_limit(other)).collect();
        assert_eq!(over.iter().position(|&o| o), Some(64), "the 65th packet of the other flow");
    }

    /// hash_32 keeps the top bits of the product (include/linux/hash.h), and a table of one
    /// bucket takes every flow.
    #[test]
    fn hash_32_takes_the_top_bits_of_the_golden_ratio_product() {
        assert_eq!(hash_32(1, 12), 0x61c8_8647 >> 20);
        assert_eq!(hash_32(0xffff_ffff, 32), 0x61c8_8647u32.wrapping_neg());
        assert_eq!(hash_32(12345, 0), 0);
        let mut one = FlowLimit::new(1);
        assert!(!one.over_limit(1) && !one.over_limit(2));
    }

    #[test]
    fn a_backlog_wakes_its_worker_once_until_it_goes_idle() {
        let b = Backlog::new();
        assert!(b.schedule(), "the first packet wakes the worker");
        assert!(!b.schedule(), "already scheduled: no second wake-up");
        assert!(!b.idle(|| false), "nothing pending: idle");
        assert!(b.schedule(), "idle again: the next packet wakes it");
        assert!(b.idle(|| true), "packets arrived while going idle: keep working");
        assert!(!b.schedule(), "and it stays scheduled");
    }

    /// A worker asleep in poll() on its ports sees a wake-up: the eventfd turns readable,
    /// and is quiet again once the worker consumed it (so the next poll sleeps).
    #[test]
    fn a_wake_up_makes_the_eventfd_readable_until_consumed() {
        let b = Backlog::new();
        let fd = b.wake_fd().expect("an eventfd");
        let readable = || {
            let mut p = [libc::pollfd { fd, events: libc::POLLIN, revents: 0 }];
            // SAFETY: one live pollfd, no wait.
            unsafe { libc::poll(p.as_mut_ptr(), 1, 0) == 1 }
        };
        assert!(!readable(), "no wake-up yet");
        b.wake();
        assert!(!readable(), "a worker not sleeping in poll() is not sent an eventfd write");
        assert!(!b.begin_poll_sleep(|| false), "nothing pending: the worker may sleep");
        b.wake();
        b.wake();
        assert!(readable(), "woken");
        b.clear_wake();
        assert!(!readable(), "consumed: both wake-ups at once");
        b.end_poll_sleep();
        b.wake();
        assert!(!readable(), "the poll() sleep is over");
        assert!(b.begin_poll_sleep(|| true), "work that came first keeps the worker awake");
    }

    /// A producer schedules the backlog after the worker went idle but wakes it before the
    /// worker declares its poll() sleep: that wake-up was an unpark alone, and while the
    /// backlog stays scheduled no later packet wakes it — so the worker must not sleep.
    #[test]
    fn a_schedule_between_idle_and_the_poll_sleep_keeps_the_worker_awake() {
        let b = Backlog::new();
        assert!(!b.idle(|| false), "idle, nothing pending");
        assert!(b.schedule(), "a producer's packet schedules it");
        b.wake();
        assert!(b.begin_poll_sleep(|| false), "its packet was taken already, but it is scheduled: no sleep");
        b.end_poll_sleep();
        assert!(!b.idle(|| false), "idle again");
        assert!(!b.begin_poll_sleep(|| false), "now it may sleep");
        assert!(b.schedule(), "and the next packet wakes it");
    }

    #[test]
    fn every_pair_of_workers_has_one_ring_of_the_backlog_length() {
        let (tx, rx) = backlog_rings(3, 8);
        for row in &tx {
            for p in row {
                assert_eq!(p.as_ref().map(|p| p.slots()), Some(8));
            }
        }
        assert!(rx.iter().all(|r| r.len() == 3), "one from each worker, itself included");
        let (tx, _) = backlog_rings(2, 0);
        assert_eq!(tx[0][1].as_ref().unwrap().slots(), 1, "a ring holds at least one packet");
        assert_eq!(Steering::new(2, vec![1], 0, 0, 0).max_backlog, 1);
    }

    #[test]
    fn an_rps_mask_names_its_workers_and_needs_one_per_cpu_up_to_the_highest() {
        assert_eq!(cpus_of_mask(0b1010), vec![1, 3]);
        assert_eq!(cpus_of_mask(0), Vec::<u16>::new());
        assert_eq!(cpus_of_mask(1 << 63), vec![63]);
        assert_eq!(workers_for(0), 1);
        assert_eq!(workers_for(1), 1);
        assert_eq!(workers_for(0b1010), 4);
        assert_eq!(workers_for(1 << 63), 64);
        assert_eq!(Steering::new(3, vec![0, 2], 16, 0, 0).workers(), 3);
    }

    /// `wake` unparks the thread that registered for the backlog last: a worker whose input
    /// has ended parks between rounds and must not sleep out its timeout while packets wait.
    /// Each run spawns its worker threads anew (a bench's warm-up, then its measurement), so
    /// the second run's thread must be the one woken: the old registration (kept by a
    /// set-once cell before) woke the first run's dead thread, and every wake-up of the
    /// measured run was lost. Each thread parks once: a wake-up before it parks leaves the
    /// token that ends the park at once, one sent elsewhere lets it sleep out the 30 s.
    #[test]
    fn wake_unparks_the_thread_that_registered_last() {
        use std::sync::Arc;
        use std::time::{Duration, Instant};
        let b = Arc::new(Backlog::new());
        for run in 0..2 {
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let worker = {
                let b = b.clone();
                std::thread::spawn(move || {
                    b.register();
                    ready_tx.send(()).unwrap();
                    let start = Instant::now();
                    std::thread::park_timeout(Duration::from_secs(30));
                    start.elapsed() < Duration::from_secs(30)
                })
            };
            ready_rx.recv().unwrap();
            b.wake();
            assert!(worker.join().unwrap(), "run {run}: the registered thread slept out its park instead of being woken");
        }
    }

    #[test]
    fn packets_in_handoff_queues_are_in_flight_and_snapshots_sum_every_worker() {
        let mut s = Steering::new(2, vec![0, 1], 16, 0, 0);
        s.tx_handoff = (0..2).map(|_| ArrayQueue::new(8)).collect();
        assert_eq!(s.in_flight(), 0);
        for i in 0..3 {
            s.tx_handoff[i % 2].push(Pkt::new(crate::buf::BufId(i as u32), 60)).unwrap();
        }
        assert_eq!(s.in_flight(), 3);
        s.snapshots[0].lock().unwrap().rx = 5;
        s.snapshots[1].lock().unwrap().rx = 7;
        assert_eq!(s.snapshot_sum().rx, 12);
    }
}
