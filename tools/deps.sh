#!/usr/bin/env bash
# Install the Debian packages weft needs to build and test (Debian 12, as
# root). Does nothing when they are all present.
set -euo pipefail
packages=(build-essential autoconf automake libtool pkg-config libucx-dev ucx-utils
          libpmix-dev libhwloc-dev hwloc libcriterion-dev libopenmpi-dev openmpi-bin
          iproute2 procps python3 python3-numpy python3-mpi4py python3-pytest python3-venv
          python3-pip hpcc netpipe-openmpi clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "weft: missing Debian packages: ${missing[*]}" >&2
    echo "weft: install them as root: apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "weft: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
