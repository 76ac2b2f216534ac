#!/usr/bin/env bash
# What tracing (WEFT_TRACE) and counters (WEFT_STATS) cost: weft_bench's
# time per operation with both off, with WEFT_TRACE set, and with
# WEFT_STATS=1, from separate mpirun jobs run in alternation (off, trace,
# stats, off, trace, ...), so that a change in the machine's load hits all
# three alike. Prints the median of each and the medians' ratios to off.
#   benchmarks/obs_cost.sh [-np N] [-r rounds] [-n iterations] [-c collective]
#                          [-e VAR=VALUE]... [-b BASE_BENCH] [sizes...]
# -e adds a setting to every job (e.g. -e WEFT_SHM=no: between processes
# through UCX, where every operation is a schedule and the trace has steps).
# -b adds a fourth job to each round: BASE_BENCH, the weft_bench of a build
# without these hooks (e.g. the commit before them), to show what "off" costs.
# Example: benchmarks/obs_cost.sh -np 2 -r 5 -n 5000 8 1m
set -euo pipefail
np=2 rounds=5 iters="" coll=allreduce base=""
extra=()
while [ $# -gt 0 ]; do
    case $1 in
        -np) np=$2; shift 2 ;;
        -r) rounds=$2; shift 2 ;;
        -n) iters=$2; shift 2 ;;
        -c) coll=$2; shift 2 ;;
        -e) extra+=(-x "$2"); shift 2 ;;
        -b) base=$2; shift 2 ;;
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

job() { # bench size settings... : weft_us of one mpirun job
    local b=$1 s=$2
    shift 2
    timeout -s KILL 600 mpirun -np "$np" "${oversub[@]}" --bind-to none \
        --mca mpi_yield_when_idle 1 "${extra[@]}" "$@" \
        "$b" --format csv -b "$s" -e "$s" ${iters:+-n "$iters"} "$coll" |
        grep -E '^[a-z_]+,[0-9]' | cut -d, -f7
}

printf "# %s, %d ranks, %d rounds of (%soff, trace, stats) mpirun jobs%s%s; load before: %s\n" \
    "$coll" "$np" "$rounds" "${base:+base, }" "${iters:+, $iters iterations}" \
    "${extra[*]:+, ${extra[*]}}" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-8s %10s %10s %10s %10s %9s %9s %9s   %s\n" bytes base_us off_us trace_us stats_us \
    off/base trace/off stats/off "each round's ${base:+base/}off/trace/stats (us)"
for s in "${sizes[@]}"; do
    bases=() off=() trace=() stats=() all=""
    for r in $(seq "$rounds"); do
        [ -z "$base" ] || bases+=("$(job "$base" "$s")")
        off+=("$(job "$bench" "$s" -x WEFT_STATS=no)")
        trace+=("$(job "$bench" "$s" -x "WEFT_TRACE=$dir/t-%r.json")")
        stats+=("$(job "$bench" "$s" -x WEFT_STATS=1)")
        all+=" ${base:+${bases[-1]}/}${off[-1]}/${trace[-1]}/${stats[-1]}"
        rm -f "$dir"/t-*
    done
    mb=-
    [ -z "$base" ] || mb=$(printf "%s\n" "${bases[@]}" | median)
    mo=$(printf "%s\n" "${off[@]}" | median)
    mt=$(printf "%s\n" "${trace[@]}" | median)
    ms=$(printf "%s\n" "${stats[@]}" | median)
    ob=-
    [ -z "$base" ] || ob=$(printf "%.3f" "$(echo "$mo / $mb" | bc -l)")
    printf "%-8s %10s %10s %10s %10s %9s %9.3f %9.3f  %s\n" "$s" "$mb" "$mo" "$mt" "$ms" "$ob" \
        "$(echo "$mt / $mo" | bc -l)" "$(echo "$ms / $mo" | bc -l)" "$all"
done
printf "# load after: %s\n" "$(cut -d' ' -f1-3 /proc/loadavg)"
