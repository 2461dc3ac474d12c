//! `afxdp`: a real interface through AF_XDP sockets, one per receive queue.
//!
//! The UMEM is the buffer pool's own region (mapped below 4 GiB, 2 KiB chunks, the data at
//! XDP_PACKET_HEADROOM as sluice's frames have it), registered once and shared by every
//! socket (XDP_SHARED_UMEM, each socket with its own fill and completion ring): a received
//! descriptor *is* a `Pkt` (`addr / FRAME_SIZE`, `addr % FRAME_SIZE`, `len`), and a frame
//! received on one interface goes out of another without a copy in userspace. The fill ring
//! is stocked from the worker's `BufCache`; completions give the frames back to it.
//!
//! In the kernel, the port attaches its own program (`bpf.rs`: XSKMAP redirect by
//! `rx_queue_index`, XDP_PASS when no socket is bound) with a BPF link, so it is detached
//! when the process ends however it ends.
//!
//! Doorbells follow `xmit_more`: descriptors are published on every burst, but `sendto`
//! runs only on a burst with `more == false` (or a full ring), and only when the tx ring's
//! `need_wakeup` flag asks for it. Copy mode sends at most 32 frames per `sendto`, so a
//! doorbell may take several calls; each call is counted in `PortStats::doorbells`.

pub mod bpf;
pub mod object;
pub mod sys;

use super::{Port, PortStats};
use crate::buf::chain::{SegMeta, MAX_CHAIN_BYTES, MAX_FRAGS, NO_SEG};
use crate::buf::{BufCache, BufId, Pkt, Pool, FRAME_SIZE, HEADROOM};
use crate::tx::bql::TxqState;
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use sys::{Ring, RingKind, SockaddrXdp, XdpDesc, XdpStatistics};

/// How a socket binds: `copy` (any driver, veth included), `zerocopy` (drivers with AF_XDP
/// zero-copy support), `auto` (zero-copy when the driver has it, else copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BindMode {
    Copy,
    Zerocopy,
    #[default]
    Auto,
}

/// Where the redirect program runs: `native` (driver XDP), `generic` (skb XDP), `auto`
/// (native when the driver has it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachMode {
    #[default]
    Auto,
    Native,
    Generic,
}

/// `[ports.afxdp]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AfXdpConfig {
    /// `copy`, `zerocopy` or `auto`.
    pub xdp_mode: BindMode,
    /// Where the redirect program runs.
    pub attach: AttachMode,
    /// Entries of each of the four rings (a power of two).
    pub ring_size: u32,
    /// Frames each socket keeps lent to the kernel for receiving (in the fill ring, the rx
    /// ring or the kernel's hands; at most `ring_size`). What absorbs the time the worker
    /// is not polling: the kernel drops what finds the fill ring empty.
    pub fill_frames: u32,
    /// A user XDP object (ELF) to put in the kernel in front of the sockets instead of the
    /// built-in redirect program; its XSKMAP `xsks_map` gets the sockets.
    pub xdp_object: Option<PathBuf>,
    /// The object's program (function or section name; default its first XDP program).
    pub xdp_section: Option<String>,
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        AfXdpConfig {
            xdp_mode: BindMode::Auto,
            attach: AttachMode::Auto,
            ring_size: 2048,
            fill_frames: 2048,
            xdp_object: None,
            xdp_section: None,
        }
    }
}

impl AfXdpConfig {
    /// Checks the sizes; the error names the setting.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !self.ring_size.is_power_of_two() || !(64..=32768).contains(&self.ring_size) {
            return Err(("ring_size", format!("{}: a power of two in 64..=32768", self.ring_size)));
        }
        if self.fill_frames == 0 || self.fill_frames > self.ring_size {
            return Err(("fill_frames", format!("{}: between 1 and ring_size ({})", self.fill_frames, self.ring_size)));
        }
        if self.xdp_section.is_some() && self.xdp_object.is_none() {
            return Err(("xdp_section", "names a program of `xdp_object`, which is not set".into()));
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AfXdpError {
    #[error("no network interface named `{0}` (`ip link show` lists them)")]
    NoSuchInterface(String),
    #[error(
        "{iface}: {what}: permission denied; AF_XDP needs root, or CAP_NET_ADMIN + CAP_NET_RAW + CAP_BPF \
         (and CAP_IPC_LOCK or a RLIMIT_MEMLOCK (`ulimit -l`) above the buffer pool's size)"
    )]
    Privileges { iface: String, what: &'static str },
    #[error(
        "{iface} already has an XDP program attached ({source}): remove it with `ip link set dev {iface} xdp off` \
         (or see `xdp-loader status {iface}`), or use another interface"
    )]
    XdpBusy { iface: String, source: io::Error },
    #[error("this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS is off): use an `afpacket` port instead")]
    NoAfXdp,
    #[error(
        "{iface} queue {queue}: zero-copy bind refused ({source}): the driver has no AF_XDP zero-copy; use xdp_mode = \"copy\" or \"auto\""
    )]
    NoZeroCopy { iface: String, queue: u32, source: io::Error },
    #[error("{iface} queue {queue} is already bound to another AF_XDP socket (another sluice, or another AF_XDP program): stop it, or use another queue or interface")]
    QueueBusy { iface: String, queue: u32 },
    #[error("{iface} has {have} receive queue(s), {want} asked (`ethtool -L {iface} combined N` adds queues)")]
    Queues { iface: String, have: u32, want: u32 },
    #[error("{iface}: XDP object {}: {msg}", path.display())]
    Object { iface: String, path: PathBuf, msg: String },
    #[error("{iface}: the kernel refused the XDP redirect program ({source}): {log}")]
    Program { iface: String, source: io::Error, log: String },
    #[error("{iface}: {what}: {source}")]
    Sys { iface: String, what: &'static str, source: io::Error },
    #[error("[ports.afxdp] {0}: {1}")]
    Config(&'static str, String),
}

impl AfXdpError {
    /// The error for a failed call `what`: EPERM/EACCES say which privileges are missing,
    /// EAFNOSUPPORT that the kernel has no AF_XDP.
    fn sys(iface: &str, what: &'static str, e: io::Error) -> AfXdpError {
        match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => AfXdpError::Privileges { iface: iface.to_string(), what },
            Some(libc::EAFNOSUPPORT) => AfXdpError::NoAfXdp,
            _ => AfXdpError::Sys { iface: iface.to_string(), what, source: e },
        }
    }
}

