# pt2pt/: the transport table, the in-process loop transport and UCX.
libweft_core_la_SOURCES += \
	pt2pt/pt2pt.h pt2pt/loop/loop.h pt2pt/loop/loop.c \
	pt2pt/ucx/ucx.h pt2pt/ucx/ucx_internal.h pt2pt/ucx/ucx_context.c pt2pt/ucx/ucx.c \
	pt2pt/ucx/ucx_stage.c
