import type { GroupStats, StateSnapshot } from './state.js';

/**
 * Learned prior for prompts never seen (empirical Bayes).
 *
 * Method of moments on observed prompts' pass rates, corrected for binomial noise:
 * m = mean rate, v = var(rate) − mean(rate(1−rate)/evidence) (the spread the prompts really
 * have), strength S = m(1−m)/v − 1, then α0 = m·S, β0 = (1−m)·S.
 * S is clamped to [minStrength, maxStrength] (defaults 0.5 and 2): a new prompt's prior is
 * worth at most two rollouts, so its first group of 8 moves the estimate most of the way
 * (e.g. 3/8 correct from a prior with mean 0.35 gives a posterior mean of 0.37 with S = 2).
 * On One-Shot-RLVR's first visits the fit is α = 0.349, β = 0.693 (S ≈ 1.04, CALIBRATION.md),
 * inside the clamp.
 *
 * Per `group` when the candidate has one with at least `minPrompts` observed prompts; else all
 * prompts; else Beta(1, 1). A candidate with an offline hint (`prior_pass_rate`) starts from
 * this prior moved toward its calibrated hint (posterior/hints.ts; the `hint*` options).
 */
export interface PriorOptions {
  readonly minPrompts: number;
  readonly minStrength: number;
  readonly maxStrength: number;
  /** Observed hinted prompts a calibration needs (a group's own, else the pooled one). */
  readonly hintMinPrompts: number;
  /** The most pseudo-rollouts a calibrated hint may be worth. */
  readonly hintMaxStrength: number;
  /** What a hint is worth before any calibration, in pseudo-rollouts. */
  readonly hintDefaultStrength: number;
}

export const defaultPriorOptions: PriorOptions = {
  minPrompts: 5, minStrength: 0.5, maxStrength: 2, hintMinPrompts: 30, hintMaxStrength: 16, hintDefaultStrength: 2,
};

export interface Prior {
  readonly alpha: number;
  readonly beta: number;
  readonly source: 'group' | 'all' | 'flat' | 'hint';
}

export const flatPrior: Prior = { alpha: 1, beta: 1, source: 'flat' };

/**
 * Fits Beta(α0, β0) to pooled figures by the method of moments corrected for binomial noise
 * (PriorOptions above has the formula), or undefined with fewer than `minPrompts` prompts. The
 * mean is clamped to [0.01, 0.99], so a pool seen all right or all wrong still has a prior both
 * outcomes can move, and the strength to [minStrength, maxStrength]. O(1).
 */
export function fitPrior(stats: GroupStats, opts: PriorOptions, source: 'group' | 'all'): Prior | undefined {
  if (stats.count < opts.minPrompts) return undefined;
  const mean = Math.min(0.99, Math.max(0.01, stats.sumRate / stats.count));
  const spread = stats.sumRate2 / stats.count - (stats.sumRate / stats.count) ** 2;
  const trueVar = spread - stats.sumNoise / stats.count;
  const raw = trueVar > 1e-9 ? (mean * (1 - mean)) / trueVar - 1 : opts.maxStrength;
  const strength = Math.min(opts.maxStrength, Math.max(opts.minStrength, raw));
  return { alpha: mean * strength, beta: (1 - mean) * strength, source };
}

/** The prior for a prompt of `group` under a snapshot. Memoize per group in hot loops. */
export function priorFor(snapshot: StateSnapshot, group: string | null, opts: PriorOptions): Prior {
  const byGroup = group === null ? undefined : snapshot.group(group);
  return (byGroup && fitPrior(byGroup, opts, 'group')) ?? fitPrior(snapshot.all, opts, 'all') ?? flatPrior;
}
