//! Routing: IPv4/IPv6 FIBs (longest prefix match) over a next-hop table, interfaces'
//! own addresses as local routes, and the neighbour table (next-hop MACs).

use super::fib::{Fib4, Fib6, FibError};
use std::collections::HashMap;

/// Next-hop index meaning "no route".
pub const NO_ROUTE: u32 = u32::MAX;
/// Next-hop index of local delivery (always entry 0).
pub const NH_LOCAL: u32 = 0;
/// The index of `NextHop::Broadcast` (interned second).
pub const NH_BROADCAST: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextHop {
    /// Deliver to this host.
    Local,
    /// Deliver to this host as a subnet's broadcast (the kernel's RTN_BROADCAST): sockets
    /// get it, but it is no address of ours (not for ARP, and not as a source unless a
    /// configured `local` route exists: `is_local_source_v4`), ICMP answers no echo sent to
    /// it and no ICMP error is sent about it.
    Broadcast,
    /// Forward out of `port` to the neighbour `mac` (a gateway whose MAC is known).
    Gateway { port: u16, mac: [u8; 6] },
    /// The destination is on the link of `port`: resolve its MAC per packet.
    Connected { port: u16 },
    /// Forward out of `port` to the gateway `gw`, whose MAC ARP / NDP resolve (a gateway on a
    /// real link, not configured in `neighbours`).
    Via { port: u16, gw: NeighAddr },
    /// Silently discard.
    Blackhole,
    /// Discard and answer with ICMP unreachable.
    Unreachable,
}

/// A neighbour's protocol address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NeighAddr {
    V4([u8; 4]),
    V6([u8; 16]),
}

impl NextHop {
    /// Every field written out, nothing else: interning hashes these bytes rather than the
    /// enum, whose unused bytes (padding, the other variants' room) are uninitialised and
    /// would reach the hash through wide loads.
    pub fn key(&self) -> [u8; 20] {
        let mut k = [0u8; 20];
        match *self {
            NextHop::Local => k[0] = 0,
            NextHop::Gateway { port, mac } => {
                k[0] = 1;
                k[1..3].copy_from_slice(&port.to_le_bytes());
                k[3..9].copy_from_slice(&mac);
            }
            NextHop::Connected { port } => {
                k[0] = 2;
                k[1..3].copy_from_slice(&port.to_le_bytes());
            }
            NextHop::Blackhole => k[0] = 3,
            NextHop::Unreachable => k[0] = 4,
            NextHop::Broadcast => k[0] = 7,
            NextHop::Via { port, gw } => {
                k[1..3].copy_from_slice(&port.to_le_bytes());
                match gw {
                    NeighAddr::V4(a) => {
                        k[0] = 5;
                        k[3..7].copy_from_slice(&a);
                    }
                    NeighAddr::V6(a) => {
                        k[0] = 6;
                        k[3..19].copy_from_slice(&a);
                    }
                }
            }
        }
        k
    }

    /// Routes a route hint may not be reused for (broadcast, as ip_extract_route_hint
    /// refuses RTN_BROADCAST; per-destination).
    pub fn hint_ok(&self) -> bool {
        !matches!(self, NextHop::Connected { .. } | NextHop::Broadcast)
    }
}

/// An interface: the addresses of one port. What its addresses make (local, connected,
/// broadcast and anycast routes, solicited-node memberships) is derived by
/// `RouteTable::add_iface`: addresses added without it are not received on.
#[derive(Debug, Clone, PartialEq)]
pub struct Iface {
    pub name: String,
    pub mac: [u8; 6],
    pub v4: Vec<([u8; 4], u8)>,
    pub v6: Vec<([u8; 16], u8)>,
    pub mtu: u16,
    /// VLAN ids accepted on this port (tagged frames for others are dropped).
    pub vlans: Vec<u16>,
}

impl Iface {
    pub fn new(name: &str, mac: [u8; 6]) -> Iface {
        Iface { name: name.to_string(), mac, v4: Vec::new(), v6: Vec::new(), mtu: 1500, vlans: Vec::new() }
    }

    /// First IPv4 address (source of ICMP errors sent out of this port).
    pub fn primary_v4(&self) -> Option<[u8; 4]> {
        self.v4.first().map(|a| a.0)
    }

    pub fn primary_v6(&self) -> Option<[u8; 16]> {
        self.v6.first().map(|a| a.0)
    }

    /// Our first IPv4 address whose subnet holds `a` (the link `a` is on).
    pub fn v4_on_link(&self, a: [u8; 4]) -> Option<[u8; 4]> {
        let a = u32::from_be_bytes(a);
        self.v4.iter().find(|(p, len)| (u32::from_be_bytes(*p) ^ a) & super::fib::v4::mask(*len) == 0).map(|p| p.0)
    }

    /// Our first IPv6 address whose subnet holds `a`.
    pub fn v6_on_link(&self, a: [u8; 16]) -> Option<[u8; 16]> {
        let a = u128::from_be_bytes(a);
        self.v6.iter().find(|(p, len)| (u128::from_be_bytes(*p) ^ a) & super::fib::v6::mask(*len) == 0).map(|p| p.0)
    }

