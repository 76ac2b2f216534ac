#!/usr/bin/env bash
# The flight recorder's dump files and tools/weft_doctor, end to end: 4 ranks
# under mpirun (tests/diag/diag_app) write their dumps to a fresh
# WEFT_DUMP_DIR, then weft_doctor must name what went wrong:
#   hang      the last rank skips one allreduce of five: the doctor names
#             the operation (seq) and rank 3 as the one that never arrived;
#   split     two communicators split at once (one id): rank 3 skips a call in
#             its half: the doctor tells the halves apart and diagnoses each;
#   die       rank 3 is killed: the others dump on the dead peer, and the
#             doctor names the failure and the rank without a dump;
#   mismatch  rank 3 reduces with max, the others with sum: the doctor names
#             the field and the ranks on each side;
#   block     ranks 0-2 wait in an allreduce rank 3 has not called yet;
#             SIGUSR1 (WEFT_DUMP_ON_SIGNAL=1) makes each of them dump while
#             blocked (point-to-point: with the step and the ranks it waits
#             for; and through shared memory);
#   wrap      the hang's dumps renumbered so that the operation that hung is
#             the first after seq wraps (65533, then 0): the same diagnosis,
#             ordered by serial; without serial (older dumps), by seq;
# and the doctor's errors: a missing or empty directory, malformed JSON,
# a file that is not a dump, dumps of two jobs mixed in one directory.
# Every mpirun has a deadline and runs in a session of its own, killed whole
# (its ranks included) when it ends or overstays.
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
app="$top_builddir/tests/diag/diag_app"
doctor="$top_srcdir/tools/weft_doctor"
py=/usr/bin/python3
if [ ! -x "$app" ] || ! command -v mpirun >/dev/null || [ ! -x $py ]; then
    echo "SKIP: diag_app, mpirun or $py not available"
    exit 77
fi
. "${top_srcdir:?run through make check}/tests/mpi/mpirun_env.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/weft-doctor.XXXXXX")
failures=0 checks=0 job= recovery=

# mpirun's ranks get process groups of their own, in the session setsid
# made for the job: everything in that session goes
kill_job() {
    [ -n "$job" ] && pkill -KILL -s "$job" 2>/dev/null
    job=
}

cleanup() {
    kill_job
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    failures=$((failures + 1))
    echo "FAIL: $*"
}

# expect LABEL TEXT FILE: FILE contains TEXT (a fixed string)
expect() {
    checks=$((checks + 1))
    grep -qF -- "$2" "$3" || { fail "$1: no '$2' in:"; sed 's/^/    /' "$3"; }
}

# launch NAME SCENARIO [VAR=value...]: 4 ranks in their own process group,
# in the background; the job's pid in $job
launch() {
    local name=$1 scenario=$2 envs=() kv
    shift 2
    for kv in "$@"; do envs+=(-x "$kv"); done
    mkdir -p "$work/$name"
    setsid timeout -s KILL 90 mpirun -np 4 "${mpirun_opts[@]}" ${recovery:+--enable-recovery} \
        -x WEFT_DUMP_DIR="$work/$name" \
        "${envs[@]}" "$app" "$scenario" >"$work/$name.out" 2>&1 &
    job=$!
}

# finish NAME: wait for the job; it must have exited 0 (every rank's checks)
finish() {
    local rc
    wait "$job"
    rc=$?
    kill_job
    checks=$((checks + 1))
    if [ $rc -ne 0 ]; then
        fail "$1: mpirun exited $rc"
        tail -n 20 "$work/$1.out"
    fi
}

# doctor NAME WANT_RC: run the doctor on NAME's dumps into NAME.doctor
doctor() {
    local rc
    $py "$doctor" "$work/$1" >"$work/$1.doctor" 2>&1
    rc=$?
    checks=$((checks + 1))
    [ $rc -eq "$2" ] || { fail "$1: weft_doctor exited $rc, not $2"; cat "$work/$1.doctor"; }
}

# --- hang: rank 3 skips the third of five allreduces --------------------------
launch hang hang WEFT_TIMEOUT=2
finish hang
for r in 0 1 2 3; do
    checks=$((checks + 1))
    [ -f "$work/hang/weft-comm0-rank$r-world$r.json" ] || fail "hang: no dump of rank $r"
