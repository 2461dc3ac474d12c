//! gro-normal-batch.txt: netperf TCP streams into a Solarflare NIC with GRO on and off
//! (off = the uncoalescable case), before and after GRO_NORMAL packets are delivered to the
//! listified receive path in batches of `net.core.gro_normal_batch` segments.
//! sluice: the l3fwd pipeline forwarding TCP trains from the in-memory generator into a null
//! sink without TSO (GRO packets are split again by GSO), GRO off vs on for 1 and 4
//! streams; and uncoalescable traffic (66-byte TCP frames without payload) with
//! GRO on, `gro_normal_batch` swept over 1..64.

use crate::bench::experiment::{Arm, Comparison, Experiment, SeedFigure, Sweep};
use crate::bench::BenchError;
use crate::config::{self, Config, PortKind};
use crate::datapath::Pipeline;
use crate::port::gen::{FrameSize, IpVersion, L4Proto};

/// The lab's router fed `streams` TCP/IPv4 trains (`burst` consecutive segments per
/// stream, MSS 1448 in 1514-byte frames unless `frame` says less), into a null sink.
fn tcp(streams: u32, burst: u32, frame: u16, ts_every: u32) -> Result<Config, BenchError> {
    let mut c = config::lab(Pipeline::L3fwd);
    let gen = c.ports.get_mut(0).and_then(|p| p.gen.as_mut()).ok_or_else(|| BenchError::Experiment("lab has no generator".into()))?;
    gen.ip = IpVersion::V4;
    gen.proto = L4Proto::Tcp;
    gen.tcp_train = 1;
    gen.tcp_ts_every = ts_every;
    gen.flows = streams;
    gen.burst = burst;
    gen.size = FrameSize::Fixed(frame);
    let sink = c.ports.get_mut(1).ok_or_else(|| BenchError::Experiment("lab has no sink".into()))?;
    sink.kind = PortKind::Null;
    sink.check = None;
    Ok(c)
}

/// Busy-loop iterations per packet through the receive path for the "heavy stack" arms:
/// about 250 ns, a kernel-like cost per packet walking the stack (what GRO saves per merged
/// segment).
const HEAVY: &str = "rx.extra_work=150";

/// The batch sizes of the sweep.
const BATCHES: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

pub fn build() -> Result<Experiment, BenchError> {
    let one = tcp(1, 64, 1514, 0)?;
    let heavy = one.clone();
    let four = tcp(4, 16, 1514, 0)?;
    // 64-byte-class frames: 66 bytes = Ethernet + IPv4 + TCP with the timestamp block, no
    // payload (GRO holds no segment without data).
    let uncoalescable = tcp(16, 4, 66, 1)?;
    let mut arms = vec![
        Arm::sluice("1s-off", "TCP 1 stream, GRO off", one.clone(), &["gro=0"]),
        Arm::sluice("1s-on", "TCP 1 stream, GRO on, GSO", one, &["gro=1"]),
        Arm::sluice("4s-off", "TCP 4 streams, GRO off", four.clone(), &["gro=0"]),
        Arm::sluice("4s-on", "TCP 4 streams, GRO on, GSO", four, &["gro=1"]),
        Arm::sluice("1s-heavy-off", "TCP 1 stream, heavy stack, GRO off", heavy.clone(), &["gro=0", HEAVY]),
        Arm::sluice("1s-heavy-on", "TCP 1 stream, heavy stack, GRO on, GSO", heavy, &["gro=1", HEAVY]),
        Arm::sluice("unc-gro-off", "uncoalescable, GRO stage off (poll = one list)", uncoalescable.clone(), &["gro=0"]),
    ];
    for b in BATCHES {
        let set = format!("net.core.gro_normal_batch={b}");
        arms.push(
            Arm::sluice(&format!("unc-batch-{b}"), &format!("uncoalescable, GRO on, batch {b}"), uncoalescable.clone(), &["gro=1", &set])
                .at("uncoalescable, GRO on", b as f64),
        );
    }
    let mut tso = tcp(1, 64, 1514, 0)?;
    if let Some(sink) = tso.ports.get_mut(1) {
        sink.tso = true;
    }
    arms.push(Arm::sluice("1s-tso", "TCP 1 stream, GRO on, TSO egress", tso, &["gro=1"]));
    let tso_arm = arms.len() - 1;
    let batch = |b: u32| 7 + BATCHES.iter().position(|&x| x == b).unwrap_or(0);
    Ok(Experiment {
        name: "gro",
        title: "GRO and gro_normal_batch (gro-normal-batch.txt)".into(),
        description: "The l3fwd pipeline forwarding TCP/IPv4 from the in-memory generator to a null sink that cannot \
             segment (no TSO). **TCP 1 / 4 streams**: in-order trains of 1514-byte frames (MSS 1448, IP IDs \
             incrementing), GRO off (`gro=0`: each segment walks the stack) vs on (`gro=1`: the GRO table merges \
             each stream's segments into packets of up to 64 KB, which walk the stack once and are split again by \
             GSO before the sink; the **TSO egress** arm's sink takes them whole). **Heavy stack**: the 1-stream arms with `rx.extra_work=150` \
             (a busy loop of about 250 ns per packet in the receive path: a kernel-like per-packet cost, which \
             GRO pays once per merged packet). **Uncoalescable**: 16 TCP flows of 66-byte frames (headers with the timestamp \
             option, no payload, like pure ACKs): GRO passes each on as it is (the seed's \"GRO off\" case); GRO on with \
             `net.core.gro_normal_batch` from 1 (every packet delivered on its own: no list delivery) to 64, and the \
             GRO stage off (the poll's packets delivered as one list, sluice's mode before this issue). Mpps counts \
             received segments."
            .into(),
        arms,
        comparisons: vec![
            Comparison { a: 0, b: 1, title: "TCP 1 stream: GRO on (GSO on egress) vs off".into(), ratio: true },
            Comparison { a: 2, b: 3, title: "TCP 4 streams: GRO on (GSO on egress) vs off".into(), ratio: true },
            Comparison { a: 0, b: tso_arm, title: "TCP 1 stream: GRO on into a TSO egress (GRO packets leave whole) vs GRO off".into(), ratio: true },
            Comparison { a: 4, b: 5, title: "TCP 1 stream, heavy stack: GRO on (GSO on egress) vs off".into(), ratio: true },
            Comparison { a: batch(1), b: batch(8), title: "uncoalescable: gro_normal_batch 8 vs 1".into(), ratio: true },
            Comparison { a: batch(8), b: 6, title: "uncoalescable: GRO stage off (one list per poll) vs batch 8".into(), ratio: true },
        ],
        seed: Some(SeedFigure {
            file: "gro-normal-batch.txt",
            setup: "netperf TCP 1 stream, GRO off, busy_read = 50, Solarflare sfn8522 back to back",
            baseline_label: "net-next",
            baseline: 6.488,
            result_label: "after #3",
            result: 7.351,
            stated_change_pct: Some(13.3),
            unit: "Gbit/s",
            comparison: 4,
        }),
        cap: None,
        default_runs: 6,
        quick_runs: None,
        sweep: Some(Sweep { x_label: "net.core.gro_normal_batch (segments)".into(), metric: "mpps" }),
        notes: vec![
            "GSO splits a GRO packet in place: each received frame becomes a segment again (the head's Ethernet and \
             IP headers copied in front of its payload, its own TCP header kept). The TSO arm's null sink takes GRO \
             packets whole (`tso = true`)."
                .into(),
            "The seed's GRO-off runs are throughput of real TCP through a NIC; sluice forwards generated segments, so \
             compare relative changes."
                .into(),
        ],
    })
}
