//! Byte Queue Limits (the kernel's lib/dynamic_queue_limits.c, semantics only): how many bytes a
//! transmit queue may have in flight in the driver's ring. The limit grows when the ring ran
//! dry while bytes were held back (starved) and shrinks by the smallest slack seen over
//! `hold_time` when it stayed busy with bytes to spare. Counters are u32 and wrap; every
//! difference is taken on the wrapping values, as the kernel does.
//!
//! The driver (a port) owns a [`TxqState`]: it calls [`TxqState::sent`] for every packet it
//! puts in its ring (which may stop the queue: STACK_XOFF) and [`TxqState::completed`] when
//! the hardware is done (which may wake it). The qdisc layer reads [`Dql::avail`] to size its
//! bulk dequeues and does not dequeue into a stopped queue.

/// Largest object (packet) BQL accounts for: the kernel's DQL_MAX_OBJECT.
pub const DQL_MAX_OBJECT: u32 = u32::MAX / 16;
/// Largest limit: the kernel's DQL_MAX_LIMIT (half the counter space minus one object, so
/// wrapped differences stay meaningful).
pub const DQL_MAX_LIMIT: u32 = (u32::MAX / 2) - DQL_MAX_OBJECT;
/// Default slack hold time: 1 s (the kernel's HZ jiffies).
pub const DEFAULT_HOLD_TIME_NS: u64 = 1_000_000_000;

/// `a - b` on wrapping counters when positive (as a signed difference), else 0: POSDIFF.
#[inline]
fn posdiff(a: u32, b: u32) -> u32 {
    let d = a.wrapping_sub(b);
    if (d as i32) > 0 {
        d
    } else {
        0
    }
}

/// One queue's dynamic limit. Field names follow `struct dql`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dql {
    // Producer side (the transmit path).
    num_queued: u32,
    adj_limit: u32,
    last_obj_cnt: u32,
    // Consumer side (completions).
    limit: u32,
    num_completed: u32,
    prev_ovlimit: u32,
    prev_num_queued: u32,
    prev_last_obj_cnt: u32,
    lowest_slack: u32,
    slack_start_time: u64,
    // Knobs (sysfs byte_queue_limits/*).
    max_limit: u32,
    min_limit: u32,
    slack_hold_time: u64,
}

impl Default for Dql {
    fn default() -> Self {
        Dql::new(DEFAULT_HOLD_TIME_NS, 0)
    }
}

impl Dql {
    /// A queue with nothing in flight, limit `min_limit` (0), at time `now_ns`.
    pub fn new(hold_time_ns: u64, now_ns: u64) -> Dql {
        let mut d = Dql {
            num_queued: 0,
            adj_limit: 0,
            last_obj_cnt: 0,
            limit: 0,
            num_completed: 0,
            prev_ovlimit: 0,
            prev_num_queued: 0,
            prev_last_obj_cnt: 0,
            lowest_slack: u32::MAX,
            slack_start_time: now_ns,
            max_limit: DQL_MAX_LIMIT,
            min_limit: 0,
            slack_hold_time: hold_time_ns,
        };
        d.reset(now_ns);
        d
    }

    /// dql_reset: back to `min_limit` with nothing in flight.
    pub fn reset(&mut self, now_ns: u64) {
        self.limit = self.min_limit;
        self.num_queued = 0;
        self.num_completed = 0;
        self.last_obj_cnt = 0;
        self.prev_num_queued = 0;
        self.prev_last_obj_cnt = 0;
        self.prev_ovlimit = 0;
        self.lowest_slack = u32::MAX;
        self.slack_start_time = now_ns;
        self.adj_limit = self.limit;
    }

    /// dql_queued: `count` bytes went into the ring.
    #[inline]
    pub fn queued(&mut self, count: u32) {
        let count = count.min(DQL_MAX_OBJECT);
        self.last_obj_cnt = count;
        self.num_queued = self.num_queued.wrapping_add(count);
    }

    /// dql_avail: bytes that may still be queued before the limit (negative: over it).
    #[inline]
    pub fn avail(&self) -> i32 {
        self.adj_limit.wrapping_sub(self.num_queued) as i32
    }

