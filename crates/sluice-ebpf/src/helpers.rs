//! Kernel helper functions with their kernel ids and semantics, shared by the interpreter and
//! the JIT.
//!
//! # Calling convention
//!
//! Every helper is an `extern "C" fn(state: &mut RunState, r1, r2, r3, r4, r5) -> u64`
//! ([`HelperFn`]); [`helper_fn`] maps a helper id (the `imm` of `call`) to it. The interpreter
//! calls it directly; a JIT emits a native call with the `RunState` pointer in the first
//! argument register and BPF r1..r5 in the next five (System V: rdi, rsi, rdx, rcx, r8, r9),
//! and moves the return value (rax) into r0.
//!
//! Helpers never panic and never touch memory outside what the run may access: every pointer
//! argument is checked with [`RunState::helper_mem`] (stack, packet `[data_meta, data_end)`,
//! map values; writes only to writable memory). An argument that fails a check makes the helper
//! return 0 and record a [`HelperFault`] in `state.fault`; engines check `fault` after each
//! helper call and stop the run (`RunErrorKind::HelperFault`, treated as XDP_ABORTED). Errors
//! the kernel reports to the program (full map, bad flags, out-of-range adjust) are returned as
//! negative errno values, as in the kernel.
//!
//! Map arguments are *map handles*: the value `lddw` with `BPF_PSEUDO_MAP_FD` loads, i.e.
//! [`map_handle`]`(index)` (a non-canonical address, so a stray dereference can never hit
//! memory). Helpers validate the handle against the run's maps. A lookup on a map of maps
//! returns the inner map's handle (inner maps are maps of the same object).

use std::mem::MaybeUninit;

use std::collections::BTreeMap;

use crate::insn::{BPF_DW, BPF_IMM, BPF_LD, BPF_PSEUDO_MAP_FD, BPF_PSEUDO_MAP_VALUE, XDP_ABORTED, XDP_REDIRECT};
use crate::maps::{copy_relaxed, Map, MapError, Maps, MAX_KEY_SIZE};
use crate::program::{map_type, Program};
use crate::state::{HelperFault, MemKind, RunError, RunErrorKind, RunState};
use crate::xdp::{XdpFrags, ETH_HLEN, XDP_FRAME_RESERVED};

/// Kernel helper ids (`enum bpf_func_id`) implemented here.
pub mod id {
    pub const MAP_LOOKUP_ELEM: u32 = 1;
    pub const MAP_UPDATE_ELEM: u32 = 2;
    pub const MAP_DELETE_ELEM: u32 = 3;
    pub const KTIME_GET_NS: u32 = 5;
    pub const TRACE_PRINTK: u32 = 6;
    pub const GET_PRANDOM_U32: u32 = 7;
    pub const GET_SMP_PROCESSOR_ID: u32 = 8;
    pub const REDIRECT: u32 = 23;
    pub const CSUM_DIFF: u32 = 28;
    pub const XDP_ADJUST_HEAD: u32 = 44;
    pub const REDIRECT_MAP: u32 = 51;
    pub const XDP_ADJUST_META: u32 = 54;
    pub const XDP_ADJUST_TAIL: u32 = 65;
    pub const TAIL_CALL: u32 = 12;
    pub const FIB_LOOKUP: u32 = 69;
    pub const KTIME_GET_BOOT_NS: u32 = 125;
    pub const KTIME_GET_COARSE_NS: u32 = 160;
    pub const TRACE_VPRINTK: u32 = 177;
    pub const XDP_GET_BUFF_LEN: u32 = 188;
    pub const XDP_LOAD_BYTES: u32 = 189;
    pub const XDP_STORE_BYTES: u32 = 190;
    pub const MAP_LOOKUP_PERCPU_ELEM: u32 = 195;
    pub const PERF_EVENT_OUTPUT: u32 = 25;
    pub const RINGBUF_OUTPUT: u32 = 130;
    pub const RINGBUF_RESERVE: u32 = 131;
    pub const RINGBUF_SUBMIT: u32 = 132;
    pub const RINGBUF_DISCARD: u32 = 133;
    pub const RINGBUF_QUERY: u32 = 134;
}

/// A helper: `state` plus BPF r1..r5, result in r0.
pub type HelperFn = for<'a, 'b> extern "C" fn(&'b mut RunState<'a>, u64, u64, u64, u64, u64) -> u64;

/// The implementation of helper `id`, or `None` if this runtime does not provide it.
pub fn helper_fn(id: i32) -> Option<HelperFn> {
    let f: HelperFn = match u32::try_from(id).ok()? {
        id::MAP_LOOKUP_ELEM => bpf_map_lookup_elem,
        id::MAP_UPDATE_ELEM => bpf_map_update_elem,
        id::MAP_DELETE_ELEM => bpf_map_delete_elem,
        id::KTIME_GET_NS => bpf_ktime_get_ns,
        id::TRACE_PRINTK => bpf_trace_printk,
        id::GET_PRANDOM_U32 => bpf_get_prandom_u32,
        id::GET_SMP_PROCESSOR_ID => bpf_get_smp_processor_id,
        id::REDIRECT => bpf_redirect,
        id::CSUM_DIFF => bpf_csum_diff,
        id::XDP_ADJUST_HEAD => bpf_xdp_adjust_head,
        id::REDIRECT_MAP => bpf_redirect_map,
        id::XDP_ADJUST_META => bpf_xdp_adjust_meta,
        id::XDP_ADJUST_TAIL => bpf_xdp_adjust_tail,
        id::FIB_LOOKUP => bpf_fib_lookup,
        id::KTIME_GET_BOOT_NS => bpf_ktime_get_boot_ns,
        id::KTIME_GET_COARSE_NS => bpf_ktime_get_coarse_ns,
        id::TRACE_VPRINTK => bpf_trace_vprintk,
        id::XDP_GET_BUFF_LEN => bpf_xdp_get_buff_len,
        id::XDP_LOAD_BYTES => bpf_xdp_load_bytes,
        id::XDP_STORE_BYTES => bpf_xdp_store_bytes,
        id::MAP_LOOKUP_PERCPU_ELEM => bpf_map_lookup_percpu_elem,
        id::TAIL_CALL => bpf_tail_call,
        id::PERF_EVENT_OUTPUT => bpf_perf_event_output,
        id::RINGBUF_OUTPUT => bpf_ringbuf_output,
        id::RINGBUF_RESERVE => bpf_ringbuf_reserve,
        id::RINGBUF_SUBMIT => bpf_ringbuf_submit,
        id::RINGBUF_DISCARD => bpf_ringbuf_discard,
        id::RINGBUF_QUERY => bpf_ringbuf_query,
        _ => return None,
    };
    Some(f)
}

