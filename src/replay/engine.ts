import { performance } from 'node:perf_hooks';
import { arc4Random } from '../math/arc4.js';
import { badOption, RolloutBudgetError } from '../errors.js';
import type { Budget, Candidate } from '../plan/types.js';
import type { Registry } from '../registry.js';
import { MetricsRecorder, type CalibrationBin, type StepMetrics, type Totals } from './metrics.js';
import type { SpendBins } from './spend.js';
import type { Environment, GroupDrawer, GroupOutcome, PolicyRun, ReplayPolicy, StepContext } from './types.js';

/**
 * How the data stream is shared between policies. `consumed` (default): a prompt a policy
 * pulls from a later batch (refills, pools) and generates is missing from that batch for it
 * later, as in a real data loader, so such policies see fewer prompts in later steps.
 * `shared`: every policy is offered every step's whole batch, and pulling from later batches
 * consumes nothing: the same stream of prompts for every policy to spend its budget on.
 */
export const replayStreams = ['consumed', 'shared'] as const;
export type ReplayStream = (typeof replayStreams)[number];

/**
 * The data loader's epoch at each step: it counts up at the first step whose batch holds a
 * prompt already offered in the current epoch. O(Σ batch sizes).
 */
export function epochsOf(env: Environment, steps: readonly number[]): Map<number, number> {
  const epochAt = epochCounter(env, steps);
  return new Map(steps.map((s, i) => [s, epochAt(i)]));
}

/**
 * epochsOf as a function of the step's index, computed up to it on first asking: a replay
 * reads each step's batch when it plays the step, not every batch before the first step.
 */
function epochCounter(env: Environment, steps: readonly number[]): (index: number) => number {
  const known: number[] = [];
  let epoch = 0;
  let seen = new Set<string>();
  return (index) => {
    while (known.length <= index) {
      const ids = env.batch(steps[known.length]!).map((c) => c.id);
      if (ids.some((id) => seen.has(id))) {
        epoch++;
        seen = new Set();
      }
      for (const id of ids) seen.add(id);
      known.push(epoch);
    }
    return known[index]!;
  };
}

export interface EngineOptions {
  readonly policies: readonly string[];
  readonly registry: Registry<ReplayPolicy>;
  readonly minN: number;
  readonly maxN: number;
  readonly seed: number;
  /** Per-step budget overrides; a missing one comes from the environment. */
  readonly budget?: Budget;
  /** Only these steps (default: all the environment has). */
  readonly steps?: readonly number[];
  /** Options passed to our planner for the wrapped policies. */
  readonly plan?: Record<string, unknown>;
  /** The data stream (default `consumed`). */
  readonly stream?: ReplayStream;
  /** Called after every policy-step with (done, total). */
  readonly onProgress?: (done: number, total: number) => void;
  /** Keep PolicyResult.allocations (default true); a long replay that reports only metrics leaves them out (they grow with the log). */
  readonly allocations?: boolean;
}

export interface PolicyResult {
  name: string;
  description: string;
  totals: Totals;
  steps: StepMetrics[];
  calibration: CalibrationBin[];
  /** groupSizes[n] = groups given n rollouts. */
  groupSizes: number[];
  /** Groups and rollouts by pass rate and by predicted pass rate (where the budget went). */
  spend: SpendBins;
  /** Per step: "id:n" of every planned or generated group, in generation order (tests, audits); empty when EngineOptions.allocations is false. */
  allocations: string[];
}

/**
 * Runs each policy through the steps of an environment. A policy plans a step from what it
 * observed before it (its own earlier groups only); the engine then generates its groups,
 * scores them, and only then lets the policy observe them. Outcomes are drawn with a random
 * stream seeded by (seed, step, source step, prompt id), the same for every policy (common
 * random numbers), so two policies giving a prompt the same n see the same group.
 */
