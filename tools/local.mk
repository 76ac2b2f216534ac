# tools/: weft_info (configuration, devices, algorithms, a stats self-test),
# weft_doctor (the diagnosis from every rank's dump, Python 3), and the
# scripts of the README and the suite: dependencies, build, run, test,
# sanitizers, fuzzing, soak, the checks that docs/layers.md and
# docs/algorithms.md describe the code.
bin_PROGRAMS += tools/weft_info
tools_weft_info_SOURCES = tools/weft_info.c tools/info_stats.c
tools_weft_info_CFLAGS = $(AM_CFLAGS) $(UCX_CFLAGS)
tools_weft_info_LDADD = libweft_core.la $(UCX_LIBS)
if HAVE_MPI
tools_weft_info_CPPFLAGS = $(AM_CPPFLAGS) \
	-DWEFT_INFO_MPI_BINDINGS='"built ($(libdir)/libweft_mpi.so)"'
else
tools_weft_info_CPPFLAGS = $(AM_CPPFLAGS) \
	-DWEFT_INFO_MPI_BINDINGS='"not built (Open MPI not found by configure)"'
endif

dist_bin_SCRIPTS += tools/weft_doctor

EXTRA_DIST += tools/deps.sh tools/build.sh tools/run.sh tools/test.sh \
	tools/sanitize.sh tools/fuzz.sh tools/soak.sh tools/gpu-check.sh tools/gpu-bundle.sh \
	tools/sanitizers/lsan.supp tools/sanitizers/ubsan.supp tools/sanitizers/tsan.supp \
	tools/sanitizers/criterion_tsan.c \
	tools/check_layers.py tools/check_algorithms.py tools/weft_trace_merge.py \
	tools/sim_hosts.sh
