import seedrandom from 'seedrandom';
import { betaDraw, normalQuantile } from '../math/beta.js';
import { fnv1a } from '../math/hash.js';
import type { Candidate } from '../plan/types.js';
import { exactDp } from '../solver/reference.js';
import { MonomialCurves } from '../value/curves.js';
import { knapsackValue } from '../value/functions.js';
import { History, mean } from './history.js';
import { hasVariance } from './metrics.js';
import type { GroupOutcome, PolicyRun, ReplayPolicy, StepContext } from './types.js';

/**
 * The fixed group size of the uniform-n methods: ⌊rollouts / N⌋, lowered so that N·n rollouts
 * fit the token budget at the mean length seen so far (else the candidates' max_tokens), at
 * least 1 and at most max_n. With `size` given, N is that many prompts.
 */
export function fixedN(ctx: StepContext, history: History, size = ctx.batchSize): number {
  const count = Math.max(1, size);
  let n = ctx.budget.rollouts === undefined ? ctx.maxN : Math.floor(ctx.budget.rollouts / count);
  if (ctx.budget.tokens !== undefined) {
    const caps = ctx.candidates.map((c) => c.max_tokens).filter((t): t is number => t !== undefined);
    const perRollout = history.meanTokens() ?? (caps.length > 0 ? mean(caps) : undefined);
    if (perRollout !== undefined && perRollout > 0) n = Math.min(n, Math.floor(ctx.budget.tokens / (count * perRollout)));
  }
  return Math.max(1, Math.min(ctx.maxN, n));
}

function withHistory(decide: (ctx: StepContext, h: History) => ReturnType<PolicyRun['decide']>): () => PolicyRun {
  return () => {
    const history = new History(16);
    return { decide: (ctx) => decide(ctx, history), observe: (_step, groups) => history.observe(groups) };
  };
}

/** `uniform`: every prompt of the batch gets the same n (GRPO as usually run). */
export const uniformPolicy: ReplayPolicy = {
  description: 'fixed n for every prompt of the batch (GRPO default)',
  create: withHistory((ctx, h) => ({ n: new Int32Array(ctx.candidates.length).fill(fixedN(ctx, h)) })),
};

/**
 * `dapo`: DAPO's dynamic sampling (Yu et al. 2025, arXiv:2503.14476; verl's
 * `algorithm.filter_groups`): generate n for every prompt of the batch, keep only groups with
 * reward variance, and while fewer than the batch size are kept, generate the data loader's
 * next batch, up to `max_num_gen_batches` = 10 batches; train on the first batch-size kept
 * groups. It over-samples by design, so it spends more than the budget.
 */
export const dapoPolicy: ReplayPolicy = {
  description: 'generate fixed n, keep groups with reward variance, refill from the next batches (over-samples)',
  create: withHistory((ctx, h) => {
    const n = fixedN(ctx, h);
    const kept: GroupOutcome[] = [];
    let batch: readonly Candidate[] = ctx.candidates;
    for (let gen = 0; gen < 10 && kept.length < ctx.batchSize; gen++) {
      for (const c of batch) {
        const g = ctx.generate(c, n);
        if (hasVariance(g.rewards)) kept.push(g);
      }
      if (kept.length < ctx.batchSize) batch = ctx.nextBatch();
      if (batch.length === 0) break;
    }
    return { trained: kept.slice(0, ctx.batchSize) };
  }),
};

/**
 * `greso`: GRESO's pre-rollout filter (Zheng et al. 2025, arXiv:2506.02177): a prompt whose
 * last z groups in a row were all correct (or all wrong) is skipped with probability
 * 1 − p_e^z; the rest get the fixed n, and the budget freed by skipping is refilled with
 * prompts of the next batches, filtered the same way. Simplification: p_e is fixed at 0.5 for
 * easy and hard prompts (the paper tunes both online toward a target share of zero-variance).
 */
