//! `sluice lab up|down`: a namespace lab of real Linux hosts for sluice to route between.
//!
//! Topology `router` (sluice routes): namespaces `P-a` and `P-b`, each a host with `eth0`,
//! connected by veth pairs to `P-ra` and `P-rb` in the calling namespace, where sluice opens
//! them (AF_XDP or AF_PACKET). Host a (10.201.1.2, 2001:db8:201:1::2) reaches host b
//! (10.201.2.2, 2001:db8:201:2::2) only through sluice's addresses .1 / ::1 on those links:
//! the router-side veths carry no address, no IPv6, and sluice answers with its own MACs
//! (not the veths'), so the calling namespace's kernel drops what reaches it as "other host"
//! and never routes a packet of the lab.
//!
//! Topology `kernel`: the same hosts and addresses, the router-side veths in a namespace
//! `P-r` where the kernel forwards (`sluice bench lab` compares it with sluice).
//!
//! Topology `chain`: a → sluice → a kernel router (namespace `P-c`) → b. sluice's second
//! port is `P-rc` on 10.201.3.0/24 (2001:db8:201:3::/64) and it reaches b's subnet through
//! the kernel router's 10.201.3.2 / ::2, a gateway it resolves by ARP and NDP.
//!
//! The hosts send with checksum offload off (veth would otherwise hand partial checksums to
//! a userspace router) and so without TSO: every frame on the wire is a real one.

use std::fmt::Write as _;
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("the lab needs root (network namespaces and veths): run it with sudo")]
    NotRoot,
    #[error("lab prefix `{0}`: 1 to 11 characters of [a-z0-9] (interface names are at most 15 bytes)")]
    BadPrefix(String),
    #[error("a lab with prefix `{0}` is already up (`sluice lab down --prefix {0}` removes it)")]
    AlreadyUp(String),
    #[error("`{cmd}` failed: {msg}")]
    Command { cmd: String, msg: String },
    #[error("`{0}` is not installed (the lab needs iproute2 and ethtool: apt-get install iproute2 ethtool)")]
    Missing(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    Router,
    Kernel,
    Chain,
}

impl std::str::FromStr for Topology {
    type Err = String;
    fn from_str(s: &str) -> Result<Topology, String> {
        match s {
            "router" => Ok(Topology::Router),
            "kernel" => Ok(Topology::Kernel),
            "chain" => Ok(Topology::Chain),
            _ => Err(format!(
                "unknown topology `{s}` (router: sluice routes; kernel: a router namespace; chain: sluice, then a kernel router)"
            )),
        }
    }
}

/// One side of the lab: a host and the link to the router.
#[derive(Debug, Clone, Copy)]
pub struct Side {
    pub name: &'static str,
    /// Third octet of the side's IPv4 subnet (10.201.N.0/24) and the IPv6 subnet's 4th group.
    pub subnet: u8,
    /// sluice's MAC on this side's link.
    pub router_mac: [u8; 6],
}

pub const SIDES: [Side; 2] = [
    Side { name: "a", subnet: 1, router_mac: [0x02, 0x5c, 0, 0, 1, 1] },
    Side { name: "b", subnet: 2, router_mac: [0x02, 0x5c, 0, 0, 2, 1] },
];

impl Side {
    pub fn host_v4(&self) -> String {
        format!("10.201.{}.2", self.subnet)
    }
    pub fn router_v4(&self) -> String {
        format!("10.201.{}.1", self.subnet)
    }
    pub fn host_v6(&self) -> String {
        format!("2001:db8:201:{}::2", self.subnet)
    }
    pub fn router_v6(&self) -> String {
        format!("2001:db8:201:{}::1", self.subnet)
    }
    /// The host's namespace.
    pub fn netns(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.name)
    }
    /// The router-side veth (the interface sluice opens).
    pub fn router_if(&self, prefix: &str) -> String {
        format!("{prefix}-r{}", self.name)
    }
}

