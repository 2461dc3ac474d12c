//! AF_PACKET port: a Linux interface through mmap'd packet rings (`PACKET_MMAP`).
//!
//! One socket per queue. Receive is a TPACKET_V3 ring: the kernel fills blocks of frames and
//! hands a block over when it is full or its retire timer (`tp_retire_blk_tov`) expires; we
//! copy each frame into a pool buffer (a chain when longer than one buffer) and give the
//! block back. Transmit is a frame ring on the same socket: `tx_burst` copies frames into
//! free slots, and the doorbell — `send()`, which makes the kernel walk the ring — rings only
//! when no more packets follow (`xmit_more`), or again while frames the kernel had no room
//! for wait in the ring (`tx_completions`, once per softirq round). `PACKET_QDISC_BYPASS`
//! hands frames straight to the driver (as sluice has its own qdiscs), which also keeps them
//! from coming back to our own receive ring as outgoing copies. Several queues join one `PACKET_FANOUT` group
//! (hash): the kernel spreads flows over them, each flow on one queue.
//!
//! Promiscuous mode is a packet-socket membership (`PACKET_MR_PROMISC`): the kernel drops it
//! when the socket closes, so the interface is restored however the process ends.

use super::{Port, PortStats};
use crate::buf::chain::MAX_CHAIN_BYTES;
use crate::buf::{BufCache, Pkt};
use crate::tx::bql::TxqState;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

/// Size of the kernel's TPACKET_V3 frame header, aligned: where the `sockaddr_ll` starts in
/// a received frame and where the data starts in a transmit slot.
const TP3_HDR: usize = tpacket_align(std::mem::size_of::<libc::tpacket3_hdr>());
/// `ETH_P_ALL`, in network order for `socket`/`bind`.
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();
/// The largest frame a transmit slot must hold beyond the MTU: Ethernet header + one VLAN tag.
const L2_OVERHEAD: usize = 18;
/// Attempts at pushing a flush the kernel answered with an error that may pass at once
/// (ENOBUFS, a stale ENETDOWN, EINTR).
const SEND_RETRIES: usize = 4;
/// Longest the port waits at shutdown for the kernel to take the frames still in its ring.
const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

const fn tpacket_align(x: usize) -> usize {
    (x + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1)
}

#[derive(Debug, thiserror::Error)]
pub enum AfPacketError {
    #[error("no interface named `{0}` (`ip link` lists them)")]
    NoSuchInterface(String),
    #[error(
        "{iface}: opening an AF_PACKET socket was refused ({source}): it needs root or CAP_NET_RAW \
         (run as root, or `setcap cap_net_raw,cap_net_admin+ep` on the binary)"
    )]
    Permission { iface: String, source: io::Error },
    #[error("interface {0} is down: bring it up with `ip link set {0} up`")]
    Down(String),
    #[error("{iface}: {what}: {source}")]
    Sys { iface: String, what: &'static str, source: io::Error },
    #[error("{iface}: {msg}")]
    Invalid { iface: String, msg: String },
}

/// How to open an interface.
#[derive(Debug, Clone)]
pub struct AfPacketConfig {
    pub iface: String,
    /// Sockets (receive queues) in one fanout group; queue q belongs to worker q.
    pub queues: u16,
    pub promisc: bool,
    /// The interface's MTU: transmit slots hold MTU + 18 bytes.
    pub mtu: u16,
    /// Receive ring: bytes per block (a multiple of the page size) and blocks.
    pub rx_block_size: u32,
    pub rx_blocks: u32,
    /// Milliseconds after which the kernel hands over a block that is not full.
    pub retire_ms: u32,
    /// Transmit ring slots.
    pub tx_frames: u32,
    /// TSO: TCP packets longer than the MTU (sluice's GRO packets) go to the kernel whole,
    /// with a virtio-net header asking it to segment them (`PACKET_VNET_HDR`).
    pub tso: bool,
}

/// `[ports.afpacket]`: the rings' sizes (like `ethtool -G`) and the receive block timeout.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RingConfig {
    /// Receive ring block bytes: a multiple of 4096 (default 128 KiB).
    pub block_size: Option<u32>,
    /// Receive ring blocks (default 32).
    pub blocks: Option<u32>,
    /// Milliseconds before the kernel hands over a block that is not full (default 1): the
    /// latency a lone frame may wait.
    pub retire_ms: Option<u32>,
    /// Transmit ring slots (default 512).
    pub tx_frames: Option<u32>,
}

impl RingConfig {
    /// Applies the settings to `cfg`; an error names the setting and its range.
    pub fn apply(&self, cfg: &mut AfPacketConfig) -> Result<(), (&'static str, String)> {
        if let Some(b) = self.block_size {
            if b == 0 || b % 4096 != 0 || b > 1 << 26 {
                return Err(("block_size", format!("{b}: a multiple of 4096 up to 64 MiB")));
            }
            cfg.rx_block_size = b;
        }
        if let Some(n) = self.blocks {
            if !(2..=65536).contains(&n) {
                return Err(("blocks", format!("{n}: 2..=65536")));
            }
            cfg.rx_blocks = n;
        }
        if cfg.rx_block_size as u64 * cfg.rx_blocks as u64 > 1 << 30 {
            return Err(("blocks", "the receive ring would exceed 1 GiB (block_size × blocks)".into()));
        }
        if let Some(ms) = self.retire_ms {
            if !(1..=1000).contains(&ms) {
                return Err(("retire_ms", format!("{ms}: 1..=1000")));
            }
            cfg.retire_ms = ms;
        }
        if let Some(n) = self.tx_frames {
            if !(16..=65536).contains(&n) {
                return Err(("tx_frames", format!("{n}: 16..=65536")));
            }
            cfg.tx_frames = n;
        }
        Ok(())
    }
}

impl AfPacketConfig {
    pub fn new(iface: &str) -> AfPacketConfig {
        AfPacketConfig {
            iface: iface.to_string(),
            queues: 1,
            promisc: false,
            mtu: 1500,
            rx_block_size: 1 << 17,
            rx_blocks: 32,
            retire_ms: 1,
            tx_frames: 512,
            tso: false,
        }
    }
}

/// The interface's index, or a clear error when there is none by that name.
pub fn ifindex(iface: &str) -> Result<u32, AfPacketError> {
    let missing = || AfPacketError::NoSuchInterface(iface.to_string());
    if iface.is_empty() || iface.len() >= libc::IFNAMSIZ || iface.contains('/') {
        return Err(missing());
    }
    let c = CString::new(iface).map_err(|_| missing())?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(missing());
    }
    Ok(idx)
}

fn sys_attr(iface: &str, attr: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/{attr}")).ok().map(|s| s.trim().to_string())
}

/// The interface's MAC address (`/sys/class/net/IF/address`).
pub fn iface_mac(iface: &str) -> Result<[u8; 6], AfPacketError> {
    ifindex(iface)?;
    sys_attr(iface, "address")
        .and_then(|s| super::parse_mac(&s))
        .ok_or_else(|| AfPacketError::Invalid { iface: iface.into(), msg: "has no Ethernet address".into() })
}

/// The interface's MTU (`/sys/class/net/IF/mtu`).
pub fn iface_mtu(iface: &str) -> Result<u16, AfPacketError> {
    ifindex(iface)?;
    sys_attr(iface, "mtu")
        .and_then(|s| s.parse::<u32>().ok())
        .map(|m| m.min(u16::MAX as u32) as u16)
        .ok_or_else(|| AfPacketError::Invalid { iface: iface.into(), msg: "its MTU cannot be read".into() })
}

/// True when the interface is administratively up (IFF_UP in `/sys/class/net/IF/flags`).
pub fn iface_up(iface: &str) -> Result<bool, AfPacketError> {
    ifindex(iface)?;
    let flags = sys_attr(iface, "flags").and_then(|s| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok());
    Ok(flags.is_some_and(|f| f & libc::IFF_UP as u32 != 0))
}

