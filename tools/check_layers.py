#!/usr/bin/python3
"""Check that weft's library layers depend on each other one way: down.

Usage: check_layers.py [ROOT]   (ROOT: the source tree, default: this script's)

The layers, top to bottom (docs/layers.md):

    runtime/                    public entry points, registry, requests
    coll/                       schedules, algorithms, selection, diag/
    comm/                       communicator core: health, failures, deadlines, node map
    pt2pt/   bootstrap/         transports; how ranks find each other
    device/                     memory types, reductions, streams
    base/                       errors, logging, time, dtypes, config values

A file may include a header of its own folder or of a layer below its own.
Rules 1 and 2 are checked on every .c/.h/.cu/.cuh file under those folders:

  1. no #include "x/..." where x is a layer above the file's own, or another
     folder on the same level (pt2pt/ and bootstrap/ do not know each other);
  2. no call, below runtime/, of a public entry point that runtime/ defines
     (a WEFT_EXPORT function of runtime/*.c: weft_allreduce, weft_send, ...):
     the layers below reach each other through internal calls.

Inside coll/ the files form sub-layers of their own (COLL_SUBLAYERS,
bottom to top; docs/layers.md says why each file sits where it does):

    diag       coll/diag/: observes the engine, may include only it and shared
    glue       coll/comm_state.c, coll/upcalls.c: wire every sub-layer to comm/
    select     coll/select.c, coll/cost.*, coll/registry.c
    hier       coll/hier/: composes shm/ with the algorithms
    shm        coll/shm/
    algorithms coll/ring.*, coll/exchange.h, coll/rooted.h, coll/<collective>/
    engine     coll/sched.h, coll/sched_impl.h, coll/sched.c, coll/sched_engine.c
    shared     coll/coll.h, coll/comm_state.h: declarations any coll/ file may
               include; they include only the engine's coll/sched.h (and the
               folders below coll/)

  3. every file of coll/ is in a sub-layer, and an #include "coll/..." points
     to its own sub-layer, a lower one or a shared header; diag/ includes
     only diag/, the engine and shared; the other sub-layers reach diag/ only
     through the hook headers COLL_DIAG_HOOKS lists for each. There are no
     exceptions.

Folders outside the library (bindings/, tests/, tools/, benchmarks/) sit
above everything and are not checked. Prints one line per violation
(file:line: what) and exits 1 when there is any, 0 otherwise.
"""
import os
import re
import sys

LEVELS = {
    "runtime": 5,
    "coll": 4,
    "comm": 3,
    "pt2pt": 2,
    "bootstrap": 2,
    "device": 1,
    "base": 0,
}
EXTS = (".c", ".h", ".cu", ".cuh")

