//! IPv6 longest-prefix match: a multibit trie with a 16-bit root stride and 8-bit strides
//! below, leaf-pushed (controlled prefix expansion) so a lookup follows child pointers until it
//! reaches a terminal entry and never backtracks.
//!
//! A route of length `len` lives in the level whose stride ends at or after `len`, expanded
//! over the `2^(end - len)` slots it covers there. Levels: root ends at bit 16, node level
//! `k` (0-based) ends at bit `24 + 8k`, the last (k = 13) at bit 128.

use std::collections::HashMap;
use std::fmt;

use super::arena::{base, decode, Arena, EXT, PAYLOAD, VALID};
use super::{FibError, MAX_NEXT_HOP};

const ROOT_BITS: u8 = 16;
const ROOT: usize = 1 << ROOT_BITS;
/// Node levels below the root: (128 - 16) / 8.
const LEVELS: usize = 14;

/// Netmask of a `len`-bit prefix (`len <= 128`).
#[inline]
pub fn mask(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
}

/// The 8 address bits that index a node whose stride ends at bit `end` (24..=128).
#[inline(always)]
fn index_at(addr: u128, end: u8) -> usize {
    (addr >> (128 - u32::from(end))) as u8 as usize
}

/// IPv6 FIB. Addresses and prefixes are host-order `u128` (`u128::from_be_bytes(octets)`).
///
/// Memory: 320 KiB root (entries plus control-plane depths) and 1.25 KiB per node; a route
/// needs at most one new node per 8 bits beyond /16 that no other route shares.
#[derive(Clone)]
pub struct Fib6 {
    root: Box<[u32]>,
    /// Length of the route leaf-pushed into each root slot (see `arena`).
    root_depth: Box<[u8]>,
    nodes: Arena,
    /// Control plane: routes by prefix length, then masked prefix.
    prefixes: Vec<HashMap<u128, u32>>,
    count: usize,
}

impl Default for Fib6 {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Fib6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fib6").field("routes", &self.count).field("nodes", &self.nodes.in_use()).finish_non_exhaustive()
    }
}

impl Fib6 {
    /// Empty table whose node pool is bounded only by the entry index space (2^30 nodes).
    pub fn new() -> Fib6 {
        Self::with_max_nodes(usize::MAX)
    }

    /// Empty table that refuses ([`FibError::Full`]) a route needing more than `max_nodes`
    /// nodes in total, bounding memory to about `max_nodes * 1.25 KiB`.
    pub fn with_max_nodes(max_nodes: usize) -> Fib6 {
        Fib6 {
            root: vec![0u32; ROOT].into_boxed_slice(),
            root_depth: vec![0u8; ROOT].into_boxed_slice(),
            nodes: Arena::new(max_nodes),
            prefixes: vec![HashMap::new(); 129],
            count: 0,
        }
    }

    /// Adds or replaces the route `prefix/len` (host bits ignored) with next hop `nh`.
    /// Returns the next hop it replaced for exactly that prefix. On error nothing changes.
    pub fn insert(&mut self, prefix: u128, len: u8, nh: u32) -> Result<Option<u32>, FibError> {
        if len > 128 {
            return Err(FibError::BadPrefixLen(len));
        }
        if nh > MAX_NEXT_HOP {
            return Err(FibError::BadNextHop(nh));
        }
        let p = prefix & mask(len);
        let old = self.get(p, len);
        if old == Some(nh) {
            return Ok(old);
        }
        // Check capacity up front so a refused insert leaves no half-built path behind.
        if old.is_none() && self.nodes_needed(p, len) > self.nodes.available() {
            return Err(FibError::Full);
        }
        let val = VALID | nh;
        if len <= ROOT_BITS {
            let lo = (p >> (128 - ROOT_BITS)) as usize;
            let r = lo..lo + (1 << (ROOT_BITS - len));
            if let (Some(es), Some(ds)) = (self.root.get_mut(r.clone()), self.root_depth.get_mut(r)) {
                for (e, d) in es.iter_mut().zip(ds.iter_mut()) {
                    (*e, *d) = self.nodes.paint(*e, *d, val, len);
                }
            }
        } else {
            // Cannot fail after the check above; if it did, the nodes already made would only
            // repeat their parent's result, so lookups stay right.
            let mut node = self.root_child(p).ok_or(FibError::Full)?;
            let mut end = ROOT_BITS + 8;
            while len > end {
                node = self.nodes.child_at(node, index_at(p, end)).ok_or(FibError::Full)?;
                end += 8;
            }
            self.nodes.paint_node(node, index_at(p, end), 1 << (end - len), val, len);
        }
        if let Some(routes) = self.prefixes.get_mut(usize::from(len)) {
            if routes.insert(p, nh).is_none() {
                self.count += 1;
            }
        }
        Ok(old)
    }

