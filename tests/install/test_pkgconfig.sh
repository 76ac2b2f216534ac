#!/bin/sh
# Install weft into a scratch root and build an outside program with
# `pkg-config weft` (and the README's example the same way); they must link
# libweft.so and run, and libweft.so must export only public symbols.
set -eu
: "${top_builddir:?run through make check}"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
${MAKE:-make} -s -C "$top_builddir" install DESTDIR="$root" >/dev/null
pcdir=$(find "$root" -name weft.pc -printf '%h\n' | head -n 1)
test -n "$pcdir" || { echo "FAIL: weft.pc was not installed"; exit 1; }
export PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$root"
cflags=$(pkg-config --cflags weft)
libs=$(pkg-config --libs weft)
echo "pkg-config weft: $cflags $libs"
${CC:-cc} $cflags "$top_srcdir/tests/install/hello.c" -o "$root/hello" $libs
libdir=$(dirname "$(find "$root" -name 'libweft.so' | head -n 1)")
out=$(LD_LIBRARY_PATH="$libdir" "$root/hello")
echo "$out"
test "$out" = "size=1 sum=1.5,2.5,-3" || { echo "FAIL: unexpected output"; exit 1; }
# the README's example (its first C block) builds the same way and runs as a job of one
awk '/^```c$/ && !done {on = 1; next} /^```$/ && on {on = 0; done = 1} on' \
    "$top_srcdir/README.md" >"$root/readme.c"
grep -q 'int main' "$root/readme.c" || { echo "FAIL: no C example in README.md"; exit 1; }
${CC:-cc} $cflags "$root/readme.c" -o "$root/readme" $libs
out=$(LD_LIBRARY_PATH="$libdir" "$root/readme")
echo "README example: $out"
test "$out" = "rank 0 of 1: 1 2 3 4" || { echo "FAIL: README example: unexpected output"; exit 1; }
# internals stay hidden: every exported function is weft_*
leaked=$(nm -D --defined-only "$libdir/libweft.so" | awk '$2 == "T" && $3 !~ /^weft_/ {print $3}')
test -z "$leaked" || { echo "FAIL: non-public symbols exported: $leaked"; exit 1; }
nm -D --defined-only "$libdir/libweft.so" | awk '$2 == "T" {print $3}' | grep -q '^weft__' &&
  { echo "FAIL: internal weft__ symbols exported"; exit 1; }
echo "PASS: outside program built with pkg-config weft"
