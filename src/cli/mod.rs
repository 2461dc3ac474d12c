//! Command-line interface (`sluice run`, `sluice bench`, `sluice xdp`, `sluice lab`, `sluice tunables`).

pub mod gen;
pub mod lab;
pub mod out;
pub mod report;
pub mod run;
pub mod xdp;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "sluice", version, about = "A userspace packet datapath with the Linux kernel's batching and steering mechanisms")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a pipeline (default: the built-in lab, generator → router → check sink, 10 s).
    Run(RunArgs),
    /// List every tunable with its default.
    Tunables,
    /// Run XDP programs on captured packets (like BPF_PROG_TEST_RUN) and dump their maps.
    #[command(subcommand)]
    Xdp(XdpCommand),
    /// Reproduce the seed experiments with statistics (listify, xdp, io, selfcheck, all).
    Bench(crate::bench::BenchArgs),
    /// Send generated UDP traffic on a real interface (AF_PACKET), like pktgen.
    Gen(gen::GenArgs),
    /// A namespace lab of real hosts for sluice to route between (root).
    #[command(subcommand)]
    Lab(LabCommand),
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Namespaces PREFIX-a and PREFIX-b (hosts 10.201.1.2 and 10.201.2.2), linked by veths
    /// PREFIX-ra / PREFIX-rb to this namespace, where sluice routes between them (topology
    /// `router`), or to a namespace PREFIX-r where the kernel does (topology `kernel`), or
    /// a → sluice → a kernel router PREFIX-c → b (topology `chain`, sluice's ports PREFIX-ra
    /// and PREFIX-rc).
    Up {
        #[arg(long, default_value = "sl")]
        prefix: String,
        #[arg(long, default_value = "router")]
        topology: lab::Topology,
    },
    /// Removes the lab's namespaces and veths.
    Down {
        #[arg(long, default_value = "sl")]
        prefix: String,
    },
    /// Prints the sluice config that routes the lab (examples/lab-router.toml is PREFIX `sl`).
    Config {
        #[arg(long, default_value = "sl")]
        prefix: String,
        /// Port kind: afxdp or afpacket.
        #[arg(long, default_value = "afxdp")]
        kind: String,
        /// The lab's topology (router or chain).
        #[arg(long, default_value = "router")]
        topology: lab::Topology,
    },
}

#[derive(Debug, Args, Clone, Default)]
pub struct RunArgs {
    /// Config file (TOML): ports, routes, neighbours, pipeline, tunables. Default: the lab.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Pipeline: io, macswap, l3fwd, local (overrides the config's).
    #[arg(long)]
    pub pipeline: Option<String>,
    /// Set a tunable by its sysctl name, e.g. --set net.core.dev_weight=32.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Seconds to run (default 10; without it, a run with a pcap input or a packet count ends
    /// when they are done).
    #[arg(long, allow_negative_numbers = true, value_parser = parse_seconds)]
    pub seconds: Option<f64>,
    /// Stop after exactly this many received packets.
    #[arg(long, value_parser = parse_packets)]
    pub packets: Option<u64>,
    /// Replace the first (receiving) port with this capture.
    #[arg(long)]
    pub pcap_in: Option<PathBuf>,
    /// Replace the last (transmitting) port with a capture writer.
    #[arg(long)]
    pub pcap_out: Option<PathBuf>,
    /// The --pcap-out writer segments TCP (and UDP fraglist) "in hardware" (TSO): with `--set
    /// gro=1` it writes GRO packets whole (as tcpdump on a receiving veth shows them), not
    /// split by GSO.
    #[arg(long, requires = "pcap_out")]
    pub pcap_out_tso: bool,
    /// Attach a real interface: KIND:IFACE[@QUEUES], KIND afpacket (or afxdp). A config port
    /// on that interface (its `iface` or name) becomes this kind; otherwise a port named
    /// IFACE is added. Repeatable.
    #[arg(long = "port", value_name = "KIND:IFACE[@QUEUES]")]
    pub ports: Vec<String>,
    /// Write a pcap of everything port PORT receives and transmits. Repeatable.
    #[arg(long = "capture", value_name = "PORT=FILE")]
    pub captures: Vec<String>,
    /// No per-second lines or progress bar, only the summary.
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Attach an XDP program to every receiving port: an eBPF object (PROG.o) or
    /// `builtin:NAME` (drop, drop-read, pass, tx, redirect=IFINDEX, firewall=PORTS,PREFIXES).
    #[arg(long)]
    pub xdp: Option<String>,
    /// XDP hook: native (raw buffer, before metadata; the default) or generic (after metadata).
    #[arg(long)]
    pub xdp_mode: Option<String>,
    /// Program (function or section name) in the object; default: the first XDP program.
    #[arg(long)]
    pub xdp_section: Option<String>,
    /// eBPF execution engine: jit (the default) or interp.
    #[arg(long)]
    pub xdp_engine: Option<String>,
}

