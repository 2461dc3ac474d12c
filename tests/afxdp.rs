//! The `afxdp` port on veth pairs it creates (root only; under CI these tests fail, never
//! skip, when not root). Each test makes its own pairs, named from the pid and a counter,
//! and deletes them when done, failed or not (a Drop guard).

use sluice::buf::{Pkt, Pool};
use sluice::port::afxdp::{self, AfXdpConfig, AfXdpError, AfXdpQueue, BindMode};
use sluice::port::Port;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The tests run one at a time: a `fork` by a concurrent test (spawning `ip` or `sluice`)
/// briefly holds copies of every descriptor, the BPF link's too, which would delay its
/// detach past the check that nothing is attached.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the serial lock when the test can run; None (skip) only outside CI.
fn root_or_skip() -> Option<std::sync::MutexGuard<'static, ()>> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && std::env::var("CI").as_deref() == Ok("true") {
        panic!("CI=true: the afxdp tests need root (veth pairs, XDP programs, AF_XDP sockets)");
    }
    if !root {
        eprintln!("skipped: not root");
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("running `ip` (iproute2)");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

static PAIRS: AtomicU32 = AtomicU32::new(0);

/// A veth pair `a` <-> `b`, up, with IPv6 off (no router solicitations or MLD reports on
/// the wire); deleted on drop.
struct Veth {
    a: String,
    b: String,
}

impl Veth {
    fn new() -> Veth {
        let n = PAIRS.fetch_add(1, Ordering::Relaxed);
        let id = std::process::id() % 100_000;
        let v = Veth { a: format!("sxa{id}x{n}"), b: format!("sxb{id}x{n}") };
        ip(&["link", "add", &v.a, "type", "veth", "peer", "name", &v.b]);
        for d in [&v.a, &v.b] {
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{d}/disable_ipv6"), "1");
            ip(&["link", "set", "dev", d, "up"]);
        }
        v
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.a]).output();
    }
}

/// A plain AF_PACKET socket on an interface: the other end of the wire.
struct Raw {
    fd: i32,
    ifindex: i32,
}

impl Raw {
    fn open(iface: &str) -> Raw {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // Protocol 0 at socket(): with ETH_P_ALL the socket would receive from every interface
        // until bind() narrows it to this one (other tests' frames in that window).
        // SAFETY: plain socket(2); checked.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0) };
        assert!(fd >= 0, "AF_PACKET socket: {}", std::io::Error::last_os_error());
        let ifindex = afxdp::iface_info(iface).unwrap().ifindex as i32;
        // SAFETY: zeroed sockaddr_ll filled below.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = proto;
        sa.sll_ifindex = ifindex;
        // SAFETY: sa is a sockaddr_ll of the size passed.
        let r = unsafe { libc::bind(fd, &sa as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32) };
        assert_eq!(r, 0, "bind AF_PACKET: {}", std::io::Error::last_os_error());
        // Room for every test burst (the default buffer holds ~100 frames' skbs).
        let size: i32 = 16 << 20;
        // SAFETY: an int option of the size passed.
        unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &size as *const i32 as *const libc::c_void, 4) };
        Raw { fd, ifindex }
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: frame is a live buffer of the length passed.
        let r = unsafe { libc::send(self.fd, frame.as_ptr() as *const libc::c_void, frame.len(), 0) };
        assert_eq!(r, frame.len() as isize, "AF_PACKET send: {}", std::io::Error::last_os_error());
    }

    /// Frames that arrived on the interface (not those it sent) carrying `marker`, until
    /// `n` are in or 5 s passed.
    fn recv_marked(&self, marker: &[u8], n: usize) -> Vec<Vec<u8>> {
        self.recv_marked_within(marker, n, Duration::from_secs(5))
    }

    fn recv_marked_within(&self, marker: &[u8], n: usize, wait: Duration) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 16384];
        let end = Instant::now() + wait;
        while got.len() < n && Instant::now() < end {
            // SAFETY: zeroed sockaddr_ll the kernel fills.
            let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: buf and sa are writable for the sizes passed.
            let r = unsafe {
                libc::recvfrom(
                    self.fd,
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    0,
                    &mut sa as *mut _ as *mut libc::sockaddr,
                    &mut len,
                )
            };
            if r < 0 {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            let f = &buf[..r as usize];
            if sa.sll_pkttype != libc::PACKET_OUTGOING && sa.sll_ifindex == self.ifindex && has(f, marker) {
                got.push(f.to_vec());
            }
        }
        got
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: our descriptor, closed once.
        unsafe { libc::close(self.fd) };
    }
}

/// Compares frame lists without printing kilobytes: the count, then the first difference.
fn assert_frames(got: &[Vec<u8>], want: &[Vec<u8>], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g != w {
            let at = g.iter().zip(w).position(|(a, b)| a != b).unwrap_or(g.len().min(w.len()));
            panic!("{what}: frame {i} differs ({} bytes, expected {}; first difference at byte {at})", g.len(), w.len());
        }
    }
    assert_eq!(got.len(), want.len(), "{what}: frame count");
}

/// Sends probe frames from `src` until one arrives at `dst` (at most 20 s): the datapath is
/// polling and forwarding, so what is sent next is not lost to a fill ring not yet stocked.
/// `probe` is a frame carrying the marker `SLUICE-PROBE`.
fn wait_until_forwarding(src: &Raw, dst: &Raw, probe: &[u8]) {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        src.send(probe);
        if !dst.recv_marked_within(b"SLUICE-PROBE", 1, Duration::from_millis(50)).is_empty() {
            return;
        }
        assert!(Instant::now() < end, "the datapath never forwarded a probe");
    }
}

fn has(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A test frame: broadcast Ethernet, a local-experimental ethertype, `marker` and a
/// sequence number, padded to `len`.
fn frame(marker: &[u8], seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend_from_slice(marker);
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((f.len() * 7) as u8);
    }
    f
}

fn copy_cfg() -> AfXdpConfig {
    AfXdpConfig { xdp_mode: BindMode::Copy, ..AfXdpConfig::default() }
}

