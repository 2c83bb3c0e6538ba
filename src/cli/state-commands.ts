import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { Allocator, createRegistries } from '../allocator.js';
import { counted } from '../errors.js';
import type { ResultSource } from '../io/results.js';
import { carryIdCheck } from '../plan/checked-ids.js';
import { DEFAULT_MAX_TOKENS, defaultLimitWarning, groupsWithoutLimit, planChunks, type ExportOptions, type PlanFormat } from '../plan/exports.js';
import { resolvePlanOptions } from '../plan/options.js';
import { checkPlanCall } from '../plan/planner.js';
import { posteriorView } from '../plan/posterior-view.js';
import type { Candidate, Plan } from '../plan/types.js';
import { calibrationSummary } from '../posterior/hints.js';
import type { DecayOptions } from '../posterior/decay.js';
import type { GroupStats, StateSnapshot } from '../posterior/state.js';
import { sameStats } from '../store/pooled.js';
import { readStateAhead } from '../store/scan-ahead.js';
import { MMAP_BYTES, SqliteStore } from '../store/sqlite.js';
import { isPostgresUrl, redactUrl } from '../store/url.js';
import type { ObserveSummary, Store } from '../store/types.js';
import type { AsyncAllocator } from '../service/async-allocator.js';
import type { AsyncStore } from '../store/async.js';
import { checkOutput, rereadable, writeChunks, type CliIo } from './io.js';
import { isNewStateFile, openCreated, removeStateFile, stillEmpty } from './new-state.js';
import { readPrompts } from './prompts-input.js';
import { budgetFrom, planOptionsFrom, type SharedFlags } from './options.js';
import { statIfThere } from '../io/paths.js';

/**
 * The actions of `plan`, `observe` and `inspect` (main.ts declares their flags): loaded when
 * one of them runs, so other commands and `--help` do not load the store and the planner.
 */

export interface PlanFlags extends SharedFlags {
  prompts: string;
  state: string;
  prefillWeight: number;
  out: string;
  format: PlanFormat;
  model?: string;
  maxTokens?: number;
  promptField: string;
}

/**
 * `plan` on a SQLite state file. A state file that this call created is removed again when the
 * plan fails (a bad option, an infeasible budget, an `--out` it cannot write) while the file
 * holds no evidence, as `observe` removes one: a failed command leaves no state behind that
 * only it made, and a state that another process observed into meanwhile is kept.
 */
export async function planCommand(io: CliIo, opts: PlanFlags): Promise<void> {
  checkOutput(opts.out, { '--state': opts.state, '--prompts': opts.prompts });
  // A flag the library rejects (an unknown --policy, --min-n above --max-n) before the prompts and the state are read.
  checkPlanCall(budgetFrom(opts), planOptionsFrom(opts), createRegistries());
  if (isPostgresUrl(opts.state)) return planOnPostgres(io, opts);
  // A large state file is read by another thread while this one reads the prompts (store/scan-ahead.ts).
  const ahead = readStateAhead(opts.state, MMAP_BYTES);
  let allocator: Allocator | undefined;
  let created = false;
  let ok = false;
  try {
    const { parsed, candidates } = await planCandidates(io, opts);
    created = isNewStateFile(opts.state);
    allocator = await openCreated(opts.state, created, () => new Allocator({ state: opts.state }));
    // A plan that reads only its candidates' rows has no use for the whole state read ahead.
    if (!allocator.readsAll(candidates.length)) ahead?.cancel();
    else {
      const scanned = await ahead?.result;
      if (scanned !== undefined && allocator.store instanceof SqliteStore) allocator.store.useScan(scanned);
    }
    // The plan file first: a plan that cannot be written (a full disk) leaves the state as it was.
    allocator.plan(candidates, budgetFrom(opts), planOptionsFrom(opts), (plan) => writePlan(io, opts, plan, candidates, () => parsed.lines));
    ok = true;
  } finally {
    ahead?.cancel();
    const opened = allocator;
    const remove = !ok && created && opened !== undefined && (await stillEmpty(() => opened.store.count() === 0));
    allocator?.close();
    if (remove) removeStateFile(opts.state);
  }
}