/// What the port reads from the interface: index, MAC, MTU, receive queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceInfo {
    pub ifindex: u32,
    pub mac: [u8; 6],
    pub mtu: u16,
    pub rx_queues: u32,
}

/// Reads `name`'s index (if_nametoindex), MAC, MTU and receive-queue count (sysfs).
pub fn iface_info(name: &str) -> Result<IfaceInfo, AfXdpError> {
    let missing = || AfXdpError::NoSuchInterface(name.to_string());
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') || name.contains('\0') {
        return Err(missing());
    }
    let cname = std::ffi::CString::new(name).map_err(|_| missing())?;
    // SAFETY: a NUL-terminated name; the call only reads it.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return Err(missing());
    }
    let dir = std::path::Path::new("/sys/class/net").join(name);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).map(|s| s.trim().to_string());
    let sys_err = |what, e| AfXdpError::Sys { iface: name.to_string(), what, source: e };
    let mac = read("address").map_err(|e| sys_err("reading its MAC address", e))?;
    let mac = super::parse_mac(&mac).unwrap_or([0; 6]);
    let mtu = read("mtu").map_err(|e| sys_err("reading its MTU", e))?.parse::<u32>().unwrap_or(1500).min(u16::MAX as u32) as u16;
    let rx_queues = std::fs::read_dir(dir.join("queues"))
        .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("rx-")).count() as u32)
        .unwrap_or(1)
        .max(1);
    Ok(IfaceInfo { ifindex, mac, mtu, rx_queues })
}

/// The kernel side of one interface: program, map and the link that attaches them; shared
/// by the interface's queues, detached when the last of them is dropped.
struct IfaceXdp {
    _link: OwnedFd,
    _prog: OwnedFd,
    _maps: Vec<OwnedFd>,
}

/// One AF_XDP socket with the frames it lent to the kernel (in its fill ring, or sent and
/// not completed), which go back to the pool once the socket is closed.
struct XskSocket {
    fd: Option<OwnedFd>,
    pool: Pool,
    /// One bit per pool frame: lent to the kernel through this socket. Only the worker that
    /// drives the socket writes it (relaxed loads and stores: plain moves).
    lent: Box<[AtomicU64]>,
    zerocopy: bool,
    sg: bool,
    /// The socket whose UMEM this one shares (kept open while sharers live, so later ports
    /// can share it too).
    umem_owner: Option<Arc<XskSocket>>,
}

impl XskSocket {
    fn raw(&self) -> RawFd {
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    #[inline(always)]
    fn lend(&self, frame: u32) {
        let w = &self.lent[(frame / 64) as usize];
        w.store(w.load(Ordering::Relaxed) | 1 << (frame % 64), Ordering::Relaxed);
    }

    #[inline(always)]
    fn unlend(&self, frame: u32) {
        let w = &self.lent[(frame / 64) as usize];
        w.store(w.load(Ordering::Relaxed) & !(1 << (frame % 64)), Ordering::Relaxed);
    }
}

impl Drop for XskSocket {
    fn drop(&mut self) {
        // Closing the socket (its queue's rings are unmapped by now: AfXdpQueue's field
        // order) takes it out of the XSKMAP and ends the kernel's use of its
        // rings; in copy mode nothing touches the frames after that, so they go back to the
        // pool. A zero-copy socket's queue is torn down later (a deferred work), and a NIC
        // could still write into its fill frames: those stay out of the pool.
        drop(self.fd.take());
        if self.zerocopy {
            return;
        }
        let mut cache = self.pool.cache();
        for (i, w) in self.lent.iter().enumerate() {
            let mut bits = w.load(Ordering::Relaxed);
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                cache.free_frame(BufId(i as u32 * 64 + b));
            }
        }
    }
}

/// Live UMEM owners, per pool (by its base address): a new socket shares one when it can.
static UMEMS: Mutex<Vec<(usize, Weak<XskSocket>)>> = Mutex::new(Vec::new());

