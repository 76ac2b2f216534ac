#!/usr/bin/env bash
# libweft_mpi.so under unmodified MPI programs: test_mpi_coll (every
# interposed collective, checked element by element) at np 1..4 without
# and with the interposer preloaded, with identical results (digests),
# the interposer's statistics showing served calls, the forwarded cases
# (derived datatype, user op, intercommunicator) and the released
# communicators; MPI_Finalize waiting for every rank; WEFT_MPI=off forwarding everything; then programs
# nobody here wrote: an mpi4py script and Debian's hpcc, when installed.
# Every run has a deadline; a run that overstays it is killed with all
# its ranks.
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
prog="$top_builddir/tests/bindings/test_mpi_coll"
lib="$top_builddir/.libs/libweft_mpi.so"
if [ ! -x "$prog" ] || [ ! -f "$lib" ] || ! command -v mpirun >/dev/null; then
    echo "SKIP: test_mpi_coll, libweft_mpi.so or mpirun not available"
    exit 77
fi
. "${top_srcdir:?run through make check}/tests/mpi/mpirun_env.sh"
export WEFT_TIMEOUT=60
preload=(-x LD_PRELOAD="$lib" -x WEFT_MPI_STATS=1)
runs=0 failures=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
    failures=$((failures + 1))
    echo "FAIL: $*"
}

# run SECONDS LABEL mpirun-arguments...: output in $out, status in $rc; the
# job runs in its own session (a background job of this script is no group
# leader, so setsid does not fork: the session id is $!), and what is left
# of it after a failure or the deadline is killed whole
run() {
    local secs=$1 label=$2
    shift 2
    runs=$((runs + 1))
    setsid -w timeout -k 5 "$secs" mpirun "${mpirun_opts[@]}" "$@" >"$work/out" 2>&1 &
    local pid=$!
    wait $pid
    rc=$?
    out=$(cat "$work/out")
    if [ $rc -ne 0 ]; then
        pkill -KILL -s "$pid" 2>/dev/null
        fail "$label: exit $rc"
        tail -n 15 <<<"$out"
    fi
}

stat_field() { # the number after "$1 " in the stats line
    grep -o "^weft_mpi: served.*" <<<"$out" | grep -o "$1 [0-9]*" | head -n 1 | cut -d' ' -f2
}

for np in 1 2 3 4; do
    run 120 "np $np plain" -np $np "$prog"
    plain=$(grep '^test_mpi_coll: digest' <<<"$out")
    grep -q "^test_mpi_coll: $np ranks, .* 0 failed" <<<"$out" || fail "np $np plain: checks"

    run 120 "np $np interposed" -np $np "${preload[@]}" "$prog"
    [ "$(grep '^test_mpi_coll: digest' <<<"$out")" = "$plain" ] && [ -n "$plain" ] ||
        fail "np $np: results differ from plain Open MPI"
    grep -q "^test_mpi_coll: $np ranks, .* 0 failed" <<<"$out" || fail "np $np interposed: checks"
    grep -q '^test_mpi_coll: weft_comm_from_mpi ok' <<<"$out" || fail "np $np: weft_comm_from_mpi"
    [ "$(grep -c '^weft_mpi: served' <<<"$out")" = 1 ] || fail "np $np: not one stats line"
    served=$(stat_field served)
    [ "${served:-0}" -gt 500 ] || fail "np $np: served ${served:-none} calls, expected > 500"
    reasons=(dtype= op=)
    [ $np -ge 2 ] && reasons+=(intercomm=)
    for reason in "${reasons[@]}"; do
        grep -q "^weft_mpi: served.*reasons: .*$reason" <<<"$out" ||
            fail "np $np: no forwarded call counted as ${reason%=}"
    done
    released=$(stat_field released)
    [ "${released:-0}" -ge 6 ] || fail "np $np: released ${released:-none} weft communicators, \
expected the 6 the program freed"

    # one thread in MPI (MPI_THREAD_SINGLE): the interposer's unlocked path
    run 120 "np $np interposed, thread single" -np $np "${preload[@]}" "$prog" --single
    grep -q "^test_mpi_coll: $np ranks, .* 0 failed" <<<"$out" ||
        fail "np $np interposed, thread single: checks"
    served=$(stat_field served)
    [ "${served:-0}" -gt 500 ] || fail "np $np thread single: served ${served:-none} calls"
