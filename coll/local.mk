# coll/: the collectives. The schedule engine, the algorithm registry and
# selection with its cost model, one file per algorithm (coll/<collective>/),
# shared memory inside a node (coll/shm/) and the hierarchy across nodes
# (coll/hier/). coll/diag/ has its own local.mk.
libweft_core_la_SOURCES += \
	coll/coll.h coll/comm_state.h coll/comm_state.c coll/upcalls.c \
	coll/sched.h coll/sched_impl.h coll/sched.c coll/sched_engine.c \
	coll/registry.c coll/select.c coll/cost.h coll/cost.c \
	coll/ring.h coll/ring.c coll/rooted.h coll/exchange.h \
	coll/bcast/binomial.c coll/bcast/scatter_allgather.c \
	coll/reduce/binomial.c coll/reduce/reduce_scatter_gather.c \
	coll/gather/binomial.c coll/scatter/binomial.c coll/barrier/dissemination.c \
	coll/allgather/recursive_doubling.c coll/allgather/bruck.c coll/allgather/ring.c \
	coll/allgatherv/ring.c \
	coll/reduce_scatter/recursive_halving.c coll/reduce_scatter/ring.c \
	coll/reduce_scatter_v/ring.c \
	coll/alltoall/pairwise.c coll/alltoall/bruck.c coll/alltoallv/pairwise.c \
	coll/allreduce/fold.h coll/allreduce/fold.c \
	coll/allreduce/recursive_doubling.c coll/allreduce/rabenseifner.c coll/allreduce/ring.c \
	coll/shm/shm.h coll/shm/op.h coll/shm/segment.c coll/shm/ops.c coll/shm/single_copy.c \
	coll/shm/algos.c coll/hier/hier.c coll/ordered/ordered.c
