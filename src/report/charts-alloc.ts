import type { SpendBins } from '../replay/spend.js';
import { panelTitleOf } from './charts-steps.js';
import { WIDTH, grid } from './multiples.js';
import { asView, type ChartInput } from './series.js';
import { solid } from './styles.js';
import { Frame, axes, esc, figure, fx, legendRow, line, marker, niceCeil, niceDomain, niceTicks, panelTitle, percent, stepTicks, tickLabel, type SeriesStyle } from './svg.js';

/**
 * Share of groups at each n, one panel a policy on a shared n axis, each panel on its own
 * percentage scale (a fixed-n policy puts every group at one n, which would flatten the rest).
 * Counts are pooled over seeds.
 */
export function histogramChart(input: ChartInput): string {
  const view = asView(input);
  const sizes = view.names.map((name) => {
    const sum: number[] = [];
    for (const r of view.of(name)) r.groupSizes.forEach((c, n) => (sum[n] = (sum[n] ?? 0) + (c ?? 0)));
    return sum;
  });
  let maxN = 1;
  for (const s of sizes) s.forEach((c, n) => c > 0 && (maxN = Math.max(maxN, n)));
  const g = grid(view.names.length, { cols: 2, panelHeight: 92, gapX: 60 });
  // Whole group sizes only: a group of 2.5 rollouts is not a thing (the axis read 2.5, 7.5, 12.5).
  const xTicks = stepTicks(0, maxN, 8).filter((t) => t >= 1);
  if (xTicks[0] !== 1) xTicks.unshift(1);
  const panels = view.names.map((name, i) => {
    const counts = sizes[i]!;
    const total = counts.reduce((a, c) => a + (c ?? 0), 0);
    const shares = counts.map((c) => (total > 0 ? (c ?? 0) / total : 0));
    const top = Math.min(1, niceCeil(Math.max(0.01, ...shares)));
    const b = g.boxes[i]!;
    const f = new Frame(b.left, b.top, b.width, b.height, [0.5, maxN + 0.5], [0, top]);
    const slot = b.width / maxN;
    // At most 48 px: a panel of one or two group sizes drew bars most of its width, no room beside them for the label.
    const barW = Math.max(1.5, Math.min(48, slot * 0.78));
    const style = solid(view.styles.get(name)!);
    const yTicks = niceTicks(0, top, 3);
    const bars = shares.map((v, n) => {
      if (n === 0 || !(v > 0)) return '';
      const y = f.sy(v);
      const h = Math.max(1, f.bottom - y);
      return `<rect data-mark="1" x="${fx(f.sx(n) - barW / 2)}" y="${fx(f.bottom - h)}" width="${fx(barW)}" height="${fx(h)}" fill="${style.color}"><title>${esc(name)}: n = ${n}, ${(v * 100).toFixed(1)}% of groups</title></rect>`;
    });
    // Name the most common n beside its bar, so a bar near a tick is not misread.
    let mode = -1;
    shares.forEach((v, n) => n > 0 && v > (shares[mode] ?? 0) && (mode = n));
    const only = shares.filter((v) => v > 0).length === 1;
    const label = only ? `every group at n = ${mode}` : `most common: n = ${mode} (${((shares[mode] ?? 0) * 100).toFixed(0)}%)`;
    const at = mode > 0 ? modeLabelAt(f, shares, mode, barW, label) : undefined;
    const note = at === undefined ? '' : `<text class="tick"${at.end ? ' text-anchor="end"' : ''} x="${fx(at.x)}" y="${fx(at.y)}">${label}</text>`;
    return `<g class="panel" data-panel="${esc(name)}">${axes(f, { ticks: xTicks, format: (v) => String(v), labels: g.isBottom(i) }, { ticks: yTicks, format: (v) => percent(v, (yTicks[1] ?? 1) - (yTicks[0] ?? 0)) })}`
      + `${panelTitle(f, panelTitleOf(view, name), name === view.defaultPolicy)}${bars.join('')}${note}</g>`;
  });
  return figure(
    'chart-histogram',
    'Group sizes: share of groups at each n',
    `One panel a policy, n on a shared axis; each panel has its own percentage scale.${view.runs.length > 1 ? ` Pooled over ${view.runs.length} seeds.` : ''}`,
    WIDTH, g.height, panels.join('') + g.titles('rollouts in the group (n)', 'share of groups'),
  );
}