    /// The subnet-router anycast addresses of this port (RFC 4291 2.6.1: each IPv6
    /// subnet's prefix with the host bits zero), which a forwarding interface joins
    /// (addrconf_join_anycast): one per address with a prefix shorter than 127 bits (a /127
    /// point-to-point link has none, RFC 6164), none for an all-zero prefix or one that is
    /// a unicast address of the port (__ipv6_dev_ac_inc refuses it).
    pub fn subnet_anycast_v6(&self) -> impl Iterator<Item = [u8; 16]> + '_ {
        self.v6.iter().filter(|(_, len)| *len < 127).filter_map(|&(a, len)| {
            let p = (u128::from_be_bytes(a) & super::fib::v6::mask(len)).to_be_bytes();
            (p != [0; 16] && !self.v6.iter().any(|u| u.0 == p)).then_some(p)
        })
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RouteError {
    #[error(transparent)]
    Fib(#[from] FibError),
    #[error("port {0} does not exist")]
    NoPort(u16),
}

/// A multiplicative hash of an address to 0..256 (all its bytes count: local addresses and
/// sources often share their first and last octets).
#[inline(always)]
fn local_v4_bucket(a: u32) -> usize {
    (a.wrapping_mul(0x9e37_79b1) >> 24) as usize
}

pub struct RouteTable {
    pub fib4: Fib4,
    pub fib6: Fib6,
    pub nexthops: Vec<NextHop>,
    /// Interned next hops by their byte encoding (`NextHop::key`).
    nh_index: HashMap<[u8; 20], u32>,
    /// Every IPv4 address of ours (any port): a source equal to one is refused, as
    /// fib_validate_source does. A short list: a scan beats a FIB lookup of the source.
    local_v4: Vec<u32>,
    /// One bit per `local_v4_bucket` of `local_v4`: most sources are ruled out without a scan.
    local_v4_filter: [u64; 4],
    /// (port, address) of each subnet-router anycast address a forwarding port joined: the
    /// set `add_iface` derives, asked by echo, neighbour discovery and multicast membership.
    anycast_v6: Vec<(u16, [u8; 16])>,
    /// (port, low 24 bits) of each solicited-node group a port joined: one per unicast and
    /// subnet-router anycast address (addrconf_join_solicit), derived by `add_iface`.
    solicited_v6: Vec<(u16, [u8; 3])>,
    /// A configured `local` route exists (`ip route add local …`): sources are then checked
    /// by a FIB lookup, as fib_validate_source does once fib_has_custom_local_routes is set
    /// (the kernel never clears it either).
    custom_local_v4: bool,
}

impl Default for RouteTable {
    fn default() -> Self {
        Self::new()
    }
}

impl RouteTable {
    pub fn new() -> RouteTable {
        let mut t = RouteTable {
            fib4: Fib4::new(),
            fib6: Fib6::new(),
            nexthops: Vec::new(),
            nh_index: HashMap::new(),
            local_v4: Vec::new(),
            local_v4_filter: [0; 4],
            anycast_v6: Vec::new(),
            solicited_v6: Vec::new(),
            custom_local_v4: false,
        };
        t.nexthop(NextHop::Local);
        t.nexthop(NextHop::Broadcast);
        t
    }

    /// Interns a next hop, returning its index.
    pub fn nexthop(&mut self, nh: NextHop) -> u32 {
        let key = nh.key();
        if let Some(i) = self.nh_index.get(&key) {
            return *i;
        }
        let i = self.nexthops.len() as u32;
        self.nexthops.push(nh);
        self.nh_index.insert(key, i);
        i
    }

    pub fn add_v4(&mut self, prefix: [u8; 4], len: u8, nh: NextHop) -> Result<(), RouteError> {
        let i = self.nexthop(nh);
        let a = u32::from_be_bytes(prefix);
        self.fib4.insert(a, len, i)?;
        if nh == NextHop::Local && len == 32 && !self.local_v4.contains(&a) {
            self.local_v4.push(a);
            let b = local_v4_bucket(a);
            self.local_v4_filter[b / 64] |= 1 << (b % 64);
        }
        Ok(())
    }

    /// A configured route (`[[routes]]`, a routes file), added as `add_v4`; a `local` one
    /// turns on the full source check of [`RouteTable::is_local_source_v4`], as
    /// inet_rtm_newroute sets fib_has_custom_local_routes for an RTN_LOCAL route.
    pub fn add_configured_v4(&mut self, prefix: [u8; 4], len: u8, nh: NextHop) -> Result<(), RouteError> {
        self.add_v4(prefix, len, nh)?;
        self.custom_local_v4 |= nh == NextHop::Local;
        Ok(())
    }

    pub fn add_v6(&mut self, prefix: [u8; 16], len: u8, nh: NextHop) -> Result<(), RouteError> {
        let i = self.nexthop(nh);
        self.fib6.insert(u128::from_be_bytes(prefix), len, i)?;
        Ok(())
    }

    /// Whether exactly `prefix/len` is routed (host bits ignored).
    pub fn has_v4(&self, prefix: [u8; 4], len: u8) -> bool {
        self.fib4.get(u32::from_be_bytes(prefix), len).is_some()
    }

    /// Whether exactly `prefix/len` is routed (host bits ignored).
    pub fn has_v6(&self, prefix: [u8; 16], len: u8) -> bool {
        self.fib6.get(u128::from_be_bytes(prefix), len).is_some()
    }

    /// Adds an interface's addresses: a local host route per address and a connected route
    /// per subnet; a broadcast route to each IPv4 subnet's broadcast address (fib_add_ifaddr:
    /// for prefixes shorter than /31) and, with `ipv6_forwarding`, to each IPv6 subnet's
    /// subnet-router anycast address (the kernel's anycast routes in its local table).
    pub fn add_iface(&mut self, port: u16, iface: &Iface, ipv6_forwarding: bool) -> Result<(), RouteError> {
        for &(a, l) in &iface.v4 {
            if l < 32 {
                self.add_v4(a, l, NextHop::Connected { port })?;
            }
            self.add_v4(a, 32, NextHop::Local)?;
            if l < 31 {
                let b = u32::from_be_bytes(a) | !super::fib::v4::mask(l);
                self.add_v4(b.to_be_bytes(), 32, NextHop::Broadcast)?;
            }
        }
        for &(a, l) in &iface.v6 {
            if l < 128 {
                self.add_v6(a, l, NextHop::Connected { port })?;
            }
            self.add_v6(a, 128, NextHop::Local)?;
            self.join_solicited_v6(port, a);
        }
        if ipv6_forwarding {
            for a in iface.subnet_anycast_v6() {
                self.add_v6(a, 128, NextHop::Local)?;
                if !self.anycast_v6.contains(&(port, a)) {
                    self.anycast_v6.push((port, a));
                }
                self.join_solicited_v6(port, a);
            }
        }
        Ok(())
    }

    fn join_solicited_v6(&mut self, port: u16, a: [u8; 16]) {
        let low = [a[13], a[14], a[15]];
        if !self.solicited_v6.contains(&(port, low)) {
            self.solicited_v6.push((port, low));
        }
    }

    /// Whether `port` joined the solicited-node group `group` (ff02::1:ffXX:XXXX).
    pub fn joined_solicited_v6(&self, port: u16, group: &[u8; 16]) -> bool {
        const PREFIX: [u8; 13] = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff];
        group[..13] == PREFIX && self.solicited_v6.contains(&(port, [group[13], group[14], group[15]]))
    }

    /// Whether `a` is one of our IPv4 addresses (a /32 local route).
    #[inline]
    pub fn is_local_v4(&self, a: [u8; 4]) -> bool {
        let a = u32::from_be_bytes(a);
        let b = local_v4_bucket(a);
        self.local_v4_filter[b / 64] & (1 << (b % 64)) != 0 && self.local_v4.contains(&a)
    }

    /// Whether fib_validate_source refuses a packet from `a` as from this host
    /// (IP_LOCAL_SOURCE), with rp_filter, accept_local and send_redirects off as sluice
    /// models them (with send_redirects on, a packet forwarded back out of its incoming
    /// port always gets the full check in the kernel): `a` is
    /// one of our addresses; or, once a configured `local` route exists, the FIB routes `a`
    /// as local or broadcast (the kernel's full check: a lookup of the source; a source
    /// without a route, blackholed or unreachable passes).
    #[inline]
    pub fn is_local_source_v4(&self, a: [u8; 4]) -> bool {
        if self.custom_local_v4 {
            return matches!(self.lookup_v4(a), NH_LOCAL | NH_BROADCAST);
        }
        self.is_local_v4(a)
    }

    /// Whether `a` is routed as a subnet's broadcast address (`NextHop::Broadcast`).
    pub fn is_broadcast_v4(&self, a: [u8; 4]) -> bool {
        self.lookup_v4(a) == NH_BROADCAST
    }

    /// The subnet-router anycast addresses `port` joined (none unless IPv6 forwarding was
    /// on when its addresses were added).
    pub fn anycast_v6_of(&self, port: u16) -> impl Iterator<Item = [u8; 16]> + '_ {
        self.anycast_v6.iter().filter(move |(p, _)| *p == port).map(|(_, a)| *a)
    }

