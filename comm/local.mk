# comm/: the communicator core (one opaque pointer per layer above it and
# the upcall table) and node identity.
libweft_core_la_SOURCES += comm/comm.h comm/comm.c comm/node.h comm/node.c
