#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for the report-rendering test
# (test/report-render.test.ts), which renders report.html and checks every chart's marks.
# Without Chromium that test skips with a warning locally, and fails under CI=true.
# Idempotent: does nothing when a Chromium is already there (CHROMIUM_PATH, /usr/bin/chromium,
# chromium-browser, google-chrome). Needs root, or sudo without a password.
set -euo pipefail
for c in "${CHROMIUM_PATH:-}" /usr/bin/chromium /usr/bin/chromium-browser /usr/bin/google-chrome /usr/bin/google-chrome-stable; do
  if [ -n "$c" ] && [ -x "$c" ]; then
    echo "setup-chromium: using $c"
    exit 0
  fi
done
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup-chromium: not root and no sudo: install the Debian package 'chromium' yourself" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "setup-chromium: installing Debian's chromium (about 100 MB of packages)"
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends chromium
echo "setup-chromium: installed $(command -v chromium)"
