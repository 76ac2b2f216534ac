#!/usr/bin/env bash
# Build weft with a sanitizer, out of the source tree, and run the suites it
# is meant to watch; end with one line "sanitize-KIND: N passed, N failed".
#
#   bash tools/sanitize.sh asan   # AddressSanitizer + UndefinedBehaviorSanitizer
#   bash tools/sanitize.sh tsan   # ThreadSanitizer
#
# The build lives in _build/KIND/ (ignored): a copy of the working tree (the
# files git tracks plus untracked, not ignored ones), so that an in-tree
# build of the same checkout does not stop configure. It is configured once
# with CFLAGS/LDFLAGS carrying the sanitizer and rebuilt incrementally.
#
# What runs (chosen to finish in about 10 minutes on 2 cores):
#   asan: whole suites tests/base/test_handles, tests/runtime/test_args, test_p2p, test_split,
#         test_multiproc (processes over UCX and the TCP bootstrap),
#         tests/pt2pt/test_loop, tests/coll/test_rooted, test_shm, test_stress;
#         subsets (SUBSETS below) of tests/coll/test_exchange (allgather bruck,
#         alltoallv pairwise, reduce_scatter_v shm) and test_algorithms
#         (allreduce ring, 64 rank counts): under ASan each test of those two
#         suites takes one to two minutes, the whole suites over half an hour.
#   tsan: tests/coll/test_stress, test_sched, tests/runtime/test_p2p,
#         tests/pt2pt/test_loop (in-process ranks, nonblocking requests).
#         Suites that fork processes (test_multiproc, tests/bootstrap/test_tcp)
#         cannot run under TSan: it stops a child that starts threads after a
#         fork of a threaded parent.
# Measured on a shared 2-core machine, builds excluded (1.5-5 minutes
# each the first time): asan 7 min (11-13 min under a load of 60-120), tsan
# 2.7 min (4.5 min under load).
#
# Errors stop the process that hits them (halt_on_error=1), so a report
# makes its Criterion test crash and count as failed. Leak checking is on
# for ASan. Suppressions in tools/sanitizers/ name third-party libraries
# only (today only Criterion needs one); weft's own code is never suppressed.
# TSan runs need two workarounds for third-party code, both outside weft:
# UCX's memory hooks are turned off (UCX_MEM_*), and Criterion gets a
# preloaded rand_r (tools/sanitizers/criterion_tsan.c) so that it can place
# its shared arena where TSan leaves room (Criterion issue #274).
# Environment: SANITIZE_JOBS (make -j, default 2).
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
kind=${1:-asan}
case "$kind" in
    asan) san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" ;;
    tsan) san="-fsanitize=thread" ;;
    *) echo "usage: $0 asan|tsan" >&2; exit 2 ;;
esac
build=$src/_build/$kind
jobs=${SANITIZE_JOBS:-2}
start=$(date +%s)

# The suites (Criterion programs) and, for long ones, a --filter pattern.
if [ "$kind" = asan ]; then
    suites="tests/base/test_handles tests/runtime/test_args tests/runtime/test_p2p tests/runtime/test_split
            tests/runtime/test_multiproc tests/pt2pt/test_loop tests/coll/test_rooted
            tests/coll/test_exchange tests/coll/test_shm tests/coll/test_stress
            tests/coll/test_algorithms"
else
    suites="tests/coll/test_stress tests/coll/test_sched tests/runtime/test_p2p
            tests/pt2pt/test_loop"
fi
declare -A SUBSETS=(
    [asan:tests/coll/test_exchange]='exchange/@(allgather_bruck|alltoallv_pairwise|reduce_scatter_v_shm)'
    [asan:tests/coll/test_algorithms]='matrix/allreduce_ring'
)

fail_build() {
    echo "$1 (log: $build/build.log)"; tail -n 30 "$build/build.log" 2>/dev/null
    echo "sanitize-$kind: 0 passed, 1 failed"; exit 1
}

# 1. Copy the working tree into the build directory (mtimes kept, so make
#    stays incremental), then configure once and build the suites.
git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    fail_build "sanitize-$kind: needs a git checkout (it copies the files git lists)"
mkdir -p "$build"
git ls-files -z --cached --others --exclude-standard |
    tar --null -T - -cf - | tar -xpf - -C "$build" || fail_build "copying the sources failed"
(
    cd "$build" || exit 1
    [ -x configure ] || ./autogen.sh >build.log 2>&1 || exit 1
    if [ ! -f Makefile ]; then
        ./configure --quiet CFLAGS="-O1 -g $san" LDFLAGS="$san" >>build.log 2>&1 || exit 1
    fi
    # shellcheck disable=SC2086
    nice -n 10 make -j"$jobs" $suites >>build.log 2>&1
) || fail_build "sanitize-$kind: build failed"
echo "build: $(( $(date +%s) - start )) s"

# 2. Run each suite with the sanitizer's options.
sup=$src/tools/sanitizers
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$sup/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:suppressions=$sup/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:suppressions=$sup/tsan.supp"
preload=
if [ "$kind" = tsan ]; then
    # Two third-party clashes with TSan, worked around outside weft: UCX's
    # memory hooks (the in-process suites need none) crash the test
    # processes, and Criterion cannot place its arena (see the shim).
    export UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none
    preload=$build/criterion_tsan.so
    gcc -shared -fPIC -O2 -o "$preload" "$sup/criterion_tsan.c" ||
        fail_build "cannot build $sup/criterion_tsan.c"
fi
passed=0 failed=0
for t in $suites; do
    args=()
    filter=${SUBSETS[$kind:$t]:-}
    [ -n "$filter" ] && args+=(--filter "$filter")
    log=$build/$t.sanitize.log
    t0=$(date +%s)
    ( cd "$build" && LD_PRELOAD=$preload timeout -s KILL 900 nice -n 10 "./$t" "${args[@]}" ) >"$log" 2>&1
    rc=$?
    synth=$(grep -a 'Synthesis: Tested:' "$log" | tail -n 1)
    p=0 f=0
    if [ -n "$synth" ]; then
        p=$(sed -E 's/.*Passing: ([0-9]+).*/\1/' <<<"$synth")
        f=$(sed -E 's/.*Failing: ([0-9]+).*/\1/' <<<"$synth")
        c=$(sed -E 's/.*Crashing: ([0-9]+).*/\1/' <<<"$synth")
        f=$((f + c))
    fi
    # A sanitizer report or a non-zero exit with no failing test still fails.
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    if grep -aqE '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|SUMMARY: (Address|Undefined|Leak|Thread)Sanitizer)|runtime error:' "$log" && [ "$f" -eq 0 ]; then
        f=1
    fi
    passed=$((passed + p)); failed=$((failed + f))
    echo "$t${filter:+ --filter '$filter'}: ${synth:-no synthesis (exit $rc)} [$(( $(date +%s) - t0 )) s]"
    if [ "$f" -ne 0 ]; then
        echo "----- $log -----"
        grep -aE -A 25 '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer)|runtime error:' "$log" | head -n 60
        grep -aE '\[FAIL\]|\[----\]|CRASH|signal' "$log" | head -n 40
        echo "-----"
    fi
done
echo "time: $(( $(date +%s) - start )) s"
echo "sanitize-$kind: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
