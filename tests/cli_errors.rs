//! The command line with bad arguments, bad configs and hostile conditions (issue: reliability).
//! Every case gets a clear one-line error naming the input and a non-zero exit, or correct
//! output; none panics, none prints a backtrace, none hangs.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn sluice() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    // Errors must read as errors, not crashes, whatever the environment asks for.
    c.env("RUST_BACKTRACE", "1");
    c
}

fn run(args: &[&str]) -> Output {
    sluice().args(args).stdin(Stdio::null()).output().expect("sluice runs")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A clean refusal: non-zero exit, the stderr mentions `needle`, no panic or backtrace.
#[track_caller]
fn refused(args: &[&str], needle: &str) {
    let o = run(args);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{args:?} succeeded:\n{out}\n{err}");
    assert!(err.contains(needle), "{args:?}: expected `{needle}` in:\n{err}");
    assert!(!err.contains("panicked") && !err.contains("stack backtrace"), "{args:?} panicked:\n{err}");
    assert!(err.lines().filter(|l| l.starts_with("error")).count() == 1, "{args:?}: one error line expected:\n{err}");
}

fn config(dir: &Path, name: &str, toml: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, toml).unwrap();
    p.display().to_string()
}

const TWO_PORTS: &str = r#"
pipeline = "l3fwd"
pool_frames = 1024
[[ports]]
name = "a"
kind = "gen"
mac = "02:00:00:00:00:01"
ipv4 = ["192.0.2.1/24"]
[ports.gen]
flows = 4
ip = "v4"
[[ports]]
name = "b"
kind = "null"
mac = "02:00:00:00:00:02"
ipv4 = ["198.51.100.1/24"]
"#;

#[test]
fn bad_run_arguments_are_refused() {
    for s in ["inf", "1e20", "0", "-1", "NaN", "abc"] {
        refused(&["run", "--seconds", s], "--seconds");
        refused(&["gen", "--iface", "lo", "--dst-mac", "02:00:00:00:00:01", "--seconds", s], "--seconds");
    }
    refused(&["gen", "--iface", "lo", "--dst-mac", "02:00:00:00:00:01", "--count", "0"], "at least 1");
    refused(&["run", "--seconds=-1"], "positive");
    refused(&["run", "--packets", "0"], "at least 1");
    refused(&["run", "--packets", "99999999999999999999999"], "larger than");
    refused(&["run", "--set", ""], "is not NAME=VALUE");
    refused(&["run", "--set", "net.core.dev_weight"], "is not NAME=VALUE");
    refused(&["run", "--set", "net.core.dev_weight=99999999999999999999999"], "too large");
    refused(&["run", "--set", "net.core.nope=1"], "unknown tunable");
    refused(&["run", "--pipeline", "nope"], "unknown pipeline");
    // `bench hol` simulates its time: options it cannot honour are refused, not ignored.
    refused(&["bench", "hol", "--seconds", "1"], "`hol` takes no --seconds");
    refused(&["bench", "hol", "--set", "qdisc.bulk=0"], "`hol` takes no --set");
    refused(&["bench", "hol", "--runs", "1"], "needs 2 runs or more");
    refused(&["run", "--pipeline", "io", "--xdp", "builtin:drop"], "would never run");
    refused(&["run", "--xdp", "builtin:drop", "--xdp-section", "xdp"], "no sections");
    refused(&["run", "--xdp-section", "xdp"], "need a program");
    refused(&["run", "--xdp", "builtin:redirect=4294967295"], "no such ifindex");
    refused(&["run", "--config", "/nonexistent/x.toml"], "/nonexistent/x.toml");
}

