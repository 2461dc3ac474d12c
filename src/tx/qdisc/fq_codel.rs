//! `fq_codel` (RFC 8290, semantics of net/sched/sch_fq_codel.c): packets are hashed into
//! `flows` queues, served by deficit round robin with `quantum` bytes per turn; a flow that
//! just became active goes on the new-flows list, served before the old flows (so a sparse
//! flow is not stuck behind bulk ones). Each flow runs CoDel (RFC 8289): once its packets
//! have waited longer than `target` for a whole `interval`, it drops (or ECN-marks) at the
//! head, more often as the trouble lasts (`interval / sqrt(count)`). Over `limit` packets,
//! or over `memory_limit` bytes of buffer memory, up to `drop_batch` packets are dropped
//! from the head of the fattest flow.
//!
//! A packet's memory is the frames it holds, `FRAME_SIZE` each (the kernel's `truesize`
//! without the sk_buff itself): a GRO/GSO packet of 44 segments holds 45 frames, so 32 MiB
//! hold about 360 of them where the packet limit would allow 10240.
//!
//! Packets live in one slot array allocated when the qdisc is built (limit + 1 slots), each
//! flow a linked list through it: nothing is allocated per packet.

use super::{classify, set_ecn_ce, QCtx, Qdisc, QdiscKind, QdiscSpec, QdiscStats};
use crate::buf::{Pkt, FRAME_SIZE};
use std::collections::VecDeque;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Slot {
    pkt: Pkt,
    enqueued_ns: u64,
    next: u32,
    /// Buffer memory the packet holds, counted at enqueue (codel_skb_cb's mem_usage).
    mem: u32,
}

/// CoDel's per-flow state (`struct codel_vars`).
#[derive(Debug, Clone, Copy, Default)]
struct CodelVars {
    count: u32,
    lastcount: u32,
    dropping: bool,
    /// 1/sqrt(count) in Q0.16, kept up to date by one Newton step per change of `count`
    /// (codel_Newton_step): the drop spacing is the kernel's approximation, not the exact
    /// root (count 2 after entering the dropping state gives half an interval, not 0.707).
    rec_inv_sqrt: u16,
    first_above_time: u64,
    drop_next: u64,
}

/// `rec_inv_sqrt` of count 1 (~1.0), set on entering the dropping state afresh.
const REC_INV_SQRT_ONE: u16 = u16::MAX;

