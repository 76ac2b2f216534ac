#!/usr/bin/env bash
# A collective's latency through libweft_mpi.so against plain Open MPI:
# separate mpirun jobs alternating the two, the median of each size over
# the runs, their ratio, and the geomean of the ratios.
#   benchmarks/mpi_interpose.sh [-np N] [-r runs] [-c COLL] [--osu] [--user-op]
#                               [-b MIN] [-e MAX]
# COLL: allreduce (default), reduce, bcast, allgather, alltoall, gather,
# scatter, reduce_scatter, barrier; --osu: every call from a barrier (the
# osu-micro-benchmarks' loop) instead of back to back.
# Run from the build tree (after make; the benchmark is
# benchmarks/weft_mpi_allreduce, the library .libs/libweft_mpi.so).
# Example: benchmarks/mpi_interpose.sh -np 4 -r 5 -c bcast --osu -b 8 -e 4m
set -euo pipefail
np=2 runs=5 args=()
while [ $# -gt 0 ]; do
    case $1 in
        -np) np=$2; shift 2 ;;
        -r) runs=$2; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
top=$(cd "$(dirname "$0")/.." && pwd)
bench=$top/benchmarks/weft_mpi_allreduce
lib=$top/.libs/libweft_mpi.so
[ -x "$bench" ] && [ -f "$lib" ] || { echo "build first: $bench, $lib" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# a core for every rank: each bound to its own, busy-polling (the issue's np 2 method); more ranks
# than cores: unbound, and Open MPI yields while it waits (tests/mpi/mpirun_env.sh), as weft does
if [ "$np" -le "$(nproc)" ]; then
    opts=(--bind-to core) placement="bound to cores"
else
    opts=(--oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
    placement="oversubscribed, unbound, Open MPI yielding"
fi
for r in $(seq "$runs"); do
    timeout -k 5 600 mpirun -np "$np" "${opts[@]}" "$bench" "${args[@]}" | grep -E '^[0-9]' \
        >"$tmp/mpi.$r"
    timeout -k 5 600 mpirun -np "$np" "${opts[@]}" -x LD_PRELOAD="$lib" "$bench" "${args[@]}" \
        | grep -E '^[0-9]' >"$tmp/weft.$r"
done
median() {
    sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
printf "# MPI collective (float sum) %s, %d ranks (%s), median of %d alternating mpirun jobs each\n" \
    "${args[*]:-}" "$np" "$placement" "$runs"
printf "%-10s %14s %14s %10s\n" bytes interposed_us openmpi_us ratio
logsum=0 nsizes=0
for bytes in $(cut -d, -f1 "$tmp/mpi.1"); do
    w=$(cat "$tmp"/weft.* | awk -F, -v b="$bytes" '$1 == b {print $2}' | median)
    m=$(cat "$tmp"/mpi.* | awk -F, -v b="$bytes" '$1 == b {print $2}' | median)
    ratio=$(echo "$w / $m" | bc -l)
    printf "%-10s %14s %14s %10.2f\n" "$bytes" "$w" "$m" "$ratio"
    logsum=$(echo "$logsum + l($ratio)" | bc -l)
    nsizes=$((nsizes + 1))
done
if [ "$nsizes" -gt 0 ]; then
    printf "geomean %.2f over %d sizes\n" "$(echo "e($logsum / $nsizes)" | bc -l)" "$nsizes"
fi
