//! Buffer chains: packets longer than one frame.
//!
//! The head frame holds the linear part at `Pkt::off` (headers included: the receive path
//! parses only the linear part, as the kernel after `pskb_may_pull`), fragments hold the
//! rest, each in a frame of its own at the offset its `SegMeta` says. The links live in a
//! per-frame side table of the pool, so a packet in one frame (`frag_len == 0`) never reads
//! them. A chain never names a frame twice; every walk is bounded by [`MAX_FRAGS`], so a
//! corrupt link cannot loop.

use super::{BufCache, BufId, Pkt, FRAME_SIZE, MAX_DATA};

/// Largest packet a chain holds: tcpdump's largest snapshot (256 KiB), above the 64 KiB of
/// an IP datagram or a GRO/GSO super-packet.
pub const MAX_CHAIN_BYTES: usize = 262_144;
/// Fragments a chain may have (enough for [`MAX_CHAIN_BYTES`] in whole frames).
pub const MAX_FRAGS: usize = MAX_CHAIN_BYTES / FRAME_SIZE + 1;
/// End of a chain.
pub const NO_SEG: u32 = u32::MAX;

/// A frame's link in a chain: the next fragment, and for a fragment the bounds of its data
/// in its frame. (For a head frame only `next` means something: `Pkt` has the bounds.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegMeta {
    pub next: u32,
    pub off: u16,
    pub len: u16,
}

impl SegMeta {
    pub(crate) fn pack(self) -> u64 {
        self.next as u64 | (self.off as u64) << 32 | (self.len as u64) << 48
    }

    pub(crate) fn unpack(v: u64) -> SegMeta {
        SegMeta { next: v as u32, off: (v >> 32) as u16, len: (v >> 48) as u16 }
    }

    /// The bounds clamped into the frame (a corrupt entry reads as fewer bytes, never outside).
    fn range(self) -> std::ops::Range<usize> {
        let start = (self.off as usize).min(FRAME_SIZE);
        start..(start + self.len as usize).min(FRAME_SIZE)
    }
}

impl BufCache {
    /// Copies `bytes` (longer than one frame's linear part) into a new chain: the head frame
    /// filled after its headroom, then whole frames. None, with nothing kept, when the pool
    /// runs out or `bytes` exceeds [`MAX_CHAIN_BYTES`].
    pub(crate) fn alloc_chain_copy(&mut self, bytes: &[u8]) -> Option<Pkt> {
        if bytes.len() > MAX_CHAIN_BYTES {
            return None;
        }
        let head_len = bytes.len().min(MAX_DATA);
        let mut p = self.alloc_copy(&bytes[..head_len])?;
        if !self.append_frags(&mut p, &bytes[head_len..]) {
            self.free(p);
            return None;
        }
        Some(p)
    }

    /// Appends `bytes` to a one-frame packet as fragments (a generator's jumbo frame after
    /// its head part). False, with the packet unchanged, when the pool runs out or the chain
    /// would exceed [`MAX_CHAIN_BYTES`].
    pub fn append_frags(&mut self, p: &mut Pkt, bytes: &[u8]) -> bool {
        if p.is_chained() || p.len as usize + bytes.len() > MAX_CHAIN_BYTES {
            return false;
        }
        let mut last = p.buf;
        let mut added = 0u32;
        for chunk in bytes.chunks(FRAME_SIZE) {
            let Some(id) = self.alloc() else {
                if added > 0 {
                    self.free_frags(p.buf);
                }
                return false;
            };
            self.frame_mut(id)[..chunk.len()].copy_from_slice(chunk);
            self.set_seg_meta(id, SegMeta { next: NO_SEG, off: 0, len: chunk.len() as u16 });
            self.link(last, id);
            added += chunk.len() as u32;
            last = id;
        }
        p.frag_len = added;
        true
    }

    /// Sets `from`'s next fragment (keeping its bounds).
    fn link(&self, from: BufId, to: BufId) {
        let m = self.seg_meta(from);
        self.set_seg_meta(from, SegMeta { next: to.0, ..m });
    }

