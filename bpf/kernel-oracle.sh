#!/usr/bin/env bash
# Kernel oracle: run an XDP object in the Linux kernel (BPF_PROG_TEST_RUN via
# bpftool) on a directory of raw frames and write what happened as JSON.
#
#   bpf/kernel-oracle.sh PROG.o PKT_DIR OUT.json       (root)
#
# 1. bpftool prog load PROG.o /sys/fs/bpf/sluice_oracle_$$ type xdp
#        pinmaps /sys/fs/bpf/sluice_oracle_$$_maps
#    With ORACLE_PROG=NAME: `bpftool prog loadall` (every program of the object
#    loaded, each pinned by name) and program NAME is the one run. With
#    ORACLE_TYPE=auto each program's type comes from its section name (objects
#    mixing XDP with tc / tracing programs); default ORACLE_TYPE=xdp.
# 2. every DEVMAP / DEVMAP_HASH gets key 0 -> ifindex $ORACLE_DEVMAP_IFINDEX, every
#    CPUMAP key 0 -> queue size 192 (CPU 0), every PROG_ARRAY the slots of
#    $ORACLE_PROG_ARRAY ("0=prog,1=prog": programs of the object, with ORACLE_PROG)
#    (default 1 = "lo" of the current netns; test_run never transmits, so no
#    frame leaves; an empty devmap makes bpf_redirect_map fail instead), and
#    every ARRAY_OF_MAPS / HASH_OF_MAPS the inner maps of $ORACLE_MAP_IN_MAP
#    ("outer:KEY=inner,...": KEY a u32, inner a map of the object, by pin name)
# 3. for each PKT_DIR/*.bin in name order (one raw frame per file):
#        bpftool -j prog run pinned ... data_in F data_out T data_size_out 4096 repeat 1
#    pinned to one CPU (the lowest CPU we may run on) with taskset, so per-CPU
#    map values always land in the same CPU slot.
# 4. bpftool -j map dump of every pinned map, after the last frame.
#
# Output (one JSON object):
#   {"program": "xdp_drop_count.o", "kernel": uname -r, "bpftool": version,
#    "cpu": N, "devmap_ifindex": 1 or null,
#    "runs": [{"packet": "00_ipv4_udp.bin", "len": 55, "retval": 1,
#              "data_out": "hex", "data_out_len": 55}, ...],
#    "maps": {"<kernel map name>": <bpftool -j map dump output>, ...},
#    "map_info": {"<kernel map name>": <bpftool -j map show output>, ...}}
# A frame the kernel refuses to run (e.g. shorter than 14 bytes) gets
# "retval": null, "error": "<bpftool error>", "data_out": null.
# Maps persist across the runs (same loaded program), in file order.
set -euo pipefail
shopt -s nullglob

