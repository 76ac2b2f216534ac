# CUDA device backend (device/cuda): built when configure found a working nvcc
# (HAVE_CUDA). libweft reaches the driver through dlopen, so no CUDA library is
# linked; the kernels are compiled to a fatbin that a generated C file embeds.

cuda_sources = \
	device/cuda/cuda.h device/cuda/internal.h device/cuda/cuda.c device/cuda/stream.c \
	device/cuda/driver.h device/cuda/driver.c device/cuda/util.h device/cuda/util.c \
	device/cuda/kernel_args.h
CLEANFILES += device/cuda/kernels.fatbin device/cuda/kernels_fatbin.c

# the sources travel in every tarball, with or without nvcc (the tests of the
# backend: tests/device/local.mk)
EXTRA_DIST += $(cuda_sources) device/cuda/kernels.cu device/cuda/kernel_body.cuh

if HAVE_CUDA
noinst_LTLIBRARIES += libweft_cuda.la
libweft_cuda_la_SOURCES = $(cuda_sources)
nodist_libweft_cuda_la_SOURCES = device/cuda/kernels_fatbin.c
libweft_cuda_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(CUDA_HOME)/include \
	-DWEFT_CUDA_ARCHS='"compute capabilities $(WEFT_CUDA_ARCHS), PTX of the last"'
libweft_cuda_la_LIBADD = -ldl
libweft_core_la_LIBADD += libweft_cuda.la
# device/device.c registers the cuda table
libweft_core_la_CFLAGS += -DWEFT_HAVE_CUDA_BACKEND

# -fmad=false: no FMA contraction, so the kernels give the host table's bits
cuda_kernel_deps = $(srcdir)/device/cuda/kernel_body.cuh $(srcdir)/device/cuda/kernel_args.h \
	$(srcdir)/device/reduce_elem.h $(srcdir)/device/host/half.h
device/cuda/kernels.fatbin: $(srcdir)/device/cuda/kernels.cu $(cuda_kernel_deps)
	@$(MKDIR_P) device/cuda
	$(AM_V_GEN)$(NVCC) --fatbin -std=c++17 -O3 -fmad=false -Werror all-warnings \
		-I$(top_srcdir) $(NVCC_GENCODE) -o $@ $(srcdir)/device/cuda/kernels.cu

device/cuda/kernels_fatbin.c: device/cuda/kernels.fatbin $(srcdir)/device/cuda/local.mk
	$(AM_V_GEN){ \
		echo '/* Generated from device/cuda/kernels.cu by device/cuda/local.mk. */'; \
		echo 'const unsigned char weft__cuda_fatbin[] __attribute__((aligned(64))) = {'; \
		od -An -v -tx1 device/cuda/kernels.fatbin | sed -e 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
		echo '};'; \
		echo 'const unsigned long weft__cuda_fatbin_size = sizeof(weft__cuda_fatbin);'; \
	} > $@-t && mv $@-t $@

endif