#[test]
fn bad_configs_are_refused_with_the_field_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: &[(&str, &str, &str)] = &[
        ("dup-names", "name = \"b\"", "names must be unique"),
        ("mtu0", "mac = \"02:00:00:00:00:01\"\nmtu = 0", "mtu"),
        ("vlan", "mac = \"02:00:00:00:00:01\"\nvlans = [5000]", "4094"),
        ("mac7", "mac = \"02:00:00:00:00:001\"", "not a MAC address"),
        ("rate", "flows = 4\nrate_pps = -5.0", "rate_pps"),
        ("rate-nan", "flows = 4\nrate_pps = nan", "rate_pps"),
        ("flows", "flows = 4294967295", "packet templates"),
    ];
    for (name, replace, needle) in cases {
        let toml = match *name {
            "dup-names" => TWO_PORTS.replacen("name = \"a\"", replace, 1),
            "mtu0" | "vlan" | "mac7" => TWO_PORTS.replacen("mac = \"02:00:00:00:00:01\"", replace, 1),
            _ => TWO_PORTS.replacen("flows = 4", replace, 1),
        };
        let p = config(d, &format!("{name}.toml"), &toml);
        refused(&["run", "--config", &p, "--seconds", "0.1"], needle);
    }
    let dup =
        format!("{TWO_PORTS}\n[[routes]]\nprefix = \"10.0.0.0/8\"\nport = \"b\"\n[[routes]]\nprefix = \"10.0.0.0/8\"\nport = \"b\"\n");
    refused(&["run", "--config", &config(d, "dup-route.toml", &dup), "--seconds", "0.1"], "routes[1].prefix");
    let series =
        format!("{TWO_PORTS}\n[[route_series]]\nbase = \"10.0.0.0\"\nlen = 24\ncount = 4294967295\nvia = \"198.51.100.2\"\nport = \"b\"\n");
    refused(&["run", "--config", &config(d, "series.toml", &series), "--seconds", "0.1"], "at most");
    // One route per prefix across routes and series: a series over a route, or over another
    // series, is refused (it replaced the route without a word).
    let hole = format!(
        "{TWO_PORTS}\n[[routes]]\nprefix = \"10.0.3.0/24\"\nkind = \"blackhole\"\n[[route_series]]\nbase = \"10.0.0.0\"\nlen = 24\ncount = 8\nvia = \"198.51.100.2\"\nport = \"b\"\n"
    );
    refused(&["run", "--config", &config(d, "series-route.toml", &hole), "--seconds", "0.1"], "10.0.3.0/24 is already routes[0]");
    let two = format!(
        "{TWO_PORTS}\n[[route_series]]\nbase = \"10.0.0.0\"\nlen = 24\ncount = 8\nvia = \"198.51.100.2\"\nport = \"b\"\n[[route_series]]\nbase = \"10.0.7.0\"\nlen = 24\ncount = 2\nvia = \"198.51.100.2\"\nport = \"b\"\n"
    );
    refused(&["run", "--config", &config(d, "series-series.toml", &two), "--seconds", "0.1"], "overlap route_series[0]");
    let apart = two.replace("10.0.7.0", "10.0.8.0");
    assert!(run(&["run", "--config", &config(d, "series-apart.toml", &apart), "--seconds", "0.1", "-q"]).status.success());
    // A blackhole or unreachable route names no gateway or port (the kernel's "Gateway,
    // device and multipath can not be specified for this route type").
    for (kind, extra, needle) in
        [("blackhole", "port = \"b\"", "routes[0].port"), ("unreachable", "via = \"198.51.100.2\"", "routes[0].via")]
    {
        let r = format!("{TWO_PORTS}\n[[routes]]\nprefix = \"10.9.0.0/16\"\nkind = \"{kind}\"\n{extra}\n");
        refused(&["run", "--config", &config(d, "hole-port.toml", &r), "--seconds", "0.1"], needle);
        refused(&["run", "--config", &config(d, "hole-port.toml", &r), "--seconds", "0.1"], "takes no gateway or port");
    }
    // A configured route never replaces a port's own address or subnet route (the kernel
    // keeps them: local table, or "File exists"); a blackhole over the router's address
    // had dropped everything sent to it.
    for (prefix, needle) in
        [("192.0.2.1/32", "192.0.2.1/32 is a port's own address"), ("198.51.100.0/24", "198.51.100.0/24 is a port's own")]
    {
        let r = format!("{TWO_PORTS}\n[[routes]]\nprefix = \"{prefix}\"\nkind = \"blackhole\"\n");
        refused(&["run", "--config", &config(d, "own.toml", &r), "--seconds", "0.1"], needle);
    }
    // An address listed twice on a port, or a neighbour entry twice (the second MAC had
    // silently replaced the first): File exists, as `ip addr add` / `ip neigh add` say.
    let twice = TWO_PORTS.replacen("ipv4 = [\"192.0.2.1/24\"]", "ipv4 = [\"192.0.2.1/24\", \"192.0.2.1/24\"]", 1);
    refused(&["run", "--config", &config(d, "addr2.toml", &twice), "--seconds", "0.1"], "ports[0] (a).ipv4");
    let neigh = format!(
        "{TWO_PORTS}\n[[neighbours]]\nport = \"b\"\nip = \"198.51.100.2\"\nmac = \"02:00:00:00:00:bb\"\n[[neighbours]]\nport = \"b\"\nip = \"198.51.100.2\"\nmac = \"02:00:00:00:00:cc\"\n"
    );
    refused(&["run", "--config", &config(d, "neigh2.toml", &neigh), "--seconds", "0.1"], "neighbours[1].ip");
    let other =
        neigh.replacen("ip = \"198.51.100.2\"\nmac = \"02:00:00:00:00:cc\"", "ip = \"198.51.100.3\"\nmac = \"02:00:00:00:00:cc\"", 1);
    assert!(run(&["run", "--config", &config(d, "neigh-ok.toml", &other), "--seconds", "0.1", "-q"]).status.success());
}

