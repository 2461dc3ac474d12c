//! The route step of a run and dst_input (ip_list_rcv_finish): route each packet with the
//! route hint, cut the run where the route changes and hand each piece to local delivery or
//! forwarding as a list. Generic over the family; each family's receive step calls it.

use super::family::IpFamily;
use super::forward::forward_list;
use super::route::{NextHop, NO_ROUTE};
use crate::buf::skb::Skb;
use crate::net::Net;
use crate::stats::{DropReason, Stage};
use crate::worker::Worker;

/// Calls `f` on each run of consecutive packets with the same `key`.
#[inline]
pub(crate) fn for_each_run<K: PartialEq>(list: &mut [Skb], key: impl Fn(&Skb) -> K, mut f: impl FnMut(&mut [Skb])) {
    let mut start = 0;
    while start < list.len() {
        let k = key(&list[start]);
        let mut end = start + 1;
        while end < list.len() && key(&list[end]) == k {
            end += 1;
        }
        f(&mut list[start..end]);
        start = end;
    }
}

/// ip_list_rcv_finish / ip6_list_rcv_finish: route each packet, reusing the previous lookup
/// for consecutive packets with the same (daddr, tos) — the route hint, not for per-destination
/// (connected) routes — then cut the run by route and hand each piece to dst_input as a list.
pub(crate) fn list_rcv_finish<F: IpFamily>(net: &Net, w: &mut Worker, run: &mut [Skb]) {
    let t0 = w.clock();
    let use_hint = net.tun.route_hint != 0;
    let mut hint: Option<(F::Addr, u8, u32)> = None;
    for s in run.iter_mut() {
        let (d, t) = F::route_key(&w.bufs, s);
        s.nh = match hint {
            Some((hd, ht, nh)) if use_hint && hd == d && ht == t => {
                w.c.route_hint_hits += 1;
                nh
            }
            _ => {
                let nh = F::route(net, w, d);
                let hintable = net.routes.get(nh).is_some_and(|n| n.hint_ok());
                hint = hintable.then_some((d, t, nh));
                nh
            }
        };
    }
    w.stage_done(Stage::Route, run.len(), t0);
    for_each_run(
        run,
        |s| s.nh,
        |sub| {
            let nh = if sub[0].nh == NO_ROUTE { None } else { net.routes.get(sub[0].nh).copied() };
            match nh {
                Some(NextHop::Local | NextHop::Broadcast) => F::deliver_list(net, w, sub),
                Some(NextHop::Blackhole) => {
                    for s in sub.iter() {
                        w.drop_pkt(s.pkt, DropReason::IpNoroute);
                    }
                }
                None => {
                    for s in sub.iter() {
                        F::no_route(net, w, *s);
                    }
                }
                Some(NextHop::Unreachable) => {
                    for s in sub.iter() {
                        F::unreachable(net, w, *s);
                    }
                }
                Some(nh) => forward_list::<F>(net, w, sub, &nh),
            }
        },
    );
}
