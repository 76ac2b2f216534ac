#!/usr/bin/env bash
# The Python environment of weft_torch's tests and benchmark: a venv of
# Debian's python3 with PyPI's torch 2.x (a CUDA build, about 3 GB with its
# nvidia-* wheels, that runs on the CPU without a GPU), pytest and
# expecttest. Made once at $WEFT_TORCH_VENV (default ~/.cache/weft/torch-venv)
# and reused while it imports (checked once); prints its python. tools/deps.sh runs this.
set -euo pipefail
venv=${WEFT_TORCH_VENV:-$HOME/.cache/weft/torch-venv}
check='import torch, torch.distributed as d, pytest, expecttest; assert d.is_available()'
# .weft-checked: written once the venv imported; saves importing torch (seconds)
# on every build that runs tools/deps.sh
if [ -x "$venv/bin/python" ] && { [ -e "$venv/.weft-checked" ] ||
        timeout 300 "$venv/bin/python" -c "$check" 2>/dev/null; }; then
    touch "$venv/.weft-checked"
    echo "$venv/bin/python"
    exit 0
fi
echo "weft: installing torch into $venv (about 3 GB, a few minutes)" >&2
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
/usr/bin/python3 -m venv "$venv"
timeout 1800 "$venv/bin/pip" install -q --upgrade pip >&2
timeout 1800 "$venv/bin/pip" install -q 'torch>=2.1,<3' pytest expecttest numpy >&2
"$venv/bin/python" -c "$check"
touch "$venv/.weft-checked"
echo "$venv/bin/python"
