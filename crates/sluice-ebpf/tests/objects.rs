//! Loads the real clang-compiled objects in tests/progs (rebuild with tests/progs/build.sh)
//! and runs their programs in the interpreter.

use std::path::PathBuf;
use std::sync::Arc;

use sluice_ebpf::env::fib_ret;
use sluice_ebpf::insn::*;
use sluice_ebpf::maps::{BPF_ANY, BPF_F_RDONLY_PROG};
use sluice_ebpf::program::map_type;
use sluice_ebpf::{Env, Interpreter, LoadError, LoadOptions, LowMem, NullEnv, Object, RedirectTarget, RunConfig, RunOutcome, XdpBuff};

const HEADROOM: usize = 256;
const FRAME: usize = 4096;

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/progs").join(name)
}

fn load(name: &str) -> Object {
    Object::from_file(path(name)).unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

fn load_cpus(name: &str, ncpus: u32) -> Object {
    let opts = LoadOptions { ncpus, ..LoadOptions::default() };
    Object::from_file_with(path(name), &opts).unwrap()
}

struct Out {
    outcome: RunOutcome,
    packet: Vec<u8>,
    meta: Vec<u8>,
    data: usize,
}

fn run_env(o: &Object, prog: &str, pkt: &[u8], ingress: u32, rxq: u32, env: &mut dyn Env) -> Out {
    let p = o.program(prog).unwrap_or_else(|| panic!("no program {prog}"));
    let interp = Interpreter::new(Arc::new(p.clone()), o.maps.clone()).unwrap();
    let mut mem = LowMem::new(FRAME).unwrap();
    let frame = mem.as_mut_slice();
    frame[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
    let mut xdp = XdpBuff::new(frame, HEADROOM, pkt.len());
    xdp.ingress_ifindex = ingress;
    xdp.rx_queue_index = rxq;
    let outcome = interp.run(&mut xdp, env).unwrap_or_else(|e| panic!("{prog}: {e}"));
    Out { outcome, packet: xdp.packet().to_vec(), meta: xdp.meta().to_vec(), data: xdp.data }
}

fn run(o: &Object, prog: &str, pkt: &[u8]) -> Out {
    run_env(o, prog, pkt, 3, 1, &mut NullEnv::new())
}

/// Ethernet + IPv4 + UDP, `total` bytes in all.
fn udp4(src: [u8; 4], dst: [u8; 4], total: usize) -> Vec<u8> {
    let mut p = vec![0u8; total.max(42)];
    p[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    p[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (p.len() - 14) as u16;
    p[14] = 0x45;
    p[16..18].copy_from_slice(&ip_len.to_be_bytes());
    p[22] = 64;
    p[23] = 17;
    p[26..30].copy_from_slice(&src);
    p[30..34].copy_from_slice(&dst);
    p[34..36].copy_from_slice(&1234u16.to_be_bytes());
    p[36..38].copy_from_slice(&53u16.to_be_bytes());
    p[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    p
}

fn u64_at(v: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(v[off..off + 8].try_into().unwrap())
}

fn u32_at(v: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(v[off..off + 4].try_into().unwrap())
}

#[test]
fn btf_maps_counters_hash_percpu_lru() {
    let o = load_cpus("xdp_btf_maps.o", 2);
    let m = &o.maps;
    for name in ["proto_count", "src_count", "pcpu_pkts", "lru_seen"] {
        assert!(m.by_name(name).is_some(), "map {name}");
    }
    assert_eq!(m.by_name("src_count").unwrap().map_type(), map_type::HASH);
    assert_eq!(m.by_name("lru_seen").unwrap().map_type(), map_type::LRU_HASH);
    let p = o.program("count_proto").unwrap();
    assert_eq!(p.section, "xdp");
    assert!(p.is_xdp());

    let a = udp4([10, 0, 0, 1], [10, 0, 0, 9], 60);
    let b = udp4([10, 0, 0, 2], [10, 0, 0, 9], 60);
    for pkt in [&a, &a, &b] {
        let out = run_env(&o, "count_proto", pkt, 3, 0, &mut NullEnv::on_cpu(1));
        assert_eq!(out.outcome.action, XDP_PASS);
    }
    let proto = m.by_name("proto_count").unwrap();
    assert_eq!(u64_at(&proto.lookup(&17u32.to_le_bytes(), 0).unwrap(), 0), 3);
    let src = m.by_name("src_count").unwrap();
    assert_eq!(u64_at(&src.lookup(&[10, 0, 0, 1], 0).unwrap(), 0), 2);
    assert_eq!(u64_at(&src.lookup(&[10, 0, 0, 2], 0).unwrap(), 0), 1);
    let pcpu = m.by_name("pcpu_pkts").unwrap().lookup_percpu(&0u32.to_le_bytes()).unwrap();
    assert_eq!((u64_at(&pcpu[0], 0), u64_at(&pcpu[1], 0)), (0, 3));

    // Non-IP passes, a runt is dropped (still counted per CPU).
    let mut arp = a.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(run(&o, "count_proto", &arp).outcome.action, XDP_PASS);
    assert_eq!(run(&o, "count_proto", &a[..10]).outcome.action, XDP_DROP);

    // The LRU map keeps at most 4 sources.
    for i in 0..6u8 {
        run(&o, "count_proto", &udp4([192, 168, 0, i], [10, 0, 0, 9], 60));
    }
    let lru = m.by_name("lru_seen").unwrap();
    assert_eq!(lru.len(), 4);
    assert_eq!(src.len(), 8);
    assert_eq!(lru.lookup(&[192, 168, 0, 5], 0), Some(1u32.to_le_bytes().to_vec()));
}

#[test]
fn legacy_maps_section() {
    let o = load("xdp_legacy_map.o");
    let cfg = o.maps.by_name("verdict_cfg").unwrap();
    assert_eq!(cfg.def().key_size, 4);
    assert_eq!(cfg.map_type(), map_type::HASH);
    let counts = o.maps.by_name("action_count").unwrap();
    assert_eq!(counts.def().max_entries, 5);

    cfg.update(&3u32.to_le_bytes(), &XDP_DROP.to_le_bytes(), BPF_ANY).unwrap();
    cfg.update(&5u32.to_le_bytes(), &9u32.to_le_bytes(), BPF_ANY).unwrap();
    let pkt = udp4([1, 2, 3, 4], [5, 6, 7, 8], 64);
    assert_eq!(run_env(&o, "legacy", &pkt, 3, 0, &mut NullEnv::new()).outcome.action, XDP_DROP);
    assert_eq!(run_env(&o, "legacy", &pkt, 4, 0, &mut NullEnv::new()).outcome.action, XDP_PASS);
    assert_eq!(run_env(&o, "legacy", &pkt, 5, 0, &mut NullEnv::new()).outcome.action, XDP_PASS);
    assert_eq!(u64_at(&counts.lookup(&1u32.to_le_bytes(), 0).unwrap(), 0), 1);
    assert_eq!(u64_at(&counts.lookup(&2u32.to_le_bytes(), 0).unwrap(), 0), 2);
}

#[test]
fn global_data_sections() {
    let o = load("xdp_globals.o");
    let rodata = o.maps.by_name(".rodata").unwrap();
    let data = o.maps.by_name(".data").unwrap();
    let bss = o.maps.by_name(".bss").unwrap();
    assert_eq!(rodata.def().flags & BPF_F_RDONLY_PROG, BPF_F_RDONLY_PROG);
    assert_eq!(rodata.def().max_entries, 1);
    let k0 = 0u32.to_le_bytes();
    // Initial contents from the ELF.
    let ro = rodata.lookup(&k0, 0).unwrap();
    assert_eq!(u32_at(&ro, 0), 9, "drop_port");
    assert_eq!(ro[4], 1, "verbose");
    let d = data.lookup(&k0, 0).unwrap();
    assert_eq!((u64_at(&d, 0), u32_at(&d, 8)), (100, 0xfeedbeef));
    assert_eq!(bss.lookup(&k0, 0).unwrap(), vec![0; 12]);

    let mut env = NullEnv::new();
    let out = run_env(&o, "globals", &[0xaa; 60], 1, 0, &mut env);
    assert_eq!(out.outcome.action, XDP_PASS);
    assert_eq!(env.traces, vec!["len 60 magic feedbeef port 9".to_owned()]);
    assert_eq!(run(&o, "globals", &[0xaa; 9]).outcome.action, XDP_DROP);
    let d = data.lookup(&k0, 0).unwrap();
    assert_eq!(u64_at(&d, 0), 102);
    let b = bss.lookup(&k0, 0).unwrap();
    assert_eq!((u64_at(&b, 0), u32_at(&b, 8)), (69, 9));

    // Userspace may set .rodata before running (like a skeleton's rodata): drop 60-byte
    // packets, quietly.
    let mut ro = ro.clone();
    ro[0..4].copy_from_slice(&60u32.to_le_bytes());
    ro[4] = 0;
    rodata.update(&k0, &ro, BPF_ANY).unwrap();
    let mut env = NullEnv::new();
    assert_eq!(run_env(&o, "globals", &[0; 60], 1, 0, &mut env).outcome.action, XDP_DROP);
    assert!(env.traces.is_empty());
}

fn mix(a: u64, b: u64) -> u64 {
    a.wrapping_mul(31) ^ (b + 7)
}

#[test]
fn bpf_to_bpf_calls_and_loops() {
    let o = load("xdp_calls.o");
    assert_eq!(o.program_names(), vec!["calls", "always_tx", "frags_pass"]);
    assert_eq!(o.program("").unwrap().name, "calls");
    assert_eq!(o.program("xdp").unwrap().name, "calls");
    assert_eq!(o.program("xdp.frags").unwrap().name, "frags_pass");
    assert!(o.program("nope").is_none());
    // Sub-programs are linked after the entry and calls are relative.
    let p = o.program("calls").unwrap();
    let calls: Vec<usize> = p
        .insns
        .iter()
        .enumerate()
        .filter(|(_, i)| i.code == (BPF_JMP | BPF_CALL) && i.src == BPF_PSEUDO_CALL)
        .map(|(pc, i)| (pc as i64 + 1 + i.imm as i64) as usize)
        .collect();
    assert!(calls.len() >= 4);
    let entry_len = 22;
    assert!(calls.iter().all(|&t| t >= entry_len && t < p.insns.len()));

    let results = o.maps.by_name("results").unwrap();
    let pkt: Vec<u8> = (0..100).collect();
    assert_eq!(run(&o, "calls", &pkt).outcome.action, XDP_PASS);
    let r0 = results.lookup(&0u32.to_le_bytes(), 0).unwrap();
    let r1 = results.lookup(&1u32.to_le_bytes(), 0).unwrap();
    assert_eq!(u64_at(&r0, 0), mix((0..16).sum(), 0));
    assert_eq!(u64_at(&r1, 0), mix((0..64).sum(), 1));
    // A 10-byte packet: the loops stop at the end of the packet.
    assert_eq!(run(&o, "calls", &pkt[..10]).outcome.action, XDP_DROP);
    let r1 = results.lookup(&1u32.to_le_bytes(), 0).unwrap();
    assert_eq!(u64_at(&r1, 0), mix(45, 1));

    assert_eq!(run(&o, "always_tx", &pkt).outcome.action, XDP_TX);
    assert_eq!(u64_at(&results.lookup(&2u32.to_le_bytes(), 0).unwrap(), 0), mix(42, 2));
    assert_eq!(run(&o, "frags_pass", &pkt).outcome.action, XDP_PASS);
}

fn tagged_frame() -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&[0xd0; 6]);
    p.extend_from_slice(&[0x50; 6]);
    p.extend_from_slice(&[0x88, 0xb5, 0x00, 0x07, 0x08, 0x00]);
    p.extend((0..46).map(|i| i as u8));
    p
}

#[test]
fn adjust_head_meta_tail() {
    let o = load("xdp_adjust.o");
    let f = tagged_frame();
    let out = run(&o, "pop_tag", &f);
    assert_eq!(out.outcome.action, XDP_PASS);
    assert_eq!(out.data, HEADROOM + 4);
    assert_eq!(out.packet.len(), f.len() - 4);
    assert_eq!(&out.packet[..12], &f[..12]);
    assert_eq!(&out.packet[12..14], &[0x08, 0x00]);
    assert_eq!(&out.packet[14..], &f[18..]);
    assert_eq!(out.meta, 0xabcd_0007u32.to_le_bytes().to_vec());

    // Untagged frames pass untouched.
    let plain = udp4([1, 1, 1, 1], [2, 2, 2, 2], 60);
    let out = run(&o, "pop_tag", &plain);
    assert_eq!((out.outcome.action, out.packet.clone()), (XDP_PASS, plain.clone()));

    let out = run(&o, "push_tag", &plain);
    assert_eq!(out.outcome.action, XDP_TX);
    assert_eq!(out.data, HEADROOM - 4);
    assert_eq!(&out.packet[..12], &plain[..12]);
    assert_eq!(&out.packet[12..16], &[0x88, 0xb5, 0x00, 0x07]);
    assert_eq!(&out.packet[16..], &plain[12..]);

    let long: Vec<u8> = (0..100).collect();
    let out = run(&o, "set_len_60", &long);
    assert_eq!((out.outcome.action, out.packet.as_slice()), (XDP_PASS, &long[..60]));
    let out = run(&o, "set_len_60", &long[..20]);
    assert_eq!(out.packet.len(), 60);
    assert_eq!(&out.packet[..20], &long[..20]);
    assert!(out.packet[20..].iter().all(|&b| b == 0));
}

struct FibEnv(NullEnv);

impl Env for FibEnv {
    fn ktime_ns(&mut self) -> u64 {
        self.0.ktime_ns()
    }
    fn cpu_id(&mut self) -> u32 {
        0
    }
    fn prandom_u32(&mut self) -> u32 {
        4
    }
    fn trace(&mut self, msg: &str) {
        self.0.trace(msg)
    }
    fn fib_lookup(&mut self, params: &mut [u8; 64], flags: u32) -> i64 {
        assert_eq!(flags, 0);
        assert_eq!(params[0], 2, "family AF_INET");
        assert_eq!(u32::from_le_bytes(params[8..12].try_into().unwrap()), 3, "ifindex");
        assert_eq!(&params[32..36], &[10, 0, 0, 1], "ipv4_dst");
        params[8..12].copy_from_slice(&9u32.to_le_bytes());
        params[58..64].copy_from_slice(&[0xee; 6]);
        fib_ret::SUCCESS
    }
}

#[test]
fn redirects_and_fib() {
    let o = load("xdp_redirect.o");
    let pkt = udp4([1, 1, 1, 1], [2, 2, 2, 2], 60);
    let tx = o.maps.by_name("tx_ports").unwrap();
    let out = run_env(&o, "to_port", &pkt, 3, 0, &mut NullEnv::new());
    assert_eq!((out.outcome.action, out.outcome.redirect), (XDP_DROP, None));
    let mut v = [0u8; 8];
    v[..4].copy_from_slice(&7u32.to_le_bytes());
    tx.update(&3u32.to_le_bytes(), &v, BPF_ANY).unwrap();
    let out = run_env(&o, "to_port", &pkt, 3, 0, &mut NullEnv::new());
    assert_eq!(out.outcome.action, XDP_REDIRECT);
    assert_eq!(out.outcome.redirect, Some(RedirectTarget::Ifindex(7)));

    let out = run_env(&o, "to_hash_port", &pkt, 300, 0, &mut NullEnv::new());
    assert_eq!((out.outcome.action, out.outcome.redirect), (XDP_PASS, None));
    o.maps.by_name("tx_hash").unwrap().update(&300u32.to_le_bytes(), &8u32.to_le_bytes(), BPF_ANY).unwrap();
    let out = run_env(&o, "to_hash_port", &pkt, 300, 0, &mut NullEnv::new());
    assert_eq!(out.outcome.redirect, Some(RedirectTarget::Ifindex(8)));

    let cpus = o.maps.by_name("cpus").unwrap();
    let mut q = [0u8; 8];
    q[..4].copy_from_slice(&256u32.to_le_bytes());
    cpus.update(&2u32.to_le_bytes(), &q, BPF_ANY).unwrap();
    let out = run_env(&o, "to_cpu", &pkt, 3, 2, &mut NullEnv::new());
    assert_eq!(out.outcome.redirect, Some(RedirectTarget::Cpu(2)));
    let out = run_env(&o, "to_cpu", &pkt, 3, 1, &mut NullEnv::new());
    assert_eq!((out.outcome.action, out.outcome.redirect), (XDP_PASS, None));

    let xsks = o.maps.by_name("xsks").unwrap();
    xsks.update(&1u32.to_le_bytes(), &42u32.to_le_bytes(), BPF_ANY).unwrap();
    let out = run_env(&o, "to_xsk", &pkt, 3, 1, &mut NullEnv::new());
    assert_eq!(out.outcome.redirect, Some(RedirectTarget::Xsk(42)));
    let out = run_env(&o, "to_xsk", &pkt, 3, 0, &mut NullEnv::new());
    assert_eq!((out.outcome.action, out.outcome.redirect), (XDP_PASS, None));

    let out = run_env(&o, "to_ifindex", &pkt, 3, 0, &mut NullEnv::new());
    assert_eq!(out.outcome.redirect, Some(RedirectTarget::Ifindex(4)));

    // fib_lookup: the default env answers NOT_FWDED; a routing env sends it to ifindex 9.
    assert_eq!(run(&o, "fib", &pkt).outcome.action, XDP_PASS);
    let out = run_env(&o, "fib", &pkt, 3, 0, &mut FibEnv(NullEnv::new()));
    assert_eq!(out.outcome.redirect, Some(RedirectTarget::Ifindex(9)));
}

#[test]
fn map_dump_serializes() {
    let o = load("xdp_btf_maps.o");
    run(&o, "count_proto", &udp4([10, 0, 0, 1], [10, 0, 0, 2], 60));
    let dump = o.maps.dump();
    let json = serde_json::to_string(&dump).unwrap();
    let back: Vec<sluice_ebpf::MapDump> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, dump);
    let src = dump.iter().find(|d| d.name == "src_count").unwrap();
    assert_eq!(src.type_name, "hash");
    assert_eq!(src.entries.len(), 1);
    assert_eq!(src.entries[0].key, vec![10, 0, 0, 1]);
    let pc = dump.iter().find(|d| d.name == "pcpu_pkts").unwrap();
    assert_eq!(pc.entries[0].values.as_ref().unwrap().len(), 1);
}

#[test]
fn ringbuf_reserve_submit_object() {
    // bpf_ringbuf_reserve / submit: the record (the ingress ifindex) reaches a consumer.
    let o = load("xdp_unsupported_map.o");
    let ring = o.maps.by_name("events").unwrap();
    ring.attach_consumer();
    let out = run_env(&o, "ringbuf_user", &udp4([10, 0, 0, 1], [10, 0, 0, 2], 60), 7, 0, &mut NullEnv::new());
    assert_eq!(out.outcome.action, 2);
    let ev = ring.take_events();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].data, 7u32.to_le_bytes());
}

