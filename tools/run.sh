#!/usr/bin/env bash
# The main job: build if needed, then launch 4 ranks with mpirun running
# weft_bench allreduce twice: first every result of every size checked
# (a few iterations), then timed against the MPI library's own
# MPI_Allreduce on the same buffers (weft/MPI ratio). The timed pass does
# not check, so that it runs the full iteration counts in little time.
# A third, short pass runs the same collective on emulated-device buffers
# through the stream-ordered form (-d emu --enqueue), checked.
# Extra arguments go to every pass (e.g. -e 1m, allgather, --format nccl).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
launch=(mpirun -np "${WEFT_RANKS:-4}" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
"${launch[@]}" ./benchmarks/weft_bench --check -n 5 -w 1 -b 8 -e 64m -f 8 "$@" allreduce
"${launch[@]}" ./benchmarks/weft_bench --vs-mpi -b 8 -e 64m -f 8 "$@" allreduce
"${launch[@]}" ./benchmarks/weft_bench --check -n 5 -w 1 -b 8 -e 4m -f 64 -d emu --enqueue "$@" allreduce
