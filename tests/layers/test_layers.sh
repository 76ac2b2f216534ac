#!/usr/bin/env bash
# The library's layers depend on each other one way (docs/layers.md):
# tools/check_layers.py passes on the tree, and fails, naming the file and
# line, on trees with an upward include, a sideways include, and a call of a
# public entry point from below runtime/ (so the check itself can fail).
set -u
: "${top_srcdir:?run through make check}"
py=/usr/bin/python3
check="$top_srcdir/tools/check_layers.py"
[ -x "$py" ] || { echo "SKIP: $py not available"; exit 77; }
failures=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-layers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

if out=$("$py" "$check" "$top_srcdir" 2>&1); then
    echo "ok: the source tree has no upward dependency"
else
    fail "the source tree: $out"
fi

# A small tree of every layer: clean, then with one violation at a time.
mktree() { # dir
    local d=$1
    mkdir -p "$d"/{base,device,pt2pt,bootstrap,comm,coll/diag,runtime}
    printf '#include <weft.h>\n' >"$d/base/base.h"
    printf '#include "base/base.h"\n' >"$d/device/device.h"
    printf '#include "device/device.h"\n' >"$d/pt2pt/pt2pt.h"
    printf '#include "base/base.h"\n' >"$d/bootstrap/bootstrap.h"
    printf '#include "pt2pt/pt2pt.h"\n#include "bootstrap/bootstrap.h"\n' >"$d/comm/comm.h"
    printf '#include "comm/comm.h"\n' >"$d/coll/coll.h"
    printf '#include "coll/coll.h"\nint f(void) { return weft__coll_run(0); }\n' \
        >"$d/coll/diag/x.c"
    printf '#include "coll/coll.h"\n#include "comm/comm.h"\n' >"$d/runtime/api.c"
    printf 'WEFT_EXPORT weft_status_t weft_allreduce(int x)\n{\n    return weft_barrier(x);\n}\n' \
        >>"$d/runtime/api.c"
}

expect() { # label, expected rc, pattern the output must contain, dir
    local label=$1 want=$2 pattern=$3 dir=$4 out rc
    out=$("$py" "$check" "$dir" 2>&1)
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$label: exit $rc, expected $want: $out"
    elif [ -n "$pattern" ] && ! grep -qF -- "$pattern" <<<"$out"; then
        fail "$label: output lacks '$pattern': $out"
    else
        echo "ok: $label"
    fi
}

mktree "$tmp/clean"
expect "a tree whose includes point down passes" 0 "" "$tmp/clean"

mktree "$tmp/up"
printf '#include "runtime/comm.h"\n' >>"$tmp/up/coll/coll.h"
expect "coll/ including runtime/ fails" 1 "coll/coll.h:2: coll/ includes runtime/ above it" \
    "$tmp/up"

mktree "$tmp/up2"
printf '/* x */\n  #  include "coll/sched.h" /* y */\n' >>"$tmp/up2/device/device.h"
expect "device/ including coll/ fails" 1 "device/device.h:3: device/ includes coll/ above it" \
    "$tmp/up2"

mktree "$tmp/side"
printf '#include "bootstrap/bootstrap.h"\n' >>"$tmp/side/pt2pt/pt2pt.h"
expect "pt2pt/ including bootstrap/ fails" 1 "pt2pt/ includes bootstrap/ beside it" "$tmp/side"

mktree "$tmp/call"
printf 'int g(void)\n{\n    return weft_allreduce(1); /* weft_allreduce() */\n}\n' \
    >>"$tmp/call/coll/diag/x.c"
expect "coll/ calling weft_allreduce fails" 1 \
    "coll/diag/x.c:5: coll/ calls the public entry point weft_allreduce() of runtime/" "$tmp/call"

mktree "$tmp/comment"
printf '/* weft_allreduce() is the public one; "weft_allreduce(" */\n' >>"$tmp/comment/comm/comm.h"
expect "a comment or string naming an entry point passes" 0 "" "$tmp/comment"

expect "a tree without the layer folders is an error" 1 "no " "$tmp/clean/base"

if [ "$failures" -ne 0 ]; then
    echo "$failures failed"
    exit 1
fi
echo "all layer checks passed"
exit 0
