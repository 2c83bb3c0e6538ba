#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on 127.0.0.1 for the store and service tests (issue 5).
#
#   eval "$(.ci/setup-postgres.sh start)"   # exports RB_PG_URL and RB_PG_DIR
#   ... run the tests ...
#   .ci/setup-postgres.sh stop              # stops the server, removes its data folder
#
# Idempotent: installs Debian's `postgresql` only when no server binaries are found, and
# `start` reuses a server this script already started (RB_PG_DIR, or the state file below), and
# then exports RB_PG_REUSED=1, so that `.ci/run` stops only a server it started itself.
# Runs as root (CI) or as an ordinary user; as root the cluster belongs to the `postgres`
# user (created by the package), because PostgreSQL refuses to run as root.
# Only the export lines go to stdout; progress goes to stderr.
set -euo pipefail

STATE_FILE="${RB_PG_STATE_FILE:-/tmp/rollout-budget-pg.env}"
log() { echo "setup-postgres: $*" >&2; }

find_bindir() {
  local d
  for d in "$(dirname "$(command -v pg_ctl 2>/dev/null || echo /nonexistent/x)")" /usr/lib/postgresql/*/bin; do
    if [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then
      readlink -f "$d/pg_ctl" | xargs dirname
      return 0
    fi
  done
  return 1
}

install_server() {
  if find_bindir >/dev/null; then return 0; fi
  if [ "$(id -u)" != 0 ]; then log "PostgreSQL server binaries missing and not root: install the 'postgresql' package"; exit 1; fi
  log "installing Debian's postgresql package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  # The package may start a system cluster on 5432; we use our own and leave that one alone.
  find_bindir >/dev/null || { log "postgresql installed but pg_ctl/initdb not found"; exit 1; }
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
  if [ -f "$STATE_FILE" ]; then
    # shellcheck disable=SC1090
    . "$STATE_FILE"
    if [ -n "${RB_PG_DIR:-}" ] && [ -d "$RB_PG_DIR/data" ] && as_owner "$RB_PG_BIN/pg_ctl" -D "$RB_PG_DIR/data" status >/dev/null 2>&1; then
      log "reusing the server in $RB_PG_DIR"
      cat "$STATE_FILE"
      echo "export RB_PG_REUSED=1"   # a caller that stops what it started leaves this one running
      return 0
    fi
    rm -f "$STATE_FILE"
  fi
  install_server
  local bin dir port
  bin="$(find_bindir)"
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
  fi
  dir="$(mktemp -d /tmp/rollout-budget-pg.XXXXXX)"
  chmod 755 "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  port="$(free_port)"
  as_owner "$bin/initdb" -D "$dir/data" -U rb --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=on -c max_connections=200" start >&2 \
    || { cat "$dir/server.log" >&2; exit 1; }
  as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U rb rollout_budget_test
  {
    echo "export RB_PG_URL='postgres://rb@127.0.0.1:$port/rollout_budget_test'"
    echo "export RB_PG_DIR='$dir'"
    echo "export RB_PG_BIN='$bin'"
  } >"$STATE_FILE"
  log "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $dir)"
  cat "$STATE_FILE"
}

stop() {
  if [ ! -f "$STATE_FILE" ]; then log "nothing to stop"; return 0; fi
  # shellcheck disable=SC1090
  . "$STATE_FILE"
  if [ -n "${RB_PG_DIR:-}" ] && [ -d "$RB_PG_DIR/data" ]; then
    as_owner "$RB_PG_BIN/pg_ctl" -D "$RB_PG_DIR/data" -m fast -w stop >&2 || true
    rm -rf "$RB_PG_DIR"
  fi
  rm -f "$STATE_FILE"
  log "stopped"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 [start|stop]" >&2; exit 2 ;;
esac
