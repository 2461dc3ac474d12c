#!/usr/bin/env bash
# Native XDP attach smoke test on a veth pair between two throwaway network
# namespaces (root required). Nothing outside the two namespaces is touched and
# both are deleted on exit.
#
#   bpf/veth-attach-test.sh [PKT_DIR]        (default: bpf/packets)
#
#   ns sluice_vtx_$$ [svtx$$] <==== veth ====> [svrx$$] ns sluice_vrx_$$
#        sender (AF_PACKET)                      XDP program attached here
#
# 1. xdp_drop_count.o attached natively (ip link set dev svrx$$ xdp obj ...
#    sec xdp; mode checked to be "driver"), every frame of PKT_DIR sent once
#    from svtx$$ with an AF_PACKET raw socket; the drop_stats map (found via
#    the attached program's map ids) must then hold packets == number of
#    frames and bytes == their total length. Repeated with xdpgeneric.
# 2. xdp_macswap_tx.o attached natively on svrx$$, and xdp_proto_count.o
#    (always XDP_PASS) natively on svtx$$: a veth delivers frames that its peer
#    sent back with XDP_TX only when it has an XDP program itself (on 6.18,
#    "ethtool -K gro on" alone is NOT enough: the frames are counted as
#    rx_queue_0_xdp_tx on svrx$$ but never show up on svtx$$). tcpdump on
#    svtx$$ (-Q in --immediate-mode -U) must see every sent frame come back
#    with the MAC addresses swapped and otherwise byte-identical, and the
#    proto_stats of the native xdp_proto_count (summed over CPUs) must equal
#    those of the test_run oracle (bpf/oracle/xdp_proto_count.json) when the
#    default packet set is used.
# IPv6 is disabled on both ends so no ND/MLD frame pollutes the counts.
set -euo pipefail
shopt -s nullglob

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PKT_DIR="${1:-$HERE/packets}"
if [ "$(id -u)" -ne 0 ]; then
	echo "veth-attach-test: needs root (skipping)" >&2
	exit 77
fi

NS_TX="sluice_vtx_$$"
NS_RX="sluice_vrx_$$"
TX="svtx$$"
RX="svrx$$"
WORK="$(mktemp -d /tmp/sluice-veth.XXXXXX)"
TCPDUMP_PID=""
cleanup() {
	if [ -n "$TCPDUMP_PID" ]; then kill "$TCPDUMP_PID" 2>/dev/null || :; wait "$TCPDUMP_PID" 2>/dev/null || :; fi
	ip netns del "$NS_TX" 2>/dev/null || :
	ip netns del "$NS_RX" 2>/dev/null || :
	rm -rf "$WORK"
}
trap cleanup EXIT
fail=0

ip netns add "$NS_TX"
ip netns add "$NS_RX"
ip -n "$NS_TX" link add "$TX" type veth peer name "$RX" netns "$NS_RX"
ip netns exec "$NS_TX" sysctl -qw "net.ipv6.conf.$TX.disable_ipv6=1"
ip netns exec "$NS_RX" sysctl -qw "net.ipv6.conf.$RX.disable_ipv6=1"
ip -n "$NS_TX" link set "$TX" up
ip -n "$NS_RX" link set "$RX" up