    /// Whether `a` is a subnet-router anycast address of any port of ours.
    pub fn is_anycast_v6(&self, a: [u8; 16]) -> bool {
        self.anycast_v6.iter().any(|(_, x)| *x == a)
    }

    #[inline]
    pub fn lookup_v4(&self, daddr: [u8; 4]) -> u32 {
        self.fib4.lookup(u32::from_be_bytes(daddr)).unwrap_or(NO_ROUTE)
    }

    #[inline]
    pub fn lookup_v6(&self, daddr: [u8; 16]) -> u32 {
        self.fib6.lookup(u128::from_be_bytes(daddr)).unwrap_or(NO_ROUTE)
    }

    #[inline]
    pub fn get(&self, nh: u32) -> Option<&NextHop> {
        self.nexthops.get(nh as usize)
    }
}

/// Neighbour tables (IPv4 ARP, IPv6 NDP): per (port, address) the link-layer address.
/// Each worker keeps its own (the configured entries plus what it learned), so lookups on the
/// fast path read only the worker's memory; an entry one worker learns the others learn from
/// the next ARP/NDP packet they see themselves.
#[derive(Debug, Clone, Default)]
pub struct Neighbours {
    pub v4: HashMap<(u16, [u8; 4]), [u8; 6]>,
    pub v6: HashMap<(u16, [u8; 16]), [u8; 6]>,
}