/**
 * `plan --state postgres://...`: the service's plan (service/async-allocator.ts): it reads the
 * candidates' rows and the pooled rows in one statement, plans, then records the candidates'
 * group and hint that the state does not hold yet, as a plan on a SQLite state does. The
 * prompts are read first, so a bad line is named before any connection.
 */
async function planOnPostgres(io: CliIo, opts: PlanFlags): Promise<void> {
  const { parsed, candidates } = await planCandidates(io, opts);
  await withAsyncAllocator(opts.state, (allocator) => allocator.plan(candidates, budgetFrom(opts), planOptionsFrom(opts), (plan) => writePlan(io, opts, plan, candidates, () => parsed.lines)));
}

/** Opens the state at `url` (a PostgreSQL URL) for `use`, and closes it after. */
async function withAsyncAllocator<T>(url: string, use: (allocator: AsyncAllocator, store: AsyncStore) => Promise<T>): Promise<T> {
  const [{ openAsyncStore }, { AsyncAllocator }] = await Promise.all([import('../store/open.js'), import('../service/async-allocator.js')]);
  const store = await openAsyncStore(url);
  try {
    return await use(new AsyncAllocator(store), store);
  } finally {
    await store.close();
  }
}

/** The prompts file's candidates, with `--max-tokens` for those that give none. */
async function planCandidates(io: CliIo, opts: PlanFlags): Promise<{ parsed: Awaited<ReturnType<typeof readPrompts>>['parsed']; candidates: Candidate[] }> {
  const { parsed } = await readPrompts(io, opts.prompts);
  const candidates = opts.maxTokens === undefined ? parsed.candidates : parsed.candidates.map((c) => (c.max_tokens === undefined ? { ...c, max_tokens: opts.maxTokens } : c));
  carryIdCheck(parsed.candidates, candidates); // the same ids, checked by the reader
  return { parsed, candidates };
}

/**
 * Writes the plan in `--format` to `--out`, prints its warnings on stderr, and warns about groups without a generation limit.
 * `promptLines` is asked only by the request exports: it builds a map of every prompt's
 * `file:line` (at 10⁶ prompts, ~180 MB and ~0.5 s that json and jsonl do not need).
 */
function writePlan(io: CliIo, opts: PlanFlags, result: Plan, candidates: readonly Candidate[], promptLines: () => ExportOptions['promptLines']): void {
  // The request exports look prompts up by id; json and jsonl need neither map.
  const requests = opts.format === 'vllm-batch' || opts.format === 'sglang';
  const exportOptions = {
    ...(opts.model === undefined ? {} : { model: opts.model }),
    promptField: opts.promptField,
    ...(requests ? { candidates: new Map(candidates.map((c) => [c.id, c])), promptLines: promptLines() } : {}),
    ...(opts.maxTokens === undefined ? {} : { maxTokens: opts.maxTokens }),
  };
  writeChunks(io, opts.out, planChunks(result, opts.format, exportOptions));
  // The request exports have no field for them, and a plan written to a file is seldom read by a person.
  for (const warning of result.warnings) io.stderr(`rollout-budget: warning: ${warning}\n`);
  const unlimited = groupsWithoutLimit(result);
  if (unlimited > 0 && (opts.format === 'json' || opts.format === 'jsonl')) {
    io.stderr(`rollout-budget: warning: ${counted(unlimited, 'planned prompt')} no max_tokens (none in the prompts file, no --max-tokens): a server stops their rollouts at its own default (vLLM 16 tokens on /v1/completions, SGLang 128); execute sends ${DEFAULT_MAX_TOKENS}\n`);
  } else if (unlimited > 0) {
    io.stderr(`rollout-budget: warning: ${defaultLimitWarning(unlimited, exportOptions)}\n`);
  }
}

