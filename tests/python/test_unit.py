"""Single-process unit tests: the bindings mirror include/weft.h (status
codes, dtypes, ops, constants, every function with its argument count),
dtype mapping, op names, weft.Error, finding the library, and a
communicator of one process (no mpirun)."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import weft
from weft import _lib

SRCDIR = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(__file__), "..", "..")
HEADER = os.path.join(SRCDIR, "include", "weft.h")
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(weft.__file__)))


def _header():
    with open(HEADER) as f:
        text = f.read()
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def test_status_codes_match_the_header():
    found = re.findall(r'X\((\w+), (-?\d+), ([01]), "([^"]*)"\)', _header())
    assert len(found) == len(weft.Status) and found
    for name, value, _breaks, desc in found:
        assert weft.Status[name] == int(value)
        assert weft.status_string(int(value)) == desc
        assert _lib.lib.weft_status_name(int(value)).decode() == "WEFT_" + name


def _enum(name):
    body = re.search(r"typedef enum \{([^}]*)\} %s;" % name, _header()).group(1)
    return [m.strip() for m in body.split(",") if m.strip()]


def test_dtypes_and_ops_match_the_header():
    dtypes = _enum("weft_dtype_t")
    assert dtypes[-1] == "WEFT_DTYPE_COUNT"
    assert ["WEFT_" + d.name for d in weft.Dtype] == dtypes[:-1]
    for d in weft.Dtype:
        assert weft.dtype_name(d) == d.name.lower()
    ops = _enum("weft_op_t")
    assert ops[-1] == "WEFT_OP_COUNT"
    assert ["WEFT_" + o.name for o in weft.Op] == ops[:-1]
    for o in weft.Op:
        assert weft.op_name(o) == o.name.lower()


def test_constants_match_the_header():
    h = _header()
    assert int(re.search(r"#define WEFT_UNIQUE_ID_BYTES (\d+)", h).group(1)) == \
        _lib.UNIQUE_ID_BYTES
    assert int(re.search(r"#define WEFT_TAG_UB (\d+)", h).group(1)) == weft.TAG_UB
    assert "#define WEFT_IN_PLACE ((const void *)(intptr_t)-1)" in h
    assert weft.IN_PLACE.value == 2 ** 64 - 1


def test_every_function_is_declared_with_its_arguments():
    decls = re.findall(r"^(?:weft_status_t|const char \*|size_t)\s*(weft_\w+)\(([^;]*)\);",
                       _header(), flags=re.M)
    assert len(decls) > 40
    names = {name for name, _ in decls}
    assert names == set(_lib._PROTOTYPES)
    for name, args in decls:
        n = 0 if args.strip() == "void" else len(args.split(","))
        fn = getattr(_lib.lib, name)
        assert len(fn.argtypes) == n, name
        assert fn.restype is not None, name


@pytest.mark.parametrize("dt,wd", [
    (np.int8, weft.Dtype.INT8), (np.uint8, weft.Dtype.UINT8), (np.int32, weft.Dtype.INT32),
    (np.uint32, weft.Dtype.UINT32), (np.int64, weft.Dtype.INT64),
    (np.uint64, weft.Dtype.UINT64), (np.float16, weft.Dtype.FLOAT16),
    (np.float32, weft.Dtype.FLOAT32), (np.float64, weft.Dtype.FLOAT64),
    (np.intc, weft.Dtype.INT32), (np.longlong, weft.Dtype.INT64), ("<f4", weft.Dtype.FLOAT32)])
def test_dtype_mapping(dt, wd):
    assert weft.weft_dtype(dt) is wd
    assert weft.numpy_dtype(wd) == np.dtype(dt)
    assert _lib.lib.weft_dtype_size(wd) == np.dtype(dt).itemsize


@pytest.mark.parametrize("dt", [np.int16, np.uint16, bool, np.complex64, np.longdouble,
                                ">i4", "U3", object])
def test_dtypes_weft_lacks(dt):
    with pytest.raises(TypeError, match="weft"):
        weft.weft_dtype(dt)


def test_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert weft.weft_dtype(ml_dtypes.bfloat16) is weft.Dtype.BFLOAT16
    assert weft.numpy_dtype(weft.Dtype.BFLOAT16) == np.dtype(ml_dtypes.bfloat16)


def test_float8():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert weft.weft_dtype(ml_dtypes.float8_e4m3fn) is weft.Dtype.FLOAT8_E4M3
    assert weft.weft_dtype(ml_dtypes.float8_e5m2) is weft.Dtype.FLOAT8_E5M2
    assert weft.numpy_dtype(weft.Dtype.FLOAT8_E4M3) == np.dtype(ml_dtypes.float8_e4m3fn)
    assert weft.numpy_dtype(weft.Dtype.FLOAT8_E5M2) == np.dtype(ml_dtypes.float8_e5m2)
    # the other float8 variants are other formats
    with pytest.raises(TypeError, match="weft"):
        weft.weft_dtype(ml_dtypes.float8_e4m3fnuz)


def test_bfloat16_without_ml_dtypes():
    if weft._buffer.BFLOAT16 is not None:
        pytest.skip("ml_dtypes is installed")
    with pytest.raises(TypeError, match="bfloat16 arrays need the ml_dtypes"):
        weft.numpy_dtype(weft.Dtype.BFLOAT16)
    with pytest.raises(TypeError, match="float8_e4m3 arrays need the ml_dtypes"):
        weft.numpy_dtype(weft.Dtype.FLOAT8_E4M3)


def test_parse_op():
    assert weft.parse_op("sum") is weft.Op.SUM
    assert weft.parse_op("LXOR") is weft.Op.LXOR
    assert weft.parse_op(weft.Op.AVG) is weft.Op.AVG
    assert weft.parse_op(3) is weft.Op.MAX
    for bad in ("mean", 11, -1, None, True, 1.0):
        with pytest.raises(ValueError, match="unknown op"):
            weft.parse_op(bad)


def test_error_carries_status_name_and_message():
    e = weft.Error(weft.Status.ERR_MISMATCH, "counts differ")
    assert isinstance(e, Exception)
    assert (e.status, e.name, e.message) == (-8, "WEFT_ERR_MISMATCH", "counts differ")
    assert str(e) == "WEFT_ERR_MISMATCH: counts differ"
    assert weft.Error(-99, "x").name == "WEFT_STATUS_-99"
    import pickle  # mpi4py pickles it (from_mpi4py sends rank 0's failure)
    back = pickle.loads(pickle.dumps(e))
    assert (back.status, back.name, str(back)) == (e.status, e.name, str(e))


def test_c_failure_raises_error_with_last_error():
    with pytest.raises(weft.Error) as e:
        weft.Comm.init_rank(2, bytes(_lib.UNIQUE_ID_BYTES), 0)  # not a unique id
    assert e.value.status == weft.Status.ERR_INVALID_ARG
    assert "weft_comm_init_rank" in str(e.value) and "unique id" in str(e.value)
    uid = weft.get_unique_id()
    with pytest.raises(weft.Error) as e:
        weft.Comm.init_rank(2, uid, 5)
    assert e.value.status == weft.Status.ERR_INVALID_ARG and "rank 5" in str(e.value)
    with pytest.raises(ValueError, match="128 bytes"):
        weft.Comm.init_rank(1, b"short", 0)


def test_unique_id_communicator_of_one():
    uid = weft.get_unique_id()
    assert isinstance(uid, bytes) and len(uid) == _lib.UNIQUE_ID_BYTES
    with weft.Comm.init_rank(1, uid, 0) as c:
        assert (c.rank, c.size) == (0, 1)
        x = np.arange(5, dtype=np.int32)
        np.testing.assert_array_equal(c.allreduce(x, out=np.empty_like(x)), x)
    assert c.destroyed


def test_world_outside_a_launcher_is_this_process():
    with weft.Comm.world() as c:
        assert (c.rank, c.size) == (0, 1)
        assert "rank 0 of 1" in repr(c)
        x = np.arange(6, dtype=np.float64)
        np.testing.assert_array_equal(c.allgather(x), x.reshape(1, 6))
        np.testing.assert_array_equal(c.reduce_scatter(x.copy(), "max"), x)
        req = c.ibarrier()
        assert req.test() and req.done
    with pytest.raises(weft.Error, match="destroyed") as e:
        c.barrier()
    assert e.value.status == weft.Status.ERR_INVALID_ARG


def _run(code, env):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=60)


def test_library_not_found_is_a_clear_error():
    r = _run("import weft", {"WEFT_LIBRARY": "/nonexistent/libweft.so",
                             "PYTHONPATH": PACKAGE})
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "WEFT_LIBRARY" in r.stderr
    assert "/nonexistent/libweft.so" in r.stderr


def test_library_without_the_api_is_refused():
    r = _run("import weft", {"WEFT_LIBRARY": "libm.so.6", "PYTHONPATH": PACKAGE})
    assert r.returncode != 0
    assert "libm.so.6 lacks weft_init" in r.stderr


def test_library_found_by_the_loader(tmp_path):
    """Without WEFT_LIBRARY, a copy of the package outside the source tree
    loads libweft.so.0 through the dynamic loader's path."""
    import shutil
    shutil.copytree(os.path.join(PACKAGE, "weft"), tmp_path / "weft",
                    ignore=shutil.ignore_patterns("__pycache__"))
    libdir = os.path.dirname(os.path.realpath(_lib.library_path))
    r = _run("import weft; print(weft.library_path)",
             {"WEFT_LIBRARY": "", "PYTHONPATH": str(tmp_path), "LD_LIBRARY_PATH": libdir})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith("libweft.so")


