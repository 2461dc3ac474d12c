//! Counters: packet fates (the conservation ledger), drop reasons, and per-stage cycles.
//!
//! Every packet that enters the datapath (received from a port, or originated by sluice
//! itself, e.g. an ICMP reply) ends exactly once: transmitted, delivered locally, or dropped
//! with a named reason. `Counters::conservation` checks that ledger.

pub mod cpu;
pub mod gro;
pub mod tsc;

use serde::Serialize;

macro_rules! named_enum {
    ($(#[$m:meta])* pub enum $name:ident { $( $(#[doc = $doc:literal])* $var:ident => $s:literal, )* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
        #[repr(u8)]
        pub enum $name { $( $(#[doc = $doc])* $var, )* }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$var),*];
            pub const COUNT: usize = [$($s),*].len();
            /// The kernel-style name (SKB_DROP_REASON_* without the prefix, lower case).
            pub fn name(self) -> &'static str {
                match self { $($name::$var => $s,)* }
            }
        }
    };
}

named_enum! {
    /// Why a packet was dropped. Names follow the kernel's `enum skb_drop_reason` where one exists.
    pub enum DropReason {
        /// Buffer pool exhausted (no buffer to receive or build into).
        NoBuffer => "nobuf",
        /// Frame longer than a receive buffer holds (the driver's rx_length_errors).
        RxLengthError => "rx_length_error",
        /// Frame shorter than the header it claims to carry.
        PktTooSmall => "pkt_too_small",
        /// Ethertype no handler knows.
        UnhandledProto => "unhandled_proto",
        /// VLAN tag for a VLAN we do not serve.
        VlanFiltered => "vlan_filtered",
        /// Unicast frame for another host's MAC.
        OtherHost => "otherhost",
        /// IPv4 header invalid: version, IHL (ip_rcv_core's INHDR errors).
        IpInhdr => "ip_inhdr",
        /// IPv4 header checksum wrong.
        IpCsum => "ip_csum",
        /// IPv6 header invalid (version, extension headers).
        Ipv6Inhdr => "ipv6_inhdr",
        /// Source address invalid (multicast/loopback source, martian).
        IpInvalidSource => "ip_invalid_source",
        /// Source address is one of ours (fib_validate_source without accept_local).
        IpLocalSource => "ip_local_source",
        /// Loopback (127/8) source or destination on the wire (route_localnet off).
        IpLocalnet => "ip_localnet",
        /// Destination invalid on the wire (martian destination: 0/8, limited broadcast,
        /// a multicast group not joined; IPv6 `::`, `::1`, IPv4-mapped).
        IpInvalidDest => "ip_invalid_dest",
        /// Unicast IP packet in an L2 broadcast/multicast frame: never forwarded.
        UnicastInL2Multicast => "unicast_in_l2_multicast",
        /// IPv6 source `::` or link-local when forwarding (ip6_forward's INADDRERRORS).
        IpInaddrerrors => "ip_inaddrerrors",
        /// No route to the destination.
        IpNoroute => "ip_noroute",
        /// Forwarding disabled (net.ipv4.ip_forward = 0 / IPv6 forwarding off).
        ForwardingDisabled => "forwarding_disabled",
        /// TTL / hop limit would reach zero when forwarding.
        TtlExpired => "ip_ttl_expired",
        /// Fragments: sluice forwards them but does not reassemble for local delivery.
        IpFragLocal => "ip_frag_local",
        /// Neighbour (next-hop MAC) not resolved: no answer to `mcast_solicit` probes, or no address to ask from.
        NeighFailed => "neigh_failed",
        /// More packets waited for an unresolved neighbour than `unres_qlen`: the oldest goes.
        NeighQueuefull => "neigh_queuefull",
        /// A packet still waiting for its neighbour when the datapath stopped.
        NeighDead => "neigh_dead",
        /// A neighbour entry could not be created: its family's table held gc_thresh3 entries
        /// and forced gc could free none (the kernel's "neighbor table overflow"). A packet
        /// for a new neighbour is not held (nothing is asked); an ARP request, ARP reply,
        /// solicitation or advertisement that would have made an entry is not answered.
        NeighCreatefail => "neigh_createfail",
        /// Packet larger than the egress MTU (and DF set / IPv6).
        PktTooBig => "pkt_too_big",
        /// Locally addressed to a protocol we do not serve.
        UnhandledL4 => "unhandled_l4",
        /// UDP/TCP/ICMP checksum wrong on local delivery.
        L4Csum => "l4_csum",
        /// UDP to a port with no socket (an ICMP port unreachable is originated).
        NoSocket => "no_socket",
        /// Socket receive queue full.
        SocketRcvbuff => "socket_rcvbuff",
        /// ICMP message we received but do not act on.
        IcmpIgnored => "icmp_ignored",
        /// ARP packet we do not answer (not for our address, or a reply) and learn nothing
        /// from (also a reply from 0.0.0.0, or any ARP from a multicast or broadcast sender).
        ArpIgnored => "arp_ignored",
        /// XDP program returned XDP_DROP.
        XdpDrop => "xdp_drop",
        /// XDP program returned XDP_ABORTED (or an unknown code, or faulted).
        XdpAborted => "xdp_aborted",
        /// XDP redirect to a target that does not exist or is full.
        XdpRedirectFailed => "xdp_redirect_failed",
        /// Transmit failed: port ring full or port down.
        TxError => "tx_error",
        /// Pipeline `io`/`macswap` output with no tx port.
        NoTxPort => "no_tx_port",
        /// RPS: the target worker's backlog held `net.core.netdev_max_backlog` packets (the
        /// kernel's SKB_DROP_REASON_CPU_BACKLOG, softnet_stat's dropped column).
        CpuBacklog => "cpu_backlog",
        /// RPS: the backlog was over half full and this flow had more than half of its
        /// recent packets (flow_limit; softnet_stat's flow_limit_count).
        CpuBacklogFlowLimit => "cpu_backlog_flow_limit",
        /// A worker handed packets for a port another worker owns and that port's handoff
        /// queue was full (a full transmit queue: the kernel's SKB_DROP_REASON_QDISC_DROP).
        QdiscDrop => "qdisc_drop",
    }
}

named_enum! {
    /// Datapath stages, in the order packets flow through them.
    pub enum Stage {
        PortRx => "port-rx",
        XdpNative => "xdp-native",
        Meta => "meta-build",
        XdpGeneric => "xdp-generic",
        Gro => "gro",
        Rps => "rps",
        L2 => "l2",
        Ip => "ip",
        Route => "route",
        Forward => "forward",
        Local => "local",
        RxSingle => "rx-single",
        Tx => "tx",
        PortTx => "port-tx",
        Free => "free",
    }
}

/// Cycles and packets spent in one stage, counted once per batch (VPP-style: clocks per
/// packet and vectors per call).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct StageCounter {
    pub calls: u64,
    pub packets: u64,
    pub cycles: u64,
}

impl StageCounter {
    #[inline]
    pub fn add(&mut self, packets: usize, cycles: u64) {
        self.calls += 1;
        self.packets += packets as u64;
        self.cycles += cycles;
    }
}

/// All counters of one datapath instance (one worker).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Counters {
    /// Packets received from ports.
    pub rx: u64,
    /// Packets sluice originated (ICMP errors and replies, ARP replies).
    pub originated: u64,
    /// Packets handed to a port for transmission.
    pub tx: u64,
    /// Packets consumed by local delivery (sockets, ICMP echo, ARP).
    pub local: u64,
    #[serde(serialize_with = "as_slice")]
    pub drops: [u64; DropReason::COUNT],
    pub stages: [StageCounter; Stage::COUNT],
    /// Bytes received / transmitted (frame bytes without FCS).
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// Doorbells rung by tx bursts (xmit_more = false).
    pub doorbells: u64,
    /// NAPI polls that received at least one packet.
    pub napi_polls: u64,
    /// Polls that used their whole weight.
    pub napi_budget_exhausted: u64,
    /// Softirq rounds cut short by `netdev_budget` or `netdev_budget_usecs` (as the kernel's).
    pub time_squeeze: u64,
    /// Listified receive: lists, runs and route hint hits.
    pub rx_lists: u64,
    pub rx_runs: u64,
    pub route_lookups: u64,
    pub route_hint_hits: u64,
    /// List length histogram: bucket i counts lists of length in [2^i, 2^(i+1)).
    pub list_len_log2: [u64; 12],
    /// XDP verdicts (ABORTED, DROP, PASS, TX, REDIRECT, unknown).
    pub xdp_actions: [u64; 6],
    /// ICMP errors not sent because of the rate limits (the packet is still dropped, counted).
    pub icmp_ratelimited: u64,
    /// IPv4 datagrams fragmented on output, and the fragments made (the kernel's
    /// IPSTATS_MIB_FRAGOKS / FRAGCREATES). A datagram cut into k fragments counts k - 1 in
    /// `originated`: the ledger sees one packet in and k out.
    pub ip_frag_oks: u64,
    pub ip_frag_creates: u64,
    /// RPS: packets this worker steered to another worker's backlog, packets it took from its
    /// own backlog, and wake-ups it sent (at most one per target per round, like the IPIs
    /// net_rps_action sends).
    pub rps_steered: u64,
    pub backlog_processed: u64,
    pub rps_wakeups: u64,
    /// GRO and its normal list; `gro.merged` segments ended inside another packet (ledger).
    pub gro: gro::GroStats,
    /// RFS: flows moved to the worker that consumes them.
    pub rfs_moves: u64,
    /// Idle spells a busy-polling worker (net.core.busy_poll) ended without sleeping.
    pub busy_poll_hits: u64,
    /// ARP requests / neighbour solicitations and announcements sent (resolution, probes of
    /// stale entries, `arp_notify`), and learned entries forgotten after unanswered probes.
    pub neigh_probes: u64,
    pub neigh_forgotten: u64,
    /// Learned neighbour entries forced gc freed to make room for new ones (gc_thresh2/3).
    pub neigh_gc_evicted: u64,
    /// Times an idle worker sleeping on its ports' descriptors was woken by frames.
    pub idle_wakeups: u64,
    /// Packets this worker sent to a port whose transmit queue another worker owns: handed
    /// to the owner, which alone runs that queue's qdisc (the kernel's contended
    /// `__QDISC_STATE_RUNNING`: the others only enqueue). An `mq` port with a queue per
    /// worker has none.
    pub tx_handoffs: u64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            rx: 0,
            originated: 0,
            tx: 0,
            local: 0,
            drops: [0; DropReason::COUNT],
            stages: [StageCounter::default(); Stage::COUNT],
            rx_bytes: 0,
            tx_bytes: 0,
            doorbells: 0,
            napi_polls: 0,
            napi_budget_exhausted: 0,
            time_squeeze: 0,
            rx_lists: 0,
            rx_runs: 0,
            route_lookups: 0,
            route_hint_hits: 0,
            icmp_ratelimited: 0,
            ip_frag_oks: 0,
            ip_frag_creates: 0,
            rps_steered: 0,
            backlog_processed: 0,
            rps_wakeups: 0,
            rfs_moves: 0,
            neigh_probes: 0,
            neigh_forgotten: 0,
            neigh_gc_evicted: 0,
            idle_wakeups: 0,
            tx_handoffs: 0,
            busy_poll_hits: 0,
            list_len_log2: [0; 12],
            xdp_actions: [0; 6],
            gro: Default::default(),
        }
    }
}

