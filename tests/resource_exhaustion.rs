//! Resource exhaustion on the built-in lab: an empty buffer pool, a full transmit ring, a
//! full socket receive queue, a full XDP hash map. Each is a counted event (a named drop, or
//! `rx_nobuf` for frames that never entered), nothing deadlocks, and once the pressure ends
//! traffic flows again and the counters show it.

use sluice::buf::Pool;
use sluice::config::{self, Config, PortKind};
use sluice::datapath::{Datapath, Pipeline};
use sluice::napi::RunLimit;
use sluice::port::fault::{FaultConfig, FaultSide};
use sluice::rx::local::SocketId;
use sluice::stats::DropReason;
use sluice::xdp::env::SluiceEnv;
use sluice::xdp::{RunOutcome, XdpBuff, XdpMode, XdpProgram};
use sluice_ebpf::asm::*;
use sluice_ebpf::helpers::id as hid;
use sluice_ebpf::insn::*;
use sluice_ebpf::program::map_type;
use sluice_ebpf::{Interpreter, MapDef, Maps, Program};
use std::sync::Arc;
use std::time::Duration;

fn build(cfg: &Config) -> Datapath {
    let pool = Pool::new(cfg.pool_frames).unwrap();
    cfg.build(cfg.tunables(&[]).unwrap(), &pool).unwrap()
}

fn rounds(dp: &mut Datapath, n: usize, drain_sockets: bool) {
    for _ in 0..n {
        dp.round();
        if drain_sockets {
            {
                let w = dp.w();
                w.sockets.drain_all(&mut w.bufs);
            }
        }
    }
}

fn assert_clean_end(dp: &mut Datapath) {
    dp.drain();
    assert_eq!(dp.conservation(), Ok(()));
    assert_eq!(dp.in_flight(), 0);
    assert_eq!(dp.buffers_in_use(), 0, "buffer leak");
}

#[test]
fn empty_pool_counts_nobuf_and_recovers() {
    // A 512-frame pool and a UDP socket nobody reads: the socket's queue takes every buffer,
    // the generator finds the pool empty.
    let mut cfg = config::lab(Pipeline::Local);
    cfg.pool_frames = 512;
    let mut dp = build(&cfg);
    rounds(&mut dp, 200, false);
    let starved = dp.ports().next().unwrap().stats();
    assert!(starved.rx_nobuf > 0, "the generator met an empty pool");
    assert!(dp.counters().rx <= 512, "no more frames than buffers: {}", dp.counters().rx);
    assert_eq!(dp.counters().local, dp.counters().rx, "what did enter was delivered");
    assert_eq!(dp.conservation(), Ok(()), "frames that never entered are not in the ledger");
    assert_eq!(dp.round(), 0, "a starved round returns at once, no deadlock");

    // Pressure ends: the application reads its socket; traffic flows again.
    {
        let w = dp.w();
        w.sockets.drain_all(&mut w.bufs);
    }
    rounds(&mut dp, 200, true);
    assert!(dp.counters().rx > starved.rx_packets + 10_000, "traffic flows again: {}", dp.counters().rx);
    assert_eq!(dp.counters().local, dp.counters().rx);
    assert_eq!(dp.counters().total_drops(), 0, "{:?}", dp.counters().nonzero_drops());
    assert_clean_end(&mut dp);
}

#[test]
fn empty_pool_from_frames_held_on_the_wire_no_deadlock() {
    // A slow wire (every frame held 20 polls) with a pool smaller than what it holds: the
    // generator is starved every poll, yet a fixed packet count gets through in the end.
    let mut cfg = config::lab(Pipeline::L3fwd);
    cfg.pool_frames = 512;
    cfg.ports[0].gen.as_mut().unwrap().packets = Some(20_000);
    cfg.ports[0].fault = Some(FaultConfig { delay_polls: 20, side: FaultSide::Rx, ..FaultConfig::default() });
    let mut dp = build(&cfg);
    dp.run(RunLimit::default(), Duration::from_secs(3600), |_, _| {});
    let gen = dp.ports().next().unwrap().stats();
    assert!(gen.rx_nobuf > 0, "the pool ran dry");
    // An unpaced generator is held back by the pool, not made to lose packets: every one
    // enters once buffers come back.
    assert_eq!(dp.counters().rx, 20_000, "every packet got through once buffers came back");
    assert_eq!(dp.counters().tx, 20_000);
    assert_clean_end(&mut dp);
}

