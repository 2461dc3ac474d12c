//! The AF_XDP socket ABI (`linux/if_xdp.h`), written out here so the build needs no kernel
//! headers, and the four rings mapped from a socket.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU32, Ordering};

pub const SOL_XDP: libc::c_int = 283;
pub const AF_XDP: libc::c_int = 44;

pub const XDP_MMAP_OFFSETS: libc::c_int = 1;
pub const XDP_RX_RING: libc::c_int = 2;
pub const XDP_TX_RING: libc::c_int = 3;
pub const XDP_UMEM_REG: libc::c_int = 4;
pub const XDP_UMEM_FILL_RING: libc::c_int = 5;
pub const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
pub const XDP_STATISTICS: libc::c_int = 7;
pub const XDP_OPTIONS: libc::c_int = 8;

/// `sockaddr_xdp.sxdp_flags`.
pub const XDP_SHARED_UMEM: u16 = 1 << 0;
pub const XDP_COPY: u16 = 1 << 1;
pub const XDP_ZEROCOPY: u16 = 1 << 2;
pub const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
pub const XDP_USE_SG: u16 = 1 << 4;

/// A ring's `flags` word: the kernel wants a syscall to make progress.
pub const XDP_RING_NEED_WAKEUP: u32 = 1;
/// `xdp_desc.options`: more descriptors of this packet follow (multi-buffer).
pub const XDP_PKT_CONTD: u32 = 1;
/// `XDP_OPTIONS` result: the socket is bound in zero-copy mode.
pub const XDP_OPTIONS_ZEROCOPY: u32 = 1;

