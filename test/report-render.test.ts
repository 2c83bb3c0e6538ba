import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { reportHtml } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { chromiumOrSkip, renderedDom } from './chromium.js';
import { tempDir } from './temp.js';

const fixture = new URL('../fixtures/oneshot-rlvr-dsr-sub/visits.jsonl', import.meta.url).pathname;
const scenario = new URL('../fixtures/scenarios/long-cot-competition.json', import.meta.url).pathname;
const chromium = chromiumOrSkip();

const tmp = () => tempDir('rb-report-');

interface Policy {
  name: string;
  totals: Record<string, number | null>;
  group_sizes: (number | null)[];
  calibration: { count: number }[];
  steps: { rollouts: number; tokens: number | null; budget_rollouts: number | null; budget_tokens: number | null }[];
}
interface Metrics {
  policies: Policy[];
  seeds?: { seed: number; policies: Policy[] }[];
}

interface Report {
  dir: string;
  html: string;
  metrics: Metrics;
  /** Every seed's policies, in seed order. */
  runs: Policy[][];
}

async function makeReport(args: string[]): Promise<Report> {
  const dir = tmp();
  const run = await cli([...args, '--out', dir, '--quiet']);
  expect(run.code, run.stderr).toBe(0);
  const metrics = JSON.parse(readFileSync(join(dir, 'metrics.json'), 'utf8')) as Metrics;
  return { dir, html: readFileSync(join(dir, 'report.html'), 'utf8'), metrics, runs: (metrics.seeds ?? [{ seed: 0, policies: metrics.policies }]).map((s) => s.policies) };
}

const REPLAY_POLICIES = ['uniform', 'dapo', 'knapsack-rl', 'mopps', 'bayes'];
const SIM_POLICIES = ['uniform', 'knapsack-rl', 'bayes', 'oracle'];
const CHARTS = ['chart-budget', 'chart-calibration', 'chart-cost', 'chart-cumulative', 'chart-effective', 'chart-histogram', 'chart-spend'];

let replay: Report;
let simulate: Report;
beforeAll(async () => {
  replay = await makeReport(['replay', '--log', fixture, '--steps', '0:29', '--policies', REPLAY_POLICIES.join(','), '--seeds', '0..1']);
  simulate = await makeReport(['simulate', '--scenario', scenario, '--steps', '12', '--policies', SIM_POLICIES.join(','), '--seeds', '0..1']);
});

/** Per chart: its drawn and outside counts, and per panel its drawn count, from the rendered DOM. */
function chartsOf(dom: string): Map<string, { drawn: number; outside: number; panels: Map<string, number> }> {
  const out = new Map<string, { drawn: number; outside: number; panels: Map<string, number> }>();
  const parts = dom.split(/(?=<svg class="chart")/).slice(1);
  for (const part of parts) {
    const open = /^<svg[^>]*>/.exec(part)![0];
    const id = /\bid="(chart-[a-z]+)"/.exec(open)![1]!;
    const num = (attr: string) => Number(new RegExp(`\\b${attr}="(\\d+)"`).exec(open)?.[1] ?? -1);
    const panels = new Map<string, number>();
    for (const m of part.split('</svg>')[0]!.matchAll(/<g class="panel" data-panel="([^"]*)"[^>]*\bdata-drawn="(\d+)"/g)) panels.set(m[1]!, Number(m[2]));
    out.set(id, { drawn: num('data-drawn'), outside: num('data-outside'), panels });
  }
  return out;
}

/** Groups at each n ≥ 1 pooled over seeds: the bars the histogram panel must draw. */
function barsOf(runs: Policy[][], name: string): number {
  const pooled: number[] = [];
  for (const run of runs) run.find((p) => p.name === name)!.group_sizes.forEach((c, n) => (pooled[n] = (pooled[n] ?? 0) + (c ?? 0)));
  return pooled.filter((c, n) => n >= 1 && c > 0).length;
}

