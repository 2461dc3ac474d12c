//! Configuration: ports, addresses, routes, neighbours, pipeline and tunables, from a TOML
//! file or the built-in lab; and building a datapath from it.

pub use crate::tunables::{TunableError, Tunables, TUNABLES};

use crate::buf::Pool;
use crate::datapath::Datapath;
pub use crate::net::Pipeline;
use crate::port::gen::{GenConfig, Generator};
use crate::port::pcap::{PcapIn, PcapOut};
use crate::port::sink::{CheckSpec, Sink, SinkKind};
use crate::port::{parse_mac, Port};
use crate::rx::route::{Iface, NextHop};
use crate::xdp::ebpf::{EngineKind, OpenedXdp};
use crate::xdp::{XdpMode, XdpProgram};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {msg}")]
    File { path: String, msg: String },
    #[error("{field}: {msg}")]
    Field { field: String, msg: String },
    #[error(transparent)]
    Tunable(#[from] TunableError),
}

/// Ethernet header plus one VLAN tag: what a receive buffer holds besides the MTU.
const MAX_L2_HEADER: usize = 18;

fn field(field: impl Into<String>, msg: impl Into<String>) -> ConfigError {
    ConfigError::Field { field: field.into(), msg: msg.into() }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortKind {
    Gen,
    Null,
    Count,
    Check,
    Capture,
    PcapIn,
    PcapOut,
    /// The NIC model (`port::sim`): a transmit ring drained at a line rate.
    Sim,
    /// A Linux interface through AF_PACKET rings (`port::afpacket`).
    Afpacket,
    /// A Linux interface through AF_XDP sockets, one per receive queue (`port::afxdp`).
    Afxdp,
}

impl PortKind {
    /// The name a config gives the kind (`kind = "pcap-in"`).
    pub fn name(self) -> &'static str {
        match self {
            PortKind::Gen => "gen",
            PortKind::Null => "null",
            PortKind::Count => "count",
            PortKind::Check => "check",
            PortKind::Capture => "capture",
            PortKind::PcapIn => "pcap-in",
            PortKind::PcapOut => "pcap-out",
            PortKind::Sim => "sim",
            PortKind::Afpacket => "afpacket",
            PortKind::Afxdp => "afxdp",
        }
    }

    /// A real Linux interface: its MAC and MTU default to the interface's.
    pub fn is_real(self) -> bool {
        matches!(self, PortKind::Afpacket | PortKind::Afxdp)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    pub name: String,
    pub kind: PortKind,
    /// Required for in-memory ports; a real interface's (`afpacket`, `afxdp`) defaults to its own.
    #[serde(default)]
    pub mac: String,
    /// Real interfaces: the Linux interface (default: the port's name).
    #[serde(default)]
    pub iface: Option<String>,
    /// Real interfaces: receive every frame on the link (PACKET_MR_PROMISC; the kernel
    /// restores the interface when the socket closes).
    #[serde(default)]
    pub promisc: bool,
    /// Write a pcap of everything the port receives and transmits (`port::tap`); relative
    /// to the config file.
    #[serde(default)]
    pub capture: Option<PathBuf>,
    /// `[ports.afpacket]`: ring sizes and the receive block timeout of an afpacket port.
    #[serde(default)]
    pub afpacket: Option<crate::port::afpacket::RingConfig>,
    #[serde(default)]
    pub ipv4: Vec<String>,
    #[serde(default)]
    pub ipv6: Vec<String>,
    /// Default 1500; a real interface's defaults to its own.
    #[serde(default)]
    pub mtu: Option<u16>,
    #[serde(default)]
    pub vlans: Vec<u16>,
    /// io / macswap: the port received packets go out of.
    #[serde(default)]
    pub peer: Option<String>,
    #[serde(default)]
    pub gen: Option<GenConfig>,
    #[serde(default)]
    pub check: Option<CheckConfig>,
    /// pcap-in / pcap-out: the capture file (relative to the config file).
    #[serde(default)]
    pub pcap: Option<PathBuf>,
    /// pcap-in: how many times to replay the file.
    #[serde(default)]
    pub repeat: Option<u64>,
    /// Fault injection on this port's wire (`port::fault`).
    #[serde(default)]
    pub fault: Option<crate::port::fault::FaultConfig>,
    /// Queues (RSS, `ethtool -L combined N`): a generator spreads its flows over its receive
    /// queues by Toeplitz hash and indirection table; an in-memory sink (and capture) takes a
    /// transmit queue per queue (XPS: each worker sends on its own). Queue q belongs to worker q. Default: the `rss_queues` tunable for those
    /// kinds, 1 for the others (captures, pcap files).
    #[serde(default)]
    pub rss_queues: Option<u16>,
    /// The Toeplitz key in hex, 40 or 52 bytes (`ethtool -X hkey`); default Microsoft's.
    #[serde(default)]
    pub rss_key: Option<String>,
    /// The 128-entry indirection table (`ethtool -X weight/equal`); default round robin.
    #[serde(default)]
    pub rss_indir: Option<Vec<u16>>,
    /// Whether the generator hands its RSS hash to the stack with each packet (`rxhash`);
    /// default on when the port has more than one queue.
    #[serde(default)]
    pub rx_hash: Option<bool>,
    /// RPS per receive queue (sysfs `queues/rx-N/rps_cpus`): one CPU list per queue, e.g.
    /// `["0-1", "1"]`, each overriding the `rps_cpus` tunable for its queue.
    #[serde(default)]
    pub rps_cpus: Option<Vec<String>>,
    /// `sim` ports: the NIC model's line rate, ring, doorbell cost, moderation, BQL.
    #[serde(default)]
    pub sim: Option<crate::port::sim::SimConfig>,
    /// Sinks, pcap-out and afpacket: the port segments TCP (and UDP fraglist) GSO packets in
    /// "hardware" (TSO), so GRO packets reach it whole instead of split by GSO.
    #[serde(default)]
    pub tso: bool,
    /// `[ports.qdisc]`: this `sim`, `afpacket` or `afxdp` port's qdisc (default:
    /// `net.core.default_qdisc`); other ports take every packet at once, with nothing to
    /// queue for.
    #[serde(default)]
    pub qdisc: Option<QdiscConfig>,
    /// `[ports.afxdp]`: an `afxdp` port's bind mode, rings and attach mode.
    #[serde(default)]
    pub afxdp: Option<crate::port::afxdp::AfXdpConfig>,
}

/// `[ports.qdisc]`, tc-like: `kind` (pfifo_fast, noqueue, pfifo, bfifo, fq_codel) and the
/// kind's parameters: `limit` (packets; bfifo bytes), and for fq_codel `flows`, `quantum`,
/// `target_us`, `interval_us`, `ecn`, `drop_batch`, `memory_limit` (bytes).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QdiscConfig {
    pub kind: String,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub flows: Option<u32>,
    #[serde(default)]
    pub quantum: Option<u32>,
    #[serde(default)]
    pub target_us: Option<u64>,
    #[serde(default)]
    pub interval_us: Option<u64>,
    #[serde(default)]
    pub ecn: Option<bool>,
    #[serde(default)]
    pub drop_batch: Option<u32>,
    #[serde(default)]
    pub memory_limit: Option<u32>,
}

impl QdiscConfig {
    /// The qdisc it describes; errors name the setting (`what` is where the table is).
    pub fn spec(&self, what: &str) -> Result<crate::tx::qdisc::QdiscSpec, ConfigError> {
        use crate::tx::qdisc::{QdiscKind, QdiscSpec};
        let kind: QdiscKind = self.kind.parse().map_err(|e: String| field(format!("{what}.kind"), e))?;
        let mut spec = QdiscSpec::new(kind);
        if self.limit.is_some() && kind == QdiscKind::Noqueue {
            return Err(field(format!("{what}.limit"), "noqueue has no queue to limit"));
        }
        spec.limit = self.limit;
        let fq: [(&str, bool); 7] = [
            ("flows", self.flows.is_some()),
            ("quantum", self.quantum.is_some()),
            ("target_us", self.target_us.is_some()),
            ("interval_us", self.interval_us.is_some()),
            ("ecn", self.ecn.is_some()),
            ("drop_batch", self.drop_batch.is_some()),
            ("memory_limit", self.memory_limit.is_some()),
        ];
        if kind != QdiscKind::FqCodel {
            if let Some((name, _)) = fq.iter().find(|(_, set)| *set) {
                return Err(field(format!("{what}.{name}"), format!("only fq_codel takes `{name}` (this qdisc is {})", kind.name())));
            }
        }
        spec.flows = self.flows.unwrap_or(spec.flows);
        spec.quantum = self.quantum.unwrap_or(spec.quantum);
        spec.target_ns = self.target_us.map_or(spec.target_ns, |u| u.saturating_mul(1000));
        spec.interval_ns = self.interval_us.map_or(spec.interval_ns, |u| u.saturating_mul(1000));
        spec.ecn = self.ecn.unwrap_or(spec.ecn);
        spec.drop_batch = self.drop_batch.unwrap_or(spec.drop_batch);
        spec.memory_limit = self.memory_limit.unwrap_or(spec.memory_limit);
        spec.validate().map_err(|(p, msg)| {
            let p = if p == "target/interval" { "target_us/interval_us" } else { p };
            field(format!("{what}.{p}"), msg)
        })?;
        Ok(spec)
    }
}

/// A per-port setting and the ports that read it. Settings every port reads (`name`,
/// `kind`, `mac`, `mtu`, `ipv4`, `ipv6`, `vlans`, `capture`, `fault`) are not listed;
/// `rss_queues` is checked by `Config::queues_of` (one queue for the kinds that have one).
struct PortSetting {
    name: &'static str,
    /// The config sets it.
    set: fn(&PortConfig) -> bool,
    /// This port reads it.
    read_by: fn(&PortConfig) -> bool,
    /// Who reads it, for the error.
    readers: &'static str,
}

/// The readers of `rss_key` and `rss_indir`.
const RSS_READERS: &str = "gen ports and sim ports with a `gen` table, whose flows RSS spreads over their receive queues";

