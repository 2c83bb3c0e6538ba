import pg from 'pg';
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { batchOf, PostgresStore, type GroupStats, type PromptState } from '../src/index.js';
import type { PartialSnapshot } from '../src/store/pooled.js';
import { freshPgUrl, pgUrl } from './service-helpers.js';

/**
 * The service's read of a PostgreSQL state (snapshot with ids): in one statement when no hint
 * is involved (store/postgres-partial.ts), else in a transaction. Against the same rows read by
 * plain separate SELECTs: every prompt field, pooled figure, the last step and the hinted list
 * equal with Object.is (so -0, NaN and ±Infinity too), over tricky group names, odd numbers,
 * unknown and repeated ids, with and without hints.
 */
const url = pgUrl();

const COLUMNS = `id, grp, successes, failures, last_step::float8 AS last_step, rollouts::float8 AS rollouts, reward_sum,
  correct_count::float8 AS correct_count, correct_tokens, wrong_count::float8 AS wrong_count, wrong_tokens,
  prior_pass_rate, prior_samples::float8 AS prior_samples`;
const POOLED = ['count', 'sum_rate', 'sum_rate2', 'sum_noise', 'correct_count', 'correct_tokens', 'wrong_count', 'wrong_tokens'];
const STATS: (keyof GroupStats)[] = ['count', 'sumRate', 'sumRate2', 'sumNoise', 'correctCount', 'correctTokens', 'wrongCount', 'wrongTokens'];
const GROUPS = ['g0', 'g"1', 'ü-2', 'a\\b', 'emoji 🎲'];

type Row = Record<string, number | string | null>;

/** A prompt row as the store's fromRow makes it. */
const stateOf = (r: Row): PromptState => ({
  id: r.id as string, group: r.grp as string | null, successes: r.successes as number, failures: r.failures as number,
  lastStep: r.last_step as number, rollouts: r.rollouts as number, rewardSum: r.reward_sum as number, correctCount: r.correct_count as number,
  correctTokens: r.correct_tokens as number, wrongCount: r.wrong_count as number, wrongTokens: r.wrong_tokens as number,
  ...(r.prior_pass_rate === null ? {} : { priorPassRate: r.prior_pass_rate as number }),
  ...(r.prior_samples === null ? {} : { priorSamples: r.prior_samples as number }),
});

function expectSame(got: unknown, want: unknown, where: string): void {
  if (typeof want === 'number') {
    expect(Object.is(got, want), `${where}: ${String(got)} vs ${String(want)}`).toBe(true);
    return;
  }
  if (want !== null && typeof want === 'object') {
    expect(Object.keys(got as object).sort(), where).toEqual(Object.keys(want).sort());
    for (const [k, v] of Object.entries(want)) expectSame((got as Record<string, unknown>)[k], v, `${where}.${k}`);
    return;
  }
  expect(got, where).toBe(want);
}

const byId = (a: PromptState, b: PromptState) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

