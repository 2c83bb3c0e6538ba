import { arc4Random } from '../math/arc4.js';
import { betaDraw } from '../math/beta.js';
import type { StateSnapshot } from '../posterior/state.js';
import { createRegistry, type Registry } from '../registry.js';
import { MonomialCurves } from '../value/curves.js';
import type { ValueCurves } from '../value/types.js';
import type { ValueFunction } from '../value/functions.js';
import type { Candidate } from './types.js';

/**
 * Posterior policies: how the planner takes a prompt's pass rate p from its Beta posterior
 * when it values n rollouts (`bayes`, `thompson`, `mean`; the plan option and plan field
 * `policy`). Not to be confused with the whole allocation strategies the replay compares
 * (replay/policies.ts: uniform, dapo, ..., and ours with each posterior policy).
 */

/** What every posterior policy is given: the candidates' posteriors at this step, and the rest. */
export interface PosteriorPolicyInput {
  readonly candidates: readonly Candidate[];
  /** Posterior Beta(alpha[i], beta[i]) of candidate i at this step (decay and prior applied). */
  readonly alpha: Float64Array;
  readonly beta: Float64Array;
  readonly snapshot: StateSnapshot;
  readonly value: ValueFunction;
  readonly surplusValue: ValueFunction;
  readonly seed: number;
  readonly step: number;
}

/** What a posterior policy gives the solver: value curves, and the curves that spend any surplus. */
export interface PosteriorPolicyOutput {
  readonly curves: ValueCurves;
  readonly surplus?: ValueCurves;
}

export interface PosteriorPolicy {
  readonly description: string;
  build(input: PosteriorPolicyInput): PosteriorPolicyOutput;
}

/** @deprecated The older names of PosteriorPolicy and its input and output; kept for library callers. */
export type Policy = PosteriorPolicy;
/** @deprecated See PosteriorPolicyInput. */
export type PolicyInput = PosteriorPolicyInput;
/** @deprecated See PosteriorPolicyOutput. */
export type PolicyOutput = PosteriorPolicyOutput;

/** Thompson draws: one seeded Beta draw per prompt, seeded by (seed, step, prompt id). */
export function thompsonDraws(input: PosteriorPolicyInput): Float64Array {
  const p = new Float64Array(input.candidates.length);
  for (let i = 0; i < p.length; i++) {
    const random = arc4Random(`${input.seed}/${input.step}/${input.candidates[i]!.id}`);
    p[i] = betaDraw(input.alpha[i]!, input.beta[i]!, random);
  }
  return p;
}

function pointPolicy(description: string, draw: (input: PosteriorPolicyInput) => Float64Array): PosteriorPolicy {
  return {
    description,
    build(input) {
      const p = draw(input);
      return {
        curves: new MonomialCurves(input.value, { kind: 'point', p }),
        surplus: new MonomialCurves(input.surplusValue, { kind: 'point', p }),
      };
    },
  };
}

/**
 * `bayes` (default): the value's exact expectation over the posterior, E_p[v(p, n)], in
 * closed form. It uses the whole posterior rather than one number, so a prompt seen 0/8 keeps
 * the value of its remaining chance of being solvable, and one seen once is not mistaken
 * for settled. Deterministic: no draw, so plans do not jitter between runs.
 * `thompson`: v at one draw from the posterior per prompt and plan (VADE, MoPPS).
 * `mean`: v at the posterior mean.
 */
export function createPosteriorPolicyRegistry(): Registry<PosteriorPolicy> {
  // Registry kind 'policy': errors read "unknown policy ..." after the flag and field that name it.
  return createRegistry<PosteriorPolicy>('policy', {
    bayes: {
      description: 'exact expectation of the value over the Beta posterior (default)',
      build(input) {
        const mode = { kind: 'beta', alpha: input.alpha, beta: input.beta } as const;
        return { curves: new MonomialCurves(input.value, mode), surplus: new MonomialCurves(input.surplusValue, mode) };
      },
    },
    thompson: pointPolicy('value at one seeded posterior draw per prompt (VADE, MoPPS)', thompsonDraws),
    mean: pointPolicy('value at the posterior mean', (input) =>
      Float64Array.from(input.alpha, (a, i) => a / (a + input.beta[i]!)),
    ),
  });
}

/** @deprecated The older name of createPosteriorPolicyRegistry; kept for library callers. */
export const createPolicyRegistry = createPosteriorPolicyRegistry;
