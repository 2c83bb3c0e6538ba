import { badOption, quote } from '../errors.js';
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

/**
 * Checks the rates evidence is applied with: both in [0, 1]. The one rule for plan options
 * (plan/options.ts resolvePlanOptions) and a store's apply, which is also called directly
 * (`store.apply(batch, decay)`). A λ of
 * 2 grew old evidence (3 rollouts then 2 more at step 3 held 22.4 rollouts' worth), and a
 * partial object ({forgetPerStep: 0.99}) wrote NaN, refused as a STATE_ERROR telling the user to
 * restore a backup. Errors name the option fields. O(1).
 */
export function checkDecay(decay: DecayOptions): void {
  const rate = (field: string, v: unknown) => {
    if (typeof v !== 'number' || !(v >= 0 && v <= 1)) throw badOption(`${field} must be in [0, 1], got ${quote(v)}`, [field]);
  };
  if (decay === null || typeof decay !== 'object') throw badOption(`decay must be an object {forgetPerStep, reobserveDiscount}, got ${quote(decay)}`);
  rate('decay', decay.forgetPerStep);
  rate('reobserve_discount', decay.reobserveDiscount);
}

/**
 * The largest step a result or a plan may name: 2³¹ − 1. A step is a training step's number, and
 * a state's last step never goes down, so one result at 2⁵³ − 1 (accepted before) left every later
 * step at 2⁵³, which no request could name again: the state was stuck for good.
 */
export const MAX_STEP = 2 ** 31 - 1;

/** Why `step` (a safe integer ≥ 0) is refused, or undefined. */
export function stepTooLarge(step: number): string | undefined {
  return step > MAX_STEP ? `must be at most ${MAX_STEP} (2^31 − 1), got ${step}` : undefined;
}

/**
 * The step a plan or an observe takes when none is given: the state's last + 1 (0 for a new
 * state), at most MAX_STEP. At the last step a state may hold, that step again: last + 1 was a
 * step that observe and --step then refused.
 */
export function nextStep(lastStep: number | null): number {
  return lastStep === null ? 0 : Math.min(lastStep + 1, MAX_STEP);
}

/** λ^(step − lastStep), 1 when step ≤ lastStep. */
export function forgetFactor(decay: DecayOptions, lastStep: number, step: number): number {
  return step > lastStep ? Math.pow(decay.forgetPerStep, step - lastStep) : 1;
}

/** Decayed evidence below this counts as none (a pseudo-count of 1e-100 beside a prior of ~1). */
export const EVIDENCE_FLOOR = 1e-100;
/** ln EVIDENCE_FLOOR, the threshold decayedTerm compares against (the SQL store uses the same number). */
export const LN_EVIDENCE_FLOOR = Math.log(EVIDENCE_FLOOR);
/** Stand-in for 0 inside the logarithms of decayedTerm, so that ln never sees 0. */
export const LN_GUARD = 1e-300;

/**
 * One decayed evidence term, x · (λ^gap · ρ), with a floor: 0 when
 * ln max(x, 1e-300) + gap · ln max(λ, 1e-300) + ln max(ρ, 1e-300) < ln 1e-100.
 * Domain: x ≥ 0, λ, ρ ∈ [0, 1], gap ≥ 0 (any size: 200,000 steps at λ = 0.5 is 0, not an
 * underflow). Above the floor every factor is ≥ 1e-100 / x, so no product underflows; the
 * PostgreSQL store evaluates the same expression in SQL (store/postgres.ts), where an
 * underflow would be an error, so both backends store the same numbers. O(1).
 */
export function decayedTerm(x: number, forget: number, gap: number, discount: number): number {
  const ln = Math.log(Math.max(x, LN_GUARD)) + gap * Math.log(Math.max(forget, LN_GUARD)) + Math.log(Math.max(discount, LN_GUARD));
  return ln < LN_EVIDENCE_FLOOR ? 0 : x * (Math.pow(forget, gap) * discount);
}

/**
 * Evidence after adding (s, f) observed at `step`:
 * - step > last: (old · λ^(step−last) · ρ) + new, and last := step;
 * - step = last: old + new (one group may arrive in pieces);
 * - step < last (a late result): old + new · λ^(last−step).
 * Each decayed term goes through decayedTerm (below 1e-100 it is 0). O(1).
 */
export function addEvidence(
  decay: DecayOptions,
  state: Pick<PromptState, 'successes' | 'failures' | 'lastStep'>,
  step: number,
  s: number,
  f: number,
): { successes: number; failures: number; lastStep: number } {
  const { forgetPerStep: λ, reobserveDiscount: ρ } = decay;
  if (step > state.lastStep) {
    const gap = step - state.lastStep;
    return { successes: decayedTerm(state.successes, λ, gap, ρ) + s, failures: decayedTerm(state.failures, λ, gap, ρ) + f, lastStep: step };
  }
  if (step === state.lastStep) return { successes: state.successes + s, failures: state.failures + f, lastStep: step };
  const gap = state.lastStep - step;
  return { successes: state.successes + decayedTerm(s, λ, gap, 1), failures: state.failures + decayedTerm(f, λ, gap, 1), lastStep: state.lastStep };
}

/** Below this weight, results or a plan far behind the state's last step get a warning (behindWarning). */
const BEHIND_WEIGHT = 0.5;

/**
 * A warning when results (`observe`), or a `plan`, are at a step so far before the state's last
 * step that a prompt observed there counts this step's results at less than half a new result
 * (λ^gap < ½: more than one half-life, 138 steps at the default λ). Most often a new run started
 * on an old run's state: its results are discounted as late ones and its plans read the old
 * run's evidence. Undefined when `last` is null, the step is not that far behind, or λ = 1.
 */
export function behindWarning(what: 'results' | 'plan', step: number, last: number | null, decay: DecayOptions): string | undefined {
  if (last === null || step >= last) return undefined;
  const gap = last - step;
  const weight = Math.pow(decay.forgetPerStep, gap);
  if (!(weight < BEHIND_WEIGHT)) return undefined;
  const counted = `a prompt observed at step ${last} counts ${what === 'results' ? 'them' : 'this step\'s results'} at ${decay.forgetPerStep}^${gap} = ${weight.toPrecision(2)} of a new result`;
  const head = what === 'results'
    ? `these results' newest step, ${step}, is ${gap} steps before the state's last step, ${last}: ${counted}`
    : `planning step ${step}, ${gap} steps before the state's last step, ${last}: the posteriors hold that run's later evidence, and ${counted}`;
  return `${head}. A new run on an old run's state? Give each run its own --state (or PostgreSQL schema); a run resumed from a checkpoint: docs/trainers.md, "Resuming a run from a checkpoint"`;
}
