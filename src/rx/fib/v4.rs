//! IPv4 longest-prefix match, DIR-24-8.
//!
//! `tbl24` has one entry per /24. A route up to /24 is expanded into every /24 it covers, so
//! such matches cost one memory access. A /24 that holds longer routes points to a 256-entry
//! tbl8 group indexed by the last address byte (a second access). Groups come from a pool,
//! are created when the first longer route lands in a /24 and recycled when the last one goes.

use std::collections::HashMap;
use std::fmt;

use super::arena::{base, decode, Arena, EXT, PAYLOAD, VALID};
use super::{FibError, MAX_NEXT_HOP};

const TBL24: usize = 1 << 24;

/// Netmask of a `len`-bit prefix (`len <= 32`).
#[inline]
pub fn mask(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
}

/// IPv4 FIB. Addresses and prefixes are host-order `u32` (`u32::from_be_bytes(octets)`).
///
/// Memory: 64 MiB of `tbl24` plus a 16 MiB control-plane depth array, both zero-mapped lazily
/// by the allocator, so only the parts covered by routes become resident; 1.25 KiB per tbl8
/// group in use.
#[derive(Clone)]
pub struct Fib4 {
    tbl24: Box<[u32]>,
    /// Length of the route leaf-pushed into each `tbl24` slot (see `arena`).
    depth24: Box<[u8]>,
    tbl8: Arena,
    /// Control plane: routes by prefix length, then masked prefix.
    prefixes: [HashMap<u32, u32>; 33],
    count: usize,
}

impl Default for Fib4 {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Fib4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fib4").field("routes", &self.count).field("tbl8_groups", &self.tbl8.in_use()).finish_non_exhaustive()
    }
}

impl Fib4 {
    /// Empty table whose tbl8 pool may grow to the 2^24 groups it could ever need.
    pub fn new() -> Fib4 {
        Self::with_max_tbl8_groups(TBL24)
    }

    /// Empty table that refuses ([`FibError::Full`]) routes longer than /24 once
    /// `max_groups` /24s hold such routes, bounding memory to `max_groups * 1.25 KiB`.
    pub fn with_max_tbl8_groups(max_groups: usize) -> Fib4 {
        Fib4 {
            // `vec![0; n]` is calloc: untouched pages stay unmapped zero pages.
            tbl24: vec![0u32; TBL24].into_boxed_slice(),
            depth24: vec![0u8; TBL24].into_boxed_slice(),
            tbl8: Arena::new(max_groups.min(TBL24)),
            prefixes: std::array::from_fn(|_| HashMap::new()),
            count: 0,
        }
    }

    /// Adds or replaces the route `prefix/len` (host bits ignored) with next hop `nh`.
    /// Returns the next hop it replaced for exactly that prefix. On error nothing changes.
    pub fn insert(&mut self, prefix: u32, len: u8, nh: u32) -> Result<Option<u32>, FibError> {
        if len > 32 {
            return Err(FibError::BadPrefixLen(len));
        }
        if nh > MAX_NEXT_HOP {
            return Err(FibError::BadNextHop(nh));
        }
        let p = prefix & mask(len);
        let old = self.prefixes[usize::from(len)].get(&p).copied();
        if old == Some(nh) {
            return Ok(old);
        }
        let val = VALID | nh;
        if len <= 24 {
            let r = (p >> 8) as usize..((p >> 8) as usize + (1 << (24 - len)));
            if let (Some(es), Some(ds)) = (self.tbl24.get_mut(r.clone()), self.depth24.get_mut(r)) {
                for (e, d) in es.iter_mut().zip(ds.iter_mut()) {
                    (*e, *d) = self.tbl8.paint(*e, *d, val, len);
                }
            }
        } else {
            // The only step that can fail, and it fails before anything changed.
            let g = self.group_for(p).ok_or(FibError::Full)?;
            self.tbl8.paint_node(g, (p & 0xff) as usize, 1 << (32 - len), val, len);
        }
        if self.prefixes[usize::from(len)].insert(p, nh).is_none() {
            self.count += 1;
        }
        Ok(old)
    }

    /// The tbl8 group of the /24 holding `p`, created from the slot's current content.
    fn group_for(&mut self, p: u32) -> Option<u32> {
        let i = (p >> 8) as usize;
        let d = *self.depth24.get(i)?;
        let e = self.tbl24.get_mut(i)?;
        let (new, g) = self.tbl8.child_of(*e, d)?;
        *e = new;
        Some(g)
    }