done
# ranks 0-2 dumped when they timed out; rank 3 on weft_comm_dump
seq=$($py - "$work/hang" <<'EOF'
import json, sys
d = sys.argv[1]
dumps = [json.load(open("%s/weft-comm0-rank%d-world%d.json" % (d, r, r))) for r in range(4)]
for r, j in enumerate(dumps):
    assert j["comm"]["rank"] == r and j["comm"]["size"] == 4 and j["world_rank"] == r, j["comm"]
    assert j["reason"] == ("weft_comm_dump" if r == 3 else "timeout"), (r, j["reason"])
# five calls after the world's own operations: the last is the one that hangs
last = max(op["seq"] for op in dumps[0]["ops"])
for r in range(3):
    op = dumps[r]["ops"][-1]
    assert op["seq"] == last and op["state"] == "failed", (r, op)
    assert op["status"] == "WEFT_ERR_TIMEOUT" and "waiting for rank(s) 3" in op["error"], op
    assert dumps[r]["comm"]["failed"] == "WEFT_ERR_TIMEOUT"
    assert [o["state"] for o in dumps[r]["ops"][-5:-1]] == ["done"] * 4
assert dumps[3]["ops"][-1]["seq"] == last - 1 and dumps[3]["ops"][-1]["state"] == "done"
# far from a wrap, an operation's serial is its seq
assert all(o["serial"] == o["seq"] for j in dumps for o in j["ops"]), "serial != seq"
assert all(o["collective"] == "allreduce" and o["count"] == 4 and o["dtype"] == "float32"
           and o["op"] == "sum" for o in dumps[0]["ops"][-5:])
print(last)
EOF
) || fail "hang: dump contents"
doctor hang 1
expect hang "first operation not finished on every rank: seq $seq allreduce count 4 float32 sum" \
    "$work/hang.doctor"
expect hang "ranks 0-2: failed after" "$work/hang.doctor"
expect hang "WEFT_ERR_TIMEOUT" "$work/hang.doctor"
expect hang "never arrived: rank 3 (last started seq $((seq - 1)) allreduce, done)" \
    "$work/hang.doctor"
expect hang "rank 3: last started seq $((seq - 1)), last finished seq $((seq - 1))" \
    "$work/hang.doctor"
echo "--- weft_doctor on the hang (rank 3 skipped one allreduce of five):"
cat "$work/hang.doctor"

# --- split: two halves with one communicator id; rank 3 skips a call in its --
launch split split WEFT_TIMEOUT=2
finish split
for f in weft-comm1-rank0-world0 weft-comm1-rank1-world2 weft-comm1-rank0-world1 \
         weft-comm1-rank1-world3; do
    checks=$((checks + 1))
    [ -f "$work/split/$f.json" ] || fail "split: no $f.json"
done
doctor split 1
expect split "communicator comm1: 2 ranks (world 0,2), dumps of ranks 0-1" "$work/split.doctor"
expect split "every recorded operation finished on every rank with a dump" "$work/split.doctor"
expect split "communicator comm1: 2 ranks (world 1,3), dumps of ranks 0-1" "$work/split.doctor"
expect split "rank 0: failed after" "$work/split.doctor"
expect split "waiting for rank(s) 1" "$work/split.doctor"
expect split "never arrived: rank 1 (last started seq" "$work/split.doctor"
checks=$((checks + 1))
[ "$(grep -c "first operation not finished" "$work/split.doctor")" -eq 1 ] ||
    fail "split: the healthy half is diagnosed too"

