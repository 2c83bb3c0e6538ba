import { RolloutBudgetError } from '../errors.js';
import type { Allocator } from '../allocator.js';
import { batchOf } from '../io/formats.js';
import { defaultRounds, type PlanOptionsInput } from '../plan/options.js';
import { groupId } from '../plan/exports.js';
import { runStepRoundsAsync, type RoundRequest, type RoundRollout } from '../plan/round-loop.js';
import type { Budget, Candidate, Plan } from '../plan/types.js';
import type { ObserveSummary } from '../store/types.js';
import { commitPartials, executePlan } from './execute.js';
import { StepPartials } from './partials.js';
import type { ExecuteOptions, ExecuteReport } from './types.js';
import { settled } from './types.js';

export interface LoopStep {
  step: number;
  /** Prompts that got rollouts at this step (in any round). */
  prompts: number;
  planned: number;
  /** The step's first round; `rounds` holds every round's. */
  report: ExecuteReport;
  rounds: ExecuteReport[];
  /** Every round's plan, in order (a round that planned nothing included). */
  plans: Plan[];
  observed: ObserveSummary;
}

/** What runs a plan: executePlan, or a stand-in with the same contract (tests). */
export type PlanExecutor = (plan: Plan, prompts: ReadonlyMap<string, Candidate>, options: ExecuteOptions) => Promise<ExecuteReport>;

/**
 * plan → execute → observe for `steps` steps, without a trainer. Each step plans all candidate
 * prompts under `budget`, generates and grades, and applies the results to the allocator's
 * state (aborted rollouts are kept in `execute.partials` and resumed next step).
 *
 * A step is planned and generated in `rounds` rounds (default 2) through the library's one
 * round loop (plan/round-loop.ts): each round's plan spends its share of the budget still
 * left (plan/rounds.ts), and later rounds plan with every prompt's rewards so far as its
 * `partial_rewards`, so they top up groups by what they showed. Aborted rollouts are not
 * outcomes of the step (they are resumed at a later one). The step's results are observed
 * once, after its last round. A prompt the server refused as longer than its context is left
 * out of the later rounds and steps.
 */
