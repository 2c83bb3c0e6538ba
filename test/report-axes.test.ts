import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VERSION, median, movingEffective, niceTicks, type StepMetrics } from '../src/index.js';
import { decimalsFor, niceDomain, niceStep, percent, tickLabel } from '../src/report/svg.js';
import { envelope, medianTotals, movingShare } from '../src/report/series.js';

const isNiceStep = (step: number) => {
  const m = step / 10 ** Math.floor(Math.log10(step) + 1e-12);
  return [1, 2, 2.5, 5, 10].some((x) => Math.abs(m - x) < 1e-9);
};

describe('axis ticks', () => {
  it('niceTicks: inside the domain, evenly spaced by 1, 2, 2.5 or 5 × 10^k, about the count asked', () => {
    fc.assert(
      fc.property(fc.double({ min: -1e6, max: 1e6, noNaN: true }), fc.double({ min: 1e-3, max: 1e6, noNaN: true }), fc.integer({ min: 2, max: 10 }), (lo, span, count) => {
        const hi = lo + span;
        const t = niceTicks(lo, hi, count);
        expect(t.length).toBeGreaterThanOrEqual(1);
        expect(t.length).toBeLessThanOrEqual(2 * count + 2);
        // A tick may pass an end by a few ulps of the ends' magnitude (lo = 999999.9999999999,
        // span 0.001: the tick 1000000.001 against hi = 1000000.0009999999, fast-check's find).
        const slack = span * 1e-9 + Math.max(Math.abs(lo), Math.abs(hi)) * 1e-15;
        for (const v of t) {
          expect(v).toBeGreaterThanOrEqual(lo - slack);
          expect(v).toBeLessThanOrEqual(hi + slack);
        }
        if (t.length > 1) {
          const step = niceStep(span / count);
          expect(isNiceStep(step)).toBe(true);
          for (let i = 1; i < t.length; i++) expect(Math.abs(t[i]! - t[i - 1]! - step)).toBeLessThan(step * 1e-6);
        }
      }),
      { examples: [[999999.9999999999, 0.001, 5]] },
    );
  });

  it('niceTicks: the hand cases the issue complained about read as round numbers', () => {
    expect(niceTicks(0, 1, 4)).toEqual([0, 0.25, 0.5, 0.75, 1]);
    expect(niceTicks(0, 497, 4)).toEqual([0, 100, 200, 300, 400]);
    expect(niceTicks(0, 0.4, 3)).toEqual([0, 0.1, 0.2, 0.3, 0.4]);
  });

  it('niceDomain: ends on a tick at or past the data, starting at 0 or below a negative minimum', () => {
    expect(niceDomain(11563, 5)).toMatchObject({ lo: 0, hi: 12500, step: 2500 });
    expect(niceDomain(171000, 5)).toMatchObject({ lo: 0, hi: 175000 });
    expect(niceDomain(818, 5, -2107)).toMatchObject({ lo: -2500, hi: 1000, step: 500 });
    fc.assert(
      fc.property(fc.double({ min: 1e-3, max: 1e7, noNaN: true }), fc.double({ min: -1e7, max: 0, noNaN: true }), (max, min) => {
        const d = niceDomain(max, 5, min);
        expect(d.hi).toBeGreaterThanOrEqual(max * (1 - 1e-12));
        // A minimum within a billionth of a step below 0 is rounding noise: the axis may start at 0.
        expect(d.lo).toBeLessThanOrEqual(min + d.step * 1e-9);
        expect(d.ticks[0]).toBeCloseTo(d.lo, 6);
        expect(d.ticks.at(-1)).toBeCloseTo(d.hi, 6);
      }),
    );
  });

  it('percentage and number labels carry exactly the decimals their step needs (no 6.3% or 99%)', () => {
    expect(decimalsFor(0.25)).toBe(2);
    expect(decimalsFor(2.5)).toBe(1);
    expect(decimalsFor(500)).toBe(0);
    expect([0, 0.25, 0.5, 0.75, 1].map((v) => percent(v, 0.25))).toEqual(['0%', '25%', '50%', '75%', '100%']);
    expect([0, 0.025, 0.05].map((v) => percent(v, 0.025))).toEqual(['0.0%', '2.5%', '5.0%']);
    expect(tickLabel(12500, 2500)).toBe('12.5k');
    expect(tickLabel(200_000_000, 200_000_000)).toBe('200M');
    expect(tickLabel(0.75, 0.25)).toBe('0.75');
  });
});

function step(i: number, rollouts: number, effective: number, budgetRollouts: number | null): StepMetrics {
  return {
    step: i, groups: 1, rollouts, tokens: null, informative: 0, effective, allCorrect: 0, allWrong: 0, hardPositives: 0,
    withinBudget: true, planMs: 0, budgetRollouts, budgetTokens: null,
  };
}

