import type { Candidate } from '../plan/types.js';
import { snapshotOf, type PromptState, type StateSnapshot } from '../posterior/state.js';
import { partialSnapshot, PooledDeltas, withDeltas, type PartialSnapshot } from './pooled.js';

/**
 * What the state remembers about a prompt besides its evidence: its `group` and its offline
 * hint (`prior_pass_rate`, `prior_samples`). The state learns them when the prompt is planned
 * (its candidate line) or observed (its results lines), so the learned prior and the hint
 * calibration count a prompt's group and hint without the results repeating them.
 *
 * Recording is a metadata upsert that never touches evidence, and is idempotent: recording the
 * same metadata twice changes nothing, and a plan records only what differs from the state
 * (`metaChanges`), so plans of candidates without a group or hint write nothing at all. The
 * rule, one for every store and the replay's memory state (`withMeta`):
 * - a given `group` replaces the stored one; an absent one keeps it;
 * - a given `prior_pass_rate` replaces the stored hint, with its `prior_samples` (absent:
 *   none); an absent one keeps the stored hint.
 * A prompt recorded before any evidence has a state with zero evidence, no rollouts and
 * `lastStep` −1 (below every step, so its first results apply undiscounted); it counts in no
 * pooled figure and no prompt count until it is observed.
 */
export interface PromptMeta {
  readonly id: string;
  readonly group?: string;
  readonly priorPassRate?: number;
  readonly priorSamples?: number;
}

/** `lastStep` of a prompt recorded before any evidence. */
export const NO_STEP = -1;

/** The metadata a candidate carries, or undefined when it carries none. O(1). */
export function metaOf(c: Candidate): PromptMeta | undefined {
  if (c.group === undefined && c.prior_pass_rate === undefined) return undefined;
  return {
    id: c.id,
    ...(c.group === undefined ? {} : { group: c.group }),
    ...(c.prior_pass_rate === undefined ? {} : { priorPassRate: c.prior_pass_rate }),
    ...(c.prior_samples === undefined ? {} : { priorSamples: c.prior_samples }),
  };
}

/**
 * What a results line repeats of its prompt so the state learns it (above): its
 * `group` and offline hint, when the candidate has them. The executor and `grade` write these.
 */
export function promptMetaFields(c: Candidate): { group?: string; prior_pass_rate?: number; prior_samples?: number } {
  return {
    ...(typeof c.group === 'string' ? { group: c.group } : {}),
    ...(typeof c.prior_pass_rate === 'number' ? { prior_pass_rate: c.prior_pass_rate } : {}),
    ...(typeof c.prior_pass_rate === 'number' && typeof c.prior_samples === 'number' ? { prior_samples: c.prior_samples } : {}),
  };
}

/** Whether recording `m` would change `s` (withMeta's rule). O(1). */
export function metaDiffers(s: PromptState | undefined, m: PromptMeta): boolean {
  if (s === undefined) return true;
  if (m.group !== undefined && m.group !== s.group) return true;
  return m.priorPassRate !== undefined && (m.priorPassRate !== s.priorPassRate || m.priorSamples !== s.priorSamples);
}

/** The candidates' metadata that differs from what `snapshot` holds, in candidate order. O(N). */
export function metaChanges(snapshot: StateSnapshot, candidates: readonly Candidate[]): PromptMeta[] {
  const out: PromptMeta[] = [];
  // An index loop: a plan runs this once, and unoptimized, for-of made an iterator result a
  // candidate (10⁶: 38 MB).
  for (let i = 0; i < candidates.length; i++) {
    const c = candidates[i]!;
    const m = metaOf(c);
    if (m !== undefined && metaDiffers(snapshot.get(c.id), m)) out.push(m);
  }
  return out;
}

