//! ICMP error rate limits, as the kernel has them (net/ipv4/icmp.c): a router that answered
//! every TTL-expired or unroutable packet with an error would amplify a flood.
//!
//! - per destination (`icmpv4_xrlim_allow` → `inet_peer_xrlim_allow`): one error per
//!   `net.ipv4.icmp_ratelimit` ms (`net.ipv6.icmp.ratelimit` for ICMPv6) to each host, with a
//!   burst of 6 (XRLIM_BURST_FACTOR); 0 turns it off;
//! - for the whole host (`icmp_global_allow` / `icmp_global_consume`, shared by ICMP and
//!   ICMPv6): a token bucket of `net.ipv4.icmp_msgs_burst` credits refilled at
//!   `net.ipv4.icmp_msgs_per_sec`. As in the kernel since 6.11, it starts empty; it is
//!   refilled only once empty and at least HZ/50 (20 ms) after the last refill, by the time
//!   since then (at most a second's worth) capped at the burst, and the error that made a
//!   refill goes even when the refill left no credit. So the first errors get
//!   min(rate, burst); `icmp_msgs_per_sec = 0` never refills (no limited error at all, not
//!   "no limit"); `icmp_msgs_burst = 0` lets one error through per refill. Each error
//!   consumes one credit (the kernel takes 0, 1 or 2 at random: one on average).
//!
//! Only error types are limited: for IPv4 those in `net.ipv4.icmp_ratemask` (default 6168:
//! destination unreachable, source quench, time exceeded, parameter problem); for IPv6 every
//! error except packet too big (the kernel's default `net.ipv6.icmp.ratemask`, 0-1,3-127),
//! which path MTU discovery needs. The host-wide check comes first but consumes nothing; the
//! per-destination check follows, and the host-wide credit is consumed only when both let the
//! error go (the order of kernels since 6.11): a noisy host cannot use up the global credit,
//! and an error the host limit refuses does not use up its destination's tokens.
//!
//! Destinations live in a fixed table of slots indexed by a hash of the address (no
//! allocation); a newcomer evicts whoever held its slot and starts with a full burst, as a
//! fresh inet_peer does.

use crate::tunables::Tunables;

/// Burst of the per-destination limit, in units of the interval (XRLIM_BURST_FACTOR).
const PEER_BURST: u64 = 6;
/// Destination slots.
const PEER_SLOTS: usize = 1024;

#[derive(Debug, Clone, Copy, Default)]
struct Peer {
    addr: [u8; 16],
    used: bool,
    /// Token time in ns (one error costs one interval), and when it was last topped up.
    tokens_ns: u64,
    last_ns: u64,
}

#[derive(Debug, Clone)]
pub struct IcmpRateLimit {
    peers: Box<[Peer]>,
    /// Host-wide credit (messages; one below zero after an error that a refill to 0 let go),
    /// and when it was last refilled (`None`: never, the kernel's stamp long past).
    credit: i64,
    stamp_ns: Option<u64>,
}

impl Default for IcmpRateLimit {
    fn default() -> Self {
        IcmpRateLimit { peers: vec![Peer::default(); PEER_SLOTS].into_boxed_slice(), credit: 0, stamp_ns: None }
    }
}

/// The least time between two refills of the host-wide credit (HZ / 50 jiffies).
const GLOBAL_REFILL_MIN_NS: u64 = 20_000_000;

/// The ICMP family and type of an error about to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpKind {
    V4(u8),
    V6(u8),
    /// IPv4 destination unreachable, fragmentation needed: never limited, so path MTU
    /// discovery cannot stall (icmpv4_mask_allow's first exemption).
    V4FragNeeded,
}

impl IcmpKind {
    /// The kind of an ICMPv4 error of `typ` and `code`.
    pub fn v4(typ: u8, code: u8) -> IcmpKind {
        if typ == 3 && code == 4 {
            IcmpKind::V4FragNeeded
        } else {
            IcmpKind::V4(typ)
        }
    }
}