impl Neighbours {
    /// The MAC of `addr` on `port`, if known.
    #[inline]
    pub fn lookup(&self, port: u16, addr: NeighAddr) -> Option<[u8; 6]> {
        match addr {
            NeighAddr::V4(a) => self.v4.get(&(port, a)).copied(),
            NeighAddr::V6(a) => self.v6.get(&(port, a)).copied(),
        }
    }

    /// Resolves the output (port, dst MAC) of a next hop for a destination.
    #[inline]
    pub fn resolve_v4(&self, nh: &NextHop, daddr: [u8; 4]) -> Option<(u16, [u8; 6])> {
        match *nh {
            NextHop::Gateway { port, mac } => Some((port, mac)),
            NextHop::Connected { port } => self.v4.get(&(port, daddr)).map(|m| (port, *m)),
            NextHop::Via { port, gw } => self.lookup(port, gw).map(|m| (port, m)),
            _ => None,
        }
    }

    #[inline]
    pub fn resolve_v6(&self, nh: &NextHop, daddr: [u8; 16]) -> Option<(u16, [u8; 6])> {
        match *nh {
            NextHop::Gateway { port, mac } => Some((port, mac)),
            NextHop::Connected { port } => self.v6.get(&(port, daddr)).map(|m| (port, *m)),
            NextHop::Via { port, gw } => self.lookup(port, gw).map(|m| (port, m)),
            _ => None,
        }
    }
}

/// A learned entry's aging state.
#[derive(Debug, Clone, Copy)]
pub struct Age {
    /// None while a worker resolves it (the kernel's NUD_INCOMPLETE entry, which counts in
    /// the table as a learned one does).
    pub mac: Option<[u8; 6]>,
    /// Last confirmation (or creation): the kernel's `updated`.
    pub confirmed_ns: u64,
    pub probes: u32,
    pub next_probe_ns: u64,
    /// While `mac` is None: how many workers are resolving it (each holds its own packets
    /// for it); the entry goes when the last of them gives up.
    pub resolvers: u16,
}

/// Forced gc frees only entries not confirmed for this long (neigh_forced_gc keeps those
/// updated in the last 5 s), and also runs above gc_thresh2 this long after the last one.
pub const GC_FRESH_NS: u64 = 5_000_000_000;

/// The neighbour table's bounds for one family: `net.ipv4.neigh.default.gc_thresh2/3`, or
/// the IPv6 ones (the kernel's arp_tbl and nd_tbl are separate tables).
#[derive(Debug, Clone, Copy)]
pub struct GcThresh {
    pub thresh2: u32,
    pub thresh3: u32,
}

/// The shared neighbour table's control side: learned entries (their last confirmation, for
/// aging and forced gc) and the configured entries, which never age, never count toward
/// gc_thresh3 and are never freed.
#[derive(Debug, Default, Clone)]
pub struct NeighAges {
    learned: HashMap<(u16, NeighAddr), Age>,
    permanent: std::collections::HashSet<(u16, NeighAddr)>,
    /// Learned entries per family (IPv4, IPv6): the kernel's `gc_entries`.
    entries: [usize; 2],
    /// Per family: when forced gc last ran (`last_flush`).
    last_flush_ns: [u64; 2],
    /// Per family: no learned entry was confirmed before this (a lower bound), so forced gc
    /// finds nothing to free before it is GC_FRESH_NS old: a flood of fresh entries at the
    /// bound is refused without a walk of the table per frame.
    oldest_ns: [u64; 2],
}

fn family(addr: NeighAddr) -> usize {
    match addr {
        NeighAddr::V4(_) => 0,
        NeighAddr::V6(_) => 1,
    }
}

impl NeighAges {
    /// A configured entry: permanent; a learned one for it is dropped.
    pub fn add_permanent(&mut self, port: u16, addr: NeighAddr) {
        self.permanent.insert((port, addr));
        self.remove(&(port, addr));
    }

    pub fn is_permanent(&self, port: u16, addr: NeighAddr) -> bool {
        self.permanent.contains(&(port, addr))
    }

    /// Learned (and being-resolved) entries of one family: at most its gc_thresh3.
    pub fn learned(&self, v6: bool) -> usize {
        self.entries[v6 as usize]
    }

    /// When the entry for `addr` on `port` was last confirmed (or made), if there is one: what
    /// `ip neigh` shows as its age.
    pub fn confirmed_ns(&self, port: u16, addr: NeighAddr) -> Option<u64> {
        self.learned.get(&(port, addr)).map(|a| a.confirmed_ns)
    }

    pub(crate) fn get_mut(&mut self, key: &(u16, NeighAddr)) -> Option<&mut Age> {
        self.learned.get_mut(key)
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&(u16, NeighAddr), &mut Age)> {
        self.learned.iter_mut()
    }

