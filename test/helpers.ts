import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import seedrandom from 'seedrandom';
import { expect } from 'vitest';
import { MonomialCurves, RolloutBudgetError, createValueRegistry, fnv1a, type SolverInput, type SolverResult } from '../src/index.js';

/** A seeded random instance for solver tests; the seed goes into failure messages. */
export function randomInstance(
  seed: string,
  opts: { size: number; minN: number; maxN: number; skip: boolean; rollouts: number; tokens: number; value?: string; tokenCosts?: boolean; prefill?: boolean },
): SolverInput {
  const random = seedrandom(seed);
  const alpha = Float64Array.from({ length: opts.size }, () => 0.2 + random() * 6);
  const beta = Float64Array.from({ length: opts.size }, () => 0.2 + random() * 6);
  const fn = createValueRegistry().get(opts.value ?? 'knapsack');
  const curves = new MonomialCurves(fn, { kind: 'beta', alpha, beta });
  const surplus = new MonomialCurves(createValueRegistry().get('hit'), { kind: 'beta', alpha, beta });
  return {
    curves,
    surplus,
    tokensPerRollout: Float64Array.from({ length: opts.size }, () => (opts.tokenCosts ? 100 + Math.floor(random() * 900) : 0)),
    fixedTokens: Float64Array.from({ length: opts.size }, () => (opts.prefill ? Math.floor(random() * 300) : 0)),
    tieBreak: Uint32Array.from({ length: opts.size }, (_, i) => fnv1a(`${seed}/${i}`)),
    minN: opts.minN,
    maxN: opts.maxN,
    skip: opts.skip,
    rollouts: opts.rollouts,
    tokens: opts.tokens,
  };
}

/** Σ v_i(n_i) recomputed from scratch, independent of the solver's own bookkeeping. */
export function objectiveOf(input: SolverInput, n: Int32Array): number {
  let total = 0;
  for (let i = 0; i < n.length; i++) total += input.curves.value(i, n[i]!);
  return total;
}

/** Validity oracle: bounds and budgets hold. Returns the violations (empty when valid). */
export function violations(input: SolverInput, n: Int32Array): string[] {
  const out: string[] = [];
  let r = 0;
  let t = 0;
  for (let i = 0; i < n.length; i++) {
    const x = n[i]!;
    const lo = input.promptMinN?.[i] ?? input.minN;
    const hi = input.promptMaxN?.[i] ?? input.maxN;
    if (x !== 0 || !(input.skip || lo === 0)) {
      if (x < Math.max(1, lo) || x > hi) out.push(`n[${i}] = ${x} outside [${lo}, ${hi}]`);
    }
    r += x;
    t += x * input.tokensPerRollout[i]! + (x > 0 ? input.fixedTokens[i]! : 0);
  }
  if (r > input.rollouts) out.push(`rollouts ${r} > ${input.rollouts}`);
  if (t > input.tokens * (1 + 1e-9)) out.push(`tokens ${t} > ${input.tokens}`);
  return out;
}

/** Loads every golden case in test/golden/ (one JSON file a case). */
export function goldenCases<T>(): { name: string; data: T }[] {
  const dir = join(import.meta.dirname, 'golden');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ name: f, data: JSON.parse(readFileSync(join(dir, f), 'utf8')) as T }));
}

/** Two solutions of one instance are the same: every n, the objective, bound and budgets used, bit for bit. */
export function expectSameSolution(a: SolverResult, b: SolverResult, label: string): void {
  let differing = 0;
  for (let i = 0; i < a.n.length; i++) if (a.n[i] !== b.n[i]) differing++;
  expect(differing, label).toBe(0);
  expect(a.n.length, label).toBe(b.n.length);
  expect(a.objective, label).toBe(b.objective);
  expect(a.upperBound, label).toBe(b.upperBound);
  expect(a.usedRollouts, label).toBe(b.usedRollouts);
  expect(a.usedTokens, label).toBe(b.usedTokens);
  expect(a.surplusRollouts, label).toBe(b.surplusRollouts);
}

/** The error a call throws, as a RolloutBudgetError (the test fails on any other, and when nothing is thrown). */
export function thrown(call: () => unknown): RolloutBudgetError {
  try {
    call();
  } catch (error) {
    expect(error).toBeInstanceOf(RolloutBudgetError);
    return error as RolloutBudgetError;
  }
  throw new Error('expected the call to throw');
}
