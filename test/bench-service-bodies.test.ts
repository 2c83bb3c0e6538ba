import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/index.js';
import { warmState } from '../scripts/bench-inputs.js';
import { draw, matched } from '../scripts/bench-service.js';
import { tempDir } from './temp.js';

// The bench's service section compares 4,096 candidates on a 10³- and a 10⁶-prompt state. A
// tracked candidate costs more than a new one, so the request it sends the large state holds
// as many candidates that state tracks as the small state's request holds of the small one's.
// Checked here against real states as the bench writes them (smaller: 10³ and 2·10⁴ prompts),
// by asking SQLite which ids are there.
describe('the bench service section\'s matched request', () => {
  const dir = tempDir('rb-bench-bodies-');
  const paths = [warmState(1000, 'small.db', dir), warmState(20_000, 'large.db', dir)];
  const found = (path: string, numbers: readonly number[]) => {
    const db = new (SqliteStore.driver())(path, { readonly: true });
    try {
      const ask = db.prepare('SELECT 1 FROM prompts WHERE id = ?');
      return numbers.filter((i) => ask.get(`prompt-${i}`) !== undefined).length;
    } finally {
      db.close();
    }
  };

  it('holds as many tracked candidates on the large state as the small request on the small one, none twice', () => {
    for (const seed of [0, 1, 17]) {
      const small = draw(4096, 1000, seed);
      const large = matched(4096, 1000, 20_000, seed);
      expect(large).toHaveLength(4096);
      expect(new Set(large).size).toBe(4096);
      const tracked = found(paths[0]!, small);
      expect(tracked).toBeGreaterThan(300);
      expect(found(paths[1]!, large)).toBe(tracked);
      // drawn from the whole large state instead, most candidates are tracked there
      expect(found(paths[1]!, draw(4096, 20_000, seed))).toBeGreaterThan(3 * tracked);
    }
  });
});