    /// Adds a learned entry (room was made by [`NeighAges::admit`]).
    pub(crate) fn insert(&mut self, key: (u16, NeighAddr), age: Age) {
        let f = family(key.1);
        if self.learned.insert(key, age).is_none() {
            self.entries[f] += 1;
        }
        self.oldest_ns[f] = self.oldest_ns[f].min(age.confirmed_ns);
    }

    pub(crate) fn remove(&mut self, key: &(u16, NeighAddr)) -> Option<Age> {
        let a = self.learned.remove(key)?;
        self.entries[family(key.1)] -= 1;
        Some(a)
    }

    /// Room for one more learned entry of `addr`'s family, as neigh_alloc makes it: at
    /// gc_thresh3 entries, or at gc_thresh2 with the last forced gc 5 s ago, forced gc runs;
    /// at gc_thresh3 with nothing freed, the entry is refused (false: the kernel's "neighbor
    /// table overflow", table_fulls). What gc freed is appended to `freed` (entries every
    /// worker must forget).
    pub(crate) fn admit(&mut self, addr: NeighAddr, now_ns: u64, t: GcThresh, freed: &mut Vec<(u16, NeighAddr)>) -> bool {
        let f = family(addr);
        let n = self.entries[f];
        let over3 = n >= t.thresh3 as usize;
        if over3 || (n >= t.thresh2 as usize && now_ns > self.last_flush_ns[f].saturating_add(GC_FRESH_NS)) {
            let shrunk = self.forced_gc(f, now_ns, t.thresh2, freed);
            if shrunk == 0 && over3 {
                return false;
            }
        }
        true
    }

    /// neigh_forced_gc: frees learned entries of family `f` not updated within the last
    /// GC_FRESH_NS (the kernel keeps those with `updated` in [now - 5 s, now]:
    /// time_in_range), oldest first, until the family with the entry being made is down to
    /// gc_thresh2 (at least one).
    /// Configured entries are not in this table: never freed. An entry being resolved (no
    /// MAC yet) is skipped, as the kernel skips referenced entries (an INCOMPLETE entry's
    /// running timer holds a reference); it goes when its resolution ends. sluice holds no
    /// other reference to an entry between packets (a lookup copies the MAC), so every
    /// resolved entry may go, as the kernel's unreferenced ones. Returns how many it freed.
    fn forced_gc(&mut self, f: usize, now_ns: u64, thresh2: u32, freed: &mut Vec<(u16, NeighAddr)>) -> usize {
        self.last_flush_ns[f] = now_ns;
        let Some(fresh_from) = now_ns.checked_sub(GC_FRESH_NS) else { return 0 };
        if self.oldest_ns[f] >= fresh_from {
            return 0;
        }
        let mut stale: Vec<(u64, (u16, NeighAddr))> = self
            .learned
            .iter()
            .filter(|(k, a)| family(k.1) == f && a.mac.is_some() && a.confirmed_ns < fresh_from)
            .map(|(k, a)| (a.confirmed_ns, *k))
            .collect();
        stale.sort_unstable_by_key(|&(t, _)| t);
        // neigh_alloc counts the new entry before it calls forced gc: down to gc_thresh2
        // with the newcomer.
        stale.truncate((self.entries[f] + 1).saturating_sub(thresh2 as usize).max(1));
        for (_, k) in &stale {
            if self.remove(k).is_some() {
                freed.push(*k);
            }
        }
        self.oldest_ns[f] = self.learned.iter().filter(|(k, _)| family(k.1) == f).map(|(_, a)| a.confirmed_ns).min().unwrap_or(u64::MAX);
        stale.len()
    }
}

/// Neighbour entries learned by any worker, in order, so that every worker learns them: a
/// worker that learns an entry appends it here; each worker takes what is new at the start
/// of a round (one atomic load when nothing is). Learning is rare (ARP/NDP), lookups are
/// per packet: lookups stay in the worker's own table. Entries every worker has applied are
/// dropped, so the log holds what is in flight between workers, not the table's history.
#[derive(Debug, Default)]
pub struct NeighLog {
    /// Entries published since the start (positions are absolute).
    len: std::sync::atomic::AtomicUsize,
    inner: std::sync::Mutex<LogInner>,
}

#[derive(Debug, Default)]
struct LogInner {
    /// Absolute position of `entries[0]`.
    base: usize,
    entries: Vec<NeighEntry>,
    /// Per worker, how far it has applied the log.
    seen: Vec<usize>,
    /// A worker the log was not sized for synced: nothing is dropped any more (it could not
    /// be told what it missed).
    untracked: bool,
}

#[derive(Debug, Clone, Copy)]
pub enum NeighEntry {
    V4(u16, [u8; 4], [u8; 6]),
    V6(u16, [u8; 16], [u8; 6]),
    /// A learned entry aged out (no answer to its probes) or freed by forced gc.
    Forget4(u16, [u8; 4]),
    Forget6(u16, [u8; 16]),
}

impl NeighLog {
    /// The log of a datapath with `workers` workers (ids 0..workers).
    pub fn new(workers: usize) -> NeighLog {
        NeighLog { len: Default::default(), inner: std::sync::Mutex::new(LogInner { seen: vec![0; workers], ..LogInner::default() }) }
    }