/// Base of map handles: `lddw rX, map` (pseudo map fd, map index `i`) loads `MAP_HANDLE_BASE + i`.
pub const MAP_HANDLE_BASE: u64 = 0x4d50_0000_0000_0000;

/// The handle of map `index` (what `lddw` with `BPF_PSEUDO_MAP_FD` loads).
pub const fn map_handle(index: u32) -> u64 {
    MAP_HANDLE_BASE + index as u64
}

/// The 64-bit value of every `lddw` with a map source, by slot: [`map_handle`] for a pseudo
/// map fd, [`Map::direct_value_addr`] for a pseudo map value — after checking that `maps`
/// matches the program's map definitions. Both engines load these values.
pub fn resolve_map_refs(program: &Program, maps: &Maps) -> Result<BTreeMap<usize, u64>, RunError> {
    for (i, def) in program.maps.iter().enumerate() {
        match maps.get(i) {
            Some(m) if m.def() == def => {}
            Some(m) => {
                return Err(RunError::new(
                    0,
                    RunErrorKind::MapMismatch(format!("map {i} is `{}` in the maps but `{}` in the program", m.name(), def.name)),
                ))
            }
            None => return Err(RunError::new(0, RunErrorKind::MapMismatch(format!("map {i} (`{}`) is missing", def.name)))),
        }
    }
    let insns = &program.insns;
    let mut wide = BTreeMap::new();
    for pc in 0..insns.len() {
        let insn = insns[pc];
        if insn.code != (BPF_LD | BPF_IMM | BPF_DW) || pc + 1 >= insns.len() {
            continue;
        }
        let index = insn.imm as u32;
        match insn.src {
            BPF_PSEUDO_MAP_FD => {
                if maps.get(index as usize).is_none() {
                    return Err(RunError::new(pc, RunErrorKind::BadMapIndex { index }));
                }
                wide.insert(pc, map_handle(index));
            }
            BPF_PSEUDO_MAP_VALUE => {
                let offset = insns[pc + 1].imm as u32;
                let addr = maps
                    .get(index as usize)
                    .ok_or(RunError::new(pc, RunErrorKind::BadMapIndex { index }))?
                    .direct_value_addr(offset)
                    .ok_or(RunError::new(pc, RunErrorKind::BadMapValue { index, offset }))?;
                wide.insert(pc, addr);
            }
            _ => {}
        }
    }
    Ok(wide)
}

/// `bpf_redirect_map` flags.
pub const BPF_F_BROADCAST: u64 = 1 << 3;
pub const BPF_F_EXCLUDE_INGRESS: u64 = 1 << 4;
/// Lower bits of `bpf_redirect_map` flags: the action returned when the key is absent.
pub const BPF_F_ACTION_MASK: u64 = 3;

/// Valid `bpf_fib_lookup` flags (DIRECT, OUTPUT, SKIP_NEIGH, TBID, SRC, MARK).
pub const BPF_FIB_LOOKUP_FLAGS: u64 = 0x3f;

#[inline]
fn neg_errno(e: i32) -> u64 {
    (-(e as i64)) as u64
}

#[inline]
fn map_err(e: MapError) -> u64 {
    neg_errno(e.errno())
}

#[inline]
fn map_of<'s>(st: &'s RunState<'_>, handle: u64) -> Option<&'s Map> {
    let idx = handle.checked_sub(MAP_HANDLE_BASE)?;
    if idx > u32::MAX as u64 {
        return None;
    }
    st.maps.get(idx as usize)
}

/// Runs `f` on the `len` key bytes at `addr` of program memory. Stack and packet memory belong
/// to this run alone and are borrowed directly; map memory (possibly shared with other CPUs)
/// is first copied with relaxed atomics.
#[inline]
fn with_key<R>(st: &RunState<'_>, addr: u64, len: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    if len > MAX_KEY_SIZE {
        return None;
    }
    let (p, kind) = st.translate(addr, len, false)?;
    match kind {
        MemKind::Stack | MemKind::Packet => {
            // SAFETY: translate checked [p, p+len) lies in the run's stack or packet, which no
            // one else accesses during the run and which is initialised memory.
            let key = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
            Some(f(key))
        }
        MemKind::Map(_) => {
            let mut buf = [MaybeUninit::<u8>::uninit(); MAX_KEY_SIZE];
            // SAFETY: p is readable for len bytes (translate); buf has room for len <= MAX_KEY_SIZE.
            unsafe { copy_relaxed(buf.as_mut_ptr() as *mut u8, p, len) };
            // SAFETY: the first len bytes of buf were just initialised.
            let key = unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, len) };
            Some(f(key))
        }
        MemKind::Ctx => None,
    }
}

macro_rules! fault {
    ($st:expr, $id:expr, $f:expr) => {{
        $st.set_fault($id, $f);
        return 0;
    }};
}

// ---- maps ----------------------------------------------------------------------------------

