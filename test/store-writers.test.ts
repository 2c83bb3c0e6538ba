import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Database } from './sqlite.js';
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { LOCK_WAIT_ENV, SqliteStore } from '../src/index.js';
import { CLI, sleep } from './service-helpers.js';
import { tempDir } from './temp.js';
import { dumpState } from './state-file.js';

// Issue 12, item 3: 8 `observe` processes on one state file; 9 of 16 died with
// "SqliteError: database is locked" and a stack. Sized for CI (25k rollouts a writer);
// RB_WRITERS_ROLLOUTS=200000 runs the size (docs/service.md gives the figures).
const dir = tempDir('rb-writers-');

interface Exit {
  code: number | null;
  stderr: string;
  stdout: string;
}

function observe(results: string, state: string, env: NodeJS.ProcessEnv = {}): Promise<Exit> {
  const proc = spawn(process.execPath, [CLI, 'observe', '--results', results, '--state', state], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  return new Promise((resolve) => proc.on('exit', (code) => resolve({ code, stderr, stdout })));
}

/** Holds the state's write lock from this process, as a long observe would. */
function holdWriteLock(state: string): { release(): void } {
  new SqliteStore(state).close(); // create the schema first
  const db = new Database(state);
  db.pragma('journal_mode = WAL');
  db.prepare('BEGIN IMMEDIATE').run();
  return {
    release: () => {
      db.prepare('COMMIT').run();
      db.close();
    },
  };
}

const dump = (state: string) => dumpState(state, 'SELECT COUNT(*) AS n FROM seen');

describe('SQLite: concurrent observe processes on one state file', () => {
  it('8 writers queued behind a write lock held longer than the old 10 s busy timeout: none fails, every rollout applied exactly once', async () => {
    const WRITERS = 8;
    const ROLLOUTS = Number(process.env.RB_WRITERS_ROLLOUTS ?? 25_000);
    const PROMPTS = 500;
    const state = join(dir, 'writers.db');
    // expected totals, computed from the generated lines (a rollout id seen twice counts once)
    const want = new Map<string, { rollouts: number; reward: number }>();
    const ids = new Set<string>();
    for (let w = 0; w < WRITERS; w++) {
      const lines: string[] = [];
      for (let i = 0; i < ROLLOUTS; i++) {
        // 1 in 50 lines re-sends a rollout of the previous writer (same id, same content)
        const src = w > 0 && i % 50 === 0 ? w - 1 : w;
        const r = seedrandom(`rollout-${src}-${i}`);
        const prompt = `p${Math.floor(r() * PROMPTS)}`;
        const reward = Math.floor(r() * 4) / 4; // dyadic: sums are exact
        const id = `w${src}-${i}`;
        lines.push(JSON.stringify({ prompt_id: prompt, step: 0, reward, tokens: 10 + Math.floor(r() * 90), rollout_id: id }));
        if (ids.has(id)) continue;
        ids.add(id);
        const e = want.get(prompt) ?? { rollouts: 0, reward: 0 };
        e.rollouts++;
        e.reward += reward;
        want.set(prompt, e);
      }
      writeFileSync(join(dir, `w${w}.jsonl`), `${lines.join('\n')}\n`);
    }
    const lock = holdWriteLock(state);
    const t0 = performance.now();
    const runs = Array.from({ length: WRITERS }, (_, w) => observe(join(dir, `w${w}.jsonl`), state));
    await sleep(14_000);
    lock.release();
    const exits = await Promise.all(runs);
    const seconds = (performance.now() - t0) / 1000;
    for (const [w, e] of exits.entries()) {
      expect(e.stderr, `writer ${w}`).toBe('');
      expect(e.code, `writer ${w}`).toBe(0);
    }
    const applied = exits.reduce((sum, e) => sum + (JSON.parse(e.stdout) as { applied: number }).applied, 0);
    const duplicates = exits.reduce((sum, e) => sum + (JSON.parse(e.stdout) as { duplicates: number }).duplicates, 0);
    expect(applied).toBe(ids.size);
    expect(applied + duplicates).toBe(WRITERS * ROLLOUTS);
    const db = new Database(state, { readonly: true });
    try {
      const rows = db.prepare('SELECT id, rollouts, reward_sum, successes FROM prompts').all() as { id: string; rollouts: number; reward_sum: number; successes: number }[];
      expect(rows.length).toBe(want.size);
      for (const row of rows) {
        const e = want.get(row.id)!;
        expect([row.id, row.rollouts, row.reward_sum, row.successes]).toEqual([row.id, e.rollouts, e.reward, e.reward]);
      }
      expect((db.prepare('SELECT COUNT(*) AS n FROM seen').get() as { n: number }).n).toBe(ids.size);
    } finally {
      db.close();
    }
    console.log(`writers: ${WRITERS} × ${ROLLOUTS} rollouts (${ids.size} distinct) on one file, lock held 14 s first: all exit 0 in ${seconds.toFixed(1)} s, ${applied} applied once, ${duplicates} duplicates skipped`);
  }, 600_000);

  it(`past ${LOCK_WAIT_ENV} a writer exits 2 with one line, and applies nothing`, async () => {
    const state = join(dir, 'limit.db');
    const results = join(dir, 'limit.jsonl');
    writeFileSync(results, '{"prompt_id":"a","step":0,"reward":1}\n');
    const lock = holdWriteLock(state);
    const before = dump(state);
    const exit = await observe(results, state, { [LOCK_WAIT_ENV]: '1' });
    lock.release();
    expect(exit.code).toBe(2);
    expect(exit.stderr.trim().split('\n')).toHaveLength(1);
    expect(exit.stderr).toMatch(new RegExp(`^rollout-budget: .*limit\\.db: another process held the state's write lock for \\d+\\.\\d s, longer than the limit of 1 s \\(${LOCK_WAIT_ENV}\\); nothing was applied`));
    expect(dump(state)).toBe(before);
  }, 60_000);
});