# --- die: rank 3 is killed between two allreduces ----------------------------
# (--enable-recovery: mpirun lets the others go on and see the dead peer)
recovery=1
launch die die WEFT_TIMEOUT=30
finish die
recovery=
doctor die 1
expect die "no dump from rank 3 (dead, or" "$work/die.doctor"
expect die "failed after" "$work/die.doctor"
expect die "WEFT_ERR_PEER_FAILED: " "$work/die.doctor"
expect die "rank 3 failed (its process" "$work/die.doctor"
$py - "$work/die" <<'EOF' || fail "die: dump contents"
import json, os, sys
d = sys.argv[1]
assert not os.path.exists("%s/weft-comm0-rank3-world3.json" % d)
dumps = [json.load(open("%s/weft-comm0-rank%d-world%d.json" % (d, r, r))) for r in range(3)]
seq = dumps[0]["ops"][-1]["seq"]
for r, j in enumerate(dumps):
    assert j["reason"] == "peer_failed" and j["comm"]["failed"] == "WEFT_ERR_PEER_FAILED", r
    op = j["ops"][-1]
    # written again once the operation had ended: it shows how
    assert op["seq"] == seq and op["state"] == "failed", (r, op)
    assert op["status"] == "WEFT_ERR_PEER_FAILED" and "rank 3 failed" in op["error"], op
    assert j["ops"][-2]["state"] == "done", j["ops"][-2]
EOF

# --- mismatch: rank 3 reduces with max -------------------------------------
launch mismatch mismatch WEFT_TIMEOUT=30
finish mismatch
doctor mismatch 1
expect mismatch "arguments differ: seq " "$work/mismatch.doctor"
expect mismatch " allreduce: op differs: ranks 0-2 sum, rank 3 max" "$work/mismatch.doctor"
expect mismatch "failed after" "$work/mismatch.doctor"
expect mismatch "WEFT_ERR_MISMATCH" "$work/mismatch.doctor"
$py - "$work/mismatch" <<'EOF' || fail "mismatch: dump contents"
import json, sys
d = sys.argv[1]
dumps = [json.load(open("%s/weft-comm0-rank%d-world%d.json" % (d, r, r))) for r in range(4)]
seq = dumps[0]["ops"][-1]["seq"]
for r, j in enumerate(dumps):
    assert j["reason"] == "mismatch" and j["comm"]["failed"] == "WEFT_ERR_MISMATCH", r
    op = j["ops"][-1]
    assert op["seq"] == seq and op["state"] == "failed", (r, op)
    assert op["status"] == "WEFT_ERR_MISMATCH" and op["op"] == ("max" if r == 3 else "sum"), op
    assert j["ops"][-2]["state"] == "done" and j["ops"][-2]["op"] == "sum", j["ops"][-2]
EOF

# --- block: SIGUSR1 to ranks blocked in a collective -------------------------
# block NAME SHM: once through point-to-point schedules (WEFT_SHM=no), whose
# dump names the step and the ranks each waits for, once through shared
# memory (no schedule: no step in the dump)
block() {
    local name=$1 shm=$2 r pid n i
    launch "$name" block WEFT_TIMEOUT=60 WEFT_SHM="$shm" WEFT_DUMP_ON_SIGNAL=1
    for i in $(seq 600); do
        [ -f "$work/$name/ready.0" ] && [ -f "$work/$name/ready.1" ] &&
            [ -f "$work/$name/ready.2" ] && break
        sleep 0.1
    done
    sleep 0.5 # into the allreduce
    for r in 0 1 2; do
        pid=$(cat "$work/$name/ready.$r" 2>/dev/null)
        checks=$((checks + 1))
        [ -n "$pid" ] && kill -USR1 "$pid" || fail "$name: cannot signal rank $r ('$pid')"
    done
    for i in $(seq 100); do
        n=$(ls "$work/$name"/weft-comm0-rank[012]-world*.json 2>/dev/null | wc -l)
        [ "$n" -eq 3 ] && break
        sleep 0.1
    done
    checks=$((checks + 1))
    [ "$n" -eq 3 ] || fail "$name: $n of 3 blocked ranks dumped within 10 s of SIGUSR1"
    checks=$((checks + 1))
    [ ! -e "$work/$name/weft-comm0-rank3-world3.json" ] || fail "$name: rank 3 dumped unasked"
    doctor "$name" 1
    touch "$work/$name/go" # rank 3 joins, every call completes
    finish "$name"
    $py - "$work/$name" "$shm" <<'EOF' || fail "$name: dump contents"
import json, sys
d, shm = sys.argv[1], sys.argv[2] == "yes"
dumps = [json.load(open("%s/weft-comm0-rank%d-world%d.json" % (d, r, r))) for r in range(3)]
seq = dumps[0]["ops"][-1]["seq"]
waits = set()
for r, j in enumerate(dumps):
    assert j["reason"] == "signal" and j["comm"]["failed"] is None, (r, j["reason"])
    op = j["ops"][-1]
    assert op["seq"] == seq and op["state"] == "running", (r, op)
    assert op["status"] == "WEFT_INPROGRESS" and op["end_mono_ns"] is None, op
    assert op["elapsed_s"] >= 0.4, op
    assert op["algorithm"] == "shm" if shm else op["algorithm"] != "shm", op
    if shm:
        assert op["where"] is None, op
    else:
        assert isinstance(op["where"], dict) and op["where"]["step"] >= 0, op
        waits |= set(op["where"]["waiting_for"])
    assert [o["state"] for o in j["ops"][:-1]] == ["done"] * (len(j["ops"]) - 1)
assert shm or 3 in waits, waits  # someone waits for the rank that is not there
EOF
    expect "$name" "no dump from rank 3" "$work/$name.doctor"
}
block block no
for r in 0 1 2; do
    expect block "rank $r: still running after" "$work/block.doctor"
