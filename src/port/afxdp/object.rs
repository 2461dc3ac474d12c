//! A user's XDP object (an ELF from clang) in the kernel in front of the sockets, instead of
//! the built-in redirect program: parsed by `sluice-ebpf`'s loader (pure Rust, aya-obj
//! underneath), its maps created in the kernel, map references patched to their fds, the
//! program loaded. Its XSKMAP named `xsks_map` gets the port's sockets (key: the receive
//! queue), as libxdp's convention has it; the program decides what reaches them.

use super::bpf;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// The XSKMAP a user program must have for the port's sockets.
pub const XSKS_MAP: &str = "xsks_map";

const LD_IMM64: u8 = 0x18;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_PSEUDO_MAP_VALUE: u8 = 2;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;

/// A user program loaded into the kernel with its maps.
pub struct UserProgram {
    pub prog: OwnedFd,
    /// Index of `xsks_map` in `maps`.
    pub xsks: usize,
    pub maps: Vec<OwnedFd>,
    /// The program's function name (for messages).
    pub name: String,
}

/// Loads program `section` (a function or section name; default the first XDP program) of
/// object `path` into the kernel. Errors say what is wrong with the object.
pub fn load(path: &Path, section: Option<&str>) -> Result<UserProgram, String> {
    let obj = sluice_ebpf::Object::from_file(path).map_err(|e| e.to_string())?;
    let prog = obj.select_xdp(section, false).map_err(|e| e.to_string())?;
    let xsks = prog.maps.iter().position(|m| m.name == XSKS_MAP).ok_or_else(|| {
        format!("program `{}` has no map named `{XSKS_MAP}` (an XSKMAP the port puts its sockets in, keyed by rx queue)", prog.name)
    })?;
    if prog.maps[xsks].map_type != BPF_MAP_TYPE_XSKMAP {
        return Err(format!("map `{XSKS_MAP}` is of type {}, not an XSKMAP", prog.maps[xsks].map_type));
    }
    let mut maps = Vec::with_capacity(prog.maps.len());
    for (i, def) in prog.maps.iter().enumerate() {
        if def.is_map_of_maps() {
            return Err(format!("map `{}`: maps of maps are not supported in a kernel-side program", def.name));
        }
        let fd = bpf::create_map(def.map_type, def.key_size, def.value_size, def.max_entries, def.flags, &def.name)
            .map_err(|e| format!("creating map `{}` in the kernel: {e}", def.name))?;
        // Global data (.data, .rodata, .bss: one-entry arrays) starts with the object's bytes.
        if def.map_type == BPF_MAP_TYPE_ARRAY && def.max_entries == 1 {
            if let Some(v) = obj.maps.get(i).and_then(|m| m.lookup(&0u32.to_ne_bytes(), 0)) {
                bpf::map_update(&fd, &0u32.to_ne_bytes(), &v).map_err(|e| format!("initialising map `{}`: {e}", def.name))?;
            }
        }
        maps.push(fd);
    }
    let mut insns: Vec<bpf::Insn> =
        prog.insns.iter().map(|i| bpf::Insn { code: i.code, regs: (i.dst & 0xf) | (i.src << 4), off: i.off, imm: i.imm }).collect();
    for (slot, i) in prog.insns.iter().enumerate() {
        if i.code == LD_IMM64 && (i.src == BPF_PSEUDO_MAP_FD || i.src == BPF_PSEUDO_MAP_VALUE) {
            let fd = maps.get(i.imm as usize).ok_or_else(|| format!("instruction {slot} names map {} of {}", i.imm, maps.len()))?;
            insns[slot].imm = fd.as_raw_fd();
        }
    }
    let prog_fd = bpf::load_xdp(&insns, &obj.license, &prog.name, prog.frags_aware())
        .map_err(|(e, log)| format!("the kernel refused program `{}` ({e}): {log}", prog.name))?;
    Ok(UserProgram { prog: prog_fd, xsks, maps, name: prog.name.clone() })
}