fn open1(iface: &str, pool: &Pool) -> AfXdpQueue {
    let mut qs = afxdp::open(iface, iface, Some(1), &copy_cfg(), pool).unwrap_or_else(|e| panic!("opening {iface}: {e}"));
    assert_eq!(qs.len(), 1);
    qs.remove(0)
}

/// Polls `q` until `n` packets carrying `marker` came in (at most 5 s); the others are freed.
fn rx_marked(q: &mut AfXdpQueue, bufs: &mut sluice::buf::BufCache, marker: &[u8], n: usize) -> Vec<Pkt> {
    let mut got = Vec::new();
    let mut v = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < n && Instant::now() < end {
        v.clear();
        q.rx_burst(bufs, &mut v, 64);
        for p in &v {
            if has(&bufs.to_vec(*p), marker) {
                got.push(*p);
            } else {
                bufs.free(*p);
            }
        }
        if v.is_empty() {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    got
}

fn xdp_attached(iface: &str) -> bool {
    ip(&["link", "show", "dev", iface]).contains("xdp")
}

#[test]
fn frames_from_the_peer_arrive_byte_exact_and_frames_sent_arrive_at_the_peer() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    let pool = Pool::new(4096).unwrap();
    let mut bufs = pool.cache();
    let mut q = open1(&v.a, &pool);
    assert!(!q.zerocopy(), "veth binds in copy mode");
    assert!(xdp_attached(&v.a), "the redirect program is attached while the port is open");
    let peer = Raw::open(&v.b);
    let mut none = Vec::new();
    q.rx_burst(&mut bufs, &mut none, 64); // stocks the fill ring
    bufs.free_pkts(&none);

    let sent: Vec<Vec<u8>> = (0..40).map(|i| frame(b"SLUICE-RX", i, 60 + i as usize * 37)).collect();
    for f in &sent {
        peer.send(f);
    }
    let got = rx_marked(&mut q, &mut bufs, b"SLUICE-RX", sent.len());
    assert_eq!(got.len(), sent.len(), "every frame the peer sent came in");
    for (p, f) in got.iter().zip(&sent) {
        assert_eq!(&bufs.to_vec(*p), f, "received byte-exact, in order");
        assert_eq!(p.off as usize, sluice::buf::HEADROOM, "data at XDP_PACKET_HEADROOM");
    }
    bufs.free_pkts(&got);

    let out: Vec<Vec<u8>> = (0..20).map(|i| frame(b"SLUICE-TX", i, 64 + i as usize * 50)).collect();
    let pkts: Vec<Pkt> = out.iter().map(|f| bufs.alloc_copy(f).unwrap()).collect();
    assert_eq!(q.tx_burst(&mut bufs, &pkts, false), pkts.len(), "the port takes the whole burst");
    let arrived = peer.recv_marked(b"SLUICE-TX", out.len());
    assert_frames(&arrived, &out, "what the port sent arrived at the peer, byte-exact and in order");
    let before = bufs.in_use();
    q.flush_held(&mut bufs);
    assert_eq!(before - bufs.in_use(), out.len() as i64, "completions gave every sent frame back");
    let s = q.stats();
    assert_eq!((s.rx_packets >= 40, s.tx_packets), (true, 20));
}

#[test]
fn forwarding_between_two_veths_shares_one_umem_without_copy() {
    let Some(_serial) = root_or_skip() else { return };
    let (v1, v2) = (Veth::new(), Veth::new());
    let pool = Pool::new(4096).unwrap();
    let mut bufs = pool.cache();
    let mut q1 = open1(&v1.a, &pool);
    let mut q2 = open1(&v2.a, &pool);
    assert!(q2.shares_umem(), "the second port binds with XDP_SHARED_UMEM");
    let (src, dst) = (Raw::open(&v1.b), Raw::open(&v2.b));
    let mut none = Vec::new();
    q1.rx_burst(&mut bufs, &mut none, 64);
    q2.rx_burst(&mut bufs, &mut none, 64);
    bufs.free_pkts(&none);

    let sent: Vec<Vec<u8>> = (0..32).map(|i| frame(b"SLUICE-FWD", i, 100 + i as usize * 40)).collect();
    for f in &sent {
        src.send(f);
    }
    let got = rx_marked(&mut q1, &mut bufs, b"SLUICE-FWD", sent.len());
    assert_eq!(got.len(), sent.len());
    let frames_rx: Vec<u32> = got.iter().map(|p| p.buf.0).collect();
    let in_use = bufs.in_use();
    // The very descriptors received go out of the other interface: no allocation, no copy.
    assert_eq!(q2.tx_burst(&mut bufs, &got, false), got.len());
    assert_eq!(bufs.in_use(), in_use, "forwarding allocated nothing");
    let arrived = dst.recv_marked(b"SLUICE-FWD", sent.len());
    assert_frames(&arrived, &sent, "forwarded byte-exact");
    q2.flush_held(&mut bufs);
    assert_eq!(in_use - bufs.in_use(), frames_rx.len() as i64, "the received frames came back as q2's completions");
}

#[test]
fn xmit_more_rings_fewer_doorbells_than_packets() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    let pool = Pool::new(4096).unwrap();
    let mut bufs = pool.cache();
    let mut q = open1(&v.a, &pool);
    let peer = Raw::open(&v.b);
    let n = 256;
    let out: Vec<Vec<u8>> = (0..n).map(|i| frame(b"SLUICE-MORE", i, 80)).collect();
    let pkts: Vec<Pkt> = out.iter().map(|f| bufs.alloc_copy(f).unwrap()).collect();
    for (k, chunk) in pkts.chunks(32).enumerate() {
        let last = (k + 1) * 32 >= pkts.len();
        assert_eq!(q.tx_burst(&mut bufs, chunk, !last), chunk.len());
        if !last {
            assert_eq!(q.stats().doorbells, 0, "no doorbell while more packets follow");
        }
    }
    let arrived = peer.recv_marked(b"SLUICE-MORE", n as usize);
    assert_eq!(arrived.len(), n as usize, "every packet went out");
    let bells = q.stats().doorbells;
    assert!(bells >= 1 && bells < n as u64, "{bells} doorbells for {n} packets");
    q.flush_held(&mut bufs);
}