/// Counters of an AF_XDP queue beyond `PortStats`.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct AfXdpStats {
    /// `sendto` calls (each also counted in `PortStats::doorbells`).
    pub tx_kicks: u64,
    /// Bursts whose doorbell the kernel did not need (need_wakeup clear).
    pub tx_kicks_skipped: u64,
    /// `recvfrom` calls because the fill ring asked for a wakeup.
    pub rx_wakeups: u64,
    /// Chained packets refused: the socket is not multi-buffer (XDP_USE_SG), or the chain
    /// has more than 17 buffers.
    pub tx_frags_refused: u64,
    /// Frames moved into the fill ring.
    pub fill_posted: u64,
    /// Top-ups of the fill ring that found the pool empty.
    pub fill_nobuf: u64,
    /// Frames the kernel gave back on the completion ring.
    pub tx_completed: u64,
    /// Packets taken by `tx_burst` that never left: the device dropped them (EBUSY), or the
    /// kernel had not taken them when the queue was flushed at shutdown (link down). Each is
    /// also in `take_tx_failed`.
    pub tx_dropped: u64,
    /// What the kernel counted on this socket (XDP_STATISTICS).
    pub kernel: XdpStatistics,
}

/// One receive/transmit queue of an `afxdp` port: its socket, four rings, and counters.
pub struct AfXdpQueue {
    name: String,
    iface: String,
    queue: u32,
    // Fields drop in this order: the rings are unmapped before the socket closes (each
    // mapping holds the socket's file open, so closing the fd first would leave it bound,
    // and the kernel writing into fill frames already back in the pool), and the program is
    // detached last.
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    sock: Arc<XskSocket>,
    _xdp: Arc<IfaceXdp>,
    frames: u32,
    fill_target: u32,
    /// Frames in the fill ring or taken by the kernel for receiving.
    fill_lent: u32,
    /// Descriptors on the tx ring not completed yet.
    tx_lent: u32,
    /// Frames seen but not taken (malformed descriptors, chains past MAX_CHAIN_BYTES).
    rx_dropped: u64,
    /// Packets (and bytes) taken by `tx_burst` that can never be sent here (see
    /// [`PutError::Invalid`]): reported through `take_tx_failed`.
    tx_failed: (u64, u64),
    /// The tx producer index up to which `flush_held` reported unsent descriptors failed.
    tx_written_off: u32,
    /// Each frame's length as lent for transmit, by frame: a completion gives back only the
    /// address, and BQL needs its bytes.
    tx_frame_len: Vec<u32>,
    /// The transmit queue as a driver keeps it: BQL over the completion ring, stopped while
    /// the tx ring is full, so the port's qdisc holds packets instead of dropping them.
    txq: TxqState,
    /// Time base of the BQL clock.
    epoch: Instant,
    stats: PortStats,
    xstats: AfXdpStats,
}

/// Why `put_pkt` wrote nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PutError {
    /// Not enough free slots now: the rest of the burst waits (or is the caller's to drop).
    NoRoom,
    /// Never sendable on this socket (empty or out-of-frame, a chain without multi-buffer or
    /// longer than the kernel takes): refusing it would block the packets behind it for good.
    Invalid,
}

/// Opens an `afxdp` port on interface `iface`: one queue handle per receive queue, queue 0
/// first (`queues`: how many, default all of the interface's). `name` is the port's name.
pub fn open(name: &str, iface: &str, queues: Option<u32>, cfg: &AfXdpConfig, pool: &Pool) -> Result<Vec<AfXdpQueue>, AfXdpError> {
    cfg.validate().map_err(|(f, m)| AfXdpError::Config(f, m))?;
    let info = iface_info(iface)?;
    let want = queues.unwrap_or(info.rx_queues);
    if want == 0 || want > info.rx_queues {
        return Err(AfXdpError::Queues { iface: iface.to_string(), have: info.rx_queues, want });
    }
    // The program in front of the sockets and its maps; `maps[xsks]` is the XSKMAP.
    let (prog, maps, xsks) = match &cfg.xdp_object {
        None => {
            let map = bpf::create_xskmap(info.rx_queues).map_err(|e| AfXdpError::sys(iface, "creating the XSKMAP", e))?;
            let prog = bpf::load_redirect_program(&map).map_err(|(e, log)| match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => {
                    AfXdpError::Privileges { iface: iface.to_string(), what: "loading the XDP program" }
                }
                _ => AfXdpError::Program { iface: iface.to_string(), source: e, log },
            })?;
            (prog, vec![map], 0)
        }
        Some(path) => {
            let u = object::load(path, cfg.xdp_section.as_deref()).map_err(|msg| AfXdpError::Object {
                iface: iface.to_string(),
                path: path.clone(),
                msg,
            })?;
            (u.prog, u.maps, u.xsks)
        }
    };
    let map = &maps[xsks];
    // Attached first: an interface that already has a program says so before any socket
    // is bound, and frames pass to the stack (XDP_PASS) until their queue's socket is in.
    let flags = match cfg.attach {
        AttachMode::Auto => 0,
        AttachMode::Native => bpf::XDP_FLAGS_DRV_MODE,
        AttachMode::Generic => bpf::XDP_FLAGS_SKB_MODE,
    };
    let link = bpf::attach_xdp_link(&prog, info.ifindex, flags).map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) | Some(libc::EEXIST) => AfXdpError::XdpBusy { iface: iface.to_string(), source: e },
        _ => AfXdpError::sys(iface, "attaching the XDP program (BPF link)", e),
    })?;
    let mut socks = Vec::with_capacity(want as usize);
    {
        // One at a time per process: the UMEM registry decides who owns and who shares.
        let mut umems = UMEMS.lock().unwrap_or_else(|e| e.into_inner());
        umems.retain(|(_, w)| w.strong_count() > 0);
        for q in 0..want {
            let s = open_socket(iface, info.ifindex, q, cfg, pool, &mut umems)?;
            bpf::xskmap_set(map, q, s.0.raw()).map_err(|e| AfXdpError::sys(iface, "adding the socket to the XSKMAP", e))?;
            socks.push(s);
        }
    }
    let xdp = Arc::new(IfaceXdp { _link: link, _prog: prog, _maps: maps });
    Ok(socks
        .into_iter()
        .enumerate()
        .map(|(q, (sock, [rx, tx, fill, comp]))| AfXdpQueue {
            name: name.to_string(),
            iface: iface.to_string(),
            queue: q as u32,
            sock,
            rx,
            tx,
            fill,
            comp,
            _xdp: xdp.clone(),
            frames: pool.capacity() as u32,
            fill_target: cfg.fill_frames,
            fill_lent: 0,
            tx_lent: 0,
            rx_dropped: 0,
            tx_failed: (0, 0),
            tx_written_off: 0,
            tx_frame_len: vec![0; pool.capacity()],
            txq: TxqState::default(),
            epoch: Instant::now(),
            stats: PortStats::default(),
            xstats: AfXdpStats::default(),
        })
        .collect())
}