export const gresoPolicy: ReplayPolicy = {
  description: 'skip prompts with all-correct/all-wrong streaks with probability 1 − 0.5^streak; refill the budget',
  create: withHistory((ctx, h) => {
    const n = fixedN(ctx, h);
    const budget = ctx.budget.rollouts ?? n * ctx.batchSize;
    let used = 0;
    const keep = (c: Candidate): boolean => {
      const s = h.get(c.id);
      const z = s === undefined ? 0 : Math.max(s.easyStreak, s.hardStreak);
      const random = seedrandom(`greso/${ctx.seed}/${ctx.step}/${c.id}`);
      return random() < Math.pow(0.5, z);
    };
    let batch: readonly Candidate[] = ctx.candidates;
    for (let gen = 0; gen < 10 && used + n <= budget; gen++) {
      for (const c of batch) {
        if (used + n > budget) break;
        if (!keep(c)) continue;
        ctx.generate(c, n);
        used += n;
      }
      if (used + n <= budget) batch = ctx.nextBatch();
      if (batch.length === 0) break;
    }
    return {};
  }),
};

/**
 * `knapsack-rl`: Knapsack RL as published (Li et al. 2025, arXiv:2509.25849). Pass rate of a
 * prompt = mean reward of its last group, or of its last 16 rewards when that group is
 * smaller; prompts with fewer than 8 observed rollouts get the default n = ⌊B/N⌋; the others
 * share the rest by an exact dynamic program over value (1 − p^n − (1−p)^n)·p(1−p)², n in
 * [min_n, max_n]; budget the program leaves (its value is 0 at p = 0 or 1) goes round-robin
 * to unsolved prompts (estimated p = 0). Token budgets are not part of the method.
 */
export const knapsackRlPolicy: ReplayPolicy = {
  description: 'Knapsack RL: last-group pass rate, exact DP on the knapsack value, surplus to unsolved prompts',
  create: withHistory((ctx, h) => {
    const size = ctx.candidates.length;
    const budget = ctx.budget.rollouts ?? fixedN(ctx, h) * size;
    const defaultN = Math.max(ctx.minN, Math.min(ctx.maxN, Math.floor(budget / Math.max(1, size))));
    const n = new Int32Array(size);
    const predicted = new Map<string, number>();
    const known: number[] = [];
    const p: number[] = [];
    let left = budget;
    ctx.candidates.forEach((c, i) => {
      const s = h.get(c.id);
      if (s === undefined || s.rollouts < 8) {
        n[i] = defaultN;
        left -= defaultN;
        return;
      }
      const est = s.last.length >= 16 ? mean(s.last) : mean(s.recent);
      known.push(i);
      p.push(est);
      predicted.set(c.id, est);
    });
    if (known.length > 0 && left >= known.length * ctx.minN) {
      const result = exactDp({
        curves: new MonomialCurves(knapsackValue, { kind: 'point', p: Float64Array.from(p) }),
        tokensPerRollout: new Float64Array(known.length),
        fixedTokens: new Float64Array(known.length),
        tieBreak: Uint32Array.from(known, (i) => fnv1a(ctx.candidates[i]!.id)),
        minN: ctx.minN,
        maxN: ctx.maxN,
        skip: false,
        rollouts: left,
        tokens: Infinity,
      });
      known.forEach((i, j) => {
        n[i] = result.n[j]!;
        left -= result.n[j]!;
      });
      const unsolved = known.filter((_, j) => p[j] === 0);
      for (let round = 0; left > 0 && unsolved.some((i) => n[i]! < ctx.maxN); round++) {
        for (const i of unsolved) {
          if (left <= 0) break;
          if (n[i]! < ctx.maxN) {
            n[i]!++;
            left--;
          }
        }
      }
    } else {
      for (const i of known) n[i] = Math.max(1, Math.floor(left / Math.max(1, known.length)));
    }
    return { n, predicted };
  }),
};

/**
 * `mopps`: Model Predictive Prompt Selection (Qu et al. 2025, arXiv:2507.04632). Each prompt
 * has a Beta posterior (from Beta(1, 1); old evidence discounted by λ = 0.9 at each update);
 * from a candidate pool of the batch plus the data loader's next batch, it takes one Thompson
 * draw per prompt and selects the batch-size prompts whose draws are nearest 0.5, each with
 * the fixed n. Simplification: the pool is two batches (the paper pre-samples a larger pool).
 */
