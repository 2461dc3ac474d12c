//! `sluice gen --iface X`: the in-memory generator's traffic sent on a real interface
//! (AF_PACKET), at a rate or flat out, for a time or a packet count — a pktgen for the lab.

use crate::buf::{Pkt, Pool};
use crate::port::gen::{FrameSize, GenConfig, Generator, IpVersion};
use crate::port::Port;
use clap::Args;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args, Clone)]
pub struct GenArgs {
    /// The interface to send on.
    #[arg(long)]
    pub iface: String,
    /// Destination MAC (the next hop: a router's MAC).
    #[arg(long)]
    pub dst_mac: String,
    /// Source MAC; default: the interface's.
    #[arg(long)]
    pub src_mac: Option<String>,
    /// Source and destination IPv4 addresses (IPv4 traffic).
    #[arg(long, default_value = "10.201.1.2")]
    pub src_v4: std::net::Ipv4Addr,
    #[arg(long, default_value = "10.201.2.2")]
    pub dst_v4: std::net::Ipv4Addr,
    /// Flows (source ports from --src-port up).
    #[arg(long, default_value_t = 64)]
    pub flows: u32,
    #[arg(long, default_value_t = 1024)]
    pub src_port: u16,
    #[arg(long, default_value_t = 9)]
    pub dst_port: u16,
    /// Frame size in bytes without the FCS (60 = a 64-byte frame on the wire).
    #[arg(long, default_value_t = 60)]
    pub size: u16,
    /// Packets per second (default: flat out).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Packets to send (default: until --seconds or SIGINT).
    #[arg(long, value_parser = super::parse_packets)]
    pub count: Option<u64>,
    /// Seconds to send (default 10 unless --count is given).
    #[arg(long, allow_negative_numbers = true, value_parser = super::parse_seconds)]
    pub seconds: Option<f64>,
    /// Frames per transmit burst (one doorbell each).
    #[arg(long, default_value_t = 64)]
    pub burst: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct GenReport {
    pub iface: String,
    pub sent: u64,
    /// Frames the interface refused (its ring full) or took and then failed to send (the
    /// kernel refused them at a doorbell, or had no room for them by the end): counted,
    /// never as sent.
    pub refused: u64,
    pub seconds: f64,
    pub pps: f64,
    pub doorbells: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum GenCmdError {
    #[error("{0}")]
    Args(String),
    #[error(transparent)]
    Gen(#[from] crate::port::gen::GenError),
    #[error(transparent)]
    Pool(#[from] crate::buf::PoolError),
    #[error("{iface}: {msg}")]
    Port { iface: String, msg: String },
}

/// Sends until the count, the time or `stop`.
pub fn run(args: &GenArgs, stop: Arc<AtomicBool>) -> Result<GenReport, GenCmdError> {
    if args.burst == 0 || args.burst > 1024 {
        return Err(GenCmdError::Args(format!("--burst {}: 1..=1024", args.burst)));
    }
    let src_mac = match &args.src_mac {
        Some(m) => m.clone(),
        None => crate::port::afpacket::iface_mac(&args.iface)
            .map(|m| crate::port::fmt_mac(&m))
            .map_err(|e| GenCmdError::Port { iface: args.iface.clone(), msg: e.to_string() })?,
    };
    let cfg = GenConfig {
        flows: args.flows,
        ip: IpVersion::V4,
        size: FrameSize::Fixed(args.size),
        rate_pps: args.rate,
        packets: args.count,
        src_mac,
        dst_mac: args.dst_mac.clone(),
        src_v4: args.src_v4,
        dst_v4: args.dst_v4,
        dst_v4_step: 0,
        src_port: args.src_port,
        dst_port: args.dst_port,
        ..GenConfig::default()
    };
    let mut gen = Generator::new("gen", cfg)?;
    let mut port = open_tx_port(&args.iface)?;
    let pool = Pool::new(8192)?;
    let mut bufs = pool.cache();
    let limit = match (args.seconds, args.count) {
        (Some(s), _) => Some(Duration::from_secs_f64(s.max(0.0))),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(10)),
    };
    let start = Instant::now();
    let mut batch: Vec<Pkt> = Vec::with_capacity(args.burst);
    let (mut sent, mut refused) = (0u64, 0u64);
    loop {
        if stop.load(Ordering::Relaxed) || limit.is_some_and(|l| start.elapsed() >= l) {
            break;
        }
        batch.clear();
        let n = gen.rx_burst(&mut bufs, &mut batch, args.burst);
        if n == 0 {
            if gen.rx_done() {
                break;
            }
            port.tx_completions(&mut bufs);
            std::thread::yield_now();
            continue;
        }
        let took = port.tx_burst(&mut bufs, &batch, false).min(n);
        sent += took as u64;
        refused += (n - took) as u64;
        bufs.free_pkts(&batch[took..]);
        port.tx_completions(&mut bufs);
    }
    port.flush_held(&mut bufs);
    let _ = port.finish();
    while port.tx_completions(&mut bufs) > 0 {}
    // Frames taken but failed later (a write error in any burst, or at finish): counted
    // once here, since the port keeps the tally until it is taken.
    let failed = port.take_tx_failed().0.min(sent);
    sent -= failed;
    refused += failed;
    let seconds = start.elapsed().as_secs_f64();
    Ok(GenReport {
        iface: args.iface.clone(),
        sent,
        refused,
        seconds,
        pps: sent as f64 / seconds.max(1e-9),
        doorbells: port.stats().doorbells,
    })
}

/// The interface as a transmit port (AF_PACKET with qdisc bypass).
fn open_tx_port(iface: &str) -> Result<Box<dyn Port>, GenCmdError> {
    let cfg = crate::port::afpacket::AfPacketConfig::new(iface);
    let mut queues =
        crate::port::afpacket::open(iface, &cfg).map_err(|e| GenCmdError::Port { iface: iface.to_string(), msg: e.to_string() })?;
    let q = queues.pop().ok_or_else(|| GenCmdError::Port { iface: iface.to_string(), msg: "no socket opened".into() })?;
    Ok(Box::new(q))
}
