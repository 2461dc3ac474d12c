//! IPv4 header reads and edits that the receive, forward and local steps share: the route
//! key and destination, options (compiled on receive, Record Route filled when forwarding,
//! echoed in replies), trimming to the datagram's length, and why receive refused a packet.
//! Reads and edits only: no step of the stage, so every step can import it.

use crate::buf::skb::Skb;
use crate::buf::BufCache;
use crate::stats::DropReason;
use crate::wire::ipv4::{self, Ipv4Packet};

/// Why receive refused a packet: a plain drop, or a drop answered with an ICMP parameter
/// problem (`code`, and `pointer`: the offending byte's offset from the IP header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RcvError {
    Drop(DropReason),
    ParamProblem { code: u8, pointer: u32, reason: DropReason },
}

impl From<DropReason> for RcvError {
    #[inline(always)]
    fn from(r: DropReason) -> Self {
        RcvError::Drop(r)
    }
}

const IPOPT_END: u8 = 0;
const IPOPT_NOOP: u8 = 1;
const IPOPT_RR: u8 = 7;
const IPOPT_TIMESTAMP: u8 = 0x44;
const IPOPT_LSRR: u8 = 0x83;
const IPOPT_SSRR: u8 = 0x89;
const IPOPT_RA: u8 = 0x94;
/// Timestamp flags: each stamp with the address that made it (an 8-byte slot).
const IPOPT_TS_TSANDADDR: u8 = 1;
/// Timestamp flags: addresses are prespecified (8-byte slots; the only kind that counts no
/// overflow).
const IPOPT_TS_PRESPEC: u8 = 3;

/// ip_options_compile's rules over the option bytes (after the fixed header): `Ok((changed,
/// source_route))`, or `Err(offset)` of the byte a parameter problem points at.
pub(crate) fn compile_options(opts: &mut [u8]) -> Result<(bool, bool), usize> {
    let (mut changed, mut srr, mut rr, mut ts) = (false, false, false, false);
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            IPOPT_END => {
                for b in &mut opts[i + 1..] {
                    changed |= *b != IPOPT_END;
                    *b = IPOPT_END;
                }
                break;
            }
            IPOPT_NOOP => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let room = opts.len() - i;
        if room < 2 {
            return Err(i);
        }
        let len = opts[i + 1] as usize;
        if len < 2 || len > room {
            return Err(i);
        }
        let ptr = opts.get(i + 2).map_or(0, |p| *p as usize);
        match opts[i] {
            IPOPT_LSRR | IPOPT_SSRR => {
                if len < 3 {
                    return Err(i + 1);
                }
                if ptr < 4 {
                    return Err(i + 2);
                }
                if srr {
                    return Err(i);
                }
                srr = true;
            }
            IPOPT_RR => {
                if rr {
                    return Err(i);
                }
                if len < 3 {
                    return Err(i + 1);
                }
                if ptr < 4 || (ptr <= len && ptr + 3 > len) {
                    return Err(i + 2);
                }
                rr = true;
            }
            IPOPT_TIMESTAMP => {
                if ts {
                    return Err(i);
                }
                if len < 4 {
                    return Err(i + 1);
                }
                if ptr < 5 {
                    return Err(i + 2);
                }
                let flags = opts[i + 3] & 0x0f;
                if ptr <= len {
                    // Only the kinds with addresses need a whole 8-byte slot; on a received
                    // packet the kernel takes any other flags value as it comes.
                    let with_addr = flags == IPOPT_TS_TSANDADDR || flags == IPOPT_TS_PRESPEC;
                    if ptr + 3 > len || (with_addr && ptr + 7 > len) {
                        return Err(i + 2);
                    }
                } else if flags != IPOPT_TS_PRESPEC {
                    if opts[i + 3] >> 4 == 15 {
                        return Err(i + 3);
                    }
                    opts[i + 3] += 0x10;
                    changed = true;
                }
                ts = true;
            }
            IPOPT_RA if len < 4 => return Err(i + 1),
            _ => {}
        }
        i += len;
    }
    Ok((changed, srr))
}

/// The Record Route option of a header with options, if it has room for an address: its
/// offset from the IP header.
fn record_route_with_room(ip: &[u8]) -> Option<usize> {
    let ihl = ((ip.first()? & 0x0f) as usize * 4).min(ip.len());
    let mut i = 20;
    while i < ihl {
        match ip[i] {
            IPOPT_END => return None,
            IPOPT_NOOP => i += 1,
            t => {
                let len = *ip.get(i + 1)? as usize;
                if len < 2 {
                    return None;
                }
                if t == IPOPT_RR {
                    let ptr = *ip.get(i + 2)? as usize;
                    return (ptr >= 4 && ptr + 3 <= len && i + len <= ihl).then_some(i);
                }
                i += len;
            }
        }
    }
    None
}