/** A prompt's state after recording `m` (the rule above). O(1). */
export function withMeta(old: PromptState | undefined, m: PromptMeta): PromptState {
  const base: PromptState = old ?? {
    id: m.id, group: null, successes: 0, failures: 0, lastStep: NO_STEP, rollouts: 0, rewardSum: 0,
    correctCount: 0, correctTokens: 0, wrongCount: 0, wrongTokens: 0,
  };
  const { priorPassRate: _rate, priorSamples: _samples, ...rest } = base;
  const hint = m.priorPassRate === undefined
    ? hintOf(base)
    : { priorPassRate: m.priorPassRate, ...(m.priorSamples === undefined ? {} : { priorSamples: m.priorSamples }) };
  return { ...rest, group: m.group ?? base.group, ...hint };
}

/**
 * A list of records with each id once, as recording them in order would leave it: per id, the
 * last group given and the last hint given (with its samples). For stores that write a list in
 * one statement. O(N).
 */
export function mergeMeta(meta: readonly PromptMeta[]): PromptMeta[] {
  const byId = new Map<string, PromptMeta>();
  for (const m of meta) {
    const before = byId.get(m.id);
    if (before === undefined) {
      byId.set(m.id, m);
      continue;
    }
    const group = m.group ?? before.group;
    const hint = m.priorPassRate === undefined ? before : m;
    byId.set(m.id, {
      id: m.id,
      ...(group === undefined ? {} : { group }),
      ...(hint.priorPassRate === undefined ? {} : { priorPassRate: hint.priorPassRate }),
      ...(hint.priorPassRate === undefined || hint.priorSamples === undefined ? {} : { priorSamples: hint.priorSamples }),
    });
  }
  return [...byId.values()];
}

/** A state's hint fields, for copying onto another state. */
export function hintOf(s: PromptState | undefined): Pick<PromptState, 'priorPassRate' | 'priorSamples'> {
  if (s?.priorPassRate === undefined) return {};
  return { priorPassRate: s.priorPassRate, ...(s.priorSamples === undefined ? {} : { priorSamples: s.priorSamples }) };
}

/**
 * The snapshot as it will read once `changes` are recorded, so a plan made before the write
 * (nothing is written when planning fails) equals one made after it. Only a change to a prompt
 * with evidence moves pooled figures (its group's prior, the hint calibration); a prompt
 * without evidence counts in none, and the planner reads a candidate's own group and hint
 * from the candidate. So the snapshot is rebuilt only when an observed prompt changes (a
 * group or hint given for the first time to a prompt already observed): a snapshot of every
 * prompt is summed again, O(N); a partial one (the service's, store/pooled.ts) gets its
 * prompts replaced, the prompts' changes added to its pooled rows and its hinted list
 * updated, O(candidates + hinted). Any other snapshot is returned as is.
 */
export function snapshotWithMeta(snapshot: StateSnapshot, changes: readonly PromptMeta[]): StateSnapshot {
  const observed = changes.filter((m) => (snapshot.get(m.id)?.rollouts ?? 0) > 0);
  if (observed.length === 0) return snapshot;
  const byId = new Map(observed.map((m) => [m.id, m]));
  const parts = (snapshot as Partial<PartialSnapshot>).parts;
  if (snapshot.states === undefined && parts !== undefined) {
    const deltas = new PooledDeltas();
    const changed = new Map<string, PromptState>();
    const states = parts.states.map((s) => {
      const m = byId.get(s.id);
      if (m === undefined) return s;
      const next = withMeta(s, m);
      deltas.change(s, next);
      changed.set(s.id, next);
      return next;
    });
    let hinted = parts.hinted?.map((s) => changed.get(s.id) ?? s);
    if (hinted !== undefined) {
      const listed = new Set(hinted.map((s) => s.id));
      for (const s of changed.values()) if (!listed.has(s.id) && s.priorPassRate !== undefined && s.successes + s.failures > 0) hinted.push(s);
      hinted = hinted.filter((s) => s.priorPassRate !== undefined);
    }
    return partialSnapshot(states, withDeltas(parts.pooled, deltas), snapshot.lastStep, hinted);
  }
  if (snapshot.states === undefined) return snapshot;
  const states = snapshot.states().map((s) => {
    const m = byId.get(s.id);
    return m === undefined ? s : withMeta(s, m);
  });
  return snapshotOf(states, snapshot.lastStep);
}