#[test]
fn nothing_stays_attached_after_drop_and_reopening_works() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    let pool = Pool::new(4096).unwrap();
    let mut bufs = pool.cache();
    let free0 = pool.shared_free();
    for round in 0..3 {
        let mut q = open1(&v.a, &pool);
        assert!(xdp_attached(&v.a), "round {round}: attached while open");
        let mut none = Vec::new();
        q.rx_burst(&mut bufs, &mut none, 64);
        let peer = Raw::open(&v.b);
        let marker = format!("SLUICE-RE{round}");
        peer.send(&frame(marker.as_bytes(), 0, 90));
        let got = rx_marked(&mut q, &mut bufs, marker.as_bytes(), 1);
        assert_eq!(got.len(), 1, "round {round}: a reopened port receives");
        bufs.free_pkts(&got);
        bufs.free_pkts(&none);
        drop(q);
        assert!(!xdp_attached(&v.a), "round {round}: no XDP program left after the port is dropped");
    }
    bufs.flush();
    assert_eq!(pool.shared_free(), free0, "the fill rings' frames went back to the pool");
}

fn expect_busy(r: Result<Vec<AfXdpQueue>, AfXdpError>, iface: &str) {
    match r {
        Err(e @ AfXdpError::XdpBusy { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&format!("ip link set dev {iface} xdp off")), "the error says what to do: {msg}");
        }
        Err(e) => panic!("expected XdpBusy, got: {e}"),
        Ok(_) => panic!("a second program was attached over the first"),
    }
}

#[test]
fn an_interface_with_an_xdp_program_gives_a_clear_error_and_nothing_stays() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    let pool = Pool::new(4096).unwrap();
    // A program attached the usual way (netlink, as `ip` or xdp-loader do).
    let obj = concat!(env!("CARGO_MANIFEST_DIR"), "/crates/sluice-ebpf/tests/progs/xdp_adjust.o");
    ip(&["link", "set", "dev", &v.a, "xdpgeneric", "obj", obj, "sec", "xdp"]);
    expect_busy(afxdp::open("p", &v.a, Some(1), &copy_cfg(), &pool), &v.a);
    ip(&["link", "set", "dev", &v.a, "xdpgeneric", "off"]);
    assert!(!xdp_attached(&v.a), "the failed open left nothing attached");
    // Another sluice port holding the interface.
    let held = open1(&v.a, &pool);
    expect_busy(afxdp::open("second", &v.a, Some(1), &copy_cfg(), &pool), &v.a);
    drop(held);
    assert!(!xdp_attached(&v.a));
    // And the interface is usable again.
    drop(open1(&v.a, &pool));
}

#[test]
fn a_missing_interface_is_named() {
    let Some(_serial) = root_or_skip() else { return };
    let pool = Pool::new(256).unwrap();
    match afxdp::open("p", "sxnosuchif0", None, &AfXdpConfig::default(), &pool) {
        Err(e @ AfXdpError::NoSuchInterface(_)) => assert!(e.to_string().contains("sxnosuchif0")),
        Err(e) => panic!("expected NoSuchInterface, got: {e}"),
        Ok(_) => panic!("opened a missing interface"),
    }
}

/// examples/afxdp-io.toml on interfaces `a1` and `a2` (the example stays runnable).
fn two_port_io_config(a1: &str, a2: &str) -> String {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/afxdp-io.toml")).unwrap();
    let text = text.replace("iface = \"xl0\"", &format!("iface = \"{a1}\"")).replace("iface = \"xr0\"", &format!("iface = \"{a2}\""));
    assert!(text.contains(a1) && text.contains(a2), "the example changed shape");
    text
}

#[test]
fn a_config_of_two_afxdp_ports_forwards_through_the_datapath() {
    let Some(_serial) = root_or_skip() else { return };
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let (v1, v2) = (Veth::new(), Veth::new());
    let cfg = sluice::config::Config::from_toml(&two_port_io_config(&v1.a, &v2.a), "test").unwrap();
    let pool = Pool::new(cfg.pool_frames).unwrap();
    let mut dp = cfg.build(cfg.tunables(&[]).unwrap(), &pool).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dp.net.ifaces[0].mac, afxdp::iface_info(&v1.a).unwrap().mac, "the MAC defaults to the interface's");
    assert_eq!(dp.net.ifaces[1].mtu, 1500, "the MTU defaults to the interface's");

    let n = 200;
    let sent: Vec<Vec<u8>> = (0..n).map(|i| frame(b"SLUICE-DP", i, 64 + (i as usize * 13) % 1400)).collect();
    let (src, dst, probe_dst) = (Raw::open(&v1.b), Raw::open(&v2.b), Raw::open(&v2.b));
    let stop = Arc::new(AtomicBool::new(false));
    let to_send = sent.clone();
    let sender = std::thread::spawn(move || {
        // The datapath stocks its fill rings on its first poll; frames before it would be
        // dropped by the kernel (no buffer).
        wait_until_forwarding(&src, &probe_dst, &frame(b"SLUICE-PROBE", 0, 60));
        for f in &to_send {
            src.send(f);
        }
    });
    let stop2 = stop.clone();
    let receiver = std::thread::spawn(move || {
        let got = dst.recv_marked(b"SLUICE-DP", n as usize);
        stop2.store(true, Ordering::Release);
        got
    });
    let limit = sluice::napi::RunLimit { duration: Some(Duration::from_secs(20)), stop: Some(stop), ..Default::default() };
    dp.run(limit, Duration::from_secs(1), |_, _| {});
    sender.join().unwrap();
    let got = receiver.join().unwrap();
    assert_frames(&got, &sent, "every frame went left -> right through sluice, byte-exact and in order");
    assert!(dp.port_stats(0).rx_packets >= n as u64);
    assert!(dp.port_stats(1).tx_packets >= n as u64);
    dp.conservation().unwrap();
    drop(dp);
    assert!(!xdp_attached(&v1.a) && !xdp_attached(&v2.a), "dropping the datapath detached both programs");
}

