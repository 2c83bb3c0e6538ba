import { badInput, badOption, quote, RolloutBudgetError } from '../../errors.js';

/**
 * One prompt's state as Knapsack RL's data set reports it (`get_sample_state` in
 * verl/utils/dataset/rl_dataset.py): [valid, pass rate, count]. valid = 1 once the prompt has
 * at least `min_buffer_length` (8) observed rollouts; the pass rate is the mean reward of its
 * last group, or of its last 16 rewards when that group is smaller; count = rollouts seen.
 */
export type KnapsackRlState = readonly [valid: number, passRate: number, count: number];

/** The inputs of `sampling_budget_by_knapsack` that change its answer, with its defaults. */
export interface KnapsackRlOptions {
  /** The trainer's rollouts per prompt (`rollout.n`): prompts not yet valid get it. */
  readonly n: number;
  /** Rollouts of a prompt with 0 < p < 1 before the DP adds any (default 2). */
  readonly minN?: number;
  /** At most this many per prompt in the DP (min_n plus up to max_n − min_n more). */
  readonly maxN: number;
  /** Σ n over the batch (default batch size × n). */
  readonly totalBudget?: number;
  /** Rollouts of a valid prompt with p = 0 before any surplus (default min_n). */
  readonly negativeN?: number;
  /** Rollouts of a valid prompt with p = 1 (default min_n). */
  readonly positiveN?: number;
  /** Confidence of the per-prompt need estimate log(1 − α)/log max(p, 1 − p) (default 0.9). */
  readonly alpha?: number;
  /** Give the budget the needs leave over to prompts with p = 0 before the DP (default true). */
  readonly allowFallback?: boolean;
}

const f32 = Math.fround;

/**
 * Where the published function raises, knapsackRlAllocate throws this (code BUDGET_INFEASIBLE),
 * naming the Python exception it stands for.
 */
export class KnapsackRlRaise extends RolloutBudgetError {
  /** What the published function raises. 'ZeroDivisionError' is never raised (it was, wrongly, for the AssertionError of the surplus with nowhere to go); kept in the type for callers that test for it. */
  constructor(readonly published: 'ZeroDivisionError' | 'AssertionError', message: string) {
    super('BUDGET_INFEASIBLE', `knapsack-rl: ${message}`);
  }
}

function checkInputs(states: readonly KnapsackRlState[], o: KnapsackRlOptions): void {
  const int = (name: string, v: number | undefined, min: number) => {
    if (v !== undefined && (!Number.isInteger(v) || v < min)) throw badOption(`knapsack-rl: "${name}" must be an integer ≥ ${min}, got ${quote(v)}`);
  };
  int('n', o.n, 0);
  int('min_n', o.minN, 0);
  int('max_n', o.maxN, 0);
  int('total_budget', o.totalBudget, 0);
  int('negative_n', o.negativeN, 0);
  int('positive_n', o.positiveN, 0);
  if (o.maxN < (o.minN ?? 2)) throw badOption(`knapsack-rl: "max_n" must be ≥ min_n ${o.minN ?? 2}, got ${o.maxN}`);
  if (o.alpha !== undefined && !(o.alpha > 0 && o.alpha < 1)) throw badOption(`knapsack-rl: "alpha" must be in (0, 1), got ${quote(o.alpha)}`);
  states.forEach((s, i) => {
    if (!Array.isArray(s) || s.length !== 3) throw badInput(`states[${i}]`, `expected [valid, pass_rate, count], got ${quote(s)}`);
    if (!(s[1] >= 0 && s[1] <= 1)) throw badInput(`states[${i}][1]`, `the pass rate must be a number in [0, 1], got ${quote(s[1])}`);
  });
}

/**
 * Knapsack RL's allocation rule, `sampling_budget_by_knapsack` (Li et al. 2025,
 * arXiv:2509.25849; github.com/liziniu/KnapsackRL at ca5d5f5,
 * verl/trainer/ppo/exploration_utils.py), step for step on the same inputs:
 *
 * 1. A valid prompt with 0 < p < 1 gets min_n and enters the DP; its need is
 *    ⌊min(max_n, log(1 − α)/log max(p, 1 − p))⌋ (float32, as the published cost array).
 *    Valid p = 0 gets negative_n, valid p = 1 positive_n; a prompt not yet valid gets n and
 *    counts as p = 0 (its pass rate array entry stays 0).
 * 2. No DP prompt and budget left: it is split evenly over the p = 0 prompts (first ones one
 *    more), or, with none, every prompt gets n.
 * 3. Else, when the needs sum to less than the budget left (and allow_fallback), the surplus
 *    goes, before the DP and without a cap, evenly to the p = 0 prompts (valid or not), or,
 *    with none, to the other non-DP prompts; the DP then spends only the needs' sum.
 * 4. The DP (`solve_by_dp`) adds k ∈ [0, max_n − min_n] to each DP prompt, spending exactly
 *    the largest feasible budget; adding k ≥ 1 is worth (1 − p^(k+min_n) − q^(k+min_n))·p·q²
 *    in float32 arithmetic, adding 0 is worth 0 (not the value at min_n). Ties keep the first
 *    option met (k = 0, then the smallest k) and the traceback runs from the last prompt.
 *    Budget it cannot place goes evenly over the DP prompts, first ones one more, uncapped.
 *
 * Throws where the published function raises, its AssertionError (the allocation does not sum
 * to the budget): the initial rollouts overspend it, or the surplus has nowhere to go (every
 * prompt in the DP, allow_fallback on: numpy's division by zero gives 0 and drops it). O(D·B·(max_n − min_n)) time and O(D·B) memory for D
 * DP prompts and B rollouts left to them, as published.
 */