/// Serializes a fixed-size array of any length as a sequence (serde's own impls stop at 32).
fn as_slice<S: serde::Serializer>(a: &[u64; DropReason::COUNT], s: S) -> Result<S::Ok, S::Error> {
    a.as_slice().serialize(s)
}

/// The ledger does not balance: some packet was lost or counted twice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("conservation violated: rx {rx} + originated {originated} != tx {tx} + local {local} + drops {drops} + gro merged {gro_merged} (+ in flight {in_flight})")]
pub struct ConservationError {
    pub rx: u64,
    pub originated: u64,
    pub tx: u64,
    pub local: u64,
    pub drops: u64,
    pub gro_merged: u64,
    pub in_flight: u64,
}

impl Counters {
    #[inline]
    pub fn drop(&mut self, reason: DropReason) {
        self.drops[reason as usize] += 1;
    }

    #[inline]
    pub fn drop_n(&mut self, reason: DropReason, n: u64) {
        self.drops[reason as usize] += n;
    }

    /// A port's `take_tx_failed`: packets counted in `tx` (in this burst or an earlier one: a
    /// port may learn of a failure at a later doorbell) that never left become `tx_error`.
    /// Returns how many moved.
    pub fn tx_failed(&mut self, packets: u64, bytes: u64) -> u64 {
        let n = packets.min(self.tx);
        self.tx -= n;
        // Capped (more failures than sends on record): only the capped share of the bytes.
        let bytes = if n == packets { bytes } else { (bytes as u128 * n as u128 / packets as u128) as u64 };
        self.tx_bytes = self.tx_bytes.saturating_sub(bytes);
        self.drop_n(DropReason::TxError, n);
        n
    }

    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason as usize]
    }

    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    pub fn stage(&self, s: Stage) -> &StageCounter {
        &self.stages[s as usize]
    }

    #[inline]
    pub fn record_list_len(&mut self, n: usize) {
        if n > 0 {
            let b = (usize::BITS - 1 - n.leading_zeros()) as usize;
            self.list_len_log2[b.min(11)] += 1;
        }
    }

    /// `rx + originated = tx + local + Σ drops + gro.merged + in_flight`, where `in_flight`
    /// is what the datapath still holds (GRO, backlogs, tx queues) — zero after a full
    /// flush — and `gro.merged` counts segments whose payload GRO moved into another packet.
    pub fn conservation(&self, in_flight: u64) -> Result<(), ConservationError> {
        let ins = self.rx + self.originated;
        let outs = self.tx + self.local + self.total_drops() + self.gro.merged + in_flight;
        if ins == outs {
            Ok(())
        } else {
            Err(ConservationError {
                rx: self.rx,
                originated: self.originated,
                tx: self.tx,
                local: self.local,
                drops: self.total_drops(),
                gro_merged: self.gro.merged,
                in_flight,
            })
        }
    }

    /// Adds another worker's counters into this one.
    pub fn merge(&mut self, o: &Counters) {
        self.rx += o.rx;
        self.originated += o.originated;
        self.tx += o.tx;
        self.local += o.local;
        for (a, b) in self.drops.iter_mut().zip(o.drops.iter()) {
            *a += b;
        }
        for (a, b) in self.stages.iter_mut().zip(o.stages.iter()) {
            a.calls += b.calls;
            a.packets += b.packets;
            a.cycles += b.cycles;
        }
        self.rx_bytes += o.rx_bytes;
        self.tx_bytes += o.tx_bytes;
        self.doorbells += o.doorbells;
        self.napi_polls += o.napi_polls;
        self.napi_budget_exhausted += o.napi_budget_exhausted;
        self.time_squeeze += o.time_squeeze;
        self.rx_lists += o.rx_lists;
        self.rx_runs += o.rx_runs;
        self.route_lookups += o.route_lookups;
        self.route_hint_hits += o.route_hint_hits;
        self.icmp_ratelimited += o.icmp_ratelimited;
        self.ip_frag_oks += o.ip_frag_oks;
        self.ip_frag_creates += o.ip_frag_creates;
        self.rps_steered += o.rps_steered;
        self.backlog_processed += o.backlog_processed;
        self.rps_wakeups += o.rps_wakeups;
        self.gro.merge(&o.gro);
        self.rfs_moves += o.rfs_moves;
        self.neigh_probes += o.neigh_probes;
        self.neigh_forgotten += o.neigh_forgotten;
        self.neigh_gc_evicted += o.neigh_gc_evicted;
        self.idle_wakeups += o.idle_wakeups;
        self.tx_handoffs += o.tx_handoffs;
        self.busy_poll_hits += o.busy_poll_hits;
        for (a, b) in self.list_len_log2.iter_mut().zip(o.list_len_log2.iter()) {
            *a += b;
        }
        for (a, b) in self.xdp_actions.iter_mut().zip(o.xdp_actions.iter()) {
            *a += b;
        }
    }

    /// Drop counters with a non-zero count, by name.
    pub fn nonzero_drops(&self) -> Vec<(&'static str, u64)> {
        DropReason::ALL.iter().filter(|r| self.drops[**r as usize] > 0).map(|r| (r.name(), self.drops[*r as usize])).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conservation_balances_and_detects_loss() {
        let mut c = Counters { rx: 10, originated: 2, tx: 7, local: 2, ..Default::default() };
        c.drop(DropReason::IpCsum);
        c.drop(DropReason::IpNoroute);
        assert!(c.conservation(1).is_ok());
        assert!(c.conservation(0).is_err());
    }

    #[test]
    fn names_are_unique() {
        let mut n: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        n.sort();
        n.dedup();
        assert_eq!(n.len(), DropReason::COUNT);
    }

    #[test]
    fn list_histogram_buckets() {
        let mut c = Counters::default();
        c.record_list_len(1);
        c.record_list_len(64);
        c.record_list_len(100_000);
        assert_eq!(c.list_len_log2[0], 1);
        assert_eq!(c.list_len_log2[6], 1);
        assert_eq!(c.list_len_log2[11], 1);
    }
}
