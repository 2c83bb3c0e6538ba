import { createHash } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { RolloutBudgetError, badInput, badOption, quote } from '../errors.js';
import { lineChunks } from '../io/chunks.js';
import { eachJsonl, field } from '../io/jsonl.js';
import { RolloutStore } from './log-store.js';
import { LoggedRun, type ReplayRun, type Visit } from './visits.js';

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

/** A count-only visit (visits format) while the log is read. */
interface Counts {
  step: number;
  prompt_id: string;
  n: number;
  correct: number;
}

/** A log's visits, one per (step, prompt), in step order (log order within a step). */
export async function loadLog(path: string, options: LoadOptions = {}): Promise<{ visits: Visit[]; format: LogFormat }> {
  const { run, format } = await readLog(path, options);
  return { visits: run.steps.flatMap((s) => run.at(s)), format };
}

/**
 * Streams a log (a file or a folder of *.jsonl) into a run, in one pass over the bytes, read
 * in chunks (io/chunks.ts). The results and verl formats are held packed (log-store.ts,
 * packed-run.ts: a byte a rollout for 0/1 rewards, eight for fractional ones, four more with
 * token counts; ~28 bytes a group), visit objects made only for the steps being read; the
 * visits format (counts only) as a LoggedRun. Malformed lines throw BAD_INPUT naming file:line.
 */
export async function readLog(path: string, options: LoadOptions = {}): Promise<{ run: ReplayRun; format: LogFormat }> {
  const files = logFiles(path);
  const total = files.reduce((s, f) => s + statSync(f).size, 0);
  let format: LogFormat | undefined = options.format === 'auto' ? undefined : options.format;
  const counts = new Map<string, Counts>();
  const store = new RolloutStore();
  const ids = { input: undefined as string | undefined, id: '' };
  let read = 0;
  let lastReport = 0;
  for (const file of files) {
    for (const { text, firstLine } of lineChunks(file, file)) {
      eachJsonl(text, file, (obj, line) => {
        const where = `${file}:${line}`;
        if (format === undefined) {
          format = detectFormat(obj);
          if (format === undefined) {
            throw badInput(where, `cannot tell the log format from this line (expected results {prompt_id, step, reward}, visits {step, prompt_id, n, correct} or verl {input, output, score, step}); name it with --format`);
          }
        }
        if (format === 'visits') addVisitLine(counts, where, obj);
        else if (format === 'verl') addVerlLine(store, ids, where, obj);
        else addResultLine(store, where, obj);
      }, firstLine);
      read += Buffer.byteLength(text, 'utf8');
      if (options.onProgress !== undefined && read - lastReport > 1 << 20) {
        lastReport = read;
        options.onProgress(read, total);
        await new Promise((resolve) => setImmediate(resolve)); // let a progress bar draw
      }
    }
  }
  options.onProgress?.(total, total);
  if (format === undefined) throw badInput(path, 'the log is empty');
  if (format !== 'visits') return { run: store.run(), format };
  return { run: new LoggedRun([...counts.values()].sort((a, b) => a.step - b.step)), format };
}

function requireStep(where: string, obj: Record<string, unknown>): number {
  const step = field.int(where, obj, 'step', 0);
  if (step === undefined) throw badInput(where, '"step" is required in a replayed log, got nothing');
  return step;
}

function addVisitLine(counts: Map<string, Counts>, where: string, obj: Record<string, unknown>): void {
  const step = requireStep(where, obj);
  const prompt_id = obj.prompt_id === undefined ? undefined : String(obj.prompt_id);
  if (prompt_id === undefined || prompt_id === '') throw badInput(where, `"prompt_id" must be a non-empty string, got ${quote(obj.prompt_id)}`);
  const n = field.int(where, obj, 'n', 1);
  if (n === undefined) throw badInput(where, '"n" is required, got nothing');
  const correct = field.int(where, obj, 'correct', 0);
  if (correct === undefined || correct > n) throw badInput(where, `"correct" must be an integer in [0, n=${n}], got ${quote(obj.correct)}`);
  const key = `${step}\u0000${prompt_id}`;
  if (counts.has(key)) throw badInput(where, `prompt ${quote(prompt_id)} already has a group at step ${step}`);
  counts.set(key, { step, prompt_id, n, correct });
}

/** `ids` holds the last verl input and its id: a group's rollouts come together, so each text is hashed once. */
function addVerlLine(store: RolloutStore, ids: { input: string | undefined; id: string }, where: string, obj: Record<string, unknown>): void {
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

function addResultLine(store: RolloutStore, where: string, obj: Record<string, unknown>): void {
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
