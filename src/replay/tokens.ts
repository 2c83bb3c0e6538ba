import type { ReplayRun } from './visits.js';

/** How many logged rollouts there are, and how many of them carry a generated-token count. */
export interface TokenCoverage {
  readonly rollouts: number;
  readonly withTokens: number;
}

/**
 * Counts the logged rollouts with a token count. Count-only logs (`visits`) and verl dumps
 * record none; a results log may record some. A token budget can only be checked, and
 * compared across policies, where the counts are there. O(steps) from the runs' step counts.
 */
export function tokenCoverage(run: ReplayRun): TokenCoverage {
  let rollouts = 0;
  let withTokens = 0;
  for (const step of run.steps) {
    const c = run.counts(step);
    rollouts += c.rollouts;
    withTokens += c.withTokens;
  }
  return { rollouts, withTokens };
}