export async function runLoop(
  allocator: Allocator,
  candidates: readonly Candidate[],
  budget: Budget,
  planOptions: PlanOptionsInput,
  execute: ExecuteOptions,
  steps: number,
  onStep?: (row: LoopStep) => void,
  rounds = defaultRounds,
  executor: PlanExecutor = executePlan,
): Promise<LoopStep[]> {
  const byId = new Map(candidates.map((c) => [c.id, c]));
  const rows: LoopStep[] = [];
  // Prompts the server refused as longer than its context (execute's too_long): no later round
  // or step can generate them either, so they are left out rather than planned again.
  const refused = new Set<string>();
  // A round that failed (execute's `failure`): the step's later rounds are not planned, what
  // finished is observed, and the failure raised after, as Ctrl-C stops a step.
  let failed: RolloutBudgetError | undefined;
  for (let s = 0; s < steps; s++) {
    const nextRollout = new Map<string, number>();
    const reports: ExecuteReport[] = [];
    // The step's partial-rollout changes, written once its results are observed (StepPartials).
    const partials = execute.partials === undefined ? undefined : new StepPartials(execute.partials);
    const stepExecute = partials === undefined ? execute : { ...execute, partials };
    // The step's tokens left when the round in hand was planned: its executor's stop.
    let tokensLeft: number | undefined;
    const done = await runStepRoundsAsync(
      {
        candidates, dropped: refused, budget, rounds,
        // Stopped (Ctrl-C): the rounds left are not planned, so the step's `planned` is what ran.
        stopped: () => execute.stop?.aborted === true || failed !== undefined,
        plan: (r) => {
          tokensLeft = r.budget.tokens;
          return planRound(allocator, r, { ...planOptions, roundsLeft: r.roundsLeft, ...(r.step === undefined ? {} : { step: r.step }) }, execute.overProvision);
        },
      },
      async (plan) => {
        const roundExecute = { ...stepExecute, ...(reports.length === 0 ? {} : { nextRollout }), ...(tokensLeft === undefined ? {} : { tokenBudget: tokensLeft }) };
        const { report, failure } = await settled(executor(plan, byId, roundExecute));
        failed ??= failure;
        if (partials !== undefined) commitPartials(partials, report);
        reports.push(report);
        for (const p of report.too_long ?? []) refused.add(p.prompt_id);
        const finished: RoundRollout[] = [];
        for (const res of report.results) {
          const own = `${groupId(plan.step, res.prompt_id)}#`;
          if (res.rollout_id.startsWith(own)) {
            const j = Number(res.rollout_id.slice(own.length)) + 1;
            if (j > (nextRollout.get(res.prompt_id) ?? 0)) nextRollout.set(res.prompt_id, j);
          }
          if (res.finish_reason !== 'abort') finished.push({ prompt_id: res.prompt_id, reward: res.reward, tokens: res.tokens ?? null });
        }
        // Every token the round generated, its aborted rollouts' too (over-provisioning's
        // surplus), when the executor counted them all; else each finished rollout's own.
        return report.summary.tokens_unknown === 0 ? { rollouts: finished, tokens: report.summary.tokens } : finished;
      },
    );
    // A step whose rounds planned nothing still reports its (empty) first round.
    if (reports.length === 0) reports.push(await executor(done.plans[0]!, byId, stepExecute));
    const observed = allocator.observe(batchOf(reports.flatMap((x) => x.results)));
    // A partial one round kept and the next resumed and kept again is one partial (not one a round).
    const kept = partials?.keptCount ?? reports.reduce((sum, r) => sum + r.partials.keep.length, 0);
    partials?.commit();
    const planned = done.plans.reduce((sum, p) => sum + p.totals.rollouts, 0);
    const row: LoopStep = { step: done.plans[0]!.step, prompts: done.rewards.size, planned, report: reports[0]!, rounds: reports, plans: done.plans, observed };
    rows.push(row);
    onStep?.(row);
    if (failed !== undefined) {
      const finished = reports.reduce((sum, r) => sum + r.results.filter((x) => x.finish_reason !== 'abort').length, 0);
      throw new RolloutBudgetError(failed.code, `${failed.message}: step ${row.step}'s ${finished} finished rollouts were observed, ${kept} in flight kept to resume`, failed.exitCode, failed.fields);
    }
    // Stopped (execute.stop): this step's rounds ran no further and its results are observed.
    if (execute.stop?.aborted === true) break;
  }
  return rows;
}

/**
 * A round's plan under its priced budget (pricedBudget). Where that cannot give the prompts
 * their min_n and the budget left can, the round is planned on the budget left (priced at 1×,
 * as before) with a warning: the surplus may then spend what the plan's groups need. Pricing
 * alone refused, with a halved figure in its message, budgets that had run.
 */
function planRound(allocator: Allocator, r: RoundRequest, options: PlanOptionsInput, overProvision: number): Plan {
  const priced = pricedBudget(r.budget, overProvision);
  if (priced === r.budget) return allocator.plan(r.candidates, r.budget, options);
  try {
    return allocator.plan(r.candidates, priced, options);
  } catch (error) {
    if (!(error instanceof RolloutBudgetError) || error.code !== 'BUDGET_INFEASIBLE') throw error;
  }
  const plan = allocator.plan(r.candidates, r.budget, options);
  plan.warnings.push(`the ${r.budget.tokens} tokens left cannot give the prompts their min_n at (1 + ${overProvision}) × their expected tokens (over-provisioning's surplus), so this round is planned at 1×: the surplus may spend what its groups need, and the step stop below their n; raise --budget-tokens or lower --over-provision`);
  return plan;
}

/**
 * The budget a round is planned under. With over-provisioning r and a token budget, a group of
 * n launches up to ⌊(1 + r)·n⌋ rollouts and the step is charged every token they generate
 * (round-loop.ts RoundOutcome), so a rollout is priced at (1 + r) times its expected tokens:
 * the planner gets the tokens left ÷ (1 + r). Priced at 1×, a round planned what the budget
 * could pay for once, generated up to twice that, and the budget stopped the step with groups
 * below their n (15 of 71 planned rollouts delivered).
 */
function pricedBudget(budget: Budget, overProvision: number): Budget {
  if (budget.tokens === undefined || !(overProvision > 0)) return budget;
  return { ...budget, tokens: Math.floor(budget.tokens / (1 + overProvision)) };
}
