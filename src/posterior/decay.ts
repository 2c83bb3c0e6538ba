import type { PromptState } from './state.js';

/**
 * Forgetting at two scales (VADE's idea: Wang et al. 2025, "VADE: Variance-Aware Dynamic
 * Sampling via Online Sample-Level Difficulty Estimation", arXiv:2511.18902; also MoPPS's
 * discounted Beta posteriors, arXiv:2507.04632).
 *
 * - `forgetPerStep` λ: evidence loses a factor λ for every step since the prompt was last
 *   observed, so a prompt not seen for a while drifts back toward the prior. Default 0.995:
 *   half-life ~138 steps. On One-Shot-RLVR (500 steps) a prompt is revisited about every 9
 *   steps and its pass rate moves ~0.02 per 100 steps (median; CALIBRATION.md), so evidence
 *   a few visits old is still mostly right.
 * - `reobserveDiscount` ρ: when a prompt is observed at a later step, its old evidence is
 *   multiplied by ρ once more before the new group is added, so the newest group weighs more
 *   than older ones of the same age in steps. Default 0.85.
 * Both defaults were chosen on the One-Shot-RLVR replay (docs/replay.md): forgetting by time
 * barely helps there (0.99 → 0.995 → 1 raises the effective-gradient ratio), while weighting
 * the newest group more (ρ 0.9 → 0.85) tracks drift.
 */
export interface DecayOptions {
  readonly forgetPerStep: number;
  readonly reobserveDiscount: number;
}

export const defaultDecay: DecayOptions = { forgetPerStep: 0.995, reobserveDiscount: 0.85 };

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
