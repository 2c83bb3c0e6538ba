import { readdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { RolloutBudgetError, badInput, badOption, cannotRead, quote } from '../errors.js';
import { lineChunks } from '../io/chunks.js';
import { eachJsonl } from '../io/jsonl.js';
import { statIfThere } from '../io/paths.js';
import { SeenRollouts, addLogLine, requireStep, type VerlIds } from './log-lines.js';
import { RolloutStore } from './log-store.js';
import { LogIndexer, NotInStepOrder } from './step-index.js';
import { StreamedRun } from './streamed-run.js';
import { groupCounts, LoggedRun, type ReplayRun, type Visit } from './visits.js';

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
  /** Hold a results or verl log packed in memory, in one pass, even when it could be streamed (tests compare the two). */
  readonly packed?: boolean;
  /** Bytes read at a time (default io/chunks.ts's CHUNK_BYTES; tests cut small chunks). */
  readonly chunkBytes?: number;
  /** The name errors give a one-file log read from a copy (the CLI's copy of a pipe). */
  readonly name?: string;
}

/** Which format a parsed line is in, or undefined when it fits none. */
export function detectFormat(value: Record<string, unknown>): LogFormat | undefined {
  if ('input' in value && 'score' in value) return 'verl';
  if ('correct' in value && 'n' in value) return 'visits';
  if ('prompt_id' in value && ('reward' in value || 'rewards' in value)) return 'results';
  return undefined;
}

/** A verl dump's step file, as `_dump_generations` names it: `<global_step>.jsonl`. */
const STEP_FILE = /^\d+\.jsonl$/;

/**
 * The files a log path stands for: the file itself, or a folder's *.jsonl in step order. A
 * folder that holds step files (`<step>.jsonl`, a verl dump) is read from those only: any other
 * .jsonl beside them (a validation dump, a merged file, "2 (copy).jsonl") would have added its
 * lines to the steps they name, so it is left out and listed in `skipped` (a warning). A folder
 * with no step file is read whole, in name order.
 */
export function logFiles(path: string): string[] {
  return logFolder(path).files;
}