    /// Removes the route `prefix/len` (host bits ignored), returning its next hop. Addresses
    /// it covered fall back to the next shorter covering route.
    pub fn remove(&mut self, prefix: u32, len: u8) -> Option<u32> {
        if len > 32 {
            return None;
        }
        let p = prefix & mask(len);
        let old = self.prefixes[usize::from(len)].remove(&p)?;
        self.count -= 1;
        let (rv, rd) = self.covering(p, len);
        let i = (p >> 8) as usize;
        if len <= 24 {
            let r = i..i + (1 << (24 - len));
            if let (Some(es), Some(ds)) = (self.tbl24.get_mut(r.clone()), self.depth24.get_mut(r)) {
                for (e, d) in es.iter_mut().zip(ds.iter_mut()) {
                    (*e, *d) = self.tbl8.unpaint(*e, *d, len, rv, rd);
                }
            }
        } else if let (Some(e), Some(d)) = (self.tbl24.get_mut(i), self.depth24.get_mut(i)) {
            if *e & EXT != 0 {
                let g = *e & PAYLOAD;
                self.tbl8.unpaint_node(g, (p & 0xff) as usize, 1 << (32 - len), len, rv, rd);
                if let Some(folded) = self.tbl8.fold(g, 24) {
                    (*e, *d) = folded;
                }
            }
        }
        Some(old)
    }

    /// Entry and depth of the longest route strictly shorter than `len` covering `p`.
    fn covering(&self, p: u32, len: u8) -> (u32, u8) {
        for l in (0..len).rev() {
            let routes = &self.prefixes[usize::from(l)];
            if routes.is_empty() {
                continue;
            }
            if let Some(&nh) = routes.get(&(p & mask(l))) {
                return (VALID | nh, l);
            }
        }
        (0, 0)
    }

