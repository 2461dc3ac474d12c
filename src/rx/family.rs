//! What IPv4 and IPv6 do differently on the steps they share (the route step with its hint,
//! dst_input of a run, forwarding a run): one trait, so each step is written once and
//! monomorphised per family.

use super::forward::{self, FwdError};
use super::neigh::NeighAddr;
use super::route::{Neighbours, NextHop};
use super::{ipv4, ipv6, local};
use crate::buf::skb::Skb;
use crate::buf::BufCache;
use crate::net::Net;
use crate::tunables::Tunables;
use crate::worker::Worker;

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

impl IpFamily for V4 {
    type Addr = [u8; 4];
    #[inline(always)]
    fn forwarding(t: &Tunables) -> bool {
        t.ip_forward != 0
    }
    #[inline(always)]
    fn daddr(bufs: &BufCache, skb: &Skb) -> [u8; 4] {
        ipv4::daddr(bufs, skb)
    }
    #[inline(always)]
    fn route_key(bufs: &BufCache, skb: &Skb) -> ([u8; 4], u8) {
        ipv4::route_key(bufs, skb)
    }
    #[inline(always)]
    fn route(net: &Net, w: &mut Worker, d: [u8; 4]) -> u32 {
        w.c.route_lookups += 1;
        net.routes.lookup_v4(d)
    }
    #[inline(always)]
    fn resolve(neigh: &Neighbours, nh: &NextHop, d: [u8; 4]) -> Option<(u16, [u8; 6])> {
        neigh.resolve_v4(nh, d)
    }
    fn neigh_addr(d: [u8; 4]) -> NeighAddr {
        NeighAddr::V4(d)
    }
    #[inline(always)]
    fn rewrite(bufs: &mut BufCache, skb: &Skb, mtu: u16, macs: &[u8; 12], out_addr: [u8; 4]) -> Result<(), FwdError> {
        forward::rewrite_v4(bufs, skb, mtu, macs, out_addr)
    }
    fn fail(net: &Net, w: &mut Worker, skb: Skb, e: FwdError) {
        forward::fail_v4(net, w, skb, e)
    }
    fn no_route(net: &Net, w: &mut Worker, skb: Skb) {
        forward::no_route_v4(net, w, skb)
    }
    fn unreachable(net: &Net, w: &mut Worker, skb: Skb) {
        forward::unreachable_v4(net, w, skb)
    }
    fn deliver_list(net: &Net, w: &mut Worker, run: &mut [Skb]) {
        local::deliver_list_v4(net, w, run)
    }
}

impl IpFamily for V6 {
    type Addr = [u8; 16];
    #[inline(always)]
    fn forwarding(t: &Tunables) -> bool {
        t.ipv6_forwarding != 0
    }
    #[inline(always)]
    fn daddr(bufs: &BufCache, skb: &Skb) -> [u8; 16] {
        ipv6::daddr(bufs, skb)
    }
    #[inline(always)]
    fn route_key(bufs: &BufCache, skb: &Skb) -> ([u8; 16], u8) {
        ipv6::route_key(bufs, skb)
    }
    #[inline(always)]
    fn route(net: &Net, w: &mut Worker, d: [u8; 16]) -> u32 {
        ipv6::route(net, w, d)
    }
    #[inline(always)]
    fn resolve(neigh: &Neighbours, nh: &NextHop, d: [u8; 16]) -> Option<(u16, [u8; 6])> {
        neigh.resolve_v6(nh, d)
    }
    fn neigh_addr(d: [u8; 16]) -> NeighAddr {
        NeighAddr::V6(d)
    }
    #[inline(always)]
    fn rewrite(bufs: &mut BufCache, skb: &Skb, mtu: u16, macs: &[u8; 12], out_addr: [u8; 4]) -> Result<(), FwdError> {
        forward::rewrite_v6(bufs, skb, mtu, macs, out_addr)
    }
    fn fail(net: &Net, w: &mut Worker, skb: Skb, e: FwdError) {
        forward::fail_v6(net, w, skb, e)
    }
    fn no_route(net: &Net, w: &mut Worker, skb: Skb) {
        forward::no_route_v6(net, w, skb)
    }
    fn unreachable(net: &Net, w: &mut Worker, skb: Skb) {
        forward::no_route_v6(net, w, skb)
    }
    fn deliver_list(net: &Net, w: &mut Worker, run: &mut [Skb]) {
        local::deliver_list_v6(net, w, run)
    }
}
