import { badInput, quote } from '../errors.js';
import { MAX_STEP } from '../posterior/decay.js';
import { sha256 } from './chunks.js';
import { compact, eachFlatJsonl, eachFlatJsonlText, FALSE, NUMBER, STRING, TRUE, type FlatFields } from './flat-scan.js';
import { field, MAX_STORED_TEXT } from '../fields.js';
import { MAX_ROLLOUT_ID } from './jsonl.js';
import { MAX_TOKEN_COUNT } from '../posterior/length.js';

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

/**
 * A part of a batch, in order: results and, by `key(k)`, result k's idempotency key (as
 * ResultBatch.keys gives it; made on demand, since a keyless result's key is long and a store
 * needs few of them).
 */
export interface ResultChunk {
  readonly results: readonly RolloutResult[];
  key(k: number): string;
  /** Where result k was read (`file:line`), when the source knows (a file); for messages. */
  where?(k: number): string;
}

/**
 * Takes a result as it is read, before its chunk is complete, in line order: true when it
 * has dealt with the result, which its chunk then leaves out (its key is never asked); false
 * to leave it in the chunk. A store passing one reads a chunk's results before it asks for
 * the next chunk (store/claims.ts BatchClaims.taker).
 */
export type ResultTaker = (result: RolloutResult) => boolean;

/**
 * A batch read in bounded chunks (a results file of any size): its digest (the keys of lines
 * without a rollout_id need it; a file source reads it when first asked), and `chunks()`,
 * which validates and yields the results in order, each offered first to `take` when given
 * (a source may ignore it, and keep every result in its chunk). `chunks()` may be called
 * again (a store that retries reads it again); a bad line throws BAD_INPUT from the
 * iteration, so a store applies nothing of it.
 */
export interface ResultSource {
  readonly digest: string;
  chunks(take?: ResultTaker): Iterable<ResultChunk>;
}

/** A batch held in memory as a source of one chunk. */
export function sourceOfBatch(batch: ResultBatch): ResultSource {
  return { digest: batch.digest, chunks: () => [{ results: batch.results, key: (k) => batch.keys[k]! }] };
}

/** Where results go as they are validated: each with its line and its index in the line. */
type Sink = (result: RolloutResult, line: number, index: number) => void;

/** A sink that keeps the results and their keys (a ResultBatch's arrays). */
function batchSink(digest: string, results: RolloutResult[], keys: string[]): Sink {
  return (r, line, index) => {
    results.push(r);
    keys.push(r.rollout_id ?? autoKey(digest, line, index));
  };
}

/**
 * A chunk of a file's results (those `take` leaves) that keeps their places, not their keys
 * (io/result-file.ts reads a file in these).
 */
export class LinesChunk implements ResultChunk {
  readonly results: RolloutResult[] = [];
  private readonly lines: number[] = [];
  private readonly indexes: number[] = [];
  readonly sink: Sink = (r, line, index) => {
    if (this.take !== undefined && this.take(r)) return;
    this.results.push(r);
    this.lines.push(line);
    this.indexes.push(index);
  };

  constructor(
    private readonly source: ResultSource,
    private readonly take: ResultTaker | undefined,
    private readonly name: string,
  ) {}

  key(k: number): string {
    return this.results[k]!.rollout_id ?? autoKey(this.source.digest, this.lines[k]!, this.indexes[k]!);
  }

  where(k: number): string {
    return `${this.name}:${this.lines[k]!}`;
  }
}

/** The key of a result without a rollout_id: `auto:<digest>:<line>:<index in line>`. */
export function autoKey(digest: string, line: number, index: number): string {
  return `auto:${digest}:${line}:${index}`;
}

/**
 * The key standing for every keyless result of a batch at once: a batch applies whole or not
 * at all, so its keyless results were all applied or none were (store/claims.ts).
 */
export function batchKey(digest: string): string {
  return `auto:${digest}`;
}

const FINISH = new Set(['stop', 'length', 'abort']);

export function digestOf(text: string): string {
  return sha256().update(text).digest('hex');
}

/**
 * Parses a results JSONL file: one rollout per line ({prompt_id, step?, reward, tokens?,
 * finish_reason?, rollout_id?}) or one group per line ({prompt_id, step?, rewards: [..],
 * tokens?: [..], finish_reason?}: every rollout's).
 */
export function parseResults(text: string, name: string): ResultBatch {
  const digest = digestOf(text);
  const results: RolloutResult[] = [];
  const keys: string[] = [];
  resultsOfText(text, name, batchSink(digest, results, keys));
  return made({ results, digest, keys });
}

/**
 * The batches parseResults and batchOf made, whose results they checked (kept weakly), with their
 * results array and its length then: a batch whose results a caller replaced or grew since is
 * checked again.
 */
const madeBatches = new WeakMap<ResultBatch, { results: readonly RolloutResult[]; length: number }>();

function made(batch: ResultBatch): ResultBatch {
  madeBatches.set(batch, { results: batch.results, length: batch.results.length });
  return batch;
}