/// `void *bpf_map_lookup_elem(map, key)`. On a map of maps: the inner map's handle (NULL
/// for an empty slot), as the kernel returns the inner map.
pub extern "C" fn bpf_map_lookup_elem(st: &mut RunState<'_>, r1: u64, r2: u64, _: u64, _: u64, _: u64) -> u64 {
    let Some(m) = map_of(st, r1) else { fault!(st, id::MAP_LOOKUP_ELEM, HelperFault::BadMap) };
    let cpu = st.cpu;
    if m.def().is_map_of_maps() {
        return match with_key(st, r2, m.def().key_size as usize, |k| m.inner_index(k)) {
            Some(i) => i.map_or(0, map_handle),
            None => fault!(st, id::MAP_LOOKUP_ELEM, HelperFault::BadPointer),
        };
    }
    match with_key(st, r2, m.def().key_size as usize, |k| m.prog_lookup(k, cpu)) {
        Some(p) => p.map_or(0, |p| p as u64),
        None => fault!(st, id::MAP_LOOKUP_ELEM, HelperFault::BadPointer),
    }
}

/// `void *bpf_map_lookup_percpu_elem(map, key, cpu)`: NULL for non-per-CPU maps or a cpu out
/// of range.
pub extern "C" fn bpf_map_lookup_percpu_elem(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, _: u64, _: u64) -> u64 {
    let Some(m) = map_of(st, r1) else { fault!(st, id::MAP_LOOKUP_PERCPU_ELEM, HelperFault::BadMap) };
    let cpu = r3 as u32;
    if !m.is_percpu() || cpu >= m.copies() {
        return 0;
    }
    match with_key(st, r2, m.def().key_size as usize, |k| m.prog_lookup(k, cpu)) {
        Some(p) => p.map_or(0, |p| p as u64),
        None => fault!(st, id::MAP_LOOKUP_PERCPU_ELEM, HelperFault::BadPointer),
    }
}

/// `long bpf_map_update_elem(map, key, value, flags)`.
pub extern "C" fn bpf_map_update_elem(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, r4: u64, _: u64) -> u64 {
    let Some(m) = map_of(st, r1) else { fault!(st, id::MAP_UPDATE_ELEM, HelperFault::BadMap) };
    let Some(value) = st.helper_mem(r3, m.def().value_size as usize, false) else {
        fault!(st, id::MAP_UPDATE_ELEM, HelperFault::BadPointer)
    };
    let cpu = st.cpu;
    // SAFETY: value is readable for value_size bytes (helper_mem).
    match with_key(st, r2, m.def().key_size as usize, |k| unsafe { m.prog_update(k, value, r4, cpu) }) {
        Some(Ok(())) => 0,
        Some(Err(e)) => map_err(e),
        None => fault!(st, id::MAP_UPDATE_ELEM, HelperFault::BadPointer),
    }
}

/// `long bpf_map_delete_elem(map, key)`.
pub extern "C" fn bpf_map_delete_elem(st: &mut RunState<'_>, r1: u64, r2: u64, _: u64, _: u64, _: u64) -> u64 {
    let Some(m) = map_of(st, r1) else { fault!(st, id::MAP_DELETE_ELEM, HelperFault::BadMap) };
    match with_key(st, r2, m.def().key_size as usize, |k| m.prog_delete(k)) {
        Some(Ok(())) => 0,
        Some(Err(e)) => map_err(e),
        None => fault!(st, id::MAP_DELETE_ELEM, HelperFault::BadPointer),
    }
}

// ---- event output --------------------------------------------------------------------------

/// The address of `len` readable bytes of program memory at `addr` (None: not readable for
/// that size). Event output copies from it straight into the record: nothing is allocated
/// per event unless a consumer takes the records out.
fn readable(st: &RunState<'_>, addr: u64, len: usize) -> Option<*const u8> {
    if len == 0 {
        return Some(std::ptr::NonNull::dangling().as_ptr());
    }
    st.helper_mem(addr, len, false).map(|p| p as *const u8)
}

/// `long bpf_perf_event_output(ctx, map, flags, data, size)`: a record of `data` followed by
/// the first `ctxlen` packet bytes (`flags >> 32`, as xdpdump asks; -EFAULT past the packet).
pub extern "C" fn bpf_perf_event_output(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, r4: u64, r5: u64) -> u64 {
    if !is_ctx(st, r1) {
        fault!(st, id::PERF_EVENT_OUTPUT, HelperFault::BadCtx)
    }
    let Some(m) = map_of(st, r2) else { fault!(st, id::PERF_EVENT_OUTPUT, HelperFault::BadMap) };
    let len = r5 as usize;
    let Some(src) = readable(st, r4, len) else { fault!(st, id::PERF_EVENT_OUTPUT, HelperFault::BadPointer) };
    let ctxlen = ((r3 & crate::maps::BPF_F_CTXLEN_MASK) >> 32) as usize;
    let plen = st.ctx.data_end.wrapping_sub(st.ctx.data) as usize;
    if ctxlen > plen {
        return neg_errno(libc::EFAULT);
    }
    let pkt = st.frame_ptr.wrapping_add(st.ctx.data as usize - st.frame_base());
    // The record is built only once a listener is known to take it (no allocation otherwise).
    let r = m.perf_output(r3, st.cpu, (len + ctxlen) as u64, || {
        let mut record = vec![0u8; len + ctxlen];
        // SAFETY: src is readable for len bytes (readable), [pkt, pkt+ctxlen) is inside
        // [data, data_end) (ctxlen <= plen); record holds len + ctxlen bytes.
        unsafe {
            copy_relaxed(record.as_mut_ptr(), src, len);
            copy_relaxed(record[len..].as_mut_ptr(), pkt, ctxlen);
        }
        record
    });
    r as u64
}

