import type { StepMetrics } from '../replay/metrics.js';
import { curve, seedsNote, stepsOf } from './charts-steps.js';
import { WIDTH, grid } from './multiples.js';
import { asView, cumulative, envelope, type ChartInput, type ReportView } from './series.js';
import { REFERENCE } from './styles.js';
import { Frame, axes, esc, figure, fx, legendRow, line, marker, niceDomain, panelTitle, stepDomain, stepTicks, tickLabel, type SeriesStyle } from './svg.js';

/**
 * Markers along a curve at five staggered positions (series k of `count` is shifted by
 * k/(count+1) of a stretch), so identical curves still show each series' marker.
 */
function markersAlong(points: readonly (readonly [number, number])[], style: SeriesStyle, k: number, count: number): string {
  if (points.length === 0) return '';
  const out: string[] = [];
  for (let j = 0; j < 5; j++) {
    const at = Math.round(((j + (k + 1) / (count + 1)) / 5) * (points.length - 1));
    const p = points[Math.min(points.length - 1, at)]!;
    out.push(marker(style.marker, p[0], p[1], style.color, 3.3));
  }
  return out.join('');
}

function legendFor(view: ReportView, names: readonly string[]) {
  return legendRow(64, 8, WIDTH - 80, names.map((name) => ({ name: name === view.defaultPolicy ? `${name} (our default)` : name, style: view.styles.get(name)! })));
}

/** Draw order: the default last, so it is on top; the reference first. */
function drawOrder(view: ReportView): string[] {
  const rest = view.names.filter((n) => n !== view.defaultPolicy);
  return view.defaultPolicy !== undefined && view.names.includes(view.defaultPolicy) ? [...rest, view.defaultPolicy] : rest;
}

/** Per seed, a policy's cumulative series; minus uniform's at the same seed when `relative`. */
function cumulativeSeries(view: ReportView, name: string, get: (s: StepMetrics) => number, relative: boolean): number[][] {
  return view.of(name).map((r, k) => {
    const own = cumulative(r.steps, get);
    if (!relative) return own;
    const base = view.of(REFERENCE)[k];
    const ref = base === undefined ? [] : cumulative(base.steps, get);
    return own.map((v, i) => v - (ref[i] ?? 0));
  });
}

function cumulativePanel(view: ReportView, f: Frame, get: (s: StepMetrics) => number, xs: readonly number[], relative: boolean): string {
  return drawOrder(view).map((name) => {
    const style = view.styles.get(name)!;
    const per = cumulativeSeries(view, name, get, relative);
    const env = envelope(per);
    const pts = env.median.map((v, i) => [f.sx(xs[i]!), f.sy(v)] as const);
    return curve(f, xs, per, style, true) + markersAlong(pts, style, view.names.indexOf(name), view.names.length);
  }).join('');
}

/**
 * Cumulative informative groups and cumulative hard-prompt positives over the run, every policy
 * in one panel each; below, the same minus uniform's (how far ahead of uniform each policy is),
 * which pulls apart curves that nearly coincide above.
 */
export function cumulativeChart(input: ChartInput): string {
  const view = asView(input);
  const xs = stepsOf(view);
  const legend = legendFor(view, view.names);
  const relative = view.names.includes(REFERENCE) && view.names.length > 1;
  const metrics: { title: string; get: (s: StepMetrics) => number }[] = [
    { title: 'informative groups', get: (s) => s.informative },
    { title: 'hard-prompt positives', get: (s) => s.hardPositives },
  ];
  const wanted = view.names.length === 0 ? [] : [
    ...metrics.map((m) => ({ ...m, relative: false })),
    ...(relative ? metrics.map((m) => ({ ...m, relative: true })) : []),
  ];
  const g = grid(wanted.length, { cols: 2, panelHeight: 210, top: legend.height, gapX: 70, gapY: 50 });
  const xDomain = stepDomain(xs);
  const panels = wanted.map((m, i) => {
    const b = g.boxes[i]!;
    let lo = 0;
    let hi = 0;
    for (const name of view.names) {
      for (const series of cumulativeSeries(view, name, m.get, m.relative)) {
        for (const v of series) {
          lo = Math.min(lo, v);
          hi = Math.max(hi, v);
        }
      }
    }
    const d = niceDomain(Math.max(1, hi), 5, lo);
    const f = new Frame(b.left, b.top, b.width, b.height, xDomain, [d.lo, d.hi]);
    const yTicks = d.ticks;
    const step = d.step;
    const zero = m.relative ? `<line class="ref" x1="${fx(f.left)}" y1="${fx(f.sy(0))}" x2="${fx(f.right)}" y2="${fx(f.sy(0))}"/>` : '';
    const title = m.relative ? `${m.title}: ahead of uniform by` : `${m.title} (cumulative)`;
    const yFormat = (v: number) => `${v > 0 && m.relative ? '+' : ''}${tickLabel(v, step)}`;
    return `<g class="panel" data-panel="${esc(title)}">${axes(f, { ticks: stepTicks(xDomain[0], xDomain[1], 6), format: (v) => tickLabel(v, 1), labels: g.isBottom(i) }, { ticks: yTicks, format: yFormat })}`
      + `${panelTitle(f, title, true)}${zero}${cumulativePanel(view, f, m.get, xs, m.relative)}</g>`;
  });
  return figure(
    'chart-cumulative',
    'Learning signal gathered over the run',
    `Left: groups that entered the update with reward variance, summed over steps. Right: groups of hard prompts (pass rate ≤ 0.2) with at least one success.${relative ? " Bottom row: the same minus uniform's at the same step (above the dotted zero line: ahead of uniform)." : ''}${seedsNote(view)}`,
    WIDTH, g.height, legend.svg + panels.join('') + (panels.length === 0 ? '' : g.titles('step', 'groups')),
  );
}