#[test]
fn full_tx_ring_is_tx_error_and_recovers() {
    // The sink's ring refuses part of every burst for its first 50 polls, then takes all.
    let mut cfg = config::lab(Pipeline::L3fwd);
    cfg.ports[0].gen.as_mut().unwrap().packets = Some(20_000);
    cfg.ports[1].kind = PortKind::Capture;
    cfg.ports[1].check = None;
    cfg.ports[1].fault = Some(FaultConfig { tx_full: 1.0, stop_after_polls: 50, side: FaultSide::Tx, ..FaultConfig::default() });
    let mut dp = build(&cfg);
    dp.run(RunLimit::default(), Duration::from_secs(3600), |_, _| {});
    let f = dp.ports().nth(1).unwrap().fault_stats().unwrap().tx;
    let tx_error = dp.counters().dropped(DropReason::TxError);
    assert!(tx_error > 0);
    assert_eq!(tx_error, f.tx_refused, "every refusal is a counted tx_error drop");
    assert_eq!(dp.counters().tx + tx_error, dp.counters().rx);
    // Only the first 50 polls (at most a NAPI weight each) lost anything.
    let weight = dp.net.tun.dev_weight as u64;
    assert!(tx_error <= 50 * weight, "{tx_error}");
    let wire = dp.ports().nth(1).unwrap().captured().unwrap().len() as u64;
    assert_eq!(wire, dp.counters().tx);
    assert!(wire >= 20_000 - 50 * weight, "traffic flows once the ring drains: {wire}");
    assert_clean_end(&mut dp);
}

#[test]
fn full_socket_queue_is_socket_rcvbuff_and_recovers() {
    // The lab's socket (4096 datagrams) is never read: the rest is socket_rcvbuff.
    let cfg = config::lab(Pipeline::Local);
    let mut dp = build(&cfg);
    rounds(&mut dp, 100, false);
    let sock = dp.w().sockets.socket(SocketId(0)).unwrap();
    assert_eq!(sock.received, 4096, "the queue filled up");
    assert_eq!(dp.w().sockets.queued(), 4096);
    let full = dp.counters().dropped(DropReason::SocketRcvbuff);
    assert!(full > 0);
    assert_eq!(dp.counters().rx, dp.counters().local + full);
    assert_eq!(dp.conservation(), Ok(()));

    // The application reads again: deliveries resume, no more drops.
    {
        let w = dp.w();
        w.sockets.drain_all(&mut w.bufs);
    }
    rounds(&mut dp, 300, true);
    assert!(dp.w().sockets.socket(SocketId(0)).unwrap().received > 4096 + 10_000);
    assert_eq!(dp.counters().dropped(DropReason::SocketRcvbuff), full, "no drops while the socket is read");
    assert_eq!(dp.counters().rx, dp.counters().local + full);
    assert_clean_end(&mut dp);
}

// ---------------------------------------------------------------------------------------
// A full XDP hash map
// ---------------------------------------------------------------------------------------

/// Entries of the program's hash map.
const FLOW_SLOTS: u32 = 64;
const E2BIG: i64 = 7;

