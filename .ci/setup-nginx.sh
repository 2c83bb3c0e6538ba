#!/usr/bin/env bash
# Installs Debian's nginx-light for python/tests/test_tls_proxy.py, which runs docs/service.md's
# nginx block (a TLS reverse proxy in front of `rollout-budget serve`) with a real nginx.
# Without nginx that test skips locally, and fails under CI=true. The test runs nginx itself, as
# its user, on a free port and in a temp folder; it needs nothing of the package's own service.
# Idempotent: does nothing when nginx is there. Needs root, or sudo without a password (apt-install.sh).
set -euo pipefail
for c in "$(command -v nginx || true)" /usr/sbin/nginx; do
  if [ -n "$c" ] && [ -x "$c" ]; then
    echo "setup-nginx: using $c"
    exit 0
  fi
done
echo "setup-nginx: installing Debian's nginx-light"
bash "$(dirname "$0")/apt-install.sh" setup-nginx nginx-light
echo "setup-nginx: installed $(command -v nginx || echo /usr/sbin/nginx)"
