# bootstrap/: finding the job's ranks: in-process threads, PMIx (mpirun,
# srun) and the TCP unique id (its root, wire format and serving loop).
libweft_core_la_SOURCES += \
	bootstrap/bootstrap.h bootstrap/thread/thread.h bootstrap/thread/thread.c \
	bootstrap/pmix/pmix.h bootstrap/pmix/pmix.c \
	bootstrap/tcp/tcp.h bootstrap/tcp/tcp_internal.h bootstrap/tcp/tcp_wire.c \
	bootstrap/tcp/tcp_root.h bootstrap/tcp/tcp_root.c bootstrap/tcp/tcp_serve.c bootstrap/tcp/tcp.c
