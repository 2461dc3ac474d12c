//! Routing: IPv4/IPv6 FIBs (longest prefix match) over a next-hop table, interfaces'
//! own addresses as local routes, and the neighbour table (next-hop MACs).

use super::fib::{Fib4, Fib6, FibError};
use std::collections::HashMap;

/// Next-hop index meaning "no route".
pub const NO_ROUTE: u32 = u32::MAX;
/// Next-hop index of local delivery (always entry 0).
pub const NH_LOCAL: u32 = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextHop {
    /// Deliver to this host.
    Local,
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

    /// Routes a route hint may not be reused for (broadcast-like / per-destination).
    pub fn hint_ok(&self) -> bool {
        !matches!(self, NextHop::Connected { .. })
    }
}

/// An interface: the addresses of one port.
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
        };
        t.nexthop(NextHop::Local);
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
    /// per subnet.
    pub fn add_iface(&mut self, port: u16, iface: &Iface) -> Result<(), RouteError> {
        for &(a, l) in &iface.v4 {
            if l < 32 {
                self.add_v4(a, l, NextHop::Connected { port })?;
            }
            self.add_v4(a, 32, NextHop::Local)?;
        }
        for &(a, l) in &iface.v6 {
            if l < 128 {
                self.add_v6(a, l, NextHop::Connected { port })?;
            }
            self.add_v6(a, 128, NextHop::Local)?;
        }
        Ok(())
    }

    /// Whether `a` is one of our IPv4 addresses (a /32 local route).
    #[inline]
    pub fn is_local_v4(&self, a: [u8; 4]) -> bool {
        let a = u32::from_be_bytes(a);
        let b = local_v4_bucket(a);
        self.local_v4_filter[b / 64] & (1 << (b % 64)) != 0 && self.local_v4.contains(&a)
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
    pub mac: [u8; 6],
    pub confirmed_ns: u64,
    pub probes: u32,
    pub next_probe_ns: u64,
}

/// The shared confirmation table (learned entries' last confirmation), and the configured
/// entries, which never age.
#[derive(Debug, Default)]
pub struct NeighAges {
    pub(crate) learned: HashMap<(u16, NeighAddr), Age>,
    pub(crate) permanent: std::collections::HashSet<(u16, NeighAddr)>,
}

impl NeighAges {
    pub fn add_permanent(&mut self, port: u16, addr: NeighAddr) {
        self.permanent.insert((port, addr));
        self.learned.remove(&(port, addr));
    }
}

/// Neighbour entries learned by any worker, in order, so that every worker learns them: a
/// worker that learns an entry appends it here; each worker takes what is new at the start
/// of a round (one atomic load when nothing is). Learning is rare (ARP/NDP), lookups are
/// per packet: lookups stay in the worker's own table.
#[derive(Debug, Default)]
pub struct NeighLog {
    len: std::sync::atomic::AtomicUsize,
    entries: std::sync::Mutex<Vec<NeighEntry>>,
}

#[derive(Debug, Clone, Copy)]
pub enum NeighEntry {
    V4(u16, [u8; 4], [u8; 6]),
    V6(u16, [u8; 16], [u8; 6]),
    /// A learned entry aged out (no answer to its probes).
    Forget4(u16, [u8; 4]),
    Forget6(u16, [u8; 16]),
}

impl NeighLog {
    /// Entries published so far.
    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn publish(&self, e: NeighEntry) {
        let mut v = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        v.push(e);
        self.len.store(v.len(), std::sync::atomic::Ordering::Release);
    }

    /// Applies the entries after `seen` to `neigh`; `seen` becomes the log's length.
    pub fn sync_into(&self, seen: &mut usize, neigh: &mut Neighbours) {
        let v = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        for e in v.iter().skip(*seen) {
            neigh.apply(*e);
        }
        *seen = v.len();
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

    #[test]
    fn local_v4_addresses_of_every_port_are_known() {
        let mut t = RouteTable::new();
        let mut a = Iface::new("a", [2, 0, 0, 0, 0, 1]);
        a.v4 = vec![([192, 0, 2, 1], 24), ([198, 18, 0, 1], 32)];
        let mut b = Iface::new("b", [2, 0, 0, 0, 0, 2]);
        b.v4 = vec![([198, 51, 100, 1], 24)];
        t.add_iface(0, &a).unwrap();
        t.add_iface(1, &b).unwrap();
        for ours in [[192, 0, 2, 1], [198, 18, 0, 1], [198, 51, 100, 1]] {
            assert!(t.is_local_v4(ours), "{ours:?}");
        }
        for other in [[192, 0, 2, 2], [198, 18, 0, 2], [198, 51, 100, 0], [0, 0, 0, 0], [255, 255, 255, 255]] {
            assert!(!t.is_local_v4(other), "{other:?}");
        }
    }
}
