import type { DecayOptions } from '../posterior/decay.js';
import type { LengthOptions } from '../posterior/length.js';
import type { PriorOptions } from '../posterior/prior.js';

/** One candidate prompt (prompts JSONL line). Unknown fields are kept and ignored. */
export interface Candidate {
  readonly id: string;
  readonly prompt_tokens?: number;
  readonly max_tokens?: number;
  readonly group?: string;
  /**
   * Rewards of the rollouts this prompt already got at this step (an earlier round): the plan
   * then gives the rollouts to add (plan/partial.ts).
   */
  readonly partial_rewards?: readonly number[];
  /**
   * An offline difficulty hint: the prompt's pass rate under a reference model (a dataset's
   * solve rate, pass@k filtering), in [0, 1]. Calibrated against observed pass rates before it
   * counts (posterior/hints.ts).
   */
  readonly prior_pass_rate?: number;
  /** How many reference rollouts `prior_pass_rate` came from (optional; absent: taken as exact). */
  readonly prior_samples?: number;
  readonly [extra: string]: unknown;
}

/** At least one of the two must be set. */
export interface Budget {
  /** Σ n_i ≤ rollouts. */
  readonly rollouts?: number;
  /** Σ n_i·c_i (+ prefill) ≤ tokens, in generated tokens. */
  readonly tokens?: number;
}

export interface PlanOptions {
  readonly minN: number;
  readonly maxN: number;
  readonly skip: boolean;
  readonly policy: string;
  readonly value: string;
  readonly seed: number;
  /** Defaults to the snapshot's last step + 1 (0 for an empty state). */
  readonly step?: number;
  /**
   * Σ n_i (the rollouts this plan adds) must be a multiple of this: the rollout workers or
   * data-parallel ranks a trainer splits the step over. Absent: no constraint.
   */
  readonly multipleOf?: number;
  /** Tokens charged per prompt token once per included group. */
  readonly prefillWeight: number;
  /** Value used to spend budget once the main value saturates. */
  readonly surplusValue: string;
  readonly saturation: number;
  /** Central credible mass of [p_low, p_high]. */
  readonly interval: number;
  readonly decay: DecayOptions;
  readonly prior: PriorOptions;
  readonly length: LengthOptions;
  /**
   * Rounds left in this step, this one included (≥ 1): the budget given is what is left of
   * the step, and this round spends its share of it (plan/rounds.ts). 1: the whole budget.
   */
  readonly roundsLeft: number;
  /**
   * φ of the round share (plan/rounds.ts): with rounds left, a round whose candidates are new to
   * the state takes this part of the later rounds' budget on top of its even share (0: even).
   */
  readonly freshShare: number;
  /**
   * With rounds left after this one (`roundsLeft` > 1), a rollout budget and no candidate with
   * partial rewards (a step's first round): a prompt new to the state gets at most ⌈freshCap ×
   * this round's rollouts ÷ the candidates⌉ rollouts (at least min_n) this round, unless that
   * alone would leave the round's rollouts unspent or the round infeasible; later rounds may top
   * it up once its first outcomes are known. 0: no cap (plan/fresh-cap.ts).
   */
  readonly freshCap: number;
  /** The solver, by name in the solver registry (`greedy`; `dp` and `milp` are exact references). */
  readonly solver: string;
}

export interface Allocation {
  prompt_id: string;
  n: number;
  max_tokens: number | null;
  expected_tokens: number;
  p_mean: number;
  p_low: number;
  p_high: number;
  value: number;
  /**
   * Only for a prompt with partial_rewards: how many rollouts it already has at this step, so
   * the new ones are numbered (and seeded: group seed + j) from here in the same group.
   */
  first_rollout?: number;
}

/**
 * A plan's allocations as columns, without one object per prompt: row j describes
 * `plan.allocations[j]` (the prompts with n > 0, in candidate order). For training loops that
 * read a large plan in place; the plan file is unchanged. The arrays are the plan's own, and
 * `allocations` is built from them on first read: treat them as read-only.
 */
export interface PlanColumns {
  /** Rows, = totals.prompts. */
  readonly length: number;
  /**
   * Row j's candidate (a copy of the planned list, so later edits to it do not reach the plan).
   * A row whose candidate has partial_rewards has first_rollout = their number.
   */
  readonly candidates: readonly Candidate[];
  /** Row j's position in the candidates given to the planner. */
  readonly index: Int32Array;
  readonly n: Int32Array;
  /** Expected generated tokens of one rollout; expected_tokens = round(n · tokensPerRollout). */
  readonly tokensPerRollout: Float64Array;
  /** Tokens charged once for the row's group (prefill weight × prompt tokens); absent without a prefill weight. */
  readonly prefillTokens?: Float64Array;
  /** The posterior Beta(alpha, beta) at the plan's step; p_mean = alpha / (alpha + beta). */
  readonly alpha: Float64Array;
  readonly beta: Float64Array;
  readonly value: Float64Array;
  /** Central credible mass of [p_low, p_high] (the plan option `interval`). */
  readonly interval: number;
}

/** The allocation plan (version 1). Published as schemas/plan.schema.json. */
export interface Plan {
  version: 1;
  step: number;
  seed: number;
  policy: string;
  value: string;
  /** What this plan may spend: with rounds_left > 1, this round's share of budget_left. */
  budget: { rollouts: number | null; tokens: number | null };
  /** Only with rounds_left > 1: the rounds left in the step, this one included. */
  rounds_left?: number;
  /** Only with rounds_left > 1: what was left of the step's budget when this round was planned. */
  budget_left?: { rollouts: number | null; tokens: number | null };
  totals: {
    prompts: number;
    rollouts: number;
    expected_tokens: number;
    objective: number;
    upper_bound: number;
    /** (upper_bound − objective) / upper_bound; 0 when both are 0. */
    gap: number;
    /** Rollouts placed by the surplus value after the main value saturated. */
    surplus_rollouts: number;
  };
  allocations: Allocation[];
  warnings: string[];
  /**
   * Plans from the planner carry their allocations as columns too (not enumerable: never
   * in the plan file). Absent on plans read from a file. Edits to `allocations` do not reach it.
   */
  readonly columns?: PlanColumns;
}
