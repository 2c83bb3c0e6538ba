import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { sqliteDriver } from '../src/store/sqlite-driver.js';
import { CLI, ROOT } from './service-helpers.js';

/**
 * Start-up: a command loads what it uses (cli/catalog.ts, main.ts). The modules a process
 * loads are listed by a module hook (test/lazy/hooks.mjs); no timing is asserted here (the
 * start-up times are `npm run bench` figures). The compiled ES modules are run as the bin
 * runs them without its bundle (test/lazy/modules-cli.mjs); the bin itself runs the one-file
 * bundle (scripts/bundle-cli.ts), where the same modules run on first import and only the
 * CommonJS dependencies outside it are seen loading.
 */
const dir = mkdtempSync(join(tmpdir(), 'rb-lazy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MODULES_CLI = join(ROOT, 'test', 'lazy', 'modules-cli.mjs');

function loaded(args: string[], cli = MODULES_CLI): string[] {
  const run = spawnSync(process.execPath, ['--import', join(ROOT, 'test', 'lazy', 'register.mjs'), cli, ...args], { encoding: 'utf8', cwd: dir });
  expect(run.status, run.stderr).toBe(0);
  return run.stderr.split('\n').filter((l) => l.startsWith('LOADED ')).map((l) => l.slice('LOADED '.length));
}

const heavy = ['/executor/', '/replay/', '/report/', '/service/', '/simserver/', '/simulate/', '/node_modules/pg/', '/node_modules/jstat/', '/node_modules/javascript-lp-solver/', '/node_modules/eventsource-parser/'];

/** The public built-in modules (node:crypto, ...) a run of the bin loads (test/lazy/builtins.cjs). */
function builtins(args: string[]): string[] {
  const run = spawnSync(process.execPath, ['-r', join(ROOT, 'test', 'lazy', 'builtins.cjs'), CLI, ...args], { encoding: 'utf8', cwd: dir });
  expect(run.status, run.stderr).toBe(0);
  const line = run.stderr.split('\n').find((l) => l.startsWith('BUILTINS '));
  expect(line, run.stderr).toBeDefined();
  return line!.slice('BUILTINS '.length).split(',');
}

describe('start-up loads what the command uses', () => {
  it('--help loads the catalog and commander, no store, planner or other command', () => {
    const mods = loaded(['--help']);
    expect(mods.some((m) => m.includes('/cli/catalog.js'))).toBe(true);
    for (const part of [...heavy, '/store/', '/plan/', '/solver/', '/node_modules/better-sqlite3/']) {
      // store/url.js: what a --state value names (cli/parse.ts stateArg), 20 lines importing nothing.
      expect(mods.filter((m) => m.includes(part) && !m.endsWith('/store/url.js')), part).toEqual([]);
    }
  });

  it('a plan loads the planner and SQLite, not the executor, replay, service, PostgreSQL, jStat or the MILP', () => {
    writeFileSync(join(dir, 'p.jsonl'), Array.from({ length: 100 }, (_, i) => `{"id":"p${i}"}`).join('\n'));
    const mods = loaded(['plan', '--prompts', 'p.jsonl', '--state', join(dir, 's.db'), '--budget-rollouts', '800', '--out', join(dir, 'plan.json')]);
    expect(mods.some((m) => m.includes('/plan/planner.js'))).toBe(true);
    expect(mods.some((m) => m.includes('/node_modules/better-sqlite3/')), 'CommonJS modules are listed too').toBe(true);
    for (const part of heavy) expect(mods.filter((m) => m.includes(part)), part).toEqual([]);
  });

  it('the bin runs the bundle (compiled by bin/load-bundle.js): no module of dist/ loaded, SQLite only for a plan', () => {
    const fromDist = (mods: string[]) => mods.filter((m) => m.includes('/dist/'));
    const help = loaded(['--help'], CLI);
    expect(help).toContain(pathToFileURL(join(ROOT, 'bin', 'load-bundle.js')).href);
    expect(fromDist(help)).toEqual([]);
    expect(help.filter((m) => m.includes('/node_modules/'))).toEqual([]);
    writeFileSync(join(dir, 'p.jsonl'), Array.from({ length: 100 }, (_, i) => `{"id":"p${i}"}`).join('\n'));
    const plan = loaded(['plan', '--prompts', 'p.jsonl', '--state', join(dir, 's2.db'), '--budget-rollouts', '800', '--out', join(dir, 'plan2.json')], CLI);
    expect(fromDist(plan)).toEqual([]);
    // better-sqlite3's JavaScript comes with the bundle; only its native addon is loaded, by path (store/sqlite-driver.ts).
    expect(plan.filter((m) => m.includes('/node_modules/better-sqlite3/'))).toEqual([pathToFileURL(sqliteDriver().options.nativeBinding!).href]);
    expect(plan.filter((m) => m.includes('/node_modules/bindings/'))).toEqual([]);
    for (const part of heavy.filter((p) => p.startsWith('/node_modules/'))) expect(plan.filter((m) => m.includes(part)), part).toEqual([]);
  });

  it('a small plan loads no node:crypto (digests: observe), node:worker_threads (a large state\'s reading thread) nor node:net (a process.stderr stream: its warnings go to fd 2); observe loads crypto for a file with lines without ids', () => {
    // Its warnings (a new state assumes lengths) go to fd 2 directly: no process.stderr stream (node:net) is made.
    writeFileSync(join(dir, 'pm.jsonl'), Array.from({ length: 100 }, (_, i) => `{"id":"p${i}","max_tokens":1024}`).join('\n'));
    const plan = builtins(['plan', '--prompts', 'pm.jsonl', '--state', join(dir, 's3.db'), '--budget-rollouts', '800', '--out', join(dir, 'plan3.json')]);
    expect(plan).toContain('fs');
    expect(plan).not.toContain('crypto');
    expect(plan).not.toContain('worker_threads');
    expect(plan).not.toContain('net');
    // observe digests a results file only for its lines without a rollout_id.
    writeFileSync(join(dir, 'r.jsonl'), '{"prompt_id":"p1","step":0,"reward":1,"tokens":10,"rollout_id":"a"}\n');
    expect(builtins(['observe', '--results', 'r.jsonl', '--state', join(dir, 's3.db')])).not.toContain('crypto');
    writeFileSync(join(dir, 'r2.jsonl'), '{"prompt_id":"p1","step":0,"reward":1,"tokens":10}\n');
    expect(builtins(['observe', '--results', 'r2.jsonl', '--state', join(dir, 's3.db')])).toContain('crypto');
  });

  it('the library\'s import loads no PostgreSQL driver until a state on it is opened (pg took 0.05 s of every import)', () => {
    const script = join(dir, 'library.mjs');
    writeFileSync(script, [
      `import { createAllocator } from ${JSON.stringify(pathToFileURL(join(ROOT, 'dist', 'src', 'index.js')).href)};`,
      "const allocator = createAllocator();",
      "allocator.plan([{ id: 'a' }, { id: 'b' }], { rollouts: 8 });",
      'allocator.close();',
    ].join('\n'));
    const mods = loaded([], script);
    expect(mods.some((m) => m.includes('/dist/src/store/postgres.js')), 'the PostgreSQL store module itself is loaded').toBe(true);
    expect(mods.some((m) => m.includes('/node_modules/better-sqlite3/')), 'SQLite, which the plan used').toBe(true);
    for (const part of ['/node_modules/pg/', '/node_modules/pg-pool/', '/node_modules/jstat/', '/node_modules/javascript-lp-solver/', '/node_modules/undici/']) {
      expect(mods.filter((m) => m.includes(part)), part).toEqual([]);
    }
  });
});
