import { RolloutBudgetError } from '../errors.js';
import { startOf, upperOf } from '../solver/bounds.js';
import type { SolverInput } from '../solver/types.js';
import type { Partials } from './partial.js';
import type { Budget } from './types.js';

// Why a plan's budget cannot be met, in the library's option names (the CLI shows flags, the
// service body fields): the planner throws one of these before it solves.

/** Prompts that start at min_n: those without partial rewards, unless skip. O(N). */
export function startingCount(groups: Partials['groups'] | undefined, size: number, skip: boolean): number {
  if (skip) return 0;
  if (groups === undefined) return size;
  let count = 0;
  for (const g of groups) if (g.rollouts === 0) count++;
  return count;
}

/**
 * BUDGET_INFEASIBLE with the numbers, in the library's option names (the CLI shows flags, the
 * service body fields).
 */
export function infeasible(needs: { rollouts: number; tokens: number }, left: Budget, minN: number, roundsLeft: number, starting: number, multiple: number, assumed?: string): RolloutBudgetError {
  const leftWord = roundsLeft > 1 ? 'budget left (whole, not a round\'s share)' : 'budget';
  const need = [
    ...(left.rollouts === undefined ? [] : [`${needs.rollouts} rollouts${multiple > 1 ? ` (multiple_of ${multiple})` : ''}`]),
    ...(left.tokens === undefined ? [] : [`~${Math.ceil(needs.tokens)} tokens`]),
  ];
  const have = [
    ...(left.rollouts === undefined ? [] : [`${left.rollouts} rollout${left.rollouts === 1 ? '' : 's'}`]),
    ...(left.tokens === undefined ? [] : [`${left.tokens} tokens`]),
  ];
  const raise = [...(left.rollouts === undefined ? [] : ['budget_rollouts']), ...(left.tokens === undefined ? [] : ['budget_tokens'])];
  return new RolloutBudgetError(
    'BUDGET_INFEASIBLE',
    `budget infeasible: ${starting} prompts × ${minN} rollouts (min_n) need ${need.join(' and ')}; ${leftWord} is ${have.join(', ')}` +
      // A first plan under a token budget counts every rollout at its max_tokens: said, as the cause a long-CoT user meets first.
      `${left.tokens !== undefined && needs.tokens > left.tokens && assumed !== undefined ? ` (${assumed})` : ''}. Raise ${raise.join(' or ')}, lower min_n, or set skip`,
    2,
    [...raise, 'min_n', 'skip', ...(multiple > 1 ? ['multiple_of'] : [])],
  );
}

/**
 * BUDGET_INFEASIBLE when the prompts' starts fit the budget but no multiple of multiple_of
 * does: max_n caps the prompts below the multiple their starts round up to, or those rollouts
 * cost more tokens than the budget even at the cheapest prompts (`needs.tokens`,
 * cheapestTokens). Undefined when the starts themselves do not fit (then `infeasible` says so). The bare message said "need 256
 * rollouts; budget is 256 rollouts" and blamed min_n. O(N log N).
 */
export function unreachableMultiple(
  input: SolverInput,
  starts: { rollouts: number; tokens: number },
  needs: { rollouts: number; tokens: number },
  left: Budget,
  multiple: number,
): RolloutBudgetError | undefined {
  if (multiple <= 1 || needs.rollouts === 0) return undefined;
  if ((left.rollouts !== undefined && needs.rollouts > left.rollouts) || (left.tokens !== undefined && starts.tokens > left.tokens)) return undefined;
  const size = input.curves.size;
  let capacity = 0;
  for (let i = 0; i < size; i++) capacity += upperOf(input, i);
  if (capacity < needs.rollouts) {
    return new RolloutBudgetError(
      'BUDGET_INFEASIBLE',
      `budget infeasible: no multiple of multiple_of ${multiple} fits: the ${size} prompts take at most ${capacity} rollouts (max_n ${input.maxN}` +
        `${input.promptMaxN === undefined ? '' : ', less the rollouts they had this step'}), below the ${needs.rollouts} their first rollouts (min_n) round up to.` +
        ' Raise max_n, lower multiple_of, or plan more prompts',
      2,
      ['max_n', 'multiple_of', 'min_n'],
    );
  }
  if (left.tokens === undefined || needs.tokens <= left.tokens) return undefined;
  const tokens = needs.tokens;
  return new RolloutBudgetError(
    'BUDGET_INFEASIBLE',
    `budget infeasible: no multiple of multiple_of ${multiple} fits: the ${needs.rollouts} rollouts their first rollouts (min_n) round up to` +
      ` cost at least ~${Math.ceil(tokens)} tokens (each prompt's expected length), above budget_tokens ${left.tokens}.` +
      ' Raise budget_tokens, lower multiple_of, or lower max_tokens',
    2,
    ['budget_tokens', 'multiple_of', 'min_n'],
  );
}

/**
 * A lower bound on the tokens of `rollouts` rollouts: every prompt's start (`starts`,
 * startNeeds), then the cheapest rollouts left, each prompt up to its max_n (a prompt that may
 * be left out counted without its prefill). O(N log N).
 */
export function cheapestTokens(input: SolverInput, starts: { rollouts: number; tokens: number }, rollouts: number): number {
  let { tokens, rollouts: count } = starts;
  const order = Array.from({ length: input.curves.size }, (_, i) => i).sort((a, b) => input.tokensPerRollout[a]! - input.tokensPerRollout[b]!);
  for (const i of order) {
    if (count >= rollouts) break;
    const take = Math.min(upperOf(input, i) - startOf(input, i), rollouts - count);
    if (take <= 0) continue;
    tokens += take * input.tokensPerRollout[i]!;
    count += take;
  }
  return tokens;
}
