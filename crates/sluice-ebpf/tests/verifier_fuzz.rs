//! Soundness fuzzing: mutate valid programs (hand-written seeds and, when clang is there,
//! the C corpus); every mutant the verifier accepts is run on random packets and map
//! contents by a reference interpreter that checks every memory access, every register
//! read and the step count. Any violation is a verifier bug. No mutant may panic the
//! verifier either.

#[path = "verifier_asm.rs"]
mod asm;
#[path = "verifier_corpus.rs"]
mod corpus;

use std::collections::HashMap;

use sluice_ebpf::insn::*;
use sluice_ebpf::program::{map_type, MapDef, Program};
use sluice_ebpf::verifier::{verify, VerifyOptions};

// ---------------------------------------------------------------- PRNG

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

// ---------------------------------------------------------------- reference interpreter

const PKT_BASE: u64 = 0x10_0000_0000;
const PKT_BUF: usize = 1024;
const HEADROOM: usize = 256;
const CTX_BASE: u64 = 0x20_0000_0000;
const STACK_BASE: u64 = 0x30_0000_0000;
const MAPVAL_BASE: u64 = 0x40_0000_0000;
const MAPPTR_BASE: u64 = 0x50_0000_0000;
const MAX_STEPS: u64 = 5_000_000;

#[derive(Debug)]
struct Violation(String);

type R<T> = Result<T, Violation>;

fn bad<T>(msg: String) -> R<T> {
    Err(Violation(msg))
}

struct Frame {
    regs: [Option<u64>; 11],
    /// Pointer taint: the register holds (something derived from) a pointer.
    taint: [bool; 11],
    stack: [u8; 512],
    init: [bool; 512],
    stack_taint: [bool; 512],
    ret_pc: usize,
}

struct Vm<'a> {
    prog: &'a Program,
    pkt: Vec<u8>,
    data: usize,
    data_end: usize,
    meta: usize,
    /// Per map: entries (key bytes → value bytes). Values are never freed (RCU-like).
    values: Vec<Vec<Vec<u8>>>,
    keys: Vec<HashMap<Vec<u8>, usize>>,
    frames: Vec<Frame>,
    rng: Rng,
}

