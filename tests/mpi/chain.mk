# GNU make: each mpirun script's log waits for the one before it, when both
# are part of the run; a script missing from it (make check TESTS=...) drops
# out of the chain. In the order of TESTS (Makefile.am).
tests/mpi/test_device_mpirun.sh.log: | $(filter tests/mpi/test_mpirun.sh.log,$(TEST_LOGS))
tests/python/test_python.sh.log: | $(filter tests/mpi/test_device_mpirun.sh.log,$(TEST_LOGS))
tests/mpi/test_twohost.sh.log: | $(filter tests/python/test_python.sh.log,$(TEST_LOGS))
tests/diag/test_doctor.sh.log: | $(filter tests/mpi/test_twohost.sh.log,$(TEST_LOGS))
tests/bindings/test_mpi_interpose.sh.log: | $(filter tests/diag/test_doctor.sh.log,$(TEST_LOGS))
