#!/usr/bin/env python3
"""Generate the sluice XDP test frame set (deterministic, standard library only).

    bpf/make-packets.py [OUT_DIR] [PCAP]

Defaults: bpf/packets/ and bpf/packets.pcap next to this script. OUT_DIR gets
one raw frame per file, NN_name.bin (Ethernet header first, no FCS), in the
order of the NN prefix (sort by name), plus MANIFEST.txt (name, length,
description). PCAP is a classic little-endian pcap (magic a1b2c3d4, v2.4,
LINKTYPE_ETHERNET) with the same frames in the same order, timestamps
1700000000.000000 + i ms. Running it twice gives identical bytes.

The set covers every branch of the programs in bpf/: IPv4 UDP/TCP/ICMP/other,
IPv4 with options and a non-first fragment, IPv6 UDP/TCP/ICMPv6, IPv6 with
hop-by-hop + destination options, a 5-header chain (over the parser's bound of
4), a fragment header, a truncated chain, single- and double-tagged VLAN, ARP,
a truncated IPv4 (20 bytes), a bare 14-byte Ethernet header, a truncated VLAN
tag, 6 frames from one source followed by one from another (rate limiter), and
a 1514-byte frame. Layer-3/4 checksums are valid.
"""
import os
import struct
import sys

DST_MAC = bytes.fromhex("020000000002")
SRC_MAC = bytes.fromhex("020000000001")


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ip4(a: str) -> bytes:
    return bytes(int(x) for x in a.split("."))


def ip6(a: str) -> bytes:
    # Minimal "::" expansion for the literal addresses used below.
    head, _, tail = a.partition("::")
    h = [int(x, 16) for x in head.split(":") if x]
    t = [int(x, 16) for x in tail.split(":") if x]
    words = h + [0] * (8 - len(h) - len(t)) + t
    return struct.pack("!8H", *words)


def eth(ethertype: int, payload: bytes, dst=DST_MAC, src=SRC_MAC) -> bytes:
    return dst + src + struct.pack("!H", ethertype) + payload


def vlan(tpid: int, vid: int, inner_type: int, payload: bytes) -> bytes:
    """Returns the bytes after the MAC addresses' ethertype slot: TCI + type."""
    return struct.pack("!HH", vid & 0x0FFF, inner_type) + payload


def ipv4(src, dst, proto, payload, ident=1, ttl=64, frag=0x4000, options=b"", tos=0):
    ihl = 5 + len(options) // 4
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, ihl * 4 + len(payload), ident,
                      frag, ttl, proto, 0, ip4(src), ip4(dst)) + options
    hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
    return hdr + payload


def l4_csum4(src, dst, proto, seg):
    pseudo = ip4(src) + ip4(dst) + struct.pack("!BBH", 0, proto, len(seg))
    return csum(pseudo + seg)


def l4_csum6(src, dst, proto, seg):
    pseudo = ip6(src) + ip6(dst) + struct.pack("!IxxxB", len(seg), proto)
    return csum(pseudo + seg)


def udp(sport, dport, payload, csum_fn):
    seg = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    c = csum_fn(17, seg) or 0xFFFF
    return seg[:6] + struct.pack("!H", c) + seg[8:]


def tcp_syn(sport, dport, seq, csum_fn):
    seg = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x02, 64240, 0, 0)
    c = csum_fn(6, seg)
    return seg[:16] + struct.pack("!H", c) + seg[18:]


def icmp_echo(ident, seq, payload):
    m = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + payload
    return m[:2] + struct.pack("!H", csum(m)) + m[4:]


def icmp6_echo(src, dst, ident, seq, payload):
    m = struct.pack("!BBHHH", 128, 0, 0, ident, seq) + payload
    c = l4_csum6(src, dst, 58, m)
    return m[:2] + struct.pack("!H", c) + m[4:]


def ipv6(src, dst, nexthdr, payload, hop_limit=64):
    return struct.pack("!IHBB16s16s", 0x60000000, len(payload), nexthdr, hop_limit,
                       ip6(src), ip6(dst)) + payload