/// Which ports read each per-port setting; on any other port it is refused.
const PORT_SETTINGS: &[PortSetting] = &[
    PortSetting {
        name: "iface",
        set: |p| p.iface.is_some(),
        read_by: |p| p.kind.is_real(),
        readers: "real interfaces: afpacket and afxdp ports",
    },
    PortSetting {
        name: "promisc",
        set: |p| p.promisc,
        read_by: |p| p.kind == PortKind::Afpacket,
        readers: "afpacket ports (an afxdp socket takes what the interface's queue receives)",
    },
    PortSetting { name: "afpacket", set: |p| p.afpacket.is_some(), read_by: |p| p.kind == PortKind::Afpacket, readers: "afpacket ports" },
    PortSetting { name: "afxdp", set: |p| p.afxdp.is_some(), read_by: |p| p.kind == PortKind::Afxdp, readers: "afxdp ports" },
    PortSetting { name: "sim", set: |p| p.sim.is_some(), read_by: |p| p.kind == PortKind::Sim, readers: "sim ports" },
    PortSetting {
        name: "gen",
        set: |p| p.gen.is_some(),
        read_by: |p| matches!(p.kind, PortKind::Gen | PortKind::Sim),
        readers: "gen ports, and sim ports as the traffic arriving from their wire",
    },
    PortSetting { name: "check", set: |p| p.check.is_some(), read_by: |p| p.kind == PortKind::Check, readers: "check ports" },
    PortSetting {
        name: "pcap",
        set: |p| p.pcap.is_some(),
        read_by: |p| matches!(p.kind, PortKind::PcapIn | PortKind::PcapOut),
        readers: "pcap-in and pcap-out ports (`capture` records any port's traffic)",
    },
    PortSetting { name: "repeat", set: |p| p.repeat.is_some(), read_by: |p| p.kind == PortKind::PcapIn, readers: "pcap-in ports" },
    PortSetting {
        name: "peer",
        set: |p| p.peer.is_some(),
        read_by: PortConfig::receives,
        readers: "ports that receive: the io and macswap pipelines send what a port receives to its peer",
    },
    PortSetting { name: "rss_key", set: |p| p.rss_key.is_some(), read_by: PortConfig::spreads_flows, readers: RSS_READERS },
    PortSetting { name: "rss_indir", set: |p| p.rss_indir.is_some(), read_by: PortConfig::spreads_flows, readers: RSS_READERS },
    PortSetting {
        name: "rx_hash",
        set: |p| p.rx_hash.is_some(),
        read_by: PortConfig::spreads_flows,
        readers: "gen ports and sim ports with a `gen` table, whose receive queues compute the RSS hash",
    },
    PortSetting {
        name: "rps_cpus",
        set: |p| p.rps_cpus.is_some(),
        read_by: PortConfig::receives,
        readers: "ports that receive: RPS steers what a receive queue takes in",
    },
    PortSetting {
        name: "tso",
        set: |p| p.tso,
        read_by: |p| {
            matches!(
                p.kind,
                PortKind::Null | PortKind::Count | PortKind::Check | PortKind::Capture | PortKind::PcapOut | PortKind::Afpacket
            )
        },
        readers: "sinks (null, count, check, capture), pcap-out and afpacket ports; a sim port's is `sim.tso`",
    },
    PortSetting {
        name: "qdisc",
        set: |p| p.qdisc.is_some(),
        read_by: |p| matches!(p.kind, PortKind::Sim | PortKind::Afpacket | PortKind::Afxdp),
        readers:
            "sim, afpacket and afxdp ports, whose transmit rings push back; every other port takes each packet at once, past any qdisc",
    },
    PortSetting {
        name: "fault.side",
        set: |p| p.fault.as_ref().is_some_and(|f| f.side == crate::port::fault::FaultSide::Rx),
        read_by: PortConfig::receives,
        readers: "ports that receive, for `side = \"rx\"`",
    },
];

fn default_mtu() -> u16 {
    1500
}

impl PortConfig {
    /// A port frames arrive on (an XDP program attaches to it; io/macswap need its peer): a
    /// generator, a capture being played, a real interface, and a NIC model with a `gen`
    /// table (its generator's frames arrive from the wire).
    pub fn receives(&self) -> bool {
        match self.kind {
            PortKind::Gen | PortKind::PcapIn | PortKind::Afpacket | PortKind::Afxdp => true,
            PortKind::Sim => self.gen.is_some(),
            PortKind::Null | PortKind::Count | PortKind::Check | PortKind::Capture | PortKind::PcapOut => false,
        }
    }

    /// A port whose generator's flows RSS spreads over its receive queues (the readers of
    /// `rss_key`, `rss_indir` and `rx_hash`): a generator, or a NIC model with a `gen` table.
    fn spreads_flows(&self) -> bool {
        self.kind == PortKind::Gen || (self.kind == PortKind::Sim && self.gen.is_some())
    }

    /// What the port is, for errors: "a pcap-in port", "a sim port without a `gen` table".
    fn describe(&self) -> String {
        match self.kind {
            PortKind::Sim if self.gen.is_none() => "a sim port without a `gen` table".to_string(),
            PortKind::Afpacket | PortKind::Afxdp => format!("an {} port", self.kind.name()),
            k => format!("a {} port", k.name()),
        }
    }

    /// The first setting the port has that its kind never reads (`PORT_SETTINGS`): refused,
    /// as `ip link` and ethtool refuse an option a device does not support, rather than
    /// taken and silently ignored.
    fn unread_setting(&self, what: &str) -> Result<(), ConfigError> {
        match PORT_SETTINGS.iter().find(|s| (s.set)(self) && !(s.read_by)(self)) {
            Some(s) => Err(field(
                format!("{what}.{}", s.name),
                format!("`{}` has no effect on {} (it is read by {})", s.name, self.describe(), s.readers),
            )),
            None => Ok(()),
        }
    }

    /// The Linux interface a real port is on: `iface`, else the port's name.
    pub fn iface_name(&self) -> &str {
        self.iface.as_deref().unwrap_or(&self.name)
    }

    /// The port's MAC: the configured one, else (real interfaces) the interface's.
    pub fn resolved_mac(&self, what: &str) -> Result<[u8; 6], ConfigError> {
        if self.mac.is_empty() {
            if self.kind.is_real() {
                return crate::port::afpacket::iface_mac(self.iface_name()).map_err(|e| field(format!("{what}.iface"), e.to_string()));
            }
            return Err(field(format!("{what}.mac"), format!("a port of kind {:?} needs a `mac`", self.kind)));
        }
        parse_mac(&self.mac).ok_or_else(|| field(format!("{what}.mac"), format!("`{}` is not a MAC address", self.mac)))
    }

    /// The port's MTU: the configured one, else (real interfaces) the interface's, else 1500.
    pub fn resolved_mtu(&self, what: &str) -> Result<u16, ConfigError> {
        match self.mtu {
            Some(m) => Ok(m),
            None if self.kind.is_real() => {
                crate::port::afpacket::iface_mtu(self.iface_name()).map_err(|e| field(format!("{what}.iface"), e.to_string()))
            }
            None => Ok(default_mtu()),
        }
    }
}

/// The `check` sink's expectations, in config form (MACs as strings).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckConfig {
    pub src_mac: Option<String>,
    pub dst_macs: Vec<String>,
    pub ttl: Option<u8>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// "10.0.0.0/8" or "2001:db8::/32".
    pub prefix: String,
    /// Gateway address (its MAC comes from `neighbours`).
    #[serde(default)]
    pub via: Option<String>,
    /// Output port: required for `via` and for connected routes.
    #[serde(default)]
    pub port: Option<String>,
    /// "forward" (default), "blackhole", "unreachable", "local".
    #[serde(default)]
    pub kind: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighbourConfig {
    pub port: String,
    pub ip: String,
    pub mac: String,
}

/// Many routes at once, for benchmarks: `count` consecutive prefixes of length `len`
/// starting at `base`, all via `via` on `port`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSeries {
    pub base: String,
    pub len: u8,
    pub count: u32,
    pub via: String,
    pub port: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub pipeline: Pipeline,
    #[serde(default = "default_pool")]
    pub pool_frames: usize,
    #[serde(default)]
    pub tunables: BTreeMap<String, toml::Value>,
    pub ports: Vec<PortConfig>,
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    #[serde(default)]
    pub route_series: Vec<RouteSeries>,
    /// Routes in `ip route` text form, one per line, read as a stream (a million routes take
    /// a few hundred bytes each, not the kilobytes a TOML table costs). Relative to the config file.
    #[serde(default)]
    pub routes_file: Option<PathBuf>,
    #[serde(default)]
    pub neighbours: Vec<NeighbourConfig>,
    /// Local pipeline: UDP ports with a bound socket (drained by the lab's application).
    #[serde(default)]
    pub udp_sockets: Vec<u16>,
    /// The worker the application reading those sockets runs on (RFS steers their flows
    /// there when `net.core.rps_sock_flow_entries` and `rps_flow_cnt` are set); default: the
    /// worker that delivers each datagram.
    #[serde(default)]
    pub udp_reader_cpu: Option<usize>,
    /// An XDP program attached to every receiving port.
    #[serde(default)]
    pub xdp: Option<XdpConfig>,
}

/// `[xdp]`: program = "PROG.o" (relative to the config file) or "builtin:NAME", mode = "native" | "generic",
/// engine = "jit" | "interp", section = function or section name.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XdpConfig {
    pub program: String,
    #[serde(default = "default_xdp_mode")]
    pub mode: XdpMode,
    #[serde(default = "default_engine")]
    pub engine: EngineKind,
    #[serde(default)]
    pub section: Option<String>,
    /// Map entries set up before the program runs: a JSON file as `sluice xdp run --maps`
    /// takes it (relative to the config file), ...
    #[serde(default)]
    pub maps: Option<PathBuf>,
    /// ... and single entries as `--map NAME:KEY=VALUE` takes them.
    #[serde(default)]
    pub map: Vec<String>,
}

fn default_xdp_mode() -> XdpMode {
    XdpMode::Native
}

fn default_engine() -> EngineKind {
    EngineKind::Jit
}

fn default_pool() -> usize {
    16384
}

/// Most routes one config may hold (routes, series and a routes file together): 16 M, well
/// above a full Internet table (~1 M IPv4 + ~0.2 M IPv6).
pub const MAX_ROUTES: u64 = 1 << 24;
/// The MTU range of an Ethernet port: ETH_MIN_MTU to IP_MAX_MTU.
pub const MTU_RANGE: std::ops::RangeInclusive<u16> = 68..=65535;
/// IPv6 needs links of at least this MTU (RFC 8200; the kernel turns IPv6 off below it).
pub const IPV6_MIN_MTU: u16 = 1280;

