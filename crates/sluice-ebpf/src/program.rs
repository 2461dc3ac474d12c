//! A loaded, linked eBPF program: what the verifier checks and the interpreter / JIT run.

use crate::insn::Insn;

/// Map creation flag: programs may not write the map (`.rodata`).
pub const BPF_F_RDONLY_PROG: u32 = 1 << 7;

/// Kernel map type numbers (enum bpf_map_type) that sluice understands.
pub mod map_type {
    pub const HASH: u32 = 1;
    pub const ARRAY: u32 = 2;
    pub const PROG_ARRAY: u32 = 3;
    pub const PERF_EVENT_ARRAY: u32 = 4;
    pub const PERCPU_HASH: u32 = 5;
    pub const PERCPU_ARRAY: u32 = 6;
    pub const LRU_HASH: u32 = 9;
    pub const LRU_PERCPU_HASH: u32 = 10;
    pub const ARRAY_OF_MAPS: u32 = 12;
    pub const HASH_OF_MAPS: u32 = 13;
    pub const DEVMAP: u32 = 14;
    pub const CPUMAP: u32 = 16;
    pub const XSKMAP: u32 = 17;
    pub const DEVMAP_HASH: u32 = 25;
    pub const RINGBUF: u32 = 27;
}

/// The static description of a map, as declared in the object (BTF-defined or legacy `maps` section).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MapDef {
    pub name: String,
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    /// ARRAY_OF_MAPS / HASH_OF_MAPS: the inner-map template (BTF `__array(values, ...)`):
    /// every inner map must match it, and the verifier checks programs against it.
    pub inner: Option<Box<MapDef>>,
}

impl MapDef {
    /// A map of `map_type` without flags or inner template (what a plain
    /// `struct { __uint(type, …); … } name SEC(".maps")` declares).
    pub fn new(name: &str, map_type: u32, key_size: u32, value_size: u32, max_entries: u32) -> MapDef {
        MapDef { name: name.to_string(), map_type, key_size, value_size, max_entries, flags: 0, inner: None }
    }

    /// The same map with `flags` (`map_flags`: BPF_F_NO_PREALLOC, BPF_F_RDONLY_PROG, …).
    pub fn with_flags(self, flags: u32) -> MapDef {
        MapDef { flags, ..self }
    }

    /// A `BPF_F_RDONLY_PROG` array of one value (`.rodata`): once frozen, the verifier reads
    /// its bytes as constants (bpf_map_is_rdonly + bpf_map_direct_read).
    pub fn is_readonly_one_value_array(&self) -> bool {
        self.flags & BPF_F_RDONLY_PROG != 0 && self.map_type == map_type::ARRAY && self.max_entries == 1
    }

    /// ARRAY_OF_MAPS or HASH_OF_MAPS: values are maps.
    pub fn is_map_of_maps(&self) -> bool {
        matches!(self.map_type, map_type::ARRAY_OF_MAPS | map_type::HASH_OF_MAPS)
    }
}

/// A program after relocation and linking:
/// - `lddw` with `src == BPF_PSEUDO_MAP_FD` has `imm` = index into `maps` (second slot imm = 0);
/// - `lddw` with `src == BPF_PSEUDO_MAP_VALUE` has `imm` = map index and the second slot's `imm` = offset
///   into the value of key 0 (used for `.data`/`.rodata`/`.bss` globals, which are ARRAY maps of one entry);
/// - `call` with `src == BPF_PSEUDO_CALL` has `imm` = relative slot offset of the callee (bpf-to-bpf call),
///   `src == 0` has `imm` = kernel helper id;
/// - all sub-programs the entry calls are appended after it in `insns`; execution starts at slot 0.
#[derive(Debug, Clone)]
pub struct Program {
    pub name: String,
    pub section: String,
    pub insns: Vec<Insn>,
    pub maps: Vec<MapDef>,
}

impl Program {
    /// Whether the section name makes this an XDP program (libbpf's rules: `xdp`,
    /// `xdp.frags`, `xdp/...`, `xdp.frags/...`).
    pub fn is_xdp(&self) -> bool {
        matches!(section_kind(&self.section), SectionKind::Xdp { .. })
    }

