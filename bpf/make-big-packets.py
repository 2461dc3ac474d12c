#!/usr/bin/env python3
"""Generate frames from 14 bytes to past 64 KiB for the multi-buffer cross-check.

    bpf/make-big-packets.py [OUT_DIR]      (default: bpf/packets-big/)

One raw frame per file, NN_LEN.bin: an Ethernet header (IPv4 ethertype) and a
deterministic byte pattern. The sizes sit on the test run's boundaries: its linear
part (4096 - 256 headroom - 320 tailroom = 3520 bytes), whole 4 KiB fragments, jumbo
frames, 64 KiB, the largest frame 17 fragments hold (3520 + 17 * 4096 = 73152) and one
byte more (the kernel refuses it). Running it twice gives identical bytes.
"""
import os
import sys

SIZES = [14, 60, 1514, 3519, 3520, 3521, 4000, 4001, 4096, 7616, 7617, 9000, 9018, 16384, 32768, 65535, 73152, 73153]


def frame(n: int) -> bytes:
    eth = bytes.fromhex("020000000002" "020000000001" "0800")
    body = bytes((i * 31 + n) & 0xFF for i in range(n - len(eth)))
    return (eth + body)[:n]


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "packets-big")
    os.makedirs(out, exist_ok=True)
    for i, n in enumerate(SIZES):
        with open(os.path.join(out, "%02d_%d.bin" % (i, n)), "wb") as f:
            f.write(frame(n))


if __name__ == "__main__":
    main()