/// The prefix with its host bits cleared, or an error if any were set (as `ip route` refuses
/// "10.0.0.1/8": Invalid prefix for given prefix length).
fn network_of(addr: IpAddr, len: u8, what: &str) -> Result<IpAddr, ConfigError> {
    let masked = match addr {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) & u32::MAX.checked_shl(32 - len as u32).unwrap_or(0))),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) & u128::MAX.checked_shl(128 - len as u32).unwrap_or(0))),
    };
    if masked != addr {
        return Err(field(what, format!("{addr}/{len} has host bits set (the network is {masked}/{len})")));
    }
    Ok(addr)
}

/// A port's `rps_cpus`: one CPU list per receive queue (none: every queue uses the tunable).
fn queue_rps_cpus(pc: &PortConfig, queues: u16, what: &str) -> Result<Vec<Vec<u16>>, ConfigError> {
    let Some(lists) = &pc.rps_cpus else { return Ok(Vec::new()) };
    if lists.len() != queues as usize {
        return Err(field(
            format!("{what}.rps_cpus"),
            format!("{} CPU list(s) for {queues} receive queue(s): give one per queue", lists.len()),
        ));
    }
    let present = std::thread::available_parallelism().map_or(1, |n| n.get()).min(64) as u32;
    lists
        .iter()
        .enumerate()
        .map(|(q, l)| {
            // "none": RPS off on this queue whatever the tunable says (an empty map; sysfs
            // takes a mask of 0). A bare "0" is CPU 0 here: this is a list (the tunable's "0"
            // means off, as its mask would).
            if l.trim() == "none" {
                return Ok(Vec::new());
            }
            crate::tunables::parse_cpu_list(l, present)
                .map(|cpus| cpus.into_iter().map(|c| c as u16).collect())
                .map_err(|e| field(format!("{what}.rps_cpus[{q}]"), format!("`{l}`: {e}")))
        })
        .collect()
}

fn parse_prefix(s: &str, what: &str) -> Result<(IpAddr, u8), ConfigError> {
    let (a, l) = s.split_once('/').ok_or_else(|| field(what, format!("`{s}` is not address/length")))?;
    let addr: IpAddr = a.parse().map_err(|_| field(what, format!("`{a}` is not an IP address")))?;
    let len: u8 = l.parse().map_err(|_| field(what, format!("`{l}` is not a prefix length")))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err(field(what, format!("prefix length {len} > {max}")));
    }
    Ok((addr, len))
}

