#!/usr/bin/env bash
# weft_info --explain says how device buffers take the collective: one
# device task on the stream inside a node (the one-shot or two-shot form of a
# shared-memory allreduce by size; CUDA: the progress thread), the progress
# thread across nodes (a small collective through host memory once) or with
# WEFT_DEVICE_TASK=no. And how the hierarchical row's sliced form runs: in
# pipelined chunks (WEFT_HIER_PIPELINE) for the collectives that have them.
set -u
: "${top_builddir:?run through make check}"
info="$top_builddir/tools/weft_info"
failures=0

expect_in() { # lines (a pattern), label, pattern one of them must match, weft_info arguments...
    local lines=$1 label=$2 pattern=$3 out
    shift 3
    if ! out=$("$info" --explain "$@" 2>&1); then
        echo "FAIL: $label: weft_info --explain $* failed: $out"
        failures=$((failures + 1))
    elif ! grep -q -- "$pattern" <<<"$(grep -- "$lines" <<<"$out")"; then
        echo "FAIL: $label: no line '$lines' matching '$pattern' in:"
        echo "$out"
        failures=$((failures + 1))
    fi
}
expect() { expect_in '^device buffers:' "$@"; }    # the device line
expect_hier() { expect_in '^  hier ' "$@"; }       # the hierarchical row

unset WEFT_DEVICE_TASK WEFT_TUNE WEFT_SHM WEFT_SHM_SMALL WEFT_DEVICE_STAGE
expect "one node, small" "shm as one device task on the stream.*one-shot" allreduce 8 2
expect "one node, large" "shm as one device task on the stream.*two-shot" allreduce 4m 2
expect "one node, CUDA" "CUDA: weft's progress thread, the peers' buffers mapped through IPC" \
    bcast 1m 4
expect "reduce_scatter: no IPC" "one device task on the stream.*CUDA: weft's progress thread$" \
    reduce_scatter 64k 2
expect "two nodes, small allreduce" "through host memory once" allreduce 8 4 2
expect "two nodes, large allreduce" "progress thread drives it, each message staged" \
    allreduce 1m 4 2
expect "two nodes, small allgather" "through host memory once" allgather 8 4 2
expect "two nodes, allgatherv" "progress thread drives it, each message staged" allgatherv 8 4 2
WEFT_DEVICE_STAGE=0 expect "WEFT_DEVICE_STAGE=0" "each message staged" allreduce 8 4 2
WEFT_DEVICE_TASK=no expect "tasks off" "progress thread (WEFT_DEVICE_TASK=no)" allreduce 8 2
WEFT_SHM_SMALL=1 expect "WEFT_SHM_SMALL" "two-shot" allreduce 8 2

export WEFT_HIER_LEADER=0 WEFT_HIER_PIPELINE=1m
for coll in allreduce bcast reduce allgather reduce_scatter; do
    expect_hier "$coll in chunks" "(sliced, pipelined in 16 chunks" "$coll" 16m 8 2
done
expect_hier "alltoall: no chunks" "^  hier  *[0-9.]* us$" alltoall 16m 8 2
WEFT_HIER_PIPELINE=0 expect_hier "WEFT_HIER_PIPELINE=0" "(sliced: a slice on every rail" bcast 16m 8 2
unset WEFT_HIER_LEADER WEFT_HIER_PIPELINE
echo "$failures failed"
[ "$failures" -eq 0 ]
