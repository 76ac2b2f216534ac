#!/usr/bin/env bash
# The soak (issue 14): weft running for a while, every result checked, and
# its resident memory, descriptors and mappings watched; ends with one line
# "soak: N passed, N failed" (or "soak-leak: ...").
#
#   bash tools/soak.sh [SECONDS]    # default 60 (or $SOAK_SECONDS)
#   bash tools/soak.sh leak [SECONDS]  # default 15, under LeakSanitizer
#
# The timed job runs, from the in-tree build (tools/build.sh):
#   soak    tests/soak/soak for 75% of SECONDS at 4 ranks on 2 virtual nodes
#           (shared memory and UCX): every collective in every form,
#           point to point, emu enqueues, dup/split/destroy churn and aborts;
#   churn   tests/soak/soak --churn at 2 ranks: dup + allreduce + destroy
#           cycles, for the figure "KiB per 1000 comm cycles" (about 25%
#           of SECONDS);
#   planted tests/soak/soak --churn with --leak 2048 at 2 ranks (about 10 s):
#           the growth checks must fail on a leak of 2 KiB per cycle, or
#           they could not fail at all;
#   mpi     tests/soak/mpi_churn under mpirun -np 2 with libweft_mpi.so
#           preloaded: MPI_Comm_dup/split + MPI_Allreduce + MPI_Comm_free
#           (about 25% of SECONDS; skipped without mpirun or Open MPI);
# each fails on a wrong result, on resident memory more than 2 MiB above
# the sample after the warm-up (the first 20% of the run), on malloc's
# bytes in use growing in the second half of the rest by more than 128 KiB
# and more than half the first half's growth (a steady leak grows as much
# in both halves, caches that fill up level off), or on
# any more descriptors or mappings than after the warm-up; the soak prints
# every rank's resident memory and malloc figures every minute. The mpi
# part also checks that the interposer served the allreduces and released
# a weft communicator for every MPI_Comm_free.
#
# The leak job builds the soak in the ASan+UBSan build of tools/sanitize.sh
# (_build/asan, configured the same way) and runs a short soak and churn
# there with --no-limits (ASan's own memory grows); LeakSanitizer checks
# every rank at its exit, after weft_finalize, and any report fails it.
#
# Every run has a deadline and runs in its own session; what is left of it
# at the deadline is killed whole.
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
mode=timed
if [ "${1:-}" = leak ]; then
    mode=leak
    shift
fi
secs=${1:-${SOAK_SECONDS:-$([ $mode = leak ] && echo 15 || echo 60)}}
case "$secs" in ''|*[!0-9]*) echo "usage: $0 [leak] [SECONDS]" >&2; exit 2 ;; esac
job=soak
[ $mode = leak ] && job=soak-leak
start=$(date +%s)
passed=0 failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

pass() { passed=$((passed + 1)); echo "$job: $1: passed"; }
fail() { failed=$((failed + 1)); echo "$job: $1: FAILED${2:+ ($2)}"; }

# run LIMIT LABEL command...: output in $work/out (and on stdout), status
# in $rc. The command runs in its own session (setsid of a background job
# does not fork, so the session id is $!); at the deadline or on failure
# whatever is left of that session is killed.
run() {
    local limit=$1 label=$2
    shift 2
    echo "== $label: $*"
    setsid -w timeout -k 5 "$limit" "$@" >"$work/out" 2>&1 &
    local pid=$!
    wait $pid
    rc=$?
    pkill -KILL -s "$pid" 2>/dev/null
    # UCX's per-descriptor warnings at finalize are summarised, not repeated
    grep -v 'UCX  WARN  unexpected tag-receive descriptor' "$work/out"
    local ucxwarn
    ucxwarn=$(grep -c 'UCX  WARN  unexpected tag-receive descriptor' "$work/out")
    [ "$ucxwarn" -gt 0 ] && echo "$label: UCX warned of $ucxwarn unexpected messages left unmatched at finalize"
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "$label: killed at its deadline of $limit s"
    return 0
}

fail_build() {
    echo "$1"; tail -n 30 "$2" 2>/dev/null
    echo "$job: 0 passed, 1 failed"; exit 1
}

