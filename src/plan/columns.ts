import { betaQuantileFast } from '../math/beta.js';
import { PairCache } from '../math/pair-cache.js';
import type { Allocation, Candidate, Plan, PlanColumns } from './types.js';

/** Everything of a plan but its allocations. */
export type PlanHeader = Omit<Plan, 'allocations' | 'columns'>;

/**
 * A plan whose `allocations` are built from `columns` on first read, then kept: the planner
 * itself makes no object per prompt. `allocations` is an own enumerable property in its
 * contract place (so JSON.stringify, spreads and structuredClone see the usual plan), with a
 * setter, so callers can still replace it; `columns` is own but not enumerable, so it never
 * reaches the plan file.
 */
export function columnarPlan(header: PlanHeader, columns: PlanColumns): Plan {
  const { warnings, ...head } = header;
  let allocations: Allocation[] | undefined;
  // The placeholder fixes the key's place; redefining it as an accessor keeps that place.
  const plan: Plan = { ...head, allocations: [], warnings };
  Object.defineProperty(plan, 'allocations', {
    get: () => (allocations ??= allocationsOf(columns)),
    set: (list: Allocation[]) => {
      allocations = list;
    },
    enumerable: true,
    configurable: true,
  });
  Object.defineProperty(plan, 'columns', { value: columns, enumerable: false });
  return plan;
}

/**
 * The plan file's allocation objects of `columns`, row by row, with the posterior's central
 * `columns.interval` credible interval as [p_low, p_high]. O(rows) plus one quantile pair per
 * distinct posterior (memoized).
 */
export function allocationsOf(columns: PlanColumns): Allocation[] {
  const { length, candidates, n, tokensPerRollout, alpha, beta, value } = columns;
  const interval = memoizedInterval((1 - columns.interval) / 2, length);
  const out: Allocation[] = new Array(length);
  for (let j = 0; j < length; j++) {
    const a = alpha[j]!;
    const b = beta[j]!;
    const c: Candidate = candidates[j]!;
    const q = interval(a, b); // indexed reads: destructuring takes V8's slow iterator path
    out[j] = {
      prompt_id: c.id,
      n: n[j]!,
      max_tokens: c.max_tokens ?? null,
      expected_tokens: Math.round(n[j]! * tokensPerRollout[j]!),
      p_mean: a / (a + b),
      p_low: q[0],
      p_high: q[1],
      value: value[j]!,
    };
    const k = c.partial_rewards?.length ?? 0;
    if (k > 0) out[j]!.first_rollout = k;
  }
  return out;
}

/**
 * [q, 1 − q] quantiles of Beta(α, β), cached for one plan: posteriors repeat a lot (counts
 * are small integers and step gaps few), and the exact quantile costs ~1.4 µs.
 */
function memoizedInterval(q: number, size: number): (a: number, b: number) => [number, number] {
  // At least 2 slots a prompt, 2^8 to 2^16 (2 MB): small plans do not pay for a big table.
  const bits = Math.min(16, Math.max(8, Math.ceil(Math.log2(2 * size + 1))));
  const cache = new PairCache((a, b) => [betaQuantileFast(q, a, b), betaQuantileFast(1 - q, a, b)], bits);
  const out: [number, number] = [0, 0];
  return (a, b) => cache.get(a, b, out);
}
