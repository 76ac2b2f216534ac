# The scripts that launch mpirun jobs take turns (tests/mpi/mpirun_env.sh
# holds a lock for the whole script). Under make -j a script waiting for the
# lock would hold a job slot idle; tests/mpi/chain.mk (read by GNU make, not
# by automake) starts each one only after the one before it has finished.
-include $(top_srcdir)/tests/mpi/chain.mk
EXTRA_DIST += tests/mpi/chain.mk
