//! Neighbour resolution on real links (the kernel's neighbour layer with ARP and NDP): a
//! packet for an on-link destination whose MAC is unknown waits in a bounded queue of that
//! neighbour (`unres_qlen`; beyond it the oldest goes, `neigh_queuefull`) while broadcast ARP
//! requests / multicast neighbour solicitations go out every `retrans_time_ms`; the answer
//! releases the queue in order, before anything received after it (an answer another worker
//! took in, at this worker's next round), and after `mcast_solicit` unanswered probes the queue is
//! dropped (`neigh_failed`), each forwarded packet's sender told host unreachable (by the
//! forward step). Learned entries age: `base_reachable_time_ms` after their last
//! confirmation they are stale, after `delay_first_probe_time` more they are probed by
//! unicast `ucast_solicit` times, and an unanswered entry is forgotten (the next packet
//! resolves it again). Configured entries are permanent. `arp_notify` / `ndisc_notify`
//! announce the ports' addresses when the datapath starts.
//!
//! Each worker holds its own waiting packets (they are its buffers) and sends its own
//! requests; an answer any worker receives reaches the others through `Net::neigh_log`.
//! Aging runs on worker 0 only (one prober per neighbour) from the shared confirmation
//! table, which only ARP/NDP packets touch: the forwarding path reads nothing here.

use super::route::NeighEntry;
use crate::buf::{Pkt, HEADROOM};
use crate::net::Net;
use crate::stats::DropReason;
use crate::wire::arp::{ArpPacket, OP_REPLY, OP_REQUEST};
use crate::wire::ethernet::EthernetFrame;
use crate::wire::ipv6::Ipv6Packet;
use crate::wire::{checksum, EtherType, IPPROTO_ICMPV6};
use crate::worker::Worker;
use std::collections::VecDeque;

/// Unresolved neighbours one worker tracks at once (gc_thresh3 bounds the whole table, these
/// included); a packet for one more is dropped as `neigh_failed`.
pub const MAX_UNRESOLVED: usize = 256;

/// Room a new neighbour queue starts with (it grows to `unres_qlen` if need be).
const MAX_HELD_PREALLOC: usize = 128;

/// How often worker 0 looks at the aging table.
const AGING_PERIOD_NS: u64 = 100_000_000;

const BROADCAST: [u8; 6] = [0xff; 6];
const ALL_NODES: [u8; 16] = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

pub use super::route::{Age, GcThresh, NeighAddr, NeighAges};

use super::resolver::{Held, Unresolved};

/// The neighbour table's bounds for `addr`'s family (IPv4: arp_tbl's, IPv6: nd_tbl's).
fn thresh(net: &Net, addr: NeighAddr) -> GcThresh {
    match addr {
        NeighAddr::V4(_) => GcThresh { thresh2: net.tun.gc_thresh2, thresh3: net.tun.gc_thresh3 },
        NeighAddr::V6(_) => GcThresh { thresh2: net.tun.ipv6_gc_thresh2, thresh3: net.tun.ipv6_gc_thresh3 },
    }
}

fn forget_entry(port: u16, addr: NeighAddr) -> NeighEntry {
    match addr {
        NeighAddr::V4(a) => NeighEntry::Forget4(port, a),
        NeighAddr::V6(a) => NeighEntry::Forget6(port, a),
    }
}

/// Every worker (this one at once) forgets the entries forced gc freed. Called with the
/// table locked, so the workers apply its changes in the order they were made.
fn publish_freed(net: &Net, w: &mut Worker, freed: &[(u16, NeighAddr)]) {
    for &(port, addr) in freed {
        let e = forget_entry(port, addr);
        w.neigh.apply(e);
        net.neigh_log.publish(e);
        w.c.neigh_gc_evicted += 1;
    }
}