    /// Frees the fragments that follow head frame `head` (not the head).
    pub(crate) fn free_frags(&mut self, head: BufId) {
        let mut next = self.seg_meta(head).next;
        for _ in 0..MAX_FRAGS {
            if next == NO_SEG || next as usize >= self.capacity() {
                break;
            }
            let id = BufId(next);
            next = self.seg_meta(id).next;
            self.free_frame(id);
        }
    }

    fn capacity(&self) -> usize {
        self.pool.capacity()
    }

    /// The fragments of `p` in order: (frame, its data bounds). Empty for a one-frame packet;
    /// stops once `p.frag_len` bytes are seen.
    pub fn frags(&self, p: Pkt) -> Frags<'_> {
        let next = if p.is_chained() { self.seg_meta(p.buf).next } else { NO_SEG };
        Frags { bufs: self, next, left: p.frag_len as usize, steps: 0 }
    }

    /// The packet's bytes as slices: the linear part, then each fragment.
    pub fn segments(&self, p: Pkt) -> impl Iterator<Item = &[u8]> + '_ {
        std::iter::once(self.data(p)).chain(self.frags(p).map(move |(id, m)| &self.frame(id)[m.range()]))
    }

    /// Copies the packet's bytes from `off` into `dst`; returns how many it copied (fewer
    /// when the packet ends first).
    pub fn copy_out(&self, p: Pkt, mut off: usize, dst: &mut [u8]) -> usize {
        let mut done = 0;
        for seg in self.segments(p) {
            if done == dst.len() {
                break;
            }
            if off >= seg.len() {
                off -= seg.len();
                continue;
            }
            let n = (seg.len() - off).min(dst.len() - done);
            dst[done..done + n].copy_from_slice(&seg[off..off + n]);
            done += n;
            off = 0;
        }
        done
    }

    /// The Internet checksum's running sum (as `wire::checksum::sum_be16`) over the packet's
    /// bytes `[off, off + len)`, across fragments: a fragment boundary at an odd offset pairs
    /// its last byte with the next fragment's first, as one contiguous buffer would.
    pub fn sum_be16_range(&self, p: Pkt, mut off: usize, mut len: usize) -> u64 {
        use crate::wire::checksum::sum_be16;
        if !p.is_chained() {
            let d = self.data(p);
            let start = off.min(d.len());
            return sum_be16(&d[start..(start + len).min(d.len())]);
        }
        let mut sum = 0u64;
        let mut pending: Option<u8> = None;
        for seg in self.segments(p) {
            if len == 0 {
                break;
            }
            if off >= seg.len() {
                off -= seg.len();
                continue;
            }
            let mut s = &seg[off..(off + len).min(seg.len())];
            off = 0;
            len -= s.len();
            if let Some(b) = pending.take() {
                match s.split_first() {
                    Some((&first, rest)) => {
                        sum += u16::from_be_bytes([b, first]) as u64;
                        s = rest;
                    }
                    None => pending = Some(b),
                }
            }
            let even = s.len() & !1;
            sum += sum_be16(&s[..even]);
            if even < s.len() {
                pending = Some(s[even]);
            }
        }
        if let Some(b) = pending {
            sum += (b as u64) << 8;
        }
        sum
    }

    /// [`BufCache::sum_be16_range`] from `off` to the packet's end.
    pub fn sum_be16_from(&self, p: Pkt, off: usize) -> u64 {
        self.sum_be16_range(p, off, p.total_len().saturating_sub(off))
    }

    /// Appends the whole packet's bytes to `out`.
    pub fn extend_vec(&self, p: Pkt, out: &mut Vec<u8>) {
        out.reserve(p.total_len());
        for seg in self.segments(p) {
            out.extend_from_slice(seg);
        }
    }

    /// The whole packet as one vector (captures and tests).
    pub fn to_vec(&self, p: Pkt) -> Vec<u8> {
        let mut v = Vec::new();
        self.extend_vec(p, &mut v);
        v
    }

    /// A copy of the packet in new buffers with full headroom (None when the pool runs out):
    /// every byte, in a chain when they no longer fit one buffer after its headroom (a
    /// frame whose data an XDP program grew into the headroom holds more than `MAX_DATA`).
    pub fn clone_pkt(&mut self, p: Pkt) -> Option<Pkt> {
        let n = self.data(p).len();
        if !p.is_chained() && n <= MAX_DATA {
            // Through the stack, not the heap: both frames are in the pool `self` borrows.
            let mut tmp = [0u8; MAX_DATA];
            tmp[..n].copy_from_slice(self.data(p));
            return self.alloc_copy(&tmp[..n]);
        }
        self.alloc_copy(&self.to_vec(p))
    }

    /// Cuts the packet to its first `total` bytes (IP padding removal: the kernel's
    /// `pskb_trim`), freeing the fragments past them. Longer `total` changes nothing.
    pub fn trim(&mut self, p: &mut Pkt, total: usize) {
        if total >= p.total_len() {
            return;
        }
        if total <= p.len as usize {
            if p.is_chained() {
                self.free_frags(p.buf);
            }
            p.len = total as u16;
            p.frag_len = 0;
            return;
        }
        let mut keep = total - p.len as usize;
        p.frag_len = keep as u32;
        let mut cur = self.seg_meta(p.buf).next;
        for _ in 0..MAX_FRAGS {
            if cur == NO_SEG || cur as usize >= self.capacity() {
                break;
            }
            let id = BufId(cur);
            let m = self.seg_meta(id);
            if keep <= m.len as usize {
                // The last fragment kept: cut it and free what followed.
                self.set_seg_meta(id, SegMeta { len: keep as u16, ..m });
                self.free_frags(id);
                self.set_seg_meta(id, SegMeta { next: NO_SEG, len: keep as u16, ..m });
                return;
            }
            keep -= m.len as usize;
            cur = m.next;
        }
    }

    /// Runs `f` over the packet as an XDP multi-buffer: the head frame (whole, headroom
    /// included) and the fragments as [`sluice_ebpf::XdpFrags`]. Afterwards the chain
    /// reflects what `f` did to the fragments (grown, shrunk, released) in `p.frag_len`; the
    /// linear bounds (`p.off`, `p.len`) are the caller's to set from the XDP buffer.
    pub fn with_xdp_frags<R>(&mut self, p: &mut Pkt, f: impl FnOnce(&mut [u8], &mut ChainFrags<'_>) -> R) -> R {
        let mut ids = [0u32; MAX_FRAGS];
        let mut n = 0;
        for (id, _) in self.frags(*p) {
            ids[n] = id.0;
            n += 1;
        }
        let head = self.index(p.buf);
        // SAFETY: `head` < frames, so the frame lies inside the mapping; the chain never names
        // its head frame as a fragment, and ChainFrags only reaches the fragment frames, so
        // this slice aliases nothing else while `f` runs (&mut self keeps other users out).
        let frame = unsafe { std::slice::from_raw_parts_mut(self.base.add(head * FRAME_SIZE), FRAME_SIZE) };
        let mut frags = ChainFrags { bufs: self, ids, n, released_from: n };
        let r = f(frame, &mut frags);
        let (ids, n, orig) = (frags.ids, frags.n, frags.released_from);
        let frag_len: usize = ids[..n].iter().map(|&i| self.seg_meta(BufId(i)).len as usize).sum();
        if n < orig {
            if n > 0 {
                let last = BufId(ids[n - 1]);
                let m = self.seg_meta(last);
                self.set_seg_meta(last, SegMeta { next: NO_SEG, ..m });
            }
            for &i in &ids[n..orig] {
                self.free_frame(BufId(i));
            }
        }
        p.frag_len = frag_len as u32;
        r
    }
}

