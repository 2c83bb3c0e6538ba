import type { Allocator } from '../allocator.js';
import { batchOf } from '../io/formats.js';
import type { PlanOptionsInput } from '../plan/options.js';
import { groupId } from '../plan/exports.js';
import { roundBudget, withPartials } from '../plan/partial.js';
import type { Budget, Candidate } from '../plan/types.js';
import type { ObserveSummary } from '../store/types.js';
import { commitPartials, executePlan } from './execute.js';
import type { ExecuteOptions, ExecuteReport } from './types.js';

export interface LoopStep {
  step: number;
  /** Prompts that got rollouts at this step (in any round). */
  prompts: number;
  planned: number;
  /** The step's first round; `rounds` holds every round's. */
  report: ExecuteReport;
  rounds: ExecuteReport[];
  observed: ObserveSummary;
}

/**
 * plan → execute → observe for `steps` steps, without a trainer. Each step plans all candidate
 * prompts under `budget`, generates and grades, and applies the results to the allocator's
 * state (aborted rollouts are kept in `execute.partials` and resumed next step).
 *
 * With `rounds` > 1 a step is planned and generated in rounds: round r of R gets a
 * 1/(R − r + 1) share of the budget still left (counted from what was generated), and each
 * later round plans with every prompt's rewards so far as its `partial_rewards`, so it tops up
 * groups by what they showed. The step's results are observed once, after its last round.
 */
export async function runLoop(
  allocator: Allocator,
  candidates: readonly Candidate[],
  budget: Budget,
  planOptions: PlanOptionsInput,
  execute: ExecuteOptions,
  steps: number,
  onStep?: (row: LoopStep) => void,
  rounds = 1,
): Promise<LoopStep[]> {
  const byId = new Map(candidates.map((c) => [c.id, c]));
  const rows: LoopStep[] = [];
  for (let s = 0; s < steps; s++) {
    const rewards = new Map<string, number[]>();
    const nextRollout = new Map<string, number>();
    const reports: ExecuteReport[] = [];
    let step: number | undefined;
    let planned = 0;
    const left: { rollouts?: number; tokens?: number } = { ...budget };
    for (let r = 0; r < rounds; r++) {
      const share = roundBudget(left, r, rounds);
      if (share === undefined) break;
      const plan = allocator.plan(withPartials(candidates, rewards), share, step === undefined ? planOptions : { ...planOptions, step });
      step = plan.step;
      if (r > 0 && plan.totals.rollouts === 0) break;
      const report = await executePlan(plan, byId, r === 0 ? execute : { ...execute, nextRollout });
      if (execute.partials !== undefined) commitPartials(execute.partials, report);
      reports.push(report);
      planned += plan.totals.rollouts;
      for (const res of report.results) {
        const own = `${groupId(plan.step, res.prompt_id)}#`;
        if (res.rollout_id.startsWith(own)) {
          const j = Number(res.rollout_id.slice(own.length)) + 1;
          if (j > (nextRollout.get(res.prompt_id) ?? 0)) nextRollout.set(res.prompt_id, j);
        }
        if (res.finish_reason === 'abort') continue;
        const got = rewards.get(res.prompt_id);
        if (got === undefined) rewards.set(res.prompt_id, [res.reward]);
        else got.push(res.reward);
        if (left.rollouts !== undefined) left.rollouts--;
        if (left.tokens !== undefined) left.tokens -= res.tokens ?? 0;
      }
    }
    const observed = allocator.observe(batchOf(reports.flatMap((x) => x.results)));
    const row = { step: step!, prompts: rewards.size, planned, report: reports[0]!, rounds: reports, observed };
    rows.push(row);
    onStep?.(row);
  }
  return rows;
}