    /// dql_completed: the hardware finished `count` bytes at `now_ns`; adapts the limit.
    pub fn completed(&mut self, count: u32, now_ns: u64) {
        // The kernel BUG()s on completing more than is in flight; a driver bug here is
        // clamped instead of trusted.
        let count = count.min(self.inflight());
        let completed = self.num_completed.wrapping_add(count);
        let mut limit = self.limit;
        let mut ovlimit = posdiff(self.num_queued.wrapping_sub(self.num_completed), limit);
        let inprogress = self.num_queued.wrapping_sub(completed);
        let prev_inprogress = self.prev_num_queued.wrapping_sub(self.num_completed);
        let all_prev_completed = (completed.wrapping_sub(self.prev_num_queued) as i32) >= 0;

        if (ovlimit != 0 && inprogress == 0) || (self.prev_ovlimit != 0 && all_prev_completed) {
            // Starved: the ring emptied while bytes were held back. Grow by what completed
            // beyond the previous round's queue plus what was held back then.
            limit = limit.wrapping_add(posdiff(completed, self.prev_num_queued)).wrapping_add(self.prev_ovlimit);
            self.slack_start_time = now_ns;
            self.lowest_slack = u32::MAX;
        } else if inprogress != 0 && prev_inprogress != 0 && !all_prev_completed {
            // Busy the whole interval: the limit could have been this much smaller.
            let slack = posdiff(limit.wrapping_add(self.prev_ovlimit), completed.wrapping_sub(self.num_completed).wrapping_mul(2));
            let slack_last = if self.prev_ovlimit != 0 { posdiff(self.prev_last_obj_cnt, self.prev_ovlimit) } else { 0 };
            self.lowest_slack = self.lowest_slack.min(slack.max(slack_last));
            if now_ns > self.slack_start_time.saturating_add(self.slack_hold_time) {
                limit = posdiff(limit, self.lowest_slack);
                self.slack_start_time = now_ns;
                self.lowest_slack = u32::MAX;
            }
        }

        let limit = limit.clamp(self.min_limit, self.max_limit.max(self.min_limit));
        if limit != self.limit {
            self.limit = limit;
            ovlimit = 0;
        }
        self.adj_limit = limit.wrapping_add(completed);
        self.prev_ovlimit = ovlimit;
        self.prev_last_obj_cnt = self.last_obj_cnt;
        self.num_completed = completed;
        self.prev_num_queued = self.num_queued;
    }

    /// sysfs `limit`: the current limit in bytes.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// sysfs `inflight` (read-only): bytes queued and not completed.
    pub fn inflight(&self) -> u32 {
        self.num_queued.wrapping_sub(self.num_completed)
    }

    pub fn limit_min(&self) -> u32 {
        self.min_limit
    }

    pub fn limit_max(&self) -> u32 {
        self.max_limit
    }

    /// sysfs `hold_time` is in milliseconds.
    pub fn hold_time_ms(&self) -> u64 {
        self.slack_hold_time / 1_000_000
    }

    /// Writes sysfs `limit` (clamped into [limit_min, limit_max]).
    pub fn set_limit(&mut self, bytes: u32) {
        self.limit = bytes.clamp(self.min_limit, self.max_limit.max(self.min_limit));
        self.adj_limit = self.limit.wrapping_add(self.num_completed);
    }

    /// Writes sysfs `limit_min` (at most DQL_MAX_LIMIT); the limit follows at the next completion.
    pub fn set_limit_min(&mut self, bytes: u32) {
        self.min_limit = bytes.min(DQL_MAX_LIMIT);
    }

    /// Writes sysfs `limit_max` (at most DQL_MAX_LIMIT).
    pub fn set_limit_max(&mut self, bytes: u32) {
        self.max_limit = bytes.min(DQL_MAX_LIMIT);
    }

    pub fn set_hold_time_ms(&mut self, ms: u64) {
        self.slack_hold_time = ms.saturating_mul(1_000_000);
    }

    /// Test hook: every counter starts at `base` (to drive sequences across the u32 wrap).
    #[cfg(test)]
    fn with_counters_at(mut self, base: u32) -> Dql {
        self.num_queued = base;
        self.num_completed = base;
        self.prev_num_queued = base;
        self.adj_limit = self.limit.wrapping_add(base);
        self
    }
}

/// A transmit queue's flow-control state as the driver keeps it (`struct netdev_queue`):
/// BQL, the two stop reasons, and how often it stopped and woke.
#[derive(Debug, Clone, Default)]
pub struct TxqState {
    pub dql: Dql,
    /// __QUEUE_STATE_STACK_XOFF: BQL says enough bytes are in flight.
    pub xoff_stack: bool,
    /// __QUEUE_STATE_DRV_XOFF: the driver's ring has no room.
    pub xoff_drv: bool,
    pub stops: u64,
    pub wakes: u64,
}

