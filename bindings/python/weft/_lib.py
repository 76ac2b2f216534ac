"""libweft through ctypes: finding the library, the C prototypes of
include/weft.h, the status/dtype/op enums and weft.Error.

Every function of weft.h is declared here with its argtypes and restype;
nothing else in the package calls the library without going through
``check``, which turns a non-OK status into a weft.Error carrying it.
"""
import ctypes
import ctypes.util
import enum
import os

__all__ = ["Status", "Dtype", "Op", "Error", "lib", "library_path", "check", "IN_PLACE",
           "UNIQUE_ID_BYTES", "TAG_UB", "ANY_SOURCE"]

# The status list of weft.h (WEFT_STATUS_MAP), same names and values.
class Status(enum.IntEnum):
    OK = 0
    INPROGRESS = 1
    ERR_INVALID_ARG = -1
    ERR_NO_MEMORY = -2
    ERR_UNSUPPORTED = -3
    ERR_TRANSPORT = -4
    ERR_TIMEOUT = -5
    ERR_PEER_FAILED = -6
    ERR_ABORTED = -7
    ERR_MISMATCH = -8
    ERR_BOOTSTRAP = -9
    ERR_DEVICE = -10
    ERR_INTERNAL = -11
    ERR_NOT_INITIALIZED = -12


class Dtype(enum.IntEnum):
    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    BFLOAT16 = 7
    FLOAT32 = 8
    FLOAT64 = 9
    FLOAT8_E4M3 = 10
    FLOAT8_E5M2 = 11


class Op(enum.IntEnum):
    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    LAND = 8
    LOR = 9
    LXOR = 10


DTYPE_COUNT = 10
OP_COUNT = 11
UNIQUE_ID_BYTES = 128
UNIQUE_ID_STRLEN = 2 * UNIQUE_ID_BYTES
TAG_UB = 65535
ANY_SOURCE = -1  # WEFT_ANY_SOURCE: recv/irecv's source, any rank
# WEFT_IN_PLACE is ((const void *)(intptr_t)-1)
IN_PLACE = ctypes.c_void_p(ctypes.c_void_p(-1).value)


class Error(Exception):
    """A weft call failed: ``status`` is the weft_status_t value (an int, also
    a weft.Status), ``name`` its C name (``WEFT_ERR_INVALID_ARG``), and the
    message is weft_last_error() of the failing call (or the check that
    failed before calling C)."""

    def __init__(self, status, message):
        self.status = int(status)
        try:
            self.name = "WEFT_" + Status(self.status).name
        except ValueError:
            self.name = "WEFT_STATUS_%d" % self.status
        self.message = message
        super().__init__("%s: %s" % (self.name, message))

    def __reduce__(self):  # pickled as (status, message), e.g. by mpi4py
        return (Error, (self.status, self.message))


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_ubyte * UNIQUE_ID_BYTES)]


class StatsEntry(ctypes.Structure):
    """weft_stats_entry_t"""
    _fields_ = [("collective", ctypes.c_char_p), ("bucket_lo", ctypes.c_size_t),
                ("bucket_hi", ctypes.c_size_t), ("calls", ctypes.c_uint64),
                ("bytes", ctypes.c_uint64), ("seconds", ctypes.c_double),
                ("busbw_gbs", ctypes.c_double)]


_status_t = ctypes.c_int
_dtype_t = ctypes.c_int
_op_t = ctypes.c_int
_comm_t = ctypes.c_void_p
_req_t = ctypes.c_void_p
_vp = ctypes.c_void_p
_sz = ctypes.c_size_t
_int = ctypes.c_int
_szp = ctypes.POINTER(ctypes.c_size_t)
_commp = ctypes.POINTER(ctypes.c_void_p)
_reqp = ctypes.POINTER(ctypes.c_void_p)
_uidp = ctypes.POINTER(_UniqueId)
_intp = ctypes.POINTER(ctypes.c_int)

