//! The preallocated index of a hash-type map: buckets, chains, keys, free list, LRU bits.
//!
//! # Readers never lock
//! A program's `bpf_map_lookup_elem` is on the packet fast path, and several workers run the
//! same program, so lookups take no lock and write no shared line (except an LRU reference
//! bit, only when it is clear, as htab_lru's `bpf_lru_node_set_ref`). The index is a
//! sequence lock over atomic arrays:
//! * writers (updates and deletes, from programs or user space) are serialised by a `Mutex`
//!   that also holds the allocation state (free list, high water, count, CLOCK hand), and
//!   make every change to the chains or keys inside a window where `seq` is odd;
//! * a reader walks the chain of its bucket with relaxed atomic loads, then checks that
//!   `seq` was even and unchanged across the walk; otherwise it walks again (after 64 tries
//!   it takes the writers' lock, so a preempted writer or a stream of inserts makes it wait,
//!   not spin). Every index is
//!   bounds-checked and the walk is bounded by the capacity, so a walk racing a writer reads
//!   garbage at worst, never out of bounds or forever, and its answer is thrown away.
//!
//! The kernel's preallocated htab gets the same effect from RCU plus `hlist_nulls` (a walk
//! that ends on another bucket's nulls marker restarts). As there, a lookup's answer is a
//! slot; the slot may be freed and reused for another key while a program still holds its
//! value pointer.
//!
//! Slot numbers are stored +1 so that 0 means "none", which lets every array start zeroed
//! (and untouched: a huge map costs only the pages it uses).

use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Lock-free walks a lookup tries before it takes the writers' lock.
const LOCK_FREE_TRIES: u32 = 64;

pub(super) const SLOT_USED: u8 = 1;
pub(super) const SLOT_REF: u8 = 2;

/// A slice of zeroed atomics from a zeroed allocation: `vec![0; n]` asks the allocator for
/// zeroed memory (calloc / fresh pages), where building `n` atomics one by one would touch
/// every page of a huge map at creation.
macro_rules! zeroed_atomics {
    ($fn:ident, $int:ty, $atomic:ty) => {
        fn $fn(n: usize) -> Box<[$atomic]> {
            const _: () = assert!(std::mem::align_of::<$int>() == std::mem::align_of::<$atomic>());
            let raw = Box::into_raw(vec![0 as $int; n].into_boxed_slice()) as *mut [$atomic];
            // SAFETY: the atomic type has the size, bit validity and (asserted above) alignment
            // of the integer, so the allocation is a valid slice of n atomics of the same layout.
            unsafe { Box::from_raw(raw) }
        }
    };
}
zeroed_atomics!(zeroed_u32s, u32, AtomicU32);
zeroed_atomics!(zeroed_u64s, u64, AtomicU64);
zeroed_atomics!(zeroed_u8s, u8, AtomicU8);

/// What only writers touch (under the writers' lock).
pub(super) struct Alloc {
    pub count: u32,
    high_water: u32,
    free_head: u32,
    hand: u32,
}

pub(super) struct HashIndex {
    key_size: usize,
    /// Key words per slot (key bytes rounded up to 8, zero padded).
    key_words: usize,
    capacity: u32,
    mask: u32,
    seed: u64,
    pub lru: bool,
    /// Even when no writer is changing the chains, odd while one is.
    seq: AtomicU32,
    buckets: Box<[AtomicU32]>,
    next: Box<[AtomicU32]>,
    hashes: Box<[AtomicU32]>,
    keys: Box<[AtomicU64]>,
    flags: Box<[AtomicU8]>,
    writers: Mutex<Alloc>,
}

/// The writers' lock, with the index it guards: every change goes through this.
pub(super) struct Writer<'a> {
    index: &'a HashIndex,
    pub alloc: MutexGuard<'a, Alloc>,
}

/// Word `w` of `key` as stored (little-endian, zero padded past the end).
#[inline(always)]
fn key_word(key: &[u8], w: usize) -> u64 {
    let start = w * 8;
    match key.get(start..start + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
        None => {
            let mut b = [0u8; 8];
            let tail = key.get(start..).unwrap_or(&[]);
            b[..tail.len()].copy_from_slice(tail);
            u64::from_le_bytes(b)
        }
    }
}

