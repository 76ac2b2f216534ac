#!/usr/bin/env bash
# The Python bindings (bindings/python) with pytest and Debian's python:
# single-process unit tests (the bindings mirror include/weft.h, dtype
# mapping, weft.Error, loading the library) from the source tree, then the
# package pip installs into a venv (with its compiled module weft._core,
# which must be there): the unit tests of the compiled path, every
# collective on numpy arrays, errors, DLPack/__cuda_array_interface__ objects and mpi4py
# interop under mpirun -np 1..4, the same at -np 2 from the source tree
# (ctypes only), and a short run of python3 -m weft.bench, with libweft
# from the build tree (WEFT_LIBRARY). Every rank of every job must report a
# pytest exit status of 0 (5, "no tests collected", fails); a job that
# overstays its deadline is killed with all its ranks.
set -u
: "${top_builddir:?run through make check}" "${top_srcdir:?run through make check}"
python=/usr/bin/python3
lib="$top_builddir/.libs/libweft.so"
tests="$top_srcdir/tests/python"
if [ ! -x "$python" ] || ! "$python" -c 'import numpy, pytest' 2>/dev/null; then
    echo "SKIP: $python with numpy and pytest is needed (tools/deps.sh installs them)"
    exit 77
fi
if [ ! -e "$lib" ]; then
    echo "FAIL: $lib is missing (build first)"
    exit 1
fi
export WEFT_LIBRARY="$lib" PYTHONPATH="$top_srcdir/bindings/python:$tests"
export PYTHONDONTWRITEBYTECODE=1 WEFT_TIMEOUT=60
pytest_opts=(-q -p no:cacheprovider -o console_output_style=classic)
results=$(mktemp -d)
failures=0

