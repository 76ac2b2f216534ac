#!/usr/bin/env bash
# The table of docs/algorithms.md is the algorithm registry: the table and
# `weft_info --algorithms` agree (tools/check_algorithms.py), and the check
# fails, naming the line and the row, on a table that lacks a row, has one
# the registry does not, differs in a cell or in the order, and on a
# registry that gained a row the table lacks or names a missing file (so
# the check itself can fail, in both directions).
set -u
: "${top_srcdir:?run through make check}" "${top_builddir:?run through make check}"
py=/usr/bin/python3
check="$top_srcdir/tools/check_algorithms.py"
doc="$top_srcdir/docs/algorithms.md"
info="$top_builddir/tools/weft_info"
[ -x "$py" ] || { echo "SKIP: $py not available"; exit 77; }
failures=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-algodoc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

if ! "$info" --algorithms >"$tmp/registry.tsv" 2>"$tmp/info.err"; then
    echo "FAIL: weft_info --algorithms: $(cat "$tmp/info.err")"
    exit 1
fi
rows=$(($(wc -l <"$tmp/registry.tsv") - 1))
[ "$rows" -ge 20 ] || fail "weft_info --algorithms printed $rows rows"
head -n1 "$tmp/registry.tsv" | grep -q "^collective	algorithm	file	" ||
    fail "weft_info --algorithms: unexpected header: $(head -n1 "$tmp/registry.tsv")"

expect() { # label, expected rc, pattern the output must contain, registry, doc
    local label=$1 want=$2 pattern=$3 reg=$4 d=$5 out rc
    out=$("$py" "$check" "$reg" "$d" "$top_srcdir" 2>&1)
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$label: exit $rc, expected $want: $out"
    elif [ -n "$pattern" ] && ! grep -qF -- "$pattern" <<<"$out"; then
        fail "$label: output lacks '$pattern': $out"
    else
        echo "ok: $label"
    fi
}

expect "docs/algorithms.md agrees with the registry" 0 "$rows algorithms" \
    "$tmp/registry.tsv" "$doc"

line() { # the table's line number of a row: collective, algorithm
    grep -n "^| $1 | $2 |" "$doc" | cut -d: -f1
}
bruck=$(line allgather bruck)
ring=$(line allreduce ring)
rab=$(line allreduce rabenseifner)
[ -n "$bruck" ] && [ -n "$ring" ] && [ -n "$rab" ] ||
    { echo "FAIL: the table lacks rows this test alters"; exit 1; }

sed "${bruck}d" "$doc" >"$tmp/missing.md"
expect "a row missing from the table fails" 1 \
    "registry row allgather/bruck is missing from the table" "$tmp/registry.tsv" "$tmp/missing.md"

sed "${bruck}p" "$doc" | sed "$((bruck + 1))s/| allgather | bruck |/| allgather | bruck2 |/" \
    >"$tmp/extra.md"
expect "a row the registry lacks fails" 1 \
    "extra.md:$((bruck + 1)): allgather/bruck2 is not in the registry" \
    "$tmp/registry.tsv" "$tmp/extra.md"

sed "${ring}s/2 (p-1) alpha/3 (p-1) alpha/" "$doc" >"$tmp/cost.md"
expect "a changed cost model fails" 1 "cost.md:$ring: allreduce/ring: cost model is '3 (p-1)" \
    "$tmp/registry.tsv" "$tmp/cost.md"

sed "${ring}s/| any p |/| p not 2^k: fold |/" "$doc" >"$tmp/constraint.md"
expect "a changed constraint fails" 1 "allreduce/ring: constraints is 'p not 2^k: fold'" \
    "$tmp/registry.tsv" "$tmp/constraint.md"

awk -v a="$rab" -v b="$ring" 'NR == FNR { l[NR] = $0; next }
    FNR == a { print l[b]; next } FNR == b { print l[a]; next } { print }' "$doc" "$doc" \
    >"$tmp/order.md"
expect "rows out of the registry's order fail" 1 "keep the registry's order" \
    "$tmp/registry.tsv" "$tmp/order.md"

grep -v "^| allreduce | " "$doc" | sed 's/^| collective | algorithm |/| collective | name |/' \
    >"$tmp/notable.md"
expect "a doc without the table fails" 1 "no table with the header" "$tmp/registry.tsv" \
    "$tmp/notable.md"

{ cat "$tmp/registry.tsv"; printf 'allreduce\tnew_algo\tcoll/allreduce/ring.c\tany p\t0\tx\n'; } \
    >"$tmp/grown.tsv"
expect "a registry row the table lacks fails" 1 \
    "registry row allreduce/new_algo is missing from the table" "$tmp/grown.tsv" "$doc"

sed 's#\tcoll/allgather/bruck.c\t#\tcoll/allgather/gone.c\t#' "$tmp/registry.tsv" >"$tmp/gone.tsv"
expect "a registry row naming a missing file fails" 1 \
    "allgather/bruck names coll/allgather/gone.c, which does not exist" "$tmp/gone.tsv" "$doc"

if [ "$failures" -ne 0 ]; then
    echo "$failures failed"
    exit 1
fi
echo "all algorithm table checks passed"
exit 0
