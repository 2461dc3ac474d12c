//! One datapath worker: ports, buffers, routing state, sockets, transmit queues and
//! counters, wired stage to stage. The NAPI loop (`napi`) drives it.

use crate::buf::{BufCache, Pkt, Pool};
use crate::config::Tunables;
use crate::port::Port;
use crate::rx::local::Sockets;
use crate::rx::route::{Iface, RouteTable};
use crate::stats::{Counters, DropReason};
use crate::tx::TxQueue;
use crate::xdp::XdpHooks;

/// What the worker does with received packets.
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

pub struct Datapath {
    pub tun: Tunables,
    pub pipeline: Pipeline,
    pub bufs: BufCache,
    pub ports: Vec<Box<dyn Port>>,
    /// Interface addresses, one per port (same index).
    pub ifaces: Vec<Iface>,
    /// Io/macswap: where each port's received packets go.
    pub peer: Vec<Option<u16>>,
    pub routes: RouteTable,
    pub sockets: Sockets,
    pub txq: Vec<TxQueue>,
    pub xdp: XdpHooks,
    pub c: Counters,
    /// ICMP error rate limits (per destination and host-wide).
    pub icmp_rate: crate::rx::icmp_rate::IcmpRateLimit,
    /// A coarse clock, ns since the datapath was made: read once per softirq round, like jiffies.
    pub now_ns: u64,
    epoch: std::time::Instant,
    /// Which polls the per-stage clocks time (`stats.clock_sample`).
    pub clock: crate::stats::tsc::StageClock,
    /// Packets the ports may still deliver (a run's packet count; u64::MAX = no limit).
    pub rx_quota: u64,
    /// Per-poll scratch (kept to avoid allocation per poll).
    pub(crate) rx_scratch: Vec<Pkt>,
    pub(crate) skb_scratch: Vec<crate::buf::skb::Skb>,
    /// One IPv4 fragment being built (the cold fragmentation path reuses it).
    pub(crate) frag_scratch: Vec<u8>,
}

impl Datapath {
    pub fn new(tun: Tunables, pipeline: Pipeline, pool: &Pool) -> Datapath {
        Datapath {
            tun,
            pipeline,
            bufs: pool.cache(),
            ports: Vec::new(),
            ifaces: Vec::new(),
            peer: Vec::new(),
            routes: RouteTable::new(),
            sockets: Sockets::default(),
            txq: Vec::new(),
            xdp: XdpHooks::default(),
            c: Counters::default(),
            clock: Default::default(),
            icmp_rate: Default::default(),
            now_ns: 0,
            rx_quota: u64::MAX,
            epoch: std::time::Instant::now(),
            rx_scratch: Vec::with_capacity(1024),
            skb_scratch: Vec::with_capacity(1024),
            frag_scratch: Vec::new(),
        }
    }

    /// Adds a port with its interface; returns its index.
    pub fn add_port(&mut self, port: Box<dyn Port>, iface: Iface) -> u16 {
        let i = self.ports.len() as u16;
        self.ports.push(port);
        self.ifaces.push(iface);
        self.peer.push(None);
        self.txq.push(TxQueue::default());
        i
    }

    /// Advances the coarse clock to `now` (called once per softirq round).
    #[inline]
    pub fn tick(&mut self, now: std::time::Instant) {
        self.now_ns = now.saturating_duration_since(self.epoch).as_nanos() as u64;
    }

    /// The start of a timed stage (0 when this poll is not timed).
    #[inline(always)]
    pub fn clock(&self) -> u64 {
        self.clock.start()
    }

    /// Ends stage `s` started at `t0` (from [`Datapath::clock`]) over `packets` packets;
    /// returns the TSC now (0 when not timed) to start the next stage with.
    #[inline(always)]
    pub fn stage_done(&mut self, s: crate::stats::Stage, packets: usize, t0: u64) -> u64 {
        let (now, cycles) = self.clock.lap(t0);
        self.c.stages[s as usize].add(packets, cycles);
        now
    }

    /// Drops a packet: counts the reason and frees its buffer.
    #[inline]
    pub fn drop_pkt(&mut self, p: Pkt, reason: DropReason) {
        self.c.drop(reason);
        self.bufs.free(p);
    }

    /// Queues a packet for transmission on `port`; it goes out at the end of the poll.
    #[inline]
    pub fn tx_enqueue(&mut self, port: u16, p: Pkt) {
        match self.txq.get_mut(port as usize) {
            Some(q) => {
                q.pkts.push(p);
                // Normally a queue goes out at the end of the poll; a huge poll (io from many
                // ports, ICMP storms) goes out early rather than grow without bound.
                if q.pkts.len() >= crate::tx::QUEUE_SOFT_LIMIT {
                    crate::tx::xmit_queue(self, port);
                }
            }
            None => self.drop_pkt(p, DropReason::TxError),
        }
    }

    /// Packets the worker holds that have not met their fate yet.
    pub fn in_flight(&self) -> u64 {
        self.txq.iter().map(|q| q.pkts.len() as u64).sum::<u64>() + self.xdp.in_flight()
    }

    /// Checks the conservation law (after a full flush, nothing is in flight).
    pub fn conservation(&self) -> Result<(), crate::stats::ConservationError> {
        self.c.conservation(self.in_flight())
    }

    /// Buffers not back in the pool once every port and socket released theirs: a leak check
    /// for tests (call after `napi::drain`).
    pub fn buffers_in_use(&self) -> i64 {
        self.bufs.in_use()
    }
}