/// `long bpf_ringbuf_output(ringbuf, data, size, flags)`.
pub extern "C" fn bpf_ringbuf_output(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, r4: u64, _: u64) -> u64 {
    let Some(m) = map_of(st, r1) else { fault!(st, id::RINGBUF_OUTPUT, HelperFault::BadMap) };
    let Some(src) = readable(st, r2, r3 as usize) else { fault!(st, id::RINGBUF_OUTPUT, HelperFault::BadPointer) };
    // SAFETY: src is readable for r3 bytes (readable).
    unsafe { m.ringbuf_output(r4, st.cpu, src, r3 as usize) as u64 }
}

/// `void *bpf_ringbuf_reserve(ringbuf, size, flags)`: record memory or NULL.
pub extern "C" fn bpf_ringbuf_reserve(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, _: u64, _: u64) -> u64 {
    let Some(m) = map_of(st, r1) else { fault!(st, id::RINGBUF_RESERVE, HelperFault::BadMap) };
    m.ringbuf_reserve(r2, r3, st.cpu)
}

/// Submit (or discard) the reserved record at `addr`: the ring that holds it finds it.
fn ringbuf_commit(st: &mut RunState<'_>, helper: u32, addr: u64, discard: bool) -> u64 {
    let done = st.maps.iter().find(|m| m.ring_contains(addr)).is_some_and(|m| m.ringbuf_commit(addr, discard));
    if !done {
        fault!(st, helper, HelperFault::BadPointer)
    }
    0
}

/// `void bpf_ringbuf_submit(data, flags)` (wake-up flags have no meaning here).
pub extern "C" fn bpf_ringbuf_submit(st: &mut RunState<'_>, r1: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    ringbuf_commit(st, id::RINGBUF_SUBMIT, r1, false)
}

/// `void bpf_ringbuf_discard(data, flags)`.
pub extern "C" fn bpf_ringbuf_discard(st: &mut RunState<'_>, r1: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    ringbuf_commit(st, id::RINGBUF_DISCARD, r1, true)
}

/// `u64 bpf_ringbuf_query(ringbuf, flags)`.
pub extern "C" fn bpf_ringbuf_query(st: &mut RunState<'_>, r1: u64, r2: u64, _: u64, _: u64, _: u64) -> u64 {
    let Some(m) = map_of(st, r1) else { fault!(st, id::RINGBUF_QUERY, HelperFault::BadMap) };
    m.ringbuf_query(r2)
}

// ---- time, random, cpu ---------------------------------------------------------------------

pub extern "C" fn bpf_ktime_get_ns(st: &mut RunState<'_>, _: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    st.env.ktime_ns()
}

pub extern "C" fn bpf_ktime_get_boot_ns(st: &mut RunState<'_>, _: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    st.env.ktime_boot_ns()
}

pub extern "C" fn bpf_ktime_get_coarse_ns(st: &mut RunState<'_>, _: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    st.env.ktime_coarse_ns()
}

pub extern "C" fn bpf_get_prandom_u32(st: &mut RunState<'_>, _: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    st.env.prandom_u32() as u64
}

pub extern "C" fn bpf_get_smp_processor_id(st: &mut RunState<'_>, _: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    st.cpu as u64
}

// ---- redirects -----------------------------------------------------------------------------

/// `long bpf_redirect(ifindex, flags)`: records `Ifindex(ifindex)`, returns XDP_REDIRECT;
/// non-zero flags → XDP_ABORTED (kernel semantics for XDP).
pub extern "C" fn bpf_redirect(st: &mut RunState<'_>, r1: u64, r2: u64, _: u64, _: u64, _: u64) -> u64 {
    if r2 != 0 {
        return XDP_ABORTED as u64;
    }
    st.set_redirect(Some(crate::xdp::RedirectTarget::Ifindex(r1 as u32)));
    XDP_REDIRECT as u64
}

/// `long bpf_redirect_map(map, key, flags)`: DEVMAP / DEVMAP_HASH → `Ifindex`, CPUMAP → `Cpu`,
/// XSKMAP → `Xsk`. An absent key clears the recorded redirect and returns `flags & 3` (the
/// fallback action). `BPF_F_BROADCAST` is not supported: the helper returns XDP_ABORTED.
/// Unknown flags → XDP_ABORTED, like the kernel.
pub extern "C" fn bpf_redirect_map(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, _: u64, _: u64) -> u64 {
    let Some(m) = map_of(st, r1) else { fault!(st, id::REDIRECT_MAP, HelperFault::BadMap) };
    let t = m.map_type();
    let extra = match t {
        map_type::DEVMAP | map_type::DEVMAP_HASH => BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS,
        map_type::CPUMAP | map_type::XSKMAP => 0,
        _ => fault!(st, id::REDIRECT_MAP, HelperFault::BadMap),
    };
    if r3 & !(BPF_F_ACTION_MASK | extra) != 0 || r3 & BPF_F_BROADCAST != 0 {
        return XDP_ABORTED as u64;
    }
    match m.redirect_target(r2 as u32) {
        Some(target) => {
            st.set_redirect(Some(target));
            XDP_REDIRECT as u64
        }
        None => {
            st.set_redirect(None);
            r3 & BPF_F_ACTION_MASK
        }
    }
}

// ---- packet size -----------------------------------------------------------------------------

#[inline]
fn is_ctx(st: &RunState<'_>, r1: u64) -> bool {
    r1 == st.ctx_addr()
}

