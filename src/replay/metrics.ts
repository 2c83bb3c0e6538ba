import { SpendRecorder } from './spend.js';
import type { GroupOutcome } from './types.js';
import { isCorrect } from '../fields.js';

/** Metrics of one policy at one step. */
export interface StepMetrics {
  step: number;
  groups: number;
  rollouts: number;
  /** Generated tokens; null when the source records no lengths. */
  tokens: number | null;
  /** Generated rollouts whose outcomes came from a model, not a logged record. */
  modelled: number;
  /** Groups that entered the update with reward variance. */
  informative: number;
  /** Rollouts in those groups. */
  effective: number;
  allCorrect: number;
  allWrong: number;
  /** Groups of hard prompts (pass rate ≤ 0.2) with at least one success. */
  hardPositives: number;
  /**
   * Whether the step's rollouts, and tokens under a token budget, stayed within the budget;
   * null when that cannot be told: some of its rollouts have no token count and those known
   * fit the token budget.
   */
  withinBudget: boolean | null;
  /** The published method stopped with an error at this step (Decision.failed). */
  failed: boolean;
  planMs: number;
  /** The step's budgets (null: none set), so the report can draw budget use per step. */
  budgetRollouts: number | null;
  budgetTokens: number | null;
}

export interface Totals {
  steps: number;
  groups: number;
  rollouts: number;
  tokens: number | null;
  /** Share of generated rollouts whose outcomes came from a model (replay: past the logged group; simulation: 1). */
  modelled_share: number;
  informative_groups: number;
  /**
   * Σ rollouts in trained groups with variance / Σ rollouts generated (Knapsack RL's sample-weighted
   * ratio); null (—) when the policy generated none, as the shares of all-correct and all-wrong
   * groups are when it made no group.
   */
  effective_ratio: number | null;
  all_correct_ratio: number | null;
  all_wrong_ratio: number | null;
  hard_positives: number;
  /** Per 1,000 generated rollouts: informative groups and hard positives (equal-spend figures). */
  informative_per_1k_rollouts: number | null;
  hard_positives_per_1k_rollouts: number | null;
  /** Per million generated tokens; null when the source records no lengths. */
  informative_per_mtok: number | null;
  hard_positives_per_mtok: number | null;
  /** Mean (predicted − realised group pass rate)²; null for policies without a predictor. */
  brier: number | null;
  spearman: number | null;
  predictions: number;
  /**
   * Share of the steps that could be checked (withinBudget not null) whose rollouts (and tokens)
   * stayed within the budget; null when no step could be.
   */
  budget_compliance: number | null;
  /** Steps whose compliance cannot be told (some token counts unknown, the known ones within the token budget). */
  budget_unchecked_steps: number;
  /** Steps where the published method would have stopped with an error (dapo, knapsack-rl). */
  failed_steps: number;
  plan_ms_per_step: number;
}

export interface CalibrationBin {
  lo: number;
  hi: number;
  count: number;
  predicted: number;
  realised: number;
}

/** A prompt is hard at a pass rate at most this (hard positives: its groups with a correct answer). */
export const HARD = 0.2;

/** Whether a group's rewards vary (GRPO advantage nonzero). */
export function hasVariance(rewards: readonly number[]): boolean {
  for (let j = 1; j < rewards.length; j++) if (rewards[j] !== rewards[0]) return true;
  return false;
}

/** Accumulates one policy's metrics step by step. */
export class MetricsRecorder {
  readonly steps: StepMetrics[] = [];
  /** Groups by size n (index n). */
  readonly sizes: number[] = [];
  /** Rollouts by pass rate and by predicted pass rate (the report's "where the budget went"). */
  readonly spend = new SpendRecorder();
  private readonly pred: number[] = [];
  private readonly real: number[] = [];

  record(
    step: number,
    generated: readonly GroupOutcome[],
    trained: readonly GroupOutcome[],
    passRate: (g: GroupOutcome) => number,
    predicted: ReadonlyMap<string, number> | undefined,
    budget: { rollouts?: number; tokens?: number },
    planMs: number,
    failed = false,
  ): StepMetrics {
    const m: StepMetrics = {
      step, groups: 0, rollouts: 0, tokens: 0, modelled: 0, informative: 0, effective: 0, allCorrect: 0, allWrong: 0,
      hardPositives: 0, withinBudget: true, failed, planMs, budgetRollouts: budget.rollouts ?? null, budgetTokens: budget.tokens ?? null,
    };
    let known = 0; // tokens of the groups whose counts are known: a lower bound when some are not
    for (const g of generated) {
      const n = g.rewards.length;
      if (n === 0) continue;
      m.groups++;
      m.rollouts += n;
      m.modelled += g.modelled ?? 0;
      this.sizes[n] = (this.sizes[n] ?? 0) + 1;
      const groupTokens = g.tokens === null ? 0 : g.tokens.reduce((s, t) => s + t, 0);
      known += groupTokens;
      if (g.tokens === null || m.tokens === null) m.tokens = null;
      else m.tokens += groupTokens;
      const mean = g.rewards.reduce((s, r) => s + r, 0) / n;
      if (!hasVariance(g.rewards)) {
        if (mean >= 0.5) m.allCorrect++;
        else m.allWrong++;
      }
      const rate = passRate(g);
      const p = predicted?.get(g.prompt_id);
      this.spend.add(n, rate, p);
      if (p !== undefined && Number.isFinite(p)) {
        this.pred.push(p);
        this.real.push(mean);
      }
    }
    // Trained groups, as informative groups are: a group a policy generated and then dropped
    // (dapo past its batch) taught nothing (dapo's hard positives equalled uniform's exactly).
    for (const g of trained) {
      if (hasVariance(g.rewards)) {
        m.informative++;
        m.effective += g.rewards.length;
      }
      if (g.rewards.length > 0 && passRate(g) <= HARD && g.rewards.some(isCorrect)) m.hardPositives++;
    }
    if (budget.rollouts !== undefined && m.rollouts > budget.rollouts) m.withinBudget = false;
    if (budget.tokens !== undefined && m.withinBudget === true) {
      // Unknown counts: over when the known ones alone are; else it cannot be told.
      if (m.tokens !== null ? m.tokens > budget.tokens : known > budget.tokens) m.withinBudget = false;
      else if (m.tokens === null) m.withinBudget = null;
    }
    this.steps.push(m);
    return m;
  }

