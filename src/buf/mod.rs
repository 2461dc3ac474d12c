//! Packet buffers: fixed 2 KiB frames in one region mapped below 4 GiB.
//!
//! Below 4 GiB because XDP programs see packet pointers as 32-bit `xdp_md.data` fields.
//! Frames are recycled through a shared free stack with a per-worker cache, so the fast path
//! takes the lock once per [`CACHE_BATCH`] buffers, never per packet.
//!
//! A packet longer than one frame holds is a buffer chain (VPP's chained `vlib_buffer_t`,
//! the kernel's `skb_shared_info` frags): the head frame carries the linear part (headers
//! included), fragments carry the rest. `chain.rs` has the chain operations.

pub mod chain;
pub mod skb;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// Bytes per frame.
pub const FRAME_SIZE: usize = 2048;
/// Headroom before the packet data: XDP_PACKET_HEADROOM.
pub const HEADROOM: usize = 256;
/// Largest packet a frame holds with full headroom.
pub const MAX_DATA: usize = FRAME_SIZE - HEADROOM;
/// Buffers moved between a worker cache and the shared stack at a time.
pub const CACHE_BATCH: usize = 256;

#[derive(Debug, Error)]
pub enum PoolError {
    #[error("buffer pool of {0} frames: must be between 1 and 524288 (1 GiB, inside the 2 GiB MAP_32BIT area)")]
    TooLarge(usize),
    #[error("mmap of the buffer pool failed: {0}")]
    Mmap(std::io::Error),
    #[error("the buffer pool could not be mapped below 4 GiB (XDP programs see 32-bit packet addresses)")]
    Above4G,
}

/// A buffer handle: the index of a frame in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct BufId(pub u32);

/// A packet in flight: its head frame plus the bounds of its linear data within the frame,
/// how many bytes follow in fragments, and the receive hash the port computed. This is what
/// batches carry (16 bytes, copied freely; like an xdp_buff without pointers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pkt {
    pub buf: BufId,
    /// Offset of the first data byte (the Ethernet header) within the frame.
    pub off: u16,
    /// Linear data length in bytes (the head frame's part).
    pub len: u16,
    /// Bytes in fragments after the linear part (the kernel's `skb->data_len`); 0 for a
    /// packet in one frame, the common case, which never looks at chain metadata.
    pub frag_len: u32,
    /// The flow hash the receiving port computed (a NIC's RSS hash, the descriptor's
    /// `rss` field); 0 when the port supplies none. Becomes `skb.hash`.
    pub rss_hash: u32,
}

impl sluice_ebpf::FrameDesc for Pkt {
    #[inline(always)]
    fn frame(&self) -> u32 {
        self.buf.0
    }
    #[inline(always)]
    fn data(&self) -> usize {
        self.off as usize
    }
    #[inline(always)]
    fn data_len(&self) -> usize {
        self.len as usize
    }
    #[inline(always)]
    fn set_bounds(&mut self, data: usize, len: usize) {
        self.off = data as u16;
        self.len = len as u16;
    }
}

impl Pkt {
    pub fn new(buf: BufId, len: usize) -> Pkt {
        Pkt { buf, off: HEADROOM as u16, len: len.min(MAX_DATA) as u16, frag_len: 0, rss_hash: 0 }
    }

    /// Bytes of the whole packet: linear part plus fragments (the kernel's `skb->len`).
    #[inline(always)]
    pub fn total_len(&self) -> usize {
        self.len as usize + self.frag_len as usize
    }

    /// True when bytes follow in fragments.
    #[inline(always)]
    pub fn is_chained(&self) -> bool {
        self.frag_len != 0
    }
}

/// The mapped region. Frames are addressed by index; the region lives as long as any
/// cache or pool handle.
struct Region {
    base: *mut u8,
    bytes: usize,
}

// SAFETY: the region is plain memory; which thread may touch which frame is governed by
// buffer ownership (a BufId is held by exactly one stage of one worker at a time).
unsafe impl Send for Region {}
// SAFETY: as above; shared references only hand out raw frame addresses.
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: base/bytes come from our successful mmap and nothing uses them after drop.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.bytes);
        }
    }
}

