import { headlineMetrics, median, ratiosToReference, seedLabel, type HeadlineMetric, type ReportView } from './series.js';
import type { PolicyResult } from '../replay/engine.js';
import type { Totals } from '../replay/metrics.js';
import { REFERENCE } from './styles.js';
import { esc } from './svg.js';

/** A ratio to uniform over seeds: the median, and the range when several seeds ran. */
export interface RatioSummary {
  readonly metric: HeadlineMetric;
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly seeds: number;
}

/** The policy's headline ratios to uniform (median over seeds); empty when either did not run. */
export function ratioSummaries(view: ReportView, name: string): RatioSummary[] {
  if (!view.names.includes(name) || !view.names.includes(REFERENCE)) return [];
  return headlineMetrics(view).flatMap((metric) => {
    const v = ratiosToReference(view, name, metric.key).filter((x): x is number => x !== null);
    return v.length === 0 ? [] : [{ metric, median: median(v), min: Math.min(...v), max: Math.max(...v), seeds: v.length }];
  });
}

const times = (v: number) => `${v.toFixed(2)}×`;

function ratioText(r: RatioSummary, html: boolean): string {
  const value = html ? `<b>${times(r.median)}</b>` : times(r.median);
  const range = r.seeds > 1 ? ` (${r.min.toFixed(2)}–${times(r.max)})` : '';
  return `${value}${range} ${r.metric.label}`;
}

/**
 * The one-line result: our default's ratios to uniform, e.g. "Our default (bayes) against
 * uniform: 1.35× effective ratio, 1.08× informative groups, 1.30× hard positives". Plain text
 * when `html` is false (summary.md, the terminal).
 */
export function headline(view: ReportView, detail: string | undefined, html: boolean): string {
  const name = view.defaultPolicy;
  const e = html ? esc : (s: string) => s;
  if (name === undefined || !view.names.includes(name)) return 'Our default policy was not among the policies run, so there is no headline ratio.';
  if (!view.names.includes(REFERENCE)) return `uniform was not among the policies run, so ${e(name)} has no ratio to it.`;
  const ratios = ratioSummaries(view, name);
  const seeds = view.runs.map((r) => r.seed);
  const over = seeds.length > 1 ? ` Median over seeds ${seedLabel(seeds)}, range in parentheses.` : '';
  const ours = `Our default (${e(name)}${detail === undefined ? '' : `, ${e(detail)}`})`;
  // Every headline figure of uniform is 0 (no informative group, say: one prompt always solved): it read "against uniform: .".
  if (ratios.length === 0) return `${ours} has no ratio to uniform: uniform's headline figures are all 0 here (no informative group, no hard positive), so the table's absolute figures are the comparison.`;
  return `${ours} against uniform: ${ratios.map((r) => ratioText(r, html)).join(', ')}${spendClause(view, name)}.${over}`;
}

/**
 * What our default spent, when it is not what uniform spent: its tokens (rollouts when either
 * has no token count) as a multiple of uniform's, median over seeds, and how it kept its
 * budget (budgetClause). Without it, a headline such as the long-CoT simulation's "1.52×
 * informative groups" hid that ours spent 1.27× uniform's tokens (uniform's rounded-down n
 * leaves a fifth of the budget unspent) and overshot the token budget at 41% of the steps,
 * while the line naming a baseline ahead of ours said so of that baseline.
 */
function spendClause(view: ReportView, name: string): string {
  const ours = view.of(name);
  const reference = view.of(REFERENCE);
  const counted = ours.every((r, k) => (r.totals.tokens ?? 0) > 0 && (reference[k]?.totals.tokens ?? 0) > 0);
  const unit = counted ? 'tokens' : 'rollouts';
  const spent = (r: PolicyResult) => (counted ? r.totals.tokens! : r.totals.rollouts);
  const ratios = ours.flatMap((r, k) => (reference[k] === undefined || spent(reference[k]!) === 0 ? [] : [spent(r) / spent(reference[k]!)]));
  const ratio = ratios.length === 0 ? 1 : median(ratios);
  const spend = Math.abs(ratio - 1) >= 0.005 ? `, spending ${times(ratio)} uniform's ${unit}` : '';
  return `${spend}${budgetClause(ours.map((r) => r.totals))}`;
}

/**
 * Where another policy beats our default on a headline figure (median ratio to uniform), in one
 * sentence; the table has the rest.
 */
export function ahead(view: ReportView, html: boolean): string {
  const name = view.defaultPolicy;
  if (name === undefined || !view.names.includes(name) || !view.names.includes(REFERENCE)) return '';
  const ours = new Map(ratioSummaries(view, name).map((r) => [r.metric.key, r.median]));
  const e = html ? esc : (s: string) => s;
  const wins: string[] = [];
  for (const other of view.names) {
    if (other === name || other === REFERENCE) continue;
    const on: string[] = [];
    for (const r of ratioSummaries(view, other)) {
      const mine = ours.get(r.metric.key);
      if (mine !== undefined && r.median > mine + 1e-12) on.push(`${r.metric.label} (${times(r.median)} against ${times(mine)})`);
    }
    if (on.length === 0) continue;
    wins.push(`${e(other)} on ${on.join(', ')}${budgetClause(view.of(other).map((r) => r.totals))}`);
  }
  return wins.length === 0 ? 'No other policy run here is ahead of our default on these figures.' : `Ahead of our default: ${wins.join('; ')}.`;
}

/**
 * How a policy kept its budget, for the line naming it ahead of ours: over budget at a share of
 * the steps that could be checked (medians over seeds), and how many could not be (token
 * counts missing: docs/replay.md), so a policy whose tokens were never counted is not shown as
 * within its budget.
 */
function budgetClause(totals: readonly Totals[]): string {
  const checked = totals.map((t) => t.budget_compliance).filter((c): c is number => c !== null);
  const unchecked = median(totals.map((t) => (t.steps > 0 ? t.budget_unchecked_steps / t.steps : 0)));
  const uncheckedText = unchecked > 0 ? `${Math.round(unchecked * 100)}% of steps unchecked (token counts missing)` : '';
  if (checked.length === 0) return uncheckedText === '' ? '' : `, ${uncheckedText}`;
  const within = median(checked);
  const over = within < 1 ? `over budget at ${Math.round((1 - within) * 100)}% of ${unchecked > 0 ? 'the steps checked' : 'steps'}` : '';
  const parts = [over, uncheckedText].filter((p) => p !== '');
  return parts.length === 0 ? '' : `, ${parts.join(', ')}`;
}

/** The settings box: label/value rows. */
export function settingsBox(settings: readonly (readonly [string, string])[]): string {
  if (settings.length === 0) return '';
  return `<dl class="settings">${settings.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join('')}</dl>`;
}

/** Settings rows from a free-form options object, for callers that give no settings list. */
export function settingsFromOptions(options: Record<string, unknown>): [string, string][] {
  return Object.entries(options)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => [k.replace(/_/g, ' '), typeof v === 'string' ? v : JSON.stringify(v)]);
}
