//! The fuzz targets' committed inputs, replayed in the normal test suite: every file of
//! fuzz/corpus/TARGET (seeds and a few inputs the fuzzer found interesting) and of
//! fuzz/regressions/TARGET (inputs that once crashed a target) goes through the same
//! function the libFuzzer binary runs (fuzz/src/harness.rs). A crash the fuzzer finds
//! becomes a regression test by committing its input under fuzz/regressions/TARGET/.
//!
//! `mutate` (ignored; scripts/acceptance/fuzz.sh runs it) is a coverage-less mutation
//! fuzzer over the same corpora, for CI where building the libFuzzer binaries (nightly,
//! instrumented) would not fit the time budget: it reuses the release test build.
//!
//! `SLUICE_WRITE_SEEDS=1 cargo test --release --test fuzz_corpus -- --ignored write_seeds`
//! regenerates the seed files (named `seed-*`) from the repository's packets, objects and
//! configs and from the test harness's frame builders.

mod common;
#[path = "../fuzz/src/harness.rs"]
mod harness;

use common::*;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `target` on every committed input; returns how many there were.
fn replay(target: &str, run: fn(&[u8])) -> usize {
    let mut n = 0;
    for dir in ["fuzz/corpus", "fuzz/regressions"] {
        let dir = root().join(dir).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<PathBuf> = entries.map(|e| e.expect("corpus entry").path()).collect();
        files.sort();
        for f in files {
            let bytes = std::fs::read(&f).expect("corpus file");
            eprintln!("{target}: {}", f.display());
            run(&bytes);
            n += 1;
        }
    }
    n
}

fn target_fn(target: &str) -> fn(&[u8]) {
    match target {
        "wire" => harness::wire,
        "rx_packet" => harness::rx_packet,
        "rx_list" => harness::rx_list,
        "config" => harness::config,
        "pcap" => harness::pcap,
        "ebpf_loader" => harness::ebpf_loader,
        other => panic!("unknown fuzz target `{other}`"),
    }
}

macro_rules! replay_test {
    ($name:ident) => {
        #[test]
        fn $name() {
            let n = replay(stringify!($name), harness::$name);
            assert!(n >= 5, "fuzz/corpus/{} holds its seeds ({n} inputs found)", stringify!($name));
        }
    };
}

replay_test!(wire);
replay_test!(rx_packet);
replay_test!(rx_list);
replay_test!(config);
replay_test!(pcap);
replay_test!(ebpf_loader);

/// The harness's own properties hold on hand-made inputs (so a harness that checks
/// nothing cannot pass): frames split and join back, and a malformed list still runs.
#[test]
fn frame_list_format_round_trips() {
    let frames = vec![udp4(SRC_V4, DST1_V4, 1, 2).build(), vec![], vec![1, 2, 3]];
    let joined = harness::join_frames(0, &frames);
    assert_eq!(harness::split_frames(&joined[1..]), frames);
    harness::rx_list(&joined);
}

// ---------------------------------------------------------------------------------------
// Coverage-less mutation fuzzing (CI)
// ---------------------------------------------------------------------------------------

/// xorshift64*: a small deterministic generator (the seed is printed, so a run repeats).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to four of: flip a bit, write a random or boundary byte, write a boundary 16-bit
/// word, insert or delete a range, duplicate a range, truncate, splice with another input.
fn mutate_input(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    const BOUNDARY: [u8; 6] = [0, 1, 0x7f, 0x80, 0xfe, 0xff];
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        let at = rng.below(len);
        match rng.below(8) {
            0 if len > 0 => input[at] ^= 1 << rng.below(8),
            1 if len > 0 => input[at] = rng.next() as u8,
            2 if len > 0 => input[at] = BOUNDARY[rng.below(BOUNDARY.len())],
            3 if len > 1 => {
                let w: u16 = [0, 1, 0x7fff, 0x8000, 0xffff, len as u16][rng.below(6)];
                input[at.min(len - 2)..at.min(len - 2) + 2].copy_from_slice(&w.to_be_bytes());
            }
            4 => {
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                input.splice(at..at, bytes);
            }
            5 if len > 0 => {
                let n = 1 + rng.below((len - at).min(64));
                input.drain(at..at + n);
            }
            6 if len > 0 => {
                let n = 1 + rng.below((len - at).min(64));
                let chunk = input[at..at + n].to_vec();
                let to = rng.below(len);
                input.splice(to..to, chunk);
            }
            _ => {
                let other = &corpus[rng.below(corpus.len())];
                if rng.below(2) == 0 {
                    input.truncate(at);
                }
                let from = rng.below(other.len());
                input.extend_from_slice(&other[from..]);
            }
        }
    }
}