if [ $# -ne 3 ]; then
	sed -n '2,30p' "$0" >&2
	exit 2
fi
PROG="$1"
PKT_DIR="$2"
OUT="$3"

if [ "$(id -u)" -ne 0 ]; then
	echo "kernel-oracle: needs root" >&2
	exit 77
fi
[ -f "$PROG" ] || { echo "no such object: $PROG" >&2; exit 2; }
[ -d "$PKT_DIR" ] || { echo "no such packet dir: $PKT_DIR" >&2; exit 2; }
if ! mountpoint -q /sys/fs/bpf; then
	mount -t bpf bpf /sys/fs/bpf
fi

PIN="/sys/fs/bpf/sluice_oracle_$$"
MAPDIR="/sys/fs/bpf/sluice_oracle_$$_maps"
WORK="$(mktemp -d /tmp/sluice-oracle.XXXXXX)"
cleanup() {
	rm -rf "$PIN"
	rm -rf "$MAPDIR"
	rm -rf "$WORK"
}
trap cleanup EXIT

CPU="$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')"
DEVMAP_IFINDEX="${ORACLE_DEVMAP_IFINDEX:-1}"

mkdir -p "$MAPDIR"
type_args=(type "${ORACLE_TYPE:-xdp}")
[ "${ORACLE_TYPE:-xdp}" = auto ] && type_args=()
if [ -n "${ORACLE_PROG:-}" ]; then
	load=(loadall "$PROG" "$PIN" "${type_args[@]}" pinmaps "$MAPDIR")
	RUN_PIN="$PIN/$ORACLE_PROG"
else
	RUN_PIN="$PIN"
	load=(load "$PROG" "$PIN" "${type_args[@]}" pinmaps "$MAPDIR")
fi
if ! bpftool prog "${load[@]}" >"$WORK/load.log" 2>&1; then
	echo "kernel-oracle: the kernel refused $PROG:" >&2
	cat "$WORK/load.log" >&2
	exit 1
fi

devmap_used=null
for m in "$MAPDIR"/*; do
	bpftool -j map show pinned "$m" >"$WORK/info_$(basename "$m").json"
	read -r mtype ksz vsz < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["type"], d["bytes_key"], d["bytes_value"])' "$WORK/info_$(basename "$m").json")
	case "$mtype" in
	devmap|devmap_hash)
		# key u32 0; value: u32 ifindex (+ u32 prog fd 0 for struct bpf_devmap_val)
		val="$(python3 -c 'import struct,sys; v=struct.pack("<I", int(sys.argv[1])) + bytes(int(sys.argv[2]) - 4); print(" ".join(str(b) for b in v))' "$DEVMAP_IFINDEX" "$vsz")"
		# shellcheck disable=SC2086
		bpftool map update pinned "$m" key 0 0 0 0 value $val
		devmap_used="$DEVMAP_IFINDEX"
		;;
	prog_array)
		# ORACLE_PROG_ARRAY="0=prog_a,1=prog_b": slot -> a program of the object (loadall pins
		# each program under $PIN by name).
		IFS=, read -ra slots <<<"${ORACLE_PROG_ARRAY:-}"
		for s in "${slots[@]}"; do
			[ -n "$s" ] || continue
			key="$(python3 -c 'import struct,sys; print(" ".join(str(b) for b in struct.pack("<I", int(sys.argv[1]))))' "${s%%=*}")"
			# shellcheck disable=SC2086
			bpftool map update pinned "$m" key $key value pinned "$PIN/${s#*=}"
		done
		;;
	array_of_maps|hash_of_maps)
		IFS=, read -ra slots <<<"${ORACLE_MAP_IN_MAP:-}"
		for s in "${slots[@]}"; do
			[ "${s%%:*}" = "$(basename "$m")" ] || continue
			s="${s#*:}"
			key="$(python3 -c 'import struct,sys; print(" ".join(str(b) for b in struct.pack("<I", int(sys.argv[1]))))' "${s%%=*}")"
			# shellcheck disable=SC2086
			bpftool map update pinned "$m" key $key value pinned "$MAPDIR/${s#*=}"
		done
		;;
	cpumap)
		# key u32 0 (CPU 0): value u32 qsize 192 (+ u32 prog fd 0 for struct bpf_cpumap_val)
		val="$(python3 -c 'import struct,sys; v=struct.pack("<I", 192) + bytes(int(sys.argv[1]) - 4); print(" ".join(str(b) for b in v))' "$vsz")"
		# shellcheck disable=SC2086
		bpftool map update pinned "$m" key 0 0 0 0 value $val
		;;
	esac
done

mkdir -p "$WORK/runs"
n=0
for f in "$PKT_DIR"/*.bin; do
	base="$(basename "$f")"
	idx="$(printf '%04d' "$n")"
	echo "$base" >"$WORK/runs/$idx.name"
	rm -f "$WORK/out.bin"
	if taskset -c "$CPU" bpftool -j prog run pinned "$RUN_PIN" data_in "$f" \
		data_out "$WORK/out.bin" data_size_out "${ORACLE_DATA_OUT:-4096}" repeat 1 >"$WORK/runs/$idx.json" 2>"$WORK/runs/$idx.err"; then
		cp "$WORK/out.bin" "$WORK/runs/$idx.out" 2>/dev/null || : >"$WORK/runs/$idx.out"
	fi
	n=$((n + 1))
done

for m in "$MAPDIR"/*; do
	if ! bpftool -j map dump pinned "$m" >"$WORK/dump_$(basename "$m").json" 2>"$WORK/dump.err"; then
		# A ring buffer has no entries to dump (bpftool refuses): record it as empty.
		grep -q '"type": *"ringbuf"' "$WORK/info_$(basename "$m").json" || { cat "$WORK/dump.err" >&2; exit 1; }
		echo '[]' >"$WORK/dump_$(basename "$m").json"
	fi
done

python3 - "$PROG" "$PKT_DIR" "$WORK" "$CPU" "$devmap_used" "$OUT" <<'PY'
import json, os, subprocess, sys
prog, pkt_dir, work, cpu, devmap, out = sys.argv[1:]
runs = []
rdir = os.path.join(work, "runs")
for name in sorted(f for f in os.listdir(rdir) if f.endswith(".name")):
    idx = name[:-5]
    pkt = open(os.path.join(rdir, name)).read().strip()
    data_in = open(os.path.join(pkt_dir, pkt), "rb").read()
    raw = open(os.path.join(rdir, idx + ".json")).read().strip()
    res = json.loads(raw) if raw else {}
    run = {"packet": pkt, "len": len(data_in)}
    if "retval" in res and os.path.exists(os.path.join(rdir, idx + ".out")):
        data = open(os.path.join(rdir, idx + ".out"), "rb").read()
        run.update(retval=res["retval"], data_out=data.hex(), data_out_len=len(data))
    else:
        err = res.get("error") or open(os.path.join(rdir, idx + ".err")).read().strip()
        run.update(retval=None, error=err, data_out=None)
    runs.append(run)
maps, info = {}, {}
# Outer maps hold kernel map ids: named by the inner map's name instead (ids differ per load).
names = {}
for f in sorted(os.listdir(work)):
    if f.startswith("info_"):
        i = json.load(open(os.path.join(work, f)))
        names[i["id"]] = i["name"]
for f in sorted(os.listdir(work)):
    if f.startswith("info_"):
        pin = f[5:-5]
        i = json.load(open(os.path.join(work, f)))
        i.pop("id", None); i.pop("btf_id", None); i.pop("pinned", None)
        i["pin"] = pin
        info[i["name"]] = i
        dump = json.load(open(os.path.join(work, "dump_" + pin + ".json")))
        if i.get("type") in ("array_of_maps", "hash_of_maps"):
            for e in dump:
                mid = e.pop("inner_map_id", None)
                if isinstance(e.get("value"), list):
                    mid = int.from_bytes(bytes(int(x, 16) for x in e.pop("value")), "little")
                e["inner_map"] = names.get(mid, "?")
        maps[i["name"]] = dump
ver = subprocess.run(["bpftool", "version"], capture_output=True, text=True).stdout.splitlines()[0]
doc = {
    "program": os.path.basename(prog),
    "kernel": os.uname().release,
    "bpftool": ver,
    "cpu": int(cpu),
    "devmap_ifindex": None if devmap == "null" else int(devmap),
    "runs": runs,
    "maps": maps,
    "map_info": info,
}
with open(out, "w") as f:
    json.dump(doc, f, indent=1, sort_keys=False)
    f.write("\n")
print("%s: %d runs, retvals %s, maps %s -> %s" % (
    doc["program"], len(runs), "".join("x" if r["retval"] is None else str(r["retval"]) for r in runs),
    ",".join(sorted(maps)), out))
PY