    /// Whether the program declared it handles multi-buffer frames (`xdp.frags*`,
    /// the kernel's `BPF_F_XDP_HAS_FRAGS`).
    pub fn frags_aware(&self) -> bool {
        matches!(section_kind(&self.section), SectionKind::Xdp { frags: true })
    }
}

/// What a program section holds, by libbpf's section-name rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionKind {
    Xdp {
        frags: bool,
    },
    /// Another program type (libbpf's name for it, e.g. `sched_cls`, `kprobe`).
    Other(&'static str),
    /// A name libbpf gives no type (`prog`, `xdp_sock`, ...): the loader must say the type,
    /// as `bpftool prog load ... type xdp` or iproute2's `ip link set ... xdp obj O sec S` do.
    Unknown,
}

/// libbpf's program types by the first `/`-separated part of a section name (non-XDP).
const OTHER_TYPES: &[(&str, &str)] = &[
    ("tc", "sched_cls"),
    ("tcx", "sched_cls"),
    ("netkit", "sched_cls"),
    ("classifier", "sched_cls"),
    ("action", "sched_act"),
    ("socket", "socket_filter"),
    ("kprobe", "kprobe"),
    ("kretprobe", "kprobe"),
    ("kprobe.multi", "kprobe"),
    ("kretprobe.multi", "kprobe"),
    ("ksyscall", "kprobe"),
    ("kretsyscall", "kprobe"),
    ("uprobe", "kprobe"),
    ("uretprobe", "kprobe"),
    ("uprobe.s", "kprobe"),
    ("uretprobe.s", "kprobe"),
    ("uprobe.multi", "kprobe"),
    ("uretprobe.multi", "kprobe"),
    ("usdt", "kprobe"),
    ("tracepoint", "tracepoint"),
    ("tp", "tracepoint"),
    ("raw_tracepoint", "raw_tracepoint"),
    ("raw_tp", "raw_tracepoint"),
    ("raw_tracepoint.w", "raw_tracepoint_writable"),
    ("raw_tp.w", "raw_tracepoint_writable"),
    ("tp_btf", "tracing"),
    ("fentry", "tracing"),
    ("fexit", "tracing"),
    ("fmod_ret", "tracing"),
    ("fentry.s", "tracing"),
    ("fexit.s", "tracing"),
    ("fmod_ret.s", "tracing"),
    ("iter", "tracing"),
    ("iter.s", "tracing"),
    ("freplace", "ext"),
    ("lsm", "lsm"),
    ("lsm.s", "lsm"),
    ("lsm_cgroup", "lsm"),
    ("cgroup_skb", "cgroup_skb"),
    ("cgroup", "cgroup"),
    ("sockops", "sock_ops"),
    ("sk_skb", "sk_skb"),
    ("sk_msg", "sk_msg"),
    ("sk_lookup", "sk_lookup"),
    ("sk_reuseport", "sk_reuseport"),
    ("lirc_mode2", "lirc_mode2"),
    ("flow_dissector", "flow_dissector"),
    ("perf_event", "perf_event"),
    ("lwt_in", "lwt_in"),
    ("lwt_out", "lwt_out"),
    ("lwt_xmit", "lwt_xmit"),
    ("lwt_seg6local", "lwt_seg6local"),
    ("struct_ops", "struct_ops"),
    ("struct_ops.s", "struct_ops"),
    ("netfilter", "netfilter"),
    ("syscall", "syscall"),
];

/// The program type a section name gives (libbpf's table; `xdp_sock` is not `xdp`).
pub fn section_kind(section: &str) -> SectionKind {
    let head = section.split('/').next().unwrap_or("");
    match head {
        "xdp" => SectionKind::Xdp { frags: false },
        "xdp.frags" => SectionKind::Xdp { frags: true },
        _ => OTHER_TYPES.iter().find(|(p, _)| *p == head).map_or(SectionKind::Unknown, |(_, t)| SectionKind::Other(t)),
    }
}

impl SectionKind {
    /// A short name for listings: `xdp`, `xdp (frags)`, the libbpf type, or `unknown`.
    pub fn describe(self) -> String {
        match self {
            SectionKind::Xdp { frags: false } => "xdp".into(),
            SectionKind::Xdp { frags: true } => "xdp (frags)".into(),
            SectionKind::Other(t) => t.into(),
            SectionKind::Unknown => "unknown".into(),
        }
    }
}
