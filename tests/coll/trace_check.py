#!/usr/bin/env python3
"""Check one rank's WEFT_TRACE file (called by tests/coll/test_trace.c).

trace_check.py FILE RANK NRANKS [SPEC...]
  SPEC: SIZE=name/count/bytes/dtype[/form],name/count/bytes/dtype[/form],...
        the operations of the communicator of SIZE ranks, in sequence order
        (SIZE=NRANKS: the communicator the job started with); SIZE~=...: its
        last operations (a split child runs a few of its own set-up first);
        form: who ran it ("call" when not given).
trace_check.py --dropped FILE MAX
  the file holds at most MAX events and says how many it dropped (> 0).
trace_check.py --merged OUT FILE...
  tools/weft_trace_merge.py's output OUT holds every event of FILE... and
  names each of their ranks once.

Exit 0 when every check passes; otherwise prints what failed, exit 1.
"""
import json
import sys

REDUCING = ("allreduce", "reduce", "reduce_scatter", "reduce_scatter_v")
ROOTED = ("bcast", "reduce", "gather", "scatter")
TOL = 0.0015  # microseconds: ts and dur carry nanoseconds as 3 decimals


def fail(msg):
    print("trace_check: " + msg)
    sys.exit(1)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: %s" % (path, e))


def check_dropped(path, most):
    doc = load(path)
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    dropped = doc["otherData"]["dropped_events"]
    if len(events) > most or len(events) != doc["otherData"]["events"]:
        fail("%d events, otherData says %d, at most %d"
             % (len(events), doc["otherData"]["events"], most))
    if dropped <= 0:
        fail("dropped_events %d, expected > 0" % dropped)


def check_nesting(events):
    by_tid = {}
    for e in events:
        by_tid.setdefault(e["tid"], []).append(e)
    for tid, evs in by_tid.items():
        evs.sort(key=lambda e: e["ts"])
        for a, b in zip(evs, evs[1:]):
            if b["ts"] < a["ts"] + a["dur"] - TOL:
                fail("tid %d: %s seq %d [%f, +%f] overlaps %s seq %d at %f"
                     % (tid, a["name"], a["args"]["seq"], a["ts"], a["dur"], b["name"],
                        b["args"]["seq"], b["ts"]))


def check_merged(out, files):
    doc = load(out)
    parts = [load(f) for f in files]
    want = sorted(p["otherData"]["rank"] for p in parts)
    names = sorted(e["pid"] for e in doc["traceEvents"]
                   if e["ph"] == "M" and e["name"] == "process_name")
    if names != want or doc["otherData"]["ranks_merged"] != want:
        fail("merged ranks %r, expected %r" % (names, want))
    key = lambda e: json.dumps(e, sort_keys=True)
    if sorted(map(key, doc["traceEvents"])) != sorted(key(e) for p in parts
                                                      for e in p["traceEvents"]):
        fail("the merged events are not those of the files")


