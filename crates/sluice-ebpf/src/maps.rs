//! Map storage: ARRAY, PERCPU_ARRAY, HASH, PERCPU_HASH, LRU_HASH, LRU_PERCPU_HASH, DEVMAP,
//! DEVMAP_HASH, CPUMAP, XSKMAP, ARRAY_OF_MAPS and HASH_OF_MAPS.
//!
//! # Memory model
//!
//! * Every map owns ONE value region allocated at creation (zeroed, 8-byte aligned) that never
//!   moves or grows: `max_entries × copies × stride` bytes, where `stride` is the value size
//!   rounded up to 8 and `copies` is `ncpus` for per-CPU maps, 1 otherwise. Value `i` of CPU
//!   `c` lives at `base + (i × copies + c) × stride`. Programs receive raw pointers into this
//!   region from `bpf_map_lookup_elem` and keep using them (like the kernel's preallocated
//!   maps), so the region stays valid as long as the [`Maps`] lives.
//! * Regions of 64 KiB and more are anonymous private mappings (`MAP_NORESERVE`): the kernel
//!   backs a page only once it is written, so a 33M-entry array costs the pages a program or
//!   user space touched, not `max_entries × stride` (reads of untouched pages map the shared
//!   zero page). Dumps skip zero array slots by default ([`Map::for_each_entry`]) and only
//!   read pages that were ever touched (`/proc/self/pagemap`), so reading a huge map back
//!   does not touch it either.
//! * Maps of maps (ARRAY_OF_MAPS, HASH_OF_MAPS) hold the index of an inner map of the same
//!   [`Maps`] in a 4-byte value; every inner map matches the outer map's template
//!   ([`MapDef::inner`], checked by [`Maps::set_inner`]); a program's lookup returns the inner
//!   map's handle, as the kernel returns the inner map pointer.
//! * Programs access value memory with plain loads/stores and BPF atomics (the interpreter
//!   uses relaxed / sequentially consistent atomics on it, which compile to plain moves and
//!   locked instructions); concurrent programs racing on the same value see the same
//!   (lack of) guarantees as in the kernel. The host side (userspace API, helper copies)
//!   only touches value memory through relaxed atomic loads/stores (8 bytes at a time
//!   when aligned), so there is no data race in the Rust sense.
//! * Hash-type maps keep their index (buckets, chains, keys, free list, LRU bits) in
//!   preallocated atomic arrays ([`hash_index`]): writers take a `Mutex` per map and change
//!   the chains inside a sequence-lock window; lookups from programs take no lock (they walk
//!   again if a writer overlapped). No allocation on update. A deleted element's value slot
//!   may be reused at once by a later insert, so a program still holding a pointer to it may
//!   see another key's value — the same as the kernel's preallocated hash maps. Updating an
//!   existing key writes its value in place. Keys hash with a random seed per map
//!   (`BPF_F_ZERO_SEED`: none).
//! * LRU maps evict with a second-chance CLOCK: a lookup from a program sets the element's
//!   reference bit; when the map is full an insert sweeps the slots, clearing set bits and
//!   evicting the first element whose bit is clear. The kernel's LRU (per-CPU free lists,
//!   active/inactive lists with reference bits) is also only an approximation of LRU.
//! * DEVMAP / CPUMAP / XSKMAP are arrays whose entries are present or absent (a per-entry
//!   flag); DEVMAP_HASH is a hash map. Their values are read-only for programs, and programs
//!   cannot update or delete them (the kernel's verifier refuses that too).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

mod hash_index;
use hash_index::HashIndex;

use serde::{Deserialize, Serialize};

use crate::program::{map_type, MapDef};
use crate::xdp::RedirectTarget;

/// `bpf_map_update_elem` flags.
pub const BPF_ANY: u64 = 0;
pub const BPF_NOEXIST: u64 = 1;
pub const BPF_EXIST: u64 = 2;
pub const BPF_F_LOCK: u64 = 4;

/// Map creation flags (`map_flags`).
pub const BPF_F_NO_PREALLOC: u32 = 1 << 0;
// Defined with the map definition that reads it (program.rs), so maps.rs only looks down.
pub use crate::program::BPF_F_RDONLY_PROG;
pub const BPF_F_WRONLY_PROG: u32 = 1 << 8;
/// Hash maps: hash keys without a random seed (testing, reproducible layouts).
pub const BPF_F_ZERO_SEED: u32 = 1 << 6;

/// Largest key of a hash map (the kernel's `MAX_BPF_STACK` limit for keys).
pub const MAX_KEY_SIZE: usize = 512;

/// cpu_map_update_elem's sanity limit on a CPU's queue size.
const MAX_CPUMAP_QSIZE: u32 = 16384;

/// Default cap on the memory one map may reserve (value region plus index). Large regions are
/// allocated zeroed, so untouched pages cost no physical memory.
pub const DEFAULT_MAX_MAP_BYTES: usize = 1 << 30;

