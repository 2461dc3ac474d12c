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
/// Timestamp flags: addresses are prespecified (the only kind that counts no overflow).
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
                    let slot = if flags == 0 { 4 } else { 8 };
                    if ptr + 3 > len || (flags != 0 && flags != 2 && ptr + slot - 1 > len) {
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
    }
}