/// Native XDP with a program that is not frags-aware on a port whose MTU needs multi-buffer
/// frames is refused, as drivers refuse it; generic mode (which linearizes) and built-in
/// programs (frags-aware) are accepted.
#[test]
fn native_xdp_needs_a_frags_aware_program_for_jumbo_mtus() {
    let dir = tempfile::tempdir().unwrap();
    let jumbo = TWO_PORTS.replacen("mac = \"02:00:00:00:00:01\"", "mac = \"02:00:00:00:00:01\"\nmtu = 9000", 1);
    let p = config(dir.path(), "jumbo.toml", &jumbo);
    let obj = concat!(env!("CARGO_MANIFEST_DIR"), "/bpf/obj/xdp_drop_count.o");
    refused(&["run", "--config", &p, "--seconds", "0.1", "--xdp", obj], "needs multi-buffer frames");
    for extra in [&["--xdp", obj, "--xdp-mode", "generic"][..], &["--xdp", "builtin:pass"][..]] {
        let mut args = vec!["run", "--config", &p, "--seconds", "0.1", "-q"];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert!(o.status.success(), "{extra:?}: {}", text(&o).1);
    }
    // The same object on a standard MTU is fine natively.
    let std_mtu = config(dir.path(), "std.toml", TWO_PORTS);
    assert!(run(&["run", "--config", &std_mtu, "--seconds", "0.1", "-q", "--xdp", obj]).status.success());
}

#[test]
fn bad_captures_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let empty = d.join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    refused(&["run", "--pcap-in", empty.to_str().unwrap()], "empty file");
    refused(&["run", "--pcap-in", d.to_str().unwrap()], "is a directory");
    let junk = d.join("junk.pcap");
    std::fs::write(&junk, [0x55u8; 100]).unwrap();
    refused(&["run", "--pcap-in", junk.to_str().unwrap()], "not a pcap");
    refused(&["run", "--pcap-out", "/dev/full", "--seconds", "0.2"], "/dev/full");
    let file = d.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    refused(&["bench", "--quick", "selfcheck", "--out", file.to_str().unwrap()], "not a directory");
}

#[test]
fn packet_counts_are_exact() {
    for (n, extra) in [("1", "64"), ("1000", "64"), ("77", "4096")] {
        let o = run(&["run", "--packets", n, "--json", "--set", &format!("net.core.dev_weight={extra}")]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["counters"]["rx"].as_u64().unwrap().to_string(), n, "{out}");
        assert_eq!(v["stop"], "packets");
    }
}

