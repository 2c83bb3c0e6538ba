import { fixedTokensOf, type SolverInput } from './types.js';

/**
 * Prompt i's bounds: n_i ∈ {0 if it may be left out} ∪ [max(1, lo), hi], with lo, hi its own
 * bounds (`promptMinN`, `promptMaxN`) or the global min_n, max_n. A prompt may be left out when
 * skip is on or its lower bound is 0 (a prompt that already has rollouts this step). O(1).
 */
export function lowerOf(input: SolverInput, i: number): number {
  return input.promptMinN === undefined ? input.minN : input.promptMinN[i]!;
}

/** Prompt i's upper bound: its own `promptMaxN` or the global max_n. O(1). */
export function upperOf(input: SolverInput, i: number): number {
  return input.promptMaxN === undefined ? input.maxN : input.promptMaxN[i]!;
}

/** Where prompt i starts: 0 when it may be left out, else its lower bound. */
export function startOf(input: SolverInput, i: number): number {
  const lo = lowerOf(input, i);
  return input.skip || lo === 0 ? 0 : lo;
}

/** The n prompt i may take, ascending (exact references). */
export function optionsOf(input: SolverInput, i: number): number[] {
  const list: number[] = startOf(input, i) === 0 ? [0] : [];
  for (let n = Math.max(1, lowerOf(input, i)); n <= upperOf(input, i); n++) list.push(n);
  return list;
}

/** What every prompt at its start needs: the infeasibility check's numbers. O(N). */
export function startNeeds(input: SolverInput): { rollouts: number; tokens: number } {
  let rollouts = 0;
  let tokens = 0;
  for (let i = 0; i < input.curves.size; i++) {
    const s = startOf(input, i);
    if (s === 0) continue;
    rollouts += s;
    tokens += s * input.tokensPerRollout[i]! + fixedTokensOf(input, i);
  }
  return { rollouts, tokens };
}