export async function observeCommand(io: CliIo, opts: SharedFlags & { results: string; state: string }): Promise<void> {
  const decay = resolvePlanOptions(planOptionsFrom(opts)).decay;
  const input = await readResultSource(io, opts.results);
  try {
    let summary = await observeInto(opts.state, input.source, decay);
    // A generator that wrote nothing (or a mistyped path to an empty file): said, in the
    // summary's warnings too (a program reads stdout), and no new state file is left behind
    // for it (observeInto removes one it created for no result).
    if (summary.applied + summary.duplicates + summary.aborted === 0) {
      const empty = `${opts.results === '-' ? 'stdin' : opts.results} holds no results: nothing was applied`;
      summary = { ...summary, warnings: [empty, ...(summary.warnings ?? [])] };
    }
    for (const warning of summary.warnings ?? []) io.stderr(`rollout-budget: warning: ${warning}\n`);
    io.stdout(`${JSON.stringify(summary)}\n`);
  } finally {
    input.done();
  }
}

/**
 * Applies a results source to a state, SQLite file or PostgreSQL URL, in one transaction
 * read chunk by chunk. A SQLite state file that this call created is removed again when the
 * batch is refused (nothing of it was applied, so no state is left behind either).
 */
export async function observeInto(state: string, source: ResultSource, decay: DecayOptions): Promise<ObserveSummary> {
  if (isPostgresUrl(state)) {
    const { PostgresStore } = await import('../store/postgres.js');
    const store = await PostgresStore.connect(state);
    try {
      return await store.applySource(source, decay);
    } finally {
      await store.close();
    }
  }
  const created = isNewStateFile(state);
  const store = await openCreated(state, created, () => new SqliteStore(state));
  let ok = false;
  try {
    const summary = store.applySource(source, decay);
    // No result at all: a state file made for it holds nothing, and is removed as a failed
    // observe's is (an empty results file and a mistyped --state made an empty state).
    ok = summary.applied + summary.duplicates + summary.aborted > 0;
    return summary;
  } finally {
    store.close();
    if (!ok && created) removeStateFile(state);
  }
}

export async function inspectCommand(io: CliIo, opts: { state: string; prompt?: string }): Promise<void> {
  const postgres = isPostgresUrl(opts.state);
  // A state not there yet (no SQLite file, no tables in the PostgreSQL schema) reads as an empty
  // state, and inspect creates nothing for it: a mistyped path or schema is not made real.
  // An empty (0-byte) file too: SQLite would take it for a new database and inspect, which only
  // reads, wrote a whole state's tables into it (a checkpoint's copy cut at its start then read
  // as a state holding nothing, and was put back over the live state: python/rollout_budget/checkpoint.py).
  const empty = !postgres && isEmptyFile(opts.state);
  const missing = postgres ? !(await (await import('../store/postgres.js')).PostgresStore.holdsState(opts.state)) : empty || isNewStateFile(opts.state);
  if (missing) {
    const what = opts.prompt === undefined ? 'summary' : 'posterior';
    io.stderr(postgres
      ? `rollout-budget: note: no state tables at ${redactUrl(opts.state)} yet: this is an empty state's ${what} (nothing was created)\n`
      : empty
        ? `rollout-budget: note: the state file ${opts.state} is empty (0 bytes): this is an empty state's ${what} (nothing was written to it)\n`
        : `rollout-budget: note: no state file at ${opts.state} yet: this is an empty state's ${what} (no file was created)\n`);
  } else if (postgres) {
    // One prompt: its row and the pooled rows (as the service's GET /v1/prompts/{id}); the summary reads every row.
    const prompt = opts.prompt;
    io.stdout(await withAsyncAllocator(opts.state, async (allocator, store) => {
      if (prompt !== undefined) return `${JSON.stringify(await allocator.posterior(prompt), null, 2)}\n`;
      // As for a SQLite state (below); a role that may only read the schema is told, and inspects on.
      const whole = await store.snapshot();
      return checkedSummary(io, whole, (await store.snapshot([], [])).all, async () => store.mendPooled?.().catch((error: unknown) =>
        `the pooled rows differ from the prompts' sums (inspect's read), and could not be checked again or rebuilt: ${error instanceof Error ? error.message : String(error)}`));
    }));
    return;
  }
  const allocator = new Allocator({ state: missing ? ':memory:' : opts.state });
  try {
    printNotes(io, allocator.store);
    if (opts.prompt !== undefined) io.stdout(`${JSON.stringify(allocator.posterior(opts.prompt), null, 2)}\n`);
    else {
      const store = allocator.store;
      io.stdout(await checkedSummary(io, allocator.snapshot(), store.snapshot([], []).all, async () => store.mendPooled?.()));
    }
  } finally {
    allocator.close();
  }
}

