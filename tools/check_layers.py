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
Two rules are checked on every .c/.h/.cu/.cuh file under those folders:

  1. no #include "x/..." where x is a layer above the file's own, or another
     folder on the same level (pt2pt/ and bootstrap/ do not know each other);
  2. no call, below runtime/, of a public entry point that runtime/ defines
     (a WEFT_EXPORT function of runtime/*.c: weft_allreduce, weft_send, ...):
     the layers below reach each other through internal calls.

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
    return errors


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
