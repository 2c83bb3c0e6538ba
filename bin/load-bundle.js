// Compiles the CLI's one-file bundle (scripts/bundle-cli.ts) with the V8 code cache that the build
// made for it: Node 20 keeps no compiled code between runs, so without it every start parses and
// compiles the bundle and the functions a command calls again. The cache is used only when its
// first line names the bundle's build (the bundle's first line); V8 itself rejects one made by
// another Node or with other V8 flags, and then this compiles from source as Node would.
'use strict';
const { readFileSync } = require('node:fs');
const Module = require('node:module');
const { dirname } = require('node:path');
const vm = require('node:vm');

/** The build named on a bundle's first line (`// rollout-budget bundle <id>`), or undefined. */
function buildOf(source) {
  return /^\/\/ rollout-budget bundle (\w+)\n/.exec(source.slice(0, 100))?.[1];
}

/** The bundle's code cache file. */
function cachePath(bundle) {
  return `${bundle}.cache`;
}

/**
 * Runs the bundle as a CommonJS module and returns its exports and the compiled script (for
 * createCachedData). The cache's first line is the build id, the rest V8's data.
 */
function loadBundle(bundle) {
  const source = readFileSync(bundle, 'utf8');
  let cachedData;
  try {
    const cache = readFileSync(cachePath(bundle));
    const newline = cache.indexOf(10);
    const build = buildOf(source);
    if (build !== undefined && newline > 0 && cache.toString('latin1', 0, newline) === build) cachedData = cache.subarray(newline + 1);
  } catch {
    // No cache: compile from source.
  }
  const script = new vm.Script(Module.wrap(source), { filename: bundle, cachedData });
  const module = { exports: {} };
  script.runInThisContext()(module.exports, Module.createRequire(bundle), module, bundle, dirname(bundle));
  return { exports: module.exports, script };
}

module.exports = { buildOf, cachePath, loadBundle };