/// Most descriptors one multi-buffer packet may take (the kernel's MAX_SKB_FRAGS in copy
/// mode; a longer chain fails at `tx_burst`, see `PutError::Invalid`).
const MAX_TX_DESCS: u32 = 17;

/// How many times a bind that found the queue busy is tried (a socket closed a moment ago
/// releases its queue in a deferred work).
const BIND_TRIES: u32 = 8;

fn bind_retrying(fd: RawFd, sa: &SockaddrXdp) -> io::Result<()> {
    let mut tries = 0;
    loop {
        match sys::bind(fd, sa) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries + 1 < BIND_TRIES => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20 * tries as u64));
            }
            r => return r,
        }
    }
}

/// Creates socket `queue` of the interface: rings sized and mapped, bound sharing a live
/// UMEM over `pool` when one suits, else registering the pool's region as its own UMEM.
fn open_socket(
    iface: &str,
    ifindex: u32,
    queue: u32,
    cfg: &AfXdpConfig,
    pool: &Pool,
    umems: &mut Vec<(usize, Weak<XskSocket>)>,
) -> Result<(Arc<XskSocket>, [Ring; 4]), AfXdpError> {
    let err = |what, e| AfXdpError::sys(iface, what, e);
    let fd = sys::xsk_socket().map_err(|e| err("creating the AF_XDP socket", e))?;
    let raw = fd.as_raw_fd();
    let n = cfg.ring_size;
    for (opt, what) in [
        (sys::XDP_RX_RING, "sizing the rx ring"),
        (sys::XDP_TX_RING, "sizing the tx ring"),
        (sys::XDP_UMEM_FILL_RING, "sizing the fill ring"),
        (sys::XDP_UMEM_COMPLETION_RING, "sizing the completion ring"),
    ] {
        sys::setsockopt(raw, opt, &n).map_err(|e| err(what, e))?;
    }
    // Rings are mapped before bind (the kernel maps them only while the socket is unbound).
    let off: sys::XdpMmapOffsets = sys::getsockopt(raw, sys::XDP_MMAP_OFFSETS).map_err(|e| err("reading the ring offsets", e))?;
    let map = |k| Ring::map(&fd, k, n, &off).map_err(|e| err("mapping a ring", e));
    let rings = [map(RingKind::Rx)?, map(RingKind::Tx)?, map(RingKind::Fill)?, map(RingKind::Completion)?];
    let base = pool.base_addr();
    let mut sa = SockaddrXdp { family: sys::AF_XDP as u16, flags: 0, ifindex, queue_id: queue, shared_umem_fd: 0 };
    let lent = || (0..pool.capacity().div_ceil(64)).map(|_| AtomicU64::new(0)).collect::<Box<[_]>>();

    // Share a live UMEM of the same pool when its mode suits (a sharing socket takes the
    // owner's mode: the bind may name no mode of its own).
    for owner in umems.iter().filter(|(b, _)| *b == base).filter_map(|(_, w)| w.upgrade()) {
        let suits = match cfg.xdp_mode {
            BindMode::Copy => !owner.zerocopy,
            BindMode::Zerocopy => owner.zerocopy,
            BindMode::Auto => true,
        };
        if !suits {
            continue;
        }
        sa.flags = sys::XDP_SHARED_UMEM;
        sa.shared_umem_fd = owner.raw() as u32;
        let r = bind_retrying(raw, &sa);
        if matches!(&r, Err(e) if e.raw_os_error() == Some(libc::EBUSY)) {
            return Err(AfXdpError::QueueBusy { iface: iface.to_string(), queue });
        }
        if r.is_ok() {
            let s = XskSocket {
                fd: Some(fd),
                pool: pool.clone(),
                lent: lent(),
                zerocopy: owner.zerocopy,
                sg: owner.sg,
                umem_owner: Some(owner),
            };
            return Ok((Arc::new(s), rings));
        }
    }

    // Register the pool's region as this socket's UMEM: 2 KiB chunks, no extra headroom
    // (the kernel puts received data at XDP_PACKET_HEADROOM = sluice's HEADROOM).
    let reg = sys::XdpUmemReg {
        addr: base as u64,
        len: (pool.capacity() * FRAME_SIZE) as u64,
        chunk_size: FRAME_SIZE as u32,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    sys::setsockopt(raw, sys::XDP_UMEM_REG, &reg).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOMEM) | Some(libc::EPERM) => {
            AfXdpError::Privileges { iface: iface.to_string(), what: "registering the UMEM (pinning the buffer pool)" }
        }
        _ => err("registering the UMEM", e),
    })?;
    let modes: &[u16] = match cfg.xdp_mode {
        BindMode::Copy => &[sys::XDP_COPY],
        BindMode::Zerocopy => &[sys::XDP_ZEROCOPY],
        BindMode::Auto => &[sys::XDP_ZEROCOPY, sys::XDP_COPY],
    };
    let mut last = None;
    for &mode in modes {
        // Multi-buffer first (chained packets go whole); without it when the kernel or the
        // driver refuses it.
        for sg in [sys::XDP_USE_SG, 0] {
            sa.flags = mode | sys::XDP_USE_NEED_WAKEUP | sg;
            sa.shared_umem_fd = 0;
            match bind_retrying(raw, &sa) {
                Ok(()) => {
                    let opts: u32 = sys::getsockopt(raw, sys::XDP_OPTIONS).unwrap_or(0);
                    let zerocopy = opts & sys::XDP_OPTIONS_ZEROCOPY != 0;
                    let s = XskSocket { fd: Some(fd), pool: pool.clone(), lent: lent(), zerocopy, sg: sg != 0, umem_owner: None };
                    let s = Arc::new(s);
                    umems.push((base, Arc::downgrade(&s)));
                    return Ok((s, rings));
                }
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    return Err(AfXdpError::QueueBusy { iface: iface.to_string(), queue });
                }
                Err(e) => last = Some((mode, e)),
            }
        }
    }
    let (mode, e) = last.unwrap_or((0, io::Error::from_raw_os_error(libc::EINVAL)));
    Err(match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(libc::EPROTONOSUPPORT) if mode == sys::XDP_ZEROCOPY => {
            AfXdpError::NoZeroCopy { iface: iface.to_string(), queue, source: e }
        }
        _ => err("binding the socket to the queue", e),
    })
}

