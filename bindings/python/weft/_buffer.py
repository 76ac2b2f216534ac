"""Buffers handed to weft: numpy arrays, objects exposing
``__cuda_array_interface__`` (device memory), and DLPack producers
(``__dlpack__``: CPU tensors through numpy.from_dlpack, device tensors by
reading the DLTensor the capsule holds).

`resolve` checks what can be checked before calling C (supported dtype,
C-contiguous, writable where weft writes) and returns a `Buf`: the pointer,
element count, weft dtype, and the references that keep the memory alive.
"""
import ctypes

import numpy as np

from ._lib import Dtype

try:  # bfloat16 and the 8-bit floats are numpy dtypes only through ml_dtypes
    import ml_dtypes as _ml_dtypes

    BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
    # weft's FLOAT8_E4M3 is the "fn" variant (no inf), as torch's float8_e4m3fn
    _ML_DTYPES = {BFLOAT16: Dtype.BFLOAT16,
                  np.dtype(_ml_dtypes.float8_e4m3fn): Dtype.FLOAT8_E4M3,
                  np.dtype(_ml_dtypes.float8_e5m2): Dtype.FLOAT8_E5M2}
except ImportError:  # pragma: no cover - depends on the environment
    BFLOAT16 = None
    _ML_DTYPES = {}

_BY_KIND = {
    ("i", 1): Dtype.INT8, ("u", 1): Dtype.UINT8,
    ("i", 4): Dtype.INT32, ("u", 4): Dtype.UINT32,
    ("i", 8): Dtype.INT64, ("u", 8): Dtype.UINT64,
    ("f", 2): Dtype.FLOAT16, ("f", 4): Dtype.FLOAT32, ("f", 8): Dtype.FLOAT64,
}
_NUMPY = {
    Dtype.INT8: np.dtype(np.int8), Dtype.UINT8: np.dtype(np.uint8),
    Dtype.INT32: np.dtype(np.int32), Dtype.UINT32: np.dtype(np.uint32),
    Dtype.INT64: np.dtype(np.int64), Dtype.UINT64: np.dtype(np.uint64),
    Dtype.FLOAT16: np.dtype(np.float16), Dtype.FLOAT32: np.dtype(np.float32),
    Dtype.FLOAT64: np.dtype(np.float64),
}
for _dt, _weft in _ML_DTYPES.items():
    _NUMPY[_weft] = _dt

# DLPack: device types and (type code, bits) of the dtypes weft has
_DL_CPU, _DL_CUDA_HOST = 1, 3
_DL_DTYPES = {
    (0, 8): Dtype.INT8, (1, 8): Dtype.UINT8, (0, 32): Dtype.INT32, (1, 32): Dtype.UINT32,
    (0, 64): Dtype.INT64, (1, 64): Dtype.UINT64, (2, 16): Dtype.FLOAT16,
    (2, 32): Dtype.FLOAT32, (2, 64): Dtype.FLOAT64, (4, 16): Dtype.BFLOAT16,
}


_KNOWN = {}  # numpy dtype -> weft.Dtype, filled as dtypes are seen


def weft_dtype(dtype):
    """The weft.Dtype of a numpy dtype (or anything numpy.dtype accepts);
    TypeError for a dtype weft does not have."""
    found = _KNOWN.get(dtype) if isinstance(dtype, np.dtype) else None
    if found is not None:
        return found
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError("weft: %r is not a dtype (%s)" % (dtype, e)) from None
    found = _ML_DTYPES.get(dt)
    if found is not None:
        _KNOWN[dt] = found
        return found
    if not dt.isnative:
        raise TypeError("weft: dtype %s is not in native byte order" % dt.str)
    found = _BY_KIND.get((dt.kind, dt.itemsize))
    if found is not None:
        _KNOWN[dt] = found
    else:
        raise TypeError("weft: numpy dtype %s has no weft dtype (weft has int8, uint8, int32, "
                        "uint32, int64, uint64, float16, %sfloat32, float64%s)"
                        % (dt, "bfloat16, " if BFLOAT16 is not None else "",
                           ", float8_e4m3fn, float8_e5m2" if _ML_DTYPES else ""))
    return found


def numpy_dtype(dtype):
    """The numpy dtype of a weft.Dtype (bfloat16 and the 8-bit floats need ml_dtypes)."""
    dtype = Dtype(dtype)
    if dtype not in _NUMPY:
        raise TypeError("weft: %s arrays need the ml_dtypes package" % dtype.name.lower())
    return _NUMPY[dtype]