# name: (restype, argtypes), in the order of include/weft.h
_PROTOTYPES = {
    "weft_init": (_status_t, []),
    "weft_finalize": (_status_t, []),
    "weft_status_string": (ctypes.c_char_p, [_status_t]),
    "weft_status_name": (ctypes.c_char_p, [_status_t]),
    "weft_last_error": (ctypes.c_char_p, []),
    "weft_config_get": (_status_t, [ctypes.c_char_p, ctypes.c_char_p, _sz]),
    "weft_dtype_size": (_sz, [_dtype_t]),
    "weft_dtype_name": (ctypes.c_char_p, [_dtype_t]),
    "weft_op_name": (ctypes.c_char_p, [_op_t]),
    "weft_comm_world": (_status_t, [_commp]),
    "weft_get_unique_id": (_status_t, [_uidp]),
    "weft_comm_init_rank": (_status_t, [_int, _uidp, _int, _commp]),
    "weft_comm_abort": (_status_t, [_comm_t]),
    "weft_comm_split": (_status_t, [_comm_t, _int, _int, _commp]),
    "weft_comm_dup": (_status_t, [_comm_t, _commp]),
    "weft_unique_id_to_string": (_status_t, [_uidp, ctypes.c_char_p, _sz]),
    "weft_unique_id_from_string": (_status_t, [ctypes.c_char_p, _uidp]),
    "weft_comm_rank": (_status_t, [_comm_t, _intp]),
    "weft_comm_size": (_status_t, [_comm_t, _intp]),
    "weft_comm_destroy": (_status_t, [_comm_t]),
    "weft_comm_set_timeout": (_status_t, [_comm_t, ctypes.c_double]),
    "weft_comm_set_reproducible": (_status_t, [_comm_t, _int]),
    "weft_allreduce": (_status_t, [_vp, _vp, _sz, _dtype_t, _op_t, _comm_t]),
    "weft_reduce_scatter": (_status_t, [_vp, _vp, _sz, _dtype_t, _op_t, _comm_t]),
    "weft_allgather": (_status_t, [_vp, _vp, _sz, _dtype_t, _comm_t]),
    "weft_bcast": (_status_t, [_vp, _sz, _dtype_t, _int, _comm_t]),
    "weft_reduce": (_status_t, [_vp, _vp, _sz, _dtype_t, _op_t, _int, _comm_t]),
    "weft_gather": (_status_t, [_vp, _vp, _sz, _dtype_t, _int, _comm_t]),
    "weft_scatter": (_status_t, [_vp, _vp, _sz, _dtype_t, _int, _comm_t]),
    "weft_alltoall": (_status_t, [_vp, _vp, _sz, _dtype_t, _comm_t]),
    "weft_barrier": (_status_t, [_comm_t]),
    "weft_test": (_status_t, [_req_t, _intp]),
    "weft_wait": (_status_t, [_req_t]),
    "weft_waitall": (_status_t, [_int, _reqp]),
    "weft_request_free": (_status_t, [_req_t]),
    "weft_request_source": (_status_t, [_req_t, _intp]),
    "weft_iallreduce": (_status_t, [_vp, _vp, _sz, _dtype_t, _op_t, _comm_t, _reqp]),
    "weft_ireduce_scatter": (_status_t, [_vp, _vp, _sz, _dtype_t, _op_t, _comm_t, _reqp]),
    "weft_iallgather": (_status_t, [_vp, _vp, _sz, _dtype_t, _comm_t, _reqp]),
    "weft_ibcast": (_status_t, [_vp, _sz, _dtype_t, _int, _comm_t, _reqp]),
    "weft_ireduce": (_status_t, [_vp, _vp, _sz, _dtype_t, _op_t, _int, _comm_t, _reqp]),
    "weft_igather": (_status_t, [_vp, _vp, _sz, _dtype_t, _int, _comm_t, _reqp]),
    "weft_iscatter": (_status_t, [_vp, _vp, _sz, _dtype_t, _int, _comm_t, _reqp]),
    "weft_ialltoall": (_status_t, [_vp, _vp, _sz, _dtype_t, _comm_t, _reqp]),
    "weft_ibarrier": (_status_t, [_comm_t, _reqp]),
    "weft_iallgatherv": (_status_t, [_vp, _vp, _sz, _szp, _szp, _dtype_t, _comm_t, _reqp]),
    "weft_ialltoallv": (_status_t, [_vp, _vp, _szp, _szp, _szp, _szp, _dtype_t, _comm_t, _reqp]),
    "weft_ireduce_scatter_v": (_status_t, [_vp, _vp, _szp, _dtype_t, _op_t, _comm_t, _reqp]),
    "weft_send": (_status_t, [_vp, _sz, _dtype_t, _int, _int, _comm_t]),
    "weft_recv": (_status_t, [_vp, _sz, _dtype_t, _int, _int, _comm_t]),
    "weft_isend": (_status_t, [_vp, _sz, _dtype_t, _int, _int, _comm_t, _reqp]),
    "weft_irecv": (_status_t, [_vp, _sz, _dtype_t, _int, _int, _comm_t, _reqp]),
    "weft_allgatherv": (_status_t, [_vp, _vp, _sz, _szp, _szp, _dtype_t, _comm_t]),
    "weft_alltoallv": (_status_t, [_vp, _vp, _szp, _szp, _szp, _szp, _dtype_t, _comm_t]),
    "weft_reduce_scatter_v": (_status_t, [_vp, _vp, _szp, _dtype_t, _op_t, _comm_t]),
    "weft_comm_dump": (_status_t, [_comm_t, _vp]),
    "weft_stats": (_status_t, [_comm_t, _vp, _sz, _szp]),
    "weft_stats_print": (_status_t, [_comm_t, _vp]),
    "weft_stats_reset": (_status_t, [_comm_t]),
    # memory types, streams and the stream-ordered forms (device buffers)
    "weft_mem_alloc": (_status_t, [_int, _sz, _commp]),
    "weft_mem_free": (_status_t, [_vp]),
    "weft_mem_type": (_status_t, [_vp, _intp]),
    "weft_memtype_name": (ctypes.c_char_p, [_int]),
    "weft_stream_create": (_status_t, [_int, _commp]),
    "weft_stream_destroy": (_status_t, [_vp]),
    "weft_stream_synchronize": (_status_t, [_vp]),
    "weft_memcpy_async": (_status_t, [_vp, _vp, _sz, _vp]),
    "weft_group_start": (_status_t, []),
    "weft_group_end": (_status_t, []),
    "weft_stream_begin_capture": (_status_t, [_vp]),
    "weft_stream_end_capture": (_status_t, [_vp, _commp]),
    "weft_graph_launch": (_status_t, [_vp, _vp]),
    "weft_graph_destroy": (_status_t, [_vp]),
    "weft_allreduce_enqueue": (_status_t, [_vp, _vp, _sz, _dtype_t, _op_t, _comm_t, _vp]),
    "weft_reduce_scatter_enqueue": (_status_t, [_vp, _vp, _sz, _dtype_t, _op_t, _comm_t, _vp]),
    "weft_allgather_enqueue": (_status_t, [_vp, _vp, _sz, _dtype_t, _comm_t, _vp]),
    "weft_bcast_enqueue": (_status_t, [_vp, _sz, _dtype_t, _int, _comm_t, _vp]),
    "weft_reduce_enqueue": (_status_t, [_vp, _vp, _sz, _dtype_t, _op_t, _int, _comm_t, _vp]),
    "weft_gather_enqueue": (_status_t, [_vp, _vp, _sz, _dtype_t, _int, _comm_t, _vp]),
    "weft_scatter_enqueue": (_status_t, [_vp, _vp, _sz, _dtype_t, _int, _comm_t, _vp]),
    "weft_alltoall_enqueue": (_status_t, [_vp, _vp, _sz, _dtype_t, _comm_t, _vp]),
    "weft_barrier_enqueue": (_status_t, [_comm_t, _vp]),
    "weft_allgatherv_enqueue": (_status_t, [_vp, _vp, _sz, _szp, _szp, _dtype_t, _comm_t, _vp]),
    "weft_alltoallv_enqueue": (_status_t,
                               [_vp, _vp, _szp, _szp, _szp, _szp, _dtype_t, _comm_t, _vp]),
    "weft_reduce_scatter_v_enqueue": (_status_t,
                                      [_vp, _vp, _szp, _dtype_t, _op_t, _comm_t, _vp]),
    "weft_send_enqueue": (_status_t, [_vp, _sz, _dtype_t, _int, _int, _comm_t, _vp]),
    "weft_recv_enqueue": (_status_t, [_vp, _sz, _dtype_t, _int, _int, _comm_t, _vp]),
}