impl<'a> Vm<'a> {
    fn new(prog: &'a Program, rng: &mut Rng) -> Vm<'a> {
        let len = match rng.below(4) {
            0 => rng.below(20) as usize,
            1 => 14 + rng.below(60) as usize,
            _ => rng.below(200) as usize,
        };
        let mut pkt = vec![0u8; PKT_BUF];
        for b in pkt.iter_mut() {
            *b = rng.next() as u8;
        }
        // Plausible headers now and then.
        if rng.chance(2, 3) {
            let et: [u8; 2] = match rng.below(4) {
                0 => [0x08, 0x00],
                1 => [0x86, 0xdd],
                2 => [0x81, 0x00],
                _ => [0x88, 0xb5],
            };
            pkt[HEADROOM + 12] = et[0];
            pkt[HEADROOM + 13] = et[1];
            if rng.chance(1, 2) {
                pkt[HEADROOM + 14] = 0x45;
                pkt[HEADROOM + 23] = [6u8, 17, 1, 58][rng.below(4) as usize];
            }
        }
        let mut values = Vec::new();
        let mut keys = Vec::new();
        for m in &prog.maps {
            let mut v = Vec::new();
            let is_array = matches!(m.map_type, map_type::ARRAY | map_type::PERCPU_ARRAY);
            let is_dev =
                !matches!(m.map_type, map_type::HASH | map_type::PERCPU_HASH | map_type::LRU_HASH | map_type::LRU_PERCPU_HASH) && !is_array;
            if is_array || is_dev {
                for _ in 0..m.max_entries.min(64) {
                    v.push((0..m.value_size).map(|_| rng.next() as u8).collect());
                }
            }
            values.push(v);
            keys.push(HashMap::new());
        }
        Vm {
            prog,
            pkt,
            data: HEADROOM,
            data_end: HEADROOM + len,
            meta: HEADROOM,
            values,
            keys,
            frames: Vec::new(),
            rng: Rng(rng.next() | 1),
        }
    }

    fn new_frame(&self, ret_pc: usize) -> Frame {
        let mut regs = [None; 11];
        regs[10] = Some(STACK_BASE + (self.frames.len() as u64 + 1) * 0x10000);
        let mut taint = [false; 11];
        taint[10] = true;
        Frame { regs, taint, stack: [0; 512], init: [false; 512], stack_taint: [false; 512], ret_pc }
    }

    fn reg(&self, r: u8) -> R<u64> {
        let f = self.frames.last().unwrap();
        match f.regs.get(r as usize).copied().flatten() {
            Some(v) => Ok(v),
            None => bad(format!("read of uninitialised R{r}")),
        }
    }

    fn set(&mut self, r: u8, v: u64) {
        self.set_t(r, v, false);
    }

    fn set_t(&mut self, r: u8, v: u64, taint: bool) {
        let f = self.frames.last_mut().unwrap();
        f.regs[r as usize] = Some(v);
        f.taint[r as usize] = taint;
    }

    fn taint(&self, r: u8) -> bool {
        self.frames.last().unwrap().taint[r as usize]
    }

    /// Stack frame index and byte offset of a stack address (if it is one).
    fn stack_byte(&self, addr: u64) -> Option<(usize, usize)> {
        if !(STACK_BASE..MAPVAL_BASE).contains(&addr) {
            return None;
        }
        let k = ((addr - STACK_BASE) / 0x10000) as usize;
        let fp = STACK_BASE + (k as u64 + 1) * 0x10000;
        (k < self.frames.len() && addr >= fp - 512 && addr < fp).then(|| (k, (addr - (fp - 512)) as usize))
    }

    fn unset(&mut self, r: u8) {
        self.frames.last_mut().unwrap().regs[r as usize] = None;
    }

    /// Bytes of memory at `addr`: checks the whole access lies in one live object.
    fn mem(&mut self, addr: u64, size: usize, write: bool) -> R<&mut [u8]> {
        let end = addr.checked_add(size as u64).ok_or_else(|| Violation("address wrap".into()))?;
        if addr >= PKT_BASE && end <= PKT_BASE + PKT_BUF as u64 {
            let (lo, hi) = ((addr - PKT_BASE) as usize, (end - PKT_BASE) as usize);
            if lo < self.meta || hi > self.data_end {
                return bad(format!(
                    "packet access [{lo}, {hi}) outside [meta={}, data_end={}) (data={})",
                    self.meta, self.data_end, self.data
                ));
            }
            return Ok(&mut self.pkt[lo..hi]);
        }
        if (STACK_BASE..MAPVAL_BASE).contains(&addr) {
            let k = ((addr - STACK_BASE) / 0x10000) as usize;
            let fp = STACK_BASE + (k as u64 + 1) * 0x10000;
            if k >= self.frames.len() || end > fp || addr < fp - 512 {
                return bad(format!("stack access {addr:#x}+{size} outside frame {k}"));
            }
            let lo = (addr - (fp - 512)) as usize;
            let fr = &mut self.frames[k];
            if write {
                for b in &mut fr.init[lo..lo + size] {
                    *b = true;
                }
            } else if fr.init[lo..lo + size].iter().any(|b| !b) {
                return bad(format!("read of uninitialised stack at {}", lo as i64 - 512));
            }
            return Ok(&mut fr.stack[lo..lo + size]);
        }
        if (MAPVAL_BASE..MAPPTR_BASE).contains(&addr) {
            let m = ((addr - MAPVAL_BASE) >> 32) as usize;
            let e = (((addr - MAPVAL_BASE) >> 16) & 0xffff) as usize;
            let off = (addr & 0xffff) as usize;
            let Some(v) = self.values.get_mut(m).and_then(|v| v.get_mut(e)) else {
                return bad(format!("map value access {addr:#x}: no such value"));
            };
            if off + size > v.len() || end > (addr & !0xffff) + 0x10000 {
                return bad(format!("map value access off={off} size={size} value_size={}", v.len()));
            }
            return Ok(&mut v[off..off + size]);
        }
        bad(format!("access to unmapped address {addr:#x} size {size}"))
    }

    fn load(&mut self, addr: u64, size: usize) -> R<u64> {
        if (CTX_BASE..CTX_BASE + 24).contains(&addr) {
            if size != 4 || !addr.is_multiple_of(4) {
                return bad("bad ctx load".into());
            }
            return Ok(match addr - CTX_BASE {
                0 => PKT_BASE + self.data as u64,
                4 => PKT_BASE + self.data_end as u64,
                8 => PKT_BASE + self.meta as u64,
                12 => 3,
                16 => self.rng.below(4),
                _ => 0,
            });
        }
        let b = self.mem(addr, size, false)?;
        let mut v = 0u64;
        for (i, x) in b.iter().enumerate() {
            v |= (*x as u64) << (8 * i);
        }
        Ok(v)
    }

    fn store(&mut self, addr: u64, size: usize, v: u64) -> R<()> {
        let b = self.mem(addr, size, true)?;
        for (i, x) in b.iter_mut().enumerate() {
            *x = (v >> (8 * i)) as u8;
        }
        Ok(())
    }

    fn read_bytes(&mut self, addr: u64, size: usize) -> R<Vec<u8>> {
        if size == 0 {
            return Ok(Vec::new());
        }
        Ok(self.mem(addr, size, false)?.to_vec())
    }

    fn map_of(&self, v: u64) -> R<usize> {
        let idx = v.wrapping_sub(MAPPTR_BASE) as usize;
        if v < MAPPTR_BASE || idx >= self.prog.maps.len() {
            return bad(format!("helper got a bad map pointer {v:#x}"));
        }
        Ok(idx)
    }

    fn helper(&mut self, id: i32) -> R<u64> {
        let a = |vm: &Self, r| vm.reg(r);
        let ret = match id {
            1..=3 => {
                let m = self.map_of(a(self, 1)?)?;
                let def: MapDef = self.prog.maps[m].clone();
                let key = self.read_bytes(a(self, 2)?, def.key_size as usize)?;
                if id == 2 {
                    let val = self.read_bytes(a(self, 3)?, def.value_size as usize)?;
                    a(self, 4)?;
                    if let Some(&e) = self.keys[m].get(&key) {
                        self.values[m][e] = val;
                    } else if self.values[m].len() < 0xffff {
                        self.values[m].push(val);
                        let e = self.values[m].len() - 1;
                        self.keys[m].insert(key, e);
                    }
                    0
                } else if id == 3 {
                    // Deleted values stay readable until the program ends (RCU).
                    self.keys[m].remove(&key);
                    0
                } else {
                    let hashed =
                        matches!(def.map_type, map_type::HASH | map_type::PERCPU_HASH | map_type::LRU_HASH | map_type::LRU_PERCPU_HASH);
                    let e = if hashed {
                        match self.keys[m].get(&key) {
                            Some(&e) => Some(e),
                            None if self.rng.chance(1, 2) && self.values[m].len() < 0xffff => {
                                let val: Vec<u8> = (0..def.value_size).map(|_| self.rng.next() as u8).collect();
                                self.values[m].push(val);
                                let e = self.values[m].len() - 1;
                                self.keys[m].insert(key, e);
                                Some(e)
                            }
                            None => None,
                        }
                    } else {
                        let k = u32::from_le_bytes([key[0], key[1], key[2], key[3]]) as usize;
                        (k < self.values[m].len()).then_some(k)
                    };
                    match e {
                        Some(e) => MAPVAL_BASE + ((m as u64) << 32) + ((e as u64) << 16),
                        None => 0,
                    }
                }
            }
            5 | 125 => self.rng.next() >> 1,
            7 => self.rng.next() & 0xffff_ffff,
            8 => 0,
            6 => {
                let size = a(self, 2)? as usize;
                self.read_bytes(a(self, 1)?, size)?;
                0
            }
            23 => {
                a(self, 1)?;
                a(self, 2)?;
                4
            }
            51 => {
                self.map_of(a(self, 1)?)?;
                a(self, 2)?;
                a(self, 3)? & 3
            }
            28 => {
                let (fs, ts) = (a(self, 2)? as usize, a(self, 4)? as usize);
                a(self, 5)?;
                if fs % 4 != 0 || ts % 4 != 0 || fs > 512 || ts > 512 {
                    (-22i64) as u64
                } else {
                    let f = if fs > 0 { self.read_bytes(a(self, 1)?, fs)? } else { Vec::new() };
                    let t = if ts > 0 { self.read_bytes(a(self, 3)?, ts)? } else { Vec::new() };
                    f.iter().chain(t.iter()).map(|&b| b as u64).sum()
                }
            }
            44 | 54 | 65 => {
                if a(self, 1)? != CTX_BASE {
                    return bad("packet helper without ctx".into());
                }
                let delta = a(self, 2)? as i32 as i64;
                let meta_len = self.data - self.meta;
                let ok = match id {
                    44 => {
                        let nd = self.data as i64 + delta;
                        if nd >= (64 + meta_len) as i64 && nd <= self.data_end as i64 - 14 {
                            self.data = nd as usize;
                            self.meta = self.data - meta_len;
                            true
                        } else {
                            false
                        }
                    }
                    54 => {
                        let nm = self.meta as i64 + delta;
                        if nm >= 64 && nm <= self.data as i64 && self.data as i64 - nm <= 32 && delta % 4 == 0 {
                            self.meta = nm as usize;
                            true
                        } else {
                            false
                        }
                    }
                    _ => {
                        let ne = self.data_end as i64 + delta;
                        if ne >= self.data as i64 + 14 && ne <= PKT_BUF as i64 {
                            self.data_end = ne as usize;
                            true
                        } else {
                            false
                        }
                    }
                };
                if ok {
                    0
                } else {
                    (-22i64) as u64
                }
            }
            69 => {
                if a(self, 1)? != CTX_BASE {
                    return bad("fib_lookup without ctx".into());
                }
                let p = a(self, 2)?;
                let plen = a(self, 3)? as usize;
                a(self, 4)?;
                let b = self.read_bytes(p, plen.min(64))?;
                let mut out = b.clone();
                for x in out.iter_mut().skip(32) {
                    *x = self.rng.next() as u8;
                }
                for (i, x) in out.iter().enumerate() {
                    self.store(p + i as u64, 1, *x as u64)?;
                }
                self.rng.below(3)
            }
            _ => return bad(format!("unknown helper {id}")),
        };
        for r in 1..=5 {
            self.unset(r);
        }
        Ok(ret)
    }

    fn run(&mut self) -> R<u64> {
        let insns = &self.prog.insns;
        let f0 = self.new_frame(0);
        self.frames.push(f0);
        self.set_t(1, CTX_BASE, true);
        let mut pc = 0usize;
        let mut steps = 0u64;
        loop {
            steps += 1;
            if steps > MAX_STEPS {
                return bad("step limit exceeded (non-terminating?)".into());
            }
            let Some(&i) = insns.get(pc) else { return bad(format!("pc {pc} out of range")) };
            let class = i.class();
            let x = i.code & BPF_X != 0;
            match class {
                BPF_ALU | BPF_ALU64 => {
                    let is64 = class == BPF_ALU64;
                    let op = i.code & 0xf0;
                    let imm = if is64 { i.imm as i64 as u64 } else { i.imm as u32 as u64 };
                    let res = match op {
                        BPF_MOV => {
                            let s = if x { self.reg(i.src)? } else { imm };
                            match (i.off, is64) {
                                (8, true) => s as i8 as i64 as u64,
                                (16, true) => s as i16 as i64 as u64,
                                (32, true) => s as i32 as i64 as u64,
                                (8, false) => s as i8 as i32 as u32 as u64,
                                (16, false) => s as i16 as i32 as u32 as u64,
                                _ => s,
                            }
                        }
                        BPF_NEG => 0u64.wrapping_sub(self.reg(i.dst)?),
                        BPF_END => {
                            let d = self.reg(i.dst)?;
                            let swap = is64 || x;
                            match (i.imm, swap) {
                                (16, false) => d & 0xffff,
                                (32, false) => d & 0xffff_ffff,
                                (16, true) => (d as u16).swap_bytes() as u64,
                                (32, true) => (d as u32).swap_bytes() as u64,
                                (64, true) => d.swap_bytes(),
                                _ => d,
                            }
                        }
                        _ => {
                            let d = self.reg(i.dst)?;
                            let s = if x { self.reg(i.src)? } else { imm };
                            let signed = i.off == 1;
                            let (d32, s32) = (d as u32, s as u32);
                            if is64 {
                                match op {
                                    BPF_ADD => d.wrapping_add(s),
                                    BPF_SUB => d.wrapping_sub(s),
                                    BPF_MUL => d.wrapping_mul(s),
                                    BPF_DIV if signed => {
                                        if s == 0 {
                                            0
                                        } else {
                                            (d as i64).wrapping_div(s as i64) as u64
                                        }
                                    }
                                    BPF_DIV => d.checked_div(s).unwrap_or(0),
                                    BPF_MOD if signed => {
                                        if s == 0 {
                                            d
                                        } else {
                                            (d as i64).wrapping_rem(s as i64) as u64
                                        }
                                    }
                                    BPF_MOD => {
                                        if s == 0 {
                                            d
                                        } else {
                                            d % s
                                        }
                                    }
                                    BPF_OR => d | s,
                                    BPF_AND => d & s,
                                    BPF_XOR => d ^ s,
                                    BPF_LSH => d << (s & 63),
                                    BPF_RSH => d >> (s & 63),
                                    BPF_ARSH => ((d as i64) >> (s & 63)) as u64,
                                    _ => return bad("bad alu op".into()),
                                }
                            } else {
                                (match op {
                                    BPF_ADD => d32.wrapping_add(s32),
                                    BPF_SUB => d32.wrapping_sub(s32),
                                    BPF_MUL => d32.wrapping_mul(s32),
                                    BPF_DIV if signed => {
                                        if s32 == 0 {
                                            0
                                        } else {
                                            (d32 as i32).wrapping_div(s32 as i32) as u32
                                        }
                                    }
                                    BPF_DIV => d32.checked_div(s32).unwrap_or(0),
                                    BPF_MOD if signed => {
                                        if s32 == 0 {
                                            d32
                                        } else {
                                            (d32 as i32).wrapping_rem(s32 as i32) as u32
                                        }
                                    }
                                    BPF_MOD => {
                                        if s32 == 0 {
                                            d32
                                        } else {
                                            d32 % s32
                                        }
                                    }
                                    BPF_OR => d32 | s32,
                                    BPF_AND => d32 & s32,
                                    BPF_XOR => d32 ^ s32,
                                    BPF_LSH => d32 << (s32 & 31),
                                    BPF_RSH => d32 >> (s32 & 31),
                                    BPF_ARSH => ((d32 as i32) >> (s32 & 31)) as u32,
                                    _ => return bad("bad alu op".into()),
                                }) as u64
                            }
                        }
                    };
                    let res = if is64 || op == BPF_END { res } else { res & 0xffff_ffff };
                    // Pointer +/- scalar stays a pointer; pointer - pointer is a scalar.
                    let (td, ts) = (self.taint(i.dst), x && self.taint(i.src));
                    let t = is64
                        && match op {
                            BPF_MOV => x && i.off == 0 && ts,
                            BPF_ADD => td ^ ts,
                            BPF_SUB => td && !ts,
                            _ => false,
                        };
                    self.set_t(i.dst, res, t);
                    pc += 1;
                }
                BPF_LD => {
                    let n = insns[pc + 1];
                    let v = match i.src {
                        BPF_PSEUDO_MAP_FD => MAPPTR_BASE + i.imm as u64,
                        BPF_PSEUDO_MAP_VALUE => MAPVAL_BASE + ((i.imm as u64) << 32) + n.imm as u32 as u64,
                        _ => (i.imm as u32 as u64) | ((n.imm as u32 as u64) << 32),
                    };
                    self.set_t(i.dst, v, i.src != 0);
                    pc += 2;
                }
                BPF_LDX => {
                    let size = [4usize, 2, 1, 8][((i.code >> 3) & 3) as usize];
                    let a = self.reg(i.src)?.wrapping_add(i.off as i64 as u64);
                    let mut v = self.load(a, size)?;
                    let t = if (CTX_BASE..CTX_BASE + 12).contains(&a) {
                        true
                    } else if let Some((k, lo)) = self.stack_byte(a) {
                        self.frames[k].stack_taint[lo..(lo + size).min(512)].iter().any(|&b| b)
                    } else {
                        false
                    };
                    if i.code & 0xe0 == BPF_MEMSX {
                        v = match size {
                            1 => v as i8 as i64 as u64,
                            2 => v as i16 as i64 as u64,
                            _ => v as i32 as i64 as u64,
                        };
                    }
                    self.set_t(i.dst, v, t);
                    pc += 1;
                }
                BPF_ST | BPF_STX => {
                    let size = [4usize, 2, 1, 8][((i.code >> 3) & 3) as usize];
                    let a = self.reg(i.dst)?.wrapping_add(i.off as i64 as u64);
                    let t = class == BPF_STX && i.code & 0xe0 == BPF_MEM && self.taint(i.src);
                    if let Some((k, lo)) = self.stack_byte(a) {
                        for b in &mut self.frames[k].stack_taint[lo..(lo + size).min(512)] {
                            *b = t;
                        }
                    } else if t || (class == BPF_STX && i.code & 0xe0 == BPF_ATOMIC && self.taint(i.src)) {
                        return bad(format!("pointer from R{} stored at {a:#x}", i.src));
                    }
                    if class == BPF_ST {
                        self.store(a, size, i.imm as i64 as u64)?;
                    } else if i.code & 0xe0 == BPF_ATOMIC {
                        let s = self.reg(i.src)?;
                        let old = self.load(a, size)?;
                        let mask = if size == 4 { 0xffff_ffff } else { u64::MAX };
                        let new = match i.imm & !BPF_FETCH {
                            0x00 => old.wrapping_add(s),
                            0x40 => old | s,
                            0x50 => old & s,
                            0xa0 => old ^ s,
                            0xe0 => s,
                            0xf0 => {
                                let r0 = self.reg(0)?;
                                if (r0 & mask) == old {
                                    s
                                } else {
                                    old
                                }
                            }
                            _ => return bad("bad atomic".into()),
                        };
                        self.store(a, size, new & mask)?;
                        if i.imm == BPF_CMPXCHG {
                            self.set(0, old);
                        } else if i.imm & BPF_FETCH != 0 {
                            self.set(i.src, old);
                        }
                    } else {
                        let v = self.reg(i.src)?;
                        self.store(a, size, v)?;
                    }
                    pc += 1;
                }
                _ => {
                    let op = i.code & 0xf0;
                    match op {
                        BPF_JA => {
                            pc = (pc as i64 + 1 + if class == BPF_JMP32 { i.imm as i64 } else { i.off as i64 }) as usize;
                        }
                        BPF_CALL => {
                            if i.src == BPF_PSEUDO_CALL {
                                let mut f = self.new_frame(pc + 1);
                                for r in 1..=5 {
                                    f.regs[r] = self.frames.last().unwrap().regs[r];
                                    f.taint[r] = self.frames.last().unwrap().taint[r];
                                }
                                for r in 0..=5 {
                                    self.unset(r);
                                }
                                self.frames.push(f);
                                pc = (pc as i64 + 1 + i.imm as i64) as usize;
                            } else {
                                let r = self.helper(i.imm)?;
                                self.set_t(0, r, matches!(i.imm, 1 | 195) && r != 0);
                                pc += 1;
                            }
                        }
                        BPF_EXIT => {
                            let r0 = self.frames.last().unwrap().regs[0];
                            let t0 = self.taint(0);
                            if self.frames.len() == 1 {
                                let r0 = r0.ok_or_else(|| Violation("exit with uninitialised R0".into()))?;
                                if t0 {
                                    return bad("pointer returned".into());
                                }
                                return Ok(r0);
                            }
                            let f = self.frames.pop().unwrap();
                            self.frames.last_mut().unwrap().regs[0] = r0;
                            self.frames.last_mut().unwrap().taint[0] = t0;
                            pc = f.ret_pc;
                        }
                        _ => {
                            let d = self.reg(i.dst)?;
                            let s = if x { self.reg(i.src)? } else { i.imm as i64 as u64 };
                            let (d, s) = if class == BPF_JMP32 { (d as u32 as u64, s as u32 as u64) } else { (d, s) };
                            let (sd, ss) =
                                if class == BPF_JMP32 { (d as u32 as i32 as i64, s as u32 as i32 as i64) } else { (d as i64, s as i64) };
                            let t = match op {
                                BPF_JEQ => d == s,
                                BPF_JNE => d != s,
                                BPF_JGT => d > s,
                                BPF_JGE => d >= s,
                                BPF_JLT => d < s,
                                BPF_JLE => d <= s,
                                BPF_JSGT => sd > ss,
                                BPF_JSGE => sd >= ss,
                                BPF_JSLT => sd < ss,
                                BPF_JSLE => sd <= ss,
                                BPF_JSET => d & s != 0,
                                _ => return bad("bad jump".into()),
                            };
                            pc = if t { (pc as i64 + 1 + i.off as i64) as usize } else { pc + 1 };
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------- mutation

fn mutate(p: &Program, rng: &mut Rng) -> Program {
    let mut q = p.clone();
    let n = q.insns.len();
    for _ in 0..1 + rng.below(3) {
        let k = rng.below(n as u64) as usize;
        let i = &mut q.insns[k];
        match rng.below(12) {
            0 | 1 => i.imm = i.imm.wrapping_add([-1, 1, -2, 2, -4, 4, -8, 8, 16, -16][rng.below(10) as usize]),
            2 | 3 => i.off = i.off.wrapping_add([-1, 1, -2, 2, -4, 4, -8, 8][rng.below(8) as usize]),
            4 => i.imm = [0, 1, 2, 4, 7, 8, 14, 15, 16, 20, 31, 32, 63, 64, 255, 256, -1, i32::MAX, i32::MIN][rng.below(19) as usize],
            5 => i.dst = rng.below(11) as u8,
            6 => i.src = rng.below(11) as u8,
            7 => {
                // Change the jump or ALU operation, keep the class.
                let ops: &[u8] = if matches!(i.class(), BPF_JMP | BPF_JMP32) {
                    &[BPF_JEQ, BPF_JGT, BPF_JGE, BPF_JSET, BPF_JNE, BPF_JSGT, BPF_JSGE, BPF_JLT, BPF_JLE, BPF_JSLT, BPF_JSLE]
                } else {
                    &[BPF_ADD, BPF_SUB, BPF_MUL, BPF_DIV, BPF_OR, BPF_AND, BPF_LSH, BPF_RSH, BPF_MOD, BPF_XOR, BPF_MOV, BPF_ARSH, BPF_NEG]
                };
                if !matches!(i.code & 0xf0, BPF_CALL | BPF_EXIT | BPF_JA) || !matches!(i.class(), BPF_JMP | BPF_JMP32) {
                    i.code = (i.code & 0x0f) | ops[rng.below(ops.len() as u64) as usize];
                }
            }
            8 => {
                // Change a load/store size, or the 32/64-bit class.
                match i.class() {
                    BPF_LDX | BPF_ST | BPF_STX => i.code = (i.code & !0x18) | [BPF_B, BPF_H, BPF_W, BPF_DW][rng.below(4) as usize],
                    BPF_ALU => i.code = (i.code & !7) | BPF_ALU64,
                    BPF_ALU64 => i.code = (i.code & !7) | BPF_ALU,
                    BPF_JMP if !matches!(i.code & 0xf0, BPF_CALL | BPF_EXIT | BPF_JA) => i.code = (i.code & !7) | BPF_JMP32,
                    BPF_JMP32 => i.code = (i.code & !7) | BPF_JMP,
                    _ => {}
                }
            }
            9 => i.code ^= BPF_X,
            10 => {
                let j = rng.below(n as u64) as usize;
                q.insns.swap(k, j);
            }
            _ => {
                // Another instruction copied here.
                let j = rng.below(n as u64) as usize;
                q.insns[k] = q.insns[j];
            }
        }
    }
    q
}

struct Stats {
    mutants: u64,
    accepted: u64,
    runs: u64,
}

fn fuzz_program(p: &Program, rng: &mut Rng, mutants: u64, runs: u64, stats: &mut Stats) {
    // The model flags every pointer leak and uninitialised stack read: the guarantees of the
    // kernel's unprivileged rules (the privileged ones allow both, by design).
    let opts = VerifyOptions { max_processed_insns: 200_000, ..VerifyOptions::unprivileged() };
    // The seed itself must verify and run cleanly.
    let seed_ok = verify(p, &opts);
    if let Err(e) = &seed_ok {
        panic!("seed {} refused: {e}", p.name);
    }
    for m in 0..=mutants {
        let q = if m == 0 { p.clone() } else { mutate(p, rng) };
        stats.mutants += 1;
        if std::env::var("VERIFIER_FUZZ_TRACE").is_ok() {
            eprintln!("{} mutant {m}", p.name);
        }
        if let Err(e) = verify(&q, &opts) {
            assert!(!e.msg.contains("internal"), "verifier bug on a mutant of {}: {e}\n{:?}", p.name, q.insns);
            continue;
        }
        stats.accepted += 1;
        for _ in 0..runs {
            stats.runs += 1;
            let mut vm = Vm::new(&q, rng);
            if let Err(Violation(v)) = vm.run() {
                let diff: Vec<String> = p
                    .insns
                    .iter()
                    .zip(&q.insns)
                    .enumerate()
                    .filter(|(_, (a, b))| a != b)
                    .map(|(k, (a, b))| format!("  insn {k}: {a:?} -> {b:?}"))
                    .collect();
                panic!("verifier accepted an unsafe mutant of {}: {v}\n{}", p.name, diff.join("\n"));
            }
        }
    }
}

fn seeds() -> Vec<Program> {
    use asm::{asm, map, program};
    let maps = || {
        vec![
            map("hash", map_type::HASH, 4, 8, 16),
            map("array", map_type::ARRAY, 4, 16, 4),
            map("devmap", map_type::DEVMAP, 4, 4, 8),
            map(".bss", map_type::ARRAY, 4, 64, 1),
        ]
    };
    let srcs = [
        // Parse with a variable header length.
        "
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r4 = r2
        r4 += 34
        if r4 > r3 goto pass
        r5 = *(u16 *)(r2 + 12)
        if r5 != 8 goto pass
        r6 = *(u8 *)(r2 + 14)
        r6 &= 15
        r6 <<= 2
        r7 = r2
        r7 += 14
        r7 += r6
        r8 = r7
        r8 += 8
        if r8 > r3 goto pass
        r0 = *(u16 *)(r7 + 2)
        *(u16 *)(r7 + 6) = 0
        r0 = be16 r0
        if r0 == 53 goto drop
    pass:
        r0 = 2
        exit
    drop:
        r0 = 1
        exit",
        // Map value with variable index, spills, atomics.
        "
        r6 = r1
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r1 = *(u32 *)(r6 + 16)
        r1 &= 7
        *(u64 *)(r10 - 16) = r1
        r2 = *(u64 *)(r10 - 16)
        r3 = r0
        r3 += r2
        r4 = *(u64 *)(r3 + 0)
        r4 += 1
        *(u64 *)(r3 + 0) = r4
        r5 = 1
        atomic u64 r0 + 8 add r5
    out:
        r0 = 2
        exit",
        // Bounded loop over packet bytes with a spilled counter.
        "
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r0 = 0
        r6 = 0
    l:
        r4 = r2
        r4 += r6
        r5 = r4
        r5 += 2
        if r5 > r3 goto out
        r7 = *(u16 *)(r4 + 0)
        r0 += r7
        *(u64 *)(r10 - 8) = r6
        r6 = *(u64 *)(r10 - 8)
        r6 += 2
        if r6 < 20 goto l
    out:
        r0 &= 3
        exit",
        // adjust_head then reload, stack buffer to csum_diff, global data.
        "
        r6 = r1
        r2 = -8
        call 44
        if r0 != 0 goto out
        r2 = *(u32 *)(r6 + 0)
        r3 = *(u32 *)(r6 + 4)
        r4 = r2
        r4 += 22
        if r4 > r3 goto out
        r5 = *(u64 *)(r2 + 14)
        *(u64 *)(r10 - 8) = r5
        *(u64 *)(r10 - 16) = 0
        r1 = r10
        r1 += -16
        r2 = 16
        r3 = 0
        r4 = 0
        r5 = 0
        call 28
        r1 = map_value[3][8] ll
        *(u32 *)(r1 + 4) = r0
        r2 = *(u8 *)(r1 + 55)
    out:
        r0 = 2
        exit",
        // bpf-to-bpf call with packet and stack pointers.
        "
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        *(u64 *)(r10 - 8) = 0
        r1 = r2
        r2 = r3
        r3 = r10
        r3 += -8
        call @f
        r0 &= 3
        exit
    f:
        r4 = r1
        r4 += 16
        r0 = 0
        if r4 > r2 goto done
        r0 = *(u64 *)(r1 + 8)
        *(u64 *)(r3 + 0) = r0
        r0 = *(u32 *)(r3 + 4)
    done:
        exit",
        // Narrow spills and fills feeding a map value offset.
        "
        r6 = r1
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r1 = *(u32 *)(r6 + 12)
        r1 &= 7
        *(u16 *)(r10 - 16) = r1
        *(u8 *)(r10 - 24) = 3
        r2 = *(u16 *)(r10 - 16)
        r3 = *(u8 *)(r10 - 24)
        r2 += r3
        r0 += r2
        r0 = *(u32 *)(r0 + 0)
        w0 &= 3
        exit
    out:
        r0 = 2
        exit",
        // cpu v4: sign-extending loads and moves, signed division, bswap, gotol, JMP32.
        "
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r4 = r2
        r4 += 24
        if r4 > r3 goto out
        r5 = *(s8 *)(r2 + 3)
        r6 = (s16)r5
        r7 = 7
        r6 s/= r7
        r6 s%= r7
        r8 = *(u16 *)(r2 + 4)
        r8 = bswap16 r8
        w8 &= 15
        if w8 s> 7 goto small
        r2 += r8
        r9 = r2
        r9 += 9
        if r9 > r3 goto out
        r0 = *(u8 *)(r2 + 8)
        gotol out
    small:
        if w6 s< -3 goto out
        w6 += 3
        if w6 > 9 goto out
        r2 += r6
        r9 = r2
        r9 += 13
        if r9 > r3 goto out
        r0 = *(u8 *)(r2 + 12)
    out:
        r0 = 2
        exit",
        // Nested calls: packet and stack pointers as arguments, spills in the callee.
        "
        r6 = r1
        r2 = *(u32 *)(r6 + 0)
        r3 = *(u32 *)(r6 + 4)
        *(u64 *)(r10 - 8) = 0
        *(u64 *)(r10 - 16) = 0
        r1 = r2
        r2 = r3
        r3 = r10
        r3 += -16
        r4 = 4
        call @f
        r1 = *(u32 *)(r6 + 0)
        r2 = *(u32 *)(r6 + 4)
        r3 = r10
        r3 += -8
        r4 = 10
        call @f
        r0 = *(u64 *)(r10 - 16)
        r0 &= 3
        exit
    f:
        *(u64 *)(r10 - 8) = r3
        r5 = r1
        r5 += 16
        r0 = 0
        if r5 > r2 goto done
        r1 += r4
        r0 = *(u8 *)(r1 + 0)
        r3 = *(u64 *)(r10 - 8)
        r1 = r3
        r2 = r0
        call @g
    done:
        exit
    g:
        r2 &= 0x7f
        *(u64 *)(r1 + 0) = r2
        r0 = 1
        exit",
        // Linked scalars: a bound on a copy (and a spilled copy) bounds the original.
        "
        r6 = r1
        *(u32 *)(r10 - 4) = 0
        r2 = r10
        r2 += -4
        r1 = map[1] ll
        call 1
        if r0 == 0 goto out
        r1 = *(u32 *)(r6 + 12)
        r2 = r1
        *(u64 *)(r10 - 16) = r1
        if r2 > 12 goto out
        r3 = *(u64 *)(r10 - 16)
        r4 = r0
        r4 += r3
        r5 = *(u32 *)(r4 + 0)
        r0 += r1
        r5 = *(u8 *)(r0 + 3)
    out:
        r0 = 2
        exit",
        // Meta data.
        "
        r6 = r1
        r2 = -8
        call 54
        r2 = *(u32 *)(r6 + 8)
        r3 = *(u32 *)(r6 + 0)
        r4 = r2
        r4 += 8
        if r4 > r3 goto out
        *(u64 *)(r2 + 0) = 7
    out:
        r0 = 2
        exit",
    ];
    srcs.iter()
        .enumerate()
        .map(|(k, s)| {
            let mut p = program(asm(s), maps());
            p.name = format!("seed{k}");
            p
        })
        .collect()
}

#[test]
fn mutants_of_seeds_are_safe() {
    let mut rng = Rng(std::env::var("VERIFIER_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed_1234_abcd_ef01));
    let mut stats = Stats { mutants: 0, accepted: 0, runs: 0 };
    let n: u64 = std::env::var("VERIFIER_FUZZ_MUTANTS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500);
    for p in seeds() {
        fuzz_program(&p, &mut rng, n, 8, &mut stats);
    }
    eprintln!("seeds: {} mutants, {} accepted, {} runs", stats.mutants, stats.accepted, stats.runs);
    assert!(stats.accepted > stats.mutants / 20, "too few accepted mutants to mean anything");
}

#[test]
fn mutants_of_clang_corpus_are_safe() {
    let mut rng = Rng(std::env::var("VERIFIER_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0xc1a9_0000_0000_0001));
    let mut stats = Stats { mutants: 0, accepted: 0, runs: 0 };
    let n: u64 = std::env::var("VERIFIER_FUZZ_MUTANTS").ok().and_then(|v| v.parse().ok()).unwrap_or(150);
    for (name, src) in corpus::ALL {
        for cpu in ["v1", "v3"] {
            let Some(progs) = corpus::compile(name, src, cpu) else { return };
            for p in progs {
                fuzz_program(&p, &mut rng, n, 6, &mut stats);
            }
        }
    }
    eprintln!("clang corpus: {} mutants, {} accepted, {} runs", stats.mutants, stats.accepted, stats.runs);
}

#[test]
fn random_garbage_never_panics() {
    let mut rng = Rng(0xdead_beef_0bad_f00d);
    let maps = vec![asm::map("hash", map_type::HASH, 4, 8, 16), asm::map("a", map_type::ARRAY, 4, 16, 1)];
    for _ in 0..20_000 {
        let n = 1 + rng.below(24) as usize;
        let insns = (0..n)
            .map(|_| {
                let b = rng.next().to_le_bytes();
                // Bias towards valid classes and small fields.
                let mut i = Insn::from_le_bytes(b);
                if rng.chance(1, 2) {
                    i.off = (i.off % 8).abs();
                    i.imm %= 64;
                }
                if rng.chance(1, 4) {
                    i = Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
                }
                i
            })
            .collect();
        let mut p = asm::program(insns, maps.clone());
        p.name = "garbage".into();
        if let Err(e) = verify(&p, &VerifyOptions { max_processed_insns: 20_000, ..VerifyOptions::unprivileged() }) {
            assert!(!e.msg.contains("internal"), "verifier bug: {e}\n{:?}", p.insns);
        }
    }
}
