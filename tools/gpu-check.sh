#!/usr/bin/env bash
# gpu-check: the CUDA backend on a machine with an NVIDIA GPU, in one run of at most 10 minutes.
#
#   1. says what the machine has (GPUs, driver, NVLink topology) and builds weft with CUDA
#      (./configure --with-cuda; skipped with --no-build, for a tree already built with CUDA,
#      and in a bundle made by tools/gpu-bundle.sh, which carries the programs and libraries
#      for a machine with nothing but the driver),
#   2. runs tests/device/test_cuda (its GPU tests must run, not skip),
#   3. weft_reduce_bench -d cuda: the reduce kernels against cuMemcpy D2D of the same bytes,
#   4. weft_torch built against this machine's torch, where torch sees a GPU, and
#      tests/torch/test_device.py on CUDA tensors (world sizes 2 and 3 on the GPUs there),
#   5. weft_bench -d cuda --enqueue --vs-mpi allreduce at np=2 on one GPU (two processes):
#      weft's stream-ordered allreduce against MPI_Allreduce staged D2H + H2D (where mpirun is
#      there),
# printing the ratios. Every step has a deadline, and a step that overstays it is killed with
# its processes.
#
# Exit status: 0 every step passed; 1 a step failed; 77 no usable NVIDIA GPU here (nothing is
# built then). Run from anywhere: it works in the source tree or bundle it belongs to.
#
#   tools/gpu-check.sh [--no-build]
#   tools/gpu-check.sh --cpu     without a GPU: the probe and the fake driver's tests only (to
#                                check a bundle on a machine without the build's packages)
set -u
cd "$(dirname "$0")/.." || exit 1
export LC_ALL=C
start=$(date +%s)
budget=560 # seconds, under 10 minutes with the summary
build=1
cpu=0
bundle=0
[ -f BUNDLE ] && bundle=1 && build=0
[ "${1:-}" = --no-build ] && build=0
[ "${1:-}" = --cpu ] && cpu=1 && build=0

# at most the seconds left of the budget, and at most $1
left() {
    local remaining=$((budget - ($(date +%s) - start)))
    [ "$remaining" -lt "$1" ] && echo $((remaining > 5 ? remaining : 5)) || echo "$1"
}

# step TIMEOUT LOGFILE COMMAND...: runs in its own process group, killed whole on timeout
step() {
    local limit log rc
    limit=$(left "$1")
    log=$2
    shift 2
    setsid -w timeout -s KILL "$limit" "$@" >"$log" 2>&1 &
    local pid=$!
    wait $pid
    rc=$?
    kill -KILL -- -$pid 2>/dev/null
    [ $rc -eq 137 ] && echo "  (killed after $limit s)" >>"$log"
    return $rc
}

logs=$(mktemp -d "${TMPDIR:-/tmp}/weft-gpu-check.XXXXXX")
failures=0
fail() {
    echo "gpu-check: FAIL: $1"
    [ -f "$2" ] && tail -n 25 "$2" | sed 's/^/    /'
    failures=$((failures + 1))
}

# --- 1. what is here ------------------------------------------------------------------------
[ $bundle -eq 1 ] && sed -n '2,$s/^/gpu-check: bundle: /p' BUNDLE
echo "gpu-check: machine: $(uname -srm), $(nproc) CPUs, $( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null)"
gpu=""
if [ $cpu -eq 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
    gpu=$(timeout -s KILL 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total \
          --format=csv,noheader 2>/dev/null)
    [ -n "$gpu" ] && echo "$gpu" | sed 's/^/gpu-check: GPU /'
    timeout -s KILL 20 nvidia-smi topo -m 2>/dev/null | sed 's/^/gpu-check: topo: /'
fi
if [ $cpu -eq 0 ] && [ -z "$gpu" ]; then
    echo "gpu-check: SKIP: no usable NVIDIA GPU here (nvidia-smi is missing or lists no GPU);"
    echo "gpu-check: run it on a machine with a GPU and its driver (libcuda.so.1)"
    exit 77
fi
echo "gpu-check: logs in $logs"

# --- 2. build ------------------------------------------------------------------------------
if [ $build -eq 1 ]; then
    if [ ! -x configure ] && ! step 120 "$logs/autogen.log" ./autogen.sh; then
        fail "autogen.sh" "$logs/autogen.log"
        exit 1
    fi
    if ! step 120 "$logs/configure.log" ./configure --quiet --with-cuda; then
        fail "./configure --with-cuda (build dependencies: tools/deps.sh)" "$logs/configure.log"
        exit 1
    fi
    if ! step 300 "$logs/make.log" make -j"$(nproc)" all tests/device/test_cuda \
            tests/device/cuda_probe tests/device/cuda_kernel_host tests/device/cuda_fake_check \
            tests/device/libfake_cuda.la; then
        fail "make" "$logs/make.log"
        exit 1
    fi
fi
if [ $bundle -eq 0 ] && ! grep -q '^[^#].*-DWEFT_HAVE_CUDA_BACKEND' Makefile 2>/dev/null ||
    [ ! -x tests/device/test_cuda ]; then
    fail "this tree is not built with CUDA (run without --no-build)" /dev/null
    exit 1
fi
# the driver as weft loads it (dlopen of libcuda.so.1, cuInit, a device): also where
# LD_LIBRARY_PATH brings the driver in, which the loader's cache does not list
probe=$(timeout -s KILL 60 ./tests/device/cuda_probe 2>&1)
echo "gpu-check: CUDA backend: $probe"
if [ $cpu -eq 1 ]; then
    export top_builddir="$PWD"
    step 120 "$logs/cpu.log" ./tools/weft_info || fail "weft_info" "$logs/cpu.log"
    head -n 3 "$logs/cpu.log" | sed 's/^/gpu-check: weft_info: /'
    if step 150 "$logs/test_cuda_cpu.log" ./tests/device/test_cuda -j1 --filter 'cuda_pure/*'; then
        grep 'Synthesis' "$logs/test_cuda_cpu.log" | sed 's/^/gpu-check: test_cuda (no GPU): /'
    else
        fail "test_cuda's tests without a GPU" "$logs/test_cuda_cpu.log"
    fi
    echo "gpu-check: --cpu: $failures failure(s) in $(($(date +%s) - start)) s"
    [ $failures -eq 0 ]
    exit
fi
case "$probe" in
loaded*) ;;
*)
    echo "gpu-check: SKIP: nvidia-smi sees a GPU but weft cannot use CUDA here"
    exit 77 ;;
