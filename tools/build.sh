#!/usr/bin/env bash
# Build weft in the source tree (configure once; make is incremental).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
[ -x configure ] || ./autogen.sh >/dev/null
[ -f Makefile ] || ./configure --quiet
make -j"$(nproc)" >/dev/null
