import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

const fixture = new URL('../fixtures/oneshot-rlvr-dsr-sub/visits.jsonl', import.meta.url).pathname;
const scenario = new URL('../fixtures/scenarios/rl-math-pool.json', import.meta.url).pathname;

const tmp = () => tempDir('rb-seeds-');

interface Policy {
  name: string;
  totals: Record<string, number | null>;
  steps: Record<string, unknown>[];
}

/** A run's policies without the wall-clock planning times, which no seed fixes. */
function numbers(policies: Policy[]): Policy[] {
  return policies.map((p) => ({ ...p, totals: { ...p.totals, plan_ms_per_step: null }, steps: p.steps.map((s) => ({ ...s, plan_ms: null })) }));
}

function metrics(dir: string) {
  return JSON.parse(readFileSync(join(dir, 'metrics.json'), 'utf8'));
}

describe('--seeds a..b', () => {
  it('replay: runs every seed; metrics.json keeps each seed exactly as a --seed run of it gives, and the spread per policy', async () => {
    const base = ['replay', '--log', fixture, '--steps', '0:15', '--policies', 'uniform,knapsack-rl,bayes', '--quiet'];
    const all = tmp();
    const run = await cli([...base, '--seeds', '2..4', '--out', all]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('medians over seeds 2..4:');
    expect(run.stdout).toMatch(/^\| seed \| effective ratio \| informative groups \| hard positives \|$/m);
    expect(run.stdout).toMatch(/^Our default \(bayes, value balanced, 2 rounds a step\) against uniform: .* Median over seeds 2\.\.4, range in parentheses\.$/m);
    const m = metrics(all);
    expect(m.seeds.map((s: { seed: number }) => s.seed)).toEqual([2, 3, 4]);
    expect(m.options.seeds).toEqual([2, 3, 4]);
    expect(numbers(m.policies)).toEqual(numbers(m.seeds[0].policies));
    for (const seed of [2, 4]) {
      const one = tmp();
      expect((await cli([...base, '--seed', String(seed), '--out', one])).code).toBe(0);
      const single = metrics(one);
      expect(single.seeds).toBeUndefined();
      expect(numbers(m.seeds[seed - 2].policies)).toEqual(numbers(single.policies));
    }
    // The spread: per policy and headline metric, the per-seed ratios to uniform, their median and range.
    const ratios = m.seeds.map((s: { policies: Policy[] }) => {
      const by = new Map(s.policies.map((p) => [p.name, p.totals]));
      return by.get('bayes')!.hard_positives! / by.get('uniform')!.hard_positives!;
    }) as number[];
    const spread = m.spread.bayes.hard_positives;
    expect(spread.per_seed.map((x: { ratio: number }) => x.ratio)).toEqual(ratios);
    expect(spread.median).toBeCloseTo([...ratios].sort((a, b) => a - b)[1]!, 12);
    expect(spread.min).toBeCloseTo(Math.min(...ratios), 12);
    expect(spread.max).toBeCloseTo(Math.max(...ratios), 12);
    const summary = readFileSync(join(all, 'summary.md'), 'utf8');
    expect(summary).toContain('Our default (bayes) against uniform, seed by seed');
    expect(summary).toMatch(/^\| 3 \| \d\.\d{3}× \|/m);
  });

  it('simulate: --seeds overrides the scenario seed; one seed gives what --seed gives', async () => {
    const base = ['simulate', '--scenario', scenario, '--steps', '6', '--policies', 'uniform,bayes', '--quiet'];
    const a = tmp();
    const b = tmp();
    expect((await cli([...base, '--seeds', '7..8', '--out', a])).code).toBe(0);
    expect((await cli([...base, '--seed', '8', '--out', b])).code).toBe(0);
    expect(numbers(metrics(a).seeds[1].policies)).toEqual(numbers(metrics(b).policies));
    expect(metrics(a).options.seed).toBe(7);
  });

  it('rejects --seed with --seeds, a range that ends before it starts, and a malformed range, with exit 2', async () => {
    const both = await cli(['replay', '--log', fixture, '--seed', '1', '--seeds', '0..2']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('give --seed or --seeds, not both');
    const backwards = await cli(['simulate', '--scenario', scenario, '--seeds', '4..1']);
    expect(backwards.code).toBe(2);
    expect(backwards.stderr).toContain('the seed range "4..1" ends before it starts');
    const bad = await cli(['replay', '--log', fixture, '--seeds', '0-4']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--seeds must be a range of seeds "a..b"');
  });
});

describe('replay --budget-tokens and token counts', () => {
  it('refuses a token budget on a log with no token counts: exit 2, the reason and the fix, no report written', async () => {
    const out = join(tmp(), 'report');
    const run = await cli(['replay', '--log', fixture, '--steps', '0:3', '--budget-tokens', '200000', '--out', out]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--budget-tokens 200000');
    expect(run.stderr).toContain('(format visits) records no token counts');
    expect(run.stderr).toContain('Leave out --budget-tokens');
    expect(existsSync(out)).toBe(false);
  });

  it('warns, on stderr and in the report, when only some logged rollouts have token counts', async () => {
    const d = tmp();
    const log = join(d, 'results.jsonl');
    const lines: string[] = [];
    for (let step = 0; step < 4; step++) {
      for (let p = 0; p < 6; p++) {
        const rewards = [0, 1, p % 2, 1];
        lines.push(JSON.stringify(p === 0 ? { prompt_id: `q${p}`, step, rewards } : { prompt_id: `q${p}`, step, rewards, tokens: [300, 200, 250, 180] }));
      }
    }
    writeFileSync(log, `${lines.join('\n')}\n`);
    const out = join(d, 'report');
    const run = await cli(['replay', '--log', log, '--budget-tokens', '8000', '--policies', 'uniform,bayes', '--out', out, '--quiet']);
    expect(run.code, run.stderr).toBe(0);
    // 4 steps × 5 prompts × 4 rollouts with counts, of 4 × 6 × 4.
    expect(run.stderr).toContain('warning: --budget-tokens: only 83.3% of the logged rollouts (80 of 96) have token counts');
    expect(metrics(out).warnings[0]).toContain('only 83.3%');
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('<p class="warn">--budget-tokens: only 83.3%');
  });

  it('a log whose rollouts all have token counts runs a token budget without a warning', async () => {
    const d = tmp();
    const log = join(d, 'results.jsonl');
    const lines: string[] = [];
    for (let step = 0; step < 3; step++) for (let p = 0; p < 5; p++) lines.push(JSON.stringify({ prompt_id: `q${p}`, step, rewards: [0, 1, 1, p % 2], tokens: [300, 200, 250, 180] }));
    writeFileSync(log, `${lines.join('\n')}\n`);
    const out = join(d, 'report');
    const run = await cli(['replay', '--log', log, '--budget-tokens', '6000', '--policies', 'uniform,bayes', '--out', out, '--quiet']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe('');
    expect(metrics(out).warnings).toEqual([]);
    expect(metrics(out).policies[0].totals.tokens).toBeGreaterThan(0);
  });
});
