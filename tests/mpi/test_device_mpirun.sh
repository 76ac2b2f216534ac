#!/usr/bin/env bash
# weft's collectives on emu buffers between real processes: weft_bench
# --check -d emu under mpirun -np 1..4 (PMIx bootstrap, UCX transport), every
# collective blocking and enqueued on an emu stream (--enqueue; each form of
# each collective at two process counts), every element of every iteration
# checked; then dtype classes (int, float, half) with odd sizes and in place;
# host buffers enqueued on an emu stream; chains of enqueued collectives with
# one synchronize (device tasks); the shared-memory allreduce without device
# tasks, which maps the peers' emu buffers (IPC); virtual nodes of one process with shared
# memory off, where every byte of emu memory is staged through host memory
# by the UCX transport (fragments of 64 KiB: a message of several MiB takes
# dozens); and two virtual nodes of two (hierarchical algorithms). Runs of
# one process count and environment share one mpirun job
# (tests/mpi/bench_jobs.sh), which has a deadline.
# tests/device/test_emu_procs asserts that IPC is really used (it reads
# weft's internal counters, which weft_bench cannot).
set -u
: "${top_builddir:?run through make check}"
bench="$top_builddir/benchmarks/weft_bench"
if [ ! -x "$bench" ] || ! command -v mpirun >/dev/null; then
    echo "SKIP: weft_bench or mpirun not available"
    exit 77
fi
. "${top_srcdir:?run through make check}/tests/mpi/mpirun_env.sh"
export WEFT_TIMEOUT=60
unset WEFT_TUNE WEFT_SHM WEFT_RANKS_PER_NODE WEFT_STAGE_FRAG UCX_TLS WEFT_DEVICE_TASK
. "$top_srcdir/tests/mpi/bench_jobs.sh"

colls="allreduce reduce_scatter allgather bcast reduce gather scatter alltoall allgatherv
       alltoallv reduce_scatter_v barrier"
# every collective at np 1..4, blocking and enqueued in turn (each form of
# each collective at two process counts), root on the last rank
i=0
for np in 1 2 3 4; do
    for coll in $colls; do
        i=$((i + 1))
        enq=
        [ $(((i + np) % 2)) -eq 1 ] && enq=--enqueue
        sizes=(-b 4 -e 1m -f 64)
        [ $coll = barrier ] && sizes=(-b 8 -e 8)
        run $np "emu $enq $coll" -d emu $enq --root $((np - 1)) -d int32 -o sum "${sizes[@]}" $coll
    done
done
# dtype classes, odd sizes, in place; host buffers on an emu stream
np=3
for coll in allreduce reduce_scatter allgather; do
    run $np "emu $coll float16 odd" -d emu -d float16 -o sum -b 2 -e 20002 -f 101 --in-place $coll
    run $np "emu enqueue $coll bfloat16 odd" -d emu --enqueue -d bfloat16 -o max \
        -b 2 -e 20002 -f 101 --in-place $coll
    run $np "emu enqueue $coll uint8 odd" -d emu --enqueue -d uint8 -o bxor \
        -b 1 -e 59049 -f 243 --in-place $coll
done
run 2 "host enqueue allreduce" -d host --enqueue -d float32 -o sum -b 4 -e 4m -f 32 allreduce
run 4 "host enqueue alltoall" -d host --enqueue -d float32 -o sum -b 4 -e 1m -f 32 alltoall
run 4 "emu enqueue allreduce float64 avg" -d emu --enqueue -d float64 -o avg -b 8 -e 8m -f 32 \
    allreduce
# chains of enqueued collectives (device tasks on one node) with one synchronize
for coll in allreduce bcast allgather reduce_scatter alltoall; do
    run 3 "emu chain $coll" -d emu --enqueue --chain 16 --root 2 -d int32 -o sum \
        -b 4 -e 1000000 -f 100 $coll
done
run 2 "emu chain allreduce/shm" -d emu --enqueue --chain 8 --algo shm -d float32 -o sum \
    -b 4 -e 4m -f 64 allreduce
# the shared-memory allreduce without device tasks: peers' emu buffers mapped through IPC
flush
export WEFT_DEVICE_TASK=no
run 2 "emu allreduce/shm" -d emu --algo shm -d float32 -o sum -b 4 -e 16m -f 64 allreduce
run 3 "emu enqueue allreduce/shm odd" -d emu --enqueue --algo shm -d int64 -o max \
    -b 8 -e 1000008 -f 1000 --in-place allreduce
run 4 "emu allreduce/shm" -d emu --algo shm -d float16 -o sum -b 2 -e 4m -f 64 allreduce
flush
unset WEFT_DEVICE_TASK
# one process per virtual node, no shared memory: UCX stages emu memory
flush
export WEFT_RANKS_PER_NODE=1 WEFT_SHM=no WEFT_STAGE_FRAG=64k
for np in 2 3; do
    for coll in allreduce allgather bcast alltoall reduce_scatter; do
        enq=
        [ $np = 3 ] && enq=--enqueue
        run $np "staged emu $enq $coll" -d emu $enq --root $((np - 1)) -d float32 -o sum \
            -b 4 -e 4m -f 16 $coll
    done
done
run 2 "staged emu enqueue allreduce odd" -d emu --enqueue -d float16 -o sum -b 2 \
    -e 1000002 -f 1000 --in-place allreduce
run 3 "staged emu alltoallv" -d emu -d int32 -b 4 -e 1m -f 16 alltoallv
flush
unset WEFT_SHM WEFT_STAGE_FRAG
# two virtual nodes of two: shared memory inside, UCX between
export WEFT_RANKS_PER_NODE=2
run 4 "2 nodes emu allreduce" -d emu -d float32 -o sum -b 4 -e 16m -f 64 allreduce
run 4 "2 nodes emu enqueue bcast" -d emu --enqueue --root 3 -d int64 -b 8 -e 1000008 -f 1000 \
    bcast
run 4 "2 nodes emu enqueue reduce_scatter" -d emu --enqueue -d int64 -o max -b 8 -e 1000008 \
    -f 1000 reduce_scatter
run 4 "2 nodes emu allgather" -d emu -d float32 -b 4 -e 4m -f 64 allgather
flush
unset WEFT_RANKS_PER_NODE
bench_jobs_result || exit 1