    /// Nodes a new route `p/len` would have to create along its path.
    fn nodes_needed(&self, p: u128, len: u8) -> usize {
        if len <= ROOT_BITS {
            return 0;
        }
        let levels = usize::from(len - ROOT_BITS).div_ceil(8);
        let mut e = self.root_entry(p);
        let mut have = 0;
        let mut end = ROOT_BITS + 8;
        while have < levels && e & EXT != 0 {
            have += 1;
            e = self.nodes.entry(base(e & PAYLOAD) + index_at(p, end)).unwrap_or(0);
            end = end.saturating_add(8);
        }
        levels - have
    }

    fn root_entry(&self, addr: u128) -> u32 {
        let i = (addr >> (128 - ROOT_BITS)) as usize;
        self.root.get(i).copied().unwrap_or(0)
    }

    /// The node under the root slot of `p`, created from the slot's current content.
    fn root_child(&mut self, p: u128) -> Option<u32> {
        let i = (p >> (128 - ROOT_BITS)) as usize;
        let d = *self.root_depth.get(i)?;
        let e = self.root.get_mut(i)?;
        let (new, n) = self.nodes.child_of(*e, d)?;
        *e = new;
        Some(n)
    }

    /// Removes the route `prefix/len` (host bits ignored), returning its next hop. Addresses
    /// it covered fall back to the next shorter covering route.
    pub fn remove(&mut self, prefix: u128, len: u8) -> Option<u32> {
        let p = prefix & mask(len.min(128));
        let old = self.prefixes.get_mut(usize::from(len))?.remove(&p)?;
        self.count -= 1;
        let (rv, rd) = self.covering(p, len);
        if len <= ROOT_BITS {
            let lo = (p >> (128 - ROOT_BITS)) as usize;
            let r = lo..lo + (1 << (ROOT_BITS - len));
            if let (Some(es), Some(ds)) = (self.root.get_mut(r.clone()), self.root_depth.get_mut(r)) {
                for (e, d) in es.iter_mut().zip(ds.iter_mut()) {
                    (*e, *d) = self.nodes.unpaint(*e, *d, len, rv, rd);
                }
            }
            return Some(old);
        }
        // Walk down recording (node, slot taken) so emptied nodes can be folded bottom-up.
        let e = self.root_entry(p);
        if e & EXT == 0 {
            return Some(old); // unreachable while the structure is consistent
        }
        let mut path = [(0u32, 0usize); LEVELS];
        let mut depth = 0;
        let mut node = e & PAYLOAD;
        let mut end = ROOT_BITS + 8;
        loop {
            let idx = index_at(p, end);
            if let Some(step) = path.get_mut(depth) {
                *step = (node, idx);
                depth += 1;
            }
            if len <= end {
                self.nodes.unpaint_node(node, idx, 1 << (end - len), len, rv, rd);
                break;
            }
            match self.nodes.existing_child(node, idx) {
                Some(child) => node = child,
                None => break, // unreachable while the structure is consistent
            }
            end += 8;
        }
        for k in (0..depth).rev() {
            let Some(&(n, _)) = path.get(k) else { break };
            let start = ROOT_BITS + 8 * k as u8;
            let Some(folded) = self.nodes.fold(n, start) else {
                break;
            };
            if k == 0 {
                let i = (p >> (128 - ROOT_BITS)) as usize;
                if let (Some(e), Some(d)) = (self.root.get_mut(i), self.root_depth.get_mut(i)) {
                    (*e, *d) = folded;
                }
            } else if let Some(&(parent, idx)) = path.get(k - 1) {
                self.nodes.set_slot(parent, idx, folded);
            }
        }
        Some(old)
    }

