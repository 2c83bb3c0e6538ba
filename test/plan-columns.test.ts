import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { intervalTablesKept } from '../src/plan/columns.js';
import {
  balancedSingleRoundValue, betaQuantileFast, createAllocator, createRegistries, expectedTokens, formatPlan, MonomialCurves, parsePrompts, parseVisits,
  posteriors, resolvePlanOptions, type Allocation, type Candidate, type Plan, type PlanOptionsInput,
} from '../src/index.js';

const read = (name: string) => readFileSync(new URL(`../fixtures/oneshot-rlvr-dsr-sub/${name}`, import.meta.url), 'utf8');
const registries = createRegistries();

/** An in-memory allocator that has observed the real fixture's first `steps` steps (with token counts). */
function observed(steps: number) {
  const allocator = createAllocator();
  for (const step of Array.from({ length: steps }, (_, s) => s)) {
    const visits = parseVisits(read('visits.jsonl'), 'visits.jsonl').filter((v) => v.step === step);
    allocator.observe(visits.map((v) => ({
      prompt_id: v.prompt_id, step,
      rewards: Array.from({ length: v.n }, (_, j) => (j < v.correct ? 1 : 0)),
      tokens: Array.from({ length: v.n }, (_, j) => (j < v.correct ? 3000 : 6000) + 17 * j),
    })));
  }
  return allocator;
}

/**
 * The allocation objects of `plan`, built eagerly the way the plan file defines them, from
 * the snapshot and public functions: posterior, length model, 5%/95% quantiles. Only n (the
 * solver's output) and value (checked apart, with a tolerance) are read from the plan.
 */
function eagerAllocations(plan: Plan, candidates: readonly Candidate[], options: PlanOptionsInput, snapshot: ReturnType<ReturnType<typeof createAllocator>['snapshot']>): Allocation[] {
  const resolved = resolvePlanOptions({ ...options, step: plan.step });
  const { alpha, beta } = posteriors(snapshot, candidates, plan.step, resolved);
  const columns = plan.columns!;
  const q = (1 - resolved.interval) / 2;
  return Array.from(columns.index, (i, j) => {
    const c = candidates[i]!;
    const a = alpha[i]!;
    const b = beta[i]!;
    const group = c.group === undefined ? undefined : snapshot.group(c.group);
    const perRollout = expectedTokens(snapshot.get(c.id), group, snapshot.all, a / (a + b), c.max_tokens, resolved.length).tokens;
    const n = columns.n[j]!;
    return {
      prompt_id: c.id, n, max_tokens: c.max_tokens ?? null, expected_tokens: Math.round(n * perRollout),
      p_mean: a / (a + b), p_low: betaQuantileFast(q, a, b), p_high: betaQuantileFast(1 - q, a, b), value: columns.value[j]!,
    };
  });
}

