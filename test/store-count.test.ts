// `/healthz` and `/metrics` ask the store how many prompts have evidence. SQLite counted them
// row by row (SELECT COUNT(*) ... WHERE rollouts > 0) on the service's one event loop: 50–100 ms
// on a 10⁶-prompt state, and 8 token-less pollers held a trainer's 5 ms plan to 1.5 s. The count
// is now the pooled `all` row's, which every observe keeps; a state without built pooled rows is
// counted row by row. A real SQLite state.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Allocator, SqliteStore } from '../src/index.js';
import { Database } from './sqlite.js';
import { tempDir } from './temp.js';

describe("the SQLite store's count of prompts with evidence", () => {
  it('is the number of observed prompts, read from the pooled row (not from the prompts), and row by row without pooled rows', () => {
    const state = join(tempDir('rb-count-'), 'state.db');
    const allocator = new Allocator({ state });
    try {
      allocator.observe([
        { prompt_id: 'a', step: 0, reward: 1 },
        { prompt_id: 'b', step: 0, reward: 0 },
        { prompt_id: 'b', step: 0, reward: 1 },
        { prompt_id: 'c', step: 1, reward: 0.5, group: 'g' },
      ]);
      // Planned only (a group recorded, no evidence): not counted.
      allocator.plan([{ id: 'd', group: 'g' }, { id: 'a' }], { rollouts: 8 });
      allocator.observe([{ prompt_id: 'a', step: 2, reward: 0 }]); // again: still one prompt
    } finally {
      allocator.close();
    }
    const db = new Database(state);
    const rows = () => db.prepare('SELECT COUNT(*) FROM prompts WHERE rollouts > 0').pluck().get() as number;
    const store = () => {
      const s = new SqliteStore(state);
      try {
        return s.count();
      } finally {
        s.close();
      }
    };
    try {
      expect(rows()).toBe(3);
      expect(store()).toBe(3);
      // It reads the pooled row: a changed row is what it says (the row never drifts from the
      // prompts: test/store-pooled.test.ts checks that).
      db.prepare("UPDATE pooled SET count = 1000 WHERE scope = 'all'").run();
      expect(store()).toBe(1000);
      // A state whose pooled rows are not marked built is counted row by row: the marker is
      // removed under an open store here (opening a writable state builds the rows and marks them).
      const open = new SqliteStore(state);
      try {
        expect(open.count()).toBe(1000);
        db.prepare("DELETE FROM meta WHERE key = 'pooled_version'").run();
        expect(open.count()).toBe(3); // the rows, not the pooled row's 1000
      } finally {
        open.close();
      }
      db.close();
      const s = new SqliteStore(state);
      try {
        expect(s.count()).toBe(3); // rebuilt on open: 3 again, from the prompts
      } finally {
        s.close();
      }
    } finally {
      if (db.open) db.close();
    }
  });
});
