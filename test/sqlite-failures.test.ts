import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, CLI, startService, stopService } from './service-helpers.js';
import { Database } from './sqlite.js';
import { dumpState } from './state-file.js';
import { tempDir } from './temp.js';

// A SQLite state that cannot be written for a reason outside the program (a full disk, an I/O
// error): observe printed "internal error" and a stack (exit 1), the service answered 500. The
// failure is a real one: the process runs under bash's `ulimit -f` (RLIMIT_FSIZE), so SQLite's
// write past that size fails with EFBIG, as on a full disk (SQLITE_IOERR_WRITE).

const dir = tempDir('rb-sqlite-failures-');

/** `n` rollouts with ids over n/10 prompts, one step. */
function results(name: string, n: number, step = 0): string {
  const path = join(dir, name);
  writeFileSync(path, Array.from({ length: n }, (_, i) => `{"prompt_id":"p${i % Math.ceil(n / 10)}","step":${step},"reward":${i % 2},"rollout_id":"${name}#${i}"}\n`).join(''));
  return path;
}

const dump = (path: string) => dumpState(path, 'SELECT count(*) AS n FROM seen');

/** The CLI under a file size limit of `kb` kB. */
function limited(kb: number, args: string[]) {
  return spawnSync('bash', ['-c', `ulimit -f ${kb} && exec "$0" "$@"`, process.execPath, CLI, ...args], { encoding: 'utf8' });
}

