//! `sluice run`: build a datapath from a config (or the lab), run it, report.

use super::RunArgs;
use crate::buf::Pool;
use crate::config::{self, Config, ConfigError, PortKind};
use crate::datapath::{Datapath, Pipeline};
use crate::napi::{RunLimit, StopReason};
use crate::stats::Counters;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Pool(#[from] crate::buf::PoolError),
    #[error("{0}")]
    Other(String),
}

/// What a run produced, for the summary and for tests.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunReport {
    pub pipeline: Pipeline,
    pub seconds: f64,
    pub counters: Counters,
    pub ports: Vec<(String, crate::port::PortStats)>,
    pub check_failures: u64,
    pub check_report: Vec<String>,
    pub conservation: Result<(), String>,
    pub buffers_leaked: i64,
    /// What ended the run.
    pub stop: StopReason,
    /// Ports whose output could not be finished (a capture that could not be written).
    pub output_errors: Vec<String>,
    /// Faults injected by fault-injection ports (`fault = {…}` on a port), if any.
    pub faults: Option<crate::port::fault::FaultStats>,
    /// Per worker (several with RPS): its counters and thread CPU time.
    pub workers: Vec<WorkerLine>,
    /// Ports with a NIC ring: their qdisc and transmit queue (`tc -s qdisc`, BQL).
    pub qdiscs: Vec<QdiscLine>,
}

/// One port's qdisc and transmit queue counters.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QdiscLine {
    pub port: String,
    /// The transmit queue, for a port with several (`mq`: one qdisc per queue).
    pub queue: Option<usize>,
    pub kind: &'static str,
    pub qdisc: crate::tx::qdisc::QdiscStats,
    pub txq: crate::tx::queue::TxqStats,
    pub stops: u64,
    pub wakes: u64,
    pub bql_limit: u32,
    /// The BQL limit and bytes in flight sampled over the run.
    pub bql_trace: crate::tx::queue::BqlTrace,
}

/// The qdisc lines of the ports that have a ring, from the worker that owns each.
fn qdisc_lines(dp: &Datapath) -> Vec<QdiscLine> {
    let mut out = Vec::new();
    let queues = |i: usize| dp.workers.iter().filter(|w| w.ports.get(i).is_some_and(Option::is_some)).count();
    for w in &dp.workers {
        for (i, (port, q)) in w.ports.iter().zip(&w.txq).enumerate() {
            let (Some(port), Some(qd)) = (port, q.qdisc.as_ref()) else { continue };
            let Some(t) = port.tx_queue() else { continue };
            out.push(QdiscLine {
                port: port.name().to_string(),
                // Queue q of a multi-queue port belongs to worker q.
                queue: (queues(i) > 1).then_some(w.id),
                kind: qd.kind().name(),
                qdisc: *qd.stats(),
                txq: q.stats,
                stops: t.stops,
                wakes: t.wakes,
                // The last limit a qdisc run saw (the drain resets the driver's at shutdown).
                bql_limit: q.stats.bql_limit_last,
                bql_trace: q.bql_trace.clone(),
            });
        }
    }
    out
}

/// One worker's share of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkerLine {
    pub id: usize,
    pub counters: Counters,
    /// User + system CPU seconds of its thread.
    pub cpu_seconds: Option<f64>,
}

impl RunReport {
    /// Check-sink failures not explained by injected damage (corrupted or truncated frames
    /// may fail the check; nothing else may).
    pub fn unexplained_check_failures(&self) -> u64 {
        self.check_failures.saturating_sub(self.faults.map_or(0, |f| f.damaged()))
    }

    pub fn rx_mpps(&self) -> f64 {
        self.counters.rx as f64 / self.seconds.max(1e-9) / 1e6
    }
    pub fn tx_mpps(&self) -> f64 {
        self.counters.tx as f64 / self.seconds.max(1e-9) / 1e6
    }
}