struct PoolInner {
    region: Region,
    frames: usize,
    free: Mutex<Vec<u32>>,
    /// Per frame: its link in a buffer chain (`chain::SegMeta`, packed). Read and written only
    /// by the holder of the frame, like the frame's bytes; atomics make that safe to share
    /// (relaxed: plain loads and stores on x86-64).
    segs: Box<[AtomicU64]>,
}

/// The shared pool; clone it to hand to another worker, then take a [`BufCache`].
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

impl Pool {
    /// Maps `frames` frames below 4 GiB (MAP_32BIT: the first 2 GiB on x86-64).
    pub fn new(frames: usize) -> Result<Pool, PoolError> {
        let bytes = frames.checked_mul(FRAME_SIZE).filter(|b| *b <= (1usize << 30)).ok_or(PoolError::TooLarge(frames))?;
        if frames == 0 {
            return Err(PoolError::TooLarge(0));
        }
        #[cfg(target_arch = "x86_64")]
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT;
        #[cfg(not(target_arch = "x86_64"))]
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: anonymous private mapping with no address hint; the result is checked.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if base == libc::MAP_FAILED {
            return Err(PoolError::Mmap(std::io::Error::last_os_error()));
        }
        if base as usize + bytes >= 1 << 32 {
            // SAFETY: exactly the mapping just created, not yet shared.
            unsafe { libc::munmap(base, bytes) };
            return Err(PoolError::Above4G);
        }
        // Transparent huge pages where the kernel gives them (THP in `madvise` mode, the
        // default of many distributions, would otherwise leave the pool in 4 KiB pages: a
        // pool of 32 MiB is 8192 TLB entries, past the L2 TLB of older cores); then fault
        // every page in now, as MAP_POPULATE would, so the fast path never page-faults.
        // SAFETY: advice on exactly the mapping just created; failure only means no advice.
        unsafe { libc::madvise(base, bytes, libc::MADV_HUGEPAGE) };
        for off in (0..bytes).step_by(4096) {
            // SAFETY: `off` < `bytes`, inside the fresh writable mapping no one else sees yet.
            unsafe { (base as *mut u8).add(off).write_volatile(0) };
        }
        // Pop order: low indices first, so small runs touch a compact set of frames.
        let free: Vec<u32> = (0..frames as u32).rev().collect();
        let segs = (0..frames).map(|_| AtomicU64::new(0)).collect();
        Ok(Pool { inner: Arc::new(PoolInner { region: Region { base: base as *mut u8, bytes }, frames, free: Mutex::new(free), segs }) })
    }

    pub fn capacity(&self) -> usize {
        self.inner.frames
    }

    /// Frames on the shared free stack (not counting those in worker caches).
    pub fn shared_free(&self) -> usize {
        self.inner.free.lock().map(|f| f.len()).unwrap_or(0)
    }

    /// A per-worker cache over this pool.
    pub fn cache(&self) -> BufCache {
        BufCache {
            pool: self.clone(),
            base: self.inner.region.base,
            frames: self.inner.frames as u32,
            local: Vec::with_capacity(CACHE_BATCH * 3),
            in_use: 0,
        }
    }

    /// Start address of the region (for tests that check the 4 GiB property).
    pub fn base_addr(&self) -> usize {
        self.inner.region.base as usize
    }
}

/// A worker's view of the pool: allocation, freeing and frame access.
pub struct BufCache {
    pool: Pool,
    base: *mut u8,
    frames: u32,
    local: Vec<u32>,
    /// Buffers this cache handed out minus those it took back (may go negative per worker
    /// when buffers move between workers; the sum over workers is what leaks show in).
    in_use: i64,
}

// SAFETY: `base` points into the pool's region, which is Send + Sync and outlives the cache
// (the cache holds a Pool clone). Frame access is governed by buffer ownership.
unsafe impl Send for BufCache {}

impl BufCache {
    fn refill(&mut self) {
        if let Ok(mut free) = self.pool.inner.free.lock() {
            let take = CACHE_BATCH.min(free.len());
            let at = free.len() - take;
            self.local.extend(free.drain(at..));
        }
    }

    fn spill(&mut self) {
        if let Ok(mut free) = self.pool.inner.free.lock() {
            let at = self.local.len() - CACHE_BATCH;
            free.extend(self.local.drain(at..));
        }
    }

    #[inline]
    pub fn alloc(&mut self) -> Option<BufId> {
        if self.local.is_empty() {
            self.refill();
        }
        let id = self.local.pop()?;
        self.in_use += 1;
        Some(BufId(id))
    }

