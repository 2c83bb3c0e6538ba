import { createRegistry, type Registry } from '../registry.js';
import { greedySolve } from './greedy.js';
import { exactDp, milpSolve } from './reference.js';
import type { Solver } from './types.js';

/** Solvers by name: `greedy` (the planner's), `dp` and `milp` (exact references for tests). */
export function createSolverRegistry(): Registry<Solver> {
  return createRegistry<Solver>('solver', { greedy: greedySolve, dp: (input) => exactDp(input), milp: (input) => milpSolve(input) });
}