def _candidates():
    """Where to look for libweft, in order (see README: Finding libweft)."""
    env = os.environ.get("WEFT_LIBRARY")
    if env:
        return [("WEFT_LIBRARY", env)]
    found = []
    # bindings/python/weft/ in a built source tree: libtool puts the library
    # in the top directory's .libs/
    top = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "..", "..", ".."))
    tree = os.path.join(top, ".libs", "libweft.so")
    if os.path.exists(tree):
        found.append(("build tree", tree))
    try:  # an installed package: where the library was when it was built (setup.py)
        from . import _found
        found.extend(("recorded at install", p) for p in _found.LIBRARIES)
    except ImportError:
        pass
    name = ctypes.util.find_library("weft")
    if name:
        found.append(("find_library('weft')", name))
    found.append(("default", "libweft.so.0"))
    return found


def _load():
    tried = []
    for origin, path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s): %s" % (path, origin, e))
    raise ImportError("weft: cannot load libweft; set WEFT_LIBRARY to the path of libweft.so "
                      "(build tree: <top_builddir>/.libs/libweft.so) or install weft so that "
                      "the dynamic loader finds libweft.so.0. Tried: " + "; ".join(tried))


def _declare(handle, path):
    missing = []
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(handle, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if missing:
        raise ImportError("weft: %s lacks %s: it is older than the weft.h these bindings "
                          "mirror" % (path, ", ".join(missing)))


lib, library_path = _load()
_declare(lib, library_path)


def last_error():
    msg = lib.weft_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def status_string(status):
    s = lib.weft_status_string(int(status))
    return s.decode() if s else "unknown status %d" % status


def check(status, call):
    """Raise weft.Error for a non-OK status returned by `call`."""
    if status != Status.OK:
        msg = last_error() or status_string(status)
        raise Error(status, msg if call in msg else "%s: %s" % (call, msg))
    return status