/// `sluice run` on an afxdp config, stopped with `signal`: nothing stays attached, and a
/// second run starts on the same interfaces.
fn run_and_signal(signal: i32) {
    let (v1, v2) = (Veth::new(), Veth::new());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("afxdp.toml");
    std::fs::write(&path, two_port_io_config(&v1.a, &v2.a)).unwrap();
    for round in 0..2 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "--quiet", "--config"])
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        while !(xdp_attached(&v1.a) && xdp_attached(&v2.a)) {
            if let Some(st) = child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
                panic!("round {round}: sluice exited ({st}) before attaching: {err}");
            }
            assert!(Instant::now() < end, "round {round}: sluice did not attach within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: signalling our own child by its pid.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let st = child.wait().unwrap();
        if signal != libc::SIGKILL {
            assert!(st.success(), "round {round}: signal {signal} ends the run cleanly ({st})");
        }
        assert!(!xdp_attached(&v1.a) && !xdp_attached(&v2.a), "round {round}: nothing attached after signal {signal}");
    }
}

#[test]
fn sigterm_and_sigint_leave_nothing_attached_and_a_restart_works() {
    let Some(_serial) = root_or_skip() else { return };
    run_and_signal(libc::SIGTERM);
    run_and_signal(libc::SIGINT);
}

#[test]
fn sigkill_leaves_nothing_attached_and_a_restart_works() {
    let Some(_serial) = root_or_skip() else { return };
    run_and_signal(libc::SIGKILL);
}

#[test]
fn zerocopy_on_veth_says_to_use_copy_and_auto_falls_back() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    let pool = Pool::new(1024).unwrap();
    let zc = AfXdpConfig { xdp_mode: BindMode::Zerocopy, ..AfXdpConfig::default() };
    match afxdp::open("p", &v.a, Some(1), &zc, &pool) {
        Err(e @ AfXdpError::NoZeroCopy { .. }) => assert!(e.to_string().contains("xdp_mode = \"copy\""), "{e}"),
        Err(e) => panic!("expected NoZeroCopy, got: {e}"),
        Ok(_) => panic!("veth has no zero-copy AF_XDP"),
    }
    assert!(!xdp_attached(&v.a), "the failed open left nothing attached");
    let q = afxdp::open("p", &v.a, Some(1), &AfXdpConfig::default(), &pool).unwrap();
    assert!(!q[0].zerocopy(), "auto fell back to copy");
}

#[test]
fn jumbo_frames_go_whole_as_multi_buffer_chains() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    for d in [&v.a, &v.b] {
        ip(&["link", "set", "dev", d, "mtu", "4000"]);
    }
    let pool = Pool::new(4096).unwrap();
    let mut bufs = pool.cache();
    let mut q = open1(&v.a, &pool);
    assert!(q.multi_buffer(), "the socket is bound with XDP_USE_SG");
    let peer = Raw::open(&v.b);
    let mut none = Vec::new();
    q.rx_burst(&mut bufs, &mut none, 64);
    bufs.free_pkts(&none);

    let sent: Vec<Vec<u8>> = [1500, 1900, 3000, 4014].iter().enumerate().map(|(i, &n)| frame(b"SLUICE-JUMBO", i as u32, n)).collect();
    for f in &sent {
        peer.send(f);
    }
    let got = rx_marked(&mut q, &mut bufs, b"SLUICE-JUMBO", sent.len());
    let got_bytes: Vec<Vec<u8>> = got.iter().map(|p| bufs.to_vec(*p)).collect();
    assert_frames(&got_bytes, &sent, "jumbo frames received whole");
    assert!(got[2].is_chained() && got[3].is_chained(), "frames above one buffer arrive as chains");
    let nframes: i64 = got.iter().map(|p| 1 + bufs.frags(*p).count() as i64).sum();
    assert!(nframes > got.len() as i64);
    // Transmitted whole too: the received chains go straight back out.
    assert_eq!(q.tx_burst(&mut bufs, &got, false), got.len());
    let back = peer.recv_marked(b"SLUICE-JUMBO", sent.len());
    assert_frames(&back, &sent, "chains transmitted whole as multi-buffer descriptors");
    let in_use = bufs.in_use();
    q.flush_held(&mut bufs);
    assert_eq!(in_use - bufs.in_use(), nframes, "every frame of every chain completed and went back");
    // A chain longer than the kernel takes (17 buffers) is never cut: taken and failed at
    // once (the caller counts it as tx_error), and the packet behind it still goes out.
    let before = bufs.in_use();
    let huge = bufs.alloc_copy(&frame(b"SLUICE-HUGE", 0, 40_000)).unwrap();
    let behind = frame(b"SLUICE-BEHIND", 1, 200);
    let small = bufs.alloc_copy(&behind).unwrap();
    assert_eq!(q.tx_burst(&mut bufs, &[huge, small], false), 2, "both taken");
    assert_eq!(q.take_tx_failed(), (1, 40_000), "the chain failed (tx_error), not sent");
    assert_eq!(q.take_tx_failed(), (0, 0), "reported once");
    assert_eq!(q.xsk_stats().tx_frags_refused, 1);
    assert_frames(&peer.recv_marked(b"SLUICE-BEHIND", 1), &[behind], "the packet behind the refused chain");
    q.flush_held(&mut bufs);
    assert_eq!(bufs.in_use(), before, "the chain's buffers went back when it failed");
}

