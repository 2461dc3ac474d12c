#!/usr/bin/env bash
# Issue 2 acceptance: the lab runs clean; the router example forwards; pcap in/out produce a
# capture tshark reads with correct checksums.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${SLUICE_BIN:-target/release/sluice}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

echo "--- the lab (cargo run --release), 3 s"
cargo run --release -q -- run --seconds 3 | tee "$tmp/lab.txt"
grep -q "conservation: ok" "$tmp/lab.txt"
grep -qE "^ *1\.[0-9]s +rx" "$tmp/lab.txt"   # the per-second lines

echo "--- examples/router.toml, l3fwd, 3 s"
"$bin" run --pipeline l3fwd --config examples/router.toml --seconds 3 --quiet | tee "$tmp/router.txt"
grep -q "conservation: ok" "$tmp/router.txt"

echo "--- pcap: generate a capture, route it, check it with tshark"
"$bin" run --config examples/router.toml --pipeline io --packets 2000 --pcap-out "$tmp/in.pcap" --quiet >/dev/null
"$bin" run --config examples/router.toml --pcap-in "$tmp/in.pcap" --pcap-out "$tmp/out.pcap" --quiet | tee "$tmp/pcap.txt"
grep -q "conservation: ok" "$tmp/pcap.txt"
n=$(tshark -r "$tmp/out.pcap" 2>/dev/null | wc -l)
echo "frames in output capture: $n"
[ "$n" -ge 2000 ]
bad=$(tshark -r "$tmp/out.pcap" -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE -o tcp.check_checksum:TRUE \
      -Y "ip.checksum.status == \"Bad\" || udp.checksum.status == \"Bad\" || tcp.checksum.status == \"Bad\" || icmp.checksum.status == \"Bad\" || icmpv6.checksum.status == \"Bad\"" 2>/dev/null | wc -l)
echo "frames with bad checksums: $bad"
[ "$bad" -eq 0 ]
ttl=$(tshark -r "$tmp/out.pcap" -T fields -e ip.ttl -Y ip 2>/dev/null | sort -u | tr '\n' ' ')
hlim=$(tshark -r "$tmp/out.pcap" -T fields -e ipv6.hlim -Y ipv6 2>/dev/null | sort -u | tr '\n' ' ')
echo "TTLs: $ttl  hop limits: $hlim"
[ "$ttl" = "63 " ] && [ "$hlim" = "63 " ]
echo "core datapath acceptance: ok"
