#!/usr/bin/env bash
# Build every XDP object of the sluice test corpus with stock clang.
#
#   bpf/build.sh             build into bpf/obj/ and bpf/negative/obj/
#   bpf/build.sh --out DIR   build into DIR/obj and DIR/negative/obj instead
#   bpf/build.sh --check     build into a temp dir and compare with the
#                            committed objects: exit 1 if anything fails to
#                            compile; if the clang version equals the one
#                            recorded in obj/CLANG_VERSION, also exit 1 on any
#                            byte difference (otherwise only warn).
#
# Reproducibility: the build runs inside bpf/ with relative source paths and
# -fdebug-compilation-dir=. / -fdebug-prefix-map, so neither the checkout path
# nor the time leak into DWARF/BTF; the same clang gives the same bytes.
set -euo pipefail
shopt -s nullglob

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CLANG="${CLANG:-clang}"
MULTIARCH_INC="/usr/include/$(uname -m)-linux-gnu"
CFLAGS=(-O2 -g -target bpf -Wall -Werror -Wno-unused-variable
	-Iinclude -I"$MULTIARCH_INC"
	-fdebug-compilation-dir=. -fdebug-prefix-map="$HERE"=.
	-fno-ident)

mode=build
OUT="$HERE"
while [ $# -gt 0 ]; do
	case "$1" in
	--check) mode=check; shift ;;
	--out) OUT="$2"; shift 2 ;;
	-h|--help) sed -n '2,14p' "$0"; exit 0 ;;
	*) echo "unknown argument: $1" >&2; exit 2 ;;
	esac
done

if [ "$mode" = check ]; then
	TMP="$(mktemp -d /tmp/sluice-bpf-build.XXXXXX)"
	trap 'rm -rf "$TMP"' EXIT
	"$0" --out "$TMP"
	same_clang=0
	if [ "$("$CLANG" --version | head -n1)" = "$(cat "$HERE/obj/CLANG_VERSION" 2>/dev/null)" ]; then
		same_clang=1
	fi
	diffs=0
	for f in "$TMP"/obj/*.o "$TMP"/negative/obj/*.o; do
		rel="${f#"$TMP"/}"
		if [ ! -f "$HERE/$rel" ]; then
			echo "MISSING committed object: bpf/$rel"; diffs=$((diffs + 1))
		elif ! cmp -s "$f" "$HERE/$rel"; then
			echo "DIFFERS from committed: bpf/$rel"; diffs=$((diffs + 1))
		fi
	done
	if [ "$diffs" -eq 0 ]; then
		echo "build check: all objects compile and match the committed bytes"
		exit 0
	fi
	if [ "$same_clang" -eq 1 ]; then
		echo "build check: $diffs object(s) differ with the same clang: rebuild with bpf/build.sh and commit" >&2
		exit 1
	fi
	echo "build check: objects compile; $diffs differ but clang differs from obj/CLANG_VERSION (not an error)"
	exit 0
fi

cd "$HERE"
mkdir -p "$OUT/obj" "$OUT/negative/obj"

cc() { # cc OUT.o SRC.c [extra flags...]
	local out="$1" src="$2"
	shift 2
	"$CLANG" "${CFLAGS[@]}" "$@" -c "$src" -o "$out"
}

# Positive corpus: every object here must load in the kernel, except the
# legacy-map one (libbpf >= 1.0 rejects SEC("maps")).
for p in xdp_drop_count xdp_macswap_tx xdp_proto_count xdp_ipip_encap \
	xdp_lru_ratelimit xdp_devmap_redirect xdp_ctx_probe xdp_legacy_globals \
	xdp_mixed_types xdp_legacy_sections xdp_unknown_action xdp_vlan_push_stale xdp_events \
	xdp_frags_parse xdp_cpumap_redirect xdp_tail_call xdp_tail_call_subprog xdp_ringbuf_reserve xdp_map_in_map xdp_big_arrays \
	xdp_rodata_config; do
	cc "$OUT/obj/$p.o" "$p.c"
done
cc "$OUT/obj/xdp_globals.o" xdp_legacy_globals.c -DSLUICE_BTF_MAPS
cc "$OUT/obj/xdp_tail_call_static.o" xdp_tail_call.c -DSTATIC_SLOTS
cc "$OUT/obj/xdp_bench_drop_notouch.o" xdp_bench.c -DBENCH_ACTION=XDP_DROP -DBENCH_TOUCH=0
cc "$OUT/obj/xdp_bench_drop_read.o"    xdp_bench.c -DBENCH_ACTION=XDP_DROP -DBENCH_TOUCH=1
cc "$OUT/obj/xdp_bench_tx_notouch.o"   xdp_bench.c -DBENCH_ACTION=XDP_TX   -DBENCH_TOUCH=0
cc "$OUT/obj/xdp_bench_tx_read.o"      xdp_bench.c -DBENCH_ACTION=XDP_TX   -DBENCH_TOUCH=1

# Negative corpus: compiles, but the kernel verifier must reject each one.
for src in negative/*.c; do
	[ -e "$src" ] || continue
	n="$(basename "$src" .c)"
	cc "$OUT/negative/obj/$n.o" "$src" -Wno-error
done

"$CLANG" --version | head -n1 > "$OUT/obj/CLANG_VERSION"
pos=("$OUT"/obj/*.o); neg=("$OUT"/negative/obj/*.o)
echo "built ${#pos[@]} positive and ${#neg[@]} negative objects into $OUT"
