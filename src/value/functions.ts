import { RolloutBudgetError, quote } from '../errors.js';
import { createRegistry, type Registry } from '../registry.js';

/**
 * One monomial of a value function: coef · n^e · p^(a + u·n) · (1−p)^(b + w·n), with u, w, e ∈ {0, 1}
 * (e absent means 0).
 * Writing every value function as a short sum of these makes its exact expectation under a
 * Beta posterior closed-form (E[p^A (1−p)^B] = B(α+A, β+B)/B(α, β)) and lets n → n+1 be one
 * multiplication per term.
 */
export interface Monomial {
  readonly coef: number;
  readonly a: number;
  readonly b: number;
  readonly u: 0 | 1;
  readonly w: 0 | 1;
  /** Multiply by n (e = 1): values that count rollouts, e.g. rollouts in informative groups. */
  readonly e?: 0 | 1;
}

/**
 * The value of giving a prompt with pass rate p a group of n rollouts. v(0) = 0 by definition;
 * for n ≥ 1, v(n) = Σ terms. Every registered function but `balanced` is concave in n for n ≥ 1.
 */
export interface ValueFunction {
  readonly name: string;
  readonly formula: string;
  readonly terms: readonly Monomial[];
  /**
   * The form it takes in a single-round step (one plan a step: no round after it tops up a
   * group), when that differs (plan/planner.ts): `balanced`'s drops its linear term. Absent:
   * the same terms in every round.
   */
  readonly singleRound?: ValueFunction;
}

const m = (coef: number, a: number, b: number, u: 0 | 1, w: 0 | 1): Monomial => ({ coef, a, b, u, w });

/**
 * `knapsack`: (1 − p^n − (1−p)^n)·p(1−p)². Knapsack RL (Li et al. 2025, "Knapsack RL:
 * Unlocking Exploration of LLMs via Optimizing Budget Allocation", arXiv:2509.25849), the
 * probability that the group has reward variance times the expected gradient signal p(1−p)².
 */
export const knapsackValue: ValueFunction = {
  name: 'knapsack',
  formula: '(1 − p^n − (1−p)^n)·p(1−p)²',
  terms: [m(1, 1, 2, 0, 0), m(-1, 1, 2, 1, 0), m(-1, 1, 2, 0, 1)],
};

/** `informative`: 1 − p^n − (1−p)^n, the probability the group is neither all right nor all wrong. */
export const informativeValue: ValueFunction = {
  name: 'informative',
  formula: '1 − p^n − (1−p)^n',
  terms: [m(1, 0, 0, 0, 0), m(-1, 0, 0, 1, 0), m(-1, 0, 0, 0, 1)],
};

/** `variance`: (1 − p^n − (1−p)^n)·p(1−p), informative probability times Bernoulli variance. */
export const varianceValue: ValueFunction = {
  name: 'variance',
  formula: '(1 − p^n − (1−p)^n)·p(1−p)',
  terms: [m(1, 1, 1, 0, 0), m(-1, 1, 1, 1, 0), m(-1, 1, 1, 0, 1)],
};

/** `hit`: 1 − (1−p)^n, the probability of at least one success (pass@n). */
export const hitValue: ValueFunction = {
  name: 'hit',
  formula: '1 − (1−p)^n',
  terms: [m(1, 0, 0, 0, 0), m(-1, 0, 0, 0, 1)],
};

const informativeTimes = (coef: number, a: number, b: number, e: 0 | 1 = 0): Monomial[] => [
  { coef, a, b, u: 0, w: 0, e },
  { coef: -coef, a, b, u: 1, w: 0, e },
  { coef: -coef, a, b, u: 0, w: 1, e },
];

/**
 * `balanced` as a single-round step values it (plan/planner.ts: roundsLeft 1 and no partial
 * rewards, i.e. one plan a step): without the 0.05·n·I(n) term and with half the hard-prompt
 * weight (1.25·(1−p)³). With no later round to correct the posterior, the linear term kept
 * paying middling prompts past an even share, taken from hard ones seen all wrong, and under a
 * token budget from expensive hard prompts to cheap easy ones: one round a step was below
 * `uniform` on hard positives (0.61× at the worst of seeds 0–9 under a long-CoT token budget
 * where hard answers run long) and on informative groups (README, "One plan a step").
 */