impl Config {
    pub fn from_toml(text: &str, path: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::File { path: path.to_string(), msg: e.to_string() })
    }

    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File { path: p.clone(), msg: e.to_string() })?;
        let mut cfg = Self::from_toml(&text, &p)?;
        if let Some(dir) = path.parent() {
            cfg.resolve_paths(dir);
        }
        Ok(cfg)
    }

    /// Makes every relative path in the config relative to `dir`, the config file's folder
    /// (as nginx and systemd read the files a configuration names): `routes_file`,
    /// `xdp.program` (not a `builtin:`), `xdp.maps`, and each port's `pcap`, `capture` and
    /// `afxdp.xdp_object`. So a config names the same files from any working directory.
    /// (Paths on the command line, `--pcap-in`, `--capture`, `--xdp`, stay relative to the
    /// working directory: they replace the file's after it is loaded.)
    pub fn resolve_paths(&mut self, dir: &Path) {
        let join = |f: &mut PathBuf| {
            if f.is_relative() {
                *f = dir.join(&*f);
            }
        };
        if let Some(f) = self.routes_file.as_mut() {
            join(f);
        }
        if let Some(x) = self.xdp.as_mut() {
            if !x.program.starts_with("builtin:") && Path::new(&x.program).is_relative() {
                x.program = dir.join(&x.program).to_string_lossy().into_owned();
            }
            if let Some(f) = x.maps.as_mut() {
                join(f);
            }
        }
        for pc in &mut self.ports {
            let object = pc.afxdp.as_mut().and_then(|a| a.xdp_object.as_mut());
            for f in [pc.pcap.as_mut(), pc.capture.as_mut(), object].into_iter().flatten() {
                join(f);
            }
        }
    }

    /// Tunables: defaults, then the file's `[tunables]`, then `overrides` (`name=value`).
    pub fn tunables(&self, overrides: &[String]) -> Result<Tunables, ConfigError> {
        let mut t = Tunables::default();
        let mut settings = Vec::new();
        for (k, v) in &self.tunables {
            dotted_settings(k, v, &mut settings);
        }
        for (k, s) in settings {
            t.set(&k, &s)?;
        }
        t.apply_all(overrides)?;
        Ok(t)
    }

    fn port_index(&self, name: &str, what: &str) -> Result<u16, ConfigError> {
        self.ports.iter().position(|p| p.name == name).map(|i| i as u16).ok_or_else(|| field(what, format!("no port named `{name}`")))
    }

    /// Builds the datapath: ports, interfaces, neighbours, routes, sockets.
    pub fn build(&self, tun: Tunables, pool: &Pool) -> Result<Datapath, ConfigError> {
        let locked_atomics = tun.locked_atomics != 0;
        // A worker per RPS CPU and per queue of any port (queue q belongs to worker q).
        let mut workers = crate::rps::backlog::workers_for(tun.rps_cpus);
        let mut queue_cpus = Vec::with_capacity(self.ports.len());
        for (i, pc) in self.ports.iter().enumerate() {
            let what = format!("ports[{i}] ({})", pc.name);
            let queues = self.queues_of(pc, &what, tun.rss_queues)?;
            let maps = queue_rps_cpus(pc, queues, &what)?;
            let highest = maps.iter().flatten().map(|&c| c as usize + 1).max().unwrap_or(0);
            workers = workers.max(queues as usize).max(highest);
            queue_cpus.push(maps);
        }
        let mut dp = Datapath::with_workers(tun, self.pipeline, pool, workers);
        dp.net.rps.queue_cpus = queue_cpus;
        if self.ports.is_empty() {
            return Err(field("ports", "at least one port is required"));
        }
        self.validate(locked_atomics)?;
        for (i, pc) in self.ports.iter().enumerate() {
            let what = format!("ports[{i}] ({})", pc.name);
            let mac = pc.resolved_mac(&what)?;
            let mut iface = Iface::new(&pc.name, mac);
            iface.mtu = pc.resolved_mtu(&what)?;
            iface.vlans = pc.vlans.clone();
            for a in &pc.ipv4 {
                match parse_prefix(a, &format!("{what}.ipv4"))? {
                    // `ip addr add` of an address the device has: File exists.
                    (IpAddr::V4(v4), l) if iface.v4.contains(&(v4.octets(), l)) => {
                        return Err(field(format!("{what}.ipv4"), format!("`{a}` is listed twice (File exists)")));
                    }
                    (IpAddr::V4(v4), l) => iface.v4.push((v4.octets(), l)),
                    _ => return Err(field(format!("{what}.ipv4"), format!("`{a}` is not IPv4"))),
                }
            }
            for a in &pc.ipv6 {
                match parse_prefix(a, &format!("{what}.ipv6"))? {
                    (IpAddr::V6(v6), l) if iface.v6.contains(&(v6.octets(), l)) => {
                        return Err(field(format!("{what}.ipv6"), format!("`{a}` is listed twice (File exists)")));
                    }
                    (IpAddr::V6(v6), l) => iface.v6.push((v6.octets(), l)),
                    _ => return Err(field(format!("{what}.ipv6"), format!("`{a}` is not IPv6"))),
                }
            }
            let handles = self.port_queues(pc, &what, dp.net.tun.rss_queues, pool)?;
            let qdisc = pc.qdisc.as_ref().map(|q| q.spec(&format!("{what}.qdisc"))).transpose()?;
            let idx = dp.add_port_queues(handles, iface.clone());
            for w in &mut dp.workers {
                w.txq[idx as usize].spec = qdisc.clone();
            }
            dp.net
                .routes
                .add_iface(idx, &iface, dp.net.tun.ipv6_forwarding != 0)
                .map_err(|e| field(format!("{what}.ipv4/ipv6"), e.to_string()))?;
        }
        for (i, pc) in self.ports.iter().enumerate() {
            if let Some(peer) = &pc.peer {
                dp.net.peer[i] = Some(self.port_index(peer, &format!("ports[{i}].peer"))?);
            }
        }
        if matches!(self.pipeline, Pipeline::Io | Pipeline::Macswap)
            && dp.net.peer.iter().zip(&self.ports).any(|(p, c)| p.is_none() && c.receives())
        {
            return Err(field("ports", "io/macswap pipelines need a `peer` on every receiving port"));
        }
        let mut neighbours_seen = std::collections::HashMap::new();
        for (i, n) in self.neighbours.iter().enumerate() {
            let what = format!("neighbours[{i}]");
            let port = self.port_index(&n.port, &format!("{what}.port"))?;
            let mac = parse_mac(&n.mac).ok_or_else(|| field(format!("{what}.mac"), format!("`{}` is not a MAC address", n.mac)))?;
            let ip = n.ip.parse::<IpAddr>().map_err(|_| field(format!("{what}.ip"), format!("`{}` is not an IP address", n.ip)))?;
            // `ip neigh add` of an entry that exists: File exists (a second MAC would replace
            // the first silently).
            if let Some(j) = neighbours_seen.insert((port, ip), i) {
                return Err(field(format!("{what}.ip"), format!("{ip} on port `{}` is already neighbours[{j}] (File exists)", n.port)));
            }
            match ip {
                IpAddr::V4(a) => dp.add_neigh_v4(port, a.octets(), mac),
                IpAddr::V6(a) => dp.add_neigh_v6(port, a.octets(), mac),
            };
        }
        let mut seen = std::collections::HashMap::new();
        for (i, r) in self.routes.iter().enumerate() {
            let what = format!("routes[{i}]");
            let (addr, len) = parse_prefix(&r.prefix, &format!("{what}.prefix"))?;
            network_of(addr, len, &format!("{what}.prefix"))?;
            if let Some(j) = seen.insert((addr, len), i) {
                return Err(field(format!("{what}.prefix"), format!("{addr}/{len} is already routes[{j}] (one route per prefix)")));
            }
            let nh = self.route_nexthop(&dp, r.kind.as_deref(), r.via.as_deref(), r.port.as_deref(), &what)?;
            add_route(&mut dp, addr, len, nh).map_err(|e| field(&what, e))?;
        }
        let mut spans: Vec<SeriesSpan> = Vec::with_capacity(self.route_series.len());
        for (i, s) in self.route_series.iter().enumerate() {
            let what = format!("route_series[{i}]");
            let nh = self.route_nexthop(&dp, None, Some(&s.via), Some(&s.port), &what)?;
            let base: IpAddr = s.base.parse().map_err(|_| field(format!("{what}.base"), format!("`{}` is not an IP address", s.base)))?;
            let bits = if base.is_ipv4() { 32 } else { 128 };
            if s.len == 0 || s.len > bits {
                return Err(field(format!("{what}.len"), format!("prefix length {} outside 1..={bits}", s.len)));
            }
            network_of(base, s.len, &format!("{what}.base"))?;
            // The series must not run past the end of the address space (it would wrap onto
            // the prefixes it started with).
            let room = if s.len >= 128 { u128::MAX } else { 1u128 << s.len };
            let span = SeriesSpan::new(base, s.len, s.count);
            if s.count == 0 || (s.count as u128) > room.saturating_sub(span.first) {
                return Err(field(
                    format!("{what}.count"),
                    format!(
                        "{} prefixes of /{} from {} do not fit before the end of the address space (at least 1)",
                        s.count, s.len, s.base
                    ),
                ));
            }
            // One route per prefix: a series may not cover a route or another series.
            if let Some((&(a, l), &j)) = seen.iter().find(|(&(a, l), _)| span.holds(a, l)) {
                return Err(field(&what, format!("{a}/{l} is already routes[{j}] (one route per prefix)")));
            }
            if let Some(j) = spans.iter().position(|o| o.overlaps(&span)) {
                return Err(field(&what, format!("its prefixes overlap route_series[{j}]'s (one route per prefix)")));
            }
            spans.push(span);
            for k in 0..s.count {
                let addr = match base {
                    IpAddr::V4(b) if s.len >= 1 && s.len <= 32 => {
                        IpAddr::V4(Ipv4Addr::from(u32::from(b).wrapping_add(k.wrapping_shl(32 - s.len as u32))))
                    }
                    IpAddr::V6(b) if s.len >= 1 && s.len <= 128 => {
                        IpAddr::V6(Ipv6Addr::from(u128::from(b).wrapping_add((k as u128).wrapping_shl(128 - s.len as u32))))
                    }
                    _ => return Err(field(format!("{what}.len"), "prefix length out of range")),
                };
                add_route(&mut dp, addr, s.len, nh).map_err(|e| field(&what, e))?;
            }
        }
        if let Some(path) = &self.routes_file {
            let added = self.load_routes_file(
                &mut dp,
                path,
                &mut seen,
                &spans,
                self.routes.len() as u64 + self.route_series.iter().map(|s| s.count as u64).sum::<u64>(),
            )?;
            if added == 0 {
                return Err(field("routes_file", format!("{}: no routes in the file", path.display())));
            }
        }
        if let Some(cpu) = self.udp_reader_cpu {
            if cpu >= dp.workers.len() {
                return Err(field(
                    "udp_reader_cpu",
                    format!("worker {cpu} does not exist (this datapath has workers 0-{})", dp.workers.len() - 1),
                ));
            }
            for w in &mut dp.workers {
                w.sockets.reader_cpu = Some(cpu);
            }
        }
        for &p in &self.udp_sockets {
            // Each worker has its own socket on the port (like SO_REUSEPORT, one per CPU).
            for w in &mut dp.workers {
                w.sockets.bind_udp(p, 4096).map_err(|e| field("udp_sockets", e.to_string()))?;
            }
        }
        if let Some(x) = &self.xdp {
            for (i, pc) in self.ports.iter().enumerate() {
                if !pc.receives() {
                    continue;
                }
                // Every worker that owns a queue of the port runs its own instance (same maps).
                let runners: Vec<usize> = dp.workers.iter().filter(|w| w.port_queue(i as u16).is_some()).map(|w| w.id).collect();
                let load_error = |e: crate::xdp::ebpf::XdpLoadError| field("xdp.program", e.to_string());
                let mut progs: Vec<Box<dyn XdpProgram>> = Vec::with_capacity(runners.len());
                if x.program.starts_with("builtin:") {
                    if x.maps.is_some() || !x.map.is_empty() {
                        return Err(field("xdp.maps", "built-in programs have no maps"));
                    }
                    for _ in &runners {
                        progs.push(crate::xdp::builtin::parse(&x.program, self.ports.len()).map_err(|e| field("xdp.program", e))?);
                    }
                } else {
                    // As libbpf: open, set the maps (and `.rodata`), then load (freeze, verify).
                    let opened = OpenedXdp::open(std::path::Path::new(&x.program), x.section.as_deref(), false, dp.workers.len() as u32)
                        .map_err(load_error)?;
                    if let Some(path) = &x.maps {
                        crate::xdp::map_setup::apply_maps_file(&opened, path).map_err(|e| field("xdp.maps", e))?;
                    }
                    for entry in &x.map {
                        crate::xdp::map_setup::apply_map_flag(&opened, entry).map_err(|e| field("xdp.map", format!("`{entry}`: {e}")))?;
                    }
                    crate::xdp::map_setup::check_devmap_ports(&opened, self.ports.len()).map_err(|e| field("xdp.map", e))?;
                    let locked = locked_atomics || runners.len() > 1;
                    let first = opened.load(&sluice_ebpf::verifier::VerifyOptions::default(), x.engine, locked).map_err(load_error)?;
                    for _ in 1..runners.len() {
                        progs.push(Box::new(first.instance().map_err(load_error)?));
                    }
                    progs.insert(0, Box::new(first));
                }
                let Some(prog) = progs.first() else { continue };
                // As drivers refuse it (e.g. "MTU too large for XDP"): a native program that
                // is not frags-aware cannot run on a port whose frames need more than one buffer.
                let mtu = dp.net.ifaces.get(i).map_or(0, |f| f.mtu) as usize;
                if x.mode == XdpMode::Native && !prog.frags_aware() && mtu + MAX_L2_HEADER > crate::buf::MAX_DATA {
                    return Err(field(
                        format!("ports[{i}] ({})", pc.name),
                        format!(
                            "MTU {mtu} needs multi-buffer frames, and XDP program {} is not frags-aware \
                             (SEC(\"xdp.frags\")): native XDP allows an MTU up to {} for it; use a frags-aware \
                             program, a smaller MTU or generic mode",
                            prog.name(),
                            crate::buf::MAX_DATA - MAX_L2_HEADER
                        ),
                    ));
                }
                for (wid, prog) in runners.into_iter().zip(progs) {
                    dp.workers[wid].xdp.attach(i as u16, x.mode, prog);
                }
            }
        }
        Ok(dp)
    }

    /// How many queues port `pc` has: its own `rss_queues`, else the tunable's for the kinds
    /// that take queues (the generator, null/count/check sinks), else one.
    fn queues_of(&self, pc: &PortConfig, what: &str, default: u32) -> Result<u16, ConfigError> {
        let multi =
            matches!(pc.kind, PortKind::Gen | PortKind::Null | PortKind::Count | PortKind::Check | PortKind::Capture | PortKind::Sim);
        // A real interface takes `rss_queues` sockets in one fanout group; one by default.
        let multi_explicit = multi || pc.kind.is_real();
        match pc.rss_queues {
            Some(q) if q == 0 || q > crate::port::rss::MAX_QUEUES => {
                Err(field(format!("{what}.rss_queues"), crate::port::rss::RssError::Queues(q as u32).to_string()))
            }
            Some(q) if q > 1 && !multi_explicit => {
                Err(field(format!("{what}.rss_queues"), format!("{q}: a port of kind {:?} has one queue", pc.kind)))
            }
            Some(q) => Ok(q),
            // An AF_XDP port takes a socket per receive queue of its interface.
            None if pc.kind == PortKind::Afxdp => crate::port::afxdp::iface_info(pc.iface_name())
                .map(|i| i.rx_queues.min(crate::port::rss::MAX_QUEUES as u32) as u16)
                .map_err(|e| field(format!("{what}.iface"), e.to_string())),
            None if multi => Ok(default.clamp(1, crate::port::rss::MAX_QUEUES as u32) as u16),
            None => Ok(1),
        }
    }

    /// The port's queue handles, queue 0 first: one `Port` per queue (a generator's flows
    /// spread over them by RSS), each wrapped in its fault injector when one is configured.
    fn port_queues(&self, pc: &PortConfig, what: &str, default_queues: u32, pool: &Pool) -> Result<Vec<Box<dyn Port>>, ConfigError> {
        let queues = self.queues_of(pc, what, default_queues)?;
        let rss_field = |f: &str, e: crate::port::rss::RssError| field(format!("{what}.{f}"), e.to_string());
        let mut rss = crate::port::rss::Rss::new(queues).map_err(|e| rss_field("rss_queues", e))?;
        if let Some(k) = &pc.rss_key {
            let key = crate::port::rss::parse_key(k).map_err(|e| rss_field("rss_key", e))?;
            rss = rss.with_key(&key).map_err(|e| rss_field("rss_key", e))?;
        }
        if let Some(t) = &pc.rss_indir {
            rss = rss.with_indir(t).map_err(|e| rss_field("rss_indir", e))?;
        }
        let handles: Vec<Box<dyn Port>> = match pc.kind {
            PortKind::Gen => {
                let g = pc.gen.clone().unwrap_or_default();
                let supply_hash = pc.rx_hash.unwrap_or(queues > 1);
                Generator::rss_queues(&pc.name, g, &rss, supply_hash)
                    .map_err(|e| field(format!("{what}.gen"), e.to_string()))?
                    .into_iter()
                    .map(|g| Box::new(g) as Box<dyn Port>)
                    .collect()
            }
            PortKind::Null | PortKind::Count | PortKind::Check | PortKind::Capture => {
                let kind = match pc.kind {
                    PortKind::Null => SinkKind::Null,
                    PortKind::Count => SinkKind::Count,
                    PortKind::Check => SinkKind::Check,
                    _ => SinkKind::Capture,
                };
                let spec = match &pc.check {
                    Some(c) => check_spec(c, &format!("{what}.check"))?,
                    None => CheckSpec::default(),
                };
                (0..queues)
                    .map(|_| {
                        let mut s = Sink::new(&pc.name, kind, spec.clone());
                        s.tso = pc.tso;
                        Box::new(s) as Box<dyn Port>
                    })
                    .collect()
            }
            PortKind::PcapIn => {
                let path = pc.pcap.as_ref().ok_or_else(|| field(format!("{what}.pcap"), "pcap-in needs a `pcap` file"))?;
                vec![Box::new(
                    PcapIn::open(&pc.name, path, pc.repeat.unwrap_or(1)).map_err(|e| field(format!("{what}.pcap"), e.to_string()))?,
                )]
            }
            PortKind::PcapOut => {
                let path = pc.pcap.as_ref().ok_or_else(|| field(format!("{what}.pcap"), "pcap-out needs a `pcap` file"))?;
                let mut out = PcapOut::create(&pc.name, path).map_err(|e| field(format!("{what}.pcap"), e.to_string()))?;
                out.tso = pc.tso;
                vec![Box::new(out)]
            }
            PortKind::Sim => {
                let sc = pc.sim.clone().unwrap_or_default();
                sc.validate().map_err(|(p, msg)| field(format!("{what}.sim.{p}"), msg))?;
                let nics = crate::port::sim::SimNic::queues(&pc.name, sc, pc.resolved_mtu(what)?, queues as usize);
                match &pc.gen {
                    // Receive side: the generator's traffic arriving from the wire, spread
                    // over the receive queues by RSS, each queue its share of the rate.
                    Some(g) if g.request_response => {
                        return Err(field(
                            format!("{what}.gen.request_response"),
                            "a NIC model's wire sends open loop: nothing answers its clients",
                        ));
                    }
                    Some(g) => {
                        let supply_hash = pc.rx_hash.unwrap_or(queues > 1);
                        crate::port::sim::SimNic::receive_queues(&pc.name, nics, g.clone(), &rss, supply_hash)
                            .map_err(|e| field(format!("{what}.gen"), e.to_string()))?
                            .into_iter()
                            .map(|n| Box::new(n) as Box<dyn Port>)
                            .collect()
                    }
                    None => nics.into_iter().map(|q| Box::new(q) as Box<dyn Port>).collect(),
                }
            }
            PortKind::Afxdp => {
                let ac = pc.afxdp.clone().unwrap_or_default();
                crate::port::afxdp::open(&pc.name, pc.iface_name(), Some(queues as u32), &ac, pool)
                    .map_err(|e| field(format!("{what}.iface"), e.to_string()))?
                    .into_iter()
                    .map(|q| Box::new(q) as Box<dyn Port>)
                    .collect()
            }
            PortKind::Afpacket => {
                let mut ac = crate::port::afpacket::AfPacketConfig::new(pc.iface_name());
                ac.queues = queues;
                ac.promisc = pc.promisc;
                ac.mtu = pc.resolved_mtu(what)?;
                ac.tso = pc.tso;
                if let Some(r) = &pc.afpacket {
                    r.apply(&mut ac).map_err(|(f, msg)| field(format!("{what}.afpacket.{f}"), msg))?;
                }
                crate::port::afpacket::open(&pc.name, &ac)
                    .map_err(|e| field(format!("{what}.iface"), e.to_string()))?
                    .into_iter()
                    .map(|p| Box::new(p) as Box<dyn Port>)
                    .collect()
            }
        };
        let handles = match &pc.capture {
            Some(path) => crate::port::tap::wrap_queues(handles, path).map_err(|e| field(format!("{what}.capture"), e.to_string()))?,
            None => handles,
        };
        handles
            .into_iter()
            .map(|port| crate::port::fault::wrap(port, pc.fault.as_ref()).map_err(|e| field(format!("{what}.fault.{}", e.field), e.msg)))
            .collect()
    }

    /// Checks what the datapath would otherwise take silently: limits sized against memory,
    /// names that must be unique, ranges of the link layer, XDP combinations that would never run.
    /// Every file a run writes (pcap-out ports, captures) is written by one writer only and
    /// is nobody's input: two writers each start at offset 0 and lose each other's records,
    /// and an output on an input would replace the capture being played.
    fn check_capture_paths(&self) -> Result<(), ConfigError> {
        let mut files: Vec<(PathBuf, String, bool)> = Vec::new();
        for (i, pc) in self.ports.iter().enumerate() {
            let what = format!("ports[{i}] ({})", pc.name);
            if let Some(p) = pc.pcap.as_ref().filter(|_| matches!(pc.kind, PortKind::PcapIn | PortKind::PcapOut)) {
                files.push((p.clone(), format!("{what}.pcap"), pc.kind == PortKind::PcapOut));
            }
            if let Some(p) = &pc.capture {
                files.push((p.clone(), format!("{what}.capture"), true));
            }
        }
        let same = |a: &Path, b: &Path| a == b || std::path::absolute(a).ok().zip(std::path::absolute(b).ok()).is_some_and(|(x, y)| x == y);
        for (k, (p, setting, writes)) in files.iter().enumerate() {
            for (q, other, other_writes) in &files[..k] {
                if (*writes || *other_writes) && same(p, q) {
                    return Err(field(setting, format!("{} is also {other}: one file per output, and never an input", p.display())));
                }
            }
        }
        Ok(())
    }

    fn validate(&self, _locked_atomics: bool) -> Result<(), ConfigError> {
        if self.ports.len() > 1024 {
            return Err(field("ports", format!("{} ports: at most 1024", self.ports.len())));
        }
        let mut names = std::collections::HashMap::new();
        for (i, pc) in self.ports.iter().enumerate() {
            let what = format!("ports[{i}] ({})", pc.name);
            if pc.name.is_empty() {
                return Err(field(format!("ports[{i}].name"), "a port needs a name"));
            }
            if let Some(j) = names.insert(pc.name.as_str(), i) {
                return Err(field(format!("{what}.name"), format!("`{}` is also the name of ports[{j}] (names must be unique)", pc.name)));
            }
            let mtu = pc.resolved_mtu(&what)?;
            if !MTU_RANGE.contains(&mtu) {
                return Err(field(format!("{what}.mtu"), format!("{mtu} outside {}..={}", MTU_RANGE.start(), MTU_RANGE.end())));
            }
            if !pc.ipv6.is_empty() && mtu < IPV6_MIN_MTU {
                return Err(field(format!("{what}.mtu"), format!("{mtu} is below IPv6's minimum link MTU {IPV6_MIN_MTU}")));
            }
            pc.unread_setting(&what)?;
            if let Some(a) = &pc.afxdp {
                a.validate().map_err(|(f, m)| field(format!("{what}.afxdp.{f}"), m))?;
            }
            let mut vlans = std::collections::HashSet::new();
            for &v in &pc.vlans {
                if !(1..=4094).contains(&v) {
                    return Err(field(format!("{what}.vlans"), format!("VLAN id {v} outside 1..=4094")));
                }
                if !vlans.insert(v) {
                    return Err(field(format!("{what}.vlans"), format!("VLAN id {v} listed twice")));
                }
            }
            if pc.repeat == Some(0) {
                return Err(field(format!("{what}.repeat"), "0: a capture is played at least once"));
            }
        }
        self.check_capture_paths()?;
        let series: u64 = self.route_series.iter().map(|s| s.count as u64).sum();
        let total = self.routes.len() as u64 + series;
        if total > MAX_ROUTES {
            return Err(field("route_series", format!("{total} routes in all: at most {MAX_ROUTES}")));
        }
        if matches!(self.pipeline, Pipeline::Io | Pipeline::Macswap) {
            // Nothing reaches a socket without the receive path.
            let sockets = [("udp_sockets", !self.udp_sockets.is_empty()), ("udp_reader_cpu", self.udp_reader_cpu.is_some())];
            if let Some((name, _)) = sockets.iter().find(|(_, set)| *set) {
                return Err(field(
                    *name,
                    format!(
                        "`{name}` has no effect in the {} pipeline: it forwards without the receive path, so nothing is \
                         delivered to a socket (use l3fwd or local)",
                        self.pipeline.name()
                    ),
                ));
            }
        }
        if let Some(x) = &self.xdp {
            if matches!(self.pipeline, Pipeline::Io | Pipeline::Macswap) {
                return Err(field(
                    "xdp",
                    format!(
                        "the {:?} pipeline forwards without the receive path, so an XDP program would never run (use l3fwd or local)",
                        self.pipeline
                    ),
                ));
            }
            if x.program.starts_with("builtin:") && x.section.is_some() {
                return Err(field("xdp.section", "a built-in program has no sections (a section names a program in an eBPF object)"));
            }
        }
        Ok(())
    }

    /// Reads routes in `ip route` form, line by line: `[TYPE] PREFIX [via ADDR] [dev PORT]`,
    /// TYPE one of unicast (the default), blackhole, unreachable, prohibit (as unreachable), local;
    /// `default` for 0.0.0.0/0 (`-6 default` is not a thing: write ::/0); `proto`, `scope`,
    /// `src`, `metric` and `onlink` (as in `ip route show` output) are read and ignored.
    fn load_routes_file(
        &self,
        dp: &mut Datapath,
        path: &std::path::Path,
        seen: &mut std::collections::HashMap<(IpAddr, u8), usize>,
        series: &[SeriesSpan],
        already: u64,
    ) -> Result<u64, ConfigError> {
        use std::io::BufRead;
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| field("routes_file", format!("{name}: {e}")))?;
        let mut added = 0u64;
        let mut line = String::new();
        let mut reader = std::io::BufReader::new(file);
        for lineno in 1.. {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(field("routes_file", format!("{name}:{lineno}: {e}"))),
            }
            let text = line.split('#').next().unwrap_or("").trim();
            if text.is_empty() {
                continue;
            }
            let what = format!("{name}:{lineno}");
            let route = parse_ip_route(text).map_err(|e| field(&what, e))?;
            let (addr, len) = parse_prefix(route.prefix, &what)?;
            network_of(addr, len, &what)?;
            if let Some(j) = series.iter().position(|sp| sp.holds(addr, len)) {
                return Err(field(&what, format!("{addr}/{len} is already routed (route_series[{j}])")));
            }
            if let Some(j) = seen.insert((addr, len), usize::MAX) {
                let earlier = if j == usize::MAX { "earlier in the file".to_string() } else { format!("routes[{j}]") };
                return Err(field(&what, format!("{addr}/{len} is already routed ({earlier})")));
            }
            let nh = self.route_nexthop(dp, Some(route.kind), route.via, route.dev, &what)?;
            add_route(dp, addr, len, nh).map_err(|e| field(&what, e))?;
            added += 1;
            if already + added > MAX_ROUTES {
                return Err(field(&what, format!("more than {MAX_ROUTES} routes in all")));
            }
        }
        Ok(added)
    }

    fn route_nexthop(
        &self,
        dp: &Datapath,
        kind: Option<&str>,
        via: Option<&str>,
        port: Option<&str>,
        what: &str,
    ) -> Result<NextHop, ConfigError> {
        let kind = kind.unwrap_or("forward");
        // As the kernel's fib_create_info for route types that are an error (blackhole,
        // unreachable, prohibit): "Gateway, device and multipath can not be specified".
        if matches!(kind, "blackhole" | "unreachable") {
            if let Some((name, _)) = [("via", via), ("port", port)].into_iter().find(|(_, v)| v.is_some()) {
                return Err(field(format!("{what}.{name}"), format!("a {kind} route takes no gateway or port")));
            }
        }
        match kind {
            "blackhole" => return Ok(NextHop::Blackhole),
            "unreachable" => return Ok(NextHop::Unreachable),
            "local" => return Ok(NextHop::Local),
            "forward" => {}
            k => return Err(field(format!("{what}.kind"), format!("unknown route kind `{k}` (forward, blackhole, unreachable, local)"))),
        }
        let port_name = port.ok_or_else(|| field(format!("{what}.port"), "a forwarding route needs a `port`"))?;
        let port = self.port_index(port_name, &format!("{what}.port"))?;
        let Some(via) = via else {
            return Ok(NextHop::Connected { port });
        };
        let gw: IpAddr = via.parse().map_err(|_| field(format!("{what}.via"), format!("`{via}` is not an IP address")))?;
        let mac = match gw {
            IpAddr::V4(a) => dp.workers[0].neigh.v4.get(&(port, a.octets())),
            IpAddr::V6(a) => dp.workers[0].neigh.v6.get(&(port, a.octets())),
        };
        // A configured gateway MAC is used as is; else ARP / NDP resolve it on the link, which
        // must hold it (the kernel's "Nexthop has invalid gateway").
        if mac.is_none() && !dp.net.ifaces.get(port as usize).is_some_and(|i| on_link(i, gw)) {
            return Err(field(
                format!("{what}.via"),
                format!("gateway {via} is not on a subnet of port `{port_name}` and has no entry in `neighbours`"),
            ));
        }
        Ok(match (mac, gw) {
            (Some(mac), _) => NextHop::Gateway { port, mac: *mac },
            (None, IpAddr::V4(a)) => NextHop::Via { port, gw: crate::rx::route::NeighAddr::V4(a.octets()) },
            (None, IpAddr::V6(a)) => NextHop::Via { port, gw: crate::rx::route::NeighAddr::V6(a.octets()) },
        })
    }
}

