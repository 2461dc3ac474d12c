#!/usr/bin/env bash
# Issue 10 acceptance: the buffer pool, the eBPF maps/interpreter and the JIT on the
# repository's objects under valgrind memcheck, clean (scripts/memcheck --quick, ~3 min;
# the full run adds jit_diff, jit_inline and objects).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec scripts/memcheck --quick