export const moppsPolicy: ReplayPolicy = {
  description: 'Thompson draws from discounted Beta posteriors; select the prompts nearest p = 0.5 from a 2× pool',
  create() {
    const history = new History(16);
    const post = new Map<string, { a: number; b: number }>();
    return {
      decide(ctx) {
        const n = fixedN(ctx, history);
        const pool = [...ctx.candidates, ...ctx.nextBatch()];
        const scored = pool.map((c) => {
          const q = post.get(c.id) ?? { a: 1, b: 1 };
          const draw = betaDraw(q.a, q.b, seedrandom(`mopps/${ctx.seed}/${ctx.step}/${c.id}`));
          return { c, d: Math.abs(draw - 0.5), mean: q.a / (q.a + q.b), tie: fnv1a(c.id) };
        });
        scored.sort((x, y) => x.d - y.d || x.tie - y.tie);
        const predicted = new Map<string, number>();
        const budget = ctx.budget.rollouts ?? n * ctx.batchSize;
        const take = Math.min(ctx.batchSize, Math.floor(budget / n));
        for (const s of scored.slice(0, take)) {
          ctx.generate(s.c, n);
          predicted.set(s.c.id, s.mean);
        }
        return { predicted };
      },
      observe(_step, groups) {
        history.observe(groups);
        for (const g of groups) {
          const k = g.rewards.reduce((a, r) => a + r, 0);
          const q = post.get(g.prompt_id) ?? { a: 1, b: 1 };
          post.set(g.prompt_id, { a: 0.9 * q.a + k, b: 0.9 * q.b + g.rewards.length - k });
        }
      },
    };
  },
};

/** Student-t quantile by the Cornish–Fisher expansion (exact for ν = 1); ν ≥ 1. O(1). */
export function tQuantile(q: number, dof: number): number {
  if (dof <= 1) return Math.tan(Math.PI * (q - 0.5));
  const z = normalQuantile(q);
  const z3 = z * z * z;
  const z5 = z3 * z * z;
  return z + (z3 + z) / (4 * dof) + (5 * z5 + 16 * z3 + 3 * z) / (96 * dof * dof);
}

/**
 * `xrpo`: XRPO's hierarchical rollout planning (arXiv:2510.06672). Every prompt first gets
 * n0 = max(min_n, ⌊B/(2N)⌋); the rest is assigned in 4 rounds. In a round each further
 * rollout goes to the prompt with the largest priority = the shrinkage of the 95%
 * t-confidence half-width of its mean reward from one more rollout, t(n−1)·s/√n − t(n)·s/√(n+1),
 * plus a UCB bonus c·√(ln T / n) (c = 0.5, T the step's rollouts so far); groups are
 * generated between rounds, so later rounds see earlier rounds' rewards.
 */
export const xrpoPolicy: ReplayPolicy = {
  description: 'base round, then rounds by t-CI shrinkage plus a UCB bonus, generated round by round',
  create() {
    return {
      decide(ctx) {
        const size = ctx.candidates.length;
        const budget = ctx.budget.rollouts ?? 8 * size;
        const n0 = Math.max(ctx.minN, Math.min(ctx.maxN, Math.floor(budget / (2 * Math.max(1, size)))));
        const groups = ctx.candidates.map((c) => ctx.generate(c, n0));
        let left = budget - n0 * size;
        const halfWidth = (n: number, s: number) => (n < 2 ? Infinity : (tQuantile(0.975, n - 1) * s) / Math.sqrt(n));
        for (let round = 0; round < 4 && left > 0; round++) {
          const quota = round === 3 ? left : Math.ceil(left / (4 - round));
          const planned = new Int32Array(size);
          let total = groups.reduce((a, g) => a + g.rewards.length, 0);
          const stats = groups.map((g) => {
            const m = mean(g.rewards);
            const v = g.rewards.reduce((a, r) => a + (r - m) ** 2, 0) / Math.max(1, g.rewards.length - 1);
            return Math.sqrt(v);
          });
          for (let k = 0; k < quota; k++) {
            let best = -1;
            let bestKey = -Infinity;
            for (let i = 0; i < size; i++) {
              const n = groups[i]!.rewards.length + planned[i]!;
              if (n >= ctx.maxN) continue;
              const s = stats[i]!;
              const shrink = s > 0 ? halfWidth(n, s) - halfWidth(n + 1, s) : 0;
              const key = shrink + 0.5 * Math.sqrt(Math.log(total) / n);
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