/// The kernel router's namespace (topology `kernel`).
pub fn router_netns(prefix: &str) -> String {
    format!("{prefix}-r")
}

/// Topology `chain`: the link between sluice and the kernel router after it.
pub const CHAIN: Side = Side { name: "c", subnet: 3, router_mac: [0x02, 0x5c, 0, 0, 3, 1] };

/// Topology `chain`: the kernel router's namespace, between sluice and host b.
pub fn chain_netns(prefix: &str) -> String {
    format!("{prefix}-c")
}

fn check_prefix(prefix: &str) -> Result<(), LabError> {
    let ok = !prefix.is_empty() && prefix.len() <= 11 && prefix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(LabError::BadPrefix(prefix.to_string()))
    }
}

fn check_root() -> Result<(), LabError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(LabError::NotRoot);
    }
    Ok(())
}

/// Runs a command, its stderr becoming the error; returns its standard output.
pub(crate) fn sh(cmd: &str, args: &[&str]) -> Result<String, LabError> {
    let out = Command::new(cmd).args(args).output().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => LabError::Missing(cmd.to_string()),
        _ => LabError::Command { cmd: format!("{cmd} {}", args.join(" ")), msg: e.to_string() },
    })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    Err(LabError::Command { cmd: format!("{cmd} {}", args.join(" ")), msg: String::from_utf8_lossy(&out.stderr).trim().to_string() })
}

/// Runs `args` inside namespace `ns`, returning its standard output.
pub(crate) fn in_ns(ns: &str, args: &[&str]) -> Result<String, LabError> {
    let mut all = vec!["netns", "exec", ns];
    all.extend_from_slice(args);
    sh("ip", &all)
}

fn netns_exists(ns: &str) -> bool {
    std::path::Path::new("/run/netns").join(ns).exists()
}

fn link_exists(name: &str) -> bool {
    std::path::Path::new("/sys/class/net").join(name).exists()
}

/// Brings the lab up. On any failure what was made is removed again.
pub fn up(prefix: &str, topology: Topology) -> Result<(), LabError> {
    check_prefix(prefix)?;
    check_root()?;
    let taken = SIDES.iter().any(|s| netns_exists(&s.netns(prefix)) || link_exists(&s.router_if(prefix)));
    let taken = taken || link_exists(&CHAIN.router_if(prefix)) || netns_exists(&chain_netns(prefix));
    if taken || netns_exists(&router_netns(prefix)) {
        return Err(LabError::AlreadyUp(prefix.to_string()));
    }
    let made = build(prefix, topology);
    if made.is_err() {
        let _ = down(prefix);
    }
    made
}

/// The calling namespace's end of a link sluice opens: no IPv6 on it (no link-local
/// address, router solicitations or MLD from this kernel onto the lab's links), up.
fn sluice_side(rif: &str) -> Result<(), LabError> {
    std::fs::write(format!("/proc/sys/net/ipv6/conf/{rif}/disable_ipv6"), "1")
        .map_err(|e| LabError::Command { cmd: format!("disable IPv6 on {rif}"), msg: e.to_string() })?;
    sh("ip", &["link", "set", rif, "up"]).map(drop)
}

/// A kernel router's interface `ifname` in `ns`, with the router address of `side`'s link.
fn kernel_router_if(ns: &str, ifname: &str, v4: &str, v6: &str) -> Result<(), LabError> {
    in_ns(ns, &["ip", "addr", "add", &format!("{v4}/24"), "dev", ifname])?;
    in_ns(ns, &["ip", "-6", "addr", "add", &format!("{v6}/64"), "dev", ifname, "nodad"])?;
    in_ns(ns, &["ip", "link", "set", ifname, "up"]).map(drop)
}

fn forwarding_netns(ns: &str) -> Result<(), LabError> {
    sh("ip", &["netns", "add", ns])?;
    in_ns(ns, &["ip", "link", "set", "lo", "up"])?;
    in_ns(ns, &["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    in_ns(ns, &["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]).map(drop)
}