/// True when `a` is inside one of the interface's subnets.
fn on_link(i: &Iface, a: IpAddr) -> bool {
    match a {
        IpAddr::V4(a) => i.v4_on_link(a.octets()).is_some(),
        IpAddr::V6(a) => i.v6_on_link(a.octets()).is_some(),
    }
}

/// `[tunables]` entries as (sysctl name, value text). An unquoted dotted key
/// (`net.core.dev_weight = 32`) is a nested table in TOML: its keys are joined back with
/// dots, so it means what the quoted name means.
fn dotted_settings(key: &str, v: &toml::Value, out: &mut Vec<(String, String)>) {
    let text = match v {
        toml::Value::Table(t) => {
            for (k, inner) in t {
                dotted_settings(&format!("{key}.{k}"), inner, out);
            }
            return;
        }
        toml::Value::String(s) => s.clone(),
        // As `true`/`false`: taken as 1/0 by a 0..=1 setting only.
        toml::Value::Boolean(b) => b.to_string(),
        other => other.to_string(),
    };
    out.push((key.to_string(), text));
}

/// One `ip route` line, split into what sluice uses.
#[derive(Debug, PartialEq, Eq)]
struct IpRoute<'a> {
    kind: &'a str,
    prefix: &'a str,
    via: Option<&'a str>,
    dev: Option<&'a str>,
}

