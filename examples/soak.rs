//! Soak: the lab under fault injection with mixed traffic for SECONDS, watching for slow
//! leaks. `scripts/soak SECONDS` builds and runs it.
//!
//! Traffic: `gen0` sends IPv4 + IPv6 UDP to be forwarded to the check sink, `gen1` sends
//! IPv4 + IPv6 IMIX UDP addressed to the router itself (a bound socket on 5001, read by the
//! lab application). Both wires drop, duplicate, corrupt, truncate, reorder and delay; the
//! sink's ring fills up now and then. Receive mode alternates every second between single
//! and listified.
//!
//! Every second the run stops at a poll boundary and drains, then checks: the conservation
//! ledger balances, no buffer is out of the pool, check failures stay within the frames the
//! wires damaged; and samples the resident set size. After a warm-up, RSS may not grow
//! beyond a small margin. Any failure exits non-zero with a message saying which.

use sluice::buf::Pool;
use sluice::config::{self, Config, PortConfig, PortKind};
use sluice::datapath::{Datapath, Pipeline};
use sluice::napi::RunLimit;
use sluice::port::fault::{FaultConfig, FaultSide, FaultStats};
use sluice::port::gen::{FrameSize, IpVersion};
use std::process::ExitCode;
use std::time::Duration;

/// RSS may exceed its level at the end of the warm-up by this much (or 3 %, if larger). The
/// allocator grows the heap in 2 MiB steps now and then, up to two in a 100-s soak here (with
/// neighbour resolution off too: not a per-packet cost), then stays flat; a leak grows every
/// second and passes this within the soak.
const RSS_MARGIN_KB: u64 = 6 * 1024;

fn soak_config() -> Config {
    // The lab router, but the pipeline that also runs the lab's socket reader.
    let mut c = config::lab(Pipeline::L3fwd);
    c.pipeline = Pipeline::Local;
    c.ports[0].fault = Some(FaultConfig {
        seed: 1,
        drop: 0.002,
        duplicate: 0.002,
        corrupt: 0.002,
        truncate: 0.002,
        reorder: 0.01,
        delay_polls: 2,
        side: FaultSide::Both,
        ..FaultConfig::default()
    });
    c.ports[1].fault = Some(FaultConfig {
        seed: 2,
        drop: 0.001,
        duplicate: 0.001,
        corrupt: 0.001,
        tx_full: 0.01,
        side: FaultSide::Tx,
        ..FaultConfig::default()
    });
    let mut local: PortConfig = c.ports[0].clone();
    local.name = "gen1".into();
    local.kind = PortKind::Gen;
    local.mac = "02:00:00:00:00:03".into();
    local.ipv4 = vec!["203.0.113.1/24".into()];
    local.ipv6 = vec!["2001:db8:0:3::1/64".into()];
    local.peer = None;
    let g = local.gen.as_mut().expect("the lab generator");
    g.flows = 64;
    g.ip = IpVersion::Mix;
    g.size = FrameSize::Imix;
    g.dst_mac = "02:00:00:00:00:03".into();
    g.dst_v4 = "203.0.113.1".parse().expect("literal");
    g.dst_v4_step = 0;
    g.dst_v6 = "2001:db8:0:3::1".parse().expect("literal");
    g.dst_v6_step = 0;
    g.dst_port = 5001;
    local.fault = Some(FaultConfig {
        seed: 3,
        drop: 0.002,
        duplicate: 0.002,
        corrupt: 0.002,
        truncate: 0.002,
        reorder: 0.01,
        rate_per_poll: 48,
        side: FaultSide::Rx,
        ..FaultConfig::default()
    });
    c.ports.push(local);
    c
}

/// Resident set size in KiB (VmRSS).
fn rss_kb() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| format!("/proc/self/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmRSS in /proc/self/status".to_string())
}

fn faults(dp: &Datapath) -> FaultStats {
    FaultStats::of_ports(dp.ports())
}

/// Checks after a drain; the error says what broke.
fn check(dp: &Datapath) -> Result<(), String> {
    dp.conservation().map_err(|e| e.to_string())?;
    if dp.in_flight() != 0 {
        return Err(format!("{} packets in flight after drain", dp.in_flight()));
    }
    if dp.buffers_in_use() != 0 {
        return Err(format!("{} buffers leaked (not back in the pool after drain)", dp.buffers_in_use()));
    }
    let f = faults(dp);
    let failures: u64 = dp.ports().map(|p| p.stats().check_failures).sum();
    if failures > f.damaged() {
        return Err(format!(
            "{failures} check failures but only {} frames damaged: {:?}",
            f.damaged(),
            dp.ports().nth(1).map(|p| p.check_report())
        ));
    }
    Ok(())
}

fn soak(seconds: u64) -> Result<String, String> {
    let cfg = soak_config();
    let tun = cfg.tunables(&[]).map_err(|e| e.to_string())?;
    let pool = Pool::new(cfg.pool_frames).map_err(|e| e.to_string())?;
    let mut dp = cfg.build(tun, &pool).map_err(|e| e.to_string())?;
    let warmup = (seconds / 10).clamp(2, 10).min(seconds);
    let mut baseline = None;
    let (mut rss_min, mut rss_max) = (u64::MAX, 0u64);
    for sec in 0..seconds {
        dp.net.tun.listified = (sec % 2) as u8;
        dp.run(RunLimit { duration: Some(Duration::from_secs(1)), ..RunLimit::default() }, Duration::from_secs(3600), |_, _| {});
        check(&dp).map_err(|e| format!("second {}: {e}", sec + 1))?;
        let rss = rss_kb()?;
        rss_min = rss_min.min(rss);
        rss_max = rss_max.max(rss);
        if sec + 1 == warmup {
            baseline = Some(rss);
        }
        if let Some(base) = baseline {
            let limit = base + RSS_MARGIN_KB.max(base * 3 / 100);
            if rss > limit {
                return Err(format!("second {}: RSS {rss} KiB grew past {limit} KiB (warm-up level {base} KiB)", sec + 1));
            }
        }
        let c = &dp.counters();
        println!(
            "{:>4}s {:<10} rx {:>11} tx {:>11} local {:>11} drops {:>8} faults {:>8} rss {:>7} KiB buffers in use {}",
            sec + 1,
            if dp.net.tun.listified != 0 { "listified" } else { "single" },
            c.rx,
            c.tx,
            c.local,
            c.total_drops(),
            faults(&dp).injected(),
            rss,
            dp.buffers_in_use()
        );
    }
    let c = &dp.counters();
    let f = faults(&dp);
    Ok(format!(
        "soak: ok: {seconds} s, {} packets received ({} forwarded, {} delivered locally, {} dropped with a reason: {:?}), \
         {} faults injected ({} damaged), ledger balanced, 0 buffers leaked, RSS min {:.1} MiB max {:.1} MiB",
        c.rx,
        c.tx,
        c.local,
        c.total_drops(),
        c.nonzero_drops(),
        f.injected(),
        f.damaged(),
        rss_min as f64 / 1024.0,
        rss_max as f64 / 1024.0
    ))
}

fn main() -> ExitCode {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "120".into());
    let seconds = match arg.parse::<u64>() {
        Ok(s) if s > 0 => s,
        _ => {
            eprintln!("usage: soak SECONDS (a positive whole number of seconds, got `{arg}`)");
            return ExitCode::from(2);
        }
    };
    match soak(seconds) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("soak: FAIL: {e}");
            ExitCode::FAILURE
        }
    }
}
