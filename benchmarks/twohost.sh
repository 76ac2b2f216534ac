#!/usr/bin/env bash
# weft against Open MPI across simulated hosts on this machine
# (tools/sim_hosts.sh: a network namespace per host, each with its own
# hostname, IPC namespace and /dev/shm, all on one bridge; UCX over TCP,
# Open MPI's ob1 over its tcp btl on the same links). Builds the hosts,
# runs `weft_bench --vs-mpi` RUNS times (separate mpirun jobs, each
# alternating weft's and Open MPI's collective on the same buffers), prints
# the median per size and the geomean of the ratios, and removes the hosts.
#
#   benchmarks/twohost.sh [--hosts N] [--ranks R] [--rate RATE] [--pml PML]
#                         [-r RUNS] [WEFT_BENCH-OPTIONS] COLLECTIVE
#
#   --hosts N     hosts (default 2)
#   --ranks R     ranks per host (default 2)
#   --rate RATE   cap each host's sending rate (tc tbf), e.g. 10gbit, 25gbit:
#                 a link slower than memory, as a cluster's is (default none:
#                 the veth runs at memory speed)
#   --pml PML     Open MPI's point-to-point layer for its side: ob1 (default:
#                 its tcp btl) or ucx (UCX over the same TCP links as weft)
#   -r RUNS       mpirun jobs (default 3)
#   WEFT_BENCH-OPTIONS go to weft_bench (default -b 8 -e 16m -f 8)
#
# WEFT_* and UCX_* settings in the environment reach every rank (UCX_TLS and
# UCX_NET_DEVICES are the simulated network's).
#
# Example: benchmarks/twohost.sh --rate 25gbit -r 5 allreduce
# Needs root (namespaces) and Open MPI's mpirun.
set -euo pipefail
nhosts=2 ranks=2 rate='' runs=3 pml=ob1
while [ $# -gt 0 ]; do
    case $1 in
        --hosts) nhosts=$2; shift 2 ;;
        --ranks) ranks=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --pml) pml=$2; shift 2 ;;
        -r) runs=$2; shift 2 ;;
        -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "usage: $0 [--hosts N] [--ranks R] [--rate RATE] [--pml ob1|ucx] [-r RUNS] [options] COLLECTIVE" >&2; exit 2; }
case $pml in
    ob1 | ucx) ;;
    *) echo "twohost.sh: --pml takes ob1 or ucx, not '$pml'" >&2; exit 2 ;;
esac
for v in "$nhosts" "$ranks" "$runs"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "twohost.sh: '$v' is not a positive count" >&2; exit 2; }
done
here=$(cd "$(dirname "$0")" && pwd)
bench=$here/weft_bench
[ -x "$bench" ] || { echo "twohost.sh: $bench is not built (make)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "twohost.sh: needs root (network namespaces)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "twohost.sh: mpirun not found" >&2; exit 1; }
args=("$@")
[ $# -gt 1 ] || args=(-b 8 -e 16m -f 8 "$@")

hosts_unavailable() {
    echo "twohost.sh: $*" >&2
    exit 1
}
. "$here/../tools/sim_hosts.sh"
hosts_setup "$nhosts" "$ranks"
if [ -n "$rate" ]; then
    hosts_rate "$rate" || hosts_unavailable "tc could not cap the links at '$rate'"
fi
np=$((nhosts * ranks))
# Open MPI's pml ucx takes only InfiniBand-class transports unless told otherwise
pml_opts=(--mca pml "$pml")
[ "$pml" = ucx ] && pml_opts+=(--mca pml_ucx_tls any --mca pml_ucx_devices any)
export WEFT_TIMEOUT=${WEFT_TIMEOUT:-60}
pass=()
for v in $(compgen -e | grep -E '^(WEFT|UCX)_'); do
    pass+=(-x "$v")
done

rows=''
for r in $(seq "$runs"); do
    mpirun_hosts 900 -np $np "${pml_opts[@]}" "${pass[@]}" "$bench" --vs-mpi --format csv "${args[@]}"
    if [ "$rc" -ne 0 ]; then
        log=$(mktemp "${TMPDIR:-/tmp}/twohost-failed.XXXXXX.log")
        printf "%s\n" "$out" >"$log"
        echo "twohost.sh: run $r failed (exit $rc); every rank's output in $log, its end:" >&2
        tail -n 20 <<<"$out" >&2
        exit 1
    fi
    rows+=$(grep -E '^[a-z_]+,[0-9]' <<<"$out")$'\n'
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf "# %s, %d hosts x %d ranks, link %s, Open MPI pml %s, median of %d mpirun jobs (weft_bench --vs-mpi %s)\n" \
    "${args[-1]}" "$nhosts" "$ranks" "${rate:-unlimited}" "$pml" "$runs" "${args[*]}"
printf "%10s %12s %12s %10s\n" bytes weft_us mpi_us weft/mpi
logsum=0 n=0
for bytes in $(grep . <<<"$rows" | cut -d, -f3 | sort -gu); do
    sel=$(awk -F, -v b="$bytes" '$3 == b' <<<"$rows")
    w=$(cut -d, -f7 <<<"$sel" | median)
    m=$(cut -d, -f11 <<<"$sel" | median)
    ratio=$(cut -d, -f13 <<<"$sel" | median)
    printf "%10s %12s %12s %10s\n" "$bytes" "$w" "$m" "$ratio"
    logsum=$(awk -v s="$logsum" -v x="$ratio" 'BEGIN {print s + log(x)}')
    n=$((n + 1))
done
[ $n -gt 0 ] && awk -v s="$logsum" -v n=$n 'BEGIN {printf "geomean weft/mpi %.2f over %d sizes\n", exp(s / n), n}'