/// `long bpf_xdp_adjust_head(ctx, delta)`: moves `data` by `delta` (metadata moves along).
/// Keeps at least ETH_HLEN bytes of packet and never hands out the first
/// `XDP_FRAME_RESERVED` bytes of the headroom (plus the metadata). `-EINVAL` otherwise.
pub extern "C" fn bpf_xdp_adjust_head(st: &mut RunState<'_>, r1: u64, r2: u64, _: u64, _: u64, _: u64) -> u64 {
    if !is_ctx(st, r1) {
        fault!(st, id::XDP_ADJUST_HEAD, HelperFault::BadCtx)
    }
    let delta = r2 as u32 as i32 as i64;
    let base = st.frame_base() as i64;
    let data = st.ctx.data as i64;
    let meta = st.ctx.data_meta as i64;
    let end = st.ctx.data_end as i64;
    let metalen = data - meta;
    let new_data = data + delta;
    let data_start = base + XDP_FRAME_RESERVED as i64 + metalen;
    if new_data < data_start || new_data > end - ETH_HLEN as i64 {
        return neg_errno(libc::EINVAL);
    }
    let new_meta = meta + delta;
    if metalen > 0 {
        // SAFETY: both [meta, data) and [new_meta, new_data) lie inside the frame: new_meta >=
        // base + XDP_FRAME_RESERVED and new_data <= end <= frame end; ptr::copy handles overlap.
        unsafe {
            std::ptr::copy(st.frame_ptr.add((meta - base) as usize), st.frame_ptr.add((new_meta - base) as usize), metalen as usize);
        }
    }
    st.ctx.data_meta = new_meta as u32;
    st.ctx.data = new_data as u32;
    0
}

/// `long bpf_xdp_adjust_meta(ctx, delta)`: moves `data_meta`; the metadata must stay a multiple
/// of 4 bytes, at most `RunConfig::meta_max` (default 255, like current kernels; older ones
/// allowed 32) — `-EACCES` otherwise — and out of the reserved head of the frame (`-EINVAL`).
pub extern "C" fn bpf_xdp_adjust_meta(st: &mut RunState<'_>, r1: u64, r2: u64, _: u64, _: u64, _: u64) -> u64 {
    if !is_ctx(st, r1) {
        fault!(st, id::XDP_ADJUST_META, HelperFault::BadCtx)
    }
    let delta = r2 as u32 as i32 as i64;
    let base = st.frame_base() as i64;
    let data = st.ctx.data as i64;
    let meta = st.ctx.data_meta as i64 + delta;
    if meta < base + XDP_FRAME_RESERVED as i64 || meta > data {
        return neg_errno(libc::EINVAL);
    }
    let metalen = data - meta;
    if metalen % 4 != 0 || metalen > st.meta_max as i64 {
        return neg_errno(libc::EACCES);
    }
    st.ctx.data_meta = meta as u32;
    0
}

/// `long bpf_xdp_adjust_tail(ctx, delta)`: moves `data_end`; keeps at least ETH_HLEN bytes, and
/// growing never goes past the frame end minus the configured tailroom. Grown bytes are zeroed.
/// (Unlike the kernel, shrinking is allowed even when the packet already reaches into the
/// tailroom, which only happens with buffers built without tailroom.)
pub extern "C" fn bpf_xdp_adjust_tail(st: &mut RunState<'_>, r1: u64, r2: u64, _: u64, _: u64, _: u64) -> u64 {
    if !is_ctx(st, r1) {
        fault!(st, id::XDP_ADJUST_TAIL, HelperFault::BadCtx)
    }
    let delta = r2 as u32 as i32 as i64;
    if let Some(frags) = st.env.xdp_frags().filter(|f| f.nr_frags() > 0) {
        return adjust_frags_tail(st.ctx.data_end.wrapping_sub(st.ctx.data) as usize, frags, delta).map_or_else(neg_errno, |linear_cut| {
            st.ctx.data_end -= linear_cut as u32;
            0
        });
    }
    let base = st.frame_base() as i64;
    let hard_end = base + st.frame_len.saturating_sub(st.tailroom) as i64;
    let data = st.ctx.data as i64;
    let end = st.ctx.data_end as i64;
    let new_end = end + delta;
    if delta > 0 && new_end > hard_end {
        return neg_errno(libc::EINVAL);
    }
    if new_end < data + ETH_HLEN as i64 {
        return neg_errno(libc::EINVAL);
    }
    if delta > 0 {
        // SAFETY: [end, new_end) lies inside the frame (new_end <= hard_end <= frame end).
        unsafe { std::ptr::write_bytes(st.frame_ptr.add((end - base) as usize), 0, delta as usize) };
    }
    st.ctx.data_end = new_end as u32;
    0
}

/// `bpf_xdp_adjust_tail` on a multi-buffer packet, as the kernel's
/// `bpf_xdp_frags_increase_tail` / `bpf_xdp_frags_shrink_tail`: growing extends the last
/// fragment within its tailroom (zeroed, else -EINVAL); shrinking releases fragments from
/// the end and, once none is left, cuts the linear part (at least ETH_HLEN bytes stay).
/// Returns how many bytes to cut from the linear part.
fn adjust_frags_tail(linear: usize, frags: &mut dyn XdpFrags, delta: i64) -> Result<usize, i32> {
    if delta >= 0 {
        let last = frags.nr_frags() - 1;
        if delta as usize > frags.frag_tailroom(last) || !frags.grow_last(delta as usize) {
            return Err(libc::EINVAL);
        }
        return Ok(0);
    }
    let mut cut = delta.unsigned_abs() as usize;
    if cut > (linear + frags.frags_len()).saturating_sub(ETH_HLEN) {
        return Err(libc::EINVAL);
    }
    while cut > 0 && frags.nr_frags() > 0 {
        let n = frags.frag(frags.nr_frags() - 1).len().min(cut);
        frags.shrink_last(n);
        cut -= n;
    }
    Ok(cut)
}