/// How much an ARP/NDP packet may change the table: neigh_update's create and override.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Teach {
    /// A request or solicitation for one of our addresses (the kernel's neigh_event_ns:
    /// __neigh_lookup with create, then neigh_update): a missing entry is made.
    Create,
    /// A reply, an announcement, an advertisement with the Override flag (arp_process and
    /// ndisc_recv_na look up without create, as with the defaults `arp_accept` = 0 and
    /// `accept_untracked_na` = 0): only an entry that exists, one being resolved included,
    /// takes the MAC, so a host on the link cannot fill the table with answers nobody asked for.
    Update,
    /// An advertisement without Override (NEIGH_UPDATE_F_WEAK_OVERRIDE): as `Update`, but a
    /// resolved entry keeps a different MAC (the kernel only marks it stale).
    UpdateSameMac,
}

/// What `learn` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Learnt {
    /// The table has an entry for the address (configured, learned, made or being resolved).
    Known,
    /// No entry, and the packet may not make one.
    Unknown,
    /// No room for a new entry (`NeighAges::admit`: gc_thresh3, forced gc): the caller drops
    /// the packet as `neigh_createfail` without answering it, as arp_process and
    /// ndisc_recv_ns send nothing when neigh_event_ns finds no entry.
    NoRoom,
}

/// An ARP/NDP packet taught `mac` for `addr` on `port`, as far as `teach` allows; decided
/// with the shared table locked once. A configured neighbour is permanent and keeps its MAC
/// (neigh_update refuses to change a NUD_PERMANENT entry without NEIGH_UPDATE_F_ADMIN): it is
/// `Known`, the packet still answered. Only a packet that `confirms` reachability (a unicast
/// ARP reply, a solicited advertisement: neigh_update to NUD_REACHABLE) restarts a resolved
/// entry's reachable time and stops its probing; a request, a broadcast reply or an
/// unsolicited advertisement (NUD_STALE) leaves an entry with the same MAC as it was (one
/// with another MAC takes it).
pub(crate) fn learn(net: &Net, w: &mut Worker, port: u16, addr: NeighAddr, mac: [u8; 6], teach: Teach, confirms: bool) -> Learnt {
    let mut ages = net.neigh_ages.lock().unwrap_or_else(|p| p.into_inner());
    if ages.is_permanent(port, addr) {
        return Learnt::Known;
    }
    let age = Age { mac: Some(mac), confirmed_ns: w.now_ns, probes: 0, next_probe_ns: 0, resolvers: 0 };
    let mut freed = Vec::new();
    let known = match ages.get_mut(&(port, addr)) {
        Some(a) if teach == Teach::UpdateSameMac && a.mac.is_some_and(|m| m != mac) => return Learnt::Known,
        // Left as it is (this worker's own table still takes the entry below: it may not
        // have synced it yet). A new MAC restarts the entry's clock, which also stands for
        // the kernel's `updated`: forced gc keeps it 5 s.
        Some(a) if a.mac == Some(mac) && !confirms => true,
        Some(a) => {
            let known = a.mac == Some(mac);
            *a = age;
            known
        }
        None if teach != Teach::Create => return Learnt::Unknown,
        None => {
            if !ages.admit(addr, w.now_ns, thresh(net, addr), &mut freed) {
                return Learnt::NoRoom;
            }
            ages.insert((port, addr), age);
            false
        }
    };
    publish_freed(net, w, &freed);
    let e = match addr {
        NeighAddr::V4(a) => NeighEntry::V4(port, a, mac),
        NeighAddr::V6(a) => NeighEntry::V6(port, a, mac),
    };
    w.neigh.apply(e);
    // Published whenever the shared table gained the entry or its MAC changed, decided here
    // with it locked: whether this worker's own table changed says nothing of the others (it
    // may still hold an entry whose forget it has not applied yet, and then every worker
    // would drop an entry the shared table keeps). Our own entry comes back at the next
    // sync: applying it twice changes nothing, and counting it as seen here could skip
    // another worker's entry published before it.
    if !known {
        net.neigh_log.publish(e);
    }
    Learnt::Known
}

