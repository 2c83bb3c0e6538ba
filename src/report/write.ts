import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RolloutBudgetError } from '../errors.js';
import type { PolicyResult } from '../replay/engine.js';
import { reportHtml } from './html.js';
import { summaryMarkdown } from './summary.js';

/** Everything a report holds beside the per-policy results. */
export interface ReportInput {
  readonly kind: 'replay' | 'simulate';
  readonly title: string;
  readonly source: string;
  readonly options: Record<string, unknown>;
  /** Plain-language notes on how the numbers were made (the outcome model, simplifications). */
  readonly notes: readonly string[];
  readonly results: readonly PolicyResult[];
}

/** metrics.json (version 1): options, notes, and per policy its totals, per-step rows, calibration and group sizes. */
export function metricsJson(report: ReportInput): unknown {
  return {
    version: 1,
    kind: report.kind,
    source: report.source,
    options: report.options,
    notes: report.notes,
    policies: report.results.map((r) => ({
      name: r.name,
      description: r.description,
      totals: r.totals,
      calibration: r.calibration,
      group_sizes: r.groupSizes,
      steps: r.steps.map((s) => ({
        step: s.step, groups: s.groups, rollouts: s.rollouts, tokens: s.tokens, modelled: s.modelled, informative: s.informative,
        effective: s.effective, all_correct: s.allCorrect, all_wrong: s.allWrong, hard_positives: s.hardPositives,
        within_budget: s.withinBudget, failed: s.failed, plan_ms: Number(s.planMs.toFixed(3)),
      })),
    })),
  };
}

export function summaryDocument(report: ReportInput): string {
  return `# ${report.title}\n\nSource: \`${report.source}\`\n\n${report.notes.map((n) => `- ${n}`).join('\n')}\n\n${summaryMarkdown(report.results)}\n\nRatios in parentheses are to \`uniform\`.\n`;
}

/**
 * Writes metrics.json, summary.md and report.html into `dir` (created if missing). Each file
 * goes to a temporary name first and is renamed only when all three are written, so a
 * failure leaves no partial report.
 */
export function writeReport(dir: string, report: ReportInput): string[] {
  const files: [string, string][] = [
    ['metrics.json', `${JSON.stringify(metricsJson(report), null, 1)}\n`],
    ['summary.md', summaryDocument(report)],
    ['report.html', reportHtml(report.results, { title: report.title, lines: [`Source: ${report.source}`, ...report.notes] })],
  ];
  try {
    mkdirSync(dir, { recursive: true });
    const tmp = files.map(([name, text]) => {
      const path = join(dir, `.${name}.tmp-${process.pid}`);
      writeFileSync(path, text);
      return path;
    });
    files.forEach(([name], k) => renameSync(tmp[k]!, join(dir, name)));
  } catch (error) {
    throw new RolloutBudgetError('IO_ERROR', `${dir}: cannot write the report (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  return files.map(([name]) => join(dir, name));
}