def test_library_found_in_the_build_tree():
    """Run from a built source tree (not a VPATH build) without
    WEFT_LIBRARY, the package loads <top>/.libs/libweft.so."""
    tree = os.path.normpath(os.path.join(PACKAGE, "..", "..", ".libs", "libweft.so"))
    if not os.path.exists(tree):
        pytest.skip("no library in this source tree (a VPATH build)")
    r = _run("import weft; print(weft.library_path)", {"WEFT_LIBRARY": "", "PYTHONPATH": PACKAGE})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == tree


def test_exit_with_live_communicators_and_requests():
    """atexit frees live requests, destroys communicators, finalizes."""
    code = ("import numpy as np, weft\n"
            "c = weft.Comm.world(); d = c.dup()\n"
            "r = d.iallreduce(np.ones(4, np.int32))\n"
            "print('ok')\n")
    r = _run(code, {"WEFT_LIBRARY": _lib.library_path, "PYTHONPATH": PACKAGE})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    assert r.stderr == ""


def test_stats_count_the_calls_made():
    """WEFT_STATS=1: Comm.stats() reports exactly the calls made, their
    bytes (count x 4 for float32 allreduce) and the power-of-4 bucket;
    reset_stats() empties it; without WEFT_STATS it is empty."""
    code = ("import numpy as np, weft\n"
            "c = weft.Comm.world()\n"
            "c.reset_stats()\n"
            "for _ in range(3):\n"
            "    c.allreduce(np.ones(100, np.float32))\n"
            "c.bcast(np.ones(5, np.float64), root=0)\n"
            "s = c.stats()\n"
            "print(sorted((e['collective'], e['bucket_lo'], e['bucket_hi'], e['calls'],\n"
            "              e['bytes'], e['seconds'] > 0) for e in s))\n"
            "c.reset_stats(); print(c.stats())\n")
    env = {"WEFT_LIBRARY": _lib.library_path, "PYTHONPATH": PACKAGE}
    r = _run(code, dict(env, WEFT_STATS="1"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "[('allreduce', 256, 1024, 3, 1200, True), ('bcast', 16, 64, 1, 40, True)]", "[]"]
    r = _run("import numpy as np, weft\nc = weft.Comm.world()\n"
             "c.allreduce(np.ones(4, np.int32)); print(c.stats())\n", dict(env, WEFT_STATS="no"))
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr
