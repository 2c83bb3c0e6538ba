import { createHash } from 'node:crypto';
import { badInput, quote } from '../errors.js';
import { field } from '../fields.js';
import { checkResultExtras } from '../io/results.js';

/** Where a results or verl log's rollouts go as its lines are read. */
export interface RolloutSink {
  add(step: number, prompt: string, reward: number, tokens: number | undefined): void;
}

/** The last verl input and its id: a group's rollouts come together, so each text is hashed once. */
export interface VerlIds {
  input: string | undefined;
  id: string;
}

/**
 * The rollout ids a results log gave at each step, so a line that repeats one is counted once,
 * as `observe` counts it (a crash can write a resumed rollout twice: docs/executor.md). Read in
 * step order (a streamed log), the ids of steps before the latest are dropped: memory holds one
 * step's ids. A repeat in another step is a different rollout here (results ids carry their step).
 */
export class SeenRollouts {
  private readonly byStep = new Map<number, Set<string>>();
  private latest = -Infinity;
  /** Lines skipped as repeats, and where the first was. */
  repeats = 0;
  firstRepeat: string | undefined;

  constructor(private readonly inStepOrder: boolean) {}

  /** Whether `id` is new at `step` (then remembered); a repeat is counted. */
  fresh(step: number, id: string, where: string): boolean {
    if (this.inStepOrder && step > this.latest) {
      this.byStep.clear();
      this.latest = step;
    }
    let ids = this.byStep.get(step);
    if (ids === undefined) this.byStep.set(step, (ids = new Set()));
    if (!ids.has(id)) {
      ids.add(id);
      return true;
    }
    this.repeats++;
    this.firstRepeat ??= where;
    return false;
  }
}

export function requireStep(where: string, obj: Record<string, unknown>): number {
  const step = field.int(where, obj, 'step', 0); // any step: our planner's bound is checked where it plans (cli/replay.ts)
  if (step === undefined) throw badInput(where, '"step" is required in a replayed log, got nothing');
  return step;
}

/** One line of a results or verl log, checked, its rollouts to `sink`. */
export function addLogLine(format: 'results' | 'verl', sink: RolloutSink, ids: VerlIds, where: string, obj: Record<string, unknown>, seen?: SeenRollouts): void {
  if (format === 'verl') addVerlLine(sink, ids, where, obj);
  else addResultLine(sink, where, obj, seen);
}

function addVerlLine(store: RolloutSink, ids: VerlIds, where: string, obj: Record<string, unknown>): void {
  const step = requireStep(where, obj);
  if (typeof obj.input !== 'string') throw badInput(where, `"input" must be a string, got ${quote(obj.input)}`);
  const score = obj.score;
  if (typeof score !== 'number' && typeof score !== 'boolean') throw badInput(where, `"score" must be a number, got ${quote(score)}`);
  const reward = typeof score === 'boolean' ? (score ? 1 : 0) : score;
  if (!Number.isFinite(reward)) throw badInput(where, `"score" must be a finite number, got ${quote(score)}`);
  if (obj.input !== ids.input) {
    ids.input = obj.input;
    ids.id = `verl:${createHash('sha256').update(obj.input).digest('hex').slice(0, 16)}`;
  }
  // verl scores are rewards of any scale (e.g. -1/1 or 0/1): a rollout is correct when score > 0.
  store.add(step, ids.id, reward > 0 ? 1 : 0, undefined);
}

function addResultLine(store: RolloutSink, where: string, obj: Record<string, unknown>, seen?: SeenRollouts): void {
  checkResultExtras(where, obj); // with the checks below, what observe checks: the format is observe's
  const prompt_id = field.string(where, obj, 'prompt_id', true)!;
  const step = requireStep(where, obj);
  if (obj.finish_reason === 'abort') return;
  const id = obj.rollout_id;
  if (seen !== undefined && typeof id === 'string' && id !== '' && !seen.fresh(step, id, where)) return;
  if (obj.rewards !== undefined) {
    field.group(where, obj, (reward, tokens) => store.add(step, prompt_id, reward, tokens));
    return;
  }
  if (obj.reward === undefined) throw badInput(where, '"reward" is required (or "rewards" for a group), got nothing');
  store.add(step, prompt_id, field.reward(where, 'reward', obj.reward), field.tokens(where, obj, 'tokens', 0));
}
