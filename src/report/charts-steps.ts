import type { StepMetrics } from '../replay/metrics.js';
import { WIDTH, grid } from './multiples.js';
import { asView, envelope, movingEffective, movingShare, windowFor, type ChartInput, type ReportView } from './series.js';
import { REFERENCE, referenceStyle, solid } from './styles.js';
import {
  Frame, axes, band, esc, figure, fx, legendRow, line, marker, niceTicks, panelTitle, percent, stepDomain, stepTicks, tickLabel, type SeriesStyle,
} from './svg.js';

/** Step numbers of the run (every policy runs the same steps). */
export function stepsOf(view: ReportView): number[] {
  const first = view.names.length === 0 ? undefined : view.of(view.names[0]!)[0];
  return first?.steps.map((s) => s.step) ?? [];
}

/** One policy's median curve (and its min–max band when several seeds ran) in a frame. */
export function curve(f: Frame, xs: readonly number[], per: readonly (readonly number[])[], style: SeriesStyle, withBand: boolean): string {
  if (per.length === 0) return '';
  const env = envelope(per);
  const px = xs.slice(0, env.median.length).map((x) => f.sx(x));
  const finite = env.lo.every(Number.isFinite) && env.hi.every(Number.isFinite);
  const b = withBand && finite && per.length > 1 ? band(px, env.lo.map((v) => f.sy(v)), env.hi.map((v) => f.sy(v)), style.color) : '';
  // One step: a line of one point draws nothing, so its point is a marker.
  if (env.median.length === 1) return b + marker(style.marker, px[0]!, f.sy(env.median[0]!), style.color, 3);
  return b + line(env.median.map((v, i) => [px[i]!, f.sy(v)] as const), style);
}

export function panelTitleOf(view: ReportView, name: string): string {
  return name === view.defaultPolicy ? `${name} (our default)` : name;
}

export const seedsNote = (view: ReportView) => (view.runs.length > 1 ? ` Line: median over ${view.runs.length} seeds; band: their minimum to maximum.` : '');

/**
 * Effective-gradient ratio per step (trailing moving average over `window` steps), one panel a
 * policy with uniform drawn in grey behind the others, so no series hides another.
 */
export function effectiveChart(input: ChartInput, window?: number): string {
  const view = asView(input);
  const xs = stepsOf(view);
  const w = window ?? windowFor(xs.length);
  const legend = legendRow(64, 8, WIDTH - 80, view.names.includes(REFERENCE) ? [{ name: 'uniform, for reference (in every panel)', style: referenceStyle, marker: false }] : []);
  const g = grid(view.names.length, { cols: 4, panelHeight: 118, top: legend.height });
  const xDomain = stepDomain(xs);
  const xTicks = stepTicks(xDomain[0], xDomain[1], 4);
  const yTicks = [0, 0.25, 0.5, 0.75, 1];
  const series = (name: string) => view.of(name).map((r) => movingEffective(r.steps, w));
  const reference = view.names.includes(REFERENCE) ? series(REFERENCE) : [];
  const panels = view.names.map((name, i) => {
    const b = g.boxes[i]!;
    const f = new Frame(b.left, b.top, b.width, b.height, xDomain, [0, 1]);
    const style = solid(view.styles.get(name)!);
    const ref = name === REFERENCE ? '' : curve(f, xs, reference, referenceStyle, false);
    return `<g class="panel" data-panel="${esc(name)}">${axes(f, { ticks: xTicks, format: (v) => tickLabel(v, 1), labels: g.isBottom(i) }, { ticks: yTicks, format: (v) => v.toFixed(2), labels: g.isLeft(i) })}`
      + `${panelTitle(f, panelTitleOf(view, name), name === view.defaultPolicy)}${ref}${curve(f, xs, series(name), style, true)}</g>`;
  });
  return figure(
    'chart-effective',
    'Effective-gradient ratio per step',
    `Rollouts in trained groups with reward variance / rollouts generated, trailing ${w}-step moving average; one panel a policy.${seedsNote(view)}`,
    WIDTH, g.height, legend.svg + panels.join('') + g.titles('step', 'effective ratio'),
  );
}

/** The (spent, budget) pair of a step; metrics written before budgets were recorded per step have none. */
function pairOf(s: StepMetrics, what: 'rollouts' | 'tokens'): readonly [number | null, number | null] {
  const budget = what === 'rollouts' ? s.budgetRollouts : s.budgetTokens;
  return [what === 'rollouts' ? s.rollouts : s.tokens, budget ?? null];
}

/** A step's spent / budget (NaN where either is unknown). */
function stepShare(s: StepMetrics, k: 'rollouts' | 'tokens'): number {
  const [a, b] = pairOf(s, k);
  return a !== null && b !== null && b > 0 ? a / b : Number.NaN;
}

/** The axis' top at most: a step beyond it is drawn on the top edge (the caption says so). */
const BUDGET_AXIS_CAP = 4;

/**
 * Each step's share as a dot (one path of round dots a kind, the first seed's steps), values
 * above `top` on the top edge. O(steps).
 */
