import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RolloutBudgetError } from '../errors.js';
import { makeFolders, statIfThere } from '../io/paths.js';
import type { PolicyResult } from '../replay/engine.js';
import { VERSION } from '../version.js';
import { ahead, headline, ratioSummaries, settingsFromOptions } from './headline.js';
import { reportHtml } from './html.js';
import { ratiosToReference, reportView, seedLabel, type ReportView, type SeedRun } from './series.js';
import { seedTables, summaryTableMarkdown } from './tables.js';

/** Everything a report holds beside the per-policy results. */
export interface ReportInput {
  readonly kind: 'replay' | 'simulate';
  readonly title: string;
  readonly source: string;
  readonly options: Record<string, unknown>;
  /** Plain-language notes on how the numbers were made (the outcome model, simplifications). */
  readonly notes: readonly string[];
  /** One run's results; with `seeds`, the first seed's. */
  readonly results: readonly PolicyResult[];
  /** Every seed's results when several seeds ran (`--seeds a..b`), in seed order. */
  readonly seeds?: readonly SeedRun[];
  /** The policy the headline compares with uniform, highlighted in the tables. */
  readonly defaultPolicy?: string;
  /** How the default ran, for the headline (e.g. "value balanced, 2 rounds a step"). */
  readonly defaultDetail?: string;
  /** The settings box, label/value rows; default: the options, one row a key. */
  readonly settings?: readonly (readonly [string, string])[];
  /** Caveats shown under the headline and in summary.md (e.g. a source without token counts). */
  readonly warnings?: readonly string[];
}

function viewOf(report: ReportInput): ReportView {
  const seed = typeof report.options.seed === 'number' ? report.options.seed : 0;
  return reportView(report.seeds ?? [{ seed, results: report.results }], report.defaultPolicy);
}

function policiesJson(results: readonly PolicyResult[]): unknown[] {
  return results.map((r) => ({
    name: r.name,
    description: r.description,
    totals: r.totals,
    calibration: r.calibration,
    group_sizes: r.groupSizes,
    spend: r.spend,
    steps: r.steps.map((s) => ({
      step: s.step, groups: s.groups, rollouts: s.rollouts, tokens: s.tokens, modelled: s.modelled, informative: s.informative,
      effective: s.effective, all_correct: s.allCorrect, all_wrong: s.allWrong, hard_positives: s.hardPositives,
      within_budget: s.withinBudget, failed: s.failed, plan_ms: Number(s.planMs.toFixed(3)), budget_rollouts: s.budgetRollouts, budget_tokens: s.budgetTokens,
    })),
  }));
}

/**
 * metrics.json (version 1): options, notes, and per policy its totals, per-step rows, calibration,
 * group sizes and spend by pass rate. With several seeds, `policies` is the first seed's (as in a
 * one-seed run), `seeds` holds every seed's, and `spread` each policy's headline ratios to
 * uniform over seeds (median, min, max, per seed).
 */
export function metricsJson(report: ReportInput): unknown {
  const view = viewOf(report);
  const several = view.runs.length > 1;
  return {
    version: 1,
    kind: report.kind,
    rollout_budget: VERSION,
    source: report.source,
    options: report.options,
    notes: report.notes,
    ...(report.defaultPolicy === undefined ? {} : { default_policy: report.defaultPolicy }),
    warnings: report.warnings ?? [],
    policies: policiesJson(report.results),
    ...(several
      ? {
          seeds: view.runs.map((run) => ({ seed: run.seed, policies: policiesJson(run.results) })),
          spread: Object.fromEntries(view.names.map((name) => [name, Object.fromEntries(ratioSummaries(view, name).map((r) => [r.metric.key, {
            median: r.median, min: r.min, max: r.max,
            per_seed: ratiosToReference(view, name, r.metric.key).map((ratio, s) => ({ seed: view.runs[s]!.seed, ratio })),
          }]))])),
        }
      : {}),
  };
}

/** summary.md: the headline, settings, the summary table, the seed tables, the notes. */
export function summaryDocument(report: ReportInput): string {
  const view = viewOf(report);
  const settings = report.settings ?? settingsFromOptions(report.options);
  const parts = [
    `# ${report.title}`,
    `${headline(view, report.defaultDetail, false)} ${ahead(view, false)}`.trim(),
    ...(report.warnings ?? []).map((w) => `> **Warning:** ${w}`),
    settings.map(([k, v]) => `- ${k}: ${v}`).join('\n'),
    summaryTableMarkdown(view),
    seedTables(view, true),
    report.notes.map((n) => `- ${n}`).join('\n'),
  ];
  return `${parts.filter((p) => p !== '').join('\n\n')}\n`;
}

/**
 * Writes metrics.json, summary.md and report.html into `dir` (created if missing). Each file
 * goes to a temporary name first and is renamed only when all three are written (and none of
 * the names is a folder), so a failure leaves no partial report and no temp file.
 */
export function writeReport(dir: string, report: ReportInput): string[] {
  const view = viewOf(report);
  const files: [string, string][] = [
    ['metrics.json', `${JSON.stringify(metricsJson(report), null, 1)}\n`],
    ['summary.md', summaryDocument(report)],
    ['report.html', reportHtml(report.results, {
      title: report.title,
      subtitle: `rollout-budget ${VERSION} · ${report.kind} · ${report.source}${view.runs.length > 1 ? ` · seeds ${seedLabel(view.runs.map((r) => r.seed))}` : ''}`,
      lines: report.notes,
      kind: report.kind,
      seeds: view.runs,
      ...(report.defaultPolicy === undefined ? {} : { defaultPolicy: report.defaultPolicy }),
      ...(report.defaultDetail === undefined ? {} : { defaultDetail: report.defaultDetail }),
      settings: report.settings ?? settingsFromOptions(report.options),
      warnings: report.warnings ?? [],
    })],
  ];
  const written: string[] = [];
  try {
    makeFolders(dir);
    // A folder where a file goes is named before anything is replaced: a rename failing after
    // the first left metrics.json of this run beside the last run's summary and report.
    const folder = files.find(([name]) => statIfThere(join(dir, name))?.isDirectory() === true);
    if (folder !== undefined) throw new RolloutBudgetError('IO_ERROR', `${dir}: cannot write the report (${folder[0]} there is a folder): move it away`);
    for (const [name, text] of files) {
      const path = join(dir, `.${name}.tmp-${process.pid}`);
      written.push(path);
      writeFileSync(path, text);
    }
    files.forEach(([name], k) => renameSync(written[k]!, join(dir, name)));
    written.length = 0;
  } catch (error) {
    // The temp files go too (a full disk left all three, the last cut short).
    for (const path of written) {
      try {
        rmSync(path, { force: true });
      } catch {
        // not a file (the reason the write failed): left as it was
      }
    }
    if (error instanceof RolloutBudgetError) throw error;
    throw new RolloutBudgetError('IO_ERROR', `${dir}: cannot write the report (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  return files.map(([name]) => join(dir, name));
}