esac

# --- 3. CUDA tests -----------------------------------------------------------------------
export WEFT_TIMEOUT=60
if step 150 "$logs/test_cuda.log" env top_builddir="$PWD" ./tests/device/test_cuda -j1 --verbose
then
    if grep -q '^\[SKIP\]' "$logs/test_cuda.log"; then
        fail "test_cuda skipped its GPU tests on a GPU machine" "$logs/test_cuda.log"
    fi
else
    fail "test_cuda" "$logs/test_cuda.log"
fi
grep 'Synthesis' "$logs/test_cuda.log" | sed 's/^/gpu-check: test_cuda: /'

# --- 4. reduce kernels against a D2D copy -----------------------------------------------------
if step 90 "$logs/reduce_bench.log" ./benchmarks/weft_reduce_bench -d cuda 256m 20; then
    echo "gpu-check: reduce kernels, traffic rate over cuMemcpy D2D (best / median):"
    grep -E '^(copy d2d|reduce)' "$logs/reduce_bench.log" |
        awk '{ printf "    %-20s %s / %s\n", $1 " " $2 " " $3, $(NF-2), $NF }'
else
    fail "weft_reduce_bench -d cuda" "$logs/reduce_bench.log"
fi

# --- 5. weft_torch on CUDA tensors -----------------------------------------------------------
py=$(command -v python3 || true)
if [ -z "$py" ] || ! timeout -s KILL 120 "$py" -c \
        'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu-check: weft_torch skipped: no python3 with a torch that sees the GPU"
else
    lib=$PWD/.libs
    [ $bundle -eq 1 ] && lib=$PWD/lib
    cp -R bindings/torch "$logs/torch_ext"
    if step 200 "$logs/torch_build.log" env -C "$logs/torch_ext" WEFT_INCLUDE_DIR="$PWD/include" \
            WEFT_LIBRARY_DIR="$lib" MAX_JOBS="$(nproc)" "$py" setup.py -q build_ext --inplace; then
        if step 240 "$logs/torch_cuda.log" env WEFT_TORCH_TEST_DEVICE=cuda \
                PYTHONPATH="$logs/torch_ext:$PWD/tests/torch" "$py" -m pytest -q -x \
                -p no:cacheprovider -k emu_tensors tests/torch/test_device.py; then
            echo "gpu-check: weft_torch on CUDA tensors: $(tail -n 1 "$logs/torch_cuda.log")"
        else
            fail "weft_torch's device tests on CUDA tensors" "$logs/torch_cuda.log"
        fi
    else
        fail "building weft_torch against $("$py" -c 'import torch; print(torch.__version__)')" \
            "$logs/torch_build.log"
    fi
fi

# --- 6. _enqueue allreduce at np=2 on one GPU against MPI staged through the host ------------
if [ $bundle -eq 1 ] && ! command -v mpirun >/dev/null 2>&1; then
    echo "gpu-check: MPI comparison skipped: no mpirun on this machine (the bundle carries no Open MPI)"
elif [ ! -x benchmarks/weft_bench ] || ! command -v mpirun >/dev/null 2>&1; then
    fail "weft_bench or mpirun missing: no Open MPI here (tools/deps.sh)" /dev/null
else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    if step 180 "$logs/enqueue.log" mpirun -np 2 --bind-to none --mca mpi_yield_when_idle 1 \
            benchmarks/weft_bench -d cuda --enqueue --vs-mpi -b 4k -e 64m -f 16 -n 20 -w 3 \
            allreduce; then
        echo "gpu-check: allreduce_enqueue np=2, one GPU (weft vs MPI staged D2H + H2D):"
        grep '^#' "$logs/enqueue.log" | tail -n 1 | sed 's/^/    /'
        grep -E '^[0-9]' "$logs/enqueue.log" | sed 's/^/    /'
    else
        fail "mpirun -np 2 weft_bench -d cuda --enqueue --vs-mpi allreduce" "$logs/enqueue.log"
    fi
fi

echo "gpu-check: $failures failure(s) in $(($(date +%s) - start)) s"
[ $failures -eq 0 ]
