/**
 * The CLI as one file, for start-up: `npm run build` runs this after `tsc`. Node loads the
 * compiled library as some 60 ES modules for a small `plan` (each resolved, read, compiled and
 * linked on its own, most of a command's start beyond Node's own); one CommonJS file loads in
 * one read and one compile. bin/rollout-budget.js runs this bundle when it is at least as new
 * as dist/src/cli/main.js (so a later `tsc` alone is never shadowed by an older bundle), else
 * the ES modules.
 *
 * What the bundle holds: dist/src/cli/main.js and everything it imports, commander included;
 * the modules a command imports on first use (`await import(...)`) stay in it as functions
 * run on first use (esbuild's lazy module wrappers), so `--help` still runs only what it
 * uses; so does better-sqlite3's JavaScript (BUNDLED below). Left out: the rest of what
 * `lazyRequire` loads (jStat, the LP solver) and pg, required from node_modules when used. `import.meta.url` becomes the bundle's own URL: the
 * files found from it (package.json, fixtures/, the service's planning thread at
 * ../../dist/src/service/plan-thread.js) are found from dist/cli/ as from dist/src/<folder>/.
 *
 * Then the code cache (bin/load-bundle.js): the bundle is compiled as the bin compiles it,
 * runs `--help` and a 3-prompt `plan` (in-memory state, output discarded), and V8's compiled
 * code for what ran is written beside it, under the build id the bundle's first line names.
 */
import { build, type Plugin } from 'esbuild';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CliIo } from '../src/cli/io.js';

/** The package root, from dist/scripts/. */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BUNDLE = join(ROOT, 'dist', 'cli', 'rollout-budget.cjs');

interface BundleLoader {
  loadBundle(bundle: string): { exports: { runCli(argv: readonly string[], io: CliIo): Promise<number> }; script: { createCachedData(): Buffer } };
  cachePath(bundle: string): string;
}

/**
 * commander requires node:child_process when it loads, for subcommands that are separate
 * executables (this CLI has none); loading it pulls in net, stream and dgram, about 8 ms of
 * every start. For commander only, it becomes a stand-in that requires the real module on
 * first use, so a command never running a subcommand executable never loads it.
 */
const lazyChildProcess: Plugin = {
  name: 'lazy-child-process',
  setup(b) {
    b.onResolve({ filter: /^(node:)?child_process$/ }, (args) =>
      /[\\/]commander[\\/]/.test(args.importer) ? { path: 'child_process', namespace: 'lazy-builtin' } : undefined);
    b.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, () => ({
      contents: `let real;
const load = () => (real ??= require('node:child_process'));
module.exports = new Proxy({}, { get: (_, key) => load()[key], has: (_, key) => key in load() });`,
      loader: 'js',
    }));
  },
};

/**
 * Packages that lazyRequire (src/lazy.ts) takes from the bundle itself: still run on first
 * use (esbuild wraps a CommonJS module in a function run on its first require), but read and
 * compiled with the bundle, under its code cache, where Node would resolve, read and compile
 * their files one by one. better-sqlite3's JavaScript is some 15 files, ~6 ms of a plan's
 * start; its native addon is loaded by path (store/sqlite-driver.ts: the bundled copy cannot
 * find it itself, so sqlite-driver asks for it only with that path). Any other name is required
 * from node_modules at run time, as before.
 */
const BUNDLED = ['better-sqlite3'];

const bundledLazyRequire: Plugin = {
  name: 'bundled-lazy-require',
  setup(b) {
    b.onLoad({ filter: /[\\/]dist[\\/]src[\\/]lazy\.js$/ }, () => ({
      contents: `const bundled = { ${BUNDLED.map((name) => `${JSON.stringify(name)}: () => require(${JSON.stringify(name)})`).join(', ')} };
export function lazyRequire(name) {
  let loaded;
  return () => (loaded ??= (bundled[name] ?? (() => require(name)))());
}`,
      loader: 'js',
    }));
  },
};

const buildId = randomBytes(8).toString('hex');
rmSync(`${BUNDLE}.cache`, { force: true });
await build({
  entryPoints: [join(ROOT, 'dist', 'src', 'cli', 'main.js')],
  outfile: BUNDLE,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  external: ['pg'],
  define: { 'import.meta.url': '__bundle_url' },
  banner: { js: `// rollout-budget bundle ${buildId}\nconst __bundle_url = require('node:url').pathToFileURL(__filename).href;` },
  plugins: [lazyChildProcess, bundledLazyRequire],
  // Without comments and indentation the bundle is two thirds the size, and all ASCII (the
  // regular expressions spell their non-ASCII characters as escapes): V8 holds and scans it as
  // a one-byte string. ~4 ms off each start here. Names stay, so a stack still names its functions.
  minifyWhitespace: true,
  charset: 'ascii',
  logLevel: 'warning',
});

const loader = createRequire(import.meta.url)(join(ROOT, 'bin', 'load-bundle.js')) as BundleLoader;
const { exports: cli, script } = loader.loadBundle(BUNDLE);
const quiet: CliIo = { stdout: () => undefined, stderr: () => undefined, readStdin: async () => '', stderrIsTty: false };
const work = mkdtempSync(join(tmpdir(), 'rollout-budget-bundle-'));
try {
  const prompts = join(work, 'prompts.jsonl');
  writeFileSync(prompts, ['a', 'b', 'c'].map((id) => `{"id":"${id}","prompt_tokens":50,"max_tokens":1024}\n`).join(''));
  for (const argv of [['--help'], ['plan', '--prompts', prompts, '--state', ':memory:', '--budget-rollouts', '24', '--out', '-']]) {
    const code = await cli.runCli(argv, quiet);
    if (code !== 0) throw new Error(`bundle-cli: the bundle's \`${argv.join(' ')}\` exited ${code}`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
writeFileSync(loader.cachePath(BUNDLE), Buffer.concat([Buffer.from(`${buildId}\n`, 'latin1'), script.createCachedData()]));