/**
 * A ResultBatch given to observe by a library caller: as parseResults or batchOf made it, or
 * one built by hand, whose results are checked here as observe checks a line (a reward of 5
 * was applied, as a negative failure count), its keys one string a result. Errors name
 * `results.results[k]`. O(results).
 */
export function checkedBatch(batch: unknown): ResultBatch {
  if (batch === null || typeof batch !== 'object') throw badInput('results', `must be an array of results, or a batch from batchOf or parseResults, got ${quote(batch)}`);
  const known = madeBatches.get(batch as ResultBatch);
  if (known !== undefined && known.results === (batch as ResultBatch).results && known.length === known.results.length) return batch as ResultBatch;
  const { results, digest, keys } = batch as Partial<Record<keyof ResultBatch, unknown>>;
  if (!Array.isArray(results)) throw badInput('results.results', `must be an array of results, got ${quote(results)}`);
  if (typeof digest !== 'string' || digest === '') throw badInput('results.digest', `must be a non-empty string, got ${quote(digest)}`);
  if (!Array.isArray(keys) || keys.length !== results.length) throw badInput('results.keys', `must be an array of one key a result (${results.length}), got ${quote(keys)}`);
  for (let k = 0; k < results.length; k++) {
    const where = `results.results[${k}]`;
    const value: unknown = results[k];
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw badInput(where, `each result must be an object, got ${quote(value)}`);
    if ((value as Record<string, unknown>).rewards !== undefined) throw badInput(where, `a batch's result is one rollout ("reward"), not a group ("rewards"): pass the lines to observe as an array instead`);
    validateResult(where, 0, value as Record<string, unknown>, () => undefined);
    const key: unknown = keys[k];
    if (typeof key !== 'string' || key === '') throw badInput(`results.keys[${k}]`, `must be a non-empty string, got ${quote(key)}`);
  }
  return batch as ResultBatch; // not recorded: the caller may change it before observing it again
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
  return made(validateResults(located, digestOf(canonical)));
}

function validateResults(items: readonly { where: string; line: number; value: Record<string, unknown> }[], digest: string): ResultBatch {
  const results: RolloutResult[] = [];
  const keys: string[] = [];
  const sink = batchSink(digest, results, keys);
  for (const { where, line, value } of items) validateResult(where, line, value, sink);
  return { results, digest, keys };
}

/**
 * Parses JSONL text of results into `sink`: plain one-rollout lines by the scanner
 * (io/flat-scan.ts), the others as validateResult checks them. `piece`: the text is a piece
 * of a file, with its bytes (UTF-8) and the number of its first line; else a whole text.
 */
export function resultsOfText(text: string, name: string, sink: Sink, piece?: { bytes: Buffer; firstLine: number }): void {
  const fast = (fields: FlatFields, line: number) => plainResult(fields, line, sink);
  const each = (value: Record<string, unknown>, line: number) => validateResult(`${name}:${line}`, line, value, sink);
  if (piece === undefined) eachFlatJsonlText(text, name, fast, each);
  else eachFlatJsonl(text, piece.bytes, name, fast, each, piece.firstLine);
}

const NO_HINT = {};

/**
 * A scanned line (io/flat-scan.ts) of one rollout that validateResult would surely accept,
 * passed to `sink` as it would pass it; false, having done nothing, for anything else
 * (`rewards`, the hint fields, a missing or odd value: the careful path decides). Unknown
 * fields are ignored, as validateResult ignores them.
 */
function plainResult(f: FlatFields, line: number, sink: Sink): boolean {
  let prompt_id: string | undefined;
  let step: number | undefined;
  let reward: number | undefined;
  let tokens: number | undefined;
  let finish: string | undefined;
  let rollout_id: string | undefined;
  let group: string | undefined;
  for (let k = 0; k < f.count; k++) {
    const key = f.keys[k]!;
    const kind = f.kinds[k];
    const number = f.numbers[k]!;
    const text = kind === STRING ? f.strings[k]! : '';
    switch (key) {
      case 'prompt_id':
        if (text === '' || text.length > MAX_STORED_TEXT) return false;
        prompt_id = text;
        break;
      case 'step':
      case 'tokens':
        if (kind !== NUMBER || !Number.isSafeInteger(number) || number < 0 || number > (key === 'step' ? MAX_STEP : MAX_TOKEN_COUNT)) return false;
        if (key === 'step') step = compact(number);
        else tokens = compact(number);
        break;
      case 'reward':
        if (kind === TRUE || kind === FALSE) reward = kind === TRUE ? 1 : 0;
        else if (kind === NUMBER && number >= 0 && number <= 1) reward = compact(number);
        else return false;
        break;
      case 'finish_reason':
        if (!FINISH.has(text)) return false;
        finish = text;
        break;
      case 'rollout_id':
        if (text === '' || text.length > MAX_ROLLOUT_ID) return false;
        rollout_id = text;
        break;
      case 'group':
        if (text === '' || text.length > MAX_STORED_TEXT) return false;
        group = text;
        break;
      case 'rewards':
      case 'prior_pass_rate':
      case 'prior_samples':
        return false;
    }
  }
  if (prompt_id === undefined || reward === undefined) return false;
  sink(result(prompt_id, step, group, reward, tokens, finish as RolloutResult['finish_reason'], rollout_id, NO_HINT), line, 0);
  return true;
}