/// An XDP program that inserts a new key into a 64-entry hash map per packet (the packet
/// counter) and keeps, in an array, [packets, failed updates, last update error]; it always
/// passes the packet.
fn hash_filler_program() -> Arc<Program> {
    let mut insns = vec![st(BPF_W, 10, -4, 0)];
    insns.extend(lddw_map(1, 0));
    insns.extend([
        mov64_reg(2, 10),
        alu64_imm(BPF_ADD, 2, -4),
        call(hid::MAP_LOOKUP_ELEM),
        jmp_imm(BPF_JEQ, 0, 0, 19), // no state: out
        mov64_reg(6, 0),
        ldx(BPF_DW, 7, 6, 0),
        alu64_imm(BPF_ADD, 7, 1),
        stx(BPF_DW, 6, 7, 0),
        stx(BPF_DW, 10, 7, -16), // key = packet number
        stx(BPF_DW, 10, 7, -24), // value
    ]);
    insns.extend(lddw_map(1, 1));
    insns.extend([
        mov64_reg(2, 10),
        alu64_imm(BPF_ADD, 2, -16),
        mov64_reg(3, 10),
        alu64_imm(BPF_ADD, 3, -24),
        mov64_imm(4, 0), // BPF_ANY
        call(hid::MAP_UPDATE_ELEM),
        jmp_imm(BPF_JEQ, 0, 0, 4), // success: out
        stx(BPF_DW, 6, 0, 16),     // last error
        ldx(BPF_DW, 8, 6, 8),
        alu64_imm(BPF_ADD, 8, 1),
        stx(BPF_DW, 6, 8, 8), // failures += 1
        mov64_imm(0, 2),      // out: XDP_PASS
        exit(),
    ]);
    let maps = vec![MapDef::new("state", map_type::ARRAY, 4, 24, 1), MapDef::new("flows", map_type::HASH, 8, 8, FLOW_SLOTS)];
    Arc::new(Program { name: "hash_filler".into(), section: "xdp".into(), insns, maps })
}

struct Interp(Interpreter);

impl XdpProgram for Interp {
    fn name(&self) -> String {
        "test:hash_filler".into()
    }
    fn run(&mut self, xdp: &mut XdpBuff<'_>, env: &mut SluiceEnv<'_>) -> RunOutcome {
        self.0.run(xdp, env).unwrap_or(RunOutcome { action: 0, redirect: None })
    }
}

/// [packets, failed updates, last error] from the program's state array.
fn state(maps: &Maps) -> [u64; 3] {
    let v = maps.by_name("state").unwrap().lookup(&0u32.to_le_bytes(), 0).unwrap();
    let w = |i: usize| u64::from_le_bytes(v[i * 8..i * 8 + 8].try_into().unwrap());
    [w(0), w(1), w(2)]
}

fn run_with_filler(prog: &Arc<Program>, maps: &Arc<Maps>, packets: u64) -> Datapath {
    let mut cfg = config::lab(Pipeline::L3fwd);
    cfg.ports[0].gen.as_mut().unwrap().packets = Some(packets);
    let mut dp = build(&cfg);
    dp.w().xdp.attach(0, XdpMode::Native, Box::new(Interp(Interpreter::new(prog.clone(), maps.clone()).unwrap())));
    dp.run(RunLimit::default(), Duration::from_secs(3600), |_, _| {});
    dp
}

#[test]
fn full_xdp_hash_map_returns_e2big_and_the_program_keeps_running() {
    let prog = hash_filler_program();
    let maps = Arc::new(Maps::new(&prog.maps, 1).unwrap());
    let mut dp = run_with_filler(&prog, &maps, 3000);
    let flows = maps.by_name("flows").unwrap();
    assert_eq!(flows.len(), FLOW_SLOTS as usize, "the map filled up");
    let [packets, failed, last_err] = state(&maps);
    assert_eq!(packets, 3000, "the program ran on every packet");
    assert_eq!(failed, 3000 - FLOW_SLOTS as u64);
    assert_eq!(last_err as i64, -E2BIG, "bpf_map_update_elem on a full hash map is -E2BIG, as in the kernel");
    assert_eq!(dp.counters().dropped(DropReason::XdpAborted), 0);
    assert_eq!(dp.counters().tx, 3000, "every packet passed and was forwarded");
    assert_clean_end(&mut dp);

    // Pressure ends: user space deletes the entries; the program's updates succeed again.
    for k in flows.keys() {
        flows.delete(&k).unwrap();
    }
    let mut dp = run_with_filler(&prog, &maps, 1000);
    let [packets, failed2, _] = state(&maps);
    assert_eq!(packets, 4000);
    assert_eq!(failed2 - failed, 1000 - FLOW_SLOTS as u64, "the first 64 updates of the new run succeeded");
    assert_eq!(flows.len(), FLOW_SLOTS as usize);
    assert_eq!(dp.counters().tx, 1000);
    assert_clean_end(&mut dp);
}