/// Resolves the config a run uses: file or lab, pipeline override, pcap substitutions.
pub fn resolve_config(args: &RunArgs) -> Result<Config, RunError> {
    let pipeline: Option<Pipeline> = args.pipeline.as_deref().map(str::parse).transpose().map_err(RunError::Other)?;
    let mut cfg = match &args.config {
        Some(p) => Config::load(p)?,
        None => config::lab(pipeline.unwrap_or(Pipeline::L3fwd)),
    };
    if let Some(p) = pipeline {
        cfg.pipeline = p;
        if matches!(p, Pipeline::Io | Pipeline::Macswap) {
            // A router config run as io/macswap: its sockets go with the receive path (a
            // file that says `pipeline = "io"` and binds sockets is refused).
            cfg.udp_sockets.clear();
            cfg.udp_reader_cpu = None;
        }
    }
    if let Some(spec) = &args.xdp {
        cfg.xdp = Some(config::XdpConfig {
            program: spec.clone(),
            mode: args.xdp_mode.as_deref().unwrap_or("native").parse().map_err(RunError::Other)?,
            engine: args.xdp_engine.as_deref().unwrap_or("jit").parse().map_err(RunError::Other)?,
            section: args.xdp_section.clone(),
            maps: None,
            map: Vec::new(),
        });
    } else if let Some(x) = cfg.xdp.as_mut() {
        // The config file's program, with the command line's choices on top.
        if let Some(m) = &args.xdp_mode {
            x.mode = m.parse().map_err(RunError::Other)?;
        }
        if let Some(e) = &args.xdp_engine {
            x.engine = e.parse().map_err(RunError::Other)?;
        }
        if args.xdp_section.is_some() {
            x.section = args.xdp_section.clone();
        }
    } else if args.xdp_mode.is_some() || args.xdp_engine.is_some() || args.xdp_section.is_some() {
        return Err(RunError::Other(
            "--xdp-mode, --xdp-engine and --xdp-section need a program (--xdp PROG or [xdp] in the config)".into(),
        ));
    }
    if args.pcap_in.is_some() && args.pcap_out.is_some() && cfg.ports.len() < 2 {
        return Err(RunError::Other(
            "--pcap-in replaces the first port and --pcap-out the last: with one port they would be the same".into(),
        ));
    }
    if let Some(pin) = &args.pcap_in {
        let first = cfg.ports.first_mut().ok_or_else(|| RunError::Other("config has no ports".into()))?;
        become_capture(first, PortKind::PcapIn, pin);
    }
    if let Some(pout) = &args.pcap_out {
        let last = cfg.ports.last_mut().ok_or_else(|| RunError::Other("config has no ports".into()))?;
        become_capture(last, PortKind::PcapOut, pout);
        last.tso = args.pcap_out_tso;
    }
    for spec in &args.ports {
        apply_port_flag(&mut cfg, spec).map_err(|e| RunError::Other(format!("--port {spec}: {e}")))?;
    }
    for spec in &args.captures {
        let (port, file) = spec
            .split_once('=')
            .filter(|(p, f)| !p.is_empty() && !f.is_empty())
            .ok_or_else(|| RunError::Other(format!("--capture {spec}: expected PORT=FILE")))?;
        let names: Vec<&str> = cfg.ports.iter().map(|p| p.name.as_str()).collect();
        let Some(i) = names.iter().position(|n| *n == port) else {
            return Err(RunError::Other(format!("--capture {spec}: no port named `{port}` (ports: {})", names.join(", "))));
        };
        cfg.ports[i].capture = Some(file.into());
    }
    Ok(cfg)
}

/// A real interface on the command line: `KIND:IFACE[@QUEUES]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortFlag {
    pub kind: PortKind,
    pub iface: String,
    pub queues: Option<u16>,
}

/// Parses `--port KIND:IFACE[@QUEUES]`.
pub fn parse_port_flag(spec: &str) -> Result<PortFlag, String> {
    let (kind, rest) = spec.split_once(':').ok_or("expected KIND:IFACE[@QUEUES], e.g. afpacket:eth1 or afpacket:veth0@2")?;
    let kind = match kind {
        "afpacket" => PortKind::Afpacket,
        "afxdp" => PortKind::Afxdp,
        k => return Err(format!("unknown port kind `{k}` (afpacket, afxdp)")),
    };
    let (iface, queues) = match rest.split_once('@') {
        Some((i, q)) => {
            let n: u16 = q.parse().map_err(|_| format!("`{q}` is not a queue count"))?;
            if n == 0 || n > crate::port::rss::MAX_QUEUES {
                return Err(format!("{n} queues: between 1 and {}", crate::port::rss::MAX_QUEUES));
            }
            (i, Some(n))
        }
        None => (rest, None),
    };
    if iface.is_empty() {
        return Err("no interface name".into());
    }
    Ok(PortFlag { kind, iface: iface.to_string(), queues })
}

