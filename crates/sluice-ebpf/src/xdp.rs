//! The XDP packet interface of the runtime: the buffer handed to a program, the 24-byte
//! `struct xdp_md` context it sees, the run outcome, and `LowMem` (buffers below 4 GiB).
//!
//! `struct xdp_md` carries `data`, `data_end` and `data_meta` as **32-bit** addresses (the
//! program casts them back to pointers with `(void *)(long)ctx->data`). A userspace runtime
//! can therefore only run programs on buffers that lie entirely below 4 GiB: sluice's buffer
//! pool is mapped with `MAP_32BIT`, tests and tools use [`LowMem`].

use std::io;

/// Headroom the kernel reserves in front of the packet for XDP (`XDP_PACKET_HEADROOM`).
pub const XDP_PACKET_HEADROOM: usize = 256;

/// Bytes at the start of the headroom that `bpf_xdp_adjust_head` / `bpf_xdp_adjust_meta`
/// never hand out: the kernel keeps room for the `struct xdp_frame` it writes there when
/// the packet is redirected (`sizeof(struct xdp_frame)` = 40 on 64-bit: data pointer,
/// len/headroom, metasize, mem info, dev_rx pointer, frame_sz, flags).
pub const XDP_FRAME_RESERVED: usize = 40;

/// Default tailroom kept free at the end of the frame by `bpf_xdp_adjust_tail`: the kernel
/// reserves `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` = 320 bytes on x86-64 so an skb
/// can later be built around the buffer. Configurable per engine ([`crate::RunConfig`]).
pub const XDP_TAILROOM_DEFAULT: usize = 320;

/// Minimum packet length the size-changing helpers keep (`ETH_HLEN`).
pub const ETH_HLEN: usize = 14;

/// Default maximum metadata length accepted by `bpf_xdp_adjust_meta`: current kernels (checked
/// against 6.18 with BPF_PROG_TEST_RUN) limit it by `skb_shared_info::meta_len`, a u8, so 255
/// (252 with the multiple-of-4 rule); the headroom minus [`XDP_FRAME_RESERVED`] is the other
/// bound. Configurable per engine ([`crate::RunConfig::meta_max`]).
pub const XDP_META_MAX: usize = 255;

/// The metadata limit of older kernels (32 bytes), for [`crate::RunConfig::meta_max`].
pub const XDP_META_MAX_LEGACY: usize = 32;

/// Size of `struct xdp_md`.
pub const XDP_MD_SIZE: usize = 24;

/// `struct xdp_md` exactly as the program reads it (all fields u32, 24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpMd {
    pub data: u32,
    pub data_end: u32,
    pub data_meta: u32,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
}

impl XdpMd {
    /// The little-endian byte image of the context (what a program load sees).
    #[inline]
    pub fn to_bytes(&self) -> [u8; XDP_MD_SIZE] {
        let mut b = [0u8; XDP_MD_SIZE];
        let f = [self.data, self.data_end, self.data_meta, self.ingress_ifindex, self.rx_queue_index, self.egress_ifindex];
        for (i, v) in f.iter().enumerate() {
            b[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        b
    }
}

/// One packet as handed to an XDP program.
///
/// `frame` is the whole buffer including headroom (its start is the kernel's
/// `data_hard_start`, its end the hard end); `data_meta <= data <= data_end <= frame.len()`
/// are offsets into it (`data_meta == data` when there is no metadata). After a run the
/// offsets reflect `bpf_xdp_adjust_head/meta/tail`.
pub struct XdpBuff<'a> {
    pub frame: &'a mut [u8],
    pub data: usize,
    pub data_end: usize,
    pub data_meta: usize,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
    /// The fragments after `data_end` of a multi-buffer packet (None: one buffer).
    pub frags: Option<&'a mut dyn XdpFrags>,
    /// Tail calls made so far on this packet (counted by `bpf_tail_call`, which falls
    /// through after [`MAX_TAIL_CALL_CNT`], as the kernel's, whether the calls were made
    /// from entry functions or from subprograms).
    pub tail_calls: u32,
    /// The redirect an earlier program of this packet's tail-call chain chose: the next one
    /// starts with it, as the kernel's per-CPU redirect info outlives a tail call (a program
    /// may pick the target and leave the XDP_REDIRECT verdict to the program it calls).
    pub redirect: Option<RedirectTarget>,
}

/// The kernel's MAX_TAIL_CALL_CNT: tail calls one packet's run may chain.
pub const MAX_TAIL_CALL_CNT: u32 = 33;

impl std::fmt::Debug for XdpBuff<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpBuff")
            .field("frame_len", &self.frame.len())
            .field("data", &self.data)
            .field("data_end", &self.data_end)
            .field("data_meta", &self.data_meta)
            .field("ingress_ifindex", &self.ingress_ifindex)
            .field("rx_queue_index", &self.rx_queue_index)
            .field("egress_ifindex", &self.egress_ifindex)
            .field("frags_len", &self.frags.as_ref().map(|f| f.frags_len()))
            .field("tail_calls", &self.tail_calls)
            .field("redirect", &self.redirect)
            .finish()
    }
}

