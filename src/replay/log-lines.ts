import { createHash } from 'node:crypto';
import { badInput, quote } from '../errors.js';
import { field } from '../io/jsonl.js';

/** Where a results or verl log's rollouts go as its lines are read. */
export interface RolloutSink {
  add(step: number, prompt: string, reward: number, tokens: number | undefined): void;
}

/** The last verl input and its id: a group's rollouts come together, so each text is hashed once. */
export interface VerlIds {
  input: string | undefined;
  id: string;
}

export function requireStep(where: string, obj: Record<string, unknown>): number {
  const step = field.int(where, obj, 'step', 0);
  if (step === undefined) throw badInput(where, '"step" is required in a replayed log, got nothing');
  return step;
}

/** One line of a results or verl log, checked, its rollouts to `sink`. */
export function addLogLine(format: 'results' | 'verl', sink: RolloutSink, ids: VerlIds, where: string, obj: Record<string, unknown>): void {
  if (format === 'verl') addVerlLine(sink, ids, where, obj);
  else addResultLine(sink, where, obj);
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

function addResultLine(store: RolloutSink, where: string, obj: Record<string, unknown>): void {
  const prompt_id = field.string(where, obj, 'prompt_id', true)!;
  const step = requireStep(where, obj);
  if (obj.finish_reason === 'abort') return;
  if (obj.rewards !== undefined) {
    field.group(where, obj, (reward, tokens) => store.add(step, prompt_id, reward, tokens));
    return;
  }
  if (obj.reward === undefined) throw badInput(where, '"reward" is required (or "rewards" for a group), got nothing');
  store.add(step, prompt_id, field.reward(where, 'reward', obj.reward), field.int(where, obj, 'tokens', 0));
}