frames=("$PKT_DIR"/*.bin)
nframes=${#frames[@]}
nbytes=$(cat "${frames[@]}" | wc -c)
[ "$nframes" -gt 0 ] || { echo "no frames in $PKT_DIR" >&2; exit 2; }

send_frames() {
	ip netns exec "$NS_TX" python3 - "$TX" "${frames[@]}" <<'PY'
import socket, sys
ifname, files = sys.argv[1], sys.argv[2:]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
for f in files:
    data = open(f, "rb").read()
    n = s.send(data)
    assert n == len(data), (f, n)
s.close()
PY
}

# attached_prog_id MODE -> program id of the XDP program on $RX for that mode
attached_prog_id() {
	ip -n "$NS_RX" -j -d link show dev "$RX" | python3 -c '
import json, sys
mode = sys.argv[1]
link = json.load(sys.stdin)[0]
xdp = link.get("xdp", {})
names = {1: "driver", 2: "generic", 3: "offload"}
got = names.get(xdp.get("mode"), str(xdp.get("mode")))
if got != mode:
    sys.exit("xdp mode is %s, expected %s" % (got, mode))
print(xdp["prog"]["id"] if "prog" in xdp else xdp["attached"][0]["prog"]["id"])' "$1"
}

map_value_by_name() { # PROG_ID MAP_NAME -> bpftool -j map dump of that map
	local pid="$1" want="$2" mid
	for mid in $(bpftool -j prog show id "$pid" | python3 -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin).get("map_ids", []))))'); do
		if [ "$(bpftool -j map show id "$mid" | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')" = "$want" ]; then
			bpftool -j map dump id "$mid"
			return 0
		fi
	done
	return 1
}

# ---- 1. drop counter, native then generic
for mode in xdp xdpgeneric; do
	want_mode=driver
	[ "$mode" = xdpgeneric ] && want_mode=generic
	ip -n "$NS_RX" link set dev "$RX" "$mode" obj "$HERE/obj/xdp_drop_count.o" sec xdp
	pid="$(attached_prog_id "$want_mode")"
	send_frames
	sleep 0.3
	dump="$(map_value_by_name "$pid" drop_stats)"
	read -r pk by < <(echo "$dump" | python3 -c 'import json,sys; v=json.load(sys.stdin)[0]["formatted"]["value"]; print(v["packets"], v["bytes"])')
	if [ "$pk" = "$nframes" ] && [ "$by" = "$nbytes" ]; then
		echo "ok   xdp_drop_count ($want_mode, prog id $pid): packets=$pk bytes=$by (sent $nframes frames, $nbytes bytes)"
	else
		echo "FAIL xdp_drop_count ($want_mode): packets=$pk bytes=$by, sent $nframes frames, $nbytes bytes"
		fail=1
	fi
	ip -n "$NS_RX" link set dev "$RX" "$mode" off
done

# ---- 2. MAC swap and XDP_TX back to the sender
ip -n "$NS_TX" link set dev "$TX" xdp obj "$HERE/obj/xdp_proto_count.o" sec xdp
tx_pid="$(ip -n "$NS_TX" -j link show dev "$TX" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["xdp"]["prog"]["id"])')"
ip -n "$NS_RX" link set dev "$RX" xdp obj "$HERE/obj/xdp_macswap_tx.o" sec xdp
attached_prog_id driver >/dev/null
ip netns exec "$NS_TX" tcpdump -i "$TX" -Q in --immediate-mode -U -s 2048 -B 8192 -w "$WORK/back.pcap" 2>"$WORK/tcpdump.err" &
TCPDUMP_PID=$!
for _ in $(seq 50); do
	grep -q "listening on" "$WORK/tcpdump.err" 2>/dev/null && break
	sleep 0.1
done
sleep 0.5
send_frames
# Stop tcpdump once the capture holds all frames that can come back (or 5 s).
expect_back=$(python3 - "${frames[@]}" <<'PY'
import sys
n = 0
for f in sys.argv[1:]:
    d = open(f, "rb").read()
    if not (d[12:14] in (b"\x81\x00", b"\x88\xa8") and len(d) < 18):
        n += 1
print(n)
PY
)
for _ in $(seq 50); do
	have=$(python3 -c '
import struct, sys
raw = open(sys.argv[1], "rb").read()
off, n = 24, 0
while off + 16 <= len(raw):
    incl = struct.unpack("<I", raw[off + 8:off + 12])[0]
    off += 16 + incl
    n += 1
print(n)' "$WORK/back.pcap" 2>/dev/null || echo 0)
	[ "$have" -ge "$expect_back" ] && break
	sleep 0.1
done
sleep 0.2
kill -INT "$TCPDUMP_PID"
wait "$TCPDUMP_PID" || :
TCPDUMP_PID=""
if grep -Eq '^[1-9][0-9]* packets dropped by kernel' "$WORK/tcpdump.err"; then
	echo "     note: $(grep 'dropped by kernel' "$WORK/tcpdump.err") (capture ring overflow)"
fi
[ -n "${VETH_DEBUG:-}" ] && { cat "$WORK/tcpdump.err"; ip -n "$NS_TX" -s link show "$TX"; ip netns exec "$NS_TX" ethtool -S "$TX"; ip netns exec "$NS_RX" ethtool -S "$RX"; }
if python3 - "$WORK/back.pcap" "${frames[@]}" <<'PY'
import struct, sys
pcap, files = sys.argv[1], sys.argv[2:]
raw = open(pcap, "rb").read()
magic = raw[:4]
endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
off, got = 24, []
while off + 16 <= len(raw):
    _, _, incl, _ = struct.unpack(endian + "IIII", raw[off:off + 16])
    got.append(raw[off + 16:off + 16 + incl])
    off += 16 + incl
want = []
for f in files:
    d = open(f, "rb").read()
    want.append((f.rsplit("/", 1)[-1], d[6:12] + d[0:6] + d[12:]))
ok, i = 0, 0
missing, untaggable = [], []
for name, w in want:
    if w[12:14] in (b"\x81\x00", b"\x88\xa8") and len(w) < 18:
        # The stack drops a VLAN frame whose tag is cut short in skb_vlan_untag,
        # before packet taps run (counted as RX "dropped"): tcpdump cannot see it.
        untaggable.append(name)
        continue
    if i < len(got) and got[i] == w:
        ok += 1
        i += 1
    elif w in got[i:]:
        j = got.index(w, i)
        print("     extra/reordered frames before %s: %d" % (name, j - i))
        i = j + 1
        ok += 1
    else:
        missing.append(name)
print("     captured %d frames, %d of %d sent frames came back swapped and byte-identical"
      % (len(got), ok, len(want)))
for m in untaggable:
    print("     not capturable (truncated VLAN tag, dropped by the stack before taps): %s" % m)
for m in missing:
    print("     not seen back: %s" % m)
n = len(want) - len(untaggable)
sys.exit(0 if ok == n and len(got) == n else 1)
PY
then
	echo "ok   xdp_macswap_tx (driver): every frame came back with MACs swapped"
else
	echo "FAIL xdp_macswap_tx: see above"
	fail=1
fi

# proto_stats of the native run vs. the oracle (per key, summed over CPUs)
map_value_by_name "$tx_pid" proto_stats >"$WORK/native_proto.json"
ORACLE="$HERE/oracle/xdp_proto_count.json"
if [ "$PKT_DIR" -ef "$HERE/packets" ] && [ -f "$ORACLE" ]; then
	if python3 - "$WORK/native_proto.json" "$ORACLE" <<'PY'
import json, sys
def sums(dump):
    return {e["formatted"]["key"]: sum(v["value"] for v in e["formatted"]["values"]) for e in dump}
native = sums(json.load(open(sys.argv[1])))
oracle = sums(json.load(open(sys.argv[2]))["maps"]["proto_stats"])
print("     native proto_stats %s" % [native[k] for k in sorted(native)])
print("     oracle proto_stats %s" % [oracle[k] for k in sorted(oracle)])
sys.exit(0 if native == oracle else 1)
PY
	then
		echo "ok   xdp_proto_count (driver, on the returning frames) matches the test_run oracle"
	else
		echo "FAIL xdp_proto_count native counts differ from the oracle"
		fail=1
	fi
fi
ip -n "$NS_RX" link set dev "$RX" xdp off
ip -n "$NS_TX" link set dev "$TX" xdp off

if [ "$fail" -ne 0 ]; then
	echo "veth-attach-test: FAILED"
	exit 1
fi
echo "veth-attach-test: passed"