describe('a SQLite state that cannot be written', () => {
  it('observe exits 2 with one line naming the file and the failure; the state is as it was', () => {
    const state = join(dir, 'cli.db');
    const small = spawnSync(process.execPath, [CLI, 'observe', '--results', results('small.jsonl', 300), '--state', state], { encoding: 'utf8' });
    expect(small.status, small.stderr).toBe(0);
    const before = dump(state);
    const run = limited(300, ['observe', '--results', results('large.jsonl', 30_000), '--state', state]);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(new RegExp(`^rollout-budget: ${state.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: the state file cannot be read or written \\(SQLITE_IOERR_WRITE: disk I/O error\\); the state is as it was\\n$`));
    expect(dump(state)).toBe(before);
  });

  it('observe, plan and serve on a new state that cannot be made leave no file (a 0-byte state was left behind)', () => {
    writeFileSync(join(dir, 'prompts.jsonl'), '{"id":"a"}\n');
    const runs = [
      ['observe', '--results', results('new.jsonl', 10), '--state', join(dir, 'new-observe.db')],
      ['plan', '--prompts', join(dir, 'prompts.jsonl'), '--state', join(dir, 'new-plan.db'), '--budget-rollouts', '4', '--out', '/dev/null'],
      ['serve', '--port', '0', '--state', join(dir, 'new-serve.db')],
    ];
    for (const args of runs) {
      const run = limited(0, args);
      expect(run.status, args[0]).toBe(2);
      expect(run.stderr, args[0]).toMatch(/^rollout-budget: .*new-(observe|plan|serve)\.db: cannot open the state database/);
      expect(existsSync(args[args.indexOf('--state') + 1]!), args[0]).toBe(false);
    }
  });

  it('evidence that is not a number (the file edited by another program) is exit 2 naming it: plan gave nulls with exit 0, observe an internal error', () => {
    const state = join(dir, 'edited.db');
    writeFileSync(join(dir, 'edited.jsonl'), '{"prompt_id":"a","step":0,"rewards":[1,0]}\n{"prompt_id":"b","step":0,"rewards":[1,1]}\n');
    expect(spawnSync(process.execPath, [CLI, 'observe', '--results', join(dir, 'edited.jsonl'), '--state', state], { encoding: 'utf8' }).status).toBe(0);
    const db = new Database(state);
    db.exec("UPDATE prompts SET successes = 'abc' WHERE id = 'a'");
    db.close();
    writeFileSync(join(dir, 'edited-prompts.jsonl'), '{"id":"a"}\n{"id":"b"}\n');
    const plan = spawnSync(process.execPath, [CLI, 'plan', '--prompts', join(dir, 'edited-prompts.jsonl'), '--state', state, '--budget-rollouts', '8'], { encoding: 'utf8' });
    expect(plan.status).toBe(2);
    expect(plan.stdout).toBe('');
    expect(plan.stderr).toMatch(/^rollout-budget: prompt "a": the state holds evidence that is not a number \(successes .*, failures 1\), which no observe writes: was the file changed by another program\? Restore it from a backup\n$/);
    writeFileSync(join(dir, 'edited-more.jsonl'), '{"prompt_id":"a","step":1,"reward":1}\n');
    const before = dump(state);
    const observe = spawnSync(process.execPath, [CLI, 'observe', '--results', join(dir, 'edited-more.jsonl'), '--state', state], { encoding: 'utf8' });
    expect(observe.status).toBe(2);
    expect(observe.stderr).toMatch(/^rollout-budget: .*edited\.db: the state file holds a value that is not a number, which no observe writes: was it changed by another program\? Restore it from a backup \(SQLITE_CONSTRAINT_NOTNULL: .*\); the state is as it was\n$/);
    expect(dump(state)).toBe(before);
  });

  it('serve answers 503 STATE_ERROR with one log line, keeps serving reads, and applies nothing of the batch', async () => {
    const state = join(dir, 'serve.db');
    const child = await startService(['--state', state], 15_000, undefined, 400);
    try {
      const first = [{ prompt_id: 'a', step: 0, rewards: [1, 0] }];
      expect((await call(child.port, 'POST', '/v1/observe', first)).status).toBe(200);
      const large = Array.from({ length: 30_000 }, (_, i) => ({ prompt_id: `q${i % 3000}`, step: 1, reward: i % 2, rollout_id: `big#${i}` }));
      const r = await call(child.port, 'POST', '/v1/observe', large);
      expect(r.status, r.text).toBe(503);
      expect(r.json.error.code).toBe('STATE_ERROR');
      expect(r.json.error.retryable).toBeUndefined(); // a full disk does not clear itself in seconds
      expect(r.headers.get('retry-after')).toBeNull();
      expect(r.json.error.message).toBe(`${state}: the state file cannot be read or written (SQLITE_IOERR_WRITE: disk I/O error); the state is as it was`);
      expect((await call(child.port, 'GET', '/healthz')).json).toMatchObject({ status: 'ok', prompts: 1 });
      expect((await call(child.port, 'GET', '/v1/prompts/q1')).json.seen).toBe(false);
      expect((await call(child.port, 'POST', '/v1/plan', { candidates: [{ id: 'a' }, { id: 'q1' }], budget: { rollouts: 8 } })).status).toBe(200);
      expect(child.stderr()).toContain(`rollout-budget serve: ${state}: the state file cannot be read or written (SQLITE_IOERR_WRITE`);
      expect(child.stderr()).not.toContain('internal error');
      expect(child.stderr()).not.toMatch(/^\s+at /m);
    } finally {
      expect((await stopService(child)).code).toBe(0);
    }
    expect(JSON.parse(dump(state))[1]).toEqual([{ n: 1 }]); // the first batch's key only
  }, 60_000);

  it('a state file removed under serve: 503 naming it, for writes and plans (no new empty state made), and nothing left at the path', async () => {
    const plan = { candidates: [{ id: 'a' }, { id: 'b' }], budget: { rollouts: 8 } };
    for (const planFirst of [true, false]) { // planning threads opened before the removal, or after it
      const state = join(dir, `removed-${planFirst}.db`);
      const child = await startService(['--state', state]);
      try {
        expect((await call(child.port, 'POST', '/v1/observe', [{ prompt_id: 'a', step: 0, rewards: [1, 0] }])).status).toBe(200);
        if (planFirst) expect((await call(child.port, 'POST', '/v1/plan', plan)).status).toBe(200);
        rmSync(state);
        const answers = [
          await call(child.port, 'POST', '/v1/observe', [{ prompt_id: 'b', step: 0, reward: 1 }]),
          await call(child.port, 'POST', '/v1/plan', plan), // it planned on a new, empty state, 200
          await call(child.port, 'GET', '/healthz'),
        ];
        for (const r of answers) {
          expect(r.status, r.text).toBe(503);
          expect(r.json.error).toMatchObject({ code: 'STATE_ERROR', message: `${state}: the state file was removed after this process opened it; nothing was read or applied. Restart the command or the service to open the file now at that path` });
        }
        expect(existsSync(state)).toBe(false);
      } finally {
        expect((await stopService(child)).code).toBe(0);
      }
      // Its -wal and -shm are not left to be read by a new state made at the path.
      expect(readdirSync(dir).filter((f) => f.startsWith(`removed-${planFirst}.db`))).toEqual([]);
    }
  }, 60_000);
});
