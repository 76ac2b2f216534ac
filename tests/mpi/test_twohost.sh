#!/usr/bin/env bash
# weft's collectives across two hosts, simulated on one machine
# (tools/sim_hosts.sh: network, UTS, IPC and mount namespaces per host, a
# bridge between them), Open MPI seeing two nodes of two slots each.
#
# Then weft_bench --check at np 4 (2 hosts x 2 ranks) for each collective's
# default selection and every algorithm in the list below, and for the
# point-to-point ping-pong between the hosts, the hierarchical allreduce,
# reduce_scatter, allgather, bcast and reduce also pipelined, after checking
# that weft itself counted 2 ranks on each node; the runs go in one mpirun
# job (weft_bench --then). Needs root (namespaces); skips otherwise. Every
# job has a deadline and is killed with all its processes when it
# overstays it.
set -u
: "${top_builddir:?run through make check}"
bench="$(cd "$top_builddir" 2>/dev/null && pwd)/benchmarks/weft_bench" # the ranks' cwd may differ
info="$top_builddir/tools/weft_info"

# The algorithms forced one by one, "collective:algorithm"; each collective
# also runs once with weft's own choice. A trailing "?" marks an algorithm
# that may not be built yet: skipped with a note when weft does not know it.
specs=(
    allreduce:recursive_doubling allreduce:rabenseifner allreduce:ring
    allreduce:hier allreduce:shm
    reduce_scatter:ring reduce_scatter:recursive_halving reduce_scatter:hier
    allgather:ring allgather:recursive_doubling allgather:bruck allgather:hier
    bcast:binomial bcast:scatter_allgather bcast:hier
    reduce:binomial reduce:reduce_scatter_gather reduce:hier
    barrier:dissemination barrier:hier
    alltoall:pairwise alltoall:bruck alltoall:hier
    gather:binomial gather:hier scatter:binomial scatter:hier
)
# pingpong: weft_send/weft_recv between rank r and r + 2, across the hosts
colls=(allreduce reduce_scatter allgather bcast reduce barrier alltoall gather scatter pingpong)
deadline=90 # seconds per mpirun job, past WEFT_TIMEOUT (60) so that weft reports a hang first

