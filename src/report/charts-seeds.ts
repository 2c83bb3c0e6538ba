import { WIDTH, grid } from './multiples.js';
import { headlineMetrics, median, ratiosToReference, seedLabel, type ReportView } from './series.js';
import { REFERENCE } from './styles.js';
import { Frame, axes, decimalsFor, esc, figure, fx, marker, niceTicks, panelTitle } from './svg.js';

/**
 * Spread across seeds: for each headline metric, every policy's ratio to uniform at each seed
 * (small hollow markers), their median (a tall bar) and their range (a line); 1× dotted. Drawn
 * only when two or more seeds ran; '' otherwise.
 */
export function seedsChart(view: ReportView): string {
  if (view.runs.length < 2) return '';
  const metrics = headlineMetrics(view);
  const rows = view.names.filter((n) => n !== REFERENCE);
  const rowH = 26;
  const g = grid(rows.length === 0 ? 0 : metrics.length, { cols: metrics.length, panelHeight: Math.max(1, rows.length) * rowH, left: 110, gapX: 26 });
  const panels = rows.length === 0 ? [] : metrics.map((m, i) => {
    const per = rows.map((name) => ratiosToReference(view, name, m.key).filter((v): v is number => v !== null));
    const all = [1, ...per.flat()];
    const pad = Math.max(0.02, (Math.max(...all) - Math.min(...all)) * 0.06);
    const b = g.boxes[i]!;
    // About one tick per 60 px: four panels' labels ("0.925×") ran into each other at four ticks.
    const ticks = niceTicks(Math.min(...all) - pad, Math.max(...all) + pad, Math.max(2, Math.min(4, Math.floor(b.width / 60))));
    const lo = Math.min(ticks[0] ?? 0, Math.min(...all) - pad);
    const hi = Math.max(ticks.at(-1) ?? 1, Math.max(...all) + pad);
    const f = new Frame(b.left, b.top, b.width, b.height, [lo, hi], [rows.length, 0]);
    const step = ticks.length > 1 ? ticks[1]! - ticks[0]! : 0.1;
    const one = `<line class="ref" x1="${fx(f.sx(1))}" y1="${fx(f.top)}" x2="${fx(f.sx(1))}" y2="${fx(f.bottom)}"/>`;
    const marks = rows.map((name, r) => {
      const v = per[r]!;
      if (v.length === 0) return '';
      const style = view.styles.get(name)!;
      const y = f.sy(r + 0.5);
      const med = median(v);
      const range = `<line data-mark="1" x1="${fx(f.sx(Math.min(...v)))}" y1="${fx(y)}" x2="${fx(f.sx(Math.max(...v)))}" y2="${fx(y)}" stroke="${style.color}" stroke-width="2"/>`;
      const dots = v.map((x) => marker('circle', f.sx(x), y, style.color, 2.6, true)).join('');
      const bar = `<rect data-mark="1" x="${fx(f.sx(med) - 1.5)}" y="${fx(y - 8)}" width="3" height="16" fill="${style.color}"><title>${esc(name)}: median ${med.toFixed(3)}×, ${Math.min(...v).toFixed(3)}–${Math.max(...v).toFixed(3)}×</title></rect>`;
      return range + dots + bar;
    });
    const labels = g.isLeft(i)
      ? rows.map((name, r) => `<text class="tick${name === view.defaultPolicy ? ' strong' : ''}" x="${fx(f.left - 8)}" y="${fx(f.sy(r + 0.5) + 3.5)}" text-anchor="end">${esc(name)}</text>`).join('')
      : '';
    return `<g class="panel" data-panel="${esc(m.label)}">${axes(f, { ticks, format: (v) => `${v.toFixed(decimalsFor(step))}×` }, { ticks: [], format: String })}`
      + `${panelTitle(f, m.label, true)}${one}${marks.join('')}${labels}</g>`;
  });
  const seeds = seedLabel(view.runs.map((r) => r.seed));
  return figure(
    'chart-seeds',
    'Spread across seeds',
    `Each policy's figure divided by uniform's at the same seed, for seeds ${esc(seeds)} (outcome and Thompson draws change with the seed): hollow markers are seeds, the bar their median, the line their range; dotted: 1× (uniform).`,
    WIDTH, g.height, panels.join('') + (panels.length === 0 ? '' : g.titles('ratio to uniform at the same seed', '')),
  );
}
