import { betaQuantile } from '../math/beta.js';
import { expectedTokens } from '../posterior/length.js';
import { nextStep } from '../posterior/decay.js';
import type { StateSnapshot } from '../posterior/state.js';
import { posteriors } from './posteriors.js';
import type { Candidate, PlanOptions } from './types.js';

/** A prompt's posterior as the next plan would see it. */
export interface PosteriorView {
  id: string;
  group: string | null;
  step: number;
  alpha: number;
  beta: number;
  p_mean: number;
  p_low: number;
  p_high: number;
  rollouts: number;
  reward_sum: number;
  last_step: number | null;
  expected_tokens: number;
  /** Whether the prompt has been observed (a prompt only planned has a state, store/meta.ts, but is not seen). */
  seen: boolean;
  /** The offline hint the state remembers (or the candidate gives), else null. */
  prior_pass_rate: number | null;
  prior_samples: number | null;
}

/**
 * One prompt's posterior, counts and length estimate from a snapshot: a pure function shared
 * by the synchronous Allocator and the service. `candidate` may carry group and max_tokens.
 */
export function posteriorView(snapshot: StateSnapshot, id: string, candidate: Partial<Candidate>, resolved: PlanOptions): PosteriorView {
  const step = resolved.step ?? nextStep(snapshot.lastStep);
  const state = snapshot.get(id);
  const c: Candidate = { ...candidate, id, ...(state?.group ? { group: candidate.group ?? state.group } : {}) };
  const { alpha, beta } = posteriors(snapshot, [c], step, resolved);
  const a = alpha[0]!;
  const b = beta[0]!;
  const lo = (1 - resolved.interval) / 2;
  const group = c.group === undefined ? undefined : snapshot.group(c.group);
  return {
    id,
    group: c.group ?? null,
    step,
    alpha: a,
    beta: b,
    p_mean: a / (a + b),
    p_low: betaQuantile(lo, a, b),
    p_high: betaQuantile(1 - lo, a, b),
    rollouts: state?.rollouts ?? 0,
    reward_sum: state?.rewardSum ?? 0,
    last_step: state === undefined || state.rollouts === 0 ? null : state.lastStep,
    expected_tokens: expectedTokens(state, group, snapshot.all, a / (a + b), c.max_tokens, resolved.length).tokens,
    seen: (state?.rollouts ?? 0) > 0,
    prior_pass_rate: c.prior_pass_rate ?? state?.priorPassRate ?? null,
    prior_samples: (c.prior_pass_rate === undefined ? state?.priorSamples : c.prior_samples) ?? null,
  };
}
