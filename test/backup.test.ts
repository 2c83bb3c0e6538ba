import { existsSync, lstatSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Database } from './sqlite.js';
import { describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { dumpState } from './state-file.js';
import { tempDir } from './temp.js';

// `backup`: a consistent copy of a SQLite state, taken while a trainer or service writes it (a
// `cp` of a state in WAL mode can miss what is still in its -wal, or copy it half-written), so a
// run resumed from a checkpoint can resume its state from the same step (docs/trainers.md).

const dump = (path: string) => dumpState(path, 'SELECT * FROM meta ORDER BY key');

/** Results of step `step`: prompt p<i> gets rewards[i] (one group each). */
function results(dir: string, step: number, rewards: number[][]): string {
  const path = join(dir, `step-${step}.jsonl`);
  writeFileSync(path, rewards.map((r, i) => JSON.stringify({ prompt_id: `p${i}`, step, rewards: r })).join('\n') + '\n');
  return path;
}

async function ok(args: string[]) {
  const r = await cli(args);
  expect(r.code, r.stderr).toBe(0);
  return r;
}

describe('backup', () => {
  it('copies what was committed, the -wal\'s part included, while a connection holds the state open; the copy is a working state', async () => {
    const dir = tempDir();
    const state = join(dir, 'state.db');
    await ok(['observe', '--results', results(dir, 0, [[1, 0, 1], [0, 0]]), '--state', state]);
    const held = new Database(state);
    try {
      held.prepare('SELECT count(*) FROM prompts').get(); // opens the -wal: the next commit stays there
      await ok(['observe', '--results', results(dir, 1, [[1, 1], [0, 1], [1]]), '--state', state]);
      expect(readFileSync(`${state}-wal`).length).toBeGreaterThan(0);
      const copy = join(dir, 'copy.db');
      const r = await ok(['backup', '--state', state, '--out', copy]);
      expect(JSON.parse(r.stdout)).toEqual({ out: copy, prompts: 3, last_step: 1, bytes: readFileSync(copy).length });
      expect(dump(copy)).toBe(dump(state));
      expect(readdirSync(dir).sort()).toEqual(['copy.db', 'state.db', 'state.db-shm', 'state.db-wal', 'step-0.jsonl', 'step-1.jsonl']);
    } finally {
      held.close();
    }
    const copy = join(dir, 'copy.db');
    await ok(['observe', '--results', results(dir, 2, [[1], [1], [1], [0]]), '--state', copy]);
    expect(JSON.parse((await ok(['inspect', '--state', copy])).stdout)).toMatchObject({ prompts: 4, last_step: 2 });
  });

  it('a copy taken at a checkpoint, put back over the state, plans as the state did at that step', async () => {
    const dir = tempDir();
    const state = join(dir, 'state.db');
    const step0 = results(dir, 0, [[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 0]]);
    await ok(['observe', '--results', step0, '--state', state]);
    const checkpoint = join(dir, 'global_step_0.db');
    await ok(['backup', '--state', state, '--out', checkpoint]);
    // The run goes on past the checkpoint, then crashes; the trainer resumes from step 0.
    await ok(['observe', '--results', results(dir, 1, [[1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0]]), '--state', state]);
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, ['p0', 'p1', 'p2'].map((id) => JSON.stringify({ id, prompt_tokens: 10, max_tokens: 100 })).join('\n') + '\n');
    const plan = async (at: string) => JSON.parse((await ok(['plan', '--prompts', prompts, '--state', at, '--budget-rollouts', '24', '--step', '1'])).stdout).allocations;
    const crashed = await plan(state);
    await ok(['backup', '--state', checkpoint, '--out', state]);
    // What the state was at the checkpoint, made again from step 0's results alone.
    const fresh = join(dir, 'fresh.db');
    await ok(['observe', '--results', step0, '--state', fresh]);
    const expected = await plan(fresh);
    expect(await plan(state)).toEqual(expected);
    expect(crashed).not.toEqual(expected);
  });

  it('a checkpoint\'s copy put back is left byte for byte (it was switched to WAL, its mtime changed); the restored state works', async () => {
    // Found by an operator's review: restoring from a checkpoint changed the checkpoint's copy.
    const dir = tempDir();
    const state = join(dir, 'state.db');
    await ok(['observe', '--results', results(dir, 0, [[1, 0, 1], [0, 0]]), '--state', state]);
    const checkpoint = join(dir, 'global_step_0.db');
    await ok(['backup', '--state', state, '--out', checkpoint]);
    const bytes = readFileSync(checkpoint);
    const mtime = lstatSync(checkpoint).mtimeMs;
    expect(bytes[18]).toBe(1); // a rollback-journal file, as VACUUM INTO writes it
    const restored = join(dir, 'restored.db');
    const r = await ok(['backup', '--state', checkpoint, '--out', restored]);
    expect(JSON.parse(r.stdout)).toMatchObject({ prompts: 2, last_step: 0 });
    expect(readFileSync(checkpoint).equals(bytes)).toBe(true);
    expect(lstatSync(checkpoint).mtimeMs).toBe(mtime);
    expect(readdirSync(dir).filter((f) => f.startsWith('global_step_0'))).toEqual(['global_step_0.db']);
    expect(dump(restored)).toBe(dump(state));
    await ok(['observe', '--results', results(dir, 1, [[1], [1], [0]]), '--state', restored]);
    expect(JSON.parse((await ok(['inspect', '--state', restored])).stdout)).toMatchObject({ prompts: 3, last_step: 1 });
  });

  it('counts the prompts observed, as inspect does, not those only planned (a group recorded)', async () => {
    const dir = tempDir();
    const state = join(dir, 'state.db');
    await ok(['observe', '--results', results(dir, 0, [[1, 0], [0, 1]]), '--state', state]);
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, ['p0', 'p1', 'new'].map((id) => JSON.stringify({ id, group: 'aime' })).join('\n') + '\n');
    await ok(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '12', '--step', '1']);
    const inspected = JSON.parse((await ok(['inspect', '--state', state])).stdout).prompts;
    const copied = JSON.parse((await ok(['backup', '--state', state, '--out', join(dir, 'copy.db')])).stdout).prompts;
    // Before: backup said 3 (the planned-only prompt "new" too), inspect 2.
    expect([inspected, copied]).toEqual([2, 2]);
  });

  it('a full disk under the copy is said to be the copy\'s, not the state\'s', async () => {
    const { vacuumInto } = await import('../src/store/sqlite-copy.js');
    const db = new Database(':memory:');
    try {
      db.exec('CREATE TABLE t (x); INSERT INTO t VALUES (randomblob(100000))');
      // /dev/full: every write fails with ENOSPC, which SQLite reports as SQLITE_FULL.
      expect(() => vacuumInto(db, '/dev/full', 'copy.db')).toThrow('copy.db: the disk holding the copy is full (SQLITE_FULL); the state is as it was');
    } finally {
      db.close();
    }
  });

  it('--out a symlink to a state: the file it leads to is replaced, the link stays a link', async () => {
    const dir = tempDir();
    const state = join(dir, 'state.db');
    await ok(['observe', '--results', results(dir, 0, [[1, 0]]), '--state', state]);
    const old = join(dir, 'old.db');
    await ok(['backup', '--state', state, '--out', old]);
    await ok(['observe', '--results', results(dir, 1, [[1], [0]]), '--state', state]);
    const link = join(dir, 'latest.db');
    symlinkSync(old, link);
    await ok(['backup', '--state', state, '--out', link]);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(dump(old)).toBe(dump(state));
  });

  it('refuses, naming why, and leaves every file as it was: PostgreSQL, no state, stdout, the state itself, a file not a state, another program\'s database, a state in use', async () => {
    const dir = tempDir();
    const state = join(dir, 'state.db');
    await ok(['observe', '--results', results(dir, 0, [[1, 0]]), '--state', state]);
    const notState = join(dir, 'results.jsonl');
    writeFileSync(notState, '{"prompt_id":"a","reward":1}\n');
    const inUse = join(dir, 'in-use.db');
    await ok(['backup', '--state', state, '--out', inUse]);
    writeFileSync(`${inUse}-wal`, '');
    // Another program's SQLite database: observe refuses it as a state; backup replaced it whole.
    const appDb = join(dir, 'app.db');
    const app = new Database(appDb);
    app.exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('ada')");
    app.close();
    const before = new Map(readdirSync(dir).map((f) => [f, readFileSync(join(dir, f)).toString('base64')]));
    const cases: [string[], string][] = [
      [['--state', 'postgres://u@localhost:5432/db', '--out', join(dir, 'x.db')], '--state postgres://u@localhost:5432/db: backup copies a SQLite state file; copy a PostgreSQL state\'s schema with pg_dump --schema <schema>'],
      [['--state', join(dir, 'missing.db'), '--out', join(dir, 'x.db')], `--state ${join(dir, 'missing.db')}: no state file there to copy (nothing was created)`],
      [['--state', state, '--out', '-'], '--out -: a state is a SQLite file, not text for stdout: give a file path'],
      [['--state', state, '--out', state], `--out ${state} is the state file itself: give another path`],
      [['--state', state, '--out', notState], `--out ${notState}: there is a file there that is not a SQLite state; backup replaces only a state file: give another path`],
      [['--state', state, '--out', appDb], `--out ${appDb}: a SQLite database of another program (its tables: users), not a rollout-budget state; backup replaces only a state file: give another path`],
      [['--state', state, '--out', inUse], `--out ${inUse}: a state with ${inUse}-wal beside it, so a process may have it open: stop what uses it (and remove those files) before replacing it, or give another path`],
      [['--state', state, '--out', join(dir, 'no-folder', 'x.db')], `${join(dir, 'no-folder', 'x.db')}: cannot write (ENOENT): there is no folder ${join(dir, 'no-folder')}`],
      // Before: taken for a path, its password printed in "there is no folder postgres://rb:hunter2@...".
      // Now a copy into that schema (test/backup-postgres-copy.test.ts), here to a server that is not there.
      [['--state', state, '--out', 'postgres://rb:hunter2@127.0.0.1:1/rl?schema=run7'], 'postgres://rb:***@127.0.0.1:1/rl?schema=run7: cannot open the state database (connect ECONNREFUSED 127.0.0.1:1)'],
    ];
    for (const [args, message] of cases) {
      const r = await cli(['backup', ...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toBe(`rollout-budget: ${message}\n`);
      expect(r.stdout).toBe('');
    }
    expect(new Map(readdirSync(dir).map((f) => [f, readFileSync(join(dir, f)).toString('base64')]))).toEqual(before);
    expect(existsSync(join(dir, 'missing.db'))).toBe(false);
  });
});
