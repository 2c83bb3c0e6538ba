import type { Monomial, ValueFunction } from './functions.js';
import { isCorrect } from '../fields.js';

/**
 * What a prompt already generated at this step, in an earlier round: k rollouts, and whether
 * any succeeded or failed (a reward ≥ 0.5 counts as a success, as in the length model). A
 * group whose rewards all equal r < 0.5 counts as all failed, r ≥ 0.5 as all succeeded.
 */
export interface PartialGroup {
  readonly rollouts: number;
  readonly sawSuccess: boolean;
  readonly sawFailure: boolean;
}

/** The partial group of a list of rewards in [0, 1]. O(k). */
export function partialGroupOf(rewards: readonly number[]): PartialGroup {
  const first = rewards[0];
  let varies = false;
  for (const r of rewards) if (r !== first) varies = true;
  const success = first !== undefined && isCorrect(first);
  return { rollouts: rewards.length, sawSuccess: varies || success, sawFailure: varies || (first !== undefined && !success) };
}

/** The group already varies: a success and a failure (a later round gives it no more while others can use the budget: plan/partial.ts). */
export function isMixed(g: PartialGroup): boolean {
  return g.sawSuccess && g.sawFailure;
}

/** A stable name for a partial group's kind, e.g. `3:fail`, `2:mixed`. */
export function partialKey(g: PartialGroup): string {
  return `${g.rollouts}:${g.sawSuccess ? (g.sawFailure ? 'mixed' : 'success') : g.sawFailure ? 'fail' : 'none'}`;
}

/**
 * The value of m more rollouts for a prompt whose group already holds the k rollouts of `g`:
 * E[v(group of k + m) | the k outcomes] − E[v(group of k) | the k outcomes], as a value function
 * of (p, m), to be read under the posterior that already counts the k outcomes.
 *
 * Every registered value is built from events on the whole group: a term with p^(a+n) is
 * p^a·(1−p)^b times the probability that all n rollouts succeed, one with (1−p)^(b+n) that all
 * fail. Given the k outcomes, "all succeed" is impossible once one failed and otherwise has
 * probability p^m; likewise for "all fail". So each term keeps or drops its event, n^e becomes
 * (k + m)^e, and the value at m = 0 (what is already realised) is subtracted, which keeps
 * v(0) = 0. Example: `informative` after k failures is 1 − (1−p)^m (one success makes the
 * group informative); after a mixed group it is 0 (more rollouts cannot make it more so).
 * Concave in m whenever the function is concave in n. O(|terms|).
 */
export function conditionalValue(fn: ValueFunction, g: PartialGroup): ValueFunction {
  const k = g.rollouts;
  if (k === 0) return fn;
  const kept: Monomial[] = [];
  for (const t of fn.terms) {
    if (t.u === 1 && g.sawFailure) continue;
    if (t.w === 1 && g.sawSuccess) continue;
    if (t.e === 1) {
      kept.push(t);
      kept.push({ coef: t.coef * k, a: t.a, b: t.b, u: t.u, w: t.w, e: 0 });
    } else kept.push(t);
  }
  // The realised part, each kept term at m = 0 (p^m = (1−p)^m = 1, m·x = 0), subtracted.
  const constants = new Map<string, number>();
  for (const t of kept) {
    if (t.e === 1) continue;
    const key = `${t.a},${t.b}`;
    constants.set(key, (constants.get(key) ?? 0) - t.coef);
  }
  const terms: Monomial[] = [];
  for (const t of kept) {
    if (t.u === 0 && t.w === 0 && t.e !== 1) {
      const key = `${t.a},${t.b}`;
      constants.set(key, (constants.get(key) ?? 0) + t.coef);
    } else terms.push(t);
  }
  for (const [key, coef] of constants) {
    if (Math.abs(coef) < 1e-15) continue;
    const [a, b] = key.split(',').map(Number) as [number, number];
    terms.push({ coef, a, b, u: 0, w: 0 });
  }
  return { name: `${fn.name}|${partialKey(g)}`, formula: `${fn.formula}, given ${partialKey(g)} already generated`, terms };
}