/// Iterator over a chain's fragments (see [`BufCache::frags`]).
pub struct Frags<'a> {
    bufs: &'a BufCache,
    next: u32,
    left: usize,
    steps: usize,
}

impl Iterator for Frags<'_> {
    type Item = (BufId, SegMeta);

    fn next(&mut self) -> Option<(BufId, SegMeta)> {
        if self.left == 0 || self.next == NO_SEG || self.next as usize >= self.bufs.capacity() || self.steps >= MAX_FRAGS {
            return None;
        }
        let id = BufId(self.next);
        let m = self.bufs.seg_meta(id);
        let len = m.range().len().min(self.left);
        self.left -= len;
        self.next = m.next;
        self.steps += 1;
        Some((id, SegMeta { len: len as u16, ..m }))
    }
}

/// A chain's fragments seen by an XDP program's helpers (see [`BufCache::with_xdp_frags`]).
pub struct ChainFrags<'a> {
    bufs: &'a BufCache,
    ids: [u32; MAX_FRAGS],
    n: usize,
    /// Fragments from here to the original count were released by a shrink.
    released_from: usize,
}

impl ChainFrags<'_> {
    fn ptr(&self, i: usize) -> Option<(*mut u8, SegMeta)> {
        let id = BufId(*self.ids[..self.n].get(i)?);
        let m = self.bufs.seg_meta(id);
        let r = m.range();
        Some((self.bufs.frame_addr(id) as *mut u8, SegMeta { off: r.start as u16, len: r.len() as u16, ..m }))
    }
}