cleanup() { # the ranks of an overdue job, by the pids they recorded
    local f
    for f in "$results"/*/pid.*; do
        [ -e "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
    done
}
trap 'cleanup; rm -rf "$results"' EXIT

check_ranks() { # label, directory, expected rank count
    local label=$1 dir=$2 np=$3 r rc ok=1
    for ((r = 0; r < np; r++)); do
        rc=$(cat "$dir/rc.$r" 2>/dev/null || echo missing)
        echo "$label rank $r: $(tail -n 1 "$dir/log.$r" 2>/dev/null) (pytest exit $rc)"
        [ "$rc" = 0 ] || ok=0
    done
    if [ $ok -eq 0 ]; then
        failures=$((failures + 1))
        for ((r = 0; r < np; r++)); do
            echo "----- $label rank $r -----"
            tail -n 60 "$dir/log.$r" 2>/dev/null
        done
    fi
}

# single process, no launcher
mkdir "$results/unit"
WEFT_PYTEST_RESULTS="$results/unit" timeout -k 5 300 "$python" -m pytest "${pytest_opts[@]}" \
    "$tests/test_unit.py" >"$results/unit/log.0" 2>&1
check_ranks unit "$results/unit" 1

# installed as the README says (pip install into a venv, from a copy: pip
# builds in the source folder, which may be read-only), then imported from
# another folder without WEFT_LIBRARY or PYTHONPATH: the package loads the
# library recorded when it was built (WEFT_LIBRARY_DIR here; the source tree
# for an in-tree install), has its compiled module (built against
# WEFT_INCLUDE_DIR's weft.h here) and a communicator of one rank works. The
# tests below run with this installed package (its site-packages folder).
inst="$results/install"
mkdir -p "$inst/run"
cp -R "$top_srcdir/bindings/python" "$inst/src"
chmod -R u+w "$inst/src"
check_install='import weft, numpy as np
assert weft.library_path == "'"$(cd "$top_builddir/.libs" && pwd)"'/libweft.so", weft.library_path
with weft.Comm.init_rank(1, weft.get_unique_id(), 0) as c:
    x = np.arange(5, dtype=np.float32)
    assert (c.allreduce(x, out=np.empty_like(x)) == x).all()
assert weft.extension and weft.extension.startswith("'"$inst"'/venv/"), weft.extension
print("installed package: libweft from", weft.library_path, "compiled module", weft.extension)'
if timeout 300 "$python" -m venv --system-site-packages "$inst/venv" >"$inst/log" 2>&1 &&
        WEFT_LIBRARY_DIR="$top_builddir/.libs" WEFT_INCLUDE_DIR="$top_srcdir/include" \
            timeout 300 "$inst/venv/bin/pip" install -q \
            --no-build-isolation --no-deps "$inst/src" >>"$inst/log" 2>&1 &&
        (cd "$inst/run" && env -u WEFT_LIBRARY -u PYTHONPATH timeout 120 \
            "$inst/venv/bin/python" -c "$check_install") >>"$inst/log" 2>&1; then
    tail -n 1 "$inst/log"
else
    echo "FAIL: pip install ./bindings/python into a venv, then import weft"
    tail -n 20 "$inst/log"
    exit 1 # the tests below need the installed package
fi
pkg=$("$inst/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')

mkdir "$results/core"
WEFT_EXPECT_EXTENSION=1 PYTHONPATH="$pkg:$tests" WEFT_PYTEST_RESULTS="$results/core" \
    timeout -k 5 300 "$python" -m pytest "${pytest_opts[@]}" "$tests/test_core.py" \
    >"$results/core/log.0" 2>&1
check_ranks "compiled path, alone" "$results/core" 1

if ! command -v mpirun >/dev/null || ! "$python" -c 'import mpi4py' 2>/dev/null; then
    [ $failures -eq 0 ] || exit 1
    echo "SKIP: the multi-process tests need mpirun and mpi4py (tools/deps.sh installs them)"
    exit 77
fi
# under mpirun; jobs of the suite's mpirun scripts run one at a time.
# np 1..4 with the built package (compiled path), then np 2 from the source
# tree (ctypes only: the path every call the compiled module declines takes)
. "${top_srcdir:?run through make check}/tests/mpi/mpirun_env.sh"
for job in 1:built 2:built 3:built 4:built 2:tree; do
    np=${job%:*} how=${job#*:}
    dir="$results/np$np-$how"
    mkdir "$dir"
    if [ "$how" = built ]; then
        path="$pkg:$tests" expect=1
    else
        path="$top_srcdir/bindings/python:$tests" expect=0
    fi
    PYTHONPATH="$path" WEFT_EXPECT_EXTENSION=$expect WEFT_PYTEST_RESULTS="$dir" \
        timeout -k 5 300 mpirun -np "$np" --oversubscribe --bind-to none \
        --mca mpi_yield_when_idle 1 -x WEFT_LIBRARY -x PYTHONPATH -x PYTHONDONTWRITEBYTECODE \
        -x WEFT_TIMEOUT -x WEFT_PYTEST_RESULTS -x WEFT_EXPECT_EXTENSION \
        bash -c 'exec "$0" "$@" >"$WEFT_PYTEST_RESULTS/log.$OMPI_COMM_WORLD_RANK" 2>&1' \
        "$python" -m pytest "${pytest_opts[@]}" "$tests/test_collectives.py" \
        "$tests/test_errors.py" "$tests/test_buffers.py" "$tests/test_mpi4py.py" \
        "$tests/test_core.py" >"$dir/mpirun.out" 2>&1
    rc=$?
    [ $rc -ne 0 ] && { echo "mpirun -np $np ($how) exited $rc"; tail -n 5 "$dir/mpirun.out"; }
    check_ranks "mpirun -np $np ($how)" "$dir" "$np"
    cleanup
done
# the benchmark module (built package) runs and its checked pass agrees with MPI
out=$(set -o pipefail; PYTHONPATH="$pkg" timeout -k 5 300 mpirun -np 2 --oversubscribe \
    --bind-to none --mca mpi_yield_when_idle 1 -x WEFT_LIBRARY -x PYTHONPATH -x WEFT_TIMEOUT \
    "$python" -m weft.bench -e 64k -n 10 -r 2 2>&1 | tr -d '\000')
rc=$?
if [ $rc -ne 0 ] || ! grep -q '^# check: every size ok' <<<"$out" || \
        ! grep -qE '^ +65536 +16384 +[0-9.]+ +[0-9.]+ +[0-9.]+$' <<<"$out"; then
    failures=$((failures + 1))
    echo "FAIL: mpirun -np 2 python3 -m weft.bench -e 64k (exit $rc)"
    tail -n 20 <<<"$out"
else
    echo "weft.bench -np 2 8 B..64 KiB: check ok, every size timed"
fi
[ $failures -eq 0 ] && echo "PASS" || { echo "FAIL: $failures job(s)"; exit 1; }