/** A generous width of one character of a tick label (11 px sans-serif), to keep a label within its panel. */
const LABEL_CHAR_PX = 6.5;
/** A tick label's height above its baseline, and below it. */
const LABEL_ASCENT_PX = 9;
const LABEL_DESCENT_PX = 3;

/**
 * Where the label of the most common n goes: right of its bar, or left of it (text-anchor end)
 * where the panel's edge would cut it (a bar at the largest n put "every group at n = 8" over
 * the next panel's axis, or past the page); just under the bar's top, or above every bar the
 * text would cross (the mode at n = 2 wrote "most common" over the bars at n = 5 to 13, nearly
 * as tall); where no side has room, at the panel's top right, anchored at its end.
 */
function modeLabelAt(f: Frame, shares: readonly number[], mode: number, barW: number, label: string): { x: number; y: number; end: boolean } {
  const width = label.length * LABEL_CHAR_PX;
  const under = Math.max(f.top + LABEL_ASCENT_PX + 1, f.sy(shares[mode] ?? 0) + 10);
  const place = (x0: number, x1: number, besideMode = true): number | undefined => {
    if (x0 < f.left || x1 > f.right) return undefined;
    // The tallest bar under the text's span (beside the mode's bar: other than it).
    let tallest = 0;
    shares.forEach((v, n) => {
      if (n > 0 && (n !== mode || !besideMode) && v > 0 && f.sx(n) + barW / 2 > x0 && f.sx(n) - barW / 2 < x1) tallest = Math.max(tallest, v);
    });
    if (!(tallest > 0) || under + LABEL_DESCENT_PX <= f.sy(tallest)) return under;
    const above = f.sy(tallest) - LABEL_DESCENT_PX - 1;
    return above - LABEL_ASCENT_PX >= f.top ? above : undefined;
  };
  const rightOf = f.sx(mode) + barW / 2 + 4;
  const leftOf = f.sx(mode) - barW / 2 - 4;
  const right = place(rightOf, rightOf + width);
  if (right !== undefined) return { x: rightOf, y: right, end: false };
  const left = place(leftOf - width, leftOf);
  if (left !== undefined) return { x: leftOf, y: left, end: true };
  // Elsewhere in the panel, nearest the mode's bar first (the label names its n).
  const starts: number[] = [];
  for (let x0 = f.left + 4; x0 + width <= f.right; x0 += 4) starts.push(x0);
  const off = (x0: number) => Math.abs(x0 + width / 2 - f.sx(mode));
  starts.sort((a, b) => off(a) - off(b));
  for (const x0 of starts) {
    const y = place(x0, x0 + width, false);
    if (y !== undefined) return { x: x0, y, end: false };
  }
  return { x: f.right, y: f.top + LABEL_ASCENT_PX + 1, end: true };
}

const MIN_GROUPS = 5;

function meanN(bins: { groups: number[]; rollouts: number[] }, k: number): (readonly [number, number] | null)[] {
  return bins.groups.map((g, b) => (g >= MIN_GROUPS ? [(b + 0.5) / k, bins.rollouts[b]! / g] as const : null));
}

function pooled(all: readonly SpendBins[], which: 'byRate' | 'byPredicted'): { groups: number[]; rollouts: number[] } {
  const bins = all[0]?.bins ?? 0;
  const out = { groups: new Array<number>(bins).fill(0), rollouts: new Array<number>(bins).fill(0) };
  for (const s of all) {
    for (let b = 0; b < bins; b++) {
      out.groups[b]! += s[which].groups[b] ?? 0;
      out.rollouts[b]! += s[which].rollouts[b] ?? 0;
    }
  }
  return out;
}