impl AfXdpQueue {
    /// The interface this queue belongs to.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// The receive queue index.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// True when the socket is bound in zero-copy mode.
    pub fn zerocopy(&self) -> bool {
        self.sock.zerocopy
    }

    /// True when the socket shares another socket's UMEM (XDP_SHARED_UMEM) rather than
    /// registering the pool itself.
    pub fn shares_umem(&self) -> bool {
        self.sock.umem_owner.is_some()
    }

    /// True when the socket is multi-buffer (chained packets go whole).
    pub fn multi_buffer(&self) -> bool {
        self.sock.sg
    }

    /// The queue's own counters, with the kernel's (XDP_STATISTICS) read now.
    pub fn xsk_stats(&self) -> AfXdpStats {
        let mut s = self.xstats;
        s.kernel = sys::getsockopt(self.sock.raw(), sys::XDP_STATISTICS).unwrap_or_default();
        s
    }

    /// Frame index of a UMEM address, when it names a frame of the pool.
    #[inline(always)]
    fn frame_of(&self, addr: u64) -> Option<u32> {
        let f = addr / FRAME_SIZE as u64;
        (f < self.frames as u64).then_some(f as u32)
    }

    /// Tops the fill ring up to `fill_target` frames from the worker's cache (in batches:
    /// untouched while it is at most 32 short).
    fn stock_fill(&mut self, bufs: &mut BufCache) {
        let short = self.fill_target.saturating_sub(self.fill_lent);
        if short == 0 || (short < 32 && self.fill_lent > 0) {
            return;
        }
        let room = self.fill.prod_free(short).min(short);
        let mut n = 0;
        while n < room {
            let Some(id) = bufs.alloc() else { break };
            self.fill.put_addr(n, id.0 as u64 * FRAME_SIZE as u64);
            self.sock.lend(id.0);
            n += 1;
        }
        if n > 0 {
            self.fill.submit(n);
            self.fill_lent += n;
            self.xstats.fill_posted += n as u64;
        } else if room > 0 {
            self.xstats.fill_nobuf += 1;
        }
        if self.fill.needs_wakeup() {
            sys::kick_rx(self.sock.raw());
            self.xstats.rx_wakeups += 1;
        }
    }

    /// Reaps the completion ring: sent frames go back to the cache.
    fn reap(&mut self, bufs: &mut BufCache) -> usize {
        if self.tx_lent == 0 {
            // Nothing lent: the ring is empty (a chain refused against a stale free count
            // may have stopped the queue with nothing to complete), so the queue may go.
            if self.txq.xoff_drv {
                self.txq.wake_drv();
            }
            return 0;
        }
        let n = self.comp.cons_ready(self.comp.size());
        let mut bytes = 0u64;
        for i in 0..n {
            if let Some(f) = self.frame_of(self.comp.get_addr(i)) {
                self.sock.unlend(f);
                bytes += self.tx_frame_len[f as usize] as u64;
                bufs.free_frame(BufId(f));
            }
        }
        self.comp.release(n);
        self.tx_lent = self.tx_lent.saturating_sub(n);
        self.xstats.tx_completed += n as u64;
        if bytes > 0 {
            let now = self.epoch.elapsed().as_nanos() as u64;
            self.txq.completed(bytes.min(u32::MAX as u64) as u32, now);
        }
        // A quarter of the tx ring free again (at least a whole chain's descriptors) wakes a
        // queue the full ring stopped.
        let room = (self.tx.size() / 4).max(MAX_TX_DESCS);
        if self.txq.xoff_drv && self.tx.prod_free(room) >= room {
            self.txq.wake_drv();
        }
        n as usize
    }

