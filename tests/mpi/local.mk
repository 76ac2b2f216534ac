# tests/mpi/: the scripts that launch mpirun jobs of weft_bench (host and
# emu buffers, one host and two simulated hosts). They take turns
# (tests/mpi/mpirun_env.sh holds a lock for the whole script). Under make -j a
# script waiting for the lock would hold a job slot idle; tests/mpi/chain.mk
# (read by GNU make, not by automake) starts each one only after the one
# before it has finished. Included first, so the chain starts at once.
mpi_test_scripts = tests/mpi/test_mpirun.sh tests/mpi/test_device_mpirun.sh tests/mpi/test_twohost.sh
TESTS += $(mpi_test_scripts)
EXTRA_DIST += $(mpi_test_scripts) tests/mpi/mpirun_env.sh tests/mpi/chain.mk
-include $(top_srcdir)/tests/mpi/chain.mk
