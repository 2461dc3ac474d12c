//! Command-line interface (`sluice run`, `sluice bench`, `sluice xdp`, `sluice tunables`).

pub mod report;
pub mod run;

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
}

#[derive(Debug, Args, Clone, Default)]
pub struct RunArgs {
    /// Config file (TOML): ports, routes, neighbours, pipeline, tunables. Default: the lab.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Pipeline: io, macswap, l3fwd, local (overrides the config's).
    #[arg(long)]
    pub pipeline: Option<String>,
    /// Set a tunable by its sysctl name, e.g. --set net.core.gro_normal_batch=16.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Seconds to run (default 10; a pcap input ends the run when read).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Stop after this many received packets.
    #[arg(long)]
    pub packets: Option<u64>,
    /// Replace the first (receiving) port with this capture.
    #[arg(long)]
    pub pcap_in: Option<PathBuf>,
    /// Replace the last (transmitting) port with a capture writer.
    #[arg(long)]
    pub pcap_out: Option<PathBuf>,
    /// No per-second lines or progress bar, only the summary.
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}
