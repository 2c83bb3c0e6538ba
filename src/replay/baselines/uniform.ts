import { History, mean } from '../history.js';
import type { PolicyRun, ReplayPolicy, StepContext } from '../types.js';

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

/** A policy run that keeps a History of its own groups and decides from it. */
export function withHistory(decide: (ctx: StepContext, h: History) => ReturnType<PolicyRun['decide']>): () => PolicyRun {
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
