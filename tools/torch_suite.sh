#!/usr/bin/env bash
# torch's own distributed test suite (distributed_test.py, shipped in the
# torch wheel) against the backend "weft": tests/torch/torch_suite.py with
# pytest at WORLD_SIZE 2 (or $1), on the library built in this tree. Tests
# that apply to a CPU backend run; the suite itself skips the rest (GPU,
# NCCL-only, gloo-only) and the summary lists every skip's
# reason. Ends with "torch-suite: N passed, N failed, N skipped" (tools/test.sh
# counts it). Extra arguments go to pytest (e.g. -k all_reduce).
set -uo pipefail
cd "$(dirname "$0")/.."
world=${1:-2}
shift || true
top=$(pwd)
bash tools/build.sh || { echo "torch-suite: 0 passed, 1 failed (build)"; exit 1; }
python=$(bash tools/torch_env.sh) || { echo "torch-suite: 0 passed, 1 failed (no torch venv)"; exit 1; }
mkdir -p tests/torch
ext=$(top_builddir=$top top_srcdir=$top bash tests/torch/build_ext.sh "$python") ||
    { echo "torch-suite: 0 passed, 1 failed (extension build)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=torch-suite.log
PYTHONPATH="$ext:$top/tests/torch" PYTHONDONTWRITEBYTECODE=1 BACKEND=weft WORLD_SIZE=$world \
    TEMP_DIR=$tmp timeout -k 30 3000 "$python" -m pytest -p no:cacheprovider -q -rfEs \
    -o console_output_style=classic tests/torch/torch_suite.py "$@" >"$out" 2>&1
rc=$?
grep -E '^(FAILED|ERROR) ' "$out" | head -n 50
# the skip reasons, counted
grep -E '^SKIPPED ' "$out" | sed -E 's/^SKIPPED \[[0-9]+\] [^:]+:[0-9]+: //' | sort | uniq -c |
    sort -rn | head -n 30
last=$(grep -E '[0-9]+ (passed|failed|skipped)' "$out" | tail -n 1)
echo "$last"
count() { grep -oE "[0-9]+ $1" <<<"$last" | grep -oE '^[0-9]+' || echo 0; }
p=$(count passed)
f=$(( $(count failed) + $(count error) ))
s=$(count skipped)
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
echo "torch-suite: $p passed, $f failed, $s skipped (world size $world, log in $out)"
[ "$f" -eq 0 ]