/// An IPv4/UDP frame of flow `port` (the kernel hashes the flow to pick a queue).
fn udp_frame(marker: &[u8], port: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    let payload = 8 + marker.len();
    let ip_len = (20 + payload) as u16;
    f.extend_from_slice(&[0x45, 0, (ip_len >> 8) as u8, ip_len as u8, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&9u16.to_be_bytes());
    f.extend_from_slice(&(payload as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(marker);
    f
}

#[test]
fn one_socket_per_receive_queue() {
    let Some(_serial) = root_or_skip() else { return };
    let n = 2;
    let id = std::process::id() % 100_000;
    let v = Veth { a: format!("sxqa{id}"), b: format!("sxqb{id}") };
    let (q, qs) = (n.to_string(), n.to_string());
    ip(&[
        "link",
        "add",
        &v.a,
        "numrxqueues",
        &q,
        "numtxqueues",
        &qs,
        "type",
        "veth",
        "peer",
        "name",
        &v.b,
        "numrxqueues",
        &q,
        "numtxqueues",
        &qs,
    ]);
    for d in [&v.a, &v.b] {
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{d}/disable_ipv6"), "1");
        ip(&["link", "set", "dev", d, "up"]);
    }
    assert_eq!(afxdp::iface_info(&v.a).unwrap().rx_queues, n);
    let pool = Pool::new(8192).unwrap();
    let mut bufs = pool.cache();
    let mut queues = afxdp::open("mq", &v.a, None, &copy_cfg(), &pool).unwrap();
    assert_eq!(queues.len(), n as usize, "a socket per receive queue by default");
    assert_eq!(queues.iter().map(|q| q.queue()).collect::<Vec<_>>(), vec![0, 1]);
    assert!(queues[1].shares_umem());
    let mut none = Vec::new();
    for q in &mut queues {
        q.rx_burst(&mut bufs, &mut none, 64);
    }
    bufs.free_pkts(&none);
    let flows = 64;
    let peer = Raw::open(&v.b);
    for port in 0..flows {
        peer.send(&udp_frame(b"SLUICE-MQ", 1000 + port));
    }
    let mut counts = Vec::new();
    let mut total = 0;
    let end = Instant::now() + Duration::from_secs(5);
    let mut per_queue = vec![0usize; n as usize];
    while total < flows as usize && Instant::now() < end {
        for (i, q) in queues.iter_mut().enumerate() {
            let mut v = Vec::new();
            q.rx_burst(&mut bufs, &mut v, 64);
            for p in v {
                if has(&bufs.to_vec(p), b"SLUICE-MQ") {
                    per_queue[i] += 1;
                    total += 1;
                }
                bufs.free(p);
            }
        }
    }
    counts.extend(per_queue.iter().copied());
    assert_eq!(total, flows as usize, "every frame arrived on one of the queues: {counts:?}");
    assert!(counts.iter().all(|&c| c > 0), "{flows} flows spread over both queues, each read by its own socket: {counts:?}");
}

#[test]
fn a_user_xdp_object_runs_in_front_of_the_sockets() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    let pool = Pool::new(4096).unwrap();
    let mut bufs = pool.cache();
    let obj = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/progs/xdp_xsk_filter.o");
    let cfg = AfXdpConfig { xdp_object: Some(obj.into()), ..copy_cfg() };
    let mut q = afxdp::open("user", &v.a, Some(1), &cfg, &pool).unwrap_or_else(|e| panic!("{e}")).remove(0);
    assert!(xdp_attached(&v.a));
    let mut none = Vec::new();
    q.rx_burst(&mut bufs, &mut none, 64);
    bufs.free_pkts(&none);
    // The stack's view of the interface: what the program passed.
    let stack = Raw::open(&v.a);
    let peer = Raw::open(&v.b);
    let with_type = |ty: u16, seq: u32| {
        let mut f = frame(b"SLUICE-USER", seq, 80);
        f[12..14].copy_from_slice(&ty.to_be_bytes());
        f
    };
    for i in 0..10 {
        peer.send(&with_type(0x88b5, i)); // to the socket
        peer.send(&with_type(0x88b6, i)); // dropped by the program
        peer.send(&with_type(0x88b7, i)); // passed to the stack
    }
    let got = rx_marked(&mut q, &mut bufs, b"SLUICE-USER", 10);
    let types: Vec<u16> = got.iter().map(|p| u16::from_be_bytes([bufs.data(*p)[12], bufs.data(*p)[13]])).collect();
    assert_eq!(types, vec![0x88b5; 10], "only what the program redirects reaches the socket");
    bufs.free_pkts(&got);
    let passed = stack.recv_marked(b"SLUICE-USER", 10);
    assert!(passed.iter().all(|f| f[12..14] == [0x88, 0xb7]), "the stack saw only the passed ethertype");
    assert_eq!(passed.len(), 10, "XDP_PASS frames reached the stack");
    let mut more = Vec::new();
    q.rx_burst(&mut bufs, &mut more, 64);
    assert!(more.iter().all(|p| !has(&bufs.to_vec(*p), b"SLUICE-USER")), "dropped frames never reach the socket");
    bufs.free_pkts(&more);
    drop(q);
    assert!(!xdp_attached(&v.a), "the user program is detached with the port");

    // An object without the XSKMAP says what it needs.
    let bad = concat!(env!("CARGO_MANIFEST_DIR"), "/crates/sluice-ebpf/tests/progs/xdp_adjust.o");
    let cfg = AfXdpConfig { xdp_object: Some(bad.into()), ..copy_cfg() };
    match afxdp::open("user", &v.a, Some(1), &cfg, &pool) {
        Err(e @ AfXdpError::Object { .. }) => assert!(e.to_string().contains("xsks_map"), "{e}"),
        Err(e) => panic!("expected an object error, got: {e}"),
        Ok(_) => panic!("an object without xsks_map was accepted"),
    }
    assert!(!xdp_attached(&v.a));
}

/// A network namespace, deleted on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// A kernel stack behind a veth fills in L4 checksums late (CHECKSUM_PARTIAL: the frame
/// holds only the pseudo-header sum), and an XDP frame carries no word of it: a sender
/// routed through an afxdp port needs tx checksum offload off on its veth. With it off, the
/// datagram arrives with its full checksum.
#[test]
fn a_kernel_sender_with_tx_checksum_offload_off_sends_full_checksums() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    let ns = Netns(format!("sxns{}", std::process::id()));
    ip(&["netns", "add", &ns.0]);
    ip(&["link", "set", "dev", &v.b, "netns", &ns.0]);
    let mac = sluice::port::fmt_mac(&afxdp::iface_info(&v.a).unwrap().mac);
    ip(&["-n", &ns.0, "link", "set", "dev", &v.b, "up"]);
    ip(&["-n", &ns.0, "addr", "add", "10.99.0.2/24", "dev", &v.b]);
    ip(&["-n", &ns.0, "neigh", "add", "10.99.0.1", "lladdr", &mac, "dev", &v.b]);
    let off = Command::new("ip").args(["netns", "exec", &ns.0, "ethtool", "-K", &v.b, "tx", "off"]).status().expect("ethtool");
    assert!(off.success(), "ethtool -K {} tx off", v.b);
    let pool = Pool::new(4096).unwrap();
    let mut bufs = pool.cache();
    let mut q = open1(&v.a, &pool);
    let mut none = Vec::new();
    q.rx_burst(&mut bufs, &mut none, 64);
    bufs.free_pkts(&none);
    let send = "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'SLUICE-CSUM' * 3, ('10.99.0.1', 9))";
    let st = Command::new("ip").args(["netns", "exec", &ns.0, "python3", "-c", send]).status().expect("python3");
    assert!(st.success());
    let got = rx_marked(&mut q, &mut bufs, b"SLUICE-CSUM", 1);
    assert_eq!(got.len(), 1, "the datagram arrived");
    let f = bufs.to_vec(got[0]);
    let eth = sluice::wire::EthernetFrame::new_checked(&f[..]).unwrap();
    let ip4 = sluice::wire::Ipv4Packet::new_checked(eth.payload()).unwrap();
    let udp = sluice::wire::UdpPacket::new_checked(ip4.payload()).unwrap();
    assert!(udp.verify_checksum_v4(&ip4.src_addr(), &ip4.dst_addr()), "the UDP checksum is complete");
}

/// Sluice's own XDP stage runs on the frames an afxdp port receives: `builtin:tx`
/// (XDP_TX with the MACs swapped) sends each one back out of the port it came in on.
#[test]
fn sluice_xdp_runs_on_received_frames_and_xdp_tx_goes_back_out() {
    let Some(_serial) = root_or_skip() else { return };
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let v = Veth::new();
    let toml = format!(
        "pipeline = \"l3fwd\"\n[[ports]]\nname = \"p\"\nkind = \"afxdp\"\niface = \"{}\"\n[ports.afxdp]\nxdp_mode = \"copy\"\n[xdp]\nprogram = \"builtin:tx\"\n",
        v.a
    );
    let cfg = sluice::config::Config::from_toml(&toml, "test").unwrap();
    let pool = Pool::new(cfg.pool_frames).unwrap();
    let mut dp = cfg.build(cfg.tunables(&[]).unwrap(), &pool).unwrap_or_else(|e| panic!("{e}"));
    let mac = afxdp::iface_info(&v.a).unwrap().mac;
    let n = 50;
    let sent: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let mut f = frame(b"SLUICE-XDPTX", i, 90);
            f[..6].copy_from_slice(&mac);
            f
        })
        .collect();
    let (peer, listen, probe_back) = (Raw::open(&v.b), Raw::open(&v.b), Raw::open(&v.b));
    let stop = Arc::new(AtomicBool::new(false));
    let (to_send, stop2) = (sent.clone(), stop.clone());
    let mut probe = frame(b"SLUICE-PROBE", 0, 60);
    probe[..6].copy_from_slice(&mac);
    let sender = std::thread::spawn(move || {
        wait_until_forwarding(&peer, &probe_back, &probe);
        for f in &to_send {
            peer.send(f);
        }
    });
    let receiver = std::thread::spawn(move || {
        let got = listen.recv_marked(b"SLUICE-XDPTX", n as usize);
        stop2.store(true, Ordering::Release);
        got
    });
    let limit = sluice::napi::RunLimit { duration: Some(Duration::from_secs(20)), stop: Some(stop), ..Default::default() };
    dp.run(limit, Duration::from_secs(1), |_, _| {});
    sender.join().unwrap();
    let got = receiver.join().unwrap();
    let want: Vec<Vec<u8>> = sent
        .iter()
        .map(|f| {
            let mut w = f.clone();
            w[..6].copy_from_slice(&f[6..12]);
            w[6..12].copy_from_slice(&f[..6]);
            w
        })
        .collect();
    assert_frames(&got, &want, "every frame came back with its MACs swapped");
    dp.conservation().unwrap();
}