    /// Rings the doorbell when the kernel asks for it: `sendto` until the tx ring is
    /// consumed (copy mode takes 32 frames a call), reaping completions in between (a full
    /// completion ring stops the kernel too). False when the kernel refused the call for
    /// good (interface down or gone): the descriptors stay queued until it is back.
    fn doorbell(&mut self, bufs: &mut BufCache) -> bool {
        if !self.tx.needs_wakeup() {
            self.xstats.tx_kicks_skipped += 1;
            return true;
        }
        let mut tries = self.tx.prod_pending() / 32 + 2;
        while tries > 0 {
            tries -= 1;
            let r = sys::kick_tx(self.sock.raw());
            self.stats.doorbells += 1;
            self.xstats.tx_kicks += 1;
            match r.map_err(|e| e.raw_os_error()) {
                Ok(()) => break,
                Err(Some(libc::EBUSY)) if !self.sock.zerocopy => {
                    // NET_XMIT_DROP in __xsk_generic_xmit: the packet it was sending, the last
                    // one it consumed, was dropped by the device (its completion still
                    // comes). A failure, not a transmission; the rest wait for another call.
                    self.tx.prod_pending(); // reads the kernel's consumer index
                    let bytes = self.last_consumed_bytes();
                    self.fail_taken(1, bytes);
                    self.reap(bufs);
                    if self.tx.prod_pending() == 0 {
                        break;
                    }
                }
                Err(Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS)) => {
                    self.reap(bufs);
                    if self.tx.prod_pending() == 0 {
                        break;
                    }
                }
                Err(_) => return false,
            }
        }
        true
    }

    /// Bytes of the packet whose last descriptor the kernel consumed last (its descriptors
    /// back to the one after a descriptor without XDP_PKT_CONTD).
    fn last_consumed_bytes(&self) -> u64 {
        let mut bytes = self.tx.consumed_desc(0).len as u64;
        for k in 1..MAX_TX_DESCS {
            let d = self.tx.consumed_desc(k);
            if d.options & sys::XDP_PKT_CONTD == 0 {
                break;
            }
            bytes += d.len as u64;
        }
        bytes
    }

    /// `packets` taken by `tx_burst` (and counted sent there) did not leave: moved to
    /// `take_tx_failed`.
    fn fail_taken(&mut self, packets: u64, bytes: u64) {
        self.tx_failed.0 += packets;
        self.tx_failed.1 += bytes;
        self.stats.tx_packets = self.stats.tx_packets.saturating_sub(packets);
        self.stats.tx_bytes = self.stats.tx_bytes.saturating_sub(bytes);
        self.xstats.tx_dropped += packets;
    }

    /// Writes packet `p` as descriptors from slot `at` on; returns how many it used, or why
    /// it wrote nothing: it does not fit in `room` slots, or it cannot be sent whole here.
    fn put_pkt(&mut self, bufs: &BufCache, p: &Pkt, at: u32, room: u32) -> Result<u32, PutError> {
        let head = |p: &Pkt, options| XdpDesc { addr: p.buf.0 as u64 * FRAME_SIZE as u64 + p.off as u64, len: p.len as u32, options };
        // What the kernel would find invalid (and then never complete): an empty or
        // out-of-frame descriptor.
        if p.len == 0 || p.off as usize + p.len as usize > FRAME_SIZE || p.buf.0 >= self.frames {
            return Err(PutError::Invalid);
        }
        if !p.is_chained() {
            if room == 0 {
                return Err(PutError::NoRoom);
            }
            self.tx.put_desc(at, head(p, 0));
            self.lend_for_tx(p.buf.0, p.len as u32);
            return Ok(1);
        }
        if !self.sock.sg {
            self.xstats.tx_frags_refused += 1;
            return Err(PutError::Invalid);
        }
        let nfrags = bufs.frags(*p).count() as u32;
        if nfrags + 1 > MAX_TX_DESCS {
            // The kernel would refuse it as invalid (EOVERFLOW) and never complete it.
            self.xstats.tx_frags_refused += 1;
            return Err(PutError::Invalid);
        }
        if bufs.frags(*p).any(|(id, m)| m.len == 0 || m.off as usize + m.len as usize > FRAME_SIZE || id.0 >= self.frames) {
            return Err(PutError::Invalid);
        }
        if nfrags + 1 > room {
            return Err(PutError::NoRoom);
        }
        self.tx.put_desc(at, head(p, sys::XDP_PKT_CONTD));
        self.lend_for_tx(p.buf.0, p.len as u32);
        for (i, (id, m)) in bufs.frags(*p).enumerate() {
            let last = i as u32 + 1 == nfrags;
            let d = XdpDesc {
                addr: id.0 as u64 * FRAME_SIZE as u64 + m.off as u64,
                len: m.len as u32,
                options: if last { 0 } else { sys::XDP_PKT_CONTD },
            };
            self.tx.put_desc(at + 1 + i as u32, d);
            self.lend_for_tx(id.0, m.len as u32);
        }
        Ok(nfrags + 1)
    }

    /// Frame `f` goes to the kernel holding `len` bytes to send: lent (it is the kernel's
    /// until completed) and counted in flight for BQL.
    fn lend_for_tx(&mut self, f: u32, len: u32) {
        self.sock.lend(f);
        self.tx_frame_len[f as usize] = len;
        self.txq.sent(len);
    }
}