export function runPolicies(env: Environment, options: EngineOptions): PolicyResult[] {
  const steps = options.steps ?? env.steps;
  for (const name of options.policies) {
    const policy = options.registry.get(name);
    if (policy.needsTruth === true && env.kind !== 'simulate') {
      throw badOption(`policy "${name}" needs the true pass rates, which only a simulation knows; leave it out of replay`);
    }
  }
  const shared = (options.stream ?? 'consumed') === 'shared';
  const epochAt = epochCounter(env, steps);
  const total = steps.length * options.policies.length;
  let done = 0;
  return options.policies.map((name) => {
    const policy = options.registry.get(name);
    const run = policy.create({ minN: options.minN, maxN: options.maxN, seed: options.seed, ...(options.plan === undefined ? {} : { plan: options.plan }) });
    const world = env.fork();
    const recorder = new MetricsRecorder();
    const allocations: string[] = [];
    // Prompts pulled ahead, by the later step whose batch they are gone from. A step opens only
    // its own batch and later ones, so the sets of earlier steps are dropped as it starts.
    const consumed = new Map<number, Set<string>>();
    const open = (s: number) => (shared ? env.batch(s) : env.batch(s).filter((c) => consumed.get(s)?.has(c.id) !== true));
    steps.forEach((step, index) => {
      for (const s of consumed.keys()) if (s < step) consumed.delete(s);
      const candidates = open(step);
      const base = env.defaultBudget(step);
      const rollouts = options.budget?.rollouts ?? base.rollouts;
      const tokens = options.budget?.tokens ?? base.tokens;
      const budget: Budget = { ...(rollouts === undefined ? {} : { rollouts }), ...(tokens === undefined ? {} : { tokens }) };
      const groups = new Map<string, { group: GroupOutcome; drawer: GroupDrawer; source: number }>();
      const sourceOf = new Map<string, number>(candidates.map((c) => [c.id, step]));
      let nextIndex = index + 1;
      const generate = (c: Candidate, n: number): GroupOutcome => {
        let entry = groups.get(c.id);
        if (entry === undefined) {
          const source = sourceOf.get(c.id) ?? step;
          const random = arc4Random(`${options.seed}/${step}/${source}/${c.id}`);
          entry = { group: { prompt_id: c.id, step, rewards: [], tokens: [], modelled: 0 }, drawer: world.drawer(step, source, c.id, random), source };
          groups.set(c.id, entry);
          // Only a later batch is opened again: a prompt of this step's own batch need not be noted.
          if (!shared && source !== step) {
            let gone = consumed.get(source);
            if (gone === undefined) consumed.set(source, (gone = new Set()));
            gone.add(c.id);
          }
        }
        const g = entry.group;
        for (let j = 0; j < n; j++) {
          const o = entry.drawer.next();
          g.rewards.push(o.reward);
          if (o.modelled === true) (g as { modelled: number }).modelled++;
          if (o.tokens === null) (g as { tokens: number[] | null }).tokens = null;
          else g.tokens?.push(o.tokens);
        }
        return g;
      };
      const truth = world.truth?.(candidates.map((c) => c.id));
      const ctx: StepContext = {
        step, candidates, batchSize: env.batch(step).length, budget, minN: options.minN, maxN: options.maxN, seed: options.seed, epoch: epochAt(index),
        ...(policy.needsTruth === true && truth !== undefined ? { truth } : {}),
        generate,
        nextBatch: () => {
          const s = steps[nextIndex];
          if (s === undefined) return [];
          nextIndex++;
          const batch = open(s).filter((c) => !sourceOf.has(c.id));
          for (const c of batch) sourceOf.set(c.id, s);
          return batch;
        },
      };
      const t0 = performance.now();
      const decision = decideNamed(run, ctx, name);
      const planMs = performance.now() - t0;
      if (decision.n !== undefined) {
        decision.n.forEach((n, i) => {
          const c = candidates[i]!;
          const have = groups.get(c.id)?.group.rewards.length ?? 0;
          if (n > have) generate(c, n - have);
        });
      }
      const generated = [...groups.values()].map((e) => e.group).filter((g) => g.rewards.length > 0);
      const trained = decision.trained ?? generated;
      const passRate = (g: GroupOutcome) => world.passRate(groups.get(g.prompt_id)!.source, g.prompt_id);
      recorder.record(step, generated, trained, passRate, decision.predicted, budget, planMs, decision.failed !== undefined);
      if (options.allocations ?? true) allocations.push(generated.map((g) => `${g.prompt_id}:${g.rewards.length}`).join(','));
      run.observe(step, generated);
      world.train(step, trained);
      options.onProgress?.(++done, total);
    });
    return {
      name,
      description: policy.description,
      totals: recorder.totals(),
      steps: recorder.steps,
      calibration: recorder.calibration(),
      groupSizes: Array.from(recorder.sizes, (v) => v ?? 0),
      spend: recorder.spend.summary(),
      allocations,
    };
  });
}

/**
 * The policy's decision at a step; a budget it cannot plan under (our planner without skip, a
 * step whose logged budget is below min_n a prompt) names the policy: every policy of the run
 * is stopped by it, and the baselines would have run.
 */
function decideNamed(run: PolicyRun, ctx: StepContext, name: string): ReturnType<PolicyRun['decide']> {
  try {
    return run.decide(ctx);
  } catch (error) {
    if (!(error instanceof RolloutBudgetError) || error.code !== 'BUDGET_INFEASIBLE') throw error;
    throw new RolloutBudgetError(error.code, `policy ${name}, ${error.message}`, error.exitCode, error.fields);
  }
}
