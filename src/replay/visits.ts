import { badInput, quote } from '../errors.js';
import { field } from '../fields.js';
import { parseJsonl } from '../io/jsonl.js';
import type { Random } from '../math/beta.js';

/** One logged group: k of n rollouts of a prompt correct at a step. */
export interface Visit {
  readonly step: number;
  readonly prompt_id: string;
  readonly n: number;
  readonly correct: number;
  /**
   * The group's own rollouts when the log recorded them (results and verl formats): rewards
   * in [0, 1] and, when known, generated tokens, in log order. Absent for count-only logs.
   */
  readonly rewards?: readonly number[];
  readonly tokens?: readonly (number | undefined)[];
}

/** Parses per-visit group counts `{"step", "prompt_id", "n", "correct"}` (visits.jsonl). */
export function parseVisits(text: string, name: string): Visit[] {
  return parseJsonl(text, name).map(({ where, value }) => {
    const step = field.int(where, value, 'step', 0);
    const prompt_id = value.prompt_id === undefined ? undefined : String(value.prompt_id);
    if (step === undefined) throw badInput(where, '"step" is required, got nothing');
    if (prompt_id === undefined || prompt_id === '') throw badInput(where, `"prompt_id" must be a non-empty string, got ${quote(value.prompt_id)}`);
    return { step, prompt_id, ...groupCounts(where, value) };
  });
}

/** A logged step's size: visits (groups), rollouts, and rollouts with a token count. */
export interface StepCounts {
  readonly visits: number;
  readonly rollouts: number;
  readonly withTokens: number;
}

/** What a replay reads of a logged run: its steps, a step's visits, and the pooled pass rates. */
export interface ReplayRun {
  /** The logged steps, ascending. */
  readonly steps: readonly number[];
  /** A step's visits, in log order ([] for a step not logged). */
  at(step: number): readonly Visit[];
  /** The visit of `promptId` at `step`, or undefined. */
  visit(step: number, promptId: string): Visit | undefined;
  /** The pass rate for rollouts beyond a visit's logged group (LoggedRun.pooledRate). */
  pooledRate(visit: Visit): number;
  /** A step's size, without making its visits (a streamed run would read the step for them). */
  counts(step: number): StepCounts;
}

/** A logged run indexed by step and by prompt. */
export class LoggedRun implements ReplayRun {
  readonly steps: number[];
  private readonly byStep = new Map<number, Visit[]>();
  private readonly byPrompt = new Map<string, Visit[]>();

  constructor(visits: readonly Visit[]) {
    for (const v of visits) {
      let s = this.byStep.get(v.step);
      if (s === undefined) this.byStep.set(v.step, (s = []));
      s.push(v);
      let p = this.byPrompt.get(v.prompt_id);
      if (p === undefined) this.byPrompt.set(v.prompt_id, (p = []));
      p.push(v);
    }
    for (const list of this.byPrompt.values()) list.sort((a, b) => a.step - b.step);
    this.steps = [...this.byStep.keys()].sort((a, b) => a - b);
  }

  at(step: number): readonly Visit[] {
    return this.byStep.get(step) ?? [];
  }

  /**
   * The visit of `promptId` at `step`, or undefined. O(1): a map per step, made on first use;
   * the last 16 steps' maps are kept (a replay asks about the step it plays and a few later ones).
   */
  visit(step: number, promptId: string): Visit | undefined {
    let byId = this.byStepAndId.get(step);
    if (byId === undefined) {
      if (this.byStepAndId.size >= 16) this.byStepAndId.delete(this.byStepAndId.keys().next().value!);
      this.byStepAndId.set(step, (byId = new Map()));
      for (const v of this.at(step)) if (!byId.has(v.prompt_id)) byId.set(v.prompt_id, v); // the first, as a search finds
    }
    return byId.get(promptId);
  }

  private readonly byStepAndId = new Map<number, Map<string, Visit>>();

  counts(step: number): StepCounts {
    let rollouts = 0;
    let withTokens = 0;
    for (const v of this.at(step)) {
      rollouts += v.n;
      if (v.tokens !== undefined) for (const t of v.tokens) if (t !== undefined) withTokens++;
    }
    return { visits: this.at(step).length, rollouts, withTokens };
  }

  visitsOf(promptId: string): readonly Visit[] {
    return this.byPrompt.get(promptId) ?? [];
  }

  /**
   * The pass rate used for rollouts beyond the logged group: the prompt's correct / n pooled
   * over the visit itself and its neighbouring visits (one before, one after). A model, not
   * a record: the log holds only `n` outcomes per visit.
   */
  pooledRate(visit: Visit): number {
    const list = this.visitsOf(visit.prompt_id);
    const at = list.findIndex((v) => v.step === visit.step);
    let k = 0;
    let n = 0;
    for (let j = Math.max(0, at - 1); j <= Math.min(list.length - 1, at + 1); j++) {
      k += list[j]!.correct;
      n += list[j]!.n;
    }
    return n > 0 ? k / n : 0;
  }
}

/**
 * Outcomes of n rollouts at a logged visit. The first min(n, visit.n) are drawn without
 * replacement from the logged group (exact: any subset of a real group is a real group);
 * the rest are Bernoulli(pooledRate). O(n).
 */
export function drawOutcomes(visit: Visit, pooledRate: number, n: number, random: Random): number[] {
  const out: number[] = [];
  let right = visit.correct;
  let left = visit.n;
  for (let j = 0; j < n; j++) {
    if (left > 0) {
      const r = random() * left < right ? 1 : 0;
      right -= r;
      left--;
      out.push(r);
    } else {
      out.push(random() < pooledRate ? 1 : 0);
    }
  }
  return out;
}

/** The most rollouts a visits line may give one prompt at one step. */
export const MAX_LOGGED_N = 1_000_000;

/**
 * A visits line's group: `n` rollouts (1..MAX_LOGGED_N) of which `correct` (0..n) were right;
 * BAD_INPUT naming the line otherwise. An n past any group (a step's sum beyond 2^53) was
 * refused as a --budget-rollouts the user never gave.
 */
export function groupCounts(where: string, value: Record<string, unknown>): { n: number; correct: number } {
  const n = field.int(where, value, 'n', 1);
  if (n === undefined) throw badInput(where, '"n" is required, got nothing');
  if (n > MAX_LOGGED_N) throw badInput(where, `"n" must be at most ${MAX_LOGGED_N} (rollouts of one prompt at one step), got ${n}`);
  const correct = field.int(where, value, 'correct', 0);
  if (correct === undefined || correct > n) throw badInput(where, `"correct" must be an integer in [0, n=${n}], got ${quote(value.correct)}`);
  return { n, correct };
}
