// Runs before `npm start`, `npm test` and `npm run bench` (plain JS: nothing is built yet). On a
// fresh clone, where node_modules is missing or incomplete, it installs the locked dependencies
// with `npm ci`, so the README's two quick-start commands work as the first thing you type.
//
// `npm ci` prints nothing for minutes on its own, so this shows what it is doing: packages
// fetched out of those in the lockfile, then the native build of better-sqlite3 (a download of a
// prebuilt binary, or, where none can be had, a compile of SQLite: the long part), with the time
// elapsed. On a terminal the status line is redrawn in place; elsewhere (CI, a pipe) a line is
// printed at each phase and every 15 s. On failure the last lines of npm's output are shown.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const needed = ['typescript', 'vitest', 'esbuild', 'commander', 'undici', 'better-sqlite3/build/Release/better_sqlite3.node'];
const always = process.argv.includes('--always'); // CI: a clean install every time, with the same progress
const missing = needed.filter((p) => !existsSync(join(root, 'node_modules', p)));
if (missing.length === 0 && !always) process.exit(0);

/** Whether an os/cpu/libc list of the lockfile admits this machine (`!x` excludes x). */
function admits(list, value) {
  if (!Array.isArray(list) || value === undefined) return true;
  if (list.includes(`!${value}`)) return false;
  return list.some((x) => x === value || x.startsWith('!'));
}

/**
 * About how many packages npm ci will fetch: the lockfile's entries, less those for another
 * platform (os, cpu, libc). npm may fetch a few fewer (it reports "added N packages").
 */
function lockedPackages() {
  try {
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'));
    const libc = process.platform !== 'linux' ? undefined : process.report?.getReport?.().header?.glibcVersionRuntime === undefined ? 'musl' : 'glibc';
    return Object.entries(lock.packages ?? {}).filter(([path, p]) => path !== '' && p.link !== true
      && admits(p.os, process.platform) && admits(p.cpu, process.arch) && admits(p.libc, libc)).length;
  } catch {
    return undefined;
  }
}

const total = lockedPackages();
const tty = process.stderr.isTTY === true;
const start = Date.now();
const elapsed = () => {
  const s = Math.round((Date.now() - start) / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
};
const say = (text) => process.stderr.write(`${text}\n`);

say(`rollout-budget: installing the locked dependencies with npm ci (${missing.length === 0 ? '--always' : `missing: ${missing.join(', ')}`}).`);
say('rollout-budget: this is the slow part of a first run: about 4 min measured on a 2-core machine, 3 to 3.5 min of it compiling SQLite');
say('  for better-sqlite3 (no prebuilt binary could be downloaded there); much less where one can. Later runs skip it.');

let fetched = 0;
let phase = 'fetching packages';
let detail = '';
let lastLine = '';
let lastPrinted = 0;
const tail = [];

function status() {
  const count = phase === 'fetching packages' && total !== undefined ? ` ${Math.min(fetched, total)} of about ${total}` : '';
  return `rollout-budget: npm ci ${elapsed()} ${phase}${count}${detail === '' ? '' : `: ${detail}`}`;
}

function show(force = false) {
  const line = status();
  if (tty) {
    if (!force && Date.now() - lastPrinted < 200) return;
    lastPrinted = Date.now();
    const columns = process.stderr.columns > 0 ? process.stderr.columns : 100;
    const width = Math.max(40, columns - 1);
    process.stderr.write(`\r${line.slice(0, width).padEnd(Math.min(width, lastLine.length))}`);
    lastLine = line.slice(0, width);
  } else if (force || Date.now() - lastPrinted >= 15_000) {
    say(line);
    lastPrinted = Date.now();
  }
}

function setPhase(next, info = '') {
  if (next !== phase) {
    phase = next;
    detail = info;
    show(true);
  } else if (info !== '') {
    detail = info;
  }
}

function onLine(raw) {
  const line = raw.replace(/\x1b\[[0-9;]*m/g, '').trim();
  if (line === '') return;
  tail.push(line);
  if (tail.length > 40) tail.shift();
  if (/^npm http fetch GET 200 .*\.tgz/.test(line)) fetched++;
  else if (/^> better-sqlite3@\S+ install/.test(line)) setPhase('building better-sqlite3', 'trying a prebuilt binary');
  else if (/prebuild-install.*(warn|err)/i.test(line) || /gyp info spawn|gyp info using node-gyp/.test(line)) setPhase('building better-sqlite3', 'no prebuilt binary could be downloaded: compiling from source');
  else if (/CC\(target\).*sqlite3\.o/.test(line)) setPhase('building better-sqlite3', 'compiling SQLite (sqlite3.c, one large file: the longest part)');
  else if (/CXX\(target\)|CC\(target\)/.test(line)) setPhase('building better-sqlite3', `compiling ${line.split('/').at(-1) ?? ''}`);
  else if (/SOLINK_MODULE|COPY Release/.test(line)) setPhase('building better-sqlite3', 'linking');
  else if (/^> \S+@\S+ (install|postinstall|prepare)/.test(line)) setPhase('running install scripts', line.slice(2));
  else if (/^added \d+ packages/.test(line)) setPhase('done', line);
  show();
}

/** What node-gyp said it could not find (Python, make, a C++ compiler), or undefined. */
function buildToolMissing(lines) {
  const text = lines.join('\n');
  if (/find Python|Could not find any Python/.test(text)) return 'Python 3 (node-gyp runs it), make and a C++ compiler';
  if (/not found: make|make: (command )?not found|`make` failed/.test(text)) return 'make and a C++ compiler';
  if (/g\+\+: (command )?not found|c\+\+: (command )?not found|No such file or directory.*[gc]\+\+/.test(text)) return 'a C++ compiler (g++)';
  return undefined;
}

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const child = spawn(npm, ['ci', '--no-audit', '--no-fund', '--loglevel=http', '--foreground-scripts', '--progress=false'], {
  cwd: root,
  stdio: ['ignore', 'pipe', 'pipe'],
});
for (const stream of [child.stdout, child.stderr]) {
  let buffer = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    buffer += chunk;
    const lines = buffer.split(/\r?\n/);
    buffer = lines.pop() ?? '';
    for (const l of lines) onLine(l);
  });
  stream.on('end', () => buffer !== '' && onLine(buffer));
}
const timer = setInterval(() => show(), tty ? 1000 : 15_000);
show(true);

child.on('close', (code, signal) => {
  clearInterval(timer);
  if (tty) process.stderr.write('\n');
  if (code === 0) {
    say(`rollout-budget: dependencies installed in ${elapsed()} (min:s).`);
    return;
  }
  say(`rollout-budget: npm ci failed (${signal ?? `exit code ${code}`}) after ${elapsed()}; its last lines:`);
  for (const l of tail) say(`  ${l}`);
  const missing = buildToolMissing(tail);
  if (missing !== undefined) {
    say(`rollout-budget: no prebuilt better-sqlite3 binary for Node ${process.version} (${process.platform}-${process.arch}) could be downloaded (they come from github.com),`);
    say(`  and compiling it needs ${missing}, which this machine lacks. Install the build tools (Debian: apt-get install -y python3 make g++), or let npm reach github.com, then run this again.`);
  }
  process.exit(code ?? 1);
});
