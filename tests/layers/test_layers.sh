#!/usr/bin/env bash
# The library's layers depend on each other one way (docs/layers.md):
# tools/check_layers.py passes on the tree, and fails, naming the file and
# line, on trees with an upward include, a sideways include, a call of a
# public entry point from below runtime/, and an include that points up
# coll/'s sub-layers (so the check itself can fail).
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
    mkdir -p "$d"/{base,device,pt2pt,bootstrap,comm,coll/{diag,shm,hier,allreduce},runtime}
    printf '#include <weft.h>\n' >"$d/base/base.h"
    printf '#include "base/base.h"\n' >"$d/device/device.h"
    printf '#include "device/device.h"\n' >"$d/pt2pt/pt2pt.h"
    printf '#include "base/base.h"\n' >"$d/bootstrap/bootstrap.h"
    printf '#include "pt2pt/pt2pt.h"\n#include "bootstrap/bootstrap.h"\n' >"$d/comm/comm.h"
    printf '#include "comm/comm.h"\n' >"$d/coll/coll.h"
    printf '#include "coll/coll.h"\nint f(void) { return weft__coll_run(0); }\n' \
        >"$d/coll/diag/x.c"
    # coll/'s sub-layers: engine < algorithms < shm < hier < select < glue < diag
    printf '#include "coll/diag/sig.h"\n#include "comm/comm.h"\n' >"$d/coll/sched.h"
    printf '#include "coll/sched.h"\n#include "coll/coll.h"\n#include "coll/diag/obs.h"\n' \
        >"$d/coll/sched.c"
    printf '#include "coll/coll.h"\n' >"$d/coll/ring.h"
    printf '#include "coll/ring.h"\n' >"$d/coll/allreduce/ring.c"
    printf '#include "coll/coll.h"\n' >"$d/coll/shm/shm.h"
    printf '#include "coll/shm/shm.h"\n#include "coll/ring.h"\n' >"$d/coll/hier/hier.c"
    printf '#include "coll/shm/shm.h"\n#include "coll/diag/check.h"\n' >"$d/coll/select.c"
    printf '#include "coll/%s"\n' comm_state.h shm/shm.h diag/dump.h >"$d/coll/upcalls.c"
    printf '#include "comm/comm.h"\n' >"$d/coll/comm_state.h"
    printf '#include "coll/sched.h"\n' >"$d/coll/diag/obs.h"
    printf '#include "coll/diag/obs.h"\n#include "coll/comm_state.h"\n' >"$d/coll/diag/stats.c"
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

mktree "$tmp/engine"
printf '#include "coll/shm/shm.h"\n' >>"$tmp/engine/coll/sched.c"
expect "the engine including coll/shm/shm.h fails" 1 \
    "coll/sched.c:4: coll/ sub-layer engine includes shm above it: coll/shm/shm.h" "$tmp/engine"

mktree "$tmp/algo"
printf '#include "coll/cost.h"\n' >>"$tmp/algo/coll/allreduce/ring.c"
expect "an algorithm including selection's coll/cost.h fails" 1 \
    "coll/allreduce/ring.c:2: coll/ sub-layer algorithms includes select above it" "$tmp/algo"

mktree "$tmp/shm"
printf '#include "coll/hier/hier.h"\n' >>"$tmp/shm/coll/shm/shm.h"
expect "shm/ including hier/ fails" 1 \
    "coll/shm/shm.h:2: coll/ sub-layer shm includes hier above it" "$tmp/shm"

mktree "$tmp/shared"
printf '#include "coll/ring.h"\n' >>"$tmp/shared/coll/coll.h"
expect "the shared coll/coll.h including an algorithm fails" 1 \
    "coll/coll.h:2: coll/ sub-layer shared header includes coll/ring.h" "$tmp/shared"

mktree "$tmp/observe"
printf '#include "coll/shm/shm.h"\n' >>"$tmp/observe/coll/diag/stats.c"
expect "diag/ including coll/shm/shm.h fails" 1 \
    "coll/diag/stats.c:3: coll/ sub-layer diag/ includes coll/shm/shm.h of shm: it may use only" \
    "$tmp/observe"

mktree "$tmp/hook"
printf '#include "coll/diag/dump.h"\n' >>"$tmp/hook/coll/sched.c"
expect "the engine including a diag/ header that is not its hook fails" 1 \
    "coll/sched.c:4: coll/ sub-layer engine reaches diag/ only through its hooks" "$tmp/hook"

mktree "$tmp/algohook"
printf '#include "coll/diag/obs.h"\n' >>"$tmp/algohook/coll/ring.h"
expect "an algorithm including coll/diag/obs.h fails" 1 \
    "coll/ring.h:2: coll/ sub-layer algorithms reaches diag/ only through its hooks (none)" \
    "$tmp/algohook"

mktree "$tmp/unknown"
printf '#include "coll/coll.h"\n' >"$tmp/unknown/coll/fast.c"
expect "a coll/ file in no sub-layer fails" 1 "coll/fast.c:1: in no sub-layer of coll/" \
    "$tmp/unknown"

expect "a tree without the layer folders is an error" 1 "no " "$tmp/clean/base"

if [ "$failures" -ne 0 ]; then
    echo "$failures failed"
    exit 1
fi
echo "all layer checks passed"
exit 0