done
expect block "waiting for rank 3" "$work/block.doctor"
block block-shm yes
expect block-shm "ranks 0-2: still running after" "$work/block-shm.doctor"

# --- nothing wrong: the hang's dumps without the operation that hung ---------
mkdir "$work/clean"
$py - "$work/hang" "$work/clean" <<'EOF'
import json, sys
for r in range(4):
    name = "weft-comm0-rank%d-world%d.json" % (r, r)
    j = json.load(open("%s/%s" % (sys.argv[1], name)))
    if r < 3:
        j["ops"].pop()
        j["comm"]["failed"] = j["comm"]["failed_error"] = None
    json.dump(j, open("%s/%s" % (sys.argv[2], name), "w"))
EOF
doctor clean 0
expect clean "every recorded operation finished on every rank with a dump (last: seq $((seq - 1)))" \
    "$work/clean.doctor"

# --- the hang again, its seqs wrapped: the one that hung is seq 0 ------------
# seq is 16 bits: after 65533 (65534 and 65535 are reserved) comes 0. The
# same dumps, renumbered so that the operation rank 3 never called is the
# first after the wrap (serial 65536) and the one before it seq 65533, must
# get the same diagnosis, seqs named as the tags carry them.
mkdir "$work/wrap"
$py - "$work/hang" "$work/wrap" "$seq" <<'EOF'
import json, sys
src, dst, hung = sys.argv[1], sys.argv[2], int(sys.argv[3])
def serial(n):  # the hung operation becomes 65536, the ones before it skip 65534-65535
    return n - hung + (65536 if n >= hung else 65534)
for r in range(4):
    name = "weft-comm0-rank%d-world%d.json" % (r, r)
    j = json.load(open("%s/%s" % (src, name)))
    for o in j["ops"]:
        o["serial"] = serial(o["serial"])
        o["seq"] = o["serial"] & 0xffff
    j["ops_recorded"] = j["ops"][-1]["serial"] + 1  # older ones overwritten
    j["comm"]["next_seq"] = j["ops"][-1]["serial"] + 1
    json.dump(j, open("%s/%s" % (dst, name), "w"))
EOF
doctor wrap 1
expect wrap "first operation not finished on every rank: seq 0 allreduce count 4 float32 sum" \
    "$work/wrap.doctor"
expect wrap "ranks 0-2: failed after" "$work/wrap.doctor"
expect wrap "never arrived: rank 3 (last started seq 65533 allreduce, done)" "$work/wrap.doctor"
expect wrap "behind (the others started seq 0):" "$work/wrap.doctor"
expect wrap "rank 3: last started seq 65533, last finished seq 65533" "$work/wrap.doctor"
checks=$((checks + 1))
! grep -q "no record of it" "$work/wrap.doctor" || fail "wrap: a rank reported without a record"
# a dump of before serial (seq only): the doctor orders by seq, and the
# unwrapped hang's diagnosis is the same as with serial
mkdir "$work/hang-seq"
$py - "$work/hang" "$work/hang-seq" <<'EOF'
import json, sys
for r in range(4):
    name = "weft-comm0-rank%d-world%d.json" % (r, r)
    j = json.load(open("%s/%s" % (sys.argv[1], name)))
    for o in j["ops"]:
        del o["serial"]
    json.dump(j, open("%s/%s" % (sys.argv[2], name), "w"))
