#!/usr/bin/env bash
# The whole test suite: build if needed, run `make check`, print every
# suite's summary, then the hardening jobs below, and end with one line
# "N passed, N failed, N skipped". .ci/run runs this.
#
# --quick: the everyday run, `make check` alone, counted the same way.
set -uo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
--quick) quick=1 ;;
"") ;;
*)
    echo "usage: bash tools/test.sh [--quick]" >&2
    exit 2
    ;;
esac
start=$(date +%s)
bash tools/build.sh || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }
make -j"$(nproc)" check >make-check.out 2>&1
make_rc=$?
grep -E '^(PASS|FAIL|XFAIL|XPASS|SKIP|ERROR):' make-check.out || cat make-check.out

passed=0 failed=0 skipped=0
for trs in $(find tests -name '*.trs' | sort); do
    log=${trs%.trs}.log
    result=$(sed -n 's/^:test-result: //p' "$trs")
    synth=$(grep -a 'Synthesis: Tested:' "$log" | tail -n 1)
    if [ -n "$synth" ]; then
        # Criterion: count its own tests; a crash counts as a failure
        p=$(sed -E 's/.*Passing: ([0-9]+).*/\1/' <<<"$synth")
        f=$(sed -E 's/.*Failing: ([0-9]+).*/\1/' <<<"$synth")
        c=$(sed -E 's/.*Crashing: ([0-9]+).*/\1/' <<<"$synth")
        passed=$((passed + p)); failed=$((failed + f + c))
        echo "${log%.log}: $synth"
        if [ "$result" != PASS ] && [ $((f + c)) -eq 0 ]; then failed=$((failed + 1)); fi
    else
        case "$result" in
            PASS) passed=$((passed + 1)) ;;
            SKIP) skipped=$((skipped + 1)) ;;
            *) failed=$((failed + 1)) ;;
        esac
        echo "${log%.log}: $result"
    fi
    if [ "$result" != PASS ] && [ "$result" != SKIP ]; then
        echo "----- ${log} -----"; tail -n 40 "$log"; echo "-----"
    fi
done
# The hardening jobs: ASan+UBSan and TSan builds of the
# in-process, shared-memory and multi-process suites, and every fuzz target
# for a bounded time; then the soak (issue 14: a minute of everything with
# memory, descriptors and mappings watched) and its short leak-checked run;
# then torch's own distributed test suite against the backend "weft";
# each ends with "<job>: N passed, N failed".
hardening=("sanitize.sh asan" "sanitize.sh tsan" "fuzz.sh 30" "soak.sh 60" "soak.sh leak" "torch_suite.sh 2")
[ $quick -eq 1 ] && hardening=()
for job in "${hardening[@]}"; do
    name=${job%% *}
    echo
    echo "== tools/$job"
    bash tools/$job >"${name%.sh}-${job##* }.out" 2>&1
    job_rc=$?
    tail -n 12 "${name%.sh}-${job##* }.out"
    line=$(grep -E '^[a-z-]+: [0-9]+ passed, [0-9]+ failed' "${name%.sh}-${job##* }.out" | tail -n 1)
    if [ -z "$line" ]; then
        echo "tools/$job: no summary line (exit $job_rc)"
        failed=$((failed + 1))
        continue
    fi
    p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
    sk=$(grep -oE ', [0-9]+ skipped' <<<"$line" | grep -oE '[0-9]+' || echo 0)
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + sk))
    [ "$job_rc" -ne 0 ] && [ "$f" -eq 0 ] && failed=$((failed + 1))
done
echo
grep -h '^matrix ' tests/coll/*.log 2>/dev/null
echo "suite time: $(( $(date +%s) - start )) s"
if [ $make_rc -ne 0 ] && [ $failed -eq 0 ]; then
    tail -n 30 make-check.out
    failed=1
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
