# runtime/: the public API (include/weft.h) over the layers below:
# initialisation and configuration, communicators of processes and of
# in-process threads, splits, requests, point-to-point, the collectives'
# entry points, stream-ordered enqueues and topology.
libweft_core_la_SOURCES += \
	runtime/config.h runtime/config.c runtime/init.h runtime/init.c \
	runtime/comm.h runtime/comm.c runtime/comm_split.c runtime/world.c \
	runtime/thread_world.h runtime/thread_world.c \
	runtime/request.h runtime/request.c runtime/p2p.h runtime/p2p.c \
	runtime/coll_impl.h runtime/coll_api.c runtime/coll_entry.c \
	runtime/enqueue.h runtime/enqueue.c runtime/device_api.c \
	runtime/graph.h runtime/graph.c \
	runtime/topo.h runtime/topo.c