/// Map operation errors; [`MapError::errno`] gives the kernel's errno for each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("no such key")]
    NotFound,
    #[error("key already exists")]
    Exists,
    #[error("map is full")]
    Full,
    #[error("index {index} out of range (max_entries {max_entries})")]
    OutOfRange { index: u32, max_entries: u32 },
    #[error("key is {got} bytes, the map's key size is {expected}")]
    KeySize { expected: usize, got: usize },
    #[error("value is {got} bytes, expected {expected}")]
    ValueSize { expected: usize, got: usize },
    #[error("invalid flags {0:#x}")]
    Flags(u64),
    #[error("operation not supported on this map type")]
    NotSupported,
    #[error("invalid value: {0}")]
    InvalidValue(&'static str),
    #[error("map `{name}`: unsupported map type {map_type} ({type_name})")]
    UnsupportedType { name: String, map_type: u32, type_name: &'static str },
    #[error("map `{name}`: {reason}")]
    InvalidDef { name: String, reason: String },
    #[error("the map is frozen (read-only for user space)")]
    Frozen,
    #[error("value too large: {0}")]
    Overflow(&'static str),
}

impl MapError {
    /// The (positive) errno the kernel returns for this error.
    pub fn errno(&self) -> i32 {
        match self {
            MapError::NotFound => libc::ENOENT,
            MapError::Exists => libc::EEXIST,
            MapError::Full | MapError::OutOfRange { .. } => libc::E2BIG,
            MapError::NotSupported => libc::EOPNOTSUPP,
            MapError::Frozen => libc::EPERM,
            MapError::Overflow(_) => libc::EOVERFLOW,
            MapError::KeySize { .. }
            | MapError::ValueSize { .. }
            | MapError::Flags(_)
            | MapError::InvalidValue(_)
            | MapError::UnsupportedType { .. }
            | MapError::InvalidDef { .. } => libc::EINVAL,
        }
    }
}

/// The kernel name of a map type number (`"array"`, `"lru_hash"`, ...; `"unknown"` otherwise).
pub fn map_type_name(t: u32) -> &'static str {
    match t {
        0 => "unspec",
        1 => "hash",
        2 => "array",
        3 => "prog_array",
        4 => "perf_event_array",
        5 => "percpu_hash",
        6 => "percpu_array",
        7 => "stack_trace",
        8 => "cgroup_array",
        9 => "lru_hash",
        10 => "lru_percpu_hash",
        11 => "lpm_trie",
        12 => "array_of_maps",
        13 => "hash_of_maps",
        14 => "devmap",
        15 => "sockmap",
        16 => "cpumap",
        17 => "xskmap",
        18 => "sockhash",
        19 => "cgroup_storage",
        20 => "reuseport_sockarray",
        21 => "percpu_cgroup_storage",
        22 => "queue",
        23 => "stack",
        24 => "sk_storage",
        25 => "devmap_hash",
        26 => "struct_ops",
        27 => "ringbuf",
        28 => "inode_storage",
        29 => "task_storage",
        30 => "bloom_filter",
        31 => "user_ringbuf",
        32 => "cgrp_storage",
        33 => "arena",
        _ => "unknown",
    }
}

/// True for the map types this runtime implements.
pub fn is_supported_map_type(t: u32) -> bool {
    matches!(
        t,
        map_type::HASH
            | map_type::ARRAY
            | map_type::PERCPU_HASH
            | map_type::PERCPU_ARRAY
            | map_type::LRU_HASH
            | map_type::LRU_PERCPU_HASH
            | map_type::DEVMAP
            | map_type::CPUMAP
            | map_type::XSKMAP
            | map_type::DEVMAP_HASH
            | map_type::PERF_EVENT_ARRAY
            | map_type::RINGBUF
            | map_type::PROG_ARRAY
            | map_type::ARRAY_OF_MAPS
            | map_type::HASH_OF_MAPS
    )
}

/// `BPF_F_INNER_MAP`: an inner array map may differ in `max_entries` from the template.
pub const BPF_F_INNER_MAP: u32 = 1 << 12;

/// Whether `inner` may be an inner map of an outer map whose template is `template` (the
/// kernel's `bpf_map_meta_equal`: same type, key and value sizes and flags; arrays also the
/// same `max_entries` unless the template has `BPF_F_INNER_MAP`).
pub fn inner_map_fits(template: &MapDef, inner: &MapDef) -> Result<(), String> {
    if inner.is_map_of_maps() {
        return Err(format!("`{}` is itself a map of maps", inner.name));
    }
    let same = template.map_type == inner.map_type
        && template.key_size == inner.key_size
        && template.value_size == inner.value_size
        && template.flags == inner.flags;
    let arrays = matches!(inner.map_type, map_type::ARRAY | map_type::PERCPU_ARRAY);
    if !same || (arrays && template.flags & BPF_F_INNER_MAP == 0 && template.max_entries != inner.max_entries) {
        return Err(format!(
            "`{}` ({}, key {} B, value {} B, max_entries {}, flags {:#x}) does not match the template ({}, key {} B, value {} B, max_entries {}, flags {:#x})",
            inner.name,
            map_type_name(inner.map_type),
            inner.key_size,
            inner.value_size,
            inner.max_entries,
            inner.flags,
            map_type_name(template.map_type),
            template.key_size,
            template.value_size,
            template.max_entries,
            template.flags
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Relaxed-atomic memory copies (value memory may be concurrently used by programs).

/// Copies `len` bytes from `src` to `dst` with relaxed atomic accesses: 8 bytes at a time when
/// both are 8-byte aligned, byte by byte otherwise.
///
/// # Safety
/// `src` must be valid for reads and `dst` valid for writes of `len` bytes; the ranges must
/// not overlap.
pub(crate) unsafe fn copy_relaxed(dst: *mut u8, src: *const u8, len: usize) {
    let mut i = 0usize;
    if (dst as usize | src as usize).is_multiple_of(8) {
        while i + 8 <= len {
            // SAFETY: in bounds per the contract, both 8-byte aligned (bases aligned, i % 8 == 0).
            unsafe {
                let v = AtomicU64::from_ptr(src.add(i) as *mut u64).load(Ordering::Relaxed);
                AtomicU64::from_ptr(dst.add(i) as *mut u64).store(v, Ordering::Relaxed);
            }
            i += 8;
        }
    }
    while i < len {
        // SAFETY: in bounds per the contract; u8 atomics have no alignment requirement.
        unsafe {
            let v = AtomicU8::from_ptr(src.add(i) as *mut u8).load(Ordering::Relaxed);
            AtomicU8::from_ptr(dst.add(i)).store(v, Ordering::Relaxed);
        }
        i += 1;
    }
}

/// Zeroes `len` bytes at `dst` with relaxed atomic stores.
///
/// # Safety
/// `dst` must be valid for writes of `len` bytes.
pub(crate) unsafe fn zero_relaxed(dst: *mut u8, len: usize) {
    let mut i = 0usize;
    if (dst as usize).is_multiple_of(8) {
        while i + 8 <= len {
            // SAFETY: in bounds per the contract, 8-byte aligned.
            unsafe { AtomicU64::from_ptr(dst.add(i) as *mut u64).store(0, Ordering::Relaxed) };
            i += 8;
        }
    }
    while i < len {
        // SAFETY: in bounds per the contract.
        unsafe { AtomicU8::from_ptr(dst.add(i)).store(0, Ordering::Relaxed) };
        i += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Value region.

/// A zeroed, 8-byte aligned allocation that never moves. Only accessed through raw pointers.
struct ValueRegion {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the region is plain memory owned by the map; every access goes through raw pointers
// with atomic operations on the host side (see the module docs), so sharing it is sound.
unsafe impl Send for ValueRegion {}
// SAFETY: as above.
unsafe impl Sync for ValueRegion {}

/// Regions from this size on are their own anonymous mapping (pages allocated on first write).
const MMAP_MIN: usize = 64 << 10;

impl ValueRegion {
    fn new(len: usize) -> Option<ValueRegion> {
        if len >= MMAP_MIN {
            // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return None;
            }
            return NonNull::new(p as *mut u8).map(|ptr| ValueRegion { ptr, len });
        }
        let layout = std::alloc::Layout::from_size_align(len.max(8), 8).ok()?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        NonNull::new(p).map(|ptr| ValueRegion { ptr, len })
    }
}

impl Drop for ValueRegion {
    fn drop(&mut self) {
        if self.len >= MMAP_MIN {
            // SAFETY: mapped in `new` with exactly this length, unmapped once.
            unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
        } else if let Ok(layout) = std::alloc::Layout::from_size_align(self.len.max(8), 8) {
            // SAFETY: allocated in `new` with exactly this layout, freed once.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

/// A range of map value memory a program may access (one per map), for the memory checks of
/// the interpreter and the helpers.
#[derive(Debug, Clone, Copy)]
pub struct MemRegion {
    pub start: usize,
    pub end: usize,
    /// Base pointer of the region (`start` as a pointer with provenance).
    pub ptr: *mut u8,
    /// Whether programs may store into it (false for `.rodata` / `BPF_F_RDONLY_PROG` maps and
    /// for DEVMAP / CPUMAP / XSKMAP values).
    pub writable: bool,
}

// SAFETY: a MemRegion only describes a map's value region, which is Send + Sync (see above).
unsafe impl Send for MemRegion {}
// SAFETY: as above.
unsafe impl Sync for MemRegion {}

// ---------------------------------------------------------------------------------------------
// Map.

enum Kind {
    /// PERF_EVENT_ARRAY / RINGBUF: records for a consumer, no values.
    Events(Mutex<EventQueue>),
    /// ARRAY / PERCPU_ARRAY: every index exists.
    Array,
    /// DEVMAP / CPUMAP / XSKMAP: array entries that are present or not.
    Slots { present: Box<[AtomicU8]> },
    /// HASH / PERCPU_HASH / LRU_HASH / LRU_PERCPU_HASH / DEVMAP_HASH.
    Hash(HashIndex),
}

/// One record a program sent (`bpf_perf_event_output` / `bpf_ringbuf_output`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// The CPU (sluice worker) that produced it.
    pub cpu: u32,
    pub data: Vec<u8>,
}

/// Event output state: whether a perf reader listens, its records, and the ring positions.
#[derive(Debug, Default)]
struct EventQueue {
    consumer: bool,
    /// Perf records not yet read, and the bytes they take in each slot's buffer (index =
    /// perf array slot; grown once per slot on its first record).
    records: Vec<EventRecord>,
    perf_used: Vec<u64>,
    /// Ring buffer producer / consumer positions in bytes (8-byte record headers included).
    prod: u64,
    cons: u64,
    /// Ring buffer records not yet read (their bytes stay in the ring until then), in ring
    /// order: a consumer reads records in order and stops at one still reserved (busy), as
    /// the kernel's does.
    ring: std::collections::VecDeque<RingRecord>,
}

/// One ring buffer record between reserve and consumption.
#[derive(Debug, Clone, Copy)]
struct RingRecord {
    /// Producer position at reservation (the header's place in the ring).
    pos: u64,
    /// Bytes the record takes in the ring (header and padding included).
    span: u64,
    /// Offset of the data in the map's region, and its length.
    data_off: usize,
    len: u32,
    cpu: u32,
    state: RingState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RingState {
    Busy,
    Submitted,
    Discarded,
}

/// `bpf_perf_event_output` flags: the index (or BPF_F_CURRENT_CPU) and the number of
/// packet bytes to append (XDP: `ctxlen << 32`).
pub const BPF_F_INDEX_MASK: u64 = 0xffff_ffff;
pub const BPF_F_CURRENT_CPU: u64 = BPF_F_INDEX_MASK;
pub const BPF_F_CTXLEN_MASK: u64 = 0xf_ffff << 32;
/// `bpf_ringbuf_query` flags.
pub const BPF_RB_AVAIL_DATA: u64 = 0;
pub const BPF_RB_RING_SIZE: u64 = 1;
pub const BPF_RB_CONS_POS: u64 = 2;
pub const BPF_RB_PROD_POS: u64 = 3;
/// Bytes of a ring buffer record header (length + page offset).
const RINGBUF_HDR: u64 = 8;
/// Bytes of each perf array slot's buffer: what a reader that maps 64 data pages per CPU
/// (`perf_buffer__new(map, 64, …)`) gives the kernel to write into. A record takes
/// [`perf_record_bytes`]; one that does not fit is lost (-ENOSPC) until the reader takes
/// the records.
pub const PERF_BUFFER_BYTES: u64 = 64 * 4096;

/// Bytes a `bpf_perf_event_output` record of `len` bytes takes in a perf buffer: the
/// `perf_event_header` (8) and a PERF_SAMPLE_RAW sample (a u32 size, the data, padded so
/// the record stays 8-byte aligned).
pub fn perf_record_bytes(len: u64) -> u64 {
    8 + (4 + len).next_multiple_of(8)
}

/// One map: its definition and its preallocated storage.
pub struct Map {
    def: MapDef,
    copies: u32,
    stride: usize,
    region: ValueRegion,
    prog_writable: bool,
    kind: Kind,
    /// Frozen (bpf_map_freeze, as libbpf freezes `.rodata` once filled): user space can no
    /// longer write it, so the verifier may read its values as constants.
    frozen: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Map").field("def", &self.def).field("copies", &self.copies).finish_non_exhaustive()
    }
}

fn invalid(def: &MapDef, reason: impl Into<String>) -> MapError {
    MapError::InvalidDef { name: def.name.clone(), reason: reason.into() }
}

/// Map creation flags the kernel takes for each map type (its `*_alloc_check`s and
/// map_create), and their combinations it refuses; `Err` names the offending flag.
fn check_map_flags(def: &MapDef) -> Result<(), String> {
    const NO_PREALLOC: u32 = BPF_F_NO_PREALLOC;
    const NO_COMMON_LRU: u32 = 1 << 1;
    const NUMA_NODE: u32 = 1 << 2;
    const RDONLY: u32 = 1 << 3;
    const WRONLY: u32 = 1 << 4;
    const ZERO_SEED: u32 = BPF_F_ZERO_SEED;
    const MMAPABLE: u32 = 1 << 10;
    const PRESERVE_ELEMS: u32 = 1 << 11;
    const INNER_MAP: u32 = 1 << 12;
    const ACCESS: u32 = RDONLY | WRONLY | BPF_F_RDONLY_PROG | BPF_F_WRONLY_PROG;
    let (t, f) = (def.map_type, def.flags);
    if f & (RDONLY | WRONLY) == RDONLY | WRONLY || f & (BPF_F_RDONLY_PROG | BPF_F_WRONLY_PROG) == BPF_F_RDONLY_PROG | BPF_F_WRONLY_PROG {
        return Err(format!("map_flags {f:#x}: read-only and write-only at once"));
    }
    let allowed = match t {
        map_type::ARRAY => NUMA_NODE | MMAPABLE | ACCESS | INNER_MAP,
        map_type::PERCPU_ARRAY => NUMA_NODE | ACCESS,
        map_type::PERF_EVENT_ARRAY => NUMA_NODE | RDONLY | WRONLY | PRESERVE_ELEMS,
        // fd arrays: array_map_alloc_check without the program access flags.
        map_type::PROG_ARRAY | map_type::ARRAY_OF_MAPS => NUMA_NODE | RDONLY | WRONLY,
        map_type::HASH | map_type::PERCPU_HASH | map_type::HASH_OF_MAPS => NO_PREALLOC | NUMA_NODE | ACCESS | ZERO_SEED,
        map_type::LRU_HASH | map_type::LRU_PERCPU_HASH => NO_COMMON_LRU | NUMA_NODE | ACCESS | ZERO_SEED,
        map_type::DEVMAP | map_type::DEVMAP_HASH | map_type::XSKMAP => NUMA_NODE | RDONLY | WRONLY,
        map_type::CPUMAP | map_type::RINGBUF => NUMA_NODE,
        _ => u32::MAX,
    };
    if f & !allowed != 0 {
        let lru = matches!(t, map_type::LRU_HASH | map_type::LRU_PERCPU_HASH);
        return Err(match f & !allowed {
            x if lru && x & NO_PREALLOC != 0 => "map_flags: an LRU hash is always preallocated (BPF_F_NO_PREALLOC: ENOTSUPP)".into(),
            x if x & NO_COMMON_LRU != 0 => "map_flags: BPF_F_NO_COMMON_LRU is for LRU hashes only".into(),
            x => format!("map_flags {x:#x} are not taken by a {} map", map_type_name(t)),
        });
    }
    Ok(())
}

/// The seed of a hash map's key hash: random per map (the kernel's `get_random_u32` into
/// `htab->hashrnd`: each map lays its keys out differently), 0 with BPF_F_ZERO_SEED.
fn hash_seed(def: &MapDef) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    if def.flags & BPF_F_ZERO_SEED != 0 {
        return 0;
    }
    std::collections::hash_map::RandomState::new().build_hasher().finish()
}

impl Map {
    /// Creates a map with `ncpus` copies of each value if it is a per-CPU map, reserving at
    /// most `max_bytes` of memory.
    pub fn new(def: &MapDef, ncpus: u32, max_bytes: usize) -> Result<Map, MapError> {
        let t = def.map_type;
        if !is_supported_map_type(t) {
            return Err(MapError::UnsupportedType { name: def.name.clone(), map_type: t, type_name: map_type_name(t) });
        }
        check_map_flags(def).map_err(|why| invalid(def, why))?;
        if t == map_type::PERF_EVENT_ARRAY || t == map_type::RINGBUF {
            return Map::new_events(def);
        }
        if def.max_entries == 0 {
            return Err(invalid(def, "max_entries is 0"));
        }
        if def.value_size == 0 {
            return Err(invalid(def, "value_size is 0"));
        }
        if ncpus == 0 {
            return Err(invalid(def, "ncpus is 0"));
        }
        let ks = def.key_size as usize;
        let vs = def.value_size as usize;
        if def.is_map_of_maps() {
            match def.inner.as_deref() {
                None => return Err(invalid(def, "a map of maps needs an inner-map template (`__array(values, struct ...)`)")),
                Some(i) if i.is_map_of_maps() || !is_supported_map_type(i.map_type) => {
                    return Err(invalid(def, format!("inner maps of type {} are not supported", map_type_name(i.map_type))))
                }
                Some(_) => {}
            }
        }
        match t {
            map_type::HASH | map_type::PERCPU_HASH | map_type::LRU_HASH | map_type::LRU_PERCPU_HASH | map_type::HASH_OF_MAPS => {
                if ks == 0 || ks > MAX_KEY_SIZE {
                    return Err(invalid(def, format!("key_size {ks} not in 1..={MAX_KEY_SIZE}")));
                }
            }
            _ => {
                if ks != 4 {
                    return Err(invalid(def, format!("key_size must be 4, not {ks}")));
                }
            }
        }
        match t {
            map_type::DEVMAP | map_type::DEVMAP_HASH | map_type::CPUMAP if vs != 4 && vs != 8 => {
                return Err(invalid(def, format!("value_size must be 4 or 8, not {vs}")));
            }
            map_type::XSKMAP | map_type::PROG_ARRAY | map_type::ARRAY_OF_MAPS | map_type::HASH_OF_MAPS if vs != 4 => {
                return Err(invalid(def, format!("value_size must be 4, not {vs}")));
            }
            _ => {}
        }
        let percpu = matches!(t, map_type::PERCPU_ARRAY | map_type::PERCPU_HASH | map_type::LRU_PERCPU_HASH);
        let copies = if percpu { ncpus } else { 1 };
        let stride = vs.checked_add(7).ok_or_else(|| invalid(def, "value_size too large"))? & !7;
        let region_len = (def.max_entries as usize)
            .checked_mul(copies as usize)
            .and_then(|n| n.checked_mul(stride))
            .ok_or_else(|| invalid(def, "map too large"))?;
        let is_hash = matches!(
            t,
            map_type::HASH
                | map_type::PERCPU_HASH
                | map_type::LRU_HASH
                | map_type::LRU_PERCPU_HASH
                | map_type::DEVMAP_HASH
                | map_type::HASH_OF_MAPS
        );
        let index_len = if is_hash {
            HashIndex::bytes(ks, def.max_entries).ok_or_else(|| invalid(def, "map too large"))?
        } else {
            def.max_entries as usize
        };
        let total = region_len.checked_add(index_len);
        if total.is_none_or(|n| n > max_bytes) {
            return Err(invalid(def, format!("needs more than the {max_bytes} bytes allowed for one map")));
        }
        let region = ValueRegion::new(region_len).ok_or_else(|| invalid(def, "out of memory"))?;
        let kind = if is_hash {
            let lru = matches!(t, map_type::LRU_HASH | map_type::LRU_PERCPU_HASH);
            Kind::Hash(HashIndex::new(ks, def.max_entries, lru, hash_seed(def)))
        } else if t == map_type::ARRAY || t == map_type::PERCPU_ARRAY {
            Kind::Array
        } else {
            Kind::Slots { present: (0..def.max_entries).map(|_| AtomicU8::new(0)).collect() }
        };
        let prog_writable = def.flags & BPF_F_RDONLY_PROG == 0
            && !matches!(t, map_type::DEVMAP | map_type::DEVMAP_HASH | map_type::CPUMAP | map_type::XSKMAP | map_type::PROG_ARRAY)
            && !def.is_map_of_maps();
        Ok(Map { def: def.clone(), copies, stride, region, prog_writable, kind, frozen: false.into() })
    }

    pub fn def(&self) -> &MapDef {
        &self.def
    }

    /// PERF_EVENT_ARRAY (key and value 4 bytes: a perf event per CPU slot) or RINGBUF (no
    /// key or value; max_entries = bytes, a power of 2 and a multiple of the 4 KiB page).
    fn new_events(def: &MapDef) -> Result<Map, MapError> {
        if def.map_type == map_type::RINGBUF {
            if def.key_size != 0 || def.value_size != 0 {
                return Err(invalid(def, "a ring buffer has no key or value (sizes must be 0)"));
            }
            if !def.max_entries.is_power_of_two() || !def.max_entries.is_multiple_of(4096) {
                return Err(invalid(def, format!("ring size {} is not a power of 2 multiple of 4096", def.max_entries)));
            }
        } else if def.key_size != 4 || def.value_size != 4 || def.max_entries == 0 {
            return Err(invalid(def, "a perf event array has 4-byte keys and values and max_entries > 0"));
        }
        // A ring buffer's records live in its region, which programs write between reserve and
        // submit. Twice the ring size: the kernel maps the ring's pages twice in a row so a
        // record that wraps around the end is still contiguous; here a record simply goes
        // on past the end (live records never share bytes: together they take < size).
        let ring = def.map_type == map_type::RINGBUF;
        let len = if ring { 2 * def.max_entries as usize } else { 0 };
        let region = ValueRegion::new(len).ok_or_else(|| invalid(def, "out of memory"))?;
        let kind = Kind::Events(Mutex::new(EventQueue::default()));
        Ok(Map { def: def.clone(), copies: 1, stride: 0, region, prog_writable: ring, kind, frozen: false.into() })
    }

    fn events(&self) -> Option<std::sync::MutexGuard<'_, EventQueue>> {
        match &self.kind {
            Kind::Events(q) => Some(q.lock().unwrap_or_else(|e| e.into_inner())),
            _ => None,
        }
    }

    /// A perf reader listens from now on (it opens every CPU slot): without one, perf output
    /// finds no event (-ENOENT), as in the kernel. A ring buffer needs no attaching: its
    /// records wait in the ring for [`Map::take_events`], and the ring fills up (-EAGAIN)
    /// while nobody takes them.
    pub fn attach_consumer(&self) {
        if let Some(mut q) = self.events() {
            q.consumer = true;
        }
    }

    /// Reads the records sent so far, oldest first, and frees the space they took (the
    /// next call gets only newer ones). A ring buffer's reader stops at the first record
    /// still reserved and skips discarded ones, as the kernel's consumer does. The copies
    /// are made here, on the reader's side, not when a program sends.
    pub fn take_events(&self) -> Vec<EventRecord> {
        let Some(mut q) = self.events() else { return Vec::new() };
        if self.def.map_type == map_type::PERF_EVENT_ARRAY {
            q.perf_used.iter_mut().for_each(|b| *b = 0);
            return std::mem::take(&mut q.records);
        }
        let mut out = Vec::new();
        while q.ring.front().is_some_and(|r| r.state != RingState::Busy) {
            let Some(r) = q.ring.pop_front() else { break };
            if r.state == RingState::Submitted {
                let mut data = vec![0u8; r.len as usize];
                // SAFETY: [data_off, data_off + len) lies in the region (ring_reserve: data_off
                // < size + 8 and len < size - 8, region = 2 * size bytes).
                unsafe { copy_relaxed(data.as_mut_ptr(), self.region.ptr.as_ptr().add(r.data_off), data.len()) };
                out.push(EventRecord { cpu: r.cpu, data });
            }
            q.cons = r.pos + r.span;
        }
        out
    }

    /// `bpf_perf_event_output` on this map: the kernel's return value (0, -ENOENT without a
    /// listener in the slot, -E2BIG for an index past the array, -EINVAL for unknown flags,
    /// -ENOSPC when the slot's buffer has no room for a record of `len` bytes: it is lost).
    /// `record` builds the bytes only once they will be kept.
    pub(crate) fn perf_output(&self, flags: u64, cpu: u32, len: u64, record: impl FnOnce() -> Vec<u8>) -> i64 {
        let Some(mut q) = self.events().filter(|_| self.def.map_type == map_type::PERF_EVENT_ARRAY) else {
            return -(libc::EINVAL as i64);
        };
        if flags & !(BPF_F_INDEX_MASK | BPF_F_CTXLEN_MASK) != 0 {
            return -(libc::EINVAL as i64);
        }
        let index = if flags & BPF_F_INDEX_MASK == BPF_F_CURRENT_CPU { cpu as u64 } else { flags & BPF_F_INDEX_MASK };
        if index >= self.def.max_entries as u64 {
            return -(libc::E2BIG as i64);
        }
        if !q.consumer {
            return -(libc::ENOENT as i64);
        }
        let slot = index as usize;
        if q.perf_used.len() <= slot {
            q.perf_used.resize(slot + 1, 0);
        }
        let bytes = perf_record_bytes(len);
        if q.perf_used[slot] + bytes > PERF_BUFFER_BYTES {
            return -(libc::ENOSPC as i64);
        }
        q.perf_used[slot] += bytes;
        let data = record();
        q.records.push(EventRecord { cpu, data });
        0
    }

    fn ring(&self) -> Option<std::sync::MutexGuard<'_, EventQueue>> {
        self.events().filter(|_| self.def.map_type == map_type::RINGBUF)
    }

    /// Reserves `len` bytes in the ring: the record's data offset in the region, or None when
    /// it does not fit in the space the consumer has not freed (nobody consuming: the ring
    /// fills up; the kernel refuses once the unconsumed bytes would exceed size - 1).
    fn ring_reserve(&self, q: &mut EventQueue, len: u64, cpu: u32) -> Option<usize> {
        let size = self.def.max_entries as u64;
        let span = len.checked_add(RINGBUF_HDR + 7)? & !7;
        if q.prod - q.cons + span >= size {
            return None;
        }
        let data_off = (q.prod % size + RINGBUF_HDR) as usize;
        q.ring.push_back(RingRecord { pos: q.prod, span, data_off, len: len as u32, cpu, state: RingState::Busy });
        q.prod += span;
        Some(data_off)
    }

    /// `bpf_ringbuf_output` on this map: 0, or -EAGAIN when the record does not fit,
    /// -EINVAL for flags other than BPF_RB_NO_WAKEUP / BPF_RB_FORCE_WAKEUP.
    ///
    /// # Safety
    /// `src` must be readable for `len` bytes (program memory the helper checked); it may be
    /// written by other workers meanwhile (the copy is relaxed atomic bytes).
    pub(crate) unsafe fn ringbuf_output(&self, flags: u64, cpu: u32, src: *const u8, len: usize) -> i64 {
        let Some(mut q) = self.ring() else { return -(libc::EINVAL as i64) };
        if flags & !3 != 0 {
            return -(libc::EINVAL as i64);
        }
        let Some(off) = self.ring_reserve(&mut q, len as u64, cpu) else { return -(libc::EAGAIN as i64) };
        // SAFETY: the reserved bytes lie in the region (see take_events) and no other live
        // record shares them (src may be one: they take disjoint bytes); src has len bytes
        // (the caller's contract).
        unsafe { copy_relaxed(self.region.ptr.as_ptr().add(off), src, len) };
        if let Some(r) = q.ring.back_mut() {
            r.state = RingState::Submitted;
        }
        0
    }

    /// `bpf_ringbuf_reserve`: the address of `len` writable bytes in the ring, or 0 (NULL)
    /// when they do not fit or `flags` is not 0, as the kernel.
    pub(crate) fn ringbuf_reserve(&self, len: u64, flags: u64, cpu: u32) -> u64 {
        let Some(mut q) = self.ring() else { return 0 };
        if flags != 0 {
            return 0;
        }
        match self.ring_reserve(&mut q, len, cpu) {
            Some(off) => (self.region.ptr.as_ptr() as u64) + off as u64,
            None => 0,
        }
    }

    /// `bpf_ringbuf_submit` / `bpf_ringbuf_discard` of the record whose data is at `addr`.
    /// False if no reserved record of this ring starts there (a forged pointer: the verifier
    /// only lets through what `ringbuf_reserve` returned).
    pub(crate) fn ringbuf_commit(&self, addr: u64, discard: bool) -> bool {
        let Some(mut q) = self.ring() else { return false };
        let base = self.region.ptr.as_ptr() as u64;
        let Some(off) = addr.checked_sub(base) else { return false };
        let Some(r) = q.ring.iter_mut().find(|r| r.data_off as u64 == off && r.state == RingState::Busy) else { return false };
        r.state = if discard { RingState::Discarded } else { RingState::Submitted };
        true
    }

    /// Whether `addr` lies in this ring buffer's record memory.
    pub(crate) fn ring_contains(&self, addr: u64) -> bool {
        let start = self.region.ptr.as_ptr() as u64;
        self.def.map_type == map_type::RINGBUF && addr >= start && addr < start + self.region.len as u64
    }

    /// `bpf_ringbuf_query`: available bytes, ring size, consumer or producer position.
    pub fn ringbuf_query(&self, flags: u64) -> u64 {
        let Some(q) = self.ring() else { return 0 };
        match flags {
            BPF_RB_AVAIL_DATA => q.prod - q.cons,
            BPF_RB_RING_SIZE => self.def.max_entries as u64,
            BPF_RB_CONS_POS => q.cons,
            BPF_RB_PROD_POS => q.prod,
            _ => 0,
        }
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    pub fn map_type(&self) -> u32 {
        self.def.map_type
    }

    /// Number of value copies per entry (`ncpus` for per-CPU maps, 1 otherwise).
    pub fn copies(&self) -> u32 {
        self.copies
    }

    pub fn is_percpu(&self) -> bool {
        matches!(self.def.map_type, map_type::PERCPU_ARRAY | map_type::PERCPU_HASH | map_type::LRU_PERCPU_HASH)
    }

    /// Whether programs may store into this map's values.
    pub fn prog_writable(&self) -> bool {
        self.prog_writable
    }

    /// The value region programs may access.
    pub fn region(&self) -> MemRegion {
        let start = self.region.ptr.as_ptr() as usize;
        MemRegion { start, end: start + self.region.len, ptr: self.region.ptr.as_ptr(), writable: self.prog_writable }
    }

    /// The address of byte `offset` of element 0 of an ARRAY map: what `lddw` with
    /// `BPF_PSEUDO_MAP_VALUE` loads (global variables). `None` for other map types or an
    /// offset outside the value.
    pub fn direct_value_addr(&self, offset: u32) -> Option<u64> {
        if self.def.map_type != map_type::ARRAY || offset >= self.def.value_size {
            return None;
        }
        Some(self.region.ptr.as_ptr().wrapping_add(offset as usize) as u64)
    }

    #[inline]
    fn value_ptr(&self, slot: u32, cpu: u32) -> *mut u8 {
        let off = (slot as usize * self.copies as usize + cpu as usize) * self.stride;
        // Callers guarantee slot < max_entries and cpu < copies, so off is inside the region.
        self.region.ptr.as_ptr().wrapping_add(off)
    }

    fn array_index(&self, key: &[u8]) -> Option<u32> {
        let k: [u8; 4] = key.try_into().ok()?;
        let i = u32::from_le_bytes(k);
        (i < self.def.max_entries).then_some(i)
    }

    fn check_key(&self, key: &[u8]) -> Result<(), MapError> {
        if key.len() != self.def.key_size as usize {
            return Err(MapError::KeySize { expected: self.def.key_size as usize, got: key.len() });
        }
        Ok(())
    }

    // ---- program-side operations (used by helpers; key/value already bounds-checked) ----

    /// `bpf_map_lookup_elem` from a program: the address of the value (this CPU's copy for
    /// per-CPU maps), or `None`. Marks LRU elements referenced.
    pub fn prog_lookup(&self, key: &[u8], cpu: u32) -> Option<*mut u8> {
        if key.len() != self.def.key_size as usize {
            return None;
        }
        let cpu = if self.copies > 1 { cpu } else { 0 };
        if cpu >= self.copies {
            return None;
        }
        match &self.kind {
            Kind::Events(_) => None,
            Kind::Array => self.array_index(key).map(|i| self.value_ptr(i, cpu)),
            Kind::Slots { present } => {
                let i = self.array_index(key)?;
                if present.get(i as usize)?.load(Ordering::Acquire) == 0 {
                    return None;
                }
                Some(self.value_ptr(i, 0))
            }
            Kind::Hash(ix) => {
                let slot = ix.find(key, ix.hash(key))?;
                if ix.lru {
                    ix.reference(slot);
                }
                Some(self.value_ptr(slot, cpu))
            }
        }
    }

    /// `bpf_map_update_elem` from a program.
    ///
    /// # Safety
    /// `value` must be valid for reads of `value_size` bytes.
    pub unsafe fn prog_update(&self, key: &[u8], value: *const u8, flags: u64, cpu: u32) -> Result<(), MapError> {
        self.check_key(key)?;
        // BPF_F_LOCK may join the others, and no sluice map holds a bpf_spin_lock, so it is
        // EINVAL — for an array only after the index and NOEXIST (array_map_update_elem's
        // order), for a hash at once (htab_map_update_elem).
        let lock = flags & BPF_F_LOCK != 0;
        if flags & !BPF_F_LOCK > BPF_EXIST {
            return Err(MapError::Flags(flags));
        }
        if lock && !matches!(self.kind, Kind::Array) {
            return Err(MapError::Flags(flags));
        }
        let vs = self.def.value_size as usize;
        let cpu = if self.copies > 1 { cpu } else { 0 };
        if cpu >= self.copies {
            return Err(MapError::InvalidValue("cpu out of range"));
        }
        match &self.kind {
            Kind::Events(_) => Err(MapError::NotSupported),
            Kind::Array => {
                let i = self.array_index(key).ok_or_else(|| self.out_of_range(key))?;
                if flags & BPF_NOEXIST != 0 {
                    return Err(MapError::Exists);
                }
                if lock {
                    return Err(MapError::Flags(flags));
                }
                // SAFETY: value readable for vs bytes (contract); the slot holds >= vs bytes.
                unsafe { copy_relaxed(self.value_ptr(i, cpu), value, vs) };
                Ok(())
            }
            Kind::Slots { .. } => Err(MapError::NotSupported),
            Kind::Hash(_) if self.def.map_type == map_type::DEVMAP_HASH || self.def.is_map_of_maps() => Err(MapError::NotSupported),
            Kind::Hash(ix) => {
                let copies = self.copies;
                self.hash_update(ix, key, flags, |slot, is_new| {
                    for c in 0..copies {
                        let dst = self.value_ptr(slot, c);
                        if c == cpu {
                            // SAFETY: value readable for vs bytes; dst is a slot of >= vs bytes.
                            unsafe { copy_relaxed(dst, value, vs) };
                        } else if is_new {
                            // SAFETY: dst is a slot of `stride` bytes inside the region.
                            unsafe { zero_relaxed(dst, self.stride) };
                        }
                    }
                })
            }
        }
    }

    /// `bpf_map_delete_elem` from a program.
    pub fn prog_delete(&self, key: &[u8]) -> Result<(), MapError> {
        self.check_key(key)?;
        match &self.kind {
            Kind::Events(_) => Err(MapError::NotSupported),
            Kind::Array => Err(MapError::InvalidValue("array elements cannot be deleted")),
            Kind::Slots { .. } => Err(MapError::NotSupported),
            Kind::Hash(_) if self.def.map_type == map_type::DEVMAP_HASH || self.def.is_map_of_maps() => Err(MapError::NotSupported),
            Kind::Hash(ix) => self.hash_delete(ix, key),
        }
    }

    /// For a map of maps: the index (in the object's [`Maps`]) of the inner map at `key`.
    pub fn inner_index(&self, key: &[u8]) -> Option<u32> {
        if !self.def.is_map_of_maps() {
            return None;
        }
        let ptr = self.prog_lookup(key, 0)?;
        // SAFETY: ptr is an 8-byte aligned value slot of at least 4 bytes in our region.
        Some(unsafe { AtomicU64::from_ptr(ptr as *mut u64).load(Ordering::Relaxed) } as u32)
    }

    /// The redirect target of entry `key` of a DEVMAP / DEVMAP_HASH / CPUMAP / XSKMAP, or
    /// `None` if the entry is absent (or the map is of another type).
    pub fn redirect_target(&self, key: u32) -> Option<RedirectTarget> {
        let kb = key.to_le_bytes();
        let ptr = match (&self.kind, self.def.map_type) {
            (Kind::Slots { .. }, _) | (Kind::Hash(_), map_type::DEVMAP_HASH) => self.prog_lookup(&kb, 0)?,
            _ => return None,
        };
        // SAFETY: ptr is an 8-byte aligned value slot of at least 4 bytes in our region.
        let v = unsafe { AtomicU64::from_ptr(ptr as *mut u64).load(Ordering::Relaxed) } as u32;
        match self.def.map_type {
            map_type::DEVMAP | map_type::DEVMAP_HASH => Some(RedirectTarget::Ifindex(v)),
            map_type::CPUMAP => Some(RedirectTarget::Cpu(key)),
            map_type::XSKMAP => Some(RedirectTarget::Xsk(v)),
            _ => None,
        }
    }

    /// The program in slot `index` of a PROG_ARRAY (an index into the object's programs),
    /// or `None` for an empty slot, an index past the end or another map type.
    pub fn tail_call_target(&self, index: u32) -> Option<u32> {
        if self.def.map_type != map_type::PROG_ARRAY {
            return None;
        }
        let ptr = self.prog_lookup(&index.to_le_bytes(), 0)?;
        // SAFETY: ptr is an 8-byte aligned value slot of at least 4 bytes in our region.
        Some(unsafe { AtomicU64::from_ptr(ptr as *mut u64).load(Ordering::Relaxed) } as u32)
    }

    fn hash_update(&self, ix: &HashIndex, key: &[u8], flags: u64, write: impl FnOnce(u32, bool)) -> Result<(), MapError> {
        let h = ix.hash(key);
        let mut w = ix.writer();
        match w.find(key, h) {
            Some(slot) => {
                if flags == BPF_NOEXIST {
                    return Err(MapError::Exists);
                }
                write(slot, false);
                // htab_lru_map_update_elem sets the reference of an element it replaces: a
                // flow that is only ever updated stays as hot as one that is looked up.
                if ix.lru {
                    w.reference(slot);
                }
                Ok(())
            }
            None => {
                if flags == BPF_EXIST {
                    return Err(MapError::NotFound);
                }
                let slot = w.alloc_slot().ok_or(MapError::Full)?;
                write(slot, true);
                w.link(slot, key, h);
                Ok(())
            }
        }
    }

    fn hash_delete(&self, ix: &HashIndex, key: &[u8]) -> Result<(), MapError> {
        let mut w = ix.writer();
        let slot = w.find(key, ix.hash(key)).ok_or(MapError::NotFound)?;
        w.free_slot(slot);
        Ok(())
    }

    // ---- userspace API ----

    /// Copies out the value of `key` (CPU `cpu`'s copy for per-CPU maps; ignored otherwise).
    /// `None` if absent or if the key has the wrong size.
    pub fn lookup(&self, key: &[u8], cpu: u32) -> Option<Vec<u8>> {
        let mut out = vec![0u8; self.def.value_size as usize];
        self.lookup_into(key, cpu, &mut out).then_some(out)
    }

    /// Like [`Map::lookup`] into a caller buffer of exactly `value_size` bytes (no allocation).
    pub fn lookup_into(&self, key: &[u8], cpu: u32, out: &mut [u8]) -> bool {
        if out.len() != self.def.value_size as usize || key.len() != self.def.key_size as usize {
            return false;
        }
        let cpu = if self.copies > 1 { cpu } else { 0 };
        if cpu >= self.copies {
            return false;
        }
        match &self.kind {
            Kind::Events(_) => false,
            Kind::Array | Kind::Slots { .. } => {
                let Some(i) = self.array_index(key) else {
                    return false;
                };
                if let Kind::Slots { present } = &self.kind {
                    if present[i as usize].load(Ordering::Acquire) == 0 {
                        return false;
                    }
                }
                // SAFETY: the slot holds value_size bytes; out is exactly that long.
                unsafe { copy_relaxed(out.as_mut_ptr(), self.value_ptr(i, cpu), out.len()) };
                true
            }
            Kind::Hash(ix) => {
                // The writers' lock keeps the slot from being reused while its value is copied.
                let w = ix.writer();
                let Some(slot) = w.find(key, ix.hash(key)) else {
                    return false;
                };
                // SAFETY: as above.
                unsafe { copy_relaxed(out.as_mut_ptr(), self.value_ptr(slot, cpu), out.len()) };
                true
            }
        }
    }

    /// All CPUs' copies of the value of `key` (one element for non-per-CPU maps).
    pub fn lookup_percpu(&self, key: &[u8]) -> Option<Vec<Vec<u8>>> {
        let mut all = Vec::with_capacity(self.copies as usize);
        for c in 0..self.copies {
            all.push(self.lookup(key, c)?);
        }
        Some(all)
    }

    /// Inserts or updates `key` from userspace. `value` is either `value_size` bytes (for
    /// per-CPU maps: every CPU gets it) or, for per-CPU maps, `copies` values of
    /// `round_up(value_size, 8)` bytes each (the kernel's layout). `flags` is `BPF_ANY`,
    /// `BPF_NOEXIST` or `BPF_EXIST`. DEVMAP/CPUMAP values attach no program
    /// (`bpf_prog.fd <= 0`); ifindex / qsize 0 empties a DEVMAP / CPUMAP slot, while a
    /// DEVMAP_HASH value must name a non-zero ifindex, as in the kernel. A frozen map refuses.
    pub fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        if self.is_frozen() {
            return Err(MapError::Frozen);
        }
        if self.def.is_map_of_maps() {
            return Err(MapError::InvalidValue("a map of maps holds maps: insert one with Maps::set_inner"));
        }
        self.write_entry(key, value, flags)
    }

    /// [`Map::update`] without the map-of-maps check ([`Maps::set_inner`] checked the value).
    fn write_entry(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        self.check_key(key)?;
        if flags > BPF_EXIST {
            return Err(MapError::Flags(flags));
        }
        let vs = self.def.value_size as usize;
        // The kernel's per-CPU layout (`round_up(value_size, 8)` per CPU) holds with one CPU
        // too: what `lookup_percpu` gives back for a 4-byte value is 8 bytes.
        let per_cpu_layout = self.is_percpu() && value.len() == self.stride * self.copies as usize;
        if value.len() != vs && !per_cpu_layout {
            return Err(MapError::ValueSize { expected: vs, got: value.len() });
        }
        let t = self.def.map_type;
        if matches!(t, map_type::PROG_ARRAY | map_type::ARRAY_OF_MAPS) && flags != BPF_ANY {
            // bpf_fd_array_map_update_elem takes BPF_ANY only.
            return Err(MapError::Flags(flags));
        }
        if matches!(t, map_type::DEVMAP | map_type::CPUMAP) {
            // __dev_map_update_elem / cpu_map_update_elem: the index, then NOEXIST is always
            // EEXIST (EXIST never fails); ifindex / qsize 0 empties the slot.
            if self.array_index(key).is_none() {
                return Err(self.out_of_range(key));
            }
            if flags == BPF_NOEXIST {
                return Err(MapError::Exists);
            }
        }
        // The stored value names the attached program by id, not fd (0: none), as
        // __dev_map_alloc_node / __cpu_map_entry_alloc store `bpf_prog.id`.
        let mut redirect_value = [0u8; 8];
        let mut value = value;
        if matches!(t, map_type::DEVMAP | map_type::DEVMAP_HASH | map_type::CPUMAP) {
            let first = u32::from_le_bytes(value[0..4].try_into().unwrap_or([0; 4]));
            let second = value.get(4..8).map(|b| i32::from_le_bytes(b.try_into().unwrap_or([0; 4]))).unwrap_or(0);
            // cpu_map_update_elem: the qsize bound, then qsize 0 deletes whatever the fd;
            // __dev_map_update_elem: ifindex 0 deletes, but not with a program fd.
            if t == map_type::CPUMAP && first > MAX_CPUMAP_QSIZE {
                return Err(MapError::Overflow("a CPUMAP qsize above 16384"));
            }
            if t == map_type::CPUMAP && first == 0 {
                return self.delete(key);
            }
            if second > 0 {
                return Err(MapError::InvalidValue("programs attached to DEVMAP/CPUMAP entries are not supported"));
            }
            if first == 0 {
                return if t == map_type::DEVMAP { self.delete(key) } else { Err(MapError::InvalidValue("ifindex 0")) };
            }
            redirect_value[..4].copy_from_slice(&value[..4]);
            value = &redirect_value[..value.len()];
        }
        let copies = self.copies;
        let stride = self.stride;
        let write = |slot: u32| {
            for c in 0..copies {
                let src = if per_cpu_layout { &value[c as usize * stride..c as usize * stride + vs] } else { value };
                // SAFETY: the slot holds `stride >= vs` bytes; src is vs bytes of host memory.
                unsafe { copy_relaxed(self.value_ptr(slot, c), src.as_ptr(), vs) };
            }
        };
        match &self.kind {
            Kind::Events(_) => Err(MapError::NotSupported),
            Kind::Array => {
                let i = self.array_index(key).ok_or_else(|| self.out_of_range(key))?;
                if flags == BPF_NOEXIST {
                    return Err(MapError::Exists);
                }
                write(i);
                Ok(())
            }
            Kind::Slots { present } => {
                let i = self.array_index(key).ok_or_else(|| self.out_of_range(key))?;
                let p = &present[i as usize];
                let exists = p.load(Ordering::Acquire) != 0;
                if exists && flags == BPF_NOEXIST {
                    return Err(MapError::Exists);
                }
                // Only a socket map refuses EXIST on an empty slot (xsk_map_update_elem).
                if !exists && flags == BPF_EXIST && t == map_type::XSKMAP {
                    return Err(MapError::NotFound);
                }
                write(i);
                p.store(1, Ordering::Release);
                Ok(())
            }
            Kind::Hash(ix) => {
                // __dev_map_hash_update_elem checks NOEXIST only: EXIST inserts a missing key.
                let flags = if t == map_type::DEVMAP_HASH && flags == BPF_EXIST { BPF_ANY } else { flags };
                self.hash_update(ix, key, flags, |slot, _| write(slot))
            }
        }
    }

    fn out_of_range(&self, key: &[u8]) -> MapError {
        MapError::OutOfRange { index: u32::from_le_bytes(key.try_into().unwrap_or([0xff; 4])), max_entries: self.def.max_entries }
    }

    /// bpf_map_freeze: from now on user space cannot write the map (EPERM); programs see it
    /// as before.
    pub fn freeze(&self) {
        self.frozen.store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn is_frozen(&self) -> bool {
        self.frozen.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Deletes `key` from userspace. Array elements cannot be deleted (`EINVAL`). In a
    /// device, CPU or socket map an empty slot deletes fine and a key past the end is EINVAL
    /// (dev_map_delete_elem, cpu_map_delete_elem, xsk_map_delete_elem); in a program array
    /// or array of maps they are ENOENT and E2BIG (fd_array_map_delete_elem).
    pub fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        if self.is_frozen() {
            return Err(MapError::Frozen);
        }
        self.check_key(key)?;
        match &self.kind {
            Kind::Events(_) => Err(MapError::NotSupported),
            Kind::Array => Err(MapError::InvalidValue("array elements cannot be deleted")),
            Kind::Slots { present } => {
                let redirect = matches!(self.def.map_type, map_type::DEVMAP | map_type::CPUMAP | map_type::XSKMAP);
                let Some(i) = self.array_index(key) else {
                    return Err(if redirect { MapError::InvalidValue("index past the end") } else { self.out_of_range(key) });
                };
                if present[i as usize].swap(0, Ordering::AcqRel) == 0 && !redirect {
                    return Err(MapError::NotFound);
                }
                Ok(())
            }
            Kind::Hash(ix) => self.hash_delete(ix, key),
        }
    }

    /// Number of present entries (`max_entries` for arrays).
    pub fn len(&self) -> usize {
        match &self.kind {
            Kind::Events(_) => 0,
            Kind::Array => self.def.max_entries as usize,
            Kind::Slots { present } => present.iter().filter(|p| p.load(Ordering::Relaxed) != 0).count(),
            Kind::Hash(ix) => ix.writer().alloc.count as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The keys of all present entries (arrays: every index; hash maps: in slot order).
    pub fn keys(&self) -> Vec<Vec<u8>> {
        match &self.kind {
            Kind::Events(_) => Vec::new(),
            Kind::Array => (0..self.def.max_entries).map(|i| i.to_le_bytes().to_vec()).collect(),
            Kind::Slots { present } => (0..self.def.max_entries)
                .filter(|&i| present[i as usize].load(Ordering::Acquire) != 0)
                .map(|i| i.to_le_bytes().to_vec())
                .collect(),
            Kind::Hash(ix) => {
                let w = ix.writer();
                w.used_slots().map(|s| w.key_of(s)).collect()
            }
        }
    }

    /// A snapshot of the whole map (every array slot; hash entries sorted by key bytes).
    pub fn dump(&self) -> MapDump {
        self.dump_with(DumpScope::All)
    }

    /// A snapshot of the map: with [`DumpScope::NonZero`], array slots whose value is zero on
    /// every CPU are left out (a huge, mostly empty array dumps what was written).
    pub fn dump_with(&self, scope: DumpScope) -> MapDump {
        let mut entries = Vec::new();
        self.for_each_entry(scope, |e| entries.push(e));
        MapDump {
            name: self.def.name.clone(),
            map_type: self.def.map_type,
            type_name: map_type_name(self.def.map_type).to_owned(),
            key_size: self.def.key_size,
            value_size: self.def.value_size,
            max_entries: self.def.max_entries,
            flags: self.def.flags,
            ncpus: self.copies,
            entries,
        }
    }

    /// Calls `f` with every present entry, in key order for arrays and key-byte order for
    /// hash maps, without building the whole dump: an array is walked slot by slot (zero
    /// slots read the untouched pages without allocating them). For a map of maps `value`
    /// holds the inner map's index (4 bytes); [`Maps::for_each_entry`] names it.
    pub fn for_each_entry(&self, scope: DumpScope, mut f: impl FnMut(MapDumpEntry)) {
        let percpu = self.is_percpu();
        let entry = |k: Vec<u8>| -> Option<MapDumpEntry> {
            if percpu {
                let values = self.lookup_percpu(&k)?;
                Some(MapDumpEntry { key: k, value: None, values: Some(values), inner_map: None })
            } else {
                let value = self.lookup(&k, 0)?;
                Some(MapDumpEntry { key: k, value: Some(value), values: None, inner_map: None })
            }
        };
        match &self.kind {
            Kind::Array => {
                let span = self.copies as usize * self.stride;
                let visit = |i: u32| {
                    if scope == DumpScope::NonZero && self.slot_is_zero(i, span) {
                        return;
                    }
                    if let Some(e) = entry(i.to_le_bytes().to_vec()) {
                        f(e);
                    }
                };
                if scope == DumpScope::NonZero && self.region.len >= MMAP_MIN {
                    self.for_each_touched_slot(span, visit);
                } else {
                    (0..self.def.max_entries).for_each(visit);
                }
            }
            Kind::Hash(_) => {
                let mut keys = self.keys();
                keys.sort();
                keys.into_iter().filter_map(entry).for_each(f);
            }
            _ => self.keys().into_iter().filter_map(entry).for_each(f),
        }
    }

    /// Calls `visit` in ascending order with every slot of an mmapped array region that lies
    /// (partly) on a page that was ever touched: a page neither present nor swapped out
    /// (`/proc/self/pagemap` bits 63 and 62) was never written and holds zeros only, so a
    /// sparse dump of a huge array reads the pages written and no others. (`mincore` would
    /// not do: a written page that was swapped out is not resident.) Without pagemap every
    /// slot is visited.
    fn for_each_touched_slot(&self, span: usize, mut visit: impl FnMut(u32)) {
        use std::os::unix::fs::FileExt;
        const PAGE: usize = 4096;
        const CHUNK: usize = 1 << 14;
        let n_slots = self.def.max_entries;
        let Ok(pagemap) = std::fs::File::open("/proc/self/pagemap") else {
            (0..n_slots).for_each(visit);
            return;
        };
        let first_page = self.region.ptr.as_ptr() as usize / PAGE;
        let npages = self.region.len.div_ceil(PAGE);
        let mut buf = vec![0u8; CHUNK * 8];
        let mut next = 0u32;
        let mut start = 0usize;
        while start < npages {
            let n = (npages - start).min(CHUNK);
            let ok = pagemap.read_exact_at(&mut buf[..n * 8], ((first_page + start) * 8) as u64).is_ok();
            for j in 0..n {
                let e = u64::from_le_bytes(buf[j * 8..j * 8 + 8].try_into().unwrap_or([0xff; 8]));
                if ok && e >> 62 == 0 {
                    continue;
                }
                let page = start + j;
                let first = next.max((page * PAGE / span) as u32);
                let last = n_slots.min(((page + 1) * PAGE).div_ceil(span) as u32);
                for i in first..last {
                    visit(i);
                }
                next = next.max(last);
            }
            start += n;
        }
    }

    /// Whether all `span` bytes of slot `i` (every CPU's copy) are zero.
    fn slot_is_zero(&self, i: u32, span: usize) -> bool {
        let base = self.value_ptr(i, 0);
        let mut off = 0;
        while off < span {
            // SAFETY: the slot's `span` bytes lie in the region (i < max_entries), 8-byte
            // aligned (region and stride are), so each u64 read is in bounds and aligned.
            let w = unsafe { AtomicU64::from_ptr(base.add(off) as *mut u64).load(Ordering::Relaxed) };
            if w != 0 {
                return false;
            }
            off += 8;
        }
        true
    }
}

/// Which entries a dump holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DumpScope {
    /// Every array slot and every hash entry (the kernel's `bpftool map dump`).
    All,
    /// Array slots with a non-zero value on some CPU, every hash entry.
    #[default]
    NonZero,
}

/// Serializable snapshot of a map (`sluice xdp maps`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapDump {
    pub name: String,
    pub map_type: u32,
    pub type_name: String,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    /// Value copies per entry (number of CPUs for per-CPU maps, else 1).
    pub ncpus: u32,
    pub entries: Vec<MapDumpEntry>,
}

/// One entry of a [`MapDump`]: `value` for ordinary maps, `values` (one per CPU) for per-CPU maps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapDumpEntry {
    pub key: Vec<u8>,
    /// Maps of maps: the inner map's name (`value` and `values` are then absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner_map: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Vec<u8>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<Vec<u8>>>,
}

// ---------------------------------------------------------------------------------------------
// Maps: all maps of an object.

/// All maps of one object, indexed like `Program::maps` (the index `lddw` refers to).
#[derive(Debug)]
pub struct Maps {
    maps: Vec<Map>,
    ncpus: u32,
    regions: Vec<MemRegion>,
    /// BTF key and value types per map, when the object has them.
    types: Vec<Option<crate::btf_types::MapTypes>>,
}

impl Maps {
    /// Creates storage for `defs` with `ncpus` copies for per-CPU maps.
    pub fn new(defs: &[MapDef], ncpus: u32) -> Result<Maps, MapError> {
        Maps::with_limit(defs, ncpus, DEFAULT_MAX_MAP_BYTES)
    }

    /// Like [`Maps::new`] with a cap on the bytes one map may reserve.
    pub fn with_limit(defs: &[MapDef], ncpus: u32, max_map_bytes: usize) -> Result<Maps, MapError> {
        let maps = defs.iter().map(|d| Map::new(d, ncpus, max_map_bytes)).collect::<Result<Vec<_>, _>>()?;
        Ok(Maps::from_maps(maps, ncpus))
    }

    /// An empty set of maps.
    pub fn empty(ncpus: u32) -> Maps {
        Maps::from_maps(Vec::new(), ncpus)
    }

    fn from_maps(maps: Vec<Map>, ncpus: u32) -> Maps {
        let regions = maps.iter().map(Map::region).collect();
        Maps { maps, ncpus: ncpus.max(1), regions, types: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.maps.len()
    }

    /// Sets the BTF key and value types of the maps (by index; the loader's).
    pub fn set_types(&mut self, types: Vec<Option<crate::btf_types::MapTypes>>) {
        self.types = types;
    }

    /// The BTF key and value types of map `index`, if the object described them.
    pub fn types(&self, index: usize) -> Option<&crate::btf_types::MapTypes> {
        self.types.get(index)?.as_ref()
    }

    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    /// The number of CPUs per-CPU maps were created for.
    pub fn ncpus(&self) -> u32 {
        self.ncpus
    }

    pub fn get(&self, index: usize) -> Option<&Map> {
        self.maps.get(index)
    }

    pub fn by_name(&self, name: &str) -> Option<&Map> {
        self.maps.iter().find(|m| m.def.name == name)
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.maps.iter().position(|m| m.def.name == name)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Map> {
        self.maps.iter()
    }

    /// The values the verifier may read as constants, by map index: those of frozen
    /// `BPF_F_RDONLY_PROG` arrays of one entry (bpf_map_is_rdonly: no one can write them any
    /// more); `None` for every other map. See [`crate::verifier::verify_with_frozen`].
    pub fn frozen_values(&self) -> Vec<Option<Vec<u8>>> {
        self.maps
            .iter()
            .map(|m| {
                let d = &m.def;
                let constant = m.is_frozen() && d.is_readonly_one_value_array();
                if constant {
                    m.lookup(&0u32.to_le_bytes(), 0)
                } else {
                    None
                }
            })
            .collect()
    }

    pub fn defs(&self) -> Vec<MapDef> {
        self.maps.iter().map(|m| m.def.clone()).collect()
    }

    /// The value regions of all maps (index = map index).
    pub fn regions(&self) -> &[MemRegion] {
        &self.regions
    }

    /// Snapshot of every map (every array slot).
    pub fn dump(&self) -> Vec<MapDump> {
        self.dump_with(DumpScope::All)
    }

    /// Snapshot of every map with `scope` (see [`Map::dump_with`]); maps of maps name their
    /// inner maps.
    pub fn dump_with(&self, scope: DumpScope) -> Vec<MapDump> {
        self.maps
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut d = m.dump_with(DumpScope::All);
                d.entries.clear();
                self.for_each_entry(i, scope, |e| d.entries.push(e));
                d
            })
            .collect()
    }

    /// [`Map::for_each_entry`] of map `index`, with the inner map of a map-of-maps entry
    /// given by name.
    pub fn for_each_entry(&self, index: usize, scope: DumpScope, mut f: impl FnMut(MapDumpEntry)) {
        let Some(m) = self.maps.get(index) else { return };
        let outer = m.def.is_map_of_maps();
        m.for_each_entry(scope, |mut e| {
            if outer {
                let idx = e.value.take().and_then(|v| v.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
                e.inner_map = Some(idx.and_then(|i| self.maps.get(i as usize)).map_or_else(|| "?".to_owned(), |m| m.def.name.clone()));
            }
            f(e)
        });
    }

    /// Puts inner map `inner` at `key` of the map of maps `outer` (both indices in these
    /// maps), as user space does with an inner map's fd. The inner map must match the outer
    /// map's template ([`inner_map_fits`]).
    pub fn set_inner(&self, outer: usize, key: &[u8], inner: usize, flags: u64) -> Result<(), MapError> {
        let o = self.maps.get(outer).ok_or(MapError::NotFound)?;
        let Some(template) = o.def.inner.as_deref().filter(|_| o.def.is_map_of_maps()) else {
            return Err(MapError::InvalidValue("not a map of maps"));
        };
        let i = self.maps.get(inner).ok_or(MapError::InvalidValue("no such inner map"))?;
        inner_map_fits(template, &i.def).map_err(|reason| MapError::InvalidDef { name: o.def.name.clone(), reason })?;
        let idx = u32::try_from(inner).map_err(|_| MapError::InvalidValue("inner map index"))?;
        o.write_entry(key, &idx.to_le_bytes(), flags)
    }

    /// The name of the inner map at `key` of the map of maps `outer`, if any.
    pub fn inner_map_name(&self, outer: usize, key: &[u8]) -> Option<&str> {
        let i = self.maps.get(outer)?.inner_index(key)?;
        self.maps.get(i as usize).map(|m| m.def.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(t: u32, ks: u32, vs: u32, n: u32) -> MapDef {
        MapDef::new("m", t, ks, vs, n)
    }

    /// Creation flags as the kernel takes them per map type: an LRU hash cannot be
    /// NO_PREALLOC, NO_COMMON_LRU is for LRU hashes, arrays take no NO_PREALLOC and only a
    /// plain ARRAY is mmapable, program arrays take no program access flags, and nothing is
    /// read-only and write-only at once.
    #[test]
    fn creation_flags_follow_the_kernels_rules_per_map_type() {
        let with = |t: u32, ks: u32, vs: u32, flags: u32| Map::new(&MapDef { flags, ..def(t, ks, vs, 4) }, 1, 1 << 20);
        let refused = |t: u32, ks: u32, vs: u32, flags: u32, why: &str| {
            let e = with(t, ks, vs, flags).err().unwrap_or_else(|| panic!("type {t} flags {flags:#x} accepted")).to_string();
            assert!(e.contains(why), "type {t} flags {flags:#x}: {e}");
        };
        refused(map_type::LRU_HASH, 4, 8, BPF_F_NO_PREALLOC, "always preallocated");
        refused(map_type::HASH, 4, 8, 1 << 1, "LRU hashes only");
        refused(map_type::ARRAY, 4, 8, BPF_F_NO_PREALLOC, "not taken by a array map");
        refused(map_type::PERCPU_ARRAY, 4, 8, 1 << 10, "not taken");
        refused(map_type::PROG_ARRAY, 4, 4, BPF_F_RDONLY_PROG, "not taken");
        refused(map_type::CPUMAP, 4, 4, 1 << 3, "not taken");
        refused(map_type::ARRAY, 4, 8, BPF_F_RDONLY_PROG | BPF_F_WRONLY_PROG, "read-only and write-only");
        assert!(with(map_type::HASH, 4, 8, BPF_F_NO_PREALLOC).is_ok());
        assert!(with(map_type::LRU_PERCPU_HASH, 4, 8, 1 << 1).is_ok(), "NO_COMMON_LRU");
        assert!(with(map_type::ARRAY, 4, 8, (1 << 10) | BPF_F_RDONLY_PROG).is_ok(), "mmapable read-only data");
        assert!(with(map_type::DEVMAP, 4, 4, 1 << 2).is_ok(), "NUMA node");
    }

    #[test]
    fn array_basics() {
        let m = Map::new(&def(map_type::ARRAY, 4, 12, 3), 2, 1 << 20).unwrap();
        assert_eq!(m.lookup(&1u32.to_le_bytes(), 0), Some(vec![0; 12]));
        m.update(&1u32.to_le_bytes(), &[7; 12], BPF_ANY).unwrap();
        assert_eq!(m.lookup(&1u32.to_le_bytes(), 0), Some(vec![7; 12]));
        assert_eq!(m.update(&1u32.to_le_bytes(), &[7; 12], BPF_NOEXIST), Err(MapError::Exists));
        assert!(matches!(m.update(&3u32.to_le_bytes(), &[7; 12], BPF_ANY), Err(MapError::OutOfRange { .. })));
        assert!(m.delete(&1u32.to_le_bytes()).is_err());
        assert_eq!(m.lookup(&9u32.to_le_bytes(), 0), None);
        assert_eq!(m.keys().len(), 3);
        let r = m.region();
        assert_eq!(r.start % 8, 0);
        assert_eq!(r.end - r.start, 3 * 16);
    }

    #[test]
    fn percpu_array() {
        let m = Map::new(&def(map_type::PERCPU_ARRAY, 4, 4, 2), 3, 1 << 20).unwrap();
        assert_eq!(m.copies(), 3);
        m.update(&0u32.to_le_bytes(), &5u32.to_le_bytes(), BPF_ANY).unwrap();
        assert_eq!(m.lookup_percpu(&0u32.to_le_bytes()).unwrap(), vec![5u32.to_le_bytes().to_vec(); 3]);
        let mut per = vec![0u8; 24];
        per[8] = 9;
        m.update(&1u32.to_le_bytes(), &per, BPF_ANY).unwrap();
        assert_eq!(m.lookup(&1u32.to_le_bytes(), 1), Some(vec![9, 0, 0, 0]));
        assert_eq!(m.lookup(&1u32.to_le_bytes(), 0), Some(vec![0, 0, 0, 0]));
        assert_eq!(m.lookup(&1u32.to_le_bytes(), 3), None);
        let d = m.dump();
        assert_eq!(d.entries.len(), 2);
        assert_eq!(d.entries[1].values.as_ref().unwrap()[1], vec![9, 0, 0, 0]);
    }

    #[test]
    fn hash_insert_delete_full() {
        let m = Map::new(&def(map_type::HASH, 6, 3, 4), 1, 1 << 20).unwrap();
        for i in 0..4u8 {
            m.update(&[i; 6], &[i; 3], BPF_NOEXIST).unwrap();
        }
        assert_eq!(m.update(&[9; 6], &[9; 3], BPF_ANY), Err(MapError::Full));
        assert_eq!(m.update(&[1; 6], &[1; 3], BPF_NOEXIST), Err(MapError::Exists));
        assert_eq!(m.update(&[8; 6], &[1; 3], BPF_EXIST), Err(MapError::NotFound));
        m.update(&[1; 6], &[5; 3], BPF_EXIST).unwrap();
        assert_eq!(m.lookup(&[1; 6], 0), Some(vec![5; 3]));
        m.delete(&[2; 6]).unwrap();
        assert_eq!(m.delete(&[2; 6]), Err(MapError::NotFound));
        assert_eq!(m.len(), 3);
        m.update(&[9; 6], &[9; 3], BPF_ANY).unwrap();
        assert_eq!(m.lookup(&[9; 6], 0), Some(vec![9; 3]));
        assert_eq!(m.lookup(&[2; 6], 0), None);
        let mut keys = m.keys();
        keys.sort();
        assert_eq!(keys, vec![vec![0; 6], vec![1; 6], vec![3; 6], vec![9; 6]]);
        assert_eq!(m.update(&[1; 5], &[1; 3], BPF_ANY).unwrap_err().errno(), libc::EINVAL);
    }

    #[test]
    fn hash_many_collisions_and_churn() {
        let m = Map::new(&def(map_type::HASH, 4, 8, 100), 1, 1 << 20).unwrap();
        for round in 0..5u32 {
            for i in 0..100u32 {
                m.update(&i.to_le_bytes(), &(i + round).to_le_bytes().repeat(2), BPF_ANY).unwrap();
            }
            for i in (0..100u32).step_by(2) {
                m.delete(&i.to_le_bytes()).unwrap();
            }
            assert_eq!(m.len(), 50);
            for i in 0..100u32 {
                let v = m.lookup(&i.to_le_bytes(), 0);
                if i % 2 == 0 {
                    assert_eq!(v, None);
                } else {
                    assert_eq!(v, Some((i + round).to_le_bytes().repeat(2)));
                }
            }
        }
    }

    /// The kernel's per-CPU value layout (`round_up(value_size, 8)` per CPU) is taken with
    /// one CPU too: what `lookup_percpu` (and `sluice xdp run --json`) gives back for a
    /// 4-byte value is one 8-byte copy, and it must read back in.
    #[test]
    fn per_cpu_values_in_the_kernels_layout_are_taken_with_one_cpu() {
        for t in [map_type::PERCPU_ARRAY, map_type::PERCPU_HASH] {
            let m = Map::new(&def(t, 4, 4, 4), 1, 1 << 20).unwrap();
            m.update(&1u32.to_le_bytes(), &[7, 0, 0, 0, 0, 0, 0, 0], BPF_ANY).unwrap();
            assert_eq!(m.lookup_percpu(&1u32.to_le_bytes()).unwrap(), vec![vec![7, 0, 0, 0]], "type {t}");
            m.update(&1u32.to_le_bytes(), &[9, 0, 0, 0], BPF_ANY).unwrap();
            assert_eq!(m.lookup(&1u32.to_le_bytes(), 0), Some(vec![9, 0, 0, 0]));
            assert!(matches!(m.update(&1u32.to_le_bytes(), &[0; 6], BPF_ANY), Err(MapError::ValueSize { .. })));
        }
        // A plain array's value stays exactly value_size bytes.
        let a = Map::new(&def(map_type::ARRAY, 4, 4, 4), 1, 1 << 20).unwrap();
        assert!(matches!(a.update(&1u32.to_le_bytes(), &[0; 8], BPF_ANY), Err(MapError::ValueSize { .. })));
    }

    /// htab_lru_map_update_elem references the element it replaces: a key that is only ever
    /// updated (never looked up) is not the eviction victim.
    #[test]
    fn lru_update_of_an_existing_key_references_it() {
        for t in [map_type::LRU_HASH, map_type::LRU_PERCPU_HASH] {
            let m = Map::new(&def(t, 4, 4, 4), 1, 1 << 20).unwrap();
            for i in 0..4u32 {
                m.update(&i.to_le_bytes(), &i.to_le_bytes(), BPF_ANY).unwrap();
            }
            let v = 5u32.to_le_bytes();
            // SAFETY: v is 4 readable bytes.
            unsafe { m.prog_update(&0u32.to_le_bytes(), v.as_ptr(), BPF_EXIST, 0) }.unwrap();
            m.update(&1u32.to_le_bytes(), &v, BPF_EXIST).unwrap();
            m.update(&10u32.to_le_bytes(), &v, BPF_NOEXIST).unwrap();
            assert_eq!(m.lookup(&2u32.to_le_bytes(), 0), None, "type {t}: the oldest unreferenced key goes");
            for i in [0u32, 1, 3, 10] {
                assert!(m.lookup(&i.to_le_bytes(), 0).is_some(), "type {t}: key {i}");
            }
        }
    }

    /// DEVMAP/CPUMAP values read back with the program id (0: none), not the fd given;
    /// CPUMAP checks the qsize bound first and deletes on qsize 0 whatever the fd
    /// (cpu_map_update_elem); DEVMAP refuses ifindex 0 with a program fd (__dev_map_update_elem).
    #[test]
    fn redirect_map_values_in_the_kernels_order_with_program_id_zero() {
        let val = |first: u32, fd: i32| [first.to_le_bytes(), fd.to_le_bytes()].concat();
        let dev = Map::new(&def(map_type::DEVMAP, 4, 8, 4), 1, 1 << 20).unwrap();
        dev.update(&1u32.to_le_bytes(), &val(5, -1), BPF_ANY).unwrap();
        assert_eq!(dev.lookup(&1u32.to_le_bytes(), 0), Some(val(5, 0)));
        assert!(matches!(dev.update(&1u32.to_le_bytes(), &val(0, 3), BPF_ANY), Err(MapError::InvalidValue(_))));
        assert!(dev.lookup(&1u32.to_le_bytes(), 0).is_some(), "a refused update leaves the entry");
        dev.update(&1u32.to_le_bytes(), &val(0, -1), BPF_ANY).unwrap();
        assert_eq!(dev.lookup(&1u32.to_le_bytes(), 0), None);
        let cpu = Map::new(&def(map_type::CPUMAP, 4, 8, 4), 1, 1 << 20).unwrap();
        cpu.update(&0u32.to_le_bytes(), &val(64, 0), BPF_ANY).unwrap();
        assert_eq!(cpu.lookup(&0u32.to_le_bytes(), 0), Some(val(64, 0)));
        assert!(matches!(cpu.update(&0u32.to_le_bytes(), &val(20000, 5), BPF_ANY), Err(MapError::Overflow(_))));
        cpu.update(&0u32.to_le_bytes(), &val(0, 5), BPF_ANY).unwrap();
        assert_eq!(cpu.lookup(&0u32.to_le_bytes(), 0), None, "qsize 0 deletes");
    }

    /// BPF_F_LOCK from a program: no sluice map holds a bpf_spin_lock, so it is EINVAL —
    /// after the index (E2BIG) and NOEXIST (EEXIST) for an array, at once for a hash.
    #[test]
    fn program_updates_with_f_lock_fail_in_the_kernels_order() {
        let v = 1u32.to_le_bytes();
        let a = Map::new(&def(map_type::ARRAY, 4, 4, 4), 1, 1 << 20).unwrap();
        // SAFETY (each call): v is 4 readable bytes.
        let up = |m: &Map, k: u32, flags: u64| unsafe { m.prog_update(&k.to_le_bytes(), v.as_ptr(), flags, 0) };
        assert!(matches!(up(&a, 9, BPF_F_LOCK), Err(MapError::OutOfRange { .. })));
        assert!(matches!(up(&a, 1, BPF_F_LOCK | BPF_NOEXIST), Err(MapError::Exists)));
        assert!(matches!(up(&a, 1, BPF_F_LOCK), Err(MapError::Flags(_))));
        assert!(matches!(up(&a, 1, BPF_F_LOCK | 8), Err(MapError::Flags(_))));
        up(&a, 1, BPF_EXIST).unwrap();
        let h = Map::new(&def(map_type::HASH, 4, 4, 4), 1, 1 << 20).unwrap();
        assert!(matches!(up(&h, 1, BPF_F_LOCK | BPF_NOEXIST), Err(MapError::Flags(_))));
        assert_eq!(h.len(), 0);
    }

    #[test]
    fn lru_evicts_unreferenced() {
        let m = Map::new(&def(map_type::LRU_HASH, 4, 4, 4), 1, 1 << 20).unwrap();
        for i in 0..4u32 {
            m.update(&i.to_le_bytes(), &i.to_le_bytes(), BPF_ANY).unwrap();
        }
        // Reference 0, 1 and 3 from the "program" side: 2 is the victim.
        for i in [0u32, 1, 3] {
            assert!(m.prog_lookup(&i.to_le_bytes(), 0).is_some());
        }
        m.update(&10u32.to_le_bytes(), &10u32.to_le_bytes(), BPF_NOEXIST).unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m.lookup(&2u32.to_le_bytes(), 0), None);
        for i in [0u32, 1, 3, 10] {
            assert_eq!(m.lookup(&i.to_le_bytes(), 0), Some(i.to_le_bytes().to_vec()));
        }
        // Keeps accepting inserts forever.
        for i in 100..200u32 {
            m.update(&i.to_le_bytes(), &i.to_le_bytes(), BPF_ANY).unwrap();
        }
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn percpu_hash_prog_update_zeroes_other_cpus() {
        let m = Map::new(&def(map_type::LRU_PERCPU_HASH, 4, 4, 8), 2, 1 << 20).unwrap();
        m.update(&1u32.to_le_bytes(), &7u32.to_le_bytes(), BPF_ANY).unwrap();
        let v = 3u32.to_le_bytes();
        // SAFETY: v is 4 readable bytes.
        unsafe { m.prog_update(&2u32.to_le_bytes(), v.as_ptr(), BPF_ANY, 1) }.unwrap();
        assert_eq!(m.lookup_percpu(&2u32.to_le_bytes()).unwrap(), vec![vec![0; 4], vec![3, 0, 0, 0]]);
        // SAFETY: as above.
        unsafe { m.prog_update(&1u32.to_le_bytes(), v.as_ptr(), BPF_ANY, 1) }.unwrap();
        assert_eq!(m.lookup_percpu(&1u32.to_le_bytes()).unwrap(), vec![vec![7, 0, 0, 0], vec![3, 0, 0, 0]]);
    }

    #[test]
    fn redirect_maps() {
        let dev = Map::new(&def(map_type::DEVMAP, 4, 8, 4), 1, 1 << 20).unwrap();
        assert!(!dev.prog_writable());
        assert_eq!(dev.redirect_target(1), None);
        // ifindex 0 empties a DEVMAP slot (__dev_map_update_elem), also an empty one.
        dev.update(&1u32.to_le_bytes(), &[0; 8], BPF_ANY).unwrap();
        let mut v = [0u8; 8];
        v[0] = 5;
        dev.update(&1u32.to_le_bytes(), &v, BPF_ANY).unwrap();
        assert_eq!(dev.redirect_target(1), Some(RedirectTarget::Ifindex(5)));
        v[4] = 3;
        assert!(dev.update(&1u32.to_le_bytes(), &v, BPF_ANY).is_err());
        dev.delete(&1u32.to_le_bytes()).unwrap();
        assert_eq!(dev.redirect_target(1), None);
        assert_eq!(dev.redirect_target(100), None);

        let cpu = Map::new(&def(map_type::CPUMAP, 4, 4, 4), 1, 1 << 20).unwrap();
        cpu.update(&2u32.to_le_bytes(), &192u32.to_le_bytes(), BPF_ANY).unwrap();
        assert_eq!(cpu.redirect_target(2), Some(RedirectTarget::Cpu(2)));
        cpu.update(&2u32.to_le_bytes(), &0u32.to_le_bytes(), BPF_ANY).unwrap();
        assert_eq!(cpu.redirect_target(2), None);

        let xsk = Map::new(&def(map_type::XSKMAP, 4, 4, 4), 1, 1 << 20).unwrap();
        xsk.update(&0u32.to_le_bytes(), &77u32.to_le_bytes(), BPF_ANY).unwrap();
        assert_eq!(xsk.redirect_target(0), Some(RedirectTarget::Xsk(77)));
        assert!(Map::new(&def(map_type::XSKMAP, 4, 8, 4), 1, 1 << 20).is_err());

        let dh = Map::new(&def(map_type::DEVMAP_HASH, 4, 4, 4), 1, 1 << 20).unwrap();
        dh.update(&1000u32.to_le_bytes(), &9u32.to_le_bytes(), BPF_ANY).unwrap();
        assert_eq!(dh.redirect_target(1000), Some(RedirectTarget::Ifindex(9)));
        assert_eq!(dh.redirect_target(1), None);
    }

    /// A frozen map refuses user-space writes (EPERM, as after bpf_map_freeze) and still
    /// answers lookups.
    #[test]
    fn a_frozen_map_refuses_user_space_writes() {
        let m = Map::new(&def(map_type::HASH, 4, 4, 4), 1, 1 << 20).unwrap();
        m.update(&1u32.to_le_bytes(), &7u32.to_le_bytes(), BPF_ANY).unwrap();
        m.freeze();
        assert!(m.is_frozen());
        assert_eq!(m.update(&2u32.to_le_bytes(), &7u32.to_le_bytes(), BPF_ANY).unwrap_err().errno(), libc::EPERM);
        assert_eq!(m.delete(&1u32.to_le_bytes()).unwrap_err().errno(), libc::EPERM);
        assert_eq!(m.lookup(&1u32.to_le_bytes(), 0), Some(7u32.to_le_bytes().to_vec()));
    }

    /// The kernel's update and delete rules for the slot maps: DEVMAP/CPUMAP take EXIST on
    /// an empty slot and never NOEXIST, ifindex / qsize 0 empties a slot, a qsize over 16384
    /// overflows, the index is checked first; their deletes of empty slots succeed and past
    /// the end are EINVAL; XSKMAP keeps present/absent rules; program arrays and arrays of
    /// maps take BPF_ANY only, deleting an empty slot is ENOENT and past the end E2BIG;
    /// DEVMAP_HASH inserts on EXIST.
    #[test]
    fn slot_maps_update_and_delete_as_the_kernel() {
        let errno = |r: Result<(), MapError>| r.err().map_or(0, |e| e.errno());
        let k = |i: u32| i.to_le_bytes();
        let dev = Map::new(&def(map_type::DEVMAP, 4, 4, 4), 1, 1 << 20).unwrap();
        assert_eq!(errno(dev.update(&k(0), &k(5), BPF_NOEXIST)), libc::EEXIST, "NOEXIST always fails");
        assert_eq!(errno(dev.update(&k(0), &k(5), BPF_EXIST)), 0, "EXIST on an empty slot is fine");
        assert_eq!(dev.redirect_target(0), Some(RedirectTarget::Ifindex(5)));
        assert_eq!(errno(dev.update(&k(0), &k(0), BPF_ANY)), 0);
        assert_eq!(dev.redirect_target(0), None, "ifindex 0 empties the slot");
        assert_eq!(errno(dev.update(&k(9), &k(5), BPF_NOEXIST)), libc::E2BIG, "the index first");
        assert_eq!((errno(dev.delete(&k(1))), errno(dev.delete(&k(9)))), (0, libc::EINVAL));
        let cpu = Map::new(&def(map_type::CPUMAP, 4, 4, 4), 1, 1 << 20).unwrap();
        assert_eq!(errno(cpu.update(&k(99), &k(0), BPF_ANY)), libc::E2BIG, "the index before qsize 0");
        assert_eq!(errno(cpu.update(&k(1), &k(16385), BPF_ANY)), libc::EOVERFLOW);
        assert_eq!(errno(cpu.update(&k(1), &k(16384), BPF_ANY)), 0);
        assert_eq!((errno(cpu.delete(&k(2))), errno(cpu.delete(&k(99)))), (0, libc::EINVAL));
        let xsk = Map::new(&def(map_type::XSKMAP, 4, 4, 4), 1, 1 << 20).unwrap();
        assert_eq!(errno(xsk.update(&k(0), &k(7), BPF_EXIST)), libc::ENOENT);
        assert_eq!(errno(xsk.delete(&k(0))), 0);
        let progs = Map::new(&def(map_type::PROG_ARRAY, 4, 4, 4), 1, 1 << 20).unwrap();
        assert_eq!(errno(progs.update(&k(0), &k(1), BPF_NOEXIST)), libc::EINVAL, "BPF_ANY only");
        assert_eq!(errno(progs.update(&k(0), &k(1), BPF_EXIST)), libc::EINVAL);
        assert_eq!((errno(progs.delete(&k(1))), errno(progs.delete(&k(9)))), (libc::ENOENT, libc::E2BIG));
        let dh = Map::new(&def(map_type::DEVMAP_HASH, 4, 4, 4), 1, 1 << 20).unwrap();
        assert_eq!(errno(dh.update(&k(7), &k(3), BPF_EXIST)), 0, "__dev_map_hash_update_elem inserts");
        assert_eq!(errno(dh.update(&k(7), &k(0), BPF_ANY)), libc::EINVAL, "ifindex 0");
    }

    #[test]
    fn bad_defs() {
        assert!(matches!(Map::new(&def(15, 4, 4, 4), 1, 1 << 20), Err(MapError::UnsupportedType { .. })));
        // A map of maps without an inner-map template.
        assert!(matches!(Map::new(&def(map_type::ARRAY_OF_MAPS, 4, 4, 4), 1, 1 << 20), Err(MapError::InvalidDef { .. })));
        assert!(Map::new(&def(map_type::ARRAY, 8, 4, 4), 1, 1 << 20).is_err());
        assert!(Map::new(&def(map_type::ARRAY, 4, 0, 4), 1, 1 << 20).is_err());
        assert!(Map::new(&def(map_type::HASH, 4, 4, 0), 1, 1 << 20).is_err());
        assert!(Map::new(&def(map_type::HASH, 4, 4, u32::MAX), 1, 1 << 20).is_err());
        assert!(Map::new(&def(map_type::ARRAY, 4, u32::MAX, u32::MAX), 64, usize::MAX).is_err());
    }

    #[test]
    fn dump_serializes() {
        let m = Map::new(&def(map_type::HASH, 4, 4, 4), 1, 1 << 20).unwrap();
        m.update(&2u32.to_le_bytes(), &[1, 2, 3, 4], BPF_ANY).unwrap();
        m.update(&1u32.to_le_bytes(), &[5, 6, 7, 8], BPF_ANY).unwrap();
        let d = m.dump();
        assert_eq!(d.entries[0].key, 1u32.to_le_bytes().to_vec());
        assert_eq!(d.type_name, "hash");
        let s = format!("{d:?}");
        assert!(s.contains("hash"));
    }

    /// Writes `bytes` at a record address `ringbuf_reserve` returned.
    fn fill(addr: u64, bytes: &[u8]) {
        // SAFETY: test only: addr is a live reservation of at least bytes.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
    }

    #[test]
    fn ringbuf_records_reach_the_consumer_in_ring_order() {
        let m = Map::new(&def(map_type::RINGBUF, 0, 0, 4096), 1, 1 << 20).unwrap();
        m.attach_consumer();
        let a = m.ringbuf_reserve(10, 0, 0);
        let b = m.ringbuf_reserve(3, 0, 1);
        assert!(a != 0 && b != 0 && b - a == 24, "records are 8-byte aligned after an 8-byte header");
        fill(b, b"bbb");
        assert!(m.ringbuf_commit(b, false));
        // B is done but A, before it, is still reserved: the consumer waits.
        assert!(m.take_events().is_empty());
        assert_eq!(m.ringbuf_query(BPF_RB_AVAIL_DATA), 24 + 16);
        assert!(!m.ringbuf_commit(b, false), "a record is committed once");
        assert!(m.ringbuf_commit(a, true));
        assert_eq!(m.take_events(), vec![EventRecord { cpu: 1, data: b"bbb".to_vec() }]);
        assert_eq!(m.ringbuf_query(BPF_RB_AVAIL_DATA), 0);
        assert_eq!(m.ringbuf_reserve(8, 1, 0), 0, "flags must be 0");
        assert_eq!(m.ringbuf_reserve(4096, 0, 0), 0, "larger than the ring");
        assert!(!m.ringbuf_commit(a + 1, false), "not a record start");
    }

    #[test]
    fn ringbuf_wraps_without_corrupting_records() {
        let m = Map::new(&def(map_type::RINGBUF, 0, 0, 4096), 1, 1 << 20).unwrap();
        m.attach_consumer();
        for i in 0..200u32 {
            // Two records in flight at a time, of varying sizes, so they straddle the end.
            let la = 100 + (i as usize * 37) % 900;
            let a = m.ringbuf_reserve(la as u64, 0, 0);
            let b = m.ringbuf_reserve(50, 0, 0);
            assert!(a != 0 && b != 0, "round {i}");
            fill(a, &vec![i as u8; la]);
            fill(b, &[!(i as u8); 50]);
            assert!(m.ringbuf_commit(b, false) && m.ringbuf_commit(a, false));
            let ev = m.take_events();
            assert_eq!(ev.len(), 2);
            assert_eq!(ev[0].data, vec![i as u8; la]);
            assert_eq!(ev[1].data, vec![!(i as u8); 50]);
        }
        assert!(m.ringbuf_query(BPF_RB_PROD_POS) > 3 * 4096, "the ring wrapped several times");
    }

    #[test]
    fn ringbuf_without_consumer_fills_up() {
        let m = Map::new(&def(map_type::RINGBUF, 0, 0, 4096), 1, 1 << 20).unwrap();
        let rec = [0u8; 200];
        // SAFETY: rec is readable for its 200 bytes.
        let output = || unsafe { m.ringbuf_output(0, 0, rec.as_ptr(), rec.len()) };
        let mut n = 0;
        while output() == 0 {
            n += 1;
        }
        assert_eq!(n, 19, "208-byte records: 19 fit below size - 1");
        assert_eq!(m.ringbuf_reserve(200, 0, 0), 0);
        assert_eq!(output(), -(libc::EAGAIN as i64));
        // A reader that comes later finds every record and frees their room.
        assert_eq!(m.take_events().len(), 19);
        assert_eq!(m.ringbuf_query(BPF_RB_AVAIL_DATA), 0);
        assert_eq!(output(), 0);
    }

    /// A perf slot's buffer holds PERF_BUFFER_BYTES: a record that does not fit is lost
    /// (-ENOSPC, perf_output_begin) and the others are kept; reading frees the room. Each
    /// slot has its own buffer.
    #[test]
    fn perf_records_past_the_slot_buffer_are_lost_until_read() {
        let m = Map::new(&def(map_type::PERF_EVENT_ARRAY, 4, 4, 2), 2, 1 << 20).unwrap();
        m.attach_consumer();
        assert_eq!(perf_record_bytes(4), 16);
        assert_eq!(perf_record_bytes(5), 24);
        let per = perf_record_bytes(100);
        let fit = PERF_BUFFER_BYTES / per;
        for _ in 0..fit {
            assert_eq!(m.perf_output(0, 0, 100, || vec![1; 100]), 0);
        }
        assert_eq!(m.perf_output(0, 0, 100, || unreachable!("a lost record is not built")), -(libc::ENOSPC as i64));
        assert_eq!(m.perf_output(1, 0, 100, || vec![2; 100]), 0, "slot 1 has its own buffer");
        let ev = m.take_events();
        assert_eq!(ev.len() as u64, fit + 1);
        assert_eq!(m.perf_output(0, 0, 100, || vec![3; 100]), 0, "read: room again");
    }
}