EOF
doctor hang-seq 1
checks=$((checks + 1))
cmp -s <(sed 's/hang-seq/DIR/' "$work/hang-seq.doctor") <(sed 's/hang/DIR/' "$work/hang.doctor") ||
    { fail "hang-seq: the diagnosis without serial differs"
      diff "$work/hang.doctor" "$work/hang-seq.doctor"; }

# a trace (or any other weft-*.json) next to the dumps is not read as one
mkdir "$work/hang-trace"
cp "$work"/hang/weft-comm*.json "$work/hang-trace/"
printf '{"traceEvents": []}\n' >"$work/hang-trace/weft-trace-0.json"
doctor hang-trace 1
checks=$((checks + 1))
cmp -s <(sed 's/hang-trace/DIR/' "$work/hang-trace.doctor") <(sed 's/hang/DIR/' "$work/hang.doctor") ||
    { fail "hang-trace: a trace file changed the diagnosis"
      diff "$work/hang.doctor" "$work/hang-trace.doctor"; }

# --- the doctor's errors -------------------------------------------------------
err() { # LABEL DIR TEXT: the doctor exits 2 naming TEXT
    local rc
    $py "$doctor" "$2" >"$work/err.out" 2>&1
    rc=$?
    checks=$((checks + 1))
    [ $rc -eq 2 ] || fail "$1: weft_doctor exited $rc, not 2"
    expect "$1" "$3" "$work/err.out"
}
err "missing dir" "$work/nowhere" "$work/nowhere: no such directory"
mkdir "$work/empty"
err "empty dir" "$work/empty" "no flight recorder dumps (weft-comm<id>-rank<r>-world<w>.json)"
mkdir "$work/bad"
cp "$work/hang/weft-comm0-rank0-world0.json" "$work/bad/"
head -c 200 "$work/hang/weft-comm0-rank1-world1.json" >"$work/bad/weft-comm0-rank1-world1.json"
err "truncated" "$work/bad" "$work/bad/weft-comm0-rank1-world1.json: not valid JSON: line"
echo '{"format": "something else"}' >"$work/bad/weft-comm0-rank1-world1.json"
err "not a dump" "$work/bad" "weft-comm0-rank1-world1.json: not a weft flight recorder dump"
$py - "$work/hang/weft-comm0-rank1-world1.json" "$work/bad/weft-comm0-rank1-world1.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
del j["ops"][0]["dtype"]
json.dump(j, open(sys.argv[2], "w"))
EOF
err "no field" "$work/bad" "weft-comm0-rank1-world1.json: not a weft flight recorder dump: no field 'ops[0].dtype'"
if [ "$(id -u)" -ne 0 ]; then # root reads anything
    cp "$work/hang/weft-comm0-rank1-world1.json" "$work/bad/"
    chmod 000 "$work/bad/weft-comm0-rank1-world1.json"
    err "unreadable" "$work/bad" "weft-comm0-rank1-world1.json: cannot read"
fi
# a 2-rank job's dumps next to the 4-rank job's: the same world ranks in
# two different communicators 0
mkdir "$work/mixed"
cp "$work/hang"/*.json "$work/mixed/"
$py - "$work/hang/weft-comm0-rank0-world0.json" "$work/mixed/weft-comm0-rank0-world0.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
j["comm"]["size"], j["comm"]["world_ranks"] = 2, [0, 1]
json.dump(j, open(sys.argv[2], "w"))
EOF
err "mixed" "$work/mixed" "mixed communicators: "
expect "mixed" "share world ranks but not their members" "$work/err.out"

echo "$checks checks, $failures failed"
[ $failures -eq 0 ] && echo "PASS" || exit 1
