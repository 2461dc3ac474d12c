//! The kernel side of an AF_XDP port: an XSKMAP, the five-instruction XDP program that
//! redirects each frame to the socket of its receive queue, and a BPF link that attaches it.
//!
//! The program is built here as bytecode (no C toolchain, no object file):
//!
//! ```text
//! r2 = *(u32 *)(r1 + 16)      ; key = ctx->rx_queue_index
//! r1 = map_fd(xsks)           ; ld_imm64, BPF_PSEUDO_MAP_FD
//! r3 = XDP_PASS               ; the action when no socket is bound to the queue
//! call bpf_redirect_map
//! exit
//! ```
//!
//! A BPF link (BPF_LINK_CREATE, attach type BPF_XDP) detaches the program when its last file
//! descriptor closes, so nothing stays attached after the process exits, however it exits
//! (SIGKILL included), unlike a netlink attach, which outlives the process.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: BPF_XDP.
const BPF_XDP: u32 = 37;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const XDP_PASS: i32 = 2;
/// `prog_flags`: the program handles multi-buffer frames (it reads no packet data at all),
/// so drivers let it run on an MTU above a page (veth refuses a non-frags program then).
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
/// `struct xdp_md`: offset of `rx_queue_index`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// `XDP_FLAGS_*` for the link: which attach mode.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: dst | (src << 4), off, imm }
}

/// The redirect program for XSKMAP fd `map_fd`.
pub fn redirect_program(map_fd: RawFd) -> [Insn; 6] {
    const LDX_MEM_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
    const LD_IMM64: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW
    const MOV64_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
    const CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
    const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT
    [
        insn(LDX_MEM_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        insn(LD_IMM64, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        insn(MOV64_K, 3, 0, 0, XDP_PASS),
        insn(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        insn(EXIT, 0, 0, 0, 0),
    ]
}

/// `union bpf_attr`, as raw 8-byte words (the commands here use its first 72 bytes; the
/// rest stays zero, as the kernel requires).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(&mut self, off: usize, name: &str) -> &mut Attr {
        // BPF object names: up to 15 characters of [A-Za-z0-9_.].
        for (i, b) in name.bytes().filter(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.').take(15).enumerate() {
            self.0[off + i] = b;
        }
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: bpf(2) with a zero-padded attribute block of the size passed; pointers inside
    // it (instructions, license, log, key, value) point to live buffers of the caller.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len() as libc::c_uint) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: a descriptor bpf(2) just returned, owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// An XSKMAP of `entries` slots (key: rx queue index, value: socket fd).
pub fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_XSKMAP).u32(4, 4).u32(8, 4).u32(12, entries.max(1)).name(28, "sluice_xsks");
    bpf(BPF_MAP_CREATE, &mut a).map(owned)
}

/// Puts socket `sock` at `queue` in the XSKMAP.
pub fn xskmap_set(map: &OwnedFd, queue: u32, sock: RawFd) -> io::Result<()> {
    let key = queue;
    let value = sock as u32;
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32).u64(8, &key as *const u32 as u64).u64(16, &value as *const u32 as u64).u64(24, 0);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// Loads the redirect program; on a refusal the error carries the verifier's log.
pub fn load_redirect_program(map: &OwnedFd) -> Result<OwnedFd, (io::Error, String)> {
    let prog = redirect_program(map.as_raw_fd());
    let license = b"Dual MIT/GPL\0";
    let mut log = vec![0u8; 4096];
    let mut a = Attr::new();
    a.u32(0, BPF_PROG_TYPE_XDP)
        .u32(4, prog.len() as u32)
        .u64(8, prog.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .u32(44, BPF_F_XDP_HAS_FRAGS)
        .name(48, "sluice_xsk")
        .u32(68, BPF_XDP);
    if let Ok(fd) = bpf(BPF_PROG_LOAD, &mut a) {
        return Ok(owned(fd));
    }
    // Kernels before 5.18 know no frags flag.
    a.u32(44, 0);
    match bpf(BPF_PROG_LOAD, &mut a) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) => {
            // Again with the verifier's log, to say why.
            a.u32(24, 1).u32(28, log.len() as u32).u64(32, log.as_mut_ptr() as u64);
            let _ = bpf(BPF_PROG_LOAD, &mut a).map(owned);
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Err((e, String::from_utf8_lossy(&log[..end]).trim().to_string()))
        }
    }
}

/// Attaches program `prog` to interface `ifindex` with a BPF link (`flags`: XDP_FLAGS_*
/// mode, 0 = native when the driver has it, else generic).
pub fn attach_xdp_link(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32).u32(4, ifindex).u32(8, BPF_XDP).u32(12, flags);
    bpf(BPF_LINK_CREATE, &mut a).map(owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_reads_the_queue_index_and_redirects_with_pass_as_default() {
        let p = redirect_program(7);
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 16), "r2 = *(u32 *)(r1 + 16)");
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0x18, 0x11, 7), "r1 = map fd 7 (pseudo map fd)");
        assert_eq!(p[2], insn(0, 0, 0, 0, 0), "second half of ld_imm64");
        assert_eq!((p[3].code, p[3].regs, p[3].imm), (0xb7, 0x03, XDP_PASS));
        assert_eq!((p[4].code, p[4].imm), (0x85, 51));
        assert_eq!(p[5].code, 0x95);
    }

    #[test]
    fn attr_names_keep_only_legal_characters() {
        let mut a = Attr::new();
        a.name(0, "a-b c.d_e0123456789xyz");
        assert_eq!(&a.0[..15], b"abc.d_e01234567");
        assert_eq!(a.0[15], 0, "names end with a NUL");
    }
}