class Buf:
    """One resolved buffer. `obj` is what the caller passed (returned as the
    result); `array` a numpy view of host memory, None for device memory."""

    __slots__ = ("obj", "ptr", "count", "dtype", "itemsize", "device", "keep", "array", "shape")

    def __init__(self, obj, ptr, count, dtype, itemsize, device, keep, array, shape):
        self.obj, self.ptr, self.count, self.dtype = obj, ptr, count, dtype
        self.itemsize, self.device, self.keep = itemsize, device, keep
        self.array, self.shape = array, shape

    def offset(self, elements):
        return self.ptr + elements * self.itemsize


def _c_contiguous(shape, strides, itemsize):
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _from_numpy(obj, arr, what, write, keep):
    if not arr.flags.c_contiguous:
        raise ValueError("weft: %s is not C-contiguous (strides %s for shape %s); pass "
                         "numpy.ascontiguousarray(...) or a contiguous slice"
                         % (what, arr.strides, arr.shape))
    if write and not arr.flags.writeable and obj is arr:
        raise ValueError("weft: %s is read-only and weft writes the result into it" % what)
    dtype = weft_dtype(arr.dtype)
    if arr.flags.writeable and arr.nbytes and arr.dtype not in _ML_DTYPES:
        # the fast way to the address (the buffer protocol has no ml_dtypes types)
        ptr = ctypes.addressof(ctypes.c_char.from_buffer(arr))
    else:
        ptr = arr.ctypes.data
    return Buf(obj, ptr, arr.size, dtype, arr.itemsize, False, keep, arr, arr.shape)


def _from_cai(obj, what):
    cai = obj.__cuda_array_interface__
    shape = tuple(int(n) for n in cai["shape"])
    try:
        dt = np.dtype(cai["typestr"])
    except TypeError:
        raise TypeError("weft: %s has typestr %r, which is not a dtype weft has"
                        % (what, cai["typestr"])) from None
    dtype = weft_dtype(dt)
    strides = cai.get("strides")
    if strides is not None and not _c_contiguous(shape, strides, dt.itemsize):
        raise ValueError("weft: %s (__cuda_array_interface__) is not C-contiguous (strides %s "
                         "for shape %s)" % (what, tuple(strides), shape))
    ptr, _readonly = cai["data"]
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    return Buf(obj, int(ptr or 0), count, dtype, dt.itemsize, True, [obj], None, shape)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack_capsule(obj, what, device):
    """Read the DLTensor of an unconsumed capsule (device memory, or host
    memory where numpy has no from_dlpack). The capsule is kept (its
    destructor releases the tensor), so the memory stays valid while weft
    uses it."""
    capsule = obj.__dlpack__()
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    dtype = _DL_DTYPES.get((t.dtype.code, t.dtype.bits))
    if dtype is None or t.dtype.lanes != 1:
        raise TypeError("weft: %s has DLPack dtype (code %d, %d bits, %d lanes), which weft "
                        "does not have" % (what, t.dtype.code, t.dtype.bits, t.dtype.lanes))
    itemsize = t.dtype.bits // 8
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        strides = tuple(t.strides[i] * itemsize for i in range(t.ndim))
        if not _c_contiguous(shape, strides, itemsize):
            raise ValueError("weft: %s (DLPack) is not C-contiguous" % what)
    count = 1
    for n in shape:
        count *= n
    ptr = (t.data or 0) + t.byte_offset
    return Buf(obj, ptr, count, dtype, itemsize, device, [obj, capsule], None, shape)


def resolve(obj, what, write=False):
    """The Buf of obj; TypeError/ValueError naming `what` when weft cannot
    use it (write: weft writes into it)."""
    if isinstance(obj, np.ndarray):
        return _from_numpy(obj, obj, what, write, [obj])
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(obj, what)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        host = obj.__dlpack_device__()[0] in (_DL_CPU, _DL_CUDA_HOST)
        if host and hasattr(np, "from_dlpack"):
            # numpy marks imported arrays read-only (DLPack before 1.0 has no
            # such flag): the producer's memory is writable, weft writes it
            return _from_numpy(obj, np.from_dlpack(obj), what, write, [obj])
        return _from_dlpack_capsule(obj, what, not host)
    if obj is None:
        raise TypeError("weft: %s is None" % what)
    raise TypeError("weft: %s must be a numpy array or expose __cuda_array_interface__ or "
                    "__dlpack__, not %s" % (what, type(obj).__name__))


def allocate(like, shape, what):
    """A new host array for a result; device inputs need an explicit out."""
    if like.device:
        raise ValueError("weft: %s is device memory: pass out= (weft allocates host arrays "
                         "only)" % what)
    return np.empty(shape, dtype=numpy_dtype(like.dtype))