    /// Allocates up to `n` packets with full headroom and length `len`, appending them to
    /// `out`. Returns how many it could allocate (fewer when the pool is exhausted).
    #[inline]
    pub fn alloc_bulk(&mut self, out: &mut Vec<Pkt>, n: usize, len: usize) -> usize {
        let mut got = 0;
        while got < n {
            if self.local.is_empty() {
                self.refill();
                if self.local.is_empty() {
                    break;
                }
            }
            let take = (n - got).min(self.local.len());
            let at = self.local.len() - take;
            out.extend(self.local.drain(at..).rev().map(|id| Pkt::new(BufId(id), len)));
            got += take;
        }
        self.in_use += got as i64;
        got
    }

    /// Frees one frame (not its chain: see [`BufCache::free`]).
    #[inline]
    pub(crate) fn free_frame(&mut self, id: BufId) {
        debug_assert!(id.0 < self.frames);
        self.local.push(id.0);
        self.in_use -= 1;
        self.spill_if_full();
    }

    /// Returns a batch to the shared stack once the cache holds three batches.
    #[inline]
    fn spill_if_full(&mut self) {
        if self.local.len() >= CACHE_BATCH * 3 {
            self.spill();
        }
    }

    /// Frees a packet: its head frame and, for a chain, every fragment.
    #[inline]
    pub fn free(&mut self, p: Pkt) {
        if p.is_chained() {
            self.free_frags(p.buf);
        }
        self.free_frame(p.buf);
    }

    /// Frees a batch: the cache's size is checked once for the batch, not per buffer.
    #[inline]
    pub fn free_pkts(&mut self, pkts: &[Pkt]) {
        self.local.reserve(pkts.len());
        for p in pkts {
            if p.is_chained() {
                self.free_frags(p.buf);
            }
            debug_assert!(p.buf.0 < self.frames);
            self.local.push(p.buf.0);
        }
        self.in_use -= pkts.len() as i64;
        self.spill_if_full();
    }

    /// Returns every cached buffer to the shared stack (at shutdown, or before a leak check).
    pub fn flush(&mut self) {
        if let Ok(mut free) = self.pool.inner.free.lock() {
            free.append(&mut self.local);
        }
    }

