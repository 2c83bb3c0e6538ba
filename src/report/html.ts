import type { PolicyResult } from '../replay/engine.js';
import { spendChart, histogramChart } from './charts-alloc.js';
import { calibrationChart } from './charts-calibration.js';
import { costChart, cumulativeChart } from './charts-run.js';
import { seedsChart } from './charts-seeds.js';
import { budgetChart, effectiveChart } from './charts-steps.js';
import { ahead, headline, settingsBox } from './headline.js';
import { reportView, type SeedRun } from './series.js';
import { esc } from './svg.js';
import { seedTables, summaryTableHtml } from './tables.js';



/**
 * On load, counts each chart's drawn marks (elements with `data-mark` and a non-empty bounding
 * box) into `data-drawn` on the chart and on each of its panels (`g.panel`), counts marks whose
 * box falls outside the chart into `data-outside`, and writes the number of charts with marks
 * into body[data-charts-drawn], and how many pixels of the summary table its box cannot show into
 * body[data-table-overflow]. The rendering test reads these back (test/report-render.test.ts).
 */
const checkScript = `document.addEventListener('DOMContentLoaded', function () {
  var charts = document.querySelectorAll('svg.chart'); var ok = 0;
  function drawn(m) { var b = m.getBBox(); return b.width > 0 || b.height > 0; }
  charts.forEach(function (c) {
    var n = 0, out = 0, vb = c.viewBox.baseVal;
    c.querySelectorAll('[data-mark]').forEach(function (m) {
      if (!drawn(m)) return; n++;
      var b = m.getBBox();
      if (b.x < -1 || b.y < -1 || b.x + b.width > vb.width + 1 || b.y + b.height > vb.height + 1) out++;
    });
    c.querySelectorAll('g.panel').forEach(function (p) {
      var k = 0; p.querySelectorAll('[data-mark]').forEach(function (m) { if (drawn(m)) k++; });
      p.setAttribute('data-drawn', String(k));
    });
    c.setAttribute('data-drawn', String(n)); c.setAttribute('data-outside', String(out)); if (n > 0) ok++;
  });
  document.body.setAttribute('data-charts-drawn', ok + '/' + charts.length);
  var box = document.querySelector('.tablebox'), table = box && box.querySelector('table');
  if (table) document.body.setAttribute('data-table-overflow', String(Math.max(0, table.scrollWidth - box.clientWidth)));
});`;

const css = `body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;margin:0 auto;max-width:1000px;padding:24px;color:#1d1d1f;counter-reset:fig}
h1{font-size:22px;margin:0 0 2px}h2{font-size:16px;margin:26px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
.sub{color:#5b5b5b;font-size:13px;margin:0 0 12px;word-break:break-all}
.headline{font-size:17px;border-left:4px solid #D55E00;padding:8px 12px;background:#fdf3ec;margin:12px 0 6px}
.ahead{font-size:13.5px;color:#333;margin:4px 0 12px}
.warn{border-left:4px solid #E69F00;background:#fff6e0;padding:6px 10px;font-size:13px;margin:6px 0}
dl.settings{display:grid;grid-template-columns:max-content 1fr max-content 1fr;gap:3px 16px;font-size:12.5px;border:1px solid #d8d8d8;border-radius:4px;padding:10px 14px;background:#fafafa;margin:8px 0}
dl.settings dt{color:#5b5b5b}dl.settings dd{margin:0;word-break:break-word}
table{border-collapse:collapse;font-size:12px;font-variant-numeric:tabular-nums;width:100%;margin:4px 0}
table.seeds{width:auto;min-width:60%}.tablebox{overflow-x:auto}
table.wide{font-size:10.5px}table.wide th,table.wide td{padding-left:4px;padding-right:0}table.wide td:first-child{white-space:normal}
table.wide td .ratio{font-size:10px}.nm,.badge{white-space:nowrap}table.seeds td,table.seeds th{padding-left:18px}
caption{text-align:left;font-weight:600;font-size:13px;padding:6px 0}
th{font-weight:600;border-bottom:1.5px solid #333;text-align:right;padding:4px 6px;vertical-align:bottom}
td{border-bottom:1px solid #e6e6e6;text-align:right;padding:3px 6px;vertical-align:top}
td:first-child,th:first-child{text-align:left;white-space:nowrap}
td .ratio{display:block;color:#666;font-size:11px}
tr.default td{background:#fdf3ec;font-weight:600}
.badge{font-size:10px;color:#fff;background:#D55E00;border-radius:3px;padding:0 4px;margin-left:4px;font-weight:600}
.tnote{font-size:12px;color:#555;margin:4px 0 0}
figure{margin:28px 0 8px;break-inside:avoid;counter-increment:fig}
figcaption{font-size:13px;color:#333;margin-bottom:6px;max-width:64em}
.ftitle{font-weight:700;color:#1d1d1f;font-size:15px;display:block}.ftitle::before{content:"Figure " counter(fig) ". "}
svg.chart{max-width:100%;height:auto;display:block}
svg text{fill:#222;font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif}
svg .grid{stroke:#e8e8e8;stroke-width:1}svg .axis{stroke:#444;stroke-width:1}
svg .ref{stroke:#444;stroke-width:1;stroke-dasharray:1.5 2.5;fill:none}
svg .tick{font-size:11px}svg .label{font-size:12px;font-weight:600}svg .ptitle{font-size:12px}svg .strong{font-weight:700}
ul.notes{font-size:13px;max-width:64em;padding-left:20px}
@media print{body{max-width:none;padding:0;font-size:10pt}@page{size:A4;margin:12mm}
h2{break-after:avoid}figure,table,dl,.headline{break-inside:avoid}
.headline,tr.default td,.badge,.warn{-webkit-print-color-adjust:exact;print-color-adjust:exact}}`;

