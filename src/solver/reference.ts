import type lpSolverType from 'javascript-lp-solver';
import { lazyRequire } from '../lazy.js';

const lpSolver = lazyRequire<typeof lpSolverType>('javascript-lp-solver');
import { badOption } from '../errors.js';
import { optionsOf, startNeeds } from './bounds.js';
import { fixedTokensOf, type SolverInput, type SolverResult } from './types.js';

function infeasible(size: number, input: SolverInput): SolverResult {
  const need = startNeeds(input);
  const k = input.multipleOf ?? 1;
  return {
    status: 'budget-infeasible', n: new Int32Array(size), objective: 0, upperBound: 0,
    usedRollouts: 0, usedTokens: 0, needed: { rollouts: k * Math.ceil(need.rollouts / k), tokens: need.tokens }, surplusRollouts: 0,
  };
}

/**
 * Exact dynamic program over the rollout budget (token budget ignored: a reference for unit
 * costs). best[i][b] = max_n best[i−1][b − n] + v_i(n), the best value using exactly b
 * rollouts; the answer is the best b ≤ B (a multiple of `multipleOf` when given). `order`: the
 * prompts' order (a permutation of 0..N−1; default their own), which decides among plans of
 * equal value.
 * O(N · B · (max_n − min_n + 1)) time, O(N · B) memory for the traceback. Returns `truncated`
 * (every n = 0) when N·B exceeds `limit` cells: a caller must check the status (see
 * `solvedOrThrow`).
 */
export function exactDp(input: SolverInput, limit = 5e7, order?: readonly number[]): SolverResult {
  const size = input.curves.size;
  const budget = Math.floor(input.rollouts);
  if (!Number.isFinite(input.rollouts) || size * (budget + 1) > limit) {
    return { status: 'truncated', n: new Int32Array(size), objective: 0, upperBound: 0, usedRollouts: 0, usedTokens: 0, surplusRollouts: 0 };
  }
  const k = input.multipleOf ?? 1;
  if (startNeeds(input).rollouts > k * Math.floor(budget / k)) return infeasible(size, input);
  let prev = new Float64Array(budget + 1).fill(-Infinity);
  prev[0] = 0;
  const choice = new Int32Array(size * (budget + 1));
  for (let j = 0; j < size; j++) {
    const i = order?.[j] ?? j;
    // Options past the budget never fit: their values (each O(n)) are not computed.
    const opts = optionsOf(input, i).filter((n) => n <= budget);
    const values = opts.map((n) => input.curves.value(i, n));
    const next = new Float64Array(budget + 1).fill(-Infinity);
    for (let b = 0; b <= budget; b++) {
      for (let k = 0; k < opts.length; k++) {
        const n = opts[k]!;
        if (n > b) break;
        const cand = prev[b - n]! + values[k]!;
        if (cand > next[b]!) {
          next[b] = cand;
          choice[j * (budget + 1) + b] = n;
        }
      }
    }
    prev = next;
  }
  let bestB = -1;
  for (let b = 0; b <= budget; b += k) if (bestB < 0 || prev[b]! > prev[bestB]!) bestB = b;
  if (prev[bestB]! === -Infinity) return infeasible(size, input);
  const n = new Int32Array(size);
  let b = bestB;
  for (let j = size - 1; j >= 0; j--) {
    const i = order?.[j] ?? j;
    n[i] = choice[j * (budget + 1) + b]!;
    b -= n[i]!;
  }
  let tokens = 0;
  for (let i = 0; i < size; i++) tokens += n[i]! * input.tokensPerRollout[i]! + (n[i]! > 0 ? fixedTokensOf(input, i) : 0);
  return { status: 'optimal', n, objective: prev[bestB]!, upperBound: prev[bestB]!, usedRollouts: bestB, usedTokens: tokens, surplusRollouts: 0 };
}

/**
 * A reference solver's result when it solved the instance; an error naming the solver when it
 * gave up (`truncated`: every n = 0, which must never be used as an allocation). The solver
 * registry wraps `dp` and `milp` with it.
 */
export function solvedOrThrow(name: string, input: SolverInput, result: SolverResult): SolverResult {
  if (result.status !== 'truncated') return result;
  const cells = input.curves.size * (Number.isFinite(input.rollouts) ? Math.floor(input.rollouts) + 1 : Infinity);
  throw badOption(`solver "${name}" gave up on this instance (${input.curves.size} prompts, ${cells} DP cells or its time limit) and returned no allocation; use solver "greedy"`);
}

/**
 * Exact MILP with javascript-lp-solver: one binary per (prompt, option), one option per
 * prompt, both budgets as rows; with `multipleOf` k, Σ n − k·q = 0 for an integer q ≥ 0.
 * Branch and bound: exponential in the number of prompts at worst; practical up to a few hundred
 * prompts with small max_n (N·max_n binaries).
 * With `timeoutMs` the branch and bound stops there and the status is `truncated` (n then
 * holds the best integer solution found, possibly none).
 */
export function milpSolve(input: SolverInput, timeoutMs?: number): SolverResult {
  const size = input.curves.size;
  const variables: Record<string, Record<string, number>> = {};
  const ints: Record<string, 1> = {};
  const constraints: Record<string, { max?: number; equal?: number }> = {};
  if (Number.isFinite(input.rollouts)) constraints.rollouts = { max: input.rollouts };
  if (Number.isFinite(input.tokens)) constraints.tokens = { max: input.tokens };
  for (let i = 0; i < size; i++) {
    constraints[`one${i}`] = { equal: 1 };
    for (const n of optionsOf(input, i)) {
      const name = `x${i}_${n}`;
      variables[name] = {
        value: input.curves.value(i, n),
        rollouts: n,
        tokens: n * input.tokensPerRollout[i]! + (n > 0 ? fixedTokensOf(input, i) : 0),
        [`one${i}`]: 1,
      };
      ints[name] = 1;
    }
  }
  const k = input.multipleOf ?? 1;
  if (k > 1) {
    constraints.multiple = { equal: 0 };
    for (const vars of Object.values(variables)) vars.multiple = vars.rollouts!;
    variables.q = { value: 0, rollouts: 0, tokens: 0, multiple: -k };
    ints.q = 1;
  }
  const model = { optimize: 'value', opType: 'max', constraints, variables, ints, ...(timeoutMs === undefined ? {} : { timeout: timeoutMs }) };
  const started = Date.now();
  const result = lpSolver().Solve(model);
  const timedOut = timeoutMs !== undefined && Date.now() - started >= timeoutMs;
  if (!result.feasible) return infeasible(size, input);
  const n = new Int32Array(size);
  let used = 0;
  let tokens = 0;
  for (const [key, val] of Object.entries(result)) {
    const match = /^x(\d+)_(\d+)$/.exec(key);
    if (match === null || typeof val !== 'number' || val < 0.5) continue;
    const i = Number(match[1]);
    n[i] = Number(match[2]);
  }
  let objective = 0;
  for (let i = 0; i < size; i++) {
    objective += input.curves.value(i, n[i]!);
    used += n[i]!;
    tokens += n[i]! * input.tokensPerRollout[i]! + (n[i]! > 0 ? fixedTokensOf(input, i) : 0);
  }
  return { status: timedOut ? 'truncated' : 'optimal', n, objective, upperBound: objective, usedRollouts: used, usedTokens: tokens, surplusRollouts: 0 };
}
