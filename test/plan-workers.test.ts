import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PlanWorkers, SqliteStore } from '../src/index.js';
import { tempDir } from './temp.js';

/** Open file descriptors of this process on `path` (Linux /proc). */
function openOn(path: string): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === path) n++;
    } catch {
      // closed meanwhile
    }
  }
  return n;
}

describe('planning threads', () => {
  it.runIf(existsSync('/proc/self/fd'))('requests sent one at a time spread over every thread (each opens its own connection), not all to the first', async () => {
    const state = join(tempDir('rb-workers-'), 'state.db');
    new SqliteStore(state).close();
    const workers = new PlanWorkers({ state, defaults: {}, timeoutMs: 60_000, threads: 3 });
    try {
      const body = JSON.stringify({ candidates: [{ id: 'a' }, { id: 'b' }], budget: { rollouts: 16 } });
      const answers: string[] = [];
      for (let k = 0; k < 3; k++) answers.push(await workers.plan(body));
      expect(new Set(answers).size).toBe(1);
      // Each thread's connection holds the state file open once.
      expect(openOn(state)).toBe(3);
    } finally {
      await workers.close();
    }
    expect(openOn(state)).toBe(0);
  });
});