    /// Entry and depth of the longest route strictly shorter than `len` covering `p`.
    fn covering(&self, p: u128, len: u8) -> (u32, u8) {
        for l in (0..len).rev() {
            let Some(routes) = self.prefixes.get(usize::from(l)) else {
                continue;
            };
            if routes.is_empty() {
                continue;
            }
            if let Some(&nh) = routes.get(&(p & mask(l))) {
                return (VALID | nh, l);
            }
        }
        (0, 0)
    }

    /// Next hop of the longest prefix matching `addr`: one root access plus one per 8-bit
    /// level that holds a longer route on the address's path.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        let mut e = *self.root.get((addr >> (128 - ROOT_BITS)) as usize)?;
        let mut shift = 128 - u32::from(ROOT_BITS);
        while e & EXT != 0 {
            // The last level never points further, so this cannot run out.
            shift = shift.checked_sub(8)?;
            e = self.nodes.entry(base(e & PAYLOAD) + (addr >> shift) as u8 as usize)?;
        }
        decode(e)
    }

    /// Looks up `addrs[i]` into `out[i]` for every `i` both slices have.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<u32>]) {
        for (o, &a) in out.iter_mut().zip(addrs) {
            *o = self.lookup(a);
        }
    }

    /// Next hop of exactly `prefix/len` (host bits ignored), if that route exists.
    pub fn get(&self, prefix: u128, len: u8) -> Option<u32> {
        let routes = self.prefixes.get(usize::from(len))?;
        routes.get(&(prefix & mask(len))).copied()
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// All routes as `(prefix, len, next_hop)`, shortest first, otherwise unordered.
    pub fn routes(&self) -> impl Iterator<Item = (u128, u8, u32)> + '_ {
        (0u8..).zip(&self.prefixes).flat_map(|(len, routes)| routes.iter().map(move |(&p, &nh)| (p, len, nh)))
    }

    /// Trie nodes currently in use.
    pub fn nodes_in_use(&self) -> usize {
        self.nodes.in_use()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashSet};

    fn ip(s: &str) -> u128 {
        u128::from_be_bytes(s.parse::<std::net::Ipv6Addr>().unwrap().octets())
    }

    /// Reference model: exact routes keyed by (len, masked prefix); masking done independently
    /// of the code under test.
    type Model = BTreeMap<(u8, u128), u32>;

    fn ref_mask(len: u8) -> u128 {
        if len == 0 {
            0
        } else {
            !0u128 << (128 - u32::from(len))
        }
    }

    /// Brute force: scan every route for the longest one containing `addr`.
    fn reference(model: &Model, addr: u128) -> Option<u32> {
        model
            .iter()
            .filter(|(&(l, p), _)| l == 0 || (addr ^ p) >> (128 - u32::from(l)) == 0)
            .max_by_key(|(&(l, _), _)| l)
            .map(|(_, &nh)| nh)
    }

    fn edges(p: u128, len: u8) -> [u128; 5] {
        let last = p | !ref_mask(len);
        [p, p.wrapping_sub(1), last, last.wrapping_add(1), p + (!ref_mask(len) >> 1)]
    }

    /// Trie nodes the model needs: one per distinct (level, path) below a root slot that some
    /// route longer than the level's start reaches.
    fn nodes_needed(model: &Model) -> usize {
        let mut nodes = HashSet::new();
        for &(l, p) in model.keys() {
            let mut start = 16u8;
            while l > start {
                nodes.insert((start, p & ref_mask(start)));
                start += 8;
            }
        }
        nodes.len()
    }

    #[test]
    fn empty_table_matches_nothing() {
        let fib = Fib6::new();
        assert!(fib.is_empty());
        assert_eq!(fib.lookup(0), None);
        assert_eq!(fib.lookup(u128::MAX), None);
        assert_eq!(fib.routes().count(), 0);
    }

    #[test]
    fn default_route_matches_everything_until_more_specific() {
        let mut fib = Fib6::new();
        assert_eq!(fib.insert(ip("2001:db8::1"), 0, 7), Ok(None));
        for a in [0, ip("2001:db8::1"), ip("fe80::1"), u128::MAX] {
            assert_eq!(fib.lookup(a), Some(7));
        }
        fib.insert(ip("2001:db8::"), 32, 8).unwrap();
        assert_eq!(fib.lookup(ip("2001:db8:ffff::1")), Some(8));
        assert_eq!(fib.lookup(ip("2001:db9::")), Some(7));
        assert_eq!(fib.remove(ip("::"), 0), Some(7));
        assert_eq!(fib.lookup(ip("2001:db9::")), None);
        assert_eq!(fib.lookup(ip("2001:db8::5")), Some(8));
        assert_eq!(fib.routes().collect::<Vec<_>>(), vec![(ip("2001:db8::"), 32, 8)]);
    }

    #[test]
    fn host_route_is_exact_and_its_path_is_freed() {
        let mut fib = Fib6::new();
        fib.insert(ip("2001:db8::"), 64, 1).unwrap();
        fib.insert(ip("2001:db8::42"), 128, 2).unwrap();
        // Root covers /16; /64 sits 6 levels down and /128 needs 8 more.
        assert_eq!(fib.nodes_in_use(), 14);
        assert_eq!(fib.lookup(ip("2001:db8::42")), Some(2));
        assert_eq!(fib.lookup(ip("2001:db8::43")), Some(1));
        assert_eq!(fib.lookup(ip("2001:db8::41")), Some(1));
        assert_eq!(fib.lookup(ip("2001:db8:0:1::42")), None);
        assert_eq!(fib.remove(ip("2001:db8::42"), 128), Some(2));
        assert_eq!(fib.nodes_in_use(), 6);
        assert_eq!(fib.lookup(ip("2001:db8::42")), Some(1));
        assert_eq!(fib.remove(ip("2001:db8::"), 64), Some(1));
        assert_eq!(fib.nodes_in_use(), 0);
        assert_eq!(fib.lookup(ip("2001:db8::42")), None);
        // Extremes of the address space.
        fib.insert(u128::MAX, 128, 3).unwrap();
        fib.insert(0, 128, 4).unwrap();
        assert_eq!(fib.lookup(u128::MAX), Some(3));
        assert_eq!(fib.lookup(u128::MAX - 1), None);
        assert_eq!(fib.lookup(0), Some(4));
        assert_eq!(fib.lookup(1), None);
    }

    #[test]
    fn replace_returns_previous_next_hop() {
        let mut fib = Fib6::new();
        let p = ip("2001:db8:1::");
        assert_eq!(fib.insert(p, 48, 1), Ok(None));
        assert_eq!(fib.insert(p, 48, 2), Ok(Some(1)));
        assert_eq!(fib.insert(p, 48, 2), Ok(Some(2)));
        assert_eq!(fib.insert(p | 5, 127, 3), Ok(None));
        assert_eq!(fib.insert(p | 4, 127, 4), Ok(Some(3)));
        assert_eq!(fib.len(), 2);
        assert_eq!(fib.lookup(p | 5), Some(4));
        assert_eq!(fib.lookup(p | 6), Some(2));
        // Replacing the covering route reaches the background entries of deeper nodes.
        assert_eq!(fib.insert(p, 48, 5), Ok(Some(2)));
        assert_eq!(fib.lookup(p | 6), Some(5));
        assert_eq!(fib.lookup(p | 4), Some(4));
        assert_eq!(fib.get(p | 0xffff, 48), Some(5));
    }

    #[test]
    fn remove_falls_back_to_next_covering_prefix() {
        let mut fib = Fib6::new();
        let a = ip("2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff");
        let lens = [0u8, 3, 16, 17, 32, 48, 63, 64, 65, 96, 120, 127, 128];
        for &l in &lens {
            fib.insert(a, l, u32::from(l) + 1000).unwrap();
        }
        // Each level's view: flip the bit just past the prefix to leave the longer ones.
        let view = |fib: &Fib6, l: u8| fib.lookup(if l == 128 { a } else { a ^ (1u128 << (127 - l)) });
        for &l in &lens {
            assert_eq!(view(&fib, l), Some(u32::from(l) + 1000), "/{l}");
        }
        // Remove in a scrambled order; every address falls back to the longest survivor.
        let mut alive: Vec<u8> = lens.to_vec();
        for &l in &[64u8, 128, 16, 0, 127, 65, 48, 3, 120, 32, 17, 96, 63] {
            assert_eq!(fib.remove(a, l), Some(u32::from(l) + 1000));
            alive.retain(|&x| x != l);
            for &probe in &lens {
                let want = alive.iter().filter(|&&x| x <= probe).max().map(|&x| u32::from(x) + 1000);
                assert_eq!(view(&fib, probe), want, "after /{l} removed, probing /{probe}");
            }
        }
        assert!(fib.is_empty());
        assert_eq!(fib.nodes_in_use(), 0);
    }

    #[test]
    fn host_bits_are_masked_off() {
        let mut fib = Fib6::new();
        fib.insert(ip("2001:db8::1"), 32, 1).unwrap();
        fib.insert(ip("2001:db8::1"), 126, 2).unwrap();
        let mut routes: Vec<_> = fib.routes().collect();
        routes.sort();
        assert_eq!(routes, vec![(ip("2001:db8::"), 32, 1), (ip("2001:db8::"), 126, 2)]);
        assert_eq!(fib.lookup(ip("2001:db8::3")), Some(2));
        assert_eq!(fib.lookup(ip("2001:db8::4")), Some(1));
        assert_eq!(fib.remove(ip("2001:db8::2"), 126), Some(2));
        assert_eq!(fib.lookup(ip("2001:db8::3")), Some(1));
    }

    #[test]
    fn bad_lengths_and_next_hops_are_rejected() {
        let mut fib = Fib6::new();
        assert_eq!(fib.insert(0, 129, 1), Err(FibError::BadPrefixLen(129)));
        assert_eq!(fib.insert(0, 255, 1), Err(FibError::BadPrefixLen(255)));
        assert_eq!(fib.insert(0, 64, MAX_NEXT_HOP + 1), Err(FibError::BadNextHop(MAX_NEXT_HOP + 1)));
        assert_eq!(fib.remove(0, 129), None);
        assert_eq!(fib.remove(0, 255), None);
        assert_eq!(fib.get(0, 200), None);
        assert!(fib.is_empty());
        fib.insert(1, 128, MAX_NEXT_HOP).unwrap();
        assert_eq!(fib.lookup(1), Some(MAX_NEXT_HOP));
    }

    #[test]
    fn full_refuses_cleanly_and_nodes_are_recycled() {
        let mut fib = Fib6::with_max_nodes(4);
        // /48: one node per level ending at 24, 32, 40 and 48.
        assert_eq!(fib.insert(ip("2001:db8:1::"), 48, 1), Ok(None));
        assert_eq!(fib.nodes_in_use(), 4);
        // Needs a fifth node: refused, and nothing half-built is left behind.
        assert_eq!(fib.insert(ip("2001:db8:1::"), 56, 2), Err(FibError::Full));
        assert_eq!(fib.insert(ip("2002::"), 24, 2), Err(FibError::Full));
        assert_eq!(fib.nodes_in_use(), 4);
        assert_eq!(fib.len(), 1);
        assert_eq!(fib.lookup(ip("2001:db8:1::")), Some(1));
        // Routes fitting existing nodes or the root still go in.
        assert_eq!(fib.insert(ip("2001:db8:1:ff00::"), 44, 3), Ok(None));
        assert_eq!(fib.insert(ip("3000::"), 4, 4), Ok(None));
        assert_eq!(fib.remove(ip("2001:db8:1::"), 48), Some(1));
        assert_eq!(fib.remove(ip("2001:db8:1::"), 44), Some(3));
        assert_eq!(fib.nodes_in_use(), 0);
        // Recycled nodes carry nothing stale.
        assert_eq!(fib.insert(ip("2002::"), 24, 5), Ok(None));
        assert_eq!(fib.lookup(ip("2002::")), Some(5));
        assert_eq!(fib.lookup(ip("2001:db8:1::")), None);
        assert_eq!(fib.lookup(ip("2002:100::")), None);
    }

    #[test]
    fn lookup_batch_matches_lookup() {
        let mut fib = Fib6::new();
        fib.insert(ip("2001:db8::"), 32, 1).unwrap();
        fib.insert(ip("2001:db8::8"), 125, 2).unwrap();
        let addrs: Vec<u128> = (0..20u128).map(|i| ip("2001:db8::") + i).chain([0, u128::MAX]).collect();
        let mut out = vec![Some(99); addrs.len()];
        fib.lookup_batch(&addrs, &mut out);
        for (a, o) in addrs.iter().zip(&out) {
            assert_eq!(*o, fib.lookup(*a));
        }
        assert!(out.contains(&Some(2)) && out.contains(&Some(1)) && out.contains(&None));
    }

    #[test]
    fn ten_thousand_random_routes() {
        let mut state = 0x6eedu64;
        let mut next = move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let mut fib = Fib6::new();
        let mut model = Model::new();
        const LENS: [u8; 13] = [16, 19, 24, 29, 32, 36, 40, 44, 48, 48, 56, 64, 128];
        while model.len() < 10_000 {
            let r = next();
            let len = LENS[(r % LENS.len() as u64) as usize];
            // Keep routes inside 2000::/4 with a shared top so paths overlap, as in the DFZ.
            let p = ((0x2u128 << 124) | (u128::from(next()) << 64 >> 4) | u128::from(next())) & ref_mask(len);
            let nh = (r >> 40) as u32;
            assert_eq!(fib.insert(p, len, nh), Ok(model.insert((len, p), nh)));
        }
        assert_eq!(fib.nodes_in_use(), nodes_needed(&model));
        // Probing each used length, longest first, is an independent and fast reference.
        let probe = |model: &Model, a: u128| LENS.iter().rev().find_map(|&l| model.get(&(l, a & ref_mask(l))).copied());
        let mut queries: Vec<u128> = (0..5_000).map(|_| (u128::from(next()) << 64) | u128::from(next())).collect();
        queries.extend(model.keys().flat_map(|&(l, p)| edges(p, l)));
        for &a in &queries {
            assert_eq!(fib.lookup(a), probe(&model, a), "addr {a:#x}");
        }
        let keys: Vec<_> = model.keys().copied().collect();
        for (i, &(l, p)) in keys.iter().enumerate() {
            if i % 2 == 1 {
                assert_eq!(fib.remove(p, l), model.remove(&(l, p)));
            }
        }
        assert_eq!(fib.nodes_in_use(), nodes_needed(&model));
        for &a in &queries {
            assert_eq!(fib.lookup(a), probe(&model, a), "addr {a:#x}");
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u128, u8, u32),
        RemoveExisting(usize),
        RemoveAny(u128, u8),
    }

    /// Prefixes clustered around a few bases so routes nest and overlap.
    fn prefix() -> impl Strategy<Value = u128> {
        const BASES: [u128; 4] = [0x2001_0db8 << 96, 0, u128::MAX, 0xfe80 << 112];
        prop_oneof![
            3 => (0..BASES.len(), any::<u128>(), 0u32..=128)
                .prop_map(|(b, noise, keep)| BASES[b] ^ noise.checked_shr(keep).unwrap_or(0)),
            1 => any::<u128>(),
        ]
    }

    fn len() -> impl Strategy<Value = u8> {
        prop_oneof![
            1 => 0u8..=16,
            2 => 17u8..=64,
            2 => 65u8..=128,
            2 => prop::sample::select(vec![0u8, 15, 16, 17, 24, 25, 48, 64, 120, 127, 128]),
        ]
    }

    fn next_hop() -> impl Strategy<Value = u32> {
        prop_oneof![9 => 0u32..64, 1 => Just(MAX_NEXT_HOP)]
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            6 => (prefix(), len(), next_hop()).prop_map(|(p, l, nh)| Op::Insert(p, l, nh)),
            3 => any::<usize>().prop_map(Op::RemoveExisting),
            1 => (prefix(), len()).prop_map(|(p, l)| Op::RemoveAny(p, l)),
        ];
        prop::collection::vec(op, 1..300)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn agrees_with_brute_force(ops in ops(), randoms in prop::collection::vec(any::<u128>(), 64)) {
            let mut fib = Fib6::new();
            let mut model = Model::new();
            for op in ops {
                let touched = match op {
                    Op::Insert(p, l, nh) => {
                        let key = (l, p & ref_mask(l));
                        prop_assert_eq!(fib.insert(p, l, nh), Ok(model.insert(key, nh)));
                        key
                    }
                    Op::RemoveExisting(sel) => {
                        let Some(&key) = model.keys().nth(sel % model.len().max(1)) else { continue };
                        prop_assert_eq!(fib.remove(key.1, key.0), model.remove(&key));
                        key
                    }
                    Op::RemoveAny(p, l) => {
                        let key = (l, p & ref_mask(l));
                        prop_assert_eq!(fib.remove(p, l), model.remove(&key));
                        key
                    }
                };
                for a in edges(touched.1, touched.0) {
                    prop_assert_eq!(fib.lookup(a), reference(&model, a), "addr {:#x}", a);
                }
                prop_assert_eq!(fib.nodes_in_use(), nodes_needed(&model));
            }
            prop_assert_eq!(fib.len(), model.len());
            let mut routes: Vec<_> = fib.routes().map(|(p, l, nh)| ((l, p), nh)).collect();
            routes.sort();
            prop_assert_eq!(routes, model.iter().map(|(&k, &v)| (k, v)).collect::<Vec<_>>());
            let mut queries = randoms.clone();
            queries.extend(model.keys().flat_map(|&(l, p)| edges(p, l)));
            let mut batch = vec![None; queries.len()];
            fib.lookup_batch(&queries, &mut batch);
            for (&a, &b) in queries.iter().zip(&batch) {
                let want = reference(&model, a);
                prop_assert_eq!(fib.lookup(a), want, "addr {:#x}", a);
                prop_assert_eq!(b, want, "batch addr {:#x}", a);
            }
            let keys: Vec<_> = model.keys().rev().copied().collect();
            for (l, p) in keys {
                prop_assert_eq!(fib.remove(p, l), model.remove(&(l, p)));
            }
            prop_assert!(fib.is_empty());
            prop_assert_eq!(fib.nodes_in_use(), 0);
            for &a in &queries {
                prop_assert_eq!(fib.lookup(a), None);
            }
        }
    }
}
