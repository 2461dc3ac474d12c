//! The shared, read-mostly state every worker reads (Linux `struct net`, VPP's global main):
//! tunables, the pipeline, interfaces, routes. Workers get `&Net`; nothing on the fast path
//! writes it (what a worker learns, it keeps in its own `Worker`).

use crate::rps::backlog::{cpus_of_mask, workers_for, Steering};
use crate::rx::icmp_rate::IcmpRateLimit;
use crate::rx::route::{Iface, NeighLog, RouteTable};
use crate::tunables::Tunables;

/// What the workers do with received packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pipeline {
    /// rx → tx untouched to the peer port (testpmd's io forward).
    Io,
    /// rx → swap MACs → tx to the peer port.
    Macswap,
    /// The router: the full receive path (l2, ip, route, forward / local).
    L3fwd,
    /// The router, with traffic addressed to it: local delivery.
    Local,
}

impl Pipeline {
    /// The name a config or `--pipeline` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Pipeline::Io => "io",
            Pipeline::Macswap => "macswap",
            Pipeline::L3fwd => "l3fwd",
            Pipeline::Local => "local",
        }
    }
}

impl std::str::FromStr for Pipeline {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "io" => Ok(Pipeline::Io),
            "macswap" => Ok(Pipeline::Macswap),
            "l3fwd" => Ok(Pipeline::L3fwd),
            "local" => Ok(Pipeline::Local),
            _ => Err(format!("unknown pipeline `{s}` (io, macswap, l3fwd, local)")),
        }
    }
}

/// Shared state. Built by the control plane (`config`), then only read while workers run.
pub struct Net {
    pub tun: Tunables,
    pub pipeline: Pipeline,
    /// Interface addresses, one per port (same index).
    pub ifaces: Vec<Iface>,
    /// Io/macswap: where each port's received packets go.
    pub peer: Vec<Option<u16>>,
    pub routes: RouteTable,
    /// RPS: the backlogs, handoff queues and CPU map the workers share.
    pub rps: Steering,
    /// Neighbours learned by any worker, for the others to learn too.
    pub neigh_log: NeighLog,
    /// Learned neighbours' confirmations for aging, and the configured (permanent) ones.
    pub neigh_ages: std::sync::Mutex<crate::rx::route::NeighAges>,
    /// ICMP error rate limits, host-wide and per destination as the kernel's (shared by the
    /// workers; taken only when an error is about to be sent, never on the forwarding path).
    pub icmp_rate: std::sync::Mutex<IcmpRateLimit>,
    /// Time zero of every worker's coarse clock (so rate limits see one time).
    pub epoch: std::time::Instant,
}

impl Net {
    pub fn new(tun: Tunables, pipeline: Pipeline) -> Net {
        let workers = workers_for(tun.rps_cpus);
        Net::with_workers(tun, pipeline, workers)
    }

    /// Shared state for `workers` workers (at least those `rps_cpus` needs).
    pub fn with_workers(tun: Tunables, pipeline: Pipeline, workers: usize) -> Net {
        let rps = Steering::new(
            workers.max(workers_for(tun.rps_cpus)),
            cpus_of_mask(tun.rps_cpus),
            tun.netdev_max_backlog as usize,
            tun.flow_limit_cpu_bitmap,
            tun.rps_sock_flow_entries,
        );
        let neigh_log = NeighLog::new(rps.workers());
        Net {
            tun,
            pipeline,
            ifaces: Vec::new(),
            peer: Vec::new(),
            routes: RouteTable::new(),
            rps,
            neigh_log,
            neigh_ages: Default::default(),
            icmp_rate: Default::default(),
            epoch: std::time::Instant::now(),
        }
    }

    /// Number of ports.
    pub fn nports(&self) -> usize {
        self.ifaces.len()
    }
}