impl TxqState {
    /// netif_xmit_stopped: either reason stops the queue.
    #[inline]
    pub fn stopped(&self) -> bool {
        self.xoff_stack || self.xoff_drv
    }

    /// netdev_tx_sent_queue: `bytes` went into the ring. Returns true when BQL stopped the
    /// queue (then the driver must ring its doorbell even if more packets follow).
    #[inline]
    pub fn sent(&mut self, bytes: u32) -> bool {
        self.dql.queued(bytes);
        if self.dql.avail() >= 0 || self.xoff_stack {
            return false;
        }
        self.xoff_stack = true;
        self.stops += 1;
        true
    }

    /// The driver's ring filled: netif_tx_stop_queue.
    pub fn stop_drv(&mut self) {
        if !self.stopped() {
            self.stops += 1;
        }
        self.xoff_drv = true;
    }

    /// netdev_tx_completed_queue: `bytes` finished; wakes the queue when BQL allows again.
    pub fn completed(&mut self, bytes: u32, now_ns: u64) {
        if bytes == 0 {
            return;
        }
        self.dql.completed(bytes, now_ns);
        if self.xoff_stack && self.dql.avail() >= 0 {
            self.xoff_stack = false;
            if !self.xoff_drv {
                self.wakes += 1;
            }
        }
    }

