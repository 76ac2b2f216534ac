# coll/diag/: diagnosis and observation of the collectives: operation
# signatures and argument checks, the flight recorder and its JSON dump,
# traces (WEFT_TRACE) and counters (WEFT_STATS, weft_stats), and the private
# files they write.
libweft_core_la_SOURCES += \
	coll/diag/sig.h coll/diag/sig.c coll/diag/check.h coll/diag/check.c \
	coll/diag/record.h coll/diag/record.c coll/diag/dump.h coll/diag/dump.c \
	coll/diag/obs.h coll/diag/obs.c coll/diag/file.h coll/diag/file.c \
	coll/diag/trace.c coll/diag/stats.c
