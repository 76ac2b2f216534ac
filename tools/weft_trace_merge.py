#!/usr/bin/env python3
"""Merge the WEFT_TRACE files of several ranks into one trace, so that one
timeline in ui.perfetto.dev or chrome://tracing shows every rank.

    tools/weft_trace_merge.py OUT FILE...
    tools/weft_trace_merge.py /tmp/all.json /tmp/run-*.json

Each rank's events keep their pid (the rank); ranks of one host share a
clock (CLOCK_MONOTONIC), so their events line up. Files of the same rank
twice, or a file that is not a weft trace, are refused (exit 1), and OUT
is then not written. OUT is written whole or not at all.
"""
import json
import os
import sys


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    out, files = argv[1], argv[2:]
    events, ranks, dropped = [], {}, 0
    for path in files:
        try:
            with open(path) as f:
                doc = json.load(f)
            rank = doc["otherData"]["rank"]
            evs = doc["traceEvents"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.stderr.write("weft_trace_merge: %s is not a weft trace: %s\n" % (path, e))
            return 1
        if rank in ranks:
            sys.stderr.write("weft_trace_merge: %s and %s are both rank %d\n"
                             % (ranks[rank], path, rank))
            return 1
        ranks[rank] = path
        dropped += doc["otherData"].get("dropped_events", 0)
        events.extend(evs)
    merged = {"displayTimeUnit": "ns",
              "otherData": {"ranks_merged": sorted(ranks), "dropped_events": dropped},
              "traceEvents": events}
    tmp = "%s.%d.tmp" % (out, os.getpid())
    with open(tmp, "w") as f:
        json.dump(merged, f, separators=(",", ":"))
    os.replace(tmp, out)
    print("weft_trace_merge: %d ranks, %d events -> %s" % (len(ranks), len(events), out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
