#!/usr/bin/env bash
# weft_torch, the torch.distributed backend (bindings/torch): builds the
# extension against the torch of the weft torch venv (tools/torch_env.sh
# makes it; tools/deps.sh runs that) and libweft of the build tree, then runs
# the pytest suites (test_backend.py, test_collectives.py: jobs of 2, 3 and 4
# processes whose every result is checked against gloo's and a locally
# computed one; test_ddp.py: DDP training under weft and gloo) and a short
# run of python -m weft_torch.bench; test_device.py: the stream-ordered path
# of device tensors, run with tensors in weft's emulated device memory.
# The extension is built in the build tree (tests/torch/build_ext.sh).
set -u
: "${top_builddir:?run through make check}" "${top_srcdir:?run through make check}"
venv=${WEFT_TORCH_VENV:-$HOME/.cache/weft/torch-venv}
python=$venv/bin/python
if [ ! -x "$python" ] ||
        ! timeout 300 "$python" -c 'import torch.distributed, pytest, expecttest' 2>/dev/null; then
    echo "SKIP: no torch venv at $venv (bash tools/torch_env.sh makes it; tools/deps.sh runs it)"
    exit 77
fi
mkdir -p "$top_builddir/tests/torch"
ext=$(bash "$top_srcdir/tests/torch/build_ext.sh" "$python") || exit 1
export PYTHONPATH=$ext PYTHONDONTWRITEBYTECODE=1
timeout -k 10 1200 "$python" -m pytest -q -p no:cacheprovider -o console_output_style=classic \
    -rs "$top_srcdir/tests/torch/test_backend.py" "$top_srcdir/tests/torch/test_collectives.py" \
    "$top_srcdir/tests/torch/test_ddp.py" "$top_srcdir/tests/torch/test_device.py"
rc=$?
[ $rc -eq 0 ] || echo "FAIL: pytest exit $rc"
# the benchmark module runs and times every collective on both backends
out=$(timeout -k 10 300 "$python" -m weft_torch.bench -np 2 -b 8 -e 4k -f 8 -r 1 2>&1)
brc=$?
rows=$(grep -cE '^ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' <<<"$out")
if [ $brc -ne 0 ] || [ "$rows" -ne 12 ]; then
    echo "FAIL: python -m weft_torch.bench -np 2 -e 4k (exit $brc, $rows of 12 rows)"
    tail -n 20 <<<"$out"
    rc=1
else
    echo "weft_torch.bench -np 2 8 B..4 KiB: 3 collectives x 4 sizes timed on weft and gloo"
fi
[ $rc -eq 0 ] && echo PASS
exit $rc
