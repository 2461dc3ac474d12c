//! Tail calls (BPF_MAP_TYPE_PROG_ARRAY + bpf_tail_call) through `sluice xdp run`, in both
//! engines, against the kernel's BPF_PROG_TEST_RUN results committed in
//! bpf/oracle/xdp_tail_call.json (made by bpf/oracle-all.sh; CI also compares a fresh
//! kernel run in scripts/acceptance/xdp-kernel.sh): the entry program dispatches IPv4, IPv6
//! and other frames to three programs, an empty slot falls through, and a program that
//! tail-calls itself stops at the kernel's limit of 33 tail calls. The same program with its
//! prog array filled in the object (`xdp_tail_call_static.o`, libbpf's static `.values`
//! initialisation) needs no `--map`: the loader fills the slots as libbpf does.

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

fn check_tail_calls(object: &str, fill: &[&str]) {
    let root = env!("CARGO_MANIFEST_DIR");
    let oracle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{root}/bpf/oracle/{object}.json")).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for engine in ["interp", "jit"] {
        let json = dir.path().join(format!("{engine}.json"));
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["xdp", "run", &format!("{root}/bpf/obj/{object}.o"), "--section", "xdp_tail_entry"])
            .args(["--packets-dir", &format!("{root}/bpf/packets"), "--engine", engine, "--json", json.to_str().unwrap()])
            .args(fill)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let ours: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let (k, s) = (oracle["runs"].as_array().unwrap(), ours["runs"].as_array().unwrap());
        assert_eq!(k.len(), s.len());
        let mut actions = std::collections::BTreeSet::new();
        for (a, b) in k.iter().zip(s) {
            assert_eq!(a["packet"], b["packet"]);
            assert_eq!(a["retval"], b["retval"], "{engine} {}: verdict", a["packet"]);
            assert_eq!(a["data_out"], b["data_out"], "{engine} {}: bytes", a["packet"]);
            actions.insert(a["retval"].as_u64());
        }
        assert_eq!(actions.len(), 4, "DROP, PASS, TX and the fall-through ABORTED all occur");
        // hits: [entry runs, v4, v6, loop runs] as the kernel counted them.
        let counts = |v: &serde_json::Value| -> Vec<u64> {
            v["maps"]["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    let b: Vec<u8> = e["value"].as_array().unwrap().iter().flat_map(|x| hex(&x.as_str().unwrap()[2..])).collect();
                    u64::from_le_bytes(b.try_into().unwrap())
                })
                .collect()
        };
        let (kc, sc) = (counts(&oracle), counts(&ours));
        assert_eq!(kc, sc, "{engine}: per-program run counts");
        assert_eq!(sc[3] % 33, 0, "the loop program runs 33 times a frame: the entry's call and 32 self calls make the 33 allowed");
        assert!(sc[3] > 0);
    }
}