impl IcmpRateLimit {
    /// Whether an error of `kind` to `dst` may go out at `now_ns`; consumes the credit if so.
    pub fn allow(&mut self, t: &Tunables, kind: IcmpKind, dst: [u8; 16], now_ns: u64) -> bool {
        let (limited, interval_ms) = match kind {
            IcmpKind::V4(typ) => (typ < 32 && t.icmp_ratemask & (1 << typ) != 0, t.icmp_ratelimit),
            IcmpKind::V6(typ) => (typ < 128 && typ != 2, t.icmpv6_ratelimit),
            IcmpKind::V4FragNeeded => (false, 0),
        };
        if !limited {
            return true;
        }
        if !self.global_allow(t, now_ns) {
            return false;
        }
        if interval_ms > 0 && !self.peer_allow(dst, interval_ms as u64 * 1_000_000, now_ns) {
            return false;
        }
        // icmp_global_consume: only an error both checks let go uses host-wide credit.
        self.credit -= 1;
        true
    }

    fn peer_allow(&mut self, dst: [u8; 16], interval_ns: u64, now_ns: u64) -> bool {
        let p = &mut self.peers[slot(&dst)];
        if !p.used || p.addr != dst {
            // A new destination: a full burst (inet_getpeer dates rate_last a minute back).
            *p = Peer { addr: dst, used: true, tokens_ns: PEER_BURST * interval_ns, last_ns: now_ns };
        }
        let tokens = (p.tokens_ns + now_ns.saturating_sub(p.last_ns)).min(PEER_BURST * interval_ns);
        p.last_ns = now_ns;
        if tokens >= interval_ns {
            p.tokens_ns = tokens - interval_ns;
            true
        } else {
            p.tokens_ns = tokens;
            false
        }
    }

    /// icmp_global_allow: whether the host-wide limit lets an error go (consuming nothing).
    fn global_allow(&mut self, t: &Tunables, now_ns: u64) -> bool {
        if self.credit > 0 {
            return true;
        }
        // The time since the last refill, at most a second (a fresh stamp is long past).
        let delta = self.stamp_ns.map_or(1_000_000_000, |s| now_ns.saturating_sub(s).min(1_000_000_000));
        if delta < GLOBAL_REFILL_MIN_NS {
            return false;
        }
        let incr = t.icmp_msgs_per_sec as u64 * delta / 1_000_000_000;
        if incr == 0 {
            return false;
        }
        self.stamp_ns = Some(now_ns);
        self.credit = (self.credit + incr as i64).min(t.icmp_msgs_burst as i64);
        true
    }
}

