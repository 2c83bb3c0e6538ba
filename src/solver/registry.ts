import { createRegistry, type Registry } from '../registry.js';
import { greedySolve } from './greedy.js';
import { exactDp, milpSolve, solvedOrThrow } from './reference.js';
import type { Solver } from './types.js';

/**
 * Solvers by name: `greedy` (the planner's), `dp` and `milp` (exact references for tests).
 * `dp` and `milp` throw where they give up (`truncated`), so no caller plans all zeros.
 */
export function createSolverRegistry(): Registry<Solver> {
  return createRegistry<Solver>('solver', {
    greedy: greedySolve,
    dp: (input) => solvedOrThrow('dp', input, exactDp(input)),
    milp: (input) => solvedOrThrow('milp', input, milpSolve(input)),
  });
}