/// `long bpf_tail_call(ctx, prog_array, index)`: when slot `index` holds a program and fewer
/// than MAX_TAIL_CALL_CNT tail calls were made on this packet, the call is counted and that
/// program runs on the same context (reported as a `TailCall` "fault": from the entry
/// function the engines end the run with [`RunErrorKind::TailCall`], from a subprogram they
/// run the target in place of the rest of the subprogram, see [`crate::tail_call`]);
/// otherwise the program goes on after the call.
pub extern "C" fn bpf_tail_call(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, _: u64, _: u64) -> u64 {
    if !is_ctx(st, r1) {
        fault!(st, id::TAIL_CALL, HelperFault::BadCtx)
    }
    let Some(map) = map_of(st, r2) else { fault!(st, id::TAIL_CALL, HelperFault::BadMap) };
    if st.tail_calls >= crate::xdp::MAX_TAIL_CALL_CNT {
        return neg_errno(libc::ENOENT);
    }
    match map.tail_call_target(r3 as u32) {
        Some(target) => {
            st.tail_calls += 1;
            st.tail_target = target;
            fault!(st, id::TAIL_CALL, HelperFault::TailCall)
        }
        None => neg_errno(libc::ENOENT),
    }
}

/// `u64 bpf_xdp_get_buff_len(ctx)`: the whole packet, linear part plus fragments.
pub extern "C" fn bpf_xdp_get_buff_len(st: &mut RunState<'_>, r1: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    if !is_ctx(st, r1) {
        fault!(st, id::XDP_GET_BUFF_LEN, HelperFault::BadCtx)
    }
    let linear = st.ctx.data_end.wrapping_sub(st.ctx.data) as u64;
    linear + st.env.xdp_frags().map_or(0, |f| f.frags_len() as u64)
}

/// `bpf_xdp_load_bytes` / `bpf_xdp_store_bytes`: `len` bytes at `off` of the whole packet
/// (linear part, then fragments, as the kernel's `bpf_xdp_copy_buf`). Offsets or lengths
/// above 0xffff are -EFAULT, a range past the packet -EINVAL, as `bpf_xdp_pointer`.
fn xdp_copy_bytes(st: &mut RunState<'_>, helper: u32, r1: u64, off: u64, buf: u64, len: u64, store: bool) -> u64 {
    if !is_ctx(st, r1) {
        fault!(st, helper, HelperFault::BadCtx)
    }
    let (off, len) = (off as u32 as usize, len as u32 as usize);
    if off > 0xffff || len > 0xffff {
        return neg_errno(libc::EFAULT);
    }
    let linear = st.ctx.data_end.wrapping_sub(st.ctx.data) as usize;
    let total = linear + st.env.xdp_frags().map_or(0, |f| f.frags_len());
    if len == 0 || off + len > total {
        return neg_errno(libc::EINVAL);
    }
    let Some(b) = st.helper_mem(buf, len, !store) else { fault!(st, helper, HelperFault::BadPointer) };
    // The linear part first.
    let in_linear = linear.saturating_sub(off).min(len);
    if in_linear > 0 {
        let pkt = st.frame_ptr.wrapping_add(st.ctx.data as usize - st.frame_base() + off);
        // SAFETY: [pkt, pkt+in_linear) is inside [data, data_end) (off + in_linear <= linear)
        // and b is valid for len bytes (helper_mem); copy_relaxed tolerates any overlap.
        unsafe {
            if store {
                copy_relaxed(pkt, b, in_linear)
            } else {
                copy_relaxed(b, pkt, in_linear)
            }
        };
    }
    if in_linear == len {
        return 0;
    }
    // Then the fragments, from the offset past the linear part.
    let Some(frags) = st.env.xdp_frags() else { return neg_errno(libc::EINVAL) };
    let (mut skip, mut done) = (off.saturating_sub(linear), in_linear);
    for i in 0..frags.nr_frags() {
        if done == len {
            break;
        }
        let frag = frags.frag_mut(i);
        if skip >= frag.len() {
            skip -= frag.len();
            continue;
        }
        let n = (frag.len() - skip).min(len - done);
        let part = &mut frag[skip..skip + n];
        // SAFETY: b is valid for len bytes and done + n <= len; `part` is a distinct buffer.
        unsafe {
            if store {
                copy_relaxed(part.as_mut_ptr(), b.add(done), n)
            } else {
                copy_relaxed(b.add(done), part.as_ptr(), n)
            }
        };
        done += n;
        skip = 0;
    }
    0
}

/// `long bpf_xdp_load_bytes(ctx, offset, buf, len)`.
pub extern "C" fn bpf_xdp_load_bytes(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, r4: u64, _: u64) -> u64 {
    xdp_copy_bytes(st, id::XDP_LOAD_BYTES, r1, r2, r3, r4, false)
}

/// `long bpf_xdp_store_bytes(ctx, offset, buf, len)`.
pub extern "C" fn bpf_xdp_store_bytes(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, r4: u64, _: u64) -> u64 {
    xdp_copy_bytes(st, id::XDP_STORE_BYTES, r1, r2, r3, r4, true)
}

// ---- checksum --------------------------------------------------------------------------------

/// `s64 bpf_csum_diff(from, from_size, to, to_size, seed)`: the 32-bit ones'-complement sum of
/// `seed`, the complement of every 32-bit word of `from` and every word of `to` (sizes multiple
/// of 4, together at most 512 bytes, else -EINVAL). Equal to the kernel's `csum_partial` result
/// up to the final 16-bit fold (which is what programs use).
pub extern "C" fn bpf_csum_diff(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, r4: u64, r5: u64) -> u64 {
    let (from_size, to_size) = (r2 as u32 as usize, r4 as u32 as usize);
    if (from_size | to_size) % 4 != 0 || from_size + to_size > 512 {
        return neg_errno(libc::EINVAL);
    }
    let mut sum: u64 = r5 as u32 as u64;
    for (addr, size, invert) in [(r1, from_size, true), (r3, to_size, false)] {
        if size == 0 {
            continue;
        }
        let Some(p) = st.helper_mem(addr, size, false) else { fault!(st, id::CSUM_DIFF, HelperFault::BadPointer) };
        for i in (0..size).step_by(4) {
            let mut w = [0u8; 4];
            // SAFETY: p is readable for size bytes and i + 4 <= size.
            unsafe { copy_relaxed(w.as_mut_ptr(), p.add(i), 4) };
            let v = u32::from_ne_bytes(w);
            sum += if invert { !v } else { v } as u64;
        }
    }
    while sum >> 32 != 0 {
        sum = (sum & 0xffff_ffff) + (sum >> 32);
    }
    sum
}

