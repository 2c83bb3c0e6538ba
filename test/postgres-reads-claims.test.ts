import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultDecay, fileResultSource, PostgresStore, SqliteStore } from '../src/index.js';
import { dropPgSchema, freshPgUrl, pgUrl } from './service-helpers.js';
import { tempDir } from './temp.js';


/** Lines with rollout ids `r<from>`..`r<to - 1>`, each id twice (the second a duplicate), over 37 prompts. */
function idLines(from: number, to: number): string {
  const lines: string[] = [];
  for (let pass = 0; pass < 2; pass++) {
    for (let i = from; i < to; i++) lines.push(JSON.stringify({ prompt_id: `p${i % 37}`, step: i % 3, reward: (i % 4) / 3, tokens: 100 + i, rollout_id: `r${i}` }));
  }
  return `${lines.join('\n')}\n`;
}


const url = pgUrl();
describe.skipIf(url === undefined)('PostgreSQL reads and rollout-id claims', () => {
  it('claims keys chunk by chunk as SQLite does: ids already stored, repeated in one chunk, or repeated in a later chunk are duplicates', async () => {
    const dir = tempDir('rb-pg-claims-'); // made in the test: a run without PostgreSQL makes none
    const first = join(dir, 'first.jsonl');
    const second = join(dir, 'second.jsonl');
    writeFileSync(first, idLines(0, 100));
    writeFileSync(second, idLines(50, 150)); // r50..r99 already stored; every id of it comes twice
    const schemaUrl = freshPgUrl(url!);
    const store = await PostgresStore.connect(schemaUrl);
    const sqlite = new SqliteStore(':memory:');
    try {
      for (const [file, bytes] of [[first, 4096], [second, 700]] as const) {
        const want = sqlite.applySource(fileResultSource(file, file, bytes), defaultDecay);
        const got = await store.applySource(fileResultSource(file, file, bytes), defaultDecay);
        expect(got).toEqual(want);
      }
      expect(sqlite.applySource(fileResultSource(second, second, 700), defaultDecay)).toMatchObject({ applied: 0, duplicates: 200 });
      expect(await store.applySource(fileResultSource(second, second, 700), defaultDecay)).toMatchObject({ applied: 0, duplicates: 200 });
      for (const id of ['p0', 'p5', 'p36']) {
        const a = sqlite.get(id)!;
        const b = (await store.get(id))!;
        expect([b.rollouts, b.rewardSum, b.correctCount, b.correctTokens, b.wrongTokens, b.lastStep]).toEqual([a.rollouts, a.rewardSum, a.correctCount, a.correctTokens, a.wrongTokens, a.lastStep]);
        expect(b.successes).toBeCloseTo(a.successes, 9);
      }
    } finally {
      sqlite.close();
      await store.close();
      await dropPgSchema(url!, schemaUrl);
    }
  });

  it('new ids that repeat within a chunk: each is applied once, its first rollout (the claim took every key: store/claims.ts ALL_CLAIMED)', async () => {
    const file = join(tempDir('rb-pg-claims-'), 'twice.jsonl');
    // each id twice in a row, first with reward 1, then 0; one chunk, every id new
    const lines: string[] = [];
    for (let i = 0; i < 120; i++) for (const reward of [1, 0]) lines.push(JSON.stringify({ prompt_id: `p${i % 7}`, step: 1, reward, rollout_id: `t${(i * 11) % 120}` }));
    writeFileSync(file, `${lines.join('\n')}\n`);
    const schemaUrl = freshPgUrl(url!);
    const store = await PostgresStore.connect(schemaUrl);
    try {
      expect(await store.applySource(fileResultSource(file, file), defaultDecay)).toMatchObject({ applied: 120, duplicates: 120 });
      let successes = 0;
      for (let p = 0; p < 7; p++) successes += (await store.get(`p${p}`))!.successes;
      expect(successes).toBeCloseTo(120, 9); // every first rollout (reward 1), no repeat (reward 0)
      expect(await store.applySource(fileResultSource(file, file), defaultDecay)).toMatchObject({ applied: 0, duplicates: 240 });
    } finally {
      await store.close();
      await dropPgSchema(url!, schemaUrl);
    }
  });

  it('a snapshot of ids that repeat, come unsorted or are missing reads each stored prompt once', async () => {
    const file = join(tempDir('rb-pg-claims-'), 'snap.jsonl');
    writeFileSync(file, idLines(0, 40));
    const schemaUrl = freshPgUrl(url!);
    const store = await PostgresStore.connect(schemaUrl);
    try {
      await store.applySource(fileResultSource(file, file), defaultDecay);
      const plain = await store.snapshot(['p1', 'p2', 'p30']);
      const repeated = await store.snapshot(['p30', 'p1', 'nope', 'p2', 'p1', 'p30']);
      const states = (s: typeof plain) => (s as unknown as { parts: { states: { id: string }[] } }).parts.states.map((x) => x.id).sort();
      expect(states(repeated)).toEqual(['p1', 'p2', 'p30']);
      expect(states(plain)).toEqual(['p1', 'p2', 'p30']);
      for (const id of ['p1', 'p2', 'p30']) expect(repeated.get(id)).toEqual(await store.get(id));
      expect(repeated.get('nope')).toBeUndefined();
    } finally {
      await store.close();
      await dropPgSchema(url!, schemaUrl);
    }
  });
});