export function knapsackRlAllocate(states: readonly KnapsackRlState[], options: KnapsackRlOptions): Int32Array {
  checkInputs(states, options);
  const size = states.length;
  const minN = options.minN ?? 2;
  const { n, maxN } = options;
  const alpha = options.alpha ?? 0.9;
  const total = options.totalBudget ?? size * n;
  let budget = new Int32Array(size);
  const rates = new Float32Array(size);
  const costs = new Float32Array(size);
  const effective: number[] = [];
  for (let i = 0; i < size; i++) {
    const [valid, p] = states[i]!;
    if (valid !== 1) {
      budget[i]! += n;
      continue;
    }
    if (p > 0 && p < 1) {
      costs[i] = Math.log(1 - alpha) / Math.log(Math.max(p, 1 - p));
      budget[i]! += minN;
      effective.push(i);
    } else if (p === 0) {
      costs[i] = Infinity;
      budget[i]! += options.negativeN ?? minN;
    } else {
      budget[i]! += options.positiveN ?? minN;
    }
    rates[i] = p;
  }
  let left = total - budget.reduce((a, b) => a + b, 0);
  const zeros = (): number[] => Array.from(rates.keys()).filter((i) => rates[i] === 0);
  const spread = (to: readonly number[], amount: number) => {
    const each = Math.floor(amount / to.length);
    const extra = amount % to.length;
    to.forEach((i, j) => (budget[i]! += each + (j < extra ? 1 : 0)));
  };
  if (left > 0 && effective.length === 0) {
    const zero = zeros();
    if (zero.length > 0) spread(zero, left);
    else budget = new Int32Array(size).fill(n);
  } else {
    let need = 0;
    for (const i of effective) need += Math.trunc(Math.min(maxN, costs[i]!));
    if (need < left && (options.allowFallback ?? true)) {
      const zero = zeros();
      const inDp = new Set(effective);
      const to = zero.length > 0 ? zero : Array.from(rates.keys()).filter((i) => !inDp.has(i));
      // The published code divides the surplus by 0 prompts here, in numpy integers (its budget
      // left is `total_budget - sum(...)` over an int32 array): 0 with a RuntimeWarning, not a
      // ZeroDivisionError. The surplus is then dropped and its assertion fails.
      if (to.length === 0) throw new KnapsackRlRaise('AssertionError', `every prompt has 0 < p < 1 and their needs (${need}) leave ${left - need} rollouts with no prompt to take them: the published code's numpy division by zero gives 0, drops them, and its assertion fails (budget mismatch: expected ${total}, got ${total - (left - need)}); allow_fallback false avoids it`);
      spread(to, left - need);
      left = need;
    }
    const extra = solveByDp(rates, effective, minN, maxN - minN, left);
    for (let i = 0; i < size; i++) budget[i]! += extra[i]!;
  }
  const sum = budget.reduce((a, b) => a + b, 0);
  if (sum !== total) throw new KnapsackRlRaise('AssertionError', `the allocation sums to ${sum}, not the budget ${total} (the published assertion): the initial rollouts (n = ${n} for prompts not yet valid, min_n = ${minN} for the others) need more than the budget`);
  return budget;
}

/** `solve_by_dp`: k more for each DP prompt (see knapsackRlAllocate, step 4). */
function solveByDp(rates: Float32Array, effective: readonly number[], minN: number, maxExtra: number, budget: number): Int32Array {
  const out = new Int32Array(rates.length);
  if (budget <= 0) return out;
  if (effective.length === 0) {
    // Unreachable from knapsackRlAllocate (kept as published): uniform over all prompts.
    const each = Math.floor(budget / rates.length);
    for (let i = 0; i < rates.length; i++) out[i] = each + (i < budget % rates.length ? 1 : 0);
    return out;
  }
  const m = effective.length;
  const width = budget + 1;
  const choice = maxExtra <= 0x7fff ? new Int16Array(m * width) : new Int32Array(m * width);
  const gain = new Float64Array(maxExtra + 1);
  let prev = new Float64Array(width).fill(-Infinity);
  prev[0] = 0;
  for (let i = 0; i < m; i++) {
    const p = rates[effective[i]!]!;
    const q = f32(1 - p);
    for (let k = 1; k <= maxExtra; k++) {
      gain[k] = p === 0 || p === 1 ? 0 : f32(f32(f32(f32(1 - f32(Math.pow(p, k + minN))) - f32(Math.pow(q, k + minN))) * p) * f32(q * q));
    }
    const next = new Float64Array(width).fill(-Infinity);
    const row = i * width;
    for (let w = 0; w < width; w++) {
      let best = next[w]!;
      let pick = -1;
      if (prev[w]! > best) {
        best = prev[w]!;
        pick = 0;
      }
      const top = Math.min(maxExtra, w);
      for (let k = 1; k <= top; k++) {
        const before = prev[w - k]!;
        if (before === -Infinity) continue;
        const value = before + gain[k]!;
        if (value > best) {
          best = value;
          pick = k;
        }
      }
      next[w] = best;
      if (pick > 0) choice[row + w] = pick;
    }
    prev = next;
  }
  let usable = budget;
  while (usable > 0 && prev[usable] === -Infinity) usable--;
  let remaining = budget;
  if (usable > 0) {
    let w = usable;
    for (let i = m - 1; i >= 0; i--) {
      const k = choice[i * width + w]!;
      if (k > 0) {
        out[effective[i]!]! += k;
        w -= k;
      }
    }
    remaining = budget - usable;
  }
  if (remaining > 0) {
    const each = Math.floor(remaining / m);
    effective.forEach((i, j) => (out[i]! += each + (j < remaining % m ? 1 : 0)));
  }
  return out;
}
