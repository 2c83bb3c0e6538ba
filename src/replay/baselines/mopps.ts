import { arc4Random } from '../../math/arc4.js';
import { betaDraw } from '../../math/beta.js';
import { fnv1a } from '../../math/hash.js';
import { History } from '../history.js';
import type { ReplayPolicy } from '../types.js';
import { fixedN } from './uniform.js';

/** A prompt's Beta posterior in MoPPS. */
export interface MoppsPosterior {
  readonly alpha: number;
  readonly beta: number;
}

/**
 * MoPPS's settings as published (github.com/thu-rllab/MoPPS at a883f51,
 * recipe/ours/mopps.py and config/our_trainer.yaml): prior Beta(1, 1), decay λ =
 * `bandit_decay_ratio` 1.0 (the default; some countdown/geometry scripts use 0.5), target 0.5.
 */
export const moppsDefaults = { prior: { alpha: 1, beta: 1 }, decay: 1, target: 0.5 } as const;

/**
 * MoPPS's posterior update (`PosteriorSampler.train`): α ← λ·α + (1 − λ)·α₀ + k,
 * β ← λ·β + (1 − λ)·β₀ + (n − k), for k successes in a group of n (rewards in [0, 1] summed).
 * λ = 1 keeps all evidence; λ < 1 pulls old evidence back toward the prior. O(n).
 */
export function moppsUpdate(post: MoppsPosterior, rewards: readonly number[], decay: number = moppsDefaults.decay, prior: MoppsPosterior = moppsDefaults.prior): MoppsPosterior {
  const k = rewards.reduce((a, r) => a + r, 0);
  return {
    alpha: post.alpha * decay + prior.alpha * (1 - decay) + k,
    beta: post.beta * decay + prior.beta * (1 - decay) + (rewards.length - k),
  };
}

/**
 * `mopps`: Model Predictive Prompt Selection (Qu et al. 2025, arXiv:2507.04632), its `topk`
 * strategy: one Thompson draw per candidate from its posterior, keep the batch-size prompts
 * whose draws are nearest 0.5 ((draw − 0.5)² ascending), each with the fixed n; update with
 * `moppsUpdate` (λ = 1). Differences, stated: the candidate pool is this batch plus the data
 * loader's next one (the published math scripts pre-sample 16 batches, `ts_ratio` 16, which
 * would exhaust the replay's stream in a few dozen steps); draws are seeded by (seed, step,
 * prompt), not numpy's global generator; equal distances fall back to the id hash.
 */
export const moppsPolicy: ReplayPolicy = {
  description: 'MoPPS (topk): Thompson draws from Beta posteriors, select the prompts nearest p = 0.5 from a 2× pool',
  create() {
    const history = new History(16);
    const post = new Map<string, MoppsPosterior>();
    return {
      decide(ctx) {
        const n = fixedN(ctx, history);
        const pool = [...ctx.candidates, ...ctx.nextBatch()];
        const scored = pool.map((c) => {
          const q = post.get(c.id) ?? moppsDefaults.prior;
          const draw = betaDraw(q.alpha, q.beta, arc4Random(`mopps/${ctx.seed}/${ctx.step}/${c.id}`));
          return { c, d: (draw - moppsDefaults.target) ** 2, mean: q.alpha / (q.alpha + q.beta), tie: fnv1a(c.id) };
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
        for (const g of groups) post.set(g.prompt_id, moppsUpdate(post.get(g.prompt_id) ?? moppsDefaults.prior, g.rewards));
      },
    };
  },
};
