import type { PromptState } from './state.js';

/**
 * Forgetting at two scales (VADE's idea: Wang et al. 2025, "VADE: Variance-Aware Dynamic
 * Sampling via Online Sample-Level Difficulty Estimation", arXiv:2511.18902; also MoPPS's
 * discounted Beta posteriors, arXiv:2507.04632).
 *
 * - `forgetPerStep` λ: evidence loses a factor λ for every step since the prompt was last
 *   observed, so a prompt not seen for a while drifts back toward the prior. Default 0.99:
 *   half-life ~69 steps. On One-Shot-RLVR (500 steps) a prompt is revisited about every 9
 *   steps and its pass rate moves ~0.02 per 100 steps (median; CALIBRATION.md), so evidence
 *   a few visits old is still mostly right.
 * - `reobserveDiscount` ρ: when a prompt is observed at a later step, its old evidence is
 *   multiplied by ρ once more before the new group is added, so the newest group weighs more
 *   than older ones of the same age in steps. Default 0.9.
 */
export interface DecayOptions {
  readonly forgetPerStep: number;
  readonly reobserveDiscount: number;
}

export const defaultDecay: DecayOptions = { forgetPerStep: 0.99, reobserveDiscount: 0.9 };

/** λ^(step − lastStep), 1 when step ≤ lastStep. */
export function forgetFactor(decay: DecayOptions, lastStep: number, step: number): number {
  return step > lastStep ? Math.pow(decay.forgetPerStep, step - lastStep) : 1;
}

/**
 * Evidence after adding (s, f) observed at `step`:
 * - step > last: (old · λ^(step−last) · ρ) + new, and last := step;
 * - step = last: old + new (one group may arrive in pieces);
 * - step < last (a late result): old + new · λ^(last−step).
 * O(1).
 */
export function addEvidence(
  decay: DecayOptions,
  state: Pick<PromptState, 'successes' | 'failures' | 'lastStep'>,
  step: number,
  s: number,
  f: number,
): { successes: number; failures: number; lastStep: number } {
  if (step > state.lastStep) {
    const k = forgetFactor(decay, state.lastStep, step) * decay.reobserveDiscount;
    return { successes: state.successes * k + s, failures: state.failures * k + f, lastStep: step };
  }
  const k = Math.pow(decay.forgetPerStep, state.lastStep - step);
  return { successes: state.successes + s * k, failures: state.failures + f * k, lastStep: state.lastStep };
}