/// Applies one `--port`: the config's port on that interface changes kind, or a port is added.
/// `--pcap-in` / `--pcap-out`: the port becomes a capture reader or writer; its addresses,
/// routes and name stay, and whatever described what it was before (generator, check, NIC
/// model, real interface, RSS queues) goes with it, so a config's port of any kind can be
/// replaced.
fn become_capture(pc: &mut crate::config::PortConfig, kind: PortKind, path: &std::path::Path) {
    if pc.kind != PortKind::PcapIn {
        pc.repeat = None;
    }
    if kind == PortKind::PcapOut {
        // A capture writer receives nothing: no peer to send to, no receive queue to steer.
        pc.peer = None;
        pc.rps_cpus = None;
    }
    pc.qdisc = None;
    pc.kind = kind;
    pc.pcap = Some(path.to_path_buf());
    pc.gen = None;
    pc.check = None;
    pc.sim = None;
    pc.afpacket = None;
    pc.afxdp = None;
    pc.iface = None;
    pc.promisc = false;
    pc.tso = false;
    pc.rss_queues = None;
    pc.rss_key = None;
    pc.rss_indir = None;
    pc.rx_hash = None;
}

fn apply_port_flag(cfg: &mut Config, spec: &str) -> Result<(), String> {
    let f = parse_port_flag(spec)?;
    let at = cfg
        .ports
        .iter()
        .position(|p| p.iface.as_deref() == Some(f.iface.as_str()))
        .or_else(|| cfg.ports.iter().position(|p| p.name == f.iface && p.iface.is_none()));
    match at {
        Some(i) => {
            let pc = &mut cfg.ports[i];
            if !pc.kind.is_real() {
                // The in-memory port's addresses stay; what described its simulated link
                // (made-up MAC, MTU, generator, check, capture file) goes: the interface has its own.
                pc.mac.clear();
                pc.mtu = None;
                pc.gen = None;
                pc.check = None;
                pc.pcap = None;
                pc.repeat = None;
                pc.sim = None;
                pc.tso = false;
                pc.qdisc = None;
                pc.rss_key = None;
                pc.rss_indir = None;
                pc.rx_hash = None;
            }
            if f.kind != PortKind::Afxdp {
                pc.afxdp = None;
            }
            if f.kind != PortKind::Afpacket {
                pc.promisc = false;
                pc.afpacket = None;
                pc.tso = false;
            }
            pc.kind = f.kind;
            if pc.name != f.iface {
                pc.iface = Some(f.iface.clone());
            }
            if f.queues.is_some() {
                pc.rss_queues = f.queues;
            }
        }
        None => {
            let mut text = format!("name = {:?}\nkind = \"afpacket\"\n", f.iface);
            if let Some(q) = f.queues {
                text.push_str(&format!("rss_queues = {q}\n"));
            }
            let mut pc: config::PortConfig = toml::from_str(&text).map_err(|e| e.to_string())?;
            pc.kind = f.kind;
            cfg.ports.push(pc);
        }
    }
    Ok(())
}

/// Builds the datapath for a resolved config.
pub fn build(cfg: &Config, set: &[String]) -> Result<Datapath, RunError> {
    let tun = cfg.tunables(set)?;
    let pool = Pool::new(cfg.pool_frames)?;
    Ok(cfg.build(tun, &pool)?)
}

/// Runs to completion. `tick` sees the datapath about once a second.
pub fn execute(args: &RunArgs, tick: impl FnMut(&Counters, Duration)) -> Result<RunReport, RunError> {
    execute_until(args, None, tick)
}

/// The run's limits: `--seconds`, `--packets`; without either, bounded inputs (a capture, a
/// counted generator) end it, and with none of those it runs 10 s.
pub fn run_limit(args: &RunArgs, dp: &Datapath, stop: Option<Arc<AtomicBool>>) -> Result<RunLimit, RunError> {
    if let Some(s) = args.seconds {
        super::parse_seconds(&s.to_string()).map_err(|e| RunError::Other(format!("--seconds {e}")))?;
    }
    if args.packets == Some(0) {
        return Err(RunError::Other("--packets: the packet count must be at least 1".into()));
    }
    let bounded = dp.all_queues().any(|p| p.rx_bounded());
    let duration = match args.seconds {
        Some(s) => Some(Duration::from_secs_f64(s)),
        None if bounded || args.packets.is_some() => None,
        None => Some(Duration::from_secs(10)),
    };
    Ok(RunLimit { duration, packets: args.packets, until_bounded_inputs_done: true, stop })
}

/// [`execute`] with a stop flag (raised by SIGINT/SIGTERM): the run stops at a poll boundary,
/// flushes every queue and capture, and reports as usual.
pub fn execute_until(args: &RunArgs, stop: Option<Arc<AtomicBool>>, tick: impl FnMut(&Counters, Duration)) -> Result<RunReport, RunError> {
    let cfg = resolve_config(args)?;
    let mut dp = build(&cfg, &args.set)?;
    let limit = run_limit(args, &dp, stop)?;
    let (el, why, failed) = dp.run_until(&limit, Duration::from_secs(1), tick);
    let mut rep = report(&dp, el);
    rep.stop = why;
    rep.output_errors = failed.iter().map(|(port, e)| format!("port {port}: {e}")).collect();
    Ok(rep)
}

