//! Production-sized maps at the kernel's memory cost: `bpf/obj/xdp_big_arrays.o` holds a
//! 33,554,432-entry and a 16,777,216-entry u64 array and a 4,194,304-entry hash (704 MiB,
//! which the kernel allocates whole). sluice maps them lazily and dumps only the written
//! slots and present hash entries, streaming: the run
//! passes under an address-space limit of 800 MB, its peak RSS stays far below the maps'
//! size, and `--json` / `xdp maps` hold exactly the slots the frames wrote.

use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Runs sluice under `ulimit -v` (KiB) in a spawned shell; returns its output.
fn limited(limit_kib: u64, args: &str) -> std::process::Output {
    let bin = env!("CARGO_BIN_EXE_sluice");
    Command::new("sh").arg("-c").arg(format!("ulimit -v {limit_kib} && exec {bin} {args}")).output().expect("spawn sh")
}

fn u64_of(e: &serde_json::Value) -> u64 {
    let b: Vec<u8> = e["value"].as_array().unwrap().iter().map(|x| u8::from_str_radix(&x.as_str().unwrap()[2..], 16).unwrap()).collect();
    u64::from_le_bytes(b.try_into().unwrap())
}

#[test]
fn fifty_million_array_slots_under_a_memory_limit() {
    let obj = format!("{ROOT}/bpf/obj/xdp_big_arrays.o");
    let pkts = format!("{ROOT}/bpf/packets");
    let json = std::env::temp_dir().join(format!("sluice-big-maps-{}.json", std::process::id()));
    let o = limited(800_000, &format!("xdp run {obj} --packets-dir {pkts} --json {}", json.display()));
    assert!(o.status.success(), "under ulimit -v 800000: {}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&json).unwrap();
    let _ = std::fs::remove_file(&json);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 27);
    assert!(runs.iter().all(|r| r["retval"] == 2));
    // ring_slots: one increment per frame, spread over slots by length.
    let ring = v["maps"]["ring_slots"].as_array().unwrap();
    assert_eq!(ring.iter().map(u64_of).sum::<u64>(), 27, "every frame counted once");
    assert!(ring.len() > 1 && ring.len() < 27);
    // conn_slots: frame lengths of IPv4 frames with a whole header, by source.
    let conn = v["maps"]["conn_slots"].as_array().unwrap();
    assert!(!conn.is_empty() && conn.len() < 20, "only written slots are dumped: {}", conn.len());
    assert!(conn.iter().all(|e| u64_of(e) > 0));
    assert_eq!(v["map_info"]["conn_slots"]["max_entries"], 1 << 25);
    // conn_table: one entry per IPv4 source, counting its frames: as many as conn_slots has
    // slots (one slot per source), and the same total of frames as IPv4 frames hashed there.
    let table = v["maps"]["conn_table"].as_array().unwrap();
    assert_eq!(table.len(), conn.len());
    assert!(table.iter().all(|e| u64_of(e) > 0));

    // `xdp maps` prints the same slots, entry by entry.
    let o = limited(800_000, &format!("xdp maps {obj} --packets-dir {pkts} --engine interp"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(&format!("({} non-zero entries)", conn.len())), "{out}");
    assert!(out.contains(&format!("({} non-zero entries)", ring.len())), "{out}");

    // Peak RSS of the children (the two runs): the maps' 384 MiB were never materialised.
    // SAFETY: getrusage writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN covers the waited-for children of this process.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) }, 0);
    let peak_kib = ru.ru_maxrss as u64;
    assert!(peak_kib > 0 && peak_kib < 64 * 1024, "peak RSS {peak_kib} KiB");
}