// ---- FIB -------------------------------------------------------------------------------------

/// `long bpf_fib_lookup(ctx, params, plen, flags)`: hands the 64-byte `struct bpf_fib_lookup`
/// to [`crate::env::Env::fib_lookup`] and copies it back. `plen < 64` or unknown flags → -EINVAL.
pub extern "C" fn bpf_fib_lookup(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, r4: u64, _: u64) -> u64 {
    if !is_ctx(st, r1) {
        fault!(st, id::FIB_LOOKUP, HelperFault::BadCtx)
    }
    if (r3 as u32 as i32) < 64 || r4 & !BPF_FIB_LOOKUP_FLAGS != 0 {
        return neg_errno(libc::EINVAL);
    }
    let Some(p) = st.helper_mem(r2, 64, true) else { fault!(st, id::FIB_LOOKUP, HelperFault::BadPointer) };
    let mut params = [0u8; 64];
    // SAFETY: p is readable and writable for 64 bytes (helper_mem with write).
    unsafe { copy_relaxed(params.as_mut_ptr(), p, 64) };
    let rc = st.env.fib_lookup(&mut params, r4 as u32);
    // SAFETY: as above.
    unsafe { copy_relaxed(p, params.as_ptr(), 64) };
    rc as u64
}

// ---- trace_printk ----------------------------------------------------------------------------

/// Most arguments `bpf_trace_vprintk` accepts (`MAX_BPRINTF_VARARGS`).
pub const MAX_PRINTK_ARGS: usize = 12;

/// `long bpf_trace_printk(fmt, fmt_size, a1, a2, a3)`: formats with the kernel's subset of
/// printf (`%d %i %u %x %X` with `l`/`ll`, `%c`, `%s`, `%p`/`%px`/`%pK`, `%pI4 %pi4 %pI6 %pi6`,
/// `%%`, flags `0 + - space #`, a width) and passes the message to [`crate::env::Env::trace`]. Returns the
/// message length, or -EINVAL for a bad format (unknown conversion, more than 3 arguments,
/// `fmt` not NUL-terminated within `fmt_size`).
pub extern "C" fn bpf_trace_printk(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, r4: u64, r5: u64) -> u64 {
    printk(st, id::TRACE_PRINTK, r1, r2, &[r3, r4, r5])
}

/// `long bpf_trace_vprintk(fmt, fmt_size, data, data_len)`: like trace_printk with the
/// arguments in an array of u64 (`data_len` a multiple of 8, at most 12 arguments).
pub extern "C" fn bpf_trace_vprintk(st: &mut RunState<'_>, r1: u64, r2: u64, r3: u64, r4: u64, _: u64) -> u64 {
    let data_len = r4 as u32 as usize;
    if !data_len.is_multiple_of(8) || data_len > MAX_PRINTK_ARGS * 8 {
        return neg_errno(libc::EINVAL);
    }
    let mut args = [0u64; MAX_PRINTK_ARGS];
    let n = data_len / 8;
    if n > 0 {
        let Some(p) = st.helper_mem(r3, data_len, false) else { fault!(st, id::TRACE_VPRINTK, HelperFault::BadPointer) };
        for (i, a) in args.iter_mut().take(n).enumerate() {
            let mut w = [0u8; 8];
            // SAFETY: p is readable for data_len = 8n bytes and i < n.
            unsafe { copy_relaxed(w.as_mut_ptr(), p.add(i * 8), 8) };
            *a = u64::from_le_bytes(w);
        }
    }
    printk(st, id::TRACE_VPRINTK, r1, r2, &args[..n])
}

fn printk(st: &mut RunState<'_>, helper: u32, fmt_addr: u64, fmt_size: u64, args: &[u64]) -> u64 {
    let fmt_size = fmt_size as u32 as usize;
    if fmt_size == 0 || fmt_size > 4096 {
        return neg_errno(libc::EINVAL);
    }
    let Some(p) = st.helper_mem(fmt_addr, fmt_size, false) else { fault!(st, helper, HelperFault::BadPointer) };
    let mut fmt = vec![0u8; fmt_size];
    // SAFETY: p is readable for fmt_size bytes.
    unsafe { copy_relaxed(fmt.as_mut_ptr(), p, fmt_size) };
    let Some(nul) = fmt.iter().position(|&b| b == 0) else {
        return neg_errno(libc::EINVAL);
    };
    fmt.truncate(nul);
    match format_printk(st, &fmt, args) {
        Some(msg) => {
            let n = msg.len();
            st.env.trace(&msg);
            n as u64
        }
        None => neg_errno(libc::EINVAL),
    }
}

/// Reads a NUL-terminated string (at most 512 bytes) from memory the program may access.
fn read_cstr(st: &RunState<'_>, addr: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..512u64 {
        let p = st.translate(addr.checked_add(i)?, 1, false)?;
        let b = match p {
            (_, MemKind::Ctx) => {
                let off = (addr + i - st.ctx_addr()) as usize;
                st.ctx.to_bytes().get(off).copied()?
            }
            (p, _) => {
                let mut b = [0u8; 1];
                // SAFETY: p is readable for one byte (translate).
                unsafe { copy_relaxed(b.as_mut_ptr(), p, 1) };
                b[0]
            }
        };
        if b == 0 {
            break;
        }
        out.push(b);
    }
    Some(out)
}

