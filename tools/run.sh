#!/usr/bin/env bash
# The main job: build if needed, then run weft's collectives among 8
# in-process ranks and print algorithm, size, time and correctness.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
exec ./benchmarks/weft_thread_bench -r "${WEFT_RANKS:-8}" "$@"
