#!/usr/bin/env bash
# Installs Debian's python3-torch, python3-numpy and python3-httpx for /usr/bin/python3, so the Python tests
# can run verl's own advantage functions (verl/trainer/ppo/core_algos.py) from the upstream
# snapshot in ../shared/upstream, and slime's Sample type (slime/utils/types.py imports httpx
# through slime/utils/http_utils.py). Idempotent: does nothing when all three import.
# Run as root on a fresh Debian machine: bash .ci/setup-python.sh
set -euo pipefail
if /usr/bin/python3 -c 'import torch, numpy, httpx' >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# Another job may hold the dpkg lock (CI steps installing Chromium or PostgreSQL): wait for it.
apt-get -o DPkg::Lock::Timeout=600 update
apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends python3-torch python3-numpy python3-httpx