describe('series', () => {
  it('movingEffective: Σ effective / Σ rollouts over the trailing window, by hand', () => {
    const steps = [step(0, 10, 5, 10), step(1, 10, 10, 10), step(2, 20, 0, 10), step(3, 0, 0, 10)];
    expect(movingEffective(steps, 2)).toEqual([0.5, 15 / 20, 10 / 30, 0]);
  });

  it('movingShare: spent / budget over the window, skipping steps with no budget, NaN where none is known', () => {
    const steps = [step(0, 10, 0, null), step(1, 12, 0, 10), step(2, 8, 0, 10), step(3, 5, 0, null)];
    const share = movingShare(steps, 2, (s) => [s.rollouts, s.budgetRollouts]);
    expect(share[0]).toBeNaN();
    expect(share[1]).toBeCloseTo(1.2, 12);
    expect(share[2]).toBeCloseTo(1.0, 12);
    expect(share[3]).toBeCloseTo(0.8, 12);
  });

  it('median, envelope and median totals', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(envelope([[1, 5], [3, 2], [2, 9]])).toEqual({ median: [2, 5], lo: [1, 2], hi: [3, 9] });
    const t = medianTotals([{ rollouts: 10, brier: null, tokens: 5 }, { rollouts: 30, brier: null, tokens: 7 }, { rollouts: 20, brier: null, tokens: 100 }] as never);
    expect(t as unknown).toEqual({ rollouts: 20, brier: null, tokens: 7 });
  });

  it('VERSION is the package version (written into every report)', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    expect(VERSION).toBe(pkg.version);
  });
});

describe('a run of one step', () => {
  it('its step axis has whole-step ticks (a one-step run wrote "0 0 0 1 1 1") and its per-step panels a mark each', async () => {
    const { stepTicks, niceTicks } = await import('../src/report/svg.js');
    expect(niceTicks(0, 1, 6)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]); // what the axis had
    expect(stepTicks(0, 1, 6)).toEqual([0, 1]);
    expect(stepTicks(3, 4, 4)).toEqual([3, 4]);
    expect(stepTicks(0, 497, 6)).toEqual(niceTicks(0, 497, 6)); // a long run's ticks as before
    const { effectiveChart } = await import('../src/report/charts-steps.js');
    const svg = effectiveChart([{ name: 'uniform', steps: [step(0, 8, 4, null)] } as never, { name: 'bayes', steps: [step(0, 8, 8, null)] } as never]);
    for (const panel of svg.split('<g class="panel"').slice(1)) expect(panel, panel.slice(0, 60)).toContain('data-mark="1"');
    // One step: half a step either side, its one tick and its marker mid-panel (it sat on the y
    // axis at 7, the axis running on to an 8 that never was).
    const { stepDomain } = await import('../src/report/svg.js');
    expect(stepDomain([7])).toEqual([6.5, 7.5]);
    expect(stepTicks(6.5, 7.5, 4)).toEqual([7]);
    expect(stepDomain([3, 5, 9])).toEqual([3, 9]);
    const at7 = effectiveChart([{ name: 'uniform', steps: [step(7, 8, 4, null)] } as never]);
    const panel = at7.split('<g class="panel"')[1]!;
    const [left, right] = [...panel.matchAll(/<line class="axis" x1="([\d.]+)" y1="[\d.]+" x2="([\d.]+)"/g)].map((m) => [Number(m[1]), Number(m[2])]).reduce(([lo, hi], [a, b]) => [Math.min(lo, a!, b!), Math.max(hi, a!, b!)], [Infinity, -Infinity]);
    const x = Number(/data-mark="1"[^>]*\bc?x="([\d.]+)"|\bc?x="([\d.]+)"[^>]*data-mark="1"/.exec(panel)!.slice(1).find((v) => v !== undefined));
    expect(Math.abs(x - (left! + right!) / 2)).toBeLessThan(1);
  });
});