    pub fn in_use(&self) -> i64 {
        self.in_use
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Frame index of a handle; a handle from another pool is clamped into this one (never
    /// outside the mapping) rather than trusted.
    #[inline(always)]
    fn index(&self, id: BufId) -> usize {
        debug_assert!(id.0 < self.frames, "buffer handle from another pool");
        (id.0 as usize).min(self.frames as usize - 1)
    }

    /// Every frame of the pool as one region below 4 GiB, for running XDP over a burst.
    /// `&mut self` keeps the frames this worker holds from being reached another way meanwhile.
    pub fn region_mut(&mut self) -> sluice_ebpf::FrameRegion<'_> {
        // SAFETY: the pool's mapping is `frames * FRAME_SIZE` bytes, alive while `self` holds
        // its Pool clone; programs only touch the frames named by the burst, which this worker owns.
        let region = unsafe { sluice_ebpf::FrameRegion::from_raw(self.base, FRAME_SIZE, self.frames as usize) };
        // Pool::new refuses a mapping that does not end below 4 GiB, so this cannot fail.
        region.unwrap_or_else(|_| unreachable!("buffer pool above 4 GiB"))
    }

    /// Raw address of a frame's first byte (for XDP's 32-bit pointers).
    #[inline]
    pub fn frame_addr(&self, id: BufId) -> usize {
        self.base as usize + self.index(id) * FRAME_SIZE
    }

    /// Starts loading the cache line of the packet's first data byte (its Ethernet header),
    /// without waiting for it: for packets another core wrote, fetched a batch at a time
    /// before the first stage reads them, so their misses overlap instead of stalling in turn.
    #[inline]
    pub fn prefetch_data(&self, p: Pkt) {
        #[cfg(target_arch = "x86_64")]
        {
            let at = (self.frame_addr(p.buf) + (p.off as usize).min(FRAME_SIZE - 1)) as *const i8;
            // SAFETY: a prefetch is a hint that never faults and reads nothing into the
            // program; the address lies inside the mapped pool anyway (frame_addr + an offset
            // below FRAME_SIZE).
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }

    /// The whole frame (headroom included).
    #[inline]
    pub fn frame(&self, id: BufId) -> &[u8] {
        let i = self.index(id);
        // SAFETY: i < frames, so the frame lies inside the mapped region; the holder of the
        // BufId owns the frame, and the borrow is tied to &self.
        unsafe { std::slice::from_raw_parts(self.base.add(i * FRAME_SIZE), FRAME_SIZE) }
    }

    /// The whole frame, writable.
    #[inline]
    pub fn frame_mut(&mut self, id: BufId) -> &mut [u8] {
        let i = self.index(id);
        // SAFETY: as in `frame`; &mut self prevents a second borrow through this cache.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(i * FRAME_SIZE), FRAME_SIZE) }
    }

    /// The packet's data bytes.
    #[inline]
    pub fn data(&self, p: Pkt) -> &[u8] {
        let f = self.frame(p.buf);
        let start = (p.off as usize).min(FRAME_SIZE);
        let end = (start + p.len as usize).min(FRAME_SIZE);
        &f[start..end]
    }

    #[inline]
    pub fn data_mut(&mut self, p: Pkt) -> &mut [u8] {
        let f = self.frame_mut(p.buf);
        let start = (p.off as usize).min(FRAME_SIZE);
        let end = (start + p.len as usize).min(FRAME_SIZE);
        &mut f[start..end]
    }

    /// Copies `bytes` into a new packet with full headroom: one frame, or a chain when they
    /// do not fit (up to [`chain::MAX_CHAIN_BYTES`]). None when the pool runs out or the
    /// bytes are too many (nothing stays allocated then).
    pub fn alloc_copy(&mut self, bytes: &[u8]) -> Option<Pkt> {
        if bytes.len() > MAX_DATA {
            return self.alloc_chain_copy(bytes);
        }
        let id = self.alloc()?;
        let len = bytes.len();
        self.frame_mut(id)[HEADROOM..HEADROOM + len].copy_from_slice(bytes);
        Some(Pkt::new(id, len))
    }

    #[inline(always)]
    fn seg(&self, id: BufId) -> &AtomicU64 {
        &self.pool.inner.segs[self.index(id)]
    }

    #[inline]
    pub(crate) fn seg_meta(&self, id: BufId) -> chain::SegMeta {
        chain::SegMeta::unpack(self.seg(id).load(Ordering::Relaxed))
    }

    #[inline]
    pub(crate) fn set_seg_meta(&self, id: BufId, m: chain::SegMeta) {
        self.seg(id).store(m.pack(), Ordering::Relaxed)
    }
}

impl Drop for BufCache {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_is_below_4gib_and_frames_recycle() {
        let pool = Pool::new(1024).unwrap();
        assert!(pool.base_addr() + pool.capacity() * FRAME_SIZE <= 1 << 32);
        let mut c = pool.cache();
        let mut v = Vec::new();
        assert_eq!(c.alloc_bulk(&mut v, 1000, 60), 1000);
        assert_eq!(c.in_use(), 1000);
        let mut seen = std::collections::HashSet::new();
        for p in &v {
            assert!(seen.insert(p.buf), "duplicate buffer handed out");
            assert_eq!(p.off as usize, HEADROOM);
        }
        c.free_pkts(&v);
        assert_eq!(c.in_use(), 0);
        c.flush();
        assert_eq!(pool.shared_free(), 1024);
    }

    #[test]
    fn exhaustion_is_not_a_panic() {
        let pool = Pool::new(100).unwrap();
        let mut c = pool.cache();
        let mut v = Vec::new();
        assert_eq!(c.alloc_bulk(&mut v, 300, 60), 100);
        assert!(c.alloc().is_none());
        assert!(c.alloc_copy(&[1, 2, 3]).is_none());
    }

    #[test]
    fn data_views_follow_bounds() {
        let pool = Pool::new(4).unwrap();
        let mut c = pool.cache();
        let p = c.alloc_copy(&[9, 8, 7, 6]).unwrap();
        assert_eq!(c.data(p), &[9, 8, 7, 6]);
        let q = Pkt { off: p.off + 1, len: 2, ..p };
        c.data_mut(q)[0] = 1;
        assert_eq!(c.data(p), &[9, 1, 7, 6]);
        let wild = Pkt { off: 4000, len: 4000, ..p };
        assert!(c.data(wild).is_empty());
    }
}