/**
 * Signal against cost: cumulative informative groups against cumulative rollouts generated, and
 * against cumulative tokens when every policy has token counts. A steeper curve buys more
 * informative groups per unit spent; where a curve ends is what the policy spent in all.
 */
export function costChart(input: ChartInput): string {
  const view = asView(input);
  const tokens = view.runs.length > 0 && view.runs.every((run) => run.results.every((r) => r.totals.tokens !== null && r.totals.tokens > 0));
  const axesSpec: { title: string; get: (s: StepMetrics) => number; label: string }[] = [
    { title: 'against rollouts generated', get: (s) => s.rollouts, label: 'rollouts generated (cumulative)' },
    ...(tokens ? [{ title: 'against tokens generated', get: (s: StepMetrics) => s.tokens ?? 0, label: 'tokens generated (cumulative)' }] : []),
  ];
  const legend = legendFor(view, view.names);
  const g = grid(view.names.length === 0 ? 0 : axesSpec.length, { cols: 2, panelHeight: 260, top: legend.height, gapX: 70 });
  let yMax = 1;
  for (const run of view.runs) for (const r of run.results) yMax = Math.max(yMax, r.totals.informative_groups);
  const { hi: yTop, ticks: yTicks, step: yStep } = niceDomain(yMax, 5);
  const panels = view.names.length === 0 ? [] : axesSpec.map((a, i) => {
    const b = g.boxes[i]!;
    let xMax = 1;
    for (const run of view.runs) for (const r of run.results) xMax = Math.max(xMax, r.steps.reduce((s, m) => s + a.get(m), 0));
    const { hi: xTop, ticks: xTicks, step: xStep } = niceDomain(xMax, 5);
    const f = new Frame(b.left, b.top, b.width, b.height, [0, xTop], [0, yTop]);
    const marks = drawOrder(view).map((name) => {
      const style = view.styles.get(name)!;
      const x = envelope(view.of(name).map((r) => cumulative(r.steps, a.get))).median;
      const y = envelope(view.of(name).map((r) => cumulative(r.steps, (s) => s.informative))).median;
      const pts = [[f.sx(0), f.sy(0)] as const, ...x.map((v, j) => [f.sx(v), f.sy(y[j]!)] as const)];
      const end = pts.at(-1)!;
      return line(pts, style) + markersAlong(pts, style, view.names.indexOf(name), view.names.length) + marker(style.marker, end[0], end[1], style.color, 4.2, false, `${name}: ${Math.round(y.at(-1) ?? 0)} informative groups`);
    });
    return `<g class="panel" data-panel="${esc(a.title)}">${axes(f, { ticks: xTicks, format: (v) => tickLabel(v, xStep), label: a.label }, { ticks: yTicks, format: (v) => tickLabel(v, yStep), labels: g.isLeft(i), ...(g.isLeft(i) ? { label: 'informative groups (cumulative)' } : {}) })}`
      + `${panelTitle(f, a.title, true)}${marks.join('')}</g>`;
  });
  return figure(
    'chart-cost',
    'Signal against cost',
    `Informative groups gathered against what was spent to get them; the larger marker is where each run ended.${tokens ? '' : ' The source gives no token count for some or all of its rollouts, so only rollouts are shown.'}${view.runs.length > 1 ? ` Medians over ${view.runs.length} seeds.` : ''}`,
    WIDTH, g.height + 6, legend.svg + panels.join(''),
  );
}
