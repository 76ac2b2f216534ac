#!/usr/bin/env bash
# Builds weft_torch (bindings/torch) into $top_builddir/tests/torch/ext with
# the python given as $1, against libweft of the build tree; again only when
# its sources or libweft changed. Used by tests/torch/test_torch.sh and
# tools/torch_suite.sh. Prints the folder to put on PYTHONPATH.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
python=$1
src=$top_srcdir/bindings/torch
ext=$top_builddir/tests/torch/ext
lib=$top_builddir/.libs/libweft.so
if [ ! -e "$lib" ]; then
    echo "FAIL: $lib is missing (build first)" >&2
    exit 1
fi
exec 8>"$top_builddir/tests/torch/.build.lock"
flock 8
if [ ! -e "$ext/.built" ] || [ -n "$(find "$src" "$lib" -newer "$ext/.built" -print -quit)" ]; then
    rm -rf "$ext"
    mkdir -p "$ext"
    cp -R "$src"/setup.py "$src"/pyproject.toml "$src"/csrc "$src"/weft_torch "$ext"/
    chmod -R u+w "$ext"
    echo "building weft_torch in $ext" >&2
    if ! (cd "$ext" && WEFT_INCLUDE_DIR="$top_srcdir/include" \
            WEFT_LIBRARY_DIR="$top_builddir/.libs" MAX_JOBS=2 \
            timeout 900 "$python" setup.py -q build_ext --inplace) >"$ext/build.log" 2>&1; then
        echo "FAIL: building weft_torch" >&2
        tail -n 40 "$ext/build.log" >&2
        exit 1
    fi
    touch "$ext/.built"
fi
echo "$ext"