#[test]
fn generic_attach_mode_works_too() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    let pool = Pool::new(4096).unwrap();
    let mut bufs = pool.cache();
    let cfg = AfXdpConfig { attach: afxdp::AttachMode::Generic, ..copy_cfg() };
    let mut q = afxdp::open("g", &v.a, Some(1), &cfg, &pool).unwrap().remove(0);
    assert!(ip(&["link", "show", "dev", &v.a]).contains("xdpgeneric"), "attached in generic (skb) mode");
    let mut none = Vec::new();
    q.rx_burst(&mut bufs, &mut none, 64);
    bufs.free_pkts(&none);
    let peer = Raw::open(&v.b);
    let sent: Vec<Vec<u8>> = (0..10).map(|i| frame(b"SLUICE-GEN", i, 200)).collect();
    for f in &sent {
        peer.send(f);
    }
    let got = rx_marked(&mut q, &mut bufs, b"SLUICE-GEN", sent.len());
    let bytes: Vec<Vec<u8>> = got.iter().map(|p| bufs.to_vec(*p)).collect();
    assert_frames(&bytes, &sent, "received in generic mode");
    bufs.free_pkts(&got);
    drop(q);
    assert!(!xdp_attached(&v.a));
}

/// A measurement, not a check (ignored; run it by hand as root):
/// `cargo test --release --test afxdp forwarding_rate -- --ignored --nocapture`.
/// examples/afxdp-io.toml on two veth pairs for 4 s while a thread floods 60-byte frames
/// into the left pair with AF_PACKET `sendmmsg` (PACKET_QDISC_BYPASS); prints what was
/// sent, forwarded, and the doorbells.
#[test]
#[ignore]
fn forwarding_rate() {
    let Some(_serial) = root_or_skip() else { return };
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let (v1, v2) = (Veth::new(), Veth::new());
    let cfg = sluice::config::Config::from_toml(&two_port_io_config(&v1.a, &v2.a), "bench").unwrap();
    let pool = Pool::new(cfg.pool_frames).unwrap();
    let mut dp = cfg.build(cfg.tunables(&[]).unwrap(), &pool).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (stop2, b1) = (stop.clone(), v1.b.clone());
    let flood = std::thread::spawn(move || {
        let raw = Raw::open(&b1);
        let one: i32 = 1;
        // SAFETY: an int option of the size passed (PACKET_QDISC_BYPASS = 20).
        unsafe { libc::setsockopt(raw.fd, libc::SOL_PACKET, 20, &one as *const i32 as *const libc::c_void, 4) };
        let mut f = frame(b"SLUICE-RATE", 0, 60);
        let mut iov: Vec<libc::iovec> =
            (0..64).map(|_| libc::iovec { iov_base: f.as_mut_ptr() as *mut libc::c_void, iov_len: f.len() }).collect();
        let mut msgs: Vec<libc::mmsghdr> = iov
            .iter_mut()
            .map(|v| {
                // SAFETY: a zeroed mmsghdr is valid; the iovec outlives the calls.
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = v;
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let mut sent = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            // SAFETY: 64 initialised headers pointing at live iovecs.
            let r = unsafe { libc::sendmmsg(raw.fd, msgs.as_mut_ptr(), 64, 0) };
            sent += r.max(0) as u64;
        }
        sent
    });
    let t0 = Instant::now();
    dp.run(sluice::napi::RunLimit { duration: Some(Duration::from_secs(4)), ..Default::default() }, Duration::from_secs(1), |_, _| {});
    let secs = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let sent = flood.join().unwrap();
    let (l, r) = (dp.port_stats(0), dp.port_stats(1));
    println!(
        "sent {sent} ({:.0}/s); left rx {} ({:.0}/s, kernel had no fill buffer for {}); right tx {} ({:.0}/s), {} doorbells ({:.1} packets each)",
        sent as f64 / secs,
        l.rx_packets,
        l.rx_packets as f64 / secs,
        l.rx_nobuf,
        r.tx_packets,
        r.tx_packets as f64 / secs,
        r.doorbells,
        r.tx_packets as f64 / r.doorbells.max(1) as f64
    );
}

/// Without privileges (`sluice run` as nobody, no capabilities) the error names what is
/// missing, and nothing is attached.
#[test]
fn missing_privileges_are_named() {
    let Some(_serial) = root_or_skip() else { return };
    let (v1, v2) = (Veth::new(), Veth::new());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("afxdp.toml");
    std::fs::write(&path, two_port_io_config(&v1.a, &v2.a)).unwrap();
    // The unprivileged user must be able to read the config.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    // A copy of the binary it can reach (the checkout may sit in a directory it cannot).
    let bin = dir.path().join("sluice");
    std::fs::copy(env!("CARGO_BIN_EXE_sluice"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"])
        .arg(&bin)
        .args(["run", "--seconds", "1", "--config"])
        .arg(&path)
        .output()
        .expect("setpriv (util-linux)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an unprivileged run must fail");
    assert!(err.contains("permission denied") && err.contains("CAP_NET_ADMIN") && err.contains(&v1.a), "{err}");
    assert!(!xdp_attached(&v1.a) && !xdp_attached(&v2.a));
}

/// Two-queue interfaces in a datapath of two workers: queue q of each port is polled and
/// sent on by worker q, on its own thread, every socket over the one UMEM.
#[test]
fn two_workers_each_drive_their_own_queue_of_each_port() {
    let Some(_serial) = root_or_skip() else { return };
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let id = std::process::id() % 100_000;
    let pairs: Vec<Veth> = (0..2).map(|k| Veth { a: format!("sxma{id}x{k}"), b: format!("sxmb{id}x{k}") }).collect();
    for v in &pairs {
        let q = ["numrxqueues", "2", "numtxqueues", "2"];
        let mut args = vec!["link", "add", &v.a];
        args.extend_from_slice(&q);
        args.extend_from_slice(&["type", "veth", "peer", "name", &v.b]);
        args.extend_from_slice(&q);
        ip(&args);
        for d in [&v.a, &v.b] {
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{d}/disable_ipv6"), "1");
            ip(&["link", "set", "dev", d, "up"]);
        }
    }
    let cfg = sluice::config::Config::from_toml(&two_port_io_config(&pairs[0].a, &pairs[1].a), "test").unwrap();
    let pool = Pool::new(cfg.pool_frames).unwrap();
    let mut dp = cfg.build(cfg.tunables(&[]).unwrap(), &pool).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dp.workers.len(), 2, "a worker per queue");
    assert_eq!(dp.port_queues(0).count(), 2);
    dp.round(); // every worker stocks its fill rings
    let flows = 64u16;
    let mut sent: Vec<Vec<u8>> = (0..flows).map(|p| udp_frame(b"SLUICE-2W", 2000 + p)).collect();
    let (src, dst) = (Raw::open(&pairs[0].b), Raw::open(&pairs[1].b));
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let to_send = sent.clone();
    let receiver = std::thread::spawn(move || {
        for f in &to_send {
            src.send(f);
        }
        let got = dst.recv_marked(b"SLUICE-2W", flows as usize);
        stop2.store(true, Ordering::Release);
        got
    });
    let limit = sluice::napi::RunLimit { duration: Some(Duration::from_secs(20)), stop: Some(stop), ..Default::default() };
    dp.run(limit, Duration::from_secs(1), |_, _| {});
    let mut got = receiver.join().unwrap();
    // Flows on different queues may overtake each other: compare as sets.
    got.sort();
    sent.sort();
    assert_frames(&got, &sent, "every flow forwarded once, byte-exact");
    let per_queue: Vec<u64> = dp.port_queues(0).map(|q| q.stats().rx_packets).collect();
    assert!(per_queue.iter().all(|&n| n > 0), "both workers received on their queue: {per_queue:?}");
    dp.conservation().unwrap();
}

/// Polls `q` (completions, doorbells for what is still queued) until `want` packets failed
/// or 3 s passed; returns the failures taken.
fn failures_until(q: &mut AfXdpQueue, bufs: &mut sluice::buf::BufCache, want: u64) -> (u64, u64) {
    let mut failed = (0, 0);
    let mut none = Vec::new();
    let end = Instant::now() + Duration::from_secs(3);
    while failed.0 < want && Instant::now() < end {
        none.clear();
        q.rx_burst(bufs, &mut none, 64);
        bufs.free_pkts(&none);
        let (n, b) = q.take_tx_failed();
        failed = (failed.0 + n, failed.1 + b);
        std::thread::sleep(Duration::from_millis(1));
    }
    failed
}

/// The peer is down, so the port's end has no carrier (it is still up): the kernel builds
/// each frame and the device drops it (`__dev_direct_xmit`: NET_XMIT_DROP, sendto says
/// EBUSY; the descriptor is consumed and completed). Each of those is a failed packet, with
/// its bytes, never a transmission.
#[test]
fn frames_the_device_drops_are_failed_not_sent() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    let pool = Pool::new(4096).unwrap();
    let mut bufs = pool.cache();
    let mut q = open1(&v.a, &pool);
    ip(&["link", "set", "dev", &v.b, "down"]);
    // Lengths 100, 110, ...: the bytes say which frames failed.
    let out: Vec<Vec<u8>> = (0..8).map(|i| frame(b"SLUICE-NOCARRIER", i, 100 + 10 * i as usize)).collect();
    let pkts: Vec<Pkt> = out.iter().map(|f| bufs.alloc_copy(f).unwrap()).collect();
    assert_eq!(q.tx_burst(&mut bufs, &pkts, false), 8, "the ring had room: the port takes the burst");
    // Each EBUSY is the frame the kernel was sending: the first not done yet, in order.
    let (n, b) = q.take_tx_failed();
    assert!(n >= 1, "the doorbell met no EBUSY");
    assert_eq!(b, (0..n).map(|i| 100 + 10 * i).sum::<u64>(), "{n} failed: other frames than the first {n}");
    let rest = failures_until(&mut q, &mut bufs, 8 - n);
    assert_eq!((n + rest.0, b + rest.1), (8, 1080), "frames the device dropped were counted as sent");
    assert_eq!(q.stats().tx_packets, 0);
    assert_eq!(q.xsk_stats().tx_completed, 8, "every dropped frame came back on the completion ring");
    assert_eq!(q.xsk_stats().tx_dropped, 8);
    q.flush_held(&mut bufs);
    assert_eq!(q.take_tx_failed(), (0, 0), "nothing counted twice at the flush");
}

/// The port's interface is down (ENETDOWN): the kernel takes nothing, the descriptors wait
/// on the ring. At the shutdown flush they are written off as failed (the socket closes and
/// their frames go back to the pool), not left counted as sent; a second flush adds nothing.
#[test]
fn frames_still_queued_when_the_interface_is_down_at_shutdown_are_failed() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    let pool = Pool::new(4096).unwrap();
    let mut bufs = pool.cache();
    let mut q = open1(&v.a, &pool);
    ip(&["link", "set", "dev", &v.a, "down"]);
    let out: Vec<Vec<u8>> = (0..5).map(|i| frame(b"SLUICE-DOWN", i, 90)).collect();
    let pkts: Vec<Pkt> = out.iter().map(|f| bufs.alloc_copy(f).unwrap()).collect();
    assert_eq!(q.tx_burst(&mut bufs, &pkts, false), 5);
    assert_eq!(q.take_tx_failed(), (0, 0), "queued, not failed yet: the link may come back");
    q.flush_held(&mut bufs);
    assert_eq!(q.take_tx_failed(), (5, 450), "unsent frames counted as sent at shutdown");
    assert_eq!(q.stats().tx_packets, 0);
    q.flush_held(&mut bufs);
    assert_eq!(q.take_tx_failed(), (0, 0), "written off once");
}