function stepDots(f: Frame, xs: readonly number[], steps: readonly StepMetrics[], k: 'rollouts' | 'tokens', top: number, color: string): string {
  const d: string[] = [];
  steps.forEach((s, i) => {
    const v = stepShare(s, k);
    if (Number.isFinite(v) && xs[i] !== undefined) d.push(`M${fx(f.sx(xs[i]!))},${fx(f.sy(Math.min(v, top)))}h0`);
  });
  if (d.length === 0) return '';
  return `<path data-mark="1" fill="none" stroke="${color}" stroke-opacity="0.35" stroke-width="${k === 'tokens' ? 1.6 : 2.4}" stroke-linecap="round" d="${d.join('')}"/>`;
}

/**
 * Budget use per step: rollouts generated / the step's rollout budget (solid), and generated
 * tokens / the token budget (dashed) where both are known, as trailing moving averages, over
 * each step's share as a faint dot; 100% dotted. One panel a policy. Without the dots, dapo's
 * steps of 0% and 200–300% (nothing generated at 296 of 498 steps, up to 3× the budget at
 * others) averaged to a line near 100%.
 */
export function budgetChart(input: ChartInput, window?: number): string {
  const view = asView(input);
  const xs = stepsOf(view);
  const w = window ?? windowFor(xs.length);
  const share = (steps: readonly StepMetrics[], k: 'rollouts' | 'tokens') => movingShare(steps, w, (s) => pairOf(s, k));
  const kinds = (['rollouts', 'tokens'] as const).filter((k) => view.runs.some((run) => run.results.some((r) => share(r.steps, k).some(Number.isFinite))));
  let top = 1;
  for (const run of view.runs) for (const r of run.results) for (const k of kinds) for (const v of share(r.steps, k)) if (Number.isFinite(v)) top = Math.max(top, v);
  for (const name of view.names) for (const k of kinds) for (const s of view.of(name)[0]?.steps ?? []) if (Number.isFinite(stepShare(s, k))) top = Math.max(top, stepShare(s, k));
  top = Math.min(BUDGET_AXIS_CAP, Math.max(1.25, Math.ceil(top * 4 - 1e-9) / 4));
  const neutral: SeriesStyle = { color: '#333333', dash: '', marker: 'circle', width: 1.4 };
  const legend = legendRow(64, 8, WIDTH - 80, [
    ...(kinds.includes('rollouts') ? [{ name: 'rollouts generated / rollout budget', style: neutral, marker: false }] : []),
    ...(kinds.includes('tokens') ? [{ name: 'tokens generated / token budget', style: { ...neutral, dash: '5 3' }, marker: false }] : []),
    ...(kinds.length > 0 ? [{ name: 'the budget (100%)', style: { ...neutral, dash: '1.5 2.5', width: 1 }, marker: false }] : []),
    ...(kinds.length > 0 ? [{ name: 'each step (faint dots)', style: neutral, line: false, marker: true }] : []),
  ]);
  const g = grid(kinds.length === 0 ? 0 : view.names.length, { cols: 4, panelHeight: 110, top: legend.height });
  const xDomain = stepDomain(xs);
  const xTicks = stepTicks(xDomain[0], xDomain[1], 4);
  const yTicks = niceTicks(0, top, 4);
  const panels = kinds.length === 0 ? [] : view.names.map((name, i) => {
    const b = g.boxes[i]!;
    const f = new Frame(b.left, b.top, b.width, b.height, xDomain, [0, top]);
    const style = solid(view.styles.get(name)!);
    const full = `<line class="ref" x1="${fx(f.left)}" y1="${fx(f.sy(1))}" x2="${fx(f.right)}" y2="${fx(f.sy(1))}"/>`;
    const dots = kinds.map((k) => stepDots(f, xs, view.of(name)[0]?.steps ?? [], k, top, style.color));
    const marks = kinds.map((k) => {
      // On the top edge above the axis, as the dots are (a line above 400% ran out of its panel).
      const per = view.of(name).map((r) => share(r.steps, k).map((v) => Math.min(v, top)));
      return per.every((p) => !p.some(Number.isFinite)) ? '' : curve(f, xs, per, k === 'tokens' ? { ...style, dash: '5 3' } : style, true);
    });
    return `<g class="panel" data-panel="${esc(name)}">${axes(f, { ticks: xTicks, format: (v) => tickLabel(v, 1), labels: g.isBottom(i) }, { ticks: yTicks, format: (v) => percent(v, 0.25), labels: g.isLeft(i) })}`
      + `${panelTitle(f, panelTitleOf(view, name), name === view.defaultPolicy)}${full}${dots.join('')}${marks.join('')}</g>`;
  });
  const seed = view.runs.length > 1 ? ` (seed ${view.runs[0]!.seed})` : '';
  return figure(
    'chart-budget',
    'Budget use per step',
    `What each policy spent as a share of the budget: faint dots, each step${seed}; line, trailing ${w}-step moving average; either on the top edge when above ${percent(top, 0.25)}. Above 100%: overspent${view.names.includes('dapo') ? ' (dapo over-samples by design)' : ''}; below: budget left unused (0%: nothing generated).${seedsNote(view)}`,
    WIDTH, g.height, legend.svg + panels.join('') + (kinds.length === 0 ? '' : g.titles('step', 'share of the budget')),
  );
}