/// Records `addr` in the packet's Record Route option if it has room, advancing its pointer
/// (ip_forward_options: the address of the interface the packet leaves by; an answer: the
/// address it was sent to). The header checksum is recomputed. `ip` starts at the IP header.
#[cold]
#[inline(never)]
pub(crate) fn record_route(ip: &mut [u8], addr: [u8; 4]) -> bool {
    let Some(opt) = record_route_with_room(ip) else { return false };
    let slot = opt + ip[opt + 2] as usize - 1;
    ip[slot..slot + 4].copy_from_slice(&addr);
    ip[opt + 2] += 4;
    Ipv4Packet::new_unchecked(ip).fill_checksum();
    true
}

/// ip_options_echo for an answer sent from the kernel's own stack (echo replies): of the
/// request's options only Record Route comes back (source routes were refused on receive;
/// timestamps are not echoed by sluice), padded with End to a multiple of 4 bytes. Returns
/// the reply's option bytes and their length.
pub(crate) fn echo_options(ip: &[u8]) -> ([u8; 40], usize) {
    let mut out = [0u8; 40];
    let ihl = ((ip[0] & 0x0f) as usize * 4).min(ip.len());
    let mut i = 20;
    while i < ihl {
        match ip[i] {
            IPOPT_END => break,
            IPOPT_NOOP => i += 1,
            t => {
                let len = ip.get(i + 1).map_or(0, |l| *l as usize);
                if len < 2 || i + len > ihl {
                    break;
                }
                if t == IPOPT_RR {
                    out[..len].copy_from_slice(&ip[i..i + len]);
                    return (out, len.div_ceil(4) * 4);
                }
                i += len;
            }
        }
    }
    (out, 0)
}

/// pskb_trim_rcsum: the packet ends where the IP datagram does (Ethernet padding goes).
#[inline(always)]
pub(crate) fn trim_to(bufs: &mut BufCache, skb: &mut Skb, len: usize) {
    if skb.pkt.is_chained() {
        trim_chain(bufs, skb, len);
    } else {
        skb.pkt.len = len as u16;
    }
}

/// [`trim_to`] for a buffer chain: rare, kept out of the receive path's code.
#[cold]
#[inline(never)]
fn trim_chain(bufs: &mut BufCache, skb: &mut Skb, len: usize) {
    bufs.trim(&mut skb.pkt, len);
}

#[inline(always)]
pub(crate) fn route_key(bufs: &BufCache, skb: &Skb) -> ([u8; 4], u8) {
    let o = skb.network_off as usize;
    match bufs.data(skb.pkt).get(o..o + ipv4::MIN_HEADER_LEN) {
        Some(h) => {
            let ip = Ipv4Packet::new_unchecked(h);
            (ip.dst_addr(), ip.tos())
        }
        None => ([0; 4], 0),
    }
}

#[inline]
pub(crate) fn daddr(bufs: &BufCache, skb: &Skb) -> [u8; 4] {
    let o = skb.network_off as usize;
    bufs.data(skb.pkt).get(o..o + ipv4::MIN_HEADER_LEN).map_or([0; 4], |h| Ipv4Packet::new_unchecked(h).dst_addr())
}

pub(crate) const LIMITED_BROADCAST: [u8; 4] = [255; 4];

pub(crate) fn is_multicast(a: [u8; 4]) -> bool {
    a[0] & 0xf0 == 0xe0
}

pub(crate) fn is_loopback(a: [u8; 4]) -> bool {
    a[0] == 127
}

