//! Tail calls (BPF_MAP_TYPE_PROG_ARRAY + bpf_tail_call) through `sluice xdp run`, in both
//! engines, against the kernel's BPF_PROG_TEST_RUN results committed in bpf/oracle/ (made by
//! bpf/oracle-all.sh; CI also compares a fresh kernel run in
//! scripts/acceptance/xdp-kernel.sh).
//!
//! bpf/oracle/xdp_tail_call.json: the entry program dispatches IPv4, IPv6 and other frames to
//! three programs, an empty slot falls through, and a program that tail-calls itself stops at
//! the kernel's limit of 33 tail calls. The same program with its prog array filled in the
//! object (`xdp_tail_call_static.o`, libbpf's static `.values` initialisation) needs no
//! `--map`: the loader fills the slots as libbpf does.
//!
//! bpf/oracle/xdp_tail_call_subprog.json: the tail calls are made from a subprogram, so each
//! target returns to the subprogram's caller, which goes on (the kernel's x86-64 JIT since
//! 5.10), including a chain of tail calls and 33 nested ones.

use std::process::Command;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn tail_calls_follow_the_prog_array_as_the_kernel_does() {
    let fill = ["--map", "jmp:00000000=xdp_tail_v4", "--map", "jmp:01000000=xdp_tail_v6", "--map", "jmp:02000000=xdp_tail_loop"];
    check_tail_calls("xdp_tail_call", &fill);
}

#[test]
fn statically_initialised_prog_array_is_filled_at_load() {
    check_tail_calls("xdp_tail_call_static", &[]);
}

/// `xdp_sub_entry` tail-calls from its subprogram `dispatch`: each target returns there, and
/// the entry writes what it got into the packet and returns it plus 1 (see the source).
#[test]
fn tail_calls_from_a_subprogram_return_to_its_caller_as_in_the_kernel() {
    let fill = ["--map", "jmp:00000000=xdp_sub_v4", "--map", "jmp:01000000=xdp_sub_v6", "--map", "jmp:02000000=xdp_sub_nest"];
    for (engine, ours) in matches_oracle("xdp_tail_call_subprog", "xdp_sub_entry", &fill) {
        let verdicts: std::collections::BTreeSet<u64> =
            ours["runs"].as_array().unwrap().iter().filter_map(|r| r["retval"].as_u64()).collect();
        // ABORTED: the empty slot; PASS: the v4 target's DROP plus 1; TX: v6's PASS plus 1;
        // 84: 33 nested runs.
        assert_eq!(verdicts, [0, 2, 3, 84].into(), "{engine}");
        let hits = hits(&ours);
        assert_eq!(hits[3] % 33, 0, "{engine}: the nesting program runs 33 times a frame");
        assert!(hits[3] > 0 && hits[1] > 0 && hits[2] > 0);
    }
}

fn check_tail_calls(object: &str, fill: &[&str]) {
    for (engine, ours) in matches_oracle(object, "xdp_tail_entry", fill) {
        let actions: std::collections::BTreeSet<u64> =
            ours["runs"].as_array().unwrap().iter().filter_map(|r| r["retval"].as_u64()).collect();
        assert_eq!(actions.len(), 4, "{engine}: DROP, PASS, TX and the fall-through ABORTED all occur");
        let sc = hits(&ours);
        assert_eq!(sc[3] % 33, 0, "the loop program runs 33 times a frame: the entry's call and 32 self calls make the 33 allowed");
        assert!(sc[3] > 0);
    }
}

/// Runs `section` of bpf/obj/`object`.o on bpf/packets with `sluice xdp run` in each engine
/// and checks verdicts, output bytes and the `hits` map against bpf/oracle/`object`.json:
/// each engine's JSON report.
fn matches_oracle(object: &str, section: &str, fill: &[&str]) -> Vec<(&'static str, serde_json::Value)> {
    let root = env!("CARGO_MANIFEST_DIR");
    let oracle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{root}/bpf/oracle/{object}.json")).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut reports = Vec::new();
    for engine in ["interp", "jit"] {
        let json = dir.path().join(format!("{engine}.json"));
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["xdp", "run", &format!("{root}/bpf/obj/{object}.o"), "--section", section])
            .args(["--packets-dir", &format!("{root}/bpf/packets"), "--engine", engine, "--json", json.to_str().unwrap()])
            .args(fill)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let ours: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let (k, s) = (oracle["runs"].as_array().unwrap(), ours["runs"].as_array().unwrap());
        assert_eq!(k.len(), s.len());
        for (a, b) in k.iter().zip(s) {
            assert_eq!(a["packet"], b["packet"]);
            assert_eq!(a["retval"], b["retval"], "{engine} {}: verdict", a["packet"]);
            assert_eq!(a["data_out"], b["data_out"], "{engine} {}: bytes", a["packet"]);
        }
        // hits: per-program run counts as the kernel counted them.
        assert_eq!(hits(&oracle), hits(&ours), "{engine}: per-program run counts");
        reports.push((engine, ours));
    }
    reports
}

/// The `hits` array of a report, as u64 values.
fn hits(v: &serde_json::Value) -> Vec<u64> {
    v["maps"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let b: Vec<u8> = e["value"].as_array().unwrap().iter().flat_map(|x| hex(&x.as_str().unwrap()[2..])).collect();
            u64::from_le_bytes(b.try_into().unwrap())
        })
        .collect()
}