/**
 * Where the budget went: mean rollouts a group got against the prompt's pass rate (the true
 * rate in simulation, the logged rate pooled over neighbouring visits in replay; solid, filled
 * markers) and against the policy's own prediction (dashed, hollow), in bins of 0.05. One panel a
 * policy on shared axes; bins with fewer than five groups are left out.
 */
export function spendChart(input: ChartInput, kind: 'replay' | 'simulate' = 'replay'): string {
  const view = asView(input);
  const truthName = kind === 'simulate' ? 'true pass rate' : 'logged pass rate (pooled over neighbouring visits)';
  const data = view.names.map((name) => {
    const all = view.of(name).map((r) => r.spend).filter((s): s is SpendBins => s !== undefined);
    const k = all[0]?.bins ?? 20;
    return { name, rate: meanN(pooled(all, 'byRate'), k), predicted: meanN(pooled(all, 'byPredicted'), k) };
  });
  const anyPrediction = data.some((d) => d.predicted.some((p) => p !== null));
  let top = 1;
  for (const d of data) for (const p of [...d.rate, ...d.predicted]) if (p !== null) top = Math.max(top, p[1]);
  const yd = niceDomain(top, 4);
  const neutral: SeriesStyle = { color: '#333333', dash: '', marker: 'circle', width: 1.4 };
  const legend = legendRow(64, 8, WIDTH - 80, [
    { name: `against the ${truthName}`, style: neutral },
    ...(anyPrediction ? [{ name: "against the policy's predicted pass rate (rings)", style: { ...neutral, dash: '5 3' }, marker: false }] : []),
  ]);
  const g = grid(view.names.length, { cols: 4, panelHeight: 125, top: legend.height });
  const yTicks = yd.ticks;
  const yStep = yd.step;
  const panels = data.map((d, i) => {
    const b = g.boxes[i]!;
    const f = new Frame(b.left, b.top, b.width, b.height, [0, 1], [0, yd.hi]);
    const style = solid(view.styles.get(d.name)!);
    const at = (pts: (readonly [number, number] | null)[]) => pts.map((p) => (p === null ? null : [f.sx(p[0]), f.sy(p[1])] as const));
    const rate = at(d.rate);
    const predicted = at(d.predicted);
    // Predicted first, as rings; the pass-rate dots are smaller and drawn on top, so a bin where
    // both agree shows a dot inside a ring rather than one hiding the other.
    const marks = line(predicted, { ...style, dash: '5 3', width: 1.3 })
      + predicted.map((p) => (p === null ? '' : marker('circle', p[0], p[1], style.color, 3.6, true))).join('')
      + line(rate, style)
      + rate.map((p) => (p === null ? '' : marker('circle', p[0], p[1], style.color, 2.1))).join('');
    // A short run's panel can hold no bin at all: say so, rather than leave it looking broken.
    const empty = [...rate, ...predicted].every((p) => p === null)
      ? `<text class="tick" text-anchor="middle" x="${fx((f.left + f.right) / 2)}" y="${fx((f.top + f.bottom) / 2)}">no bin has ${MIN_GROUPS} groups</text>`
      : '';
    return `<g class="panel" data-panel="${esc(d.name)}">${axes(f, { ticks: [0, 0.25, 0.5, 0.75, 1], format: (v) => (v === 0 || v === 1 ? String(v) : v.toFixed(2)), labels: g.isBottom(i) }, { ticks: yTicks, format: (v) => tickLabel(v, yStep), labels: g.isLeft(i) })}`
      + `${panelTitle(f, panelTitleOf(view, d.name), d.name === view.defaultPolicy)}${marks}${empty}</g>`;
  });
  return figure(
    'chart-spend',
    'Where the budget went',
    `Mean rollouts a prompt's group got, by the prompt's pass rate in bins of 0.05 (bins with fewer than ${MIN_GROUPS} groups left out); over the groups generated${view.runs.length > 1 ? `, pooled over ${view.runs.length} seeds` : ''}. Policies without a predictor have no dashed line.`,
    WIDTH, g.height, legend.svg + panels.join('') + g.titles('pass rate', 'mean rollouts per group (n)'),
  );
}
