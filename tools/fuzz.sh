#!/usr/bin/env bash
# Build weft's libFuzzer targets (tests/fuzz/fuzz_*.c) and run each for a
# bounded time; end with one line "fuzz: N passed, N failed".
#
#   bash tools/fuzz.sh [SECONDS]     # default 30 s per target
#   FUZZ_TARGETS="tune size" bash tools/fuzz.sh 60
#
# Targets, one per parser of outside input:
#   tcp_frames  the TCP bootstrap root's frame parser (a live root on 127.0.0.1)
#   unique_id   weft_unique_id_from_string (WEFT_UNIQUE_ID)
#   tune        weft__coll_tune_load (WEFT_TUNE)
#   config      the WEFT_CONFIG_FILE reader (weft__config_load)
#   size        weft__parse_size (sizes of WEFT_* variables)
#
# Needs clang with libFuzzer (Debian: clang, libclang-rt-14-dev). The build
# lives in _build/fuzz/ (ignored): a copy of the working tree configured
# once with CC=clang and -fsanitize=fuzzer-no-link,address,undefined; the
# targets link its libweft_core archive. Each run starts from the committed
# seeds, tests/fuzz/corpus/TARGET/ (read only; regression inputs of fixed
# bugs live there too), and writes what it learns to _build/fuzz/corpus/;
# a crash, leak, sanitizer report or hang (-timeout=20 s per input) fails
# the target and leaves the input in _build/fuzz/artifacts/TARGET/.
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
secs=${1:-30}
targets=${FUZZ_TARGETS:-"tcp_frames unique_id tune config size"}
build=$src/_build/fuzz
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
start=$(date +%s)

fail_build() {
    echo "$1 (log: $build/build.log)"; tail -n 30 "$build/build.log" 2>/dev/null
    echo "fuzz: 0 passed, 1 failed"; exit 1
}
case "$secs" in ''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
command -v clang >/dev/null || fail_build "clang not found: install the Debian packages clang and libclang-rt-14-dev"

# 1. The library, built by clang with coverage for libFuzzer, from a copy of
#    the working tree (mtimes kept, so make stays incremental).
git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    fail_build "fuzz: needs a git checkout (it copies the files git lists)"
mkdir -p "$build"
git ls-files -z --cached --others --exclude-standard |
    tar --null -T - -cf - | tar -xpf - -C "$build" || fail_build "copying the sources failed"
(
    cd "$build" || exit 1
    [ -x configure ] || ./autogen.sh >build.log 2>&1 || exit 1
    if [ ! -f Makefile ]; then
        ./configure --quiet CC=clang CFLAGS="-O1 -g -fsanitize=fuzzer-no-link $san" \
            LDFLAGS="$san" >>build.log 2>&1 || exit 1
    fi
    # GCC's -fvect-cost-model (device/local.mk, the reduction loops) is unknown to clang
    nice -n 10 make -j2 libweft_hostreduce_la_CFLAGS='$(AM_CFLAGS) -ftree-vectorize' \
        libweft_core.la >>build.log 2>&1 || exit 1
    libs=$(pkg-config --libs ucx pmix hwloc)
    for t in $targets; do
        [ -f "tests/fuzz/fuzz_$t.c" ] || { echo "no target $t" >>build.log; exit 1; }
        if [ ! "tests/fuzz/fuzz_$t" -nt "tests/fuzz/fuzz_$t.c" ] ||
           [ ! "tests/fuzz/fuzz_$t" -nt .libs/libweft_core.a ]; then
            # shellcheck disable=SC2086
            nice -n 10 clang -std=gnu11 -O1 -g -fsanitize=fuzzer $san -pthread -D_GNU_SOURCE \
                -I. -Iinclude -o "tests/fuzz/fuzz_$t" "tests/fuzz/fuzz_$t.c" \
                .libs/libweft_core.a $libs -lm -lrt >>build.log 2>&1 || exit 1
        fi
    done
) || fail_build "fuzz: build failed"
echo "build: $(( $(date +%s) - start )) s"

# 2. Run each target for secs seconds.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
passed=0 failed=0
for t in $targets; do
    work=$build/corpus/$t art=$build/artifacts/$t/ log=$build/fuzz_$t.log
    mkdir -p "$work" "$art" "$src/tests/fuzz/corpus/$t"
    rm -f "$art"/*
    # shellcheck disable=SC2086
    timeout -s KILL $((secs + 120)) nice -n 10 "$build/tests/fuzz/fuzz_$t" \
        -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$art" "$work" "$src/tests/fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -aoE 'cov: [0-9]+' "$log" | tail -n 1)
    found=$(ls "$art" 2>/dev/null | head -n 3 | tr '\n' ' ')
    if [ "$rc" -eq 0 ] && [ -z "$found" ]; then
        passed=$((passed + 1))
        echo "fuzz_$t: ${execs:-?} executions in ${secs} s, ${cov:-cov: ?}, corpus $(ls "$work" | wc -l): nothing found"
    else
        failed=$((failed + 1))
        echo "fuzz_$t: ${execs:-?} executions, exit $rc: FOUND ${found:-a failure} (log: $log)"
        grep -aE -A 20 '^==[0-9]+==ERROR|runtime error:|deadly signal|ALARM|fuzz_' "$log" | head -n 40
    fi
done
echo "time: $(( $(date +%s) - start )) s"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