impl sluice_ebpf::XdpFrags for ChainFrags<'_> {
    fn nr_frags(&self) -> usize {
        self.n
    }

    fn frag(&self, i: usize) -> &[u8] {
        match self.ptr(i) {
            // SAFETY: the frame is one of this chain's fragments, inside the mapping, owned by
            // the packet's holder for the duration of `with_xdp_frags`; bounds are clamped.
            Some((base, m)) => unsafe { std::slice::from_raw_parts(base.add(m.off as usize), m.len as usize) },
            None => &[],
        }
    }

    fn frag_mut(&mut self, i: usize) -> &mut [u8] {
        match self.ptr(i) {
            // SAFETY: as in `frag`; &mut self makes this the only view of the fragment.
            Some((base, m)) => unsafe { std::slice::from_raw_parts_mut(base.add(m.off as usize), m.len as usize) },
            None => &mut [],
        }
    }

    fn frag_tailroom(&self, i: usize) -> usize {
        self.ptr(i).map(|(_, m)| FRAME_SIZE - m.off as usize - m.len as usize).unwrap_or(0)
    }

    fn grow_last(&mut self, n: usize) -> bool {
        let Some(last) = self.n.checked_sub(1) else { return false };
        if self.frag_tailroom(last) < n {
            return false;
        }
        let Some((base, m)) = self.ptr(last) else { return false };
        // SAFETY: as in `frag`; the grown bytes lie within the frame (tailroom checked).
        unsafe { std::ptr::write_bytes(base.add(m.off as usize + m.len as usize), 0, n) };
        self.bufs.set_seg_meta(BufId(self.ids[last]), SegMeta { len: m.len + n as u16, ..m });
        true
    }

    fn shrink_last(&mut self, n: usize) {
        let Some(last) = self.n.checked_sub(1) else { return };
        let Some((_, m)) = self.ptr(last) else { return };
        let len = (m.len as usize).saturating_sub(n);
        self.bufs.set_seg_meta(BufId(self.ids[last]), SegMeta { len: len as u16, ..m });
        if len == 0 {
            self.n -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, HEADROOM};
    use sluice_ebpf::XdpFrags;

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn chains_hold_every_byte_and_free_every_frame() {
        let pool = Pool::new(512).unwrap();
        let mut c = pool.cache();
        for n in [0, 1, 14, MAX_DATA - 1, MAX_DATA, MAX_DATA + 1, 9000, 65535, MAX_CHAIN_BYTES] {
            let b = bytes(n);
            let p = c.alloc_copy(&b).unwrap();
            assert_eq!(p.total_len(), n);
            assert_eq!(p.is_chained(), n > MAX_DATA);
            assert_eq!(c.to_vec(p), b, "{n} bytes");
            let frames = 1 + n.saturating_sub(MAX_DATA).div_ceil(FRAME_SIZE);
            assert_eq!(c.in_use(), frames as i64);
            let mut mid = vec![0u8; 100];
            let got = c.copy_out(p, n / 2, &mut mid);
            assert_eq!(&mid[..got], &b[n / 2..(n / 2 + 100).min(n)]);
            c.free(p);
            assert_eq!(c.in_use(), 0);
        }
        assert!(c.alloc_copy(&bytes(MAX_CHAIN_BYTES + 1)).is_none());
    }

    /// A frame whose data grew into the headroom (bpf_xdp_adjust_head down to the reserved
    /// bytes) holds more than a buffer's `MAX_DATA`: its copy is a chain of every byte, not
    /// cut at `MAX_DATA`.
    #[test]
    fn a_clone_of_a_frame_grown_into_its_headroom_keeps_every_byte() {
        let pool = Pool::new(16).unwrap();
        let mut c = pool.cache();
        let b = bytes(MAX_DATA);
        let mut p = c.alloc_copy(&b).unwrap();
        p.off = 40;
        p.len = (FRAME_SIZE - 40) as u16;
        let whole = c.to_vec(p);
        assert_eq!(whole.len(), FRAME_SIZE - 40);
        let q = c.clone_pkt(p).unwrap();
        assert_eq!(q.total_len(), FRAME_SIZE - 40);
        assert!(q.is_chained());
        assert_eq!(c.to_vec(q), whole);
        c.free(q);
        c.free(p);
        assert_eq!(c.in_use(), 0);
    }

    #[test]
    fn exhaustion_mid_chain_keeps_nothing() {
        let pool = Pool::new(4).unwrap();
        let mut c = pool.cache();
        assert!(c.alloc_copy(&bytes(MAX_DATA + 4 * FRAME_SIZE)).is_none());
        assert_eq!(c.in_use(), 0);
        assert!(c.alloc_copy(&bytes(MAX_DATA + 3 * FRAME_SIZE)).is_some());
    }

    #[test]
    fn checksum_sums_cross_fragments_as_one_buffer() {
        use crate::wire::checksum::{fold, sum_be16};
        let pool = Pool::new(64).unwrap();
        let mut c = pool.cache();
        let b = bytes(9001);
        let p = c.alloc_copy(&b).unwrap();
        for (off, len) in [(0, 9001), (1, 9000), (14, 4000), (MAX_DATA - 1, 3), (MAX_DATA + 1, FRAME_SIZE), (9000, 1), (9001, 0)] {
            assert_eq!(fold(c.sum_be16_range(p, off, len)), fold(sum_be16(&b[off..off + len])), "[{off}, +{len})");
        }
        assert_eq!(fold(c.sum_be16_from(p, 33)), fold(sum_be16(&b[33..])));
        c.free(p);
    }

    #[test]
    fn trim_cuts_at_any_point() {
        let pool = Pool::new(64).unwrap();
        let mut c = pool.cache();
        let b = bytes(9000);
        for keep in [9000, 8999, 5888, 5887, MAX_DATA + 1, MAX_DATA, 100, 0] {
            let mut p = c.alloc_copy(&b).unwrap();
            c.trim(&mut p, keep);
            assert_eq!(c.to_vec(p), &b[..keep], "trim to {keep}");
            c.free(p);
            assert_eq!(c.in_use(), 0, "trim to {keep} leaked");
        }
    }

    #[test]
    fn xdp_view_grows_shrinks_and_releases() {
        let pool = Pool::new(64).unwrap();
        let mut c = pool.cache();
        let b = bytes(MAX_DATA + FRAME_SIZE + 10);
        let mut p = c.alloc_copy(&b).unwrap();
        let head = p.buf;
        c.with_xdp_frags(&mut p, |frame, f| {
            assert_eq!(&frame[HEADROOM..HEADROOM + 4], &b[..4]);
            assert_eq!(f.nr_frags(), 2);
            assert_eq!(f.frags_len(), FRAME_SIZE + 10);
            assert_eq!(f.frag(1), &b[MAX_DATA + FRAME_SIZE..]);
            assert_eq!(f.frag_tailroom(1), FRAME_SIZE - 10);
            f.frag_mut(0)[0] = 0xee;
            assert!(f.grow_last(6));
            assert!(!f.grow_last(FRAME_SIZE));
            f.shrink_last(16);
        });
        assert_eq!(p.buf, head);
        assert_eq!(p.frag_len as usize, FRAME_SIZE);
        assert_eq!(c.in_use(), 2, "the emptied fragment went back to the pool");
        let v = c.to_vec(p);
        assert_eq!(v.len(), MAX_DATA + FRAME_SIZE);
        assert_eq!(v[MAX_DATA], 0xee);
        c.free(p);
        assert_eq!(c.in_use(), 0);
    }
}