/// The mapped rings of one socket (receive first, then transmit, as the kernel lays them out).
struct Ring {
    base: *mut u8,
    bytes: usize,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/bytes are exactly our successful mmap; nothing uses them after drop.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.bytes) };
    }
}

/// One queue of an interface: one packet socket with its rings.
pub struct AfPacketPort {
    name: String,
    iface: String,
    queue: u16,
    // Field order: the mapping goes before the socket closes.
    ring: Ring,
    fd: OwnedFd,
    block_size: usize,
    blocks: usize,
    /// Receive cursor: the block being read, the next frame's offset in it and frames left.
    blk: usize,
    blk_off: usize,
    blk_left: u32,
    /// Transmit ring: slot size and count, where it starts in the mapping, the next slot.
    /// Slots never straddle a block: a block of `tx_block` bytes holds `tx_per_block` of
    /// them and its tail is unused (the kernel's packet_lookup_frame addresses them so).
    tx_off: usize,
    tx_slot: usize,
    tx_block: usize,
    tx_per_block: usize,
    tx_slots: usize,
    tx_next: usize,
    /// Requested slots the kernel has not taken yet: filled since the last doorbell, or left
    /// by it for want of room (always the slots just before `tx_next`).
    tx_pending: usize,
    /// Slots written and not yet reaped: `tx_head` and the `tx_inflight - 1` after it (the
    /// `tx_pending` among them last). A slot the kernel sent comes back AVAILABLE (its skb
    /// was freed): that is this ring's transmit completion.
    tx_head: usize,
    tx_inflight: usize,
    /// Each slot's frame length as written, for the completion's byte count.
    tx_len: Vec<u32>,
    /// Bytes of frames failed since the last reap: complete for BQL too.
    tx_failed_unreaped: u64,
    /// The transmit queue as a driver keeps it: BQL over the ring's completions, stopped
    /// while the ring is full, so the port's qdisc holds packets instead of dropping them.
    txq: TxqState,
    /// Time base of the BQL clock.
    epoch: std::time::Instant,
    stats: PortStats,
    /// Frames the kernel cut (longer than a ring block holds) since the datapath last asked.
    too_long: u64,
    /// Frames the kernel refused at a flush (counted, never reported as sent).
    pub tx_errors: u64,
    /// Doorbells after which frames stayed in the ring for want of room further down (the
    /// socket's send buffer full of frames still below: a short send or EAGAIN), to go later.
    pub tx_busy: u64,
    /// Refused since the datapath last asked: packets, bytes.
    failed: (u64, u64),
    /// A frame being mended (VLAN tag put back, checksum completed) before the copy.
    scratch: Vec<u8>,
    /// The link's MTU: longer TCP frames (a sender's TSO, a NIC's GRO) are split to it.
    mtu: u16,
    /// TSO: a second socket (`PACKET_VNET_HDR`, receives nothing) that sends TCP packets
    /// longer than the MTU whole, for the kernel to segment; and its iovec scratch.
    tso_fd: Option<OwnedFd>,
    iov: Vec<libc::iovec>,
    /// Packets sent whole through it (each counted once in tx_packets).
    pub tx_tso: u64,
    /// Frames split into MTU-sized segments on receive.
    pub rx_split: u64,
    /// Socket errors read and cleared (ENETDOWN after the link went down).
    pub link_errors: u64,
}

// SAFETY: the mapping and the socket belong to this port alone; moving it to the worker
// thread that polls it moves them with it (no other handle to either exists).
unsafe impl Send for AfPacketPort {}

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, opt: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live T of the size passed.
    let r = unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, opt, val as *const T as *const libc::c_void, std::mem::size_of::<T>() as libc::socklen_t)
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Opens `cfg.queues` sockets on the interface, in one fanout group when there are several.
pub fn open(name: &str, cfg: &AfPacketConfig) -> Result<Vec<AfPacketPort>, AfPacketError> {
    let ifx = ifindex(&cfg.iface)?;
    if !iface_up(&cfg.iface)? {
        return Err(AfPacketError::Down(cfg.iface.clone()));
    }
    let queues = cfg.queues.max(1);
    let mut ports = Vec::with_capacity(queues as usize);
    for q in 0..queues {
        ports.push(AfPacketPort::open_one(name, cfg, ifx, q)?);
    }
    if queues > 1 {
        let sys = |what, source| AfPacketError::Sys { iface: cfg.iface.clone(), what, source };
        // The first socket asks the kernel for a group id no one uses (UNIQUEID: unique per
        // port, across processes); the others join it.
        let first = (libc::PACKET_FANOUT_HASH | libc::PACKET_FANOUT_FLAG_UNIQUEID) << 16;
        setsockopt(&ports[0].fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &first).map_err(|e| sys("PACKET_FANOUT (create)", e))?;
        let mut arg: u32 = 0;
        let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
        // SAFETY: `arg`/`len` are live and sized for the u32 the kernel writes.
        let r = unsafe {
            libc::getsockopt(
                ports[0].fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_FANOUT,
                &mut arg as *mut u32 as *mut libc::c_void,
                &mut len,
            )
        };
        if r < 0 {
            return Err(sys("PACKET_FANOUT (read the group id)", io::Error::last_os_error()));
        }
        let join = (arg & 0xffff) | (libc::PACKET_FANOUT_HASH << 16);
        for p in &ports[1..] {
            setsockopt(&p.fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &join).map_err(|e| sys("PACKET_FANOUT (join)", e))?;
        }
    }
    // Every socket received nothing so far (a drop-all filter): with the group complete,
    // let frames in.
    for p in &ports {
        let none = 0i32;
        setsockopt(&p.fd, libc::SOL_SOCKET, libc::SO_DETACH_FILTER, &none).map_err(|e| AfPacketError::Sys {
            iface: cfg.iface.clone(),
            what: "SO_DETACH_FILTER",
            source: e,
        })?;
    }
    Ok(ports)
}

/// `struct virtio_net_hdr` (little-endian fields, as packet sockets use on x86/arm).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct VnetHdr {
    flags: u8,
    gso_type: u8,
    hdr_len: u16,
    gso_size: u16,
    csum_start: u16,
    csum_offset: u16,
}

const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
/// `PACKET_VNET_HDR` (linux/if_packet.h).
const PACKET_VNET_HDR: libc::c_int = 15;

/// The TSO socket: bound with protocol 0 (it never receives), qdisc bypass, vnet headers.
fn open_tso_socket(cfg: &AfPacketConfig, ifx: u32) -> Result<OwnedFd, AfPacketError> {
    let sys = |what, source| AfPacketError::Sys { iface: cfg.iface.clone(), what, source };
    // SAFETY: plain socket(2); the result is checked.
    let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
    if raw < 0 {
        return Err(sys("socket(AF_PACKET) for TSO", io::Error::last_os_error()));
    }
    // SAFETY: `raw` is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let one = 1i32;
    setsockopt(&fd, libc::SOL_PACKET, PACKET_VNET_HDR, &one).map_err(|e| sys("PACKET_VNET_HDR", e))?;
    setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &one).map_err(|e| sys("PACKET_QDISC_BYPASS", e))?;
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid starting value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifx as i32;
    // SAFETY: `sll` is a live sockaddr_ll of the size passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(sys("bind (TSO socket)", io::Error::last_os_error()));
    }
    Ok(fd)
}

