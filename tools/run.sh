#!/usr/bin/env bash
# The main job: build if needed, then launch 4 ranks with mpirun running
# weft_bench allreduce, every result checked, timed against the MPI
# library's own MPI_Allreduce on the same buffers (weft/MPI ratio).
# Extra arguments go to weft_bench (e.g. -e 1m, allgather, --format nccl).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np "${WEFT_RANKS:-4}" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
    ./benchmarks/weft_bench --check --vs-mpi -b 8 -e 64m -f 8 "$@" allreduce