describe('the budget chart\'s caption', () => {
  it('names dapo\'s over-sampling only where dapo is one of the policies drawn', async () => {
    const { budgetChart } = await import('../src/report/charts-steps.js');
    const caption = (svg: string) => /<figcaption>(.*?)<\/figcaption>/s.exec(svg)![1]!;
    const run = (name: string) => ({ name, steps: [step(0, 8, 4, null), step(1, 8, 6, null)] }) as never;
    expect(caption(budgetChart([run('uniform'), run('bayes')]))).not.toContain('dapo');
    expect(caption(budgetChart([run('uniform'), run('bayes')]))).toContain('Above 100%: overspent; below: budget left unused (0%: nothing generated).');
    expect(caption(budgetChart([run('uniform'), run('dapo')]))).toContain('Above 100%: overspent (dapo over-samples by design); below');
  });

  it('draws each step as a dot and keeps every mark in its panel: a policy at 6× its budget sits on the 400% top edge', async () => {
    // The axis stops at 400%; the moving average of a policy above it ran out of its panel
    // (y −17 against a frame from 38), as dapo can generate up to 10 batches a step.
    const { budgetChart } = await import('../src/report/charts-steps.js');
    const run = (name: string, rollouts: number) => ({ name, steps: Array.from({ length: 20 }, (_, i) => step(i, rollouts, 0, 64)) }) as never;
    const svg = budgetChart([run('uniform', 64), run('dapo', 6 * 64)], 5);
    for (const panel of svg.split('<g class="panel"').slice(1)) {
      const top = Math.min(...[...panel.matchAll(/<line[^>]*\by1="([\d.]+)"[^>]*\by2="([\d.]+)"/g)].flatMap((m) => [Number(m[1]), Number(m[2])]));
      const dots = [...panel.matchAll(/<path data-mark="1"[^>]*d="([^"]+)"/g)].map((m) => m[1]!);
      expect(dots).toHaveLength(1); // one path of dots: the rollouts kind
      expect(dots[0]!.match(/h0/g)).toHaveLength(20); // a dot a step
      const ys = [
        ...dots.flatMap((d) => [...d.matchAll(/M[\d.]+,([\d.-]+)/g)].map((m) => Number(m[1]))),
        ...[...panel.matchAll(/points="([^"]+)"/g)].flatMap((m) => m[1]!.trim().split(/\s+/).map((p) => Number(p.split(',')[1]))),
      ];
      expect(ys.length).toBeGreaterThan(20);
      expect(Math.min(...ys), 'a mark above its panel').toBeGreaterThanOrEqual(top - 0.5);
    }
    expect(svg).toMatch(/>400%</);
  });
});

/**
 * A group-size panel's bars (x, y, width, height), and those its label of the most common n
 * crosses (the label 6.5 px a character at most, 9 px above its baseline and 3 below).
 */
