import type { PolicyResult } from '../replay/engine.js';
import type { Totals } from '../replay/metrics.js';

interface Column {
  readonly head: string;
  readonly get: (t: Totals) => number | null;
  readonly digits: number;
  /** Show the ratio to uniform beside the value. */
  readonly ratio?: boolean;
}

const columns: Column[] = [
  { head: 'effective ratio', get: (t) => t.effective_ratio, digits: 3, ratio: true },
  { head: 'informative groups', get: (t) => t.informative_groups, digits: 0, ratio: true },
  { head: 'informative / 1k rollouts', get: (t) => t.informative_per_1k_rollouts, digits: 1, ratio: true },
  { head: 'all-correct', get: (t) => t.all_correct_ratio, digits: 3 },
  { head: 'all-wrong', get: (t) => t.all_wrong_ratio, digits: 3 },
  { head: 'hard positives', get: (t) => t.hard_positives, digits: 0, ratio: true },
  { head: 'hard positives / 1k rollouts', get: (t) => t.hard_positives_per_1k_rollouts, digits: 1, ratio: true },
  { head: 'rollouts', get: (t) => t.rollouts, digits: 0, ratio: true },
  { head: 'tokens', get: (t) => t.tokens, digits: 0 },
  { head: 'from model', get: (t) => t.modelled_share, digits: 3 },
  { head: 'informative / Mtok', get: (t) => t.informative_per_mtok, digits: 1, ratio: true },
  { head: 'hard positives / Mtok', get: (t) => t.hard_positives_per_mtok, digits: 1, ratio: true },
  { head: 'Brier', get: (t) => t.brier, digits: 4 },
  { head: 'Spearman', get: (t) => t.spearman, digits: 3 },
  { head: 'within budget', get: (t) => t.budget_compliance, digits: 3 },
  { head: 'plan ms/step', get: (t) => t.plan_ms_per_step, digits: 2 },
];

function cell(col: Column, t: Totals, base: Totals | undefined): string {
  const v = col.get(t);
  if (v === null) return '—';
  const text = v.toFixed(col.digits);
  if (col.ratio !== true || base === undefined) return text;
  const b = col.get(base);
  return b === null || b === 0 ? text : `${text} (${(v / b).toFixed(2)}×)`;
}

/** The summary as rows of cells: policies × metrics, ratios to `uniform` where it ran. */
export function summaryRows(results: readonly PolicyResult[]): { head: string[]; rows: string[][] } {
  const base = results.find((r) => r.name === 'uniform')?.totals;
  return {
    head: ['policy', ...columns.map((c) => c.head)],
    rows: results.map((r) => [r.name, ...columns.map((c) => cell(c, r.totals, base))]),
  };
}

/** A Markdown table (summary.md). */
export function summaryMarkdown(results: readonly PolicyResult[]): string {
  const { head, rows } = summaryRows(results);
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

/** A plain text table for the terminal: aligned columns. */
export function summaryText(results: readonly PolicyResult[]): string {
  const { head, rows } = summaryRows(results);
  const all = [head, ...rows];
  const widths = head.map((_, j) => Math.max(...all.map((r) => r[j]!.length)));
  return all.map((r) => r.map((c, j) => (j === 0 ? c.padEnd(widths[j]!) : c.padStart(widths[j]!))).join('  ')).join('\n');
}