describe.skipIf(url === undefined)('PostgreSQL partial read in one statement', () => {
  it('equals separate reads of the same rows, field for field (Object.is), over odd values, groups, hints and ids', async () => {
    const schemaUrl = freshPgUrl(url!);
    const schema = new URL(schemaUrl).searchParams.get('schema')!;
    const store = await PostgresStore.connect(schemaUrl);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    let compared = 0;
    try {
      const random = seedrandom('postgres-partial');
      const prompts = Array.from({ length: 60 }, (_, i) => `p${i}`);
      for (let k = 0; k < 8; k++) {
        const results = Array.from({ length: 80 }, (_, i) => ({
          prompt_id: prompts[Math.floor(random() * prompts.length)]!,
          step: k,
          reward: Math.floor(random() * 7) / 6, // not dyadic: sums with long digit strings
          ...(random() < 0.7 ? { tokens: 1 + Math.floor(random() * 5000) } : {}),
          ...(random() < 0.4 ? { group: GROUPS[Math.floor(random() * GROUPS.length)]! } : {}),
          rollout_id: `r${k}-${i}`,
        }));
        await store.apply(batchOf(results), { forgetPerStep: 0.93, reobserveDiscount: 0.7 });
        await store.recordPrompts(Array.from({ length: 6 }, () => ({
          id: prompts[Math.floor(random() * 70)] ?? `new${k}`,
          ...(random() < 0.5 ? { group: GROUPS[Math.floor(random() * GROUPS.length)]! } : {}),
          ...(random() < 0.6 ? { priorPassRate: random() / 3, ...(random() < 0.5 ? { priorSamples: 16 } : {}) } : {}),
        })));
      }
      // Numbers the JSON text must carry exactly: -0, NaN, ±Infinity, the smallest normal and subnormal, 0.1 + 0.2.
      await client.query(`INSERT INTO "${schema}".prompts (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens, prior_pass_rate, prior_samples)
        VALUES ('odd', 'g"1', '-0'::float8, 2.2250738585072014e-308, 3, 9007199254740991, 'NaN'::float8, 1, 'Infinity'::float8, 2, '-Infinity'::float8, NULL, NULL),
               ('odd-hinted', 'g0', 1, '-0'::float8, 3, 1, 'NaN'::float8, 1, 0, 0, 0, 0.1::float8 + 0.2::float8, 7),
               ('tiny', NULL, 5e-324, 1e308, 0, 1, 0.30000000000000004, 0, 0, 1, 123456.789, NULL, NULL)`);
      await client.query(`UPDATE "${schema}".pooled SET sum_noise = 'NaN'::float8, correct_tokens = '-0'::float8 WHERE scope = 'group:g"1'`);

      const unhinted = (await client.query<{ id: string }>(`SELECT id FROM "${schema}".prompts WHERE prior_pass_rate IS NULL AND rollouts > 0 ORDER BY id`)).rows.map((r) => r.id);
      expect(unhinted.length).toBeGreaterThan(20);
      const cases: { ids: string[]; groups: string[]; hinted: boolean }[] = [
        { ids: [], groups: [], hinted: false },
        { ids: ['missing'], groups: ['nobody'], hinted: false },
        { ids: ['odd', 'tiny', 'odd', 'missing'], groups: [], hinted: false },
        { ids: ['odd', 'odd-hinted'], groups: [], hinted: false },
        { ids: ['tiny'], groups: [], hinted: true },
        ...Array.from({ length: 8 }, (_, t) => ({
          ids: Array.from({ length: 5 + t * 6 }, () => prompts[Math.floor(random() * 70)] ?? 'missing'),
          groups: GROUPS.filter(() => random() < 0.4),
          hinted: t % 3 === 0,
        })),
        // Prompts without a hint, so the one-statement read answers.
        ...Array.from({ length: 6 }, (_, t) => ({ ids: [...unhinted.slice(t * 3), 'odd', 'tiny', 'missing'], groups: GROUPS.slice(t % 3), hinted: false })),
      ];
      let hintedReads = 0;
      let oneStatement = 0;
      for (const [n, c] of cases.entries()) {
        const where = `case ${n}`;
        const snap = (await store.snapshot(c.ids, c.groups, c.hinted)) as PartialSnapshot;
        // The reference: plain SELECTs, one a kind.
        const rows = (await client.query<Row>(`SELECT ${COLUMNS} FROM "${schema}".prompts WHERE id = ANY($1::text[])`, [c.ids])).rows.map(stateOf);
        const scopes = new Set(['all', ...c.groups.map((g) => `group:${g}`)]);
        for (const r of rows) if (r.group !== null) scopes.add(`group:${r.group}`);
        const pooled = (await client.query<Row>(`SELECT scope, ${POOLED.join(', ')} FROM "${schema}".pooled WHERE scope = ANY($1::text[])`, [[...scopes]])).rows;
        const last = (await client.query<{ v: number }>(`SELECT value::float8 AS v FROM "${schema}".meta WHERE key = 'last_step'`)).rows[0]?.v ?? null;
        const wantHinted = c.hinted || rows.some((r) => r.priorPassRate !== undefined)
          ? (await client.query<Row>(`SELECT ${COLUMNS} FROM "${schema}".prompts WHERE prior_pass_rate IS NOT NULL AND successes + failures > 0`)).rows.map(stateOf)
          : undefined;

        expect(snap.lastStep, where).toBe(last);
        expectSame([...snap.parts.states].sort(byId), rows.sort(byId), `${where} states`);
        expect([...snap.parts.pooled.keys()].sort(), where).toEqual(pooled.map((p) => p.scope as string).sort());
        for (const p of pooled) {
          const got = snap.parts.pooled.get(p.scope as string)!;
          STATS.forEach((key, k) => expectSame(got[key], p[POOLED[k]!], `${where} ${String(p.scope)}.${key}`));
          compared++;
        }
        if (wantHinted === undefined) {
          expect(snap.parts.hinted, where).toBeUndefined();
          if (rows.length > 0) oneStatement++;
        }
        else {
          expectSame([...snap.parts.hinted!].sort(byId), wantHinted.sort(byId), `${where} hinted`);
          hintedReads++;
        }
        compared += rows.length;
      }
      expect(compared).toBeGreaterThan(150);
      expect(hintedReads).toBeGreaterThanOrEqual(3);
      expect(oneStatement).toBeGreaterThanOrEqual(6);
    } finally {
      await store.close();
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    }
  });
});