  totals(): Totals {
    const sum = (f: (s: StepMetrics) => number) => this.steps.reduce((a, s) => a + f(s), 0);
    const groups = sum((s) => s.groups);
    const rollouts = sum((s) => s.rollouts);
    const tokens = this.steps.some((s) => s.tokens === null) ? null : sum((s) => s.tokens ?? 0);
    const informative = sum((s) => s.informative);
    const hard = sum((s) => s.hardPositives);
    const checked = sum((s) => (s.withinBudget === null ? 0 : 1));
    const perRollouts = (x: number) => (rollouts > 0 ? (x * 1000) / rollouts : null);
    const perTokens = (x: number) => (tokens === null || tokens === 0 ? null : (x * 1e6) / tokens);
    let brier: number | null = null;
    if (this.pred.length > 0) {
      let b = 0;
      for (let j = 0; j < this.pred.length; j++) b += (this.pred[j]! - this.real[j]!) ** 2;
      brier = b / this.pred.length;
    }
    return {
      steps: this.steps.length,
      groups,
      rollouts,
      tokens,
      modelled_share: rollouts > 0 ? sum((s) => s.modelled) / rollouts : 0,
      informative_groups: informative,
      effective_ratio: rollouts > 0 ? sum((s) => s.effective) / rollouts : null,
      all_correct_ratio: groups > 0 ? sum((s) => s.allCorrect) / groups : null,
      all_wrong_ratio: groups > 0 ? sum((s) => s.allWrong) / groups : null,
      hard_positives: hard,
      informative_per_1k_rollouts: perRollouts(informative),
      hard_positives_per_1k_rollouts: perRollouts(hard),
      informative_per_mtok: perTokens(informative),
      hard_positives_per_mtok: perTokens(hard),
      brier,
      // Undefined (—), not 0, when either side is constant: no ranking to agree with.
      spearman: this.pred.length > 1 && hasVariance(this.pred) && hasVariance(this.real) ? spearman(this.pred, this.real) : null,
      predictions: this.pred.length,
      budget_compliance: checked > 0 ? sum((s) => (s.withinBudget === true ? 1 : 0)) / checked : this.steps.length > 0 ? null : 1,
      budget_unchecked_steps: this.steps.length - checked,
      failed_steps: sum((s) => (s.failed ? 1 : 0)),
      plan_ms_per_step: this.steps.length > 0 ? sum((s) => s.planMs) / this.steps.length : 0,
    };
  }

  /** Ten equal-width bins of predicted pass rate: mean predicted and mean realised in each. */
  calibration(bins = 10): CalibrationBin[] {
    const out: CalibrationBin[] = Array.from({ length: bins }, (_, b) => ({ lo: b / bins, hi: (b + 1) / bins, count: 0, predicted: 0, realised: 0 }));
    for (let j = 0; j < this.pred.length; j++) {
      const b = Math.min(bins - 1, Math.max(0, Math.floor(this.pred[j]! * bins)));
      out[b]!.count++;
      out[b]!.predicted += this.pred[j]!;
      out[b]!.realised += this.real[j]!;
    }
    for (const bin of out) {
      if (bin.count > 0) {
        bin.predicted /= bin.count;
        bin.realised /= bin.count;
      }
    }
    return out;
  }
}

/** Ranks with ties averaged (1-based). O(n log n). */
export function ranks(x: readonly number[]): Float64Array {
  const order = Array.from(x.keys()).sort((a, b) => x[a]! - x[b]!);
  const r = new Float64Array(x.length);
  let i = 0;
  while (i < order.length) {
    let j = i;
    while (j + 1 < order.length && x[order[j + 1]!] === x[order[i]!]) j++;
    const rank = (i + j) / 2 + 1;
    for (let k = i; k <= j; k++) r[order[k]!] = rank;
    i = j + 1;
  }
  return r;
}

/** Spearman's ρ: Pearson correlation of the tie-averaged ranks; 0 when either side is constant. */
export function spearman(x: readonly number[], y: readonly number[]): number {
  const rx = ranks(x);
  const ry = ranks(y);
  const n = rx.length;
  let mx = 0;
  let my = 0;
  for (let i = 0; i < n; i++) {
    mx += rx[i]!;
    my += ry[i]!;
  }
  mx /= n;
  my /= n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = rx[i]! - mx;
    const dy = ry[i]! - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  return sxx > 0 && syy > 0 ? sxy / Math.sqrt(sxx * syy) : 0;
}
