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
