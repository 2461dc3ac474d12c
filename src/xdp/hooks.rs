//! The XDP attach points' state: the program trait, attach modes, and per worker the programs
//! attached to each port with the XDP transmit / redirect queues.

use crate::buf::Pkt;
use sluice_ebpf::insn::XDP_ABORTED;
pub use sluice_ebpf::xdp::{RunOutcome, XdpBuff};
use sluice_ebpf::{BurstCtx, FrameRegion};

use super::env;

/// An XDP program sluice can attach: built in (Rust) or an eBPF object.
pub trait XdpProgram: Send {
    fn name(&self) -> String;
    /// Runs on one packet; `xdp`'s offsets reflect any head/tail/meta adjustment afterwards.
    fn run(&mut self, xdp: &mut XdpBuff<'_>, env: &mut env::SluiceEnv<'_>) -> RunOutcome;

    /// Whether the program handles multi-buffer packets (`SEC("xdp.frags")`,
    /// `BPF_F_XDP_HAS_FRAGS`): it sees a chain's linear part and reaches the fragments through
    /// helpers. The built-in programs read only headers, in the linear part.
    fn frags_aware(&self) -> bool {
        true
    }

    /// The program's maps, for an eBPF program (shared by its instances on every worker).
    fn maps(&self) -> Option<std::sync::Arc<sluice_ebpf::Maps>> {
        None
    }

    /// Runs on every packet of a burst from one rx queue: outcome `i` is packet `i`'s, and
    /// the packet's bounds reflect head/tail adjustments. `out` is at least as long as `pkts`.
    /// Engines override this to set up once per burst (the native hook's path).
    fn run_burst(
        &mut self,
        region: &mut FrameRegion<'_>,
        pkts: &mut [Pkt],
        ctx: BurstCtx,
        env: &mut env::SluiceEnv<'_>,
        out: &mut [RunOutcome],
    ) {
        run_each(self, region, pkts, ctx, env, out)
    }
}

/// Runs `prog` packet by packet over a burst (the default `run_burst`).
pub fn run_each<P: XdpProgram + ?Sized>(
    prog: &mut P,
    region: &mut FrameRegion<'_>,
    pkts: &mut [Pkt],
    ctx: BurstCtx,
    env: &mut env::SluiceEnv<'_>,
    out: &mut [RunOutcome],
) {
    for (p, o) in pkts.iter_mut().zip(out.iter_mut()) {
        let Some(mut xb) = region.buff(p, ctx) else {
            *o = RunOutcome { action: XDP_ABORTED, redirect: None };
            continue;
        };
        *o = prog.run(&mut xb, env);
        let (data, len) = (xb.data, xb.data_end - xb.data);
        sluice_ebpf::FrameDesc::set_bounds(p, data, len);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    Native,
    Generic,
}

impl std::str::FromStr for XdpMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "native" | "drv" => Ok(XdpMode::Native),
            "generic" | "skb" => Ok(XdpMode::Generic),
            _ => Err(format!("unknown XDP mode `{s}` (native, generic)")),
        }
    }
}

/// Programs attached per port, and the XDP transmit / redirect queues.
#[derive(Default)]
pub struct XdpHooks {
    pub native: Vec<Option<Box<dyn XdpProgram>>>,
    pub generic: Vec<Option<Box<dyn XdpProgram>>>,
    /// Frames for each port's XDP transmit path (XDP_TX, redirects), bypassing qdiscs.
    pub xmit: Vec<Vec<Pkt>>,
    /// AF_XDP-like local consumers: frames received per XSKMAP key.
    pub xsk_rx: Vec<u64>,
    /// The helpers' per-worker state: random generator, last bpf_trace_printk lines.
    pub host: super::env::HostState,
    /// Outcomes of the burst being judged (reused).
    pub(crate) outcomes: Vec<RunOutcome>,
    /// Buffers the native hook frees after a burst's verdicts (kept to avoid allocation).
    pub(crate) free_scratch: Vec<Pkt>,
    /// The generic hook's packets of one burst (reused).
    pub(crate) burst_pkts: Vec<Pkt>,
    /// The generic hook's linear copy of a chain, for programs that are not frags-aware.
    pub(crate) linear: Option<sluice_ebpf::LowMem>,
}

impl XdpHooks {
    /// Frames queued for XDP transmit, not yet flushed.
    pub fn in_flight(&self) -> u64 {
        self.xmit.iter().map(|q| q.len() as u64).sum()
    }

    /// Attaches `prog` to `port` in `mode` (replacing what was there).
    pub fn attach(&mut self, port: u16, mode: XdpMode, prog: Box<dyn XdpProgram>) {
        let slots = match mode {
            XdpMode::Native => &mut self.native,
            XdpMode::Generic => &mut self.generic,
        };
        let i = port as usize;
        if slots.len() <= i {
            slots.resize_with(i + 1, || None);
        }
        slots[i] = Some(prog);
    }

    /// A frame redirected into an XSKMAP: consumed by the local consumer `k` (counted as local
    /// delivery; the caller frees the buffer).
    pub(crate) fn xsk_deliver(&mut self, k: u32, c: &mut crate::stats::Counters) {
        let k = k as usize;
        if self.xsk_rx.len() <= k {
            self.xsk_rx.resize(k + 1, 0);
        }
        self.xsk_rx[k] += 1;
        c.local += 1;
    }

    pub fn any_generic(&self) -> bool {
        self.generic.iter().any(Option::is_some)
    }

    /// A generic-mode program is attached to `port` (the kernel's `dev->xdp_prog`).
    pub fn generic_on(&self, port: u16) -> bool {
        matches!(self.generic.get(port as usize), Some(Some(_)))
    }
}