    /// Entries published so far (a worker whose count of applied entries is behind it has
    /// some to apply).
    #[inline]
    pub fn published(&self) -> usize {
        self.len.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Entries still held: published, and not yet applied by every worker.
    pub fn retained(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).entries.len()
    }

    pub fn publish(&self, e: NeighEntry) {
        let mut v = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        v.entries.push(e);
        self.len.store(v.base + v.entries.len(), std::sync::atomic::Ordering::Release);
    }

    /// Worker `worker` applies the entries after `seen` to `neigh`; `seen` becomes the log's
    /// length.
    pub fn sync_into(&self, worker: usize, seen: &mut usize, neigh: &mut Neighbours) {
        let mut v = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let from = seen.saturating_sub(v.base);
        for e in v.entries.iter().skip(from) {
            neigh.apply(*e);
        }
        *seen = v.base + v.entries.len();
        match v.seen.get_mut(worker) {
            Some(s) => *s = *seen,
            None => v.untracked = true,
        }
        v.compact();
    }
}

impl LogInner {
    /// Drops the entries every worker has applied, once they are half the log (a move of the
    /// rest costs no more than the entries it drops).
    fn compact(&mut self) {
        if self.untracked {
            return;
        }
        let Some(&min) = self.seen.iter().min() else { return };
        let done = min.saturating_sub(self.base).min(self.entries.len());
        if done > 0 && done * 2 >= self.entries.len() {
            self.entries.drain(..done);
            self.base += done;
        }
    }
}

