#!/usr/bin/env bash
# benchmarks/weft_reduce_bench -c (host copies, weft__host_copy against memcpy): the table's 18
# rows (4 KiB-4 MiB, the destination 0, 16 and 4080 bytes past the source modulo 4 KiB), each
# with positive rates, after the program checked every copy's bytes (exit 1 otherwise); bad
# arguments exit 2; and the reduction table's run on a small size.
set -u
: "${top_builddir:?run through make check}"
bench="$top_builddir/benchmarks/weft_reduce_bench"
out=$(timeout 300 "$bench" -c 1)
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "FAIL: weft_reduce_bench -c 1 exited $rc"
    exit 1
fi
rows=$(printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ && NF == 5' | wc -l)
want=$(printf '%s\n' 4096 16384 65536 262144 1048576 4194304 | while read -r b; do
    printf '%s 0\n%s 16\n%s 4080\n' "$b" "$b" "$b"
done)
got=$(printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ && NF == 5 {print $1, $2}')
if [ "$rows" -ne 18 ] || [ "$got" != "$want" ]; then
    echo "FAIL: expected 18 rows of sizes and offsets, got:"
    printf '%s\n' "$out"
    exit 1
fi
if ! printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ && NF == 5 && !($3 > 0 && $4 > 0 && $5 > 0) {bad = 1} END {exit bad}'; then
    echo "FAIL: a rate that is not positive:"
    printf '%s\n' "$out"
    exit 1
fi
for args in "-c 0" "-c 1 2" "-x"; do
    # shellcheck disable=SC2086
    timeout 60 "$bench" $args >/dev/null 2>&1
    rc=$?
    if [ "$rc" -ne 2 ]; then
        echo "FAIL: weft_reduce_bench $args exited $rc, want 2"
        exit 1
    fi
done
if ! timeout 300 "$bench" 64k 2 >/dev/null; then
    echo "FAIL: weft_reduce_bench 64k 2"
    exit 1
fi
echo "PASS: weft_reduce_bench -c: 18 rows, copies checked"
