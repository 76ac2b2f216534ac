#!/usr/bin/env bash
# gpu-bundle: weft's GPU checks (tools/gpu-check.sh) as one folder that runs on a machine with
# only an NVIDIA driver: no compiler, autotools, UCX, hwloc, PMIx or Criterion there, and no
# network to fetch them. Made here from a build with the CUDA backend (configure found nvcc):
#
#   bundle/
#     BUNDLE                     what was built where (git commit, date, build machine)
#     tools/gpu-check.sh         the check; it runs the programs below, nothing is built
#     tools/weft_info
#     tests/device/test_cuda, cuda_probe, cuda_kernel_host, cuda_fake_check,
#     tests/device/.libs/libfake_cuda.so
#     benchmarks/weft_reduce_bench, benchmarks/weft_bench
#     include/weft.h, bindings/torch/, tests/torch/{common,test_device}.py: weft_torch's
#                                sources and its device tests, built and run there against
#                                the machine's torch (on CUDA tensors)
#     lib/                       libweft and every library the programs need that a bare
#                                glibc system lacks (found through ldd), UCX's transport
#                                modules in lib/ucx (UCX looks for them beside libucs)
#
# Every program and library finds lib/ through its RUNPATH ($ORIGIN/...; patchelf), so no
# LD_LIBRARY_PATH is needed (test_cuda sets its own to put stand-ins for libcuda.so.1 first).
# Not bundled: libcuda.so.1 (the GPU machine's driver), glibc, libstdc++ and libgcc_s (the
# target's, newer), Open MPI (step 5 of the check runs where the target has mpirun).
#
#   tools/gpu-bundle.sh [DIR]        DIR defaults to gpu-bundle in the build tree (ignored by git)
#   tools/gpu-bundle.sh --verify DIR every ELF file of the bundle resolves what a bare system
#                                    lacks from the bundle (ldd without LD_LIBRARY_PATH)
#   DIR/tools/gpu-check.sh           on the GPU machine
#   DIR/tools/gpu-check.sh --cpu     anywhere: only what runs without a GPU (the fake driver's
#                                    tests, the probe), to check the bundle itself
#
# Run from a build tree (top_builddir, default: the current folder) after make; needs patchelf.
set -eu
export LC_ALL=C
srcdir=$(cd "$(dirname "$0")/.." && pwd)
top_builddir=$(cd "${top_builddir:-$PWD}" && pwd)
out=${1:-$top_builddir/gpu-bundle}

die() {
    echo "gpu-bundle: $*" >&2
    exit 1
}

# a system library every glibc machine has (or whose target copy is newer than ours)
base_lib() {
    case "$(basename "$1")" in
    ld-linux*.so* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | \
        libresolv.so* | libutil.so* | libstdc++.so* | libgcc_s.so* | linux-vdso.so*)
        return 0 ;;
    esac
    return 1
}

