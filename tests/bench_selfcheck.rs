//! The harness finds a real difference and does not invent one: `sluice bench selfcheck`
//! runs A (the lab), A' (identical) and B (A + `rx.extra_work`, about twice the per-packet
//! cost), interleaved, 6 runs of 0.3 s each.

use serde_json::Value;
use std::process::Command;

fn comparison<'a>(e: &'a Value, a: &str, b: &str) -> &'a Value {
    e["comparisons"].as_array().unwrap().iter().find(|c| c["a"] == a && c["b"] == b).unwrap_or_else(|| panic!("no comparison {a} vs {b}"))
}

#[test]
fn selfcheck_detects_extra_work_and_not_identical_arms() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "selfcheck", "--runs", "6", "--seconds", "0.3", "--warmup", "0.1", "--quiet", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // PASS exits 0, FAIL (a machine too noisy to trust) exits non-zero and says so; both are
    // verdicts, and the statistics below must hold either way.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.success(), stdout.contains("selfcheck: PASS"), "{stdout}\n{stderr}");
    assert!(out.status.success() || stderr.contains("selfcheck FAILED"), "{stdout}\n{stderr}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap()).unwrap();
    let e = &json["experiments"][0];
    assert_eq!(e["name"], "selfcheck");
    for a in e["arms"].as_array().unwrap() {
        assert_eq!(a["samples"].as_array().unwrap().len(), 6, "{}", a["name"]);
    }

    // (1) A real difference. B adds ~64 dependent multiply-adds per packet, roughly doubling
    // the cost: the packet rate must come out lower with p < 0.05. This is the harness's
    // power, not luck: with an effect this size the p-value is typically far below 1e-3.
    let ab = comparison(e, "a", "b");
    let v = &ab["verdict"];
    let p = v["p"].as_f64().unwrap();
    let diff = v["diff_pct"].as_f64().unwrap();
    assert!(diff < 0.0, "B should be slower: {v}");
    assert!(p < 0.05, "B slower should be significant: {v}\n{stdout}");
    assert_eq!(v["significant"], true, "{v}");
    assert!(v["text"].as_str().unwrap().contains("lower (worse)"), "{v}");
    // The same on CPU time per packet (immune to preemption by other processes).
    let cpu = &ab["cpu_ns_per_packet"];
    assert!(cpu["diff_pct"].as_f64().unwrap() > 0.0 && cpu["p"].as_f64().unwrap() < 0.05, "{cpu}");

    // (2) No invented difference between identical arms. Under the null hypothesis a valid
    // test still rejects with probability alpha, so asserting "p > 0.05" would fail about one
    // run in twenty *by design* — more on a shared 2-core machine where other processes come
    // and go. What a broken harness produces (arms measured differently, counters not reset
    // after the warm-up, an order effect) is a difference that is both significant and large.
    // So fail only if the difference is significant at alpha = 0.01 *and* at least 3% of the
    // rate: a false alarm needs a 1% event, and a real harness bias of >= 3% cannot hide.
    let aa = comparison(e, "a", "a-prime");
    let v = &aa["verdict"];
    let p = v["p"].as_f64().unwrap();
    let diff = v["diff_pct"].as_f64().unwrap();
    assert!(p > 0.01 || diff.abs() < 3.0, "identical arms differ: {v}\n{stdout}");

    // (3) The sweep: cost grows with extra_work.
    let sw = &e["sweeps"][0];
    assert!(sw["slope"].as_f64().unwrap() > 0.0, "{sw}");
    assert!(std::fs::read_to_string(dir.path().join("REPORT.md")).unwrap().contains("## selfcheck"));
}