impl HashIndex {
    /// `seed` starts every key hash (the kernel's `hashrnd` for jhash; 0 with
    /// BPF_F_ZERO_SEED): a different bucket layout per map. Like jhash it is not a keyed
    /// PRF: keys crafted to collide whatever the seed exist.
    pub fn new(key_size: usize, capacity: u32, lru: bool, seed: u64) -> HashIndex {
        let nb = (capacity as usize).next_power_of_two().max(1);
        let key_words = key_size.div_ceil(8);
        let cap = capacity as usize;
        HashIndex {
            key_size,
            key_words,
            capacity,
            mask: (nb - 1) as u32,
            seed,
            lru,
            seq: AtomicU32::new(0),
            buckets: zeroed_u32s(nb),
            next: zeroed_u32s(cap),
            hashes: zeroed_u32s(cap),
            keys: zeroed_u64s(cap * key_words),
            flags: zeroed_u8s(cap),
            writers: Mutex::new(Alloc { count: 0, high_water: 0, free_head: 0, hand: 0 }),
        }
    }

    /// Bytes the index takes for `capacity` keys of `key_size` bytes (None on overflow).
    pub fn bytes(key_size: usize, capacity: u32) -> Option<usize> {
        let nb = (capacity as usize).checked_next_power_of_two()?;
        let per_slot = key_size.checked_next_multiple_of(8)?.checked_add(4 + 4 + 1)?;
        (capacity as usize).checked_mul(per_slot)?.checked_add(nb.checked_mul(4)?)
    }

    pub fn hash(&self, k: &[u8]) -> u32 {
        let mut h: u64 = (0xcbf2_9ce4_8422_2325 ^ self.seed) ^ (k.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for w in 0..k.len().div_ceil(8) {
            h = (h ^ key_word(k, w)).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
        }
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^= h >> 33;
        h as u32
    }

    pub fn writer(&self) -> Writer<'_> {
        // Nothing panics while holding the lock, so a poisoned lock is still consistent.
        Writer { index: self, alloc: self.writers.lock().unwrap_or_else(|e| e.into_inner()) }
    }

    #[inline(always)]
    fn key_matches(&self, slot: u32, key: &[u8]) -> bool {
        let base = slot as usize * self.key_words;
        let Some(words) = self.keys.get(base..base + self.key_words) else {
            return false;
        };
        words.iter().enumerate().all(|(w, word)| word.load(Ordering::Relaxed) == key_word(key, w))
    }

    /// One walk of `key`'s chain; only meaningful when no writer ran meanwhile.
    #[inline(always)]
    fn walk(&self, key: &[u8], h: u32) -> Option<u32> {
        let mut cur = self.buckets.get((h & self.mask) as usize)?.load(Ordering::Relaxed);
        let mut steps = 0u32;
        while cur != 0 && steps <= self.capacity {
            let slot = cur - 1;
            if self.hashes.get(slot as usize)?.load(Ordering::Relaxed) == h && self.key_matches(slot, key) {
                return Some(slot);
            }
            cur = self.next.get(slot as usize)?.load(Ordering::Relaxed);
            steps += 1;
        }
        None
    }

    /// The slot holding `key` (hash `h`), without locking: a walk that a writer may have
    /// raced is repeated.
    #[inline]
    pub fn find(&self, key: &[u8], h: u32) -> Option<u32> {
        for _ in 0..LOCK_FREE_TRIES {
            let before = self.seq.load(Ordering::Acquire);
            if before & 1 == 0 {
                let found = self.walk(key, h);
                // Orders the walk's loads before the second read of `seq` (pairs with the
                // writer's release fence after it made `seq` odd).
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == before {
                    return found;
                }
            }
            std::hint::spin_loop();
        }
        // Writers kept overlapping (a stream of inserts, or a writer preempted in its
        // window): wait for the writers' lock instead of spinning on.
        self.locked_find(key, h)
    }