fn parse_ip_route(line: &str) -> Result<IpRoute<'_>, String> {
    let mut words = line.split_whitespace().peekable();
    let kind = match words.peek().copied() {
        Some("unicast") => {
            words.next();
            "forward"
        }
        Some(k @ ("blackhole" | "unreachable" | "local")) => {
            words.next();
            k
        }
        Some("prohibit") => {
            words.next();
            "unreachable"
        }
        _ => "forward",
    };
    let prefix = match words.next() {
        Some("default") => "0.0.0.0/0",
        Some(p) if p.contains('/') => p,
        Some(p) => return Err(format!("`{p}` is not a prefix (write address/length)")),
        None => return Err("no prefix".into()),
    };
    let mut r = IpRoute { kind, prefix, via: None, dev: None };
    while let Some(w) = words.next() {
        let mut value = || words.next().ok_or_else(|| format!("`{w}` needs a value"));
        match w {
            "via" => r.via = Some(value()?),
            "dev" => r.dev = Some(value()?),
            "proto" | "scope" | "src" | "metric" => {
                value()?;
            }
            // One routing table: the main one (what `ip route` shows without `table`).
            "table" => match value()? {
                "main" | "254" => {}
                t => return Err(format!("table `{t}`: sluice has only the main table")),
            },
            "onlink" | "linkdown" => {}
            other => return Err(format!("unknown word `{other}` (via, dev, proto, scope, src, metric, table main)")),
        }
    }
    Ok(r)
}

/// Adds a configured route. Configured routes are added after every port's address and
/// subnet routes and never repeat one another (checked before), so a prefix already there
/// is a port's own: the kernel keeps those (local table, or "File exists" for a connected
/// subnet), where replacing it would black-hole the router's own address or link.
fn add_route(dp: &mut Datapath, addr: IpAddr, len: u8, nh: NextHop) -> Result<(), String> {
    let taken = match addr {
        IpAddr::V4(a) => dp.net.routes.has_v4(a.octets(), len),
        IpAddr::V6(a) => dp.net.routes.has_v6(a.octets(), len),
    };
    if taken {
        return Err(format!("{addr}/{len} is a port's own address or subnet route (File exists)"));
    }
    match addr {
        IpAddr::V4(a) => dp.net.routes.add_configured_v4(a.octets(), len, nh),
        IpAddr::V6(a) => dp.net.routes.add_v6(a.octets(), len, nh),
    }
    .map_err(|e| e.to_string())
}

fn check_spec(c: &CheckConfig, what: &str) -> Result<CheckSpec, ConfigError> {
    let mac = |s: &String| parse_mac(s).ok_or_else(|| field(what, format!("`{s}` is not a MAC address")));
    Ok(CheckSpec {
        src_mac: c.src_mac.as_ref().map(mac).transpose()?,
        dst_macs: c.dst_macs.iter().map(mac).collect::<Result<_, _>>()?,
        ttl: c.ttl,
    })
}

/// The built-in lab, as a config: generator → router → check sink, IPv4 + IPv6, 1024 flows,
/// 10,000 IPv4 and 10,000 IPv6 routes.
pub fn lab(pipeline: Pipeline) -> Config {
    let text = include_str!("lab.toml");
    let mut c: Config = toml::from_str(text).expect("the built-in lab config parses (tested)");
    c.pipeline = pipeline;
    match pipeline {
        Pipeline::Io | Pipeline::Macswap => {
            c.ports[1].kind = PortKind::Null;
            c.ports[1].check = None;
            c.udp_sockets.clear();
            if let Some(g) = c.ports[0].gen.as_mut() {
                g.ip = crate::port::gen::IpVersion::V4;
            }
        }
        Pipeline::Local => {
            c.ports[1].kind = PortKind::Null;
            c.ports[1].check = None;
            if let Some(g) = c.ports[0].gen.as_mut() {
                g.dst_v4 = Ipv4Addr::new(192, 0, 2, 1);
                g.dst_v4_step = 0;
                g.dst_v6 = "2001:db8:0:1::1".parse().expect("literal");
                g.dst_v6_step = 0;
                g.dst_port = 5001;
            }
        }
        Pipeline::L3fwd => {}
    }
    c
}

/// The prefixes a `[[route_series]]` adds: `count` consecutive /`len` networks from the
/// base's network number `first`, in one family (checked against routes and other series
/// arithmetically: a series may hold a million prefixes).
#[derive(Debug, Clone, Copy)]
struct SeriesSpan {
    v6: bool,
    len: u8,
    first: u128,
    count: u128,
}

impl SeriesSpan {
    fn new(base: IpAddr, len: u8, count: u32) -> SeriesSpan {
        let (v6, first) = network_number(base, len);
        SeriesSpan { v6, len, first, count: count as u128 }
    }

    fn holds(&self, addr: IpAddr, len: u8) -> bool {
        let (v6, n) = network_number(addr, len);
        v6 == self.v6 && len == self.len && n >= self.first && n - self.first < self.count
    }

    fn overlaps(&self, o: &SeriesSpan) -> bool {
        self.v6 == o.v6
            && self.len == o.len
            && self.first < o.first.saturating_add(o.count)
            && o.first < self.first.saturating_add(self.count)
    }
}

