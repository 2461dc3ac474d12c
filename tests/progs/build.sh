#!/bin/sh
# Rebuilds the afxdp tests' XDP objects next to their sources. Needs clang, linux-libc-dev
# and libbpf-dev; the .o files are committed, so `cargo test` needs no C toolchain.
set -eu
cd "$(dirname "$0")"
ARCH_INC=/usr/include/$(uname -m)-linux-gnu
for src in *.c; do
	${CLANG:-clang} -O2 -g -target bpf -Wall -I"$ARCH_INC" -fdebug-compilation-dir=. -fdebug-prefix-map="$(pwd)"=. -fno-ident -c "$src" -o "${src%.c}.o"
done
