import { createHash } from 'node:crypto';
import { badInput, quote } from '../errors.js';
import type { Candidate } from '../plan/types.js';
import { field, parseJsonl, type Located } from './jsonl.js';

/** One rollout outcome, as `observe` applies it. */
export interface RolloutResult {
  readonly prompt_id: string;
  /** Absent: the state's last step + 1. */
  readonly step?: number;
  readonly reward: number;
  readonly tokens?: number;
  readonly finish_reason?: 'stop' | 'length' | 'abort';
  /** Idempotency key; absent: derived from the batch's content and the line. */
  readonly rollout_id?: string;
  /** Optional prompt group (extension), used by the learned prior. */
  readonly group?: string;
  /** Optional offline hint of the prompt (as in the prompts file), remembered by the state. */
  readonly prior_pass_rate?: number;
  readonly prior_samples?: number;
}

/** A batch of results with a stable identity, for idempotent observe. */
export interface ResultBatch {
  readonly results: RolloutResult[];
  /** sha256 of the source text (or of the canonical JSON of the results). */
  readonly digest: string;
  /** Keys for results without a rollout_id: `auto:<digest>:<line>:<index in line>`. */
  readonly keys: string[];
}

const FINISH = new Set(['stop', 'length', 'abort']);

/**
 * Checks one candidate's fields (a prompts line, a service request's candidate) and returns
 * its id; throws BAD_INPUT naming `where`, the field and the value. Unknown fields are kept.
 */
export function checkCandidate(where: string, value: Record<string, unknown>): string {
  const id = field.string(where, value, 'id', true)!;
  field.int(where, value, 'prompt_tokens', 0);
  field.int(where, value, 'max_tokens', 1);
  field.string(where, value, 'group', false);
  field.rewards(where, value, 'partial_rewards');
  field.hint(where, value);
  return id;
}

/** Parses and validates a prompts JSONL file. Unknown fields are kept. */
export function parsePrompts(text: string, name: string): Candidate[] {
  return parsePromptsAt(text, name).candidates;
}

/** parsePrompts, with each prompt's place (`file:line`) by id, for messages about one prompt later. */
export function parsePromptsAt(text: string, name: string): { candidates: Candidate[]; lines: Map<string, string> } {
  const out: Candidate[] = [];
  const seen = new Map<string, number>();
  const lines = new Map<string, string>();
  for (const { where, line, value } of parseJsonl(text, name)) {
    const id = checkCandidate(where, value);
    const before = seen.get(id);
    if (before !== undefined) throw badInput(where, `"id" ${quote(id)} repeats line ${before}`);
    seen.set(id, line);
    lines.set(id, where);
    out.push(value as Candidate);
  }
  return { candidates: out, lines };
}

export function digestOf(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * Parses a results JSONL file: one rollout per line ({prompt_id, step?, reward, tokens?,
 * finish_reason?, rollout_id?}) or one group per line ({prompt_id, step?, rewards: [..],
 * tokens?: [..]}).
 */
export function parseResults(text: string, name: string): ResultBatch {
  return validateResults(parseJsonl(text, name), digestOf(text));
}

/**
 * Validates result objects given in memory (library and service use). Errors name
 * `results[i]`; keys for lines without a rollout_id come from the canonical JSON.
 */
export function batchOf(items: readonly unknown[], name = 'results'): ResultBatch {
  const located = items.map((value, i) => {
    const where = `${name}[${i}]`;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw badInput(where, `each result must be a JSON object, got ${quote(value)}`);
    }
    return { where, line: i + 1, value: value as Record<string, unknown> };
  });
  let canonical: string;
  try {
    canonical = JSON.stringify(items);
  } catch (error) {
    throw badInput(name, `cannot be written as JSON (${(error as Error).message}): nested too deep, or circular`);
  }
  return validateResults(located, digestOf(canonical));
}

function validateResults(items: readonly Located<Record<string, unknown>>[], digest: string): ResultBatch {
  const results: RolloutResult[] = [];
  const keys: string[] = [];
  for (const { where, line, value } of items) {
    const prompt_id = field.string(where, value, 'prompt_id', true)!;
    const step = field.int(where, value, 'step', 0);
    const group = field.string(where, value, 'group', false);
    const common = { prompt_id, ...(step === undefined ? {} : { step }), ...(group === undefined ? {} : { group }), ...field.hint(where, value) };
    if (value.rewards !== undefined) {
      if (value.reward !== undefined) throw badInput(where, 'give "reward" (one rollout) or "rewards" (a group), not both');
      const rewards = value.rewards;
      if (!Array.isArray(rewards) || rewards.length === 0) throw badInput(where, `"rewards" must be a non-empty array, got ${quote(rewards)}`);
      const tokens = value.tokens;
      if (tokens !== undefined && (!Array.isArray(tokens) || tokens.length !== rewards.length)) {
        throw badInput(where, `"tokens" must be an array as long as "rewards" (${rewards.length}), got ${quote(tokens)}`);
      }
      rewards.forEach((r, j) => {
        const reward = field.reward(where, `rewards[${j}]`, r);
        const t = tokens === undefined ? undefined : tokens[j];
        if (t !== undefined && (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 0)) {
          throw badInput(where, `"tokens[${j}]" must be a non-negative integer, got ${quote(t)}`);
        }
        results.push({ ...common, reward, ...(t === undefined ? {} : { tokens: t as number }) });
        keys.push(`auto:${digest}:${line}:${j}`);
      });
      continue;
    }
    if (value.reward === undefined) throw badInput(where, '"reward" is required (or "rewards" for a group), got nothing');
    const reward = field.reward(where, 'reward', value.reward);
    const tokens = field.int(where, value, 'tokens', 0);
    const finish = value.finish_reason;
    if (finish !== undefined && (typeof finish !== 'string' || !FINISH.has(finish))) {
      throw badInput(where, `"finish_reason" must be "stop", "length" or "abort", got ${quote(finish)}`);
    }
    const rollout_id = field.string(where, value, 'rollout_id', false);
    results.push({
      ...common,
      reward,
      ...(tokens === undefined ? {} : { tokens }),
      ...(finish === undefined ? {} : { finish_reason: finish as RolloutResult['finish_reason'] }),
      ...(rollout_id === undefined ? {} : { rollout_id }),
    });
    keys.push(rollout_id ?? `auto:${digest}:${line}:0`);
  }
  return { results, digest, keys };
}