#[test]
fn unloadable_inputs_are_named() {
    assert!(matches!(Object::from_file(path("does-not-exist.o")), Err(LoadError::Io { .. })));
    assert!(Object::from_bytes(b"not an elf").is_err());
    assert!(Object::from_bytes(&[]).is_err());
}

/// Truncated and bit-flipped objects must be refused or load into something that runs without
/// crashing the host.
#[test]
fn malformed_objects_never_crash() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut mem = LowMem::new(FRAME).unwrap();
    let pkt = udp4([1, 2, 3, 4], [5, 6, 7, 8], 80);
    let mut loaded = 0;
    for name in ["xdp_adjust.o", "xdp_btf_maps.o", "xdp_calls.o", "xdp_globals.o", "xdp_legacy_map.o", "xdp_redirect.o"] {
        let orig = std::fs::read(path(name)).unwrap();
        let mut variants: Vec<Vec<u8>> = Vec::new();
        for cut in [1, 16, 63, 64, 100, orig.len() / 3, orig.len() / 2, orig.len() - 1] {
            variants.push(orig[..cut.min(orig.len())].to_vec());
        }
        for _ in 0..150 {
            let mut v = orig.clone();
            for _ in 0..(1 + rnd() % 8) {
                let i = (rnd() as usize) % v.len();
                v[i] ^= 1 << (rnd() % 8);
            }
            variants.push(v);
        }
        for v in variants {
            let Ok(o) = Object::from_bytes(&v) else {
                continue;
            };
            loaded += 1;
            for p in &o.programs {
                let Ok(interp) = Interpreter::with_config(
                    Arc::new(p.clone()),
                    o.maps.clone(),
                    RunConfig { insn_budget: 100_000, ..RunConfig::default() },
                ) else {
                    continue;
                };
                let frame = mem.as_mut_slice();
                frame[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(&pkt);
                let mut xdp = XdpBuff::new(frame, HEADROOM, pkt.len());
                let _ = interp.run(&mut xdp, &mut NullEnv::new());
            }
        }
    }
    assert!(loaded > 0, "some flipped objects still load (flips in debug info)");
}

