//! What IPv4 and IPv6 do differently on the steps they share (the route step with its hint,
//! dst_input of a run, forwarding a run): one trait, so each step is written once and
//! monomorphised per family. The trait is here; each family implements it beside its receive
//! step (ipv4.rs, ipv6.rs), so the steps that use it (route, forward) import no family.

use super::route::{NeighAddr, Neighbours, NextHop};
use crate::buf::skb::Skb;
use crate::buf::BufCache;
use crate::net::Net;
use crate::stats::DropReason;
use crate::tunables::Tunables;
use crate::worker::Worker;

/// Why a packet could not be rewritten for forwarding.
pub(crate) enum FwdError {
    Drop(DropReason),
    TtlExceeded,
    TooBig {
        mtu: u16,
    },
    /// IPv6 link-local source: ICMPv6 "beyond scope of source address", then the drop.
    SourceBeyondScope,
    /// IPv4 without DF, longer than the egress MTU: fragmented (`ip_do_fragment`). The
    /// packet is untouched; `macs` are the output frame's addresses.
    NeedsFragment {
        mtu: u16,
        macs: [u8; 12],
    },
}

pub(crate) trait IpFamily {
    /// The destination address: with the TOS / traffic class, the route hint's key.
    type Addr: Copy + PartialEq;
    fn forwarding(t: &Tunables) -> bool;
    fn daddr(bufs: &BufCache, skb: &Skb) -> Self::Addr;
    /// (daddr, TOS / traffic class) in one read: the route hint's key.
    fn route_key(bufs: &BufCache, skb: &Skb) -> (Self::Addr, u8);
    /// A FIB lookup (counted).
    fn route(net: &Net, w: &mut Worker, d: Self::Addr) -> u32;
    fn resolve(neigh: &Neighbours, nh: &NextHop, d: Self::Addr) -> Option<(u16, [u8; 6])>;
    /// The destination as a neighbour address (for resolution).
    fn neigh_addr(d: Self::Addr) -> NeighAddr;
    /// TTL / hop limit, checksum, MTU, MACs (`macs`: destination then source): one packet
    /// rewritten in place for output (`out_addr`: the egress port's IPv4 address, recorded
    /// by a Record Route option).
    fn rewrite(bufs: &mut BufCache, skb: &Skb, mtu: u16, macs: &[u8; 12], out_addr: [u8; 4]) -> Result<(), FwdError>;
    /// [`IpFamily::rewrite`]'s checks alone, nothing written.
    fn check(bufs: &BufCache, skb: &Skb, mtu: u16) -> Result<(), FwdError>;
    /// A packet forwarding refused: the ICMP error if one is due, then the drop.
    fn fail(net: &Net, w: &mut Worker, skb: Skb, e: FwdError);
    /// No route to the destination: the ICMP error, then the drop.
    fn no_route(net: &Net, w: &mut Worker, skb: Skb);
    /// The destination's route is of type `unreachable`.
    fn unreachable(net: &Net, w: &mut Worker, skb: Skb);
    fn deliver_list(net: &Net, w: &mut Worker, run: &mut [Skb]);
}

pub(crate) struct V4;
pub(crate) struct V6;
