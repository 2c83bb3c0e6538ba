import { arc4Random } from '../../math/arc4.js';
import type { Random } from '../../math/beta.js';
import type { Candidate } from '../../plan/types.js';
import { hasVariance } from '../metrics.js';
import type { ReplayPolicy } from '../types.js';
import type { PromptHistory } from '../history.js';
import { fixedN, withHistory } from './uniform.js';

/**
 * GRESO's constants as published (github.com/Infini-AI-Lab/GRESO at b277843:
 * verl/trainer/ppo/ray_trainer.py and verl/trainer/ttis/presampling_selector.py; the
 * `*_greso.sh` scripts set p_easy = p_hard = 0.5 and target_zero_variance = 0.25).
 */
export const gresoDefaults = {
  /** Start of p_easy and p_hard. */
  start: 0.5,
  /** Target share of all-correct groups: target_zero_variance / 3. */
  targetEasy: 0.25 / 3,
  /** Target share of all-wrong groups: target_zero_variance · 2/3 ("more exploration on hard"). */
  targetHard: (0.25 * 2) / 3,
  /** Move per training step, and the clamp [min_p, max_p]. */
  move: 0.01,
  minP: 0.05,
  maxP: 0.95,
  /** Floor of the keep probability: skip probability 1 − max(p^z, 0.01). */
  keepFloor: 0.01,
} as const;

/**
 * GRESO's skip probability for a prompt whose last z groups in a row were easy (mean reward
 * ≥ 0.98) or hard (mean ≤ 0.11): 1 − max(p^z, 0.01); 0 for z = 0. Domain p ∈ [0, 1], z ≥ 0.
 * O(1). Source: `easy_probabilistic_skip` / `hard_probabilistic_skip`.
 */
export function gresoSkipProbability(p: number, z: number): number {
  return 1 - Math.max(p ** z, gresoDefaults.keepFloor);
}

/**
 * GRESO's online update of p_easy or p_hard after a training step, from the second epoch on:
 * down by 0.01 when the step's share of such zero-variance groups reached its target (skip
 * more), else up by 0.01 (skip less), clamped to [0.05, 0.95]. O(1).
 */
export function gresoAdapt(p: number, share: number, target: number): number {
  return share >= target ? Math.max(p - gresoDefaults.move, gresoDefaults.minP) : Math.min(p + gresoDefaults.move, gresoDefaults.maxP);
}

/** GRESO's two keep bases. */
export interface GresoP {
  readonly easy: number;
  readonly hard: number;
}

/**
 * GRESO's controller after one training step (ray_trainer.py): the step's shares of
 * all-correct and all-wrong groups among all groups it generated move p_easy and p_hard by
 * `gresoAdapt`, from the second epoch on (epoch > 0); in the first epoch they stay. O(groups).
 */
export function gresoUpdate(p: GresoP, groups: readonly (readonly number[])[], epoch: number): GresoP {
  if (epoch === 0 || groups.length === 0) return p;
  let easy = 0;
  let hard = 0;
  for (const rewards of groups) {
    if (rewards.length === 0 || hasVariance(rewards)) continue;
    if (rewards[0]! >= 0.5) easy++;
    else hard++;
  }
  return {
    easy: gresoAdapt(p.easy, easy / groups.length, gresoDefaults.targetEasy),
    hard: gresoAdapt(p.hard, hard / groups.length, gresoDefaults.targetHard),
  };
}

/**
 * Whether GRESO skips a prompt before rollout (`filter_examples_all_probabilistic`): first the
 * easy test with its own draw, then the hard test with another. A prompt never generated is
 * kept. O(1).
 */
export function gresoSkips(h: PromptHistory | undefined, pEasy: number, pHard: number, random: Random): boolean {
  if (h === undefined) return false;
  if (random() < gresoSkipProbability(pEasy, h.easyStreak)) return true;
  return h.hardStreak > 0 && random() < gresoSkipProbability(pHard, h.hardStreak);
}

/**
 * `greso`: GRESO's pre-rollout filter (Zheng et al. 2025, arXiv:2506.02177) with its adaptive
 * p_easy and p_hard (`gresoSkips`, `gresoAdapt`); kept prompts get the fixed n, and the budget
 * freed by skipping is refilled from the data loader's next batches, filtered the same way.
 * Difference from the published trainer, stated: it generates until it has a training batch
 * of groups with reward variance (DAPO's dynamic sampling on top); here it fills the step's
 * rollout budget, so it spends what the other policies spend. The skip draws are seeded by
 * (seed, step, prompt), not torch's global generator.
 */
export const gresoPolicy: ReplayPolicy = {
  description: 'GRESO: skip prompts with easy/hard streaks with probability 1 − max(p^z, 0.01), p_easy/p_hard adapted online; refill the budget',
  create() {
    let p: GresoP = { easy: gresoDefaults.start, hard: gresoDefaults.start };
    let epoch = 0;
    const run = withHistory((ctx, h) => {
      epoch = ctx.epoch;
      const n = fixedN(ctx, h);
      const budget = ctx.budget.rollouts ?? n * ctx.batchSize;
      let used = 0;
      let batch: readonly Candidate[] = ctx.candidates;
      while (batch.length > 0 && used + n <= budget) {
        for (const c of batch) {
          if (used + n > budget) break;
          if (gresoSkips(h.get(c.id), p.easy, p.hard, arc4Random(`greso/${ctx.seed}/${ctx.step}/${c.id}`))) continue;
          ctx.generate(c, n);
          used += n;
        }
        if (used + n <= budget) batch = ctx.nextBatch();
      }
      return {};
    })();
    return {
      decide: (ctx) => run.decide(ctx),
      observe(step, groups) {
        run.observe(step, groups);
        p = gresoUpdate(p, groups.map((g) => g.rewards), epoch);
      },
    };
  },
};

