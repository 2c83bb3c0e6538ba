#!/usr/bin/env bash
# Installs Debian's python3-torch, python3-numpy, python3-httpx, python3-pil, python3-omegaconf and python3-pandas for /usr/bin/python3, so the Python tests
# can run verl's own advantage functions (verl/trainer/ppo/core_algos.py) from the upstream
# snapshot in ../shared/upstream, and slime's Sample type (slime/utils/types.py imports httpx
# through slime/utils/http_utils.py; PIL: the images of slime's multimodal samples; omegaconf: verl's agent loops read their config file with it; pandas: the missing values of its nullable columns, pandas.NA, in python/tests/test_plan.py). Also python3-venv: test/docs-commands.test.ts runs the
# docs' `pip install ./python` in a fresh virtual environment (Debian's python3 makes one only
# with it). Idempotent: does nothing when all six import and a venv can be made.
# Run as root on a fresh Debian machine: bash .ci/setup-python.sh
set -euo pipefail
venv_ok() {
  local d
  d=$(mktemp -d)
  python3 -m venv "$d/venv" >/dev/null 2>&1 && rm -rf "$d" && return 0
  rm -rf "$d"
  return 1
}
if /usr/bin/python3 -c 'import torch, numpy, httpx, PIL, omegaconf, pandas' >/dev/null 2>&1 && venv_ok; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# Another job may hold the dpkg lock (CI steps installing Chromium or PostgreSQL): wait for it.
apt-get -o DPkg::Lock::Timeout=600 update
apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends python3-torch python3-numpy python3-httpx python3-pil python3-omegaconf python3-pandas python3-venv
