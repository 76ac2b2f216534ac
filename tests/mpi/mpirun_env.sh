# Sourced by the test scripts that launch mpirun jobs. Their jobs run one
# script at a time (they share the cores, and each cleans up after its own
# jobs): the lock is held until the script exits. Open MPI may run as root
# and oversubscribe, idle ranks yield their core, and mpirun_opts holds the
# options every job passes.
exec 9>"${TMPDIR:-/tmp}/weft-mpi-tests.lock"
flock 9
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
mpirun_opts=(--oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
# Jobs on one node whose MPI side only frames weft's calls (weft_bench
# without --vs-mpi: its barriers, clock and the reduce of the wrong-element
# counts) add mpirun_onenode_opts: Open MPI's own shared memory (ob1, vader)
# instead of its UCX layer, whose start-up was half of each 0.5 s job.
# weft's transport is the same either way; the interposer, mpi4py and
# two-host scripts keep Open MPI's defaults.
mpirun_onenode_opts=(--mca pml ob1 --mca btl self,vader --mca osc ^ucx)
