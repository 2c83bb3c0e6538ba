import type { Candidate } from '../../plan/types.js';
import { hasVariance } from '../metrics.js';
import type { GroupOutcome, ReplayPolicy } from '../types.js';
import { fixedN, withHistory } from './uniform.js';

/** verl's `algorithm.filter_groups.max_num_gen_batches` in the DAPO recipe's scripts (verl's own default, 0, means no limit). */
export const dapoMaxGenBatches = 10;

/**
 * Whether DAPO's dynamic sampling keeps a group: verl keeps a prompt whose rewards have
 * standard deviation > 0, or that has a single rollout (`kept_prompt_uids` in
 * recipe/dapo/dapo_ray_trainer.py: `std > 0 or len(vals) == 1`). O(n).
 */
export function dapoKeeps(rewards: readonly number[]): boolean {
  return rewards.length === 1 || hasVariance(rewards);
}

/**
 * `dapo`: DAPO's dynamic sampling (Yu et al. 2025, arXiv:2503.14476; verl's
 * `algorithm.filter_groups`, recipe/dapo/dapo_ray_trainer.py): generate n for every prompt of
 * the batch, keep the groups `dapoKeeps` keeps, and while fewer than the batch size are kept,
 * generate the data loader's next batch. The update takes the first batch-size kept groups.
 * When the 10th generation batch still leaves it short, verl raises (the run stops): the step
 * is recorded as failed and trains on nothing. When the replay's stream ends first (verl would
 * start the next epoch), it trains on what it kept. It over-samples by design, so it spends
 * more than the budget.
 */
export const dapoPolicy: ReplayPolicy = {
  description: 'generate fixed n, keep groups with reward variance (or of one rollout), refill from the next batches, up to 10 generation batches (over-samples)',
  create: withHistory((ctx, h) => {
    const n = fixedN(ctx, h);
    const kept: GroupOutcome[] = [];
    let batch: readonly Candidate[] = ctx.candidates;
    for (let generation = 1; ; generation++) {
      for (const c of batch) {
        const g = ctx.generate(c, n);
        if (dapoKeeps(g.rewards)) kept.push(g);
      }
      if (kept.length >= ctx.batchSize) return { trained: kept.slice(0, ctx.batchSize) };
      if (generation >= dapoMaxGenBatches) {
        return { trained: [], failed: `${kept.length} of ${ctx.batchSize} groups kept after ${dapoMaxGenBatches} generation batches (verl raises: max_num_gen_batches)` };
      }
      batch = ctx.nextBatch();
      if (batch.length === 0) return { trained: kept };
    }
  }),
};