/// A finite input ends the run even beside an endless generator (examples/io.toml has two).
#[test]
fn a_capture_ends_the_run() {
    let root = env!("CARGO_MANIFEST_DIR");
    let start = Instant::now();
    let o = run(&["run", "--config", &format!("{root}/examples/io.toml"), "--pcap-in", &format!("{root}/bpf/packets.pcap"), "-q"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("input done"), "{out}");
    assert!(start.elapsed() < Duration::from_secs(60), "took {:?}", start.elapsed());
}

/// Frames longer than a buffer are received and dropped with a reason, never lost; snapped
/// records are taken as captured.
#[test]
fn long_and_snapped_frames_are_accounted() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("in.pcap");
    // pcap header: magic, version 2.4, thiszone, sigfigs, snaplen, linktype Ethernet.
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0u8; 8]);
    b.extend_from_slice(&262_144u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    let frame = |len: usize| {
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12] = 0x08;
        f
    };
    for (len, orig) in [(60usize, 60u32), (9000, 9000), (65535, 65535), (96, 1514), (1500, 1500)] {
        for w in [0u32, 0, len as u32, orig] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&frame(len));
    }
    std::fs::write(&pcap, &b).unwrap();
    let o = run(&["run", "--pcap-in", pcap.to_str().unwrap(), "--json"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["counters"]["rx"], 5, "{out}");
    let gen = &v["ports"][0][1];
    // Every frame is taken whole (buffer chains), none is cut or refused.
    assert_eq!(gen["rx_length_errors"], 0, "{gen}");
    assert_eq!(gen["rx_bytes"], 60 + 9000 + 65535 + 96 + 1500, "{gen}");
    assert_eq!(gen["rx_truncated"], 1, "{gen}");
    assert!(v["conservation"].get("Ok").is_some(), "{}", v["conservation"]);
    let drops: u64 = v["counters"]["drops"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).sum();
    assert_eq!(v["counters"]["tx"].as_u64().unwrap() + v["counters"]["local"].as_u64().unwrap() + drops, 5);
}

/// `sluice tunables | head -1` and `sluice run | head -1`: no panic, a clean end.
#[test]
fn a_closed_stdout_is_no_panic() {
    for args in [&["tunables"][..], &["run", "--seconds", "30"][..]] {
        let mut child = sluice().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        // The reader is dropped here: the pipe is closed, like `head -1` exiting.
        let start = Instant::now();
        let status = child.wait().unwrap();
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
        assert!(status.success() || status.code().is_some(), "{args:?}: {status:?}");
        assert!(start.elapsed() < Duration::from_secs(20), "{args:?} kept running after its reader left");
    }
}

/// SIGINT stops a run at a poll boundary: the summary and conservation check print, and the
/// capture is whole (every record complete, tshark would read it).
#[test]
fn sigint_flushes_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out_pcap = dir.path().join("out.pcap");
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let child = sluice()
            .args(["run", "--seconds", "60", "-q", "--pcap-out", out_pcap.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(700));
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(child.id() as i32, sig) };
        let o = child.wait_with_output().unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "signal {sig}: {out}\n{err}");
        assert!(out.contains("stopped") && out.contains("conservation: ok"), "{out}");
        let cap = sluice::port::pcap::read_capture(&out_pcap).expect("the capture is whole");
        assert!(!cap.frames.is_empty());
    }
}

#[test]
fn selfcheck_gives_a_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["bench", "--quick", "selfcheck", "--quiet", "--out", dir.path().to_str().unwrap()]);
    let (out, err) = text(&o);
    let verdict = out.lines().find(|l| l.starts_with("selfcheck: ")).unwrap_or_else(|| panic!("no verdict:\n{out}\n{err}"));
    // PASS exits 0; FAIL exits non-zero and says why. Either is a verdict; what must never
    // happen is a PASS with a failure exit or a FAIL with success.
    assert_eq!(verdict.contains("PASS"), o.status.success(), "{verdict}\n{err}");
    if !o.status.success() {
        assert!(err.contains("selfcheck FAILED"), "{err}");
    }
}

