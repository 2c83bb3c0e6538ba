import type { Budget } from './types.js';

/**
 * A step planned in rounds: plan part of the step's budget, generate it, plan the rest with
 * each prompt's rewards so far as its `partial_rewards` (plan/partial.ts). This file is the one
 * rule for how much a round may spend; the planner applies it (option `roundsLeft`, CLI
 * `--rounds-left`, service `rounds_left`) and the round loop (plan/round-loop.ts) only counts
 * what is left. It is stateless: the caller gives what is left of the step's budgets and how
 * many rounds are left, this one included.
 *
 * The share: an even share E = left / rounds_left of each budget, so R rounds split a step
 * evenly (round r of R gets 1/(R − r) of what is left after the rounds before it), plus, when
 * the round starts prompts the state has never observed, part of the later rounds' budget:
 *   share = ⌊E + φ·u·(left − E)⌋,
 * u the share of the candidates with neither evidence in the state nor partial rewards, φ the
 * option `freshShare` (default 0.7). Two rounds over fresh prompts: 0.5 + 0.35 = 85% first.
 * Why even: each round's outcomes tell the next where its rollouts buy the most (an all-wrong
 * group needs a first success, a mixed one few more), so a later round spends better than an
 * earlier one, but only if the earlier one has shown enough; an even split buys the most on
 * the replay and the long-CoT simulation together (shares of 0.4 and 0.6 for the first of two
 * rounds did not improve both, docs/replay.md). Why more for fresh prompts: with no evidence
 * (and, without hints, one prior for a whole group) the first round cannot tell prompts apart,
 * and a half share leaves most groups at 4 rollouts, of which many are all wrong or all right
 * by chance; the second round then spreads the other half thinly over them, and rollouts that
 * stay in groups without variance cost the effective ratio (0.91–0.96× uniform on the one-epoch
 * pool without hints, 0.80× in issue 14's measurement). φ = 0.7 was the smallest of those
 * swept (0.5, 0.6, 0.7) at which the cold start without hints kept the effective ratio at or
 * above uniform's at seeds 0–4, and it changed the replay and the long-CoT simulation, whose
 * prompts are fresh only in their first epoch, by under 1% (docs/cold-start.md). φ = 0 is the
 * even rule.
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
  /** The budgets whose share was raised to what the round's lower bounds need. */
  readonly grown: readonly ('rollouts' | 'tokens')[];
  /** The shares before growing (the rule above), per budget that is set. */
  readonly shares?: { readonly rollouts?: number; readonly tokens?: number };
}

/**
 * This round's share of `left` with `roundsLeft` rounds left (this one included), `fresh` the
 * share of candidates new to the state (u above) and `freshShare` φ:
 * share_b = min(left_b, max(⌊E_b + φ·u·(left_b − E_b)⌋, ⌈need_b⌉)), E_b = left_b / roundsLeft,
 * for each budget b that is set. Domain: left_b ≥ 0 integers, roundsLeft ≥ 1 integer,
 * needs ≥ 0, fresh and freshShare in [0, 1]. O(1).
 */
export function roundShare(left: Budget, roundsLeft: number, needs: RoundNeeds, fresh = 0, freshShare = 0): RoundShare {
  const grown: ('rollouts' | 'tokens')[] = [];
  const shareOf = (key: 'rollouts' | 'tokens', need: number): number | undefined => {
    const total = left[key];
    if (total === undefined) return undefined;
    const base = total / roundsLeft;
    const even = Math.min(total, Math.floor(base + freshShare * fresh * (total - base)));
    shares[key] = even;
    if (even >= need) return even;
    grown.push(key);
    return Math.min(total, Math.ceil(need));
  };
  const shares: { rollouts?: number; tokens?: number } = {};
  const rollouts = shareOf('rollouts', needs.rollouts);
  const tokens = shareOf('tokens', needs.tokens);
  return {
    budget: { ...(rollouts === undefined ? {} : { rollouts }), ...(tokens === undefined ? {} : { tokens }) },
    grown,
    ...(grown.length === 0 ? {} : { shares }),
  };
}

/** The plan warning for a share that grew (roundShare's `grown`), with the numbers. */
export function grownShareWarning(share: RoundShare, left: Budget, roundsLeft: number, starting: number, minN: number): string {
  const parts = share.grown.map((key) => {
    const unit = key === 'rollouts' ? 'rollouts' : 'tokens';
    const even = Math.floor(left[key]! / roundsLeft);
    const own = share.shares?.[key];
    return `${share.budget[key]} of the ${left[key]} ${unit} left (an even share is ${even}${own !== undefined && own !== even ? `, its share with new prompts ${own}` : ''})`;
  });
  const rest = roundsLeft === 2 ? 'the last round gets the rest' : `the ${roundsLeft - 1} later rounds share the rest`;
  return `this round spends ${parts.join(' and ')}: ${starting} prompts without partial_rewards need min_n ${minN} each; ${rest}`;
}
