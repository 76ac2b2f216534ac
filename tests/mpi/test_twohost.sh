#!/usr/bin/env bash
# weft's collectives across two hosts, simulated on one machine: each host
# is a network namespace (the two joined by a veth pair, private addresses)
# plus its own UTS namespace (its own hostname, so weft's node identity of
# hostname + boot id differs between hosts), IPC namespace (no System V
# segments or POSIX message queues shared between hosts) and mount
# namespace with a private tmpfs on /dev/shm (POSIX shared memory lives
# there, a mount the IPC namespace does not cover). mpirun runs on the first
# host and starts the second host's daemon through a generated rsh agent
# that enters that host's namespaces, so Open MPI sees two nodes of two
# slots each and every rank on a host shares that host's namespaces.
#
# Then weft_bench --check at np 4 (2 hosts x 2 ranks) for each collective's
# default selection and every algorithm in the list below, after checking
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
    reduce:binomial reduce:reduce_scatter_gather
    barrier:dissemination
    alltoall:pairwise alltoall:bruck
)
colls=(allreduce reduce_scatter allgather bcast reduce barrier alltoall)
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
tag=weft2h$$ # the namespaces and hostnames are named after this shell
hosts=("${tag}a" "${tag}b")
net=10.213.$(($$ % 254 + 1))
dev=weft0 # the veth end has this name in both namespaces
tmp='' job=''
runs=0 failures=0

# Kill whatever still runs in a host's network namespace (leftover ranks,
# daemons, agents: only processes this script started can be there) and
# wait until it is gone, so that the next job starts on empty hosts.
kill_hosts() {
    local h pids i
    for i in $(seq 30); do
        pids=
        for h in "${hosts[@]}"; do
            pids+=" $(ip netns pids "$h" 2>/dev/null)"
        done
        [ -z "${pids// /}" ] && return 0
        kill -KILL $pids 2>/dev/null
        sleep 0.1
    done
    echo "warning: processes left in the host namespaces:$pids"
}
cleanup() {
    local h
    if [ -n "$job" ]; then # interrupted during a job: its group first (timeout leads one)
        kill -KILL -- "-$job" 2>/dev/null || kill -KILL "$job" 2>/dev/null
        wait "$job" 2>/dev/null
    fi
    kill_hosts
    for h in "${hosts[@]}"; do
        ip netns del "$h" 2>/dev/null # takes its veth end, and so the pair, with it
    done
    [ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip netns add "${hosts[0]}" 2>/dev/null || skip "ip netns add failed (no network namespaces here)"
ip netns add "${hosts[1]}" || skip "ip netns add failed"
ip link add $dev netns "${hosts[0]}" type veth peer name $dev netns "${hosts[1]}" ||
    skip "cannot create a veth pair"
for i in 0 1; do
    ip -n "${hosts[$i]}" addr add $net.$((i + 1))/24 dev $dev &&
        ip -n "${hosts[$i]}" link set $dev up && ip -n "${hosts[$i]}" link set lo up ||
        skip "cannot configure the veth in ${hosts[$i]}"
done
# The kernel reports the carrier up to a second after "link set up"; until
# then UCX finds the device down and would fall back to lo.
for i in $(seq 50); do
    ip -n "${hosts[0]}" -o link show dev $dev | grep -q "state UP" &&
        ip -n "${hosts[1]}" -o link show dev $dev | grep -q "state UP" && break
    sleep 0.1
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-twohost.XXXXXX") || exit 1

# host.sh HOST COMMAND...: run COMMAND on HOST. ip netns exec also remounts
# /sys for the namespace, which UCX reads to find network devices.
cat >"$tmp/host.sh" <<'EOF'
#!/bin/sh
host=$1
shift
exec ip netns exec "$host" unshare --uts --ipc --mount --propagation private -- sh -c '
    hostname "$0" && mount -t tmpfs -o mode=1777 weftshm /dev/shm && exec "$@"' "$host" "$@"
EOF
# The rsh agent: plm_rsh calls it as "agent HOST COMMAND-WORDS...", the
# words forming one shell command line as ssh would pass it.
cat >"$tmp/agent.sh" <<EOF
#!/bin/sh
host=\$1
shift
exec "$tmp/host.sh" "\$host" sh -c "\$*"
EOF
chmod +x "$tmp/host.sh" "$tmp/agent.sh"
printf '%s slots=2\n' "${hosts[@]}" >"$tmp/hostfile"
for h in "${hosts[@]}"; do
    [ "$("$tmp/host.sh" "$h" hostname 2>&1)" = "$h" ] ||
        skip "cannot enter host $h (unshare --uts --ipc --mount, tmpfs on /dev/shm)"
done

# Open MPI's daemons (oob) and its MPI traffic (ob1 over the tcp btl; the
# ucx pml declines, as no device matches pml_ucx_devices) on the veth subnet. UCX, weft's
# transport, over TCP on the veth only, so that no pair of ranks can take a
# shared-memory path whatever UCX concludes about which peers share a machine.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export UCX_TLS=tcp,self UCX_NET_DEVICES=$dev WEFT_TIMEOUT=60
mpirun_opts=(-np 4 --hostfile "$tmp/hostfile" --mca plm_rsh_agent "$tmp/agent.sh"
             --bind-to none --oversubscribe --mca mpi_yield_when_idle 1
             --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24"
             -x UCX_TLS -x UCX_NET_DEVICES -x WEFT_TIMEOUT)

# mpirun_twohost [MPIRUN-OPTIONS] WEFT_BENCH ARGS...: one job on the two
# hosts, its output in $out and exit status in $rc. The job runs in the
# background so that a signal to this script is handled at once; timeout
# signals its whole process group, and kill_hosts gets anything that left it.
out='' rc=0
mpirun_twohost() {
    timeout -k 5 $deadline "$tmp/host.sh" "${hosts[0]}" \
        mpirun "${mpirun_opts[@]}" "$@" >"$tmp/out" 2>&1 &
    job=$!
    wait $job
    rc=$? job=
    kill_hosts
    out=$(<"$tmp/out")
}

# The checked runs are queued (run 4 LABEL ARGS..., tests/mpi/bench_jobs.sh)
# and flushed as one job over the two hosts, its deadline 90 s and 15 s per
# run (mpirun_twohost kills what is left on the hosts after every job).
. "${top_srcdir:?run through make check}/tests/mpi/bench_jobs.sh"
bench_job() { # np (the hostfile's 4), segments, weft_bench arguments...
    local saved=$deadline
    deadline=$((90 + 15 * $2))
    shift 2
    mpirun_twohost "$bench" "$@"
    deadline=$saved
}
bench_cleanup() { :; }
trap cleanup EXIT

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
nodes=$(grep -c "communicator of 4 ranks over .*; 2 on this node; 2 node(s), 2 rank(s) on this one, shared memory" <<<"$out")
if [ $rc -ne 0 ] || [ "$nodes" -ne 4 ]; then
    failures=$((failures + 1))
    echo "FAIL (node count) $nodes of 4 ranks saw 2 ranks on their node (exit $rc)"
    tail -n 15 <<<"$out"
    if [ $rc -ne 0 ]; then # every job would fail the same way, each after its deadline
        echo "twohost: $runs runs, $failures failures (the two hosts do not work; stopped)"
        exit 1
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
    root=() # not rank 0, and for bcast not on the mpirun host
    [ "$coll" = bcast ] && root=(--root 3)
    [ "$coll" = reduce ] && root=(--root 1)
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
echo "twohost: $runs runs, $failures failures"
[ $failures -eq 0 ] && echo "PASS" || exit 1
