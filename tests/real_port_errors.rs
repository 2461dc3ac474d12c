//! Real-interface ports without the privileges they need (root here drops to `nobody` with
//! setpriv): `sluice run` refuses with one error line that says what is missing and what to
//! do, for AF_PACKET and AF_XDP alike, and leaves no XDP program behind. Under CI a missing
//! precondition (root, setpriv) fails the test.

use std::process::Command;

fn preconditions() -> bool {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let setpriv = Command::new("sh").args(["-c", "command -v setpriv"]).output().is_ok_and(|o| o.status.success());
    if root && setpriv {
        return true;
    }
    let why = format!("root: {root}, setpriv present: {setpriv}");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("the privilege tests cannot run under CI: {why}");
    }
    eprintln!("skipping the privilege tests ({why})");
    false
}

/// `sluice run --port SPEC` as user nobody with no capabilities: (success, stderr).
fn run_unprivileged(spec: &str) -> (bool, String) {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"])
        .arg(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "--pipeline", "io", "--seconds", "0.2", "--port", spec])
        .output()
        .expect("setpriv runs");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn without_privileges_real_ports_say_what_they_need() {
    if !preconditions() {
        return;
    }
    for (spec, needle) in [("afpacket:lo", "CAP_NET_RAW"), ("afxdp:lo", "CAP_NET_ADMIN")] {
        let (ok, err) = run_unprivileged(spec);
        assert!(!ok, "{spec} ran without privileges: {err}");
        assert!(err.contains(needle) && err.contains("root"), "{spec}: {err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("error")).count(), 1, "{spec}: one error line: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let link = Command::new("ip").args(["-d", "link", "show", "dev", "lo"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&link.stdout).contains("prog/xdp"), "nothing attached to lo");
}

#[test]
fn a_missing_interface_is_named_for_both_kinds() {
    for spec in ["afpacket:nosuchif0", "afxdp:nosuchif0"] {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "--pipeline", "io", "--seconds", "0.2", "--port", spec])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains("nosuchif0") && err.contains("ip link"), "{spec}: {err}");
    }
}
