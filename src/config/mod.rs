//! Configuration: ports, addresses, routes, neighbours, pipeline and tunables, from a TOML
//! file or the built-in lab; and building a datapath from it.

pub mod tunables;

pub use tunables::{TunableError, Tunables, TUNABLES};

use crate::buf::Pool;
use crate::datapath::{Datapath, Pipeline};
use crate::port::gen::{GenConfig, Generator};
use crate::port::pcap::{PcapIn, PcapOut};
use crate::port::sink::{CheckSpec, Sink, SinkKind};
use crate::port::{parse_mac, Port};
use crate::rx::route::{Iface, NextHop};
use crate::xdp::ebpf::{EbpfProgram, EngineKind};
use crate::xdp::{XdpMode, XdpProgram};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {msg}")]
    File { path: String, msg: String },
    #[error("{field}: {msg}")]
    Field { field: String, msg: String },
    #[error(transparent)]
    Tunable(#[from] TunableError),
}

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
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    pub name: String,
    pub kind: PortKind,
    pub mac: String,
    #[serde(default)]
    pub ipv4: Vec<String>,
    #[serde(default)]
    pub ipv6: Vec<String>,
    #[serde(default = "default_mtu")]
    pub mtu: u16,
    #[serde(default)]
    pub vlans: Vec<u16>,
    /// io / macswap: the port received packets go out of.
    #[serde(default)]
    pub peer: Option<String>,
    #[serde(default)]
    pub gen: Option<GenConfig>,
    #[serde(default)]
    pub check: Option<CheckConfig>,
    /// pcap-in / pcap-out: the capture file.
    #[serde(default)]
    pub pcap: Option<PathBuf>,
    /// pcap-in: how many times to replay the file.
    #[serde(default)]
    pub repeat: Option<u64>,
    /// Fault injection on this port's wire (`port::fault`).
    #[serde(default)]
    pub fault: Option<crate::port::fault::FaultConfig>,
}

fn default_mtu() -> u16 {
    1500
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
    #[serde(default)]
    pub neighbours: Vec<NeighbourConfig>,
    /// Local pipeline: UDP ports with a bound socket (drained by the lab's application).
    #[serde(default)]
    pub udp_sockets: Vec<u16>,
    /// An XDP program attached to every receiving port.
    #[serde(default)]
    pub xdp: Option<XdpConfig>,
}