/// `SLUICE_FUZZ_TARGET=T SLUICE_FUZZ_SECONDS=S [SLUICE_FUZZ_SEED=N] cargo test --release
/// --test fuzz_corpus -- --ignored mutate --nocapture`: mutates the committed inputs of T
/// for S seconds; a panicking input is written to target/fuzz-mutate/ and fails the test.
#[test]
#[ignore = "a timed fuzz run (scripts/acceptance/fuzz.sh)"]
fn mutate() {
    let Ok(target) = std::env::var("SLUICE_FUZZ_TARGET") else { return };
    let seconds: u64 = std::env::var("SLUICE_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let seed: u64 = std::env::var("SLUICE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64))
        | 1;
    let run = target_fn(&target);
    println!("fuzz (mutation) {target}: seed {seed}");
    let mut corpus = Vec::new();
    for dir in ["fuzz/corpus", "fuzz/regressions"] {
        if let Ok(entries) = std::fs::read_dir(root().join(dir).join(&target)) {
            for e in entries {
                corpus.push(std::fs::read(e.expect("entry").path()).expect("corpus file"));
            }
        }
    }
    assert!(!corpus.is_empty(), "no corpus for {target}");
    let max_len = corpus.iter().map(Vec::len).max().unwrap_or(0).max(4096) * 2;
    // SLUICE_FUZZ_CAUGHT_PANICS=collect: also note panics the code under test catches
    // (the loader's aya-obj panics), one input per panic site, in target/fuzz-mutate/.
    let collect = std::env::var("SLUICE_FUZZ_CAUGHT_PANICS").as_deref() == Ok("collect");
    static CAUGHT: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    if collect {
        std::panic::set_hook(Box::new(|info| {
            let site = info.location().map_or("unknown".into(), |l| format!("{}:{}", l.file(), l.line()));
            *CAUGHT.lock().unwrap_or_else(|e| e.into_inner()) = Some(site);
        }));
    }
    let mut sites = std::collections::BTreeSet::new();
    let mut rng = Rng(seed);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let mut executions = 0u64;
    // Each input is written here before it runs: an abort (a failed allocation, a stack
    // overflow) cannot be caught, and this file then holds the input that caused it.
    // In the temporary directory (scripts/acceptance/fuzz.sh points it at /dev/shm): a
    // rewrite on ext4 costs ~2 ms, a hundred runs of the fast targets.
    let out_dir = root().join("target/fuzz-mutate");
    std::fs::create_dir_all(&out_dir).expect("output dir");
    let current = std::env::temp_dir().join(format!("sluice-fuzz-current-{target}-{}", std::process::id()));
    println!("fuzz (mutation) {target}: each input is written to {} before it runs", current.display());
    // A hang is a finding too: a watchdog saves the input that ran longer than
    // SLUICE_FUZZ_INPUT_TIMEOUT seconds (default 10) and fails the run, instead of the run
    // stalling until CI's limit (libFuzzer's -timeout).
    let timeout_s: u64 = std::env::var("SLUICE_FUZZ_INPUT_TIMEOUT").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let started = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let epoch = std::time::Instant::now();
    {
        let (started, current, out_dir, target) = (started.clone(), current.clone(), out_dir.clone(), target.clone());
        std::thread::spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let t = started.load(std::sync::atomic::Ordering::Acquire);
            if t != 0 && epoch.elapsed().as_millis() as u64 > t + timeout_s * 1000 {
                let path = out_dir.join(format!("timeout-{target}-{seed}"));
                let _ = std::fs::copy(&current, &path);
                eprintln!("fuzz {target}: an input ran over {timeout_s} s (a hang): saved as {}", path.display());
                std::process::exit(1);
            }
        });
    }
    while std::time::Instant::now() < deadline {
        let mut input = corpus[rng.below(corpus.len())].clone();
        mutate_input(&mut rng, &mut input, &corpus);
        input.truncate(max_len);
        std::fs::write(&current, &input).expect("current input");
        started.store(epoch.elapsed().as_millis() as u64 + 1, std::sync::atomic::Ordering::Release);
        if let Err(p) = std::panic::catch_unwind(|| run(&input)) {
            let path = out_dir.join(format!("crash-{target}-{seed}-{executions}"));
            std::fs::write(&path, &input).expect("crash file");
            std::panic::resume_unwind(Box::new(format!("{target}: input {} panicked: {:?}", path.display(), p.downcast_ref::<String>())));
        }
        if let Some(site) = CAUGHT.lock().unwrap_or_else(|e| e.into_inner()).take() {
            if sites.insert(site.clone()) {
                let name: String = site.rsplit('/').take(2).collect::<Vec<_>>().join("-").replace(':', "-");
                std::fs::write(out_dir.join(format!("caught-{target}-{name}")), &input).expect("write");
                println!("caught panic at {site}");
            }
        }
        executions += 1;
    }
    started.store(0, std::sync::atomic::Ordering::Release);
    let _ = std::fs::remove_file(&current);
    println!("fuzz (mutation, no coverage) {target}: {executions} executions in {seconds}s, seed {seed}, 0 crashes");
}