#[test]
fn real_interface_ports_refuse_clearly() {
    refused(&["run", "--port", "afpacket:sluicenosuch0", "--seconds", "1"], "no interface named `sluicenosuch0` (`ip link` lists them)");
    refused(&["run", "--port", "bogus:lo", "--seconds", "1"], "unknown port kind");
    refused(&["run", "--capture", "nosuch=/tmp/x.pcap", "--seconds", "1"], "no port named `nosuch`");
}

/// An error that quotes its cause is printed once: the buffer pool's size error had read
/// "buffer pool: X: X".
#[test]
fn an_error_line_says_each_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    for frames in ["0", "900000000"] {
        let c = config(dir.path(), "pool.toml", &TWO_PORTS.replace("pool_frames = 1024", &format!("pool_frames = {frames}")));
        let o = run(&["run", "--config", &c, "--seconds", "0.1"]);
        let (_, err) = text(&o);
        assert!(!o.status.success());
        let needle = format!("buffer pool of {frames} frames");
        assert_eq!(err.matches(&needle).count(), 1, "{err}");
        assert_eq!(err.matches("must be between").count(), 1, "{err}");
    }
}

/// Output files are touched only by a run that starts: a configuration refused after its
/// ports were opened leaves an existing `--pcap-out` / `--capture` file as it was and
/// leaves no new file behind; two outputs on one file, or an output on an input, are
/// refused naming both settings.
#[test]
fn outputs_are_written_only_by_a_run_that_starts_and_by_one_writer() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bad = config(d, "bad.toml", &format!("{TWO_PORTS}\n[[routes]]\nprefix = \"10.9.0.0/16\"\nvia = \"1.2.3.4\"\nport = \"b\"\n"));
    let precious = d.join("precious.pcap");
    std::fs::write(&precious, b"precious data").unwrap();
    let fresh = d.join("fresh.pcap");
    let (p, f) = (precious.display().to_string(), fresh.display().to_string());
    refused(&["run", "--config", &bad, "--pcap-out", &p, "--seconds", "0.1"], "routes[0].via");
    refused(&["run", "--config", &bad, "--capture", &format!("a={f}"), "--seconds", "0.1"], "routes[0].via");
    assert_eq!(std::fs::read(&precious).unwrap(), b"precious data");
    assert!(!fresh.exists(), "a refused run leaves no file behind");
    let good = config(d, "good.toml", TWO_PORTS);
    let same = d.join("same.pcap").display().to_string();
    refused(&["run", "--config", &good, "--capture", &format!("a={same}"), "--capture", &format!("b={same}")], "ports[0] (a).capture");
    refused(&["run", "--config", &good, "--pcap-out", &same, "--capture", &format!("a={same}")], "one file per output");
    // A run that starts writes a whole capture, even with nothing to capture.
    let o = run(&["run", "--config", &good, "--pcap-out", &f, "--packets", "100", "-q"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let bytes = std::fs::read(&fresh).unwrap();
    assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "a pcap header");
    assert_eq!(bytes.len(), 24, "header only: TWO_PORTS routes nothing to b");
}

/// `--pcap-in` / `--pcap-out` replace a port of any kind: what described it before (here
/// the NIC model's `sim` table) goes with it, so the shipped examples take both flags; one
/// port cannot be both ends.
#[test]
fn capture_flags_replace_a_port_of_any_kind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nic = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/nic.toml");
    let out = d.join("o.pcap").display().to_string();
    let o = run(&["run", "--config", nic, "--pcap-out", &out, "--packets", "2000", "-q"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = run(&["run", "--config", nic, "--pcap-in", &out, "-q"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let one = config(d, "one.toml", "pipeline = \"l3fwd\"\n[[ports]]\nname = \"a\"\nkind = \"null\"\nmac = \"02:00:00:00:00:01\"\n");
    refused(&["run", "--config", &one, "--pcap-in", &out, "--pcap-out", &d.join("x.pcap").display().to_string()], "with one port");
}