/// A neighbour confirmed reachable without a new MAC (a solicited advertisement without the
/// target link-layer option): its entry, if resolved, counts as confirmed now and its
/// unicast probing stops.
pub(crate) fn confirm(net: &Net, w: &Worker, port: u16, addr: NeighAddr) {
    let mut ages = net.neigh_ages.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(a) = ages.get_mut(&(port, addr)).filter(|a| a.mac.is_some()) {
        a.confirmed_ns = w.now_ns;
        a.probes = 0;
        a.next_probe_ns = 0;
    }
}

/// A resolution starts on this worker: the entry is made now, without a MAC (neigh_alloc
/// for the kernel's NUD_INCOMPLETE entry), so it counts toward gc_thresh3 and the answer
/// needs no more room; a worker resolving an entry another is resolving joins it. False
/// when the table has no room.
fn reserve(net: &Net, w: &mut Worker, port: u16, addr: NeighAddr) -> bool {
    let mut ages = net.neigh_ages.lock().unwrap_or_else(|p| p.into_inner());
    if ages.is_permanent(port, addr) {
        return true;
    }
    if let Some(a) = ages.get_mut(&(port, addr)) {
        if a.mac.is_none() {
            a.resolvers = a.resolvers.saturating_add(1);
        }
        return true;
    }
    let mut freed = Vec::new();
    if !ages.admit(addr, w.now_ns, thresh(net, addr), &mut freed) {
        return false;
    }
    ages.insert((port, addr), Age { mac: None, confirmed_ns: w.now_ns, probes: 0, next_probe_ns: 0, resolvers: 1 });
    publish_freed(net, w, &freed);
    true
}

/// This worker's resolution ended without an answer: the entry goes (if still unresolved)
/// once no other worker is resolving it — an answer to another worker's request must still
/// find it (replies only update entries that exist).
fn unreserve(net: &Net, port: u16, addr: NeighAddr) {
    let mut ages = net.neigh_ages.lock().unwrap_or_else(|p| p.into_inner());
    let Some(a) = ages.get_mut(&(port, addr)).filter(|a| a.mac.is_none()) else { return };
    a.resolvers = a.resolvers.saturating_sub(1);
    if a.resolvers == 0 {
        ages.remove(&(port, addr));
    }
}

/// `addr` on `port` has no MAC yet: `h` waits for it (neigh_resolve_output → __neigh_event_send).
/// The first packet for a neighbour sends the first request at once.
pub(crate) fn hold(net: &Net, w: &mut Worker, port: u16, addr: NeighAddr, h: Held) {
    // The kernel bounds the queue in bytes and evicts older packets before it queues the
    // new one, so even a limit of 0 holds the newest packet (and asks for the neighbour).
    let qlen = (net.tun.unres_qlen as usize).max(1);
    let i = match w.resolver.pending.iter().position(|u| u.port == port && u.addr == addr) {
        Some(i) => i,
        None => {
            if w.resolver.pending.len() >= MAX_UNRESOLVED || net.tun.mcast_solicit == 0 {
                return w.drop_pkt(h.pkt(), DropReason::NeighFailed);
            }
            if !reserve(net, w, port, addr) {
                // The neighbour table is full (__neigh_create fails): nothing is asked.
                return w.drop_pkt(h.pkt(), DropReason::NeighCreatefail);
            }
            if !solicit(net, w, port, addr, None) {
                // No address of ours on that link to ask from.
                unreserve(net, port, addr);
                return w.drop_pkt(h.pkt(), DropReason::NeighFailed);
            }
            let next_probe_ns = w.now_ns + net.tun.retrans_time_ms as u64 * 1_000_000;
            if w.resolver.pending.capacity() == 0 {
                w.resolver.pending.reserve_exact(MAX_UNRESOLVED);
            }
            let held = w.resolver.spare.pop().unwrap_or_else(|| VecDeque::with_capacity(qlen.min(MAX_HELD_PREALLOC)));
            w.resolver.pending.push(Unresolved { port, addr, held, probes: 1, next_probe_ns });
            w.resolver.pending.len() - 1
        }
    };
    let u = &mut w.resolver.pending[i];
    u.held.push_back(h);
    if u.held.len() > qlen {
        let old = u.held.pop_front().map(|o| o.pkt());
        if let Some(p) = old {
            w.drop_pkt(p, DropReason::NeighQueuefull);
        }
    } else {
        w.resolver.held += 1;
    }
}

