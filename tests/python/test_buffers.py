"""Objects other than numpy arrays: DLPack producers (host memory goes
through numpy.from_dlpack and is served; device memory is read from the
capsule) and __cuda_array_interface__ (device memory: served only by a
libweft with a device backend, else weft.Error(ERR_UNSUPPORTED) before
anything is sent)."""
import numpy as np
import pytest

import weft
from weft import _buffer, _lib
from conftest import data, expected_reduce, same

HAS_DEVICE_BACKEND = hasattr(_lib.lib, "weft_mem_type")


class HostTensor:
    """A DLPack producer over a numpy array (like a CPU torch tensor)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


class FakeDeviceTensor(HostTensor):
    """Claims to be CUDA memory (kDLCUDA); the capsule is numpy's."""

    def __dlpack_device__(self):
        return (2, 0)


class FakeCudaArray:
    def __init__(self, array, strides=None, typestr=None):
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape, "typestr": typestr or array.dtype.str,
            "data": (array.ctypes.data, False), "strides": strides, "version": 3}


def test_dlpack_host_in_place_and_out(comm):
    p, me = comm.size, comm.rank
    t = HostTensor(data(np.int64, 50, me))
    assert comm.allreduce(t) is t  # the caller's object is the result
    same(t.array, expected_reduce(np.int64, 50, p, "sum"))
    src = HostTensor(data(np.float32, 12 * p, me))
    out = HostTensor(np.zeros(12 * p, np.float32))
    assert comm.alltoall(src, out=out) is out
    same(out.array, np.concatenate([data(np.float32, 12 * p, r)[me * 12:(me + 1) * 12]
                                    for r in range(p)]))
    got = comm.allgather(HostTensor(data(np.uint8, 3, me)))  # allocated: a numpy array
    same(got, np.stack([data(np.uint8, 3, r) for r in range(p)]))


def test_dlpack_host_checks():
    with pytest.raises(ValueError, match="contiguous"):
        _buffer.resolve(HostTensor(np.zeros((4, 4), np.float32).T), "buf")
    with pytest.raises(TypeError, match="int16"):
        _buffer.resolve(HostTensor(np.zeros(4, np.int16)), "buf")


def test_dlpack_device_capsule_is_read():
    a = np.arange(24, dtype=np.float16).reshape(4, 6)
    b = _buffer.resolve(FakeDeviceTensor(a), "buf")
    assert (b.ptr, b.count, b.dtype, b.shape, b.device) == \
        (a.ctypes.data, 24, weft.Dtype.FLOAT16, (4, 6), True)
    v = a[1:3]  # a contiguous slice: the capsule's pointer is the slice's
    b = _buffer.resolve(FakeDeviceTensor(v), "buf")
    assert (b.ptr, b.count) == (v.ctypes.data, 12)
    with pytest.raises(ValueError, match="contiguous"):
        _buffer.resolve(FakeDeviceTensor(a[:, ::2]), "buf")


def test_cuda_array_interface_is_read():
    a = np.arange(10, dtype=np.uint32)
    b = _buffer.resolve(FakeCudaArray(a), "buf")
    assert (b.ptr, b.count, b.dtype, b.device) == (a.ctypes.data, 10, weft.Dtype.UINT32, True)
    b = _buffer.resolve(FakeCudaArray(a, strides=(4,)), "buf")  # explicit C strides
    assert b.count == 10
    with pytest.raises(ValueError, match="contiguous"):
        _buffer.resolve(FakeCudaArray(a[:5], strides=(8,)), "buf")
    with pytest.raises(TypeError, match="complex"):
        _buffer.resolve(FakeCudaArray(np.zeros(2, np.complex64)), "buf")


def test_device_memory_needs_the_device_backend(comm):
    """Objects that claim device memory libweft does not know as device
    memory (here: host memory behind a CUDA interface) are refused before
    anything is sent."""
    p, me = comm.size, comm.rank
    a = data(np.int32, 8, me)
    for make in (FakeCudaArray, FakeDeviceTensor):
        x = make(a.copy())
        with pytest.raises(weft.Error) as e:
            comm.allreduce(x)
        assert e.value.status == weft.Status.ERR_UNSUPPORTED
        assert "device backend" in str(e.value)
        same(x.array, a)
        with pytest.raises(ValueError, match="out="):
            comm.allgather(make(a))  # weft allocates host arrays only
    same(comm.allreduce(np.ones(2, np.int8)), np.full(2, p, np.int8))  # nothing was sent


class EmuArray:
    """Device memory of weft's emulated accelerator behind the CUDA array
    interface, as a framework tensor on a device would present it."""

    def __init__(self, n):
        import ctypes
        self.ptr = ctypes.c_void_p()
        assert _lib.lib.weft_mem_alloc(2, ctypes.c_size_t(4 * n), ctypes.byref(self.ptr)) == 0
        self.n = n
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<i4",
                                         "data": (self.ptr.value, False), "strides": None,
                                         "version": 3}

    def view(self):
        import ctypes
        return np.ctypeslib.as_array((ctypes.c_int32 * self.n).from_address(self.ptr.value))

    def free(self):
        _lib.lib.weft_mem_free(self.ptr)


@pytest.mark.skipif(not HAS_DEVICE_BACKEND, reason="libweft without its device layer")
def test_emu_device_memory_is_served(comm):
    p, me = comm.size, comm.rank
    src, out = EmuArray(1000), EmuArray(1000)
    try:
        src.view()[:] = data(np.int32, 1000, me)
        assert comm.allreduce(src, "sum", out=out) is out
        same(out.view(), expected_reduce(np.int32, 1000, p, "sum"))
        src.view()[:] = data(np.int32, 1000, me)
        comm.allreduce(src, "max")  # in place on device memory
        same(src.view(), expected_reduce(np.int32, 1000, p, "max"))
    finally:
        src.free()
        out.free()


def test_dlpack_host_without_numpy_from_dlpack(comm, monkeypatch):
    """Where numpy has no from_dlpack, host tensors are read from the
    capsule and served as host memory."""
    monkeypatch.delattr(np, "from_dlpack")
    p, me = comm.size, comm.rank
    t = HostTensor(data(np.int32, 40, me))
    b = _buffer.resolve(t, "buf")
    assert (b.ptr, b.count, b.device) == (t.array.ctypes.data, 40, False)
    assert comm.allreduce(t, "max") is t
    same(t.array, expected_reduce(np.int32, 40, p, "max"))
