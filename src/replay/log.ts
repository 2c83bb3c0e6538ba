import { createHash } from 'node:crypto';
import { createReadStream, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { RolloutBudgetError, badInput, badOption, quote } from '../errors.js';
import { field } from '../io/jsonl.js';
import type { Visit } from './visits.js';

/**
 * The three log formats `replay` reads:
 * - `results`: the results JSONL that `observe` takes, one rollout per line
 *   (`{prompt_id, step, reward, tokens?}`) or one group per line (`{prompt_id, step, rewards, tokens?}`);
 * - `visits`: per-visit group counts `{step, prompt_id, n, correct}` (the shipped fixture);
 * - `verl`: verl's rollout dumps (`trainer.rollout_data_dir`, written by
 *   `RayPPOTrainer._dump_generations`): one file `<step>.jsonl` per step, one line per rollout
 *   `{input, output, score, step, gts?, ...reward extras}`; prompts are keyed by a hash of the
 *   input text (`verl:` + the first 16 hex digits of its sha256).
 */
export type LogFormat = 'results' | 'visits' | 'verl';
export const logFormats: readonly LogFormat[] = ['results', 'visits', 'verl'];

export interface LoadOptions {
  readonly format?: LogFormat | 'auto';
  /** Called now and then with bytes read so far and the total. */
  readonly onProgress?: (read: number, total: number) => void;
}

/** Which format a parsed line is in, or undefined when it fits none. */
export function detectFormat(value: Record<string, unknown>): LogFormat | undefined {
  if ('input' in value && 'score' in value) return 'verl';
  if ('correct' in value && 'n' in value) return 'visits';
  if ('prompt_id' in value && ('reward' in value || 'rewards' in value)) return 'results';
  return undefined;
}

/** The files a log path stands for: the file itself, or a folder's *.jsonl in step order. */
export function logFiles(path: string): string[] {
  let stat;
  try {
    stat = statSync(path);
  } catch (error) {
    throw new RolloutBudgetError('IO_ERROR', `${path}: cannot read (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  if (!stat.isDirectory()) return [path];
  const names = readdirSync(path).filter((n) => n.endsWith('.jsonl'));
  const key = (n: string) => (/^\d+\.jsonl$/.test(n) ? Number.parseInt(n, 10) : Infinity);
  names.sort((a, b) => key(a) - key(b) || (a < b ? -1 : a > b ? 1 : 0));
  if (names.length === 0) throw badOption(`${path}: a folder log must hold *.jsonl files, found none`);
  return names.map((n) => join(path, n));
}

interface Group {
  step: number;
  prompt_id: string;
  n: number;
  correct: number;
  rewards?: number[];
  tokens?: (number | undefined)[];
}

/**
 * Streams a log (a file or a folder of *.jsonl) into visits, one per (step, prompt), in
 * O(groups + rollouts) memory and one pass. Malformed lines throw BAD_INPUT naming file:line.
 */
export async function loadLog(path: string, options: LoadOptions = {}): Promise<{ visits: Visit[]; format: LogFormat }> {
  const files = logFiles(path);
  const total = files.reduce((s, f) => s + statSync(f).size, 0);
  let format: LogFormat | undefined = options.format === 'auto' ? undefined : options.format;
  const groups = new Map<string, Group>();
  let read = 0;
  let lastReport = 0;
  for (const file of files) {
    const stream = createReadStream(file, { encoding: 'utf8' });
    const lines = createInterface({ input: stream, crlfDelay: Infinity });
    let line = 0;
    for await (const raw of lines) {
      line++;
      read += Buffer.byteLength(raw, 'utf8') + 1;
      if (options.onProgress !== undefined && read - lastReport > 1 << 20) {
        lastReport = read;
        options.onProgress(read, total);
      }
      const text = raw.trim();
      if (text === '') continue;
      const where = `${file}:${line}`;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        throw badInput(where, `malformed JSON (${(error as Error).message}): ${quote(text)}`);
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value)) {
        throw badInput(where, `each line must be a JSON object, got ${quote(value)}`);
      }
      const obj = value as Record<string, unknown>;
      if (format === undefined) {
        format = detectFormat(obj);
        if (format === undefined) {
          throw badInput(where, `cannot tell the log format from this line (expected results {prompt_id, step, reward}, visits {step, prompt_id, n, correct} or verl {input, output, score, step}); name it with --format`);
        }
      }
      addLine(groups, format, where, obj);
    }
  }
  options.onProgress?.(total, total);
  if (format === undefined) throw badInput(path, 'the log is empty');
  const visits: Visit[] = [...groups.values()].map((g) => ({ ...g }));
  visits.sort((a, b) => a.step - b.step);
  return { visits, format };
}

function requireStep(where: string, obj: Record<string, unknown>): number {
  const step = field.int(where, obj, 'step', 0);
  if (step === undefined) throw badInput(where, '"step" is required in a replayed log, got nothing');
  return step;
}

function groupOf(groups: Map<string, Group>, step: number, prompt_id: string, withRollouts: boolean): Group {
  const key = `${step}\u0000${prompt_id}`;
  let g = groups.get(key);
  if (g === undefined) {
    g = { step, prompt_id, n: 0, correct: 0, ...(withRollouts ? { rewards: [], tokens: [] } : {}) };
    groups.set(key, g);
  }
  return g;
}

function addRollout(g: Group, reward: number, tokens: number | undefined): void {
  g.n++;
  if (reward >= 0.5) g.correct++;
  g.rewards!.push(reward);
  g.tokens!.push(tokens);
}

function addLine(groups: Map<string, Group>, format: LogFormat, where: string, obj: Record<string, unknown>): void {
  if (format === 'visits') {
    const step = requireStep(where, obj);
    const prompt_id = obj.prompt_id === undefined ? undefined : String(obj.prompt_id);
    if (prompt_id === undefined || prompt_id === '') throw badInput(where, `"prompt_id" must be a non-empty string, got ${quote(obj.prompt_id)}`);
    const n = field.int(where, obj, 'n', 1);
    if (n === undefined) throw badInput(where, '"n" is required, got nothing');
    const correct = field.int(where, obj, 'correct', 0);
    if (correct === undefined || correct > n) throw badInput(where, `"correct" must be an integer in [0, n=${n}], got ${quote(obj.correct)}`);
    const g = groupOf(groups, step, prompt_id, false);
    if (g.n > 0) throw badInput(where, `prompt ${quote(prompt_id)} already has a group at step ${step}`);
    g.n = n;
    g.correct = correct;
    return;
  }
  if (format === 'verl') {
    const step = requireStep(where, obj);
    if (typeof obj.input !== 'string') throw badInput(where, `"input" must be a string, got ${quote(obj.input)}`);
    const score = obj.score;
    if (typeof score !== 'number' && typeof score !== 'boolean') throw badInput(where, `"score" must be a number, got ${quote(score)}`);
    const reward = typeof score === 'boolean' ? (score ? 1 : 0) : score;
    if (!Number.isFinite(reward)) throw badInput(where, `"score" must be a finite number, got ${quote(score)}`);
    const id = `verl:${createHash('sha256').update(obj.input).digest('hex').slice(0, 16)}`;
    // verl scores are rewards of any scale (e.g. -1/1 or 0/1): a rollout is correct when score > 0.
    addRollout(groupOf(groups, step, id, true), reward > 0 ? 1 : 0, undefined);
    return;
  }
  const prompt_id = field.string(where, obj, 'prompt_id', true)!;
  const step = requireStep(where, obj);
  if (obj.finish_reason === 'abort') return;
  const g = groupOf(groups, step, prompt_id, true);
  if (obj.rewards !== undefined) {
    const rewards = obj.rewards;
    if (!Array.isArray(rewards) || rewards.length === 0) throw badInput(where, `"rewards" must be a non-empty array, got ${quote(rewards)}`);
    const tokens = obj.tokens;
    if (tokens !== undefined && (!Array.isArray(tokens) || tokens.length !== rewards.length)) {
      throw badInput(where, `"tokens" must be an array as long as "rewards" (${rewards.length}), got ${quote(tokens)}`);
    }
    rewards.forEach((r, j) => {
      const t = tokens === undefined ? undefined : (tokens as unknown[])[j];
      if (t !== undefined && (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 0)) {
        throw badInput(where, `"tokens[${j}]" must be a non-negative integer, got ${quote(t)}`);
      }
      addRollout(g, field.reward(where, `rewards[${j}]`, r), t as number | undefined);
    });
    return;
  }
  if (obj.reward === undefined) throw badInput(where, '"reward" is required (or "rewards" for a group), got nothing');
  addRollout(g, field.reward(where, 'reward', obj.reward), field.int(where, obj, 'tokens', 0));
}
