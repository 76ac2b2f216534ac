"""weft: Python bindings for libweft, an MPI-compatible collectives runtime.

    import numpy as np, weft
    with weft.Comm.world() as comm:            # or weft.Comm.from_mpi4py(MPI.COMM_WORLD)
        x = np.ones(1024, dtype=np.float32)
        comm.allreduce(x, op="sum")           # in place: x is now comm.size everywhere

Every collective of include/weft.h, its nonblocking form (``i``-prefixed,
returning a Request), and send/recv, on numpy arrays and on objects that
expose ``__cuda_array_interface__`` or DLPack. A failing call raises
weft.Error (``.status``, ``.name``); bad arguments raise TypeError or
ValueError before anything is sent. ``weft.extension`` is the path of the
compiled module that runs the blocking calls on numpy arrays (None when the
package calls libweft through ctypes only). See bindings/python/README.md.
"""
from ._buffer import numpy_dtype, weft_dtype
from ._lib import ANY_SOURCE, IN_PLACE, TAG_UB, Dtype, Error, Op, Status, library_path
from .comm import Comm, Request, extension, get_unique_id, parse_op, waitall

__version__ = "0.1.0"

__all__ = ["Comm", "Request", "Error", "Status", "Dtype", "Op", "waitall", "get_unique_id",
           "weft_dtype", "numpy_dtype", "parse_op", "library_path", "TAG_UB", "IN_PLACE",
           "ANY_SOURCE",
           "status_string", "dtype_name", "op_name", "extension"]


def status_string(status):
    """weft_status_string of a status value."""
    from ._lib import status_string as s
    return s(status)


def dtype_name(dtype):
    """weft_dtype_name of a weft.Dtype."""
    from ._lib import lib
    return lib.weft_dtype_name(int(dtype)).decode()


def op_name(op):
    """weft_op_name of a weft.Op (or a name parse_op accepts)."""
    from ._lib import lib
    return lib.weft_op_name(int(parse_op(op))).decode()