/// The virtio-net header asking the kernel to segment TCP packet `p` (longer than the
/// MTU) into MTU-sized segments, and the pseudo-header sum its TCP checksum field must
/// hold for that (CHECKSUM_PARTIAL). None for anything else.
fn tso_header(frame_head: &[u8], total_len: usize, mtu: u16) -> Option<(VnetHdr, u16)> {
    use crate::wire::checksum::{fold, pseudo_header_v4, pseudo_header_v6};
    use crate::wire::{EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet, TcpPacket, IPPROTO_TCP};
    let eth = EthernetFrame::new_checked(frame_head).ok()?;
    // The head holds the headers (GRO keeps them linear); lengths come from `total_len`.
    enum Addrs {
        V4([u8; 4], [u8; 4]),
        V6([u8; 16], [u8; 16]),
    }
    let (l3, gso_type, addrs) = match eth.ethertype() {
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_unchecked(eth.payload());
            if eth.payload().len() < 20 || ip.version() != 4 || ip.header_len() != 20 || ip.protocol() != IPPROTO_TCP || ip.is_fragment() {
                return None;
            }
            (20, VIRTIO_NET_HDR_GSO_TCPV4, Addrs::V4(ip.src_addr(), ip.dst_addr()))
        }
        EtherType::IPV6 => {
            let ip = Ipv6Packet::new_unchecked(eth.payload());
            if eth.payload().len() < 40 || ip.version() != 6 || ip.next_header() != IPPROTO_TCP {
                return None;
            }
            (40, VIRTIO_NET_HDR_GSO_TCPV6, Addrs::V6(ip.src_addr(), ip.dst_addr()))
        }
        _ => return None,
    };
    let tcp = TcpPacket::new_checked(eth.payload().get(l3..)?).ok()?;
    let hdr_len = 14 + l3 + tcp.header_len();
    let mss = (mtu as usize).checked_sub(l3 + tcp.header_len()).filter(|m| *m > 0)?;
    let l4_len = total_len.checked_sub(14 + l3).filter(|l| *l > tcp.header_len() && *l <= u16::MAX as usize)?;
    let vh = VnetHdr {
        flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
        gso_type,
        hdr_len: (hdr_len as u16).to_le(),
        gso_size: (mss as u16).to_le(),
        csum_start: ((14 + l3) as u16).to_le(),
        csum_offset: 16u16.to_le(),
    };
    let pseudo = match addrs {
        Addrs::V4(src, dst) => pseudo_header_v4(&src, &dst, IPPROTO_TCP, l4_len as u16),
        Addrs::V6(src, dst) => pseudo_header_v6(&src, &dst, IPPROTO_TCP, l4_len as u32),
    };
    Some((vh, fold(pseudo)))
}