describe('plan columns and the allocations built from them', () => {
  const prompts = parsePrompts(read('prompts.jsonl'), 'prompts.jsonl');
  const allocator = observed(6);
  const snapshot = allocator.snapshot();
  const cases: [string, { rollouts?: number; tokens?: number }, PlanOptionsInput][] = [
    ['every prompt planned (columns are the planner arrays)', { rollouts: 8 * prompts.length, tokens: 9_000_000 }, {}],
    ['a pool with skip (compacted columns)', { rollouts: 512 }, { skip: true }],
    ['thompson, interval 0.5, prefill', { rollouts: 4 * prompts.length, tokens: 12_000_000 }, { policy: 'thompson', seed: 3, interval: 0.5, prefillWeight: 1 }],
  ];
  for (const [name, budget, options] of cases) {
    it(`JSON of the plan equals the eager construction, byte for byte: ${name}`, () => {
      const plan = allocator.plan(prompts, budget, options);
      const columns = plan.columns!;
      expect(columns.length).toBe(plan.totals.prompts);
      const eager = eagerAllocations(plan, prompts, options, snapshot);
      const { allocations: _lazy, warnings, ...header } = plan;
      const expected = { ...header, allocations: eager, warnings };
      expect(JSON.stringify(plan, null, 2)).toBe(JSON.stringify(expected, null, 2));
      expect(formatPlan(plan, 'json')).toBe(`${JSON.stringify(expected, null, 2)}\n`);
      // The value column: the policy's curves at the final n, recomputed from scratch.
      const resolved = resolvePlanOptions({ ...options, step: plan.step });
      if (resolved.policy === 'bayes') {
        const { alpha, beta } = posteriors(snapshot, prompts, plan.step, resolved);
        // One plan a step (no rounds left, no partial rewards) values `balanced` in its single-round form (README, "One plan a step").
        const value = resolved.value === 'balanced' && resolved.roundsLeft === 1 ? balancedSingleRoundValue : registries.values.get(resolved.value);
        const curves = new MonomialCurves(value, { kind: 'beta', alpha, beta });
        columns.index.forEach((i, j) => {
          const v = curves.value(i, columns.n[j]!);
          expect(Math.abs(columns.value[j]! - v), prompts[i]!.id).toBeLessThanOrEqual(1e-12 * Math.max(1, Math.abs(v)));
        });
      }
      expect(columns.n.reduce((s, x) => s + x, 0)).toBe(plan.totals.rollouts);
    });
  }

  it('quantiles kept across plans (a table for the thread) equal fresh ones: other intervals, eviction, regrowth, repeats', () => {
    // Small pools first (small tables), then every prompt (a regrown table); six intervals
    // against four kept tables, so some come back after eviction; each case twice (all hits).
    const sequence: [{ rollouts: number }, PlanOptionsInput][] = [];
    for (const interval of [0.9, 0.5, 0.8, 0.95, 0.7, 0.6, 0.9, 0.5]) sequence.push([{ rollouts: 64 }, { skip: true, interval }]);
    for (const interval of [0.9, 0.5, 0.8, 0.95, 0.7, 0.6]) sequence.push([{ rollouts: 8 * prompts.length }, { interval }]);
    let ran = 0;
    for (const [budget, options] of [...sequence, ...sequence]) {
      const plan = allocator.plan(prompts, budget, options);
      const { allocations: _lazy, warnings, ...header } = plan;
      const expected = { ...header, allocations: eagerAllocations(plan, prompts, options, snapshot), warnings };
      expect(JSON.stringify(plan), `interval ${options.interval}, ${budget.rollouts} rollouts`).toBe(JSON.stringify(expected));
      expect(intervalTablesKept()).toBeLessThanOrEqual(4);
      ran++;
    }
    expect(ran).toBe(28);
    expect(intervalTablesKept()).toBe(4);
  });

  it('builds the allocations once, keeps a replacement, and never writes the columns to the file', () => {
    const plan = allocator.plan(prompts, { rollouts: 512 }, { skip: true });
    expect(plan.allocations).toBe(plan.allocations);
    expect(Object.keys(plan)).toEqual(['version', 'step', 'seed', 'policy', 'value', 'budget', 'totals', 'allocations', 'warnings']);
    expect(JSON.parse(JSON.stringify(plan))).not.toHaveProperty('columns');
    expect(structuredClone(plan)).toEqual(JSON.parse(JSON.stringify(plan)));
    const first = plan.allocations[0]!;
    plan.allocations = plan.allocations.slice(1);
    expect(plan.allocations[0]).not.toBe(first);
    expect(plan.allocations).toHaveLength(plan.totals.prompts - 1);
  });

  it('a caller editing its candidate list after planning does not change the plan', () => {
    const list = [...prompts];
    const plan = allocator.plan(list, { rollouts: 512 }, { skip: true });
    const before = plan.columns!.candidates.map((c) => c.id);
    list.reverse();
    list.length = 3;
    expect(plan.allocations.map((a) => a.prompt_id)).toEqual(before);
    expect(before).toHaveLength(plan.totals.prompts);
  });
});
