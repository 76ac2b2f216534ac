#!/usr/bin/env bash
# What tracing (WEFT_TRACE) and counters (WEFT_STATS) cost: weft_bench's
# time per operation with both off, with WEFT_TRACE set, and with
# WEFT_STATS=1, from separate mpirun jobs run in alternation (off, trace,
# stats, off, trace, ...), so that a change in the machine's load hits all
# three alike. Prints the median of each and the medians' ratios to off.
#   benchmarks/obs_cost.sh [-np N] [-r rounds] [-n iterations] [-c collective]
#                          [-e VAR=VALUE]... [sizes...]
# -e adds a setting to every job (e.g. -e WEFT_SHM=no: between processes
# through UCX, where every operation is a schedule and the trace has steps).
# Example: benchmarks/obs_cost.sh -np 2 -r 5 -n 5000 8 1m
set -euo pipefail
np=2 rounds=5 iters="" coll=allreduce
extra=()
while [ $# -gt 0 ]; do
    case $1 in
        -np) np=$2; shift 2 ;;
        -r) rounds=$2; shift 2 ;;
        -n) iters=$2; shift 2 ;;
        -c) coll=$2; shift 2 ;;
        -e) extra+=(-x "$2"); shift 2 ;;
        *) break ;;
    esac
done
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(8 1m)
bench=$(dirname "$0")/weft_bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
oversub=()
[ "$np" -gt "$(nproc)" ] && oversub=(--oversubscribe)
dir=$(mktemp -d /tmp/weft_obs_cost.XXXXXX)
trap 'rm -rf "$dir"' EXIT
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

job() { # settings... : weft_us of one mpirun job
    local s=$1
    shift
    timeout -s KILL 600 mpirun -np "$np" "${oversub[@]}" --bind-to none \
        --mca mpi_yield_when_idle 1 "${extra[@]}" "$@" \
        "$bench" --format csv -b "$s" -e "$s" ${iters:+-n "$iters"} "$coll" |
        grep -E '^[a-z_]+,[0-9]' | cut -d, -f7
}

printf "# %s, %d ranks, %d rounds of (off, trace, stats) mpirun jobs%s; load before: %s\n" \
    "$coll" "$np" "$rounds" "${iters:+, $iters iterations}" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-8s %10s %10s %10s %12s %12s   %s\n" bytes off_us trace_us stats_us trace/off stats/off \
    "each job's off, trace, stats (us)"
for s in "${sizes[@]}"; do
    off=() trace=() stats=() all=""
    for r in $(seq "$rounds"); do
        off+=("$(job "$s" -x WEFT_STATS=no)")
        trace+=("$(job "$s" -x "WEFT_TRACE=$dir/t-%r.json")")
        stats+=("$(job "$s" -x WEFT_STATS=1)")
        all+=" ${off[-1]}/${trace[-1]}/${stats[-1]}"
        rm -f "$dir"/t-*
    done
    mo=$(printf "%s\n" "${off[@]}" | median)
    mt=$(printf "%s\n" "${trace[@]}" | median)
    ms=$(printf "%s\n" "${stats[@]}" | median)
    printf "%-8s %10s %10s %10s %12.3f %12.3f  %s\n" "$s" "$mo" "$mt" "$ms" \
        "$(echo "$mt / $mo" | bc -l)" "$(echo "$ms / $mo" | bc -l)" "$all"
done
printf "# load after: %s\n" "$(cut -d' ' -f1-3 /proc/loadavg)"
