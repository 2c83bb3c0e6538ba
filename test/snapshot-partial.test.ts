import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { SqliteStore, type GroupStats, type PromptState } from '../src/index.js';
import type { PartialSnapshot } from '../src/store/pooled.js';
import { STATE_COLUMNS, stateFileOf } from './state-file.js';

// The service's read of some prompts (store/sqlite-partial.ts) makes each state in a SQL
// function from the row's values; these tests compare it with the rows read as arrays, the
// way it was read before (the same statement's WHERE, 1,000 ids a statement), over rows with
// every kind of value a state file can hold, so the planner sees the same snapshot.

type Value = string | number | bigint | null | Buffer;
type Row = Value[];

const COLUMNS = STATE_COLUMNS;

/** A state file holding `rows`, `last_step` and two pooled rows. */
const stateFile = (rows: readonly Row[], lastStep?: number): string =>
  stateFileOf('rb-partial-', rows, lastStep, (db) => {
    db.prepare("INSERT OR REPLACE INTO pooled VALUES ('all', 1, 0.5, 0.25, 0.125, 2, 300.5, 3, 900)").run();
    db.prepare("INSERT OR REPLACE INTO pooled VALUES ('group:math', 4, 1.5, 0.75, -0, 5, 1e300, 6, 7)").run();
  });

const asState = (r: unknown[]): PromptState => ({
  id: r[0], group: r[1], successes: r[2], failures: r[3], lastStep: r[4], rollouts: r[5], rewardSum: r[6],
  correctCount: r[7], correctTokens: r[8], wrongCount: r[9], wrongTokens: r[10],
  ...(r[11] === null ? {} : { priorPassRate: r[11] }),
  ...(r[12] === null ? {} : { priorSamples: r[12] }),
}) as PromptState;

/** The rows as arrays, as the read was written before: the candidates' rows, the pooled rows, the hinted rows. */
function rowRead(path: string, ids: readonly string[], groups: readonly string[]): { states: PromptState[]; pooled: Map<string, number[]>; hinted: PromptState[] } {
  const db = new (SqliteStore.driver())(path, { readonly: true });
  const states: PromptState[] = [];
  const read = db.prepare(`SELECT ${COLUMNS} FROM prompts WHERE id IN (SELECT value FROM json_each(?))`).raw();
  for (let k = 0; k < ids.length; k += 1000) for (const r of read.all(JSON.stringify(ids.slice(k, k + 1000))) as unknown[][]) states.push(asState(r));
  const scopes = new Set(['all', ...groups.map((g) => `group:${g}`), ...states.filter((s) => s.group !== null).map((s) => `group:${s.group}`)]);
  const pooled = new Map((db.prepare('SELECT * FROM pooled WHERE scope IN (SELECT value FROM json_each(?))').raw().all(JSON.stringify([...scopes])) as [string, ...number[]][])
    .map(([scope, ...v]) => [scope, v]));
  const hinted = (db.prepare(`SELECT ${COLUMNS} FROM prompts WHERE prior_pass_rate IS NOT NULL AND successes + failures > 0`).raw().all() as unknown[][]).map(asState);
  db.close();
  return { states, pooled, hinted };
}

/** Same keys in the same order, same values (Object.is: -0 and 0 differ; Buffers by bytes). */
function same(a: object, b: object, what: string): void {
  expect(Object.keys(a), what).toEqual(Object.keys(b));
  for (const [key, v] of Object.entries(a)) {
    const w = (b as Record<string, unknown>)[key];
    if (Buffer.isBuffer(v)) expect(Buffer.isBuffer(w) && v.equals(w), `${what}.${key}`).toBe(true);
    else expect(Object.is(v, w), `${what}.${key}: ${String(v)} vs ${String(w)}`).toBe(true);
  }
}

const statsValues = (g: GroupStats) => [g.count, g.sumRate, g.sumRate2, g.sumNoise, g.correctCount, g.correctTokens, g.wrongCount, g.wrongTokens];

const TRICKY_IDS = ['plain', 'é-ü', '😀 emoji', 'a\nb', 'quote"back\\slash', 'nul\u0000x', 'tab\tx', ' ', '\u2028', '\uffff', '𝒳'.repeat(40)];

/** Rows with groups or none, hints or none, decayed counts, and now and then a value of another kind than the column's. */
function randomRows(seed: string, count: number): Row[] {
  const random = seedrandom(seed);
  const odd: Value[] = ['many', 2 ** 40, -(2 ** 33), 2.5, -0, 1e-300, Buffer.from('b'), 2n ** 62n];
  return Array.from({ length: count }, (_, k): Row => {
    const rollouts = Math.floor(random() * 60);
    const decay = random() < 0.5 ? 1 : 0.9 ** Math.floor(random() * 20);
    const hint = random() < 0.3 ? random() : null;
    const row: Row = [k < TRICKY_IDS.length ? TRICKY_IDS[k]! : `p-${k}`, [null, null, 'math', 'ünï', 'g"q'][k % 5]!, Math.floor(random() * 30) * decay,
      Math.floor(random() * 30) * decay, Math.floor(random() * 50) - 1, rollouts, random() * 9, Math.floor(random() * rollouts), random() * 1e4,
      Math.floor(random() * rollouts), random() * 1e4, hint, hint !== null && random() < 0.5 ? Math.floor(random() * 100) : null];
    // Any column but the id may hold another kind of value (SQLite keeps what its affinity cannot convert).
    if (random() < 0.05) row[1 + Math.floor(random() * 12)] = odd[Math.floor(random() * odd.length)]!;
    return row;
  });
}

describe("the service's partial read of a SQLite state", () => {
  it('equals the rows read as arrays: the same states in the same order, pooled rows, hinted rows and last step', () => {
    let compared = 0;
    for (const [seed, count, lastStep, asked] of [['a', 300, 7, 120], ['b', 2600, undefined, 2500], ['c', TRICKY_IDS.length, 0, TRICKY_IDS.length]] as const) {
      const rows = randomRows(seed, count);
      const path = stateFile(rows, lastStep);
      const random = seedrandom(`ids ${seed}`);
      // Some rows, some ids the state lacks, in a shuffled order; more than 1,000 in one request for 'b'.
      const ids = [...rows.map((r) => r[0] as string), 'absent-1', 'absent-2'].sort(() => random() - 0.5).slice(0, asked);
      const groups = ['math', 'none-such'];
      for (const hinted of [false, true]) {
        const store = new SqliteStore(path);
        const fast = store.snapshot(ids, groups, hinted) as PartialSnapshot;
        store.close();
        const slow = rowRead(path, ids, groups);
        expect(fast.lastStep).toBe(lastStep ?? null);
        expect(fast.parts.states.length).toBe(slow.states.length);
        fast.parts.states.forEach((s, k) => same(s, slow.states[k]!, `${seed} states[${k}]`));
        expect([...fast.parts.pooled.keys()]).toEqual([...slow.pooled.keys()]);
        for (const [scope, g] of fast.parts.pooled) same(statsValues(g), slow.pooled.get(scope)!, `${seed} ${scope}`);
        const calibration = hinted || slow.states.some((s) => s.priorPassRate !== undefined) ? slow.hinted : undefined;
        expect(fast.parts.hinted?.length).toBe(calibration?.length);
        fast.parts.hinted?.forEach((s, k) => same(s, calibration![k]!, `${seed} hinted[${k}]`));
        for (const id of ids.slice(0, 50)) expect(fast.get(id)).toBe(fast.parts.states.find((s) => s.id === id));
        compared += fast.parts.states.length;
      }
    }
    expect(compared).toBeGreaterThan(2 * 2400);
  });
});