impl AfPacketPort {
    /// Sends TCP packet `p` (longer than the MTU) whole through the TSO socket: one
    /// syscall, the kernel segments it. The ring's queued frames go first (order within a
    /// flow). False when it is not a TCP packet TSO can take or the kernel refused it.
    fn send_tso(&mut self, bufs: &mut BufCache, p: Pkt) -> TsoSend {
        let Some(fd) = self.tso_fd.as_ref().map(|f| f.as_raw_fd()) else { return TsoSend::Refused };
        let Some((vh, pseudo)) = tso_header(bufs.data(p), p.total_len(), self.mtu) else { return TsoSend::Refused };
        self.kick();
        if self.tx_pending > 0 {
            // Frames ahead of it still wait in the ring: it must not overtake them.
            return TsoSend::Busy;
        }
        let csum_at = u16::from_le(vh.csum_start) as usize + 16;
        if let Some(c) = bufs.data_mut(p).get_mut(csum_at..csum_at + 2) {
            c.copy_from_slice(&pseudo.to_be_bytes());
        }
        self.iov.clear();
        self.iov.push(libc::iovec { iov_base: &vh as *const VnetHdr as *mut libc::c_void, iov_len: std::mem::size_of::<VnetHdr>() });
        for seg in bufs.segments(p) {
            self.iov.push(libc::iovec { iov_base: seg.as_ptr() as *mut libc::c_void, iov_len: seg.len() });
        }
        // SAFETY: msghdr is plain data; all-zero is a valid starting value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = self.iov.as_mut_ptr();
        msg.msg_iovlen = self.iov.len();
        let mut tries = 0;
        let r = loop {
            self.stats.doorbells += 1;
            // SAFETY: every iovec points into `vh` or the packet's frames, alive across the call.
            let r = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT) };
            if r >= 0 {
                break r;
            }
            let e = io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if e == libc::EAGAIN {
                // The socket's send buffer is full of frames still below: room comes.
                return TsoSend::Busy;
            }
            // ENOBUFS with the qdisc bypassed: dropped below (no carrier, a busy driver, an
            // egress hook), as for the ring's frames; waiting for it could block the queue
            // behind it for good, so after the retries it fails.
            tries += 1;
            if !matches!(e, libc::ENOBUFS | libc::EINTR) || tries >= SEND_RETRIES {
                break r;
            }
        };
        let want = std::mem::size_of::<VnetHdr>() + p.total_len();
        if r < 0 || r as usize != want {
            self.tx_errors += 1;
            return TsoSend::Refused;
        }
        self.tx_tso += 1;
        TsoSend::Sent
    }

    fn open_one(name: &str, cfg: &AfPacketConfig, ifx: u32, queue: u16) -> Result<AfPacketPort, AfPacketError> {
        let iface = cfg.iface.clone();
        let sys = |what, source| AfPacketError::Sys { iface: iface.clone(), what, source };
        // Protocol 0: the socket receives nothing until it is bound, after the rings exist.
        // SAFETY: plain socket(2); the result is checked.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => AfPacketError::Permission { iface, source: e },
                Some(libc::EAFNOSUPPORT) => AfPacketError::Invalid { iface, msg: "this kernel has no AF_PACKET sockets".into() },
                _ => sys("socket(AF_PACKET)", e),
            });
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Drop everything until the fanout group is complete (else the first sockets would
        // each see every frame for a moment: duplicates).
        let mut drop_all = [libc::sock_filter { code: (libc::BPF_RET | libc::BPF_K) as u16, jt: 0, jf: 0, k: 0 }];
        let prog = libc::sock_fprog { len: 1, filter: drop_all.as_mut_ptr() };
        setsockopt(&fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog).map_err(|e| sys("SO_ATTACH_FILTER", e))?;
        let v3 = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &v3).map_err(|e| sys("PACKET_VERSION (TPACKET_V3)", e))?;

        let page = 4096usize;
        let block_size = (cfg.rx_block_size as usize).max(page).next_multiple_of(page);
        let blocks = cfg.rx_blocks.max(2) as usize;
        let rx_frame = 2048usize;
        let rx = libc::tpacket_req3 {
            tp_block_size: block_size as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: rx_frame as u32,
            tp_frame_nr: (block_size / rx_frame * blocks) as u32,
            tp_retire_blk_tov: cfg.retire_ms.max(1),
            tp_sizeof_priv: 0,
            tp_feature_req_word: libc::TP_FT_REQ_FILL_RXHASH,
        };
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &rx).map_err(|e| sys("PACKET_RX_RING", e))?;

        // Transmit slots: header + the largest frame, 16-byte aligned; a block of several.
        let tx_slot = tpacket_align(TP3_HDR + cfg.mtu as usize + L2_OVERHEAD).max(2048);
        let tx_block = (tx_slot * 16).next_multiple_of(page);
        let per_block = tx_block / tx_slot;
        let tx_blocks = (cfg.tx_frames.max(16) as usize).div_ceil(per_block);
        let tx = libc::tpacket_req3 {
            tp_block_size: tx_block as u32,
            tp_block_nr: tx_blocks as u32,
            tp_frame_size: tx_slot as u32,
            tp_frame_nr: (per_block * tx_blocks) as u32,
            tp_retire_blk_tov: 0,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_TX_RING, &tx).map_err(|e| sys("PACKET_TX_RING", e))?;

        let rx_bytes = block_size * blocks;
        let bytes = rx_bytes + tx_block * tx_blocks;
        // SAFETY: maps the socket's rings (sizes as just configured); the result is checked.
        let base =
            unsafe { libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            return Err(sys("mmap of the packet rings", io::Error::last_os_error()));
        }
        let ring = Ring { base: base as *mut u8, bytes };

        let one = 1i32;
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &one).map_err(|e| sys("PACKET_QDISC_BYPASS", e))?;
        // Other senders' outgoing frames are not ours to forward (best effort: older kernels
        // lack it, and the receive loop skips PACKET_OUTGOING frames anyway).
        let _ = setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one);

        // SAFETY: sockaddr_ll is plain data; all-zero is a valid starting value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL_BE;
        sll.sll_ifindex = ifx as i32;
        // SAFETY: `sll` is a live sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ENODEV) => AfPacketError::NoSuchInterface(cfg.iface.clone()),
                Some(libc::ENETDOWN) => AfPacketError::Down(cfg.iface.clone()),
                _ => sys("bind", e),
            });
        }
        if cfg.promisc {
            let mreq =
                libc::packet_mreq { mr_ifindex: ifx as i32, mr_type: libc::PACKET_MR_PROMISC as u16, mr_alen: 0, mr_address: [0; 8] };
            setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq).map_err(|e| sys("PACKET_ADD_MEMBERSHIP (promisc)", e))?;
        }
        Ok(AfPacketPort {
            name: name.to_string(),
            iface: cfg.iface.clone(),
            queue,
            ring,
            fd,
            block_size,
            blocks,
            blk: 0,
            blk_off: 0,
            blk_left: 0,
            tx_off: rx_bytes,
            tx_slot,
            tx_block,
            tx_per_block: per_block,
            tx_slots: per_block * tx_blocks,
            tx_next: 0,
            tx_pending: 0,
            tx_head: 0,
            tx_inflight: 0,
            tx_len: vec![0; per_block * tx_blocks],
            tx_failed_unreaped: 0,
            txq: TxqState::default(),
            epoch: std::time::Instant::now(),
            stats: PortStats::default(),
            too_long: 0,
            tx_errors: 0,
            tx_busy: 0,
            failed: (0, 0),
            scratch: Vec::with_capacity(MAX_CHAIN_BYTES),
            mtu: cfg.mtu,
            rx_split: 0,
            link_errors: 0,
            tso_fd: if cfg.tso { Some(open_tso_socket(cfg, ifx)?) } else { None },
            iov: Vec::with_capacity(crate::buf::chain::MAX_FRAGS + 2),
            tx_tso: 0,
        })
    }

    /// The interface this queue is on.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// This socket's queue index in the port.
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// Block `i`'s descriptor.
    fn block(&self, i: usize) -> *mut libc::tpacket_block_desc {
        // SAFETY: i < blocks, so the block lies inside the receive part of the mapping.
        unsafe { self.ring.base.add(i * self.block_size) as *mut libc::tpacket_block_desc }
    }

    /// Opens the current block if the kernel has handed it over. True when frames are left.
    fn open_block(&mut self) -> bool {
        if self.blk_left > 0 {
            return true;
        }
        let b = self.block(self.blk);
        // SAFETY: `b` points to a block descriptor in the mapping; the status word is shared
        // with the kernel, so it is read volatile, then fenced before the block's frames.
        let status = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*b).hdr.bh1.block_status)) };
        if status & libc::TP_STATUS_USER == 0 {
            return false;
        }
        fence(Ordering::Acquire);
        // SAFETY: the block is ours (TP_STATUS_USER) until we write TP_STATUS_KERNEL back.
        let (n, first) = unsafe { ((*b).hdr.bh1.num_pkts, (*b).hdr.bh1.offset_to_first_pkt) };
        if n == 0 {
            self.release_block();
            return false;
        }
        self.blk_left = n;
        self.blk_off = first as usize;
        true
    }

    /// Hands the current block back to the kernel and moves to the next.
    fn release_block(&mut self) {
        let b = self.block(self.blk);
        fence(Ordering::Release);
        // SAFETY: as in open_block: the status word of a block we own, written volatile
        // after every read of its frames (the fence orders them).
        unsafe { std::ptr::write_volatile(std::ptr::addr_of_mut!((*b).hdr.bh1.block_status), libc::TP_STATUS_KERNEL) };
        self.blk = (self.blk + 1) % self.blocks;
        self.blk_left = 0;
        self.blk_off = 0;
    }

    /// Where slot `i` starts in the transmit part of the mapping: where the kernel looks for
    /// it (block i / per_block, then its place in the block; a block's tail past the last
    /// whole slot is padding).
    fn tx_slot_off(&self, i: usize) -> usize {
        (i / self.tx_per_block) * self.tx_block + (i % self.tx_per_block) * self.tx_slot
    }

    /// Slot `i` of the transmit ring.
    fn tx_hdr(&self, i: usize) -> *mut libc::tpacket3_hdr {
        debug_assert!(i < self.tx_slots);
        // SAFETY: i < tx_slots, so i / tx_per_block < the ring's blocks and the slot's
        // tx_slot bytes end within its block (tx_per_block * tx_slot <= tx_block): inside
        // the transmit part of the mapping.
        unsafe { self.ring.base.add(self.tx_off + self.tx_slot_off(i)) as *mut libc::tpacket3_hdr }
    }

    fn tx_status(&self, i: usize) -> u32 {
        // SAFETY: the status word of slot i, shared with the kernel: read volatile.
        unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*self.tx_hdr(i)).tp_status)) }
    }

    fn set_tx_status(&self, i: usize, s: u32) {
        // SAFETY: as tx_status; a slot we own (AVAILABLE or WRONG_FORMAT), or one still
        // SEND_REQUEST after send() returned (the kernel is not walking the ring then).
        unsafe { std::ptr::write_volatile(std::ptr::addr_of_mut!((*self.tx_hdr(i)).tp_status), s) };
    }

    /// Rings the doorbell: the kernel sends the requested slots. Slots it cannot send for
    /// now (its socket buffer is full of frames still in the qdisc) stay requested for the
    /// next doorbell; slots it refuses for good are taken back and counted in `tx_errors`.
    fn kick(&mut self) {
        if self.tx_pending == 0 {
            return;
        }
        self.stats.doorbells += 1;
        loop {
            let answer = self.send_ring();
            // Whatever the kernel left requested or refused (WRONG_FORMAT) was not sent. It
            // walks the ring in order and stops at the first frame it cannot send, keeping
            // its own position there: the unsent frames are the tail of the pending ones.
            let first_pending = (self.tx_next + self.tx_slots - self.tx_pending) % self.tx_slots;
            let unsent = |k: usize| {
                let s = self.tx_status((first_pending + k) % self.tx_slots);
                s & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_WRONG_FORMAT) != 0 && s & libc::TP_STATUS_SENDING == 0
            };
            let Some(stop) = (0..self.tx_pending).find(|&k| unsent(k)) else { break };
            let at = (first_pending + stop) % self.tx_slots;
            if self.tx_status(at) & libc::TP_STATUS_WRONG_FORMAT == 0 {
                if answer.is_transient() {
                    // The socket's send buffer is full (tpacket_snd stops at the first frame
                    // it cannot allocate for and keeps its place there): the frames wait in
                    // the ring, as frames wait in a NIC's, and the next doorbell (the next
                    // burst, `tx_completions`, the end) sends them.
                    self.tx_pending -= stop;
                    self.tx_busy += 1;
                    return;
                }
                // Still requested after an error that does not pass (link down, the driver
                // or a hook dropping the frame: ENOBUFS), or the kernel found nothing to send
                // where it looks (its position and ours differ: the frames written from here
                // fail too until they reach its position). Take them back, report them failed
                // (`take_tx_failed`), and write the next frame into the first of them.
                self.fail_pending_from(stop);
                return;
            }
            // The kernel refused this one frame (tpacket_snd: WRONG_FORMAT) and stays on its
            // slot; the frames behind it are fine. Fail it alone, move them one slot back so
            // the next one is where the kernel looks, and ring again.
            self.fail_slot(at);
            let rest = self.tx_pending - stop - 1;
            for k in 0..rest {
                self.move_slot((at + k + 1) % self.tx_slots, (at + k) % self.tx_slots);
            }
            self.tx_next = (at + rest) % self.tx_slots;
            self.set_tx_status(self.tx_next, libc::TP_STATUS_AVAILABLE);
            self.tx_pending = rest;
            if rest == 0 {
                break;
            }
        }
        self.tx_pending = 0;
    }

    /// send(2) with no data: the kernel walks the transmit ring. Errors that may pass are
    /// retried a few times. Returns the last answer.
    fn send_ring(&mut self) -> RingSend {
        let mut tries = 0;
        loop {
            // SAFETY: send(2) with no data: the kernel walks the transmit ring.
            let r = unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
            if r >= 0 {
                return RingSend::Taken { sent: r > 0 };
            }
            let e = io::Error::last_os_error().raw_os_error().unwrap_or(0);
            tries += 1;
            // ENETDOWN too: after the link went down and up, the socket holds the stale error
            // and returns it once (a link really down fails fast each time). Not EAGAIN: a
            // full socket send buffer does not empty within microseconds.
            if !matches!(e, libc::EINTR | libc::ENOBUFS | libc::ENETDOWN) || tries >= SEND_RETRIES {
                return RingSend::Failed(e);
            }
        }
    }

    /// At shutdown: rings the doorbell until the kernel has taken every requested frame, at
    /// most `FLUSH_WAIT` (a slow qdisc frees the socket buffer as it sends). Frames still
    /// requested then never leave: reported failed, as a link that stays down fails them.
    fn flush_ring(&mut self) {
        let deadline = std::time::Instant::now() + FLUSH_WAIT;
        self.kick();
        while self.tx_pending > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(200));
            self.kick();
        }
        self.fail_pending_from(0);
    }

    /// The pending frames from the `stop`-th on never leave: each is failed, and the next
    /// frame is written into the first of their slots, where the kernel will look.
    fn fail_pending_from(&mut self, stop: usize) {
        let first_pending = (self.tx_next + self.tx_slots - self.tx_pending) % self.tx_slots;
        for k in stop..self.tx_pending {
            self.fail_slot((first_pending + k) % self.tx_slots);
        }
        self.tx_next = (first_pending + stop) % self.tx_slots;
        self.tx_pending = 0;
    }

    /// Slot `i`, counted sent, was not: free it and report it failed.
    fn fail_slot(&mut self, i: usize) {
        // SAFETY: the length word of a slot the kernel gave up on (still ours).
        let len = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*self.tx_hdr(i)).tp_len)) } as u64;
        self.set_tx_status(i, libc::TP_STATUS_AVAILABLE);
        self.tx_inflight -= 1;
        self.tx_failed_unreaped += self.tx_len[i] as u64;
        self.tx_errors += 1;
        self.failed.0 += 1;
        self.failed.1 += len;
        self.stats.tx_packets -= 1;
        self.stats.tx_bytes -= len;
    }

    /// Moves the requested frame in slot `from` to slot `to`, requested there.
    fn move_slot(&mut self, from: usize, to: usize) {
        let (src, dst) = (self.tx_hdr(from), self.tx_hdr(to));
        // SAFETY: both slots are ours: `from` still SEND_REQUEST after send() returned and
        // `to` freed by us, and the kernel walks the ring only inside our send(). Distinct
        // slots of tx_slot bytes each, so the copy does not overlap; tp_len <= tx_slot -
        // TP3_HDR as tx_burst wrote it.
        unsafe {
            let len = std::ptr::read_volatile(std::ptr::addr_of!((*src).tp_len));
            let n = (len as usize).min(self.tx_slot - TP3_HDR);
            std::ptr::copy_nonoverlapping((src as *const u8).add(TP3_HDR), (dst as *mut u8).add(TP3_HDR), n);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*dst).tp_len), len);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*dst).tp_snaplen), len);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*dst).tp_next_offset), 0);
        }
        self.tx_len[to] = self.tx_len[from];
        fence(Ordering::Release);
        self.set_tx_status(to, libc::TP_STATUS_SEND_REQUEST);
    }

    /// Transmit completions: the slots from `tx_head` the kernel has sent and freed come
    /// back (in ring order, as a NIC's completions), and BQL learns their bytes with those
    /// of frames failed since. A quarter of the ring free wakes a queue the full ring
    /// stopped (the drivers' wake threshold). Returns the slots reaped.
    fn reap(&mut self) -> usize {
        let mut n = 0;
        let mut bytes = std::mem::take(&mut self.tx_failed_unreaped);
        // The pending slots are the last in flight and still requested: never reaped.
        // Done: neither requested, being sent nor refused. Not `== AVAILABLE`: a kernel may
        // OR a timestamp flag into a sent slot's status.
        let busy = libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING | libc::TP_STATUS_WRONG_FORMAT;
        while self.tx_inflight > self.tx_pending && self.tx_status(self.tx_head) & busy == 0 {
            bytes += self.tx_len[self.tx_head] as u64;
            self.tx_head = (self.tx_head + 1) % self.tx_slots;
            self.tx_inflight -= 1;
            n += 1;
        }
        if bytes > 0 {
            let now = self.epoch.elapsed().as_nanos() as u64;
            self.txq.completed(bytes.min(u32::MAX as u64) as u32, now);
        }
        if self.txq.xoff_drv && self.tx_slots - self.tx_inflight >= (self.tx_slots / 4).max(1) {
            self.txq.wake_drv();
        }
        n
    }
}