if [ "${1:-}" = --verify ]; then
    dir=$(cd "${2:?--verify DIR}" && pwd)
    bad=0
    while read -r f; do
        file -b "$f" | grep -q '^ELF' || continue
        while read -r line; do
            case "$line" in
            *libcuda.so.1*) ;; # the machine's driver, loaded with dlopen
            *"not found"*) echo "gpu-bundle: $f: $line"; bad=1 ;;
            *"=> /"*)
                path=${line#*=> }
                path=${path%% (*}
                case "$path" in
                "$dir"/*) ;;
                *) base_lib "$path" || { echo "gpu-bundle: $f takes $path from outside"; bad=1; } ;;
                esac ;;
            esac
        done < <(env -u LD_LIBRARY_PATH ldd "$f" 2>&1)
    done < <(find "$dir" -type f)
    [ $bad -eq 0 ] && echo "gpu-bundle: $dir: every ELF file resolves its libraries in the bundle"
    exit $bad
fi

command -v patchelf >/dev/null || die "patchelf is missing (apt-get install patchelf)"
cd "$top_builddir"
grep -q '^[^#].*-DWEFT_HAVE_CUDA_BACKEND' Makefile 2>/dev/null ||
    die "$top_builddir is not built with the CUDA backend (configure found no nvcc)"
# the test programs are made where missing (make check makes them too)
for t in tests/device/test_cuda tests/device/cuda_probe tests/device/cuda_kernel_host \
    tests/device/cuda_fake_check tests/device/libfake_cuda.la; do
    [ -e "$t" ] || make -s "$t" >/dev/null || die "make $t failed"
done
[ -e .libs/libweft.so.0 ] || die "$top_builddir is not built (make)"

# the real program behind a libtool wrapper (benchmarks/weft_bench is one when shared)
real() {
    local dir base
    dir=$(dirname "$1")
    base=$(basename "$1")
    if [ -x "$dir/.libs/$base" ]; then
        echo "$dir/.libs/$base"
    elif [ -x "$dir/.libs/lt-$base" ]; then
        echo "$dir/.libs/lt-$base"
    else
        echo "$1"
    fi
}

rm -rf "$out"
mkdir -p "$out/lib/ucx" "$out/tools" "$out/tests/device/.libs" "$out/benchmarks"
programs="tests/device/test_cuda tests/device/cuda_probe tests/device/cuda_kernel_host
tests/device/cuda_fake_check benchmarks/weft_reduce_bench benchmarks/weft_bench tools/weft_info"
for p in $programs; do
    cp "$(real "$p")" "$out/$p"
done
cp -L tests/device/.libs/libfake_cuda.so "$out/tests/device/.libs/"
cp -L .libs/libweft.so.0 "$out/lib/"
ln -s libweft.so.0 "$out/lib/libweft.so"
cp "$srcdir/tools/gpu-check.sh" "$out/tools/"
# weft_torch's sources and CUDA tensor checks: gpu-check.sh builds the extension against the
# machine's torch where torch sees a GPU
mkdir -p "$out/include" "$out/bindings/torch" "$out/tests/torch"
cp "$srcdir/include/weft.h" "$out/include/"
cp -R "$srcdir/bindings/torch/setup.py" "$srcdir/bindings/torch/pyproject.toml" \
    "$srcdir/bindings/torch/csrc" "$srcdir/bindings/torch/weft_torch" "$out/bindings/torch/"
cp "$srcdir/tests/torch/common.py" "$srcdir/tests/torch/test_device.py" "$out/tests/torch/"

# copies every library file (ELF given) needs into lib/; fails on one ldd cannot find
bundle_deps() {
    local line path
    LD_LIBRARY_PATH="$out/lib" ldd "$1" | while read -r line; do
        case "$line" in
        *"not found"*)
            [ "$(basename "$(dirname "$1")")" = ucx ] && return 2 # an optional UCX module
            die "$1 needs $line" ;;
        *"=> /"*) path=${line#*=> }; path=${path%% (*} ;;
        *) continue ;;
        esac
        case "$path" in
        "$out"/* | "$top_builddir"/.libs/*) continue ;;
        esac
        base_lib "$path" || [ -e "$out/lib/$(basename "$path")" ] ||
            cp -L "$path" "$out/lib/$(basename "$path")"
    done
}

for p in $programs tests/device/.libs/libfake_cuda.so lib/libweft.so.0; do
    bundle_deps "$out/$p"
done
# UCX's transport modules, with their libraries; those that need what is not here (InfiniBand
# verbs, for instance, when not installed) are left out: UCX then goes without them
ucs=$(ldd "$out/lib/libweft.so.0" | sed -n 's/.*libucs\.so[^ ]* => \([^ ]*\) .*/\1/p')
[ -n "$ucs" ] || die "libweft does not link libucs"
for m in "$(dirname "$(readlink -f "$ucs")")"/ucx/*.so*; do
    [ -e "$m" ] || continue
    cp -L "$m" "$out/lib/ucx/"
    if ! (bundle_deps "$out/lib/ucx/$(basename "$m")") 2>/dev/null; then
        rm -f "$out/lib/ucx/$(basename "$m")"
    fi
done

# RUNPATHs: each program and library finds lib/ from where it is
for f in "$out"/lib/*.so* "$out"/lib/ucx/*.so* "$out"/tests/device/.libs/*.so; do
    rel=$(realpath --relative-to="$(dirname "$f")" "$out/lib")
    patchelf --set-rpath "\$ORIGIN/$rel" "$f"
done
for p in $programs; do
    rel=$(realpath --relative-to="$(dirname "$out/$p")" "$out/lib")
    patchelf --set-rpath "\$ORIGIN/$rel" "$out/$p"
done

{
    echo "weft GPU bundle (tools/gpu-bundle.sh): run tools/gpu-check.sh in this folder"
    echo "commit: $(git -C "$srcdir" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "made: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME")"
    echo "CUDA toolkit: $(grep -o 'CUDA_HOME = .*' Makefile | head -n 1)"
} >"$out/BUNDLE"
echo "gpu-bundle: $out ($(du -sh "$out" | cut -f1)); on the GPU machine: $out/tools/gpu-check.sh"
