#!/usr/bin/env bash
# weft's collectives between real processes: weft_bench --check under
# mpirun -np 1..4 (PMIx bootstrap, UCX transport), every allreduce,
# reduce_scatter and allgather algorithm forced through --algo, sizes from
# one element to 64 MiB, odd counts, in place and out of place, then the
# same over UCX_TLS=tcp; then every algorithm of the other collectives at
# np 1..4 with the root on the last rank. Runs of one process count and
# environment share one mpirun job (tests/mpi/bench_jobs.sh), which has a
# deadline; a job that overstays it is killed with all its ranks.
set -u
: "${top_builddir:?run through make check}"
bench="$top_builddir/benchmarks/weft_bench"
if [ ! -x "$bench" ] || ! command -v mpirun >/dev/null; then
    echo "SKIP: weft_bench or mpirun not available"
    exit 77
fi
. "${top_srcdir:?run through make check}/tests/mpi/mpirun_env.sh"
export WEFT_TIMEOUT=60
. "$top_srcdir/tests/mpi/bench_jobs.sh"

for tls in default tcp; do
    flush
    if [ $tls = tcp ]; then export UCX_TLS=tcp; else unset UCX_TLS; fi
    for np in 1 2 3 4; do
        for spec in allreduce:recursive_doubling allreduce:rabenseifner allreduce:ring \
                    reduce_scatter:ring allgather:ring; do
            coll=${spec%%:*} algo=${spec#*:}
            label="$tls $coll/$algo"
            big=64m
            [ $coll != allreduce ] && big=16m # per-rank block: the whole buffer is np times it
            [ $tls = tcp ] && big=4m
            run $np "$label" --algo $algo -d float32 -o sum -b 4 -e $big -f 4096 $coll
            run $np "$label odd" --algo $algo -d uint8 -o bxor -b 1 -e 59049 -f 243 --in-place $coll
            [ $coll = allgather ] || run $np "$label int64 max" --algo $algo -d int64 -o max \
                -b 8 -e 8008 -f 1001 --in-place $coll
        done
    done
done
# the other collectives: every algorithm forced, root on the last rank
flush
unset UCX_TLS
for np in 1 2 3 4; do
    for spec in bcast:binomial bcast:scatter_allgather reduce:binomial \
                reduce:reduce_scatter_gather gather:binomial scatter:binomial \
                alltoall:pairwise alltoall:bruck barrier:dissemination \
                allgather:recursive_doubling allgather:bruck reduce_scatter:recursive_halving; do
        coll=${spec%%:*} algo=${spec#*:}
        run $np "$coll/$algo" --algo $algo --root $((np - 1)) -d int32 -o sum -b 4 -e 4m -f 1024 \
            $coll
    done
    for coll in allgatherv alltoallv reduce_scatter_v; do
        run $np "$coll" -d int32 -o sum -b 4 -e 4m -f 1024 $coll
    done
    # point-to-point between pairs (the last rank idles at odd np)
    run $np "pingpong" -d int32 -b 4 -e 4m -f 1024 pingpong
    run $np "pingpong odd" -d uint8 -b 1 -e 1000001 -f 1000 pingpong
done
# the ordered reductions of WEFT_REPRODUCIBLE=yes (weft_bench --algo ordered sets it)
for coll in allreduce reduce reduce_scatter reduce_scatter_v; do
    run 3 "$coll/ordered" --algo ordered --root 2 -d float32 -o sum -b 4 -e 4m -f 1024 $coll
done
# shared memory on one node, then two virtual nodes of 2 ranks
# (WEFT_RANKS_PER_NODE=2) for the hierarchical algorithms; odd sizes cross
# the 256 KiB slot so that operations take several rounds
for np in 2 3 4; do
    for spec in allreduce:shm reduce_scatter:shm allgather:shm bcast:shm reduce:shm \
                barrier:shm allgatherv:shm reduce_scatter_v:shm alltoall:shm; do
        coll=${spec%%:*} algo=${spec#*:}
        run $np "$coll/$algo" --algo $algo --root $((np - 1)) -d float32 -o sum -b 4 -e 16m \
            -f 64 $coll
        run $np "$coll/$algo odd" --algo $algo --root 1 -d uint8 -o bxor -b 1 -e 1000001 \
            -f 1000 $coll
    done
done
# single-copy allreduce, bcast, allgather and alltoall between processes
# (process_vm_readv), every size; the alltoall in place through the slots
flush
export WEFT_SHM_CMA=0 WEFT_SHM_CMA_COPY=0 WEFT_SHM_CMA_ALLGATHER=0 WEFT_SHM_CMA_ALLTOALL=0
for np in 2 3 4; do
    run $np "allreduce/shm single copy" --algo shm -d float32 -o sum -b 4 -e 16m -f 64 allreduce
    run $np "allreduce/shm single copy odd" --algo shm -d int32 -o max -b 4 -e 1000000 -f 999 \
        --in-place allreduce
    run $np "bcast/shm single copy" --algo shm --root $((np - 1)) -d float32 -b 4 -e 16m -f 64 \
        bcast
    run $np "allgather/shm single copy" --algo shm -d uint8 -b 1 -e 1000001 -f 1000 --in-place \
        allgather
    run $np "allgather/shm single copy" --algo shm -d int32 -b 4 -e 4m -f 64 allgather
    run $np "alltoall/shm single copy" --algo shm -d uint8 -b 1 -e 1000001 -f 1000 alltoall
done
flush
unset WEFT_SHM_CMA WEFT_SHM_CMA_COPY WEFT_SHM_CMA_ALLGATHER WEFT_SHM_CMA_ALLTOALL
# allreduce results written with non-temporal stores (every size), odd sizes, in place
export WEFT_SHM_STREAM=0
for np in 2 3 4; do
    run $np "allreduce/shm streamed" --algo shm -d int32 -o sum -b 4 -e 4000000 -f 37 --in-place \
        allreduce
    run $np "allreduce/shm streamed float64" --algo shm -d float64 -o max -b 8 -e 2000008 -f 33 \
        allreduce
done
flush
unset WEFT_SHM_STREAM
export WEFT_RANKS_PER_NODE=2
for spec in allreduce:hier bcast:hier reduce_scatter:hier allgather:hier; do
    coll=${spec%%:*} algo=${spec#*:}
    run 4 "2 nodes $coll/$algo" --algo $algo --root 3 -d float32 -o sum -b 4 -e 16m -f 64 $coll
    inplace=--in-place
    [ $coll = bcast ] && inplace=
    run 4 "2 nodes $coll/$algo odd" --algo $algo --root 2 -d int64 -o max -b 8 -e 1000008 \
        -f 1000 $inplace $coll
done
run 4 "2 nodes default allreduce" -d float32 -o avg -b 4 -e 16m -f 16 allreduce
flush
export WEFT_REPRODUCIBLE=yes
run 4 "2 nodes reproducible allreduce" -d float16 -o sum -b 2 -e 1m -f 32 allreduce
flush
unset WEFT_RANKS_PER_NODE WEFT_REPRODUCIBLE
# --loop (back-to-back calls, timing only): one row per size with both
# times; with --check it refuses to run
runs=$((runs + 2)) jobs=$((jobs + 2))
bench_job 2 1 --loop --vs-mpi -n 3 -w 1 -b 8 -e 64k -f 64 alltoall
rows=$(grep -cE '^[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' <<<"$out")
if [ $rc -ne 0 ] || [ "$rows" -ne 3 ]; then
    failures=$((failures + 1))
    echo "FAIL np=2 (exit $rc): --loop --vs-mpi printed $rows rows of 3"
    tail -n 20 <<<"$out"
fi
bench_job 2 1 --loop --check alltoall
if [ $rc -eq 0 ] || ! grep -q -- '--loop: not with --check' <<<"$out"; then
    failures=$((failures + 1))
    echo "FAIL np=2 (exit $rc): --loop --check was not refused"
    tail -n 20 <<<"$out"
fi
bench_jobs_result || exit 1
