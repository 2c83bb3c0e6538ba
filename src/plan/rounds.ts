import type { Budget } from './types.js';

/**
 * A step planned in rounds: plan part of the step's budget, generate it, plan the rest with
 * each prompt's rewards so far as its `partial_rewards` (plan/partial.ts). This file is the one
 * rule for how much a round may spend; the planner applies it (option `roundsLeft`, CLI
 * `--rounds-left`, service `rounds_left`) and the round loop (plan/round-loop.ts) only counts
 * what is left. It is stateless: the caller gives what is left of the step's budgets and how
 * many rounds are left, this one included.
 *
 * The share: ⌊left / rounds_left⌋ of each budget, so R rounds split a step evenly
 * (round r of R gets 1/(R − r) of what is left after the rounds before it). Why even: each
 * round's outcomes tell the next where its rollouts buy the most (an all-wrong group needs a
 * first success, a mixed one few more), so a later round spends better than an earlier one,
 * but only if the earlier one has shown enough; an even split buys the most on the replay and
 * the long-CoT simulation together (shares of 0.4 and 0.6 for the first of two rounds did not
 * improve both, docs/replay.md).
 *
 * First-round feasibility: a prompt without partial rewards needs min_n rollouts (unless
 * `skip`), so a share can be too small for the prompts a round must start while the whole
 * budget left is not. The share then grows to what they need (rollouts, and expected tokens
 * with prefill), at most to the whole budget left, and the plan's `warnings` say so. Only when
 * the whole budget left cannot give them min_n is the plan BUDGET_INFEASIBLE.
 */

/** What every prompt at its lower bound would use (solver/bounds.ts startNeeds). */
export interface RoundNeeds {
  readonly rollouts: number;
  readonly tokens: number;
}

export interface RoundShare {
  /** The budget this round may spend. */
  readonly budget: Budget;
  /** The budgets whose even share was raised to what the round's lower bounds need. */
  readonly grown: readonly ('rollouts' | 'tokens')[];
}

/**
 * This round's share of `left` with `roundsLeft` rounds left (this one included):
 * share_b = min(left_b, max(⌊left_b / roundsLeft⌋, ⌈need_b⌉)) for each budget b that is set.
 * Domain: left_b ≥ 0 integers, roundsLeft ≥ 1 integer, needs ≥ 0. O(1).
 */
export function roundShare(left: Budget, roundsLeft: number, needs: RoundNeeds): RoundShare {
  const grown: ('rollouts' | 'tokens')[] = [];
  const shareOf = (key: 'rollouts' | 'tokens', need: number): number | undefined => {
    const total = left[key];
    if (total === undefined) return undefined;
    const even = Math.floor(total / roundsLeft);
    if (even >= need) return even;
    grown.push(key);
    return Math.min(total, Math.ceil(need));
  };
  const rollouts = shareOf('rollouts', needs.rollouts);
  const tokens = shareOf('tokens', needs.tokens);
  return {
    budget: { ...(rollouts === undefined ? {} : { rollouts }), ...(tokens === undefined ? {} : { tokens }) },
    grown,
  };
}

/** The plan warning for a share that grew (roundShare's `grown`), with the numbers. */
export function grownShareWarning(share: RoundShare, left: Budget, roundsLeft: number, starting: number, minN: number): string {
  const parts = share.grown.map((key) => {
    const unit = key === 'rollouts' ? 'rollouts' : 'tokens';
    return `${share.budget[key]} of the ${left[key]} ${unit} left (an even share is ${Math.floor(left[key]! / roundsLeft)})`;
  });
  const rest = roundsLeft === 2 ? 'the last round gets the rest' : `the ${roundsLeft - 1} later rounds share the rest`;
  return `this round spends ${parts.join(' and ')}: ${starting} prompts without partial_rewards need min_n ${minN} each; ${rest}`;
}