/// Two workers share the maps: atomic adds on an ARRAY value are exact, per-CPU values are
/// separate, hash/LRU updates under contention stay consistent.
#[test]
fn maps_shared_between_threads() {
    let o = load_cpus("xdp_btf_maps.o", 2);
    let p = Arc::new(o.program("count_proto").unwrap().clone());
    let interp = Arc::new(Interpreter::new(p, o.maps.clone()).unwrap());
    const N: usize = 20_000;
    let handles: Vec<_> = (0..2u32)
        .map(|cpu| {
            let interp = interp.clone();
            std::thread::spawn(move || {
                let mut mem = LowMem::new(FRAME).unwrap();
                let mut env = NullEnv::on_cpu(cpu);
                for i in 0..N {
                    let pkt = udp4([10, cpu as u8, (i % 7) as u8, 1], [10, 0, 0, 9], 60);
                    let frame = mem.as_mut_slice();
                    frame[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(&pkt);
                    let mut xdp = XdpBuff::new(frame, HEADROOM, pkt.len());
                    let out = interp.run(&mut xdp, &mut env).unwrap();
                    assert_eq!(out.action, XDP_PASS);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let proto = o.maps.by_name("proto_count").unwrap();
    assert_eq!(u64_at(&proto.lookup(&17u32.to_le_bytes(), 0).unwrap(), 0), 2 * N as u64);
    let pcpu = o.maps.by_name("pcpu_pkts").unwrap().lookup_percpu(&0u32.to_le_bytes()).unwrap();
    assert_eq!((u64_at(&pcpu[0], 0), u64_at(&pcpu[1], 0)), (N as u64, N as u64));
    let src = o.maps.by_name("src_count").unwrap();
    assert_eq!(src.len(), 14);
    let total: u64 = src.keys().iter().map(|k| u64_at(&src.lookup(k, 0).unwrap(), 0)).sum();
    // A source seen for the first time by both workers at once loses one count (the second
    // BPF_NOEXIST insert fails), exactly as in the kernel; sources are per worker here.
    assert_eq!(total, 2 * N as u64);
    assert_eq!(o.maps.by_name("lru_seen").unwrap().len(), 4);
}

/// bpf/obj/xdp_rodata_config.o reads two `const volatile` settings as a stack index and a
/// packet offset: the kernel loads it only because libbpf freezes `.rodata` and the
/// verifier reads frozen read-only maps as constants. So does sluice: refused while
/// `.rodata` is writable, accepted once frozen, and a setting that makes the read fall off
/// the stack is refused at the load it is frozen for.
#[test]
fn rodata_settings_are_constants_to_the_verifier_once_frozen() {
    use sluice_ebpf::verifier::{verify, verify_with_frozen, VerifyOptions};
    let opts = VerifyOptions::default();
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bpf/obj/xdp_rodata_config.o");
    let load = || Object::from_file(&file).unwrap();
    let obj = load();
    let prog = obj.program("xdp_rodata_config").unwrap().clone();
    let e = verify(&prog, &opts).unwrap_err().to_string();
    assert!(e.contains("unbounded"), "{e}");
    assert_eq!(obj.maps.frozen_values().iter().flatten().count(), 0, "nothing is frozen before the load");
    let frozen = obj.freeze_rodata();
    let rodata = obj.maps.index_of(".rodata").unwrap();
    assert_eq!(frozen[rodata].as_deref(), Some(&[1, 0, 0, 0, 14, 0, 0, 0][..]), "verdict_idx 1, peek_off 14");
    assert!(frozen.iter().enumerate().all(|(i, v)| v.is_some() == (i == rodata)), "only .rodata is frozen");
    assert!(obj.maps.get(rodata).unwrap().update(&0u32.to_le_bytes(), &[0; 8], BPF_ANY).is_err(), "frozen for user space");
    let verified = verify_with_frozen(&prog, &opts, &frozen).expect("constants make it safe");
    // The JIT compiles it only for maps holding those values, frozen: its safety rests on them.
    use sluice_ebpf::jit::Jit;
    Jit::compile_verified(&verified, obj.maps.clone()).expect("the maps it was verified with");
    let other = load();
    assert!(Jit::compile_verified(&verified, other.maps.clone()).is_err(), "not frozen");
    other.maps.get(rodata).unwrap().update(&0u32.to_le_bytes(), &[1, 0, 0, 0, 0, 0, 1, 0], BPF_ANY).unwrap();
    other.freeze_rodata();
    assert!(Jit::compile_verified(&verified, other.maps.clone()).is_err(), "frozen with another peek_off");
    assert!(sluice_ebpf::load_and_verify(&std::fs::read(&file).unwrap()).unwrap().iter().all(|(_, r)| r.is_ok()));

    // verdict_idx 4 reads past the 4-entry table, off the top of the stack.
    let obj = load();
    obj.maps.get(rodata).unwrap().update(&0u32.to_le_bytes(), &[4, 0, 0, 0, 14, 0, 0, 0], BPF_ANY).unwrap();
    let frozen = obj.freeze_rodata();
    assert!(verify_with_frozen(&prog, &opts, &frozen).is_err(), "an index past the table is refused");
}