    #[cold]
    fn locked_find(&self, key: &[u8], h: u32) -> Option<u32> {
        self.writer().find(key, h)
    }

    /// Marks `slot` recently used (LRU maps), writing the shared line only if needed.
    #[inline]
    pub fn reference(&self, slot: u32) {
        if let Some(f) = self.flags.get(slot as usize) {
            if f.load(Ordering::Relaxed) & SLOT_REF == 0 {
                f.fetch_or(SLOT_REF, Ordering::Relaxed);
            }
        }
    }

    /// The key bytes of `slot`.
    pub fn key_of(&self, slot: u32) -> Vec<u8> {
        let mut out: Vec<u8> = (0..self.key_words)
            .flat_map(|w| self.keys.get(slot as usize * self.key_words + w).map_or(0, |k| k.load(Ordering::Relaxed)).to_le_bytes())
            .collect();
        out.truncate(self.key_size);
        out
    }
}

impl Writer<'_> {
    /// Runs `change` inside a write window: readers that overlap it walk again.
    fn window<R>(&mut self, change: impl FnOnce(&HashIndex, &mut Alloc) -> R) -> R {
        let ix = self.index;
        let s = ix.seq.load(Ordering::Relaxed);
        ix.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        // The odd value is visible before any change (pairs with the readers' acquire fence).
        fence(Ordering::Release);
        let r = change(ix, &mut self.alloc);
        ix.seq.store(s.wrapping_add(2), Ordering::Release);
        r
    }

    /// The slot holding `key`: the writers' lock keeps the chains still, so one walk answers.
    pub fn find(&self, key: &[u8], h: u32) -> Option<u32> {
        self.index.walk(key, h)
    }

    pub fn reference(&self, slot: u32) {
        self.index.reference(slot);
    }

    /// Removes `slot` from its chain and puts it on the free list.
    pub fn free_slot(&mut self, slot: u32) {
        self.window(|ix, alloc| {
            unlink(ix, slot);
            if let Some(f) = ix.flags.get(slot as usize) {
                f.store(0, Ordering::Relaxed);
            }
            if let Some(n) = ix.next.get(slot as usize) {
                n.store(alloc.free_head, Ordering::Relaxed);
            }
            alloc.free_head = slot + 1;
            alloc.count = alloc.count.saturating_sub(1);
        });
    }

    /// Takes an unused slot: from the free list, then never-used slots, then (LRU only) by
    /// evicting with the CLOCK sweep. `None` when full.
    pub fn alloc_slot(&mut self) -> Option<u32> {
        let ix = self.index;
        let a = &mut *self.alloc;
        if a.free_head != 0 {
            let slot = a.free_head - 1;
            a.free_head = ix.next.get(slot as usize).map_or(0, |n| n.load(Ordering::Relaxed));
            return Some(slot);
        }
        if a.high_water < ix.capacity {
            a.high_water += 1;
            return Some(a.high_water - 1);
        }
        if !ix.lru || ix.capacity == 0 {
            return None;
        }
        // CLOCK: at most two sweeps (the first clears every reference bit). Reference bits
        // are not part of the chains, so the sweep runs outside a write window.
        for _ in 0..(2 * ix.capacity as u64 + 1) {
            let slot = a.hand;
            a.hand = (a.hand + 1) % ix.capacity;
            let Some(f) = ix.flags.get(slot as usize) else { continue };
            let bits = f.load(Ordering::Relaxed);
            if bits & SLOT_USED == 0 {
                continue;
            }
            if bits & SLOT_REF != 0 {
                f.fetch_and(!SLOT_REF, Ordering::Relaxed);
                continue;
            }
            self.free_slot(slot);
            // free_slot pushed it on the free list: pop it again.
            let a = &mut *self.alloc;
            a.free_head = ix.next.get(slot as usize).map_or(0, |n| n.load(Ordering::Relaxed));
            return Some(slot);
        }
        None
    }

    /// Links a freshly allocated slot for `key` (hash `h`) into its bucket.
    pub fn link(&mut self, slot: u32, key: &[u8], h: u32) {
        self.window(|ix, alloc| {
            let s = slot as usize;
            let base = s * ix.key_words;
            if let Some(words) = ix.keys.get(base..base + ix.key_words) {
                for (w, word) in words.iter().enumerate() {
                    word.store(key_word(key, w), Ordering::Relaxed);
                }
            }
            let (Some(hash), Some(flag), Some(next)) = (ix.hashes.get(s), ix.flags.get(s), ix.next.get(s)) else { return };
            let Some(bucket) = ix.buckets.get((h & ix.mask) as usize) else { return };
            hash.store(h, Ordering::Relaxed);
            flag.store(SLOT_USED, Ordering::Relaxed);
            next.store(bucket.load(Ordering::Relaxed), Ordering::Relaxed);
            bucket.store(slot + 1, Ordering::Relaxed);
            alloc.count += 1;
        });
    }

    /// Slots holding an element, in slot order.
    pub fn used_slots(&self) -> impl Iterator<Item = u32> + '_ {
        let ix = self.index;
        (0..self.alloc.high_water).filter(move |&s| ix.flags.get(s as usize).is_some_and(|f| f.load(Ordering::Relaxed) & SLOT_USED != 0))
    }

    pub fn key_of(&self, slot: u32) -> Vec<u8> {
        self.index.key_of(slot)
    }
}

