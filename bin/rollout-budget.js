#!/usr/bin/env node
// Thin launcher: the CLI lives in the compiled library (npm run build). CommonJS (bin/package.json),
// so a command starts without Node's ES module loader: it runs the one-file bundle of the CLI
// (dist/cli/rollout-budget.cjs, scripts/bundle-cli.ts) when that is at least as new as the
// compiled modules (with the code cache the build made for it: load-bundle.js), else those modules
// (dist/src/cli/main.js), e.g. after a `tsc` on its own.
'use strict';
const { statSync } = require('node:fs');
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');

const dist = join(__dirname, '..', 'dist');
const bundle = join(dist, 'cli', 'rollout-budget.cjs');
const modules = join(dist, 'src', 'cli', 'main.js');

function bundleIsCurrent() {
  try {
    return statSync(bundle).mtimeMs >= statSync(modules).mtimeMs;
  } catch {
    return false;
  }
}

const cli = bundleIsCurrent() ? Promise.resolve(require('./load-bundle.js').loadBundle(bundle).exports) : import(pathToFileURL(modules).href);
cli.then(({ runCli }) => runCli(process.argv.slice(2))).then((code) => {
  process.exitCode = code;
});