export interface ReportMeta {
  readonly title: string;
  /** How the numbers were made (the outcome model, simplifications), shown at the end. */
  readonly lines: readonly string[];
  readonly kind?: 'replay' | 'simulate';
  /** Every seed's results when several ran (`--seeds`); the `results` argument is then the first seed's. */
  readonly seeds?: readonly SeedRun[];
  /** The policy the headline compares with uniform; its row is highlighted. */
  readonly defaultPolicy?: string;
  /** How the default was run, for the headline (e.g. "value balanced, 2 rounds a step"). */
  readonly defaultDetail?: string;
  /** The settings box: label/value rows (budgets, min/max n, rounds, seeds, source, version). */
  readonly settings?: readonly (readonly [string, string])[];
  /** Shown in a box under the headline (e.g. a source without token counts). */
  readonly warnings?: readonly string[];
  /** A line under the title (what was run, on what). */
  readonly subtitle?: string;
}

/** Splits "0.681 (1.35×)" into the value and a muted ratio line. */
function ratioCells(html: string): string {
  return html.replace(/<td>([^<(]+) \(([\d.]+\u00d7)\)/g, '<td>$1<span class="ratio">$2</span>');
}

/**
 * The self-contained report page: inline CSS, inline SVG, one inline script (the check above);
 * no network. Opens on the one-line result and the settings; the summary table with our
 * default highlighted; then the charts; the method notes last.
 */
export function reportHtml(results: readonly PolicyResult[], meta: ReportMeta): string {
  const view = reportView(meta.seeds ?? [{ seed: 0, results }], meta.defaultPolicy);
  const kind = meta.kind ?? 'replay';
  const hasSeeds = view.runs.length > 1;
  const top = view.names.length === 0
    ? '<p class="headline">No policies were run.</p>'
    : `<p class="headline">${headline(view, meta.defaultDetail, true)}</p><p class="ahead">${ahead(view, true)}</p>`;
  const warnings = (meta.warnings ?? []).map((w) => `<p class="warn">${esc(w)}</p>`).join('');
  const sections = [
    `<h1>${esc(meta.title)}</h1>${meta.subtitle === undefined ? '' : `<p class="sub">${esc(meta.subtitle)}</p>`}`,
    top + warnings,
    settingsBox(meta.settings ?? []),
    `<h2>Summary</h2>${ratioCells(summaryTableHtml(view))}`,
    hasSeeds ? `<h2>Spread across seeds</h2>${seedTables(view, false)}${seedsChart(view)}` : '',
    '<h2>Charts</h2>',
    cumulativeChart(view),
    costChart(view),
    effectiveChart(view),
    spendChart(view, kind),
    histogramChart(view),
    budgetChart(view),
    calibrationChart(view),
    meta.lines.length === 0 ? '' : `<h2>How the numbers were made</h2><ul class="notes">${meta.lines.map((l) => `<li>${esc(l)}</li>`).join('')}</ul>`,
  ];
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(meta.title)}</title>
<style>${css}</style>
<script>${checkScript}</script></head>
<body>
${sections.filter((s) => s !== '').join('\n')}
</body></html>
`;
}
