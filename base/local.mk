# base/: errors and their names, logging, dtypes, handle tables, configuration
# value parsing, process start times. Uses nothing of weft above it.
libweft_core_la_SOURCES += \
	base/base.h base/status.c base/log.c base/dtype.c base/handle.h base/handle.c \
	base/proc.h base/proc.c base/config.h base/config_parse.c
