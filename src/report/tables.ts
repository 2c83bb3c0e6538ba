import { ratioSummaries } from './headline.js';
import { headlineMetrics, ratiosToReference, seedLabel, tableResults, type ReportView } from './series.js';
import { REFERENCE } from './styles.js';
import { esc } from './svg.js';
import { summaryRows } from './summary.js';

const EMPTY = '—';
/** Above this many columns the summary table is set smaller (at 1,280 px, 14 columns ran 25 px past the page, 17 some 400). */
const WIDE_COLUMNS = 12;

/**
 * The summary table's cells without the columns that are empty for every policy (e.g. tokens
 * when the source records no lengths), and a sentence naming what was left out and why.
 */
export function visibleSummary(view: ReportView): { head: string[]; rows: string[][]; dropped: string } {
  const { head, rows } = summaryRows(tableResults(view));
  const keep = head.map((_, j) => j === 0 || rows.length === 0 || rows.some((r) => r[j] !== EMPTY));
  const gone = head.filter((_, j) => !keep[j]);
  const noTokens = view.runs.every((run) => run.results.every((r) => r.totals.tokens === null));
  const why = noTokens && gone.some((h) => /tok/i.test(h)) ? ': the source gives no token count for some or all of its rollouts' : '';
  return {
    head: head.filter((_, j) => keep[j]),
    rows: rows.map((r) => r.filter((_, j) => keep[j])),
    dropped: gone.length === 0 ? '' : `Not shown, as no policy has a value${why}: ${gone.join(', ')}.`,
  };
}

/** What the table's figures are (one run's, or medians over seeds) and where the ratios to uniform are. */
export function tableNote(view: ReportView, html: boolean): string {
  const seeds = view.runs.map((r) => r.seed);
  // Without uniform there are no ratios to speak of.
  if (!view.names.includes(REFERENCE)) return seeds.length < 2 ? '' : `Each figure is the median over seeds ${seedLabel(seeds)}.`;
  const where = html ? 'the small figure under a value' : 'a ratio in parentheses';
  if (seeds.length < 2) return `${html ? 'The small figure under a value is' : 'Ratios in parentheses are'} its ratio to uniform.`;
  return `Each figure is the median over seeds ${seedLabel(seeds)}; ${where} is the ratio of those medians (the headline and the spread table give the median of the per-seed ratios).`;
}

/** The summary as an HTML table, our default's row highlighted. */
export function summaryTableHtml(view: ReportView): string {
  const { head, rows, dropped } = visibleSummary(view);
  const body = rows.map((r) => {
    const mine = r[0] === view.defaultPolicy;
    const cells = r.map((c, j) => `<td>${j === 0 ? `<span class="nm">${esc(c)}</span>` : esc(c)}${j === 0 && mine ? ' <span class="badge">our default</span>' : ''}</td>`).join('');
    return `<tr${mine ? ' class="default"' : ''}>${cells}</tr>`;
  });
  const note = [tableNote(view, true), dropped].filter((s) => s !== '').join(' ');
  // A log with token counts has 17 columns, more than the page's 1,000 px hold at the usual
  // size: smaller type and padding, and the table scrolls inside its own box, not the page.
  const wide = head.length > WIDE_COLUMNS ? ' wide' : '';
  return `<div class="tablebox"><table class="summary${wide}"><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${body.join('')}</tbody></table></div><p class="tnote">${esc(note)}</p>`;
}

/** The summary as a Markdown table, our default's row in bold. */
export function summaryTableMarkdown(view: ReportView): string {
  const { head, rows, dropped } = visibleSummary(view);
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  const md = rows.map((r) => line(r[0] === view.defaultPolicy ? r.map((c, j) => `**${c}${j === 0 ? ' (our default)' : ''}**`) : r));
  return [line(head), line(head.map(() => '---')), ...md].join('\n') + `\n\n${[tableNote(view, false), dropped].filter((s) => s !== '').join(' ')}`;
}

/**
 * Per seed, every headline ratio of our default to uniform; and per policy, the median ratio
 * with its range over seeds. Empty unless two or more seeds ran.
 */
export function seedTables(view: ReportView, markdown: boolean): string {
  if (view.runs.length < 2 || !view.names.includes(REFERENCE)) return '';
  const metrics = headlineMetrics(view);
  const name = view.defaultPolicy;
  const perSeed: string[][] = [];
  if (name !== undefined && view.names.includes(name)) {
    const cols = metrics.map((m) => ratiosToReference(view, name, m.key));
    view.runs.forEach((run, s) => perSeed.push([String(run.seed), ...cols.map((c) => (c[s] === null ? EMPTY : `${c[s]!.toFixed(3)}×`))]));
  }
  const spread = view.names.filter((n) => n !== REFERENCE).map((n) => {
    const by = new Map(ratioSummaries(view, n).map((r) => [r.metric.key, r]));
    return [n, ...metrics.map((m) => {
      const r = by.get(m.key);
      return r === undefined ? EMPTY : `${r.median.toFixed(3)}× (${r.min.toFixed(3)}–${r.max.toFixed(3)})`;
    })];
  });
  const heads = metrics.map((m) => m.label);
  const table = (head: string[], rows: string[][], caption: string) => markdown
    ? `${caption}\n\n| ${head.join(' | ')} |\n| ${head.map(() => '---').join(' | ')} |\n${rows.map((r) => `| ${r.join(' | ')} |`).join('\n')}\n`
    : `<table class="seeds"><caption>${esc(caption)}</caption><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows
      .map((r) => `<tr${r[0] === name ? ' class="default"' : ''}>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`)
      .join('')}</tbody></table>`;
  const out: string[] = [];
  if (perSeed.length > 0) out.push(table(['seed', ...heads], perSeed, `Our default (${name}) against uniform, seed by seed`));
  out.push(table(['policy', ...heads], spread, 'Every policy against uniform: median ratio over seeds (minimum–maximum)'));
  return out.join(markdown ? '\n' : '');
}