done

# device buffers (emu memory from weft_mem_alloc): served through weft's
# device path with the interposer, read as host memory by Open MPI without
dev="$top_builddir/tests/bindings/test_mpi_device"
for np in 2 3; do
    run 120 "device np $np plain" -np $np "$dev"
    grep -q "^test_mpi_device: $np ranks, [1-9][0-9]* checks, 0 failed" <<<"$out" ||
        fail "device np $np plain: checks"
    run 120 "device np $np interposed" -np $np "${preload[@]}" "$dev"
    grep -q "^test_mpi_device: $np ranks, [1-9][0-9]* checks, 0 failed" <<<"$out" ||
        fail "device np $np interposed: checks"
    [ "$(stat_field served)" -ge 20 ] 2>/dev/null || fail "device np $np: not every call served"
    # the four allreduces from host to emu memory, and only they, go to MPI
    grep -q "^weft_mpi: served.*(reasons: memory_type=4)" <<<"$out" ||
        fail "device np $np: not exactly the 4 calls of mixed memory forwarded to MPI"
done

# MPI_Finalize stops weft only once every rank has reached it: rank 0 waits there for the
# others, which arrive a second late
run 120 "finalize late" -np 3 "${preload[@]}" "$prog" --finalize-late
waited=$(grep -o '^weft_mpi: MPI_Finalize waited [0-9.]* s' <<<"$out" | cut -d' ' -f4)
awk -v w="${waited:-0}" 'BEGIN {exit !(w >= 0.5)}' ||
    fail "finalize late: rank 0 waited ${waited:-no time} s in MPI_Finalize for the ranks a \
second late, expected at least 0.5"

run 120 "WEFT_MPI=off" -np 2 "${preload[@]}" -x WEFT_MPI=off "$prog"
grep -q "^test_mpi_coll: 2 ranks, .* 0 failed" <<<"$out" || fail "WEFT_MPI=off: checks"
grep -q '^weft_mpi: served 0 calls, forwarded [1-9].*off=' <<<"$out" ||
    fail "WEFT_MPI=off: calls were served"

if /usr/bin/python3 -c 'import mpi4py, numpy' 2>/dev/null; then
    for np in 1 3; do
        run 120 "mpi4py np $np" -np $np "${preload[@]}" /usr/bin/python3 -m mpi4py \
            "$top_srcdir/tests/bindings/mpi4py_check.py"
        grep -q '^mpi4py_check: [0-9]* checks passed' <<<"$out" || fail "mpi4py np $np: checks"
        [ "$(stat_field served)" -gt 0 ] 2>/dev/null || fail "mpi4py np $np: nothing served"
    done
else
    echo "note: mpi4py or numpy missing for /usr/bin/python3: mpi4py run skipped"
fi

if [ -x /usr/bin/hpcc ]; then
    mkdir -p "$work/hpcc" && cp "$top_srcdir/tests/bindings/hpccinf.txt" "$work/hpcc/"
    cd "$work/hpcc" || exit 1 # hpcc reads hpccinf.txt and writes hpccoutf.txt in its cwd
    run 120 "hpcc np 2" -np 2 "${preload[@]}" /usr/bin/hpcc
    cd - >/dev/null || exit 1
    grep -q '^Success=1' "$work/hpcc/hpccoutf.txt" 2>/dev/null || fail "hpcc: no Success=1"
    grep -q '^HPL_Tflops=' "$work/hpcc/hpccoutf.txt" 2>/dev/null || fail "hpcc: HPL did not run"
    [ "$(stat_field served)" -gt 0 ] 2>/dev/null || fail "hpcc: nothing served"
else
    echo "note: /usr/bin/hpcc missing (Debian package hpcc): hpcc run skipped"
fi

echo "$runs mpirun jobs, $failures failures"
[ $failures -eq 0 ] && echo "PASS" || exit 1