function crossedBars(panel: string): { bars: number[][]; crossed: number[][] } {
  const t = /<text class="tick"( text-anchor="end")? x="([\d.]+)" y="([\d.]+)">((?:most common|every group)[^<]*)<\/text>/.exec(panel)!;
  const width = t[4]!.length * 6.5;
  const x0 = t[1] ? Number(t[2]) - width : Number(t[2]);
  const [top, bottom] = [Number(t[3]) - 9, Number(t[3]) + 3];
  const bars = [...panel.matchAll(/<rect data-mark="1" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"/g)].map((m) => m.slice(1).map(Number));
  return { bars, crossed: bars.filter(([x, y, w, h]) => x! < x0 + width && x! + w! > x0 && y! < bottom && y! + h! > top) };
}

describe('the group-size chart\'s label of the most common n', () => {
  it('stays within its panel: left of a bar at the largest n (it ran into the next panel\'s axis, or past the page)', async () => {
    const { histogramChart } = await import('../src/report/charts-alloc.js');
    const run = (name: string, groupSizes: number[]) => ({ name, groupSizes }) as never;
    const svg = histogramChart([run('uniform', [0, 0, 0, 0, 0, 0, 0, 0, 40]), run('bayes', [0, 0, 30, 5, 2, 1, 1, 0, 1])]);
    const [uniform, bayes] = svg.split('<g class="panel"').slice(1);
    const right = (panel: string) => Math.max(...[...panel.matchAll(/<line class="axis" x1="([\d.]+)" y1="[\d.]+" x2="([\d.]+)"/g)].map((m) => Number(m[2])));
    // Every group at n = 8, the axis's last n: the label ends left of the bar, anchored at its end.
    const at = /<text class="tick" text-anchor="end" x="([\d.]+)" y="[\d.]+">every group at n = 8<\/text>/.exec(uniform!);
    expect(at).not.toBeNull();
    const bar = Number(/<rect data-mark="1" x="([\d.]+)"/.exec(uniform!)![1]);
    expect(Number(at![1])).toBeLessThan(bar);
    // A mode at a small n keeps its label right of the bar, within the panel (6.5 px a character at most).
    const label = /<text class="tick" x="([\d.]+)" y="[\d.]+">(most common: n = 2 \(75%\))<\/text>/.exec(bayes!);
    expect(label).not.toBeNull();
    expect(Number(label![1]) + label![2]!.length * 6.5).toBeLessThanOrEqual(right(bayes!));
  });

  it('crosses no bar: above the bars it would run over, else on the other side (it wrote over the bars at n = 5 to 13)', async () => {
    const { histogramChart } = await import('../src/report/charts-alloc.js');
    const overlaps = (panel: string) => {
      const { bars, crossed } = crossedBars(panel);
      expect(bars.length).toBeGreaterThan(5); // the pattern finds the bars (else nothing could overlap)
      return crossed;
    };
    // The one-epoch pool's bayes panel: the mode at n = 2 (13%), bars nearly as tall at n = 5 to 10.
    const sizes = [0, 0, 130, 75, 35, 105, 108, 110, 105, 100, 95, 50, 20, 20, 10, 10, 8];
    const svg = histogramChart([{ name: 'bayes', groupSizes: sizes } as never]);
    const panel = svg.split('<g class="panel"')[1]!;
    expect(panel).toContain('most common: n = 2');
    expect(overlaps(panel)).toEqual([]);
    // A mode at the axis's end with tall bars on its left only: the label still crosses none.
    const end = new Array<number>(17).fill(0);
    for (let n = 9; n <= 15; n++) end[n] = 90;
    end[16] = 100;
    const last = histogramChart([{ name: 'xrpo', groupSizes: end } as never]).split('<g class="panel"')[1]!;
    expect(last).toContain('most common: n = 16');
    expect(overlaps(last)).toEqual([]);
  });

  it('crosses no bar on any panel: random group sizes, one to thirty n (a panel of one or two n drew bars most of its width, and the label crossed them)', async () => {
    const { histogramChart } = await import('../src/report/charts-alloc.js');
    fc.assert(
      fc.property(fc.array(fc.nat(100), { minLength: 1, maxLength: 30 }), (counts) => {
        const sizes = [0, ...counts];
        if (sizes.every((c) => c === 0)) sizes[1] = 1;
        const panel = histogramChart([{ name: 'bayes', groupSizes: sizes } as never]).split('<g class="panel"')[1]!;
        const { bars, crossed } = crossedBars(panel);
        expect(bars.length).toBe(sizes.filter((c) => c > 0).length);
        expect(crossed, JSON.stringify(sizes)).toEqual([]);
      }),
      { seed: 48, numRuns: 400, examples: [[[55]], [[1, 1]], [[0, 3, 5, 2]]] },
    );
  });

  it('has whole group sizes on its axis (groups up to 25 read 2.5, 7.5, 12.5)', async () => {
    const { histogramChart } = await import('../src/report/charts-alloc.js');
    const sizes = new Array<number>(26).fill(0);
    sizes[7] = 10;
    sizes[25] = 1;
    const svg = histogramChart([{ name: 'xrpo', groupSizes: sizes } as never]);
    const ticks = [...svg.matchAll(/<text class="tick" x="[\d.]+" y="[\d.]+" text-anchor="middle">([^<]+)<\/text>/g)].map((m) => Number(m[1]));
    expect(ticks.length).toBeGreaterThan(3);
    for (const t of ticks) expect(Number.isInteger(t), String(t)).toBe(true);
  });
});

describe('x tick labels at the right edge of the page', () => {
  it('stay on the page: a long last label ends at the frame (the cost chart\'s "15.0M" was cut)', async () => {
    const { axes, Frame } = await import('../src/report/svg.js');
    const { grid, WIDTH } = await import('../src/report/multiples.js');
    const g = grid(2, { cols: 2, panelHeight: 260, gapX: 70 });
    const b = g.boxes[1]!;
    for (const max of [14_869_542, 32_768, 1]) {
      const d = niceDomain(max, 5);
      const f = new Frame(b.left, b.top, b.width, b.height, [0, d.hi], [0, 1]);
      const svg = axes(f, { ticks: d.ticks, format: (v) => tickLabel(v, d.step) }, { ticks: [0, 1], format: String });
      const labels = [...svg.matchAll(/<text class="tick" x="([\d.]+)" y="[\d.]+" text-anchor="(middle|end)">([^<]+)<\/text>/g)];
      expect(labels.length).toBeGreaterThan(1);
      for (const [, x, anchor, text] of labels) {
        // 6.5 px a character: a generous width of an 11 px sans-serif label.
        const width = text!.length * 6.5;
        const right = anchor === 'end' ? Number(x) : Number(x) + width / 2;
        expect(right, `${text} (max ${max})`).toBeLessThanOrEqual(WIDTH);
      }
    }
  });
});

describe('the budget chart of a short run', () => {
  it('says so in a panel with no bin of 5 groups, and not in one with a bin', async () => {
    const { spendChart } = await import('../src/report/charts-alloc.js');
    const bins = (groups: number) => {
      const g = new Array<number>(20).fill(0);
      g[10] = groups;
      return { bins: 20, byRate: { groups: g, rollouts: g.map((x) => 8 * x) }, byPredicted: { groups: new Array<number>(20).fill(0), rollouts: new Array<number>(20).fill(0) } };
    };
    const svg = spendChart([{ name: 'uniform', spend: bins(3) } as never, { name: 'bayes', spend: bins(6) } as never]);
    const [uniform, bayes] = svg.split('<g class="panel"').slice(1);
    expect(uniform).toContain('>no bin has 5 groups</text>');
    expect(bayes).not.toContain('no bin has');
  });
});
