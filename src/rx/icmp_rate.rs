//! ICMP error rate limits, as the kernel has them (net/ipv4/icmp.c): a router that answered
//! every TTL-expired or unroutable packet with an error would amplify a flood.
//!
//! - per destination (`icmpv4_xrlim_allow` → `inet_peer_xrlim_allow`): one error per
//!   `net.ipv4.icmp_ratelimit` ms (`net.ipv6.icmp.ratelimit` for ICMPv6) to each host, with a
//!   burst of 6 (XRLIM_BURST_FACTOR); 0 turns it off;
//! - for the whole host (`icmp_global_allow`): `net.ipv4.icmp_msgs_per_sec` with a burst of
//!   `net.ipv4.icmp_msgs_burst`, shared by ICMP and ICMPv6 (0 per second turns it off here).
//!
//! Only error types are limited: for IPv4 those in `net.ipv4.icmp_ratemask` (default 6168:
//! destination unreachable, source quench, time exceeded, parameter problem); for IPv6 every
//! error except packet too big (the kernel's default `net.ipv6.icmp.ratemask`, 0-1,3-127),
//! which path MTU discovery needs. The per-destination check comes first, so one noisy host
//! cannot use up the global credit (the order of kernels since 6.11).
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
    /// Global credit (messages), and when it was last topped up.
    credit: u64,
    stamp_ns: u64,
    started: bool,
}

impl Default for IcmpRateLimit {
    fn default() -> Self {
        IcmpRateLimit { peers: vec![Peer::default(); PEER_SLOTS].into_boxed_slice(), credit: 0, stamp_ns: 0, started: false }
    }
}

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
        if interval_ms > 0 && !self.peer_allow(dst, interval_ms as u64 * 1_000_000, now_ns) {
            return false;
        }
        self.global_allow(t, now_ns)
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

    fn global_allow(&mut self, t: &Tunables, now_ns: u64) -> bool {
        let (rate, burst) = (t.icmp_msgs_per_sec as u64, t.icmp_msgs_burst as u64);
        if rate == 0 {
            return true;
        }
        if !self.started {
            self.started = true;
            self.credit = burst;
            self.stamp_ns = now_ns;
        }
        // Top up by whole messages only, at most a second's worth (as the kernel does per jiffy).
        let delta = now_ns.saturating_sub(self.stamp_ns).min(1_000_000_000);
        let incr = rate * delta / 1_000_000_000;
        if incr > 0 {
            self.credit = (self.credit + incr).min(burst);
            self.stamp_ns = now_ns;
        }
        if self.credit == 0 {
            return false;
        }
        self.credit -= 1;
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
        // 1000 per second: 10 ms later, ten more.
        let sent = (0..=255u8).filter(|i| l.allow(&t, IcmpKind::V4(3), v4(*i), 10 * MS)).count();
        assert_eq!(sent, 10);
    }

    /// After a long idle time the credit is back to the burst, not to the idle time's worth.
    #[test]
    fn the_host_wide_credit_is_capped_at_the_burst() {
        let t = Tunables::default();
        let mut l = IcmpRateLimit::default();
        assert!(l.allow(&t, IcmpKind::V4(3), v4(0), 0));
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

    #[test]
    fn zero_turns_the_limits_off() {
        let t = Tunables { icmp_ratelimit: 0, icmp_msgs_per_sec: 0, ..Tunables::default() };
        let mut l = IcmpRateLimit::default();
        assert!((0..1000).all(|_| l.allow(&t, IcmpKind::V4(11), v4(1), 0)));
    }
}
