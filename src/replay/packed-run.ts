import type { ReplayRun, StepCounts, Visit } from './visits.js';

/** The rollouts of a log, ordered by group (log-store.ts). */
export interface PackedRollouts {
  readonly rewards: Uint8Array | Float64Array;
  /** -1 for a rollout of unknown length; undefined when no rollout had one. */
  readonly tokens: Int32Array | Float64Array | undefined;
}

/** A log's groups in step order (first seen first within a step), one entry a group. */
export interface PackedGroups {
  readonly step: Float64Array;
  /** Index into `prompts`. */
  readonly prompt: Int32Array;
  readonly n: Int32Array;
  readonly correct: Int32Array;
  /** First rollout of the group in `rollouts`. */
  readonly start: Float64Array;
  readonly prompts: readonly string[];
  readonly rollouts: PackedRollouts;
}

/** How many steps' visits a PackedRun keeps made (a replay asks about its step and a few later ones). */
const KEPT_STEPS = 16;

/**
 * A results or verl log as a ReplayRun, held in typed arrays: ~28 bytes a group and 1–13 a
 * rollout, against ~400 a group for visit objects indexed by step and by prompt (LoggedRun).
 * A step's visits are made when asked for, and the last KEPT_STEPS steps' are kept; the
 * pooled pass rates (LoggedRun.pooledRate: the visit and the prompt's visits just before and
 * after it) are computed once, in O(groups).
 */
export class PackedRun implements ReplayRun {
  readonly steps: number[] = [];
  /** Groups [from, to) of each step. */
  private readonly range = new Map<number, readonly [number, number]>();
  private readonly pooled: Float64Array;
  private readonly made = new Map<number, { visits: PackedVisit[]; byId: Map<string, PackedVisit> }>();

  constructor(private readonly groups: PackedGroups) {
    const { step, prompt, n, correct } = groups;
    const count = step.length;
    for (let g = 0; g < count; ) {
      const s = step[g]!;
      let to = g + 1;
      while (to < count && step[to] === s) to++;
      this.steps.push(s);
      this.range.set(s, [g, to]);
      g = to;
    }
    // prev[g]: the prompt's group before g (groups are in step order, one per (step, prompt)).
    const prev = new Int32Array(count);
    const next = new Int32Array(count).fill(-1);
    const last = new Int32Array(groups.prompts.length).fill(-1);
    for (let g = 0; g < count; g++) {
      const p = prompt[g]!;
      prev[g] = last[p]!;
      if (last[p]! >= 0) next[last[p]!] = g;
      last[p] = g;
    }
    this.pooled = new Float64Array(count);
    for (let g = 0; g < count; g++) {
      let k = correct[g]!;
      let m = n[g]!;
      if (prev[g]! >= 0) {
        k += correct[prev[g]!]!;
        m += n[prev[g]!]!;
      }
      if (next[g]! >= 0) {
        k += correct[next[g]!]!;
        m += n[next[g]!]!;
      }
      this.pooled[g] = m > 0 ? k / m : 0;
    }
  }

  private visitsAt(step: number): { visits: PackedVisit[]; byId: Map<string, PackedVisit> } | undefined {
    let made = this.made.get(step);
    if (made !== undefined) return made;
    const range = this.range.get(step);
    if (range === undefined) return undefined;
    if (this.made.size >= KEPT_STEPS) this.made.delete(this.made.keys().next().value!);
    const g = this.groups;
    const visits: PackedVisit[] = [];
    const byId = new Map<string, PackedVisit>();
    for (let i = range[0]; i < range[1]; i++) {
      const v = new PackedVisit(step, g.prompts[g.prompt[i]!]!, g.n[i]!, g.correct[i]!, g.rollouts, g.start[i]!, this, i);
      visits.push(v);
      byId.set(v.prompt_id, v);
    }
    this.made.set(step, (made = { visits, byId }));
    return made;
  }

  at(step: number): readonly Visit[] {
    return this.visitsAt(step)?.visits ?? [];
  }

  visit(step: number, promptId: string): Visit | undefined {
    return this.visitsAt(step)?.byId.get(promptId);
  }

  counts(step: number): StepCounts {
    const range = this.range.get(step);
    if (range === undefined) return { visits: 0, rollouts: 0, withTokens: 0 };
    const { n, start, rollouts } = this.groups;
    let total = 0;
    for (let i = range[0]; i < range[1]; i++) total += n[i]!;
    let withTokens = 0;
    if (rollouts.tokens !== undefined && total > 0) {
      const from = start[range[0]]!;
      for (let k = from; k < from + total; k++) if (rollouts.tokens[k]! >= 0) withTokens++;
    }
    return { visits: range[1] - range[0], rollouts: total, withTokens };
  }

  pooledRate(visit: Visit): number {
    if (!(visit instanceof PackedVisit) || visit.run !== this) throw new Error(`pooledRate: the visit of ${visit.prompt_id} at step ${visit.step} is not from this run`);
    return this.pooled[visit.group]!;
  }
}

/**
 * A visit whose rollouts live in its run's arrays (a PackedRun's, or a StreamedRun step's): `rewards` and `tokens` are made as arrays
 * when read (a drawer reads them once), so a million visits hold no array each.
 */
export class PackedVisit implements Visit {
  // Not own properties: a visit compares and prints as {step, prompt_id, n, correct}.
  readonly #rollouts: PackedRollouts;
  readonly #offset: number;
  readonly #run: ReplayRun;
  readonly #group: number;

  constructor(
    readonly step: number,
    readonly prompt_id: string,
    readonly n: number,
    readonly correct: number,
    rollouts: PackedRollouts,
    offset: number,
    run: ReplayRun,
    group: number,
  ) {
    this.#rollouts = rollouts;
    this.#offset = offset;
    this.#run = run;
    this.#group = group;
  }

  get run(): ReplayRun {
    return this.#run;
  }

  get group(): number {
    return this.#group;
  }

  get rewards(): number[] {
    return Array.from(this.#rollouts.rewards.subarray(this.#offset, this.#offset + this.n));
  }

  get tokens(): (number | undefined)[] {
    const t = this.#rollouts.tokens;
    const out: (number | undefined)[] = new Array(this.n);
    for (let j = 0; j < this.n; j++) {
      const v = t === undefined ? -1 : t[this.#offset + j]!;
      out[j] = v < 0 ? undefined : v;
    }
    return out;
  }
}
