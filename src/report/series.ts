import type { PolicyResult } from '../replay/engine.js';
import type { StepMetrics, Totals } from '../replay/metrics.js';
import type { SeriesStyle } from './svg.js';
import { REFERENCE, assignStyles } from './styles.js';

/** One seed's run of every policy. */
export interface SeedRun {
  readonly seed: number;
  readonly results: readonly PolicyResult[];
}

/** What the charts read: every seed's results by policy, and one style per policy. */
export interface ReportView {
  readonly runs: readonly SeedRun[];
  /** Policy names in the order they were run (the first seed's order). */
  readonly names: readonly string[];
  readonly defaultPolicy: string | undefined;
  readonly styles: ReadonlyMap<string, SeriesStyle>;
  /** The policy's result at every seed, in seed order. */
  of(name: string): readonly PolicyResult[];
}

export type ChartInput = readonly PolicyResult[] | ReportView;

export function reportView(runs: readonly SeedRun[], defaultPolicy?: string): ReportView {
  const names = runs[0]?.results.map((r) => r.name) ?? [];
  const by = new Map<string, PolicyResult[]>(names.map((n) => [n, []]));
  for (const run of runs) for (const r of run.results) by.get(r.name)?.push(r);
  return { runs, names, defaultPolicy, styles: assignStyles(names, defaultPolicy), of: (name) => by.get(name) ?? [] };
}

/** A chart's input as a view: a plain result list is one run (seed unknown, shown as 0). */
export function asView(input: ChartInput): ReportView {
  return Array.isArray(input) ? reportView([{ seed: 0, results: input as readonly PolicyResult[] }]) : (input as ReportView);
}

/** The median of a non-empty list (mean of the middle two for an even count). O(n log n). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Per index: the median, minimum and maximum across equally long series (one a seed). */
export function envelope(series: readonly (readonly number[])[]): { median: number[]; lo: number[]; hi: number[] } {
  const len = Math.min(...series.map((s) => s.length));
  const out = { median: [] as number[], lo: [] as number[], hi: [] as number[] };
  if (series.length === 0) return out;
  for (let i = 0; i < len; i++) {
    const col = series.map((s) => s[i]!);
    out.median.push(median(col));
    out.lo.push(Math.min(...col));
    out.hi.push(Math.max(...col));
  }
  return out;
}

/**
 * Effective-gradient ratio per step as a trailing moving average over `window` steps:
 * Σ effective / Σ rollouts over steps i − window + 1 .. i (0 where nothing was generated).
 * O(steps).
 */
export function movingEffective(steps: readonly StepMetrics[], window: number): number[] {
  const out: number[] = [];
  let eff = 0;
  let roll = 0;
  steps.forEach((s, i) => {
    eff += s.effective;
    roll += s.rollouts;
    if (i >= window) {
      eff -= steps[i - window]!.effective;
      roll -= steps[i - window]!.rollouts;
    }
    out.push(roll > 0 ? eff / roll : 0);
  });
  return out;
}

/**
 * Spent / budget as a trailing moving average over `window` steps: Σ spent / Σ budget over the
 * steps in the window where both are known; NaN where none is. O(steps).
 */
export function movingShare(steps: readonly StepMetrics[], window: number, pair: (s: StepMetrics) => readonly [number | null, number | null]): number[] {
  const spent: number[] = [];
  const budget: number[] = [];
  for (const s of steps) {
    const [a, b] = pair(s);
    const known = a !== null && b !== null && b > 0;
    spent.push(known ? a : 0);
    budget.push(known ? b : 0);
  }
  const out: number[] = [];
  let sa = 0;
  let sb = 0;
  steps.forEach((_, i) => {
    sa += spent[i]!;
    sb += budget[i]!;
    if (i >= window) {
      sa -= spent[i - window]!;
      sb -= budget[i - window]!;
    }
    out.push(sb > 0 ? sa / sb : Number.NaN);
  });
  return out;
}

/** Running sum of a per-step figure. O(steps). */
export function cumulative(steps: readonly StepMetrics[], get: (s: StepMetrics) => number): number[] {
  let sum = 0;
  return steps.map((s) => (sum += get(s)));
}

/** The moving-average window the report uses: 10 steps, fewer on short runs (a tenth of them). */
export function windowFor(steps: number): number {
  return Math.max(1, Math.min(10, Math.floor(steps / 10)));
}

/** A headline metric: a Totals field, compared as a ratio to uniform. */
export interface HeadlineMetric {
  readonly key: 'effective_ratio' | 'informative_groups' | 'hard_positives' | 'informative_per_mtok';
  readonly label: string;
}

export const HEADLINE_METRICS: readonly HeadlineMetric[] = [
  { key: 'effective_ratio', label: 'effective ratio' },
  { key: 'informative_groups', label: 'informative groups' },
  { key: 'hard_positives', label: 'hard positives' },
  { key: 'informative_per_mtok', label: 'informative groups per Mtok' },
];

/** The headline metrics this view can compare: per Mtok only when every policy has token counts. */
export function headlineMetrics(view: ReportView): HeadlineMetric[] {
  const tokens = view.runs.every((run) => run.results.every((r) => r.totals.tokens !== null));
  return HEADLINE_METRICS.filter((m) => m.key !== 'informative_per_mtok' || tokens);
}

/**
 * A policy's figure divided by uniform's at every seed (common random numbers make the pair per
 * seed the fair comparison); null at a seed where either is missing or uniform's is 0.
 */
export function ratiosToReference(view: ReportView, name: string, key: HeadlineMetric['key']): (number | null)[] {
  return view.runs.map((run) => {
    const r = run.results.find((x) => x.name === name)?.totals[key];
    const b = run.results.find((x) => x.name === REFERENCE)?.totals[key];
    return r === undefined || r === null || b === undefined || b === null || b === 0 ? null : r / b;
  });
}

/**
 * Totals with every numeric field replaced by its median across seeds (null when any seed has
 * null), so the summary table can show one row a policy for several seeds.
 */
export function medianTotals(all: readonly Totals[]): Totals {
  const first = all[0]!;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(first)) {
    const values = all.map((t) => (t as unknown as Record<string, unknown>)[key]);
    out[key] = values.every((v) => typeof v === 'number') ? median(values as number[]) : values.some((v) => v === null) ? null : values[0];
  }
  return out as unknown as Totals;
}

/** One row a policy for the summary table: the result itself, or with median totals across seeds. */
export function tableResults(view: ReportView): PolicyResult[] {
  return view.names.map((name) => {
    const all = view.of(name);
    return all.length <= 1 ? all[0]! : { ...all[0]!, totals: medianTotals(all.map((r) => r.totals)) };
  });
}

/** `0..4` for a contiguous seed list, else the seeds joined by commas. */
export function seedLabel(seeds: readonly number[]): string {
  if (seeds.length === 1) return String(seeds[0]);
  const contiguous = seeds.every((s, i) => i === 0 || s === seeds[i - 1]! + 1);
  return contiguous ? `${seeds[0]}..${seeds.at(-1)}` : seeds.join(', ');
}