skip() {
    echo "SKIP: $*"
    exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root to build network namespaces"
[ -x "$bench" ] && [ -x "$info" ] || skip "weft_bench or weft_info not built"
for tool in mpirun ip unshare hostname mount timeout; do
    command -v $tool >/dev/null || skip "$tool not found"
done

# mpirun jobs of the suite's scripts run one script at a time (they share
# the cores, and each cleans up after its own jobs)
exec 9>"${TMPDIR:-/tmp}/weft-mpi-tests.lock"
flock 9
runs=0 failures=0

hosts_unavailable() { skip "$@"; }
. "${top_srcdir:?run through make check}/tools/sim_hosts.sh"
hosts_setup 2 2
export WEFT_TIMEOUT=60
mpirun_opts=(-np 4 -x WEFT_TIMEOUT)
mpirun_twohost() { # [MPIRUN-OPTIONS] WEFT_BENCH ARGS...: one job, $out and $rc
    mpirun_hosts $deadline "${mpirun_opts[@]}" "$@"
}

# The checked runs are queued (run 4 LABEL ARGS..., tests/mpi/bench_jobs.sh)
# and flushed as one job over the two hosts, its deadline 90 s and 15 s per
# run (mpirun_hosts kills what is left on the hosts after every job).
. "$top_srcdir/tests/mpi/bench_jobs.sh"
bench_job() { # np (the hostfile's 4), segments, weft_bench arguments...
    local saved=$deadline
    deadline=$((90 + 15 * $2))
    shift 2
    mpirun_twohost "$bench" "$@"
    deadline=$saved
}
bench_cleanup() { :; }
trap hosts_cleanup EXIT

# known COLL ALGO: does weft have this algorithm? (weft_init refuses a
# WEFT_TUNE rule that names an unknown one)
known() {
    ! WEFT_TUNE="$1:0-inf:$2" "$info" --explain "$1" 1m 4 2 2>&1 | grep -q "has no algorithm"
}

# each host must be a node of its own, with two ranks
runs=$((runs + 1))
WEFT_LOG_LEVEL=info mpirun_twohost -x WEFT_LOG_LEVEL "$bench" -n 1 -w 0 -b 4 -e 4 barrier
# (and weft's node map agrees: 2 nodes of 2 ranks, each node's pair
# sharing a memory segment, so the hierarchical algorithms can run)
nodes=$(grep -c "communicator of 4 ranks over .*; 2 on this node[^;]*; 2 node(s), 2 rank(s) on this one, shared memory" <<<"$out")
if [ $rc -ne 0 ] || [ "$nodes" -ne 4 ]; then
    failures=$((failures + 1))
    echo "FAIL (node count) $nodes of 4 ranks saw 2 ranks on their node (exit $rc)"
    tail -n 15 <<<"$out"
    if [ $rc -ne 0 ]; then # every job would fail the same way, each after its deadline
        echo "twohost: $runs runs, $failures failures (the two hosts do not work; stopped)"
        exit 1
    fi
fi
# UCX has TCP only between the hosts: every rank takes weft's rendezvous
# threshold for TCP (pt2pt/ucx/ucx.h), unless UCX_RNDV_THRESH is set
if [ -z "${UCX_RNDV_THRESH:-}" ]; then
    tcp_rndv=$(grep -c "no network transport but TCP: UCX_RNDV_THRESH=" <<<"$out")
    if [ "$tcp_rndv" -ne 4 ]; then
        failures=$((failures + 1))
        echo "FAIL (TCP rendezvous threshold) $tcp_rndv of 4 ranks set it"
    fi
fi
# and its receive segment size for TCP, unless UCX_TCP_RX_SEG_SIZE is set
if [ -z "${UCX_TCP_RX_SEG_SIZE:-}${UCX_RX_SEG_SIZE:-}" ]; then
    tcp_seg=$(grep -c "no network transport but TCP: UCX_TCP_RX_SEG_SIZE=" <<<"$out")
    if [ "$tcp_seg" -ne 4 ]; then
        failures=$((failures + 1))
        echo "FAIL (TCP receive segment) $tcp_seg of 4 ranks set it"
    fi
fi

for coll in "${colls[@]}"; do
    algos=(default)
    for spec in "${specs[@]}"; do
        [ "${spec%%:*}" = "$coll" ] || continue
        algo=${spec#*:}
        if [ "${algo%\?}" != "$algo" ]; then
            algo=${algo%\?}
            if ! known "$coll" "$algo"; then
                echo "note: $coll has no algorithm '$algo' yet; not run"
                continue
            fi
        fi
        algos+=("$algo")
    done
    root=() # not rank 0, and for bcast and gather not on the mpirun host
    [ "$coll" = bcast ] && root=(--root 3)
    [ "$coll" = reduce ] && root=(--root 1)
    [ "$coll" = gather ] && root=(--root 3)
    [ "$coll" = scatter ] && root=(--root 1)
    for algo in "${algos[@]}"; do
        force=()
        [ "$algo" = default ] || force=(--algo "$algo")
        label="$coll/$algo"
        case $coll in
        allreduce | reduce_scatter | allgather) inplace=--in-place ;;
        *) inplace= ;;
        esac
        case $coll in
        allreduce | bcast | reduce) big=4m ;;
        *) big=1m ;; # per-rank block: the whole buffer is 4 times it
        esac
        if [ "$coll" = barrier ]; then
            run 4 "$label" "${force[@]}" -b 4 -e 4 "$coll"
            continue
        fi
        run 4 "$label" "${force[@]}" "${root[@]}" -d float32 -o sum -b 4 -e $big -f 16 "$coll"
        run 4 "$label odd" "${force[@]}" "${root[@]}" -d uint8 -o bxor -b 1 -e 59049 -f 243 \
            $inplace "$coll"
    done
done
flush

# The sliced forms pipelined across the hosts (WEFT_HIER_PIPELINE=64k, the leader forms off): the
# vectors (an allgather's result, a reduce_scatter's input) in chunks of 64 KiB, up to 64
for coll in allreduce reduce_scatter allgather bcast reduce; do
    root=()
    [ "$coll" = bcast ] && root=(--root 3)
    [ "$coll" = reduce ] && root=(--root 1)
    inplace=
    [ "$coll" = bcast ] || [ "$coll" = reduce ] || inplace=--in-place
    run 4 "$coll/hier pipelined" --algo hier "${root[@]}" -d float32 -o sum -b 256k -e 4m -f 4 \
        $inplace "$coll"
    run 4 "$coll/hier pipelined odd" --algo hier "${root[@]}" -d uint8 -o bxor -b 200003 \
        -e 200003 "$coll"
done
saved_opts=("${mpirun_opts[@]}")
mpirun_opts+=(-x WEFT_HIER_PIPELINE=64k -x WEFT_HIER_LEADER=0)
flush
mpirun_opts=("${saved_opts[@]}")
echo "twohost: $runs runs, $failures failures"
[ $failures -eq 0 ] && echo "PASS" || exit 1
