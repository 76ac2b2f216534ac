#!/usr/bin/env bash
# Install the Debian packages weft needs to build and test (Debian 12, as
# root). Does nothing when they are all present.
set -euo pipefail
packages=(build-essential autoconf automake libtool pkg-config libucx-dev ucx-utils
          libpmix-dev libhwloc-dev hwloc libcriterion-dev libopenmpi-dev openmpi-bin
          iproute2 procps python3 python3-dev python3-numpy python3-mpi4py python3-pytest python3-venv
          python3-pip hpcc netpipe-openmpi clang libclang-rt-14-dev patchelf file)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
install_torch() { # weft_torch's tests need torch (tools/torch_env.sh); WEFT_NO_TORCH=1 skips it
    [ "${WEFT_NO_TORCH:-0}" = 1 ] || bash "$(dirname "$0")/torch_env.sh" >/dev/null
}
if [ ${#missing[@]} -eq 0 ]; then
    install_torch
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "weft: missing Debian packages: ${missing[*]}" >&2
    echo "weft: install them as root: apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "weft: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_torch