/** Calibration bins with groups, pooled over seeds: the markers the calibration panel must draw. */
function binsOf(runs: Policy[][], name: string): number {
  const counts = runs[0]!.find((p) => p.name === name)!.calibration.map((_, b) => runs.reduce((a, run) => a + run.find((p) => p.name === name)!.calibration[b]!.count, 0));
  return counts.filter((c) => c > 0).length;
}

function checkRendered(report: Report, policies: string[], tokenBudget: boolean): void {
  const dom = renderedDom(chromium!, join(report.dir, 'report.html'));
  const charts = chartsOf(dom);
  expect([...charts.keys()].sort()).toEqual([...CHARTS, 'chart-seeds'].sort());
  expect(dom).toContain(`data-charts-drawn="${CHARTS.length + 1}/${CHARTS.length + 1}"`);
  // The summary table fits the page at 1,280 px (17 columns with token counts ran 400 px past it).
  expect(dom).toContain('data-table-overflow="0"');
  expect(dom).toContain('<table class="summary wide">');
  for (const [id, c] of charts) {
    expect(c.outside, `${id}: marks outside the chart`).toBe(0);
    for (const [panel, drawn] of c.panels) expect(drawn, `${id} / ${panel}: no marks`).toBeGreaterThan(0);
  }
  const P = policies.length;
  const seeds = report.runs.length;
  expect(seeds).toBe(2);
  // One panel a policy: its line and seed band, and uniform's grey line behind the others.
  const effective = charts.get('chart-effective')!;
  expect([...effective.panels.keys()].sort()).toEqual([...policies].sort());
  for (const name of policies) expect(effective.panels.get(name), name).toBe(name === 'uniform' ? 2 : 3);
  // Absolute and ahead-of-uniform rows: every policy a line, a band and five markers.
  const cumulative = charts.get('chart-cumulative')!;
  expect(cumulative.panels.size).toBe(4);
  for (const [panel, drawn] of cumulative.panels) expect(drawn, panel).toBe(7 * P);
  // Against rollouts, and against tokens when the source has token counts.
  const cost = charts.get('chart-cost')!;
  expect(cost.panels.size).toBe(tokenBudget ? 2 : 1);
  for (const [panel, drawn] of cost.panels) expect(drawn, panel).toBe(7 * P);
  const histogram = charts.get('chart-histogram')!;
  for (const name of policies) expect(histogram.panels.get(name), name).toBe(barsOf(report.runs, name));
  // A line and a band a kind (rollouts; tokens under a token budget), and the first seed's
  // steps as one path of dots a kind (dapo's 0% and 300% steps averaged to a line near 100%).
  const budget = charts.get('chart-budget')!;
  for (const name of policies) {
    const steps = report.runs[0]!.find((p) => p.name === name)!.steps;
    const dots = Number(steps.some((x) => (x.budget_rollouts ?? 0) > 0)) + Number(steps.some((x) => x.tokens !== null && (x.budget_tokens ?? 0) > 0));
    expect(dots, name).toBe(tokenBudget ? 2 : 1);
    expect(budget.panels.get(name), name).toBe((tokenBudget ? 4 : 2) + dots);
  }
  const calibration = charts.get('chart-calibration')!;
  const predicting = policies.filter((n) => report.runs[0]!.find((p) => p.name === n)!.totals.predictions! > 0);
  expect([...calibration.panels.keys()].sort()).toEqual([...predicting].sort());
  for (const name of predicting) expect(calibration.panels.get(name), name).toBe(binsOf(report.runs, name) + 1);
  expect(charts.get('chart-spend')!.panels.size).toBe(P);
  // Headline metrics, one panel each; every other policy: a median bar and a marker a seed (the range line too when the seeds differ).
  const spread = charts.get('chart-seeds')!;
  expect(spread.panels.size).toBe(tokenBudget ? 4 : 3);
  for (const [panel, drawn] of spread.panels) {
    expect(drawn, panel).toBeGreaterThanOrEqual((P - 1) * (seeds + 1));
    expect(drawn, panel).toBeLessThanOrEqual((P - 1) * (seeds + 2));
  }
}

