# tests/mpi/: the scripts that launch mpirun jobs of weft_bench (host and
# emu buffers, one host and two simulated hosts). Every script that runs
# mpirun takes turns on one lock (tests/mpi/mpirun_env.sh holds it for the
# whole script); under make -j tests/mpi/chain.mk (read by GNU make, not by
# automake) starts each only after the one before it has finished, so that
# none holds a job slot waiting for the lock. Makefile.am puts the first two
# early in TESTS and the rest (mpirun_tail) before the longer suites.
mpi_test_scripts = tests/mpi/test_mpirun.sh tests/mpi/test_device_mpirun.sh tests/mpi/test_twohost.sh
mpirun_tail = tests/python/test_python.sh tests/mpi/test_twohost.sh tests/diag/test_doctor.sh \
	tests/bindings/test_mpi_interpose.sh
EXTRA_DIST += $(mpi_test_scripts) tests/mpi/mpirun_env.sh tests/mpi/chain.mk tests/mpi/bench_jobs.sh
-include $(top_srcdir)/tests/mpi/chain.mk
