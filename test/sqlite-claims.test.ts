import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultDecay, fileResultSource, SqliteStore } from '../src/index.js';
import { tempDir } from './temp.js';

/** Lines with rollout ids `r<from>`..`r<to - 1>` over 13 prompts, each id `times` times in a row. */
function idLines(from: number, to: number, times = 1): string {
  const lines: string[] = [];
  for (let i = from; i < to; i++) for (let t = 0; t < times; t++) lines.push(JSON.stringify({ prompt_id: `p${i % 13}`, step: 1, reward: (i % 3) / 2, rollout_id: `r${i}` }));
  return `${lines.join('\n')}\n`;
}

describe('SQLite claims of rollout ids (store/sqlite-apply.ts)', () => {
  it('claims new keys, refuses stored ones in a statement that mixes both, and counts repeats in the batch as duplicates', () => {
    const dir = tempDir('rb-sqlite-claims-');
    const files = ['a', 'b', 'c'].map((name) => join(dir, `${name}.jsonl`));
    writeFileSync(files[0]!, idLines(0, 1200)); // parts of 500: all new
    writeFileSync(files[1]!, idLines(1000, 2500, 2)); // r1000..r1199 stored, the rest new, each twice
    writeFileSync(files[2]!, `${idLines(2400, 2600)}${idLines(0, 10)}`); // r2400..r2499 stored, r0..r9 stored
    const store = new SqliteStore(join(dir, 'state.db'));
    const expected = new SqliteStore(':memory:');
    try {
      expect(store.applySource(fileResultSource(files[0]!, files[0]!), defaultDecay)).toMatchObject({ applied: 1200, duplicates: 0 });
      // in chunks of 2 kB: statements with stored and new keys, repeats within a chunk and across chunks
      expect(store.applySource(fileResultSource(files[1]!, files[1]!, 2048), defaultDecay)).toMatchObject({ applied: 1300, duplicates: 1700 });
      expect(store.applySource(fileResultSource(files[2]!, files[2]!), defaultDecay)).toMatchObject({ applied: 100, duplicates: 110 });
      expect(store.applySource(fileResultSource(files[2]!, files[2]!), defaultDecay)).toMatchObject({ applied: 0, duplicates: 210 });
      // the same rollouts, each once, into a fresh state
      const once = join(dir, 'once.jsonl');
      writeFileSync(once, idLines(0, 2600));
      expected.applySource(fileResultSource(once, once), defaultDecay);
      for (let p = 0; p < 13; p++) {
        const [a, b] = [store.get(`p${p}`)!, expected.get(`p${p}`)!];
        expect(a.rollouts).toBe(b.rollouts);
        expect(a.successes).toBeCloseTo(b.successes, 9);
      }
    } finally {
      store.close();
      expected.close();
    }
  });
});