fn slot(a: &[u8; 16]) -> usize {
    // FNV-1a: cheap and spreads the low bytes of addresses that share a prefix.
    let mut h: u32 = 0x811c_9dc5;
    for b in a {
        h = (h ^ *b as u32).wrapping_mul(0x0100_0193);
    }
    h as usize % PEER_SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn v4(last: u8) -> [u8; 16] {
        let mut a = [0u8; 16];
        a[10] = 0xff;
        a[11] = 0xff;
        a[12..].copy_from_slice(&[198, 18, 0, last]);
        a
    }

    #[test]
    fn one_destination_gets_a_burst_of_six_then_one_per_interval() {
        let t = Tunables::default();
        let mut l = IcmpRateLimit::default();
        let sent = (0..20).filter(|_| l.allow(&t, IcmpKind::V4(11), v4(1), 0)).count();
        assert_eq!(sent, 6);
        assert!(!l.allow(&t, IcmpKind::V4(11), v4(1), 999 * MS));
        assert!(l.allow(&t, IcmpKind::V4(3), v4(1), 1000 * MS));
        assert!(!l.allow(&t, IcmpKind::V4(3), v4(1), 1500 * MS));
        // Another destination has its own budget; echo replies (type 0) are never limited.
        assert!(l.allow(&t, IcmpKind::V4(11), v4(2), 1500 * MS));
        assert!((0..100).all(|_| l.allow(&t, IcmpKind::V4(0), v4(1), 1500 * MS)));
        // Fragmentation needed is exempt whatever the mask (PMTU discovery), other
        // destination-unreachable codes are limited.
        assert!((0..100).all(|_| l.allow(&t, IcmpKind::v4(3, 4), v4(4), 0)));
        assert_eq!((0..20).filter(|_| l.allow(&t, IcmpKind::v4(3, 1), v4(5), 0)).count(), 6);
        // ICMPv6 packet too big is exempt; other ICMPv6 errors are limited.
        assert!((0..100).all(|_| l.allow(&t, IcmpKind::V6(2), v4(3), 0)));
        assert_eq!((0..20).filter(|_| l.allow(&t, IcmpKind::V6(3), v4(3), 0)).count(), 6);
    }

    #[test]
    fn the_host_wide_credit_caps_many_destinations() {
        let t = Tunables::default();
        let mut l = IcmpRateLimit::default();
        let sent = (0..=255u8).filter(|i| l.allow(&t, IcmpKind::V4(3), v4(*i), 0)).count();
        assert_eq!(sent, t.icmp_msgs_burst as usize);
        // 1000 per second, refilled at most every 20 ms (HZ/50): 20 ms later, twenty more.
        let sent = (0..=255u8).filter(|i| l.allow(&t, IcmpKind::V4(3), v4(*i), 20 * MS)).count();
        assert_eq!(sent, 20);
    }

    /// After a long idle time an empty bucket is back to the burst, not to the idle time's worth.
    #[test]
    fn the_host_wide_credit_is_capped_at_the_burst() {
        let t = Tunables::default();
        let mut l = IcmpRateLimit::default();
        assert_eq!((0..100).filter(|_| l.allow(&t, IcmpKind::V4(3), v4(0), 0)).count(), 6, "v4(0)'s own burst");
        assert_eq!((1..=255u8).filter(|i| l.allow(&t, IcmpKind::V4(3), v4(*i), 0)).count(), 50 - 6, "the host's");
        let later = 5_000 * MS;
        // New destinations each time (v6-mapped so they do not meet the first 256's peers).
        let dst = |i: u8| {
            let mut a = v4(i);
            a[0] = 0x20;
            a
        };
        let sent = (0..=255u8).filter(|i| l.allow(&t, IcmpKind::V4(3), dst(*i), later)).count();
        assert_eq!(sent, t.icmp_msgs_burst as usize, "idle 5 s must refill to the burst exactly");
    }

    /// `icmp_ratelimit = 0` turns the per-destination limit off (inet_peer_xrlim_allow with a
    /// timeout of 0 always allows). The host-wide limit has no such value (0 per second sends
    /// nothing): a rate and burst beyond what is sent stand for "no host-wide limit".
    #[test]
    fn zero_ratelimit_turns_the_per_destination_limit_off() {
        let t = Tunables { icmp_ratelimit: 0, icmp_msgs_per_sec: 1_000_000_000, icmp_msgs_burst: 1_000_000_000, ..Tunables::default() };
        let mut l = IcmpRateLimit::default();
        assert!((0..1000).all(|_| l.allow(&t, IcmpKind::V4(11), v4(1), 0)));
        let t = Tunables { icmp_ratelimit: 0, ..Tunables::default() };
        let mut l = IcmpRateLimit::default();
        assert_eq!((0..1000).filter(|_| l.allow(&t, IcmpKind::V4(11), v4(1), 0)).count(), 50, "the host-wide burst still holds");
    }

    /// The host-wide limit on limited types, over 256 new destinations at `now`.
    fn host_burst(l: &mut IcmpRateLimit, t: &Tunables, tag: u8, now: u64) -> usize {
        let dst = |i: u8| {
            let mut a = v4(i);
            a[0] = tag;
            a
        };
        (0..=255u8).filter(|i| l.allow(t, IcmpKind::V4(3), dst(*i), now)).count()
    }

    /// icmp_global_allow: the credit starts empty and a rate of 0 never refills it, so no
    /// limited error goes out at all, from the start (not "no host-wide limit"); exempt types
    /// still go.
    #[test]
    fn icmp_msgs_per_sec_zero_sends_no_limited_error() {
        let t = Tunables { icmp_msgs_per_sec: 0, ..Tunables::default() };
        let mut l = IcmpRateLimit::default();
        for (tag, now) in [(1, 0), (2, 20 * MS), (3, 5_000 * MS)] {
            assert_eq!(host_burst(&mut l, &t, tag, now), 0, "at {now} ns");
            assert!(!l.allow(&t, IcmpKind::V6(1), v4(9), now));
        }
        assert!(l.allow(&t, IcmpKind::V4(0), v4(1), 0), "echo replies are not limited");
        assert!(l.allow(&t, IcmpKind::v4(3, 4), v4(1), 0), "nor is fragmentation needed");
        assert!(l.allow(&t, IcmpKind::V6(2), v4(1), 0), "nor packet too big");
    }

    /// `icmp_msgs_burst = 0` is taken (the kernel's minimum is 0): the credit never rises above
    /// 0, but a refill (at most one per HZ/50 = 20 ms) still lets the error that made it go.
    #[test]
    fn icmp_msgs_burst_zero_lets_one_error_through_per_refill() {
        let mut t = Tunables::default();
        t.set("net.ipv4.icmp_msgs_burst", "0").expect("the kernel takes 0");
        let mut l = IcmpRateLimit::default();
        assert_eq!(host_burst(&mut l, &t, 1, 0), 1);
        assert_eq!(host_burst(&mut l, &t, 2, 19 * MS), 0);
        assert_eq!(host_burst(&mut l, &t, 3, 20 * MS), 1);
        assert_eq!(host_burst(&mut l, &t, 4, 5_000 * MS), 1);
    }

    /// The credit starts empty; the first call fills it with a second's worth (the stamp is
    /// long past, and the elapsed time is capped at HZ), capped at the burst: min(rate, burst).
    #[test]
    fn the_first_fill_is_a_seconds_worth_capped_at_the_burst() {
        let t = Tunables { icmp_msgs_per_sec: 10, ..Tunables::default() };
        assert_eq!(host_burst(&mut IcmpRateLimit::default(), &t, 1, 0), 10);
        let t = Tunables { icmp_msgs_per_sec: 1000, icmp_msgs_burst: 50, ..Tunables::default() };
        assert_eq!(host_burst(&mut IcmpRateLimit::default(), &t, 1, 0), 50);
    }

    /// icmp_global_allow refills only an empty bucket, and only once HZ/50 (20 ms) has passed
    /// since the last refill: 10 ms after the burst nothing, at 20 ms twenty.
    #[test]
    fn the_host_credit_refills_after_hz_over_50_only() {
        let t = Tunables::default();
        let mut l = IcmpRateLimit::default();
        assert_eq!(host_burst(&mut l, &t, 1, 0), 50);
        assert_eq!(host_burst(&mut l, &t, 2, 10 * MS), 0);
        assert_eq!(host_burst(&mut l, &t, 3, 20 * MS), 20);
    }

    /// A bucket that still has credit is not topped up (icmp_global_allow returns at once while
    /// the credit is positive): after a long idle time what was left goes first, then one
    /// refill of at most the burst. The kernel on this machine (6.18) lets about 2 x 50 - 1
    /// through in the same experiment.
    #[test]
    fn an_idle_bucket_is_refilled_only_once_empty() {
        let t = Tunables::default();
        let mut l = IcmpRateLimit::default();
        assert!(l.allow(&t, IcmpKind::V4(3), v4(0), 0));
        assert_eq!(host_burst(&mut l, &t, 0x20, 5_000 * MS), 49 + 50);
    }

    /// The host-wide check comes before the per-destination one and the credit is consumed
    /// after both (icmp_global_allow, inet_peer_xrlim_allow, icmp_global_consume, as since
    /// 6.11): an error the host limit refuses does not use up its destination's tokens.
    #[test]
    fn a_host_wide_refusal_does_not_charge_the_destination() {
        let t = Tunables::default();
        let mut l = IcmpRateLimit::default();
        assert_eq!(host_burst(&mut l, &t, 1, 0), 50);
        assert_eq!((0..10).filter(|_| l.allow(&t, IcmpKind::V4(11), v4(7), 0)).count(), 0);
        assert_eq!((0..10).filter(|_| l.allow(&t, IcmpKind::V4(11), v4(7), 1000 * MS)).count(), 6, "a full burst of six");
    }
}