/// Once per round: releases queues whose neighbour is now known, probes and fails the
/// others, ages learned entries (worker 0) and sends the start-up announcements. True when
/// it ran (and may have queued packets: the caller flushes the transmit queues).
#[inline]
pub fn timers(net: &Net, w: &mut Worker) -> bool {
    if w.resolver.idle(w.now_ns) {
        return false;
    }
    run_timers(net, w);
    true
}

fn run_timers(net: &Net, w: &mut Worker) {
    if !w.resolver.announced {
        w.resolver.announced = true;
        if w.id == 0 {
            announce(net, w);
        } else {
            w.resolver.next_aging_ns = u64::MAX;
        }
    }
    let now = w.now_ns;
    let mut i = 0;
    while i < w.resolver.pending.len() {
        let (port, addr) = (w.resolver.pending[i].port, w.resolver.pending[i].addr);
        if let Some(mac) = w.neigh.lookup(port, addr) {
            let u = w.resolver.pending.swap_remove(i);
            release(net, w, u, mac);
            continue;
        }
        if now >= w.resolver.pending[i].next_probe_ns {
            if w.resolver.pending[i].probes >= net.tun.mcast_solicit {
                let mut u = w.resolver.pending.swap_remove(i);
                unreserve(net, u.port, u.addr);
                w.resolver.held -= u.held.len();
                for h in u.held.drain(..) {
                    match h {
                        // Reported to its sender by the forward step (rx::neigh_timers).
                        Held::Forward(skb, _) => w.resolver.failed.push(skb),
                        // About a packet of our own (an ICMP error or reply) nothing is said.
                        Held::Originated(p) => w.drop_pkt(p, DropReason::NeighFailed),
                    }
                }
                w.resolver.spare.push(u.held);
                continue;
            }
            solicit(net, w, port, addr, None);
            let u = &mut w.resolver.pending[i];
            u.probes += 1;
            u.next_probe_ns = now + net.tun.retrans_time_ms as u64 * 1_000_000;
        }
        i += 1;
    }
    if w.id == 0 && now >= w.resolver.next_aging_ns {
        w.resolver.next_aging_ns = now + AGING_PERIOD_NS.min(net.tun.retrans_time_ms as u64 * 1_000_000);
        age(net, w);
    }
}

/// An answer this worker just took in: the packets it holds for that neighbour leave now,
/// before any packet after the answer (neigh_update sends the entry's queue from within the
/// answer's receive). Originated packets are queued for transmit; forwarded ones wait in
/// `released` for the forward step, which the caller runs next. True when any were held.
pub(crate) fn release_answered(net: &Net, w: &mut Worker, port: u16, addr: NeighAddr) -> bool {
    let Some(i) = w.resolver.pending.iter().position(|u| u.port == port && u.addr == addr) else { return false };
    let Some(mac) = w.neigh.lookup(port, addr) else { return false };
    let u = w.resolver.pending.swap_remove(i);
    release(net, w, u, mac);
    true
}

/// The neighbour answered: its packets leave in the order they came.
fn release(net: &Net, w: &mut Worker, mut u: Unresolved, mac: [u8; 6]) {
    w.resolver.held -= u.held.len();
    for h in u.held.drain(..) {
        match h {
            // The forward step takes these after the timers (`rx::neigh_timers`), or right
            // after the answer this worker took in (`local::learn`).
            Held::Forward(..) => w.resolver.released.push(h),
            Held::Originated(p) => {
                let src = net.ifaces.get(u.port as usize).map_or([0; 6], |i| i.mac);
                let mut eth = EthernetFrame::new_unchecked(w.bufs.data_mut(p));
                eth.set_dst(&mac);
                eth.set_src(&src);
                crate::tx::enqueue(net, w, u.port, p);
            }
        }
    }
    w.resolver.spare.push(u.held);
}