/// `[xdp]`: program = "PROG.o" or "builtin:NAME", mode = "native" | "generic",
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
        Self::from_toml(&text, &p)
    }

    /// Tunables: defaults, then the file's `[tunables]`, then `overrides` (`name=value`).
    pub fn tunables(&self, overrides: &[String]) -> Result<Tunables, ConfigError> {
        let mut t = Tunables::default();
        for (k, v) in &self.tunables {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Boolean(b) => (*b as u8).to_string(),
                other => other.to_string(),
            };
            t.set(k, &s)?;
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
        let mut dp = Datapath::new(tun, self.pipeline, pool);
        if self.ports.is_empty() {
            return Err(field("ports", "at least one port is required"));
        }
        for (i, pc) in self.ports.iter().enumerate() {
            let what = format!("ports[{i}] ({})", pc.name);
            let mac = parse_mac(&pc.mac).ok_or_else(|| field(format!("{what}.mac"), format!("`{}` is not a MAC address", pc.mac)))?;
            let mut iface = Iface::new(&pc.name, mac);
            iface.mtu = pc.mtu;
            iface.vlans = pc.vlans.clone();
            for a in &pc.ipv4 {
                match parse_prefix(a, &format!("{what}.ipv4"))? {
                    (IpAddr::V4(v4), l) => iface.v4.push((v4.octets(), l)),
                    _ => return Err(field(format!("{what}.ipv4"), format!("`{a}` is not IPv4"))),
                }
            }
            for a in &pc.ipv6 {
                match parse_prefix(a, &format!("{what}.ipv6"))? {
                    (IpAddr::V6(v6), l) => iface.v6.push((v6.octets(), l)),
                    _ => return Err(field(format!("{what}.ipv6"), format!("`{a}` is not IPv6"))),
                }
            }
            let port: Box<dyn Port> = match pc.kind {
                PortKind::Gen => {
                    let g = pc.gen.clone().unwrap_or_default();
                    Box::new(Generator::new(&pc.name, g).map_err(|e| field(format!("{what}.gen"), e.to_string()))?)
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
                    Box::new(Sink::new(&pc.name, kind, spec))
                }
                PortKind::PcapIn => {
                    let path = pc.pcap.as_ref().ok_or_else(|| field(format!("{what}.pcap"), "pcap-in needs a `pcap` file"))?;
                    Box::new(
                        PcapIn::open(&pc.name, path, pc.repeat.unwrap_or(1)).map_err(|e| field(format!("{what}.pcap"), e.to_string()))?,
                    )
                }
                PortKind::PcapOut => {
                    let path = pc.pcap.as_ref().ok_or_else(|| field(format!("{what}.pcap"), "pcap-out needs a `pcap` file"))?;
                    Box::new(PcapOut::create(&pc.name, path).map_err(|e| field(format!("{what}.pcap"), e.to_string()))?)
                }
            };
            let port = crate::port::fault::wrap(port, pc.fault.as_ref()).map_err(|e| field(format!("{what}.fault.{}", e.field), e.msg))?;
            let idx = dp.add_port(port, iface.clone());
            dp.routes.add_iface(idx, &iface).map_err(|e| field(format!("{what}.ipv4/ipv6"), e.to_string()))?;
        }
        for (i, pc) in self.ports.iter().enumerate() {
            if let Some(peer) = &pc.peer {
                dp.peer[i] = Some(self.port_index(peer, &format!("ports[{i}].peer"))?);
            }
        }
        if matches!(self.pipeline, Pipeline::Io | Pipeline::Macswap)
            && dp.peer.iter().zip(&self.ports).any(|(p, c)| p.is_none() && matches!(c.kind, PortKind::Gen | PortKind::PcapIn))
        {
            return Err(field("ports", "io/macswap pipelines need a `peer` on every receiving port"));
        }
        for (i, n) in self.neighbours.iter().enumerate() {
            let what = format!("neighbours[{i}]");
            let port = self.port_index(&n.port, &format!("{what}.port"))?;
            let mac = parse_mac(&n.mac).ok_or_else(|| field(format!("{what}.mac"), format!("`{}` is not a MAC address", n.mac)))?;
            match n.ip.parse::<IpAddr>().map_err(|_| field(format!("{what}.ip"), format!("`{}` is not an IP address", n.ip)))? {
                IpAddr::V4(a) => dp.routes.neigh4.insert((port, a.octets()), mac),
                IpAddr::V6(a) => dp.routes.neigh6.insert((port, a.octets()), mac),
            };
        }
        for (i, r) in self.routes.iter().enumerate() {
            let what = format!("routes[{i}]");
            let (addr, len) = parse_prefix(&r.prefix, &format!("{what}.prefix"))?;
            let nh = self.route_nexthop(&dp, r.kind.as_deref(), r.via.as_deref(), r.port.as_deref(), &what)?;
            add_route(&mut dp, addr, len, nh).map_err(|e| field(&what, e))?;
        }
        for (i, s) in self.route_series.iter().enumerate() {
            let what = format!("route_series[{i}]");
            let nh = self.route_nexthop(&dp, None, Some(&s.via), Some(&s.port), &what)?;
            let base: IpAddr = s.base.parse().map_err(|_| field(format!("{what}.base"), format!("`{}` is not an IP address", s.base)))?;
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
        for &p in &self.udp_sockets {
            dp.sockets.bind_udp(p, 4096).map_err(|e| field("udp_sockets", e.to_string()))?;
        }
        if let Some(x) = &self.xdp {
            for (i, pc) in self.ports.iter().enumerate() {
                if !matches!(pc.kind, PortKind::Gen | PortKind::PcapIn) {
                    continue;
                }
                let prog: Box<dyn XdpProgram> = if x.program.starts_with("builtin:") {
                    crate::xdp::builtin::parse(&x.program).map_err(|e| field("xdp.program", e))?
                } else {
                    Box::new(
                        EbpfProgram::load_with(std::path::Path::new(&x.program), x.section.as_deref(), x.engine, locked_atomics)
                            .map_err(|e| field("xdp.program", e.to_string()))?,
                    )
                };
                dp.xdp.attach(i as u16, x.mode, prog);
            }
        }
        Ok(dp)
    }

    fn route_nexthop(
        &self,
        dp: &Datapath,
        kind: Option<&str>,
        via: Option<&str>,
        port: Option<&str>,
        what: &str,
    ) -> Result<NextHop, ConfigError> {
        match kind.unwrap_or("forward") {
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
            IpAddr::V4(a) => dp.routes.neigh4.get(&(port, a.octets())),
            IpAddr::V6(a) => dp.routes.neigh6.get(&(port, a.octets())),
        };
        let mac =
            mac.ok_or_else(|| field(format!("{what}.via"), format!("gateway {via} has no entry in `neighbours` on port `{port_name}`")))?;
        Ok(NextHop::Gateway { port, mac: *mac })
    }
}

fn add_route(dp: &mut Datapath, addr: IpAddr, len: u8, nh: NextHop) -> Result<(), String> {
    match addr {
        IpAddr::V4(a) => dp.routes.add_v4(a.octets(), len, nh),
        IpAddr::V6(a) => dp.routes.add_v6(a.octets(), len, nh),
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
            if let Some(g) = c.ports[0].gen.as_mut() {
                g.ip = crate::port::gen::IpVersion::V4;
            }
        }
        Pipeline::Local => {
            c.ports[1].kind = PortKind::Null;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_configs_build() {
        let pool = Pool::new(4096).unwrap();
        for p in [Pipeline::Io, Pipeline::Macswap, Pipeline::L3fwd, Pipeline::Local] {
            let c = lab(p);
            let t = c.tunables(&[]).unwrap();
            let dp = c.build(t, &pool).unwrap();
            assert_eq!(dp.ports.len(), 2);
        }
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
        assert!(e.contains("neighbours"), "{e}");
        let e = Config::from_toml("pipeline = \"l3fwd\"\nports = []\nbogus = 1\n", "x.toml").err().unwrap().to_string();
        assert!(e.contains("bogus"), "{e}");
        let mut c = lab(Pipeline::L3fwd);
        c.tunables.insert("net.core.dev_weight".into(), toml::Value::Integer(0));
        assert!(c.tunables(&[]).is_err());
    }
}