def ext_opts(nexthdr, hdrlen_units=0):
    """Hop-by-hop / destination options header, 8*(hdrlen+1) bytes, PadN."""
    total = 8 * (hdrlen_units + 1)
    padn = bytes([1, total - 4]) + bytes(total - 4)
    return bytes([nexthdr, hdrlen_units]) + padn


def ext_routing(nexthdr):
    # Type 0-free: routing type 253 (experimental), segments left 0, 8 bytes.
    return bytes([nexthdr, 0, 253, 0]) + bytes(4)


def ext_frag(nexthdr, offset=0, more=False, ident=0x1234):
    return struct.pack("!BBHI", nexthdr, 0, (offset << 3) | int(more), ident)


def v4_udp(src, dst, sport, dport, payload, **kw):
    return ipv4(src, dst, 17, udp(sport, dport, payload,
                                  lambda p, s: l4_csum4(src, dst, p, s)), **kw)


def build():
    P = []  # (name, frame, description)
    A4, B4 = "10.0.0.1", "10.0.0.254"
    A6, B6 = "2001:db8::1", "2001:db8::fe"
    c6 = lambda p, s: l4_csum6(A6, B6, p, s)

    P.append(("ipv4_udp", eth(0x0800, v4_udp(A4, B4, 1000, 2000, b"sluice-udp-v4")),
              "IPv4 UDP 10.0.0.1:1000 -> 10.0.0.254:2000"))
    P.append(("ipv4_tcp", eth(0x0800, ipv4("10.0.0.2", B4, 6,
              tcp_syn(40000, 80, 0x01020304, lambda p, s: l4_csum4("10.0.0.2", B4, p, s)))),
              "IPv4 TCP SYN from 10.0.0.2"))
    P.append(("ipv4_icmp", eth(0x0800, ipv4("10.0.0.3", B4, 1, icmp_echo(0x77, 1, b"ping" * 8))),
              "IPv4 ICMP echo request from 10.0.0.3"))
    P.append(("ipv4_gre", eth(0x0800, ipv4("10.0.0.4", B4, 47, struct.pack("!HH", 0, 0x0800)
              + ipv4("192.168.0.1", "192.168.0.2", 59, b""))),
              "IPv4 protocol 47 (GRE) from 10.0.0.4: L4 'other'"))
    P.append(("ipv4_options_udp", eth(0x0800, v4_udp("10.0.0.5", B4, 1001, 2001, b"opts",
              options=bytes([1, 1, 1, 0]))),
              "IPv4 IHL=6 (NOP,NOP,NOP,EOL options) UDP from 10.0.0.5"))
    P.append(("ipv4_frag_udp", eth(0x0800, ipv4("10.0.0.6", B4, 17, b"\xab" * 24, frag=185)),
              "IPv4 non-first fragment (offset 1480), protocol UDP, from 10.0.0.6"))
    P.append(("ipv6_udp", eth(0x86DD, ipv6(A6, B6, 17, udp(1000, 2000, b"sluice-udp-v6", c6))),
              "IPv6 UDP 2001:db8::1 -> 2001:db8::fe"))
    P.append(("ipv6_tcp", eth(0x86DD, ipv6(A6, B6, 6, tcp_syn(40000, 443, 7, c6))),
              "IPv6 TCP SYN"))
    P.append(("ipv6_icmpv6", eth(0x86DD, ipv6(A6, B6, 58, icmp6_echo(A6, B6, 0x66, 1, b"pong" * 4))),
              "IPv6 ICMPv6 echo request"))
    P.append(("ipv6_hbh_dstopts_udp", eth(0x86DD, ipv6(A6, B6, 0,
              ext_opts(60) + ext_opts(17, 1) + udp(1000, 2000, b"ext", c6))),
              "IPv6 hop-by-hop (8 B) + destination options (16 B) + UDP"))
    P.append(("ipv6_ext_chain5_udp", eth(0x86DD, ipv6(A6, B6, 0,
              ext_opts(60) + ext_opts(43) + ext_routing(60) + ext_opts(44) + ext_frag(17)
              + udp(1000, 2000, b"long", c6))),
              "IPv6 HBH+DST+RT+DST+FRAG+UDP: 5 extension headers, over the bound of 4 -> L4 other"))
    P.append(("ipv6_frag_icmpv6", eth(0x86DD, ipv6(A6, B6, 44,
              ext_frag(58, 0, True) + icmp6_echo(A6, B6, 0x66, 2, b"frag" * 4))),
              "IPv6 fragment header (first fragment, M=1) + ICMPv6"))
    P.append(("ipv6_truncated_ext", eth(0x86DD, ipv6(A6, B6, 0, b""))[:54],
              "IPv6 header announcing hop-by-hop, frame ends after the 40-byte IPv6 header"))
    P.append(("vlan_ipv4_udp", eth(0x8100, vlan(0x8100, 100, 0x0800,
              v4_udp("10.0.0.7", B4, 1002, 2002, b"vlan"))),
              "802.1Q VID 100, IPv4 UDP from 10.0.0.7"))
    P.append(("qinq_ipv4_udp", eth(0x88A8, vlan(0x88A8, 200, 0x8100, vlan(0x8100, 100, 0x0800,
              v4_udp("10.0.0.8", B4, 1003, 2003, b"qinq")))),
              "802.1ad VID 200 + 802.1Q VID 100 + IPv4 UDP: only one tag is parsed -> L3 other"))
    P.append(("arp_request", eth(0x0806, struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1,
              SRC_MAC, ip4(A4), bytes(6), ip4(B4)), dst=b"\xff" * 6),
              "ARP who-has 10.0.0.254 tell 10.0.0.1 (broadcast)"))
    P.append(("ipv4_truncated", eth(0x0800, v4_udp("10.0.0.9", B4, 1, 2, b""))[:20],
              "20-byte frame: Ethernet + first 6 bytes of an IPv4 header"))
    P.append(("eth_only", eth(0x88B5, b""),
              "14-byte frame: Ethernet header only, ethertype 0x88B5 (local experimental)"))
    P.append(("vlan_truncated", eth(0x8100, b"\x00\x64"),
              "16-byte frame: 802.1Q ethertype, TCI present, encapsulated type missing"))
    for i in range(6):
        P.append(("burst_%d_ipv4_udp" % i, eth(0x0800, v4_udp("10.0.0.100", B4, 5000 + i, 9999,
                  b"burst%d" % i, ident=100 + i)),
                  "rate-limiter burst %d/6 from 10.0.0.100 (PASS x4 then DROP x2)" % (i + 1)))
    P.append(("burst_other_src", eth(0x0800, v4_udp("10.0.0.101", B4, 5000, 9999, b"other")),
              "one frame from 10.0.0.101 right after the burst (PASS)"))
    big = bytes((i * 7) & 0xFF for i in range(1472))
    P.append(("ipv4_udp_1514", eth(0x0800, v4_udp("10.0.0.10", B4, 1004, 2004, big)),
              "1514-byte IPv4 UDP frame (1500-byte IP packet) from 10.0.0.10"))
    return [("%02d_%s" % (i, n), f, d) for i, (n, f, d) in enumerate(P)]


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, frame in enumerate(frames):
            ts_us = i * 1000
            f.write(struct.pack("<IIII", 1700000000 + ts_us // 1000000, ts_us % 1000000,
                                len(frame), len(frame)))
            f.write(frame)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "packets")
    pcap = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "packets.pcap")
    pkts = build()
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):  # stale frames from an older generator
        if name.endswith(".bin"):
            os.unlink(os.path.join(out, name))
    with open(os.path.join(out, "MANIFEST.txt"), "w") as m:
        m.write("# name\tlength\tdescription (generated by bpf/make-packets.py)\n")
        for name, frame, desc in pkts:
            with open(os.path.join(out, name + ".bin"), "wb") as f:
                f.write(frame)
            m.write("%s.bin\t%d\t%s\n" % (name, len(frame), desc))
    write_pcap(pcap, [f for _, f, _ in pkts])
    print("wrote %d frames to %s and %s" % (len(pkts), out, pcap))


if __name__ == "__main__":
    main()
