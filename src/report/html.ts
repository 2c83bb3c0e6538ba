import type { PolicyResult } from '../replay/engine.js';
import { summaryRows } from './summary.js';

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
const W = 720;
const H = 300;
const M = { l: 50, r: 150, t: 20, b: 40 };

function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const fx = (v: number) => v.toFixed(1);

function axes(xLabel: string, yLabel: string, xTicks: [number, string][], yTicks: [number, string][]): string {
  const parts = [
    `<line x1="${M.l}" y1="${H - M.b}" x2="${W - M.r}" y2="${H - M.b}" stroke="#333"/>`,
    `<line x1="${M.l}" y1="${M.t}" x2="${M.l}" y2="${H - M.b}" stroke="#333"/>`,
    `<text x="${(M.l + W - M.r) / 2}" y="${H - 6}" text-anchor="middle" font-size="12">${esc(xLabel)}</text>`,
    `<text x="14" y="${(M.t + H - M.b) / 2}" text-anchor="middle" font-size="12" transform="rotate(-90 14 ${(M.t + H - M.b) / 2})">${esc(yLabel)}</text>`,
  ];
  for (const [x, label] of xTicks) parts.push(`<text x="${fx(x)}" y="${H - M.b + 14}" text-anchor="middle" font-size="10">${esc(label)}</text>`);
  for (const [y, label] of yTicks) parts.push(`<text x="${M.l - 4}" y="${fx(y + 3)}" text-anchor="end" font-size="10">${esc(label)}</text>`);
  return parts.join('');
}

function legend(names: readonly string[]): string {
  return names
    .map((n, k) => `<g><rect x="${W - M.r + 10}" y="${M.t + k * 16}" width="10" height="10" fill="${COLORS[k % COLORS.length]}"/><text x="${W - M.r + 24}" y="${M.t + k * 16 + 9}" font-size="11">${esc(n)}</text></g>`)
    .join('');
}

function svg(id: string, title: string, body: string): string {
  return `<figure><figcaption>${esc(title)}</figcaption><svg class="chart" id="${id}" xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}">${body}</svg></figure>`;
}

/** Effective-gradient ratio per step (moving average over `window` steps), one line a policy. */
export function effectiveChart(results: readonly PolicyResult[], window = 10): string {
  const steps = Math.max(1, ...results.map((r) => r.steps.length));
  const x = (i: number) => M.l + (i / Math.max(1, steps - 1)) * (W - M.l - M.r);
  const y = (v: number) => H - M.b - v * (H - M.t - M.b);
  const lines = results.map((r, k) => {
    const pts: string[] = [];
    let eff = 0;
    let roll = 0;
    r.steps.forEach((s, i) => {
      eff += s.effective;
      roll += s.rollouts;
      if (i >= window) {
        eff -= r.steps[i - window]!.effective;
        roll -= r.steps[i - window]!.rollouts;
      }
      pts.push(`${fx(x(i))},${fx(y(roll > 0 ? eff / roll : 0))}`);
    });
    return `<polyline data-mark="1" fill="none" stroke="${COLORS[k % COLORS.length]}" stroke-width="1.5" points="${pts.join(' ')}"/>`;
  });
  const first = results[0]?.steps[0]?.step ?? 0;
  const last = results[0]?.steps.at(-1)?.step ?? 0;
  const ticks: [number, string][] = [[x(0), String(first)], [x(steps - 1), String(last)]];
  const yTicks: [number, string][] = [0, 0.25, 0.5, 0.75, 1].map((v) => [y(v), v.toFixed(2)]);
  return svg('chart-effective', `Effective-gradient ratio per step (${window}-step moving average)`, axes('step', 'effective ratio', ticks, yTicks) + lines.join('') + legend(results.map((r) => r.name)));
}

