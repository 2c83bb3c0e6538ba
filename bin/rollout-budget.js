#!/usr/bin/env node
// Thin launcher: the CLI lives in the compiled library (npm run build). CommonJS (bin/package.json),
// so a command starts without Node's ES module loader: it runs the one-file bundle of the CLI
// (dist/cli/rollout-budget.cjs, scripts/bundle-cli.ts) when that is at least as new as the
// compiled modules (with the code cache the build made for it: load-bundle.js), else those modules
// (dist/src/cli/main.js), e.g. after a `tsc` on its own. When the command has returned and nothing
// is left to do (mayExitNow), it ends the process at once: Node's own end would give the heap back
// page by page first (~15-25 ms after a plan of 10^5 to 10^6 prompts), for nothing, as the system
// takes a process's memory back whole.
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

/**
 * What may still be open when a command returns without holding the process back: the
 * standard streams' own handles (a pipe or a terminal) and the port of a thread being stopped
 * (a state's reading thread a plan did not need).
 */
const IDLE = new Set(['PipeWrap', 'TTYWrap', 'MessagePort']);

/**
 * Whether the process may end now: its active resources (process.getActiveResourcesInfo())
 * are IDLE handles only. A write still waiting (a reader behind on a pipe: `SimpleWriteWrap`,
 * `WriteWrap`), a file operation, a timer, a socket or a child process says no: the process
 * then ends as Node ends it, once they are done.
 */
function mayExitNow(resources) {
  return resources.every((name) => IDLE.has(name));
}

/** A clone not built yet: one line saying what to run, not Node's module-not-found stack. */
function notBuilt(error) {
  if (error?.code !== 'ERR_MODULE_NOT_FOUND' || error.url !== pathToFileURL(modules).href) throw error;
  process.stderr.write(`rollout-budget: not built yet (no ${modules}): run \`npm run build\` (or \`npm start\`) in ${join(__dirname, '..')} first\n`);
  process.exitCode = 2;
  return new Promise(() => undefined);
}

const cli = bundleIsCurrent() ? Promise.resolve(require('./load-bundle.js').loadBundle(bundle).exports) : import(pathToFileURL(modules).href).catch(notBuilt);
cli.then(({ runCli }) => runCli(process.argv.slice(2))).then((code) => {
  process.exitCode = code;
  if (mayExitNow(process.getActiveResourcesInfo())) process.exit(code);
});