fn build(prefix: &str, topology: Topology) -> Result<(), LabError> {
    let rns = match topology {
        Topology::Chain => chain_netns(prefix),
        _ => router_netns(prefix),
    };
    if topology != Topology::Router {
        forwarding_netns(&rns)?;
    }
    if topology == Topology::Chain {
        // sluice's second link, to the kernel router, which routes a's subnet back via sluice.
        let rif = CHAIN.router_if(prefix);
        let cif = format!("{prefix}-hc");
        sh("ip", &["link", "add", &rif, "type", "veth", "peer", "name", &cif])?;
        sh("ip", &["link", "set", &cif, "netns", &rns])?;
        in_ns(&rns, &["ethtool", "-K", &cif, "tx", "off"])?;
        kernel_router_if(&rns, &cif, &CHAIN.host_v4(), &CHAIN.host_v6())?;
        let a = SIDES[0];
        in_ns(&rns, &["ip", "route", "add", &format!("10.201.{}.0/24", a.subnet), "via", &CHAIN.router_v4()])?;
        in_ns(&rns, &["ip", "-6", "route", "add", &format!("2001:db8:201:{}::/64", a.subnet), "via", &CHAIN.router_v6()])?;
        sluice_side(&rif)?;
    }
    for side in SIDES {
        let ns = side.netns(prefix);
        let rif = side.router_if(prefix);
        let hif = format!("{prefix}-h{}", side.name);
        sh("ip", &["netns", "add", &ns])?;
        sh("ip", &["link", "add", &rif, "type", "veth", "peer", "name", &hif])?;
        sh("ip", &["link", "set", &hif, "netns", &ns])?;
        // The host.
        in_ns(&ns, &["ip", "link", "set", &hif, "name", "eth0"])?;
        in_ns(&ns, &["ip", "link", "set", "lo", "up"])?;
        in_ns(&ns, &["ethtool", "-K", "eth0", "tx", "off"])?;
        in_ns(&ns, &["ip", "addr", "add", &format!("{}/24", side.host_v4()), "dev", "eth0"])?;
        in_ns(&ns, &["ip", "-6", "addr", "add", &format!("{}/64", side.host_v6()), "dev", "eth0", "nodad"])?;
        in_ns(&ns, &["ip", "link", "set", "eth0", "up"])?;
        in_ns(&ns, &["ip", "route", "add", "default", "via", &side.router_v4()])?;
        in_ns(&ns, &["ip", "-6", "route", "add", "default", "via", &side.router_v6()])?;
        // The router side: sluice's, or a kernel router's (b's side of a chain).
        let sluice_routes = match topology {
            Topology::Router => true,
            Topology::Kernel => false,
            Topology::Chain => side.name == "a",
        };
        if sluice_routes {
            sluice_side(&rif)?;
        } else {
            sh("ip", &["link", "set", &rif, "netns", &rns])?;
            let mac = crate::port::fmt_mac(&side.router_mac);
            in_ns(&rns, &["ip", "link", "set", &rif, "address", &mac])?;
            in_ns(&rns, &["ethtool", "-K", &rif, "tx", "off"])?;
            kernel_router_if(&rns, &rif, &side.router_v4(), &side.router_v6())?;
        }
    }
    Ok(())
}