fn read_array<const N: usize>(st: &RunState<'_>, addr: u64) -> Option<[u8; N]> {
    let p = st.helper_mem(addr, N, false)?;
    let mut b = [0u8; N];
    // SAFETY: p is readable for N bytes.
    unsafe { copy_relaxed(b.as_mut_ptr(), p, N) };
    Some(b)
}

struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    width: usize,
}

fn pad(out: &mut String, spec: &Spec, sign: &str, body: &str) {
    let fill = spec.width.saturating_sub(sign.len() + body.len());
    if spec.left {
        out.push_str(sign);
        out.push_str(body);
        out.extend(std::iter::repeat_n(' ', fill));
    } else if spec.zero {
        out.push_str(sign);
        out.extend(std::iter::repeat_n('0', fill));
        out.push_str(body);
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(sign);
        out.push_str(body);
    }
}

/// Formats a printk message; `None` for a format the kernel would refuse.
fn format_printk(st: &RunState<'_>, fmt: &[u8], args: &[u64]) -> Option<String> {
    let mut out = String::new();
    let mut next_arg = 0usize;
    let mut take = || {
        let a = args.get(next_arg).copied();
        next_arg += 1;
        a
    };
    let mut i = 0usize;
    while i < fmt.len() {
        let c = fmt[i];
        if c != b'%' {
            // Keep non-ASCII bytes readable (the kernel emits them raw).
            let start = i;
            while i < fmt.len() && fmt[i] != b'%' {
                i += 1;
            }
            out.push_str(&String::from_utf8_lossy(&fmt[start..i]));
            continue;
        }
        i += 1;
        if fmt.get(i) == Some(&b'%') {
            out.push('%');
            i += 1;
            continue;
        }
        let mut spec = Spec { left: false, zero: false, plus: false, space: false, width: 0 };
        while let Some(&f) = fmt.get(i) {
            match f {
                b'-' => spec.left = true,
                b'0' => spec.zero = true,
                b'+' => spec.plus = true,
                b' ' => spec.space = true,
                // No `#`: the kernel's bpf_bprintf_prepare skips only `0 +-` and the
                // width, so `%#x` is -EINVAL there too.
                _ => break,
            }
            i += 1;
        }
        while let Some(&d) = fmt.get(i) {
            if !d.is_ascii_digit() {
                break;
            }
            spec.width = (spec.width * 10 + (d - b'0') as usize).min(512);
            i += 1;
        }
        let conv = *fmt.get(i)?;
        i += 1;
        match conv {
            b'c' => {
                let a = take()?;
                let ch = (a as u8 as char).to_string();
                pad(&mut out, &spec, "", &ch);
            }
            b's' => {
                let a = take()?;
                let s = match read_cstr(st, a) {
                    Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                    None => "(fault)".to_owned(),
                };
                pad(&mut out, &spec, "", &s);
            }
            b'p' => {
                let a = take()?;
                let kind = (fmt.get(i).copied(), fmt.get(i + 1).copied());
                let s = match kind {
                    (Some(b'I'), Some(b'4')) | (Some(b'i'), Some(b'4')) => {
                        let lead0 = fmt[i] == b'i';
                        i += 2;
                        match read_array::<4>(st, a) {
                            Some(b) if lead0 => {
                                format!("{:03}.{:03}.{:03}.{:03}", b[0], b[1], b[2], b[3])
                            }
                            Some(b) => format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]),
                            None => "(fault)".to_owned(),
                        }
                    }
                    (Some(b'I'), Some(b'6')) | (Some(b'i'), Some(b'6')) => {
                        let colons = fmt[i] == b'I';
                        i += 2;
                        match read_array::<16>(st, a) {
                            Some(b) => {
                                let mut s = String::new();
                                for (k, pair) in b.chunks(2).enumerate() {
                                    if colons && k > 0 {
                                        s.push(':');
                                    }
                                    s.push_str(&format!("{:02x}{:02x}", pair[0], pair[1]));
                                }
                                s
                            }
                            None => "(fault)".to_owned(),
                        }
                    }
                    (Some(b'x'), _) | (Some(b'K'), _) => {
                        i += 1;
                        format!("{a:016x}")
                    }
                    (Some(x), _) if x.is_ascii_alphanumeric() => return None,
                    _ => format!("{a:016x}"),
                };
                pad(&mut out, &spec, "", &s);
            }
            _ => {
                let mut long = false;
                let mut conv = conv;
                if conv == b'l' {
                    long = true;
                    conv = *fmt.get(i)?;
                    i += 1;
                    if conv == b'l' {
                        conv = *fmt.get(i)?;
                        i += 1;
                    }
                }
                let a = take()?;
                let v = if long { a } else { a as u32 as u64 };
                match conv {
                    b'd' | b'i' => {
                        let sv = if long { v as i64 } else { v as u32 as i32 as i64 };
                        let sign = if sv < 0 {
                            "-"
                        } else if spec.plus {
                            "+"
                        } else if spec.space {
                            " "
                        } else {
                            ""
                        };
                        pad(&mut out, &spec, sign, &sv.unsigned_abs().to_string());
                    }
                    b'u' => pad(&mut out, &spec, "", &v.to_string()),
                    b'x' => pad(&mut out, &spec, "", &format!("{v:x}")),
                    b'X' => pad(&mut out, &spec, "", &format!("{v:X}")),
                    _ => return None,
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
pub(crate) fn tests_format(st: &RunState<'_>, fmt: &[u8], args: &[u64]) -> Option<String> {
    format_printk(st, fmt, args)
}
