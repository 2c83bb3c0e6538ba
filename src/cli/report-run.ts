import { statSync } from 'node:fs';
import { unreachable } from '../io/paths.js';
import { InvalidArgumentError, type Command } from 'commander';
import { RolloutBudgetError, badOption } from '../errors.js';
import type { PolicyResult } from '../replay/engine.js';
import { tokenCoverage } from '../replay/tokens.js';
import type { ReplayRun } from '../replay/visits.js';
import { headline } from '../report/headline.js';
import { reportView, seedLabel, tableResults, type SeedRun } from '../report/series.js';
import { seedTables } from '../report/tables.js';
import { summaryText } from '../report/summary.js';
import { writeReport, type ReportInput } from '../report/write.js';
import type { CliIo } from './io.js';
import { createProgress } from './progress.js';
import { shellWord } from '../io/shell-word.js';

/** `a..b` (inclusive, a ≤ b) or a single `a` → the seeds a, a+1, …, b. */
export function seedRange(value: string): number[] {
  const m = /^\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?$/.exec(value);
  if (m === null) throw new InvalidArgumentError(`must be a range of seeds "a..b" (inclusive, e.g. 0..4), got "${value}"`);
  const from = Number(m[1]);
  const to = m[2] === undefined ? from : Number(m[2]);
  if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to)) throw new InvalidArgumentError(`must be a range of safe integers, got "${value}"`);
  if (to < from) throw new InvalidArgumentError(`the seed range "${value}" ends before it starts`);
  return Array.from({ length: to - from + 1 }, (_, k) => from + k);
}

/**
 * The seeds to run: `--seeds a..b` when given, else `--seed` (or `fallback`). Giving both on
 * the command line is a mistake: which one was meant is unclear.
 */
export function seedsOf(cmd: Command, opts: { seed?: number; seeds?: number[] }, fallback: number): number[] {
  if (opts.seeds !== undefined) {
    if (cmd.getOptionValueSource('seed') === 'cli') throw badOption(`give --seed or --seeds, not both (got --seed ${opts.seed} and --seeds ${seedLabel(opts.seeds)})`);
    return opts.seeds;
  }
  return [opts.seed ?? fallback];
}

/** Runs every seed with one progress bar over all of them. */
export function runSeeds(io: CliIo, quiet: boolean, label: string, seeds: readonly number[], run: (seed: number, onProgress: (done: number, total: number) => void) => PolicyResult[]): SeedRun[] {
  const progress = createProgress(io, quiet, seeds.length > 1 ? `${label} seeds ${seedLabel(seeds)}` : label);
  const runs = seeds.map((seed, k) => ({ seed, results: run(seed, (done, total) => progress.update(k * total + done, seeds.length * total)) }));
  progress.finish();
  return runs;
}

/**
 * Refuses `--budget-tokens` on a log without token counts (the budget could not be checked, and
 * the policies would be compared on assumed lengths); returns a warning when only some rollouts
 * have counts.
 */
export function checkTokenBudget(run: ReplayRun, log: string, format: string, budgetTokens: number | undefined): string[] {
  if (budgetTokens === undefined) return [];
  const { rollouts, withTokens } = tokenCoverage(run);
  if (withTokens === 0) {
    throw badOption(`--budget-tokens ${budgetTokens}: ${log} (format ${format}) records no token counts, so a token budget can be neither kept nor compared (uniform would run unconstrained, our planner on assumed lengths). Leave out --budget-tokens, or replay a results log whose rollouts have "tokens"`);
  }
  if (withTokens < rollouts) {
    const share = ((100 * withTokens) / rollouts).toFixed(1);
    return [`--budget-tokens: only ${share}% of the logged rollouts (${withTokens} of ${rollouts}) have token counts; a step with a rollout of unknown length is not checked against the token budget, and the tokens columns are empty.`];
  }
  return [];
}

/**
 * The command as typed, for the report's settings box (arguments with spaces quoted). Reads
 * commander's `rawArgs` (what `runCli` parsed, from: 'user'); undocumented, so it falls back to
 * the command's name.
 */
export function commandLine(cmd: Command): string {
  const raw = (cmd.parent as unknown as { rawArgs?: unknown } | null)?.rawArgs;
  const argv = Array.isArray(raw) && raw.every((a) => typeof a === 'string') ? (raw as string[]) : [cmd.name()];
  return `rollout-budget ${argv.map(shellWord).join(' ')}`;
}

/**
 * Before a run: `--out` names the report's folder (made when the report is written), so a file
 * there is named now, not after the run it would waste.
 */
export function checkReportFolder(out: string | undefined): void {
  if (out === undefined) return;
  let there;
  try {
    there = statSync(out, { throwIfNoEntry: false });
  } catch (error) {
    // ENOTDIR: a file where the path needs a folder (--out results.jsonl/report); else EACCES, ELOOP, ...
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOTDIR') throw unreachable(out, error);
    throw new RolloutBudgetError('IO_ERROR', `${out}: cannot write the report (${code}: a part of the path is a file, not a folder)`);
  }
  if (there?.isDirectory() === false) throw new RolloutBudgetError('IO_ERROR', `${out}: cannot write the report (a file is there; --out names a folder)`);
}

/** Prints the table (medians over seeds when several ran), the headline and, with --out, writes the report. */
export function emitReport(io: CliIo, out: string | undefined, report: ReportInput): void {
  const view = reportView(report.seeds ?? [{ seed: 0, results: report.results }], report.defaultPolicy);
  const several = view.runs.length > 1;
  if (several) io.stdout(`medians over seeds ${seedLabel(view.runs.map((r) => r.seed))}:\n`);
  io.stdout(`${summaryText(tableResults(view))}\n`);
  if (several) io.stdout(`\n${seedTables(view, true)}\n`);
  if (view.names.length > 0) io.stdout(`\n${headline(view, report.defaultDetail, false)}\n`);
  for (const w of report.warnings ?? []) io.stderr(`rollout-budget: warning: ${w}\n`);
  if (out !== undefined) {
    const files = writeReport(out, report);
    io.stdout(`wrote ${files.join(', ')}\n`);
  }
}