def main():
    if sys.argv[1] == "--dropped":
        check_dropped(sys.argv[2], int(sys.argv[3]))
        return
    if sys.argv[1] == "--merged":
        check_merged(sys.argv[2], sys.argv[3:])
        print("trace_check: %s: merged ok" % sys.argv[2])
        return
    path, rank, nranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    doc = load(path)
    evs = doc["traceEvents"]
    meta = [e for e in evs if e["ph"] == "M"]
    ops = [e for e in evs if e["ph"] == "X" and e["cat"] == "op"]
    steps = [e for e in evs if e["ph"] == "X" and e["cat"] == "step"]
    if any(e["pid"] != rank for e in evs):
        fail("an event's pid is not %d" % rank)
    names = [e["args"]["name"] for e in meta if e["name"] == "process_name"]
    if len(names) != 1 or not names[0].startswith("rank %d (" % rank):
        fail("process_name %r, expected 'rank %d (host)'" % (names, rank))
    if doc["otherData"]["dropped_events"] != 0:
        fail("dropped %d events" % doc["otherData"]["dropped_events"])
    tids = {e["tid"] for e in meta if e["name"] == "thread_name"}
    for e in ops + steps:
        if e["tid"] not in tids:
            fail("tid %d has no thread_name" % e["tid"])
    check_nesting(ops)
    check_nesting(steps)
    # every step inside its operation, with consistent bytes and peers
    by_key = {}
    for o in ops:
        key = (o["args"]["comm"], o["args"]["seq"])
        if key in by_key:
            fail("two operations comm %s seq %d" % key)
        by_key[key] = o
    nsteps = {}
    for s in steps:
        a = s["args"]
        o = by_key.get((a["comm"], a["seq"]))
        if o is None:
            fail("step %s of comm %s seq %d has no operation" % (s["name"], a["comm"], a["seq"]))
        if s["ts"] < o["ts"] - TOL or s["ts"] + s["dur"] > o["ts"] + o["dur"] + TOL:
            fail("step %s [%f, +%f] outside %s seq %d [%f, +%f]"
                 % (s["name"], s["ts"], s["dur"], o["name"], a["seq"], o["ts"], o["dur"]))
        if s["name"] != "%s %d" % (a["phase"], a["step"]):
            fail("step named %r, args %s %d" % (s["name"], a["phase"], a["step"]))
        if a["bytes"] != a["send_bytes"] + a["recv_bytes"]:
            fail("step bytes %d != %d + %d" % (a["bytes"], a["send_bytes"], a["recv_bytes"]))
        if any(p < 0 or p >= o["args"]["size"] or p == o["args"]["rank"] for p in a["peers"]):
            fail("step peers %r of a rank %d of %d" % (a["peers"], o["args"]["rank"],
                                                       o["args"]["size"]))
        nsteps[(a["comm"], a["seq"])] = nsteps.get((a["comm"], a["seq"]), 0) + 1
    for spec in sys.argv[4:]:
        size, calls = spec.split("=")
        want = [c.split("/") for c in calls.split(",")]
        suffix = size.endswith("~")  # only the last operations of that communicator
        size = size.rstrip("~")
        got = sorted((o for o in ops if o["args"]["size"] == int(size)),
                     key=lambda o: o["args"]["seq"])
        if suffix:
            got = got[-len(want):]
        if len(got) != len(want):
            fail("comm of %s ranks: %d operations, expected %d: %s"
                 % (size, len(got), len(want), [o["name"] for o in got]))
        for i, (o, w) in enumerate(zip(got, want)):
            a = o["args"]
            w = w + ["call"] if len(w) == 4 else w
            if [o["name"], str(a["count"]), str(a["bytes"]), a["dtype"], a["form"]] != w:
                fail("comm of %s ranks, operation %d: %s/%d/%d/%s/%s, expected %s"
                     % (size, i, o["name"], a["count"], a["bytes"], a["dtype"], a["form"],
                        "/".join(w)))
            if ("op" in a) != (o["name"] in REDUCING) or ("root" in a) != (o["name"] in ROOTED):
                fail("%s: op %r, root %r" % (o["name"], a.get("op"), a.get("root")))
            if i > 0 and a["seq"] != got[i - 1]["args"]["seq"] + 1:
                fail("seq %d after %d" % (a["seq"], got[i - 1]["args"]["seq"]))
            if a["status"] != "success" and a["status"] != "ok":
                fail("operation %d status %s" % (i, a["status"]))
        # the shared-memory fast path runs without a schedule: no steps
        # (shm as the algorithm of a nonblocking operation has them)
            if int(size) > 1 and a["algorithm"] != "shm" and \
                    nsteps.get((a["comm"], a["seq"]), 0) == 0:
                fail("%s seq %d (%s) has no step" % (o["name"], a["seq"], a["algorithm"]))
    print("trace_check: %s: %d operations, %d steps ok" % (path, len(ops), len(steps)))


main()