/** Histogram of rollouts per prompt-group: share of groups at each n, one bar series a policy. */
export function histogramChart(results: readonly PolicyResult[]): string {
  const maxN = Math.max(1, ...results.map((r) => r.groupSizes.length - 1));
  const slot = (W - M.l - M.r) / maxN;
  const bar = Math.max(0.5, slot / Math.max(1, results.length));
  const shares = results.map((r) => {
    const total = r.groupSizes.reduce((a, b) => a + b, 0);
    return r.groupSizes.map((c) => (total > 0 ? c / total : 0));
  });
  const top = Math.max(0.01, ...shares.flat());
  // Square-root scale: the fixed-n policies put every group at one n, which would flatten the rest.
  const y = (v: number) => H - M.b - Math.sqrt(v / top) * (H - M.t - M.b);
  const bars: string[] = [];
  shares.forEach((s, k) => {
    s.forEach((v, n) => {
      if (n === 0 || v <= 0) return;
      const x0 = M.l + (n - 1) * slot + k * bar;
      bars.push(`<rect data-mark="1" x="${fx(x0)}" y="${fx(y(v))}" width="${fx(bar)}" height="${fx(H - M.b - y(v))}" fill="${COLORS[k % COLORS.length]}"/>`);
    });
  });
  const xTicks: [number, string][] = [1, Math.ceil(maxN / 4), Math.ceil(maxN / 2), Math.ceil((3 * maxN) / 4), maxN].map((n) => [M.l + (n - 0.5) * slot, String(n)]);
  const yTicks: [number, string][] = [0, top / 16, top / 4, top].map((v) => [y(v), `${(v * 100).toFixed(v < 0.1 ? 1 : 0)}%`]);
  return svg('chart-histogram', 'Rollouts per prompt: share of groups at each n (square-root scale)', axes('rollouts in the group (n)', 'share of groups', xTicks, yTicks) + bars.join('') + legend(results.map((r) => r.name)));
}

/** Calibration: mean realised group pass rate against mean predicted, per decile of prediction. */
export function calibrationChart(results: readonly PolicyResult[]): string {
  const withPred = results.filter((r) => r.totals.predictions > 0);
  const x = (v: number) => M.l + v * (W - M.l - M.r);
  const y = (v: number) => H - M.b - v * (H - M.t - M.b);
  const diag = `<line x1="${fx(x(0))}" y1="${fx(y(0))}" x2="${fx(x(1))}" y2="${fx(y(1))}" stroke="#999" stroke-dasharray="4 3"/>`;
  const marks = withPred.map((r) => {
    const k = results.indexOf(r);
    const color = COLORS[k % COLORS.length];
    const bins = r.calibration.filter((b) => b.count > 0);
    const pts = bins.map((b) => `${fx(x(b.predicted))},${fx(y(b.realised))}`).join(' ');
    const dots = bins.map((b) => `<circle data-mark="1" cx="${fx(x(b.predicted))}" cy="${fx(y(b.realised))}" r="3" fill="${color}"><title>${esc(r.name)}: ${b.count} groups</title></circle>`).join('');
    return `<polyline fill="none" stroke="${color}" stroke-width="1.2" points="${pts}"/>${dots}`;
  });
  const ticks: [number, string][] = [0, 0.25, 0.5, 0.75, 1].map((v) => [x(v), v.toFixed(2)]);
  const yTicks: [number, string][] = [0, 0.25, 0.5, 0.75, 1].map((v) => [y(v), v.toFixed(2)]);
  const names = results.map((r) => (r.totals.predictions > 0 ? r.name : `${r.name} (no predictor)`));
  return svg('chart-calibration', 'Calibration: realised vs predicted group pass rate (deciles of prediction)', axes('predicted pass rate', 'realised pass rate', ticks, yTicks) + diag + marks.join('') + legend(names));
}

/**
 * On load, counts each chart's drawn marks (elements with a non-empty bounding box) and writes
 * the count into `data-drawn`, and the number of charts with marks into body[data-charts-drawn].
 * A headless browser test reads these back (test/report-render.test.ts).
 */
const checkScript = `document.addEventListener('DOMContentLoaded', function () {
  var charts = document.querySelectorAll('svg.chart'); var ok = 0;
  charts.forEach(function (c) { var n = 0; c.querySelectorAll('[data-mark]').forEach(function (m) {
    var b = m.getBBox(); if (b.width > 0 || b.height > 0) n++; });
    c.setAttribute('data-drawn', String(n)); if (n > 0) ok++; });
  document.body.setAttribute('data-charts-drawn', ok + '/' + charts.length);
});`;

export interface ReportMeta {
  readonly title: string;
  readonly lines: readonly string[];
}

/** The self-contained report page: inline CSS, inline SVG, one inline script; no network. */
export function reportHtml(results: readonly PolicyResult[], meta: ReportMeta): string {
  const { head, rows } = summaryRows(results);
  const table = `<table><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows
    .map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`)
    .join('')}</tbody></table>`;
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(meta.title)}</title>
<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child,th:first-child{text-align:left}
figure{margin:18px 0}figcaption{font-weight:600;margin-bottom:4px}p.note{font-size:13px;max-width:60em}</style>
<script>${checkScript}</script></head>
<body><h1>${esc(meta.title)}</h1>
${meta.lines.map((l) => `<p class="note">${esc(l)}</p>`).join('\n')}
${table}
${effectiveChart(results)}
${histogramChart(results)}
${calibrationChart(results)}
</body></html>
`;
}
