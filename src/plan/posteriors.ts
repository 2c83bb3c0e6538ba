import { RolloutBudgetError, quote } from '../errors.js';
import { forgetFactor } from '../posterior/decay.js';
import { checkHint, hintPriors, type HintPriors } from '../posterior/hints.js';
import { flatPrior, priorFor, type Prior } from '../posterior/prior.js';
import type { PromptState, StateSnapshot } from '../posterior/state.js';
import type { resolvePlanOptions } from './options.js';
import type { Candidate } from './types.js';

/**
 * The posterior Beta(α, β) of each candidate at `step`: learned prior (moved toward the
 * calibrated hint for a candidate with `prior_pass_rate`, posterior/hints.ts) + decayed evidence.
 * A candidate without `group` or hint takes the ones its state remembers.
 * `hashes[i]`, when given, is fnv1a of candidate i's id (passed on to the state lookup);
 * `each(i, state, α_i, β_i)`, when given, runs for every candidate in order. O(N).
 */
export function posteriors(
  snapshot: StateSnapshot,
  candidates: readonly Candidate[],
  step: number,
  options: Pick<ReturnType<typeof resolvePlanOptions>, 'decay' | 'prior'>,
  hashes?: Uint32Array,
  each?: (i: number, state: PromptState | undefined, alpha: number, beta: number) => void,
): { alpha: Float64Array; beta: Float64Array } {
  const alpha = new Float64Array(candidates.length);
  const beta = new Float64Array(candidates.length);
  const priors = new Map<string | null, Prior>();
  let lastGroup: string | null | undefined;
  let lastPrior = flatPrior;
  let hints: HintPriors | undefined;
  const forget = new Float64Array(256).fill(NaN);
  const one = (i: number, s: PromptState | undefined): void => {
    const c = candidates[i]!;
    // The candidate's group and hint, else what the state learned of them (store/meta.ts).
    const group = c.group ?? s?.group ?? null;
    let prior = lastPrior;
    if (group !== lastGroup) {
      // Runs of one group (all prompts of a state without groups) skip the map.
      let known = priors.get(group);
      if (known === undefined) priors.set(group, (known = priorFor(snapshot, group, options.prior)));
      lastGroup = group;
      prior = lastPrior = known;
    }
    // Library callers' candidates are checked here (files and requests were when parsed).
    if (c.prior_pass_rate !== undefined || c.prior_samples !== undefined) checkHint(`candidate ${i + 1}`, c);
    const hint = c.prior_pass_rate ?? s?.priorPassRate;
    if (hint !== undefined) {
      const samples = c.prior_pass_rate === undefined ? s?.priorSamples : c.prior_samples;
      prior = (hints ??= hintPriors(snapshot, options.prior)).prior(group, hint, samples, prior);
    }
    let k = 0;
    if (s !== undefined) {
      const gap = step - s.lastStep;
      if (gap >= 0 && gap < forget.length) {
        k = forget[gap]!;
        if (k !== k) k = forget[gap] = forgetFactor(options.decay, s.lastStep, step);
      } else k = forgetFactor(options.decay, s.lastStep, step);
    }
    const a = prior.alpha + (s?.successes ?? 0) * k;
    const b = prior.beta + (s?.failures ?? 0) * k;
    // NaN or Infinity: a stored value no observe writes (the file edited by another program); plans held nulls, exit 0.
    if (!(a < Infinity && b < Infinity)) throw damagedState(c.id, s);
    alpha[i] = a;
    beta[i] = b;
    each?.(i, s, a, b);
  };
  // Every candidate's state, in order: looked up many at a time where the snapshot can.
  if (hashes !== undefined && snapshot.eachOf !== undefined) snapshot.eachOf(candidates, hashes, one);
  else for (let i = 0; i < candidates.length; i++) one(i, hashes === undefined ? snapshot.get(candidates[i]!.id) : snapshot.get(candidates[i]!.id, hashes[i]!));
  return { alpha, beta };
}

function damagedState(id: string, s: PromptState | undefined): RolloutBudgetError {
  return new RolloutBudgetError(
    'STATE_ERROR',
    `prompt ${quote(id)}: the state holds evidence that is not a number (successes ${quote(s?.successes)}, failures ${quote(s?.failures)}), which no observe writes: was the file changed by another program? Restore it from a backup`,
  );
}