/// The longest run `--seconds` takes: a year (more is a typo, not a plan).
pub const MAX_SECONDS: f64 = 365.0 * 86400.0;

/// `--seconds`: a finite positive number of seconds, at most [`MAX_SECONDS`].
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("`{s}`: the run time must be a positive, finite number of seconds"));
    }
    if v > MAX_SECONDS {
        return Err(format!("`{s}`: at most {MAX_SECONDS} seconds (a year)"));
    }
    Ok(v)
}

/// `--packets`: a positive count.
pub fn parse_packets(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err("`0`: the packet count must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Err(format!("`{s}` is larger than {}", u64::MAX)),
        Err(_) => Err(format!("`{s}` is not a whole number of packets")),
    }
}

#[derive(Debug, Subcommand)]
pub enum XdpCommand {
    /// Run a program on every frame of a capture (or a directory of raw frames).
    Run(XdpRunArgs),
    /// Run as `xdp run` does, then print the program's maps.
    Maps(XdpRunArgs),
    /// List an object's programs (section, function, type, instructions) and maps.
    List {
        /// The eBPF object.
        object: std::path::PathBuf,
    },
}

#[derive(Debug, Args, Clone)]
pub struct XdpRunArgs {
    /// The eBPF object (clang -O2 -g -target bpf).
    pub object: std::path::PathBuf,
    /// Program (function or section name, any section: `prog`, `xdp_sock`, ...); default:
    /// the first program of an XDP section (`xdp`, `xdp/...`, `xdp.frags...`).
    #[arg(long)]
    pub section: Option<String>,
    /// Program type to load as, like bpftool's `type xdp`: `xdp` takes the named program
    /// whatever its section says, or the first program when no section is XDP.
    #[arg(long, value_name = "TYPE")]
    pub prog_type: Option<String>,
    /// Verify with the kernel's rules for a loader without CAP_PERFMON (no pointer leaks,
    /// stale packet pointers unreadable, no uninitialised stack reads); default: root's rules.
    #[arg(long)]
    pub unprivileged: bool,
    /// Input frames: a pcap file.
    #[arg(long)]
    pub pcap_in: Option<std::path::PathBuf>,
    /// Input frames: a directory of raw frame files, taken in name order.
    #[arg(long)]
    pub packets_dir: Option<std::path::PathBuf>,
    /// Write the frames the program produced (TX, PASS, REDIRECT) to this capture.
    #[arg(long)]
    pub pcap_out: Option<std::path::PathBuf>,
    /// native or generic (the tool runs each frame as BPF_PROG_TEST_RUN does in either case).
    #[arg(long, default_value = "native")]
    pub mode: String,
    /// jit or interp.
    #[arg(long, default_value = "jit")]
    pub engine: String,
    /// Set a map entry before the load: NAME:KEYHEX=VALUEHEX (little-endian bytes, as in memory).
    /// For a PROG_ARRAY the value may name a program, for a map of maps (ARRAY_OF_MAPS,
    /// HASH_OF_MAPS) it names the inner map; an empty value (NAME:KEYHEX=) deletes the entry.
    /// `.rodata` (`const volatile` settings, e.g. `.rodata:00000000=01000000`) can be set
    /// here: the load then freezes it and the verifier reads its values as constants.
    #[arg(long = "map", value_name = "NAME:KEY=VALUE")]
    pub map_updates: Vec<String>,
    /// Set map entries before the run from a JSON file: {"NAME": [{"key": K, "value": V}, ...]}
    /// (or a whole `--json` output, whose "maps" are taken), K and V as hex strings, byte lists,
    /// or numbers; per-CPU "values": [{"cpu", "value"}]; maps of maps "inner_map": NAME.
    /// Or a bpftool batch file of `map update name NAME key [hex] B... value [hex] B...`
    /// (`value name INNER`) and `map delete name NAME key ...` lines. Applied before --map.
    #[arg(long = "maps", value_name = "FILE")]
    pub maps_file: Option<std::path::PathBuf>,
    /// Dump every array slot (default: only slots with a non-zero value, as they are the ones
    /// written; hash maps always dump every entry).
    #[arg(long)]
    pub all_entries: bool,
    /// Listen on every perf event array and ring buffer of the object and write the records
    /// the program sends (bpf_perf_event_output, bpf_ringbuf_output / reserve + submit) to this file, one JSON
    /// object per line: {"map", "cpu", "data" (hex)}. Without it nobody listens, and the
    /// helpers return what the kernel returns then (-ENOENT; a ring fills up: -EAGAIN).
    #[arg(long, value_name = "FILE")]
    pub events: Option<std::path::PathBuf>,
    /// Write per-frame verdicts, output bytes and map dumps as JSON (bpf/kernel-oracle.sh format).
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}
