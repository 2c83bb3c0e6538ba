import type { Allocator } from '../allocator.js';
import { batchOf } from '../io/formats.js';
import type { PlanOptionsInput } from '../plan/options.js';
import type { Budget, Candidate } from '../plan/types.js';
import type { ObserveSummary } from '../store/types.js';
import { commitPartials, executePlan } from './execute.js';
import type { ExecuteOptions, ExecuteReport } from './types.js';

export interface LoopStep {
  step: number;
  prompts: number;
  planned: number;
  report: ExecuteReport;
  observed: ObserveSummary;
}

/**
 * plan → execute → observe for `steps` steps, without a trainer. Each step plans all candidate
 * prompts under `budget`, generates and grades, and applies the results to the allocator's
 * state (aborted rollouts are kept in `execute.partials` and resumed next step).
 */
export async function runLoop(
  allocator: Allocator,
  candidates: readonly Candidate[],
  budget: Budget,
  planOptions: PlanOptionsInput,
  execute: ExecuteOptions,
  steps: number,
  onStep?: (row: LoopStep) => void,
): Promise<LoopStep[]> {
  const byId = new Map(candidates.map((c) => [c.id, c]));
  const rows: LoopStep[] = [];
  for (let s = 0; s < steps; s++) {
    const plan = allocator.plan(candidates, budget, planOptions);
    const report = await executePlan(plan, byId, execute);
    const observed = allocator.observe(batchOf(report.results));
    if (execute.partials !== undefined) commitPartials(execute.partials, report);
    const row = { step: plan.step, prompts: plan.totals.prompts, planned: plan.totals.rollouts, report, observed };
    rows.push(row);
    onStep?.(row);
  }
  return rows;
}
