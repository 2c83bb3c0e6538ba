import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { Allocator, PARTIAL_READ_PROMPTS, SqliteStore, type Candidate, type Plan, type Store } from '../src/index.js';
import { AsyncAllocator } from '../src/service/async-allocator.js';
import { openAsyncStore } from '../src/store/open.js';
import { STATE_COLUMNS, stateFileOf } from './state-file.js';
import { CLI } from './service-helpers.js';
import { tempDir } from './temp.js';

// A plan of few candidates on a large state reads only their rows and the pooled rows, as the
// service does (allocator.ts readsAll), so that a step's plan costs what the step holds, not
// what the state does. Its numbers are then the service's: the pooled rows' sums, which equal
// a whole read's when the rows were summed once in the table's order, and may differ in the
// last digits after observes have added to them.

const PROMPTS = PARTIAL_READ_PROMPTS + 4_000;
const GROUPS = [null, null, 'math', 'code'];

/** A state of PROMPTS prompts (decayed evidence, groups, some hints), its pooled rows summed from them at open. */
function largeState(): string {
  const random = seedrandom('partial read');
  const rows = Array.from({ length: PROMPTS }, (_, k) => {
    const decay = 0.9 ** Math.floor(random() * 8);
    const rollouts = 8 * (1 + Math.floor(random() * 4));
    const correct = Math.floor(random() * (rollouts + 1));
    const hint = random() < 0.05 ? random() : null;
    return [`p-${k}`, GROUPS[k % GROUPS.length], correct * decay, (rollouts - correct) * decay, Math.floor(random() * 30), rollouts, correct * decay,
      correct, correct * 350.5, rollouts - correct, (rollouts - correct) * 910.25, hint, hint === null ? null : 20];
  });
  // The pooled rows are made again from the rows when the store next opens.
  const path = stateFileOf('rb-partial-', rows, 29, (db) => {
    db.prepare('DELETE FROM pooled').run();
    db.prepare("DELETE FROM meta WHERE key = 'pooled_version'").run();
  });
  new SqliteStore(path).close();
  expect(STATE_COLUMNS.split(', ')).toHaveLength(13);
  return path;
}

/** A step's candidates: prompts of the state in a shuffled order, and new ones, some with a group or a hint. */
function stepCandidates(count: number, seed: string): Candidate[] {
  const random = seedrandom(seed);
  const seen = new Set<string>();
  const out: Candidate[] = [];
  for (let i = 0; out.length < count; i++) {
    const known = random() < 0.8;
    const id = known ? `p-${Math.floor(random() * PROMPTS)}` : `new-${seed}-${i}`;
    if (seen.has(id)) continue;
    seen.add(id);
    const c: Candidate = { id, prompt_tokens: 100 + (i % 300), max_tokens: 2048 };
    out.push(known ? c : i % 3 === 0 ? { ...c, group: 'math' } : i % 5 === 0 ? { ...c, prior_pass_rate: 0.3, prior_samples: 8 } : c);
  }
  return out;
}

/** A copy of the large state, for a test that writes to it (a plan records its candidates' group and hint). */
function copyOf(path: string): string {
  const copy = join(tempDir('rb-partial-copy-'), 'state.db');
  writeFileSync(copy, readFileSync(path));
  return copy;
}

/** A store that never says how large it is: its allocator reads the whole state. */
function wholeReads(store: SqliteStore): Store {
  return new Proxy(store, { get: (target, key) => (key === 'promptsAtMost' ? undefined : Reflect.get(target, key, target)) }) as Store;
}

/** A copy of the large state after one observe of 4,000 results: its pooled rows kept by differences since. */
function observedCopy(): string {
  const observed = copyOf(largePath);
  const random = seedrandom('observe');
  const results = Array.from({ length: 4_000 }, (_, i) => ({ prompt_id: `p-${Math.floor(random() * PROMPTS)}`, step: 30, reward: random() < 0.4 ? 1 : 0, tokens: 200 + i }));
  const writer = new Allocator({ state: observed });
  writer.observe(results);
  writer.close();
  return observed;
}

const largePath = largeState();

