//! Interpreter speed on the test objects (thread CPU time per run, so a busy machine matters
//! less). `cargo run --release -p sluice-ebpf --example interp_bench [program]`.

use sluice_ebpf::*;
use std::sync::Arc;
fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/progs/");
    let only = std::env::args().nth(1);
    for (obj, prog) in
        [("xdp_btf_maps.o", "count_proto"), ("xdp_calls.o", "calls"), ("xdp_adjust.o", "set_len_60"), ("xdp_calls.o", "frags_pass")]
    {
        if only.as_deref().is_some_and(|o| o != prog) {
            continue;
        }
        let o = Object::from_file(format!("{dir}{obj}")).unwrap();
        let p = Arc::new(o.program(prog).unwrap().clone());
        let it = Interpreter::new(p, o.maps.clone()).unwrap();
        let mut mem = LowMem::new(4096).unwrap();
        let mut pkt = vec![0u8; 60];
        pkt[12] = 8;
        pkt[14] = 0x45;
        pkt[23] = 17;
        pkt[26..30].copy_from_slice(&[10, 0, 0, 1]);
        mem.as_mut_slice()[256..316].copy_from_slice(&pkt);
        let mut env = NullEnv::new();
        let n = 2_000_000;
        let t = cpu_ns();
        for _ in 0..n {
            let mut x = XdpBuff::new(mem.as_mut_slice(), 256, 60);
            std::hint::black_box(it.run(&mut x, &mut env).unwrap());
        }
        println!("{prog}: {:.1} ns/run (thread cpu time)", (cpu_ns() - t) as f64 / n as f64);
    }
}

fn cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