/** The store's notes (a state on a network file system, with other names), each a line on stderr. */
export function printNotes(io: CliIo, store: Store): void {
  for (const note of store.notes ?? []) io.stderr(`rollout-budget: note: ${note}\n`);
}


/**
 * `inspect`'s summary from its whole read, whose sums are the prompts' own: its count is theirs.
 * The pooled `all` row (what `serve`, `/healthz` and a plan of few candidates read) is checked
 * against them, and only when it differs are the rows mended (`mend`: the database sums the
 * prompts again and rebuilds the rows under the write lock, or says why not), with a note. It
 * summed them in SQL at every inspect: 2.2 s at 10⁶ prompts where the read took 1.0 s. A group's
 * row wrong while `all` is right (an old writer that moved an observed prompt into a group new
 * to the state) is left to `serve`'s check at its start, which compares every row.
 */
async function checkedSummary(io: CliIo, whole: StateSnapshot, storedAll: GroupStats, mend: () => Promise<string | undefined>): Promise<string> {
  if (!sameStats(storedAll, whole.all)) {
    const mended = await mend();
    if (mended !== undefined) io.stderr(`rollout-budget: note: ${mended}\n`);
  }
  return stateSummary(whole.all.count, whole);
}

/** `inspect` without `--prompt`: what the state holds, and the prior a new prompt would get. */
function stateSummary(prompts: number, snapshot: StateSnapshot): string {
  const resolved = resolvePlanOptions();
  const probe = posteriorView(snapshot, '\u0000never-seen', {}, resolved);
  return `${JSON.stringify(
    {
      prompts,
      last_step: snapshot.lastStep,
      prior_for_new_prompts: { alpha: probe.alpha, beta: probe.beta, p_mean: probe.p_mean },
      mean_tokens: {
        correct: snapshot.all.correctCount > 0 ? snapshot.all.correctTokens / snapshot.all.correctCount : null,
        wrong: snapshot.all.wrongCount > 0 ? snapshot.all.wrongTokens / snapshot.all.wrongCount : null,
      },
      // How offline hints map to observed pass rates, pooled and per group (posterior/hints.ts).
      hint_calibration: calibrationSummary(snapshot, resolved.prior),
    },
    null,
    2,
  )}\n`;
}

/**
 * The results at a path, or stdin for '-', as a source read in chunks (io/results.ts); call
 * `done()` afterwards (it removes a copy of stdin or of a pipe).
 */
export async function readResultSource(io: CliIo, path: string): Promise<{ source: ResultSource; done: () => void }> {
  const [{ parseResults, sourceOfBatch }, { fileResultSource }] = await Promise.all([import('../io/results.js'), import('../io/result-file.js')]);
  if (path !== '-') {
    const input = await rereadable(path);
    try {
      return { source: fileResultSource(input.path, path), done: input.done };
    } catch (error) {
      input.done();
      throw error;
    }
  }
  if (io.spoolStdin === undefined) return { source: sourceOfBatch(parseResults(await io.readStdin(), '<stdin>')), done: () => undefined };
  const copy = await io.spoolStdin();
  const done = () => rmSync(dirname(copy), { recursive: true, force: true });
  try {
    return { source: fileResultSource(copy, '<stdin>'), done };
  } catch (error) {
    done();
    throw error;
  }
}

/** Whether `path` is a file of 0 bytes (not a state, nor a new one: see inspectCommand). */
export function isEmptyFile(path: string): boolean {
  if (path === ':memory:') return false;
  const stat = statIfThere(path);
  return stat !== undefined && stat.isFile() && stat.size === 0;
}
