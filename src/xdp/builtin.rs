//! Built-in XDP programs (Rust): the same verdicts as their eBPF counterparts, no runtime.
//! Named on the command line as `builtin:NAME[=ARG]`.

use super::env::SluiceEnv;
use super::{RedirectTarget, RunOutcome, XdpBuff, XdpProgram};
use sluice_ebpf::insn::{XDP_DROP, XDP_PASS, XDP_REDIRECT, XDP_TX};

fn verdict(action: u32) -> RunOutcome {
    RunOutcome { action, redirect: None }
}

/// XDP_DROP everything; `read` touches the first packet byte first (the seed's "read").
pub struct Drop {
    pub read: bool,
}

impl XdpProgram for Drop {
    fn name(&self) -> String {
        if self.read { "builtin:drop-read" } else { "builtin:drop" }.into()
    }
    fn run(&mut self, xdp: &mut XdpBuff<'_>, _env: &mut SluiceEnv<'_>) -> RunOutcome {
        if self.read {
            std::hint::black_box(xdp.frame.get(xdp.data).copied());
        }
        verdict(XDP_DROP)
    }
}

pub struct Pass;

impl XdpProgram for Pass {
    fn name(&self) -> String {
        "builtin:pass".into()
    }
    fn run(&mut self, _xdp: &mut XdpBuff<'_>, _env: &mut SluiceEnv<'_>) -> RunOutcome {
        verdict(XDP_PASS)
    }
}

/// Swap Ethernet source and destination, XDP_TX (the frame goes back out of its port).
pub struct TxMacswap;

impl XdpProgram for TxMacswap {
    fn name(&self) -> String {
        "builtin:tx".into()
    }
    fn run(&mut self, xdp: &mut XdpBuff<'_>, _env: &mut SluiceEnv<'_>) -> RunOutcome {
        let Some(eth) = xdp.frame.get_mut(xdp.data..xdp.data + 12).filter(|_| xdp.data_end >= xdp.data + 14) else {
            return verdict(XDP_DROP);
        };
        let mut dst = [0u8; 6];
        dst.copy_from_slice(&eth[..6]);
        eth.copy_within(6..12, 0);
        eth[6..12].copy_from_slice(&dst);
        verdict(XDP_TX)
    }
}

/// Redirect everything to another port's ifindex (port + 1).
pub struct Redirect {
    pub ifindex: u32,
}

impl XdpProgram for Redirect {
    fn name(&self) -> String {
        format!("builtin:redirect={}", self.ifindex)
    }
    fn run(&mut self, _xdp: &mut XdpBuff<'_>, _env: &mut SluiceEnv<'_>) -> RunOutcome {
        RunOutcome { action: XDP_REDIRECT, redirect: Some(RedirectTarget::Ifindex(self.ifindex)) }
    }
}

/// A small firewall: drops UDP/TCP to the listed destination ports and anything from the
/// listed IPv4 source prefixes; passes the rest.
pub struct Firewall {
    pub blocked_ports: Vec<u16>,
    pub blocked_v4: Vec<([u8; 4], u8)>,
    pub dropped: u64,
}

impl Firewall {
    fn blocks(&self, pkt: &[u8]) -> bool {
        if pkt.len() < 34 || pkt[12..14] != [0x08, 0x00] {
            return false;
        }
        let ip = &pkt[14..];
        let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
        for (p, l) in &self.blocked_v4 {
            let mask = if *l == 0 { 0 } else { u32::MAX << (32 - *l as u32) };
            if src & mask == u32::from_be_bytes(*p) & mask {
                return true;
            }
        }
        let ihl = (ip[0] & 0x0f) as usize * 4;
        if (ip[9] == 6 || ip[9] == 17) && ip.len() >= ihl + 4 {
            let dport = u16::from_be_bytes([ip[ihl + 2], ip[ihl + 3]]);
            return self.blocked_ports.contains(&dport);
        }
        false
    }
}

impl XdpProgram for Firewall {
    fn name(&self) -> String {
        "builtin:firewall".into()
    }
    fn run(&mut self, xdp: &mut XdpBuff<'_>, _env: &mut SluiceEnv<'_>) -> RunOutcome {
        let pkt = xdp.frame.get(xdp.data..xdp.data_end).unwrap_or(&[]);
        if self.blocks(pkt) {
            self.dropped += 1;
            verdict(XDP_DROP)
        } else {
            verdict(XDP_PASS)
        }
    }
}

/// Parses `builtin:NAME[=ARG]`: drop, drop-read, pass, tx, redirect=IFINDEX,
/// firewall=PORT,PORT,A.B.C.D/N,...
/// `ports` is how many ports there are: a redirect must name one of their ifindexes
/// (`port + 1`, 1..=ports).
pub fn parse(spec: &str, ports: usize) -> Result<Box<dyn XdpProgram>, String> {
    let body = spec.strip_prefix("builtin:").ok_or_else(|| format!("`{spec}` is not builtin:NAME"))?;
    let (name, arg) = body.split_once('=').map(|(a, b)| (a, Some(b))).unwrap_or((body, None));
    Ok(match (name, arg) {
        ("drop", None) => Box::new(Drop { read: false }),
        ("drop-read", None) => Box::new(Drop { read: true }),
        ("pass", None) => Box::new(Pass),
        ("tx", None) => Box::new(TxMacswap),
        ("redirect", Some(a)) => {
            let ifindex: u32 = a.parse().map_err(|_| format!("redirect needs an ifindex, got `{a}`"))?;
            if ifindex == 0 || ifindex as usize > ports {
                return Err(format!("redirect={ifindex}: no such ifindex (ports have ifindexes 1..={ports})"));
            }
            Box::new(Redirect { ifindex })
        }
        ("firewall", Some(a)) => {
            let mut fw = Firewall { blocked_ports: Vec::new(), blocked_v4: Vec::new(), dropped: 0 };
            for item in a.split(',').filter(|s| !s.is_empty()) {
                if let Some((ip, len)) = item.split_once('/') {
                    let ip: std::net::Ipv4Addr = ip.parse().map_err(|_| format!("firewall: bad address `{ip}`"))?;
                    let len: u8 = len.parse().ok().filter(|l| *l <= 32).ok_or_else(|| format!("firewall: bad prefix length `{len}`"))?;
                    fw.blocked_v4.push((ip.octets(), len));
                } else {
                    fw.blocked_ports.push(item.parse().map_err(|_| format!("firewall: bad port `{item}`"))?);
                }
            }
            Box::new(fw)
        }
        _ => return Err(format!("unknown built-in XDP program `{spec}` (drop, drop-read, pass, tx, redirect=N, firewall=...)")),
    })
}
