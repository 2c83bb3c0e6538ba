import type { ResultBatch, RolloutResult } from '../io/formats.js';

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
}

/**
 * Sums a batch's accepted rollouts per (prompt, step), in step order (stable), so that a
 * batch spanning several steps applies its decay in time order whatever its line order.
 * `accept(key, result)` decides per rollout (idempotency); aborted rollouts never reach it.
 * A rollout counts as correct for the length model when reward ≥ 0.5.
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
      e = { prompt_id: r.prompt_id, step, group: null, successes: 0, failures: 0, rollouts: 0, correctCount: 0, correctTokens: 0, wrongCount: 0, wrongTokens: 0 };
      byKey.set(key, e);
    }
    if (r.group !== undefined) e.group = r.group;
    e.successes += r.reward;
    e.failures += 1 - r.reward;
    e.rollouts++;
    if (r.tokens !== undefined) {
      if (r.reward >= 0.5) {
        e.correctCount++;
        e.correctTokens += r.tokens;
      } else {
        e.wrongCount++;
        e.wrongTokens += r.tokens;
      }
    }
  });
  const evidence = [...byKey.values()].sort((a, b) => a.step - b.step);
  return { evidence, aborted, duplicates, applied };
}