/// Removes every namespace and veth of the lab `prefix`. Returns what it removed.
pub fn down(prefix: &str) -> Result<Vec<String>, LabError> {
    check_prefix(prefix)?;
    check_root()?;
    let mut removed = Vec::new();
    let mut failed = None;
    for side in SIDES.iter().chain([&CHAIN]) {
        let rif = side.router_if(prefix);
        if link_exists(&rif) {
            // Deleting one end of a veth pair deletes both.
            match sh("ip", &["link", "del", &rif]) {
                Ok(_) => removed.push(rif),
                Err(e) => failed = Some(e),
            }
        }
    }
    for ns in SIDES.iter().map(|s| s.netns(prefix)).chain([router_netns(prefix), chain_netns(prefix)]) {
        if netns_exists(&ns) {
            match sh("ip", &["netns", "del", &ns]) {
                Ok(_) => removed.push(ns),
                Err(e) => failed = Some(e),
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

/// The sluice config that routes the `router` lab of `prefix`, its ports of kind `kind`
/// (`afxdp` or `afpacket`). No neighbours: the hosts are found by ARP and NDP, and sluice
/// announces itself at start (`arp_notify`, `ndisc_notify`).
pub fn config_toml(prefix: &str, kind: &str) -> String {
    config_toml_for(prefix, kind, Topology::Router)
}

/// [`config_toml`] for a topology: `chain` has sluice's second port on the link to the
/// kernel router and routes b's subnet through it (a gateway resolved by ARP / NDP).
pub fn config_toml_for(prefix: &str, kind: &str, topology: Topology) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# sluice routing the namespace lab `{prefix}`: `sluice lab up --prefix {prefix}`, then");
    let _ = writeln!(s, "# `sluice run --config THIS` (root). Made by `sluice lab config --prefix {prefix}`.");
    let _ = writeln!(s, "pipeline = \"l3fwd\"");
    let _ = writeln!(s, "\n[tunables]\n\"net.ipv4.conf.all.arp_notify\" = 1\n\"net.ipv6.conf.all.ndisc_notify\" = 1");
    let sides = match topology {
        Topology::Chain => [SIDES[0], CHAIN],
        _ => SIDES,
    };
    for side in sides {
        let _ = writeln!(s, "\n[[ports]]");
        let _ = writeln!(s, "name = \"{}\"", side.router_if(prefix));
        let _ = writeln!(s, "kind = \"{kind}\"");
        let _ = writeln!(s, "# sluice's own MAC, not the veth's: the kernel here drops the lab's frames as other-host.");
        let _ = writeln!(s, "mac = \"{}\"", crate::port::fmt_mac(&side.router_mac));
        let _ = writeln!(s, "ipv4 = [\"{}/24\"]", side.router_v4());
        let _ = writeln!(s, "ipv6 = [\"{}/64\"]", side.router_v6());
    }
    if topology == Topology::Chain {
        let b = SIDES[1];
        let port = CHAIN.router_if(prefix);
        let _ = writeln!(s, "\n# Host b's subnet: through the kernel router on {port}.");
        let _ = writeln!(s, "[[routes]]\nprefix = \"10.201.{}.0/24\"\nvia = \"{}\"\nport = \"{port}\"", b.subnet, CHAIN.host_v4());
        let _ = writeln!(s, "\n[[routes]]\nprefix = \"2001:db8:201:{}::/64\"\nvia = \"{}\"\nport = \"{port}\"", b.subnet, CHAIN.host_v6());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_fit_interface_names() {
        assert!(check_prefix("sl").is_ok());
        assert!(check_prefix("t12345678ab").is_ok());
        for bad in ["", "t12345678abc", "Sl", "s-l", "s l"] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
        // The longest names the lab makes stay within IFNAMSIZ - 1.
        let p = "t12345678ab";
        assert!(SIDES.iter().all(|s| s.router_if(p).len() <= 15 && format!("{p}-h{}", s.name).len() <= 15));
    }

    #[test]
    fn the_example_config_is_the_generated_one() {
        let example = include_str!("../../examples/lab-router.toml");
        assert_eq!(example, config_toml("sl", "afxdp"), "regenerate with `sluice lab config > examples/lab-router.toml`");
    }

    #[test]
    fn the_generated_config_parses() {
        let c: crate::config::Config = toml::from_str(&config_toml("t1", "afpacket")).expect("parses");
        assert_eq!(c.ports.len(), 2);
        assert_eq!(c.ports[0].name, "t1-ra");
    }
}