export const balancedSingleRoundValue: ValueFunction = {
  name: 'balanced',
  formula: '(1 − p^n − (1−p)^n)·(1 + 1.25(1−p)³ + 0.65·p(1−p)²)',
  terms: [...informativeTimes(1, 0, 0), ...informativeTimes(1.25, 0, 3), ...informativeTimes(0.65, 1, 2)],
};

/**
 * `balanced` (default): I(n)·(1 + 2.5·(1−p)³ + 0.65·p(1−p)²) + 0.05·n·I(n), with
 * I(n) = 1 − p^n − (1−p)^n the probability that the group has reward variance. Four terms in
 * one value: informative groups (the 1), successes on hard prompts (2.5·(1−p)³, largest as
 * p → 0: a success on a hard prompt is rare and carries the most signal), Knapsack RL's
 * gradient signal p(1−p)² (0.65·, Li et al. 2025, arXiv:2509.25849), and rollouts that land in
 * informative groups, the effective-gradient ratio (0.05·n·I(n)). The weights were tuned on
 * the One-Shot-RLVR replay (docs/replay.md has the measured table and the search). The last
 * term grows with n, so v is not concave in n for every p; the greedy solver then gives a
 * good, not always optimal, allocation (the DP reference measures the gap).
 */
export const balancedValue: ValueFunction = {
  name: 'balanced',
  formula: '(1 − p^n − (1−p)^n)·(1 + 2.5(1−p)³ + 0.65·p(1−p)²) + 0.05·n·(1 − p^n − (1−p)^n)',
  terms: [...informativeTimes(1, 0, 0), ...informativeTimes(2.5, 0, 3), ...informativeTimes(0.65, 1, 2), ...informativeTimes(0.05, 0, 0, 1)],
  singleRound: balancedSingleRoundValue,
};

/** v(n) at a known pass rate p ∈ [0, 1]. O(|terms|). */
export function valueAt(fn: ValueFunction, p: number, n: number): number {
  if (n <= 0) return 0;
  const q = 1 - p;
  let total = 0;
  for (const t of fn.terms) total += t.coef * (t.e === 1 ? n : 1) * Math.pow(p, t.a + t.u * n) * Math.pow(q, t.b + t.w * n);
  return total;
}

export function createValueRegistry(): Registry<ValueFunction> {
  return createRegistry<ValueFunction>('value function', {
    knapsack: knapsackValue,
    balanced: balancedValue,
    informative: informativeValue,
    variance: varianceValue,
    hit: hitValue,
  }, checkValueFunction);
}

/**
 * A value function as a registry takes it: terms, a non-empty array of monomials with a finite
 * coef, a and b finite and ≥ 0, u and w 0 or 1, e absent, 0 or 1; its singleRound the same. A
 * plain function (p, n) => v or missing terms threw a TypeError inside the planner, and a NaN
 * coefficient or a u of 2 planned silently (NaN values in the plan, or another function).
 */
export function checkValueFunction(name: string, fn: ValueFunction, where = `value function ${quote(name)}`): void {
  const bad = (field: string, expected: string, got: unknown) =>
    new RolloutBudgetError('BAD_INPUT', `${where}: ${field} must be ${expected}, got ${typeof got === 'function' ? 'a function' : quote(got)}`);
  if (fn === null || typeof fn !== 'object') throw bad('the entry', 'an object {name, formula, terms}: its value as a sum of monomials in p and n (ValueFunction)', fn);
  if (!Array.isArray(fn.terms) || fn.terms.length === 0) throw bad('terms', 'a non-empty array of monomials {coef, a, b, u, w, e?}', fn.terms);
  fn.terms.forEach((t: Monomial, i) => {
    if (t === null || typeof t !== 'object') throw bad(`terms[${i}]`, 'a monomial {coef, a, b, u, w, e?}', t);
    if (!Number.isFinite(t.coef)) throw bad(`terms[${i}].coef`, 'a finite number', t.coef);
    for (const k of ['a', 'b'] as const) if (!Number.isFinite(t[k]) || t[k] < 0) throw bad(`terms[${i}].${k}`, 'a finite number ≥ 0', t[k]);
    for (const k of ['u', 'w'] as const) if (t[k] !== 0 && t[k] !== 1) throw bad(`terms[${i}].${k}`, '0 or 1', t[k]);
    if (t.e !== undefined && t.e !== 0 && t.e !== 1) throw bad(`terms[${i}].e`, 'absent, 0 or 1', t.e);
  });
  if (fn.singleRound !== undefined) checkValueFunction(name, fn.singleRound, `${where}.singleRound`);
}