impl Neighbours {
    /// Sets an entry; true if it is new or changed.
    pub fn apply(&mut self, e: NeighEntry) -> bool {
        match e {
            NeighEntry::V4(port, a, mac) => self.v4.insert((port, a), mac) != Some(mac),
            NeighEntry::V6(port, a, mac) => self.v6.insert((port, a), mac) != Some(mac),
            NeighEntry::Forget4(port, a) => self.v4.remove(&(port, a)).is_some(),
            NeighEntry::Forget6(port, a) => self.v6.remove(&(port, a)).is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fib_add_ifaddr adds a subnet broadcast route for prefixes shorter than /31 only (a
    /// /31 has no broadcast address, RFC 3021); it is routed locally but is no address of ours.
    #[test]
    fn subnets_shorter_than_31_bits_have_a_local_broadcast_route() {
        let mut t = RouteTable::new();
        let mut a = Iface::new("a", [2, 0, 0, 0, 0, 1]);
        a.v4 = vec![([192, 0, 2, 1], 24), ([198, 51, 100, 5], 30), ([203, 0, 113, 0], 31), ([10, 0, 0, 1], 32)];
        t.add_iface(0, &a, true).unwrap();
        for b in [[192, 0, 2, 255], [198, 51, 100, 7]] {
            assert!(t.is_broadcast_v4(b), "{b:?}");
            assert_eq!(t.lookup_v4(b), NH_BROADCAST, "{b:?}");
            assert!(!t.is_local_v4(b), "{b:?}");
        }
        for other in [[203, 0, 113, 1], [10, 0, 0, 1], [192, 0, 2, 0], [198, 51, 100, 4], [255, 255, 255, 255]] {
            assert!(!t.is_broadcast_v4(other), "{other:?}");
        }
        assert_ne!(t.lookup_v4([203, 0, 113, 1]), NH_LOCAL, "a /31's other address is a neighbour");
    }

    /// addrconf_join_anycast: a subnet-router anycast address per prefix shorter than /127
    /// (RFC 6164: a /127's zero address is the peer), not for ::/0 or a prefix that is one
    /// of the port's own unicast addresses.
    #[test]
    fn subnet_router_anycast_addresses_are_made_as_addrconf_makes_them() {
        let v6 = |w: [u16; 8]| {
            let mut a = [0u8; 16];
            for (i, x) in w.iter().enumerate() {
                a[2 * i..2 * i + 2].copy_from_slice(&x.to_be_bytes());
            }
            a
        };
        let mut a = Iface::new("a", [2, 0, 0, 0, 0, 1]);
        a.v6 = vec![
            (v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 1]), 64),
            (v6([0x2001, 0xdb8, 2, 0, 0, 0, 0, 0x81]), 121),
            (v6([0x2001, 0xdb8, 3, 0, 0, 0, 0, 1]), 127),
            (v6([0x2001, 0xdb8, 4, 0, 0, 0, 0, 0]), 64),
            (v6([0, 0, 0, 0, 0, 0, 0, 5]), 64),
        ];
        let any: Vec<_> = a.subnet_anycast_v6().collect();
        assert_eq!(any, [v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0]), v6([0x2001, 0xdb8, 2, 0, 0, 0, 0, 0x80])]);
        let mut t = RouteTable::new();
        t.add_iface(0, &a, true).unwrap();
        assert_eq!(t.lookup_v6(any[1]), NH_LOCAL);
        assert_ne!(t.lookup_v6(v6([0x2001, 0xdb8, 3, 0, 0, 0, 0, 0])), NH_LOCAL, "the /127's peer");
        assert_eq!(t.anycast_v6_of(0).collect::<Vec<_>>(), any);
        assert_eq!(t.anycast_v6_of(1).count(), 0, "another port's");
        assert!(any.iter().all(|x| t.is_anycast_v6(*x)));
        assert!(!t.is_anycast_v6(a.v6[0].0), "a unicast address");
        let mut host = RouteTable::new();
        host.add_iface(0, &a, false).unwrap();
        assert_ne!(host.lookup_v6(any[0]), NH_LOCAL, "a host joins none");
        assert!(!host.is_anycast_v6(any[0]) && host.anycast_v6_of(0).count() == 0);
        // Solicited-node groups (ff02::1:ffXX:XXXX, the address's low 24 bits): one per
        // unicast address, and per anycast address only where they are joined.
        let group = |a: [u8; 16]| {
            let mut g = v6([0xff02, 0, 0, 0, 0, 1, 0xff00, 0]);
            g[13..].copy_from_slice(&a[13..]);
            g
        };
        let any_only = group(v6([0x2001, 0xdb8, 2, 0, 0, 0, 0, 0x80]));
        assert!(a.v6.iter().all(|(u, _)| t.joined_solicited_v6(0, &group(*u)) && host.joined_solicited_v6(0, &group(*u))));
        assert!(t.joined_solicited_v6(0, &any_only) && !host.joined_solicited_v6(0, &any_only));
        assert!(!t.joined_solicited_v6(1, &group(a.v6[0].0)), "another port's");
        let mut not_group = group(a.v6[0].0);
        not_group[11] = 2;
        assert!(!t.joined_solicited_v6(0, &not_group), "the group prefix is checked");
    }

    #[test]
    fn local_v4_addresses_of_every_port_are_known() {
        let mut t = RouteTable::new();
        let mut a = Iface::new("a", [2, 0, 0, 0, 0, 1]);
        a.v4 = vec![([192, 0, 2, 1], 24), ([198, 18, 0, 1], 32)];
        let mut b = Iface::new("b", [2, 0, 0, 0, 0, 2]);
        b.v4 = vec![([198, 51, 100, 1], 24)];
        t.add_iface(0, &a, true).unwrap();
        t.add_iface(1, &b, true).unwrap();
        // Routes that are not local /32s make no address of ours.
        t.add_v4([10, 1, 0, 0], 16, NextHop::Connected { port: 1 }).unwrap();
        t.add_v4([10, 9, 9, 9], 32, NextHop::Gateway { port: 1, mac: [2, 0, 0, 0, 0, 9] }).unwrap();
        t.add_v4([10, 8, 0, 0], 24, NextHop::Local).unwrap();
        for ours in [[192, 0, 2, 1], [198, 18, 0, 1], [198, 51, 100, 1]] {
            assert!(t.is_local_v4(ours), "{ours:?}");
        }
        for other in [
            [192, 0, 2, 2],
            [198, 18, 0, 2],
            [198, 51, 100, 0],
            [0, 0, 0, 0],
            [255, 255, 255, 255],
            [10, 1, 0, 0],
            [10, 9, 9, 9],
            [10, 8, 0, 0],
        ] {
            assert!(!t.is_local_v4(other), "{other:?}");
        }
    }

    /// Without a configured local route, only our own addresses are local sources (the
    /// kernel's quick check); after one, every source the FIB routes as local or broadcast is
    /// (its full check), while sources without a route, blackholed or unreachable pass.
    #[test]
    fn a_configured_local_route_makes_sources_be_checked_by_a_fib_lookup() {
        let mut t = RouteTable::new();
        let mut a = Iface::new("a", [2, 0, 0, 0, 0, 1]);
        a.v4 = vec![([192, 0, 2, 1], 24)];
        t.add_iface(0, &a, true).unwrap();
        t.add_v4([10, 66, 0, 0], 16, NextHop::Blackhole).unwrap();
        t.add_v4([10, 8, 0, 0], 24, NextHop::Local).unwrap();
        let local = |t: &RouteTable| {
            [[192, 0, 2, 1], [192, 0, 2, 255], [10, 8, 0, 5], [192, 0, 2, 2], [10, 66, 0, 1], [100, 64, 0, 1]]
                .map(|s| t.is_local_source_v4(s))
        };
        assert_eq!(local(&t), [true, false, false, false, false, false], "an unconfigured local route changes nothing");
        t.add_configured_v4([10, 9, 0, 0], 24, NextHop::Connected { port: 0 }).unwrap();
        assert_eq!(local(&t), [true, false, false, false, false, false], "nor does a configured route of another kind");
        t.add_configured_v4([10, 7, 0, 0], 24, NextHop::Local).unwrap();
        assert_eq!(local(&t), [true, true, true, false, false, false]);
        assert!(t.is_local_source_v4([10, 7, 0, 1]) && !t.is_local_v4([10, 7, 0, 1]), "a source, not an address of ours");
    }

    const S: u64 = 1_000_000_000;

    fn learned_at(ages: &mut NeighAges, addr: NeighAddr, t: u64) {
        ages.insert((0, addr), Age { mac: Some([2, 0, 0, 0, 0, 1]), confirmed_ns: t, probes: 0, next_probe_ns: 0, resolvers: 0 });
    }

    /// neigh_alloc / neigh_forced_gc per family: refused at gc_thresh3 while every entry is
    /// fresh; once entries are 5 s old, the oldest go down to gc_thresh2; at gc_thresh2 forced
    /// gc also runs every 5 s; the other family's table is its own; configured entries are
    /// not counted and never freed.
    #[test]
    fn forced_gc_frees_the_oldest_stale_entries_of_a_full_family() {
        let t = GcThresh { thresh2: 2, thresh3: 4 };
        let v4 = |i: u8| NeighAddr::V4([10, 0, 0, i]);
        let mut ages = NeighAges::default();
        ages.add_permanent(0, v4(100));
        let mut freed = Vec::new();
        for i in 0..4 {
            assert!(ages.admit(v4(i), 10 * S + i as u64, t, &mut freed));
            learned_at(&mut ages, v4(i), 10 * S + i as u64);
        }
        assert!(!ages.admit(v4(9), 12 * S, t, &mut freed), "full of fresh entries");
        assert!(ages.admit(NeighAddr::V6([1; 16]), 12 * S, t, &mut freed), "IPv6 has its own table");
        assert!(freed.is_empty());
        assert!(ages.admit(v4(9), 15 * S + 2, t, &mut freed), "entries 0 and 1 were updated more than 5 s ago");
        assert_eq!(freed, vec![(0, v4(0)), (0, v4(1))], "the oldest, down to gc_thresh2");
        assert_eq!(ages.learned(false), 2);
        assert!(ages.is_permanent(0, v4(100)));
        // An entry being resolved counts, but is referenced (its resolver's timer, as the
        // kernel's INCOMPLETE entry): never freed, however old.
        ages.insert((0, v4(7)), Age { mac: None, confirmed_ns: 0, probes: 0, next_probe_ns: 0, resolvers: 1 });
        learned_at(&mut ages, v4(8), 16 * S);
        freed.clear();
        assert!(ages.admit(v4(9), 16 * S, t, &mut freed));
        assert_eq!(freed, vec![(0, v4(2)), (0, v4(3))], "the stale resolved entries, down to gc_thresh2; the unresolved one stays");
        assert_eq!(ages.learned(false), 2);
        // At gc_thresh2, forced gc runs once 5 s passed since the last: one stale entry goes
        // (max_clean is at least one), never the unresolved one.
        freed.clear();
        assert!(ages.admit(v4(9), 21 * S, t, &mut freed));
        assert!(freed.is_empty(), "5 s since the last forced gc have not passed");
        assert!(ages.admit(v4(9), 21 * S + 1, t, &mut freed));
        assert_eq!(freed, vec![(0, v4(8))], "entry 8, updated more than 5 s ago; the unresolved one stays");
        assert_eq!(ages.learned(false), 1);
        assert!(ages.get_mut(&(0, v4(7))).is_some());
    }

    /// neigh_forced_gc keeps an entry whose `updated` is within [now - 5 s, now]
    /// (time_in_range): one updated exactly 5 s ago stays, a nanosecond later it may go.
    #[test]
    fn forced_gc_keeps_an_entry_updated_exactly_5_s_ago() {
        let t = GcThresh { thresh2: 0, thresh3: 1 };
        let v4 = |i: u8| NeighAddr::V4([10, 0, 0, i]);
        let mut ages = NeighAges::default();
        let mut freed = Vec::new();
        learned_at(&mut ages, v4(1), 10 * S);
        assert!(!ages.admit(v4(2), 15 * S, t, &mut freed), "updated 5 s ago: still fresh");
        assert!(freed.is_empty());
        assert!(ages.admit(v4(2), 15 * S + 1, t, &mut freed));
        assert_eq!(freed, vec![(0, v4(1))]);
    }

    /// The log drops entries once every worker applied them, and never before.
    #[test]
    fn the_neighbour_log_waits_for_the_slowest_worker() {
        let log = NeighLog::new(2);
        let (mut a, mut b) = (Neighbours::default(), Neighbours::default());
        let (mut seen_a, mut seen_b) = (0, 0);
        for i in 0..10u8 {
            log.publish(NeighEntry::V4(0, [10, 0, 0, i], [2, 0, 0, 0, 0, i]));
        }
        log.sync_into(0, &mut seen_a, &mut a);
        assert_eq!((seen_a, log.retained()), (10, 10), "worker 1 has not seen them");
        log.publish(NeighEntry::Forget4(0, [10, 0, 0, 0]));
        log.sync_into(1, &mut seen_b, &mut b);
        assert_eq!((seen_b, b.v4.len(), log.retained()), (11, 9, 1), "the first ten are dropped, the forget waits for worker 0");
        log.sync_into(0, &mut seen_a, &mut a);
        assert_eq!((a.v4.len(), log.retained(), log.published()), (9, 0, 11));
        // A worker the log was not sized for: nothing is dropped from then on.
        let mut seen_c = 0;
        log.publish(NeighEntry::V4(0, [10, 0, 0, 99], [2; 6]));
        log.sync_into(5, &mut seen_c, &mut Neighbours::default());
        log.sync_into(0, &mut seen_a, &mut a);
        log.sync_into(1, &mut seen_b, &mut b);
        assert_eq!(log.retained(), 1);
    }
}