impl<'a> XdpBuff<'a> {
    /// A buffer whose packet starts at `headroom` and is `len` bytes long, without metadata.
    pub fn new(frame: &'a mut [u8], headroom: usize, len: usize) -> XdpBuff<'a> {
        XdpBuff {
            frame,
            data: headroom,
            data_end: headroom.saturating_add(len),
            data_meta: headroom,
            ingress_ifindex: 0,
            rx_queue_index: 0,
            egress_ifindex: 0,
            frags: None,
            tail_calls: 0,
            redirect: None,
        }
    }

    /// The packet bytes `[data, data_end)` (empty if the offsets are inconsistent).
    pub fn packet(&self) -> &[u8] {
        self.frame.get(self.data..self.data_end).unwrap_or(&[])
    }

    /// The metadata bytes `[data_meta, data)` (empty if the offsets are inconsistent).
    pub fn meta(&self) -> &[u8] {
        self.frame.get(self.data_meta..self.data).unwrap_or(&[])
    }
}

/// The fragments of a multi-buffer packet (the kernel's `skb_shared_info` frags of an
/// `xdp_buff`): what follows the linear part `[data, data_end)`, in order.
///
/// A program declared frags-aware (`SEC("xdp.frags")`) reaches these bytes only through
/// helpers (`bpf_xdp_get_buff_len`, `bpf_xdp_load_bytes`/`store_bytes`, `bpf_xdp_adjust_tail`);
/// direct packet access stops at `data_end`. Implemented by sluice's buffer chains (2 KiB
/// frames of the pool) and by `xdp run`'s test-run pages (4 KiB, as `BPF_PROG_TEST_RUN`).
pub trait XdpFrags {
    /// Number of fragments (`nr_frags`).
    fn nr_frags(&self) -> usize;
    /// The bytes of fragment `i` (empty when `i >= nr_frags()`).
    fn frag(&self, i: usize) -> &[u8];
    /// The bytes of fragment `i`, writable.
    fn frag_mut(&mut self, i: usize) -> &mut [u8];
    /// Bytes fragment `i` may still grow by at its end (its frame's tailroom).
    fn frag_tailroom(&self, i: usize) -> usize;
    /// Grows the last fragment by `n` zeroed bytes; false (nothing changed) without room.
    fn grow_last(&mut self, n: usize) -> bool;
    /// Shrinks the last fragment by `n <= its length` bytes; an emptied fragment is released.
    fn shrink_last(&mut self, n: usize);
    /// Total bytes in fragments (`xdp_frags_size`).
    fn frags_len(&self) -> usize {
        (0..self.nr_frags()).map(|i| self.frag(i).len()).sum()
    }
}

/// Fragments in pages of their own, as `BPF_PROG_TEST_RUN` builds them for a frame longer
/// than its linear part: each fragment starts at offset 0 of a `page_size` page (the
/// kernel's PAGE_SIZE, 4096), so it may grow to the page's end.
#[derive(Debug, Clone, Default)]
pub struct PageFrags {
    pages: Vec<Vec<u8>>,
    page_size: usize,
}

impl PageFrags {
    /// Splits `bytes` into fragments of `page_size` (at most `max_frags`); None when they
    /// need more (the kernel's test run fails with -ENOMEM then).
    pub fn split(bytes: &[u8], page_size: usize, max_frags: usize) -> Option<PageFrags> {
        let pages: Vec<Vec<u8>> = bytes.chunks(page_size.max(1)).map(<[u8]>::to_vec).collect();
        (pages.len() <= max_frags).then_some(PageFrags { pages, page_size })
    }

