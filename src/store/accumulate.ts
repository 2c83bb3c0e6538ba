import type { RolloutResult } from '../io/formats.js';
import { addEvidence, behindWarning, type DecayOptions } from '../posterior/decay.js';
import type { PromptState } from '../posterior/state.js';
import { hintOf } from './meta.js';
import type { ObserveSummary } from './types.js';
import { PromptSlots } from './prompt-slots.js';
import { isCorrect } from '../fields.js';

/** Accepted rollouts of one prompt at one step, summed. */
export interface StepEvidence {
  readonly prompt_id: string;
  readonly step: number;
  group: string | null;
  successes: number;
  failures: number;
  rollouts: number;
  correctCount: number;
  correctTokens: number;
  wrongCount: number;
  wrongTokens: number;
  /** The hint the results gave (the last line's that had one), if any (store/meta.ts). */
  priorPassRate?: number;
  priorSamples?: number;
}

export function emptyEvidence(prompt_id: string, step: number): StepEvidence {
  return { prompt_id, step, group: null, successes: 0, failures: 0, rollouts: 0, correctCount: 0, correctTokens: 0, wrongCount: 0, wrongTokens: 0 };
}

/** Adds one rollout to a step's evidence. It counts as correct for the length model when reward ≥ 0.5. */
export function addRollout(e: StepEvidence, reward: number, tokens: number | undefined): void {
  e.successes += reward;
  e.failures += 1 - reward;
  e.rollouts++;
  if (tokens === undefined) return;
  if (isCorrect(reward)) {
    e.correctCount++;
    e.correctTokens += tokens;
  } else {
    e.wrongCount++;
    e.wrongTokens += tokens;
  }
}

/**
 * A prompt's state after one step's evidence: decayed evidence by `addEvidence`, raw totals
 * and length sums added. The one update rule every store (and the replay's memory state)
 * applies. O(1).
 */
export function applyEvidence(old: PromptState | undefined, e: StepEvidence, decay: DecayOptions): PromptState {
  const next = addEvidence(decay, old ?? { successes: 0, failures: 0, lastStep: e.step }, e.step, e.successes, e.failures);
  const hint = e.priorPassRate === undefined
    ? hintOf(old)
    : { priorPassRate: e.priorPassRate, ...(e.priorSamples === undefined ? {} : { priorSamples: e.priorSamples }) };
  return {
    id: e.prompt_id,
    group: e.group ?? old?.group ?? null,
    successes: next.successes,
    failures: next.failures,
    lastStep: next.lastStep,
    rollouts: (old?.rollouts ?? 0) + e.rollouts,
    rewardSum: (old?.rewardSum ?? 0) + e.successes,
    correctCount: (old?.correctCount ?? 0) + e.correctCount,
    correctTokens: (old?.correctTokens ?? 0) + e.correctTokens,
    wrongCount: (old?.wrongCount ?? 0) + e.wrongCount,
    wrongTokens: (old?.wrongTokens ?? 0) + e.wrongTokens,
    ...hint,
  };
}

/**
 * Sums accepted rollouts per (prompt, step) as they come, for a batch of any length: memory
 * grows with the distinct (prompt, step) pairs, not the rollouts. `evidence()` gives them in
 * step order (stable), so a batch spanning several steps applies its decay in time order
 * whatever its line order. A rollout's prompt is found by its slot (store/prompt-slots.ts),
 * its evidence at the batch's first step in an array by slot (a batch is usually one step),
 * at other steps in a map by step, then slot.
 */
export class EvidenceAccumulator {
  private readonly slots = new PromptSlots();
  /** The first step met, and each prompt's evidence at it, by slot. */
  private firstStep: number | undefined;
  private readonly atFirst: (StepEvidence | undefined)[] = [];
  /** Evidence at the other steps, by step, then slot. */
  private readonly atOthers = new Map<number, Map<number, StepEvidence>>();
  /** Each step's evidence, first met first, and its prompts' slots. */
  private readonly bySteps = new Map<number, { evidence: StepEvidence[]; slots: number[] }>();
  /** The (prompt, step) met last: a group's rollouts usually come together. */
  private last: StepEvidence | undefined;
  aborted = 0;
  duplicates = 0;
  applied = 0;

