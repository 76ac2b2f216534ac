#!/usr/bin/env bash
# Median weft/MPI time ratios of one collective at chosen sizes, from
# several separate mpirun jobs (each job alternates weft and the MPI
# library's collective on the same buffers).
#   benchmarks/vs_mpi.sh [-np N] [-r runs] [-c collective] [sizes...]
# Example: benchmarks/vs_mpi.sh -np 2 -r 5 8 8k 1m 64m
set -euo pipefail
np=2 runs=5 coll=allreduce
while [ $# -gt 0 ]; do
    case $1 in
        -np) np=$2; shift 2 ;;
        -r) runs=$2; shift 2 ;;
        -c) coll=$2; shift 2 ;;
        *) break ;;
    esac
done
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(8 8k 1m 64m)
bench=$(dirname "$0")/weft_bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
oversub=()
[ "$np" -gt "$(nproc)" ] && oversub=(--oversubscribe)
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf "# %s, %d ranks, median of %d mpirun jobs\n" "$coll" "$np" "$runs"
printf "%-10s %14s %14s %10s\n" bytes weft_us mpi_us weft/mpi
for s in "${sizes[@]}"; do
    out=$(for r in $(seq "$runs"); do
        timeout -k 5 600 mpirun -np "$np" "${oversub[@]}" --bind-to none --mca mpi_yield_when_idle 1 \
            "$bench" --vs-mpi --format csv -b "$s" -e "$s" "$coll" | grep -E '^[a-z_]+,[0-9]'
    done)
    w=$(cut -d, -f7 <<<"$out" | median)
    m=$(cut -d, -f11 <<<"$out" | median)
    ratio=$(cut -d, -f13 <<<"$out" | median)
    printf "%-10s %14s %14s %10s\n" "$(cut -d, -f3 <<<"$out" | head -n 1)" "$w" "$m" "$ratio"
done
