#!/usr/bin/env bash
# Installs Debian packages for a CI setup script: bash .ci/apt-install.sh <who> <package>...
# As root, or with sudo without a password; waits for another job's dpkg lock (CI steps
# installing Chromium, nginx or PostgreSQL side by side).
set -euo pipefail
who=$1
shift
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "$who: not root and no sudo: install the Debian package(s) $* yourself" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "$@"