/** The three reads of one state file: this library's (partial where it may), a whole read's, the service's; closed after `use`. */
async function withReaders<T>(state: string, use: (r: { partial: Allocator; whole: Allocator; service: AsyncAllocator }) => Promise<T>): Promise<T> {
  const partial = new Allocator({ state });
  const whole = new Allocator({ store: wholeReads(new SqliteStore(state)) });
  const service = new AsyncAllocator(await openAsyncStore(state));
  try {
    return await use({ partial, whole, service });
  } finally {
    partial.close();
    whole.close();
    await service.close();
  }
}

const text = (plan: Plan) => `${JSON.stringify(plan, null, 2)}\n`;

describe('a plan of few candidates on a large state', () => {
  const path = largePath;
  const budget = { rollouts: 8 * 500 };

  it('reads only its candidates\' rows from a state of 2¹⁶ prompts or more, and only when they are at most an eighth of them', () => {
    const allocator = new Allocator({ state: path });
    try {
      expect(allocator.store.promptsAtMost!()).toBe(PROMPTS);
      expect(allocator.readsAll(500)).toBe(false);
      expect(allocator.readsAll(Math.floor(PROMPTS / 8))).toBe(false);
      expect(allocator.readsAll(Math.floor(PROMPTS / 8) + 1)).toBe(true);
    } finally {
      allocator.close();
    }
    const small = new Allocator({ state: stateFileOf('rb-partial-small-', [['a', null, 1, 1, 0, 2, 1, 1, 100, 1, 100, null, null]]) });
    try {
      expect(small.readsAll(1)).toBe(true);
    } finally {
      small.close();
    }
    const memory = new Allocator();
    expect(memory.readsAll(1)).toBe(true);
    memory.close();
  });

  it('plans what a whole read plans when the pooled rows were summed in the table\'s order, and what the service plans', async () => {
    const candidates = stepCandidates(500, 'step a');
    await withReaders(copyOf(path), async ({ partial, whole, service }) => {
      expect(whole.readsAll(candidates.length)).toBe(true);
      const got = text(partial.plan(candidates, budget));
      expect(got).toBe(text(whole.plan(candidates, budget)));
      expect(got).toBe(text(await service.plan(candidates, budget)));
    });
  });

  it('after an observe (pooled rows kept by differences): the service\'s plan, the same groups as a whole read\'s, values equal to 1e-9', async () => {
    const candidates = stepCandidates(700, 'step b');
    await withReaders(observedCopy(), async ({ partial, whole, service }) => {
      const p = partial.plan(candidates, budget);
      const w = whole.plan(candidates, budget);
      expect(text(p)).toBe(text(await service.plan(candidates, budget)));
      expect(p.allocations.map((a) => [a.prompt_id, a.n])).toEqual(w.allocations.map((a) => [a.prompt_id, a.n]));
      let compared = 0;
      p.allocations.forEach((a, i) => {
        const b = w.allocations[i]!;
        for (const key of ['value', 'p_mean', 'p_low', 'p_high', 'expected_tokens'] as const) {
          expect(Math.abs(a[key] - b[key]), `${a.prompt_id} ${key}`).toBeLessThanOrEqual(1e-9 * Math.max(1, Math.abs(b[key])));
          compared++;
        }
      });
      expect(compared).toBeGreaterThan(3000);
    });
  });

  it('the CLI plans it as the service does, also where a whole read would differ', async () => {
    const state = observedCopy();
    const candidates = stepCandidates(700, 'step b');
    const dir = tempDir('rb-partial-cli-');
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, candidates.map((c) => JSON.stringify(c)).join('\n') + '\n');
    const out = join(dir, 'plan.json');
    execFileSync(process.execPath, [CLI, 'plan', '--prompts', prompts, '--state', state, '--budget-rollouts', String(budget.rollouts), '--out', out]);
    await withReaders(state, async ({ whole, service }) => {
      const got = readFileSync(out, 'utf8');
      expect(got).toBe(text(await service.plan(candidates, budget)));
      // On this state the two reads' numbers differ in the last digits: the CLI read the candidates' rows.
      expect(got).not.toBe(text(whole.plan(candidates, budget)));
    });
  });
});
