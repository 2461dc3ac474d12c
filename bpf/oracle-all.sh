#!/usr/bin/env bash
# Run the kernel oracle for every kernel-loadable object in bpf/obj/ on the
# packet set, writing OUT_DIR/<object>.json (default: bpf/oracle/, the
# committed reference outputs). Root required.
#
#   bpf/oracle-all.sh [OUT_DIR] [PKT_DIR]
#
# xdp_legacy_globals.o is skipped (libbpf >= 1.0 cannot load legacy maps); its
# program is instruction-for-instruction the same as xdp_globals.o, so a sluice
# run of it must match oracle/xdp_globals.json (oracle-compare.py matches the
# internal maps by section, so xdp_lega.bss == xdp_glob.bss).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT_DIR="${1:-$HERE/oracle}"
PKT_DIR="${2:-$HERE/packets}"
mkdir -p "$OUT_DIR"
for obj in "$HERE"/obj/*.o; do
	name="$(basename "$obj" .o)"
	[ "$name" = xdp_legacy_globals ] && continue
	# 50M array slots: bpftool would dump them all (its memory is measured in BENCHMARKS.md).
	[ "$name" = xdp_big_arrays ] && continue
	case "$name" in
	# XDP next to tc / tracing programs. libbpf 1.x types `xdp/pass` by no rule (only
	# xdp, xdp.frags, xdp/devmap, xdp/cpumap): all load as `type xdp` (the tc and
	# tracing programs here do not touch their context, so they pass as XDP too).
	xdp_mixed_types) env=(ORACLE_TYPE=xdp ORACLE_PROG=xdp_pass_count) ;;
	# Legacy section names: loaded as bpftool `type xdp`; the echo program is run.
	xdp_legacy_sections) env=(ORACLE_TYPE=xdp ORACLE_PROG=xdp_icmp_echo_func) ;;
	# Tail calls: the entry program runs; the PROG_ARRAY's slots are filled by name.
	xdp_tail_call) env=(ORACLE_PROG=xdp_tail_entry ORACLE_PROG_ARRAY=0=xdp_tail_v4,1=xdp_tail_v6,2=xdp_tail_loop) ;;
	# The same with the slots filled in the object (libbpf's static `.values` initialisation).
	xdp_tail_call_static) env=(ORACLE_PROG=xdp_tail_entry) ;;
	# Tail calls from a subprogram, which return to the subprogram's caller.
	xdp_tail_call_subprog) env=(ORACLE_PROG=xdp_sub_entry ORACLE_PROG_ARRAY=0=xdp_sub_v4,1=xdp_sub_v6,2=xdp_sub_nest) ;;
	# Map-in-map: inner maps inserted from user space, as sluice gets them with --map.
	xdp_map_in_map) env=(ORACLE_MAP_IN_MAP=by_class:2=class_arp,flows_by_cpu:1=flows_cpu1,by_l4:6=l4_tcp) ;;
	*) env=() ;;
	esac
	env "${env[@]}" "$HERE/kernel-oracle.sh" "$obj" "$PKT_DIR" "$OUT_DIR/$name.json"
done