/// The network number of `addr/len` (the address shifted right past the host bits).
fn network_number(addr: IpAddr, len: u8) -> (bool, u128) {
    match addr {
        IpAddr::V4(a) => (false, u32::from(a).checked_shr(32 - u32::from(len.min(32))).unwrap_or(0) as u128),
        IpAddr::V6(a) => (true, u128::from(a).checked_shr(128 - u32::from(len.min(128))).unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::DropReason;

    #[test]
    fn lab_configs_build() {
        let pool = Pool::new(4096).unwrap();
        for p in [Pipeline::Io, Pipeline::Macswap, Pipeline::L3fwd, Pipeline::Local] {
            let c = lab(p);
            let t = c.tunables(&[]).unwrap();
            let dp = c.build(t, &pool).unwrap();
            assert_eq!(dp.ports().count(), 2);
        }
    }

    /// Builds a one-port config (`port` is the port's TOML body) and returns the error text.
    fn build_error(port: &str) -> String {
        let text = format!("pipeline = \"l3fwd\"\n[[ports]]\nname = \"p0\"\n{port}\n");
        let c = Config::from_toml(&text, "t").unwrap();
        let pool = Pool::new(64).unwrap();
        match c.build(c.tunables(&[]).unwrap(), &pool) {
            Ok(_) => panic!("built: {port}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn afxdp_ports_are_checked_before_anything_is_opened() {
        let e = build_error("kind = \"afxdp\"\niface = \"sxnosuchif9\"");
        assert!(e.contains("ports[0] (p0).iface") && e.contains("no network interface named `sxnosuchif9`"), "{e}");
        let e = build_error("kind = \"afxdp\"\niface = \"lo\"\n[ports.afxdp]\nring_size = 1000");
        assert!(e.contains("ports[0] (p0).afxdp.ring_size") && e.contains("power of two"), "{e}");
        let e = build_error("kind = \"afxdp\"\niface = \"lo\"\n[ports.afxdp]\nfill_frames = 4096");
        assert!(e.contains("afxdp.fill_frames"), "{e}");
        let e = build_error("kind = \"null\"\nmac = \"02:00:00:00:00:01\"\n[ports.afxdp]\nxdp_mode = \"copy\"");
        assert!(e.contains("ports[0] (p0).afxdp") && e.contains("has no effect on a null port"), "{e}");
        let e = build_error("kind = \"null\"");
        assert!(e.contains("ports[0] (p0).mac") && e.contains("needs a `mac`"), "{e}");
        let e = build_error("kind = \"afxdp\"\niface = \"lo\"\nrss_queues = 4");
        assert!(e.contains("lo has 1 receive queue(s), 4 asked"), "{e}");
    }

    /// A `sim` port with a `gen` table receives (the generator's frames arrive from its wire),
    /// as a `gen` port does: the `[xdp]` program runs on it, and io/macswap need its peer.
    #[test]
    fn a_sim_port_with_a_generator_receives() {
        let sim_gen = "[[ports]]\nname = \"nic0\"\nkind = \"sim\"\nmac = \"02:00:00:00:03:00\"\n{peer}\
                       [ports.gen]\nflows = 4\nip = \"v4\"\npackets = 100\n\
                       [[ports]]\nname = \"nic1\"\nkind = \"null\"\nmac = \"02:00:00:00:03:01\"\n";
        let pool = Pool::new(1024).unwrap();
        let text = format!("pipeline = \"l3fwd\"\n[xdp]\nprogram = \"builtin:drop\"\n{}", sim_gen.replace("{peer}", ""));
        let c = Config::from_toml(&text, "t").unwrap();
        let mut dp = c.build(c.tunables(&[]).unwrap(), &pool).unwrap();
        assert!(dp.workers[0].xdp.native.first().is_some_and(Option::is_some), "the program is attached to the sim port");
        let limit = crate::napi::RunLimit { duration: None, packets: Some(100), until_bounded_inputs_done: true, stop: None };
        dp.run(limit, std::time::Duration::from_secs(1), |_, _| {});
        let c = dp.counters();
        assert_eq!(
            (c.rx, c.drops[DropReason::XdpDrop as usize]),
            (100, 100),
            "every frame dropped by the program: {:?}",
            c.nonzero_drops()
        );
        dp.conservation().unwrap();
        for pipeline in ["io", "macswap"] {
            let text = format!("pipeline = \"{pipeline}\"\n{}", sim_gen.replace("{peer}", ""));
            let c = Config::from_toml(&text, "t").unwrap();
            let e = c.build(c.tunables(&[]).unwrap(), &pool).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("need a `peer` on every receiving port"), "{pipeline}: {e}");
            let text = format!("pipeline = \"{pipeline}\"\n{}", sim_gen.replace("{peer}", "peer = \"nic1\"\n"));
            let c = Config::from_toml(&text, "t").unwrap();
            c.build(c.tunables(&[]).unwrap(), &pool).unwrap();
        }
    }

    /// Every per-port setting on a port that never reads it is refused, naming the port, the
    /// setting and who reads it (`PORT_SETTINGS`); so are sockets in a pipeline without the
    /// receive path. The same settings where they are read build.
    #[test]
    fn settings_a_port_never_reads_are_refused() {
        const MAC: &str = "mac = \"02:00:00:00:00:01\"\n";
        let null = format!("kind = \"null\"\n{MAC}");
        let sim = format!("kind = \"sim\"\n{MAC}");
        let cases: Vec<(String, &str, &str)> = vec![
            (format!("kind = \"pcap-in\"\n{MAC}pcap = \"in.pcap\"\ntso = true"), "tso", "a pcap-in port"),
            (format!("kind = \"gen\"\n{MAC}tso = true"), "tso", "a gen port"),
            (format!("{sim}tso = true"), "tso", "a sim port without a `gen` table"),
            (format!("{null}peer = \"p0\""), "peer", "a null port"),
            (format!("{sim}peer = \"p0\""), "peer", "a sim port without a `gen` table"),
            (format!("kind = \"pcap-out\"\n{MAC}pcap = \"out.pcap\"\npeer = \"p0\""), "peer", "a pcap-out port"),
            (format!("{null}[ports.check]\nttl = 63"), "check", "a null port"),
            (format!("kind = \"count\"\n{MAC}[ports.check]\nttl = 63"), "check", "a count port"),
            (format!("{null}pcap = \"x.pcap\""), "pcap", "a null port"),
            (format!("kind = \"pcap-out\"\n{MAC}pcap = \"out.pcap\"\nrepeat = 2"), "repeat", "a pcap-out port"),
            (format!("{null}rss_key = \"6d:5a\""), "rss_key", "a null port"),
            (format!("{sim}rss_indir = [0]"), "rss_indir", "a sim port without a `gen` table"),
            (format!("{null}rx_hash = true"), "rx_hash", "a null port"),
            (format!("{null}rps_cpus = [\"0\"]"), "rps_cpus", "a null port"),
            (format!("{null}[ports.qdisc]\nkind = \"pfifo\""), "qdisc", "a null port"),
            (format!("kind = \"gen\"\n{MAC}[ports.qdisc]\nkind = \"noqueue\""), "qdisc", "a gen port"),
            (format!("{null}fault = {{ side = \"rx\", drop = 0.5 }}"), "fault.side", "a null port"),
            (format!("{null}promisc = true"), "promisc", "a null port"),
            (format!("{null}iface = \"lo\""), "iface", "a null port"),
            (format!("{null}[ports.sim]\nring = 64"), "sim", "a null port"),
            (format!("{null}[ports.gen]\nflows = 1"), "gen", "a null port"),
            (format!("{null}[ports.afpacket]\nblocks = 8"), "afpacket", "a null port"),
            (format!("{null}[ports.afxdp]\nxdp_mode = \"copy\""), "afxdp", "a null port"),
            ("kind = \"afxdp\"\niface = \"lo\"\npromisc = true".to_string(), "promisc", "an afxdp port"),
            ("kind = \"afpacket\"\niface = \"lo\"\nrx_hash = true".to_string(), "rx_hash", "an afpacket port"),
        ];
        for (port, setting, on) in &cases {
            let e = build_error(port);
            let want = format!("ports[0] (p0).{setting}: `{setting}` has no effect on {on} (it is read by ");
            assert!(e.starts_with(&want), "{port}\n  got:  {e}\n  want: {want}...");
        }
        let pool = Pool::new(1024).unwrap();
        for (pipeline, setting) in [("io", "udp_sockets = [5001]"), ("macswap", "udp_reader_cpu = 0")] {
            let text = format!(
                "pipeline = \"{pipeline}\"\n{setting}\n[[ports]]\nname = \"g\"\nkind = \"gen\"\n{MAC}peer = \"s\"\n\
                 [[ports]]\nname = \"s\"\n{null}"
            );
            let c = Config::from_toml(&text, "t").unwrap();
            let e = c.build(c.tunables(&[]).unwrap(), &pool).err().map(|e| e.to_string()).unwrap_or_default();
            let name = setting.split(' ').next().unwrap();
            assert!(e.starts_with(&format!("{name}: `{name}` has no effect in the {pipeline} pipeline")), "{e}");
        }
        // Where they are read, the same settings build.
        let text = format!(
            "pipeline = \"io\"\n[[ports]]\nname = \"nic0\"\n{sim}peer = \"out\"\nrx_hash = true\nrss_queues = 2\n\
             rss_key = \"{key}\"\nrps_cpus = [\"0\", \"0\"]\nfault = {{ side = \"rx\", drop = 0.1 }}\n\
             [ports.gen]\nflows = 4\n[ports.qdisc]\nkind = \"pfifo\"\n\
             [[ports]]\nname = \"out\"\nkind = \"check\"\nmac = \"02:00:00:00:00:02\"\ntso = true\n[ports.check]\nttl = 64\n",
            key = vec!["6d"; 40].join(":")
        );
        let c = Config::from_toml(&text, "t").unwrap();
        c.build(c.tunables(&[]).unwrap(), &pool).unwrap();
    }

    /// Every relative path in a config file names a file next to it, whatever the working
    /// directory: captures read and written, the XDP object, as `routes_file` already did.
    #[test]
    fn relative_paths_are_relative_to_the_config_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("conf");
        std::fs::create_dir(&dir).unwrap();
        std::fs::copy(root.join("bpf/packets.pcap"), dir.join("in.pcap")).unwrap();
        std::fs::copy(root.join("bpf/obj/xdp_drop_count.o"), dir.join("prog.o")).unwrap();
        std::fs::write(dir.join("routes.txt"), "blackhole 203.0.113.0/24\n").unwrap();
        let text = "pipeline = \"l3fwd\"\nroutes_file = \"routes.txt\"\n[xdp]\nprogram = \"prog.o\"\n\
                    [[ports]]\nname = \"a\"\nkind = \"pcap-in\"\nmac = \"02:00:00:00:00:01\"\npcap = \"in.pcap\"\ncapture = \"tap.pcap\"\n\
                    [[ports]]\nname = \"b\"\nkind = \"pcap-out\"\nmac = \"02:00:00:00:00:02\"\npcap = \"out.pcap\"\n";
        std::fs::write(dir.join("c.toml"), text).unwrap();
        assert!(!Path::new("in.pcap").exists() && std::env::current_dir().unwrap() != dir, "the test runs elsewhere");
        let c = Config::load(&dir.join("c.toml")).unwrap();
        assert_eq!(c.ports[0].pcap.as_deref(), Some(dir.join("in.pcap").as_path()));
        assert_eq!(c.ports[0].capture.as_deref(), Some(dir.join("tap.pcap").as_path()));
        assert_eq!(c.ports[1].pcap.as_deref(), Some(dir.join("out.pcap").as_path()));
        assert_eq!(c.xdp.as_ref().map(|x| x.program.clone()), Some(dir.join("prog.o").to_string_lossy().into_owned()));
        let pool = Pool::new(1024).unwrap();
        let mut dp = c.build(c.tunables(&[]).unwrap(), &pool).unwrap();
        assert!(dp.workers[0].xdp.native.first().is_some_and(Option::is_some), "the object next to the config is attached");
        dp.run(
            crate::napi::RunLimit { until_bounded_inputs_done: true, ..Default::default() },
            std::time::Duration::from_secs(1),
            |_, _| {},
        );
        assert!(dp.counters().rx > 0, "the capture next to the config was played");
        assert!(dir.join("tap.pcap").exists() && dir.join("out.pcap").exists(), "outputs go next to the config");
        // Absolute paths and built-in programs are taken as they are.
        let abs = dir.join("in.pcap").display().to_string();
        let text = format!(
            "pipeline = \"l3fwd\"\n[xdp]\nprogram = \"builtin:drop\"\n[[ports]]\nname = \"a\"\nkind = \"pcap-in\"\nmac = \"02:00:00:00:00:01\"\npcap = {abs:?}\n"
        );
        std::fs::write(dir.join("d.toml"), text).unwrap();
        let c = Config::load(&dir.join("d.toml")).unwrap();
        assert_eq!((c.ports[0].pcap.as_deref(), c.xdp.unwrap().program.as_str()), (Some(Path::new(&abs)), "builtin:drop"));
    }

    #[test]
    fn ip_route_lines() {
        let r = parse_ip_route("10.0.0.0/24 via 192.0.2.2 dev sink0 proto static metric 100").unwrap();
        assert_eq!(r, IpRoute { kind: "forward", prefix: "10.0.0.0/24", via: Some("192.0.2.2"), dev: Some("sink0") });
        assert_eq!(parse_ip_route("blackhole 10.1.0.0/16").unwrap().kind, "blackhole");
        assert_eq!(parse_ip_route("prohibit 10.1.0.0/16").unwrap().kind, "unreachable");
        assert_eq!(parse_ip_route("default via 1.2.3.4 dev x").unwrap().prefix, "0.0.0.0/0");
        assert!(parse_ip_route("10.0.0.0/8 via").unwrap_err().contains("needs a value"));
        assert!(parse_ip_route("10.0.0.0/8 nexthop x").unwrap_err().contains("unknown word"));
        assert!(parse_ip_route("10.0.0.1").unwrap_err().contains("not a prefix"));
    }

    #[test]
    fn routes_file_is_streamed_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("routes.txt");
        let mut text = String::from("# a comment\n\nblackhole 203.0.113.0/24\n");
        for i in 0..1000u32 {
            text.push_str(&format!("100.{}.{}.0/24 dev sink0\n", i / 256, i % 256));
        }
        std::fs::write(&path, &text).unwrap();
        let pool = Pool::new(64).unwrap();
        let mut c = lab(Pipeline::L3fwd);
        c.routes_file = Some(path.clone());
        let dp = c.build(Tunables::default(), &pool).unwrap();
        assert_ne!(dp.net.routes.lookup_v4([100, 3, 231, 7]), crate::rx::route::NO_ROUTE);
        assert!(!dp.net.routes.is_local_source_v4([203, 0, 113, 7]));
        // A local route in the file switches source validation to FIB lookups.
        std::fs::write(&path, format!("{text}local 198.18.7.0/24\n")).unwrap();
        let dp = c.build(Tunables::default(), &pool).unwrap();
        assert!(dp.net.routes.is_local_source_v4([198, 18, 7, 9]));
        text.push_str("100.0.0.0/24 dev sink0\n");
        std::fs::write(&path, &text).unwrap();
        let e = c.build(Tunables::default(), &pool).err().unwrap().to_string();
        assert!(e.contains("routes.txt:1004") && e.contains("already routed"), "{e}");
        std::fs::write(&path, "10.0.0.1/8 dev sink0\n").unwrap();
        let e = c.build(Tunables::default(), &pool).err().unwrap().to_string();
        assert!(e.contains("host bits"), "{e}");
    }

    #[test]
    fn silent_acceptances_are_refused() {
        let pool = Pool::new(64).unwrap();
        let build = |c: &Config| c.build(Tunables::default(), &pool).err().map(|e| e.to_string()).unwrap_or_default();
        let mut c = lab(Pipeline::L3fwd);
        c.ports[1].name = c.ports[0].name.clone();
        assert!(build(&c).contains("names must be unique"), "{}", build(&c));
        for (mtu, word) in [(0u16, "outside"), (1000, "IPv6")] {
            let mut c = lab(Pipeline::L3fwd);
            c.ports[0].mtu = Some(mtu);
            assert!(build(&c).contains(word), "mtu {mtu}: {}", build(&c));
        }
        let mut c = lab(Pipeline::L3fwd);
        c.ports[0].vlans = vec![5000];
        assert!(build(&c).contains("1..=4094"), "{}", build(&c));
        let mut c = lab(Pipeline::L3fwd);
        c.routes.push(c.routes[0].clone());
        assert!(build(&c).contains("already routes["), "{}", build(&c));
        let mut c = lab(Pipeline::L3fwd);
        c.ports[0].gen.as_mut().unwrap().flows = u32::MAX;
        assert!(build(&c).contains("MiB of packet templates"), "{}", build(&c));
        for rate in [-5.0, f64::NAN, f64::INFINITY] {
            let mut c = lab(Pipeline::L3fwd);
            c.ports[0].gen.as_mut().unwrap().rate_pps = Some(rate);
            assert!(build(&c).contains("rate_pps"), "{rate}: {}", build(&c));
        }
        let mut c = lab(Pipeline::L3fwd);
        c.route_series.push(RouteSeries { base: "10.0.0.0".into(), len: 24, count: u32::MAX, via: "x".into(), port: "sink0".into() });
        assert!(build(&c).contains("at most 16777216"), "{}", build(&c));
        let mut c = lab(Pipeline::L3fwd);
        c.route_series.push(RouteSeries {
            base: "255.255.0.0".into(),
            len: 24,
            count: 1000,
            via: "198.51.100.2".into(),
            port: "sink0".into(),
        });
        assert!(build(&c).contains("address space"), "{}", build(&c));
        let mut c = lab(Pipeline::Io);
        c.xdp = Some(XdpConfig {
            program: "builtin:drop".into(),
            mode: XdpMode::Native,
            engine: EngineKind::Jit,
            section: None,
            maps: None,
            map: Vec::new(),
        });
        assert!(build(&c).contains("would never run"), "{}", build(&c));
        let mut c = lab(Pipeline::L3fwd);
        c.xdp = Some(XdpConfig {
            program: "builtin:drop".into(),
            mode: XdpMode::Native,
            engine: EngineKind::Jit,
            section: Some("xdp".into()),
            maps: None,
            map: Vec::new(),
        });
        assert!(build(&c).contains("no sections"), "{}", build(&c));
        let mut c = lab(Pipeline::L3fwd);
        c.xdp = Some(XdpConfig {
            program: "builtin:redirect=4294967295".into(),
            mode: XdpMode::Native,
            engine: EngineKind::Jit,
            section: None,
            maps: None,
            map: Vec::new(),
        });
        assert!(build(&c).contains("no such ifindex"), "{}", build(&c));
    }

    #[test]
    fn errors_name_the_field() {
        let pool = Pool::new(64).unwrap();
        let mut c = lab(Pipeline::L3fwd);
        c.ports[0].mac = "nope".into();
        let e = c.build(Tunables::default(), &pool).err().unwrap().to_string();
        assert!(e.contains("ports[0] (gen0).mac"), "{e}");
        let mut c = lab(Pipeline::L3fwd);
        c.routes.push(RouteConfig { prefix: "10.0.0.0/33".into(), via: None, port: Some("sink0".into()), kind: None });
        let e = c.build(Tunables::default(), &pool).err().unwrap().to_string();
        assert!(e.contains("routes[") && e.contains("33"), "{e}");
        let mut c = lab(Pipeline::L3fwd);
        c.routes.push(RouteConfig { prefix: "10.0.0.0/8".into(), via: Some("1.2.3.4".into()), port: Some("sink0".into()), kind: None });
        let e = c.build(Tunables::default(), &pool).err().unwrap().to_string();
        assert!(e.contains("routes[") && e.contains("not on a subnet"), "{e}");
        let e = Config::from_toml("pipeline = \"l3fwd\"\nports = []\nbogus = 1\n", "x.toml").err().unwrap().to_string();
        assert!(e.contains("bogus"), "{e}");
        let mut c = lab(Pipeline::L3fwd);
        c.tunables.insert("net.core.dev_weight".into(), toml::Value::Integer(0));
        assert!(c.tunables(&[]).is_err());
    }

    /// A TOML boolean is 1 or 0 for a 0..=1 tunable only: `"net.core.dev_weight" = true` is an
    /// error naming the setting, not a weight of 1.
    #[test]
    fn boolean_words_only_for_boolean_tunables_in_a_config() {
        let mut c = lab(Pipeline::L3fwd);
        c.tunables.insert("net.core.dev_weight".into(), toml::Value::Boolean(true));
        let e = c.tunables(&[]).expect_err("a boolean weight").to_string();
        assert!(e.contains("net.core.dev_weight"), "{e}");
        let mut c = lab(Pipeline::L3fwd);
        c.tunables.insert("rx.listified".into(), toml::Value::Boolean(false));
        assert_eq!(c.tunables(&[]).unwrap().listified, 0);
    }

    /// An unquoted sysctl name in `[tunables]` is a nested table in TOML: it sets the same
    /// tunable as the quoted name (it was refused as "unknown tunable `net`").
    #[test]
    fn unquoted_dotted_tunable_names_mean_the_sysctl_name() {
        let mut c = lab(Pipeline::L3fwd);
        c.tunables = toml::from_str("net.core.dev_weight = 32\nrx.listified = 0\n\"net.core.gro_normal_batch\" = 4").unwrap();
        let t = c.tunables(&[]).unwrap();
        assert_eq!((t.dev_weight, t.listified, t.gro_normal_batch), (32, 0, 4));
        c.tunables = toml::from_str("net.core.no_such_thing = 1").unwrap();
        let e = c.tunables(&[]).expect_err("unknown").to_string();
        assert!(e.contains("net.core.no_such_thing"), "{e}");
    }

    /// `table` in a routes file: the main table is the only one (a route for another table
    /// would have been put in the main one).
    #[test]
    fn routes_for_another_table_are_refused() {
        assert!(parse_ip_route("10.0.0.0/24 via 192.0.2.2 dev sink0 table main").is_ok());
        assert!(parse_ip_route("10.0.0.0/24 via 192.0.2.2 dev sink0 table 254").is_ok());
        let e = parse_ip_route("10.0.0.0/24 via 192.0.2.2 dev sink0 table 100").unwrap_err();
        assert!(e.contains("table `100`"), "{e}");
    }
}
