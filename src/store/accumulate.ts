import type { ResultBatch, RolloutResult } from '../io/formats.js';
import { addEvidence, type DecayOptions } from '../posterior/decay.js';
import type { PromptState } from '../posterior/state.js';
import { hintOf } from './meta.js';

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
  if (reward >= 0.5) {
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
 * Sums a batch's accepted rollouts per (prompt, step), in step order (stable), so that a
 * batch spanning several steps applies its decay in time order whatever its line order.
 * `accept(key, result)` decides per rollout (idempotency); aborted rollouts never reach it.
 */
export function accumulate(
  batch: ResultBatch,
  defaultStep: number,
  accept: (key: string, result: RolloutResult) => boolean,
): { evidence: StepEvidence[]; aborted: number; duplicates: number; applied: number } {
  const byKey = new Map<string, StepEvidence>();
  let aborted = 0;
  let duplicates = 0;
  let applied = 0;
  batch.results.forEach((r, k) => {
    if (r.finish_reason === 'abort') {
      aborted++;
      return;
    }
    if (!accept(batch.keys[k]!, r)) {
      duplicates++;
      return;
    }
    applied++;
    const step = r.step ?? defaultStep;
    const key = `${step}\u0000${r.prompt_id}`;
    let e = byKey.get(key);
    if (e === undefined) {
      e = emptyEvidence(r.prompt_id, step);
      byKey.set(key, e);
    }
    if (r.group !== undefined) e.group = r.group;
    if (r.prior_pass_rate !== undefined) {
      e.priorPassRate = r.prior_pass_rate;
      e.priorSamples = r.prior_samples;
    }
    addRollout(e, r.reward, r.tokens);
  });
  const evidence = [...byKey.values()].sort((a, b) => a.step - b.step);
  return { evidence, aborted, duplicates, applied };
}