/// Stale learned entries are probed by unicast; unanswered ones are forgotten by every worker.
fn age(net: &Net, w: &mut Worker) {
    let now = w.now_ns;
    let reachable = net.tun.base_reachable_time_ms as u64 * 1_000_000;
    let delay = net.tun.delay_first_probe_time as u64 * 1_000_000_000;
    let retrans = net.tun.retrans_time_ms as u64 * 1_000_000;
    let mut probe = Vec::new();
    let mut forget = Vec::new();
    {
        // The forgets are published with the table locked (as publish_freed's), so a worker
        // that learns the entry again in between publishes it after them, not before.
        let mut ages = net.neigh_ages.lock().unwrap_or_else(|p| p.into_inner());
        for (&(port, addr), a) in ages.iter_mut() {
            // An entry being resolved is its resolver's to probe.
            let Some(mac) = a.mac else { continue };
            if now.saturating_sub(a.confirmed_ns) < reachable + delay || now < a.next_probe_ns {
                continue;
            }
            if a.probes < net.tun.ucast_solicit {
                a.probes += 1;
                a.next_probe_ns = now + retrans;
                probe.push((port, addr, mac));
            } else {
                forget.push((port, addr));
            }
        }
        for &(port, addr) in &forget {
            ages.remove(&(port, addr));
            let e = forget_entry(port, addr);
            w.neigh.apply(e);
            net.neigh_log.publish(e);
            w.c.neigh_forgotten += 1;
        }
    }
    for (port, addr, mac) in probe {
        solicit(net, w, port, addr, Some(mac));
    }
}

/// At shutdown: what still waits for a neighbour is dropped (`neigh_dead`).
pub(crate) fn drain(net: &Net, w: &mut Worker) {
    for h in std::mem::take(&mut w.resolver.released) {
        w.drop_pkt(h.pkt(), DropReason::NeighDead);
    }
    for s in std::mem::take(&mut w.resolver.failed) {
        w.drop_pkt(s.pkt, DropReason::NeighFailed);
    }
    while let Some(mut u) = w.resolver.pending.pop() {
        // This worker stops resolving it: the entry must not outlive the run (it would hold a
        // gc_thresh3 slot that neither aging nor forced gc frees).
        unreserve(net, u.port, u.addr);
        for h in u.held.drain(..) {
            w.drop_pkt(h.pkt(), DropReason::NeighDead);
        }
        w.resolver.spare.push(u.held);
    }
    w.resolver.held = 0;
}

/// Our address on `port` to ask from: one whose prefix holds the target, else the first.
fn source_v4(net: &Net, port: u16, target: [u8; 4]) -> Option<[u8; 4]> {
    let iface = net.ifaces.get(port as usize)?;
    iface.v4_on_link(target).or(iface.primary_v4())
}

/// A link-local address when the port has one (RFC 4861 prefers it), else one whose prefix
/// holds the target, else the first.
fn source_v6(net: &Net, port: u16, target: [u8; 16]) -> Option<[u8; 16]> {
    let iface = net.ifaces.get(port as usize)?;
    let link_local = iface.v6.iter().map(|a| a.0).find(|a| a[0] == 0xfe && a[1] & 0xc0 == 0x80);
    link_local.or(iface.v6_on_link(target)).or(iface.primary_v6())
}

/// Sends one ARP request / neighbour solicitation for `addr` out of `port`: broadcast
/// (solicited-node multicast) to resolve, unicast to `known` to probe a stale entry.
/// False when the port has no address to ask from; out of buffers counts a drop.
fn solicit(net: &Net, w: &mut Worker, port: u16, addr: NeighAddr, known: Option<[u8; 6]>) -> bool {
    match addr {
        NeighAddr::V4(t) => match source_v4(net, port, t) {
            Some(src) => {
                send_arp(net, w, port, OP_REQUEST, src, t, known);
                true
            }
            None => false,
        },
        NeighAddr::V6(t) => match source_v6(net, port, t) {
            Some(src) => {
                let (dst, dst_mac) = match known {
                    Some(mac) => (t, mac),
                    None => solicited_node(&t),
                };
                send_ndisc(net, w, port, NdiscMsg::Solicit, src, dst, dst_mac, t);
                true
            }
            None => false,
        },
    }
}

