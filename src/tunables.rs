//! Every tunable in one place, with the kernel's sysctl names and defaults. Deliberate
//! differences are said on their lines: forwarding (`net.ipv4.ip_forward`,
//! `net.ipv6.conf.all.forwarding`) is on by default, where the kernel's default is 0; `gro`
//! is off.
//!
//! Set by name from the command line (`--set net.core.gro_normal_batch=16`) or a config
//! file's `[tunables]` table. sluice's own knobs (no kernel sysctl) are named by the stage
//! they belong to (`rx.listified`, `tx.burst`, `xdp.locked_atomics`, `stats.clock_sample`).
//! Some kernel names are accepted before the stage that reads them exists (GRO, RPS, qdisc).

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum TunableError {
    #[error("unknown tunable `{0}` (see `sluice tunables` for the list)")]
    Unknown(String),
    #[error("tunable `{name}`: `{value}` is not a valid value ({why})")]
    BadValue { name: String, value: String, why: String },
    #[error("`{0}` is not NAME=VALUE (e.g. net.core.dev_weight=32)")]
    NotAssignment(String),
    /// The kernel's dev_rx_weight / dev_tx_weight: quotas derived from net.core.dev_weight,
    /// no sysctls of their own.
    #[error("`{name}` is no sysctl: the kernel derives it as net.core.dev_weight × {bias}; set one of those")]
    Derived { name: String, bias: &'static str },
}

/// The kernel's quotas derived from `net.core.dev_weight` (proc_do_dev_weight recomputes them
/// whenever it or a bias is written; neither is a sysctl): (name, its bias, what it bounds).
pub const DERIVED: [(&str, &str, &str); 2] = [
    ("net.core.dev_rx_weight", "net.core.dev_weight_rx_bias", "packets one poll of a worker's RPS backlog may process (process_backlog)"),
    ("net.core.dev_tx_weight", "net.core.dev_weight_tx_bias", "packets one qdisc run may dequeue before rescheduling"),
];

fn derived(name: &str) -> Option<TunableError> {
    DERIVED.iter().find(|d| d.0 == name).map(|d| TunableError::Derived { name: name.to_string(), bias: d.1 })
}

macro_rules! tunables {
    ($( $(#[doc = $doc:literal])* $field:ident : $ty:ty = $default:expr, $name:literal, min $min:expr, max $max:expr; )*) => {
        /// All datapath tunables. Field names follow the kernel's sysctl leaf names.
        #[derive(Debug, Clone, PartialEq, serde::Serialize)]
        pub struct Tunables {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Default for Tunables {
            fn default() -> Self {
                Tunables { $( $field: $default, )* }
            }
        }

        /// (sysctl-style name, one-line description, default) for every tunable.
        pub const TUNABLES: &[(&str, &str, &str)] = &[
            $( ($name, concat!($($doc),*), stringify!($default)), )*
        ];

        impl Tunables {
            /// Sets a tunable by its sysctl-style name, e.g. `net.core.netdev_budget`.
            pub fn set(&mut self, name: &str, value: &str) -> Result<(), TunableError> {
                if let Some(e) = derived(name) {
                    return Err(e);
                }
                match name {
                    $( $name => {
                        // on/off words only where the kernel's range is 0..=1 (a boolean).
                        let boolean = $min as u64 == 0 && $max as u64 == 1;
                        let v: u64 = match special_value(name, value) {
                            Some(v) => v.map_err(|why| TunableError::BadValue {
                                name: name.to_string(), value: value.to_string(), why })?,
                            None => parse_value(value, boolean).map_err(|why: BadNumber| TunableError::BadValue {
                                name: name.to_string(), value: value.to_string(),
                                why: why.explain($min as u64, $max as u64) })?,
                        };
                        if v < $min as u64 || v > $max as u64 {
                            return Err(TunableError::BadValue {
                                name: name.to_string(), value: value.to_string(),
                                why: format!("must be between {} and {}", $min, $max) });
                        }
                        self.$field = v as $ty;
                        Ok(())
                    } )*
                    _ => Err(TunableError::Unknown(name.to_string())),
                }
            }

            /// Reads a tunable by name (as an integer).
            pub fn get(&self, name: &str) -> Result<u64, TunableError> {
                if let Some(e) = derived(name) {
                    return Err(e);
                }
                match name {
                    $( $name => Ok(self.$field as u64), )*
                    _ => Err(TunableError::Unknown(name.to_string())),
                }
            }

            /// Applies `name=value` strings in order.
            pub fn apply_all<S: AsRef<str>>(&mut self, assignments: &[S]) -> Result<(), TunableError> {
                for a in assignments {
                    let a = a.as_ref();
                    let (n, v) = a.split_once('=')
                        .filter(|(n, v)| !n.trim().is_empty() && !v.trim().is_empty())
                        .ok_or_else(|| TunableError::NotAssignment(a.to_string()))?;
                    self.set(n.trim(), v.trim())?;
                }
                Ok(())
            }
        }
    };
}

/// Why a value is not a tunable's number.
enum BadNumber {
    TooLarge,
    Negative,
    NotInteger {
        boolean: bool,
    },
    /// on/off (yes/no, true/false) for a setting that is not a boolean.
    Word,
}

impl BadNumber {
    fn explain(&self, min: u64, max: u64) -> String {
        match self {
            BadNumber::TooLarge => format!("too large: must be between {min} and {max}"),
            BadNumber::Negative => format!("negative: must be between {min} and {max}"),
            BadNumber::NotInteger { boolean: true } => "expected 0 or 1 (or on/off)".to_string(),
            BadNumber::NotInteger { boolean: false } => format!("expected an integer between {min} and {max}"),
            BadNumber::Word => {
                format!("expected an integer between {min} and {max}; on/off only names 1/0 for a setting that is 0 or 1")
            }
        }
    }
}

/// CPU masks (`rps_cpus`, `net.core.flow_limit_cpu_bitmap`) are written as CPU lists, as
/// the kernel prints them (`0-3,6`), or as a hex mask with `0x` (what sysfs takes: `0x3`) or
/// as sysfs prints it (`00000003`, groups of 8 hex digits); `none` or `0` clears them (an
/// empty value is refused). A bare number is a CPU list: `3` is CPU 3, not the mask that
/// `echo 3 > rps_cpus` writes (CPUs 0-1; here `0x3`). Each CPU must be present on this
/// machine. They read back as sysfs prints them ([`cpu_mask_text`]).
fn special_value(name: &str, value: &str) -> Option<Result<u64, String>> {
    if name == "net.core.default_qdisc" {
        return Some(qdisc_index(value));
    }
    if name == "net.core.flow_limit_table_len" {
        // flow_limit_table_len_sysctl refuses a length that is not a power of two (EINVAL).
        return Some(match parse_value(value, false) {
            Ok(v) if v.is_power_of_two() => Ok(v),
            Ok(_) => Err("must be a power of two (the kernel's sysctl refuses others)".into()),
            Err(why) => Err(why.explain(1, 1 << 20)),
        });
    }
    if name != "rps_cpus" && name != "net.core.flow_limit_cpu_bitmap" {
        return None;
    }
    let v = value.trim();
    if v == "none" || v == "0" {
        return Some(Ok(0));
    }
    let present = std::thread::available_parallelism().map_or(1, |n| n.get()).min(64) as u32;
    // What sysfs prints (`cat .../rps_cpus`: groups of 8 hex digits, comma-separated, most
    // significant first) reads back as that mask, not as a CPU list: "00000003" is CPUs 0-1.
    let groups: Vec<&str> = v.split(',').collect();
    let sysfs_mask = groups.iter().all(|g| g.len() == 8 && g.bytes().all(|b| b.is_ascii_hexdigit()));
    let joined;
    let v = if sysfs_mask {
        joined = format!("0x{}", groups.concat().trim_start_matches('0'));
        if joined == "0x" {
            return Some(Ok(0));
        }
        joined.as_str()
    } else {
        v
    };
    if let Some(hex) = v.strip_prefix("0x") {
        return Some(match u64::from_str_radix(hex, 16) {
            Ok(m) if present >= 64 || m >> present == 0 => Ok(m),
            Ok(m) => Err(format!("CPU {} is not present (this machine has CPUs 0-{})", 63 - m.leading_zeros(), present - 1)),
            Err(_) => Err("expected a CPU list like 0-1 or a hex mask like 0x3".into()),
        });
    }
    Some(parse_cpu_list(v, present).map(|cpus| cpus.iter().fold(0u64, |m, c| m | 1 << c)).map_err(|e| e.to_string()))
}

impl Tunables {
    /// The RPS backlog's quota per poll: the kernel's dev_rx_weight, `net.core.dev_weight` ×
    /// `net.core.dev_weight_rx_bias` (process_backlog).
    pub fn dev_rx_weight(&self) -> u32 {
        self.dev_weight.saturating_mul(self.dev_weight_rx_bias)
    }

    /// The qdisc run quota: the kernel's dev_tx_weight, `net.core.dev_weight` ×
    /// `net.core.dev_weight_tx_bias` (__qdisc_run).
    pub fn dev_tx_weight(&self) -> u32 {
        self.dev_weight.saturating_mul(self.dev_weight_tx_bias)
    }

    /// A derived quota of [`DERIVED`] by name.
    pub fn derived_value(&self, name: &str) -> Option<u32> {
        match name {
            "net.core.dev_rx_weight" => Some(self.dev_rx_weight()),
            "net.core.dev_tx_weight" => Some(self.dev_tx_weight()),
            _ => None,
        }
    }

    /// A tunable's value as `--set` takes it back: a number, for `net.core.default_qdisc`
    /// the qdisc's name, for a CPU mask the mask as sysfs prints it (`00000003`: in decimal,
    /// CPUs 0-1 would read back as CPU 3).
    pub fn get_text(&self, name: &str) -> Result<String, TunableError> {
        let v = self.get(name)?;
        if name == "rps_cpus" || name == "net.core.flow_limit_cpu_bitmap" {
            return Ok(cpu_mask_text(v));
        }
        if name == "net.core.default_qdisc" {
            if let Some(q) = usize::try_from(v).ok().and_then(|i| QDISC_NAMES.get(i)) {
                return Ok((*q).to_string());
            }
        }
        Ok(v.to_string())
    }
}

/// A CPU mask as sysfs prints one (`cat .../queues/rx-0/rps_cpus`, bitmap_print_to_pagebuf):
/// hex in groups of 8 digits (32 CPUs), comma-separated, most significant first; here as
/// many groups as the mask needs (the kernel prints as many as the machine's CPUs need).
pub fn cpu_mask_text(mask: u64) -> String {
    match mask >> 32 {
        0 => format!("{mask:08x}"),
        high => format!("{high:08x},{:08x}", mask as u32),
    }
}

/// The qdisc names `net.core.default_qdisc` takes, in the order of its value (the same
/// order as `tx::qdisc::QdiscKind::ALL`; a test keeps them equal).
pub const QDISC_NAMES: [&str; 5] = ["pfifo_fast", "noqueue", "pfifo", "bfifo", "fq_codel"];

fn qdisc_index(value: &str) -> Result<u64, String> {
    let v = value.trim();
    QDISC_NAMES
        .iter()
        .position(|n| *n == v)
        .map(|i| i as u64)
        .or_else(|| v.parse::<u64>().ok().filter(|i| (*i as usize) < QDISC_NAMES.len()))
        .ok_or_else(|| format!("unknown qdisc (one of {})", QDISC_NAMES.join(", ")))
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CpuListError {
    #[error("empty CPU list")]
    Empty,
    #[error("`{0}` is not a CPU number or a range like 0-3")]
    Syntax(String),
    #[error("range `{0}` runs backwards")]
    Backwards(String),
    #[error("CPU {cpu} is not present (this run has {present} worker(s): 0-{last})", last = present.saturating_sub(1))]
    NotPresent { cpu: u32, present: u32 },
}

/// Parses a CPU list in the kernel's syntax (`0-3,6`, as `rps_cpus` and `isolcpus` take it)
/// into sorted, distinct CPU ids below `present`.
pub fn parse_cpu_list(s: &str, present: u32) -> Result<Vec<u32>, CpuListError> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            if s.trim().is_empty() {
                return Err(CpuListError::Empty);
            }
            return Err(CpuListError::Syntax(s.to_string()));
        }
        let num = |t: &str| t.trim().parse::<u32>().map_err(|_| CpuListError::Syntax(part.to_string()));
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo > hi {
            return Err(CpuListError::Backwards(part.to_string()));
        }
        if hi >= present {
            return Err(CpuListError::NotPresent { cpu: hi, present });
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// A tunable's value: a non-negative integer (decimal, hexadecimal after `0x`, octal after a
/// leading `0`, as sysctl reads them), or for a
/// `boolean` (a 0..=1 setting) also on/off, yes/no, true/false. The kernel's sysctls take
/// numbers only; the words are sluice's convenience for switches, and would silently be 1 or
/// 0 for a count or a time.
fn parse_value(s: &str, boolean: bool) -> Result<u64, BadNumber> {
    let word = match s.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" => Some(1),
        "off" | "false" | "no" => Some(0),
        _ => None,
    };
    if let Some(v) = word {
        return if boolean { Ok(v) } else { Err(BadNumber::Word) };
    }
    let t = s.trim();
    if t.starts_with('+') {
        return Err(BadNumber::NotInteger { boolean });
    }
    // Hexadecimal as sysctl takes it (proc_dointvec parses with base 0), e.g. a ratemask.
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(BadNumber::NotInteger { boolean });
        }
        return u64::from_str_radix(hex, 16).map_err(|e| match e.kind() {
            std::num::IntErrorKind::PosOverflow => BadNumber::TooLarge,
            _ => BadNumber::NotInteger { boolean },
        });
    }
    // A leading 0 is octal for the same reason ("010" is 8; "08" is refused, as the kernel's
    // parse stops at the 8 and finds a character left over).
    if t.len() > 1 && t.starts_with('0') && t.bytes().all(|c| c.is_ascii_digit()) {
        return u64::from_str_radix(&t[1..], 8).map_err(|e| match e.kind() {
            std::num::IntErrorKind::PosOverflow => BadNumber::TooLarge,
            _ => BadNumber::NotInteger { boolean },
        });
    }
    t.parse::<u64>().map_err(|e| match e.kind() {
        std::num::IntErrorKind::PosOverflow => BadNumber::TooLarge,
        _ if t.starts_with('-') && t[1..].bytes().all(|c| c.is_ascii_digit()) && t.len() > 1 => BadNumber::Negative,
        _ => BadNumber::NotInteger { boolean },
    })
}

// `bool` fields are stored as u8-like integers would be awkward; the kernel's booleans are
// integers too (0/1), so every tunable is an integer type here.
tunables! {
    /// Packets one NAPI instance may process per poll (NAPI weight); times the biases below, the RPS backlog's and the qdisc run's quotas (the kernel's dev_rx_weight, dev_tx_weight).
    dev_weight: u32 = 64, "net.core.dev_weight", min 1, max 4096;
    /// dev_rx_weight = dev_weight × this: packets one poll of a worker's RPS backlog may process.
    dev_weight_rx_bias: u32 = 1, "net.core.dev_weight_rx_bias", min 1, max 1 << 16;
    /// dev_tx_weight = dev_weight × this: packets one qdisc run may dequeue before rescheduling.
    dev_weight_tx_bias: u32 = 1, "net.core.dev_weight_tx_bias", min 1, max 1 << 16;
    /// Packets one softirq round (all NAPI instances) may process.
    netdev_budget: u32 = 300, "net.core.netdev_budget", min 1, max 1_000_000;
    /// Time budget of one softirq round, in microseconds.
    netdev_budget_usecs: u32 = 2000, "net.core.netdev_budget_usecs", min 1, max 1_000_000;
    /// Per-CPU backlog length (RPS / non-NAPI enqueue), packets.
    netdev_max_backlog: u32 = 1000, "net.core.netdev_max_backlog", min 1, max 1_000_000;
    /// GRO_NORMAL packets (segments) batched before list delivery.
    gro_normal_batch: u32 = 8, "net.core.gro_normal_batch", min 1, max 65536;
    /// Generic receive offload on every port (`ethtool -K <dev> gro on`). Off by default until
    /// forwarding segments GRO packets on transmit (see src/gro/README.md).
    gro: u8 = 0, "gro", min 0, max 1;
    /// Largest TCP packet GRO builds, IP header included (the device's gro_max_size; no BIG
    /// TCP). UDP fraglists have a fixed 64 KB bound (`skb_gro_receive_list`).
    gro_max_size: u32 = 65536, "gro_max_size", min 1, max 65536;
    /// The device's gro_flush_timeout (ns): when set, a completed poll that took packets completes only GRO packets held over a tick and arms a timer; the first empty poll once it fires completes all (0 = a completed poll completes all).
    gro_flush_timeout: u64 = 0, "gro_flush_timeout", min 0, max 1_000_000_000;
    /// UDP GRO for forwarding, fraglist form (`ethtool -K <dev> rx-gro-list on` on every port,
    /// `NETIF_F_GRO_FRAGLIST`; needs `gro`): a UDP train is kept as the chain of its datagrams
    /// and split back on transmit. Off by default, as in the kernel.
    rx_gro_list: u8 = 0, "rx-gro-list", min 0, max 1;
    /// Flow-limit table buckets per CPU (a power of two).
    flow_limit_table_len: u32 = 4096, "net.core.flow_limit_table_len", min 1, max 1 << 20;
    /// CPUs (workers) that apply the flow limit to the packets they queue on backlogs (a CPU list like 0-1, a 0x mask or sysfs's 00000003; 0 = none, the kernel's default; reads back as sysfs prints it).
    flow_limit_cpu_bitmap: u64 = 0, "net.core.flow_limit_cpu_bitmap", min 0, max u64::MAX;
    /// Receive Packet Steering: workers the receive path spreads flows over (a CPU list like 0-1, a 0x mask like 0x3, or sysfs's 00000003; a bare 3 is CPU 3; 0 = off; reads back as sysfs prints it). One worker per CPU up to the highest one.
    rps_cpus: u64 = 0, "rps_cpus", min 0, max u64::MAX;
    /// Microseconds an idle worker keeps polling its backlog before it sleeps (0 = sleep at once and be woken by the producer; like net.core.busy_poll, trading CPU for wake-up latency).
    busy_poll: u32 = 0, "net.core.busy_poll", min 0, max 1_000_000;
    /// RFS: entries of the global socket flow table (rounded up to a power of two; 0 = RFS off).
    rps_sock_flow_entries: u32 = 0, "net.core.rps_sock_flow_entries", min 0, max 1 << 26;
    /// RFS: entries of each worker's flow table (the kernel's per-queue `rps_flow_cnt`; 0 = RFS off).
    rps_flow_cnt: u32 = 0, "rps_flow_cnt", min 0, max 1 << 20;
    /// Queues of the in-memory ports (generator receive queues by RSS, sink, capture and NIC-model transmit queues) that do not set `rss_queues` themselves (`ethtool -L combined N`); queue q belongs to worker q.
    rss_queues: u32 = 1, "rss_queues", min 1, max 64;
    /// Forward IPv4 packets not addressed to us. On by default, where the kernel's default is 0: sluice is a router, and its built-in lab, examples, benches and tests forward without setting it (a Linux router sets it with sysctl); 0 makes a host.
    ip_forward: u8 = 1, "net.ipv4.ip_forward", min 0, max 1;
    /// Forward IPv6 packets not addressed to us (and advertise as a router in neighbour advertisements). On by default, where the kernel's default is 0, for the same reason as net.ipv4.ip_forward.
    ipv6_forwarding: u8 = 1, "net.ipv6.conf.all.forwarding", min 0, max 1;
    /// Packets held per unresolved neighbour while ARP/NDP resolves it (the oldest is dropped
    /// as `neigh_queuefull` beyond it); NDP uses the same neighbour parameters. 0 holds the
    /// newest one, as the kernel's byte limit does.
    unres_qlen: u32 = 101, "net.ipv4.neigh.default.unres_qlen", min 0, max 65_535;
    /// Broadcast ARP requests (multicast solicitations) sent for an unresolved neighbour before
    /// its held packets are dropped as `neigh_failed`.
    mcast_solicit: u32 = 3, "net.ipv4.neigh.default.mcast_solicit", min 0, max 255;
    /// Unicast probes sent to a stale neighbour before its entry is removed.
    ucast_solicit: u32 = 3, "net.ipv4.neigh.default.ucast_solicit", min 0, max 255;
    /// Milliseconds between ARP/NDP probes.
    retrans_time_ms: u32 = 1000, "net.ipv4.neigh.default.retrans_time_ms", min 1, max 3_600_000;
    /// Milliseconds a learned neighbour stays reachable after its last confirmation (then stale, probed).
    base_reachable_time_ms: u32 = 30_000, "net.ipv4.neigh.default.base_reachable_time_ms", min 1, max 3_600_000;
    /// Seconds a stale neighbour waits before its first unicast probe (DELAY state).
    delay_first_probe_time: u32 = 5, "net.ipv4.neigh.default.delay_first_probe_time", min 0, max 3600;
    /// Most IPv4 neighbour (ARP) entries learned or being resolved: at it, a new one is refused (`neigh_createfail`) unless forced gc frees an entry; configured ones do not count.
    gc_thresh3: u32 = 1024, "net.ipv4.neigh.default.gc_thresh3", min 0, max 1 << 24;
    /// IPv4 neighbour entries above which forced gc also runs every 5 s; it frees unconfirmed-for-5-s learned entries, oldest first, down to this.
    gc_thresh2: u32 = 512, "net.ipv4.neigh.default.gc_thresh2", min 0, max 1 << 24;
    /// Most IPv6 neighbour (NDP) entries learned or being resolved (the IPv6 table is separate).
    ipv6_gc_thresh3: u32 = 1024, "net.ipv6.neigh.default.gc_thresh3", min 0, max 1 << 24;
    /// IPv6 neighbour entries above which forced gc also runs every 5 s, and down to which it frees.
    ipv6_gc_thresh2: u32 = 512, "net.ipv6.neigh.default.gc_thresh2", min 0, max 1 << 24;
    /// Gratuitous ARP for every IPv4 address of a port when the datapath starts.
    arp_notify: u8 = 0, "net.ipv4.conf.all.arp_notify", min 0, max 1;
    /// Unsolicited neighbour advertisements for every IPv6 address of a port when the datapath starts.
    ndisc_notify: u8 = 0, "net.ipv6.conf.all.ndisc_notify", min 0, max 1;
    /// TTL of IPv4 packets sluice originates (ICMP errors, echo replies; IPv6 uses hop limit 64,
    /// neighbour discovery 255).
    ip_default_ttl: u8 = 64, "net.ipv4.ip_default_ttl", min 1, max 255;
    /// Per-destination ICMP error limit: one per this many ms, burst 6 (0 = off).
    icmp_ratelimit: u32 = 1000, "net.ipv4.icmp_ratelimit", min 0, max 1_000_000;
    /// ICMP types the limits apply to (bit n = type n): unreachable, quench, time exceeded, parameter problem.
    icmp_ratemask: u32 = 6168, "net.ipv4.icmp_ratemask", min 0, max u32::MAX;
    /// Host-wide ICMP/ICMPv6 errors per second: the refill rate of the host-wide credit (0 = never refilled: no limited error goes out at all, as in the kernel).
    icmp_msgs_per_sec: u32 = 1000, "net.ipv4.icmp_msgs_per_sec", min 0, max 1_000_000_000;
    /// Burst of the host-wide limit (0 = no credit kept: one error per refill, at most one per 20 ms).
    icmp_msgs_burst: u32 = 50, "net.ipv4.icmp_msgs_burst", min 0, max 1_000_000_000;
    /// Flow labels copied from a request into its answer: bit 4 for ICMPv6 echo replies (bits 1 and 2, established sockets and TCP resets, have nothing to act on here). Without it a reply's label is 0: sluice's own packets carry no automatic flow label (the kernel's net.ipv6.auto_flowlabels = 0; its default, 1, hashes one).
    flowlabel_reflect: u8 = 0, "net.ipv6.flowlabel_reflect", min 0, max 7;
    /// Per-destination ICMPv6 error limit in ms (0 = off); packet too big is exempt. 100: current
    /// kernels' HZ/10 (6.18.y reads 100 here; older ones had HZ, 1000).
    icmpv6_ratelimit: u32 = 100, "net.ipv6.icmp.ratelimit", min 0, max 1_000_000;
    /// Listified receive: pass each poll's packets through the stack as lists (0 = one at a time).
    listified: u8 = 1, "rx.listified", min 0, max 1;
    /// Reuse the previous route lookup for consecutive packets with the same (daddr, tos).
    route_hint: u8 = 1, "rx.route_hint", min 0, max 1;
    /// The qdisc of ports whose config names none: pfifo_fast (Linux's default for a device
    /// without multiqueue), noqueue, pfifo, bfifo or fq_codel.
    default_qdisc: u8 = 0, "net.core.default_qdisc", min 0, max 4;
    /// Qdisc bulk dequeue: hand the driver as many packets per call as BQL's dql_avail()
    /// allows, with xmit_more (0 = one packet per call, a doorbell each).
    qdisc_bulk: u8 = 1, "qdisc.bulk", min 0, max 1;
    /// Packet limit of pfifo and of each pfifo_fast band (a device's tx_queue_len; bfifo: × MTU bytes).
    txqueuelen: u32 = 1000, "txqueuelen", min 1, max 1 << 24;
    /// Packets a port's transmit queue gathers before a tx burst.
    tx_burst: u32 = 32, "tx.burst", min 1, max 4096;
    /// Bus-locked instructions for BPF atomics even when one worker runs the program (the
    /// kernel's code); 0 = a plain read-modify-write when a single thread is the only writer.
    locked_atomics: u8 = 0, "xdp.locked_atomics", min 0, max 1;
    /// Per-stage clocks: time a random 1 in N polls and scale (1 = every poll, 0 = off).
    /// A TSC read costs about 10 ns here, several per listified poll.
    clock_sample: u32 = 16, "stats.clock_sample", min 0, max 1 << 20;
    /// Benchmark calibration: iterations of a dependent busy loop added per received packet (0 = off).
    extra_work: u32 = 0, "rx.extra_work", min 0, max 1_000_000;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_kernels() {
        let t = Tunables::default();
        assert_eq!(t.gro_normal_batch, 8);
        assert_eq!(t.netdev_budget, 300);
        assert_eq!(t.netdev_budget_usecs, 2000);
        assert_eq!(t.dev_weight, 64);
        assert_eq!(t.netdev_max_backlog, 1000);
        assert_eq!((t.icmp_ratelimit, t.icmpv6_ratelimit, t.icmp_msgs_burst), (1000, 100, 50));
        assert_eq!((t.dev_weight_rx_bias, t.dev_weight_tx_bias), (1, 1));
        assert_eq!((t.dev_rx_weight(), t.dev_tx_weight()), (64, 64));
    }

    #[test]
    fn set_by_sysctl_name() {
        let mut t = Tunables::default();
        t.apply_all(&["net.core.gro_normal_batch=16", "rx.listified=off"]).unwrap();
        assert_eq!(t.gro_normal_batch, 16);
        assert_eq!(t.listified, 0);
        assert_eq!(t.get("net.core.gro_normal_batch").unwrap(), 16);
        // Hexadecimal, as sysctl -w takes it (base 0).
        t.apply_all(&["net.ipv4.icmp_ratemask=0x1819", "net.core.dev_weight=0X20"]).unwrap();
        assert_eq!((t.icmp_ratemask, t.dev_weight), (0x1819, 32));
        assert!(t.set("net.core.dev_weight", "0x").is_err() && t.set("net.core.dev_weight", "0xg").is_err());
        // And octal after a leading 0; a lone 0 is zero.
        t.apply_all(&["net.core.dev_weight=010", "net.ipv4.icmp_ratemask=00"]).unwrap();
        assert_eq!((t.dev_weight, t.icmp_ratemask), (8, 0));
        // 8 is no octal digit; a sign is no digit at all (proc_get_long refuses both).
        assert!(t.set("net.core.dev_weight", "08").is_err() && t.set("net.core.dev_weight", "+10").is_err());
        assert!(t.set("net.core.dev_weight", "0x+5").is_err());
    }

    #[test]
    fn bad_names_and_values_are_errors() {
        let mut t = Tunables::default();
        assert!(matches!(t.set("net.core.nope", "1"), Err(TunableError::Unknown(_))));
        assert!(matches!(t.set("net.core.gro_normal_batch", "0"), Err(TunableError::BadValue { .. })));
        assert!(matches!(t.set("net.core.dev_weight", "x"), Err(TunableError::BadValue { .. })));
        assert!(t.apply_all(&["novalue"]).is_err());
        assert!(TUNABLES.iter().any(|(n, _, d)| *n == "net.core.gro_normal_batch" && *d == "8"));
    }

    /// What `sluice tunables` prints as each default is what `--set` takes back, giving the
    /// same settings.
    #[test]
    fn every_default_as_printed_is_accepted_by_set() {
        let defaults = Tunables::default();
        let mut t = Tunables::default();
        for (name, _, _) in TUNABLES {
            let text = defaults.get_text(name).unwrap();
            t.set(name, &text).unwrap_or_else(|e| panic!("{name}={text}: {e}"));
        }
        assert_eq!(t, defaults);
        assert_eq!(defaults.get_text("net.core.default_qdisc").unwrap(), "pfifo_fast");
        assert_eq!(defaults.get_text("net.ipv4.neigh.default.base_reachable_time_ms").unwrap(), "30000");
    }

    #[test]
    fn cpu_lists_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-3,6", 8), Ok(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("1", 2), Ok(vec![1]));
        assert_eq!(parse_cpu_list("1,0,1", 2), Ok(vec![0, 1]));
        assert_eq!(parse_cpu_list("", 2), Err(CpuListError::Empty));
        assert_eq!(parse_cpu_list("0,,1", 2), Err(CpuListError::Syntax("0,,1".into())));
        assert_eq!(parse_cpu_list("a", 2), Err(CpuListError::Syntax("a".into())));
        assert_eq!(parse_cpu_list("3-1", 4), Err(CpuListError::Backwards("3-1".into())));
        assert_eq!(parse_cpu_list("0-2", 2), Err(CpuListError::NotPresent { cpu: 2, present: 2 }));
        let e = parse_cpu_list("5", 2).unwrap_err().to_string();
        assert!(e.contains("CPU 5") && e.contains("0-1"), "{e}");
    }

    /// on/off, yes/no and true/false are 1 and 0 for the 0..=1 settings only (the kernel's
    /// sysctls take neither; sluice's booleans take them as a convenience): for any other
    /// integer a word is an error naming the setting, not a silent 1.
    #[test]
    fn boolean_words_only_for_boolean_tunables() {
        let mut t = Tunables::default();
        for w in ["on", "yes", "true", "ON", "off", "no", "false"] {
            for name in ["net.core.dev_weight", "net.core.flow_limit_table_len", "net.ipv4.icmp_ratelimit"] {
                let e = t.set(name, w).expect_err(name).to_string();
                assert!(e.contains(name) && e.contains(w) && e.contains("integer"), "{e}");
            }
        }
        assert_eq!(t, Tunables::default(), "nothing changed");
        for (w, v) in [("off", 0), ("ON", 1), ("no", 0), ("true", 1)] {
            t.set("rx.listified", w).unwrap();
            t.set("net.ipv4.ip_forward", w).unwrap();
            assert_eq!((t.listified, t.ip_forward), (v, v));
        }
    }

    /// A CPU mask reads back as sysfs prints `rps_cpus` (hex, groups of 8 digits), which
    /// `--set` takes back as that mask; in decimal, CPU 0's mask (1) came back as CPU 1.
    #[test]
    fn cpu_masks_read_back_as_sysfs_hex() {
        let t = Tunables { rps_cpus: 0b11, flow_limit_cpu_bitmap: 1 << 40 | 1, ..Tunables::default() };
        assert_eq!(t.get_text("rps_cpus").unwrap(), "00000003");
        assert_eq!(t.get_text("net.core.flow_limit_cpu_bitmap").unwrap(), "00000100,00000001");
        assert_eq!(Tunables::default().get_text("rps_cpus").unwrap(), "00000000");
        let mut t = Tunables::default();
        t.set("rps_cpus", "0x1").unwrap();
        let text = t.get_text("rps_cpus").unwrap();
        let mut back = Tunables::default();
        back.set("rps_cpus", &text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(back.rps_cpus, 1, "{text} is CPU 0");
    }

    /// sluice forwards by default where the kernel does not (`net.ipv4.ip_forward` and
    /// `net.ipv6.conf.all.forwarding` are 0 in a new namespace): a deliberate difference, said
    /// where `sluice tunables` prints it.
    #[test]
    fn forwarding_defaults_differ_from_the_kernels_and_say_so() {
        for name in ["net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"] {
            let (_, doc, default) = TUNABLES.iter().find(|t| t.0 == name).unwrap();
            assert_eq!(*default, "1", "{name}");
            assert!(doc.contains("the kernel's default is 0"), "{name}: {doc}");
        }
    }
}