// ---------------------------------------------------------------------------------------
// Seed corpora
// ---------------------------------------------------------------------------------------

fn write_seed(target: &str, name: &str, bytes: &[u8]) {
    let dir = root().join("fuzz/corpus").join(target);
    std::fs::create_dir_all(&dir).expect("corpus dir");
    std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("seed");
}

fn files_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// Frames from the harness builders: one of each kind the router handles differently.
fn builder_frames() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("udp4-fwd", udp4(SRC_V4, DST1_V4, 1000, 2000).build()),
        ("udp4-mtu", udp4(SRC_V4, DST2_V4, 1000, 2000).len(1400).build()),
        ("udp4-local", udp4(SRC_V4, IN_V4, 1000, 5001).build()),
        ("udp4-ttl1", udp4(SRC_V4, DST1_V4, 1, 2).ttl(1).build()),
        ("udp4-noroute", udp4(SRC_V4, NOROUTE_V4, 1, 2).build()),
        ("udp4-unreach", udp4(SRC_V4, UNREACH_V4, 1, 2).build()),
        ("udp4-vlan", udp4(SRC_V4, DST1_V4, 1, 2).vlan(IN_VLAN).build()),
        ("tcp4-fwd", tcp4(SRC_V4, DST1_V4, 40000, 80).build()),
        ("ping4-local", ping4(SRC_V4, IN_V4, 7, 1).build()),
        ("udp6-fwd", udp6(SRC_V6, DST1_V6, 1000, 2000).build()),
        ("udp6-local", udp6(SRC_V6, IN_V6, 1000, 5001).build()),
        ("udp6-unresolved", udp6(SRC_V6, UNRESOLVED_V6, 1, 2).build()),
        ("tcp6-fwd", tcp6(SRC_V6, DST2_V6, 40000, 443).build()),
        ("ping6-local", ping6(SRC_V6, IN_V6, 7, 1).build()),
        ("arp-request", arp_request(MAC_HOST, HOST_V4, IN_V4)),
        ("ns", neighbour_solicit(MAC_HOST, HOST_V6, IN_V6)),
        ("udp4-frag", as_ipv4_fragment(udp4(SRC_V4, DST1_V4, 1, 2).build(), 0, true)),
        ("udp4-options", with_ipv4_options(udp4(SRC_V4, IN_V4, 1, 5001).build(), &[1, 1, 1, 0])),
        ("udp6-frag", with_ipv6_fragment(udp6(SRC_V6, DST1_V6, 1, 2).build(), 0, true, 9)),
    ]
}