  constructor(private readonly defaultStep: number) {}

  /** Counts an aborted rollout (never applied, never marked seen). */
  abort(): void {
    this.aborted++;
  }

  /** Counts a rollout whose key was already applied. */
  duplicate(): void {
    this.duplicates++;
  }

  /** Adds an accepted rollout to its (prompt, step) evidence. */
  add(r: RolloutResult): void {
    this.applied++;
    const step = r.step ?? this.defaultStep;
    let e = this.last;
    if (e === undefined || e.step !== step || e.prompt_id !== r.prompt_id) this.last = e = this.find(step, r.prompt_id);
    if (r.group !== undefined) e.group = r.group;
    if (r.prior_pass_rate !== undefined) {
      e.priorPassRate = r.prior_pass_rate;
      e.priorSamples = r.prior_samples;
    }
    addRollout(e, r.reward, r.tokens);
  }

  /** The evidence of (`step`, prompt `id`), new when first met. */
  private find(step: number, id: string): StepEvidence {
    const slot = this.slots.slot(id);
    this.firstStep ??= step;
    if (step === this.firstStep) {
      while (this.atFirst.length <= slot) this.atFirst.push(undefined);
      return (this.atFirst[slot] ??= this.create(step, id, slot));
    }
    let prompts = this.atOthers.get(step);
    if (prompts === undefined) this.atOthers.set(step, (prompts = new Map()));
    let e = prompts.get(slot);
    if (e === undefined) prompts.set(slot, (e = this.create(step, id, slot)));
    return e;
  }

  private create(step: number, id: string, slot: number): StepEvidence {
    const e = emptyEvidence(id, step);
    let list = this.bySteps.get(step);
    if (list === undefined) this.bySteps.set(step, (list = { evidence: [], slots: [] }));
    list.evidence.push(e);
    list.slots.push(slot);
    return e;
  }

  /**
   * evidence(), the prompts it names (`ids`, distinct, in the order it first names them) and
   * each evidence's prompt as an index into `ids` (`at`). O(evidence).
   */
  touched(): { evidence: StepEvidence[]; ids: string[]; at: Int32Array } {
    const evidence: StepEvidence[] = [];
    const ids: string[] = [];
    const at: number[] = [];
    const place = new Int32Array(this.slots.ids.length).fill(-1);
    for (const step of this.steps()) {
      const list = this.bySteps.get(step)!;
      for (let k = 0; k < list.evidence.length; k++) {
        const slot = list.slots[k]!;
        if (place[slot] === -1) {
          place[slot] = ids.length;
          ids.push(this.slots.ids[slot]!);
        }
        evidence.push(list.evidence[k]!);
        at.push(place[slot]!);
      }
    }
    return { evidence, ids, at: Int32Array.from(at) };
  }

  /** The evidence in step order, first met first within a step. */
  evidence(): StepEvidence[] {
    return this.steps().flatMap((step) => this.bySteps.get(step)!.evidence);
  }

  private steps(): number[] {
    return [...this.bySteps.keys()].sort((a, b) => a - b);
  }
}

/**
 * An observe's summary, with its warnings when there are any: results far behind the state's
 * last step `before` (behindWarning), then `more` (the batch's repeats: BatchClaims.warnings).
 */
export function summaryOf(summary: ObserveSummary, newest: number | null, before: number | null, decay: DecayOptions, more: readonly string[] = []): ObserveSummary {
  const behind = newest === null ? undefined : behindWarning('results', newest, before, decay);
  const warnings = [...(behind === undefined ? [] : [behind]), ...more];
  return warnings.length === 0 ? summary : { ...summary, warnings };
}