/** logFiles, with the .jsonl files of a folder left out beside its step files (`skipped`). */
export function logFolder(path: string): { files: string[]; skipped: string[] } {
  let stat;
  try {
    stat = statSync(path);
  } catch (error) {
    throw cannotRead(path, error);
  }
  if (!stat.isDirectory()) return { files: [path], skipped: [] };
  const names = readdirSync(path).filter((n) => n.endsWith('.jsonl'));
  if (names.length === 0) throw badOption(`${path}: a folder log must hold *.jsonl files, found none`);
  const steps = names.filter((n) => STEP_FILE.test(n));
  const read = steps.length > 0 ? steps : names;
  const key = (n: string) => (STEP_FILE.test(n) ? Number.parseInt(n, 10) : Infinity);
  read.sort((a, b) => key(a) - key(b) || (a < b ? -1 : a > b ? 1 : 0));
  const skipped = names.filter((n) => !read.includes(n)).sort();
  const files = read.map((n) => join(path, n));
  // Each is read by path, twice: a FIFO named <N>.jsonl (a pipe someone left there) was waited on forever.
  for (const file of files) {
    const kind = statIfThere(file);
    if (kind !== undefined && !kind.isFile()) throw new RolloutBudgetError('IO_ERROR', `${file}: ${kind.isDirectory() ? 'a folder' : kind.isFIFO() ? 'a FIFO (named pipe)' : 'a device or socket'}, not a file, in the log folder ${path}: move it out of the folder`);
  }
  return { files, skipped: skipped.map((n) => join(path, n)) };
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
 * Reads a log (a file or a folder of *.jsonl) into a run. Results and verl logs whose steps
 * come in ascending order, each step's lines together (as trainers write them), are streamed
 * (streamed-run.ts): one pass checks every line and writes each step's rollouts, once read, to
 * a scratch file (step-index.ts), from which a replay reads a step back when it plays it, so
 * memory holds a few steps and each distinct prompt's id, whatever the log's length. Any
 * other results or verl log (steps out of order or interleaved), or `packed: true`, is held
 * packed in one pass (log-store.ts, packed-run.ts: 1–13 bytes a rollout, ~28 a group); the
 * visits format (counts only) as a LoggedRun. Both read the bytes in chunks (io/chunks.ts)
 * and give the same answers. Malformed lines throw BAD_INPUT naming file:line, the first in
 * file order, either way.
 */
export async function readLog(path: string, options: LoadOptions = {}): Promise<ReadLog> {
  const { files, skipped } = logFolder(path);
  const left = skipped.length === 0 ? {} : { skipped };
  if (options.packed !== true && options.format !== 'visits') {
    const streamed = await streamLog(files, options);
    if (streamed !== undefined) return { ...streamed, ...left };
  }
  return { ...(await packLog(path, files, options)), ...left };
}

/**
 * A log read: its run and format, and the results lines skipped for repeating a rollout_id of
 * their step (counted once, as observe counts them), with where the first was.
 */
export interface ReadLog {
  readonly run: ReplayRun;
  readonly format: LogFormat;
  readonly repeats?: { readonly count: number; readonly first: string };
  /** The .jsonl files of a folder log left out beside its step files (logFiles). */
  readonly skipped?: readonly string[];
  /** Step files (<N>.jsonl) whose lines name another step: each's first such line. */
  readonly misnamed?: readonly Misnamed[];
}

const repeatsOf = (seen: SeenRollouts) => (seen.repeats === 0 ? {} : { repeats: { count: seen.repeats, first: seen.firstRepeat! } });

/** A step file's first line that names another step. */
export interface Misnamed {
  readonly where: string;
  readonly step: number;
  readonly own: number;
}

/** The format a log's first line says, or BAD_INPUT. */
function formatOf(obj: Record<string, unknown>, where: string): LogFormat {
  const format = detectFormat(obj);
  if (format === undefined) {
    throw badInput(where, `cannot tell the log format from this line (expected results {prompt_id, step, reward}, visits {step, prompt_id, n, correct} or verl {input, output, score, step}); name it with --format`);
  }
  return format;
}

/** Every line of every file, in order, as eachJsonl gives them, with progress. */
async function eachLogLine(
  files: readonly string[],
  options: LoadOptions,
  each: (obj: Record<string, unknown>, where: string) => void,
  misnamed?: Misnamed[],
): Promise<void> {
  const total = files.reduce((s, f) => s + (statIfThere(f)?.size ?? 0), 0);
  let read = 0;
  let lastReport = 0;
  for (const file of files) {
    const name = files.length === 1 ? (options.name ?? file) : file;
    // A step file (<N>.jsonl, verl's name) whose lines name another step: its first such line.
    const base = basename(file);
    const own = files.length > 1 && STEP_FILE.test(base) ? Number.parseInt(base, 10) : undefined;
    let flagged = false;
    const check = own === undefined || misnamed === undefined
      ? each
      : (obj: Record<string, unknown>, where: string) => {
        if (!flagged && typeof obj.step === 'number' && obj.step !== own) {
          flagged = true;
          misnamed.push({ where, step: obj.step, own });
        }
        each(obj, where);
      };
    for (const { text, bytes, firstLine } of lineChunks(file, name, options.chunkBytes)) {
      eachJsonl(text, name, (obj, line) => check(obj, `${name}:${line}`), firstLine);
      read += bytes.length;
      if (options.onProgress !== undefined && read - lastReport > 1 << 20) {
        lastReport = read;
        options.onProgress(read, total);
        await new Promise((resolve) => setImmediate(resolve)); // let a progress bar draw
      }
    }
  }
  options.onProgress?.(total, total);
}

/** A log passed over once, held in memory: packed (results, verl) or as a LoggedRun (visits). */
async function packLog(path: string, files: readonly string[], options: LoadOptions): Promise<ReadLog> {
  let format: LogFormat | undefined = options.format === 'auto' ? undefined : options.format;
  const counts = new Map<string, Counts>();
  const store = new RolloutStore();
  const ids: VerlIds = { input: undefined, id: '' };
  const seen = new SeenRollouts(false);
  const misnamed: Misnamed[] = [];
  await eachLogLine(files, options, (obj, where) => {
    format ??= formatOf(obj, where);
    if (format === 'visits') addVisitLine(counts, where, obj);
    else addLogLine(format, store, ids, where, obj, seen);
  }, misnamed);
  if (format === undefined) throw badInput(options.name ?? path, 'the log is empty');
  const named = misnamed.length === 0 ? {} : { misnamed };
  if (format !== 'visits') return { run: store.run(), format, ...repeatsOf(seen), ...named };
  return { run: new LoggedRun([...counts.values()].sort((a, b) => a.step - b.step)), format, ...named };
}

/** Stops the index pass: the log is not one a StreamedRun can read. */
class NotStreamable extends Error {}

/**
 * The index pass of a results or verl log (step-index.ts), and the StreamedRun over it; undefined
 * when the log is in the visits format or not in step order (the caller packs it instead).
 */
async function streamLog(files: readonly string[], options: LoadOptions): Promise<ReadLog | undefined> {
  let format: LogFormat | undefined = options.format === 'auto' ? undefined : options.format;
  const indexer = new LogIndexer();
  const ids: VerlIds = { input: undefined, id: '' };
  const seen = new SeenRollouts(true);
  const misnamed: Misnamed[] = [];
  try {
    await eachLogLine(files, options, (obj, where) => {
      format ??= formatOf(obj, where);
      if (format === 'visits') throw new NotStreamable();
      addLogLine(format, indexer, ids, where, obj, seen);
    }, misnamed);
  } catch (error) {
    indexer.discard();
    if (error instanceof NotStreamable || error instanceof NotInStepOrder) return undefined;
    throw error;
  }
  if (format === undefined) {
    indexer.discard();
    return undefined; // empty: the packed pass says so
  }
  return { run: new StreamedRun(indexer.entries, indexer.names, indexer.blocks, indexer.pooledRates()), format, ...repeatsOf(seen), ...(misnamed.length === 0 ? {} : { misnamed }) };
}

function addVisitLine(counts: Map<string, Counts>, where: string, obj: Record<string, unknown>): void {
  const step = requireStep(where, obj);
  const prompt_id = obj.prompt_id === undefined ? undefined : String(obj.prompt_id);
  if (prompt_id === undefined || prompt_id === '') throw badInput(where, `"prompt_id" must be a non-empty string, got ${quote(obj.prompt_id)}`);
  const { n, correct } = groupCounts(where, obj);
  const key = `${step}\u0000${prompt_id}`;
  if (counts.has(key)) throw badInput(where, `prompt ${quote(prompt_id)} already has a group at step ${step}`);
  counts.set(key, { step, prompt_id, n, correct });
}