# coll/'s sub-layers, bottom to top: (name, paths; a path ending in "/" is a
# folder and everything under it). A direct subfolder of coll/ not named here
# is a collective's folder (coll/allreduce/, ...): algorithms.
COLL_SUBLAYERS = [
    ("shared", ["coll/coll.h", "coll/comm_state.h"]),
    ("engine", ["coll/sched.h", "coll/sched_impl.h", "coll/sched.c", "coll/sched_engine.c"]),
    ("algorithms", ["coll/ring.c", "coll/ring.h", "coll/exchange.h", "coll/rooted.h"]),
    ("shm", ["coll/shm/"]),
    ("hier", ["coll/hier/"]),
    ("select", ["coll/select.c", "coll/cost.c", "coll/cost.h", "coll/registry.c"]),
    ("glue", ["coll/comm_state.c", "coll/upcalls.c"]),
    ("diag", ["coll/diag/"]),
]
COLL_LEVEL = {name: level for level, (name, _) in enumerate(COLL_SUBLAYERS)}
# What diag/ may include of coll/: itself, what it observes, the shared headers.
COLL_DIAG_SEES = ("diag", "engine", "shared")
# The headers of diag/ through which a sub-layer below calls it (its hooks).
COLL_DIAG_HOOKS = {
    # the signature in weft_op_desc_t; weft__obs_sched_end and
    # weft__record_end when a schedule ends
    "engine": ("coll/diag/sig.h", "coll/diag/obs.h", "coll/diag/record.h"),
    # the argument-check schedule put before an operation; the recorder and
    # the observation of operations run without a schedule
    "select": ("coll/diag/check.h", "coll/diag/obs.h", "coll/diag/record.h"),
    # releasing a communicator's recorder and trace; dumps when it fails
    "glue": ("coll/diag/dump.h", "coll/diag/obs.h", "coll/diag/record.h"),
}
# (file, header) includes let through, with why (docs/layers.md, "Exceptions").
QUOTED = re.compile(r'^\s*#\s*include\s+"(coll/[^"]*)"')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/[^"]*"')
EXPORT = re.compile(r"WEFT_EXPORT\b[^(]*?\b(weft_[A-Za-z0-9_]+)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')


def sources(root, folder):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(EXTS):
                yield os.path.join(dirpath, name)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def code_only(text):
    """The text with comments and strings blanked, line breaks kept."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    return STRING.sub(blank, COMMENT.sub(blank, text))


def public_entry_points(root):
    names = set()
    for path in sources(root, "runtime"):
        if path.endswith(".c"):
            names.update(EXPORT.findall(code_only(read(path))))
    return names


def coll_sublayer(rel):
    """The sub-layer of coll/ of the path rel ("coll/..."), or None."""
    for name, paths in COLL_SUBLAYERS:
        for p in paths:
            if rel == p or (p.endswith("/") and rel.startswith(p)):
                return name
    parts = rel.split("/")
    if len(parts) > 2 and parts[1] not in ("shm", "hier", "diag"):
        return "algorithms"
    return None


def check_coll(root):
    """Rule 3: coll/'s includes point down its sub-layers."""
    errors = []

    for path in sources(root, "coll"):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        mine = coll_sublayer(rel)
        if mine is None:
            errors.append("%s:1: in no sub-layer of coll/ (add it to COLL_SUBLAYERS and "
                          "docs/layers.md)" % rel)
            continue
        for n, line in enumerate(read(path).split("\n"), 1):
            m = QUOTED.match(line)
            if m is None:
                continue
            target = m.group(1)
            theirs = coll_sublayer(target)
            what = None
            if theirs is None:
                what = "includes %s, which is in no sub-layer of coll/" % target
            elif theirs == mine:
                continue
            elif mine == "shared":
                if theirs != "engine":
                    what = "shared header includes %s of %s (only coll/sched.h)" % (target, theirs)
            elif theirs == "shared":
                continue
            elif mine == "diag":
                if theirs not in COLL_DIAG_SEES:
                    what = ("diag/ includes %s of %s: it may use only what it observes "
                            "(the engine, shared)" % (target, theirs))
            elif theirs == "diag":
                hooks = COLL_DIAG_HOOKS.get(mine, ())
                if target not in hooks:
                    what = ("%s reaches diag/ only through its hooks (%s): %s"
                            % (mine, ", ".join(hooks) or "none", target))
            elif COLL_LEVEL[theirs] > COLL_LEVEL[mine]:
                what = "%s includes %s above it: %s" % (mine, theirs, target)
            if what is None:
                continue
            errors.append("%s:%d: coll/ sub-layer %s" % (rel, n, what))
    return errors


def check(root):
    errors = []
    entries = public_entry_points(root)
    call = re.compile(r"\b(" + "|".join(sorted(entries)) + r")\s*\(") if entries else None
    for folder, level in sorted(LEVELS.items(), key=lambda kv: -kv[1]):
        for path in sources(root, folder):
            rel = os.path.relpath(path, root)
            text = read(path)
            for n, line in enumerate(text.split("\n"), 1):
                m = INCLUDE.match(line)
                if m is None or m.group(1) == folder or m.group(1) not in LEVELS:
                    continue
                target = m.group(1)
                if LEVELS[target] > level:
                    errors.append("%s:%d: %s/ includes %s/ above it: %s"
                                  % (rel, n, folder, target, line.strip()))
                elif LEVELS[target] == level:
                    errors.append("%s:%d: %s/ includes %s/ beside it: %s"
                                  % (rel, n, folder, target, line.strip()))
            if folder == "runtime" or call is None:
                continue
            for n, line in enumerate(code_only(text).split("\n"), 1):
                for m in call.finditer(line):
                    errors.append("%s:%d: %s/ calls the public entry point %s() of runtime/"
                                  % (rel, n, folder, m.group(1)))
    return errors + check_coll(root)


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    missing = [f for f in LEVELS if not os.path.isdir(os.path.join(root, f))]
    if missing:
        print("check_layers: %s: no %s/ folder" % (root, ", ".join(missing)), file=sys.stderr)
        return 1
    errors = check(root)
    for e in errors:
        print(e)
    if errors:
        print("check_layers: %d dependencies point up or sideways (see docs/layers.md)"
              % len(errors), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