    /// Next hop of the longest prefix matching `addr`: one memory access when the match is
    /// /24 or shorter, two otherwise.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        // `get` cannot miss (2^24 slots); it costs a predicted compare instead of a panic path.
        let e = *self.tbl24.get((addr >> 8) as usize)?;
        self.resolve(e, addr)
    }

    /// Second step of a lookup, given the `tbl24` entry of `addr`.
    #[inline(always)]
    fn resolve(&self, e: u32, addr: u32) -> Option<u32> {
        if e & EXT == 0 {
            return decode(e);
        }
        decode(self.tbl8.entry(base(e & PAYLOAD) + (addr & 0xff) as usize)?)
    }

    /// Looks up `addrs[i]` into `out[i]` for every `i` both slices have.
    ///
    /// Works in groups of eight: all first-level loads of a group are issued before any is
    /// consumed, so their cache misses overlap instead of serialising behind branches.
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [Option<u32>]) {
        const LANES: usize = 8;
        for (a, o) in addrs.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let mut first = [0u32; LANES];
            for (f, &x) in first.iter_mut().zip(a) {
                *f = self.tbl24.get((x >> 8) as usize).copied().unwrap_or(0);
            }
            for ((o, &x), &f) in o.iter_mut().zip(a).zip(&first) {
                *o = self.resolve(f, x);
            }
        }
    }

    /// Next hop of exactly `prefix/len` (host bits ignored), if that route exists.
    pub fn get(&self, prefix: u32, len: u8) -> Option<u32> {
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
    pub fn routes(&self) -> impl Iterator<Item = (u32, u8, u32)> + '_ {
        (0u8..).zip(&self.prefixes).flat_map(|(len, routes)| routes.iter().map(move |(&p, &nh)| (p, len, nh)))
    }

    /// tbl8 groups currently in use (one per /24 holding a route longer than /24).
    pub fn tbl8_groups_in_use(&self) -> usize {
        self.tbl8.in_use()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashSet};
    use std::sync::Mutex;

    fn ip(a: u8, b: u8, c: u8, d: u8) -> u32 {
        u32::from_be_bytes([a, b, c, d])
    }

    /// Reference model: exact routes keyed by (len, masked prefix); masking done independently
    /// of the code under test.
    type Model = BTreeMap<(u8, u32), u32>;

    fn ref_mask(len: u8) -> u32 {
        (u64::MAX << (32 - u32::from(len))) as u32
    }

    /// Brute force: scan every route for the longest one containing `addr`.
    fn reference(model: &Model, addr: u32) -> Option<u32> {
        model.iter().filter(|(&(l, p), _)| l == 0 || (addr ^ p) >> (32 - u32::from(l)) == 0).max_by_key(|(&(l, _), _)| l).map(|(_, &nh)| nh)
    }

    /// Addresses at and just around the edges of a prefix.
    fn edges(p: u32, len: u8) -> [u32; 5] {
        let last = p | !ref_mask(len);
        [p, p.wrapping_sub(1), last, last.wrapping_add(1), p + (!ref_mask(len) >> 1)]
    }

    /// tbl8 groups the model needs: one per /24 holding a longer route.
    fn groups_needed(model: &Model) -> usize {
        model.keys().filter(|(l, _)| *l > 24).map(|(_, p)| p >> 8).collect::<HashSet<_>>().len()
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            // splitmix64
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    #[test]
    fn empty_table_matches_nothing() {
        let fib = Fib4::new();
        assert!(fib.is_empty());
        assert_eq!(fib.lookup(0), None);
        assert_eq!(fib.lookup(u32::MAX), None);
        assert_eq!(fib.routes().count(), 0);
    }

    #[test]
    fn default_route_matches_everything_until_more_specific() {
        let mut fib = Fib4::new();
        assert_eq!(fib.insert(ip(1, 2, 3, 4), 0, 7), Ok(None));
        for a in [0, ip(10, 0, 0, 1), ip(192, 168, 1, 1), u32::MAX] {
            assert_eq!(fib.lookup(a), Some(7));
        }
        fib.insert(ip(10, 0, 0, 0), 8, 8).unwrap();
        assert_eq!(fib.lookup(ip(10, 255, 255, 255)), Some(8));
        assert_eq!(fib.lookup(ip(11, 0, 0, 0)), Some(7));
        assert_eq!(fib.remove(0, 0), Some(7));
        assert_eq!(fib.lookup(ip(11, 0, 0, 0)), None);
        assert_eq!(fib.lookup(ip(10, 1, 2, 3)), Some(8));
        assert_eq!(fib.routes().collect::<Vec<_>>(), vec![(ip(10, 0, 0, 0), 8, 8)]);
    }

    #[test]
    fn host_route_is_exact_and_uses_one_group() {
        let mut fib = Fib4::new();
        fib.insert(ip(192, 168, 1, 0), 24, 1).unwrap();
        fib.insert(ip(192, 168, 1, 77), 32, 2).unwrap();
        assert_eq!(fib.tbl8_groups_in_use(), 1);
        assert_eq!(fib.lookup(ip(192, 168, 1, 77)), Some(2));
        assert_eq!(fib.lookup(ip(192, 168, 1, 76)), Some(1));
        assert_eq!(fib.lookup(ip(192, 168, 1, 78)), Some(1));
        assert_eq!(fib.lookup(ip(192, 168, 2, 77)), None);
        // A second host route in the same /24 shares the group.
        fib.insert(ip(192, 168, 1, 255), 32, 3).unwrap();
        assert_eq!(fib.tbl8_groups_in_use(), 1);
        assert_eq!(fib.lookup(ip(192, 168, 1, 255)), Some(3));
        assert_eq!(fib.remove(ip(192, 168, 1, 77), 32), Some(2));
        assert_eq!(fib.lookup(ip(192, 168, 1, 77)), Some(1));
        assert_eq!(fib.tbl8_groups_in_use(), 1);
        assert_eq!(fib.remove(ip(192, 168, 1, 255), 32), Some(3));
        // Last long route gone: the group is folded back into tbl24.
        assert_eq!(fib.tbl8_groups_in_use(), 0);
        assert_eq!(fib.lookup(ip(192, 168, 1, 255)), Some(1));
        assert_eq!(fib.lookup(ip(192, 168, 1, 77)), Some(1));
    }

    #[test]
    fn replace_returns_previous_next_hop() {
        let mut fib = Fib4::new();
        assert_eq!(fib.insert(ip(10, 0, 0, 0), 8, 1), Ok(None));
        assert_eq!(fib.insert(ip(10, 0, 0, 0), 8, 2), Ok(Some(1)));
        assert_eq!(fib.insert(ip(10, 0, 0, 0), 8, 2), Ok(Some(2)));
        assert_eq!(fib.insert(ip(10, 1, 1, 1), 32, 3), Ok(None));
        assert_eq!(fib.insert(ip(10, 1, 1, 1), 32, 4), Ok(Some(3)));
        assert_eq!(fib.len(), 2);
        assert_eq!(fib.lookup(ip(10, 1, 1, 1)), Some(4));
        assert_eq!(fib.lookup(ip(10, 1, 1, 2)), Some(2));
        // Replacing the covering route updates the group's background entries too.
        assert_eq!(fib.insert(ip(10, 0, 0, 0), 8, 5), Ok(Some(2)));
        assert_eq!(fib.lookup(ip(10, 1, 1, 2)), Some(5));
        assert_eq!(fib.lookup(ip(10, 1, 1, 1)), Some(4));
        assert_eq!(fib.get(ip(10, 9, 9, 9), 8), Some(5));
    }

    #[test]
    fn remove_falls_back_to_next_covering_prefix() {
        let mut fib = Fib4::new();
        let a = ip(172, 16, 5, 9);
        let nested = [(0u8, 100u32), (8, 108), (16, 116), (20, 120), (24, 124), (28, 128), (32, 132)];
        for &(len, nh) in &nested {
            fib.insert(a, len, nh).unwrap();
        }
        assert_eq!(fib.lookup(a), Some(132));
        assert_eq!(fib.lookup(a ^ 1), Some(128));
        assert_eq!(fib.lookup(a ^ 0x10), Some(124));
        assert_eq!(fib.lookup(a ^ 0x100), Some(120));
        // Remove from the inside out of order and check every level's view.
        assert_eq!(fib.remove(a, 28), Some(128));
        assert_eq!(fib.lookup(a ^ 1), Some(124));
        assert_eq!(fib.lookup(a), Some(132));
        assert_eq!(fib.remove(a, 24), Some(124));
        assert_eq!(fib.lookup(a ^ 1), Some(120));
        assert_eq!(fib.remove(a, 32), Some(132));
        assert_eq!(fib.lookup(a), Some(120));
        assert_eq!(fib.tbl8_groups_in_use(), 0);
        assert_eq!(fib.remove(a, 16), Some(116));
        assert_eq!(fib.lookup(a), Some(120));
        assert_eq!(fib.lookup(a ^ 0x1000), Some(108));
        assert_eq!(fib.remove(a, 20), Some(120));
        assert_eq!(fib.lookup(a), Some(108));
        assert_eq!(fib.remove(a, 8), Some(108));
        assert_eq!(fib.lookup(a), Some(100));
        assert_eq!(fib.remove(a, 8), None);
        assert_eq!(fib.remove(a, 0), Some(100));
        assert_eq!(fib.lookup(a), None);
        assert!(fib.is_empty());
    }

    #[test]
    fn host_bits_are_masked_off() {
        let mut fib = Fib4::new();
        fib.insert(ip(10, 1, 2, 3), 8, 1).unwrap();
        fib.insert(ip(10, 1, 2, 3), 30, 2).unwrap();
        let mut routes: Vec<_> = fib.routes().collect();
        routes.sort();
        assert_eq!(routes, vec![(ip(10, 0, 0, 0), 8, 1), (ip(10, 1, 2, 0), 30, 2)]);
        assert_eq!(fib.lookup(ip(10, 1, 2, 0)), Some(2));
        assert_eq!(fib.lookup(ip(10, 1, 2, 4)), Some(1));
        assert_eq!(fib.insert(ip(10, 200, 0, 0), 8, 3), Ok(Some(1)));
        assert_eq!(fib.remove(ip(10, 1, 2, 1), 30), Some(2));
        assert_eq!(fib.lookup(ip(10, 1, 2, 0)), Some(3));
    }

    #[test]
    fn bad_lengths_and_next_hops_are_rejected() {
        let mut fib = Fib4::new();
        assert_eq!(fib.insert(0, 33, 1), Err(FibError::BadPrefixLen(33)));
        assert_eq!(fib.insert(0, 255, 1), Err(FibError::BadPrefixLen(255)));
        assert_eq!(fib.insert(0, 8, MAX_NEXT_HOP + 1), Err(FibError::BadNextHop(MAX_NEXT_HOP + 1)));
        assert_eq!(fib.insert(0, 8, u32::MAX), Err(FibError::BadNextHop(u32::MAX)));
        assert_eq!(fib.remove(0, 33), None);
        assert_eq!(fib.get(0, 33), None);
        assert!(fib.is_empty());
        assert_eq!(fib.lookup(0), None);
        // The largest next hop round-trips, in tbl24 and in a group.
        fib.insert(ip(1, 0, 0, 0), 8, MAX_NEXT_HOP).unwrap();
        fib.insert(ip(2, 0, 0, 1), 32, MAX_NEXT_HOP).unwrap();
        assert_eq!(fib.lookup(ip(1, 2, 3, 4)), Some(MAX_NEXT_HOP));
        assert_eq!(fib.lookup(ip(2, 0, 0, 1)), Some(MAX_NEXT_HOP));
        assert_eq!(fib.lookup(ip(2, 0, 0, 2)), None);
        assert_eq!(FibError::BadPrefixLen(33).to_string(), "prefix length 33 out of range");
    }

    #[test]
    fn full_when_group_pool_exhausted_and_groups_recycled() {
        let mut fib = Fib4::with_max_tbl8_groups(2);
        fib.insert(ip(1, 1, 1, 1), 32, 1).unwrap();
        fib.insert(ip(2, 2, 2, 0), 25, 2).unwrap();
        assert_eq!(fib.insert(ip(3, 3, 3, 3), 32, 3), Err(FibError::Full));
        // The refused route left no trace.
        assert_eq!(fib.len(), 2);
        assert_eq!(fib.get(ip(3, 3, 3, 3), 32), None);
        assert_eq!(fib.lookup(ip(3, 3, 3, 3)), None);
        // Routes that fit in tbl24 or an existing group still go in.
        fib.insert(ip(3, 3, 3, 0), 24, 4).unwrap();
        fib.insert(ip(1, 1, 1, 2), 31, 5).unwrap();
        assert_eq!(fib.insert(ip(1, 1, 1, 1), 32, 6), Ok(Some(1)));
        // Freeing a /24's last long route returns its group to the pool.
        assert_eq!(fib.remove(ip(2, 2, 2, 0), 25), Some(2));
        assert_eq!(fib.tbl8_groups_in_use(), 1);
        assert_eq!(fib.insert(ip(3, 3, 3, 3), 32, 3), Ok(None));
        assert_eq!(fib.lookup(ip(3, 3, 3, 3)), Some(3));
        assert_eq!(fib.lookup(ip(3, 3, 3, 4)), Some(4));
        // The recycled group carries no stale entries from 2.2.2.0/25.
        assert_eq!(fib.lookup(ip(3, 3, 3, 5)), Some(4));
        assert_eq!(fib.lookup(ip(2, 2, 2, 1)), None);
    }

    #[test]
    fn lookup_batch_matches_lookup() {
        let mut fib = Fib4::new();
        fib.insert(ip(10, 0, 0, 0), 8, 1).unwrap();
        fib.insert(ip(10, 0, 0, 128), 25, 2).unwrap();
        let addrs: Vec<u32> = (0..37u32).map(|i| ip(10, 0, 0, 0) + i * 13).chain([0, u32::MAX]).collect();
        let mut out = vec![Some(99); addrs.len()];
        fib.lookup_batch(&addrs, &mut out);
        for (a, o) in addrs.iter().zip(&out) {
            assert_eq!(*o, fib.lookup(*a));
        }
        assert!(out.contains(&Some(2)) && out.contains(&None));
        // Uneven slices: only the common prefix is written.
        let mut short = [Some(99); 3];
        fib.lookup_batch(&addrs, &mut short);
        assert_eq!(short.to_vec(), out[..3].to_vec());
        let mut long = vec![Some(99); 5];
        fib.lookup_batch(&addrs[..2], &mut long);
        assert_eq!(long[2..], [Some(99); 3]);
    }

    #[test]
    fn ten_thousand_random_routes() {
        let mut rng = Rng(0x5eed);
        let mut fib = Fib4::new();
        let mut model = Model::new();
        // Internet-like lengths: mostly /16../24, some shorter and longer.
        const LENS: [u8; 20] = [11, 12, 14, 16, 16, 18, 19, 20, 21, 22, 22, 23, 24, 24, 24, 24, 26, 28, 30, 32];
        while model.len() < 10_000 {
            let r = rng.next();
            let len = LENS[(r % LENS.len() as u64) as usize];
            let p = (r >> 32) as u32 & ref_mask(len);
            let nh = (r >> 8) as u32 & 0xffff;
            assert_eq!(fib.insert(p, len, nh), Ok(model.insert((len, p), nh)));
        }
        assert_eq!(fib.len(), 10_000);
        assert_eq!(fib.tbl8_groups_in_use(), groups_needed(&model));
        // Probing each length, longest first, is an independent and fast reference.
        let probe = |model: &Model, a: u32| (0..=32u8).rev().find_map(|l| model.get(&(l, a & ref_mask(l))).copied());
        let mut queries: Vec<u32> = (0..20_000).map(|_| rng.next() as u32).collect();
        queries.extend(model.keys().flat_map(|&(l, p)| edges(p, l)));
        for &a in &queries {
            assert_eq!(fib.lookup(a), probe(&model, a), "addr {a:#x}");
        }
        let keys: Vec<_> = model.keys().copied().collect();
        for (i, &(l, p)) in keys.iter().enumerate() {
            if i % 2 == 0 {
                assert_eq!(fib.remove(p, l), model.remove(&(l, p)));
            }
        }
        assert_eq!(fib.len(), model.len());
        assert_eq!(fib.tbl8_groups_in_use(), groups_needed(&model));
        for &a in &queries {
            assert_eq!(fib.lookup(a), probe(&model, a), "addr {a:#x}");
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32, u8, u32),
        RemoveExisting(usize),
        RemoveAny(u32, u8),
    }

    /// Prefixes clustered around a few bases so routes nest and overlap.
    fn prefix() -> impl Strategy<Value = u32> {
        const BASES: [u32; 4] = [0x0a00_0000, 0xc0a8_0100, 0, 0xffff_ff00];
        prop_oneof![
            3 => (0..BASES.len(), any::<u32>(), 0u32..=32)
                .prop_map(|(b, noise, keep)| BASES[b] ^ noise.checked_shr(keep).unwrap_or(0)),
            1 => any::<u32>(),
        ]
    }

    /// Lengths from /9 up; /0../8 (which rewrite up to 2^24 slots, slow in debug builds) are
    /// added separately, a few per case.
    fn long_len() -> impl Strategy<Value = u8> {
        prop_oneof![
            2 => 9u8..=24,
            3 => 25u8..=32,
            2 => prop::sample::select(vec![16u8, 23, 24, 25, 31, 32]),
        ]
    }

    fn next_hop() -> impl Strategy<Value = u32> {
        prop_oneof![9 => 0u32..64, 1 => Just(MAX_NEXT_HOP)]
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            6 => (prefix(), long_len(), next_hop()).prop_map(|(p, l, nh)| Op::Insert(p, l, nh)),
            3 => any::<usize>().prop_map(Op::RemoveExisting),
            1 => (prefix(), long_len()).prop_map(|(p, l)| Op::RemoveAny(p, l)),
        ];
        let short = (prefix(), 0u8..=8, next_hop(), any::<usize>());
        (prop::collection::vec(op, 1..300), prop::collection::vec(short, 0..=2)).prop_map(|(mut ops, shorts)| {
            for (p, l, nh, at) in shorts {
                let at = at % (ops.len() + 1);
                ops.insert(at, Op::Insert(p, l, nh));
            }
            ops
        })
    }

    /// A table touched by a /0 has faulted in ~80 MiB; cases reuse one they emptied instead.
    static SPARE: Mutex<Option<Fib4>> = Mutex::new(None);

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        #[test]
        fn agrees_with_brute_force(ops in ops(), randoms in prop::collection::vec(any::<u32>(), 64)) {
            let mut fib = SPARE.lock().ok().and_then(|mut s| s.take()).unwrap_or_default();
            prop_assert!(fib.is_empty());
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
                prop_assert_eq!(fib.tbl8_groups_in_use(), groups_needed(&model));
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
            // Tearing everything down leaves an empty table with every group recycled.
            let keys: Vec<_> = model.keys().rev().copied().collect();
            for (l, p) in keys {
                prop_assert_eq!(fib.remove(p, l), model.remove(&(l, p)));
            }
            prop_assert!(fib.is_empty());
            prop_assert_eq!(fib.tbl8_groups_in_use(), 0);
            for &a in &queries {
                prop_assert_eq!(fib.lookup(a), None);
            }
            // Only a table proven empty is handed on; a failed case leaves the next a new one.
            if let Ok(mut spare) = SPARE.lock() {
                *spare = Some(fib);
            }
        }
    }
}