if [ $mode = timed ]; then
    log=$work/build.log
    bash tools/build.sh >"$log" 2>&1 || fail_build "build failed" "$log"
    targets=tests/soak/soak
    [ -f .libs/libweft_mpi.so ] && targets="$targets tests/soak/mpi_churn"
    # shellcheck disable=SC2086
    make -j2 $targets >"$log" 2>&1 || fail_build "building $targets failed" "$log"
    soak_s=$((secs * 3 / 4)) churn_s=$((secs / 4))
    [ $soak_s -lt 5 ] && soak_s=5
    [ $churn_s -lt 5 ] && churn_s=5

    run $((soak_s + 180)) "soak" ./tests/soak/soak --seconds $soak_s
    if [ $rc -eq 0 ] && grep -q '^soak: PASS' "$work/out"; then pass soak; else fail soak "exit $rc"; fi

    # a cycle takes 15 ms on an idle 2-core machine, 70 ms under the load of
    # parallel builds: about churn_s seconds' worth on a loaded machine
    cycles=$((churn_s * 20))
    run $((churn_s * 10 + 120)) "churn" ./tests/soak/soak --ranks 2 --rpn 0 --churn $cycles
    if [ $rc -eq 0 ] && grep -q '^churn: PASS' "$work/out"; then pass churn; else fail churn "exit $rc"; fi

    # the checks can fail: a planted leak of 2 KiB per cycle (about 1 MiB
    # over the cycles after warm-up) fails the second-half heap check
    run 180 "planted" ./tests/soak/soak --ranks 2 --rpn 0 --churn 600 --leak 2048
    if [ $rc -ne 0 ] && grep -q "FAIL: malloc's bytes in use grew" "$work/out"; then
        pass planted
    else
        fail planted "a leak of 2 KiB per cycle was not reported (exit $rc)"
    fi

    lib=$src/.libs/libweft_mpi.so
    if [ -x tests/soak/mpi_churn ] && [ -f "$lib" ] && command -v mpirun >/dev/null; then
        . tests/mpi/mpirun_env.sh
        run $((churn_s + 120)) "mpi" mpirun "${mpirun_opts[@]}" -np 2 -x LD_PRELOAD="$lib" \
            -x WEFT_MPI_STATS=1 -x WEFT_TIMEOUT=60 ./tests/soak/mpi_churn $churn_s
        cyc=$(sed -n 's/^mpi_churn: PASS: \([0-9]*\) cycles.*/\1/p' "$work/out")
        released=$(grep -o '^weft_mpi: served.*' "$work/out" | grep -o 'released [0-9]*' |
                   head -n 1 | cut -d' ' -f2)
        served=$(grep -o '^weft_mpi: served [0-9]*' "$work/out" | head -n 1 | cut -d' ' -f3)
        if [ $rc -ne 0 ] || [ -z "$cyc" ]; then
            fail mpi "exit $rc"
        elif [ "${released:-0}" -lt $((2 * cyc)) ] || [ "${served:-0}" -lt $((2 * cyc)) ]; then
            fail mpi "$cyc cycles, but the interposer served ${served:-no} calls and released \
${released:-no} weft communicators, expected at least $((2 * cyc)) of each"
        else
            pass mpi
        fi
    else
        echo "$job: mpi: skipped (mpirun, libweft_mpi.so or tests/soak/mpi_churn missing)"
    fi
else
    # the same build as tools/sanitize.sh asan: keep the flags in agreement
    san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    build=$src/_build/asan
    log=$build/soak-build.log
    git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
        fail_build "$job: needs a git checkout (it copies the files git lists)" /dev/null
    mkdir -p "$build"
    git ls-files -z --cached --others --exclude-standard |
        tar --null -T - -cf - | tar -xpf - -C "$build" || fail_build "copying the sources failed" /dev/null
    (
        cd "$build" || exit 1
        [ -x configure ] || ./autogen.sh >"$log" 2>&1 || exit 1
        if [ ! -f Makefile ]; then
            ./configure --quiet CFLAGS="-O1 -g $san" LDFLAGS="$san" >>"$log" 2>&1 || exit 1
        fi
        nice -n 10 make -j"${SANITIZE_JOBS:-2}" tests/soak/soak >>"$log" 2>&1
    ) || fail_build "$job: build failed (log: $log)" "$log"
    echo "build: $(( $(date +%s) - start )) s"
    sup=$src/tools/sanitizers
    export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
    export LSAN_OPTIONS="suppressions=$sup/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:suppressions=$sup/ubsan.supp"
    report='^(==[0-9]+==ERROR|SUMMARY: (Address|Undefined|Leak)Sanitizer)|runtime error:'

    run $((secs * 4 + 240)) "soak" "$build/tests/soak/soak" --seconds "$secs" --no-limits
    if [ $rc -eq 0 ] && grep -q '^soak: PASS' "$work/out" && ! grep -aqE "$report" "$work/out"; then
        pass soak
    else
        fail soak "exit $rc"
        grep -aE -A 25 "$report" "$work/out" | head -n 80
    fi
    run $((secs * 10 + 240)) "churn" "$build/tests/soak/soak" --ranks 2 --rpn 0 \
        --churn $((secs * 20)) --no-limits
    if [ $rc -eq 0 ] && grep -q '^churn: PASS' "$work/out" && ! grep -aqE "$report" "$work/out"; then
        pass churn
    else
        fail churn "exit $rc"
        grep -aE -A 25 "$report" "$work/out" | head -n 80
    fi
fi
echo "time: $(( $(date +%s) - start )) s"
echo "$job: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
