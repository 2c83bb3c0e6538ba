/**
 * Per-prompt value curves v_i(n), read by a solver through a cursor. This is the whole
 * interface between policy (what a rollout is worth) and mechanism (how the budget is filled).
 */
export interface ValueCurves {
  readonly size: number;
  /** v_i(n) from scratch, without touching the cursor. O(n). */
  value(i: number, n: number): number;
  /** Moves item i's cursor to n and returns v_i(n). O(n). */
  seek(i: number, n: number): number;
  /** v_i(cursor + 1) − v_i(cursor). O(terms). */
  nextGain(i: number): number;
  /** Moves the cursor one rollout up. O(terms). */
  advance(i: number): void;
  /** Where item i's cursor is. */
  cursorOf(i: number): number;
  /** v_i(cursor). O(terms). */
  current(i: number): number;
  /**
   * Optional fast path: advances item i one rollout at a time while the next gain g has
   * g / unitCost > lambda and the cursor is below maxN; returns the rollouts taken. After
   * it, `walkGain` holds their summed gain and `walkNext` the first gain not taken (NaN at
   * maxN). Must equal the loop nextGain → advance it replaces.
   */
  advanceWhile?(i: number, unitCost: number, lambda: number, maxN: number): number;
  /**
   * Optional: a number ≥ 0 that two items share only while every read of their curves from
   * their cursors on gives the same numbers (one state of identical curves), else −1. A solver
   * may then move them in any order.
   */
  stateOf?(i: number): number;
  /** Optional, with stateOf: v(cursor + 2) − v(cursor + 1) without moving the cursor (what nextGain gives after advance). */
  gainAfterNext?(i: number): number;
  readonly walkGain?: number;
  readonly walkNext?: number;
}

/**
 * How each prompt's pass rate enters the value: `beta` takes the exact expectation under
 * Beta(α_i, β_i); `point` plugs in one number p_i (a posterior mean or a Thompson draw).
 */
export type CurveMode = { kind: 'beta'; alpha: Float64Array; beta: Float64Array } | { kind: 'point'; p: Float64Array };
