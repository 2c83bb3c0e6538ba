import type { Budget, Candidate } from '../plan/types.js';
import type { Random } from '../math/beta.js';

/** One generated group: what a policy's rollouts of one prompt at one step returned. */
export interface GroupOutcome {
  readonly prompt_id: string;
  readonly step: number;
  readonly rewards: number[];
  /** Generated tokens per rollout; null when the source records no lengths. */
  readonly tokens: number[] | null;
  /** How many of the rewards came from a model rather than a logged record (GroupDrawer). */
  readonly modelled?: number;
}

/** A source of outcomes for one prompt at one step; draws continue without replacement. */
export interface GroupDrawer {
  /**
   * The next rollout's reward and tokens (tokens null when unknown); `modelled` when the
   * outcome comes from a model, not a logged record (replay past the logged group, and every
   * simulated draw).
   */
  next(): { reward: number; tokens: number | null; modelled?: boolean };
}

/**
 * Where outcomes come from: a logged run (replay) or a simulated pool. `fork()` gives each
 * policy its own world, because in a simulation training changes the pool.
 */
export interface Environment {
  readonly kind: 'replay' | 'simulate';
  readonly steps: readonly number[];
  /** The prompts the data loader offers at a step, in order. */
  batch(step: number): readonly Candidate[];
  /** The step's budget when the caller gives none (replay: the logged rollouts). */
  defaultBudget(step: number): Budget;
  fork(): World;
}

export interface World {
  /** A drawer for a prompt of the batch of `source` step, generated at `step`. */
  drawer(step: number, source: number, id: string, random: Random): GroupDrawer;
  /** The pass rate that defines "hard" (≤ 0.2) for the metrics; not shown to policies. */
  passRate(source: number, id: string): number;
  /** True pass rates, when known (simulation); undefined in replay. */
  truth?(ids: readonly string[]): Float64Array;
  /** Applies the groups a policy trained on (simulation: the pool drifts). */
  train(step: number, groups: readonly GroupOutcome[]): void;
}

/** What a policy is given at a step: nothing of this step's outcomes until it generates. */
export interface StepContext {
  readonly step: number;
  readonly candidates: readonly Candidate[];
  /** The data loader's batch size at this step (the logged batch), ≥ candidates.length. */
  readonly batchSize: number;
  readonly budget: Budget;
  readonly minN: number;
  readonly maxN: number;
  readonly seed: number;
  /**
   * The data loader's epoch at this step: 0 until a step's batch holds a prompt that an
   * earlier batch of the same epoch held (then it counts up). The same for every policy.
   */
  readonly epoch: number;
  /** True pass rates of the candidates (oracle only; undefined in replay). */
  readonly truth?: Float64Array;
  /**
   * Generates `n` more rollouts of a candidate now (rounds, over-sampling). Repeated calls
   * for the same prompt extend its group. Returns the group so far.
   */
  generate(candidate: Candidate, n: number): GroupOutcome;
  /**
   * The data loader's next batch (policies that refill or select from a pool: dapo, greso,
   * mopps); [] when none. With the `consumed` stream (default), prompts a policy generates from
   * it are missing from that later step's batch for this policy, as in a real data stream;
   * with the `shared` stream every step's batch stays whole for every policy.
   */
  nextBatch(): readonly Candidate[];
}

/**
 * A policy's answer. `n[i]`: rollouts for candidate i (the engine generates whatever is beyond
 * what the policy generated itself). `predicted`: predicted pass rate per prompt id, for the
 * predictor-quality metrics. `trained`: the groups that enter the update (default: all
 * generated; dapo keeps only groups with reward variance, up to the batch size).
 */
export interface Decision {
  readonly n?: Int32Array;
  readonly predicted?: ReadonlyMap<string, number>;
  readonly trained?: readonly GroupOutcome[];
  /**
   * Set when the published method stops with an error at this step (dapo: verl raises at
   * max_num_gen_batches; knapsack-rl: its budget assertion): why. The step counts as failed.
   */
  readonly failed?: string;
}

/** One policy's run through the steps: it learns only through observe(), after each step. */
export interface PolicyRun {
  decide(ctx: StepContext): Decision;
  observe(step: number, groups: readonly GroupOutcome[]): void;
}

export interface PolicyConfig {
  readonly minN: number;
  readonly maxN: number;
  readonly seed: number;
  /** Our planner's options (policy, value, decay, prior) for the wrapped policies. */
  readonly plan?: Record<string, unknown>;
}

/** A replay policy: the same signature for ours and the baselines. */
export interface ReplayPolicy {
  readonly description: string;
  /** Needs the true pass rates (simulation only). */
  readonly needsTruth?: boolean;
  create(config: PolicyConfig): PolicyRun;
}
