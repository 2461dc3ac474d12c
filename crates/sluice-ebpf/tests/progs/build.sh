#!/bin/sh
# Rebuilds the test objects next to their sources. Needs clang, linux-libc-dev and libbpf-dev:
#   apt-get install -y clang llvm libbpf-dev
# The .o files are committed, so `cargo test` does not need clang. The build is reproducible
# (no absolute paths or compiler ident in the objects): `./build.sh --check` rebuilds into a
# temporary directory and compares with the committed objects (built with Debian clang 14.0.6).
set -eu
cd "$(dirname "$0")"
CLANG=${CLANG:-clang}
ARCH_INC=/usr/include/$(uname -m)-linux-gnu
FLAGS="-O2 -g -target bpf -Wall -I$ARCH_INC -fdebug-compilation-dir=. -fdebug-prefix-map=$(pwd)=. -fno-ident"
OUT=.
if [ "${1:-}" = "--check" ]; then
	OUT=$(mktemp -d)
	trap 'rm -rf "$OUT"' EXIT
fi
for src in *.c; do
	obj=${src%.c}.o
	echo "  CC $obj"
	# shellcheck disable=SC2086
	$CLANG $FLAGS -c "$src" -o "$OUT/$obj"
done
if [ "$OUT" != . ]; then
	status=0
	for src in *.c; do
		obj=${src%.c}.o
		if ! cmp -s "$obj" "$OUT/$obj"; then
			echo "differs: $obj (rebuild with $0)"
			status=1
		fi
	done
	exit $status
fi