pub fn report(dp: &Datapath, el: Duration) -> RunReport {
    let ports: Vec<_> = dp.ports().enumerate().map(|(i, p)| (p.name().to_string(), dp.port_stats(i))).collect();
    RunReport {
        pipeline: dp.net.pipeline,
        seconds: el.as_secs_f64(),
        counters: dp.counters(),
        check_failures: ports.iter().map(|p| p.1.check_failures).sum(),
        check_report: dp.all_queues().flat_map(|p| p.check_report()).collect(),
        ports,
        conservation: dp.conservation().map_err(|e| e.to_string()),
        buffers_leaked: dp.buffers_in_use(),
        stop: StopReason::InputDone,
        output_errors: Vec::new(),
        faults: dp.all_queues().any(|p| p.fault_stats().is_some()).then(|| crate::port::fault::FaultStats::of_ports(dp.all_queues())),
        workers: dp
            .workers
            .iter()
            .map(|w| WorkerLine { id: w.id, counters: w.c.clone(), cpu_seconds: w.cpu_time.map(|(u, s)| u + s) })
            .collect(),
        qdiscs: qdisc_lines(dp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_flags_parse() {
        let f = parse_port_flag("afpacket:veth0@4").unwrap();
        assert_eq!(f, PortFlag { kind: PortKind::Afpacket, iface: "veth0".into(), queues: Some(4) });
        assert_eq!(parse_port_flag("afpacket:eth1").unwrap().queues, None);
        assert_eq!(parse_port_flag("afxdp:veth0").unwrap().kind, PortKind::Afxdp);
        assert!(parse_port_flag("dpdk:veth0").unwrap_err().contains("unknown port kind"));
        assert!(parse_port_flag("veth0").unwrap_err().contains("KIND:IFACE"));
        assert!(parse_port_flag("afpacket:").unwrap_err().contains("no interface"));
        assert!(parse_port_flag("afpacket:x@0").unwrap_err().contains("between 1"));
        assert!(parse_port_flag("afpacket:x@y").unwrap_err().contains("queue count"));
    }

    /// `--pipeline io` on a router config (as scripts/acceptance does) drops its sockets,
    /// which the io pipeline would never deliver to and a config saying io refuses; the
    /// pcap flags drop what a capture port would not read (a pcap-out port's peer).
    #[test]
    fn overrides_drop_the_settings_the_new_pipeline_or_kind_ignores() {
        let router = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/router.toml"));
        let io = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/io.toml"));
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.pcap");
        for args in [
            RunArgs { config: Some(router), pipeline: Some("io".into()), ..RunArgs::default() },
            RunArgs { pipeline: Some("macswap".into()), ..RunArgs::default() },
            RunArgs { config: Some(io), pcap_out: Some(out.clone()), ..RunArgs::default() },
        ] {
            let cfg = resolve_config(&args).unwrap();
            assert!(cfg.udp_sockets.is_empty(), "{args:?}");
            build(&cfg, &[]).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
    }

    #[test]
    fn port_flags_change_or_add_ports() {
        let mut args = RunArgs { ports: vec!["afpacket:sink0@2".into(), "afpacket:eth9".into()], ..RunArgs::default() };
        args.captures = vec!["eth9=/tmp/x.pcap".into()];
        let cfg = resolve_config(&args).unwrap();
        let sink = &cfg.ports[1];
        assert_eq!((sink.name.as_str(), sink.kind, sink.rss_queues), ("sink0", PortKind::Afpacket, Some(2)));
        assert!(sink.mac.is_empty() && sink.mtu.is_none() && sink.check.is_none(), "the simulated link's settings stay");
        assert!(!sink.ipv4.is_empty(), "addresses go with the port");
        let added = &cfg.ports[2];
        assert_eq!((added.name.as_str(), added.kind, added.iface_name()), ("eth9", PortKind::Afpacket, "eth9"));
        assert_eq!(added.capture.as_deref(), Some(std::path::Path::new("/tmp/x.pcap")));
        args.captures = vec!["nosuch=/tmp/x.pcap".into()];
        let e = resolve_config(&args).unwrap_err().to_string();
        assert!(e.contains("no port named `nosuch`") && e.contains("gen0"), "{e}");
        args.captures = vec!["gen0".into()];
        assert!(resolve_config(&args).unwrap_err().to_string().contains("PORT=FILE"));
    }
}