/**
 * Checks one results line as `observe` does (every field, an aborted line's too), or throws
 * BAD_INPUT naming the place, field and value: `replay` reads the same format and took lines
 * `observe` refuses ("finish_reason": "eos" counted as a rollout). O(line).
 */
export function checkResultLine(where: string, value: Record<string, unknown>): void {
  validateResult(where, 0, value, () => undefined, false); // the step: replay takes any (its planner checks its own bound)
}

/**
 * The checks of a results line that `replay` makes beside its own (prompt_id, step, a kept
 * line's reward, tokens and group rewards), so that it refuses what observe refuses at a few
 * property reads a line: group, the hint, finish_reason, rollout_id (and none on a group line),
 * and an aborted line's reward, which replay skips. checkResultLine is the whole check, at
 * about a third more time a line read.
 */
export function checkResultExtras(where: string, value: Record<string, unknown>): void {
  if (value.group !== undefined) field.string(where, value, 'group', false);
  if (value.prior_pass_rate !== undefined || value.prior_samples !== undefined) field.hint(where, value);
  if (value.rewards !== undefined) {
    if (value.rollout_id !== undefined) checkResultLine(where, value); // its message
    if (finishReason(where, value) === 'abort') checkResultLine(where, value); // replay skips it: its rewards checked here
    return;
  }
  const finish = finishReason(where, value);
  if (value.rollout_id !== undefined) field.string(where, value, 'rollout_id', false, MAX_ROLLOUT_ID);
  if (finish === 'abort') checkResultLine(where, value); // replay skips it: every field checked here
}

/**
 * Checks one results line (one rollout, or one group) and passes its rollouts to `sink`;
 * throws BAD_INPUT naming `where`, the field and the value (`checkStep` false: any step).
 */
function validateResult(where: string, line: number, value: Record<string, unknown>, sink: Sink, checkStep = true): void {
  const prompt_id = field.string(where, value, 'prompt_id', true)!;
  const step = checkStep ? field.step(where, value) : undefined;
  const group = field.string(where, value, 'group', false);
  const hint = field.hint(where, value);
  if (value.rewards !== undefined) {
    // Its rollouts are keyed by the batch's digest and their place in it: an id here was
    // ignored, and the same group observed again in another file was counted twice.
    if (value.rollout_id !== undefined) {
      throw badInput(where, `"rollout_id" ${quote(value.rollout_id)} on a group line ("rewards"), which has no single rollout to name: give one line a rollout, each with its own rollout_id, or leave it out (then the group is known by the file's digest)`);
    }
    // Its finish_reason is every rollout's: "abort" on a group line was applied as evidence (replay skipped it), "eos" taken.
    const groupFinish = finishReason(where, value);
    field.group(where, value, (reward, tokens, j) => sink(result(prompt_id, step, group, reward, tokens, groupFinish, undefined, hint), line, j));
    return;
  }
  if (value.reward === undefined) throw badInput(where, '"reward" is required (or "rewards" for a group), got nothing');
  const reward = field.reward(where, 'reward', value.reward);
  const tokens = field.tokens(where, value, 'tokens', 0);
  const finish = finishReason(where, value);
  const rollout_id = field.string(where, value, 'rollout_id', false, MAX_ROLLOUT_ID);
  sink(result(prompt_id, step, group, reward, tokens, finish, rollout_id, hint), line, 0);
}

/** A line's `finish_reason`: "stop", "length", "abort" or absent; else BAD_INPUT naming it. */
function finishReason(where: string, value: Record<string, unknown>): RolloutResult['finish_reason'] {
  const finish = value.finish_reason;
  if (finish !== undefined && (typeof finish !== 'string' || !FINISH.has(finish))) {
    throw badInput(where, `"finish_reason" must be "stop", "length" or "abort", got ${quote(finish)}`);
  }
  return finish as RolloutResult['finish_reason'];
}

/**
 * A result object. Every result has the same fields in the same order (absent ones are
 * undefined, which JSON leaves out), so code reading a million of them sees one shape.
 */
function result(
  prompt_id: string, step: number | undefined, group: string | undefined, reward: number, tokens: number | undefined,
  finish_reason: RolloutResult['finish_reason'], rollout_id: string | undefined,
  hint: { prior_pass_rate?: number; prior_samples?: number },
): RolloutResult {
  return { prompt_id, step, group, reward, tokens, finish_reason, rollout_id, prior_pass_rate: hint.prior_pass_rate, prior_samples: hint.prior_samples };
}