    /// The fragments' bytes, in order.
    pub fn bytes(&self) -> impl Iterator<Item = &[u8]> {
        self.pages.iter().map(Vec::as_slice)
    }
}

impl XdpFrags for PageFrags {
    fn nr_frags(&self) -> usize {
        self.pages.len()
    }
    fn frag(&self, i: usize) -> &[u8] {
        self.pages.get(i).map_or(&[], Vec::as_slice)
    }
    fn frag_mut(&mut self, i: usize) -> &mut [u8] {
        self.pages.get_mut(i).map_or(&mut [], Vec::as_mut_slice)
    }
    fn frag_tailroom(&self, i: usize) -> usize {
        self.pages.get(i).map_or(0, |p| self.page_size.saturating_sub(p.len()))
    }
    fn grow_last(&mut self, n: usize) -> bool {
        let room = self.pages.len().checked_sub(1).map_or(0, |l| self.frag_tailroom(l));
        match self.pages.last_mut() {
            Some(p) if n <= room => {
                p.resize(p.len() + n, 0);
                true
            }
            _ => false,
        }
    }
    fn shrink_last(&mut self, n: usize) {
        if let Some(p) = self.pages.last_mut() {
            p.truncate(p.len().saturating_sub(n));
            if p.is_empty() {
                self.pages.pop();
            }
        }
    }
}

/// Where `bpf_redirect` / `bpf_redirect_map` sent the packet (the kernel's `bpf_redirect_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RedirectTarget {
    /// Transmit on this interface (`bpf_redirect`, DEVMAP, DEVMAP_HASH).
    Ifindex(u32),
    /// Enqueue to this CPU (worker) (CPUMAP; the value is the map key).
    Cpu(u32),
    /// Deliver to this local AF_XDP-like consumer id (XSKMAP value).
    Xsk(u32),
}

/// Result of one program run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOutcome {
    /// The program's return value (low 32 bits of r0). Values above `XDP_REDIRECT` are
    /// invalid actions: the kernel warns and treats them like `XDP_ABORTED`
    /// (see [`RunOutcome::action_or_aborted`]).
    pub action: u32,
    /// The recorded redirect target; only `Some` when `action == XDP_REDIRECT` and the program
    /// called a redirect helper successfully. `XDP_REDIRECT` with `None` is a failed redirect
    /// (the kernel drops the packet).
    pub redirect: Option<RedirectTarget>,
}

impl RunOutcome {
    /// The action with invalid values folded into `XDP_ABORTED`.
    pub fn action_or_aborted(&self) -> u32 {
        if self.action <= crate::insn::XDP_REDIRECT {
            self.action
        } else {
            crate::insn::XDP_ABORTED
        }
    }
}

/// An anonymous private mapping below 4 GiB (`MAP_32BIT`), for packet buffers in tests and
/// tools. Unmapped on drop.
#[derive(Debug)]
pub struct LowMem {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: LowMem exclusively owns its mapping; access goes through &self / &mut self.
unsafe impl Send for LowMem {}
// SAFETY: shared access only hands out `&[u8]`, which is read-only.
unsafe impl Sync for LowMem {}

impl LowMem {
    /// Maps `len` bytes (rounded up to pages, at least one page) of zeroed memory below 4 GiB.
    pub fn new(len: usize) -> io::Result<LowMem> {
        let len = len.max(1);
        #[cfg(target_arch = "x86_64")]
        let (hint, flags) = (std::ptr::null_mut(), libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT);
        #[cfg(not(target_arch = "x86_64"))]
        let (hint, flags) = (0x4000_0000usize as *mut libc::c_void, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS);
        // SAFETY: an anonymous mapping with no fixed address cannot clobber existing memory.
        let p = unsafe { libc::mmap(hint, len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mem = LowMem { ptr: p.cast(), len };
        if (mem.ptr as usize).saturating_add(len) > u32::MAX as usize {
            return Err(io::Error::other("could not map memory below 4 GiB"));
        }
        Ok(mem)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes, alive as long as self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` writable bytes, exclusively borrowed through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for LowMem {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly the mapping created in `new`, unmapped once.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}