describe('report.html', () => {
  it.skipIf(chromium === undefined)(`headless Chromium draws every chart of the replay report, with the marks each panel must hold${chromium === undefined ? ' [SKIPPED: no Chromium; see the warning above]' : ''}`, () => {
    checkRendered(replay, REPLAY_POLICIES, false);
  });

  it.skipIf(chromium === undefined)(`headless Chromium draws every chart of the simulate report, with the marks each panel must hold${chromium === undefined ? ' [SKIPPED: no Chromium]' : ''}`, () => {
    checkRendered(simulate, SIM_POLICIES, true);
  });

  it.skipIf(chromium === undefined)(`control: a report with nothing to draw is seen as undrawn, so the check can fail${chromium === undefined ? ' [SKIPPED: no Chromium]' : ''}`, () => {
    const empty = join(tmp(), 'empty.html');
    writeFileSync(empty, reportHtml([], { title: 'empty', lines: [] }));
    const dom = renderedDom(chromium!, empty);
    expect(dom).toContain(`data-charts-drawn="0/${CHARTS.length}"`);
    for (const [id, c] of chartsOf(dom)) expect(c.drawn, id).toBe(0);
  });

  it('is self-contained and print-friendly: no external reference, inline SVG and CSS, print rules', () => {
    for (const { html } of [replay, simulate]) {
      expect(html).not.toMatch(/<(script|link|img|iframe)[^>]+(src|href)=/i);
      expect(html).not.toMatch(/url\(|@import/);
      expect(html.replace(/xmlns="http:\/\/www\.w3\.org\/2000\/svg"/g, '')).not.toMatch(/https?:\/\//);
      expect(html).toContain('@media print');
      expect(html.match(/<svg class="chart"/g)?.length).toBe(CHARTS.length + 1);
    }
  });

  it('SVG marks have finite coordinates inside their chart (the check that runs without Chromium)', () => {
    let marks = 0;
    for (const { html } of [replay, simulate]) {
      for (const part of html.split(/(?=<svg class="chart")/).slice(1)) {
        const svg = part.split('</svg>')[0]!;
        expect(svg).not.toMatch(/NaN|Infinity|undefined/);
        for (const tag of svg.matchAll(/<[a-z]+\s[^>]*>/g)) {
          const names = [...tag[0].matchAll(/\s([a-z-]+)="/g)].map((a) => a[1]);
          expect(new Set(names).size, `duplicate attribute in ${tag[0].slice(0, 100)}`).toBe(names.length);
        }
        const [w, h] = /viewBox="0 0 ([\d.]+) ([\d.]+)"/.exec(svg)!.slice(1).map(Number) as [number, number];
        for (const m of svg.matchAll(/<(polyline|polygon|rect|circle|path|line) data-mark="1"([^>]*)>/g)) {
          marks++;
          const coords = [...m[2]!.matchAll(/\b(x|y|x1|x2|y1|y2|cx|cy|points|d)="([^"]*)"/g)].flatMap((a) => [...a[2]!.matchAll(/-?\d+(?:\.\d+)?/g)].map((x) => Number(x[0])));
          expect(coords.length, m[0]).toBeGreaterThan(0);
          for (const v of coords) expect(v >= -1 && v <= Math.max(w, h) + 1, `${v} in ${m[0].slice(0, 120)}`).toBe(true);
        }
      }
    }
    expect(marks).toBeGreaterThan(200);
  });

  it('opens on the headline (median per-seed ratios of our default to uniform, computed here from metrics.json), the settings box, and our default row highlighted', () => {
    for (const { html, runs } of [replay, simulate]) {
      const ratio = (key: string) => {
        const per = runs.map((ps) => ps.find((p) => p.name === 'bayes')!.totals[key]! / ps.find((p) => p.name === 'uniform')!.totals[key]!);
        return ((per[0]! + per[1]!) / 2).toFixed(2);
      };
      const head = /<p class="headline">(.*?)<\/p>/.exec(html)![1]!;
      expect(head).toContain('Our default (bayes');
      expect(head).toContain(`<b>${ratio('effective_ratio')}×</b>`);
      expect(head).toContain(`<b>${ratio('informative_groups')}×</b>`);
      expect(head).toContain(`<b>${ratio('hard_positives')}×</b>`);
      expect(head).toContain('Median over seeds 0..1');
      // What ours spent against uniform, tokens where both counted them (the long-CoT
      // simulation spends a budget uniform's rounded-down n leaves a fifth of unspent).
      const tokens = runs.every((ps) => ps.every((p) => (p.totals.tokens ?? 0) > 0));
      const spend = ratio(tokens ? 'tokens' : 'rollouts');
      if (Math.abs(Number(spend) - 1) >= 0.005) expect(head).toContain(`, spending ${spend}× uniform's ${tokens ? 'tokens' : 'rollouts'}`);
      else expect(head).not.toContain('spending');
      expect(html.indexOf('class="headline"')).toBeLessThan(html.indexOf('<table'));
      expect(html).toMatch(/<dl class="settings">.*<dt>rollout budget a step<\/dt>.*<dt>seeds<\/dt><dd>0\.\.1 \(2 runs\)<\/dd>.*<dt>rollout-budget<\/dt><dd>0\.1\.0<\/dd>/s);
      expect(html).toMatch(/<tr class="default"><td><span class="nm">bayes<\/span> <span class="badge">our default<\/span>/);
      expect(html.match(/<tr class="default">/g)?.length).toBe(2); // the summary and the spread table
    }
    expect(/<p class="headline">(.*?)<\/p>/.exec(simulate.html)![1]).toMatch(/, spending 1\.[1-9]\d× uniform's tokens/);
    expect(simulate.html).toContain(`<b>${(() => {
      const per = simulate.runs.map((ps) => ps.find((p) => p.name === 'bayes')!.totals.informative_per_mtok! / ps.find((p) => p.name === 'uniform')!.totals.informative_per_mtok!);
      return ((per[0]! + per[1]!) / 2).toFixed(2);
    })()}×</b> (`);
  });

  it('no column of all "—": the tokens columns are left out, and said so, when the log has no token counts', () => {
    const head = /<table class="summary(?: wide)?"><thead>(.*?)<\/thead>/.exec(replay.html)![1]!;
    expect(head).not.toMatch(/tokens|Mtok/);
    expect(replay.html).toContain('the source gives no token count for some or all of its rollouts: tokens, informative / Mtok');
    const simHead = /<table class="summary(?: wide)?"><thead>(.*?)<\/thead>/.exec(simulate.html)![1]!;
    expect(simHead).toContain('tokens');
    expect(simHead).toContain('informative / Mtok');
  });

  it('legends list only what is drawn: no "(no predictor)" entries; the calibration chart names the policies it leaves out', () => {
    const cal = /<figure id="fig-calibration">.*?<\/figure>/s.exec(replay.html)![0];
    expect(cal).not.toContain('no predictor');
    const legend = [...cal.matchAll(/<g class="legend">.*?<text[^>]*>([^<]*)<\/text><\/g>/g)].map((m) => m[1]);
    expect(legend).toEqual(['knapsack-rl', 'mopps', 'bayes (our default)', 'perfectly calibrated']);
    expect(cal).toContain('Not drawn, as they predict no pass rate: uniform, dapo.');
  });

  it('the simulate report does not call oracle the ceiling', () => {
    expect(simulate.html).not.toMatch(/the ceiling/);
    expect(simulate.html).toContain('is not a ceiling');
  });
});
