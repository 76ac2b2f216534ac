# The layers below the collectives: base/ (errors, logging, time, dtypes,
# configuration values) and core/ (the communicator core), with the check that
# keeps every dependency pointing down (docs/layers.md).
libweft_core_la_SOURCES += base/config.h base/config_parse.c core/comm.h core/comm.c \
	coll/upcalls.c

TESTS += tests/layers/test_layers.sh
EXTRA_DIST += tools/check_layers.py tests/layers/test_layers.sh