/// The kernel's last answer to a doorbell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RingSend {
    /// send() returned a count (`sent`: more than 0 bytes): it sent until the ring had no
    /// requested frame where it looked, or the socket's send buffer was full.
    Taken { sent: bool },
    /// send() failed with this errno (after the retries).
    Failed(i32),
}

impl RingSend {
    /// Frames left requested after this answer will go later: the socket's send buffer is
    /// full for now (a partial send, EAGAIN). Not ENOBUFS: with the qdisc bypassed the
    /// frame was dropped below (a busy driver, no carrier, an egress hook), which the kernel
    /// answers the same way each time, so waiting could block the ring for good; the
    /// bypass drops there, and so does the port after its retries. Nor when send() took
    /// nothing and said so with 0 (it found no requested frame where it looked).
    fn is_transient(self) -> bool {
        match self {
            RingSend::Taken { sent } => sent,
            RingSend::Failed(e) => e == libc::EAGAIN || e == libc::EINTR,
        }
    }
}

/// What became of a packet handed to the TSO socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TsoSend {
    Sent,
    /// The socket's buffer is full for now: the packet and those behind it wait.
    Busy,
    /// Never sendable (not TCP the kernel can segment, or an error that is not "later").
    Refused,
}

/// How to split a frame longer than the link's MTU: a TCP super-frame from a sender's TSO
/// (a host on a veth hands 64 KiB frames over) or a NIC's GRO/LRO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GsoPlan {
    pub gso_size: u16,
    pub gso_type: u8,
    pub segs: u16,
}

