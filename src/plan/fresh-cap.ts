/**
 * The first rounds' bound on a prompt new to the state. Planned in rounds, a round whose prompts
 * have no evidence yet plans from their priors alone (a group's fitted prior, a hint, else the
 * pool's), and the `balanced` value's 0.05 a rollout in a group with variance keeps paying for
 * a middling group's prompts past any even share: on prompts seen once, with their source as
 * `group` and no hint, the first round gave a middling source's prompts 17–27 rollouts of a
 * 16-a-prompt budget, and often 64 by the step's end, taken from the hard source's (4 a prompt):
 * informative groups 0.99× `uniform`'s (fixtures/scenarios/stress/groups-once-16.json). A bound
 * of a little over the round's even share keeps the first round close to even on what it cannot
 * yet tell apart; the last round, which sees every prompt's rewards so far, is not bound, nor
 * is a round whose candidates carry partial rewards (a later round of three or more: its mixed
 * groups wait at 0 in the first solve, so a bound over all candidates left the new prompts too
 * little, and the rest went to one mixed group). The bound is soft: where it alone would leave
 * the round's rollouts unspent or the round infeasible (a multiple_of the bounded prompts cannot
 * reach), the planner solves again without it (plan/planner.ts).
 * 1.2 was chosen over 1.3, 1.5 and 2 on every shipped scenario, stress scenario and a review's
 * ten pools at seeds 0–9: the columns below `uniform` at their worst seed went from 22 to 10
 * (1.3: 15; 2: no change), the replay, the long-CoT and the multi-epoch pools unchanged
 * (docs/cold-start.md has the figures).
 */

/**
 * Per-prompt upper bounds with the cap applied: `upper` (or max_n for every prompt) lowered to
 * max(min_n, ⌈cap × rollouts ÷ N⌉) where `fresh[i]` is 1. `undefined` when nothing applies: no
 * rounds left after this one, no rollout budget, cap 0, or no fresh prompt. O(N).
 */
export function freshUpperBounds(
  fresh: Uint8Array,
  upper: Int32Array | undefined,
  maxN: number,
  minN: number,
  roundsLeft: number,
  rollouts: number | undefined,
  cap: number,
): Int32Array | undefined {
  const size = fresh.length;
  if (roundsLeft <= 1 || rollouts === undefined || cap === 0 || size === 0 || !fresh.includes(1)) return undefined;
  const bound = Math.max(minN, Math.ceil((cap * rollouts) / size));
  const out = upper === undefined ? new Int32Array(size).fill(maxN) : Int32Array.from(upper);
  for (let i = 0; i < size; i++) if (fresh[i] === 1 && out[i]! > bound) out[i] = bound;
  return out;
}

/** Whether `c` is a valid cap: 0 (none) or a finite number ≥ 1 (below 1 a first round could not spend its share). */
export function isFreshCap(c: number): boolean {
  return c === 0 || (Number.isFinite(c) && c >= 1);
}
