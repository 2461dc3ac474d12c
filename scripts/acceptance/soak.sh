#!/usr/bin/env bash
# Issue 10 acceptance: a 2-minute soak under fault injection passes (no RSS growth after the
# warm-up, no leaked buffer, the ledger balanced every second).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp); trap 'rm -f "$out"' EXIT
scripts/soak 120 | tee "$out" | tail -n 5
grep -q "^soak: ok:" "$out"
echo "soak acceptance: ok"