const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct XdpRingOffset {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    pub flags: u64,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct XdpMmapOffsets {
    pub rx: XdpRingOffset,
    pub tx: XdpRingOffset,
    pub fr: XdpRingOffset,
    pub cr: XdpRingOffset,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct XdpUmemReg {
    pub addr: u64,
    pub len: u64,
    pub chunk_size: u32,
    pub headroom: u32,
    pub flags: u32,
    pub tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct SockaddrXdp {
    pub family: u16,
    pub flags: u16,
    pub ifindex: u32,
    pub queue_id: u32,
    pub shared_umem_fd: u32,
}

/// An rx / tx descriptor: a UMEM address (the chunk plus the data's offset in it).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// `XDP_STATISTICS`: what the kernel dropped or found wrong on this socket.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, serde::Serialize, PartialEq, Eq)]
pub struct XdpStatistics {
    /// Frames dropped for reasons other than a full ring or missing fill buffers (too long
    /// for the frame without multi-buffer, say).
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn xsk_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked before it is owned.
    let fd = cvt(unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn setsockopt<T>(fd: RawFd, opt: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` is a live value of the size passed.
    cvt(unsafe { libc::setsockopt(fd, SOL_XDP, opt, val as *const T as *const libc::c_void, std::mem::size_of::<T>() as libc::socklen_t) })
        .map(|_| ())
}

pub fn getsockopt<T: Default>(fd: RawFd, opt: libc::c_int) -> io::Result<T> {
    let mut val = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` is writable for `len` bytes; the kernel writes at most that.
    cvt(unsafe { libc::getsockopt(fd, SOL_XDP, opt, &mut val as *mut T as *mut libc::c_void, &mut len) })?;
    Ok(val)
}

pub fn bind(fd: RawFd, sa: &SockaddrXdp) -> io::Result<()> {
    // SAFETY: `sa` is a sockaddr_xdp of the size passed.
    cvt(unsafe { libc::bind(fd, sa as *const SockaddrXdp as *const libc::sockaddr, std::mem::size_of::<SockaddrXdp>() as libc::socklen_t) })
        .map(|_| ())
}

/// Which of the four rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingKind {
    Rx,
    Tx,
    Fill,
    Completion,
}

/// One mapped ring. The user side is the producer of fill and tx, the consumer of rx and
/// completion; the kernel the other. Cached indices save reading the shared ones (a cache
/// line the kernel writes) on every call.
pub struct Ring {
    map: *mut libc::c_void,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut u8,
    mask: u32,
    size: u32,
    cached_prod: u32,
    cached_cons: u32,
}

// SAFETY: the mapping belongs to this Ring alone (one worker drives one socket's rings).
unsafe impl Send for Ring {}

impl Ring {
    /// Maps ring `kind` of socket `fd` (its size already set with setsockopt).
    pub fn map(fd: &OwnedFd, kind: RingKind, size: u32, off: &XdpMmapOffsets) -> io::Result<Ring> {
        let (o, pgoff, desc_size) = match kind {
            RingKind::Rx => (off.rx, XDP_PGOFF_RX_RING, std::mem::size_of::<XdpDesc>()),
            RingKind::Tx => (off.tx, XDP_PGOFF_TX_RING, std::mem::size_of::<XdpDesc>()),
            RingKind::Fill => (off.fr, XDP_UMEM_PGOFF_FILL_RING, 8),
            RingKind::Completion => (off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, 8),
        };
        let map_len = o.desc as usize + size as usize * desc_size;
        // SAFETY: a shared mapping of the socket's ring at the kernel's page offset; checked.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = map as *mut u8;
        // SAFETY: the kernel's offsets lie inside the mapping it sized (XDP_MMAP_OFFSETS), and
        // the index words are 4-byte aligned u32s the kernel updates atomically.
        let (producer, consumer, flags, desc) = unsafe {
            (
                base.add(o.producer as usize) as *const AtomicU32,
                base.add(o.consumer as usize) as *const AtomicU32,
                base.add(o.flags as usize) as *const AtomicU32,
                base.add(o.desc as usize),
            )
        };
        let mut r = Ring { map, map_len, producer, consumer, flags, desc, mask: size - 1, size, cached_prod: 0, cached_cons: 0 };
        r.cached_prod = r.prod().load(Ordering::Relaxed);
        r.cached_cons = r.cons().load(Ordering::Relaxed);
        Ok(r)
    }

    #[inline(always)]
    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into our live mapping (see `map`).
        unsafe { &*self.producer }
    }

    #[inline(always)]
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }

    /// The kernel asks for a syscall (sendto for tx, recvfrom/poll for fill). A full fence
    /// first: the producer index just published must be visible before the flag is read, or
    /// the kernel could go to sleep between the two and miss both.
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        fence(Ordering::SeqCst);
        // SAFETY: as above.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    // --- user side produces (fill, tx) ---

    /// Free slots, at least `want` if the kernel consumed enough (reads its consumer index
    /// only when the cached view has too few).
    #[inline]
    pub fn prod_free(&mut self, want: u32) -> u32 {
        let free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        if free >= want {
            return free;
        }
        // Acquire: the kernel's reads of the slots it consumed are done before we reuse them.
        self.cached_cons = self.cons().load(Ordering::Acquire);
        self.size - self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Writes fill-ring entry `i` slots past the producer (not yet published).
    #[inline(always)]
    pub fn put_addr(&mut self, i: u32, addr: u64) {
        let slot = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot <= mask < size, inside the u64 array the mapping holds.
        unsafe { (self.desc as *mut u64).add(slot).write(addr) }
    }

    /// Writes tx descriptor `i` slots past the producer (not yet published).
    #[inline(always)]
    pub fn put_desc(&mut self, i: u32, d: XdpDesc) {
        let slot = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot <= mask < size, inside the descriptor array the mapping holds.
        unsafe { (self.desc as *mut XdpDesc).add(slot).write(d) }
    }

    /// Publishes `n` written entries. Release: the entries are visible before the index.
    #[inline]
    pub fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.prod().store(self.cached_prod, Ordering::Release);
    }

    /// Our producer index (entries published so far, wrapping).
    #[inline]
    pub fn prod_index(&self) -> u32 {
        self.cached_prod
    }

    /// Entries the kernel has not consumed yet (tx: descriptors still to send).
    #[inline]
    pub fn prod_pending(&mut self) -> u32 {
        self.cached_cons = self.cons().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    // --- user side consumes (rx, completion) ---

    /// Entries ready to read, up to `max` (reads the kernel's producer index when the cached
    /// view is exhausted). Acquire: the entries' contents are visible after the index.
    #[inline]
    pub fn cons_ready(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            self.cached_prod = self.prod().load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        n.min(max)
    }

    #[inline(always)]
    pub fn get_addr(&self, i: u32) -> u64 {
        let slot = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot < size, inside the mapping's u64 array.
        unsafe { (self.desc as *const u64).add(slot).read() }
    }

    #[inline(always)]
    pub fn get_desc(&self, i: u32) -> XdpDesc {
        let slot = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot < size, inside the mapping's descriptor array.
        unsafe { (self.desc as *const XdpDesc).add(slot).read() }
    }

    /// A tx descriptor the kernel already consumed, `k` before its consumer index as last
    /// read (0: the last one it took). Ours to read: the slot is only rewritten by our next
    /// `put_desc` there.
    #[inline]
    pub fn consumed_desc(&self, k: u32) -> XdpDesc {
        let slot = (self.cached_cons.wrapping_sub(1).wrapping_sub(k) & self.mask) as usize;
        // SAFETY: slot <= mask < size, inside the descriptor array the mapping holds.
        unsafe { (self.desc as *const XdpDesc).add(slot).read() }
    }

    /// Gives `n` read entries back to the kernel. Release: our reads are done first.
    #[inline]
    pub fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.cons().store(self.cached_cons, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: exactly our mapping; nothing uses the pointers after drop.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// Kicks the tx path: sendto with no data (MSG_DONTWAIT). EAGAIN / ENOBUFS mean "try again
/// later" (copy mode sends at most 32 frames per call). EBUSY in copy mode is no "later": the
/// device dropped the frame the kernel was sending (NET_XMIT_DROP, e.g. no carrier); that
/// frame is consumed and completed, the ones behind it wait. ENETDOWN: the interface is
/// down, nothing was consumed.
pub fn kick_tx(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length send with no buffer and no address.
    let r = unsafe { libc::sendto(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Wakes the rx side when the fill ring asks for it (recvfrom with no buffer).
pub fn kick_rx(fd: RawFd) {
    // SAFETY: a zero-length receive with no buffer and no address.
    unsafe { libc::recvfrom(fd, std::ptr::null_mut(), 0, libc::MSG_DONTWAIT, std::ptr::null_mut(), std::ptr::null_mut()) };
}