/// The solicited-node multicast address of `t` (ff02::1:ffXX:XXXX) and its MAC.
pub fn solicited_node(t: &[u8; 16]) -> ([u8; 16], [u8; 6]) {
    let mut a = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0];
    a[13..].copy_from_slice(&t[13..]);
    (a, [0x33, 0x33, 0xff, t[13], t[14], t[15]])
}

/// A fresh frame of `len` bytes for a packet sluice originates (counted), or None when the
/// pool is empty (counted as a `no_buffer` drop).
fn originate(w: &mut Worker, len: usize) -> Option<Pkt> {
    w.c.originated += 1;
    match w.bufs.alloc() {
        Some(id) => {
            w.bufs.frame_mut(id)[HEADROOM..HEADROOM + len].fill(0);
            Some(Pkt::new(id, len))
        }
        None => {
            w.c.drop(DropReason::NoBuffer);
            None
        }
    }
}

/// An ARP packet of ours: a request (`tha` zero, to `unicast` or broadcast) or a reply.
fn send_arp(net: &Net, w: &mut Worker, port: u16, op: u16, spa: [u8; 4], tpa: [u8; 4], unicast: Option<[u8; 6]>) {
    let Some(mac) = net.ifaces.get(port as usize).map(|i| i.mac) else { return };
    let Some(p) = originate(w, 14 + crate::wire::arp::HEADER_LEN) else { return };
    let d = w.bufs.data_mut(p);
    let mut eth = EthernetFrame::new_unchecked(&mut d[..14]);
    eth.set_dst(&unicast.unwrap_or(BROADCAST));
    eth.set_src(&mac);
    eth.set_ethertype(EtherType::ARP);
    let mut arp = ArpPacket::new_unchecked(&mut d[14..]);
    arp.init_ethernet_ipv4();
    arp.set_operation(op);
    arp.set_sender_hw(&mac);
    arp.set_sender_ip(&spa);
    arp.set_target_hw(&if op == OP_REPLY { unicast.unwrap_or(BROADCAST) } else { [0; 6] });
    arp.set_target_ip(&tpa);
    w.c.neigh_probes += 1;
    crate::tx::enqueue(net, w, port, p);
}

#[derive(Clone, Copy)]
enum NdiscMsg {
    Solicit,
    /// Unsolicited advertisement of our own address (override set, not solicited).
    Announce,
}

/// A neighbour solicitation (with our link-layer address) or an unsolicited advertisement
/// (with the target link-layer address): 24 bytes of ICMPv6 plus an 8-byte option, hop limit
/// 255 as RFC 4861 requires.
#[allow(clippy::too_many_arguments)]
fn send_ndisc(net: &Net, w: &mut Worker, port: u16, msg: NdiscMsg, src: [u8; 16], dst: [u8; 16], dst_mac: [u8; 6], target: [u8; 16]) {
    let Some(mac) = net.ifaces.get(port as usize).map(|i| i.mac) else { return };
    const ICMP_LEN: usize = 32;
    let Some(p) = originate(w, 14 + 40 + ICMP_LEN) else { return };
    let d = w.bufs.data_mut(p);
    let mut eth = EthernetFrame::new_unchecked(&mut d[..14]);
    eth.set_dst(&dst_mac);
    eth.set_src(&mac);
    eth.set_ethertype(EtherType::IPV6);
    Ipv6Packet::new_unchecked(&mut d[14..54]).emit(ICMP_LEN as u16, IPPROTO_ICMPV6, 255, &src, &dst);
    let icmp = &mut d[54..54 + ICMP_LEN];
    match msg {
        NdiscMsg::Solicit => {
            icmp[0] = 135;
            icmp[24] = 1; // source link-layer address
        }
        NdiscMsg::Announce => {
            icmp[0] = 136;
            icmp[4] = 0x20 | if net.tun.ipv6_forwarding != 0 { 0x80 } else { 0 };
            icmp[24] = 2; // target link-layer address
        }
    }
    icmp[8..24].copy_from_slice(&target);
    icmp[25] = 1;
    icmp[26..32].copy_from_slice(&mac);
    let sum = checksum::pseudo_header_v6(&src, &dst, IPPROTO_ICMPV6, ICMP_LEN as u32) + checksum::sum_be16(icmp);
    let c = !checksum::fold(sum);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    w.c.neigh_probes += 1;
    crate::tx::enqueue(net, w, port, p);
}