    /// The driver's ring has room again: netif_tx_wake_queue.
    pub fn wake_drv(&mut self) {
        if self.xoff_drv {
            self.xoff_drv = false;
            if !self.xoff_stack {
                self.wakes += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: u64 = 1000;

    /// Queues `n` objects of `size` bytes.
    fn queue(d: &mut Dql, n: u32, size: u32) {
        for _ in 0..n {
            d.queued(size);
        }
    }

    #[test]
    fn posdiff_is_signed_on_wrapping_counters() {
        assert_eq!(posdiff(10, 3), 7);
        assert_eq!(posdiff(3, 10), 0);
        assert_eq!(posdiff(5, u32::MAX - 4), 10, "5 is 10 past MAX-4 across the wrap");
        assert_eq!(posdiff(u32::MAX - 4, 5), 0);
    }

    /// Starts at limit 0: the first packet stops the queue; its completion finds the ring
    /// empty with bytes held back (ovlimit, no inprogress) and grows the limit to 100.
    fn starved_growth_from(base: u32) {
        let mut d = Dql::new(HOLD, 0).with_counters_at(base);
        assert_eq!(d.avail(), 0);
        d.queued(100);
        assert_eq!(d.avail(), -100, "adj_limit 0 - queued 100");
        d.completed(100, 10);
        // ovlimit = posdiff(100, 0) = 100, inprogress = 0 -> grow by posdiff(completed,
        // prev_num_queued) = 100 + prev_ovlimit 0.
        assert_eq!(d.limit(), 100);
        // adj_limit = 100 + completed; nothing in flight.
        assert_eq!(d.avail(), 100);
        assert_eq!(d.inflight(), 0);
    }

    #[test]
    fn grows_when_starved_with_nothing_in_progress() {
        starved_growth_from(0);
    }

    #[test]
    fn counters_wrap_around() {
        // The same script with every counter 50 below the wrap: num_queued wraps on the
        // first queue, and every difference comes out the same.
        starved_growth_from(u32::MAX - 50);
        let mut a = Dql::new(HOLD, 0);
        let mut b = Dql::new(HOLD, 0).with_counters_at(u32::MAX - 150);
        for (i, (n, done)) in [(3u32, 100u32), (2, 200), (5, 300), (1, 400), (4, 100)].into_iter().enumerate() {
            queue(&mut a, n, 100);
            queue(&mut b, n, 100);
            a.completed(done, i as u64 * 10);
            b.completed(done, i as u64 * 10);
            assert_eq!((a.limit(), a.avail(), a.inflight()), (b.limit(), b.avail(), b.inflight()), "step {i}");
        }
    }

    #[test]
    fn grows_when_the_previous_round_was_over_limit_and_all_of_it_completed() {
        let mut d = Dql::new(HOLD, 0);
        queue(&mut d, 1, 100);
        d.completed(100, 1); // limit 100 (starved), adj_limit 200, prev_num_queued 100
        assert_eq!(d.limit(), 100);
        queue(&mut d, 3, 100); // num_queued 400
        assert_eq!(d.avail(), -200);
        d.completed(100, 2);
        // completed 200: ovlimit = posdiff(400-100, 100) = 200; inprogress 200;
        // prev_inprogress = 100-100 = 0; all_prev_completed. No branch: limit stays 100,
        // prev_ovlimit = 200, prev_num_queued = 400.
        assert_eq!(d.limit(), 100);
        assert_eq!(d.avail(), 300 - 400);
        d.completed(100, 3);
        // completed 300: ovlimit = posdiff(200, 100) = 100; inprogress 100; prev_inprogress
        // 200; not all prev completed -> busy: slack = posdiff(100+200, 2*100) = 100,
        // slack_last = posdiff(100, 200) = 0, lowest 100; hold time not over: no change.
        assert_eq!(d.limit(), 100);
        assert_eq!(d.avail(), 400 - 400);
        d.completed(100, 4);
        // completed 400: ovlimit 0, inprogress 0, prev_ovlimit 100 and all of the previous
        // round completed -> grow by posdiff(400, 400) + 100 = 200.
        assert_eq!(d.limit(), 200);
        assert_eq!(d.avail(), 600 - 400);
    }

    /// Limit 1000, ten 100-byte packets in flight, completed 100 at a time.
    fn busy_ring(min_limit: u32) -> Dql {
        let mut d = Dql::new(HOLD, 0);
        d.set_limit_min(min_limit);
        d.set_limit(1000);
        queue(&mut d, 10, 100);
        assert_eq!(d.avail(), 0);
        d.completed(100, 10);
        // prev_inprogress was 0: neither branch. prev_num_queued 1000, num_completed 100.
        assert_eq!(d.limit(), 1000);
        d.completed(100, 20);
        // completed 200: ovlimit 0, inprogress 800, prev_inprogress 900, not all prev
        // completed -> busy: slack = posdiff(1000, 2*100) = 800, lowest 800; t=20 is within
        // the hold time (start 0 + 1000): no change.
        assert_eq!(d.limit(), 1000);
        d
    }

    #[test]
    fn shrinks_by_the_lowest_slack_after_the_hold_time() {
        let mut d = busy_ring(0);
        d.completed(100, 2000);
        // completed 300: busy again, slack 800, lowest 800; 2000 > 0 + 1000 -> limit =
        // posdiff(1000, 800) = 200. adj_limit = 200 + 300; queued 1000.
        assert_eq!(d.limit(), 200);
        assert_eq!(d.avail(), 500 - 1000);
        assert_eq!(d.inflight(), 700);
        // The hold window restarted at 2000: a busy completion at 2500 does not shrink again.
        d.completed(100, 2500);
        // completed 400: ovlimit = posdiff(700, 200) = 500 but inprogress 600 -> busy:
        // slack = posdiff(200 + 0, 200) = 0; the limit stays.
        assert_eq!(d.limit(), 200);
    }

    /// dql_completed shrinks only after an interval busy from start to end: one that began
    /// with nothing in flight (prev_inprogress 0) computes no slack, even when it completes
    /// long after the hold time with bytes still in progress.
    #[test]
    fn an_interval_that_began_idle_is_not_busy() {
        let mut d = Dql::new(HOLD, 0);
        d.set_limit(1000);
        queue(&mut d, 10, 100);
        d.completed(100, 2000);
        // inprogress 900, but prev_inprogress = prev_num_queued 0 - num_completed 0 = 0:
        // neither branch (a busy reading would shrink to posdiff(1000, 2*100) = 800 off).
        assert_eq!(d.limit(), 1000);
        assert_eq!(d.inflight(), 900);
    }

    #[test]
    fn the_limit_is_clamped_to_limit_min_and_limit_max() {
        let mut d = busy_ring(500);
        d.completed(100, 2000);
        // It would shrink to 200: limit_min holds it at 500.
        assert_eq!(d.limit(), 500);

        let mut d = Dql::new(HOLD, 0);
        d.set_limit_max(150);
        queue(&mut d, 3, 100);
        d.completed(300, 5);
        // Starved: would grow to 300, limit_max caps it.
        assert_eq!(d.limit(), 150);
        assert_eq!(d.limit_max(), 150);
        assert_eq!(d.avail(), 150);
    }

    #[test]
    fn knobs_read_back_in_sysfs_units() {
        let mut d = Dql::default();
        assert_eq!(d.hold_time_ms(), 1000);
        assert_eq!(d.limit_max(), DQL_MAX_LIMIT);
        d.set_hold_time_ms(20);
        assert_eq!(d.hold_time_ms(), 20);
        d.set_limit_max(u32::MAX);
        assert_eq!(d.limit_max(), DQL_MAX_LIMIT);
        // Completing more than is in flight is clamped, not trusted.
        d.queued(60);
        d.completed(1000, 1);
        assert_eq!(d.inflight(), 0);
    }

    #[test]
    fn the_queue_stops_when_over_the_limit_and_wakes_on_completion() {
        let mut q = TxqState::default();
        assert!(q.sent(60), "limit 0: the first packet stops the queue (doorbell)");
        assert!(q.stopped());
        assert!(!q.sent(60), "already stopped: not a new stop");
        assert_eq!(q.stops, 1);
        q.completed(60, 1);
        assert!(q.stopped(), "no growth yet (60 still in progress): avail {}", q.dql.avail());
        q.completed(60, 2);
        assert!(!q.stopped());
        assert_eq!(q.wakes, 1);
        q.stop_drv();
        assert!(q.stopped());
        q.wake_drv();
        assert!(!q.stopped());
        assert_eq!((q.stops, q.wakes), (2, 2));
    }

    #[test]
    fn the_largest_limit_is_half_the_counter_space_minus_one_object() {
        // include/linux/dynamic_queue_limits.h: DQL_MAX_OBJECT (UINT_MAX / 16),
        // DQL_MAX_LIMIT ((UINT_MAX / 2) - DQL_MAX_OBJECT).
        assert_eq!(DQL_MAX_OBJECT, 0x0fff_ffff);
        assert_eq!(DQL_MAX_LIMIT, 0x7000_0000);
        let mut d = Dql::new(HOLD, 0);
        d.set_limit_max(u32::MAX);
        assert_eq!(d.limit_max(), 0x7000_0000);
        d.set_limit_min(u32::MAX);
        assert_eq!(d.limit_min(), 0x7000_0000);
        d.set_limit(u32::MAX);
        assert_eq!(d.limit(), 0x7000_0000);
        d.queued(u32::MAX);
        assert_eq!(d.inflight(), 0x0fff_ffff, "one object counts at most DQL_MAX_OBJECT");
    }

    #[test]
    fn reset_returns_to_limit_min_with_nothing_in_flight() {
        let mut d = Dql::new(HOLD, 0);
        queue(&mut d, 1, 100);
        d.completed(100, 1); // starved: limit 100
        queue(&mut d, 3, 100);
        assert_eq!((d.limit(), d.inflight()), (100, 300));
        d.set_limit_min(300);
        d.reset(10);
        // dql_reset: limit = min_limit (the kernel's 2025 fix; it was 0), every counter 0.
        assert_eq!(d.limit(), 300);
        assert_eq!(d.limit_min(), 300);
        assert_eq!(d.inflight(), 0);
        // Starved from scratch: 400 queued, all of it completed: ovlimit 100, nothing in
        // progress -> grow by posdiff(400, prev_num_queued 0) + prev_ovlimit 0 = 400.
        queue(&mut d, 1, 400);
        d.completed(400, 20);
        assert_eq!(d.limit(), 700);
    }

    #[test]
    fn the_slack_is_at_least_the_last_objects_part_under_the_limit() {
        let mut d = Dql::new(HOLD, 0);
        d.set_limit(1000);
        queue(&mut d, 9, 100);
        queue(&mut d, 1, 600); // 1500 queued: the last object went 500 over the limit
        d.completed(100, 10);
        // ovlimit = posdiff(1500, 1000) = 500; prev_inprogress 0: neither branch.
        // prev_ovlimit 500, prev_last_obj_cnt 600.
        assert_eq!(d.limit(), 1000);
        d.completed(750, 2000);
        // completed 850, inprogress 650, prev_inprogress 1400, not all completed -> busy:
        // slack = posdiff(1000 + 500, 2 * 750) = 0, but slack_last_objs = posdiff(600, 500)
        // = 100 (the part of the last object under the limit): lowest 100, the hold time is
        // over -> limit 900.
        assert_eq!(d.limit(), 900);
        assert_eq!(d.avail(), 900 + 850 - 1500);
    }

    #[test]
    fn the_limit_shrinks_only_strictly_after_the_hold_time() {
        let mut d = busy_ring(0);
        // time_after(jiffies, slack_start_time + slack_hold_time): at exactly 0 + 1000 the
        // hold time is not over.
        d.completed(100, 1000);
        assert_eq!(d.limit(), 1000);
        d.completed(100, 1001);
        assert_eq!(d.limit(), 200);
    }
}
