#!/usr/bin/env python3
"""Compare two oracle JSON documents (kernel vs. kernel, or kernel vs. sluice).

    bpf/oracle-compare.py EXPECTED.json ACTUAL.json [--show]

Both files have the format written by bpf/kernel-oracle.sh:
    {"program": ..., "runs": [{"packet", "retval", "data_out", ...}],
     "maps": {"<name>": <bpftool -j map dump output>}}
Exit 0 when they agree after normalisation, 1 otherwise (differences printed).
--show prints the normalised form of ACTUAL instead of comparing.

What must match exactly:
  * the sequence of runs: packet name, retval, data_out (hex, after
    adjust_head/tail; null with an "error" for frames the kernel refused).
  * every map's entries, compared on the RAW bytes ("key"/"value" byte lists),
    never on bpftool's BTF "formatted" rendering (a sluice dump need not
    carry BTF), as an unordered set keyed by key (hash/LRU dump order follows
    the kernel's buckets, which sluice need not reproduce).
Normalisation:
  * per-CPU maps ("values": [{"cpu", "value"}]): the kernel dump lists every
    possible CPU and the oracle pins the runs to one CPU; compared as the
    element-wise sum over CPUs of the value read as little-endian u64 lanes
    (value_size % 8 == 0), otherwise as the sorted list of non-zero per-CPU
    values. So the CPU count and the CPU used do not matter.
  * entries whose value is {"error": ...} (an empty DEVMAP slot: bpftool shows
    "No such file or directory") count as absent.
  * internal maps are matched by section: the kernel names them
    "<first 8 chars of the object name>.bss" (".data", ".rodata", ...), so
    "xdp_glob.bss" and "xdp_lega.bss" both become ".bss".
  * time-dependent bytes are masked per map name (VOLATILE below): the LRU
    rate limiter's first_seen_ns (bytes 0..7 of each value) comes from
    bpf_ktime_get_ns and differs between any two runs; only "non-zero" is
    required of it.
  * ARRAY / PERCPU_ARRAY slots (by either side's map_info "type") whose value is
    zero count as absent: sluice dumps only non-zero array slots by default.
  * maps of maps: an entry names its inner map ("inner_map"; the kernel oracle
    turns bpftool's inner map id into the inner map's name).
Ignored: "kernel", "bpftool", "cpu", "map_info" (beyond the types above), "len"/"data_out_len" (implied
by data_in/data_out), and the top-level "program" name.
"""
import json
import re
import sys

# map name -> list of (offset, length) byte ranges of the value to mask
VOLATILE = {"src_budget": [(0, 8)]}


def norm_name(name):
    m = re.match(r"^.{0,8}(\.(bss|data|rodata|kconfig)(\..*)?)$", name)
    return m.group(1) if m else name


def hexbytes(lst):
    return bytes(int(x, 16) for x in lst)


def norm_value(name, raw):
    raw = bytearray(raw)
    for off, ln in VOLATILE.get(name, []):
        seg = raw[off:off + ln]
        raw[off:off + ln] = b"\x01" * len(seg) if any(seg) else b"\x00" * len(seg)
    return raw.hex()


def norm_map(name, dump):
    out = {}
    for e in dump:
        key = hexbytes(e["key"]).hex() if "key" in e else "-"
        if "values" in e:  # per-CPU
            vals = [hexbytes(v["value"]) for v in e["values"] if isinstance(v.get("value"), list)]
            size = len(vals[0]) if vals else 0
            if size and size % 8 == 0:
                lanes = [0] * (size // 8)
                for v in vals:
                    for i in range(len(lanes)):
                        lanes[i] = (lanes[i] + int.from_bytes(v[8 * i:8 * i + 8], "little")) % (1 << 64)
                out[key] = "percpu-sum:" + norm_value(name, b"".join(x.to_bytes(8, "little") for x in lanes))
            else:
                out[key] = "percpu:" + ",".join(sorted(norm_value(name, v) for v in vals if any(v)))
        elif "inner_map" in e:  # ARRAY_OF_MAPS / HASH_OF_MAPS: the inner map by name
            out[key] = "map:" + e["inner_map"]
        elif isinstance(e.get("value"), list):
            out[key] = norm_value(name, hexbytes(e["value"]))
        # else: {"error": ...} -> absent
    return out


def prog_arrays_of(doc):
    """Maps the kernel reports as PROG_ARRAY (bpftool's map_info; sluice's JSON has none)."""
    return {norm_name(n) for n, i in (doc.get("map_info") or {}).items() if isinstance(i, dict) and i.get("type") == "prog_array"}


def arrays_of(doc):
    """Maps reported as ARRAY / PERCPU_ARRAY (map_info "type"; bpftool's or sluice's)."""
    return {norm_name(n) for n, i in (doc.get("map_info") or {}).items()
            if isinstance(i, dict) and i.get("type") in ("array", "percpu_array")}


def is_zero(v):
    return not v.replace("percpu-sum:", "").replace("percpu:", "").strip("0")


def normalise(doc, prog_arrays=frozenset(), arrays=frozenset()):
    runs = []
    for r in doc.get("runs", []):
        runs.append({"packet": r.get("packet"), "retval": r.get("retval"),
                     "data_out": r.get("data_out")})
    maps = {}
    for name, dump in (doc.get("maps") or {}).items():
        n = norm_name(name)
        maps[n] = norm_map(n, dump)
        # A PROG_ARRAY holds kernel program ids on one side and object program indexes on
        # the other: only which slots are filled compares (the runs show where calls went).
        if n in prog_arrays:
            maps[n] = {k: "filled" for k in maps[n]}
        # An array slot holding zero is the same as one left out (sluice dumps only the
        # non-zero slots of arrays by default, bpftool every slot).
        if n in arrays:
            maps[n] = {k: v for k, v in maps[n].items() if not is_zero(v)}
    return {"runs": runs, "maps": maps}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--show" in sys.argv:
        print(json.dumps(normalise(json.load(open(args[-1]))), indent=1))
        return 0
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    da, db = json.load(open(args[0])), json.load(open(args[1]))
    progs = prog_arrays_of(da) | prog_arrays_of(db)
    arrays = arrays_of(da) | arrays_of(db)
    a, b = normalise(da, progs, arrays), normalise(db, progs, arrays)
    diffs = []
    if len(a["runs"]) != len(b["runs"]):
        diffs.append("number of runs: %d vs %d" % (len(a["runs"]), len(b["runs"])))
    for ra, rb in zip(a["runs"], b["runs"]):
        for k in ("packet", "retval", "data_out"):
            if ra[k] != rb[k]:
                diffs.append("run %s: %s %r vs %r" % (ra["packet"], k, ra[k], rb[k]))
    for name in sorted(set(a["maps"]) | set(b["maps"])):
        ma, mb = a["maps"].get(name), b["maps"].get(name)
        if ma is None or mb is None:
            diffs.append("map %s only in %s" % (name, args[0] if mb is None else args[1]))
            continue
        for key in sorted(set(ma) | set(mb)):
            if ma.get(key) != mb.get(key):
                diffs.append("map %s key %s: %s vs %s" % (name, key, ma.get(key), mb.get(key)))
    for d in diffs:
        print(d)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