impl Port for AfXdpQueue {
    fn name(&self) -> &str {
        &self.name
    }

    /// The XDP socket: poll() finds it readable when its rx ring holds frames (and, when the
    /// fill ring asks for a wakeup, the poll itself gives the driver one).
    fn rx_wait_fd(&self) -> Option<RawFd> {
        Some(self.sock.raw()).filter(|&fd| fd >= 0)
    }

    fn rx_burst(&mut self, bufs: &mut BufCache, out: &mut Vec<Pkt>, max: usize) -> usize {
        self.reap(bufs);
        if self.tx_lent > 0 && self.tx.prod_pending() > 0 {
            // Descriptors a doorbell left behind (copy mode's 32 per call, a busy device).
            self.doorbell(bufs);
        }
        self.stock_fill(bufs);
        // Room for the descriptors of `max` packets plus one whole chain.
        let window = (max as u32).saturating_add(MAX_FRAGS as u32);
        let n = self.rx.cons_ready(window);
        let before = out.len();
        let (mut i, mut taken, mut consumed) = (0u32, 0usize, 0u32);
        while i < n && taken < max {
            // One packet: its descriptors up to the one without XDP_PKT_CONTD.
            let start = i;
            let mut end = None;
            while i < n {
                let d = self.rx.get_desc(i);
                i += 1;
                if d.options & sys::XDP_PKT_CONTD == 0 {
                    end = Some(i);
                    break;
                }
            }
            let Some(end) = end else { break }; // the rest of the packet is past the window
            self.take_packet(bufs, start, end, out);
            taken += 1;
            consumed = end;
        }
        self.rx.release(consumed);
        self.fill_lent = self.fill_lent.saturating_sub(consumed);
        out.len() - before
    }

    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        if pkts.is_empty() {
            if !more && self.tx_lent > 0 && self.tx.prod_pending() > 0 {
                self.doorbell(bufs);
            }
            return 0;
        }
        let want = pkts.len() as u32;
        if self.tx.prod_free(want) < want {
            self.reap(bufs);
        }
        let mut room = self.tx.prod_free(want);
        if room < want && self.tx.prod_pending() > 0 {
            // A full ring: the kernel must send before more fits, `more` or not.
            self.doorbell(bufs);
            self.reap(bufs);
            room = self.tx.prod_free(want);
        }
        let (mut used, mut sent, mut bytes, mut invalid) = (0u32, 0usize, 0u64, 0u64);
        for p in pkts {
            match self.put_pkt(bufs, p, used, room - used) {
                Ok(k) => {
                    used += k;
                    bytes += p.total_len() as u64;
                }
                Err(PutError::NoRoom) => {
                    // netif_tx_stop_queue: the qdisc keeps the rest until completions free
                    // a quarter of the ring.
                    self.txq.stop_drv();
                    break;
                }
                Err(PutError::Invalid) => {
                    // Taken and failed at once (`tx_error`): neither stuck at the head of the
                    // queue nor taking the packets behind it along.
                    self.tx_failed.0 += 1;
                    self.tx_failed.1 += p.total_len() as u64;
                    bufs.free(*p);
                    invalid += 1;
                }
            }
            sent += 1;
        }
        if used > 0 {
            self.tx.submit(used);
            self.tx_lent += used;
        }
        self.stats.tx_packets += sent as u64 - invalid;
        self.stats.tx_bytes += bytes;
        // The doorbell: at the end of the bursts, or when the ring refused part of this one.
        if (!more || sent < pkts.len()) && (used > 0 || self.tx.prod_pending() > 0) {
            self.doorbell(bufs);
        }
        sent
    }

    fn tx_completions(&mut self, bufs: &mut BufCache) -> usize {
        self.reap(bufs)
    }

    /// The tx ring as a NIC's transmit queue: BQL sizes the qdisc's bulks from the
    /// completion ring, and a full ring stops the queue, so a burst larger than the ring
    /// waits in the qdisc (`net.core.default_qdisc`, `txqueuelen`) instead of being dropped.
    fn tx_queue(&self) -> Option<&TxqState> {
        Some(&self.txq)
    }

    fn take_tx_failed(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.tx_failed)
    }

    /// At shutdown: rings the doorbell until everything sent has completed (at most 200 ms,
    /// less when the interface is down). Packets the kernel has not taken by then never leave
    /// (the socket closes next and their frames go back to the pool): reported failed.
    fn flush_held(&mut self, bufs: &mut BufCache) -> usize {
        let deadline = Instant::now() + Duration::from_millis(200);
        let mut n = self.reap(bufs);
        while self.tx_lent > 0 && Instant::now() < deadline {
            if self.tx.prod_pending() > 0 && !self.doorbell(bufs) {
                break;
            }
            n += self.reap(bufs);
            std::hint::spin_loop();
        }
        // Never-consumed descriptors were never completed either, so no more than the ones
        // still lent: a consumer index the kernel published late (it may publish only when
        // its cached window runs out) cannot make frames that left count as written off.
        // The unsent ones are the last `pending` before the producer index: `skip` of those
        // after the consumer index as read were in fact taken.
        let unconsumed = self.tx.prod_pending();
        let pending = unconsumed.min(self.tx_lent);
        let skip = unconsumed - pending;
        // Those an earlier flush wrote off are not counted twice.
        let cons = self.tx.prod_index().wrapping_sub(pending);
        let done = self.tx_written_off.wrapping_sub(cons);
        let from = if done <= pending { done } else { 0 };
        self.tx_written_off = self.tx.prod_index();
        let (mut packets, mut bytes) = (0u64, 0u64);
        for i in from..pending {
            let d = self.tx.get_desc(skip + i);
            bytes += d.len as u64;
            packets += u64::from(d.options & sys::XDP_PKT_CONTD == 0);
        }
        if packets > 0 {
            self.fail_taken(packets, bytes);
        }
        n
    }

    fn take_rx_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.rx_dropped)
    }

    /// The queue's counters; `rx_nobuf` is the kernel's count of frames it had no fill
    /// buffer for (XDP_STATISTICS, read now: reports call this, the fast path never does).
    fn stats(&self) -> PortStats {
        let kernel: XdpStatistics = sys::getsockopt(self.sock.raw(), sys::XDP_STATISTICS).unwrap_or_default();
        PortStats { rx_nobuf: kernel.rx_fill_ring_empty_descs, ..self.stats }
    }
}

