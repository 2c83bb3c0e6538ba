import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadLog } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { call, onEachServiceState } from './service-helpers.js';
import { tempDir } from './temp.js';

// A group line's finish_reason was ignored by observe: a generator that marked a whole group
// "abort" had its zero rewards applied as failures (replay skipped the same line), and "eos"
// was taken. It is now every rollout's finish_reason, checked as a rollout line's is.

const LINES = [
  { prompt_id: 'a', step: 1, rewards: [0, 0, 0], finish_reason: 'abort' },
  { prompt_id: 'b', step: 1, rewards: [1, 0], tokens: [4096, 4096], finish_reason: 'length' },
  { prompt_id: 'c', step: 1, rewards: [1, 1], finish_reason: 'stop' },
];
const TEXT = LINES.map((l) => JSON.stringify(l)).join('\n') + '\n';
const SUMMARY = { applied: 4, duplicates: 0, aborted: 3, prompts: 2, last_step: 1 };

describe('finish_reason on a group line is every rollout\'s', () => {
  it('observe: an aborted group is not evidence, the others are, and replay reads the file alike', async () => {
    const dir = tempDir();
    const results = join(dir, 'results.jsonl');
    writeFileSync(results, TEXT);
    const state = join(dir, 'state.db');
    const r = await cli(['observe', '--results', results, '--state', state]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject(SUMMARY);
    const a = JSON.parse((await cli(['inspect', '--state', state, '--prompt', 'a'])).stdout) as { rollouts: number; seen: boolean };
    expect([a.rollouts, a.seen]).toEqual([0, false]); // nothing of it was applied
    const b = JSON.parse((await cli(['inspect', '--state', state, '--prompt', 'b'])).stdout) as { rollouts: number; reward_sum: number };
    expect([b.rollouts, b.reward_sum]).toEqual([2, 1]);
    const { visits } = await loadLog(results);
    expect(visits.map((v) => [v.prompt_id, v.n, v.correct])).toEqual([['b', 2, 1], ['c', 2, 2]]);
  });

  it('the service takes it the same way (SQLite and PostgreSQL)', async () => {
    await onEachServiceState(tempDir(), async (port) => {
      const r = await call(port, 'POST', '/v1/observe', LINES);
      expect(r.status).toBe(200);
      expect(r.json).toEqual(SUMMARY);
      const bad = await call(port, 'POST', '/v1/observe', [{ prompt_id: 'd', step: 2, rewards: [1], finish_reason: 'eos' }]);
      expect(bad.status).toBe(400);
      expect((bad.json as { error: { message: string } }).error.message).toContain('"finish_reason" must be "stop", "length" or "abort", got "eos"');
    });
  }, 60_000);
});