/// The plan for a frame a router cannot forward whole: untagged IPv4 (no options) or IPv6
/// (no extension headers) TCP longer than MTU + 14 bytes, cut into MTU-sized segments as
/// the sender's TSO would have. None for everything else (delivered as it is).
pub fn gso_plan(frame: &[u8], tp_status: u32, mtu: u16) -> Option<GsoPlan> {
    use crate::buf::skb::gso_type;
    use crate::wire::{EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet, TcpPacket, IPPROTO_TCP};
    if frame.len() <= mtu as usize + 14 || tp_status & libc::TP_STATUS_VLAN_VALID != 0 {
        return None;
    }
    let eth = EthernetFrame::new_checked(frame).ok()?;
    let (l3_len, kind, ip_payload) = match eth.ethertype() {
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
            // The IP length must cover the frame exactly: GSO splits the frame's bytes, and
            // bytes past the datagram are no TCP payload (delivered as is, the receive path
            // trims them).
            if ip.header_len() != 20 || ip.protocol() != IPPROTO_TCP || ip.is_fragment() || 14 + ip.total_len() as usize != frame.len() {
                return None;
            }
            (20, gso_type::TCPV4, ip.payload().len())
        }
        EtherType::IPV6 => {
            let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
            if ip.next_header() != IPPROTO_TCP || 14 + 40 + ip.payload_len() as usize != frame.len() {
                return None;
            }
            (40, gso_type::TCPV6, ip.payload().len())
        }
        _ => return None,
    };
    let tcp = TcpPacket::new_checked(eth.payload().get(l3_len..)?).ok()?;
    let hdr = tcp.header_len();
    let mss = (mtu as usize).checked_sub(l3_len + hdr).filter(|m| *m > 0)?;
    let payload = ip_payload.checked_sub(hdr).filter(|p| *p > 0)?;
    if 14 + l3_len + hdr + mss > crate::buf::MAX_DATA {
        // Segments that need chains (jumbo MTU): GSO here builds one-frame segments only.
        return None;
    }
    Some(GsoPlan { gso_size: mss as u16, gso_type: kind, segs: payload.div_ceil(mss) as u16 })
}

impl AfPacketPort {
    /// Takes one received frame into `out`: whole, or split by `plan`. Returns the slots
    /// of the poll it used (its packets; one when it could not be taken).
    fn take(&mut self, bufs: &mut BufCache, hdr: &libc::tpacket3_hdr, bytes: &[u8], plan: Option<GsoPlan>, out: &mut Vec<Pkt>) -> usize {
        let hash = hdr.hv1.tp_rxhash;
        let Some(g) = plan else {
            match self.take_frame(bufs, hdr, bytes) {
                Ok(mut p) => {
                    p.rss_hash = hash;
                    out.push(p);
                }
                // No buffer: the frame never enters (as a NIC out of descriptors).
                Err(Untaken::NoBuf) => self.stats.rx_nobuf += 1,
                // Longer than a chain once its tag is back: received and dropped, as a
                // frame the kernel cut (the ledger's rx_length_error).
                Err(Untaken::TooLong) => {
                    self.stats.rx_length_errors += 1;
                    self.too_long += 1;
                }
            }
            return 1;
        };
        let Some(whole) = bufs.alloc_copy(bytes) else {
            self.stats.rx_nobuf += 1;
            return 1;
        };
        let skb = crate::buf::skb::Skb { pkt: whole, gso_size: g.gso_size, gso_type: g.gso_type, gso_segs: g.segs, ..Default::default() };
        let first = out.len();
        match crate::tx::gso::segment(bufs, &skb, out) {
            Ok(_) => {
                self.rx_split += 1;
                for p in &mut out[first..] {
                    p.rss_hash = hash;
                }
                out.len() - first
            }
            Err(crate::tx::gso::GsoError::NoBuffer) => {
                bufs.free(whole);
                self.stats.rx_nobuf += 1;
                1
            }
            Err(crate::tx::gso::GsoError::Malformed) => {
                // Not splittable after all: as it came (the router decides: pkt_too_big).
                let mut p = whole;
                p.rss_hash = hash;
                out.push(p);
                1
            }
        }
    }

    /// Copies a received frame into a pool buffer as it was on the wire: the kernel took
    /// the VLAN tag out into the header (`tp_vlan_tci`), and a frame from a local sender
    /// may carry a checksum the sender left for "hardware" (TP_STATUS_CSUMNOTREADY, as
    /// veth passes CHECKSUM_PARTIAL on): put the tag back and complete the checksum, or
    /// the frame would leave sluice with a wrong one.
    fn take_frame(&mut self, bufs: &mut BufCache, hdr: &libc::tpacket3_hdr, bytes: &[u8]) -> Result<Pkt, Untaken> {
        let status = hdr.tp_status;
        let tagged = status & libc::TP_STATUS_VLAN_VALID != 0;
        let partial = status & libc::TP_STATUS_CSUMNOTREADY != 0;
        if !tagged && !partial {
            return bufs.alloc_copy(bytes).ok_or(Untaken::NoBuf);
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(bytes);
        if partial {
            complete_l4_checksum(&mut self.scratch);
        }
        if tagged && self.scratch.len() >= 12 {
            let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 { hdr.hv1.tp_vlan_tpid } else { 0x8100 };
            let tci = hdr.hv1.tp_vlan_tci as u16;
            let mut tag = [0u8; 4];
            tag[..2].copy_from_slice(&tpid.to_be_bytes());
            tag[2..].copy_from_slice(&tci.to_be_bytes());
            self.scratch.splice(12..12, tag);
        }
        if self.scratch.len() > MAX_CHAIN_BYTES {
            return Err(Untaken::TooLong);
        }
        bufs.alloc_copy(&self.scratch).ok_or(Untaken::NoBuf)
    }
}

/// Why a received frame was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Untaken {
    /// The pool is empty: the frame never entered (rx_nobuf, outside the ledger).
    NoBuf,
    /// Past MAX_CHAIN_BYTES with its VLAN tag put back: received and dropped.
    TooLong,
}

