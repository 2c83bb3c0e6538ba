import { field } from '../fields.js';
import { conditionalValue, isMixed, partialGroupOf, partialKey, type PartialGroup } from '../value/conditional.js';
import type { ValueCurves } from '../value/types.js';
import { PartitionedCurves } from '../value/partitioned.js';
import type { PosteriorPolicy, PosteriorPolicyInput, PosteriorPolicyOutput } from './policies.js';
import { fieldsChecked, noteFieldsChecked } from './checked-ids.js';
import type { Candidate } from './types.js';

/**
 * Rounds within a step. A candidate's `partial_rewards` are the rewards of rollouts it already
 * got at this step (an earlier round). The plan then gives the rollouts to add: the posterior
 * counts the partial rewards (undecayed: same step), the value is the conditional one (what m
 * more rollouts add to the group, value/conditional.ts), and the prompt may get 0 more, up to
 * max_n − k. How much of the step's budget a round spends is plan/rounds.ts's rule; the
 * round loop that carries the rewards from round to round is plan/round-loop.ts.
 */

const NONE: PartialGroup = { rollouts: 0, sawSuccess: false, sawFailure: false };

/** The candidates' partial groups and their successes and failures (0 where none). */
export interface Partials {
  readonly groups: PartialGroup[];
  readonly successes: Float64Array;
  readonly failures: Float64Array;
}

/**
 * The candidates' partial groups, or undefined when none has any; the planner adds their
 * successes and failures to the posterior (undecayed: same step). Throws BAD_INPUT on a
 * malformed list (library callers; the prompts file is checked when parsed). O(N + Σk).
 */
export function readPartials(candidates: readonly Candidate[]): Partials | undefined {
  let out: Partials | undefined;
  for (let i = 0; i < candidates.length; i++) {
    const c = candidates[i]!;
    if (c.partial_rewards === undefined) continue;
    const rewards = field.rewards(`candidate ${i + 1}`, c, 'partial_rewards')!;
    if (rewards.length === 0) continue;
    out ??= { groups: new Array<PartialGroup>(candidates.length).fill(NONE), successes: new Float64Array(candidates.length), failures: new Float64Array(candidates.length) };
    let s = 0;
    for (const r of rewards) s += r;
    out.groups[i] = partialGroupOf(rewards);
    out.successes[i] = s;
    out.failures[i] = rewards.length - s;
  }
  return out;
}

/**
 * Per-prompt bounds: [min_n, max_n] for a fresh prompt, [0, max_n − k] for one with k, and
 * [0, 0] for one whose group already varies (a success and a failure): it already carries
 * signal, and what more rollouts add to it (the balanced value's certain 0.05 a rollout) took a
 * later round's whole budget into a few such groups (all 77 of a round into 2, in a pool of
 * mostly hard prompts seen once) where all-wrong and all-right groups could still turn
 * informative. `mixed` counts those prompts that could take another rollout; the planner lifts
 * their bound when the budget would otherwise go unspent (`mixedOnly`). O(N).
 */
export function partialBounds(groups: readonly PartialGroup[], minN: number, maxN: number): { promptMinN: Int32Array; promptMaxN: Int32Array; mixed: number } {
  const promptMinN = new Int32Array(groups.length);
  const promptMaxN = new Int32Array(groups.length);
  let mixed = 0;
  groups.forEach((g, i) => {
    promptMinN[i] = g.rollouts === 0 ? minN : 0;
    const room = Math.max(0, maxN - g.rollouts);
    if (isMixed(g) && room > 0) mixed++;
    promptMaxN[i] = isMixed(g) ? 0 : room;
  });
  return { promptMinN, promptMaxN, mixed };
}

/**
 * The bounds of a second solve, once the first (mixed groups at 0 more) left budget unspent:
 * every prompt fixed at what the first gave it (its lower and upper bound both that n, skip
 * off, so none is dropped or swapped), but a mixed group, which may grow from 0 to max_n − k.
 * Only the mixed groups move, on what the first left. O(N).
 */
export function mixedOnly(groups: readonly PartialGroup[], first: Int32Array, maxN: number): { promptMinN: Int32Array; promptMaxN: Int32Array; skip: false } {
  return {
    promptMinN: Int32Array.from(first),
    promptMaxN: Int32Array.from(groups, (g, i) => (isMixed(g) ? Math.max(0, maxN - g.rollouts) : first[i]!)),
    skip: false,
  };
}

/** The fewest tokens a rollout of a mixed group that may grow costs (Infinity when none may). O(N). */
export function cheapestMixed(groups: readonly PartialGroup[], tokensPerRollout: Float64Array, maxN: number): number {
  let least = Infinity;
  groups.forEach((g, i) => {
    if (isMixed(g) && g.rollouts < maxN) least = Math.min(least, tokensPerRollout[i]!);
  });
  return least;
}

/**
 * The policy's curves when some prompts have partial groups: prompts are split by kind of
 * partial group (k and whether it saw a success, a failure), the policy builds each part's
 * curves with that kind's conditional value and surplus value, and the parts are joined.
 * O(N + parts · policy build).
 */
export function buildPartialCurves(policy: PosteriorPolicy, input: PosteriorPolicyInput, groups: readonly PartialGroup[]): PosteriorPolicyOutput {
  const byKey = new Map<string, number[]>();
  groups.forEach((g, i) => {
    const key = partialKey(g);
    const list = byKey.get(key);
    if (list === undefined) byKey.set(key, [i]);
    else list.push(i);
  });
  const partOf = new Uint16Array(groups.length);
  const local = new Int32Array(groups.length);
  const curves: ValueCurves[] = [];
  const surplus: (ValueCurves | undefined)[] = [];
  for (const members of byKey.values()) {
    const g = groups[members[0]!]!;
    members.forEach((i, j) => {
      partOf[i] = curves.length;
      local[i] = j;
    });
    const built = policy.build({
      ...input,
      candidates: members.map((i) => input.candidates[i]!),
      alpha: Float64Array.from(members, (i) => input.alpha[i]!),
      beta: Float64Array.from(members, (i) => input.beta[i]!),
      value: conditionalValue(input.value, g),
      surplusValue: conditionalValue(input.surplusValue, g),
    });
    curves.push(built.curves);
    surplus.push(built.surplus);
  }
  const joined = new PartitionedCurves(curves, partOf, local);
  if (surplus.some((s) => s === undefined)) return { curves: joined };
  return { curves: joined, surplus: new PartitionedCurves(surplus as ValueCurves[], partOf, local) };
}

/**
 * A later round's candidates: each that already has rewards at this step carries a copy of
 * them as partial_rewards (a copy: a plan keeps its candidates, and the caller's lists grow).
 */
export function withPartials(candidates: readonly Candidate[], rewards: ReadonlyMap<string, readonly number[]>): Candidate[] {
  const out = candidates.map((c) => {
    const got = rewards.get(c.id);
    return got === undefined ? c : { ...c, partial_rewards: got.slice() };
  });
  // Checked candidates stay checked (planStep's checkCandidates skips them): only partial_rewards
  // is new, and readPartials checks it in every plan.
  if (fieldsChecked(candidates)) noteFieldsChecked(out);
  return out;
}
