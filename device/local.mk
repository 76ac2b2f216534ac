# device/: the device table, the host device (its reduction loops in their
# own library, below) and the emulated accelerator. device/cuda/ has its own
# local.mk.
libweft_core_la_SOURCES += \
	device/device.h device/device.c device/pinned.c device/reduce_elem.h \
	device/host/host.h device/host/half.h device/host/host.c \
	device/emu/emu.h device/emu/memory.c device/emu/stream.c device/emu/emu.c

# The reduction loops must vectorize even at -O2 (where GCC's default cost
# model refuses loops that need an epilogue).
noinst_LTLIBRARIES += libweft_hostreduce.la
libweft_hostreduce_la_SOURCES = device/host/reduce.c
libweft_hostreduce_la_CFLAGS = $(AM_CFLAGS) -ftree-vectorize -fvect-cost-model=dynamic
libweft_core_la_LIBADD += libweft_hostreduce.la
