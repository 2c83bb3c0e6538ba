#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for the report-rendering test
# (test/report-render.test.ts). Idempotent: does nothing when /usr/bin/chromium exists.
# Run as root on a fresh Debian machine: bash .ci/setup-chromium.sh
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium
