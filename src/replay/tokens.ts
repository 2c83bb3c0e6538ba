import type { Visit } from './visits.js';

/** How many logged rollouts there are, and how many of them carry a generated-token count. */
export interface TokenCoverage {
  readonly rollouts: number;
  readonly withTokens: number;
}

/**
 * Counts the logged rollouts with a token count. Count-only logs (`visits`) and verl dumps
 * record none; a results log may record some. A token budget can only be checked, and
 * compared across policies, where the counts are there. O(rollouts).
 */
export function tokenCoverage(visits: Iterable<Visit>): TokenCoverage {
  let rollouts = 0;
  let withTokens = 0;
  for (const v of visits) {
    rollouts += v.n;
    if (v.tokens !== undefined) for (const t of v.tokens) if (t !== undefined) withTokens++;
  }
  return { rollouts, withTokens };
}
