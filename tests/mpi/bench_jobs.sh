# Sourced by the scripts that check weft_bench runs under mpirun
# (test_mpirun.sh, test_device_mpirun.sh, test_twohost.sh); they set bench,
# and mpirun_opts and mpirun_onenode_opts for the default bench_job.
#
# run NP LABEL ARGS... queues one checked weft_bench run (a segment);
# flush starts one job per process count with that count's queued
# segments joined by --then (weft_bench initialises weft anew for each, so
# each --algo holds for its own run): a job start is paid per group, not per
# run. Call flush before the environment changes, and at the end. A job
# fails when it exits non-zero, prints a WRONG row, or does not print the
# header and at least one checked row of every segment. bench_job runs a
# job; this one has a deadline of 2 minutes and 30 s per segment, and one
# that overstays it is killed with all its ranks (test_twohost.sh defines
# its own, on the two hosts).
runs=0 jobs=0 failures=0
declare -A queued labels

bench_cleanup() { pkill -KILL -f "$bench" 2>/dev/null; }
trap bench_cleanup EXIT

# bench_job NP NSEGS WEFT_BENCH-ARGS...: one job; its output in $out, its
# exit status in $rc
bench_job() {
    local np=$1 nsegs=$2
    shift 2
    out=$(timeout -k 5 $((120 + 30 * nsegs)) mpirun -np "$np" "${mpirun_opts[@]}" \
        "${mpirun_onenode_opts[@]}" "$bench" "$@" 2>&1)
    rc=$?
}

run() { # np, label, weft_bench arguments...
    local np=$1 label=$2
    shift 2
    runs=$((runs + 1))
    queued[$np]+="${queued[$np]:+ --then }-n 2 -w 1 --check $*"
    labels[$np]+="${labels[$np]:+; }$label"
}

flush() {
    local np nsegs
    for np in "${!queued[@]}"; do
        jobs=$((jobs + 1))
        nsegs=$(($(grep -o -- '--then' <<<"${queued[$np]}" | wc -l) + 1))
        # shellcheck disable=SC2086 # the queued segments are words without blanks
        bench_job "$np" "$nsegs" ${queued[$np]}
        if [ $rc -ne 0 ] || grep -q WRONG <<<"$out" ||
            [ "$(grep -c '^# weft_bench' <<<"$out")" -ne $nsegs ] ||
            [ "$(grep -c ' ok$' <<<"$out")" -lt $nsegs ]; then
            failures=$((failures + 1))
            echo "FAIL np=$np (exit $rc), one of: ${labels[$np]}"
            grep -E '^# weft_bench|WRONG|rank|rror' <<<"$out" | tail -n 30
            bench_cleanup
        fi
    done
    queued=() labels=()
}

# the last line of the scripts' output
bench_jobs_result() {
    echo "$runs runs in $jobs mpirun jobs, $failures failed"
    [ $failures -eq 0 ] && echo "PASS"
}