/// The tx ring is the port's transmit queue: with the interface down the kernel takes
/// nothing, so a burst larger than the ring (64 slots) fills it, and the port stops its
/// queue (DRV_XOFF) and takes no more (the qdisc would requeue the rest). Once the link is
/// back, the queued frames leave, their completions give BQL back every byte and wake the
/// queue, the rest of the burst is taken, and the peer receives all of it in order.
#[test]
fn a_full_tx_ring_stops_the_queue_and_completions_wake_it() {
    let Some(_serial) = root_or_skip() else { return };
    let v = Veth::new();
    let pool = Pool::new(4096).unwrap();
    let mut bufs = pool.cache();
    let cfg = AfXdpConfig { ring_size: 64, fill_frames: 64, ..copy_cfg() };
    let mut q = afxdp::open(&v.a, &v.a, Some(1), &cfg, &pool).unwrap_or_else(|e| panic!("{e}")).remove(0);
    let peer = Raw::open(&v.b);
    ip(&["link", "set", "dev", &v.a, "down"]);
    let out: Vec<Vec<u8>> = (0..100).map(|i| frame(b"SLUICE-FULL", i, 200)).collect();
    let pkts: Vec<Pkt> = out.iter().map(|f| bufs.alloc_copy(f).unwrap()).collect();
    let took = q.tx_burst(&mut bufs, &pkts, false);
    assert_eq!(took, 64, "the ring holds 64 descriptors");
    let txq = q.tx_queue().expect("an afxdp port has a transmit queue");
    assert!(txq.xoff_drv && txq.stopped(), "a full ring refused packets without stopping the queue");
    assert_eq!(txq.dql.inflight(), 64 * 200);
    ip(&["link", "set", "dev", &v.a, "up"]);
    let mut sent = took;
    let end = Instant::now() + Duration::from_secs(5);
    let mut none = Vec::new();
    while sent < pkts.len() && Instant::now() < end {
        none.clear();
        q.rx_burst(&mut bufs, &mut none, 64);
        bufs.free_pkts(&none);
        q.tx_completions(&mut bufs);
        if !q.tx_queue().unwrap().xoff_drv {
            sent += q.tx_burst(&mut bufs, &pkts[sent..], false);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(sent, pkts.len(), "the queue never woke for the rest of the burst");
    while q.tx_queue().unwrap().dql.inflight() > 0 && Instant::now() < end {
        q.tx_completions(&mut bufs);
        std::thread::sleep(Duration::from_millis(1));
    }
    let txq = q.tx_queue().unwrap();
    assert!(!txq.stopped() && txq.dql.inflight() == 0 && txq.wakes > 0, "{txq:?}");
    assert_frames(&peer.recv_marked(b"SLUICE-FULL", out.len()), &out, "the whole burst arrived in order");
    assert_eq!(q.take_tx_failed(), (0, 0));
    q.flush_held(&mut bufs);
    assert_eq!(q.take_tx_failed(), (0, 0), "nothing was left to fail at the end");
}
