//! `sluice run`: build a datapath from a config (or the lab), run it, report.

use super::RunArgs;
use crate::buf::Pool;
use crate::config::{self, Config, ConfigError, PortKind};
use crate::datapath::{Datapath, Pipeline};
use crate::napi::{self, RunLimit};
use crate::stats::Counters;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("buffer pool: {0}")]
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
}

impl RunReport {
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
    }
    if let Some(spec) = &args.xdp {
        cfg.xdp = Some(config::XdpConfig {
            program: spec.clone(),
            mode: args.xdp_mode.parse().map_err(RunError::Other)?,
            engine: args.xdp_engine.parse().map_err(RunError::Other)?,
            section: args.xdp_section.clone(),
        });
    }
    if let Some(pin) = &args.pcap_in {
        let first = cfg.ports.first_mut().ok_or_else(|| RunError::Other("config has no ports".into()))?;
        first.kind = PortKind::PcapIn;
        first.pcap = Some(pin.clone());
        first.gen = None;
    }
    if let Some(pout) = &args.pcap_out {
        let last = cfg.ports.last_mut().ok_or_else(|| RunError::Other("config has no ports".into()))?;
        last.kind = PortKind::PcapOut;
        last.pcap = Some(pout.clone());
        last.check = None;
    }
    Ok(cfg)
}

/// Builds the datapath for a resolved config.
pub fn build(cfg: &Config, set: &[String]) -> Result<Datapath, RunError> {
    let tun = cfg.tunables(set)?;
    let pool = Pool::new(cfg.pool_frames)?;
    Ok(cfg.build(tun, &pool)?)
}

/// Runs to completion. `tick` sees the datapath about once a second.
pub fn execute(args: &RunArgs, tick: impl FnMut(&mut Datapath, Duration)) -> Result<RunReport, RunError> {
    let cfg = resolve_config(args)?;
    let mut dp = build(&cfg, &args.set)?;
    let has_pcap_in = cfg.ports.iter().any(|p| p.kind == PortKind::PcapIn);
    let limit = RunLimit {
        duration: match (args.seconds, has_pcap_in) {
            (Some(s), _) => Some(Duration::from_secs_f64(s.max(0.0))),
            (None, true) => None,
            (None, false) if args.packets.is_some() => None,
            (None, false) => Some(Duration::from_secs(10)),
        },
        packets: args.packets,
    };
    let el = napi::run(&mut dp, limit, Duration::from_secs(1), tick);
    Ok(report(&dp, el))
}

pub fn report(dp: &Datapath, el: Duration) -> RunReport {
    let ports: Vec<_> = dp.ports.iter().map(|p| (p.name().to_string(), p.stats())).collect();
    RunReport {
        pipeline: dp.pipeline,
        seconds: el.as_secs_f64(),
        counters: dp.c.clone(),
        check_failures: ports.iter().map(|p| p.1.check_failures).sum(),
        check_report: dp.ports.iter().flat_map(|p| p.check_report()).collect(),
        ports,
        conservation: dp.conservation().map_err(|e| e.to_string()),
        buffers_leaked: dp.buffers_in_use(),
    }
}