impl CodelVars {
    /// codel_Newton_step: rec_inv_sqrt = rec_inv_sqrt * (3 - count * rec_inv_sqrt^2) / 2,
    /// in the kernel's fixed point (Q0.32 intermediates, wrapping as its u64 arithmetic).
    fn newton_step(&mut self) {
        let inv = u64::from(self.rec_inv_sqrt) << 16;
        let inv2 = (inv * inv) >> 32;
        let val = (3u64 << 32).wrapping_sub(u64::from(self.count).wrapping_mul(inv2)) >> 2;
        self.rec_inv_sqrt = ((val.wrapping_mul(inv) >> 31) >> 16) as u16;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

struct Flow {
    head: u32,
    tail: u32,
    deficit: i32,
    backlog_bytes: u64,
    list: List,
    cv: CodelVars,
}

pub struct FqCodel {
    slots: Vec<Slot>,
    free: u32,
    flows: Vec<Flow>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    limit: u32,
    quantum: i32,
    target_ns: u64,
    interval_ns: u64,
    ecn: bool,
    drop_batch: u32,
    memory_limit: u64,
    /// A backlog this small is not a standing queue (the kernel's psched_mtu).
    mtu: u64,
    stats: QdiscStats,
    /// Packets dropped by CoDel.
    pub codel_drops: u64,
}

impl FqCodel {
    pub fn new(spec: &QdiscSpec, mtu: u32) -> FqCodel {
        let limit = spec.limit.unwrap_or(10240).max(1);
        let nslots = limit as usize + 1;
        let empty = Slot { pkt: Pkt::new(crate::buf::BufId(0), 0), enqueued_ns: 0, next: NIL, mem: 0 };
        let mut slots = vec![empty; nslots];
        for (i, s) in slots.iter_mut().enumerate() {
            s.next = if i + 1 < nslots { i as u32 + 1 } else { NIL };
        }
        let nflows = spec.flows.max(1) as usize;
        FqCodel {
            slots,
            free: 0,
            flows: (0..nflows)
                .map(|_| Flow { head: NIL, tail: NIL, deficit: 0, backlog_bytes: 0, list: List::None, cv: CodelVars::default() })
                .collect(),
            new_flows: VecDeque::with_capacity(nflows),
            old_flows: VecDeque::with_capacity(nflows),
            limit,
            quantum: spec.quantum as i32,
            target_ns: spec.target_ns,
            interval_ns: spec.interval_ns,
            ecn: spec.ecn,
            drop_batch: spec.drop_batch.max(1),
            memory_limit: spec.memory_limit.min(1 << 31) as u64,
            mtu: mtu as u64,
            stats: QdiscStats::default(),
            codel_drops: 0,
        }
    }

    /// The flow queue a hash maps to.
    pub fn flow_of(&self, hash: u32) -> usize {
        crate::rps::hash::reciprocal_scale(hash, self.flows.len() as u32) as usize
    }

    /// Packets queued in flow `f`.
    pub fn flow_len(&self, f: usize) -> usize {
        let mut n = 0;
        let mut i = self.flows[f].head;
        while i != NIL {
            n += 1;
            i = self.slots[i as usize].next;
        }
        n
    }

    fn push_tail(&mut self, f: usize, pkt: Pkt, mem: u32, now_ns: u64) {
        let i = self.free;
        debug_assert!(i != NIL, "limit + 1 slots: the enqueue over the limit still has one");
        self.free = self.slots[i as usize].next;
        self.slots[i as usize] = Slot { pkt, enqueued_ns: now_ns, next: NIL, mem };
        self.stats.memory_used += mem as u64;
        let flow = &mut self.flows[f];
        if flow.tail == NIL {
            flow.head = i;
        } else {
            self.slots[flow.tail as usize].next = i;
        }
        flow.tail = i;
        flow.backlog_bytes += pkt.total_len() as u64;
        self.stats.backlog_pkts += 1;
        self.stats.backlog_bytes += pkt.total_len() as u64;
    }

    /// Takes the head of flow `f`: (packet, time it was enqueued).
    fn pop_head(&mut self, f: usize) -> Option<(Pkt, u64)> {
        let flow = &mut self.flows[f];
        let i = flow.head;
        if i == NIL {
            return None;
        }
        let s = self.slots[i as usize];
        flow.head = s.next;
        if flow.head == NIL {
            flow.tail = NIL;
        }
        flow.backlog_bytes -= s.pkt.total_len() as u64;
        self.slots[i as usize].next = self.free;
        self.free = i;
        self.stats.backlog_pkts -= 1;
        self.stats.backlog_bytes -= s.pkt.total_len() as u64;
        self.stats.memory_used -= s.mem as u64;
        Some((s.pkt, s.enqueued_ns))
    }

    /// Over a limit: drop up to `drop_batch` packets from the head of the fattest flow,
    /// stopping once half its bytes are gone (fq_codel_drop); returns how many.
    fn drop_from_fattest(&mut self, cx: &mut QCtx<'_>) -> u64 {
        // The first of equally fat flows (fq_codel_drop's strict `>` scan).
        let Some(fat) = (0..self.flows.len()).rev().max_by_key(|&f| self.flows[f].backlog_bytes) else { return 0 };
        let threshold = self.flows[fat].backlog_bytes / 2;
        let mut dropped_bytes = 0;
        let mut n = 0;
        while n < self.drop_batch && dropped_bytes < threshold.max(1) {
            let Some((p, _)) = self.pop_head(fat) else { break };
            dropped_bytes += p.total_len() as u64;
            cx.dropped.push(p);
            n += 1;
        }
        // CoDel on that flow drops harder from now on ("increase its signal strength");
        // `tc -s`'s overlimits is not touched, drop_overlimit is.
        let cv = &mut self.flows[fat].cv;
        cv.count = cv.count.wrapping_add(n);
        self.stats.drops += n as u64;
        self.stats.drop_overlimit += n as u64;
        n as u64
    }

    /// CoDel's verdict on a packet just taken from flow `f`: has the queue stood above
    /// target for a whole interval?
    fn should_drop(&mut self, f: usize, enqueued_ns: u64, now_ns: u64) -> bool {
        let sojourn = now_ns.saturating_sub(enqueued_ns);
        let cv = &mut self.flows[f].cv;
        if sojourn < self.target_ns || self.stats.backlog_bytes <= self.mtu {
            cv.first_above_time = 0;
            return false;
        }
        if cv.first_above_time == 0 {
            cv.first_above_time = now_ns + self.interval_ns;
            return false;
        }
        // codel_time_after: strictly later.
        now_ns > cv.first_above_time
    }

    /// The next drop time: `t + interval * rec_inv_sqrt` (codel_control_law, with
    /// reciprocal_scale's Q0.32 product). The product is taken in 128 bits: an interval in
    /// nanoseconds times a Q0.32 factor passes 64 bits past ~4.3 s, and the kernel's
    /// intervals go up to u32::MAX µs (its codel time is u32 units of 1024 ns, where the
    /// product cannot overflow).
    fn control_law(&self, t: u64, rec_inv_sqrt: u16) -> u64 {
        let step = (u128::from(self.interval_ns) * (u128::from(rec_inv_sqrt) << 16)) >> 32;
        t.saturating_add(step as u64)
    }

    /// Drops `p` (CoDel).
    fn codel_drop(&mut self, p: Pkt, cx: &mut QCtx<'_>) {
        self.stats.drops += 1;
        self.codel_drops += 1;
        cx.dropped.push(p);
    }

    /// Marks `p` CE when ECN is on and it is ECN-capable.
    fn try_mark(&mut self, p: Pkt, cx: &mut QCtx<'_>) -> bool {
        if self.ecn && set_ecn_ce(cx.bufs, p) {
            self.stats.ecn_mark += 1;
            return true;
        }
        false
    }

    /// codel_dequeue on flow `f`.
    fn codel_dequeue(&mut self, f: usize, cx: &mut QCtx<'_>) -> Option<Pkt> {
        let now = cx.now_ns;
        let Some((mut p, mut t)) = self.pop_head(f) else {
            // codel_dequeue finding nothing leaves dropping, but first_above_time stands: a
            // flow that empties between DRR rounds may still be a standing queue.
            self.flows[f].cv.dropping = false;
            return None;
        };
        let drop = self.should_drop(f, t, now);
        if self.flows[f].cv.dropping {
            if !drop {
                self.flows[f].cv.dropping = false;
            } else if now >= self.flows[f].cv.drop_next {
                while self.flows[f].cv.dropping && now >= self.flows[f].cv.drop_next {
                    let cv = &mut self.flows[f].cv;
                    cv.count = cv.count.wrapping_add(1);
                    cv.newton_step();
                    let rec = cv.rec_inv_sqrt;
                    if self.try_mark(p, cx) {
                        self.flows[f].cv.drop_next = self.control_law(self.flows[f].cv.drop_next, rec);
                        return Some(p);
                    }
                    self.codel_drop(p, cx);
                    match self.pop_head(f) {
                        Some((np, nt)) => (p, t) = (np, nt),
                        None => {
                            // An empty queue is no standing queue.
                            self.flows[f].cv.first_above_time = 0;
                            self.flows[f].cv.dropping = false;
                            return None;
                        }
                    }
                    if !self.should_drop(f, t, now) {
                        self.flows[f].cv.dropping = false;
                    } else {
                        self.flows[f].cv.drop_next = self.control_law(self.flows[f].cv.drop_next, rec);
                    }
                }
            }
        } else if drop {
            let mut out = Some(p);
            if !self.try_mark(p, cx) {
                self.codel_drop(p, cx);
                out = match self.pop_head(f) {
                    Some((np, nt)) => {
                        // Evaluated for its effect on first_above_time, as CoDel does.
                        self.should_drop(f, nt, now);
                        Some(np)
                    }
                    None => {
                        // codel_should_drop(NULL): an empty queue is no standing queue.
                        self.flows[f].cv.first_above_time = 0;
                        None
                    }
                };
            }
            let interval = self.interval_ns;
            let cv = &mut self.flows[f].cv;
            cv.dropping = true;
            // Resume near the previous drop rate when the last dropping state ended recently
            // (one Newton step from the old estimate: the next ones correct it).
            let delta = cv.count.wrapping_sub(cv.lastcount);
            if delta > 1 && now.saturating_sub(cv.drop_next) < 16 * interval {
                cv.count = delta;
                cv.newton_step();
            } else {
                cv.count = 1;
                cv.rec_inv_sqrt = REC_INV_SQRT_ONE;
            }
            cv.lastcount = cv.count;
            let rec = cv.rec_inv_sqrt;
            self.flows[f].cv.drop_next = self.control_law(now, rec);
            return out;
        }
        Some(p)
    }
}

/// Buffer memory a packet holds: its frames, [`FRAME_SIZE`] each. Only a chained packet
/// walks its links.
fn frames_held(bufs: &crate::buf::BufCache, p: Pkt) -> u32 {
    let frames = if p.is_chained() { 1 + bufs.frags(p).count() } else { 1 };
    (frames * FRAME_SIZE) as u32
}

impl Qdisc for FqCodel {
    fn limit_pkts(&self) -> usize {
        self.limit as usize
    }

    fn kind(&self) -> QdiscKind {
        QdiscKind::FqCodel
    }

    fn enqueue(&mut self, p: Pkt, cx: &mut QCtx<'_>) {
        let f = self.flow_of(classify(cx.bufs, p).hash);
        self.push_tail(f, p, frames_held(cx.bufs, p), cx.now_ns);
        let flow = &mut self.flows[f];
        if flow.list == List::None {
            flow.list = List::New;
            flow.deficit = self.quantum;
            self.new_flows.push_back(f as u32);
            self.stats.new_flow_count += 1;
        }
        // The memory test comes after the packet is counted, as fq_codel_enqueue's.
        let memory_limited = self.stats.memory_used > self.memory_limit;
        if self.stats.backlog_pkts > self.limit as u64 || memory_limited {
            let n = self.drop_from_fattest(cx);
            if memory_limited {
                self.stats.drop_overmemory += n;
            }
        }
    }

    fn dequeue(&mut self, cx: &mut QCtx<'_>) -> Option<Pkt> {
        loop {
            let (from_new, f) = match self.new_flows.front() {
                Some(&f) => (true, f as usize),
                None => (false, *self.old_flows.front()? as usize),
            };
            if self.flows[f].deficit <= 0 {
                // Used its turn: more credit, to the back of the old flows.
                self.flows[f].deficit += self.quantum;
                self.pop_list(from_new);
                self.flows[f].list = List::Old;
                self.old_flows.push_back(f as u32);
                continue;
            }
            match self.codel_dequeue(f, cx) {
                Some(p) => {
                    self.flows[f].deficit -= p.total_len() as i32;
                    return Some(p);
                }
                None => {
                    self.pop_list(from_new);
                    if from_new && !self.old_flows.is_empty() {
                        // An emptied new flow goes through the old list once, so a flow
                        // that empties and refills cannot stay "new" forever.
                        self.flows[f].list = List::Old;
                        self.old_flows.push_back(f as u32);
                    } else {
                        self.flows[f].list = List::None;
                    }
                }
            }
        }
    }

    fn stats(&self) -> &QdiscStats {
        &self.stats
    }

    fn stats_mut(&mut self) -> &mut QdiscStats {
        &mut self.stats
    }
}

impl FqCodel {
    fn pop_list(&mut self, from_new: bool) {
        if from_new {
            self.new_flows.pop_front();
        } else {
            self.old_flows.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{frame, tos_of};
    use super::*;
    use crate::buf::{BufCache, Pool};

    fn qdisc() -> FqCodel {
        FqCodel::new(&QdiscSpec::new(QdiscKind::FqCodel), 1514)
    }

    const MS: u64 = 1_000_000;

    /// codel_dequeue on an empty flow only leaves the dropping state: the time the queue
    /// went above target stands, so a flow that empties between DRR rounds while its packets
    /// keep waiting too long still reaches its first drop after one interval.
    #[test]
    fn an_empty_dequeue_keeps_the_time_the_queue_went_above_target() {
        let pool = Pool::new(8).unwrap();
        let mut bufs = pool.cache();
        let mut dropped = Vec::new();
        let mut cx = QCtx { bufs: &mut bufs, now_ns: 50 * MS, dropped: &mut dropped };
        let mut q = qdisc();
        q.flows[0].cv = CodelVars { dropping: true, first_above_time: 40 * MS, ..CodelVars::default() };
        assert!(q.codel_dequeue(0, &mut cx).is_none());
        assert!(!q.flows[0].cv.dropping);
        assert_eq!(q.flows[0].cv.first_above_time, 40 * MS);
    }

    /// After CoDel drops the head, the next dequeue finding the flow empty resets the time
    /// above target (codel_should_drop(NULL)).
    #[test]
    fn a_drop_that_empties_the_flow_resets_the_time_above_target() {
        let pool = Pool::new(8).unwrap();
        let mut bufs = pool.cache();
        let mut dropped = Vec::new();
        let mut q = qdisc();
        let p = bufs.alloc_copy(&[0u8; 1000]).unwrap();
        q.push_tail(0, p, 2048, 0);
        // Another flow's backlog keeps the queue above one MTU.
        let others: Vec<Pkt> = (0..2).map(|_| bufs.alloc_copy(&[0u8; 1000]).unwrap()).collect();
        for &o in &others {
            q.push_tail(1, o, 2048, 0);
        }
        q.flows[0].cv.first_above_time = 10 * MS;
        let mut cx = QCtx { bufs: &mut bufs, now_ns: 20 * MS, dropped: &mut dropped };
        assert!(q.codel_dequeue(0, &mut cx).is_none(), "the only packet is dropped");
        assert_eq!(cx.dropped.len(), 1);
        assert!(q.flows[0].cv.dropping);
        assert_eq!(q.flows[0].cv.first_above_time, 0);
        free_all(&mut bufs, q, dropped, None);
    }

    /// codel_time_after is strict: at exactly `first_above_time` it is not yet time to drop.
    #[test]
    fn the_first_drop_comes_only_after_the_interval_has_passed() {
        let mut q = qdisc();
        q.stats.backlog_bytes = 10_000;
        q.flows[0].cv.first_above_time = 100 * MS;
        assert!(!q.should_drop(0, 0, 100 * MS));
        assert!(q.should_drop(0, 0, 100 * MS + 1));
    }

    const NOW: u64 = 2000 * MS;

    /// Flow 0 holds 1000-byte frames (tos `tos`) enqueued at `times`, flow 1 two more so the
    /// backlog stays above one MTU; flow 0 may drop since 50 ms (`first_above_time`).
    fn standing(bufs: &mut BufCache, times: &[u64], tos: u8, ecn: bool) -> (FqCodel, Vec<Pkt>) {
        let mut q = FqCodel::new(&QdiscSpec { ecn, ..QdiscSpec::new(QdiscKind::FqCodel) }, 1514);
        let mine: Vec<Pkt> = times.iter().enumerate().map(|(i, _)| frame(bufs, tos, 1, i as u32, 1000)).collect();
        for (&p, &t) in mine.iter().zip(times) {
            q.push_tail(0, p, 2048, t);
        }
        for i in 0..2 {
            let p = frame(bufs, 0, 2, i, 1000);
            q.push_tail(1, p, 2048, 0);
        }
        q.flows[0].cv.first_above_time = 50 * MS;
        (q, mine)
    }

    /// Frees what `q` (every flow) and `dropped` hold and checks no buffer is left.
    fn free_all(bufs: &mut BufCache, mut q: FqCodel, mut dropped: Vec<Pkt>, out: Option<Pkt>) {
        dropped.extend(out);
        for f in 0..q.flows.len() {
            while let Some((p, _)) = q.pop_head(f) {
                dropped.push(p);
            }
        }
        bufs.free_pkts(&dropped);
        assert_eq!(bufs.in_use(), 0);
    }

    /// codel_dequeue in the dropping state: a head that waited less than target ends it,
    /// without a drop and with the count kept for the next dropping state.
    #[test]
    fn a_head_below_target_ends_the_dropping_state() {
        let pool = Pool::new(16).unwrap();
        let mut bufs = pool.cache();
        let (mut q, mine) = standing(&mut bufs, &[NOW - MS], 0, false);
        q.flows[0].cv = CodelVars { dropping: true, count: 4, drop_next: NOW, ..q.flows[0].cv };
        let mut dropped = Vec::new();
        let mut cx = QCtx { bufs: &mut bufs, now_ns: NOW, dropped: &mut dropped };
        let out = q.codel_dequeue(0, &mut cx);
        assert_eq!(out, Some(mine[0]));
        assert!(dropped.is_empty());
        assert!(!q.flows[0].cv.dropping);
        assert_eq!((q.flows[0].cv.count, q.flows[0].cv.first_above_time), (4, 0));
        free_all(&mut bufs, q, dropped, out);
    }

    /// Every drop whose time has come drops one head, raises the count and moves the next
    /// drop time by interval × rec_inv_sqrt from the last one (not from now), so a late
    /// dequeue catches up with several drops at once. The spacings are the kernel's: one
    /// Newton step from 1.0 gives 0x8001 for count 2 (50.0 ms), the next 0x9000 for count 3
    /// (56.25 ms), not 70.7 and 57.7 ms.
    #[test]
    fn due_drops_catch_up_by_the_control_law() {
        let pool = Pool::new(16).unwrap();
        let mut bufs = pool.cache();
        let (mut q, mine) = standing(&mut bufs, &[0, 0, 0, 0], 0, false);
        q.flows[0].cv = CodelVars { dropping: true, count: 1, rec_inv_sqrt: REC_INV_SQRT_ONE, drop_next: NOW - 100 * MS, ..q.flows[0].cv };
        let mut dropped = Vec::new();
        let mut cx = QCtx { bufs: &mut bufs, now_ns: NOW, dropped: &mut dropped };
        let out = q.codel_dequeue(0, &mut cx);
        // Count 2: next at -100 ms + 50.0 ms (still due); count 3: + 56.25 ms, past now.
        assert_eq!(out, Some(mine[2]));
        assert_eq!(dropped, mine[..2]);
        let cv = q.flows[0].cv;
        assert!(cv.dropping);
        assert_eq!((cv.count, cv.rec_inv_sqrt), (3, 0x9000));
        assert_eq!(cv.drop_next, NOW - 100 * MS + 50_001_525 + 56_250_000);
        assert_eq!((q.codel_drops, q.stats.drops), (2, 2));
        free_all(&mut bufs, q, dropped, out);
    }

    /// The control law holds for the longest interval the kernel takes (u32::MAX µs,
    /// ~71.6 minutes): the next drop comes interval × rec_inv_sqrt later, without the 64-bit
    /// product wrapping (which put a 5 s interval's next drop ~0.7 s away).
    #[test]
    fn the_control_law_spaces_drops_by_long_intervals_too() {
        let mut q = qdisc();
        for interval_us in [100_000u64, 5_000_000, u64::from(u32::MAX)] {
            q.interval_ns = interval_us * 1000;
            let one = u128::from(REC_INV_SQRT_ONE) << 16;
            let want = ((u128::from(q.interval_ns) * one) >> 32) as u64;
            assert_eq!(q.control_law(NOW, REC_INV_SQRT_ONE), NOW + want, "interval {interval_us} µs");
            // REC_INV_SQRT_ONE is 1 - 2^-16: the step is within 1/65536 of the interval.
            assert!(want <= q.interval_ns && q.interval_ns - want <= (q.interval_ns >> 16) + 1, "interval {interval_us} µs: step {want}");
            assert_eq!(q.control_law(NOW, 0x8000), NOW + q.interval_ns / 2, "count 4: half the interval");
        }
    }

    /// A drop that uncovers a head below target ends the dropping state there; the drop time
    /// is not moved.
    #[test]
    fn a_drop_reaching_a_fresh_head_ends_the_dropping_state() {
        let pool = Pool::new(16).unwrap();
        let mut bufs = pool.cache();
        let (mut q, mine) = standing(&mut bufs, &[0, NOW - MS], 0, false);
        q.flows[0].cv = CodelVars { dropping: true, count: 1, drop_next: NOW, ..q.flows[0].cv };
        let mut dropped = Vec::new();
        let mut cx = QCtx { bufs: &mut bufs, now_ns: NOW, dropped: &mut dropped };
        let out = q.codel_dequeue(0, &mut cx);
        assert_eq!(out, Some(mine[1]));
        assert_eq!(dropped, mine[..1]);
        let cv = q.flows[0].cv;
        assert!(!cv.dropping);
        assert_eq!((cv.count, cv.drop_next, cv.first_above_time), (2, NOW, 0));
        free_all(&mut bufs, q, dropped, out);
    }

    /// With ECN, a due drop of an ECN-capable head marks it CE and sends it instead; the
    /// count and the next drop time move as for a drop.
    #[test]
    fn a_due_drop_of_an_ecn_capable_head_marks_it() {
        let pool = Pool::new(16).unwrap();
        let mut bufs = pool.cache();
        let (mut q, mine) = standing(&mut bufs, &[0, 0], 0x02, true);
        let due = NOW - 10 * MS;
        q.flows[0].cv = CodelVars { dropping: true, count: 1, rec_inv_sqrt: REC_INV_SQRT_ONE, drop_next: due, ..q.flows[0].cv };
        let mut dropped = Vec::new();
        let mut cx = QCtx { bufs: &mut bufs, now_ns: NOW, dropped: &mut dropped };
        let out = q.codel_dequeue(0, &mut cx);
        assert_eq!(out, Some(mine[0]));
        assert!(dropped.is_empty());
        assert_eq!(tos_of(&bufs, mine[0]) & 3, 3, "CE");
        let cv = q.flows[0].cv;
        assert!(cv.dropping);
        assert_eq!((cv.count, cv.drop_next), (2, due + 50_001_525), "from the due time, not now");
        assert_eq!((q.stats.ecn_mark, q.stats.drops), (1, 0));
        free_all(&mut bufs, q, dropped, out);
    }

    /// Entering the dropping state soon after the last one ended resumes near its rate
    /// (count = drops since it was entered, one Newton step from the old estimate: count 10's
    /// 0x50a7 becomes 0x58f5); after 16 intervals it starts again from count 1 (0xffff).
    #[test]
    fn a_new_dropping_state_resumes_the_last_rate_only_when_recent() {
        for (drop_next, count, step) in [(NOW - MS, 8u32, 34_748_840), (NOW - 16 * 100 * MS, 1, 99_998_474)] {
            let pool = Pool::new(16).unwrap();
            let mut bufs = pool.cache();
            let (mut q, mine) = standing(&mut bufs, &[0, 0], 0, false);
            q.flows[0].cv = CodelVars { dropping: false, count: 10, lastcount: 2, rec_inv_sqrt: 0x50a7, drop_next, ..q.flows[0].cv };
            let mut dropped = Vec::new();
            let mut cx = QCtx { bufs: &mut bufs, now_ns: NOW, dropped: &mut dropped };
            let out = q.codel_dequeue(0, &mut cx);
            assert_eq!(out, Some(mine[1]), "the head dropped, the next one sent");
            assert_eq!(dropped, mine[..1]);
            let cv = q.flows[0].cv;
            assert!(cv.dropping);
            assert_eq!((cv.count, cv.lastcount), (count, count));
            assert_eq!(cv.drop_next, NOW + step);
            free_all(&mut bufs, q, dropped, out);
        }
    }

    /// One Newton step per count keeps rec_inv_sqrt near 1/sqrt(count): from 1.0 through
    /// counts 2..=n it lands within 1% of the root (the kernel's "corrected quadratically").
    #[test]
    fn newton_steps_track_the_inverse_square_root() {
        let mut cv = CodelVars { rec_inv_sqrt: REC_INV_SQRT_ONE, ..CodelVars::default() };
        for count in 2..=1000u32 {
            cv.count = count;
            cv.newton_step();
            let exact = 65536.0 / (count as f64).sqrt();
            if count >= 8 {
                let err = (cv.rec_inv_sqrt as f64 - exact).abs() / exact;
                assert!(err < 0.01, "count {count}: {:#x} vs {exact:.0}", cv.rec_inv_sqrt);
            }
        }
    }

    /// fq_codel_drop: the first of equally fat flows loses packets, its CoDel count grows by
    /// the packets dropped, and `tc -s`'s overlimits stays 0 (drop_overlimit counts them).
    #[test]
    fn an_overlimit_drop_takes_the_first_fattest_flow_and_raises_its_count() {
        let pool = Pool::new(16).unwrap();
        let mut bufs = pool.cache();
        let mut dropped = Vec::new();
        let mut q = qdisc();
        for f in [3usize, 5] {
            for _ in 0..2 {
                let p = bufs.alloc_copy(&[0u8; 100]).unwrap();
                q.push_tail(f, p, 2048, 0);
            }
        }
        q.flows[3].cv.count = 7;
        let mut cx = QCtx { bufs: &mut bufs, now_ns: 0, dropped: &mut dropped };
        q.drop_from_fattest(&mut cx);
        assert_eq!(cx.dropped.len(), 1, "half of 200 bytes is one 100-byte packet");
        assert_eq!((q.flow_len(3), q.flow_len(5)), (1, 2));
        assert_eq!(q.flows[3].cv.count, 8);
        assert_eq!((q.stats().drop_overlimit, q.stats.drops, q.stats.overlimits), (1, 1, 0));
        free_all(&mut bufs, q, dropped, None);
    }
}
