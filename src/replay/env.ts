import type { Random } from '../math/beta.js';
import type { Budget, Candidate } from '../plan/types.js';
import type { Environment, GroupDrawer, World } from './types.js';
import type { ReplayRun, Visit } from './visits.js';
import { isCorrect } from '../fields.js';

/**
 * Draws a logged visit's outcomes one at a time. The first `visit.n` come from the logged
 * group without replacement (exact: any subset of a real group is a real group); beyond it,
 * Bernoulli(pooled rate of the neighbouring visits), a model, with tokens the group's mean
 * length of that outcome class (else of the other class; null when no lengths were logged).
 */
export function visitDrawer(visit: Visit, pooledRate: number, random: Random): GroupDrawer {
  const rewards = visit.rewards;
  const tokens = visit.tokens;
  let right = visit.correct;
  let left = visit.n;
  const pool = rewards === undefined ? null : rewards.map((_, j) => j);
  const meanTokens = (correct: boolean): number | null => {
    if (rewards === undefined || tokens === undefined) return null;
    let sum = 0;
    let count = 0;
    let other = 0;
    let otherCount = 0;
    rewards.forEach((r, j) => {
      const t = tokens[j];
      if (t === undefined) return;
      if (isCorrect(r) === correct) {
        sum += t;
        count++;
      } else {
        other += t;
        otherCount++;
      }
    });
    if (count > 0) return Math.round(sum / count);
    return otherCount > 0 ? Math.round(other / otherCount) : null;
  };
  return {
    next() {
      if (pool !== null && pool.length > 0) {
        const k = Math.floor(random() * pool.length);
        const j = pool[k]!;
        pool[k] = pool[pool.length - 1]!;
        pool.pop();
        return { reward: rewards![j]!, tokens: tokens?.[j] ?? null };
      }
      if (pool === null && left > 0) {
        const r = random() * left < right ? 1 : 0;
        right -= r;
        left--;
        return { reward: r, tokens: null };
      }
      const r = random() < pooledRate ? 1 : 0;
      return { reward: r, tokens: meanTokens(r === 1), modelled: true };
    },
  };
}

/** How many steps' batches replayEnvironment keeps made. */
const KEPT_BATCHES = 64;

/**
 * A logged run as an environment. Each policy's world (fork) draws a logged visit's outcomes
 * at most once: a visit generated again at a later step (a prompt pulled ahead by a refill or
 * pool and then offered in its own batch, with `--stream shared`) continues the same draw,
 * so past the logged group it gets pooled-rate draws instead of reusing logged outcomes.
 */
export function replayEnvironment(run: ReplayRun, promptTokens?: ReadonlyMap<string, number>): Environment {
  const visitAt = (step: number, id: string): Visit => {
    const v = run.visit(step, id);
    if (v === undefined) throw new Error(`no logged visit of ${id} at step ${step}`);
    return v;
  };
  // A step's batch is made when asked for; the last KEPT_BATCHES steps' are kept (a replay
  // asks for the step it plays and a few later ones), so a long log holds no batch per step.
  const batches = new Map<number, Candidate[]>();
  const batchOf = (step: number): Candidate[] => {
    let batch = batches.get(step);
    if (batch === undefined) {
      batch = run.at(step).map((v) => {
        const t = promptTokens?.get(v.prompt_id);
        return t === undefined ? { id: v.prompt_id } : { id: v.prompt_id, prompt_tokens: t };
      });
      if (batches.size >= KEPT_BATCHES) batches.delete(batches.keys().next().value!);
      batches.set(step, batch);
    }
    return batch;
  };
  return {
    kind: 'replay',
    steps: run.steps,
    batch: batchOf,
    defaultBudget: (step): Budget => ({ rollouts: run.at(step).reduce((s, v) => s + v.n, 0) }),
    fork(): World {
      // Drawers by source step, then prompt. A step generates prompts of its own batch or of
      // later ones, never of earlier ones: drawers of sources before the step are dropped,
      // so a long replay holds the drawers of a few steps, not of every visit.
      const drawn = new Map<number, Map<string, GroupDrawer>>();
      return {
        drawer: (step, source, id, random) => {
          for (const s of drawn.keys()) if (s < step) drawn.delete(s);
          let bySource = drawn.get(source);
          if (bySource === undefined) drawn.set(source, (bySource = new Map()));
          let d = bySource.get(id);
          if (d === undefined) {
            const v = visitAt(source, id);
            bySource.set(id, (d = visitDrawer(v, run.pooledRate(v), random)));
          }
          return d;
        },
        passRate: (source, id) => run.pooledRate(visitAt(source, id)),
        train: () => undefined,
      };
    },
  };
}