/// Writes the full TCP/UDP checksum of an untagged IPv4/IPv6 frame whose sender left only
/// the pseudo-header sum in it (CHECKSUM_PARTIAL). Other frames are left as they are.
pub fn complete_l4_checksum(frame: &mut [u8]) {
    use crate::wire::{EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet, TcpPacket, UdpPacket, IPPROTO_TCP, IPPROTO_UDP};
    let Ok(mut eth) = EthernetFrame::new_checked(frame) else { return };
    match eth.ethertype() {
        EtherType::IPV4 => {
            let Ok(mut ip) = Ipv4Packet::new_checked(eth.payload_mut()) else { return };
            if ip.is_fragment() {
                return;
            }
            let (src, dst, proto) = (ip.src_addr(), ip.dst_addr(), ip.protocol());
            let l4 = ip.payload_mut();
            match proto {
                IPPROTO_TCP => {
                    if let Ok(mut t) = TcpPacket::new_checked(l4) {
                        t.fill_checksum_v4(&src, &dst);
                    }
                }
                IPPROTO_UDP => {
                    if let Ok(mut u) = UdpPacket::new_checked(l4) {
                        u.fill_checksum_v4(&src, &dst);
                    }
                }
                _ => {}
            }
        }
        EtherType::IPV6 => {
            let Ok(mut ip) = Ipv6Packet::new_checked(eth.payload_mut()) else { return };
            let Ok(ext) = ip.ext_headers() else { return };
            if ext.is_fragment() {
                return;
            }
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let Some(l4) = ip.payload_mut().get_mut(ext.offset..) else { return };
            match ext.protocol {
                IPPROTO_TCP => {
                    if let Ok(mut t) = TcpPacket::new_checked(l4) {
                        t.fill_checksum_v6(&src, &dst);
                    }
                }
                IPPROTO_UDP => {
                    if let Ok(mut u) = UdpPacket::new_checked(l4) {
                        u.fill_checksum_v6(&src, &dst);
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    /// The ring's socket: poll() finds it readable once the kernel hands a block over (full,
    /// or closed by its retire timer), so an idle worker sleeps instead of spinning.
    fn rx_wait_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.fd.as_raw_fd())
    }

    /// The link went down (packet_notifier sets sk_err = ENETDOWN): poll() reports POLLERR
    /// until the error is read, which the mmap'd ring never does. Reading SO_ERROR clears it.
    fn rx_wait_error(&mut self) {
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `err`/`len` are live and sized for the int the kernel writes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut err as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        if r == 0 && err != 0 {
            self.link_errors += 1;
        }
    }

    fn rx_burst(&mut self, bufs: &mut BufCache, out: &mut Vec<Pkt>, max: usize) -> usize {
        let start = out.len();
        // Slots of `max` used: a frame too long to take uses one, a split one its segments.
        let mut seen = 0;
        while seen < max && self.open_block() {
            let blk_base = self.block(self.blk) as *const u8;
            // SAFETY: the frame lies in a block we own; the kernel wrote its header and data
            // before handing the block over (ordered by open_block's fence).
            let (hdr, pkttype, bytes) = unsafe {
                let h = blk_base.add(self.blk_off) as *const libc::tpacket3_hdr;
                let hdr = std::ptr::read_unaligned(h);
                let sll = std::ptr::read_unaligned(blk_base.add(self.blk_off + TP3_HDR) as *const libc::sockaddr_ll);
                let data_at = self.blk_off + hdr.tp_mac as usize;
                let len = (hdr.tp_snaplen as usize).min(self.block_size.saturating_sub(data_at));
                (hdr, sll.sll_pkttype, std::slice::from_raw_parts(blk_base.add(data_at), len))
            };
            let whole = (hdr.tp_snaplen as usize) >= hdr.tp_len as usize && hdr.tp_len as usize <= MAX_CHAIN_BYTES;
            let plan = if whole && pkttype != libc::PACKET_OUTGOING { gso_plan(bytes, hdr.tp_status, self.mtu) } else { None };
            let need = plan.map_or(1, |g| g.segs as usize);
            if seen > 0 && seen + need > max {
                // Its segments do not fit in this poll: the frame waits for the next one.
                break;
            }
            self.blk_left -= 1;
            self.blk_off += hdr.tp_next_offset as usize;
            let last = self.blk_left == 0;
            if pkttype != libc::PACKET_OUTGOING {
                if !whole || need > max {
                    // Longer than a ring block holds (the kernel cut it), or more segments
                    // than even an empty poll may take (a poll never returns more than `max`:
                    // a packet count stops exactly): received and dropped (rx_length_errors),
                    // never passed on cut.
                    seen += 1;
                    self.stats.rx_length_errors += 1;
                    self.too_long += 1;
                } else {
                    seen += self.take(bufs, &hdr, bytes, plan, out);
                }
            }
            if last {
                self.release_block();
            }
        }
        for p in &mut out[start..] {
            self.stats.rx_bytes += p.total_len() as u64;
        }
        let n = out.len() - start;
        self.stats.rx_packets += n as u64;
        n
    }

    fn tx_burst(&mut self, bufs: &mut BufCache, pkts: &[Pkt], more: bool) -> usize {
        let mut accepted = 0;
        if self.tx_inflight > self.tx_pending {
            self.reap();
        }
        for p in pkts {
            let len = p.total_len();
            // The kernel refuses a plain frame longer than MTU + Ethernet header, + 4 for an
            // 802.1Q tag only (packet_extra_vlan_len_allowed: not 802.1ad).
            let tagged = bufs.data(*p).get(12..14).is_some_and(|t| t == [0x81, 0x00]);
            let limit = self.mtu as usize + 14 + if tagged { 4 } else { 0 };
            if len > limit {
                // Larger than MTU + L2 header: with TSO a TCP packet goes whole for the
                // kernel to segment. One that can never go is taken and failed at once
                // (`tx_error`), so it neither blocks the queue nor takes the rest along.
                let sent = if self.tso_fd.is_some() { self.send_tso(bufs, *p) } else { TsoSend::Refused };
                match sent {
                    TsoSend::Sent => {
                        self.stats.tx_packets += 1;
                        self.stats.tx_bytes += len as u64;
                    }
                    TsoSend::Busy => break,
                    TsoSend::Refused => {
                        self.failed.0 += 1;
                        self.failed.1 += len as u64;
                    }
                }
                bufs.free(*p);
                accepted += 1;
                continue;
            }
            if self.tx_inflight == self.tx_slots {
                // The ring is full until the kernel catches up: flush what is queued, and
                // stop the queue if that frees nothing (netif_tx_stop_queue: the qdisc keeps
                // the rest until a completion wakes it).
                self.kick();
                self.reap();
                if self.tx_inflight == self.tx_slots {
                    self.txq.stop_drv();
                    break;
                }
            }
            let i = self.tx_next;
            let h = self.tx_hdr(i);
            // SAFETY: slot i is ours (AVAILABLE) and holds TP3_HDR + MTU + 18 bytes; the data
            // goes right after the header, where the kernel's V3 transmit reads it.
            let dst = unsafe { std::slice::from_raw_parts_mut((h as *mut u8).add(TP3_HDR), self.tx_slot - TP3_HDR) };
            let copied = bufs.copy_out(*p, 0, &mut dst[..len]);
            // SAFETY: header fields of our slot; the status is published last (Release).
            unsafe {
                std::ptr::write_volatile(std::ptr::addr_of_mut!((*h).tp_len), copied as u32);
                std::ptr::write_volatile(std::ptr::addr_of_mut!((*h).tp_snaplen), copied as u32);
                std::ptr::write_volatile(std::ptr::addr_of_mut!((*h).tp_next_offset), 0);
            }
            fence(Ordering::Release);
            self.set_tx_status(i, libc::TP_STATUS_SEND_REQUEST);
            self.tx_next = (i + 1) % self.tx_slots;
            self.tx_pending += 1;
            self.tx_inflight += 1;
            self.tx_len[i] = copied as u32;
            self.txq.sent(copied as u32);
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += copied as u64;
            bufs.free(*p);
            accepted += 1;
        }
        if !more || accepted < pkts.len() {
            self.kick();
        }
        accepted
    }

    fn take_rx_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.too_long)
    }

    fn tso(&self) -> bool {
        self.tso_fd.is_some()
    }

    fn take_tx_failed(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.failed)
    }

    /// Frames the kernel left in the ring for want of room go at the next doorbell: rung at
    /// every poll's end and every softirq round (`tx_action`), so they leave even when
    /// nothing else is sent. Then the slots the kernel is done with are reaped (a frame's
    /// buffer went back when it was copied: this is the ring's and BQL's side).
    fn tx_completions(&mut self, _bufs: &mut BufCache) -> usize {
        if self.tx_pending > 0 {
            self.kick();
        }
        if self.tx_inflight > self.tx_pending || self.tx_failed_unreaped > 0 {
            return self.reap();
        }
        0
    }

    /// The ring as a NIC's transmit queue: BQL sizes the qdisc's bulks from the ring's
    /// completions, and a full ring stops the queue, so a burst larger than the ring waits
    /// in the qdisc (`net.core.default_qdisc`, `txqueuelen`) instead of being dropped.
    fn tx_queue(&self) -> Option<&TxqState> {
        Some(&self.txq)
    }

    fn tx_waiting(&self) -> bool {
        self.tx_pending > 0
    }

    fn finish(&mut self) -> io::Result<()> {
        self.flush_ring();
        Ok(())
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::build::{build, L3Spec, L4Spec, PacketSpec};
    use crate::wire::checksum;

    fn frame(l3: L3Spec, l4: L4Spec) -> Vec<u8> {
        let spec = PacketSpec { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2], vlan: None, l3, l4, ttl: 64, frame_len: 300 };
        let mut out = vec![0u8; 300];
        let n = build(&spec, &mut out).unwrap();
        out.truncate(n);
        out
    }

    #[test]
    fn ring_settings_are_checked() {
        let mut c = AfPacketConfig::new("x");
        let r = RingConfig { block_size: Some(65536), blocks: Some(4), retire_ms: Some(5), tx_frames: Some(64) };
        r.apply(&mut c).unwrap();
        assert_eq!((c.rx_block_size, c.rx_blocks, c.retire_ms, c.tx_frames), (65536, 4, 5, 64));
        for (bad, name) in [
            (RingConfig { block_size: Some(5000), ..Default::default() }, "block_size"),
            (RingConfig { blocks: Some(1), ..Default::default() }, "blocks"),
            (RingConfig { block_size: Some(1 << 26), blocks: Some(64), ..Default::default() }, "blocks"),
            (RingConfig { retire_ms: Some(0), ..Default::default() }, "retire_ms"),
            (RingConfig { tx_frames: Some(1), ..Default::default() }, "tx_frames"),
        ] {
            assert_eq!(bad.apply(&mut AfPacketConfig::new("x")).unwrap_err().0, name);
        }
    }

    #[test]
    fn only_long_tcp_frames_are_split() {
        let v4 = L3Spec::V4 { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], tos: 0, ident: 1, dont_frag: true };
        let tcp = L4Spec::Tcp { src_port: 1, dst_port: 2, seq: 3, ack: 4, flags: 0x10, window: 100, timestamp: None };
        let build_len = |l4, len| {
            let spec =
                PacketSpec { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2], vlan: None, l3: v4, l4, ttl: 64, frame_len: len };
            let mut out = vec![0u8; len];
            build(&spec, &mut out).unwrap();
            out
        };
        let big = build_len(tcp, 10_014);
        let g = gso_plan(&big, 0, 1500).unwrap();
        assert_eq!((g.gso_size, g.segs), (1460, 7));
        assert_eq!(gso_plan(&big, libc::TP_STATUS_VLAN_VALID, 1500), None, "tagged");
        assert_eq!(gso_plan(&big, 0, 9000), None, "jumbo segments need chains");
        assert_eq!(gso_plan(&build_len(tcp, 1514), 0, 1500), None, "fits the MTU");
        assert_eq!(gso_plan(&build_len(L4Spec::Udp { src_port: 1, dst_port: 2 }, 10_014), 0, 1500), None, "UDP");
        assert_eq!(gso_plan(&big[..40], 0, 20), None, "cut headers");
        // Bytes past the IP length are not payload to cut into segments (they would leave as
        // forged TCP data, and more segments than planned).
        let mut short_ip = big.clone();
        let mut ip = crate::wire::Ipv4Packet::new_unchecked(&mut short_ip[14..34]);
        ip.set_total_len(140);
        ip.fill_checksum();
        assert_eq!(gso_plan(&short_ip, 0, 1500), None, "IPv4 length short of the frame");
        let v6 =
            L3Spec::V6 { src: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], dst: [0xfe; 16], traffic_class: 0, flow_label: 0 };
        let spec = PacketSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            vlan: None,
            l3: v6,
            l4: tcp,
            ttl: 64,
            frame_len: 10_014,
        };
        let mut f = vec![0u8; 10_014];
        build(&spec, &mut f).unwrap();
        let g = gso_plan(&f, 0, 1500).unwrap();
        assert_eq!((g.gso_size, g.gso_type, g.segs), (1440, crate::gro::gso_type::TCPV6, 7));
        crate::wire::Ipv6Packet::new_unchecked(&mut f[14..54]).set_payload_len(100);
        assert_eq!(gso_plan(&f, 0, 1500), None, "IPv6 length short of the frame");
    }

    #[test]
    fn tso_headers_ask_for_mtu_sized_tcp_segments() {
        let v6 =
            L3Spec::V6 { src: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], dst: [0xfe; 16], traffic_class: 0, flow_label: 0 };
        let v4 = L3Spec::V4 { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], tos: 0, ident: 1, dont_frag: true };
        let tcp = L4Spec::Tcp { src_port: 1, dst_port: 2, seq: 3, ack: 4, flags: 0x10, window: 100, timestamp: Some((1, 2)) };
        for (l3, l3_len, gso_type) in [(v4, 20usize, VIRTIO_NET_HDR_GSO_TCPV4), (v6, 40, VIRTIO_NET_HDR_GSO_TCPV6)] {
            let spec =
                PacketSpec { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2], vlan: None, l3, l4: tcp, ttl: 64, frame_len: 9000 };
            let mut f = vec![0u8; 9000];
            build(&spec, &mut f).unwrap();
            let (vh, pseudo) = tso_header(&f[..200], f.len(), 1500).unwrap();
            assert_eq!(vh.gso_type, gso_type);
            assert_eq!(vh.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
            assert_eq!(u16::from_le(vh.hdr_len) as usize, 14 + l3_len + 32);
            assert_eq!(u16::from_le(vh.gso_size) as usize, 1500 - l3_len - 32);
            assert_eq!((u16::from_le(vh.csum_start) as usize, u16::from_le(vh.csum_offset)), (14 + l3_len, 16));
            // The pseudo-header sum over the whole TCP length: zeroing the field and adding
            // the segment's bytes to it gives the full checksum.
            let mut g = f.clone();
            let at = 14 + l3_len + 16;
            g[at..at + 2].copy_from_slice(&[0, 0]);
            let full = !checksum::fold(u64::from(pseudo) + checksum::sum_be16(&g[14 + l3_len..]));
            assert_eq!(full.to_be_bytes(), [f[at], f[at + 1]], "the builder's checksum and ours disagree");
        }
        let udp = L4Spec::Udp { src_port: 1, dst_port: 2 };
        let spec =
            PacketSpec { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2], vlan: None, l3: v4, l4: udp, ttl: 64, frame_len: 3000 };
        let mut f = vec![0u8; 3000];
        build(&spec, &mut f).unwrap();
        assert!(tso_header(&f, f.len(), 1500).is_none(), "UDP");
        assert!(tso_header(&f[..10], 3000, 1500).is_none(), "cut headers");
    }

    #[test]
    fn partial_checksums_are_completed() {
        let v4 = L3Spec::V4 { src: [10, 0, 0, 1], dst: [10, 0, 0, 2], tos: 0, ident: 1, dont_frag: true };
        let v6 =
            L3Spec::V6 { src: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], dst: [0xfe; 16], traffic_class: 0, flow_label: 0 };
        let tcp = L4Spec::Tcp { src_port: 1, dst_port: 2, seq: 3, ack: 4, flags: 0x10, window: 100, timestamp: None };
        let udp = L4Spec::Udp { src_port: 1, dst_port: 2 };
        for (l3, l4, l3_len, csum_at) in [(v4, tcp, 20, 16), (v4, udp, 20, 6), (v6, tcp, 40, 16), (v6, udp, 40, 6)] {
            let good = frame(l3, l4);
            let mut f = good.clone();
            let at = 14 + l3_len + csum_at;
            // What a sender offloading the checksum leaves: some other value (the pseudo-header sum).
            f[at] ^= 0x5a;
            f[at + 1] ^= 0xa5;
            assert_ne!(f, good);
            complete_l4_checksum(&mut f);
            assert_eq!(f, good, "{l3:?} {l4:?}");
            assert_ne!(checksum::fold(checksum::sum_be16(&f[at..at + 2])), 0);
        }
        // Not IP, or too short: untouched, no panic.
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        let before = arp.clone();
        complete_l4_checksum(&mut arp);
        assert_eq!(arp, before);
        let mut short = vec![0x45u8; 20];
        short[12] = 0x08;
        short[13] = 0x00;
        complete_l4_checksum(&mut short);
    }
}