/// Removes `slot` from its bucket chain (inside a write window).
fn unlink(ix: &HashIndex, slot: u32) {
    let Some(h) = ix.hashes.get(slot as usize).map(|h| h.load(Ordering::Relaxed)) else { return };
    let Some(bucket) = ix.buckets.get((h & ix.mask) as usize) else { return };
    let target = slot + 1;
    let after = ix.next.get(slot as usize).map_or(0, |n| n.load(Ordering::Relaxed));
    let head = bucket.load(Ordering::Relaxed);
    if head == target {
        bucket.store(after, Ordering::Relaxed);
        return;
    }
    let mut cur = head;
    let mut steps = 0u32;
    while cur != 0 && steps <= ix.capacity {
        let Some(link) = ix.next.get((cur - 1) as usize) else { return };
        let nx = link.load(Ordering::Relaxed);
        if nx == target {
            link.store(after, Ordering::Relaxed);
            return;
        }
        cur = nx;
        steps += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn insert(ix: &HashIndex, key: &[u8]) -> Option<u32> {
        let h = ix.hash(key);
        let mut w = ix.writer();
        if let Some(s) = w.find(key, h) {
            return Some(s);
        }
        let s = w.alloc_slot()?;
        w.link(s, key, h);
        Some(s)
    }

    fn remove(ix: &HashIndex, key: &[u8]) -> bool {
        let h = ix.hash(key);
        let mut w = ix.writer();
        let Some(s) = w.find(key, h) else { return false };
        w.free_slot(s);
        true
    }

    #[test]
    fn keys_of_every_length_round_trip_and_differ_in_their_last_byte() {
        for ks in [1usize, 3, 4, 8, 9, 13, 16, 17, 64, 512] {
            let ix = HashIndex::new(ks, 4, false, 7);
            let a: Vec<u8> = (0..ks).map(|i| i as u8 ^ 0x5a).collect();
            let mut b = a.clone();
            *b.last_mut().unwrap() ^= 0x80;
            let sa = insert(&ix, &a).unwrap();
            assert_eq!(ix.key_of(sa), a);
            assert_eq!(ix.find(&b, ix.hash(&b)), None, "key size {ks}: the last byte must take part");
            let sb = insert(&ix, &b).unwrap();
            assert_ne!(sa, sb);
            assert_eq!(ix.find(&a, ix.hash(&a)), Some(sa));
            assert_eq!(ix.find(&b, ix.hash(&b)), Some(sb));
        }
    }

    #[test]
    fn the_seed_changes_the_hash_and_zero_seed_is_fixed() {
        let k = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        let a = HashIndex::new(9, 8, false, 0);
        let b = HashIndex::new(9, 8, false, 0);
        let c = HashIndex::new(9, 8, false, 0x1234_5678_9abc_def0);
        assert_eq!(a.hash(&k), b.hash(&k));
        assert_ne!(a.hash(&k), c.hash(&k));
    }

    #[test]
    fn freed_slots_are_reused_first_and_chains_survive_unlinking_from_the_middle() {
        // Capacity 1024 but only a 1-bucket-mask collision is forced by many keys in few buckets:
        // with 64 keys in 64 buckets some chains hold several; deleting every other key must
        // leave the rest findable.
        let ix = HashIndex::new(4, 64, false, 3);
        let keys: Vec<[u8; 4]> = (0u32..64).map(|i| i.to_le_bytes()).collect();
        for k in &keys {
            insert(&ix, k).unwrap();
        }
        assert_eq!(insert(&ix, &100u32.to_le_bytes()), None, "full");
        for k in keys.iter().step_by(2) {
            assert!(remove(&ix, k));
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(ix.find(k, ix.hash(k)).is_some(), i % 2 == 1, "key {i}");
        }
        assert_eq!(ix.writer().alloc.count, 32);
        let s = insert(&ix, &100u32.to_le_bytes()).unwrap();
        assert_eq!(s, 62, "the last freed slot comes back first");
    }

    /// A lookup that keeps finding a write window open (here: one left open for good, as by a
    /// writer that stopped inside it) stops spinning after its tries and answers under the
    /// writers' lock.
    #[test]
    fn a_lookup_that_keeps_meeting_a_writer_falls_back_to_the_lock() {
        let ix = HashIndex::new(4, 8, false, 1);
        let k = 5u32.to_le_bytes();
        let slot = insert(&ix, &k).unwrap();
        ix.seq.store(ix.seq.load(Ordering::Relaxed) | 1, Ordering::Relaxed);
        assert_eq!(ix.find(&k, ix.hash(&k)), Some(slot));
        assert_eq!(ix.find(&[9, 0, 0, 0], ix.hash(&[9, 0, 0, 0])), None);
    }

    /// Readers racing a writer that keeps deleting and re-inserting keys of one chain never
    /// miss the key behind them: a walk that followed a freed slot's link into the free list
    /// (and so ended early) is thrown away by the sequence check and walked again.
    #[test]
    fn lookups_racing_updates_never_miss_a_present_key() {
        let ix = Arc::new(HashIndex::new(8, 16, false, 9));
        let bucket = |k: u64| ix.hash(&k.to_le_bytes()) & ix.mask;
        // The anchor and seven movers share one bucket; movers are re-inserted at the head,
        // in front of the anchor, so a reader looking for the anchor walks through them.
        let anchor = 1_000u64;
        let movers: Vec<u64> = (0u64..).filter(|&k| k != anchor && bucket(k) == bucket(anchor)).take(7).collect();
        insert(&ix, &anchor.to_le_bytes()).unwrap();
        for k in &movers {
            insert(&ix, &k.to_le_bytes()).unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(AtomicU64::new(0));
        let reader = {
            let (ix, stop, progress) = (ix.clone(), stop.clone(), progress.clone());
            std::thread::spawn(move || {
                let (mut seen, mut wrong) = (0u64, 0u64);
                let k = anchor.to_le_bytes();
                while !stop.load(Ordering::Relaxed) {
                    match ix.find(&k, ix.hash(&k)) {
                        Some(s) if ix.key_of(s) == k => seen += 1,
                        _ => wrong += 1,
                    }
                    progress.store(seen, Ordering::Relaxed);
                }
                (seen, wrong)
            })
        };
        // At least 200,000 moves, and until the reader has walked 100,000 times (it may
        // start late).
        let mut round = 0usize;
        while round < 200_000 || progress.load(Ordering::Relaxed) < 100_000 {
            let k = movers[round % movers.len()].to_le_bytes();
            assert!(remove(&ix, &k));
            insert(&ix, &k).unwrap();
            round += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let (seen, wrong) = reader.join().unwrap();
        assert!(seen >= 100_000);
        assert_eq!(wrong, 0, "the anchor was missed {wrong} times in {seen} lookups");
    }
}
