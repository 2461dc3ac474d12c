#!/usr/bin/env bash
# Issue 10 acceptance: a short fuzz run of every target (15 s each by default,
# SLUICE_CI_FUZZ_SECONDS). By default the coverage-less mutation fuzzer of
# tests/fuzz_corpus.rs (`mutate`), which reuses the release test build: building the
# libFuzzer binaries (nightly, instrumented, every dependency again) takes longer than
# CI's budget on 2 cores. SLUICE_CI_FUZZ=libfuzzer runs scripts/fuzz instead. The
# committed corpora themselves are replayed by `cargo test` (tests/fuzz_corpus.rs).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${SLUICE_CI_FUZZ_SECONDS:-15}
if [ "${SLUICE_CI_FUZZ:-mutate}" = libfuzzer ]; then
    exec scripts/fuzz all "$secs"
fi
cargo test --release --test fuzz_corpus --no-run -q 2>/dev/null
# Scratch files (each input, pcap files) on tmpfs: rewriting a file on ext4 costs ~2 ms.
[ -w /dev/shm ] && export TMPDIR=/dev/shm
for t in wire rx_packet rx_list config pcap ebpf_loader; do
    SLUICE_FUZZ_TARGET=$t SLUICE_FUZZ_SECONDS=$secs cargo test --release -q --test fuzz_corpus -- --ignored mutate --nocapture 2>&1 |
        grep -E '^fuzz|panicked|FAILED|error' || { echo "fuzz: $t failed" >&2; exit 1; }
done
