#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for the report-rendering test
# (test/report-render.test.ts), which renders report.html and checks every chart's marks.
# Without Chromium that test skips with a warning locally, and fails under CI=true.
# Idempotent: does nothing when a Chromium is already there (CHROMIUM_PATH, /usr/bin/chromium,
# chromium-browser, google-chrome). Needs root, or sudo without a password (apt-install.sh).
set -euo pipefail
for c in "${CHROMIUM_PATH:-}" /usr/bin/chromium /usr/bin/chromium-browser /usr/bin/google-chrome /usr/bin/google-chrome-stable; do
  if [ -n "$c" ] && [ -x "$c" ]; then
    echo "setup-chromium: using $c"
    exit 0
  fi
done
echo "setup-chromium: installing Debian's chromium (about 100 MB of packages)"
bash "$(dirname "$0")/apt-install.sh" setup-chromium chromium
echo "setup-chromium: installed $(command -v chromium)"
