import { mean, type PromptHistory } from '../history.js';
import type { ReplayPolicy } from '../types.js';
import { KnapsackRlRaise, knapsackRlAllocate, type KnapsackRlState } from './knapsack-rl-allocate.js';
import { fixedN, withHistory } from './uniform.js';

/** Knapsack RL's data set settings: `min_buffer_length` 8 and `reward_buffer_length` 16 (rl_dataset.py). */
const MIN_BUFFER = 8;
const REWARD_BUFFER = 16;

/**
 * A prompt's [valid, pass rate, count] as Knapsack RL's data set reports it
 * (`update_sample_state` / `get_sample_state`, verl/utils/dataset/rl_dataset.py): the mean of
 * the last group, or of the last 16 rewards when that group has fewer than 16; valid from 8
 * observed rollouts; [0, 0, 0] for a prompt never generated. O(1).
 */
export function knapsackRlState(h: PromptHistory | undefined): KnapsackRlState {
  if (h === undefined) return [0, 0, 0];
  const rate = h.last.length >= REWARD_BUFFER ? mean(h.last) : mean(h.recent);
  return [h.rollouts >= MIN_BUFFER ? 1 : 0, rate, h.rollouts];
}

/**
 * `knapsack-rl`: Knapsack RL as published (Li et al. 2025, arXiv:2509.25849): each prompt's
 * state from its own earlier groups (`knapsackRlState`), then `knapsackRlAllocate` with the
 * published script's settings (n = the step's rollouts per prompt, min_n = negative_n =
 * positive_n = --min-n, max_n = --max-n, total budget = the step's rollouts). Where the
 * published code fails its assertion (the batch's initial rollouts overspend the budget, or
 * every prompt is in the DP with budget to spare, which numpy's division by zero drops), the
 * step generates nothing and is recorded as failed, as the published run would stop there.
 * Before, the second case ran again with allow_fallback off, kinder than the published code.
 * No token budget (as published).
 */
export const knapsackRlPolicy: ReplayPolicy = {
  description: 'Knapsack RL (sampling_budget_by_knapsack): needs-first surplus to unsolved prompts, then the published DP',
  create: withHistory((ctx, h) => {
    const size = ctx.candidates.length;
    if (size === 0) return {};
    const budget = ctx.budget.rollouts ?? fixedN(ctx, h) * size;
    const states = ctx.candidates.map((c) => knapsackRlState(h.get(c.id)));
    const options = { n: Math.floor(budget / Math.max(1, size)), minN: ctx.minN, maxN: ctx.maxN, totalBudget: budget };
    let n: Int32Array;
    try {
      n = knapsackRlAllocate(states, options);
    } catch (error) {
      if (!(error instanceof KnapsackRlRaise)) throw error;
      return { trained: [], failed: error.message };
    }
    const predicted = new Map<string, number>();
    ctx.candidates.forEach((c, i) => {
      if (states[i]![0] === 1) predicted.set(c.id, states[i]![1]);
    });
    return { n, predicted };
  }),
};