impl AfXdpQueue {
    /// Takes rx descriptors `start..end` (one packet) as a `Pkt`, chained when there are
    /// several; a malformed one is dropped (counted) and its frames go back to the cache.
    fn take_packet(&mut self, bufs: &mut BufCache, start: u32, end: u32, out: &mut Vec<Pkt>) {
        let mut head: Option<Pkt> = None;
        let mut tail = BufId(0);
        let mut bad = false;
        let mut total = 0usize;
        for i in start..end {
            let d = self.rx.get_desc(i);
            let Some(f) = self.frame_of(d.addr) else {
                // Not a frame of the pool: nothing to give back.
                bad = true;
                continue;
            };
            self.sock.unlend(f);
            let off = (d.addr % FRAME_SIZE as u64) as usize;
            total += d.len as usize;
            if off + d.len as usize > FRAME_SIZE || total > MAX_CHAIN_BYTES || bad {
                bad = true;
                bufs.free_frame(BufId(f));
                continue;
            }
            match head.as_mut() {
                None => {
                    let p = Pkt { buf: BufId(f), off: off as u16, len: d.len as u16, frag_len: 0, rss_hash: 0 };
                    if end - start > 1 {
                        bufs.set_seg_meta(p.buf, SegMeta { next: NO_SEG, off: HEADROOM as u16, len: 0 });
                    }
                    tail = p.buf;
                    head = Some(p);
                }
                // An empty continuation adds no bytes; linked, it would hide in a chain
                // whose `frag_len` stays 0 (taken for unchained: the frame never freed).
                Some(_) if d.len == 0 => bufs.free_frame(BufId(f)),
                Some(p) => {
                    bufs.set_seg_meta(BufId(f), SegMeta { next: NO_SEG, off: off as u16, len: d.len as u16 });
                    let m = bufs.seg_meta(tail);
                    bufs.set_seg_meta(tail, SegMeta { next: f, ..m });
                    tail = BufId(f);
                    p.frag_len += d.len;
                }
            }
        }
        match head {
            Some(p) if !bad => {
                self.stats.rx_packets += 1;
                self.stats.rx_bytes += p.total_len() as u64;
                out.push(p);
            }
            Some(p) => {
                bufs.free(p);
                self.rx_dropped += 1;
            }
            None => self.rx_dropped += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_what_to_do() {
        let e = |n| AfXdpError::sys("eth9", "creating the AF_XDP socket", io::Error::from_raw_os_error(n));
        assert!(matches!(e(libc::EPERM), AfXdpError::Privileges { .. }));
        assert!(e(libc::EACCES).to_string().contains("CAP_NET_ADMIN + CAP_NET_RAW + CAP_BPF"));
        assert!(matches!(e(libc::EAFNOSUPPORT), AfXdpError::NoAfXdp));
        assert!(e(libc::EAFNOSUPPORT).to_string().contains("afpacket"));
        let other = e(libc::EINVAL).to_string();
        assert!(other.starts_with("eth9: creating the AF_XDP socket: "), "{other}");
        let busy = AfXdpError::XdpBusy { iface: "eth9".into(), source: io::Error::from_raw_os_error(libc::EBUSY) }.to_string();
        assert!(busy.contains("ip link set dev eth9 xdp off") && busy.contains("xdp-loader status eth9"), "{busy}");
        assert!(matches!(iface_info("no/such"), Err(AfXdpError::NoSuchInterface(_))));
        assert!(matches!(iface_info(""), Err(AfXdpError::NoSuchInterface(_))));
    }

    #[test]
    fn config_sizes_are_checked() {
        let ok = AfXdpConfig::default();
        assert!(ok.validate().is_ok());
        assert_eq!(AfXdpConfig { ring_size: 100, ..ok.clone() }.validate().unwrap_err().0, "ring_size");
        assert_eq!(AfXdpConfig { ring_size: 1 << 16, ..ok.clone() }.validate().unwrap_err().0, "ring_size");
        assert_eq!(AfXdpConfig { fill_frames: 0, ..ok.clone() }.validate().unwrap_err().0, "fill_frames");
        assert_eq!(AfXdpConfig { fill_frames: 4096, ..ok.clone() }.validate().unwrap_err().0, "fill_frames");
        assert_eq!(AfXdpConfig { xdp_section: Some("xdp".into()), ..ok }.validate().unwrap_err().0, "xdp_section");
    }
}
