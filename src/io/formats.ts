import { createHash } from 'node:crypto';
import { badInput, quote } from '../errors.js';
import type { Candidate } from '../plan/types.js';
import { fnv1a, firstRepeat } from '../math/hash.js';
import { eachJsonl, field, parseJsonl, type Located } from './jsonl.js';

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
  return id;
}

/** Parses and validates a prompts JSONL file. Unknown fields are kept. */
export function parsePrompts(text: string, name: string): Candidate[] {
  return parsePromptsAt(text, name).candidates;
}

/**
 * parsePrompts, with each prompt's place (`file:line`) by id, for messages about one prompt
 * later; `lines` is built on first read (a plan that names no prompt never pays for it).
 * Repeated ids are found by their hashes (math/hash.ts firstRepeat), so a large file makes
 * no map of its ids; the error is the one a line-by-line check would give first.
 * O(size of text + N log N).
 */
export function parsePromptsAt(text: string, name: string): { candidates: Candidate[]; lines: Map<string, string> } {
  const out: Candidate[] = [];
  let lineOf = new Int32Array(1024);
  let hashes = new Uint32Array(1024);
  const repeated = (count: number) => {
    const r = firstRepeat(count, (i) => out[i]!.id, hashes);
    return r === undefined ? undefined : badInput(`${name}:${lineOf[r.at]}`, `"id" ${quote(out[r.at]!.id)} repeats line ${lineOf[r.before]}`);
  };
  try {
    eachJsonl(text, name, (value, line) => {
      const id = checkCandidate(`${name}:${line}`, value);
      const k = out.length;
      if (k === lineOf.length) {
        lineOf = grown(lineOf, new Int32Array(2 * k));
        hashes = grown(hashes, new Uint32Array(2 * k));
      }
      lineOf[k] = line;
      hashes[k] = fnv1a(id);
      out.push(value as Candidate);
    });
  } catch (error) {
    // A repeat on an earlier line than the bad one is the first mistake in the file.
    throw repeated(out.length) ?? error;
  }
  const repeat = repeated(out.length);
  if (repeat !== undefined) throw repeat;
  let lines: Map<string, string> | undefined;
  return {
    candidates: out,
    get lines() {
      return (lines ??= new Map(out.map((c, i) => [c.id, `${name}:${lineOf[i]}`])));
    },
  };
}

function grown<T extends Int32Array | Uint32Array>(from: T, to: T): T {
  to.set(from);
  return to;
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
    const common = { prompt_id, ...(step === undefined ? {} : { step }), ...(group === undefined ? {} : { group }) };
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
