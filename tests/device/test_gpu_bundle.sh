#!/usr/bin/env bash
# The GPU bundle (tools/gpu-bundle.sh) made from this build: every program and library in it
# resolves what a bare system lacks (UCX, hwloc, PMIx, Criterion, Open MPI's libraries, libweft)
# from the bundle itself (tools/gpu-bundle.sh --verify: ldd without LD_LIBRARY_PATH), and its
# check runs without a GPU (tools/gpu-check.sh --cpu: the driver probe, weft_info, test_cuda's
# tests that need no GPU, all from the bundle). A run of the same in a plain Debian chroot
# (debootstrap --variant=minbase) is in docs/device.md. Skipped (77) without patchelf.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
if ! command -v patchelf >/dev/null; then
    echo "SKIP: patchelf is missing (tools/deps.sh installs it)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-gpu-bundle.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
if ! (cd "$top_builddir" && timeout 600 bash "$top_srcdir/tools/gpu-bundle.sh" "$tmp/b"); then
    echo "FAIL: tools/gpu-bundle.sh"
    exit 1
fi
timeout 300 bash "$top_srcdir/tools/gpu-bundle.sh" --verify "$tmp/b" || {
    echo "FAIL: the bundle takes libraries from outside itself"
    fail=1
}
# the check from the bundle, with nothing of the build tree on the library path
if ! env -u LD_LIBRARY_PATH -u top_builddir timeout 400 "$tmp/b/tools/gpu-check.sh" --cpu; then
    echo "FAIL: gpu-check.sh --cpu from the bundle"
    fail=1
fi
exit $fail