#[test]
#[ignore = "writes the seed corpora (SLUICE_WRITE_SEEDS=1)"]
fn write_seeds() {
    if std::env::var_os("SLUICE_WRITE_SEEDS").is_none() {
        return;
    }
    let mut packets: Vec<(String, Vec<u8>)> = Vec::new();
    for f in files_in(&root().join("bpf/packets"), "bin") {
        let name = f.file_stem().expect("stem").to_string_lossy().into_owned();
        packets.push((name, std::fs::read(&f).expect("packet")));
    }
    for (name, frame) in builder_frames() {
        packets.push((name.to_string(), frame));
    }
    for (name, frame) in &packets {
        write_seed("wire", name, frame);
        write_seed("rx_packet", name, frame);
    }
    // Headers on their own, so views at offset 0 start from valid bytes too.
    for (name, frame) in packets.iter().take(12) {
        if let Some(off) = l3_offset(frame) {
            write_seed("wire", &format!("{name}-l3"), &frame[off..]);
        }
    }
    // Lists: bursts of one flow (runs, route hints), mixes, and every packet at once.
    let frames: Vec<Vec<u8>> = packets.iter().map(|(_, f)| f.clone()).collect();
    write_seed("rx_list", "all", &harness::join_frames(0, &frames[..frames.len().min(40)]));
    write_seed("rx_list", "all-local-w3", &harness::join_frames(0b0000_0101, &frames[..frames.len().min(40)]));
    for (i, chunk) in frames.chunks(6).enumerate() {
        write_seed("rx_list", &format!("mix{i}"), &harness::join_frames((i as u8).wrapping_mul(37), chunk));
    }
    let burst: Vec<Vec<u8>> = (0..8).map(|s| udp4(SRC_V4, DST1_V4, 1, 2).seq(s).build()).collect();
    write_seed("rx_list", "burst", &harness::join_frames(0b0010_0000, &burst));

    for f in files_in(&root().join("examples"), "toml") {
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        write_seed("config", &name, &std::fs::read(&f).expect("config"));
    }
    write_seed("config", "lab.toml", &std::fs::read(root().join("src/config/lab.toml")).expect("lab"));
    let lab = std::fs::read_to_string(root().join("src/config/lab.toml")).expect("lab");
    write_seed(
        "config",
        "lab-local-xdp.toml",
        format!("{}\n[xdp]\nprogram = \"builtin:pass\"\n", lab.replace("\"l3fwd\"", "\"local\"")).as_bytes(),
    );
    write_seed(
        "config",
        "pcap-io.toml",
        b"pipeline = \"io\"\n[[ports]]\nname = \"a\"\nkind = \"pcap-in\"\nmac = \"02:00:00:00:00:01\"\npcap = \"in.pcap\"\npeer = \"b\"\n\
          [[ports]]\nname = \"b\"\nkind = \"pcap-out\"\nmac = \"02:00:00:00:00:02\"\npcap = \"out.pcap\"\n",
    );
    write_seed(
        "config",
        "routes.toml",
        b"pipeline = \"l3fwd\"\n[[ports]]\nname = \"a\"\nkind = \"null\"\nmac = \"02:00:00:00:00:01\"\nipv4 = [\"192.0.2.1/24\"]\n\
          ipv6 = [\"2001:db8::1/64\"]\nvlans = [1, 4094]\n[[neighbours]]\nport = \"a\"\nip = \"192.0.2.2\"\nmac = \"02:00:00:00:00:aa\"\n\
          [[routes]]\nprefix = \"10.0.0.0/8\"\nvia = \"192.0.2.2\"\nport = \"a\"\n[[routes]]\nprefix = \"2001:db8:66::/48\"\nkind = \"blackhole\"\n\
          [[route_series]]\nbase = \"10.1.0.0\"\nlen = 24\ncount = 16\nvia = \"192.0.2.2\"\nport = \"a\"\n[xdp]\nprogram = \"prog.o\"\nengine = \"interp\"\n",
    );

    let pcap = std::fs::read(root().join("bpf/packets.pcap")).expect("pcap");
    write_seed("pcap", "packets.pcap", &pcap);
    write_seed("pcap", "header-only.pcap", &pcap[..24]);
    write_seed("pcap", "cut-record.pcap", &pcap[..24 + 16 + 10]);
    let tmp = std::env::temp_dir().join(format!("sluice-seed-{}.pcap", std::process::id()));
    for (name, frames) in [("empty", vec![]), ("one", vec![frames[0].clone()]), ("jumbo", vec![vec![0x55; 2500], frames[1].clone()])] {
        sluice::port::pcap::write_frames(&tmp, &frames).expect("write pcap");
        write_seed("pcap", &format!("{name}.pcap"), &std::fs::read(&tmp).expect("read pcap"));
    }
    let _ = std::fs::remove_file(&tmp);

    for f in files_in(&root().join("bpf/obj"), "o") {
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        write_seed("ebpf_loader", &name, &std::fs::read(&f).expect("object"));
    }
}
