import { tQuantile } from '../../math/student.js';
import { mean } from '../history.js';
import type { ReplayPolicy } from '../types.js';

/** Our settings of XRPO's allocator (the paper gives the form; these constants are chosen here). */
export const xrpoDefaults = {
  /** Two-sided confidence of the t-interval: 95%. */
  confidence: 0.95,
  /** λ of the exploration bonus. */
  bonus: 0.5,
  /** Allocation rounds after the base round. */
  rounds: 4,
} as const;

/** t_{0.975, ν} by ν, computed once each (the allocator asks for the same few thousands of times a step). */
const tAtDefault: number[] = [];

/**
 * Half-width of the t-interval of a prompt's mean reward from n rollouts with sample standard
 * deviation s: h(n) = t_{1−α/2, n−1}·s/√n; Infinity for n < 2. O(1) (memoized quantile).
 */
export function xrpoHalfWidth(n: number, s: number, confidence: number = xrpoDefaults.confidence): number {
  if (n < 2) return Infinity;
  const q = 1 - (1 - confidence) / 2;
  const t = confidence === xrpoDefaults.confidence ? (tAtDefault[n - 1] ??= tQuantile(q, n - 1)) : tQuantile(q, n - 1);
  return (t * s) / Math.sqrt(n);
}

/**
 * XRPO's priority of one more rollout for a prompt (Bamba et al. 2025, arXiv:2510.06672,
 * hierarchical rollout planning): Π = Δh + φ, with the shrinkage of the interval
 * Δh = h(n) − h(n + 1) (0 when s = 0) and the exploration bonus φ = λ·√(log(1 + T)/n), T the
 * rollouts of the step so far. Domain n ≥ 1, s ≥ 0, T ≥ 0. O(1).
 */
export function xrpoPriority(n: number, s: number, total: number, bonus: number = xrpoDefaults.bonus): number {
  const shrink = s > 0 ? xrpoHalfWidth(n, s) - xrpoHalfWidth(n + 1, s) : 0;
  return shrink + bonus * Math.sqrt(Math.log(1 + total) / n);
}

/**
 * `xrpo`: our reading of XRPO's rollout allocator; its published code could not be read here,
 * so the rule follows the paper's formulas (`xrpoPriority`) and the rest is ours, stated:
 * a base round gives every prompt n0 = max(min_n, ⌊B/(2N)⌋) (half the budget), then 4 rounds
 * each give a share of the rest one rollout at a time to the largest priority (ties: the
 * earlier prompt), generated between rounds so later rounds see earlier rewards; λ = 0.5.
 * Omitted: XRPO's in-context seeding of all-wrong prompts (it changes the prompt given to the
 * model, which a replay of logged outcomes cannot) and its advantage sharpening (training).
 */
export const xrpoPolicy: ReplayPolicy = {
  description: 'XRPO allocator (our reading of the paper): base round, then rounds by t-interval shrinkage + λ·√(log(1+T)/n), generated round by round',
  create() {
    return {
      decide(ctx) {
        const size = ctx.candidates.length;
        const budget = ctx.budget.rollouts ?? 8 * size;
        const n0 = Math.max(ctx.minN, Math.min(ctx.maxN, Math.floor(budget / (2 * Math.max(1, size)))));
        const groups = ctx.candidates.map((c) => ctx.generate(c, n0));
        let left = budget - n0 * size;
        const { rounds } = xrpoDefaults;
        for (let round = 0; round < rounds && left > 0; round++) {
          const quota = round === rounds - 1 ? left : Math.ceil(left / (rounds - round));
          const planned = new Int32Array(size);
          let total = groups.reduce((a, g) => a + g.rewards.length, 0);
          const sd = groups.map((g) => {
            const m = mean(g.rewards);
            return Math.sqrt(g.rewards.reduce((a, r) => a + (r - m) ** 2, 0) / Math.max(1, g.rewards.length - 1));
          });
          for (let k = 0; k < quota; k++) {
            let best = -1;
            let bestKey = -Infinity;
            for (let i = 0; i < size; i++) {
              const n = groups[i]!.rewards.length + planned[i]!;
              if (n >= ctx.maxN) continue;
              const key = xrpoPriority(n, sd[i]!, total);
              if (key > bestKey) {
                bestKey = key;
                best = i;
              }
            }
            if (best < 0) break;
            planned[best]!++;
            total++;
          }
          let spent = 0;
          planned.forEach((m, i) => {
            if (m > 0) ctx.generate(ctx.candidates[i]!, m);
            spent += m;
          });
          left -= spent;
          if (spent === 0) break;
        }
        return {};
      },
      observe: () => undefined,
    };
  },
};