/// `arp_notify` / `ndisc_notify`: every address of every port announced once at start
/// (a gratuitous ARP request, sender = target = the address; an unsolicited advertisement to
/// all-nodes), so neighbours update caches that held another MAC.
fn announce(net: &Net, w: &mut Worker) {
    for (port, iface) in net.ifaces.iter().enumerate() {
        let port = port as u16;
        if net.tun.arp_notify != 0 {
            for &(a, _) in &iface.v4 {
                send_arp(net, w, port, OP_REQUEST, a, a, None);
            }
        }
        if net.tun.ndisc_notify != 0 {
            for &(a, _) in &iface.v6 {
                send_ndisc(net, w, port, NdiscMsg::Announce, a, ALL_NODES, [0x33, 0x33, 0, 0, 0, 1], a);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::Pool;
    use crate::net::Pipeline;
    use crate::tunables::Tunables;

    fn sync(net: &Net, w: &mut Worker) {
        net.neigh_log.sync_into(w.id, &mut w.neigh_seen, &mut w.neigh);
    }

    /// A run ends while a neighbour is still being resolved: its packets die and its entry
    /// goes with them (a later run resolving it again starts from no entry).
    #[test]
    fn the_end_of_a_run_takes_back_the_entries_it_was_resolving() {
        let pool = Pool::new(64).unwrap();
        let net = Net::with_workers(Tunables::default(), Pipeline::Local, 1);
        let mut w = Worker::new(0, &pool);
        let x = NeighAddr::V4([192, 0, 2, 9]);
        assert!(reserve(&net, &mut w, 0, x));
        w.resolver.pending.push(Unresolved { port: 0, addr: x, held: VecDeque::new(), probes: 1, next_probe_ns: u64::MAX });
        drain(&net, &mut w);
        assert_eq!(net.neigh_ages.lock().unwrap().learned(false), 0);
        assert!(reserve(&net, &mut w, 0, x));
        unreserve(&net, 0, x);
        assert_eq!(net.neigh_ages.lock().unwrap().learned(false), 0, "a later resolution that gives up leaves nothing");
    }

    /// Two workers resolve the same neighbour; worker 0 gives up first. The entry being
    /// resolved stays for worker 1, so the reply to worker 1's request (which only updates
    /// an entry that exists) still teaches it; once both give up, the entry goes.
    #[test]
    fn an_entry_being_resolved_stays_until_the_last_resolver_gives_up() {
        let pool = Pool::new(64).unwrap();
        let net = Net::with_workers(Tunables::default(), Pipeline::Local, 2);
        let (mut w0, mut w1) = (Worker::new(0, &pool), Worker::new(1, &pool));
        let (x, mac) = (NeighAddr::V4([192, 0, 2, 9]), [2, 0, 0, 0, 0, 9]);
        assert!(reserve(&net, &mut w0, 0, x) && reserve(&net, &mut w1, 0, x));
        unreserve(&net, 0, x);
        assert_eq!(net.neigh_ages.lock().unwrap().learned(false), 1, "worker 1 still resolves it");
        assert_eq!(learn(&net, &mut w1, 0, x, mac, Teach::Update, true), Learnt::Known, "the reply to worker 1's request");
        sync(&net, &mut w0);
        assert_eq!((w0.neigh.lookup(0, x), w1.neigh.lookup(0, x)), (Some(mac), Some(mac)));

        let y = NeighAddr::V4([192, 0, 2, 10]);
        assert!(reserve(&net, &mut w0, 0, y) && reserve(&net, &mut w1, 0, y));
        unreserve(&net, 0, y);
        unreserve(&net, 0, y);
        assert_eq!(net.neigh_ages.lock().unwrap().learned(false), 1, "both gave up: only x is left");
        assert_eq!(learn(&net, &mut w1, 0, y, mac, Teach::Update, true), Learnt::Unknown, "a late reply finds no entry");
        assert_eq!(w1.neigh.lookup(0, y), None, "and teaches nothing");
    }

    /// Stepped on one thread: worker 0 ages an entry out; worker 1, which has not applied
    /// that forget yet and so still holds the entry, hears from the neighbour again. The
    /// shared table has it again, so every worker must learn it again (before, worker 1's
    /// own table did not change and nothing was published: after the syncs no worker knew
    /// an entry the shared table kept).
    #[test]
    fn an_entry_learned_again_after_its_forget_reaches_every_worker() {
        let pool = Pool::new(64).unwrap();
        let tun = Tunables { ucast_solicit: 0, ..Tunables::default() };
        let net = Net::with_workers(tun, Pipeline::Local, 2);
        let (mut w0, mut w1) = (Worker::new(0, &pool), Worker::new(1, &pool));
        let (x, mac) = (NeighAddr::V4([192, 0, 2, 9]), [2, 0, 0, 0, 0, 9]);
        assert_eq!(learn(&net, &mut w1, 0, x, mac, Teach::Create, true), Learnt::Known);
        sync(&net, &mut w0);
        assert_eq!(w0.neigh.lookup(0, x), Some(mac));
        w0.now_ns = 1 << 60;
        age(&net, &mut w0);
        assert_eq!((w0.c.neigh_forgotten, w0.neigh.lookup(0, x)), (1, None), "aged out, no probes");
        assert_eq!(w1.neigh.lookup(0, x), Some(mac), "worker 1 has not applied the forget");
        assert_eq!(learn(&net, &mut w1, 0, x, mac, Teach::Create, true), Learnt::Known);
        sync(&net, &mut w1);
        sync(&net, &mut w0);
        assert_eq!(net.neigh_ages.lock().unwrap().learned(false), 1);
        assert_eq!((w0.neigh.lookup(0, x), w1.neigh.lookup(0, x)), (Some(mac), Some(mac)), "every worker knows it");
        // A confirmation with the same MAC changes nothing: nothing more is published.
        let published = net.neigh_log.published();
        assert_eq!(learn(&net, &mut w0, 0, x, mac, Teach::Create, true), Learnt::Known);
        assert_eq!(net.neigh_log.published(), published);
    }

    /// ndisc_send_ns's source: the port's link-local address (fe80::/10) when it has one,
    /// wherever it is listed; a site-local fec0::/10 address is none.
    #[test]
    fn solicitations_are_sent_from_the_link_local_address() {
        let mut net = Net::with_workers(Tunables::default(), Pipeline::Local, 1);
        let v6 = |first: u16, last: u8| {
            let mut a = [0u8; 16];
            a[..2].copy_from_slice(&first.to_be_bytes());
            a[15] = last;
            a
        };
        let mut iface = crate::rx::route::Iface::new("p0", [2, 0, 0, 0, 0, 1]);
        iface.v6 = vec![(v6(0xfec0, 1), 64), (v6(0x2001, 1), 64), (v6(0xfe80, 1), 64)];
        net.ifaces.push(iface);
        assert_eq!(source_v6(&net, 0, v6(0x2001, 9)), Some(v6(0xfe80, 1)));
        net.ifaces[0].v6.pop();
        assert_eq!(source_v6(&net, 0, v6(0x2001, 9)), Some(v6(0x2001, 1)), "no link-local: the on-link one");
        assert_eq!(source_v6(&net, 0, v6(0x3fff, 9)), Some(v6(0xfec0, 1)), "nothing on link: the first");
    }

    #[test]
    fn solicited_node_address_and_mac() {
        let t = [0x20, 0x01, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56];
        let (a, m) = solicited_node(&t);
        assert_eq!(a, [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0x12, 0x34, 0x56]);
        assert_eq!(m, [0x33, 0x33, 0xff, 0x12, 0x34, 0x56]);
    }
}