/// Whether no packet from `src` is accepted, whatever its destination: a multicast,
/// limited-broadcast or loopback source (ip_route_input's martian sources) or a source
/// fib_validate_source takes for this host's (`is_local_source_v4`). 0.0.0.0 is left to the
/// caller: ARP takes it for a probe. ARP asks this of a sender as ip_route_input would of a
/// packet from it.
pub(crate) fn is_martian_source(routes: &super::route::RouteTable, src: [u8; 4]) -> bool {
    is_multicast(src) || src == LIMITED_BROADCAST || is_loopback(src) || routes.is_local_source_v4(src)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_route_of_three_bytes_is_full_not_malformed() {
        // ip_options_compile: a Record Route option needs type, length and pointer (3 bytes);
        // with no slot it is full (pointer past the length), not a parameter problem.
        let mut full = [IPOPT_RR, 3, 4, IPOPT_END];
        assert_eq!(compile_options(&mut full), Ok((false, false)));
        let mut short = [IPOPT_RR, 2, IPOPT_END, IPOPT_END];
        assert_eq!(compile_options(&mut short), Err(1), "two bytes: the length is the problem");
    }

    #[test]
    fn timestamp_with_addresses_needs_room_for_one_eight_byte_slot() {
        // ip_options_compile, IPOPT_TS_TSANDADDR: the pointer must leave a whole 8-byte
        // (address, time) slot, `ptr + 7 <= len`; timestamps alone need 4 bytes.
        let mut one_slot = [IPOPT_TIMESTAMP, 12, 5, 0x01, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(compile_options(&mut one_slot), Ok((false, false)));
        let mut half_slot = [IPOPT_TIMESTAMP, 8, 5, 0x01, 0, 0, 0, 0];
        assert_eq!(compile_options(&mut half_slot), Err(2), "the pointer is the problem");
        let mut times_only = [IPOPT_TIMESTAMP, 8, 5, 0x00, 0, 0, 0, 0];
        assert_eq!(compile_options(&mut times_only), Ok((false, false)));
        let mut prespec_half = [IPOPT_TIMESTAMP, 8, 5, IPOPT_TS_PRESPEC, 0, 0, 0, 0];
        assert_eq!(compile_options(&mut prespec_half), Err(2), "prespecified addresses need 8 bytes too");
        // Other flags values (2, 4-15) on a received packet: only the 4-byte check applies
        // (ip_options_compile's default case refuses them only for a local sender).
        for flags in [2, 4, 15] {
            let mut other = [IPOPT_TIMESTAMP, 8, 5, flags, 0, 0, 0, 0];
            assert_eq!(compile_options(&mut other), Ok((false, false)), "flags {flags}");
        }
    }

    /// ip_options_compile's parameter-problem pointer for each malformed option: the option
    /// itself (no room for a length, a bad length, a second one of a kind), its length (too
    /// short for the kind) or its pointer (below the first slot).
    #[test]
    fn each_malformed_option_is_pointed_at_where_the_kernel_points() {
        let rr = [IPOPT_RR, 7, 4, 0, 0, 0, 0];
        let ts = [IPOPT_TIMESTAMP, 8, 5, 0, 0, 0, 0, 0];
        let lsrr = [IPOPT_LSRR, 7, 4, 10, 0, 0, 1];
        let twice = |o: &[u8]| [o, o].concat();
        let cases: [(&str, Vec<u8>, usize); 11] = [
            ("a type with no room for its length", vec![IPOPT_NOOP, IPOPT_NOOP, IPOPT_NOOP, IPOPT_RR], 3),
            ("a length below 2", vec![IPOPT_RA, 1, 0, 0], 0),
            ("a length past the options", vec![IPOPT_NOOP, IPOPT_RA, 4, 0], 1),
            ("a source route of two bytes", vec![IPOPT_LSRR, 2, 0, 0], 1),
            ("a source route pointer below 4", vec![IPOPT_SSRR, 7, 3, 0, 0, 0, 0, 0], 2),
            ("two source routes", [&lsrr[..], &[IPOPT_NOOP], &[IPOPT_SSRR, 7, 4, 10, 0, 0, 1]].concat(), 8),
            ("two record routes", twice(&rr), 7),
            ("two timestamps", twice(&ts), 8),
            ("a timestamp of three bytes", vec![IPOPT_TIMESTAMP, 3, 5, 0], 1),
            ("a timestamp pointer below 5", vec![IPOPT_TIMESTAMP, 8, 4, 0, 0, 0, 0, 0], 2),
            ("a router alert of three bytes", vec![IPOPT_RA, 3, 0, 0], 1),
        ];
        for (what, mut opts, at) in cases {
            assert_eq!(compile_options(&mut opts), Err(at), "{what}");
        }
        // The well-formed ones alone pass; a source route says so.
        for (o, srr) in [(&rr[..], false), (&ts[..], false), (&lsrr[..], true)] {
            assert_eq!(compile_options(&mut o.to_vec()), Ok((false, srr)), "{o:?}");
        }
    }

    /// ip_options_compile: a full timestamp option (pointer past its length) counts the
    /// stamps it had no room for in the flags byte's top nibble; at 15 the count cannot
    /// grow and the flags byte is the problem. Prespecified addresses count nothing.
    #[test]
    fn a_full_timestamp_counts_its_overflow_up_to_fifteen() {
        let mut full = [IPOPT_TIMESTAMP, 8, 9, 0x21, 0, 0, 0, 0];
        assert_eq!(compile_options(&mut full), Ok((true, false)));
        assert_eq!(full[3], 0x31, "overflow 2 -> 3, flags kept");
        let mut at_fifteen = [IPOPT_TIMESTAMP, 8, 9, 0xf1, 0, 0, 0, 0];
        assert_eq!(compile_options(&mut at_fifteen), Err(3));
        let mut prespec = [IPOPT_TIMESTAMP, 12, 13, 0x03, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(compile_options(&mut prespec), Ok((false, false)));
        assert_eq!(prespec[3], 0x03, "no overflow count for prespecified addresses");
    }

    /// ip_options_compile: the bytes after an end-of-list option are cleared (and the
    /// header marked changed, so its checksum is redone); zeros already there change nothing.
    #[test]
    fn bytes_after_the_end_of_options_are_cleared() {
        let mut tail = [IPOPT_NOOP, IPOPT_END, 7, 0, 9, 0, 0, 0];
        assert_eq!(compile_options(&mut tail), Ok((true, false)));
        assert_eq!(tail, [IPOPT_NOOP, IPOPT_END, 0, 0, 0, 0, 0, 0]);
        let mut clean = [IPOPT_NOOP, IPOPT_END, 0, 0];
        assert_eq!(compile_options(&mut clean), Ok((false, false)));
    }

    /// An IPv4 header of 20 bytes plus `opts` (padded to a multiple of 4).
    fn header_with(opts: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; 20];
        h.extend_from_slice(opts);
        h.resize(20 + opts.len().div_ceil(4) * 4, 0);
        h[0] = 0x40 | (h.len() / 4) as u8;
        h
    }

    /// The Record Route option is found past other options (its own room checked); a
    /// malformed option before it ends the search, in the forwarding rewrite and in the echo.
    #[test]
    fn record_route_is_found_past_other_options_and_not_past_a_malformed_one() {
        let rr = [IPOPT_RR, 7, 4, 0, 0, 0, 0];
        let after_ra = header_with(&[&[IPOPT_RA, 4, 0, 0][..], &rr].concat());
        assert_eq!(record_route_with_room(&after_ra), Some(24));
        let (echo, len) = echo_options(&after_ra);
        assert_eq!((&echo[..7], len), (&rr[..], 8), "the echo carries the option alone, padded");
        let after_bad = header_with(&[&[IPOPT_RA, 1, 0, 0][..], &rr].concat());
        assert_eq!(record_route_with_room(&after_bad), None);
        assert_eq!(echo_options(&after_bad).1, 0);
        let past_header = header_with(&[&[IPOPT_RA, 40, 0, 0][..], &rr].concat());
        assert_eq!(echo_options(&past_header).1, 0, "an option running past the header ends the walk");
        let full = header_with(&[&[IPOPT_RA, 4, 0, 0][..], &[IPOPT_RR, 7, 8, 0, 0, 0, 0]].concat());
        assert_eq!(record_route_with_room(&full), None, "a full Record Route has no room");
        // An unknown option of the shortest length (type and length only) is walked past,
        // as ip_options_compile ignores unknown options on received packets.
        let after_short = header_with(&[&[0x1e, 2][..], &rr].concat());
        assert_eq!(record_route_with_room(&after_short), Some(22));
        assert_eq!(echo_options(&after_short).1, 8);
    }

    /// The walk ends at the header's end (IHL), never in the payload: bytes after a header
    /// whose options hold no Record Route are not one, whatever they look like.
    #[test]
    fn record_route_is_looked_for_within_the_header_only() {
        let mut ip = header_with(&[IPOPT_NOOP; 4]);
        ip.extend_from_slice(&[IPOPT_RR, 7, 4, 0, 0, 0, 0, 0]);
        assert_eq!(record_route_with_room(&ip), None);
        assert!(!record_route(&mut ip, [192, 0, 2, 1]));
        assert_eq!(ip[24..], [IPOPT_RR, 7, 4, 0, 0, 0, 0, 0], "the payload is untouched");
    }
}
