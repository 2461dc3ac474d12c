#!/usr/bin/env bash
# All checks of the bpf/ corpus, for CI (root for the kernel parts):
#   1. bpf/build.sh --check        objects still compile (and match the
#                                  committed bytes when clang is the same)
#   2. make-packets.py determinism the committed bpf/packets/ + packets.pcap
#                                  are what the generator produces
#   3. kernel-load-test.sh         positives load, negatives are rejected with
#                                  the expected verifier messages
#   4. oracle-all.sh + compare     fresh kernel runs agree with bpf/oracle/*.json
#   5. veth-attach-test.sh         native attach on a veth pair in two netns
# Steps 3-5 are skipped (not failed) when not root or when bpftool is missing.
#
#   scripts/bpf-check.sh [--no-kernel]
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BPF="$ROOT/bpf"
TMP="$(mktemp -d /tmp/sluice-bpf-check.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
fail=0
step() { echo; echo "=== $*"; }

step "1. build check"
if command -v clang >/dev/null; then
	"$BPF/build.sh" --check || fail=1
else
	echo "clang not installed: skipped (committed objects are used as they are)"
fi

step "2. packet set determinism"
python3 "$BPF/make-packets.py" "$TMP/packets" "$TMP/packets.pcap" >/dev/null
if diff -r "$TMP/packets" "$BPF/packets" >/dev/null && cmp -s "$TMP/packets.pcap" "$BPF/packets.pcap"; then
	echo "ok: bpf/packets/ and bpf/packets.pcap match the generator"
else
	echo "FAIL: regenerate with bpf/make-packets.py"; fail=1
fi

if [ "${1:-}" = "--no-kernel" ] || [ "$(id -u)" -ne 0 ] || ! command -v bpftool >/dev/null; then
	step "3-5 skipped (need root and bpftool)"
else
	step "3. kernel load test"
	"$BPF/kernel-load-test.sh" || fail=1

	step "4. kernel oracle vs committed bpf/oracle/"
	if "$BPF/oracle-all.sh" "$TMP/oracle" "$BPF/packets"; then
		for f in "$BPF"/oracle/*.json; do
			n="$(basename "$f")"
			if "$BPF/oracle-compare.py" "$f" "$TMP/oracle/$n"; then
				echo "ok: $n"
			else
				echo "FAIL: $n differs"; fail=1
			fi
		done
	else
		fail=1
	fi

	step "5. native attach on veth"
	"$BPF/veth-attach-test.sh" || fail=1
fi

echo
if [ "$fail" -ne 0 ]; then echo "bpf-check: FAILED"; exit 1; fi
echo "bpf-check: all passed"
